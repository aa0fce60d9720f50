"""llama-server management (capacity.bench.llamacpp) and the GGUF test model
(capacity.bench.gguf_model). The test that starts the real binary is `slow` and skipped when no
binary is cached (CI does not build it; `python3 dev.py realtest` does)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import httpx
import pytest

from capacity import workspace
from capacity.bench import llamacpp
from capacity.bench.gguf_model import LONG_SHAPE, TEST_SHAPE, LlamaShape, write_llama_gguf
from capacity.catalog.model_files import read_gguf_header, table_from_gguf
from capacity.cli import realtest


def test_cache_is_outside_the_checkout_and_keyed_by_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAPACITY_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert workspace.cache_dir() == tmp_path / "xdg" / "capacity"
    monkeypatch.setenv("CAPACITY_CACHE_DIR", str(tmp_path / "c"))
    assert llamacpp.cached_binary("9.9.9") == tmp_path / "c" / "llama.cpp" / "9.9.9" / "llama-server"
    monkeypatch.delenv("CAPACITY_LLAMA_SERVER", raising=False)
    assert llamacpp.locate("9.9.9") is None


def test_override_must_be_an_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "llama-server"
    monkeypatch.setenv("CAPACITY_LLAMA_SERVER", str(fake))
    with pytest.raises(llamacpp.LlamaCppError, match="not an executable"):
        llamacpp.locate()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert llamacpp.locate() == fake


def test_server_command_line() -> None:
    cfg = llamacpp.ServerConfig(model_path=Path("/m.gguf"), port=8089, parallel=8,
                                ctx_tokens=4096, threads=2, alias="t32")
    argv = cfg.argv(Path("/bin/llama-server"))
    for flag, value in (("--parallel", "8"), ("-c", "4096"), ("--port", "8089"),
                        ("--host", "127.0.0.1"), ("-t", "2"), ("--alias", "t32")):
        assert argv[argv.index(flag) + 1] == value
    assert "--metrics" in argv and "--slots" in argv
    assert "--kv-unified" in argv  # one micro-batch per step, wherever the busy slots are
    plain = llamacpp.ServerConfig(model_path=Path("/m.gguf"), port=1, kv_unified=False)
    assert "--kv-unified" not in plain.argv(Path("/bin/llama-server"))


def test_gguf_test_model_has_the_issue_shape(tmp_path: Path) -> None:
    assert TEST_SHAPE.params == pytest.approx(156e6, rel=0.01)
    assert (TEST_SHAPE.hidden, TEST_SHAPE.kv_heads, TEST_SHAPE.head_dim) == (1024, 4, 64)
    import gguf

    vocab = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(vocab, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(50)])
    w.add_token_scores([0.0] * 50)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    small = LlamaShape(layers=2, q_heads=4, kv_heads=2, head_dim=8, ffn=48, vocab=50)
    out = write_llama_gguf(tmp_path / "m.gguf", vocab, shape=small, dtype="f16")
    header = read_gguf_header(out)
    assert sum(t.elements for t in header.tensors) == small.params
    assert len(header.metadata["tokenizer.ggml.tokens"]) == 50
    assert header.metadata["llama.attention.head_count_kv"] == 2
    with pytest.raises(ValueError, match="50 tokens"):
        write_llama_gguf(tmp_path / "x.gguf", vocab, shape=TEST_SHAPE)
    assert table_from_gguf(header, key="m", source="t", as_of="2026")["tied_embeddings"] is False
    # a tied head: no output.weight, one V x h table fewer, and the catalog entry says so
    tied = LlamaShape(layers=2, q_heads=4, kv_heads=2, head_dim=8, ffn=48, vocab=50, tied=True)
    assert small.params - tied.params == 50 * 32
    header = read_gguf_header(write_llama_gguf(tmp_path / "t.gguf", vocab, shape=tied))
    assert sum(t.elements for t in header.tensors) == tied.params
    assert not any(t.name == "output.weight" for t in header.tensors)
    assert table_from_gguf(header, key="t", source="t", as_of="2026")["tied_embeddings"] is True
    # a long context: the model entry must admit the long-prompt check's 32K prompts
    long = LlamaShape(layers=1, q_heads=2, kv_heads=1, head_dim=8, ffn=16, vocab=50,
                      context_tokens=LONG_SHAPE.context_tokens, tied=True)
    header = read_gguf_header(write_llama_gguf(tmp_path / "l.gguf", vocab, shape=long))
    entry = table_from_gguf(header, key="l", source="t", as_of="2026")
    longest = max(realtest.LONG_HELD_TOKENS) + realtest.LONG_OUTPUT_TOKENS
    assert entry["max_context_tokens"] >= longest * 1.1  # room for the tokenizer's spread


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_real_llama_server_starts_and_answers(tmp_path: Path) -> None:
    binary = llamacpp.locate()
    vocab = llamacpp.vocab_file()
    if binary is None or not vocab.is_file():
        pytest.skip("no llama-server built: run `python3 dev.py realtest` once (it caches the "
                    "build under ~/.cache/capacity) or set CAPACITY_LLAMA_SERVER")
    small = LlamaShape(layers=2, q_heads=4, kv_heads=2, head_dim=32, ffn=256, vocab=32000)
    model = write_llama_gguf(tmp_path / "small.gguf", vocab, shape=small, dtype="f32")
    cfg = llamacpp.ServerConfig(model_path=model, port=_free_port(), parallel=2,
                                ctx_tokens=512, threads=min(2, os.cpu_count() or 1))
    with llamacpp.LlamaServer(binary, cfg, log_path=tmp_path / "server.log") as server:
        info = llamacpp.server_info(server.root_url)
        assert info["/health"] == {"status": "ok"}
        assert isinstance(info["/slots"], list) and len(info["/slots"]) == 2
        r = httpx.post(f"{server.base_url}/completions", timeout=60,
                       json={"prompt": "hello", "max_tokens": 4, "ignore_eos": True})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4
