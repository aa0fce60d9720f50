"""The planner: from daily users and SLOs to ranked GPU options (F7-F10 (docs/method.md), section 6).

Search: every catalog GPU (or a subset) x GPU count 1..16 x tensor-parallel size (replicas =
GPUs / TP) x KV precision x weight format of the chosen model. A configuration is kept when

- memory: the weights fit and the design concurrency per replica fits the KV slots
  (`C_vram`, F3) and `max_num_seqs`;
- SLO: the TTFT percentile and TPOT at the peak with headroom meet the targets (queueing,
  section 6, analytic path), and the load does not saturate the GPU.

Kept options are ranked by cost per month, then cost per million output tokens at the option's
SLO-feasible capacity (the highest arrival rate that still meets every SLO). Every GPU family
with no feasible configuration gets the reason of its closest configuration (memory, TTFT,
TPOT, throughput), and configurations that miss on memory alone get the chapter's fixes
(more GPUs, FP8 KV, a shorter context). The search is vectorized over configurations;
`simulate_option` runs the discrete-event model for the chosen one.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

import numpy as np

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile, engine_profile
from capacity.catalog.loader import Catalog, Gpu, Model, ModelVariant, default_catalog
from capacity.catalog.nodes import node_shape
from capacity.catalog.offers import OFFER_KINDS, Offer
from capacity.errors import CapacityError, InputError
from capacity.model.basis import BasisKind, basis_string, kind_of_knobs, knobs_of
from capacity.model.cost import DEFAULT_CNY_PER_USD, HOURS_PER_MONTH, Currency, cost_per_mtok
from capacity.model.kv import DEFAULT_BLOCK_SIZE, kv_request_bytes
from capacity.model.memory import (
    DEFAULT_HEADROOM,
    DEFAULT_OVERHEAD_GB,
    DEFAULT_UTIL,
    MemoryVerdict,
    max_concurrency,
    memory_verdict,
    vram_budget,
)
from capacity.model.parallel import DEFAULT_NCCL_GB, check_tp, tp_comm_ms
from capacity.model.prefill import PrefillFlops, prefill_flops, prefill_seconds_by_parts
from capacity.model.roofline import (
    DEFAULT_STEP_METHOD,
    StepModel,
    comm_coefficients_ms,
    counts_as_engines,
)
from capacity.model.scenario import (
    DEFAULT_EFF,
    DEFAULT_MFU,
    Fix,
    Scenario,
    context_limit_note,
    evaluate,
    make_scenario,
    suggest_fixes,
)
from capacity.model.workload import Workload
from capacity.plan.pricing import Price, price_for
from capacity.plan.queueing import (
    DEFAULT_SLO_QUANTILE,
    AnalyticLatency,
    QueueResult,
    ServiceModel,
    analytic_latency,
    service_from_scenario,
    simulate,
    simulate_prefix,
    traffic_service,
)
from capacity.types import BoolArray, FloatArray, IntArray
from capacity.units import GB

DEFAULT_KV_DTYPES: tuple[str, ...] = ("fp16", "fp8")
MAX_GPUS = 16
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
    prefill_overhead_ms: float = 0.0
    """Fixed time per prefill, ms (F11)."""
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
    attn_mfu: float | None = None
    """Prefill attention's share of peak FLOP/s (F6b; None: MFU)."""
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
        engine_profile(self.engine)  # an unknown engine is a clear error here
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

    @property
    def replicas(self) -> int:
        return self.n_gpus // self.tp

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
        layout = f"TP={self.tp}" if self.replicas == 1 and self.tp > 1 else (
            f"{self.replicas} replicas" + (f" x TP={self.tp}" if self.tp > 1 else ""))
        par = f" ({layout})" if self.n_gpus > 1 else ""
        spare = f" + {self.spare_gpus} spare" if self.spare_gpus else ""
        whole = ""
        if self.node_gpus and self.idle_gpus:
            k = self.paid_gpus // self.node_gpus
            whole = (f", {k} node{'s' if k > 1 else ''} of {self.node_gpus} "
                     f"({self.n_gpus + self.spare_gpus} used)")
        return (f"{self.n_gpus} x {self.gpu_name}{par}{spare}, {self.weights}, "
                f"{self.kv_dtype} KV{whole}")


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


@dataclass(frozen=True, kw_only=True)
class NearMiss:
    """A cheap configuration that fails on memory alone, and the changes that make it fit."""

    option: Option
    fixes: tuple[Fix, ...]


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


# ---------------------------------------------------------------------------------------------
# Enumeration


@dataclass(frozen=True, kw_only=True)
class _Units:
    """Per-replica configurations (GPU x TP x format x KV), as parallel arrays and lists."""

    gpus: list[Gpu]
    tp: IntArray
    formats: list[str]
    kv: list[str]
    weights_gb: FloatArray
    c_vram: IntArray
    usable_bytes: FloatArray
    fixed_bytes: FloatArray
    kv_request_bytes: FloatArray
    prefill_ms: FloatArray
    step: StepModel
    price_per_hour: FloatArray
    seqs: FloatArray
    """max_num_seqs of each configuration's engine on its GPU."""
    budget: FloatArray
    """The engine's mixed-step token budget on each GPU (0: prefill batches pause decoding)."""
    node_gpus: IntArray
    """GPUs per node of a per-node offer (bought in whole nodes); 0 = priced per GPU."""


