"""How sure is a prediction? A band, and which input moves the answer most (docs/method.md, uncertainty).

Band: with a calibration, the spread of its held-out errors (or, for points it could not
hold out, its fitted residuals) widens the calibrated prediction: step / (1 + spread) to
step x (1 + spread) (a ratio either way, so a wide spread never reaches 0), and the same for
TTFT; C_vram from the overhead +/- 0.5 GB when the calibration measured it.
Without one, the band comes from typical efficiency ranges on real engines (`TYPICAL_RANGES`):
the spec-sheet roofline (eta_bw = eff = 1, no overhead) is its optimistic edge, and real
engines land 1.3x to 3x slower (F11 (docs/method.md) issue text; e.g. the published RTX 4090 vLLM sweep in
data/reference is 1.3x to 2.2x above the spec-sheet step time).

Distance (docs/calibration.md): a calibration describes the setup it was fitted on. Applied
elsewhere, its spread widens (`Widening`): another model (+15 points), another GPU (+25:
efficiencies belong to the GPU and engine), a context or concurrency outside the range of its
points (+5 per doubling beyond, at most +30 each), fewer than 3 points of a kind (+10). These
are this project's rules of thumb, not fitted figures: they say "further from the data, less
sure" in numbers a reader can check. Knobs outside what real engines reach (`PLAUSIBLE_MAX`),
or whose standard error exceeds half their value, are flagged (`KnobFlag`) and widen the
band by +10 points each.

Sensitivity: one input at a time moved over its range, the others held; inputs sorted by the
swing they cause (a tornado chart's data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from capacity.fit.calibration import (
    Calibration,
    PointKind,
    apply,
    split_extremes,
)
from capacity.fit.ceilings import scenario_bandwidth_ceiling, scenario_ceiling
from capacity.model.roofline import StepMethod
from capacity.model.scenario import Scenario, evaluate
from capacity.types import FloatArray

TYPICAL_RANGES: dict[str, tuple[float, float]] = {
    "eta_bw": (0.55, 0.9),
    "eff": (0.15, 0.6),
    "step_overhead_ms": (0.3, 5.0),
    "mfu": (0.2, 0.6),
    "prefill_overhead_ms": (5.0, 50.0),
    "overhead_gb": (1.0, 5.0),
    "eta_kv": (0.55, 0.9),
    "attn_sat_batch": (1.0, 8.0),
    "seq_overhead_ms": (0.005, 0.3),
    "layer_overhead_ms": (0.0, 0.155),
}
"""Plausible values on real engines (vLLM, SGLang, TensorRT-LLM on datacenter and consumer
GPUs): the low edge of each fraction and the high edge of each overhead give the slow end.
Overhead_gb: F3 (docs/method.md) (1.89 to 4.76 GiB measured on vLLM for Llama-3.1-8B, plus CUDA graphs).
The operator step's knobs (F4b): eta_kv as eta_bw; attn_sat_batch 1 to 8 sequences (the issue's
data-centre measurements: at batch 1 the step grows with context 2-3x faster than KV / BW;
8 is this project's assumption); seq_overhead_ms from 5 us (an assumption for CUDA-graph
engines) to 0.3 ms (the RTX 4090 vLLM published sweep fitted with the operator step: 0.31).
layer_overhead_ms (F11's per-layer step overhead): none to twice the typical vLLM basis' 77.3 us,
data/engines.toml's [vllm.layer_overhead_ms] range (solved from eighteen published groups'
decode points with eta_bw a share of each GPU's copy ceiling; tests/test_uncertainty.py holds
the two equal: 0.155 since 2026-12-07, night; 0.141 with that morning's 70.6 us; 0.145 with the
72.3 us of eta_bw a share of
the spec sheet, though this range kept 0.140 until then; 0.140 with
the 69.8 us from fifteen and 0.138 with the 68.9 us from fourteen until 2026-12-06; 0.145 with the
72.7 us solved from twelve by least squares until 2026-12-04; with the 40.5 us
solved from two, 0 to 0.081, the band without measurements held 20 of 28 published steps
below saturation instead of 15: `capacity validate`, "The band without measurements")."""

CALIBRATED_OVERHEAD_SPREAD_GB = 0.5

MIN_SPREAD = 0.05
"""A calibrated band is never narrower than +/- 5%: runs of the same setup differ that much."""


def overhead_gb_edges(planned_gb: float, measured_gb: float | None = None
                      ) -> tuple[float, float]:
    """(slow, fast) runtime memory overhead per GPU, GB (F3), at the edges of a band: more
    overhead is slower (fewer requests fit). A calibration that measured it
    (`measured_gb`): that value +/- `CALIBRATED_OVERHEAD_SPREAD_GB` (at least 0); otherwise
    `TYPICAL_RANGES`' 1-5 GB widened to the value planned with. The one definition of the
    memory side of every band: the Explorer's C_vram band (`band`) and the Planner's GPU band
    (`capacity.fit.planning.band_edges`). Examples: measured 2.0 -> (2.5, 1.5); none, planned
    1.5 -> (5.0, 1.0); none, planned 6.0 -> (6.0, 1.0)."""
    if measured_gb is not None:
        return (measured_gb + CALIBRATED_OVERHEAD_SPREAD_GB,
                max(0.0, measured_gb - CALIBRATED_OVERHEAD_SPREAD_GB))
    lo, hi = TYPICAL_RANGES["overhead_gb"]
    return max(hi, planned_gb), min(lo, planned_gb)


class Distance(StrEnum):
    """How a prediction lies away from the calibration's data (`Widening.kind`)."""

    MODEL = "model"
    """Another model than the one measured."""
    GPU = "gpu"
    """Another GPU than the one measured."""
    CONTEXT = "context"
    """A context (TTFT: prompt) outside the measured range."""
    CONCURRENCY = "concurrency"
    """A concurrency outside the measured range."""
    FEW_POINTS = "few_points"
    """Fewer than `FEW_POINTS` measured points of a kind."""
    IMPLAUSIBLE = "implausible"
    """A fitted knob outside what real engines reach, or poorly determined."""


