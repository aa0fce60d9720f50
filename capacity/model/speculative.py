"""F12: speculative decoding, a draft proposes k tokens and the target verifies them in one pass.

A step of speculative decoding for `b` sequences at draft depth k (docs/method.md, F12):

- the **draft** proposes k tokens per sequence: k passes of the draft (an MTP head, an
  EAGLE-style one-layer draft model) at batch b, each on its own roofline,
  `t_draft(b) = k x max((W_d + b KV_d) / (BW eta_bw), 2 P_d b / (F eff))`; an n-gram draft is
  a lookup in the prompt on the CPU (no GPU time, no weights);
- the **target** verifies them in ONE forward pass over b x (k + 1) tokens: the weights and
  each sequence's KV are read once, the arithmetic (GEMM and attention FLOPs, the TP
  all-reduce message) grows k + 1 times, and a MoE touches the experts of b (k + 1) tokens
  (`StepModel.verify_tokens`);
- each sequence keeps on average tau tokens of the step (the acceptance length: accepted
  draft tokens plus the target's own bonus token, 1 <= tau <= k + 1; Leviathan et al. 2023,
  "Fast Inference from Transformers via Speculative Decoding", ICML, section 3).

So `TPOT = (t_verify(b) + t_draft(b)) / tau` and the replica emits `b x tau` tokens per step.
At batch 1 the step is bandwidth-bound, the verify pass costs about one plain step and the
speed-up approaches tau / (1 + t_draft / t_step); past the ridge the verify pass is
compute-bound, costs about (k + 1) plain steps and the speed-up falls toward
tau / (k + 1) < 1: the draft stops paying (`breakeven_batch`). The model is the mean: a
sequence's tokens arrive in bursts of accepted tokens; the event model spreads them evenly
(its mean TPOT and throughput are exact, its per-token gaps smoother than an engine's), and
the simulated endpoint draws the acceptances per step.

The acceptance length comes from `data/speculative.toml` (published, per model, draft kind
and depth, `capacity.catalog.drafts`) or is entered: as tau, or as a per-token acceptance
rate alpha with tau = (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al. 2023, eq. 1, tokens
accepted independently).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Model, ModelVariant
from capacity.errors import InputError
from capacity.types import FloatArray
from capacity.units import GB

DRAFT_KINDS: Final[tuple[str, ...]] = ("mtp", "eagle", "ngram")
"""Draft kinds: multi-token-prediction heads shipped with the model (DeepSeek-V3, Qwen3.5,
GLM), an EAGLE-style draft model of one decoder layer, n-gram (prompt lookup) on the CPU."""
DRAFT_NAMES: Final[dict[str, str]] = {"mtp": "MTP", "eagle": "EAGLE", "ngram": "n-gram"}
MAX_DEPTH: Final = 16
"""The deepest draft accepted (tokens proposed per step)."""
EAGLE_DRAFT_VOCAB: Final = 32_000
"""EAGLE-3's reduced draft vocabulary (tokens): its head maps onto the 32K most frequent
target tokens (Li et al. 2025, "EAGLE-3", arXiv 2503.01840, section 3)."""
EAGLE_FUSED_STATES: Final = 3
"""EAGLE-3 fuses three of the target's hidden states (low, middle, high layers) through one
fully connected layer of (3 h) x h parameters (arXiv 2503.01840, section 3.2)."""
DRAFT_BYTES_PER_PARAM: Final = 2.0
"""EAGLE drafts are published in BF16 (2 bytes per parameter)."""


@dataclass(frozen=True, kw_only=True)
class Draft:
    """A speculative-decoding draft of one model: its kind, depth, acceptance and size."""

    kind: str
    """'mtp', 'eagle' or 'ngram' (`DRAFT_KINDS`)."""
    depth: int
    """k: tokens the draft proposes per step."""
    acceptance_length: float
    """tau: mean tokens a sequence keeps per verify pass, the bonus token included (1..k+1)."""
    params_b: float
    """Parameters the draft multiplies per proposed token (billions; 0 for n-gram)."""
    weights_gb: float
    """The draft's weights (GB, whole model; split over TP like the target's; 0 for n-gram)."""
    kv_share: float
    """The draft's KV per request as a share of the target's (one attention layer's worth for
    MTP and EAGLE, 0 for n-gram), dimensionless."""
    source: str = "entered"
    """Where tau comes from: a published row's source, or 'entered'."""

    @property
    def verify_tokens(self) -> int:
        """Tokens per sequence in the target's verify pass: the k proposals and the last token."""
        return self.depth + 1

    @property
    def passes(self) -> int:
        """Draft forward passes per step: k for a draft model or MTP head, 0 for n-gram."""
        return 0 if self.kind == "ngram" else self.depth

    @property
    def label(self) -> str:
        """'EAGLE k=3 (tau 2.9)'."""
        return f"{DRAFT_NAMES[self.kind]} k={self.depth} (tau {self.acceptance_length:.2f})"

    @property
    def key(self) -> str:
        """'eagle:3', the form `parse_draft` reads (tau not included)."""
        return f"{self.kind}:{self.depth}"


