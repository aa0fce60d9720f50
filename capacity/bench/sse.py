"""Server-sent events: an incremental decoder and the OpenAI chunk classifier (docs/bench.md).

The decoder follows the WHATWG event-stream rules that matter for LLM servers: lines end in
LF, CR LF or CR (a frame may be split anywhere, even between CR and LF); `data:` with or without
the one optional space; several `data:` lines of one event are joined with LF; lines starting
with `:` are comments (keep-alives); an event is dispatched at a blank line; `event:`, `id:` and
`retry:` are read and otherwise ignored. Bytes are decoded as UTF-8 per line, so a multi-byte
character split across frames is safe.

Limits (docs/reliability.md): decoding is linear in the bytes fed, however they are
split (only the new bytes are searched for a line end); a line longer than `max_line_bytes`
or an event whose data exceeds `max_event_bytes` raises `SseTooLarge`, so a server that never
sends a newline costs bounded memory. JSON is parsed by `capacity.untrusted.loads_json`: nesting
deeper than its `MAX_DEPTH` is a ValueError (a malformed event), never a RecursionError.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Final

from capacity.untrusted import loads_json

MAX_LINE_BYTES = 1 << 20
"""Longest SSE line accepted, bytes (1 MiB; an OpenAI chunk is well under 1 KiB)."""
MAX_EVENT_BYTES = 1 << 20
"""Most data one event may carry (its `data:` lines together), bytes (1 MiB)."""


class SseTooLarge(ValueError):
    """A line or an event beyond the decoder's limits (recorded as `too_large`)."""


@dataclass(frozen=True, kw_only=True)
class SseEvent:
    """One dispatched event: its `event:` name (default "message") and joined data."""

    data: str
    event: str = "message"


BOM: Final = b"\xef\xbb\xbf"
"""U+FEFF in UTF-8: the event-stream format lets a stream begin with one, and the client
ignores it (WHATWG HTML, "Parsing an event stream": one optional BOM at the start)."""


