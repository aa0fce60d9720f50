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

`with_typical` plans with an engine's typical efficiency when there is no calibration
(data/engines.toml: values and ranges derived from the bundled published measurements and
calibration, with the derivation in the file); its band spans the file's error bands
(`typical_knob_edges`), the fast edge's fixed step costs solved on the deployment banded
(`fast_fixed_costs`: the Planner's option, the Explorer's scenario, the scorecard's row).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from capacity.catalog import matmul
from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.fit.calibration import KNOBS, Calibration, PointKind, apply
from capacity.fit.calibration_store import check_name, load, load_named
from capacity.fit.typical import (
    BANDWIDTH_SHARES,
    CEILING_SHARES,
    TYPICAL_KNOBS,
    TypicalEfficiency,
    engines,
    typical_efficiency,
)
from capacity.fit.uncertainty import (
    TYPICAL_RANGES,
    Widening,
    calibrated_spread,
    calibration_spreads,
    overhead_gb_edges,
)
from capacity.model.basis import (
    CHAPTER,
    CHAPTER_KNOBS,
    MEASURED_COUNTS,
    SPEC_KNOBS,
    SPEC_SHEET,
    TYPICAL_COUNTS,
    TYPICAL_PREFIX,
)
from capacity.model.moe import expert_gemm_factor
from capacity.model.roofline import StepMethod
from capacity.model.scenario import Scenario, evaluate
from capacity.plan.detail import design_concurrency_total, option_scenario
from capacity.plan.options import BandWidening, GpuBand, Option, PlanInputs, Reason
from capacity.plan.search import plan
from capacity.types import Note


def with_calibration(inp: PlanInputs, cal: Calibration) -> PlanInputs:
    """The inputs with the calibration's fitted knobs (those it has), its decode method (F4 or
    F4b), its name, and the memory counted as the measured engine counted it
    (`MEASURED_COUNTS`: the driver's), as `calibration.apply` puts them into a scenario."""
    changes: dict[str, object] = {"calibration": cal.name or "calibrated", "typical": "",
                                  **MEASURED_COUNTS}
    for name in (*KNOBS, "overhead_gb"):
        value = getattr(cal, name)
        if value is not None:
            changes[name] = float(value)
    if cal.step_method or cal.eta_bw is not None:  # an old file's knobs are the chapter's
        changes["step_method"] = cal.step_method or StepMethod.CHAPTER.value
    return replace(inp, **changes)  # type: ignore[arg-type]


def ridge_edges(*values: float) -> tuple[float, float]:
    """(slow, fast) ridge sharpness among `values` (F4c): 0 is the max, the fastest; of the
    others the smallest is the slowest (1: the sum). Example: (0, 2, 4) -> (2, 0)."""
    smooth = [v for v in values if v > 0]
    slow = min(smooth) if smooth else 0.0
    fast = 0.0 if len(smooth) < len(values) else max(smooth)
    return slow, fast


def typical_basis_for(engine: str) -> str:
    """The typical basis a prediction under engine profile `engine` rests on: 'typical:ENGINE'
    where data/engines.toml has that engine's knobs, else vLLM's. Example: 'sglang' ->
    'typical:sglang', 'llamacpp' -> 'typical:vllm'."""
    return TYPICAL_PREFIX + (engine if engine in engines() else "vllm")


def with_typical(inp: PlanInputs, typ: TypicalEfficiency) -> PlanInputs:
    """The inputs with the engine's typical efficiency knobs and its key (no calibration): one
    set for every GPU, so an option's figures do not depend on what is searched beside it."""
    knobs: dict[str, object] = {**typ.typical, **TYPICAL_COUNTS, "calibration": "",
                                "typical": typ.engine,
                                "expert_gemm_share": typ.expert_gemm_share}
    return replace(inp, **knobs)  # type: ignore[arg-type]


def with_spec_sheet(inp: PlanInputs) -> PlanInputs:
    """The inputs on the spec-sheet basis (`capacity.model.basis.SPEC_KNOBS`): every
    efficiency at its peak and the bound step, no calibration nor engine."""
    return replace(inp, calibration="", typical="", **SPEC_KNOBS)


def with_chapter(inp: PlanInputs) -> PlanInputs:
    """The inputs on the chapter's assumptions (`capacity.model.basis.CHAPTER_KNOBS`)."""
    return replace(inp, calibration="", typical="", **CHAPTER_KNOBS)


def check_basis(text: str) -> str:
    """`text` as a basis string (`capacity.model.basis`), normalised, or InputError naming what
    a basis is: '' or 'chapter', 'spec', 'typical:ENGINE' (a known engine) or a calibration
    name (checked as a name only: `with_basis` loads it)."""
    raw = text.strip()
    low = raw.lower()
    if low in ("", CHAPTER):
        return ""
    if low == SPEC_SHEET:
        return SPEC_SHEET
    if low.startswith(TYPICAL_PREFIX):
        typical_efficiency(low.removeprefix(TYPICAL_PREFIX))
        return low
    try:
        return check_name(raw)
    except InputError:
        known = "/".join(sorted(engines()))   # 'sglang/vllm': one token in either language
        raise InputError(Note(f"basis '{raw[:60]}' is not one of: chapter, spec, "
                              f"{TYPICAL_PREFIX}ENGINE ({known}), or a saved calibration's name",
                              code="bad_basis", value=raw[:60], engines=known)) from None


def with_basis(inp: PlanInputs, text: str) -> PlanInputs:
    """The inputs on the basis `text` names (`check_basis`): the chapter's, the spec sheet, an
    engine's typical knobs or a saved calibration (loaded from the calibrations folder)."""
    basis = check_basis(text)
    if basis == "":
        return with_chapter(inp)
    if basis == SPEC_SHEET:
        return with_spec_sheet(inp)
    if basis.startswith(TYPICAL_PREFIX):
        return with_typical(with_chapter(inp),
                            typical_efficiency(basis.removeprefix(TYPICAL_PREFIX)))
    return with_calibration(with_chapter(inp), load(basis))


def scenario_with_basis(s: Scenario, text: str) -> Scenario:
    """A scenario on the basis `text` names, as `with_basis` puts it into planner inputs: the
    Explorer's prediction and the planner's use the same knobs for the same basis."""
    basis = check_basis(text)
    if basis == "":
        return s.with_(calibration=None, **CHAPTER_KNOBS)
    if basis == SPEC_SHEET:
        return s.with_(calibration=None, **SPEC_KNOBS)
    if basis.startswith(TYPICAL_PREFIX):
        return on_typical(s, engine_knobs(typical_efficiency(basis.removeprefix(TYPICAL_PREFIX))))
    return apply(load_named(basis), s.with_(**CHAPTER_KNOBS))


def on_typical(s: Scenario, knobs: Mapping[str, float]) -> Scenario:
    """`s` on a typical basis whose knobs (data/engines.toml's units) are `knobs`: the
    chapter's knobs under them, the weights counted as engines read them (`TYPICAL_COUNTS`),
    the knobs as `s`'s GPU runs them (`typical_knobs_on`), no calibration. The one place a
    Scenario is put on a typical basis: `scenario_with_basis` with the engines file's knobs,
    the scorecard (`capacity.fit.validate_typical`) with each group's held-out ones."""
    return s.with_(calibration=None, **{**CHAPTER_KNOBS, **TYPICAL_COUNTS,
                                         **typical_knobs_on(knobs, s)})


def typical_knobs_on(knobs: Mapping[str, float], s: Scenario) -> dict[str, float]:
    """A typical basis' knobs (data/engines.toml's units) as `s` runs them: the prefill plateau
    `mfu` and the decode GEMMs' `eff`, shares of the GPU's measured matmul ceiling, as shares
    of its spec-sheet TFLOP/s for the precision its GEMMs run in
    (`capacity.catalog.matmul.typical_mfu`); `eta_bw`, a share of the GPU's measured copy
    ceiling, as a share of its spec-sheet bandwidth (`typical_eta_bw`); for an MoE model the
    plateau, `eff` and F6c's m_half divided by `expert_gemm_factor` at the knobs'
    `EXPERT_SHARE` (the routed experts' GEMMs at that share of the dense plateau, their weight
    read unchanged; 1 where the knobs have none); the others as they are. Examples: mfu 0.706
    on an H100 bf16 -> 0.567, on an A100 -> 0.614; eta_bw 1.0 on an H100 -> 0.921, on an
    MI300X -> 0.825; gpt-oss-120b at share 0.5 on an H100: mfu 0.567 / 1.707 = 0.332."""
    share = float(knobs.get(EXPERT_SHARE, 1.0))
    out = {**knobs, EXPERT_SHARE: share}
    for k, scale in typical_scales(s, share).items():
        if k in out:
            out[k] = min(1.0, out[k] * scale) if k in FRACTIONS else out[k] * scale
    return out


EXPERT_SHARE: Final = "expert_gemm_share"
"""The key of an engine's MoE expert GEMM share in a typical basis' knobs
(`TypicalEfficiency.expert_gemm_share`; `typical_knobs_on` resolves the others with it and
keeps it: `Scenario.expert_gemm_share`, `PlanInputs.expert_gemm_share`)."""
FRACTIONS: Final = (*CEILING_SHARES, *BANDWIDTH_SHARES)
"""The typical knobs that are shares of a ceiling (at most 1 once put on a GPU)."""


def typical_scales(s: Scenario, expert_share: float = 1.0) -> dict[str, float]:
    """What `typical_knobs_on` multiplies a typical basis' knobs by on `s`'s GPU and model
    (dimensionless): `mfu` and `eff` by the GPU's matmul ceiling for its GEMMs' precision over
    the MoE factor F (`capacity.model.moe.expert_gemm_factor` at `expert_share`; 1 for a dense
    model), `eta_bw` by its copy ceiling, m_half by 1 / F. Example: an H100 in bf16, dense:
    {'eff': 0.803, 'mfu': 0.803, 'eta_bw': 0.921, 'mfu_half_tokens': 1.0}."""
    factor = expert_gemm_factor(s.model, expert_share)
    ceiling = matmul.typical_ceiling(s.gpu, s.variant.format.compute_dtype)
    return {**dict.fromkeys(CEILING_SHARES, ceiling / factor),
            **dict.fromkeys(BANDWIDTH_SHARES, matmul.typical_bandwidth_ceiling(s.gpu)),
            "mfu_half_tokens": 1.0 / factor}


def engine_knobs(typ: TypicalEfficiency, model_key: str = "") -> dict[str, float]:
    """`typ`'s knobs as `on_typical` takes them: the typical values and the MoE expert GEMM
    share (`EXPERT_SHARE`): the file's, or with `model_key` the one derived without that
    model's runs (`TypicalEfficiency.expert_share_for`, what the scorecards use)."""
    share = typ.expert_share_for(model_key) if model_key else typ.expert_gemm_share
    return {**typ.typical, EXPERT_SHARE: share}


STEP_BAND_KNOBS: Final = ("eta_bw", "eff", "step_overhead_ms", "layer_overhead_ms")
"""The decode step's knobs that an engine's `step_error` band scales (F4's bandwidth and
compute terms and its fixed costs; the all-reduces are not scaled)."""
TTFT_BAND_KNOBS: Final = ("mfu", "prefill_overhead_ms", "linear_prefill_ms", "prefill_layer_ms",
                          "request_latency_ms")
"""The knobs of an unqueued TTFT that an engine's `ttft_error` band scales (F6's plateau, its
fixed costs per prefill, per linear-attention layer and per layer, the request's time outside the GPU;
the prompt's all-reduces are not scaled)."""


def typical_knob_edges(typ: TypicalEfficiency, planned: Mapping[str, float]
                       ) -> tuple[dict[str, float], dict[str, float]]:
    """(slow, fast) values of `TYPICAL_KNOBS` at the edges of the band around a prediction on
    `typ`'s typical basis: each knob over the engine's range (data/engines.toml low..high)
    widened to the value planned with (`planned`), the slow edge the low end of a fraction and
    the high end of an overhead or token count, the sharpness by `ridge_edges`; with the
    engine's `step_error` (low, high), the step's knobs (`STEP_BAND_KNOBS`) instead at the
    planned values over 1 + low and 1 + max(high, 0) (a fraction times it, at most 1; an
    overhead divided by it), so the step spans step / (1 + high) .. step / (1 + low) (where
    eta_bw's fast edge stops at the copy ceiling, once `fast_fixed_costs` has solved that
    edge's fixed costs on a deployment) and
    always holds the prediction itself; both edges count the weights as the basis does
    (`TYPICAL_COUNTS`: an untied input embedding table a lookup); with its `ttft_error`, the
    same for the knobs of an
    unqueued TTFT (`TTFT_BAND_KNOBS`): TTFT / (1 + high) .. TTFT / (1 + low) before any
    queueing. The one definition of that band: the Planner's
    (`band_edges`) and the Explorer's (`typical_band_scenarios`), which then solve the fast
    edge's fixed step costs on their deployment (`fast_fixed_costs`). Example (vLLM,
    step_error -0.265 and +0.152): eta_bw 1 x 0.735 = 0.735 slow, 1 x 1.152 -> 1 fast (shares
    of the GPU's copy ceiling); layer overhead 0.0773 / 0.735 = 0.1052 and 0.0773 / 1.152 =
    0.0671 ms (before the fast edge's is solved); with ttft_error -0.695 and +1.248, MFU
    0.706 x 0.305 = 0.215 and 0.706 x 2.248 -> 1 (shares of the GPU's matmul ceiling), the
    request latency 7.84 / 0.305 = 25.7 and 7.84 / 2.248 = 3.5 ms; without it, MFU over its
    range, 0.628 and 0.785."""
    fractions = ("eta_bw", "eff", "mfu")
    lo = {k: min(typ.low[k], planned[k]) for k in TYPICAL_KNOBS}
    hi = {k: max(typ.high[k], planned[k]) for k in TYPICAL_KNOBS}
    slow = {k: (lo[k] if k in fractions else hi[k]) for k in TYPICAL_KNOBS}
    fast = {k: (hi[k] if k in fractions else lo[k]) for k in TYPICAL_KNOBS}
    for error, knobs in ((typ.step_error, STEP_BAND_KNOBS), (typ.ttft_error, TTFT_BAND_KNOBS)):
        if error is None:   # the knobs' ranges
            continue
        s_slow, s_fast = 1.0 + error[0], 1.0 + max(error[1], 0.0)
        for k in knobs:   # the basis' measured error band
            if k in fractions:
                slow[k] = planned[k] * s_slow
                fast[k] = min(1.0, planned[k] * s_fast)
            else:
                slow[k], fast[k] = planned[k] / s_slow, planned[k] / s_fast
    slow["ridge_sharpness"], fast["ridge_sharpness"] = ridge_edges(
        typ.low["ridge_sharpness"], typ.high["ridge_sharpness"], planned["ridge_sharpness"])
    for edge in (slow, fast):   # both edges count the weights as the basis does
        edge.update(TYPICAL_COUNTS)
    return slow, fast


FIXED_STEP_KNOBS: Final = ("step_overhead_ms", "layer_overhead_ms")
"""F11's fixed decode-step costs, ms per step and per layer: at a typical band's fast edge they
carry what the capped fractions cannot (`fast_fixed_costs`)."""


def fast_fixed_costs(planned: Scenario, fast: Scenario, high: float) -> dict[str, float]:
    """F11's fixed step costs (ms per step and per layer, `FIXED_STEP_KNOBS`) at the fast edge
    of a typical basis' band around `planned`, `fast` being that edge's other knobs
    (`typical_knob_edges`) and `high` the engine's `step_error` high: the share k of the planned
    costs, one for both, at which the one-sequence decode step (F4 with F11, at the scenario's
    context) is the planned one over 1 + high, with 0 <= k <= 1 / (1 + high).

    Why: the band says a step may be up to 1 + high faster than predicted, but eta_bw's fast
    edge stops at the GPU's copy ceiling (no read is faster than the device copies memory), so
    a step whose reads are at that ceiling already is faster only by paying less per step and
    per layer. The published steps measured faster than the basis are those (Qwen2.5-7B BF16
    on an RTX 4090 under vLLM 0.25.1 about 20 us a layer, gpt-oss-120b on 8 B200s under SGLang
    0.5.6 at most about 60, against the basis' 77.3; docs/accuracy.md). Where even no fixed
    cost leaves the step slower than that (k = 0), the fast edge is the step read at the copy
    ceiling with no fixed cost: the fastest physics allows. Where the fractions are not capped
    k is 1 / (1 + high) but for the all-reduces, which the band does not scale.

    The step is linear in k: T(k) = T(0) + k (T(1) - T(0)), T(1) at the planned costs; k = (T_p
    / (1 + high) - T(0)) / (T(1) - T(0)). Example: planned step 8.0 ms, high 0.25: the target
    6.4 ms; at the fast edge's fractions with no fixed cost 5.4 ms and with the planned costs
    (2.5 ms of them) 7.9 ms: k = (6.4 - 5.4) / 2.5 = 0.4, a 77.3 us layer cost becomes 30.9 us.
    Source: docs/method.md, "Uncertainty"."""
    def one_sequence_ms(s: Scenario) -> float:
        return float(evaluate(s, [1.0]).decode.step_ms[0])

    costs = {k: float(getattr(planned, k)) for k in FIXED_STEP_KNOBS}
    t0 = one_sequence_ms(fast.with_(**dict.fromkeys(FIXED_STEP_KNOBS, 0.0)))
    t1 = one_sequence_ms(fast.with_(**costs))
    top = 1.0 / (1.0 + max(high, 0.0))
    share = (top if t1 <= t0
             else min(top, max(0.0, (one_sequence_ms(planned) * top - t0) / (t1 - t0))))
    return {k: v * share for k, v in costs.items()}


def typical_ranges(s: Scenario, engine: str) -> dict[str, tuple[float, float]]:
    """(low, high) of each of `TYPICAL_KNOBS` around `s`, a scenario on `engine`'s typical
    basis: the values of its band's two edges (`typical_knob_edges`), for the Explorer's
    sensitivity table beside that band."""
    slow, fast = _scenario_edges(s, engine)
    return {k: (min(slow[k], fast[k]), max(slow[k], fast[k])) for k in TYPICAL_KNOBS}


def _scenario_edges(s: Scenario, engine: str) -> tuple[dict[str, float], dict[str, float]]:
    """`typical_knob_edges` around `s`, a scenario on `engine`'s typical basis, in `s`'s units:
    its MFU and eff, shares of the spec sheet there, are the engines file's shares of the
    matmul ceiling x the GPU's ceiling, and its eta_bw the file's share of the copy ceiling x
    that ceiling (`typical_knobs_on`), so the edges are taken in the file's units and put back
    the same way."""
    typ = typical_efficiency(engine)
    scales = typical_scales(s, s.expert_gemm_share)   # the share `s` was resolved with
    planned = {k: float(getattr(s, k)) for k in TYPICAL_KNOBS}
    for k, scale in scales.items():
        planned[k] /= scale
    slow, fast = typical_knob_edges(typ, planned)
    for edge in (slow, fast):
        for k, scale in scales.items():
            edge[k] = min(1.0, edge[k] * scale) if k in FRACTIONS else edge[k] * scale
    if typ.step_error is not None:   # the fixed costs carry what the capped fractions cannot
        fast.update(fast_fixed_costs(s, s.with_(**fast), typ.step_error[1]))
    return slow, fast


def typical_band_scenarios(s: Scenario, engine: str) -> tuple[Scenario, Scenario]:
    """(fast, slow): `s`, a scenario on `engine`'s typical basis, at the edges of its band
    (`typical_knob_edges`, as the Planner's `band_edges` puts them into its inputs), for
    `capacity.fit.uncertainty.band`; the memory overhead keeps the generic range
    (`TYPICAL_RANGES`: the engines file has none)."""
    slow_k, fast_k = _scenario_edges(s, engine)
    gb_slow, gb_fast = overhead_gb_edges(s.overhead_gb)
    return s.with_(**fast_k, overhead_gb=gb_fast), s.with_(**slow_k, overhead_gb=gb_slow)


def band_edges(inp: PlanInputs, cal: Calibration | None, option: Option | None = None,
               catalog: Catalog | None = None) -> tuple[PlanInputs, PlanInputs]:
    """(slow, fast) inputs: the edges of the band around `inp`'s prediction (with an engine's
    typical efficiency and no calibration: that engine's band, `typical_knob_edges`, its fast
    edge's fixed step costs solved on `option`'s deployment where given, `fast_fixed_costs`,
    as the Explorer's `typical_band_scenarios` solves them on its scenario), the runtime
    memory overhead at both edges too (`uncertainty.overhead_gb_edges`, as the Explorer's
    C_vram band puts it): a configuration that memory binds needs more GPUs at the slow edge
    when 5 GB of overhead leave less room for KV."""
    gb_slow, gb_fast = overhead_gb_edges(inp.overhead_gb,
                                         None if cal is None else cal.overhead_gb)
    if cal is None and inp.typical:
        typ = typical_efficiency(inp.typical)
        slow_k, fast_k = typical_knob_edges(typ, {k: float(getattr(inp, k))
                                                  for k in TYPICAL_KNOBS})
        slow = replace(inp, **slow_k, overhead_gb=gb_slow)  # type: ignore[arg-type]
        fast = replace(inp, **fast_k, overhead_gb=gb_fast)  # type: ignore[arg-type]
        if option is not None and typ.step_error is not None:
            costs = fast_fixed_costs(option_scenario(inp, option, catalog),
                                     option_scenario(fast, option, catalog), typ.step_error[1])
            fast = replace(fast, step_overhead_ms=costs["step_overhead_ms"],
                           layer_overhead_ms=costs["layer_overhead_ms"])
        return slow, fast
    if cal is None:
        lo = {k: v[0] for k, v in TYPICAL_RANGES.items()}
        hi = {k: v[1] for k, v in TYPICAL_RANGES.items()}
        slow = replace(inp, eta_bw=lo["eta_bw"], eff=lo["eff"], mfu=lo["mfu"],
                       step_overhead_ms=hi["step_overhead_ms"],
                       layer_overhead_ms=hi["layer_overhead_ms"],
                       prefill_overhead_ms=hi["prefill_overhead_ms"], overhead_gb=gb_slow)
        # the fast edge: the upper bound on speed, with the least memory overhead
        return slow, replace(with_spec_sheet(inp), overhead_gb=gb_fast)
    if option is not None:   # widened by the calibration's distance from the option, as the
        sp_t, sp_f, _ = calibration_spreads(   # Explorer's band of its link widens it
            cal, option_scenario(inp, option, catalog), [design_concurrency_total(inp, option)])
    else:
        sp_t, sp_f = calibrated_spread(cal, PointKind.TPOT), calibrated_spread(cal, PointKind.TTFT)
    s_step, s_ttft = 1.0 + sp_t, 1.0 + sp_f
    slow = replace(inp, eta_bw=inp.eta_bw / s_step, eff=inp.eff / s_step,
                   step_overhead_ms=inp.step_overhead_ms * s_step, mfu=inp.mfu / s_ttft,
                   prefill_overhead_ms=inp.prefill_overhead_ms * s_ttft,
                   seq_overhead_ms=inp.seq_overhead_ms * s_step,
                   batched_overhead_ms=inp.batched_overhead_ms * s_step,
                   eta_kv=None if inp.eta_kv is None else inp.eta_kv / s_step,
                   attn_mfu=None if inp.attn_mfu is None else inp.attn_mfu / s_ttft,
                   overhead_gb=gb_slow)
    fast = replace(inp, eta_bw=min(1.0, inp.eta_bw * s_step), eff=min(1.0, inp.eff * s_step),
                   step_overhead_ms=inp.step_overhead_ms / s_step,
                   mfu=min(1.0, inp.mfu * s_ttft),
                   prefill_overhead_ms=inp.prefill_overhead_ms / s_ttft,
                   seq_overhead_ms=inp.seq_overhead_ms / s_step,
                   batched_overhead_ms=inp.batched_overhead_ms / s_step,
                   eta_kv=None if inp.eta_kv is None else min(1.0, inp.eta_kv * s_step),
                   attn_mfu=None if inp.attn_mfu is None else min(1.0, inp.attn_mfu * s_ttft),
                   overhead_gb=gb_fast)
    return slow, fast


def _narrow(inp: PlanInputs, o: Option) -> PlanInputs:
    """`inp` searching `o`'s GPU, weight format and KV precision only."""
    return replace(inp, gpus=(o.gpu,), formats=(o.weights,), kv_dtypes=(o.kv_dtype,))


def _fewest(inp: PlanInputs, o: Option, catalog: Catalog | None) -> int | None:
    p = plan(_narrow(inp, o), catalog)
    counts = [x.n_gpus for x in p.options if x.tp == o.tp]
    return min(counts) if counts else None


def _misses(inp: PlanInputs, o: Option, catalog: Catalog | None) -> tuple[Reason, ...]:
    """The checks `o` (its GPUs, TP, format, KV precision and draft) fails under `inp`."""
    p = plan(_narrow(inp, o), catalog, keep_all=True, only=(o.n_gpus, o.tp, o.pp))
    same = [x for x in p.all_options if x.draft == o.draft]
    return same[0].failures if same else ()


def gpu_band(inp: PlanInputs, o: Option, cal: Calibration | None = None,
             catalog: Catalog | None = None) -> GpuBand:
    """'7 GPUs, 6-9 within the band' for option `o` of the plan of `inp`, and the checks the
    7 GPUs fail at the band's slow edge (what the 9 are for)."""
    slow, fast = band_edges(inp, cal, o, catalog)
    high = _fewest(slow, o, catalog)
    far: tuple[Widening, ...] = () if cal is None else calibration_spreads(
        cal, option_scenario(inp, o, catalog), [design_concurrency_total(inp, o)])[2]
    return GpuBand(n_gpus=o.n_gpus, low=_fewest(fast, o, catalog), high=high,
                   basis="calibrated" if cal is not None else inp.basis,
                   slow_misses=() if high == o.n_gpus else _misses(slow, o, catalog),
                   widenings=tuple(BandWidening(kind=str(w.kind), measured=w.measured,
                                                used=w.used, amount=w.amount, output=w.output)
                                   for w in far))
