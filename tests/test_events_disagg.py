"""The two-pool event model (issue 27): one request alone by hand, link contention, and the
closed loop."""

from __future__ import annotations

import pytest

from capacity.errors import InputError
from capacity.model.scenario import make_scenario
from capacity.plan.events_disagg import simulate_two_pools, two_pools

P, N = 2048, 64


def _pools(engine: str, transfer_ms: float = 6.0, decode_replicas: int = 1):
    s = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=P + N, prompt_tokens=P)
    return two_pools(s, s, output_tokens=N, transfer_ms=transfer_ms, transfer_latency_ms=1.0,
                     prefill_replicas=1, decode_replicas=decode_replicas, engine=engine)


@pytest.mark.parametrize("engine", ["chapter", "vllm"])
def test_one_request_alone_by_hand(engine: str) -> None:
    pools = _pools(engine)
    r = simulate_two_pools(pools, rate_per_s=0.01, n_requests=10, warmup_fraction=0.0)
    d = pools.decode
    if engine == "chapter":   # a one-token prefill pass, then decode steps at batch 1
        join = pools.join_ms
    else:                      # the last prompt token rides in the first decode step
        join = float(d.mixed_step_ms(0, [(P - 1, 1)]))
    ttft = pools.prefill.prefill_ms + 6.0 + join
    assert r.ttft_ms[0.5] == pytest.approx(ttft, rel=1e-9)
    assert r.tpot_ms[0.5] == pytest.approx(float(d.step_ms[1]), rel=1e-9)
    assert r.transfer_wait_ms[0.9] == pytest.approx(0.0, abs=1e-9)
    assert r.prefill_wait_ms[0.5] == pytest.approx(0.0, abs=1e-9)


def test_a_slow_link_queues_hand_overs() -> None:
    # a 200 ms hand-over at 4 req/s: the link is 80 % busy (rho = 4 x 0.199 s), so
    # hand-overs wait for one another; an idle-link case waits for nothing
    busy = simulate_two_pools(_pools("vllm", transfer_ms=200.0, decode_replicas=1),
                              rate_per_s=4.0, n_requests=800)
    idle = simulate_two_pools(_pools("vllm", transfer_ms=2.0, decode_replicas=1),
                              rate_per_s=4.0, n_requests=800)
    assert busy.transfer_wait_ms[0.9] > 200.0 > idle.transfer_wait_ms[0.9]
    assert busy.ttft_ms[0.5] > idle.ttft_ms[0.5] + 198.0


def test_closed_loop_runs_every_request() -> None:
    r = simulate_two_pools(_pools("vllm", decode_replicas=2), concurrency=8, n_requests=200)
    assert r.requests == 180 and r.tpot_ms[0.5] > 0 and r.throughput_req_s > 0


def test_a_run_of_lengths_that_stop_at_eos_by_hand() -> None:
    """One client, the chapter's engine, each request its own length n_i: every request runs
    alone (TTFT = prefill + hand-over + one-token pass, then n_i - 1 steps at batch 1), so the
    run lasts sum(TTFT + (n_i - 1) x step), its output rate is sum(n_i) over that, and its TPOT
    is the step, averaged over the requests of two or more tokens only (vLLM bench's)."""
    pools = _pools("chapter")
    n = [3, 1, 5, 2, 4, 1, 6, 2, 3, 1]
    r = simulate_two_pools(pools, concurrency=1, n_requests=10, warmup_fraction=0.0,
                           output_lengths=n)
    ttft = pools.prefill.prefill_ms + 6.0 + pools.join_ms
    step = float(pools.decode.step_ms[1])
    span_ms = sum(ttft + (k - 1) * step for k in n)
    assert r.mean_ttft_ms == pytest.approx(ttft, rel=1e-9)
    assert r.mean_tpot_ms == pytest.approx(step, rel=1e-9)
    assert r.mean_e2e_ms == pytest.approx(span_ms / 10, rel=1e-9)
    assert r.output_tok_s == pytest.approx(sum(n) / (span_ms / 1e3), rel=1e-9)
    with pytest.raises(InputError):
        simulate_two_pools(pools, concurrency=1, n_requests=10, output_lengths=n[:9])
    with pytest.raises(InputError):
        simulate_two_pools(pools, concurrency=1, n_requests=10, output_lengths=[0] * 10)
