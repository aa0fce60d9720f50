"""Catalogs: every entry loads with a source and a date; bad entries are named precisely."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from capacity.catalog.loader import DATA_DIR, Catalog, load_catalog
from capacity.errors import CatalogError, UnknownKeyError

GPU_REFERENCE = DATA_DIR / "reference" / "gpus.csv"


def test_every_entry_has_source_and_date(catalog: Catalog) -> None:
    for m in catalog.models.values():
        assert m.source.strip() and m.as_of.strip(), m.key
    for g in catalog.gpus.values():
        assert g.source.strip() and g.as_of.strip() and g.price_source and g.price_as_of, g.key


def test_keys_from_the_issue_resolve(catalog: Catalog) -> None:
    for key in ("rtx-4090", "h200-sxm", "h100-sxm", "a100-80gb-sxm"):
        assert catalog.gpu(key).key == key
    assert catalog.variant("llama-3.1-8b").format.key == "bf16"
    assert catalog.variant("llama-3.1-8b-fp8").format.key == "fp8"
    assert catalog.variant("llama-3.1-8b-gguf-q4_k_m").format.key == "gguf-q4_k_m"
    v = catalog.variant("qwen3.5-9b-awq")
    assert v.weights_gb == 5.7 and v.weights_stated
    # a format given apart wins over the key's suffix, as size and frontier read it: `capacity
    # plan --weights bf16` on the default model (qwen3.5-9b-awq) was refused as an unknown
    # model that named itself among the keys (an audit, 2026-12-07)
    both = catalog.variant("qwen3.5-9b-awq", "bf16")
    assert (both.model.key, both.format.key) == ("qwen3.5-9b", "bf16")
    assert both == catalog.variant("qwen3.5-9b", "bf16")
    assert catalog.variant("llama-3.1-8b-fp8", "fp8") == catalog.variant("llama-3.1-8b-fp8")


def test_weight_sizes_from_params_and_bits(catalog: Catalog) -> None:
    assert catalog.variant("llama-3.1-8b").weights_gb == pytest.approx(16.06)
    # quantized formats keep the embedding table and the output head (untied on Llama-3.1:
    # 2 x 128256 x 4096 = 1.0507 B parameters) in 16 bits: FP8 (8.03 - 1.0507) x 1 +
    # 1.0507 x 2 = 9.08 GB
    emb = 2 * 128256 * 4096 / 1e9
    assert catalog.variant("llama-3.1-8b-fp8").weights_gb == pytest.approx(8.03 - emb + 2 * emb)
    assert catalog.variant("llama-3.1-8b-awq").weights_gb == pytest.approx(
        (8.03 - emb) * 4.25 / 8 + 2 * emb)
    assert "embedding and output head" in catalog.variant("llama-3.1-8b-awq").weights_source
    # a format without embedding bits (GGUF's own tensor types) stays params x bits
    assert catalog.variant("llama-3.1-8b-gguf-q4_k_m").weights_gb == pytest.approx(
        8.03 * 4.85 / 8)
    # a stated size wins over params x bits
    assert catalog.variant("gpt-oss-20b").weights_gb == pytest.approx(14.46, abs=0.01)


def test_rtx_4090_price_is_the_seeds(catalog: Catalog) -> None:
    g = catalog.gpu("rtx-4090")
    assert (g.price_per_hour, g.currency, g.price_as_of) == (2.0, "CNY", "2026-11")


def test_gpus_match_the_reference_sheet(catalog: Catalog) -> None:
    with GPU_REFERENCE.open() as fh:
        rows = list(csv.DictReader(fh))
    by_name = {g.name: g for g in catalog.gpus.values()}
    for r in rows:
        g = by_name[r["gpu"]]
        assert g.memory_gb == float(r["memory_gb"])
        assert g.bandwidth_gb_s == float(r["bandwidth_gb_s"])
        assert g.bf16_tflops == float(r["bf16_dense_tflops"])
        assert g.fp8_tflops == (float(r["fp8_dense_tflops"]) if r["fp8_dense_tflops"] else None)


def test_unknown_keys_suggest_close_ones(catalog: Catalog) -> None:
    with pytest.raises(UnknownKeyError, match="did you mean rtx-4090"):
        catalog.gpu("rtx-4909")
    with pytest.raises(UnknownKeyError, match="llama-3.1-8b"):
        catalog.variant("llama-3.1-8")


def test_moe_expert_params(catalog: Catalog) -> None:
    m = catalog.models["qwen3-30b-a3b"]
    assert m.expert_params_b == pytest.approx(48 * 128 * 3 * 2048 * 768 / 1e9, rel=0.01)


@pytest.fixture()
def data_copy(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(DATA_DIR / "models", root / "models")
    shutil.copytree(DATA_DIR / "gpus", root / "gpus")
    shutil.copy(DATA_DIR / "weight_formats.toml", root / "weight_formats.toml")
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        pytest.param("models/llama-3.1-8b.toml", "num_layers = 32", "num_layers = 31",
                     "llama-3.1-8b.toml: entry 'llama-3.1-8b': field 'layers'", id="layout"),
        pytest.param("models/llama-3.1-8b.toml", "hidden = 4096", "hidden = -4096",
                     "field 'hidden': must be > 0", id="negative"),
        pytest.param("models/llama-3.1-8b.toml", "vocab = 128256", "vocabulary = 128256",
                     "field 'vocab': missing", id="missing"),
        pytest.param("models/llama-3.1-8b.toml", 'as_of = "2026-11"',
                     'as_of = "2026-11"\ncolour = "red"', "field 'colour': unknown field",
                     id="unknown-field"),
        pytest.param("models/llama-3.1-8b.toml", "kv_heads = 8", "kv_heads = 5",
                     "layers[0]': field 'kv_heads'", id="heads"),
        pytest.param("gpus/rtx-4090.toml", "bandwidth_gb_s = 1008", 'bandwidth_gb_s = "fast"',
                     "rtx-4090.toml: entry 'rtx-4090': field 'bandwidth_gb_s': expected a number",
                     id="gpu-type"),
        pytest.param("gpus/rtx-4090.toml", 'currency = "CNY"', 'currency = "EUR"',
                     "field 'currency'", id="currency"),
        pytest.param("gpus/rtx-4090.toml", 'key = "rtx-4090"', 'key = "RTX 4090"',
                     "field 'key'", id="key-case"),
        pytest.param("models/llama-3.1-8b.toml", "[[layers]]", "[[layers]\n",
                     "llama-3.1-8b.toml: not valid TOML", id="corrupt"),
    ],
)
def test_bad_entries_are_named(data_copy: Path, file: str, old: str, new: str,
                               message: str) -> None:
    _edit(data_copy / file, old, new)
    with pytest.raises(CatalogError) as info:
        load_catalog(data_copy)
    assert message in str(info.value)


def test_custom_entry_replaces_bundled(data_copy: Path) -> None:
    custom = data_copy / "custom" / "gpus"
    custom.mkdir(parents=True)
    text = (data_copy / "gpus" / "rtx-4090.toml").read_text().replace(
        "price_per_hour = 2.0", "price_per_hour = 1.5")
    (custom / "rtx-4090.toml").write_text(text)
    assert load_catalog(data_copy).gpu("rtx-4090").price_per_hour == 2.0
    assert load_catalog(data_copy, extra_dirs=[data_copy / "custom"]).gpu(
        "rtx-4090").price_per_hour == 1.5
