"""Planning with a calibration, and the planner's uncertainty band (F11, docs/method.md).

`with_calibration` puts a saved calibration's fitted knobs (bandwidth efficiency, per-step and
per-prefill overheads, compute efficiency, MFU, runtime memory overhead) into the planner's
inputs, so every option is predicted the way the Explorer predicts a calibrated scenario.

`gpu_band` answers "how many GPUs, within the band": the recommended option's GPU, TP, weight
format and KV precision, planned again at the slow and the fast edge of the band. With a
calibration, the edges widen its knobs by the spread of its held-out errors (as
`capacity.fit.uncertainty.band` widens a prediction); without one, the slow edge is the
typical real-engine efficiencies (`TYPICAL_RANGES`: low fractions, high overheads) and the fast
edge the spec-sheet roofline, as the uncertainty band does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from capacity.catalog.loader import Catalog
from capacity.fit.calibration import Calibration, PointKind
from capacity.fit.uncertainty import TYPICAL_RANGES, _spread
from capacity.plan.search import Option, PlanInputs, plan


def with_calibration(inp: PlanInputs, cal: Calibration) -> PlanInputs:
    """The inputs with the calibration's fitted knobs (those it has) and its name."""
    changes: dict[str, object] = {"calibration": cal.name or "calibrated"}
    for name, field in (("eta_bw", "eta_bw"), ("step_overhead_ms", "step_overhead_ms"),
                        ("eff", "eff"), ("mfu", "mfu"),
                        ("prefill_overhead_ms", "prefill_overhead_ms"),
                        ("overhead_gb", "overhead_gb")):
        value = getattr(cal, name)
        if value is not None:
            changes[field] = float(value)
    return replace(inp, **changes)  # type: ignore[arg-type]


def band_edges(inp: PlanInputs, cal: Calibration | None) -> tuple[PlanInputs, PlanInputs]:
    """(slow, fast) inputs: the edges of the band around `inp`'s prediction."""
    if cal is None:
        lo = {k: v[0] for k, v in TYPICAL_RANGES.items()}
        hi = {k: v[1] for k, v in TYPICAL_RANGES.items()}
        slow = replace(inp, eta_bw=lo["eta_bw"], eff=lo["eff"], mfu=lo["mfu"],
                       step_overhead_ms=hi["step_overhead_ms"],
                       prefill_overhead_ms=hi["prefill_overhead_ms"])
        fast = replace(inp, eta_bw=1.0, eff=1.0, step_overhead_ms=0.0,
                       prefill_overhead_ms=0.0, mfu=max(inp.mfu, hi["mfu"]))
        return slow, fast
    s_step = 1.0 + _spread(cal, PointKind.TPOT)
    s_ttft = 1.0 + _spread(cal, PointKind.TTFT)
    slow = replace(inp, eta_bw=inp.eta_bw / s_step, eff=inp.eff / s_step,
                   step_overhead_ms=inp.step_overhead_ms * s_step, mfu=inp.mfu / s_ttft,
                   prefill_overhead_ms=inp.prefill_overhead_ms * s_ttft)
    fast = replace(inp, eta_bw=min(1.0, inp.eta_bw * s_step), eff=min(1.0, inp.eff * s_step),
                   step_overhead_ms=inp.step_overhead_ms / s_step,
                   mfu=min(1.0, inp.mfu * s_ttft),
                   prefill_overhead_ms=inp.prefill_overhead_ms / s_ttft)
    return slow, fast


@dataclass(frozen=True, kw_only=True)
class GpuBand:
    """GPUs the recommended configuration needs at the prediction and at the band's edges
    (None: not within the search's GPU limit at that edge)."""

    n_gpus: int
    low: int | None
    high: int | None
    basis: str
    """'calibrated' or 'spec-sheet'."""


def _fewest(inp: PlanInputs, o: Option, catalog: Catalog | None) -> int | None:
    narrow = replace(inp, gpus=(o.gpu,), formats=(o.weights,), kv_dtypes=(o.kv_dtype,))
    p = plan(narrow, catalog)
    counts = [x.n_gpus for x in p.options if x.tp == o.tp]
    return min(counts) if counts else None


def gpu_band(inp: PlanInputs, o: Option, cal: Calibration | None = None,
             catalog: Catalog | None = None) -> GpuBand:
    """'7 GPUs, 6-9 within the band' for option `o` of the plan of `inp`."""
    slow, fast = band_edges(inp, cal)
    return GpuBand(n_gpus=o.n_gpus, low=_fewest(fast, o, catalog),
                   high=_fewest(slow, o, catalog),
                   basis="calibrated" if cal is not None else "spec-sheet")
