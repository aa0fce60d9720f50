"""Model entries from model files (capacity.catalog.model_files, `capacity catalog add-model`):
config.json of three architectures and a tiny GGUF written here with the `gguf` package."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from capacity.catalog import custom as cc
from capacity.catalog.loader import default_catalog
from capacity.catalog.model_files import (
    config_params,
    read_gguf_header,
    table_from_config,
    table_from_path,
    table_from_upload,
)
from capacity.cli.main import main
from capacity.errors import CatalogError

# published config.json values (the fields the reader uses)
LLAMA_31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "tie_word_embeddings": False}
QWEN3_30B_A3B: dict[str, Any] = {
    "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
    "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": False}
DEEPSEEK_V3: dict[str, Any] = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840}
MIXTRAL_8X7B: dict[str, Any] = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
    "max_position_embeddings": 32768, "sliding_window": None}
GEMMA3_27B: dict[str, Any] = {
    "model_type": "gemma3", "tie_word_embeddings": True, "text_config": {
        "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 62,
        "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
        "sliding_window": 1024, "sliding_window_pattern": 6, "vocab_size": 262208,
        "max_position_embeddings": 131072}}


@pytest.fixture
def custom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cc.ENV_VAR, str(tmp_path / "custom"))
    cc.clear_caches()
    yield tmp_path / "custom"
    cc.clear_caches()


@pytest.mark.parametrize(("config", "total_b", "active_b"), [
    (LLAMA_31_8B, 8.03, 8.03),        # the catalog's llama-3.1-8b
    (QWEN3_30B_A3B, 30.5, 3.3),       # qwen3-30b-a3b
    (DEEPSEEK_V3, 671.0, 37.0),       # deepseek-v3
    (MIXTRAL_8X7B, 46.7, 12.9),       # Mistral AI's announcement: 46.7 B total, 12.9 B active
])
def test_parameter_count_from_shapes_matches_published(config: dict[str, Any], total_b: float,
                                                       active_b: float) -> None:
    p = config_params(config)
    assert p.total / 1e9 == pytest.approx(total_b, rel=0.015)
    assert p.active / 1e9 == pytest.approx(active_b, rel=0.03)


def test_layer_kinds_sliding_mla_moe() -> None:
    gemma = table_from_config(GEMMA3_27B, key="g", source="t", as_of="2026-11")
    assert [(g["kind"], g["count"]) for g in gemma["layers"]] == [("full", 10), ("sliding", 52)]
    assert gemma["layers"][1]["window_tokens"] == 1024
    ds = table_from_config(DEEPSEEK_V3, key="d", source="t", as_of="2026-11")
    assert ds["layers"] == [{"kind": "mla", "count": 61, "kv_lora_rank": 512,
                             "qk_rope_head_dim": 64, "q_heads": 128, "head_dim": 160}]
    assert ds["moe"] == {"experts": 256, "active": 8}
    layer_types = dict(LLAMA_31_8B, sliding_window=4096,
                       layer_types=["sliding_attention", "full_attention"] * 16)
    mixed = table_from_config(layer_types, key="m", source="t", as_of="2026-11")
    assert [(g["kind"], g["count"]) for g in mixed["layers"]] == [("full", 16), ("sliding", 16)]
    mistral = table_from_config(dict(MIXTRAL_8X7B, sliding_window=4096), key="x", source="t",
                                as_of="2026-11")
    assert [(g["kind"], g["count"]) for g in mistral["layers"]] == [("sliding", 32)]


def test_add_model_from_a_folder_with_safetensors(custom: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "Qwen3-30B-A3B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_30B_A3B))
    for i, size in enumerate((3000, 2000)):
        (folder / f"model-0000{i}.safetensors").write_bytes(b"\0" * size)
    assert main(["catalog", "add-model", str(folder)]) == 0
    assert "saved custom model 'qwen3-30b-a3b'" in capsys.readouterr().out
    model = default_catalog().models["qwen3-30b-a3b"]
    assert model.moe is not None and (model.moe.experts, model.moe.active) == (128, 8)
    assert model.stated_variants[0].weights_gb == pytest.approx(5000 / 1e9)
    assert model.path.startswith(str(custom))


def test_bad_config_is_one_clear_line(custom: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    assert main(["catalog", "add-model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "missing num_hidden_layers" in err and "Traceback" not in err
    assert main(["catalog", "add-model", str(tmp_path / "nope.gguf")]) == 2


@pytest.mark.parametrize(("field", "value"), [("num_hidden_layers", -3),
                                              ("num_attention_heads", "32"),
                                              ("num_hidden_layers", 0),
                                              ("num_experts", "8"), ("hidden_size", 4.5)])
def test_a_field_that_is_there_but_not_a_count_is_named(field: str, value: object) -> None:
    """A field given with anything but a whole number is refused by name, not reported
    missing, nor (an optional one: "num_experts": "8") read as absent: not a dense model."""
    config = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
              field: value}
    with pytest.raises(CatalogError, match=rf"^config.json: {field} must be a whole number > 0, "
                                           rf"got {value!r}$"):
        config_params(config)
    with pytest.raises(CatalogError, match="neither a GGUF file nor a JSON"):
        table_from_upload(b"\x00\x01 not json", "x.bin", as_of="2026-11")


def write_tiny_gguf(path: Path, *, f16: bool = True, experts: int = 0) -> int:
    """A 2-layer Llama-shaped GGUF: hidden 64, 4 query / 2 KV heads of 16, vocab 100.
    Returns the number of parameters written."""
    import gguf

    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny")
    w.add_block_count(2)
    w.add_embedding_length(64)
    w.add_context_length(2048)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_key_length(16)
    w.add_vocab_size(100)
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(2)
    mat = np.float16 if f16 else np.float32
    shapes = {"token_embd.weight": (100, 64), "output.weight": (100, 64),
              "output_norm.weight": (64,)}
    for i in range(2):
        shapes |= {f"blk.{i}.attn_q.weight": (64, 64), f"blk.{i}.attn_k.weight": (32, 64),
                   f"blk.{i}.attn_v.weight": (32, 64), f"blk.{i}.attn_output.weight": (64, 64),
                   f"blk.{i}.attn_norm.weight": (64,)}
        if experts:
            shapes[f"blk.{i}.ffn_up_exps.weight"] = (experts, 128, 64)
        else:
            shapes[f"blk.{i}.ffn_up.weight"] = (128, 64)
    for name, shape in shapes.items():
        dt = np.float32 if len(shape) == 1 else mat
        w.add_tensor(name, np.zeros(shape, dtype=dt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sum(int(np.prod(s)) for s in shapes.values())


def test_gguf_header_to_entry(custom: Path, tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    params = write_tiny_gguf(path)
    header = read_gguf_header(path)
    assert header.metadata["llama.block_count"] == 2
    assert sum(t.elements for t in header.tensors) == params
    table = table_from_path(path, as_of="2026-11")
    assert table["key"] == "tiny" and table["default_format"] == "bf16"
    assert table["layers"] == [{"kind": "full", "count": 2, "kv_heads": 2, "head_dim": 16,
                                "q_heads": 4}]
    assert table["params_total_b"] == pytest.approx(params / 1e9, rel=1e-3)
    norms = 64 * 3
    assert table["variants"][0]["weights_gb"] == pytest.approx(
        ((params - norms) * 2 + norms * 4) / 1e9, rel=1e-3)
    assert main(["catalog", "add-model", str(path), "--key", "tiny-gguf"]) == 0
    assert default_catalog().variant("tiny-gguf").weights_stated


def test_gguf_header_only_upload_and_moe(tmp_path: Path) -> None:
    path = tmp_path / "moe.gguf"
    params = write_tiny_gguf(path, f16=False, experts=8)
    data = path.read_bytes()
    header_only = data[: len(data) // 10]  # the tensor data is cut off: the header suffices
    table = table_from_upload(header_only, "moe.gguf", as_of="2026-11")
    assert table["default_format"] == "f32" and table["moe"] == {"experts": 8, "active": 2}
    routed = 2 * 8 * 128 * 64
    assert table["params_active_b"] == pytest.approx((params - routed * 6 / 8) / 1e9, rel=1e-3)
    with pytest.raises(CatalogError, match="not a readable GGUF header"):
        table_from_upload(data[:40], "cut.gguf", as_of="2026-11")


def test_config_upload_gets_key_from_its_name() -> None:
    cfg = dict(LLAMA_31_8B, _name_or_path="meta-llama/Llama-3.1-8B")
    table = table_from_upload(json.dumps(cfg).encode(), "config.json", as_of="2026-11",
                              weights_bytes=16.06e9)
    assert table["key"] == "llama-3.1-8b"
    assert table["variants"][0]["weights_gb"] == pytest.approx(16.06)
