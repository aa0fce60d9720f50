"""The device's measured ceilings as a fit sees them (data/matmul_ceilings.toml,
`capacity.catalog.matmul`): the share of a scenario's peak TFLOP/s its fastest GEMM reaches,
which bounds eff, MFU and attention MFU, and the share of its bandwidth its fastest copy
reaches, which bounds eta_bw and eta_kv; and the notes a fit that stops at one adds
(docs/calibration.md, "The device's ceiling")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from capacity.catalog.matmul import bandwidth_ceiling, matmul_ceiling, typical_mfu
from capacity.fit.calibration_problem import BANDWIDTH_KNOBS, CEILING_KNOBS
from capacity.fit.typical import typical_efficiency
from capacity.model.moe import expert_gemm_factor
from capacity.model.scenario import Scenario
from capacity.types import Note


def scenario_ceiling(s: Scenario) -> float | None:
    """The share of the scenario's `tflops` its GPU's fastest measured GEMM reaches
    (dimensionless): `capacity.catalog.matmul.matmul_ceiling` for the weights' GEMM
    precision; None where the catalog has no measurement or `tflops` was set by hand (the
    measurement is of the catalog's peak, not of the one given)."""
    dtype = s.variant.format.compute_dtype
    return None if s.tflops != s.gpu.tflops_for(dtype) else matmul_ceiling(s.gpu, dtype)


def fit_ceiling(scenarios: Sequence[Scenario]) -> float | None:
    """The lowest `scenario_ceiling` of the scenarios a fit spans (one GPU; the models may run
    their GEMMs in other precisions): what bounds the fitted eff, MFU and attention MFU
    (`calibration_problem.with_ceiling`); None where no scenario has one."""
    return _lowest(scenario_ceiling(s) for s in scenarios)


def _lowest(values: Iterable[float | None]) -> float | None:
    """The least of the values that are not None; None where all are."""
    known = [v for v in values if v is not None]
    return min(known) if known else None


def typical_eff(base: Scenario) -> float:
    """The centre of a fit's prior on eff, the decode GEMMs' share of the scenario's peak
    TFLOP/s: the typical basis' GEMM plateau, a share of the GPU's measured matmul ceiling
    (data/engines.toml's `mfu`: a decode batch's GEMMs and a prompt's run through the same
    kernels), x that ceiling for the weights' GEMM precision
    (`capacity.catalog.matmul.typical_mfu`: the median of the measured GPUs where this one is
    not), at most 1. What a planner predicts with where nobody measured is where a fit leaves
    an eff its points do not pin (compute binds at none of them). The plateau is the device's,
    not an engine's: SGLang's typical eff (0.374 of the ceiling) lumps what its large batches
    lose elsewhere into the one arithmetic term of the chapter's step, which the operator
    step's own knobs (attention, per-sequence time) fit apart. For an MoE model, over its
    expert GEMM factor, as the typical basis runs it (`capacity.model.moe.expert_gemm_factor`).
    Example: an RTX 4090 in BF16, 0.706 x 1 = 0.706; an H100, 0.706 x 0.803 = 0.567; an A100,
    0.706 x 0.869 = 0.614; gpt-oss-120b on an H100, 0.567 / 2.537 = 0.224."""
    typ = typical_efficiency("vllm")
    return (typical_mfu(typ.typical["mfu"], base.gpu, base.variant.format.compute_dtype)
            / expert_gemm_factor(base.model, typ.expert_gemm_share))


def scenario_bandwidth_ceiling(s: Scenario) -> float | None:
    """The share of the scenario's `bandwidth_gb_s` its GPU's fastest measured device copy
    reaches (dimensionless): `capacity.catalog.matmul.bandwidth_ceiling`; None where the
    catalog has no copy measurement or the bandwidth was set by hand. Example: an H200 SXM
    4266.0 / 4800 = 0.889."""
    return (None if s.bandwidth_gb_s != s.gpu.bandwidth_gb_s
            else bandwidth_ceiling(s.gpu))


def fit_bandwidth_ceiling(scenarios: Sequence[Scenario]) -> float | None:
    """The lowest `scenario_bandwidth_ceiling` of the scenarios a fit spans: what bounds the
    fitted eta_bw and eta_kv; None where no scenario has one."""
    return _lowest(scenario_bandwidth_ceiling(s) for s in scenarios)


def bandwidth_notes(names: Sequence[str], x: npt.ArrayLike, ceiling: float,
                    base: Scenario) -> list[Note]:
    """A note for each bandwidth knob the fit left at the device's measured copy: the points
    ask for faster reads than the GPU copies memory, so the knob stops there and the fixed
    costs take the rest."""
    g = base.gpu
    return [Note(f"{n} = {v:.3g} is at {g.name}'s measured copy bandwidth "
                 f"({ceiling * base.bandwidth_gb_s:.4g} of {base.bandwidth_gb_s:g} GB/s, "
                 "data/matmul_ceilings.toml): the points ask for faster reads than the device "
                 "copies memory, so the fit stops there and the fixed costs take the rest",
                 code="at_copy_ceiling", knob=n, value=round(float(v), 3), gpu=g.name,
                 copy=round(ceiling * base.bandwidth_gb_s, 1), spec=base.bandwidth_gb_s)
            for n, v in zip(names, np.asarray(x, dtype=np.float64), strict=True)
            if n in BANDWIDTH_KNOBS and v >= ceiling * (1.0 - 1e-6)]


def ceiling_notes(names: Sequence[str], x: npt.ArrayLike, ceiling: float,
                  base: Scenario) -> list[Note]:
    """A note for each GEMM knob the fit left at the device's measured matmul ceiling: the
    points asked for more arithmetic than the GPU's fastest measured GEMM does, so the knob
    stops there and the others (overheads, bandwidth) take the rest."""
    out: list[Note] = []
    g = base.gpu
    mamf = ceiling * base.tflops
    for n, v in zip(names, np.asarray(x, dtype=np.float64), strict=True):
        if n in CEILING_KNOBS and v >= ceiling * (1.0 - 1e-6):
            out.append(Note(
                f"{n} = {v:.3g} is at {g.name}'s measured matmul ceiling ({mamf:.4g} of "
                f"{base.tflops:g} TFLOP/s, data/matmul_ceilings.toml): the points ask for "
                "more arithmetic than the device's fastest GEMM does, so the fit stops there "
                "and the other knobs take the rest; a fixed cost the formula lacks, or a spec "
                "figure that is not this card's, is the likelier cause", code="at_ceiling",
                knob=n, value=round(float(v), 3), gpu=g.name, mamf=round(mamf, 1),
                peak=base.tflops))
    return out
