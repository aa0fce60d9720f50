"""Prediction bases: which efficiency knobs a prediction rests on (docs/method.md, "Bases").

Every speed figure (decode step, TTFT, capacity, cost per million tokens) is computed from the
device's spec-sheet peaks and a set of knobs (F11): decode compute efficiency `eff`, prefill
`mfu`, bandwidth efficiency `eta_bw`, overheads, and the step method. A *basis* names where the
knobs come from:

- `spec` (the spec sheet): every efficiency at its peak (eff = MFU = eta_bw = 1, no overheads)
  and the spec-sheet bound step (`StepMethod.BOUND`): the least a device must do, so the
  upper bound on speed of every other basis, on every surface;
- `chapter` (the chapter's assumptions): the chapter's F4 at eff 1 and its prefill MFU of 0.3,
  a typical value rather than a peak. The worked example (docs/method.md, section 4) is
  computed on it, and it stays the default of `capacity plan` and the pages;
- `typical:ENGINE`: an engine's typical knobs (data/engines.toml);
- a saved calibration's name: knobs fitted to measurements (F11);
- `entered`: knobs typed in (`--mfu 0.5`), none of the above.

A basis is written as one string everywhere it travels (the CLI's `--basis`, both pages' URLs,
the JSON): '' or 'chapter', 'spec', 'typical:ENGINE', or a calibration name. Resolving the
last two needs the data files: `capacity.fit.planning.with_basis`. This module holds the two
bases that are constants, and tells which one a set of knobs is.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

from capacity.model.roofline import StepMethod


class BasisKind(StrEnum):
    """Where a prediction's knobs come from."""

    SPEC_SHEET = "spec"
    CHAPTER = "chapter"
    TYPICAL = "typical"
    CALIBRATED = "calibrated"
    ENTERED = "entered"


KNOB_FIELDS: Final[tuple[str, ...]] = (
    "eff", "mfu", "eta_bw", "step_overhead_ms", "prefill_overhead_ms", "step_method", "eta_kv",
    "attn_sat_batch", "seq_overhead_ms", "batch1_factor", "attn_mfu", "draft_overhead_ms",
    "verify_overhead_ms", "mfu_half_tokens", "ridge_sharpness", "cuda_graph_max_tokens",
    "gemm_tile_tokens", "layer_overhead_ms", "batched_overhead_ms", "request_latency_ms",
    "linear_prefill_ms", "prefill_layer_ms", "embedding_lookup", "pp_handoff_ms",
    "runtime_memory", "expert_gemm_share")
"""The fields a basis sets, named as `Scenario` and `PlanInputs` name them."""

CHAPTER_KNOBS: Final[Mapping[str, Any]] = {
    "eff": 1.0, "mfu": 0.3, "eta_bw": 1.0, "step_overhead_ms": 0.0, "prefill_overhead_ms": 0.0,
    "step_method": StepMethod.CHAPTER.value, "eta_kv": None, "attn_sat_batch": 0.0,
    "seq_overhead_ms": 0.0, "batch1_factor": 1.0, "attn_mfu": None, "draft_overhead_ms": 0.0,
    "verify_overhead_ms": 0.0, "mfu_half_tokens": 0.0, "ridge_sharpness": 0.0,
    "cuda_graph_max_tokens": 0.0, "gemm_tile_tokens": 0.0, "layer_overhead_ms": 0.0,
    "batched_overhead_ms": 0.0, "request_latency_ms": 0.0, "linear_prefill_ms": 0.0,
    "prefill_layer_ms": 0.0, "embedding_lookup": False, "pp_handoff_ms": 0.0,
    "runtime_memory": False, "expert_gemm_share": 1.0}
"""The chapter's assumptions: F4 at eff 1 (the chapter's table) and prefill at MFU 0.3; the
roofline's sharp corner (F4c's sharpness 0: the max) and no GEMM padding (F4d); F4's W read
whole, an untied input embedding table included (the chapter's count); F3's memory as the spec
sheet prints it, in decimal GB (the chapter's 24 GB RTX 4090). The spec sheet keeps
the first two too: a smooth ridge and padding only slow a step down, so it stays the bound (its
step method counts the table as a lookup whatever `embedding_lookup` says)."""