WIDENING: dict[Distance, float] = {
    Distance.MODEL: 0.15, Distance.GPU: 0.25, Distance.FEW_POINTS: 0.10,
    Distance.IMPLAUSIBLE: 0.10,
}
"""Added to the relative spread (a fraction) for each distance (rules of thumb, see above)."""
PER_DOUBLING = 0.05
"""Added to the spread per doubling of context or concurrency beyond the measured range."""
MAX_RANGE_WIDENING = 0.30
"""The most a context or concurrency distance adds."""
FEW_POINTS = 3
"""Fewer measured points than this (of TPOT or of TTFT) widen the band."""
PLAUSIBLE_MAX: dict[str, float] = {"eta_bw": 0.95, "eff": 0.9, "mfu": 0.8}
"""Highest plausible fitted fractions of peak: bandwidth-bound decode kernels reach 0.6-0.9 of
peak memory bandwidth, dense GEMMs up to ~0.8 of peak TFLOP/s (`TYPICAL_RANGES` for typical
values); a fit above these has traded against another knob or overhead."""


@dataclass(frozen=True, kw_only=True)
class Widening:
    """One reason the band is wider: `kind`, what it is about (`measured` vs `used`, as
    plain text: keys, token counts or request counts) and `amount` added to the spread."""

    kind: Distance
    measured: str
    used: str
    amount: float
    output: str
    """'step_ms', 'ttft_s' or 'both'."""


@dataclass(frozen=True, kw_only=True)
class KnobFlag:
    """A fitted knob that is implausible: above `limit` (a fraction of peak), or with a
    standard error `std` over half its value (`limit` is NaN then)."""

    knob: str
    value: float
    limit: float
    std: float


