"""Prediction bases in words, in English or Chinese (`capacity.model.basis`): one place for
what every surface (the CLI, the Planner, the quote, the Explorer) calls a basis and its knobs,
and the GPU count within a basis' uncertainty band (`band_text`).

Light on purpose: no planner, no fit at import (a typical engine's name is looked up only when
one is named), so `capacity plan` stays quick to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from capacity.catalog.matmul import (
    bandwidth_ceiling,
    matmul_ceiling,
    typical_bandwidth_ceiling,
    typical_ceiling,
)
from capacity.model.basis import SPEC_SHEET, TYPICAL_PREFIX, BasisKind
from capacity.model.moe import expert_gemm_factor
from capacity.model.prefill import MFU_CURVE_SHARPNESS
from capacity.report.i18n import t, tn

if TYPE_CHECKING:
    from capacity.fit.uncertainty import Widening
    from capacity.model.scenario import Scenario
    from capacity.plan.options import BandWidening, GpuBand, Option


class Knobs(Protocol):
    """What has a basis' knobs: a `Scenario` or a `PlanInputs`."""

    @property
    def eff(self) -> float: ...
    @property
    def mfu(self) -> float: ...
    @property
    def mfu_half_tokens(self) -> float: ...
    @property
    def eta_bw(self) -> float: ...
    @property
    def step_overhead_ms(self) -> float: ...
    @property
    def prefill_overhead_ms(self) -> float: ...
    @property
    def ridge_sharpness(self) -> float: ...
    @property
    def cuda_graph_max_tokens(self) -> float: ...
    @property
    def gemm_tile_tokens(self) -> float: ...
    @property
    def layer_overhead_ms(self) -> float: ...
    @property
    def request_latency_ms(self) -> float: ...
    @property
    def linear_prefill_ms(self) -> float: ...
    @property
    def prefill_layer_ms(self) -> float: ...
    @property
    def embedding_lookup(self) -> bool: ...
    @property
    def runtime_memory(self) -> bool: ...
    @property
    def pp_handoff_ms(self) -> float: ...


def basis_name(kind: BasisKind | str, name: str, lang: str) -> str:
    """A prediction basis in words (`capacity.model.basis`): 'the spec sheet (every
    efficiency at its peak: an upper bound on speed)', 'the chapter's assumptions (...)',
    'typical vLLM efficiency (no calibration)', 'calibration 'x' (...)', or entered."""
    kind = BasisKind(kind)
    if kind == BasisKind.CALIBRATED:
        return t("basis_cal", lang, name=name)
    if kind == BasisKind.TYPICAL:
        from capacity.fit.typical import typical_efficiency

        return t("basis_typical", lang, engine=typical_efficiency(name).name)
    return t("basis_" + kind.value, lang)


def basis_label(basis: str, lang: str) -> str:
    """A basis string (`capacity.model.basis`: '', 'spec', 'typical:vllm', a calibration's
    name) in words, for a chooser."""
    if basis == "":
        return basis_name(BasisKind.CHAPTER, "", lang)
    if basis == SPEC_SHEET:
        return basis_name(BasisKind.SPEC_SHEET, "", lang)
    if basis.startswith(TYPICAL_PREFIX):
        return basis_name(BasisKind.TYPICAL, basis.removeprefix(TYPICAL_PREFIX), lang)
    return basis_name(BasisKind.CALIBRATED, basis, lang)


