"""The model against the simulated endpoint's own scheduler, in virtual time.

1. The simulator runs with known efficiencies (a Scenario carrying eta_bw, step overhead, MFU
   and prefill overhead); a sweep of bursts is run on it and `calibration.fit` recovers the
   knobs from what it measured.
2. The planner's discrete-event queueing model (`capacity.plan.queueing`) predicts the
   endpoint's TTFT under Poisson arrivals (light and heavy prefill load) and in a burst (a
   closed loop with twice as many clients as slots). Both prefill every prompt admitted at one
   scheduling point in one batch, whose prompts all get their first token when it ends.

Both run the endpoint's scheduler (`capacity.sim.scheduler`, the one behind `capacity sim-server`)
on its virtual clock (`run_virtual`): it jumps from event to event and never sleeps, so the
numbers are the same on an idle laptop and on a loaded 2-core CI machine, and the tolerances
are the models' own differences, not a busy machine's noise (these tests used to run the
endpoint in real time over HTTP, with retries, and still failed about one run in three under
load). What only real time can test (the benchmark client's own timing error) is in
tests/test_bench_e2e.py, marked `timing`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from capacity.fit.calibration import fit
from capacity.fit.measured import MeasuredPoint
from capacity.model.scenario import Scenario, make_scenario
from capacity.plan.events import service_from_scenario, simulate
from capacity.sim.scheduler import SimConfig
from capacity.sim.virtual import Workload, run_virtual

KNOWN = {"eta_bw": 0.7, "step_overhead_ms": 1.5, "mfu": 0.45, "prefill_overhead_ms": 20.0}


def point(truth: list[dict[str, Any]], concurrency: int, label: str) -> MeasuredPoint:
    """One level of a sweep as a bench summary would give it: medians of the requests' TTFT
    and TPOT, aggregate output throughput over the level's span."""
    start = min(r["arrival_s"] for r in truth)
    end = max(r["arrival_s"] + r["e2e_ms"] / 1e3 for r in truth)
    prompt = float(np.mean([r["prompt_tokens"] for r in truth]))
    output = float(np.mean([r["output_tokens"] for r in truth]))
    return MeasuredPoint(concurrency=concurrency, context_tokens=int(prompt + output),
                         prompt_tokens=prompt, output_tokens=output,
                         tpot_ms=float(np.median([r["tpot_ms"] for r in truth])),
                         ttft_ms=float(np.median([r["ttft_ms"] for r in truth])),
                         output_tok_s=sum(r["output_tokens"] for r in truth) / (end - start),
                         source=label)


def sweep(scenario: Scenario, prompt_tokens: int, levels: tuple[int, ...],
          output_tokens: int) -> list[MeasuredPoint]:
    """Each level is one burst of `concurrency` requests (two one after the other at C=1), so
    every request decodes in a batch of exactly that size."""
    return [point(run_virtual(scenario, Workload(prompt_tokens=prompt_tokens,
                                                 output_tokens=output_tokens,
                                                 requests=max(c, 2), clients=c)),
                  c, f"p{prompt_tokens}-c{c}")
            for c in levels]


def test_calibration_recovers_the_simulators_known_efficiencies() -> None:
    # Llama-3.1-8B BF16 on an H100: KV is large next to the weights, so 12K-token contexts at
    # concurrency 4 move 40% more bytes per step and separate bandwidth efficiency from the
    # per-step overhead; the long prompts' prefill is compute-bound and shows MFU.
    base = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=12100)
    sim = base.with_(**KNOWN)
    pts = sweep(sim, 200, (1, 4), 48) + sweep(sim, 12000, (1, 4), 48)
    cal = fit(pts, base, name="sim")
    # what is left is the simulator's 16-token context buckets and the sweep's mean context
    # (the fit sees one context per point): well under 1% on every knob
    assert cal.eta_bw == pytest.approx(KNOWN["eta_bw"], rel=0.02)
    assert cal.step_overhead_ms == pytest.approx(KNOWN["step_overhead_ms"], abs=0.1)
    assert cal.mfu == pytest.approx(KNOWN["mfu"], rel=0.02)
    assert cal.prefill_overhead_ms == pytest.approx(KNOWN["prefill_overhead_ms"], abs=1.0)
    # and the fitted model predicts the decode points it measured within 1%
    tpot_err = cal.median_abs_error("tpot", "fitted")
    assert tpot_err is not None and tpot_err < 0.01
    spec_err = cal.median_abs_error("tpot", "spec")
    assert spec_err is not None and spec_err > 0.3  # the spec sheet was far off