class SseDecoder:
    """Feed bytes as they arrive; get back the events completed by them.

    Linear time: bytes of an unfinished line wait in a buffer that is never searched again;
    each fed chunk is scanned once for CR and once for LF.
    """

    def __init__(self, *, max_line_bytes: int = MAX_LINE_BYTES,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()
        self._data: list[str] = []
        self._data_bytes = 0
        self._event = ""
        self._pending_cr = False
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes
        self._start: bytes | None = b""   # the stream's first bytes while a BOM may begin

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by `chunk`; SseTooLarge beyond the limits.

        A chunk without CR (every LLM server's) is split once at its LFs (`_feed_lf`); one
        with CR goes through the general scan, which also handles a CR LF split across
        chunks."""
        if self._start is not None:   # a leading BOM (`BOM`) is dropped, even split
            head = self._start + chunk
            if len(head) < len(BOM) and BOM.startswith(head):
                self._start = head
                return []
            self._start = None
            chunk = head[len(BOM):] if head.startswith(BOM) else head
        if not chunk:
            return []  # an empty frame must not forget a CR that may precede an LF
        if not self._pending_cr and b"\r" not in chunk:
            return self._feed_lf(chunk)
        start = 0
        if self._pending_cr and chunk.startswith(b"\n"):
            start = 1  # the LF of a CR LF split across frames
        self._pending_cr = False
        events: list[SseEvent] = []
        n = len(chunk)
        lf = cr = -2  # next LF / CR at or after `start`; -1: none left, -2: not searched
        while start < n:
            if lf != -1 and lf < start:
                lf = chunk.find(b"\n", start)
            if cr != -1 and cr < start:
                cr = chunk.find(b"\r", start)
            if cr >= 0 and (lf < 0 or cr < lf):
                end, nxt = cr, cr + 1
                if nxt < n and chunk[nxt] == 0x0A:
                    nxt += 1
                elif nxt == n:
                    self._pending_cr = True
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                break
            if self._buf:
                self._buf += chunk[start:end]
                line = bytes(self._buf)
                self._buf.clear()
            else:
                line = chunk[start:end]
            self._check_line(len(line))
            self._line(line, events)
            start = nxt
        if start < n:
            self._check_line(len(self._buf) + n - start)
            self._buf += chunk[start:]
        return events

    def _feed_lf(self, chunk: bytes) -> list[SseEvent]:
        """`feed` for a chunk whose lines end in LF only: the line left unfinished by the
        previous chunks is completed by this chunk's first LF (searched once; while there is
        none the chunk is only appended, so a long line costs linear time), then the rest is
        split at once, the last piece kept as the next unfinished line."""
        events: list[SseEvent] = []
        rest = chunk
        if self._buf:
            i = chunk.find(b"\n")
            if i < 0:
                self._check_line(len(self._buf) + len(chunk))
                self._buf += chunk
                return events
            self._buf += chunk[:i]
            line = bytes(self._buf)
            self._buf.clear()
            self._check_line(len(line))
            self._line(line, events)
            rest = chunk[i + 1:]
        lines = rest.split(b"\n")
        tail = lines.pop()
        limit = self._max_line
        for line in lines:
            if len(line) > limit:
                self._check_line(len(line))
            self._line(line, events)
        if tail:
            self._check_line(len(tail))
            self._buf += tail
        return events

    def _check_line(self, size: int) -> None:
        if size > self._max_line:
            self._buf.clear()
            raise SseTooLarge(f"an SSE line of more than {self._max_line} bytes")

    def close(self) -> list[SseEvent]:
        """End of stream: a last line without its newline, and an event without its blank line."""
        events: list[SseEvent] = []
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            self._line(line, events)
        if self._data:
            events.append(SseEvent(data="\n".join(self._data), event=self._event or "message"))
            self._data, self._data_bytes, self._event = [], 0, ""
        return events

    def _line(self, raw: bytes, events: list[SseEvent]) -> None:
        if not raw:
            if self._data:
                events.append(SseEvent(data="\n".join(self._data), event=self._event or "message"))
            self._data, self._data_bytes, self._event = [], 0, ""
            return
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_bytes += len(raw) + 1
            if self._data_bytes > self._max_event:
                self._data, self._data_bytes = [], 0
                raise SseTooLarge(f"an SSE event with more than {self._max_event} bytes of data")
            self._data.append(value)
        elif name == "event":
            self._event = value


@dataclass(frozen=True, kw_only=True)
class ChunkInfo:
    """What one `data:` event of an OpenAI-style stream carries, for the metrics."""

    done: bool = False
    """The `[DONE]` sentinel."""
    tokens: bool = False
    """Token-bearing: non-empty content, reasoning_content/reasoning or tool_calls (chat), or
    non-empty text (completions). An empty role chunk is not."""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: str | None = None
    """The message of an `{"error": ...}` event (an error inside a 200 stream)."""
    malformed: bool = False
    response_id: str | None = None
    timings: dict[str, Any] | None = None
    """llama.cpp's per-request `timings` (prompt_ms, predicted_per_token_ms, ...), in the
    chunk that carries its usage."""


_DONE = ChunkInfo(done=True)


def _nonempty(v: object) -> bool:
    return bool(v) if isinstance(v, str | list | dict) else v is not None


def classify(data: str, event: str = "message") -> ChunkInfo:
    """Classify one event's data (docs/bench.md: which events carry tokens, usage, errors)."""
    text = data.strip()
    if text == "[DONE]":
        return _DONE
    try:
        obj = loads_json(text)
    except ValueError:
        if event == "error":
            return ChunkInfo(error=text[:200] or "error event")
        return ChunkInfo(malformed=True)
    if not isinstance(obj, dict):
        return ChunkInfo(malformed=True)
    err = obj.get("error")
    if err is not None or event == "error":
        if isinstance(err, dict):
            msg = str(err.get("message") or err)
        else:
            msg = str(err if err is not None else obj)
        return ChunkInfo(error=msg[:200])
    tokens = False
    finish: str | None = None
    choices = obj.get("choices")
    if isinstance(choices, list):
        for ch in choices:
            if not isinstance(ch, dict):
                continue
            delta = ch.get("delta")
            if isinstance(delta, dict):
                if (_nonempty(delta.get("content")) or _nonempty(delta.get("reasoning_content"))
                        or _nonempty(delta.get("reasoning")) or _nonempty(delta.get("tool_calls"))):
                    tokens = True
            elif _nonempty(ch.get("text")):
                tokens = True
            fr = ch.get("finish_reason")
            if fr:
                finish = str(fr)[:200]
    usage = obj.get("usage")
    rid = obj.get("id")
    timings = obj.get("timings")
    return ChunkInfo(tokens=tokens, finish_reason=finish,
                     usage=usage if isinstance(usage, dict) else None,
                     timings=timings if isinstance(timings, dict) else None,
                     response_id=str(rid)[:200] if rid is not None else None)


_JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
"""One JSON string literal, exactly (RFC 8259: no raw control character, only the defined
escapes)."""
MAX_SHAPES = 2
"""Times a `ChunkReader` tries to learn a stream's token-chunk shape."""
MAX_PLACES = 4
"""Places of the content's literal in a chunk's text tried, per try (two parses each)."""


class ChunkReader:
    """`classify` for one stream's events, without parsing the JSON of its token chunks when they
    all have one shape (docs/bench.md, "The client's hot path").

    An LLM server's token chunks differ only in their text: `{"id":"x",...,"delta":{"content":
    "<text>"},...}`. From the first token chunk the reader learns its shape: the text before and
    after the content's string literal. It keeps the shape only if, with that literal replaced
    by `""`, the chunk classifies as carrying no token, no error and no end (so that literal
    is the only token-bearing value: not a key, not shadowed by a duplicate key), and with
    `"x"` as one token. A later event that is the same text around a different string literal
    (checked to be one JSON string, exactly, and non-empty) is then that same chunk with
    another token: the same `ChunkInfo`, as a parse would give it. Anything else (usage,
    finish, errors, another shape, an invalid literal) is parsed by `classify`, so the usage
    checks and the nesting limit apply as before."""

    __slots__ = ("_prefix", "_suffix", "_hit", "_shapes")

    def __init__(self) -> None:
        self._prefix: str | None = None
        self._suffix = ""
        self._hit: ChunkInfo | None = None
        self._shapes = 0

    def read(self, data: str, event: str = "message") -> ChunkInfo:
        """What `classify(data, event)` returns."""
        prefix = self._prefix
        if (prefix is not None and event == "message" and data.startswith(prefix)
                and data.endswith(self._suffix)):
            literal = data[len(prefix):len(data) - len(self._suffix)]
            if len(literal) > 2 and _JSON_STRING.fullmatch(literal) and self._hit is not None:
                return self._hit
        info = classify(data, event)
        if info.tokens and event == "message" and self._shapes < MAX_SHAPES:
            self._shapes += 1
            self._learn(data)
        return info

    def _learn(self, data: str) -> None:
        try:
            obj = json.loads(data)
            content = obj["choices"][0]["delta"]["content"]
        except (ValueError, RecursionError, LookupError, TypeError):
            return
        if not isinstance(content, str) or not content:
            return
        for literal in dict.fromkeys((json.dumps(content), json.dumps(content, ensure_ascii=False))):
            at = len(data)
            for _ in range(MAX_PLACES):  # the literal's places in the text, last first
                at = data.rfind(literal, 0, at)
                if at < 0:
                    break
                if self._try(data[:at], data[at + len(literal):]):
                    return

    def _try(self, prefix: str, suffix: str) -> bool:
        """Keep the shape `prefix` + literal + `suffix` if its literal is the chunk's only
        token-bearing value (the class's docstring)."""
        empty = classify(prefix + '""' + suffix)
        one = classify(prefix + '"x"' + suffix)
        if (empty.tokens or empty.malformed or empty.done or empty.error is not None
                or not one.tokens or replace(one, tokens=False) != empty):
            return False
        self._prefix, self._suffix, self._hit = prefix, suffix, one
        return True
