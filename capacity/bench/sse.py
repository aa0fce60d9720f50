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

from dataclasses import dataclass
from typing import Any

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

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by `chunk`; SseTooLarge beyond the limits."""
        if not chunk:
            return []  # an empty frame must not forget a CR that may precede an LF
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
