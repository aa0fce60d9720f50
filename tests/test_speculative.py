"""F12, speculative decoding: the step, the speed-up by hand, the bound, memory and the event model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.model.roofline import StepMethod, StepModel, breakeven_batch
from capacity.model.scenario import decode_model, evaluate, make_scenario
from capacity.model.speculative import (
    acceptance_length_from_rate,
    acceptance_rate_from_length,
    draft_size,
    make_draft,
    parse_draft,
    speedup,
)
from capacity.plan.events import service_from_scenario, simulate


def _plain() -> StepModel:
    # W 16 GB at 1000 GB/s = 16 ms; 2 x 8e9 FLOP per sequence at 100 TFLOP/s = 0.16 ms
    return StepModel(weights_bytes=16e9, kv_request_bytes=0.0, bandwidth_gb_s=1000.0,
                     tflops=100.0, params_active_b=8.0)


def _drafted(tau: float = 2.5) -> StepModel:
    # k = 3: verify 4 tokens; the draft reads 0.8 GB (0.8 ms) and multiplies 0.4 B per token
    return dataclasses.replace(_plain(), verify_tokens=4.0, accepted_tokens=tau,
                               draft_passes=3.0, draft_weights_bytes=0.8e9,
                               draft_params_b=0.4)


def test_acceptance_length_from_rate_by_hand() -> None:
    assert acceptance_length_from_rate(0.8, 3) == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    assert acceptance_length_from_rate(1.0, 4) == 5.0
    assert acceptance_length_from_rate(0.0, 4) == 1.0
    assert acceptance_rate_from_length(2.952, 3) == pytest.approx(0.8, abs=1e-9)
    with pytest.raises(InputError, match="rate"):
        acceptance_length_from_rate(1.2, 3)
    with pytest.raises(InputError, match="depth"):
        acceptance_length_from_rate(0.5, 0)


def test_step_at_batch_one_by_hand() -> None:
    # verify max(16, 4 x 0.16) = 16 ms; draft 3 x max(0.8, 0.008) = 2.4 ms; / tau 2.5 = 7.36 ms
    d = _drafted()
    assert float(d.draft_ms(1.0)) == pytest.approx(2.4)
    assert float(d.step_ms(1.0)) == pytest.approx(18.4 / 2.5)
    assert float(speedup(_plain().step_ms(1.0), d.step_ms(1.0))) == pytest.approx(16 / 7.36)
    dec = d.decode([1.0])
    assert float(dec.engine_step_ms[0]) == pytest.approx(18.4)
    assert float(dec.aggregate_tok_s[0]) == pytest.approx(2.5 * 1000 / 18.4)


def test_step_past_the_ridge_by_hand() -> None:
    # b = 200: plain max(16, 32) = 32 ms; verify max(16, 4 x 32) = 128 ms; draft
    # 3 x max(0.8, 0.008 x 200) = 4.8 ms; (128 + 4.8) / 2.5 = 53.12 ms: the draft costs 40%
    d = _drafted()
    assert float(_plain().step_ms(200.0)) == pytest.approx(32.0)
    assert float(d.step_ms(200.0)) == pytest.approx(132.8 / 2.5)
    assert float(speedup(_plain().step_ms(200.0), d.step_ms(200.0))) == pytest.approx(32 / 53.12)
    # it stops paying where (max(16, 0.64 b) + 3 max(0.8, 0.008 b)) / 2.5 >= max(16, 0.16 b):
    # 0.64 b + 2.4 >= 40 -> b >= 58.75 (the plain step is 16 ms there)
    assert breakeven_batch(_plain(), d) == 59
    assert breakeven_batch(_plain(), _drafted(tau=4.0)) is None or \
        breakeven_batch(_plain(), _drafted(tau=4.0)) > 59


def test_step_parts_keep_their_sum_with_a_draft() -> None:
    d = dataclasses.replace(_drafted(), overhead_ms=1.5, comm_fixed_ms=0.4, comm_per_seq_ms=0.01)
    b = np.array([1.0, 8.0, 64.0, 300.0])
    p = d.parts(b)
    comm = d.comm_ms(b)
    assert np.allclose(p.step_ms, 1.5 + np.maximum(p.bandwidth_ms, p.compute_ms) + comm
                       + p.serial_ms)
    # the all-reduce carries k + 1 tokens per sequence
    assert np.allclose(comm, 0.4 + 0.01 * b * 4)


def test_moe_touches_the_experts_of_every_verified_token() -> None:
    moe = StepModel(weights_bytes=100e9, kv_request_bytes=0.0, bandwidth_gb_s=1000.0,
                    tflops=100.0, params_active_b=3.0, expert_fraction=0.9, experts=128,
                    active_experts=8)
    drafted = dataclasses.replace(moe, verify_tokens=3.0)
    assert np.allclose(drafted.weight_read_bytes(np.asarray(2.0)),
                       moe.weight_read_bytes(np.asarray(6.0)))


def _scenario(**kw: object):
    return make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=2048, **kw)


def test_spec_sheet_stays_an_upper_bound_with_a_draft() -> None:
    cat = default_catalog()
    d = make_draft(cat.variant("llama-3.1-8b"), "eagle", 3, acceptance_length=3.0)
    b = [1, 4, 16, 64, 256]
    bound = evaluate(_scenario(step_method=StepMethod.BOUND.value, draft=d), b).tpot_ms
    for kw in ({}, {"eff": 0.4, "eta_bw": 0.7, "step_overhead_ms": 2.0},
               {"step_method": "operator", "eta_bw": 0.8, "seq_overhead_ms": 0.05}):
        other = evaluate(_scenario(draft=d, **kw), b).tpot_ms
        assert np.all(bound <= other + 1e-12), kw


def test_speedup_falls_with_the_batch_at_typical_efficiency() -> None:
    cat = default_catalog()
    d = make_draft(cat.variant("llama-3.1-8b"), "eagle", 3, acceptance_length=3.0)
    b = [1, 8, 64, 256]
    plain = evaluate(_scenario(eff=0.3), b).tpot_ms
    spec = evaluate(_scenario(eff=0.3, draft=d), b).tpot_ms
    up = plain / spec
    assert up[0] > 2.0
    assert np.all(np.diff(up[1:]) < 0)  # past a few sequences the verify pass turns compute-bound
    assert up[-1] < 0.6 * up[0]
    # short contexts (little KV to read): the arithmetic of k + 1 tokens soon costs more than
    # tau tokens win
    short = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=256, eff=0.3)
    kv = float(evaluate(short, [1]).kv_request.exact_bytes)
    end = breakeven_batch(decode_model(short, kv), decode_model(short.with_(draft=d), kv))
    assert end is not None and 64 < end < 4096


def test_draft_weights_and_kv_take_memory() -> None:
    cat = default_catalog()
    v = cat.variant("llama-3.1-8b")
    d = make_draft(v, "eagle", 3, acceptance_length=3.0)
    params, weights, share = draft_size(v, "eagle")
    assert weights == pytest.approx(params * 2.0)
    assert share == pytest.approx(1 / 32)
    plain = evaluate(_scenario(), [1])
    spec = evaluate(_scenario(draft=d), [1])
    kv = float(plain.kv_request.exact_bytes)
    budget_lost = weights * 1e9
    expected = int((float(plain.vram.kv_budget_bytes) - budget_lost) // (kv * (1 + share)))
    assert int(spec.max_concurrency_vram) == expected
    assert int(spec.max_concurrency_vram) < int(plain.max_concurrency_vram)
    # an n-gram draft holds nothing on the GPU
    ng = make_draft(v, "ngram", 4, acceptance_length=2.0)
    assert int(evaluate(_scenario(draft=ng), [1]).max_concurrency_vram) == \
        int(plain.max_concurrency_vram)


def test_make_draft_rejects_bad_input() -> None:
    v = default_catalog().variant("llama-3.1-8b")
    with pytest.raises(InputError, match="kind"):
        make_draft(v, "medusa", 3, acceptance_length=2.0)
    with pytest.raises(InputError, match=r"\[1, 4\]"):
        make_draft(v, "eagle", 3, acceptance_length=4.5)
    with pytest.raises(InputError, match="not both"):
        make_draft(v, "eagle", 3, acceptance_length=2.0, acceptance_rate=0.5)
    assert parse_draft("EAGLE:3") == ("eagle", 3)
    assert parse_draft("none") == ("none", 0)
    for bad in ("eagle", "eagle:x", "foo:2", "eagle:99"):
        with pytest.raises(InputError):
            parse_draft(bad)


def test_event_model_mean_tpot_follows_the_per_token_step() -> None:
    cat = default_catalog()
    d = make_draft(cat.variant("llama-3.1-8b"), "eagle", 3, acceptance_length=2.8)
    s = _scenario(draft=d, eff=0.3, prompt_tokens=64)
    svc = service_from_scenario(s, output_tokens=512, chunk_tokens=None)
    q = simulate(svc, concurrency=8, n_requests=64, warmup_fraction=0.25)
    step = float(decode_model(s, float(evaluate(s, [1]).kv_request.exact_bytes)).step_ms(8.0))
    assert q.tpot_ms[0.5] == pytest.approx(step, rel=0.05)
