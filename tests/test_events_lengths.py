"""Per-request output lengths in the one-pool event model (`ServiceModel.output_lengths`): a run
whose requests stop at different lengths (a random dataset that draws them, end-of-sequence).
Expected values are computed by hand in each test."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.errors import InputError
from capacity.fit.planning import scenario_with_basis
from capacity.model.scenario import make_scenario
from capacity.plan.closed_loop import closed_loop
from capacity.plan.event_pages import PagedPool
from capacity.plan.events import service_from_scenario, simulate, steady_span_s
from capacity.plan.service import PagedKv, ServiceModel


def _svc(**kw: object) -> ServiceModel:
    """A 10 ms weight read every step, no compute, 0.5 ms a prompt token: a 100-token prompt
    is one 50 ms step in a 200-token budget (max(10 ms read, 50 ms chunk)), mixed steps."""
    base: dict[str, object] = dict(
        slots=2, bandwidth_ms=np.full(5, 10.0), compute_ms=np.zeros(5), comm_ms=np.zeros(5),
        overhead_ms=0.0, prefill_ms=50.0, prompt_tokens=100, output_tokens=3,
        chunk_tokens=200, prefill_cum_ms=0.5 * np.arange(101, dtype=np.float64))
    base.update(kw)
    return ServiceModel(**base)  # type: ignore[arg-type]


def test_each_request_ends_at_its_own_length() -> None:
    """Ten requests alone (a second apart) of 1, 3, 6, 1, 3, ... tokens: each is prefilled in
    one 50 ms step (its first token), then decodes n - 1 steps of 10 ms: E2E 50, 70, 100 ms,
    mean (4 x 50 + 3 x 70 + 3 x 100) / 10 = 71 ms. TPOT over the requests of two or more
    tokens (vLLM's bench): 10 ms each. Tokens 4 x 1 + 3 x 3 + 3 x 6 = 31 over the span
    0 .. 9,050 ms: 3.43 tok/s."""
    svc = _svc(output_lengths=(1, 3, 6))
    assert svc.longest_output_tokens == 6
    assert list(svc.request_outputs(4)) == [1, 3, 6, 1]
    q = simulate(svc, arrivals_ms=[1000.0 * k for k in range(10)], warmup_fraction=0.0)
    assert q.mean_e2e_ms == pytest.approx(71.0)
    assert q.mean_ttft_ms == pytest.approx(50.0)
    assert q.mean_tpot_ms == pytest.approx(10.0)
    assert q.tpot_ms[0.5] == pytest.approx(10.0)
    assert q.output_tok_s == pytest.approx(31 / 9.05)


def test_a_steady_closed_loop_counts_its_throughput_by_the_loops_cycle() -> None:
    """Two clients out of step (`closed_loop`), lengths 2, 5 and 50 in turn: each client
    always waits on one request, so the loop completes C requests per mean end-to-end time and
    its throughput is the counted requests' tokens over sum(E2E) / C (`steady_span_s`; C = 2
    requests of 2,000 and 4,000 ms take 3 s of the loop), every client busy all along (mean
    running = C). The span from the first counted arrival to the last counted finish, which
    it replaces, ends with the slowest counted request while later, uncounted ones run beside
    it, and reads low."""
    svc = _svc(output_lengths=(2, 5, 50))
    q = closed_loop(svc, concurrency=2, n_requests=240)
    counted = svc.request_outputs(240)[int(240 * 0.2):240 - 2]
    sum_e2e_s = q.mean_e2e_ms * counted.size / 1e3
    assert q.output_tok_s == pytest.approx(float(np.sum(counted)) / (sum_e2e_s / 2), rel=1e-9)
    assert q.throughput_req_s == pytest.approx(2 / (q.mean_e2e_ms / 1e3), rel=1e-9)
    assert q.mean_running == pytest.approx(2.0, rel=1e-9)
    assert steady_span_s(np.array([2000.0, 4000.0]), 2) == pytest.approx(3.0)


def test_a_closed_loop_sends_again_when_each_request_ends() -> None:
    """One client, lengths 2 and 5 in turn: requests of 50 + 10 = 60 ms and 50 + 40 = 90 ms
    back to back; ten of them span 5 x 60 + 5 x 90 = 750 ms and carry 35 tokens: 46.7 tok/s,
    mean E2E 75 ms, TPOT 10 ms: every request meets a 10 ms TPOT SLO."""
    q = simulate(_svc(output_lengths=(2, 5)), concurrency=1, n_requests=10,
                 warmup_fraction=0.0, slo_tpot_ms=10.0)
    assert q.mean_e2e_ms == pytest.approx(75.0)
    assert q.output_tok_s == pytest.approx(35 / 0.75)
    assert q.mean_tpot_ms == pytest.approx(10.0)
    assert q.slo_met_share == pytest.approx(1.0)


def test_a_phased_loop_starts_a_one_token_request_afresh() -> None:
    """Out of step (`phased`), client k's first request has part of its decode left; a
    one-token request has none, so it waits to be prefilled at 0 like a new one. Two clients
    with lengths 1 and 4: request 0 (1 token) is prefilled 0..50 and ends; request 1 starts
    with ceil(3 x 2 / 2) = 3 tokens left and runs beside it."""
    q = simulate(_svc(output_lengths=(1, 4)), concurrency=2, n_requests=20, phased=True,
                 warmup_fraction=0.0)
    assert q.requests == 18   # the last C are left out
    assert np.isfinite(q.mean_e2e_ms)


def test_equal_lengths_are_the_fixed_output() -> None:
    """Every request at `output_tokens` given as lengths is the run without them, to the bit
    (Qwen3-8B on an H100, vLLM's paged pool, a closed loop of 24)."""
    s = scenario_with_basis(make_scenario("qwen3-8b", "h100-sxm", prompt_tokens=1000,
                                          context_tokens=1256), "typical:vllm")
    fixed = service_from_scenario(s, output_tokens=256, engine="vllm")
    same = service_from_scenario(s, output_tokens=256, engine="vllm", output_lengths=[256] * 7)
    a = simulate(fixed, concurrency=24, n_requests=300, phased=True)
    b = simulate(same, concurrency=24, n_requests=300, phased=True)
    assert (a.ttft_ms, a.tpot_ms, a.e2e_ms, a.output_tok_s) == (b.ttft_ms, b.tpot_ms, b.e2e_ms,
                                                                b.output_tok_s)
    assert b.mean_tpot_ms == pytest.approx((b.mean_e2e_ms - b.mean_ttft_ms) / 255)


def test_the_reserve_is_each_requests_own_output() -> None:
    """SGLang's reserve of the output still to come (`reserve_output_share` 0.5) counts each
    request's own length: 1 B a token in 4-token pages; a request holding 6 tokens with 1
    token to come reserves ceil(0.5) = 1 more (7 tokens: 8 B), one with 5 to come reserves 3
    (9 tokens: 12 B)."""
    t = np.arange(0, 20)
    paged = PagedKv(pool_bytes=100.0, held_bytes=4.0 * np.ceil(t / 4.0), shared_bytes=0.0,
                    block_tokens=4, reserve_output_share=0.5, max_batch=3,
                    bandwidth_ms=np.full(4, 10.0), compute_ms=np.zeros(4), comm_ms=np.zeros(4),
                    serial_ms=np.zeros(4), prefill_cum_ms=np.arange(15, dtype=np.float64))
    svc = _svc(output_lengths=(1, 5), paged=paged)
    pages = PagedPool(svc, 2, np.zeros(2, dtype=bool))
    pages.held[:] = 6
    assert pages.claim([0]) == 8.0
    assert pages.claim([1]) == 12.0


def test_lengths_that_do_not_fit_say_so() -> None:
    s = make_scenario("qwen3-8b", "h100-sxm", prompt_tokens=1000, context_tokens=1256)
    with pytest.raises(InputError, match="the longest prompt, 1,000 tokens, and 300 output"):
        service_from_scenario(s, output_tokens=256, engine="vllm", output_lengths=[200, 300])
    with pytest.raises(InputError, match="output lengths"):
        service_from_scenario(s, output_tokens=256, engine="vllm", output_lengths=[0, 256])
    with pytest.raises(InputError, match="output lengths"):
        _svc(output_lengths=())
