"""What the planner reads and returns (docs/method.md, section 6): the inputs (`PlanInputs`:
model, workload, SLO, prices, basis, engine), one configuration with its figures (`Option`),
the reasons a configuration fails or binds (`Reason`), and the result (`Plan`: ranked options,
rejections per GPU family, near misses). The search itself is `capacity.plan.search`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile, engine_profile
from capacity.catalog.loader import Catalog, Gpu, Model, ModelVariant
from capacity.catalog.matmul import typical_eta_bw, typical_mfu
from capacity.catalog.offers import OFFER_KINDS, Offer
from capacity.errors import InputError
from capacity.model.basis import BasisKind, basis_string, kind_of_knobs, knobs_of
from capacity.model.cost import DEFAULT_CNY_PER_USD, Currency
from capacity.model.fixes import Fix
from capacity.model.memory import (
    DEFAULT_HEADROOM,
    DEFAULT_OVERHEAD_GB,
    DEFAULT_UTIL,
    MemoryVerdict,
)
from capacity.model.moe import expert_gemm_factor
from capacity.model.pipeline import copy_layout
from capacity.model.prefill import fixed_prefill_ms
from capacity.model.prefix import PrefixGrain, prefix_grain
from capacity.model.roofline import (
    DEFAULT_STEP_METHOD,
)
from capacity.model.scenario import DEFAULT_EFF, DEFAULT_MFU
from capacity.model.speculative import (
    DRAFT_KINDS,
    DRAFT_NAMES,
    Draft,
    make_draft,
    parse_draft,
)
from capacity.model.workload import Workload
from capacity.plan.pricing import Price, price_for
from capacity.plan.queueing import DEFAULT_SLO_QUANTILE
from capacity.types import Note

DEFAULT_KV_DTYPES: tuple[str, ...] = ("fp16", "fp8")
MAX_GPUS = 16
AUTO_DRAFT = "auto"
"""The draft key that searches every depth with published acceptance (`PlanInputs.draft_keys`)."""
class Reason(StrEnum):
    """Why a configuration is rejected, or which check binds it (`Option.binding`)."""

    MEMORY = "memory"
    """Weights and KV for the design concurrency do not fit (F3/F8)."""
    SLOTS = "slots"
    """More sequences at once than the engine's max_num_seqs."""
    TTFT = "ttft"
    """TTFT at the SLO percentile is over the SLO (or prefill alone is)."""
    TPOT = "tpot"
    """TPOT at the SLO percentile is over the SLO."""
    THROUGHPUT = "throughput"
    """The load saturates the GPU: arrivals outrun service."""
    COST = "cost"
    """Cost per million output tokens (at SLO capacity) is over the cost target."""


REASONS: tuple[Reason, ...] = tuple(Reason)
"""Every reason, in the order they are listed."""

REASON_TEXT: dict[Reason, str] = {
    Reason.MEMORY: "memory (weights + KV do not fit)",
    Reason.SLOTS: "slots (more sequences than max_num_seqs)",
    Reason.TTFT: "TTFT over the SLO",
    Reason.TPOT: "TPOT over the SLO",
    Reason.THROUGHPUT: "throughput (the load saturates the GPU)",
    Reason.COST: "cost per M output tokens over the target",
}
"""Each reason in words (the CLI's tables, the quote)."""