@pytest.mark.parametrize(("rate_per_s", "clients", "slots", "n", "output_tokens"), [
    # prefill share 73 %: requests often arrive during another batch's prefill, so batches form
    pytest.param(4.0, None, 256, 200, 8, id="poisson-prefill-bound"),
    # 64 output tokens at 85% of the saturation rate: admissions between decode steps too
    pytest.param(4.5, None, 256, 200, 64, id="poisson-with-decode"),
    pytest.param(None, 8, 4, 64, 32, id="burst-8-clients-4-slots"),
])
def test_queueing_model_predicts_the_simulators_ttft(
        rate_per_s: float | None, clients: int | None, slots: int, n: int,
        output_tokens: int) -> None:
    # Poisson arrivals: TTFT is prefill plus the wait behind other prefill batches and decode
    # steps; the endpoint and the model get the same seeded arrival times, so the comparison
    # is request by request, not two samples' noise. Burst: `clients` closed-loop users with
    # no think time on `slots` slots; every round admits a batch of `slots` prompts at once,
    # and each waits for the batch before it and its own, where prefilling one prompt after
    # another would give the first of each batch its token early (the model's p50 was 22% low
    # that way).
    prompt_tokens, seed = 500, 3
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=prompt_tokens + output_tokens,
                      prompt_tokens=prompt_tokens)
    svc = service_from_scenario(s, output_tokens=output_tokens, max_num_seqs=slots)
    if clients is not None:
        assert svc.slots == slots < clients
        workload = Workload(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                            requests=n, clients=clients)
        model = simulate(svc, concurrency=clients, n_requests=n, warmup_fraction=0.0)
    else:
        assert rate_per_s is not None
        workload = Workload(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                            requests=n, rate_per_s=rate_per_s, seed=seed)
        model = simulate(svc, rate_per_s=rate_per_s, n_requests=n, seed=seed,
                         warmup_fraction=0.0)
    truth = run_virtual(s, workload, SimConfig(max_num_seqs=slots))
    assert len(truth) == n and {r["clock"] for r in truth} == {"virtual"}
    assert all(r["status"] == "ok" and r["output_tokens"] == output_tokens for r in truth)
    ttft = np.array([r["ttft_ms"] for r in truth])
    tpot = np.array([r["tpot_ms"] for r in truth])
    assert model.ttft_ms[0.5] > svc.prefill_ms * 1.2  # requests wait behind other prompts
    # the two differ only in the decode step's context (the endpoint's running mean in
    # 16-token buckets, the model's full context): well under 1%, so 2% fails on any real
    # difference in admission, batching or prefill
    for q in (0.5, 0.9):
        assert float(np.quantile(ttft, q)) == pytest.approx(model.ttft_ms[q], rel=0.02), q
    assert float(np.median(tpot)) == pytest.approx(model.tpot_ms[0.5], rel=0.02)


def test_the_virtual_clock_is_deterministic_and_replays_given_arrivals() -> None:
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=600, prompt_tokens=500)
    drawn = Workload(prompt_tokens=500, output_tokens=16, requests=50, rate_per_s=4.0, seed=1)
    first = run_virtual(s, drawn)
    assert run_virtual(s, drawn) == first
    arrivals = tuple(r["arrival_s"] for r in first)
    given = Workload(prompt_tokens=500, output_tokens=16, requests=50, arrivals_s=arrivals)
    assert run_virtual(s, given) == first
    # the speed-up divides every simulated time, as it does on the HTTP server
    fast = run_virtual(s, Workload(prompt_tokens=500, output_tokens=16, requests=50,
                                   arrivals_s=tuple(a / 4 for a in arrivals)),
                       SimConfig(speedup=4))
    assert [r["ttft_ms"] * 4 for r in fast] == pytest.approx([r["ttft_ms"] for r in first])


@pytest.mark.parametrize("kwargs", [
    pytest.param({"clients": 2, "rate_per_s": 1.0}, id="two-arrival-kinds"),
    pytest.param({}, id="no-arrival-kind"),
    pytest.param({"clients": 0}, id="no-clients"),
    pytest.param({"rate_per_s": -1.0}, id="negative-rate"),
    pytest.param({"arrivals_s": (0.0, 2.0, 1.0)}, id="unsorted-arrivals"),
    pytest.param({"arrivals_s": (0.0, 1.0)}, id="fewer-arrivals-than-requests"),
])
def test_bad_workloads_are_clear_errors(kwargs: dict[str, Any]) -> None:
    from capacity.errors import InputError

    with pytest.raises(InputError):
        Workload(prompt_tokens=10, output_tokens=4, requests=3, **kwargs)