def knob_flags(cal: Calibration, ceiling: float | None = None,
               copy_ceiling: float | None = None) -> tuple[KnobFlag, ...]:
    """The calibration's implausible knobs: above `PLAUSIBLE_MAX` (eff and MFU above the
    GPU's measured matmul `ceiling` too, a share of peak, `ceilings.scenario_ceiling`; eta_bw
    above its measured copy, `copy_ceiling`, a share of the spec bandwidth,
    `ceilings.scenario_bandwidth_ceiling`), or std > value / 2."""
    out = []
    for name in ("eta_bw", "eff", "mfu", "step_overhead_ms", "prefill_overhead_ms"):
        v = getattr(cal, name)
        if v is None:
            continue
        std = cal.knob_std(name)
        limit = PLAUSIBLE_MAX.get(name, math.nan)
        if ceiling is not None and name in ("eff", "mfu"):
            limit = min(limit, ceiling)
        if copy_ceiling is not None and name == "eta_bw":
            limit = min(limit, copy_ceiling)
        if v > limit:
            out.append(KnobFlag(knob=name, value=float(v), limit=limit, std=std))
        elif math.isfinite(std) and v > 0 and std > v / 2:
            out.append(KnobFlag(knob=name, value=float(v), limit=math.nan, std=std))
    return tuple(out)


def _range_widening(kind: Distance, lo: float, hi: float, used: float, output: str
                    ) -> Widening | None:
    """+`PER_DOUBLING` per doubling of `used` beyond [lo, hi], at most `MAX_RANGE_WIDENING`."""
    if used > hi > 0:
        doublings = math.log2(used / hi)
    elif 0 < used < lo:
        doublings = math.log2(lo / used)
    else:
        return None
    amount = min(MAX_RANGE_WIDENING, PER_DOUBLING * doublings)
    if amount < 0.01:
        return None
    span = f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}-{hi:,.0f}"
    return Widening(kind=kind, measured=span, used=f"{used:,.0f}", amount=amount, output=output)


def distance(cal: Calibration, scenario: Scenario, concurrency: npt.ArrayLike
             ) -> tuple[Widening, ...]:
    """Why a calibration applied to `scenario` at `concurrency` deserves a wider band."""
    out: list[Widening] = []
    if cal.model and cal.model not in (scenario.variant.key, scenario.model.key):
        out.append(Widening(kind=Distance.MODEL, measured=cal.model, used=scenario.variant.key,
                            amount=WIDENING[Distance.MODEL], output="both"))
    if cal.gpu and cal.gpu != scenario.gpu.key:
        out.append(Widening(kind=Distance.GPU, measured=cal.gpu, used=scenario.gpu.key,
                            amount=WIDENING[Distance.GPU], output="both"))
    C = np.asarray(concurrency, dtype=np.float64)
    for kind, output in ((PointKind.TPOT, "step_ms"), (PointKind.TTFT, "ttft_s")):
        pts = [p for p in cal.points if p.kind == kind]
        if len(pts) < FEW_POINTS:
            out.append(Widening(kind=Distance.FEW_POINTS, measured=str(len(pts)),
                                used=str(FEW_POINTS), amount=WIDENING[Distance.FEW_POINTS],
                                output=output))
        if not pts:
            continue
        ctx = [p.context_tokens for p in pts]
        used_ctx = scenario.context_tokens if kind == PointKind.TPOT else scenario.prompt
        w = _range_widening(Distance.CONTEXT, min(ctx), max(ctx), used_ctx, output)
        if w is not None:
            out.append(w)
        if kind == PointKind.TPOT and C.size:
            cs = [p.concurrency for p in pts]
            far = max((_range_widening(Distance.CONCURRENCY, min(cs), max(cs), float(c), output)
                       for c in (float(C.min()), float(C.max()))),
                      key=lambda x: -1.0 if x is None else x.amount)
            if far is not None:
                out.append(far)
    for flag in knob_flags(cal, scenario_ceiling(scenario),
                           scenario_bandwidth_ceiling(scenario)):
        out.append(Widening(kind=Distance.IMPLAUSIBLE, measured=flag.knob,
                            used=f"{flag.value:.3g}", amount=WIDENING[Distance.IMPLAUSIBLE],
                            output="ttft_s" if flag.knob in ("mfu", "prefill_overhead_ms")
                            else "step_ms"))
    return tuple(out)


def _widened(base: float, widenings: Sequence[Widening], output: str) -> float:
    return base + sum(w.amount for w in widenings if w.output in (output, "both"))