@dataclass(frozen=True, kw_only=True)
class Slo:
    """Service-level objectives, checked at a percentile of the requests (p90 by default),
    and an optional cost target (0 = none)."""

    ttft_ms: float = 2000.0
    tpot_ms: float = 50.0
    quantile: float = DEFAULT_SLO_QUANTILE
    cost_per_mtok: float = 0.0
    """Most cost per million output tokens at SLO capacity (`Option.cost_per_mtok`), in the
    plan's currency; 0 = no cost target. The Explorer opened from an option gets the same."""

    def __post_init__(self) -> None:
        for name, v in (("TTFT SLO", self.ttft_ms), ("TPOT SLO", self.tpot_ms)):
            if not (v > 0):
                raise InputError(f"{name} must be > 0 ms, got {v}")
        if not (math.isfinite(self.cost_per_mtok) and self.cost_per_mtok >= 0):
            raise InputError(f"cost target must be >= 0 (0 = none), got {self.cost_per_mtok}")
        if not 0.5 <= self.quantile < 1:
            raise InputError(f"SLO percentile must be in [0.5, 1), got {self.quantile}")

    def at_engine(self, latency_ms: float) -> Slo:
        """These objectives with the TTFT target less `latency_ms`, the time a request spends
        outside the GPU (`PlanInputs.request_latency_ms`): what the engine's own TTFT must meet
        (at least 1e-9 ms, so a latency over the target fails every configuration). Example:
        2,000 ms and 25 ms -> 1,975 ms."""
        if latency_ms <= 0:
            return self
        return replace(self, ttft_ms=max(self.ttft_ms - latency_ms, 1e-9))


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """Everything the planner needs: the model, the workload, the SLOs and the search space."""

    model: str
    workload: Workload
    slo: Slo = field(default_factory=Slo)
    gpus: tuple[str, ...] | None = None
    max_gpus: int = MAX_GPUS
    kv_dtypes: tuple[str, ...] = DEFAULT_KV_DTYPES
    formats: tuple[str, ...] | None = None
    allow_tp: bool = True
    allow_long_context: bool = False
    """Plan a context past the model's limit anyway (the Explorer's what-if, `capacity plan
    --allow-long-context`: the limit is said, not enforced); False: refused, as the Planner and
    `capacity size` refuse it."""
    currency: Currency = "CNY"
    cny_per_usd: float = DEFAULT_CNY_PER_USD
    util: float = DEFAULT_UTIL
    overhead_gb: float = DEFAULT_OVERHEAD_GB
    eff: float = DEFAULT_EFF
    mfu: float = DEFAULT_MFU
    max_num_seqs: int | None = None
    """Sequences one replica decodes together at most; None = the engine's default
    (`engine`'s profile on each GPU; 256 for the chapter, as vLLM's max_num_seqs)."""
    engine: str = DEFAULT_ENGINE
    """Engine profile (data/engines.toml `[profile.*]`) whose scheduling the load model follows:
    its max_num_seqs, KV admission (reserved at the context, or by the tokens a request holds)
    and chunked-prefill token budget; 'chapter' keeps the chapter's numbers."""
    eta_bw: float = 1.0
    """Achieved share of spec-sheet bandwidth in the decode step (F11; 1 = spec sheet)."""
    step_overhead_ms: float = 0.0
    """Fixed time per decode step, ms (F11)."""
    layer_overhead_ms: float = 0.0
    """Fixed time per layer per decode step, ms (F11, `roofline.fixed_step_ms`)."""
    prefill_overhead_ms: float = 0.0
    """Fixed time per prefill, ms (F11)."""
    linear_prefill_ms: float = 0.0
    """Fixed time per linear-attention layer per prefill, ms (F6, `prefill.fixed_prefill_ms`)."""
    prefill_layer_ms: float = 0.0
    """Fixed time per layer per prefill without CUDA graphs for it, ms (F6,
    `prefill.fixed_prefill_ms`; the typical SGLang basis)."""
    pp_handoff_ms: float = 0.0
    """The engine's time per pipeline hand-off of a forward pass beyond the wire, ms (F13,
    `capacity.model.pipeline.pp_comm_line`; 0 on the spec sheet and the chapter)."""
    step_method: str = DEFAULT_STEP_METHOD.value
    """How the decode step combines its terms: 'chapter' (F4) or 'operator' (F4b)."""
    eta_kv: float | None = None
    """Operator method: achieved share of bandwidth reading KV (None: eta_bw)."""
    attn_sat_batch: float = 0.0
    """Operator method: the attention floor's saturation batch, sequences (0: no floor)."""
    seq_overhead_ms: float = 0.0
    """Time per sequence per decode step, ms."""
    batch1_factor: float = 1.0
    """The step of exactly one sequence over the formula's (a calibration's; 1 on the spec
    sheet)."""
    batched_overhead_ms: float = 0.0
    """ms every decode step of two or more sequences pays on top of the step overhead (a
    calibration's; 0 on the spec sheet)."""
    request_latency_ms: float = 0.0
    """Time every request spends outside the GPU before its first token, ms
    (`Scenario.request_latency_ms`): the TTFTs the plan reports carry it and the TTFT target
    leaves the engine that much less."""
    attn_mfu: float | None = None
    """Prefill attention's share of peak FLOP/s (F6b; None: MFU)."""
    mfu_half_tokens: float = 0.0
    """Prefill GEMM efficiency curve (F6c, `capacity.model.prefill.step_mfu`): tokens per
    forward pass at which MFU reaches half of `mfu`; 0 = a constant MFU."""
    expert_gemm_share: float = 1.0
    """On an engine's typical basis, the share of the dense GEMMs' plateau an MoE model's
    routed-expert GEMMs reach (`capacity.model.moe.expert_gemm_factor`; the engines file's,
    set with `typical`): `mfu_on`, `eff_on` and `mfu_half_on` resolve with it. 1 and unused
    on every other basis."""
    draft_overhead_ms: float = 0.0
    """F12's engine knob: ms per draft pass (speculative decoding; 0 on the spec sheet)."""
    verify_overhead_ms: float = 0.0
    """F12's engine knob: ms per verified token (speculative decoding; 0 on the spec sheet)."""
    ridge_sharpness: float = 0.0
    """F4c's ridge sharpness (`Scenario.ridge_sharpness`; 0: the max of the two roofs)."""
    cuda_graph_max_tokens: float = 0.0
    """F4d: largest captured CUDA graph, tokens (`Scenario.cuda_graph_max_tokens`; 0: none)."""
    gemm_tile_tokens: float = 0.0
    """F4d: GEMM tile rows, tokens (`Scenario.gemm_tile_tokens`; 0 or 1: none)."""
    embedding_lookup: bool = False
    """F4 counts an untied input embedding table as a lookup (`Scenario.embedding_lookup`):
    True on a typical basis (`capacity.model.basis.TYPICAL_COUNTS`)."""
    runtime_memory: bool = False
    """F3 budgets the card's memory as its driver reports it (`Scenario.runtime_memory`,
    `Gpu.memory_for`): True on the spec sheet and a typical basis."""
    growth_per_month: float = 0.0
    """Traffic growth per month (0.1 = +10 % a month, compounding); see `runs_out_month`."""
    spare: bool = False
    """N+1: every option carries one spare replica (TP GPUs) for failover, in its costs."""
    calibration: str = ""
    """Name of the saved calibration these knobs come from ('' = spec-sheet figures);
    `capacity.fit.planning.with_calibration` sets knobs and name together."""
    typical: str = ""
    """Engine key (data/engines.toml) whose typical efficiency these knobs are, when there is
    no calibration ('' = none); `capacity.fit.planning.with_typical` sets knobs and key."""
    memory_headroom: float = DEFAULT_HEADROOM
    """F8's headroom for the 'fits' (vs 'tight') memory verdict, apart from the load headroom."""
    price_overrides: tuple[tuple[str, float], ...] = ()
    """(GPU key, price per GPU-hour in `currency`) pairs that replace catalog prices (prices
    entered on the Planner page or with `capacity size --price GPU=VALUE`)."""
    offers: tuple[Offer, ...] = ()
    """Offers (at most one per GPU, `capacity.catalog.offers.choose`) that replace catalog
    prices, converted to `currency` at `cny_per_usd`; `price_overrides` win over them."""
    offer_kind: str = ""
    """The offer kind asked for (on-demand, reserved-1y, spot: `capacity size --offer-kind`,
    the Planner's offer choice), '' = none asked (catalog prices, or a prices file's
    on-demand offers). With a kind set, a GPU without an offer of it keeps its catalog price
    and the quote says so."""
    prefix_tokens: int = 0
    """Shared prefix (system prompt) tokens a prefix cache holds once (docs/method.md, "Prefix
    caching"); capped below the prompt. 0 = no prefix caching."""
    prefix_share: float = 0.0
    """Share of requests that reuse the shared prefix: their prefill skips it, and its KV is
    held once per replica."""
    drafts: tuple[str, ...] = ()
    """Speculative-decoding drafts the search tries besides none (F12): keys 'eagle:3',
    'mtp:1', ... (`parse_draft`), or 'auto': every draft kind with published acceptance for
    the model (data/speculative.toml), at depths 1 to its deepest published one (`draft_keys`).
    () = no draft searched."""
    acceptance_length: float | None = None
    """Entered tau (tokens per verify pass, bonus token included) for the drafts searched;
    None: the published figure (`make_draft`)."""
    acceptance_rate: float | None = None
    """Entered per-token acceptance rate alpha (0..1) for the drafts searched, tau from it at
    each depth; None: the published figure."""

    def __post_init__(self) -> None:
        if self.offer_kind and self.offer_kind not in OFFER_KINDS:
            raise InputError(f"offer kind '{self.offer_kind}' is not one of "
                             f"{', '.join(OFFER_KINDS)}")
        if not 1 <= self.max_gpus <= 64:
            raise InputError(f"GPU count limit must be 1..64, got {self.max_gpus}")
        if not self.kv_dtypes:
            raise InputError("give at least one KV precision (fp16, fp8)")
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise InputError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        prof = engine_profile(self.engine)  # an unknown engine is a clear error here
        if self.workload.turns > 1 and not prof.chunked:
            raise InputError(Note(
                f"conversations ({self.workload.turns} turns) keep their history in a "
                f"chunked-prefill engine's prefix cache: the {prof.key} profile prefills whole "
                "prompts (choose vLLM, SGLang or llama.cpp)", code="knob_turns_whole",
                name="turns", engine=prof.key))
        if not (math.isfinite(self.growth_per_month) and 0 <= self.growth_per_month <= 10):
            raise InputError(f"growth per month must be 0..10 (0.1 = +10 %), "
                             f"got {self.growth_per_month}")
        if self.currency not in ("CNY", "USD"):
            raise InputError(f"unknown currency '{self.currency}'; use CNY or USD")
        if not (isinstance(self.prefix_tokens, int) and self.prefix_tokens >= 0):
            raise InputError(f"shared prefix must be a whole number >= 0 tokens, got "
                             f"{self.prefix_tokens}")
        if not (math.isfinite(self.prefix_share) and 0 <= self.prefix_share <= 1):
            raise InputError(f"prefix share is a fraction of requests in [0, 1], got "
                             f"{self.prefix_share}")
        for name, ms in (("draft overhead", self.draft_overhead_ms),
                         ("verify overhead", self.verify_overhead_ms),
                         ("per-linear-layer prefill overhead", self.linear_prefill_ms),
                         ("per-layer prefill overhead", self.prefill_layer_ms),
                         ("pipeline hand-off", self.pp_handoff_ms)):
            if not (math.isfinite(ms) and ms >= 0):
                raise InputError(f"{name} must be >= 0 ms, got {ms}")
        self._check_drafts()


    def _check_drafts(self) -> None:
        """The draft keys and the entered acceptance, each refused with what to write."""
        if not isinstance(self.drafts, tuple):
            raise InputError(f"drafts must be a tuple of keys like ('eagle:3',), got "
                             f"{self.drafts!r}")
        depths = [parse_draft(k)[1] for k in self.drafts if k.strip().lower() != AUTO_DRAFT]
        if self.acceptance_length is not None and self.acceptance_rate is not None:
            raise InputError("give the acceptance as a length or as a rate, not both")
        entered = self.acceptance_length if self.acceptance_rate is None else self.acceptance_rate
        if entered is not None and not [k for k in self.drafts if k.strip().lower() == AUTO_DRAFT
                                        or parse_draft(k)[0] != "none"]:
            raise InputError("an acceptance applies to a draft: name one (eagle:3) or auto")
        if self.acceptance_rate is not None and not (
                math.isfinite(self.acceptance_rate) and 0.0 <= self.acceptance_rate <= 1.0):
            raise InputError(f"acceptance rate must be in [0, 1], got {self.acceptance_rate}")
        tau = self.acceptance_length
        if tau is not None:
            if any(k.strip().lower() == AUTO_DRAFT for k in self.drafts):
                raise InputError("an acceptance length holds for one depth: with auto, give "
                                 "an acceptance rate (or name the drafts)")
            top = min((d for d in depths if d > 0), default=0) + 1
            if not (math.isfinite(tau) and 1.0 <= tau <= top):
                raise InputError(f"acceptance length must be in [1, {top}] tokens (depth + 1) "
                                 f"for the drafts given, got {tau}")

    def draft_keys(self, model_key: str) -> tuple[str, ...]:
        """The draft keys the search tries besides none, 'auto' expanded for `model_key` (a
        catalog model key): every kind with published acceptance for it, depths 1 to its
        deepest published depth (an unpublished depth carries the nearest one's per-token
        rate over, as `make_draft` does); InputError when 'auto' finds none."""
        out: list[str] = []
        for key in self.drafts:
            if key.strip().lower() == AUTO_DRAFT:
                # the published data (csv, statistics, TOML) loads for 'auto' alone
                from capacity.catalog.drafts import depths_for

                found = [f"{kind}:{d}" for kind in DRAFT_KINDS
                         for d in range(1, max(depths_for(model_key, kind), default=0) + 1)]
                if not found:
                    raise InputError(Note(
                        f"no published acceptance for {model_key}'s drafts: name one "
                        "(eagle:3) with an acceptance length or rate", code="draft_auto_none",
                        model=model_key))
                out += found
                continue
            kind, depth = parse_draft(key)
            if kind != "none":
                out.append(f"{kind}:{depth}")
        return tuple(dict.fromkeys(out))

    def draft_for(self, variant: ModelVariant, key: str) -> Draft | None:
        """The draft `key` of `variant` with this plan's entered acceptance, else the published
        one (`make_draft`); None for '' (no draft)."""
        if not key:
            return None
        kind, depth = parse_draft(key)
        return make_draft(variant, kind, depth, acceptance_length=self.acceptance_length,
                          acceptance_rate=self.acceptance_rate)

    def mfu_on(self, gpu: Gpu, compute_dtype: str, model: Model | None = None) -> float:
        """The prefill MFU plateau an option on `gpu` runs (share of its spec-sheet TFLOP/s for
        `compute_dtype`): on an engine's typical basis (`typical` set, no calibration) `mfu` is
        a share of the GPU's measured matmul ceiling (`capacity.catalog.matmul.typical_mfu`),
        over `model`'s MoE factor at `expert_gemm_share` (`expert_factor`), as
        `capacity.fit.planning.typical_knobs_on` puts it into a Scenario; on every other
        basis `mfu` itself."""
        return self._on(self.mfu, gpu, compute_dtype, model)

    def eff_on(self, gpu: Gpu, compute_dtype: str, model: Model | None = None) -> float:
        """The decode GEMMs' efficiency `eff` an option on `gpu` runs, resolved as `mfu_on`
        resolves the plateau (the engines file states both as shares of the ceiling)."""
        return self._on(self.eff, gpu, compute_dtype, model)

    def mfu_half_on(self, model: Model | None = None) -> float:
        """F6c's m_half (tokens) an option of `model` runs: on an engine's typical basis
        `mfu_half_tokens` over `model`'s MoE factor (`expert_factor`: the experts' arithmetic
        slower, their weight read not, so the curve's ridge moves down), as
        `capacity.fit.planning.typical_knobs_on` puts it into a Scenario; else itself."""
        return self.mfu_half_tokens / self.expert_factor(model)

    def expert_factor(self, model: Model | None) -> float:
        """`capacity.model.moe.expert_gemm_factor` of `model` at `expert_gemm_share` on an
        engine's typical basis (no calibration); 1 on every other basis and without a model."""
        if model is None or not (self.typical and not self.calibration):
            return 1.0
        return expert_gemm_factor(model, self.expert_gemm_share)

    def _on(self, share: float, gpu: Gpu, compute_dtype: str, model: Model | None) -> float:
        if self.typical and not self.calibration:
            return min(1.0, typical_mfu(share, gpu, compute_dtype) / self.expert_factor(model))
        return share

    def eta_bw_on(self, gpu: Gpu) -> float:
        """The decode read efficiency `eta_bw` an option on `gpu` runs (share of its spec-sheet
        bandwidth): on an engine's typical basis (`typical` set, no calibration) `eta_bw` is a
        share of the GPU's measured copy ceiling (`capacity.catalog.matmul.typical_eta_bw`, as
        `capacity.fit.planning.typical_knobs_on` puts it into a Scenario); on every other
        basis `eta_bw` itself."""
        if self.typical and not self.calibration:
            return typical_eta_bw(self.eta_bw, gpu)
        return self.eta_bw

    def option_mfu(self, catalog: Catalog, gpu: str, weights: str) -> float:
        """`mfu_on` for an option: the GPU key and the weight format of `model`'s base model
        (`model` may name a variant, 'qwen3.5-9b-awq', and the option another format)."""
        return self.mfu_on(*self._option_device(catalog, gpu, weights))

    def option_eff(self, catalog: Catalog, gpu: str, weights: str) -> float:
        """`eff_on` for an option (`option_mfu`'s GPU key and weight format)."""
        return self.eff_on(*self._option_device(catalog, gpu, weights))

    def option_mfu_half(self, catalog: Catalog) -> float:
        """`mfu_half_on` for the plan's model."""
        return self.mfu_half_on(catalog.variant(self.model).model)

    def option_eta_bw(self, catalog: Catalog, gpu: str) -> float:
        """`eta_bw_on` for an option's GPU key."""
        return self.eta_bw_on(catalog.gpu(gpu))

    def _option_device(self, catalog: Catalog, gpu: str, weights: str
                       ) -> tuple[Gpu, str, Model]:
        model = catalog.variant(self.model).model
        return (catalog.gpu(gpu), catalog.variant(model.key, weights).format.compute_dtype,
                model)

    @property
    def basis(self) -> BasisKind:
        """What the speed figures (TTFT, TPOT, capacity, cost per M tokens) rest on
        (`capacity.model.basis`): a saved calibration, an engine's typical efficiency, the
        spec sheet (every efficiency at peak: the upper bound on speed), the chapter's
        assumptions (the default: eff 1, MFU 0.3) or entered knobs."""
        return kind_of_knobs(knobs_of(self), calibration=self.calibration, typical=self.typical)

    @property
    def basis_string(self) -> str:
        """The basis as one string (`capacity.model.basis`): '' (the chapter's, or entered
        knobs), 'spec', 'typical:ENGINE' or a calibration's name."""
        return basis_string(self.basis, self.calibration or self.typical)

    def fixed_prefill_ms(self, model: Model) -> float:
        """F6's fixed time of one prefill of `model`, ms (`prefill.fixed_prefill_ms`: the
        per-prefill overhead, the per-linear-attention-layer one and the per-layer one)."""
        return fixed_prefill_ms(self.prefill_overhead_ms, self.linear_prefill_ms,
                                model.layers_of("linear"), self.prefill_layer_ms, model.layers)

    def prefix_grain_on(self, model: Model, gpu: Gpu, kv_dtype: str, tp: int) -> PrefixGrain:
        """Where the engine's prefix cache serves a hit from on a replica of `tp` x `gpu`
        (`prefix.prefix_grain`, at the profile's token budget there)."""
        prof = self.profile_for(gpu.key, gpu.memory_gb)
        return prefix_grain(model, kv_dtype, tp, prof, prof.token_budget_tokens or None)

    def prefix_hit_tokens(self, model: Model, gpu: Gpu, kv_dtype: str, tp: int) -> int:
        """Tokens of the shared prefix (`prefix_tokens`) a sharing request finds cached on a
        replica of `tp` x `gpu`: what the engine's cache serves of it (`prefix_grain_on`); 0
        without a prefix."""
        if self.prefix_tokens <= 0 or self.prefix_share <= 0:
            return 0
        return self.prefix_grain_on(model, gpu, kv_dtype, tp).shared(self.prefix_tokens,
                                                                      self.workload.prompt)

    def price_of(self, gpu: Gpu) -> Price:
        """The price of one hour of `gpu` in this plan, with its source (`pricing.price_for`:
        an entered price, else the GPU's offer, else its catalog price)."""
        return price_for(gpu, currency=self.currency, cny_per_usd=self.cny_per_usd,
                         entered=dict(self.price_overrides),
                         offers={o.gpu: o for o in self.offers}, offer_kind=self.offer_kind)

    def profile_for(self, gpu_key: str, memory_gb: float) -> EngineProfile:
        """The engine's profile on this GPU, with `max_num_seqs` when one is given."""
        return engine_profile(self.engine).for_gpu(gpu_key, memory_gb).with_max_seqs(
            self.max_num_seqs)

    def seqs_for(self, gpu_key: str, memory_gb: float) -> int:
        """max_num_seqs on this GPU: the one given, else the engine's default there."""
        return self.profile_for(gpu_key, memory_gb).max_seqs