def acceptance_length_from_rate(rate: float, depth: int) -> float:
    """tau from a per-token acceptance rate alpha at depth k (tokens per verify pass).

    tau = 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha): the draft's tokens are
    accepted in order until the first rejection, each with probability alpha, and the target
    adds one token of its own (Leviathan et al. 2023, eq. 1). alpha = 1: k + 1. Example:
    alpha 0.8, k 3 -> 1 + 0.8 + 0.64 + 0.512 = 2.952.
    """
    if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
        raise InputError(f"acceptance rate must be in [0, 1], got {rate}")
    _check_depth(depth)
    if rate == 1.0:
        return float(depth + 1)
    return float((1.0 - rate ** (depth + 1)) / (1.0 - rate))


def acceptance_rate_from_length(tau: float, depth: int) -> float:
    """alpha such that `acceptance_length_from_rate(alpha, k)` = tau (bisection; dimensionless).
    The inverse the simulated endpoint draws acceptances with."""
    _check_depth(depth)
    if not (1.0 <= tau <= depth + 1):
        raise InputError(f"acceptance length must be in [1, {depth + 1}] at depth {depth}, "
                         f"got {tau}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if acceptance_length_from_rate(mid, depth) < tau else (lo, mid)
    return 0.5 * (lo + hi)


def _check_depth(depth: int) -> None:
    if not (isinstance(depth, int) and 1 <= depth <= MAX_DEPTH):
        raise InputError(f"draft depth must be a whole number 1..{MAX_DEPTH}, got {depth}")


def layer_params_b(model: Model) -> tuple[float, float]:
    """(total, active) parameters of one average decoder layer (billions): the parameters
    outside the embedding table and output head, over the layers. The head is vocab x hidden;
    the input table is another vocab x hidden unless tied (counted as tied when unknown)."""
    head = model.vocab * model.hidden / 1e9
    emb = head if model.tied_embeddings is False else 0.0
    n = max(model.layers, 1)
    return (max(model.params_total_b - head - emb, 0.0) / n,
            max(model.params_active_b - head - emb, 0.0) / n)


def draft_size(variant: ModelVariant, kind: str) -> tuple[float, float, float]:
    """(params per proposed token in billions, weights in GB, KV share) of a draft of `kind`.

    - MTP: one extra decoder layer of the model (DeepSeek-V3's MTP module, Qwen3.5's MTP
      layer) sharing the embedding and output head: it multiplies one layer's active
      parameters and the head (vocab x hidden) per token; its weights are one layer's total
      parameters at the checkpoint's bytes per parameter; its KV one attention layer's.
    - EAGLE (EAGLE-3): one dense decoder layer of the target's width (its size: one layer's
      active parameters), a (3 h) x h fusion layer and a head over a 32K draft vocabulary
      (`EAGLE_DRAFT_VOCAB`), all multiplied per token and stored in BF16; its KV one layer's.
    - n-gram: a lookup on the CPU: nothing on the GPU.
    Published sizes in data/speculative.toml (`draft_params_b`, `draft_weights_gb`) replace
    these estimates (`make_draft`).
    """
    m = variant.model
    total, active = layer_params_b(m)
    kv_share = 1.0 / max(m.layers - m.layers_of("linear"), 1)
    if kind == "mtp":
        per_param = variant.weights_gb / m.params_total_b
        return active + m.vocab * m.hidden / 1e9, total * per_param, kv_share
    if kind == "eagle":
        h = m.hidden
        params = active + EAGLE_FUSED_STATES * h * h / 1e9 + EAGLE_DRAFT_VOCAB * h / 1e9
        return params, params * DRAFT_BYTES_PER_PARAM, kv_share
    if kind == "ngram":
        return 0.0, 0.0, 0.0
    raise InputError(f"unknown draft kind '{kind}': use " + ", ".join(DRAFT_KINDS))


def make_draft(variant: ModelVariant, kind: str, depth: int, *,
               acceptance_length: float | None = None,
               acceptance_rate: float | None = None) -> Draft:
    """The draft of `kind` at depth k for `variant`: tau as entered (a length, or a rate via
    `acceptance_length_from_rate`), else the published figure for the model
    (`capacity.catalog.drafts.acceptance_for`; at a depth without a row, the nearest published
    depth's per-token rate carried over), else InputError saying what to enter.
    Size from `draft_size`, or the published row's where it states one."""
    kind = kind.strip().lower()
    if kind not in DRAFT_KINDS:
        raise InputError(f"unknown draft kind '{kind}': use " + ", ".join(DRAFT_KINDS))
    _check_depth(depth)
    params_b, weights_gb, kv_share = draft_size(variant, kind)
    source = "entered"
    if acceptance_length is not None and acceptance_rate is not None:
        raise InputError("give the acceptance as a length or as a rate, not both")
    if acceptance_rate is not None:
        tau = acceptance_length_from_rate(acceptance_rate, depth)
    elif acceptance_length is not None:
        tau = float(acceptance_length)
    else:
        # the published data (csv, statistics, TOML) loads when a tau is looked up, not at
        # every command's start
        from capacity.catalog.drafts import acceptance_for, depths_for
        row = acceptance_for(variant.model.key, kind, depth)
        tau = math.nan
        if row is None:
            # another depth of the same draft: its per-token rate carried over (alpha of the
            # nearest published depth, then tau at this depth: tokens accepted independently)
            known = depths_for(variant.model.key, kind)
            if known:
                near = min(known, key=lambda d: (abs(d - depth), d))
                row = acceptance_for(variant.model.key, kind, near)
        if row is None:
            raise InputError(f"no published acceptance for {DRAFT_NAMES[kind]} on "
                             f"{variant.model.name}: enter an acceptance length (tokens per "
                             "step) or an acceptance rate")
        tau = (row.acceptance_length if row.depth == depth else acceptance_length_from_rate(
            acceptance_rate_from_length(row.acceptance_length, row.depth), depth))
        source = row.source if row.depth == depth else f"{row.source} (depth {row.depth})"
        if row.draft_params_b is not None:
            params_b = row.draft_params_b
        if row.draft_weights_gb is not None:
            weights_gb = row.draft_weights_gb
    if not (math.isfinite(tau) and 1.0 <= tau <= depth + 1):
        raise InputError(f"acceptance length must be in [1, {depth + 1}] tokens at depth "
                         f"{depth}, got {tau}")
    return Draft(kind=kind, depth=depth, acceptance_length=tau, params_b=params_b,
                 weights_gb=weights_gb, kv_share=kv_share, source=source)


def parse_draft(text: str) -> tuple[str, int]:
    """'eagle:3' -> ('eagle', 3); 'none' or '' -> ('none', 0). InputError otherwise."""
    t = text.strip().lower()
    if t in ("", "none", "off"):
        return "none", 0
    kind, _, depth = t.partition(":")
    if kind not in DRAFT_KINDS or not depth.isdigit():
        raise InputError(f"draft '{text}': write KIND:DEPTH with KIND one of "
                         + ", ".join(DRAFT_KINDS) + " (e.g. eagle:3), or none")
    _check_depth(int(depth))
    return kind, int(depth)


def draft_step_ms(*, passes: npt.ArrayLike, weights_bytes: npt.ArrayLike,
                  kv_request_bytes: npt.ArrayLike, params_b: npt.ArrayLike,
                  batch: npt.ArrayLike, bandwidth_gb_s: npt.ArrayLike, tflops: npt.ArrayLike,
                  eta_bw: npt.ArrayLike = 1.0, eff: npt.ArrayLike = 1.0, pass_overhead_ms: float = 0.0
                  ) -> FloatArray:
    """The draft's time in one step for `batch` sequences (ms, per replica): k passes, each
    t_pass + max((W_d + b KV_d) / (BW eta_bw), 2 P_d b / (F eff)) (F12; W_d and KV_d per GPU,
    F per replica; t_pass the fixed time of a pass, F12's engine knob, 0 on the spec sheet).
    Example: k 3, W_d 0.8 GB, no KV, P_d 0.4 B, b 1 on 1000 GB/s and 100 TFLOP/s:
    3 x max(0.8 ms, 0.008 ms) = 2.4 ms."""
    b = np.asarray(batch, dtype=np.float64)
    bw = ((np.asarray(weights_bytes, dtype=np.float64)
           + b * np.asarray(kv_request_bytes, dtype=np.float64))
          / (np.asarray(bandwidth_gb_s, dtype=np.float64) * 1e9 * np.asarray(eta_bw, dtype=np.float64)) * 1e3)
    comp = (2.0 * np.asarray(params_b, dtype=np.float64) * 1e9 * b
            / (np.asarray(tflops, dtype=np.float64) * 1e12 * np.asarray(eff, dtype=np.float64))
            * 1e3)
    return np.asarray(np.asarray(passes, dtype=np.float64) * (pass_overhead_ms
                                                              + np.maximum(bw, comp)),
                      dtype=np.float64)


def speedup(plain_tpot_ms: npt.ArrayLike, draft_tpot_ms: npt.ArrayLike) -> FloatArray:
    """Speed-up of a draft: the plain step's TPOT over the speculative TPOT (dimensionless;
    the same ratio for per-user speed and for a replica's throughput at one batch)."""
    return np.asarray(np.asarray(plain_tpot_ms, dtype=np.float64)
                      / np.asarray(draft_tpot_ms, dtype=np.float64), dtype=np.float64)


def draft_weights_per_gpu_gb(draft: Draft | None, tp: int) -> float:
    """The draft's weights on one GPU (GB): W_d / TP, split over the TP group like the
    target's; 0 without a draft (F12). `Scenario.draft_weights_per_gpu_gb` and the planner's
    search both call this. Example: 1.6 GB at TP 2 -> 0.8 GB."""
    return 0.0 if draft is None else draft.weights_gb / tp


def kv_factor(draft: Draft | None) -> float:
    """KV a request holds over the target's alone (dimensionless): 1 + the draft's KV share
    (one attention layer's worth for MTP and EAGLE, 0 for n-gram; 1 without a draft).
    `Scenario.kv_factor` and the planner's memory check both call this."""
    return 1.0 + (0.0 if draft is None else draft.kv_share)


def draft_step_fields(draft: Draft | None, *, tp: int,
                      kv_request_bytes: npt.ArrayLike) -> dict[str, Any]:
    """`roofline.StepModel`'s F12 fields for `draft` on a TP group of `tp` GPUs whose target
    holds `kv_request_bytes` of KV per sequence per GPU: verify width k + 1 (tokens), tau
    (tokens per step), k draft passes, the draft's weights per GPU (bytes,
    `draft_weights_per_gpu_gb`), its KV per sequence per GPU (bytes, the target's x the KV
    share) and its parameters per proposed token (billions). Empty without a draft (the
    plain step's defaults). `scenario.decode_model` and the planner's search both call this,
    so a drafted option's step is the Explorer's."""
    if draft is None:
        return {}
    return {"verify_tokens": float(draft.verify_tokens),
            "accepted_tokens": draft.acceptance_length, "draft_passes": float(draft.passes),
            "draft_weights_bytes": draft_weights_per_gpu_gb(draft, tp) * GB,
            "draft_kv_request_bytes": np.asarray(kv_request_bytes, dtype=np.float64)
            * draft.kv_share, "draft_params_b": draft.params_b}