def calibration_spreads(cal: Calibration, scenario: Scenario, concurrency: npt.ArrayLike
                        ) -> tuple[float, float, tuple[Widening, ...]]:
    """(step spread, TTFT spread, widenings) of a calibration applied to `scenario` at
    `concurrency`: its held-out spreads (`calibrated_spread`) widened by its distance from
    them (`distance`: another model or GPU, contexts and concurrencies outside its data, few
    points, implausible knobs). The one computation of the Explorer's band (`band`) and the
    Planner's (`capacity.fit.planning.band_edges`). Example: a 5% spread fitted on an RTX 4090
    and applied to an RTX 5090: 5% + 25% = 30%."""
    far = distance(cal, scenario, concurrency)
    return (_widened(calibrated_spread(cal, PointKind.TPOT), far, "step_ms"),
            _widened(calibrated_spread(cal, PointKind.TTFT), far, "ttft_s"), far)


@dataclass(frozen=True, kw_only=True)
class Band:
    """Low / middle / high of step time (ms), TTFT (s) and C_vram at each concurrency."""

    concurrency: FloatArray
    step_ms: tuple[FloatArray, FloatArray, FloatArray]
    ttft_s: tuple[float, float, float]
    max_concurrency_vram: tuple[int, int, int]
    basis: str
    widenings: tuple[Widening, ...] = ()
    """Why a calibrated band is wider than the calibration's own error (empty otherwise)."""
    flags: tuple[KnobFlag, ...] = ()
    """The calibration's implausible knobs."""
    spread: tuple[float, float] = (0.0, 0.0)
    """The relative spread of step time and TTFT of a calibrated band (0 without one)."""
    split_open: bool = False
    """A calibrated band's step edges reach out to both ends of the per-step overhead /
    bandwidth split its data left open (`calibration.split_extremes`: one model measured):
    why they lie further out than the spread and its widenings say (+73% on 4 GPUs at TP 4
    where the reasons listed came to +/-20%, an audit, 2026-12-07)."""

    @property
    def step_ratio(self) -> tuple[float, float]:
        """Low and high edge of the step time over the middle, at the largest spread."""
        lo, mid, hi = self.step_ms
        return float(np.min(lo / mid)), float(np.max(hi / mid))


def calibrated_spread(cal: Calibration, kind: PointKind) -> float:
    """The relative spread of a calibrated prediction of one kind (TPOT: the step, TTFT), a
    fraction: the median |error| of the calibration's held-out predictions, else of its fitted
    ones, at least `MIN_SPREAD`. The band (`band`) and the planner's band edges
    (`capacity.fit.planning.band_edges`) widen a calibrated prediction by it."""
    e = cal.median_abs_error(kind, "held_out")
    if e is None:
        e = cal.median_abs_error(kind, "fitted")
    return max(MIN_SPREAD, e if e is not None else MIN_SPREAD)


def _at(s: Scenario, concurrency: FloatArray, step_context_tokens: float | None = None
        ) -> tuple[FloatArray, float, int]:
    """(decode step ms, TTFT s, C_vram) of `s` at `concurrency`: the step at
    `step_context_tokens` where given (None: the scenario's context, as C_vram always is)."""
    ev = evaluate(s, concurrency)
    step = ev.decode.step_ms if step_context_tokens is None else evaluate(
        s, concurrency, context_tokens=np.full_like(concurrency, step_context_tokens)
    ).decode.step_ms
    return (np.asarray(step, dtype=np.float64), float(ev.ttft_s),
            int(ev.max_concurrency_vram))


def typical_edges(scenario: Scenario) -> tuple[Scenario, Scenario]:
    """(fast, slow): `scenario` with every knob `TYPICAL_RANGES` spans at its fast end and at
    its slow end (the low end of each fraction and the high end of each overhead)."""
    r = TYPICAL_RANGES
    gb_slow, gb_fast = overhead_gb_edges(scenario.overhead_gb)
    fast = scenario.with_(eta_bw=r["eta_bw"][1], eff=r["eff"][1],
                          step_overhead_ms=r["step_overhead_ms"][0], mfu=r["mfu"][1],
                          layer_overhead_ms=r["layer_overhead_ms"][0],
                          prefill_overhead_ms=r["prefill_overhead_ms"][0], overhead_gb=gb_fast)
    slow = scenario.with_(eta_bw=r["eta_bw"][0], eff=r["eff"][0],
                          step_overhead_ms=r["step_overhead_ms"][1], mfu=r["mfu"][0],
                          layer_overhead_ms=r["layer_overhead_ms"][1],
                          prefill_overhead_ms=r["prefill_overhead_ms"][1], overhead_gb=gb_slow)
    return fast, slow


