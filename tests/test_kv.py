"""F1-F2: KV bytes per token and per request, against the reference configs and as properties."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.model.kv import heads_per_rank, kv_bytes_per_token, kv_request_bytes
from capacity.units import bytes_per_element

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference" / "models.csv"
"""data/reference/models.csv (config.json facts with sources), shipped as data."""


def _reference_rows() -> list[dict[str, str]]:
    with REFERENCE.open() as fh:
        return [r for r in csv.DictReader(fh) if r["kv_bytes_per_token_bf16"]]


def _key(name: str) -> str:
    return name.lower()


@pytest.mark.parametrize("row", _reference_rows(), ids=lambda r: r["model"])
def test_kv_per_token_matches_reference_config(catalog: Catalog, row: dict[str, str]) -> None:
    """data/reference/models.csv, column kv_bytes_per_token_bf16 (from each config.json)."""
    model = catalog.models[_key(row["model"])]
    assert kv_bytes_per_token(model, "bf16").bytes_per_token == float(
        row["kv_bytes_per_token_bf16"])


def test_reference_file_is_read() -> None:
    assert len(_reference_rows()) >= 10


def test_every_reference_model_is_in_the_catalog(catalog: Catalog) -> None:
    with REFERENCE.open() as fh:
        names = [_key(r["model"]) for r in csv.DictReader(fh)]
    assert set(names) <= set(catalog.models)


def test_standard_14b_is_160_kib(catalog: Catalog) -> None:
    """Seed: a standard 14B model (Qwen3-14B) is 160 KiB/token."""
    assert kv_bytes_per_token(catalog.models["qwen3-14b"]).bytes_per_token == 160 * 1024


def test_gemma_sliding_layers_cap_at_window(catalog: Catalog) -> None:
    """Gemma-3-27B: 10 full layers x L + 52 sliding layers x min(L, 1024), 8 KiB per layer."""
    m = catalog.models["gemma-3-27b"]
    per_layer = 2 * 16 * 128 * 2
    kv = kv_request_bytes(m, [512, 32768], "bf16", block_size=1)
    assert kv.exact_bytes[0] == 62 * per_layer * 512
    assert kv.exact_bytes[1] == 10 * per_layer * 32768 + 52 * per_layer * 1024


def test_deepseek_mla_is_one_latent(catalog: Catalog) -> None:
    m = catalog.models["deepseek-v3"]
    assert kv_bytes_per_token(m, "bf16").bytes_per_token == 61 * (512 + 64) * 2
    # MLA keeps the latent on every TP rank
    assert kv_bytes_per_token(m, "bf16", tp=8).bytes_per_token == 61 * (512 + 64) * 2


def test_tp_splits_kv_heads_and_replicates_below_one(catalog: Catalog) -> None:
    m = catalog.models["llama-3.1-8b"]  # 8 KV heads
    full = kv_bytes_per_token(m).bytes_per_token
    assert kv_bytes_per_token(m, tp=2).bytes_per_token == full / 2
    assert kv_bytes_per_token(m, tp=8).bytes_per_token == full / 8
    assert heads_per_rank(8, 16) == 1.0


def test_paged_rounding_rounds_up_to_blocks(catalog: Catalog) -> None:
    m = catalog.models["llama-3.1-8b"]
    kv = kv_request_bytes(m, 1000, "fp16", block_size=16)
    assert float(kv.exact_bytes) == 131072 * 1000
    assert float(kv.paged_bytes) == 131072 * 1008


def test_linear_state_is_per_request(catalog: Catalog) -> None:
    import dataclasses

    m = catalog.models["qwen3.5-9b"]
    groups = tuple(dataclasses.replace(g, state_bytes=1e6) if g.kind == "linear" else g
                   for g in m.layer_groups)
    m2 = dataclasses.replace(m, layer_groups=groups)
    a = kv_request_bytes(m2, [1024, 2048], block_size=1).exact_bytes
    b = kv_request_bytes(m, [1024, 2048], block_size=1).exact_bytes
    np.testing.assert_allclose(a - b, 24e6)


def test_bad_inputs_raise_input_error(catalog: Catalog) -> None:
    m = catalog.models["llama-3.1-8b"]
    with pytest.raises(InputError, match="context length"):
        kv_request_bytes(m, 0)
    with pytest.raises(InputError, match="unknown precision"):
        kv_bytes_per_token(m, "fp12")
    with pytest.raises(InputError, match="block size"):
        kv_request_bytes(m, 10, block_size=0)


def test_int4_is_half_a_byte_never_zero() -> None:
    assert bytes_per_element("int4") == 0.5
    assert bytes_per_element("fp4") == 0.5


models = st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3", "qwen2.5-7b"])


@settings(max_examples=40, deadline=None)
@given(key=models, tokens=st.integers(1, 200_000), k=st.integers(2, 8))
def test_kv_linear_in_tokens_for_full_attention(catalog: Catalog, key: str, tokens: int,
                                                k: int) -> None:
    m = catalog.models[key]
    a = float(kv_request_bytes(m, tokens, block_size=1).exact_bytes)
    b = float(kv_request_bytes(m, tokens * k, block_size=1).exact_bytes)
    assert b == pytest.approx(k * a)


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(["gemma-3-27b", "gpt-oss-20b", "gpt-oss-120b"]),
       tokens=st.integers(1, 500_000), more=st.integers(1, 500_000))
def test_kv_sliding_part_is_capped(catalog: Catalog, key: str, tokens: int, more: int) -> None:
    m = catalog.models[key]
    small = kv_request_bytes(m, tokens, block_size=1).by_kind_bytes["sliding"]
    big = kv_request_bytes(m, tokens + more, block_size=1).by_kind_bytes["sliding"]
    window = max(g.window_tokens for g in m.layer_groups)
    per_tok = kv_bytes_per_token(m).by_kind_bytes["sliding"]
    assert float(small) <= float(big) <= per_tok * window


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(["llama-3.1-8b", "gemma-3-27b", "deepseek-v3", "qwen3.5-9b"]),
       tokens=st.integers(1, 300_000))
def test_fp8_exactly_halves_and_int4_quarters(catalog: Catalog, key: str, tokens: int) -> None:
    m = catalog.models[key]
    f16 = float(kv_request_bytes(m, tokens, "fp16").exact_bytes)
    assert float(kv_request_bytes(m, tokens, "fp8").exact_bytes) == f16 / 2
    assert float(kv_request_bytes(m, tokens, "int4").exact_bytes) == f16 / 4
