"""F12 (capacity/model/speculative.py): the cases that mutation testing found unchecked.

`python3 dev.py mutate capacity/model/speculative.py` (docs/testing.md) left these mutants
alive: the draft sizes (one layer's parameters, the head, EAGLE's fusion layer and draft
vocabulary, the bytes per parameter, the KV share of the attention layers) on a model small
enough to size by hand, the depth and acceptance-length bounds and their messages, an
acceptance entered as a rate, the draft's step time on both sides of its roofline with its
knobs and defaults, and the StepModel fields a draft sets. Every expected value is computed by
hand below.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from capacity.catalog.drafts import acceptance_for
from capacity.catalog.loader import Catalog, LayerGroup, ModelVariant
from capacity.errors import InputError
from capacity.model.speculative import (
    Draft,
    acceptance_length_from_rate,
    acceptance_rate_from_length,
    draft_size,
    draft_step_fields,
    draft_step_ms,
    kv_factor,
    layer_params_b,
    make_draft,
    parse_draft,
)

FULL = LayerGroup(kind="full", count=3, kv_heads=8, head_dim=128)
LINEAR = LayerGroup(kind="linear", count=1, state_bytes=1000.0)


def variant(catalog: Catalog, *, tied: bool | None = False,
            groups: tuple[LayerGroup, ...] = (FULL, LINEAR)) -> ModelVariant:
    """A made-up model: vocab 10,000 x hidden 1,000 = 0.01 B for the head (and 0.01 B more
    for an untied input table), 4.02 B in all, 2.02 B active, 4 layers (1 linear), 8.04 GB of
    weights: 2 GB per billion parameters."""
    base = catalog.variant("llama-3.1-8b", "bf16")
    model = dataclasses.replace(base.model, vocab=10_000, hidden=1_000, params_total_b=4.02,
                                params_active_b=2.02, tied_embeddings=tied, layer_groups=groups)
    return dataclasses.replace(base, model=model, weights_gb=8.04)


def test_one_layer_by_hand(catalog: Catalog) -> None:
    # untied: (4.02 - 0.01 - 0.01) / 4 = 1.0 total, (2.02 - 0.02) / 4 = 0.5 active
    assert layer_params_b(variant(catalog).model) == pytest.approx((1.0, 0.5))
    # tied (or unknown): one table of 0.01: (4.02 - 0.01) / 4, (2.02 - 0.01) / 4
    for tied in (True, None):
        assert layer_params_b(variant(catalog, tied=tied).model) == pytest.approx(
            (1.0025, 0.5025))
    # one layer: all of it (less the tables) is the layer
    one = variant(catalog, groups=(dataclasses.replace(FULL, count=1),)).model
    assert layer_params_b(one) == pytest.approx((4.0, 2.0))


def test_mtp_draft_size_by_hand(catalog: Catalog) -> None:
    # one layer's active 0.5 + the head 0.01 per token; one layer's total 1.0 B x 2 GB/B;
    # KV of one attention layer: 1 / (4 - 1 linear) = 1/3
    params, weights, kv = draft_size(variant(catalog), "mtp")
    assert (params, weights, kv) == pytest.approx((0.51, 2.0, 1 / 3))


def test_eagle_draft_size_by_hand(catalog: Catalog) -> None:
    # 0.5 + 3 x 1000^2 / 1e9 (fusion) + 32,000 x 1000 / 1e9 (draft head) = 0.535 B, in BF16
    params, weights, kv = draft_size(variant(catalog), "eagle")
    assert (params, weights, kv) == pytest.approx((0.535, 1.07, 1 / 3))


def test_ngram_draft_has_no_size(catalog: Catalog) -> None:
    assert draft_size(variant(catalog), "ngram") == (0.0, 0.0, 0.0)


def test_kv_share_of_a_one_layer_model(catalog: Catalog) -> None:
    one = variant(catalog, groups=(dataclasses.replace(FULL, count=1),))
    assert draft_size(one, "eagle")[2] == 1.0   # 1 / 1 attention layer
    only_linear = variant(catalog, groups=(LINEAR,))
    assert draft_size(only_linear, "mtp")[2] == 1.0   # 1 / max(1 - 1, 1)


def test_unknown_kind_lists_the_kinds(catalog: Catalog) -> None:
    with pytest.raises(InputError, match=r"^unknown draft kind 'medusa': use mtp, eagle, ngram$"):
        draft_size(variant(catalog), "medusa")


def test_depth_bounds() -> None:
    # alpha 0.5: k 1 -> 1.5; k 16 -> (1 - 0.5^17) / 0.5 = 2 - 2^-16
    assert acceptance_length_from_rate(0.5, 1) == pytest.approx(1.5)
    assert acceptance_length_from_rate(0.5, 16) == pytest.approx(2 - 2 ** -16)
    for bad in (0, 17):
        with pytest.raises(InputError, match=rf"^draft depth must be a whole number 1\.\.16, "
                                             rf"got {bad}$"):
            acceptance_length_from_rate(0.5, bad)


def test_rate_from_length_at_its_bounds() -> None:
    assert acceptance_rate_from_length(1.0, 3) == pytest.approx(0.0, abs=1e-12)   # none kept
    assert acceptance_rate_from_length(4.0, 3) == pytest.approx(1.0, abs=1e-6)    # all kept
    assert acceptance_rate_from_length(2.952, 3) == pytest.approx(0.8)   # 1 + .8 + .64 + .512
    assert acceptance_rate_from_length(1.5, 1) == pytest.approx(0.5)
    for bad in (0.99, 4.5):
        with pytest.raises(InputError, match=rf"^acceptance length must be in \[1, 4\] at depth "
                                             rf"3, got {bad}$"):
            acceptance_rate_from_length(bad, 3)


def test_a_draft_from_a_rate_is_entered(catalog: Catalog) -> None:
    d = make_draft(variant(catalog), "eagle", 3, acceptance_rate=0.8)
    assert d.acceptance_length == pytest.approx(2.952)
    assert d.source == "entered"
    assert (d.params_b, d.weights_gb, d.kv_share) == pytest.approx((0.535, 1.07, 1 / 3))
    assert d == Draft(kind="eagle", depth=3, acceptance_length=d.acceptance_length,
                      params_b=d.params_b, weights_gb=d.weights_gb, kv_share=d.kv_share)
    with pytest.raises(InputError, match=r"^give the acceptance as a length or as a rate, "
                                         r"not both$"):
        make_draft(variant(catalog), "eagle", 3, acceptance_rate=0.8, acceptance_length=2.0)


def test_draft_step_bandwidth_bound_with_knobs() -> None:
    # k 3, W_d 0.8e9 B + 10 x 1e6 B of KV over 1000 GB/s x 0.5 = 1.62 ms; 2 x 0.4e9 x 10 over
    # 100 TFLOP/s x 0.5 = 0.16 ms; 3 x (0.1 + 1.62) = 5.16 ms
    t = draft_step_ms(passes=3, weights_bytes=0.8e9, kv_request_bytes=1e6, params_b=0.4,
                      batch=10, bandwidth_gb_s=1000.0, tflops=100.0, eta_bw=0.5, eff=0.5,
                      pass_overhead_ms=0.1)
    assert float(t) == pytest.approx(5.16)


def test_draft_step_compute_bound_with_knobs() -> None:
    # b 1000: (0.8e9 + 1e9) / 5e11 s = 3.6 ms; 2 x 0.4e9 x 1000 / 5e13 s = 16 ms;
    # 3 x (0.1 + 16) = 48.3 ms
    t = draft_step_ms(passes=3, weights_bytes=0.8e9, kv_request_bytes=1e6, params_b=0.4,
                      batch=1000, bandwidth_gb_s=1000.0, tflops=100.0, eta_bw=0.5, eff=0.5,
                      pass_overhead_ms=0.1)
    assert float(t) == pytest.approx(48.3)


def test_draft_step_defaults() -> None:
    # eta_bw 1, eff 1, no pass overhead: b 1000: 1.8e9 / 1e12 s = 1.8 ms; 8e11 / 1e14 s = 8 ms
    # -> 3 x 8 = 24 ms; b 1: 0.801e9 / 1e12 s = 0.801 ms > 0.008 ms -> 2.403 ms
    t = draft_step_ms(passes=3, weights_bytes=0.8e9, kv_request_bytes=1e6, params_b=0.4,
                      batch=[1000, 1], bandwidth_gb_s=1000.0, tflops=100.0)
    assert t.tolist() == pytest.approx([24.0, 2.403])


def test_step_fields_of_a_draft() -> None:
    d = Draft(kind="eagle", depth=3, acceptance_length=2.5, params_b=0.5, weights_gb=1.6,
              kv_share=0.25)
    f = draft_step_fields(d, tp=2, kv_request_bytes=4000.0)
    assert f["verify_tokens"] == 4.0 and f["accepted_tokens"] == 2.5
    assert f["draft_passes"] == 3.0 and f["draft_params_b"] == 0.5
    assert f["draft_weights_bytes"] == pytest.approx(0.8e9)      # 1.6 GB / TP 2
    assert float(f["draft_kv_request_bytes"]) == pytest.approx(1000.0)   # 4000 x 0.25
    assert draft_step_fields(None, tp=2, kv_request_bytes=4000.0) == {}
    ngram = dataclasses.replace(d, kind="ngram", params_b=0.0, weights_gb=0.0, kv_share=0.0)
    assert draft_step_fields(ngram, tp=1, kv_request_bytes=4000.0)["draft_passes"] == 0.0
    assert kv_factor(d) == 1.25 and kv_factor(None) == 1.0
    assert math.isclose(kv_factor(ngram), 1.0)


def test_layer_under_one_billion_parameters(catalog: Catalog) -> None:
    # 0.82 B in all, 0.52 B active, untied tables of 0.01 B each, 4 layers:
    # (0.82 - 0.02) / 4 = 0.2 and (0.52 - 0.02) / 4 = 0.125
    v = variant(catalog)
    small = dataclasses.replace(v.model, params_total_b=0.82, params_active_b=0.52)
    assert layer_params_b(small) == pytest.approx((0.2, 0.125))


def test_published_acceptance_at_its_depth_and_carried_to_another(catalog: Catalog) -> None:
    v = catalog.variant("llama-3.1-8b", "bf16")
    row = acceptance_for("llama-3.1-8b", "eagle", 7)
    assert row is not None and row.draft_params_b is None and row.draft_weights_gb is None
    at7 = make_draft(v, "eagle", 7)
    assert at7.acceptance_length == row.acceptance_length and at7.source == row.source
    # EAGLE-3 on Llama-3.1-8B (P 8.03 B, vocab 128,256 x hidden 4,096 untied, 32 layers):
    # (8.03 - 2 x 0.525336576) / 32 + 3 x 4096^2 / 1e9 + 32,000 x 4,096 / 1e9 = 0.399508 B,
    # 0.799015 GB in BF16; KV share 1 / 32
    assert (at7.params_b, at7.weights_gb, at7.kv_share) == pytest.approx(
        (0.399508, 0.799015, 1 / 32), rel=1e-5)
    # depth 3: the depth-7 row's per-token rate a carried over: tau = 1 + a + a^2 + a^3
    at3 = make_draft(v, "eagle", 3)
    a = acceptance_rate_from_length(row.acceptance_length, 7)
    assert at3.acceptance_length == pytest.approx(1 + a + a ** 2 + a ** 3)
    assert at3.source == f"{row.source} (depth 7)"
    assert at3.params_b == at7.params_b


def test_no_published_acceptance_asks_for_one(catalog: Catalog) -> None:
    v = catalog.variant("qwen3.5-9b", "awq")
    with pytest.raises(InputError, match=r"^no published acceptance for EAGLE on Qwen3\.5-9B: "
                                         r"enter an acceptance length \(tokens per step\) or "
                                         r"an acceptance rate$"):
        make_draft(v, "eagle", 3)


def test_make_draft_kind_and_tau_bounds(catalog: Catalog) -> None:
    with pytest.raises(InputError, match=r"^unknown draft kind 'medusa': use mtp, eagle, ngram$"):
        make_draft(variant(catalog), " Medusa ", 3)
    # tau = k + 1 (every proposal kept) is allowed
    assert make_draft(variant(catalog), "eagle", 3, acceptance_length=4.0).acceptance_length == 4.0


def test_parse_draft_forms_and_message() -> None:
    for off in ("", " none ", "OFF", "off"):
        assert parse_draft(off) == ("none", 0)
    assert parse_draft(" EAGLE:3 ") == ("eagle", 3)
    with pytest.raises(InputError, match=r"^draft 'medusa:3': write KIND:DEPTH with KIND one of "
                                         r"mtp, eagle, ngram \(e\.g\. eagle:3\), or none$"):
        parse_draft("medusa:3")
