"""The predicted highest request rate within the SLO, beside `capacity bench --find-max`'s
measured one (docs/bench.md "The highest load within the SLO", docs/method.md section 6).

`slo_max_rate` searches, as the bench does (bracketing by doubling, then bisection), the
highest Poisson arrival rate (req/s) at which the `pct` percentile of TTFT and of TPOT meet
their targets, on one of two models of the same scenario:
- `"event"`: the planner's discrete-event model (`capacity.plan.events.simulate`, section 6,
  the model behind the planner's SLO-feasible capacity with the event check);
- `"engine"`: the simulated endpoint's own scheduler on a virtual clock
  (`capacity.sim.virtual.run_virtual`): the rate its physics allow, the truth a find-max run
  on `capacity sim-server` should land on.
Both draw the same seeded Poisson arrivals. `speedup` is the simulated endpoint's: its times
are divided by it, so the rate it sustains is `speedup` times higher for targets `speedup`
times tighter.

`find_max_overlay` reads a find-max run's meta.json entry and sets the prediction beside it
(the Results page draws it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from capacity.errors import InputError
from capacity.model.scenario import Scenario
from capacity.plan.events import service_from_scenario, simulate
from capacity.sim.virtual import Workload, run_virtual

PredictModel = Literal["event", "engine"]


def _meets(scenario: Scenario, rate_per_s: float, *, model: PredictModel, prompt_tokens: int,
           output_tokens: int, slo_ttft_ms: float, slo_tpot_ms: float, pct: float,
           requests: int, seed: int) -> bool:
    """Whether the `pct` percentile of TTFT and TPOT meet the targets at this rate."""
    share = pct / 100.0
    if model == "event":
        svc = service_from_scenario(scenario.with_(prompt_tokens=prompt_tokens),
                                    output_tokens=output_tokens)
        if rate_per_s >= svc.saturation_rate_per_s:
            return False
        # the share of requests within one target is >= pct/100 exactly when that
        # percentile is within it (one run per target: the model reports shares)
        t = simulate(svc, rate_per_s=rate_per_s, n_requests=requests, seed=seed,
                     slo_ttft_ms=slo_ttft_ms, warmup_fraction=0.0)
        p = simulate(svc, rate_per_s=rate_per_s, n_requests=requests, seed=seed,
                     slo_tpot_ms=slo_tpot_ms, warmup_fraction=0.0)
        return t.slo_met_share >= share and p.slo_met_share >= share
    truth = run_virtual(scenario, Workload(prompt_tokens=prompt_tokens,
                                           output_tokens=output_tokens, requests=requests,
                                           rate_per_s=rate_per_s, seed=seed))
    ttft = [r["ttft_ms"] for r in truth if r.get("ttft_ms") is not None]
    tpot = [r["tpot_ms"] for r in truth
            if r.get("tpot_ms") is not None and math.isfinite(r["tpot_ms"])]
    if not ttft:
        return False
    return bool(np.percentile(ttft, pct) <= slo_ttft_ms
                and (not tpot or np.percentile(tpot, pct) <= slo_tpot_ms))


def slo_max_rate(scenario: Scenario, *, prompt_tokens: int, output_tokens: int,
                 slo_ttft_ms: float, slo_tpot_ms: float, pct: float = 90.0,
                 model: PredictModel = "event", requests: int = 2000, seed: int = 0,
                 speedup: float = 1.0, tolerance: float = 0.01) -> float:
    """Highest Poisson arrival rate, req/s, at which the `pct` percentile of TTFT and TPOT
    (ms, on the endpoint's clock: divided by `speedup`) meet the targets; 0 when even a
    trickle misses them. Bisection to `tolerance` (hi / lo - 1); see the module docstring."""
    prompt_tokens, output_tokens = max(1, round(prompt_tokens)), max(1, round(output_tokens))
    if not (slo_ttft_ms > 0 and slo_tpot_ms > 0 and 1 <= pct <= 100 and speedup > 0):
        raise InputError("slo_max_rate needs targets > 0, a percentile in 1..100 and a "
                         "speedup > 0")
    # on the engine's own clock, the targets are `speedup` times looser
    kw: dict[str, Any] = {"model": model, "prompt_tokens": prompt_tokens,
                          "output_tokens": output_tokens, "slo_ttft_ms": slo_ttft_ms * speedup,
                          "slo_tpot_ms": slo_tpot_ms * speedup, "pct": pct,
                          "requests": requests, "seed": seed}
    lo, hi = 0.0, 0.05
    while _meets(scenario, hi, **kw):
        lo, hi = hi, hi * 2
        if hi > 1e5:
            return lo * speedup
    if lo == 0.0:  # the first rate missed: halve down to a trickle
        while hi > 1e-4 and not _meets(scenario, hi / 2, **kw):
            hi /= 2
        if hi <= 1e-4:
            return 0.0
        lo = hi / 2
    while hi / lo - 1.0 > tolerance:
        mid = 0.5 * (lo + hi)
        if _meets(scenario, mid, **kw):
            lo = mid
        else:
            hi = mid
    return lo * speedup


@dataclass(frozen=True, kw_only=True)
class FindMaxOverlay:
    """A find-max run's measured maximum and the prediction for the same model and GPU."""

    by: str
    """"rate" or "concurrency" (the measured load's unit)."""
    measured: float
    """Highest load the run found within the SLO (req/s, or requests in flight)."""
    bracket: tuple[float, float | None]
    predicted_rate_per_s: float | None
    """The event model's highest rate for the same targets (None for a concurrency search)."""
    ratio: float | None
    """measured / predicted (None without a prediction, or a prediction of 0)."""
    pct: float
    slo_ttft_ms: float
    slo_tpot_ms: float
    probes: tuple[Mapping[str, Any], ...]


def find_max_overlay(entry: Mapping[str, Any], scenario: Scenario, *, prompt_tokens: int,
                     output_tokens: int, speedup: float = 1.0) -> FindMaxOverlay:
    """The overlay of a run's meta.json `find_max` entry: the prediction is `slo_max_rate`
    (event model) for its percentile and targets. InputError for a malformed entry."""
    try:
        by = str(entry["by"])
        measured = float(entry["max_load"])
        lo, hi = entry["bracket"]
        pct, ttft, tpot = (float(entry["pct"]), float(entry["slo_ttft_ms"]),
                           float(entry["slo_tpot_ms"]))
        probes = tuple(dict(p) for p in entry.get("probes", []))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"the run's find_max entry is malformed ({exc})") from None
    pred = (slo_max_rate(scenario, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                         slo_ttft_ms=ttft, slo_tpot_ms=tpot, pct=pct, speedup=speedup)
            if by == "rate" else None)
    return FindMaxOverlay(by=by, measured=measured,
                          bracket=(float(lo), None if hi is None else float(hi)),
                          predicted_rate_per_s=pred,
                          ratio=measured / pred if pred else None, pct=pct, slo_ttft_ms=ttft,
                          slo_tpot_ms=tpot, probes=probes)


def max_concurrency_within_slo(entry: Mapping[str, Any] | None) -> float | None:
    """The measured maximum of a concurrency search (meta.json `find_max`), for a line on the
    overlay's concurrency axis; None for a rate search, no entry or a malformed one."""
    if not entry or entry.get("by") != "concurrency":
        return None
    try:
        c = float(entry["max_load"])
    except (KeyError, TypeError, ValueError):
        return None
    return c if math.isfinite(c) and c > 0 else None