def parallel_layout(n_gpus: int, tp: int, pp: int = 1) -> str:
    """How `n_gpus` GPUs run the model: 'TP=2', '3 replicas x TP=2', '4 replicas', 'TP=8 x
    PP=2', '2 replicas x TP=8 x PP=2' ('' on one GPU): the copies of the model, then each
    copy's TP group and its PP stages (F10, F13)."""
    if n_gpus <= 1:
        return ""
    copies = n_gpus // (tp * pp)
    par = copy_layout(tp, pp)
    if copies == 1:
        return par
    return f"{copies} replicas" + (f" x {par}" if par else "")


@dataclass(frozen=True, kw_only=True)
class Option:
    """One configuration with its predicted behaviour at the peak (with headroom) and its cost.

    The headline figures have one definition each, used by the Planner page, `capacity size`,
    the quote and its capacity table (docs/method.md, section 6):

    - `ttft_ms`, `tpot_ms`: the SLO percentile (`Slo.quantile`) at the design load, i.e. the
      peak arrival rate x (1 + headroom) (queueing model, analytic path);
    - `cost_per_mtok`: F7 at SLO capacity, price x GPUs paid / (capacity_rate_per_s x output
      tokens), with `capacity_rate_per_s` the highest arrival rate that still meets every SLO;
    - `cost_per_mtok_design`: F7 at the design load, price x GPUs paid / (design rate x
      output tokens);
    - `cost_per_month`: price per GPU-hour x GPUs paid (serving, spare, whole nodes) x 730 h.
    """

    gpu: str
    gpu_name: str
    n_gpus: int
    tp: int
    weights: str
    kv_dtype: str
    weights_gb: float
    c_vram_per_replica: int
    slots_per_replica: int
    peak_rate_per_s: float
    design_rate_per_s: float
    peak_concurrency: float
    design_concurrency: float
    ttft_ms: float
    """TTFT at the SLO percentile at the design load (peak x (1 + headroom)), ms."""
    ttft_mean_ms: float
    tpot_ms: float
    """TPOT at the SLO percentile at the design load, ms."""
    tpot_mean_ms: float
    prefill_ms: float
    utilization: float
    memory_verdict: MemoryVerdict | None
    """F8's verdict at the design concurrency; None for a configuration rejected before it."""
    price_per_hour: float
    currency: Currency
    cost_per_month: float
    capacity_rate_per_s: float
    """SLO-feasible capacity: the highest total arrival rate meeting every SLO, req/s."""
    cost_per_mtok: float
    """Cost per million output tokens at SLO capacity (F7), in `currency`."""
    cost_per_mtok_design: float = math.nan
    """Cost per million output tokens at the design load (F7: the fleet's cost per hour over
    the output tokens per hour the design load asks for), in `currency`."""
    failures: tuple[Reason, ...]
    binding: Reason
    binding_ratio: float
    miss_ratio: float = field(default=math.nan, compare=False)
    """For a configuration of a GPU with no feasible one: how far it misses its checks, the
    largest of its failed checks' figures over their limits (1.5: 50 % over; throughput: the
    design load over the most it carries within the SLOs; `search._miss_ratios`), which ranks
    the GPU's closest configuration; NaN for any other, and for those that fail more checks
    than the GPU's nearest (never its closest)."""
    spare_gpus: int = 0
    """GPUs of the N+1 spare replica (paid for in the costs, not serving: `PlanInputs.spare`)."""
    nodes: tuple[int, ...] = ()
    """GPUs per node of the deployment, the spare included (`NodeShape.layout`): each TP group in one node."""
    node_gpus: int = 0
    """GPUs per node of a per-node offer (the deployment is bought in whole nodes of this
    size); 0 = priced per GPU."""
    billed_gpus: int = 0
    """GPUs paid for: serving + spare, rounded up to whole nodes with a per-node offer
    (`paid_gpus`; 0 = not set, i.e. serving + spare)."""
    variants: tuple[tuple[str, str], ...] = ()
    """Equivalent configurations folded into this row, as (weight format, KV precision): same
    GPU, count and TP at the same cost per month, another format or KV precision."""
    draft: str = ""
    """The speculative-decoding draft it runs ('eagle:3', `Draft.key`); '' = none."""
    draft_acceptance_length: float = 1.0
    """The draft's tau, tokens per verify pass (1 without a draft)."""
    draft_source: str = ""
    """Where tau comes from: the published row's source, or 'entered' ('' without a draft)."""
    pp: int = 1
    """Pipeline stages of each copy of the model (F13, `capacity.model.pipeline`; 1: none):
    a copy is TP x PP GPUs, a node's TP group a stage."""

    @property
    def replicas(self) -> int:
        """Decode streams: GPUs / TP (each copy's PP micro-batches with PP, F13)."""
        return self.n_gpus // self.tp

    @property
    def copies(self) -> int:
        """Copies of the model: GPUs / (TP x PP)."""
        return self.n_gpus // (self.tp * self.pp)

    @property
    def layout(self) -> str:
        """'TP=2', '3 replicas x TP=2', 'TP=8 x PP=2', '2 replicas x TP=8 x PP=2' ('' on one
        GPU)."""
        return parallel_layout(self.n_gpus, self.tp, self.pp)

    @property
    def feasible(self) -> bool:
        return not self.failures

    @property
    def paid_gpus(self) -> int:
        """GPUs in the costs: serving + spare, rounded up to whole nodes (per-node offer)."""
        return self.billed_gpus or self.n_gpus + self.spare_gpus

    @property
    def idle_gpus(self) -> int:
        """GPUs paid for in whole nodes that neither serve nor stand by as the spare."""
        return self.paid_gpus - self.n_gpus - self.spare_gpus

    @property
    def label(self) -> str:
        """'2 x RTX 4090 (TP=2), awq, fp16 KV'."""
        par = f" ({self.layout})" if self.n_gpus > 1 else ""
        spare = f" + {self.spare_gpus} spare" if self.spare_gpus else ""
        whole = ""
        if self.node_gpus and self.idle_gpus:
            k = self.paid_gpus // self.node_gpus
            whole = (f", {k} node{'s' if k > 1 else ''} of {self.node_gpus} "
                     f"({self.n_gpus + self.spare_gpus} used)")
        return (f"{self.n_gpus} x {self.gpu_name}{par}{spare}, {self.weights}, "
                f"{self.kv_dtype} KV{self.draft_suffix}{whole}")

    @property
    def draft_suffix(self) -> str:
        """', EAGLE k=3' for an option that drafts (speculative decoding), '' otherwise."""
        if not self.draft:
            return ""
        kind, depth = parse_draft(self.draft)
        return f", {DRAFT_NAMES[kind]} k={depth}"


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """Why a GPU family has no feasible configuration: the reasons of its closest one."""

    gpu: str
    gpu_name: str
    reasons: tuple[Reason, ...]
    detail: str
    closest: Option | None
    never_fits: bool = False
    """The weights and KV fit on no configuration of this GPU (`detail` says so)."""
    most_gpus: int = 0
    """The largest GPU count tried on this GPU."""
    latency_ms: float = 0.0
    """The time a request spends outside the GPU (`PlanInputs.request_latency_ms`), which the
    closest configuration's TTFT counts (`detail` names it where it tips TTFT over the SLO)."""


