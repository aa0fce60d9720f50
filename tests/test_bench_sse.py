"""The SSE decoder and the OpenAI chunk classifier (docs/bench.md), without a network."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity.bench.sse import SseDecoder, SseEvent, classify


def decode_all(chunks: list[bytes]) -> list[SseEvent]:
    d = SseDecoder()
    out: list[SseEvent] = []
    for c in chunks:
        out += d.feed(c)
    return out + d.close()


@pytest.mark.parametrize("raw, data", [
    pytest.param(b"data: x\n\n", ["x"], id="plain"),
    pytest.param(b"data:x\n\n", ["x"], id="no-space"),
    pytest.param(b"data:  x\n\n", [" x"], id="only-one-space-stripped"),
    pytest.param(b"data: x\r\n\r\n", ["x"], id="crlf"),
    pytest.param(b"data: x\r\rdata: y\r\r", ["x", "y"], id="cr-only"),
    pytest.param(b": keep-alive\n\ndata: x\n\n", ["x"], id="comment"),
    pytest.param(b"data: a\ndata: b\n\n", ["a\nb"], id="multi-line-data"),
    pytest.param(b"event: ping\nid: 3\nretry: 10\n\ndata: x\n\n", ["x"], id="other-fields"),
    # a stream may begin with one BOM, which is ignored (WHATWG's event-stream parsing); the
    # first event was lost when it was read as part of the field's name (an audit, 2026-12-07)
    pytest.param(b"\xef\xbb\xbfdata: x\n\ndata: y\n\n", ["x", "y"], id="leading-bom"),
    pytest.param(b"data: x\n\n\xef\xbb\xbfdata: y\n\n", ["x"], id="bom-only-at-the-start"),
    pytest.param(b"data: x", ["x"], id="no-trailing-newline"),
])
def test_decoder_cases(raw: bytes, data: list[str]) -> None:
    assert [e.data for e in decode_all([raw])] == data


@given(st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=20))
def test_decoder_split_anywhere(cuts: list[int]) -> None:
    """Frames split at any byte (even inside CR LF or a UTF-8 character) decode the same."""
    raw = ('data: {"a": "é漢"}\r\n\r\n: c\r\ndata:[DONE]\r\n\r\n' * 3).encode()
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(raw[pos:pos + c])
        pos += c
    chunks.append(raw[pos:])
    assert [e.data for e in decode_all(chunks)] == ['{"a": "é漢"}', "[DONE]"] * 3


def chat(delta: dict[str, object], finish: str | None = None) -> str:
    return json.dumps({"id": "r1", "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish}]})


@pytest.mark.parametrize("data, tokens", [
    pytest.param(chat({"role": "assistant", "content": ""}), False, id="role-chunk"),
    pytest.param(chat({"role": "assistant"}), False, id="role-only"),
    pytest.param(chat({"content": "Hi"}), True, id="content"),
    pytest.param(chat({"reasoning_content": "think"}), True, id="reasoning_content"),
    pytest.param(chat({"reasoning": "think"}), True, id="reasoning"),
    pytest.param(chat({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}), True,
                 id="tool-calls"),
    pytest.param(chat({}, "stop"), False, id="finish-only"),
    pytest.param(json.dumps({"choices": [{"text": "x"}]}), True, id="completions-text"),
    pytest.param(json.dumps({"choices": [{"text": ""}]}), False, id="completions-empty"),
    pytest.param(json.dumps({"choices": [], "usage": {"completion_tokens": 3}}), False,
                 id="usage-only"),
])
def test_classify_tokens(data: str, tokens: bool) -> None:
    assert classify(data).tokens is tokens


def test_classify_usage_error_done_malformed() -> None:
    u = classify(json.dumps({"choices": [], "usage": {"completion_tokens": 7,
                                                      "prompt_tokens": 3}}))
    assert u.usage == {"completion_tokens": 7, "prompt_tokens": 3}
    assert classify("[DONE]").done
    e = classify(json.dumps({"error": {"message": "engine died", "code": 500}}))
    assert e.error == "engine died"
    assert classify("{not json").malformed
    assert classify("oops", "error").error == "oops"
    assert classify(chat({}, "length")).finish_reason == "length"


# -- the bulk path: chunks whose lines end in LF only are split once per read ---------------

def test_a_leading_bom_split_across_reads_is_ignored() -> None:
    assert [e.data for e in decode_all([b"\xef", b"\xbb", b"\xbfdata: x\n", b"\n"])] == ["x"]
    assert [e.data for e in decode_all([b"", b"\xef\xbb", b"\xbfdata: x\n\n"])] == ["x"]


def test_several_events_in_one_read_come_out_in_order() -> None:
    d = SseDecoder()
    got = d.feed(b"data: 1\n\ndata: 2\n\n: ping\n\nevent: error\ndata: 3\n\ndata: 4")
    assert [(e.data, e.event) for e in got] == [("1", "message"), ("2", "message"),
                                                 ("3", "error")]
    assert [e.data for e in d.feed(b"5\n\n")] == ["45"]  # the unfinished line completed


def test_an_event_split_at_every_byte_across_reads() -> None:
    raw = b'data: {"a": 1}\n\ndata: x\ndata: y\n\n'
    for cut in range(1, len(raw)):
        for cut2 in range(cut, len(raw)):
            assert [e.data for e in decode_all([raw[:cut], raw[cut:cut2], raw[cut2:]])] == [
                '{"a": 1}', "x\ny"], (cut, cut2)


def test_lf_reads_after_a_cr_read_keep_the_split_cr_lf() -> None:
    # "\r" ends one read, its "\n" starts the next: one line end, not an empty line (which
    # would dispatch the event early)
    assert [e.data for e in decode_all([b"data: a\r", b"\ndata: b\n\n"])] == ["a\nb"]


@given(st.lists(st.text(alphabet="ab{}:é漢 ", min_size=1, max_size=8), min_size=1,
                max_size=6),
       st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=12))
def test_lf_events_decode_whole_however_split(datas: list[str], cuts: list[int]) -> None:
    """Events written as `data: D\\n\\n` come back as D, however the bytes are cut."""
    raw = b"".join(f"data: {d}\n\n".encode() for d in datas)
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(raw[pos:pos + c])
        pos += c
    chunks.append(raw[pos:])
    assert [e.data for e in decode_all(chunks)] == datas


def test_a_huge_line_fed_in_small_reads_is_refused_and_forgotten() -> None:
    from capacity.bench.sse import SseTooLarge

    d = SseDecoder(max_line_bytes=1000)
    d.feed(b"data: 1\n\n")
    with pytest.raises(SseTooLarge):
        for _ in range(200):
            d.feed(b"x" * 10)  # no line end: 2,000 bytes of one line, 10 at a time
    assert len(d._buf) == 0  # nothing of it is held
    with pytest.raises(SseTooLarge):
        SseDecoder(max_line_bytes=1000).feed(b"data: ok\n\ndata: " + b"y" * 1001 + b"\n\n")


def test_a_hostile_nested_event_is_malformed_between_good_ones() -> None:
    nested = "[" * 100_000 + "]" * 100_000
    evs = decode_all([f"data: {chat({'content': 'a'})}\n\ndata: {nested}\n\n".encode(),
                      f"data: {chat({'content': 'b'})}\n\n".encode()])
    infos = [classify(e.data) for e in evs]
    assert [(i.tokens, i.malformed) for i in infos] == [(True, False), (False, True),
                                                         (True, False)]


# -- ChunkReader: token chunks of one learnt shape without a JSON parse ---------------------

HEAD = '{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":['


def tok(literal: str) -> str:
    """A chunk whose content is the JSON string literal `literal`, as written."""
    return HEAD + '{"index":0,"delta":{"content":' + literal + '},"finish_reason":null}]}'


def test_reader_matches_classify_on_a_stream_and_its_hostile_variants() -> None:
    from capacity.bench.sse import ChunkInfo, ChunkReader

    r = ChunkReader()
    token = ChunkInfo(tokens=True, response_id="c1")
    nothing = ChunkInfo(response_id="c1")
    cases = [
        (tok('"Hi"'), token),  # learns the shape here
        (tok('" there"'), token),
        (tok('"\\u00e9\\n\\"q\\""'), token),  # escapes: still one literal
        (tok('"é漢"'), token),
        (tok('""'), nothing),  # empty content: no token (parsed)
        (tok('"a"b"'), ChunkInfo(malformed=True)),  # not one literal: parsed, malformed
        (tok('"\\q"'), ChunkInfo(malformed=True)),  # an escape JSON does not have
        (tok('"a","content":""'), nothing),  # a duplicate key that empties the content
        (tok('1'), token),  # not a string: parsed (classify counts any non-null value)
        (HEAD + '{"index":0,"delta":{},"finish_reason":"stop"}]}',
         ChunkInfo(finish_reason="stop", response_id="c1")),
        (HEAD.replace('"created":7', '"created":8') + '{"index":0,"delta":{"content":"z"},'
         '"finish_reason":null}]}', token),  # another shape: parsed, and a token
    ]
    for data, expected in cases:
        assert r.read(data) == expected, data
    usage = '{"id":"c1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}'
    assert r.read(usage) == ChunkInfo(response_id="c1",
                                      usage={"prompt_tokens": 5, "completion_tokens": 3})
    assert r.read("[DONE]").done
    assert r.read(tok('"x"'), "error").error is not None  # an error event is never a token


def test_reader_refuses_a_shape_whose_text_is_not_the_only_token() -> None:
    from capacity.bench.sse import ChunkReader

    # reasoning text rides along with the content: no place of the literal is the only
    # token-bearing value, so nothing is learnt and every chunk is parsed
    r = ChunkReader()
    odd = HEAD + '{"index":0,"delta":{"reasoning":"r","content":"k"},"finish_reason":null}],"k":1}'
    assert r.read(odd).tokens
    assert r._prefix is None
    no_reasoning = odd.replace('"reasoning":"r",', '')
    r2 = ChunkReader()
    assert r2.read(no_reasoning).tokens and r2._prefix is not None
    # the literal "k" is also a key, found last in the text: refused by the probes, the
    # content's value before it is learnt
    assert r2.read(no_reasoning.replace('"content":"k"', '"content":""')).tokens is False
