"""Efficiency knobs of wide expert-parallel serving (`EpKnobs`) and the formulas only they use.

`EpKnobs()` is the spec-sheet basis (every knob neutral: efficiencies 1, times 0, F4b's attention
count at the weights' precision): the default of `capacity.model.expert_parallel`'s `ep_step`,
`all_to_all_ms`, `prefill_tok_s_per_gpu` and `plan_ep`, so the spec sheet stays an upper bound.
`typical_ep_knobs()` is the typical basis: the published kernel measurements of
data/ep_knobs.toml (DeepEP, DeepGEMM, FlashMLA, FlashAttention-3; sources and derivations in the
file), with the two knobs nothing publishes (`overlap`, `layer_overhead_us`) at their spec values
unless given (capacity/fit/ep_fit.py fits them). docs/expert-parallel.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from capacity.catalog.moe_data import ep_fitted_data, ep_knob_data
from capacity.errors import InputError
from capacity.model.basis import BasisKind


@dataclass(frozen=True, kw_only=True)
class EpKnobs:
    """Achieved shares of the spec sheet in each part of an EP step (dimensionless unless named).

    Defaults: the spec sheet (neutral). Each multiplies what `eta_bw` / `eff` / `mfu` already
    give, so a knob at 1 changes nothing."""

    dense_eta_bw: float = 1.0
    """Share of HBM bandwidth reading the shared weights (attention projections, shared expert,
    dense layers) in decode."""
    dense_eff: float = 1.0
    """Share of the weights' GEMM peak in the shared-weight GEMMs in decode (small M)."""
    kv_eta_bw: float = 1.0
    """Share of HBM bandwidth reading the KV cache (the MLA latent) in decode."""
    attention_eff: float = 1.0
    """Share of the attention peak (`attention_dtype`) in the decode attention kernel."""
    attention_dtype: str = ""
    """Precision of the attention kernel's FLOPs ('' = the weights' GEMM precision)."""
    dense_dtype: str = ""
    """Finest precision of the GEMMs outside the routed experts (attention projections, shared
    expert, dense layers), at most the weights' ('' = the weights' GEMM precision): a 4-bit
    expert checkpoint of an MLA model keeps these in FP8."""
    expert_eff_curve: tuple[tuple[float, float], ...] = ()
    """(tokens per expert, share of the GEMM peak) of the routed experts' grouped GEMMs,
    interpolated in log tokens (`grouped_gemm_eff`); empty = 1."""
    scale_up_eta: float = 1.0
    """Share of the NVLink bandwidth the all-to-all reaches."""
    scale_out_eta: float = 1.0
    """Share of the NIC bandwidth the all-to-all reaches."""
    comm_sm_share: float = 0.0
    """Share of the SMs the prefill all-to-all kernels take from the GEMMs."""
    prefill_dense_eff: float = 1.0
    """Share of the GEMM peak in prefill's shared-weight GEMMs (large M)."""
    prefill_attention_eff: float = 1.0
    """Share of the attention peak (`attention_dtype`) in the prefill attention kernel."""
    prefill_comm: bool = False
    """Prefill carries its all-to-all (`prefill_comm_us_per_token`), combined under `overlap`;
    the spec sheet leaves it out (communication hidden)."""
    overlap: float = 1.0
    """Share of the shorter of compute and communication that two-batch overlap hides (1: all,
    the spec sheet's; 0: none, operator by operator)."""
    layer_overhead_us: float = 0.0
    """Fixed time per MoE layer and micro-batch (us): the non-GEMM kernels and launch gaps."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float) and not (v >= 0 and math.isfinite(v)):
                raise InputError(f"EP knob {f.name} must be a finite number >= 0, got {v}")
        if not 0 <= self.overlap <= 1 or not 0 <= self.comm_sm_share < 1:
            raise InputError("overlap must be in [0, 1] and comm_sm_share in [0, 1)")

    def combine_ms(self, compute_ms: float, comm_ms: float) -> float:
        """Compute and communication under two-batch overlap, ms: max(C, M) + (1 - overlap) x
        min(C, M). overlap 1: max (all hidden); overlap 0: C + M."""
        return max(compute_ms, comm_ms) + (1.0 - self.overlap) * min(compute_ms, comm_ms)


SPEC_KNOBS = EpKnobs()
"""The spec sheet: every knob neutral."""


def typical_ep_knobs(**fitted: Any) -> EpKnobs:
    """The typical basis: data/ep_knobs.toml's published values (`ep_knob_data`), plus any
    `fitted` knobs (e.g. overlap, layer_overhead_us) given by name."""
    known = {f.name for f in fields(EpKnobs)}
    values: dict[str, Any] = {}
    for name, entry in ep_knob_data().items():
        if name not in known:
            raise InputError(f"data/ep_knobs.toml: unknown knob '{name}'")
        values[name] = entry.value
    return EpKnobs(**{**values, **fitted})


def planning_ep_knobs() -> EpKnobs:
    """The typical EP basis a plan uses: the published knobs (`typical_ep_knobs`) with the two
    fitted ones stored in data/ep_knobs.toml's `[fitted]` table (capacity/fit/ep_fit.py on
    every published row; held out, each row is predicted within the median error
    docs/accuracy.md gives). Used with `eta_bw` = `eff` = 1, as capacity/fit/validate_ep.py
    scores it: the knobs already are the achieved shares."""
    return typical_ep_knobs(**{k: e.value for k, e in ep_fitted_data().items()})


@dataclass(frozen=True, kw_only=True)
class EpBasis:
    """The knobs an EP step runs with on one basis: `EpKnobs` and the dense engine knobs
    `ep_step` / `prefill_tok_s_per_gpu` also take (dimensionless, overhead in ms)."""

    knobs: EpKnobs
    eta_bw: float
    eff: float
    mfu: float
    overhead_ms: float


def ep_basis(kind: BasisKind, *, eta_bw: float, eff: float, mfu: float,
             overhead_ms: float) -> EpBasis:
    """The EP knobs of a plan's basis. The typical basis is `planning_ep_knobs` with the dense
    knobs neutral (eta_bw = eff = mfu = 1, no per-step overhead): an engine's typical knobs
    were fitted on dense models, and the EP knobs already are the achieved shares of each
    kernel. Every other basis (spec sheet, chapter, calibration, entered knobs) keeps its own
    dense knobs on the spec sheet's `EpKnobs` (neutral), so the spec sheet stays the bound."""
    if kind == BasisKind.TYPICAL:
        return EpBasis(knobs=planning_ep_knobs(), eta_bw=1.0, eff=1.0, mfu=1.0, overhead_ms=0.0)
    return EpBasis(knobs=SPEC_KNOBS, eta_bw=eta_bw, eff=eff, mfu=mfu, overhead_ms=overhead_ms)


def grouped_gemm_eff(curve: tuple[tuple[float, float], ...], tokens_per_expert: float) -> float:
    """Share of the GEMM peak of a grouped GEMM at `tokens_per_expert` rows per expert: the
    curve's points interpolated linearly in log tokens, held flat beyond its ends (1 without a
    curve). Example: (256, 0.449), (1024, 0.561) at 512 -> 0.449 + 0.112 / 2 = 0.505."""
    if not curve:
        return 1.0
    x = math.log(max(tokens_per_expert, 1e-9))
    pts = [(math.log(t), e) for t, e in curve]
    if x <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[-1][1]


def remote_nodes_per_token(nodes: int, active: int) -> float:
    """Remote nodes one token's k experts touch on average under uniform routing over `nodes`
    nodes: (N - 1) x (1 - (1 - 1/N)^k). 1 node: 0. Example: 4 nodes, k = 8: 3 x (1 - 0.75^8)
    = 2.70. Unit: nodes."""
    if nodes <= 1:
        return 0.0
    return (nodes - 1) * (1.0 - (1.0 - 1.0 / nodes) ** active)