def _tp_choices(model: Model, n_max: int, allow_tp: bool) -> list[int]:
    out = []
    for tp in (1, 2, 4, 8, 16):
        if tp > n_max or (tp > 1 and not allow_tp):
            continue
        try:
            check_tp(model, tp, tp)
        except InputError:
            continue
        out.append(tp)
    return out


def _variants(cat: Catalog, model_key: str, formats: tuple[str, ...] | None
              ) -> list[ModelVariant]:
    base = cat.variant(model_key)
    if formats is None and base.model.key != model_key.strip().lower():
        return [base]  # a key with a format suffix fixes the format
    keys = formats if formats is not None else tuple(f.key for f in cat.formats_for(base.model))
    return [cat.variant(base.model.key, k) for k in keys]


def _units(inp: PlanInputs, cat: Catalog) -> tuple[Model, list[ModelVariant], _Units]:
    variants = _variants(cat, inp.model, inp.formats)
    model = variants[0].model
    gpus = [cat.gpu(k) for k in (inp.gpus if inp.gpus is not None else sorted(cat.gpus))]
    if not gpus:
        raise InputError("choose at least one GPU")
    wl = inp.workload
    if wl.context_tokens > model.max_context_tokens:
        raise InputError(context_limit_note(wl.context_tokens, model))
    tps = _tp_choices(model, inp.max_gpus, inp.allow_tp)
    operator = counts_as_engines(inp.step_method)
    pf = prefill_flops(model, wl.prompt, by_operator=operator)
    # prefix caching: the mean prompt skips share x the cached prefix (F6 of the rest, exact
    # for causal attention: each part of the prefix's FLOPs drops out), and the prefix's
    # full-attention KV is held once
    hit = min(inp.prefix_tokens, wl.prompt - 1, wl.context_tokens - 1)
    share = inp.prefix_share if hit > 0 else 0.0
    if share > 0:
        cached = prefill_flops(model, hit, by_operator=operator).per_token_part()
        pf = PrefillFlops(prompt_tokens=pf.prompt_tokens - share * hit,
                          linear_flops=pf.linear_flops - share * cached.linear_flops,
                          attention_flops=pf.attention_flops - share * cached.attention_flops,
                          head_flops=pf.head_flops)
    new_tokens = wl.prompt - share * hit
    g_l: list[Gpu] = []
    tp_l: list[int] = []
    f_l: list[str] = []
    kv_l: list[str] = []
    cols: dict[str, list[float]] = {k: [] for k in (
        "w", "cv", "usable", "fixed", "kvr", "pre", "bw", "fl", "ca", "cb", "price", "node",
        "seqs", "budget")}
    kv_cache: dict[tuple[str, int, int, int], float] = {}
    for g in gpus:
        prof = inp.profile_for(g.key, g.memory_gb)
        # KV per request: reserved at the context, or (vLLM, SGLang) the pages of the tokens a
        # request holds at its end, prompt + output (the pool holds every admitted request)
        held, block = ((wl.context_tokens, DEFAULT_BLOCK_SIZE) if prof.kv_admission == "context"
                       else (min(wl.context_tokens, wl.prompt + wl.output_tokens),
                             prof.kv_block_tokens))
        budget = float(prof.token_budget_tokens) if prof.mixed else 0.0
        pr = inp.price_of(g)
        price = pr.per_gpu_hour
        largest_node = node_shape(g.key).max_gpus_per_node
        # a per-node offer (and no entered per-GPU price) is bought in whole nodes of its size
        whole_node = pr.node_gpus
        for tp in tps:
            if tp > largest_node or (whole_node and whole_node % tp):
                continue  # a TP group stays inside one node
            comm_fixed, comm_per_seq = comm_coefficients_ms(model, g, tp)
            comm_prompt = float(tp_comm_ms(model, g, tp, float(new_tokens)))
            nccl = DEFAULT_NCCL_GB if tp > 1 else 0.0
            for v in variants:
                tflops_per_replica = g.tflops_for(v.format.compute_dtype) * tp
                pre_ms = (float(prefill_seconds_by_parts(
                    pf, tflops_per_replica, inp.mfu, inp.attn_mfu,
                    inp.prefill_overhead_ms / 1e3)) * 1e3
                          + comm_prompt)
                vb = vram_budget(vram_gb=g.memory_gb, util=inp.util,
                                 weights_gb=v.weights_gb / tp, overhead_gb=inp.overhead_gb,
                                 nccl_gb=nccl)
                for kv in inp.kv_dtypes:
                    key = (kv, tp, held, block)
                    if key not in kv_cache:
                        kv_req = kv_request_bytes(model, held, kv, tp, block)
                        kv_cache[key] = float(kv_req.exact_bytes if prof.kv_admission == "context"
                                              else kv_req.paged_bytes)
                        if share > 0:
                            prefix_req = kv_request_bytes(model, hit, kv, tp)
                            kv_cache[(kv, -tp, held, block)] = float(
                                prefix_req.by_kind_bytes["full"] + prefix_req.by_kind_bytes["mla"])
                    kvr = kv_cache[key]
                    prefix_kv = kv_cache.get((kv, -tp, held, block), 0.0)
                    kvr -= share * prefix_kv   # per request; the prefix once, from the budget
                    g_l.append(g)
                    tp_l.append(tp)
                    f_l.append(v.format.key)
                    kv_l.append(kv)
                    for k, val in (("w", v.weights_gb), ("cv", float(
                            max_concurrency(vb.kv_budget_bytes - prefix_kv, kvr))),
                            ("usable", vb.usable_bytes),
                            ("fixed", vb.weights_bytes + vb.overhead_bytes + vb.nccl_bytes
                             + prefix_kv),
                            ("kvr", kvr), ("pre", pre_ms), ("bw", g.bandwidth_gb_s),
                            ("fl", tflops_per_replica), ("ca", comm_fixed), ("cb", comm_per_seq),
                            ("price", price), ("node", whole_node),
                            ("seqs", prof.max_seqs), ("budget", budget)):
                        cols[k].append(val)
    a = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    tp_a = np.asarray(tp_l, dtype=np.int64)
    # the F4 step of every configuration at once: the same StepModel as `evaluate` (weights per
    # GPU as W / TP, like Scenario.weights_per_gpu_gb)
    step = StepModel.for_model(
        model, weights_bytes=a["w"] / tp_a * GB, kv_request_bytes=a["kvr"],
        bandwidth_gb_s=a["bw"], tflops=a["fl"], eff=inp.eff, eta_bw=inp.eta_bw,
        overhead_ms=inp.step_overhead_ms, comm_fixed_ms=a["ca"],
        comm_per_seq_ms=a["cb"], method=inp.step_method,
        context_tokens=float(wl.context_tokens), eta_kv=inp.eta_kv,
        attn_sat_batch=inp.attn_sat_batch, seq_overhead_ms=inp.seq_overhead_ms,
        batch1_factor=inp.batch1_factor)
    units = _Units(gpus=g_l, tp=tp_a, formats=f_l, kv=kv_l, weights_gb=a["w"],
                   c_vram=a["cv"].astype(np.int64), usable_bytes=a["usable"],
                   fixed_bytes=a["fixed"], kv_request_bytes=a["kvr"], prefill_ms=a["pre"],
                   step=step, price_per_hour=a["price"], seqs=a["seqs"], budget=a["budget"],
                   node_gpus=a["node"].astype(np.int64))
    return model, variants, units


