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
