"""The saturation rate of a replica (`ServiceModel.saturation_rate_per_s`) under mixed steps
(vLLM V1, llama.cpp): a prompt chunk shares the decode step's forward pass, so it costs the
GPU only what its arithmetic adds over the weight read (issue 32). Expected values are
computed by hand in each test."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.plan.events import ServiceModel, simulate


def _svc(**kw: object) -> ServiceModel:
    # 100-token prompts of 50 ms (0.5 ms a token, linear), 2 output tokens, 2 slots
    k = np.arange(101, dtype=np.float64)
    base: dict[str, object] = dict(
        slots=2, bandwidth_ms=np.full(3, 10.0), compute_ms=np.zeros(3), comm_ms=np.zeros(3),
        overhead_ms=0.0, prefill_ms=50.0, prompt_tokens=100, output_tokens=2,
        chunk_tokens=64, prefill_cum_ms=0.5 * k)
    base.update(kw)
    return ServiceModel(**base)  # type: ignore[arg-type]


def test_taking_turns_by_hand() -> None:
    # no budget: each request costs 50 ms of prefill + 1 x 10 ms / 2 slots of decode
    svc = _svc(chunk_tokens=None, prefill_cum_ms=None)
    assert svc.saturation_rate_per_s == pytest.approx(1e3 / 55.0)
    assert svc.mixed_saturation_rate_per_s == 0.0
    # SGLang's budget pauses decoding: the same turns
    assert _svc(mixed=False).saturation_rate_per_s == pytest.approx(1e3 / 55.0)


def test_a_chunk_rides_in_the_decode_step_by_hand() -> None:
    # b = 0: no decode to pace prompts (c = 0); b = 1: c = min(1 x 100 / 1, 64 - 1, (2 - 1) x
    # 100) = 63 tokens = 31.5 ms of prefill, over the 10 ms weight read: a 31.5 ms step that
    # retires 0.63 requests -> 20 req/s; b = 2: no slot left for a prompt (c = 0)
    svc = _svc()
    assert svc.mixed_saturation_rate_per_s == pytest.approx(0.63 / 31.5e-3)
    assert svc.saturation_rate_per_s == pytest.approx(20.0)
    # a 40 ms weight read hides the chunk: 0.63 requests per 40 ms = 15.75 req/s, where
    # taking turns would give 1 / (50 + 40 / 2 ms) = 14.29 req/s
    slow = _svc(bandwidth_ms=np.full(3, 40.0))
    assert slow.saturation_rate_per_s == pytest.approx(15.75)


def test_one_slot_cannot_overlap() -> None:
    # one slot: a request reading its prompt holds it, so decode and prefill take turns
    svc = _svc(slots=1, bandwidth_ms=np.full(2, 10.0), compute_ms=np.zeros(2),
               comm_ms=np.zeros(2), chunk_tokens=64)
    assert svc.mixed_saturation_rate_per_s == 0.0
    assert svc.saturation_rate_per_s == pytest.approx(1e3 / 60.0)


def test_output_of_one_token_is_prefill_alone() -> None:
    # 1 output token: no decode; each step carries min(64, 2 x 100) = 64 prompt tokens, 32 ms:
    # 0.64 requests per 32 ms = 20 req/s (whole prompts: 1 / 50 ms = 20 req/s too)
    svc = _svc(output_tokens=1)
    assert svc.mixed_saturation_rate_per_s == pytest.approx(0.64 / 32e-3)


def test_a_prefix_hit_lowers_the_prompt_to_read() -> None:
    # 40 of 100 tokens cached for half the requests: P = 100 - 0.5 x 40 = 80 tokens; a hit's
    # prefill is 30 ms (60 tokens x 0.5), a miss's 50: mean work 40 ms. b = 1: c = min(80, 63,
    # 80) = 63 tokens, 63 / 80 x 40 = 31.5 ms: 63 / 80 requests per 31.5 ms = 25 req/s
    svc = _svc(cached_tokens=40, prefix_share=0.5, hit_prefill_ms=30.0)
    assert svc.new_prompt_tokens == pytest.approx(80.0)
    assert svc.prefill_work_ms(64) == pytest.approx(40.0)
    assert svc.mixed_saturation_rate_per_s == pytest.approx((63 / 80) / 31.5e-3)


def test_prefill_work_moves_to_the_pass_efficiency() -> None:
    # a 1,000-token miss of 130 ms alone, 60 ms of it MFU-bound at the plateau, m_half 500: in
    # passes of 2,000 tokens 130 + 60 x (slowdown(2000) - slowdown(1000)), slowdown(m) =
    # (1 + (500 / m)^2.5)^0.4 - 1: 130 + 60 x (0.012377 - 0.067278) = 126.706 ms
    def slowdown(m: float) -> float:
        return float((1 + (500 / m) ** 2.5) ** 0.4 - 1)

    k = np.arange(1001, dtype=np.float64)
    svc = _svc(prompt_tokens=1000, prefill_ms=130.0, prefill_mfu_ms=60.0, mfu_half_tokens=500,
               chunk_tokens=2048, prefill_cum_ms=0.1 * k)
    assert svc.prefill_work_ms(2000) == pytest.approx(130 + 60 * (slowdown(2000) - slowdown(1000)))
    assert svc.prefill_work_ms(2000) == pytest.approx(126.706, abs=1e-3)
    assert svc.mean_prefill_ms == pytest.approx(130 + 60 * (slowdown(2048) - slowdown(1000)))


def test_a_rate_under_the_mixed_ceiling_keeps_a_finite_queue() -> None:
    # 18.9 req/s is past the taking-turns ceiling (18.2) but under the mixed one (20): the
    # event loop's mixed steps keep up, so the second half of the requests waits about as long
    # as the first half (a queue growing without bound would double it)
    svc = _svc(slots=4, bandwidth_ms=np.full(5, 10.0), compute_ms=np.zeros(5),
               comm_ms=np.zeros(5))
    assert svc.saturation_rate_per_s > 18.9
    arrivals = np.arange(4000) * (1e3 / 18.9)
    res = simulate(svc, arrivals_ms=arrivals.tolist(), warmup_fraction=0.0)
    assert not res.saturated
    half = simulate(svc, arrivals_ms=arrivals[:2000].tolist(), warmup_fraction=0.0)
    assert res.mean_queue_ms < 2.0 * half.mean_queue_ms + 50.0