def band(scenario: Scenario, concurrency: npt.ArrayLike,
         calibration: Calibration | None = None,
         edges: tuple[Scenario, Scenario] | None = None, edges_basis: str = "",
         step_context_tokens: float | None = None) -> Band:
    """The band around a prediction at the scenario's context (its decode step at
    `step_context_tokens` where given: the Results page's, the context a measured request holds
    on average while decoding, `MeasuredPoint.decode_context_tokens`, as its table and charts
    predict the step; C_vram stays at the scenario's context, what a request holds at its end).

    With a calibration: the calibrated prediction +/- its held-out spread, widened by its
    distance from the scenario (`distance`: other model, GPU, context, concurrency, few
    points, implausible knobs), and the step's edges out to both ends of the overhead /
    bandwidth split the data left open (`calibration.split_extremes`: one model). Without:
    from the
    scenario as given (middle) to the `TYPICAL_RANGES` edges (low = fast end, high = slow end),
    or to `edges` (fast, slow) where given: a scenario on an engine's typical basis spans that
    engine's ranges, the Planner's band (`capacity.fit.planning.typical_band_scenarios`;
    `edges_basis` names them); when the scenario is spec-sheet, the middle equals the fast
    edge of the range or below it.
    """
    C = np.asarray(concurrency, dtype=np.float64)
    if calibration is not None:
        s = apply(calibration, scenario)
        step, ttft, cv = _at(s, C, step_context_tokens)
        sp_t, sp_f, far = calibration_spreads(calibration, scenario, C)
        gb_slow, gb_fast = overhead_gb_edges(s.overhead_gb, calibration.overhead_gb)
        cv_lo, cv_hi = (_at(s.with_(overhead_gb=gb_slow), C)[2],
                        _at(s.with_(overhead_gb=gb_fast), C)[2])
        lo_t, hi_t = step / (1 + sp_t), step * (1 + sp_t)
        ends = split_extremes(calibration)
        for end in ends:  # one model: the overhead/bandwidth split
            e = _at(apply(end, scenario), C, step_context_tokens)[0]
            lo_t, hi_t = np.minimum(lo_t, e / (1 + sp_t)), np.maximum(hi_t, e * (1 + sp_t))
        return Band(concurrency=C,
                    step_ms=(lo_t, step, hi_t),
                    ttft_s=(ttft / (1 + sp_f), ttft, ttft * (1 + sp_f)),
                    max_concurrency_vram=(min(cv_lo, cv), cv, max(cv_hi, cv)),
                    basis=f"calibration '{calibration.name}': +/- {sp_t:.0%} step, "
                          f"+/- {sp_f:.0%} TTFT (held-out error"
                          + (", widened by its distance from here)" if far else ")"),
                    widenings=far, flags=knob_flags(calibration, scenario_ceiling(s),
                                           scenario_bandwidth_ceiling(s)),
                    spread=(sp_t, sp_f), split_open=bool(ends))
    fast, slow = typical_edges(scenario) if edges is None else edges
    mid = _at(scenario, C, step_context_tokens)
    f, sl = _at(fast, C, step_context_tokens), _at(slow, C, step_context_tokens)
    return Band(concurrency=C,
                step_ms=(np.minimum(f[0], mid[0]), mid[0], np.maximum(sl[0], mid[0])),
                ttft_s=(min(f[1], mid[1]), mid[1], max(sl[1], mid[1])),
                max_concurrency_vram=(min(sl[2], mid[2]), mid[2], max(f[2], mid[2])),
                basis=edges_basis or "typical efficiency ranges (no calibration)")