def _chunking(budget: FloatArray, wl: Workload) -> dict[str, object]:
    """The analytic path's chunked-prefill arguments for these budgets (none when 0)."""
    if not np.any(budget > 0):
        return {}
    return {"chunk_tokens": np.where(budget > 0, budget, np.inf), "prompt_tokens": wl.prompt}


def _load(*, step: StepModel, prefill_ms: FloatArray, wl: Workload, slo: Slo,
          rate: FloatArray | None, conc: FloatArray | None, limit: FloatArray,
          budget: FloatArray) -> AnalyticLatency:
    """Analytic behaviour of one replica at an arrival rate, or at a closed-loop concurrency
    (then the rate that sustains it, lambda = C / duration, found by bisection). `budget`: the
    engine's mixed-step token budget per configuration (0 = none)."""
    ch: Any = _chunking(budget, wl)
    if rate is not None:
        return analytic_latency(rate_per_s=rate, step=step, prefill_ms=prefill_ms,
                                output_tokens=wl.output_tokens, quantile=slo.quantile,
                                limit=limit, **ch)
    assert conc is not None
    zero = np.zeros_like(conc)
    base = analytic_latency(rate_per_s=zero, step=step, prefill_ms=prefill_ms,
                            output_tokens=wl.output_tokens, quantile=slo.quantile,
                            concurrency=conc, **ch)
    lo, hi = zero, conc / base.duration_s
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        r = analytic_latency(rate_per_s=mid, step=step, prefill_ms=prefill_ms,
                             output_tokens=wl.output_tokens, quantile=slo.quantile,
                             concurrency=conc, **ch)
        over = mid * r.duration_s >= conc
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    return analytic_latency(rate_per_s=lo, step=step, prefill_ms=prefill_ms,
                            output_tokens=wl.output_tokens, quantile=slo.quantile,
                            concurrency=conc, **ch)


_CAPACITY_MEMO: dict[tuple[object, ...], FloatArray] = {}
_CAPACITY_MEMO_SIZE = 16
_CAPACITY_LOCK = threading.Lock()


def _key_of(x: object) -> object:
    """A hashable stand-in for a value of the capacity search's inputs (arrays by content)."""
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype.str, x.tobytes())
    return x


