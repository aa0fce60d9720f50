"""Hostile GGUF files (docs/reliability.md, "Model files"): every count and length the file
claims is checked against the bytes left before anything is allocated, and every fault is one
line (a CatalogError), on the CLI an exit 2."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capacity.catalog.gguf_reader import GGML_BLOCKS, read_gguf_header
from capacity.catalog.model_files import table_from_gguf, table_from_upload
from capacity.errors import CatalogError

LIMIT_S = 30


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, kind: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", kind) + payload


def _file(meta: list[bytes], tensors: list[bytes] = (), *, version: int = 3,  # type: ignore[assignment]
          n_meta: int | None = None, n_tensors: int | None = None) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                                 len(meta) if n_meta is None else n_meta)
    return head + b"".join(meta) + b"".join(tensors)


def _tensor(name: str, dims: tuple[int, ...], ggml_type: int = 0) -> bytes:
    return (_s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", ggml_type, 0))


def _u32(v: int) -> bytes:
    return struct.pack("<I", v)


def _good_meta(**override: bytes) -> list[bytes]:
    fields = {
        "general.architecture": (8, _s("llama")),
        "llama.block_count": (4, _u32(2)),
        "llama.embedding_length": (4, _u32(64)),
        "llama.attention.head_count": (4, _u32(4)),
    }
    out = [_kv(k, kind, payload) for k, (kind, payload) in fields.items() if k not in override]
    return out + list(override.values())


def _read(tmp_path: Path, data: bytes) -> object:
    p = tmp_path / "m.gguf"
    p.write_bytes(data)
    return read_gguf_header(p)


def test_the_49_byte_file_claiming_2_to_the_40_elements(tmp_path: Path) -> None:
    # one metadata entry: an array of uint8 claiming 2^40 elements
    data = _file([_s("a") + struct.pack("<IIQ", 9, 0, 1 << 40)])
    assert len(data) < 60
    t0 = time.perf_counter()
    with pytest.raises(CatalogError, match="claims 1,099,511,627,776 bytes"):
        _read(tmp_path, data)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize(("data", "match"), [
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 62), "metadata entries"),
    (b"GGUF" + struct.pack("<IQQ", 3, 1 << 50, 0), "tensors"),
    (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
    (b"GGUF" + struct.pack("<I", 3), "ends early|claims"),
    (_file([struct.pack("<Q", 1 << 60) + bytes(16)]), "metadata key of"),
    (_file([_kv("x", 13, b"")]), "unknown value type 13"),
    (_file([_kv("x", 9, struct.pack("<IQ", 8, 1 << 40))]), "claims"),
    (_file([_kv("x", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 9, 1)
                + struct.pack("<IQ", 4, 1) + _u32(1))]), "nested more than 2 deep"),
    (_file(_good_meta(), [_tensor("t", (3,), 2)]), "whole number of Q4_0 blocks"),
    (_file(_good_meta(), [_tensor("t", (1 << 20,) * 9)]), "9 dimensions"),
    (_file(_good_meta(), [_tensor("t", (4,), 99)]), "unknown ggml type 99"),
])
def test_malformed_headers_are_one_line(tmp_path: Path, data: bytes, match: str) -> None:
    with pytest.raises(CatalogError, match=match):
        _read(tmp_path, data)


@pytest.mark.parametrize(("key", "kind", "payload"), [
    ("llama.block_count", 8, _s("32")),                    # a string
    ("llama.block_count", 6, struct.pack("<f", float("nan"))),
    ("llama.block_count", 12, struct.pack("<d", float("inf"))),
    ("llama.block_count", 12, struct.pack("<d", 1e200)),
    ("llama.block_count", 7, struct.pack("<?", True)),      # a bool is not a count
    ("llama.attention.head_count_kv", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 1) + _u32(2)),
    ("llama.context_length", 11, struct.pack("<q", -5)),
])
def test_metadata_of_the_wrong_kind_is_refused(tmp_path: Path, key: str, kind: int,
                                                payload: bytes) -> None:
    data = _file(_good_meta(**{key: _kv(key, kind, payload)}), [_tensor("token_embd.weight", (64, 100))])
    header = _read(tmp_path, data)
    with pytest.raises(CatalogError, match="count"):
        table_from_gguf(header, key="m", source="test", as_of="2026-12-01")  # type: ignore[arg-type]


def test_a_good_header_reads(tmp_path: Path) -> None:
    vocab = struct.pack("<IQ", 8, 5000) + b"".join(_s(f"t{i}") for i in range(5000))
    data = _file(_good_meta() + [_kv("tokenizer.ggml.tokens", 9, vocab)],
                 [_tensor("token_embd.weight", (64, 5000), 1), _tensor("blk.0.w", (64, 64), 8)])
    header = read_gguf_header(_write(tmp_path, data))
    assert header.metadata["tokenizer.ggml.tokens"] == 5000  # long arrays kept as their length
    assert [(t.name, t.elements, t.n_bytes) for t in header.tensors] == [
        ("token_embd.weight", 320_000, 640_000), ("blk.0.w", 4096, 4096 // 32 * 34)]
    table = table_from_gguf(header, key="m", source="test", as_of="2026-12-01")
    assert (table["num_layers"], table["hidden"], table["vocab"]) == (2, 64, 5000)


def _write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "ok.gguf"
    p.write_bytes(data)
    return p


def test_an_upload_and_the_cli_say_one_line(tmp_path: Path) -> None:
    data = _file([_s("a") + struct.pack("<IIQ", 9, 0, 1 << 40)])
    with pytest.raises(CatalogError):
        table_from_upload(data, "bad.gguf", as_of="2026-12-01")
    p = _write(tmp_path, data)
    env = {**os.environ, "CAPACITY_CUSTOM_DIR": str(tmp_path / "custom")}
    out = subprocess.run([sys.executable, "-m", "capacity", "catalog", "add-model", str(p),
                          "--dry-run"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "not a readable GGUF header" in out.stderr


def test_the_type_table_is_ggmls() -> None:
    gguf = pytest.importorskip("gguf")
    theirs = {int(q): (q.name, b, s) for q, (b, s) in gguf.GGML_QUANT_SIZES.items()}
    assert {k: v for k, v in theirs.items() if k in GGML_BLOCKS} == dict(GGML_BLOCKS)