@dataclass(frozen=True, kw_only=True)
class NearMiss:
    """A cheap configuration that fails on memory alone, and the changes that make it fit."""

    option: Option
    fixes: tuple[Fix, ...]


@dataclass(frozen=True, kw_only=True)
class BandWidening:
    """One reason a calibrated band is wider than its held-out error, as the fit states it
    (`capacity.fit.uncertainty.Widening`: the planner sits below the fit, so it keeps the
    fields, not the class): `kind` ('model', 'gpu', 'context', 'concurrency', 'few_points',
    'implausible'), what was measured and what is used (plain text), the `amount` added to the
    spread and the `output` it widens ('step_ms', 'ttft_s' or 'both')."""

    kind: str
    measured: str
    used: str
    amount: float
    output: str


@dataclass(frozen=True, kw_only=True)
class GpuBand:
    """GPUs a recommended configuration needs at the prediction and at the edges of its
    uncertainty band (None: not within the search's GPU limit at that edge;
    `capacity.fit.planning.gpu_band`), and why it needs more at the slow edge: the checks the
    recommended count itself fails there (empty where it passes)."""

    n_gpus: int
    low: int | None
    high: int | None
    basis: str
    """The basis kind (`PlanInputs.basis`; 'calibrated' with a calibration)."""
    slow_misses: tuple[Reason, ...] = ()
    widenings: tuple[BandWidening, ...] = ()
    """Why a calibration's band is wider here than its own held-out error
    (`capacity.fit.uncertainty.calibration_spreads`: fitted on another GPU or model, outside
    its contexts or concurrencies, few points); the Explorer's link of the option lists the
    same."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The ranked, explained answer."""

    inputs: PlanInputs
    model_name: str
    options: tuple[Option, ...]
    rejected: tuple[Rejection, ...]
    near_misses: tuple[NearMiss, ...]
    evaluated: int
    peak_rate_per_s: float | None
    all_options: tuple[Option, ...] = ()
    configurations: tuple[Option, ...] = ()
    """Every feasible configuration, ranked, twins included (`options` folds them)."""

    @property
    def best(self) -> Option | None:
        return self.options[0] if self.options else None

    @property
    def runner_up(self) -> Option | None:
        """The list's second option (twins of the first are folded into it, `Option.variants`)."""
        return self.options[1] if len(self.options) > 1 else None