def _capacity(*, step: StepModel, prefill_ms: FloatArray, slots: FloatArray, wl: Workload,
              slo: Slo, budget: FloatArray) -> FloatArray:
    """Highest arrival rate per replica (req/s) at which every check still passes.

    It depends on the configurations and the request (prompt, output tokens, SLOs), not on the
    load: a new number of daily users or a new concurrency reuses it (a small memo keyed by the
    inputs' contents), so the Planner and the Explorer's deployment box rerun quicker."""
    key = (tuple(_key_of(getattr(step, f.name)) for f in fields(step)), _key_of(prefill_ms),
           _key_of(slots), _key_of(budget), wl.prompt, wl.output_tokens, slo.ttft_ms,
           slo.tpot_ms, slo.quantile)
    with _CAPACITY_LOCK:  # the app's sessions plan in threads
        hit = _CAPACITY_MEMO.get(key)
    if hit is None:
        hit = _capacity_search(step=step, prefill_ms=prefill_ms, slots=slots, wl=wl, slo=slo,
                               budget=budget)
        with _CAPACITY_LOCK:
            while len(_CAPACITY_MEMO) >= _CAPACITY_MEMO_SIZE:
                _CAPACITY_MEMO.pop(next(iter(_CAPACITY_MEMO)))
            _CAPACITY_MEMO[key] = hit
    return hit.copy()


def _capacity_search(*, step: StepModel, prefill_ms: FloatArray, slots: FloatArray,
                     wl: Workload, slo: Slo, budget: FloatArray) -> FloatArray:
    """`_capacity` by bisection (every check only gets worse as the rate rises)."""
    ch: Any = _chunking(budget, wl)

    def ok(rate: FloatArray) -> BoolArray:
        r = analytic_latency(rate_per_s=rate, step=step, prefill_ms=prefill_ms,
                             output_tokens=wl.output_tokens, quantile=slo.quantile,
                             limit=slots * 4 + 4, **ch)
        return np.asarray(~r.saturated & (r.concurrency <= slots)
                          & (r.ttft_q_ms <= slo.ttft_ms) & (r.tpot_q_ms <= slo.tpot_ms))
    hi = np.where(prefill_ms > 0, 1e3 / np.maximum(prefill_ms, 1e-9), 1e6)
    lo = np.zeros_like(hi)
    lo_ok = ok(np.full_like(hi, 1e-9))
    for _ in range(22):
        mid = 0.5 * (lo + hi)
        good = ok(mid)
        lo = np.where(good, mid, lo)
        hi = np.where(good, hi, mid)
    return np.asarray(np.where(lo_ok, lo, 0.0), dtype=np.float64)