TYPICAL_COUNTS: Final[Mapping[str, Any]] = {"embedding_lookup": True, "runtime_memory": True}
"""How a typical basis (`typical:ENGINE`) counts the weights in the decode step (F4) and the
memory (F3): as the engines it stands for do, an untied input embedding table looked up one row
per sequence rather than read whole and multiplied (`Scenario.embedding_lookup`; the operator
method and the spec-sheet bound count it so too), and the card's memory as its driver reports
it (`Scenario.runtime_memory`: an engine's gpu_memory_utilization is a share of that, 85.52 GB
on an H100 SXM where the spec sheet's 80 GB counts 80 x 10^9 bytes). Its prefill keeps the
chapter's F6 count, the one its MFU plateau was derived on. The lookup since 2026-12-07, the
driver's memory since 2026-12-07, later (docs/method.md, "Bases"); the chapter's counts
before."""

MEASURED_COUNTS: Final[Mapping[str, Any]] = {"runtime_memory": True}
"""How a calibrated basis (a saved calibration's name) counts the memory (F3): as the engine it
was measured on does, the card's memory as its driver reports it (`Scenario.runtime_memory`),
in the fit (its points above memory, the runtime overhead a measured maximum concurrency
implies) and wherever it is applied. Until late on 2026-12-07 a calibration budgeted the spec
sheet's decimal GB, the chapter's count: a run of the simulator on `typical:vllm` that held 59
requests of 8K on an RTX 4090 read C_vram 53 on its own calibration (docs/method.md, "Bases")."""

SPEC_KNOBS: Final[Mapping[str, Any]] = {
    **CHAPTER_KNOBS, "mfu": 1.0, "step_method": StepMethod.BOUND.value, "runtime_memory": True}
"""The spec sheet: every efficiency at its peak, the spec-sheet bound step, and the card's
memory as its driver reports it (the most an engine can budget: a bound on capacity too)."""

SPEC_SHEET: Final = "spec"
CHAPTER: Final = "chapter"
TYPICAL_PREFIX: Final = "typical:"
"""A basis string 'typical:vllm' names an engine's typical knobs."""
RESERVED_NAMES: Final = frozenset({SPEC_SHEET, CHAPTER})
"""Basis words a calibration may not be named (a name is a basis string of its own)."""


def knobs_of(obj: object) -> dict[str, Any]:
    """The basis fields of a `Scenario` or `PlanInputs` (or any object with them)."""
    return {k: getattr(obj, k) for k in KNOB_FIELDS}


def _same(knobs: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    return all(knobs[k] == ref[k] or (isinstance(ref[k], float) and knobs[k] is not None
                                      and abs(float(knobs[k]) - ref[k]) <= 1e-12)
               for k in KNOB_FIELDS)


def kind_of_knobs(knobs: Mapping[str, Any], *, calibration: str | None = "",
                  typical: str = "") -> BasisKind:
    """Which basis a set of knobs is: a named calibration or engine wins; else the spec sheet
    or the chapter's when the knobs are exactly theirs; else entered."""
    if calibration:
        return BasisKind.CALIBRATED
    if typical:
        return BasisKind.TYPICAL
    if _same(knobs, SPEC_KNOBS):
        return BasisKind.SPEC_SHEET
    if _same(knobs, CHAPTER_KNOBS):
        return BasisKind.CHAPTER
    return BasisKind.ENTERED


def basis_string(kind: BasisKind, name: str = "") -> str:
    """The one-string form of a basis (see the module docstring): '' for the chapter's."""
    if kind == BasisKind.SPEC_SHEET:
        return SPEC_SHEET
    if kind == BasisKind.TYPICAL:
        return TYPICAL_PREFIX + name
    if kind == BasisKind.CALIBRATED:
        return name
    return ""