def knobs_text(knobs: Knobs, lang: str, linear_layers: int | None = None,
               pipelined: bool | None = None, moe: bool | None = None) -> str:
    """A basis' knobs in words: 'decode compute eff 1.00, prefill MFU 0.30, ...' (of a
    `PlanInputs` or a `Scenario`). The per-linear-attention-layer prefill time is left out
    for a model without such layers (`linear_layers` 0, or a Scenario's model's count): it
    multiplies nothing there; the engine's time per pipeline hand-off (F13) where the figures
    rest on a pipeline (`pipelined`; default: a Scenario's PP > 1); the MoE expert GEMM share
    for an MoE model (`moe`; default: a Scenario's model's), with the factor it divides this
    model's plateau by where the knobs are a Scenario's."""
    if linear_layers is None and hasattr(knobs, "variant"):
        linear_layers = knobs.variant.model.layers_of("linear")
    half = float(knobs.mfu_half_tokens)
    # planner inputs on an engine's typical basis hold the plateau as a share of each GPU's
    # measured matmul ceiling (`PlanInputs.mfu_on`); a Scenario holds it resolved
    ceiling = bool(getattr(knobs, "typical", "")) and not getattr(knobs, "calibration", "")
    key = "basis_knobs_curve" if half > 0 else "basis_knobs"
    text = t(key + "_ceiling" if ceiling else key, lang, eff=knobs.eff,
             mfu=knobs.mfu, half=half, eta=knobs.eta_bw, t0=knobs.step_overhead_ms,
             p0=knobs.prefill_overhead_ms, k=MFU_CURVE_SHARPNESS)
    latency = (t("basis_knobs_latency", lang, ms=knobs.request_latency_ms)
               if knobs.request_latency_ms > 0 else "")
    linear = (t("basis_knobs_linear", lang, ms=knobs.linear_prefill_ms)
              if knobs.linear_prefill_ms > 0 and linear_layers != 0 else "")
    layer = (t("basis_knobs_prefill_layer", lang, ms=knobs.prefill_layer_ms)
             if knobs.prefill_layer_ms > 0 else "")
    if pipelined is None:
        pipelined = getattr(knobs, "pp", 1) > 1
    handoff = (t("basis_knobs_handoff", lang, ms=knobs.pp_handoff_ms)
               if pipelined and knobs.pp_handoff_ms > 0 else "")
    return (text + step_shape_text(knobs, lang) + experts_text(knobs, lang, moe) + linear
            + layer + latency + handoff)


def experts_text(knobs: Knobs, lang: str, moe: bool | None = None) -> str:
    """', its routed-expert GEMMs at 0.315 of the dense GEMMs' efficiency (the prefill
    plateau, its ridge and the decode compute efficiency / 2.54 for this model)' for a
    Scenario of an MoE model on a share below 1
    (`capacity.model.moe.expert_gemm_factor`); the same without the factor for planner inputs
    of an MoE model (`moe`); '' otherwise."""
    share = float(getattr(knobs, "expert_gemm_share", 1.0))
    variant = getattr(knobs, "variant", None)
    if moe is None:
        moe = variant is not None and variant.model.moe is not None
    if share >= 1.0 or not moe:
        return ""
    if variant is None:
        return t("basis_knobs_experts", lang, share=share)
    return t("basis_knobs_experts_model", lang, share=share,
             factor=expert_gemm_factor(variant.model, share))


def step_shape_text(knobs: Knobs, lang: str) -> str:
    """The decode step's shape knobs that are set, in words (F11's per-layer overhead, F4c's
    ridge sharpness, F4d's CUDA graphs and GEMM tile, how F4 counts an input embedding
    table and F3 the card's memory: looked up, and as the driver reports it, on a typical
    basis, `capacity.model.basis.TYPICAL_COUNTS`): ', ridge sharpness 2 (...)'; '' at their
    defaults."""
    out = ""
    if knobs.layer_overhead_ms > 0:
        out += t("basis_knobs_layer", lang, ms=knobs.layer_overhead_ms * 1e3)
    if knobs.ridge_sharpness > 0:
        out += t("basis_knobs_ridge", lang, k=knobs.ridge_sharpness)
    if knobs.cuda_graph_max_tokens > 0:
        out += t("basis_knobs_graph", lang, tokens=knobs.cuda_graph_max_tokens)
    if knobs.gemm_tile_tokens > 1:
        out += t("basis_knobs_tile", lang, tile=knobs.gemm_tile_tokens)
    if knobs.embedding_lookup:
        out += t("basis_knobs_lookup", lang)
    if knobs.runtime_memory:
        out += t("basis_knobs_driver_memory", lang)
    return out


