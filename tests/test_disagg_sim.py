"""The two-pool event model against the simulated endpoint run disaggregated (issue 27): two
prefill-only and decode-only simulated engines and a transfer delay, in virtual time, agree
within 5 % on TTFT and TPOT p50 and p90 at two loads."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.model.scenario import make_scenario
from capacity.plan.events_disagg import simulate_two_pools, two_pools
from capacity.sim.disagg import poisson_arrivals_s, run_disaggregated
from capacity.sim.scheduler import SimConfig

P, N, REQUESTS = 2048, 64, 500
TRANSFER_MS, LATENCY_MS = 6.0, 1.0


@pytest.mark.parametrize(("engine", "load"), [("vllm", 0.3), ("vllm", 0.8), ("chapter", 0.8)])
@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_event_model_agrees_with_the_simulated_endpoint(engine: str, load: float) -> None:
    s = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=P + N, prompt_tokens=P)
    pools = two_pools(s, s, output_tokens=N, transfer_ms=TRANSFER_MS,
                      transfer_latency_ms=LATENCY_MS, prefill_replicas=1, decode_replicas=2,
                      engine=engine)
    rate = load * 1e3 / pools.prefill.prefill_ms   # of the prefill replica's capacity
    model = simulate_two_pools(pools, rate_per_s=rate, n_requests=REQUESTS, warmup_fraction=0.0)
    run = run_disaggregated(s, s, prompt_tokens=P, output_tokens=N,
                            arrivals_s=poisson_arrivals_s(rate, REQUESTS), prefill_engines=1,
                            decode_engines=2, transfer_s=TRANSFER_MS / 1e3,
                            transfer_latency_s=LATENCY_MS / 1e3, config=SimConfig(engine=engine))
    for name, measured, predicted in (("TTFT", run.ttft_ms, model.ttft_ms),
                                      ("TPOT", run.tpot_ms, model.tpot_ms)):
        for q in (0.5, 0.9):
            m = float(np.quantile(measured, q))
            assert predicted[q] == pytest.approx(m, rel=0.05), (name, q, predicted[q], m)