@dataclass(frozen=True, kw_only=True)
class Sensitivity:
    """One input moved over [low, high]: the output at each end and the swing."""

    name: str
    low: float
    high: float
    output_low: float
    output_high: float

    @property
    def swing(self) -> float:
        """|output at high - output at low| (the output's unit)."""
        return abs(self.output_high - self.output_low)


OUTPUTS = ("step_ms", "ttft_s", "max_concurrency_vram")
INPUTS = ("eta_bw", "eff", "step_overhead_ms", "layer_overhead_ms", "mfu",
          "prefill_overhead_ms", "overhead_gb", "util", "bandwidth_gb_s", "tflops", "weights_gb",
          "context_tokens")


OPERATOR_INPUTS = ("eta_kv", "attn_sat_batch", "seq_overhead_ms", "attn_mfu")
"""Inputs the operator step (F4b, F6b) adds; `sensitivity` moves them too when it is in use."""
_TIED = {"eta_kv": "eta_bw", "attn_mfu": "mfu"}


AT_ZERO_SHARE = 1e-3
"""An overhead or saturation batch below this share of the top of its typical range is at zero
(`sensitivity` sweeps it over that range, as the spec sheet's exact 0): a fit leaves a knob
its data do not need at its bound of 0 plus rounding, and +/-20% of the published RTX 4090
calibration's 2.8e-15 ms per-step overhead or 1.5e-5-sequence saturation batch moves nothing
(the table read "0 to 0 ms"). The thresholds: 5 us per step, 0.155 us per layer, 0.05 ms per
prefill, 0.3 us per sequence, 0.008 sequences, 5 MB of runtime memory."""


def _range(s: Scenario, name: str, rel: float,
           ranges: Mapping[str, tuple[float, float]] | None = None) -> tuple[float, float]:
    if ranges is not None and name in ranges:
        return ranges[name]
    raw = getattr(s, name)
    v = float(getattr(s, _TIED[name]) if raw is None else raw)
    if name in TYPICAL_RANGES and (name.endswith(("_ms", "_gb")) or name == "attn_sat_batch") \
            and abs(v) <= AT_ZERO_SHARE * TYPICAL_RANGES[name][1]:
        return TYPICAL_RANGES[name]
    lo, hi = v * (1 - rel), v * (1 + rel)
    if name in ("eta_bw", "eff", "mfu", "util", "eta_kv", "attn_mfu"):
        hi = min(hi, 1.0)
    return lo, hi


def _output(s: Scenario, output: str, concurrency: float) -> float:
    ev = evaluate(s, [concurrency])
    if output == "step_ms":
        return float(ev.decode.step_ms[0])
    if output == "ttft_s":
        return float(ev.ttft_s)
    return float(ev.max_concurrency_vram)


def sensitivity(scenario: Scenario, concurrency: float, output: str = "step_ms",
                rel: float = 0.2, inputs: Sequence[str] | None = None,
                ranges: Mapping[str, tuple[float, float]] | None = None) -> list[Sensitivity]:
    """Move each input +/- `rel` (overheads at 0, or a fit's numerical 0, `AT_ZERO_SHARE`: over
    their typical range), one at a time, and sort by the swing of `output` ('step_ms', 'ttft_s'
    or 'max_concurrency_vram').
    Default inputs: `INPUTS`, plus `OPERATOR_INPUTS` under the operator step. `ranges` (low,
    high) replace those of the inputs they name: on an engine's typical basis, the engine's
    (`capacity.fit.planning.typical_ranges`), the ranges its band spans."""
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(OUTPUTS)}")
    if inputs is None:
        inputs = (*INPUTS, *OPERATOR_INPUTS) if scenario.step_method == StepMethod.OPERATOR \
            else INPUTS
    rows = []
    for name in inputs:
        lo, hi = _range(scenario, name, rel, ranges)
        vals = []
        for v in (lo, hi):
            changed = int(round(v)) if name == "context_tokens" else v
            vals.append(_output(scenario.with_(**{name: changed}), output, concurrency))
        rows.append(Sensitivity(name=name, low=lo, high=hi, output_low=vals[0],
                                output_high=vals[1]))
    return sorted(rows, key=lambda r: r.swing, reverse=True)
