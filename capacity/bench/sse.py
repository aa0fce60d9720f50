"""Server-sent events: an incremental decoder and the OpenAI chunk classifier (docs/bench.md).

The decoder follows the WHATWG event-stream rules that matter for LLM servers: lines end in
LF, CR LF or CR (a frame may be split anywhere, even between CR and LF); `data:` with or without
the one optional space; several `data:` lines of one event are joined with LF; lines starting
with `:` are comments (keep-alives); an event is dispatched at a blank line; `event:`, `id:` and
`retry:` are read and otherwise ignored. Bytes are decoded as UTF-8 per line, so a multi-byte
character split across frames is safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class SseEvent:
    """One dispatched event: its `event:` name (default "message") and joined data."""

    data: str
    event: str = "message"


class SseDecoder:
    """Feed bytes as they arrive; get back the events completed by them."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CR LF split across frames
        self._pending_cr = False
        buf = self._buf + chunk
        events: list[SseEvent] = []
        start = 0
        n = len(buf)
        while start < n:
            lf = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, lf if lf >= 0 else n)
            if cr >= 0:
                end, nxt = cr, cr + 1
                if nxt < n and buf[nxt] == 0x0A:
                    nxt += 1
                elif nxt == n:
                    self._pending_cr = True
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                break
            self._line(buf[start:end], events)
            start = nxt
        self._buf = buf[start:]
        return events

    def close(self) -> list[SseEvent]:
        """End of stream: a last line without its newline, and an event without its blank line."""
        events: list[SseEvent] = []
        if self._buf:
            self._line(self._buf, events)
            self._buf = b""
        if self._data:
            events.append(SseEvent(data="\n".join(self._data), event=self._event or "message"))
            self._data, self._event = [], ""
        return events

    def _line(self, raw: bytes, events: list[SseEvent]) -> None:
        if not raw:
            if self._data:
                events.append(SseEvent(data="\n".join(self._data), event=self._event or "message"))
            self._data, self._event = [], ""
            return
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
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


_DONE = ChunkInfo(done=True)


def _nonempty(v: object) -> bool:
    return bool(v) if isinstance(v, str | list | dict) else v is not None


def classify(data: str, event: str = "message") -> ChunkInfo:
    """Classify one event's data (docs/bench.md: which events carry tokens, usage, errors)."""
    text = data.strip()
    if text == "[DONE]":
        return _DONE
    try:
        obj = json.loads(text)
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
                finish = str(fr)
    usage = obj.get("usage")
    rid = obj.get("id")
    return ChunkInfo(tokens=tokens, finish_reason=finish,
                     usage=usage if isinstance(usage, dict) else None,
                     response_id=str(rid) if rid is not None else None)
