"""The loop closed end to end against the real simulated endpoint on a loopback port.

1. The simulator runs with known efficiencies (a Scenario carrying eta_bw, step overhead, MFU
   and prefill overhead: `capacity sim-server` exposes only --eff/--mfu, so the server is built
   in-process with `create_app`); the bench client measures a small sweep; `calibration.fit`
   recovers the knobs.
2. The planner's discrete-event queueing model (`capacity.queueing`) predicts the TTFT p50 the
   bench client measures under Poisson arrivals, within 10%. (Not in a closed loop with more
   clients than slots: there the simulator prefills every admitted prompt in one batch and
   emits all their first tokens at its end, while the model prefills them one after another,
   so the model's TTFT p50 is about 20% lower; see the report in docs/measure-results.md.)

`--speedup` divides every delay of the simulator, so measured times are multiplied back by it.
Speed-ups and tolerances are chosen so that a busy shared machine does not flake them: the
client's own overhead (a few ms) stays small against the simulated times.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest

from capacity.bench.client import BenchConfig, run_bench_sync
from capacity.calibration import fit
from capacity.measured import MeasuredPoint
from capacity.overlay import points_from_summary
from capacity.queueing import service_from_scenario, simulate
from capacity.scenario import make_scenario
from capacity.simserver import SimConfig, create_app, serve_in_thread
from capacity.store import RunStore

pytestmark = pytest.mark.slow

KNOWN = {"eta_bw": 0.7, "step_overhead_ms": 1.5, "mfu": 0.45, "prefill_overhead_ms": 20.0}


def scaled(p: MeasuredPoint, speedup: float) -> MeasuredPoint:
    """A point measured against a sped-up simulator, in the simulated (real) time scale."""
    return replace(p, tpot_ms=p.tpot_ms * speedup if p.tpot_ms else None,
                   ttft_ms=p.ttft_ms * speedup if p.ttft_ms else None,
                   output_tok_s=p.output_tok_s / speedup if p.output_tok_s else None,
                   tpot_p90_ms=None, tpot_p99_ms=None, ttft_p90_ms=None, ttft_p99_ms=None)


def truth_ttft_ms(url: str) -> list[float]:
    """The endpoint's own TTFT of every request, in arrival order (ms, wall clock)."""
    reqs = httpx.get(url.removesuffix("/v1") + "/sim/truth").json()["requests"]
    return [r["ttft_ms"] for r in sorted(reqs, key=lambda r: r["arrival_s"])]


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


def test_calibration_recovers_the_simulators_known_efficiencies(tmp_path: Path) -> None:
    # Llama-3.1-8B BF16 on an H100: KV is large next to the weights, so 12K-token contexts at
    # concurrency 4 move 40% more bytes per step and separate bandwidth efficiency from the
    # per-step overhead. Real time (no speed-up): the client's overhead stays a few ms, and a
    # batch of 4 keeps the in-process server and client (2 cores) ahead of the step clock.
    base = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=12100)
    truth = base.with_(**KNOWN)
    speedup = 1.0
    app = create_app(truth, SimConfig(speedup=speedup, chars_per_token=4.0))
    with serve_in_thread(app) as url:
        pts = sweep(url, tmp_path, "short", 800, (1, 4), 48)       # 200-token prompts
        pts += sweep(url, tmp_path, "long", 48000, (1, 4), 48)     # 12000-token prompts
        truth = truth_by_id(url)
    with RunStore(tmp_path) as store:
        client = store.query("SELECT response_id, ttft_ms FROM requests WHERE success")
    # what the client's HTTP path adds to every TTFT (it lands in the prefill overhead)
    assert len(client) == 12 and set(client["response_id"]) <= set(truth)
    client_path_ms = float(np.median([c - truth[i] for i, c in
                                      zip(client["response_id"], client["ttft_ms"],
                                          strict=True)]))
    pts = [scaled(p, speedup) for p in pts]
    cal = fit(pts, base, name="sim")
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


def test_queueing_model_predicts_the_simulators_ttft_p50(tmp_path: Path) -> None:
    # Poisson arrivals: TTFT is prefill plus the wait behind other prefills and decode steps.
    # The bench client and the model draw the SAME arrival times (numpy's generator with the
    # same seed; the model's rate is the wall rate divided by the speed-up), so the comparison
    # is request by request, not two samples' noise. The endpoint's TTFT is its own record
    # (/sim/truth, arrival to first token); the client adds its HTTP path on top.
    prompt_tokens, output_tokens, n = 500, 32, 48
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=prompt_tokens + output_tokens,
                      prompt_tokens=prompt_tokens)
    speedup, wall_rate, seed = 4.0, 10.0, 7
    app = create_app(s, SimConfig(speedup=speedup))
    with serve_in_thread(app) as url:
        cfg = BenchConfig(base_url=url, concurrency=(64,), requests=n, request_rate=wall_rate,
                          prompt_chars=prompt_tokens * 4, max_tokens=output_tokens,
                          label="queue", warmup=1, seed=seed - 64, out_dir=str(tmp_path))
        res = run_bench_sync(cfg, emit=lambda _m: None)
        truth = truth_ttft_ms(url)[1:]  # the first arrival is the warm-up request
    assert res.summaries[0]["requests_failed"] == 0 and len(truth) == n
    endpoint_p50 = float(np.median(truth)) * speedup
    client_p50 = float(res.summaries[0]["ttft_p50_ms"]) * speedup
    svc = service_from_scenario(s, output_tokens=output_tokens)
    model = simulate(svc, rate_per_s=wall_rate / speedup, n_requests=n, seed=seed,
                     warmup_fraction=0.0)
    predicted_p50 = model.ttft_ms[0.5]
    assert predicted_p50 > svc.prefill_ms  # some requests wait behind others
    assert endpoint_p50 == pytest.approx(predicted_p50, rel=0.10), (endpoint_p50, predicted_p50)
    assert endpoint_p50 <= client_p50 < endpoint_p50 * 1.25, (client_p50, endpoint_p50)