def plan(inp: PlanInputs, catalog: Catalog | None = None, *, keep_all: bool = False,
         checks_only: bool = False) -> Plan:
    """Search, check and rank every configuration (see the module docstring).

    `keep_all` also returns every evaluated configuration (feasible or not) in `all_options`.
    `checks_only` skips the SLO-feasible capacity where no check needs it (no cost target):
    the feasibility and the design-load figures stay, the capacity and the cost per M tokens
    at it are NaN (for callers that ask only "does it pass?").
    """
    cat = catalog or default_catalog()
    wl, slo = inp.workload, inp.slo
    model, _, u = _units(inp, cat)
    # expand replica units into deployments: n = replicas x tp <= max_gpus
    idx_l: list[int] = []
    rep_l: list[int] = []
    for i, tp in enumerate(u.tp):
        for r in range(1, inp.max_gpus // int(tp) + 1):
            idx_l.append(i)
            rep_l.append(r)
    idx = np.asarray(idx_l, dtype=np.int64)
    reps = np.asarray(rep_l, dtype=np.float64)
    n = reps * u.tp[idx]
    step = u.step.select(idx)
    pre = u.prefill_ms[idx]
    c_vram = u.c_vram[idx].astype(np.float64)
    seqs = u.seqs[idx]
    bud = u.budget[idx]
    slots = np.minimum(c_vram, seqs)
    lim = slots * 4 + 4
    h = 1.0 + wl.headroom
    peak_rate = wl.peak_rate_per_s
    if peak_rate is not None:
        peak = _load(step=step, prefill_ms=pre, wl=wl, slo=slo, rate=peak_rate / reps,
                     conc=None, limit=lim, budget=bud)
        design = peak if h == 1.0 else _load(  # no headroom: the design load is the peak
            step=step, prefill_ms=pre, wl=wl, slo=slo, rate=peak_rate * h / reps, conc=None,
            limit=lim, budget=bud)
        design_c = np.maximum(design.concurrency, peak.concurrency * h)
    else:
        assert wl.peak_concurrency is not None
        c_rep = wl.peak_concurrency / reps
        peak = _load(step=step, prefill_ms=pre, wl=wl, slo=slo, rate=None,
                     conc=np.ceil(c_rep - 1e-9), limit=lim, budget=bud)
        design_c = np.ceil(c_rep * h - 1e-9)
        design = peak if h == 1.0 else _load(step=step, prefill_ms=pre, wl=wl, slo=slo,
                                             rate=None, conc=design_c, limit=lim, budget=bud)
    # capacity is per replica unit: compute once per unit, then scale by replicas
    cap_unit = (np.full(u.prefill_ms.shape, np.nan) if checks_only and slo.cost_per_mtok <= 0
                else _capacity(step=u.step, prefill_ms=u.prefill_ms,
                               slots=np.minimum(u.c_vram, u.seqs).astype(np.float64),
                               wl=wl, slo=slo, budget=u.budget))
    cap = cap_unit[idx] * reps
    price = u.price_per_hour[idx]
    # N+1: one idle replica (TP GPUs) per deployment, paid for, not serving
    spare = u.tp[idx] if inp.spare else np.zeros_like(n)
    # whole-node pricing: with a per-node offer, serving + spare GPUs round up to whole nodes
    node = u.node_gpus[idx]
    billed = np.where(node > 0, np.ceil((n + spare) / np.maximum(node, 1)) * node, n + spare)
    month = price * billed * HOURS_PER_MONTH
    mem_c = np.ceil(design_c - 1e-9)
    fails_memory = (c_vram < 1) | (mem_c > c_vram)
    fails_slots = ~fails_memory & (mem_c > seqs)
    # prefill alone over the SLO is a TTFT failure at any load, saturated or not
    fails_ttft = (~design.saturated & (design.ttft_q_ms > slo.ttft_ms)) | (pre > slo.ttft_ms)
    fails_tpot = ~design.saturated & (design.tpot_q_ms > slo.tpot_ms)
    fails_thr = design.saturated
    subtotal = u.fixed_bytes[idx] + mem_c * u.kv_request_bytes[idx]
    # F8 verdict per row (usable memory differs per GPU): fits / tight / does not fit
    usable = u.usable_bytes[idx]
    verdict = memory_verdict(subtotal, usable, inp.memory_headroom, holds_a_request=c_vram >= 1)
    out_tok = float(wl.output_tokens)
    peak_rate_total = peak.rate_per_s * reps
    # F7, one definition: the fleet's cost per hour (every GPU paid for, the spare and whole
    # nodes included) over the output tokens per hour at a stated load
    cpm_cap = cost_per_mtok(1.0, 1, cap * out_tok) * price * billed
    cpm_design = cost_per_mtok(1.0, 1, design.rate_per_s * reps * out_tok) * price * billed
    cost_target = slo.cost_per_mtok
    fails_cost = (np.zeros(idx.size, dtype=bool) if cost_target <= 0
                  else ~(cpm_cap <= cost_target))
    with np.errstate(divide="ignore"):
        ratios = np.stack([
            np.where(slots > 0, mem_c / np.maximum(slots, 1), np.inf),
            design.ttft_q_ms / slo.ttft_ms, design.tpot_q_ms / slo.tpot_ms,
            design.utilization,
            cpm_cap / cost_target if cost_target > 0 else np.zeros(idx.size)])
    names = (Reason.MEMORY, Reason.TTFT, Reason.TPOT, Reason.THROUGHPUT, Reason.COST)
    bind_i = np.argmax(np.where(np.isfinite(ratios), ratios, 1e300), axis=0)
    options: list[Option] = []
    for j in range(idx.size):
        i = int(idx[j])
        fails = tuple(name for name, f in (
            (Reason.MEMORY, fails_memory[j]), (Reason.SLOTS, fails_slots[j]),
            (Reason.TTFT, fails_ttft[j]), (Reason.TPOT, fails_tpot[j]),
            (Reason.THROUGHPUT, fails_thr[j]), (Reason.COST, fails_cost[j])) if f)
        if not keep_all and fails:
            options.append(_lite(u, i, int(n[j]), fails, float(month[j])))
            continue
        rate_peak = float(peak_rate_total[j])
        options.append(Option(
            gpu=u.gpus[i].key, gpu_name=u.gpus[i].name, n_gpus=int(n[j]), tp=int(u.tp[i]),
            weights=u.formats[i], kv_dtype=u.kv[i], weights_gb=float(u.weights_gb[i]),
            c_vram_per_replica=int(c_vram[j]), slots_per_replica=int(slots[j]),
            peak_rate_per_s=rate_peak, design_rate_per_s=float(design.rate_per_s[j] * reps[j]),
            peak_concurrency=float(peak.concurrency[j] * reps[j]),
            design_concurrency=float(design_c[j] * reps[j]),
            ttft_ms=float(design.ttft_q_ms[j]), ttft_mean_ms=float(design.ttft_mean_ms[j]),
            tpot_ms=float(design.tpot_q_ms[j]), tpot_mean_ms=float(design.tpot_ms[j]),
            prefill_ms=float(pre[j]),
            utilization=float(design.utilization[j]), memory_verdict=MemoryVerdict(str(verdict[j])),
            price_per_hour=float(price[j]), currency=inp.currency,
            cost_per_month=float(month[j]), capacity_rate_per_s=float(cap[j]),
            spare_gpus=int(spare[j]), node_gpus=int(node[j]), billed_gpus=int(billed[j]),
            cost_per_mtok=float(cpm_cap[j]), cost_per_mtok_design=float(cpm_design[j]),
            failures=fails, binding=names[int(bind_i[j])],
            binding_ratio=float(ratios[int(bind_i[j]), j]),
        ))
    ranked = sorted((o for o in options if o.feasible), key=_rank_key)
    feasible = _fold_twins(ranked)
    rejected = _rejections(options, feasible, [g.key for g in dict.fromkeys(u.gpus)], slo)
    near = _near_misses(inp, cat, options, feasible)
    return Plan(inputs=inp, model_name=model.name, options=tuple(feasible),
                configurations=tuple(ranked),
                rejected=tuple(rejected), near_misses=tuple(near), evaluated=int(idx.size),
                peak_rate_per_s=peak_rate,
                all_options=tuple(options) if keep_all else ())


def _fold_twins(ranked: Sequence[Option]) -> list[Option]:
    """One row per deployment: options on the same GPU with the same count and TP (so the same
    cost per month) that differ only in weight format or KV precision collapse into the
    best-ranked one (lowest cost per M tokens, then most headroom by the rank key), which names
    the others in `variants`; each kept row gets its node layout. With whole-node pricing, the
    same GPU and TP on the same paid nodes is one deployment too: fewer GPUs used in the same
    nodes cost as much and serve less, so the best-ranked count stands for them."""
    groups: dict[tuple[str, int, int], list[Option]] = {}
    for o in ranked:
        groups.setdefault((o.gpu, o.paid_gpus if o.node_gpus else o.n_gpus, o.tp), []).append(o)
    out = []
    for o in ranked:
        twins = groups[(o.gpu, o.paid_gpus if o.node_gpus else o.n_gpus, o.tp)]
        if twins[0] is not o:
            continue
        out.append(replace(o, nodes=node_layout(o), variants=tuple(
            (x.weights, x.kv_dtype) for x in twins[1:] if x.n_gpus == o.n_gpus)))
    return out


def node_layout(o: Option) -> tuple[int, ...]:
    """GPUs per node of an option, the spare included (`NodeShape.layout`: each TP group in
    one node), or whole nodes of a per-node offer."""
    if o.node_gpus:
        return (o.node_gpus,) * (o.paid_gpus // o.node_gpus)
    return node_shape(o.gpu).layout(o.n_gpus + o.spare_gpus, o.tp)


def _lite(u: _Units, i: int, n: int, fails: tuple[Reason, ...], month: float) -> Option:
    """A rejected configuration, without the numbers only kept options need."""
    nan = math.nan
    return Option(
        gpu=u.gpus[i].key, gpu_name=u.gpus[i].name, n_gpus=n, tp=int(u.tp[i]),
        weights=u.formats[i], kv_dtype=u.kv[i], weights_gb=float(u.weights_gb[i]),
        c_vram_per_replica=int(u.c_vram[i]), slots_per_replica=0, peak_rate_per_s=nan,
        design_rate_per_s=nan, peak_concurrency=nan, design_concurrency=nan, ttft_ms=nan,
        ttft_mean_ms=nan, tpot_ms=nan, tpot_mean_ms=nan, prefill_ms=float(u.prefill_ms[i]),
        utilization=nan,
        memory_verdict=None, price_per_hour=float(u.price_per_hour[i]), currency="CNY",
        cost_per_month=month, capacity_rate_per_s=nan, cost_per_mtok=nan, failures=fails,
        binding=fails[0], binding_ratio=nan)


def _rank_key(o: Option) -> tuple[float, float, int, int, str, str, str]:
    return (round(o.cost_per_month, 6), o.cost_per_mtok, o.n_gpus, o.tp, o.gpu, o.weights,
            o.kv_dtype)


REASON_TEXT: dict[Reason, str] = {
    Reason.MEMORY: "memory (weights + KV do not fit)",
    Reason.SLOTS: "slots (more sequences than max_num_seqs)",
    Reason.TTFT: "TTFT over the SLO",
    Reason.TPOT: "TPOT over the SLO",
    Reason.THROUGHPUT: "throughput (the load saturates the GPU)",
    Reason.COST: "cost per M output tokens over the target",
}


def _rejections(options: Sequence[Option], feasible: Sequence[Option], gpu_keys: list[str],
                slo: Slo) -> list[Rejection]:
    ok = {o.gpu for o in feasible}
    out = []
    for key in gpu_keys:
        if key in ok:
            continue
        mine = [o for o in options if o.gpu == key]
        if not mine:
            continue
        closest = min(mine, key=lambda o: (len(o.failures), Reason.THROUGHPUT in o.failures,
                                           Reason.MEMORY in o.failures, o.cost_per_month))
        every = sorted({f for o in mine for f in o.failures}, key=REASONS.index)
        fits_somewhere = any(Reason.MEMORY not in o.failures for o in mine)
        detail = (f"closest: {closest.label} fails on "
                  + ", ".join(REASON_TEXT[f] for f in closest.failures))
        if not fits_somewhere:
            detail = (f"the weights and KV never fit, even on {max(o.n_gpus for o in mine)} "
                      f"GPUs ({closest.weights}, {closest.kv_dtype} KV)")
        elif Reason.TTFT in closest.failures:
            pre_s, slo_s = closest.prefill_ms / 1e3, slo.ttft_ms / 1e3
            detail += (f"; prefill alone takes {pre_s:.2f} s (SLO {slo_s:g} s)"
                       if closest.prefill_ms > slo.ttft_ms else
                       f"; prefill takes {pre_s:.2f} s, and waiting behind other prompts at "
                       f"the peak pushes p{slo.quantile * 100:g} TTFT past {slo_s:g} s")
        out.append(Rejection(gpu=key, gpu_name=closest.gpu_name,
                             reasons=tuple(f for f in every if f in closest.failures),
                             detail=detail, closest=closest, never_fits=not fits_somewhere,
                             most_gpus=max(o.n_gpus for o in mine)))
    return out


def _near_misses(inp: PlanInputs, cat: Catalog, options: Sequence[Option],
                 feasible: Sequence[Option], limit: int = 3) -> list[NearMiss]:
    """Cheapest configurations that fail on memory alone and are cheaper than the best option,
    with `suggest_fixes` (more GPUs, FP8 KV, a shorter context, fewer requests)."""
    best = feasible[0].cost_per_month if feasible else math.inf
    cands = sorted((o for o in options if o.failures == (Reason.MEMORY,)
                    and o.cost_per_month <= best), key=_rank_key)
    out: list[NearMiss] = []
    seen: set[tuple[str, int, int]] = set()
    for o in cands:
        k = (o.gpu, o.n_gpus, o.tp)
        if k in seen:
            continue
        seen.add(k)
        try:
            s = option_scenario(inp, o, cat)
            c = design_concurrency_total(inp, o)
            fixes = tuple(suggest_fixes(s, c))
        except CapacityError:
            continue
        out.append(NearMiss(option=o, fixes=fixes))
        if len(out) >= limit:
            break
    return out


def design_concurrency_total(inp: PlanInputs, o: Option) -> int:
    wl = inp.workload
    if wl.peak_concurrency is not None:
        return int(math.ceil(wl.peak_concurrency * (1 + wl.headroom) - 1e-9))
    if math.isfinite(o.design_concurrency):
        return int(math.ceil(o.design_concurrency - 1e-9))
    return o.c_vram_per_replica * o.replicas + 1


def runs_out_month(inp: PlanInputs, o: Option, horizon: int = 120) -> int | None:
    """The first month (1, 2, ...) in which traffic growing by `growth_per_month` makes the
    design load (peak x (1 + headroom)) exceed the option's SLO-feasible capacity; None without
    growth, for a load entered as concurrency, or beyond `horizon` months.

    month = floor(ln(capacity / design rate) / ln(1 + g)) + 1 (compounding growth).
    """
    g = inp.growth_per_month
    if g <= 0 or not math.isfinite(o.capacity_rate_per_s) or inp.workload.peak_rate_per_s is None:
        return None
    design = inp.workload.peak_rate_per_s * (1 + inp.workload.headroom)
    if design >= o.capacity_rate_per_s:
        return 0
    m = math.floor(math.log(o.capacity_rate_per_s / design) / math.log1p(g)) + 1
    return m if m <= horizon else None


def pareto_front(options: Sequence[Option]) -> list[bool]:
    """Which options are on the cost / goodput Pareto front: no other option costs no more per
    month and sustains at least as high an SLO-feasible rate, with one of them strictly better.
    O(n log n): sort by cost (then by rate, best first) and keep each new best rate."""
    order = sorted(range(len(options)), key=lambda i: (options[i].cost_per_month,
                                                       -options[i].capacity_rate_per_s))
    front = [False] * len(options)
    best_rate = -math.inf
    for i in order:
        rate = options[i].capacity_rate_per_s
        if rate > best_rate:
            front[i] = True
            best_rate = rate
    return front


# ---------------------------------------------------------------------------------------------
# One option, in detail


def option_scenario(inp: PlanInputs, o: Option, catalog: Catalog | None = None) -> Scenario:
    """The Scenario of one option (the Explorer's view of it)."""
    cat = catalog or default_catalog()
    base = cat.variant(inp.model).model.key
    wl = inp.workload
    return make_scenario(
        base, o.gpu, catalog=cat, weights=o.weights, n_gpus=o.n_gpus, tp=o.tp, util=inp.util,
        overhead_gb=inp.overhead_gb, context_tokens=wl.context_tokens,
        prompt_tokens=wl.prompt_tokens, kv_dtype=o.kv_dtype, eff=inp.eff, mfu=inp.mfu,
        price_per_hour=o.price_per_hour, currency=inp.currency, cny_per_usd=inp.cny_per_usd,
        headroom=inp.memory_headroom, eta_bw=inp.eta_bw, step_overhead_ms=inp.step_overhead_ms,
        prefill_overhead_ms=inp.prefill_overhead_ms, calibration=inp.calibration or None,
        step_method=inp.step_method, eta_kv=inp.eta_kv, attn_sat_batch=inp.attn_sat_batch,
        seq_overhead_ms=inp.seq_overhead_ms, attn_mfu=inp.attn_mfu,
        batch1_factor=inp.batch1_factor)


def option_service(inp: PlanInputs, o: Option, catalog: Catalog | None = None,
                   chunk_tokens: int | None = None) -> ServiceModel:
    """One replica of the option for the discrete-event model."""
    s = option_scenario(inp, o, catalog)
    return service_from_scenario(s, output_tokens=inp.workload.output_tokens,
                                 max_num_seqs=inp.max_num_seqs, chunk_tokens=chunk_tokens,
                                 engine=inp.engine)


def simulate_option(inp: PlanInputs, o: Option, catalog: Catalog | None = None, *,
                    n_requests: int = 2000, seed: int = 0,
                    chunk_tokens: int | None = None) -> QueueResult:
    """Discrete-event check of one option at its design load (per replica: arrivals are split
    evenly, so one replica sees rate / replicas).

    With prefix caching planned (`prefix_tokens` and `prefix_share`), the check follows it:
    the per-request event model (`queueing.simulate_prefix`) at the design rate, where the
    sharing requests prefill only the rest of their prompt and the option's slots count the
    prefix once; there prompts are prefilled whole, in batches (the chapter's scheduling:
    an engine's chunked prefill is not modelled on that path)."""
    wl = inp.workload
    hit = min(inp.prefix_tokens, wl.prompt - 1, wl.context_tokens - 1)
    if hit > 0 and inp.prefix_share > 0 and math.isfinite(o.design_rate_per_s) \
            and o.design_rate_per_s > 0:
        s = option_scenario(inp, o, catalog)
        tsvc = traffic_service(s, slots=max(1, o.slots_per_replica))
        return simulate_prefix(tsvc, rate_per_s=o.design_rate_per_s / o.replicas,
                               prompt_tokens=wl.prompt, output_tokens=wl.output_tokens,
                               prefix_tokens=hit, prefix_share=inp.prefix_share,
                               n_requests=n_requests, seed=seed, slo_ttft_ms=inp.slo.ttft_ms,
                               slo_tpot_ms=inp.slo.tpot_ms)
    svc = option_service(inp, o, catalog, chunk_tokens)
    if wl.peak_concurrency is not None:
        c = max(1, math.ceil(wl.peak_concurrency * (1 + wl.headroom) / o.replicas - 1e-9))
        return simulate(svc, concurrency=c, n_requests=n_requests, seed=seed,
                        slo_ttft_ms=inp.slo.ttft_ms, slo_tpot_ms=inp.slo.tpot_ms)
    return simulate(svc, rate_per_s=o.design_rate_per_s / o.replicas, n_requests=n_requests,
                    seed=seed, slo_ttft_ms=inp.slo.ttft_ms, slo_tpot_ms=inp.slo.tpot_ms)


@dataclass(frozen=True, kw_only=True)
class CurvePoint:
    """TTFT and TPOT percentiles of the deployment at one total arrival rate."""

    rate_per_s: float
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    goodput_req_s: float
    throughput_req_s: float


def load_curve(inp: PlanInputs, o: Option, rates_per_s: Sequence[float] | None = None,
               catalog: Catalog | None = None, *, n_requests: int = 600, seed: int = 0,
               points: int = 12) -> list[CurvePoint]:
    """TTFT/TPOT percentiles vs total arrival rate for one option (discrete-event model).

    Default rates: `points` values from 5 % to 130 % of the saturation rate.
    """
    svc = option_service(inp, o, catalog)
    reps = o.replicas
    if rates_per_s is None:
        top = svc.saturation_rate_per_s * reps
        rates_per_s = list(np.linspace(0.05, 1.3, points) * top)
    out = []
    for r in rates_per_s:
        q = simulate(svc, rate_per_s=r / reps, n_requests=n_requests, seed=seed,
                     slo_ttft_ms=inp.slo.ttft_ms, slo_tpot_ms=inp.slo.tpot_ms)
        out.append(CurvePoint(rate_per_s=float(r), ttft_ms=q.ttft_ms, tpot_ms=q.tpot_ms,
                              goodput_req_s=q.goodput_req_s * reps,
                              throughput_req_s=q.throughput_req_s * reps))
    return out


def check_option(inp: PlanInputs, o: Option, catalog: Catalog | None = None) -> list[Reason]:
    """Re-check one option through the Scenario path (make_scenario + evaluate), independent
    of the vectorized search: returns the failed checks ('memory', 'ttft', 'tpot')."""
    s = option_scenario(inp, o, catalog)
    c = design_concurrency_total(inp, o)
    ev = evaluate(s, [c])
    fails: list[Reason] = []
    if ev.verdict[0] == MemoryVerdict.DOES_NOT_FIT or c > int(ev.max_concurrency_vram):
        fails.append(Reason.MEMORY)
    zero_load_ttft_ms = float(ev.ttft_s) * 1e3
    if zero_load_ttft_ms > inp.slo.ttft_ms or o.ttft_ms > inp.slo.ttft_ms:
        fails.append(Reason.TTFT)
    if float(ev.decode.step_ms[0]) > inp.slo.tpot_ms or o.tpot_ms > inp.slo.tpot_ms:
        fails.append(Reason.TPOT)
    return fails
