"""The loop closed end to end against the real simulated endpoint on a loopback port.

1. The simulator runs with known efficiencies (a Scenario carrying eta_bw, step overhead, MFU
   and prefill overhead: `capacity sim-server` exposes only --eff/--mfu, so the server is built
   in-process with `create_app`); the bench client measures a small sweep; `calibration.fit`
   recovers the knobs.
2. The planner's discrete-event queueing model (`capacity.plan.queueing`) predicts the endpoint's
   TTFT p50 within 10%, under Poisson arrivals (light and heavy prefill load) and in a burst
   (a closed loop with twice as many clients as slots). Both prefill every prompt admitted at
   one scheduling point in one batch, whose prompts all get their first token when it ends.

`--speedup` divides every delay of the simulator, so measured times are multiplied back by it.
Speed-ups and tolerances are chosen so that a busy shared machine does not flake them: the
client's own overhead (a few ms) stays small against the simulated times.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest

from capacity.bench.client import BenchConfig, run_bench_sync
from capacity.bench.store import RunStore
from capacity.fit.calibration import Calibration, fit
from capacity.fit.measured import MeasuredPoint
from capacity.fit.overlay import points_from_summary
from capacity.model.scenario import Scenario, make_scenario
from capacity.plan.queueing import service_from_scenario, simulate
from capacity.sim.server import SimConfig, create_app, serve_in_thread

pytestmark = pytest.mark.slow

KNOWN = {"eta_bw": 0.7, "step_overhead_ms": 1.5, "mfu": 0.45, "prefill_overhead_ms": 20.0}


def scaled(p: MeasuredPoint, speedup: float) -> MeasuredPoint:
    """A point measured against a sped-up simulator, in the simulated (real) time scale."""
    return replace(p, tpot_ms=p.tpot_ms * speedup if p.tpot_ms else None,
                   ttft_ms=p.ttft_ms * speedup if p.ttft_ms else None,
                   output_tok_s=p.output_tok_s / speedup if p.output_tok_s else None,
                   tpot_p90_ms=None, tpot_p99_ms=None, ttft_p90_ms=None, ttft_p99_ms=None)


def truth_by_id(url: str) -> dict[str, float]:
    """The endpoint's own TTFT per response id (ms, wall clock)."""
    reqs = httpx.get(url.removesuffix("/v1") + "/sim/truth").json()["requests"]
    return {r["id"]: r["ttft_ms"] for r in reqs}


def sweep(url: str, out: Path, label: str, prompt_chars: int, levels: tuple[int, ...],
          max_tokens: int) -> list[MeasuredPoint]:
    """One bench run; each level is one burst of `concurrency` requests (two at C=1), so
    every request decodes in a batch of exactly that size."""
    pts: list[MeasuredPoint] = []
    for c in levels:
        cfg = BenchConfig(base_url=url, concurrency=(c,), requests=max(c, 2),
                          prompt_chars=prompt_chars, max_tokens=max_tokens,
                          label=f"{label}-c{c}", warmup=1, out_dir=str(out))
        res = run_bench_sync(cfg, emit=lambda _m: None)
        with RunStore(out) as store:
            pts += points_from_summary(store.summary(res.run_id))
    return pts


def measure_and_fit(base: Scenario, out: Path, speedup: float) -> tuple[Calibration, float]:
    """Sweep a simulator carrying KNOWN with the bench client, fit a calibration on what the
    client measured; returns it and what the client's HTTP path adds to TTFT (median, ms)."""
    app = create_app(base.with_(**KNOWN), SimConfig(speedup=speedup, chars_per_token=4.0))
    with serve_in_thread(app) as url:
        pts = sweep(url, out, "short", 800, (1, 4), 48)       # 200-token prompts
        pts += sweep(url, out, "long", 48000, (1, 4), 48)     # 12000-token prompts
        truth = truth_by_id(url)
    with RunStore(out) as store:
        client = store.query("SELECT response_id, ttft_ms FROM requests WHERE success")
    assert len(client) == 12 and set(client["response_id"]) <= set(truth)
    client_path_ms = float(np.median([c - truth[i] for i, c in
                                      zip(client["response_id"], client["ttft_ms"],
                                          strict=True)]))
    return fit([scaled(p, speedup) for p in pts], base, name="sim"), client_path_ms


def test_calibration_recovers_the_simulators_known_efficiencies(tmp_path: Path) -> None:
    # Llama-3.1-8B BF16 on an H100: KV is large next to the weights, so 12K-token contexts at
    # concurrency 4 move 40% more bytes per step and separate bandwidth efficiency from the
    # per-step overhead. Real time (no speed-up): the client's overhead stays a few ms, and a
    # batch of 4 keeps the in-process server and client (2 cores) ahead of the step clock.
    base = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=12100)
    speedup = 1.0
    # Timing on a shared 2-core machine can be disturbed (a stall during one of the 4 decode
    # levels skews a 4-point fit): a sweep whose fit misses is measured once more, and the
    # test fails only when two independent sweeps both miss. Undisturbed sweeps land within
    # 2% of eta_bw and 0.2 ms of the step overhead.
    for attempt in (1, 2):
        cal, client_path_ms = measure_and_fit(base, tmp_path / f"try{attempt}", speedup)
        recovered = (cal.eta_bw == pytest.approx(KNOWN["eta_bw"], rel=0.12)
                     and cal.step_overhead_ms == pytest.approx(KNOWN["step_overhead_ms"], abs=1.0)
                     and cal.mfu == pytest.approx(KNOWN["mfu"], rel=0.08)
                     and cal.prefill_overhead_ms == pytest.approx(
                         KNOWN["prefill_overhead_ms"] + client_path_ms * speedup, abs=15.0))
        if recovered:
            break
    assert cal.eta_bw == pytest.approx(KNOWN["eta_bw"], rel=0.12)
    assert cal.step_overhead_ms == pytest.approx(KNOWN["step_overhead_ms"], abs=1.0)
    assert cal.mfu == pytest.approx(KNOWN["mfu"], rel=0.08)
    assert cal.prefill_overhead_ms == pytest.approx(
        KNOWN["prefill_overhead_ms"] + client_path_ms * speedup, abs=15.0)
    # and the fitted model predicts the decode points it measured within 5%
    tpot_err = cal.median_abs_error("tpot", "fitted")
    assert tpot_err is not None and tpot_err < 0.05
    spec_err = cal.median_abs_error("tpot", "spec")
    assert spec_err is not None and spec_err > 0.3  # the spec sheet was far off


