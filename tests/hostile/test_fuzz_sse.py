"""Fuzzing the SSE decoder and the chunk classifier (issue 15): arbitrary bytes, split at
arbitrary points (empty frames included), decode to the same events as the whole stream and as
a plain reference decoder; nothing raises; every example is bounded in time."""

from __future__ import annotations

import re
from datetime import timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from capacity.bench.sse import SseDecoder, SseEvent, classify
from capacity.untrusted import loads_json

PIECES = [b"data:", b"data: ", b"event:", b"event: error", b":", b" ", b"\r", b"\n", b"\r\n",
          b"x", b"{}", b'{"choices":[{"delta":{"content":"a"}}]}', b"[DONE]", b"id: 1",
          b"retry: 5", "é漢".encode(), "é".encode()[:1], b"\xff", b"\x00"]
streams = st.lists(st.sampled_from(PIECES) | st.binary(max_size=8), max_size=80).map(b"".join)
BOUNDED = settings(max_examples=300, deadline=timedelta(seconds=2))


def reference(raw: bytes) -> list[SseEvent]:
    """The decoder's documented semantics, on the whole stream at once (sse.py's docstring)."""
    lines = re.split(rb"\r\n|\r|\n", raw)
    if lines and lines[-1] == b"":
        lines.pop()  # the stream ended with a line end: no unterminated last line
    events: list[SseEvent] = []
    data: list[str] = []
    name = ""
    for line in lines:
        if not line:
            if data:
                events.append(SseEvent(data="\n".join(data), event=name or "message"))
            data, name = [], ""
            continue
        text = line.decode("utf-8", errors="replace")
        if text.startswith(":"):
            continue
        field, sep, value = text.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    if data:
        events.append(SseEvent(data="\n".join(data), event=name or "message"))
    return events


def decode(chunks: list[bytes]) -> list[SseEvent]:
    dec = SseDecoder()
    out: list[SseEvent] = []
    for c in chunks:
        out += dec.feed(c)
    return out + dec.close()


@BOUNDED
@given(streams, st.lists(st.integers(min_value=0, max_value=600), max_size=24))
@example(b"data: a\r\ndata: b\n\n", [8, 8])  # an empty frame between the CR and LF of one CR LF
def test_any_split_decodes_like_the_whole(raw: bytes, cuts: list[int]) -> None:
    points = sorted(min(c, len(raw)) for c in cuts)
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    whole = decode([raw])
    assert decode(chunks) == whole
    assert whole == reference(raw)
    for ev in whole:
        classify(ev.data, ev.event)  # never raises


@BOUNDED
@given(st.binary(max_size=4096), st.integers(min_value=1, max_value=64))
def test_arbitrary_bytes_in_small_frames(raw: bytes, size: int) -> None:
    chunks = [raw[i:i + size] for i in range(0, len(raw), size)]
    assert decode(chunks) == reference(raw)


@BOUNDED
@given(st.text(max_size=300), st.sampled_from(["message", "error", "ping"]))
def test_classify_never_raises(data: str, event: str) -> None:
    info = classify(data, event)
    assert info.error is None or len(info.error) <= 200


@BOUNDED
@given(st.integers(min_value=0, max_value=300_000), st.sampled_from(["[", '{"a":', '{"error":']))
def test_nesting_never_recurses(depth: int, opener: str) -> None:
    text = opener * depth
    info = classify(text)
    assert info.malformed or info.error is not None or depth == 0
    try:
        loads_json(text)
    except ValueError:
        pass