def plateau_text(s: Scenario, lang: str) -> str:
    """Where a Scenario's prefill plateau, decode compute eff and bandwidth efficiency on a
    typical basis come from, in words: the first two as the share of the GPU's measured matmul
    ceiling (data/engines.toml's `mfu` and `eff`, resolved by
    `capacity.catalog.matmul.typical_mfu`) times that ceiling, `eta_bw` as the share of its
    measured copy ceiling (`typical_eta_bw`) times that one.
    Example (an MI300X in BF16): '; prefill plateau 0.36 = 0.71 x 0.511 and decode compute
    eff 0.36 = 0.71 x 0.511, the MI300X's fastest measured GEMM as a share of its spec
    sheet; bandwidth efficiency 0.82 = 1.00 x 0.825, the MI300X's fastest measured copy as a
    share of its spec sheet'."""
    dtype = s.variant.format.compute_dtype
    ceiling = typical_ceiling(s.gpu, dtype)
    bf16 = matmul_ceiling(s.gpu, "bf16")
    key = ("basis_plateau" if matmul_ceiling(s.gpu, dtype) is not None
           else "basis_plateau_fp4" if dtype == "fp4" and s.gpu.fp4_tflops
           else "basis_plateau_bf16" if bf16 is not None and ceiling == bf16
           else "basis_plateau_median")
    copy = typical_bandwidth_ceiling(s.gpu)
    copy_key = "basis_copy" if bandwidth_ceiling(s.gpu) is not None else "basis_copy_median"
    return (t(key, lang, mfu=s.mfu, share=s.mfu / ceiling, eff=s.eff,
              eff_share=s.eff / ceiling, ceiling=ceiling, gpu=s.gpu.name, dtype=dtype.upper())
            + t(copy_key, lang, eta=s.eta_bw, share=s.eta_bw / copy, ceiling=copy,
                gpu=s.gpu.name))


def widening_text(w: Widening | BandWidening, lang: str) -> str:
    """One reason a calibration's band is wider than its own held-out error, in words
    ('measured on rtx-4090, applied to rtx-5090: +25% (TPOT and TTFT)'): the Explorer's list
    and the Planner's and the quote's band text say it alike."""
    return tn("unc_w_" + w.kind, int(w.measured) if w.kind == "few_points" else 1, lang,
              used=w.used,
              measured=t("in_" + w.measured, lang) if w.kind == "implausible" else w.measured,
              amount=f"{w.amount:.0%}", output=t("unc_out_" + w.output, lang))


def band_text(o: Option, band: GpuBand, top: int, lang: str) -> str:
    """'2 GPUs, 2-5 within the band; at its slow edge, 2 GPUs fail on TTFT (serving GPUs; the
    1 spare comes on top)': the band counts serving GPUs, as the search does, says which checks
    the recommended count fails at the slow edge where it needs more (`GpuBand.slow_misses`),
    and says so when the option also pays for a spare."""
    lo = t("quote_band_more", lang, n=top) if band.low is None else str(band.low)
    if band.high is None:
        text = tn("quote_band_open", o.n_gpus, lang, lo=lo, top=top)
    elif band.low == band.high == o.n_gpus:
        text = tn("quote_band_same", o.n_gpus, lang)
    else:
        text = tn("quote_band_v", o.n_gpus, lang, lo=lo, hi=band.high)
    if band.slow_misses:
        text += tn("quote_band_why", o.n_gpus, lang, reasons=t("comma", lang).join(
            t("quote_reason_" + r, lang) for r in band.slow_misses))
    if band.widenings:   # a calibration used away from its data (another GPU, model, ...)
        text += t("quote_band_wider", lang, reasons=t("list_sep", lang).join(
            widening_text(w, lang) for w in band.widenings))
    return text + (t("quote_band_spare", lang, n=o.spare_gpus) if o.spare_gpus else "")