def truth_after_warmup(url: str) -> tuple[list[float], list[float], list[float]]:
    """The endpoint's own arrival times (s), TTFT and TPOT (ms) of every request after the
    warm-up one (the first arrival), in arrival order, wall clock."""
    reqs = httpx.get(url.removesuffix("/v1") + "/sim/truth").json()["requests"]
    reqs = sorted(reqs, key=lambda r: r["arrival_s"])[1:]
    return ([r["arrival_s"] for r in reqs], [r["ttft_ms"] for r in reqs],
            [r["tpot_ms"] for r in reqs])


@pytest.mark.parametrize(("wall_rate", "clients", "slots", "n", "output_tokens"), [
    # prefill share 68 %: requests often arrive during another batch's prefill, so batches form
    pytest.param(7.5, None, 256, 40, 8, id="poisson"),
    pytest.param(None, 8, 4, 32, 32, id="burst-8-clients-4-slots"),
])
def test_queueing_model_predicts_the_simulators_ttft_p50(
        tmp_path: Path, wall_rate: float | None, clients: int | None, slots: int, n: int,
        output_tokens: int) -> None:
    # Poisson arrivals: TTFT is prefill plus the wait behind other prefill batches and decode
    # steps. The model replays the arrival times the endpoint recorded (scaled by the
    # speed-up), so the comparison is request by request, not two samples' noise, and a
    # request the client sent a few ms late joins the same batch in both. Burst: `clients`
    # closed-loop users with no think time on `slots` slots; every round admits a batch of
    # `slots` prompts at once, and each waits for the batch before it and its own (8 prefills
    # + 31 decode steps), where prefilling one prompt after another would give the first of
    # each batch its token early (the model's p50 was 22% low that way).
    # The endpoint's TTFT is its own record (/sim/truth, arrival to first token); the client
    # adds its HTTP path on top.
    # The simulator must keep to its clock: on a busy 2-core machine its server thread can be
    # held off the CPU for tens of ms, and every such delay lengthens the step it was in (its
    # TPOT grows, and its queues with it). Hence speed-up 2 (not 4) and 8 output tokens under
    # Poisson load (TTFT does not depend on the decode length there), and one more try when the
    # endpoint's own TPOT shows it fell more than 15% behind the model's.
    prompt_tokens, speedup, seed = 500, 2.0, 3
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=prompt_tokens + output_tokens,
                      prompt_tokens=prompt_tokens)
    svc = service_from_scenario(s, output_tokens=output_tokens, max_num_seqs=slots)
    if clients is not None:
        assert svc.slots == slots < clients
    level = clients if clients is not None else 64
    lag = math.inf
    for attempt in range(2):
        app = create_app(s, SimConfig(speedup=speedup, max_num_seqs=slots))
        with serve_in_thread(app) as url:
            cfg = BenchConfig(base_url=url, concurrency=(level,), requests=n,
                              request_rate=wall_rate, prompt_chars=prompt_tokens * 4,
                              max_tokens=output_tokens, label=f"queue{attempt}", warmup=1,
                              seed=seed, out_dir=str(tmp_path))
            res = run_bench_sync(cfg, emit=lambda _m: None)
            arrival_s, ttft, tpot = truth_after_warmup(url)
        assert res.summaries[-1].requests_failed == 0 and len(ttft) == n
        if clients is not None:
            model = simulate(svc, concurrency=clients, n_requests=n, warmup_fraction=0.0)
        else:
            model = simulate(svc, arrivals_ms=[a * 1e3 * speedup for a in arrival_s],
                             warmup_fraction=0.0)
        lag = float(np.median(tpot)) * speedup / model.tpot_ms[0.5] - 1.0
        if lag < 0.15:
            break
    assert lag < 0.15, f"the simulator fell {lag:.0%} behind its clock twice (machine too busy)"
    predicted_p50 = model.ttft_ms[0.5]
    assert predicted_p50 > svc.prefill_ms * 1.2  # requests wait behind other prompts
    endpoint_p50 = float(np.median(ttft)) * speedup
    client_p50 = float(res.summaries[-1].ttft_p50_ms) * speedup
    assert endpoint_p50 == pytest.approx(predicted_p50, rel=0.10), (endpoint_p50, predicted_p50)
    assert endpoint_p50 <= client_p50 < endpoint_p50 * 1.25, (client_p50, endpoint_p50)
