"""One deployment what-if: a model variant on N GPUs under a workload, evaluated end to end.

`make_scenario` resolves catalog keys and validates every input (InputError with a message
that says how to fix it); `evaluate` combines F1-F8 over numpy arrays of concurrency and
context, keeping every term; `capacity_table` gives the chapter's table rows
(`capacity.model.fixes` says what turns a "does not fit" into a fit). Defaults are the
chapter's worked example (docs/method.md): Qwen3.5-9B AWQ on one RTX 4090, util 0.9,
overhead 1.5 GB, 8K, fp16 KV, eff 1.0, MFU 0.3, CNY 2 per hour.

Multi-GPU (F10): `n_gpus = replicas x tp`. Concurrency is the deployment's total; each replica
serves ceil(C / replicas). Memory figures (KV, subtotal, budget) are per GPU. Pipeline
parallelism (F13, `capacity.model.pipeline`): a copy of the model is TP x PP GPUs, its layers in
PP stages; it serves PP micro-batches at once, so `replicas` counts those decode streams
(GPUs / TP) and `copies` the model's copies (GPUs / (TP x PP)).

KV a request holds: the whole context (F3, the chapter's reservation), or under an engine that
admits by the tokens held (vLLM, SGLang) the pages of its prompt and output (`held_tokens`),
as the planner counts its slots.

Long module: `Scenario` carries every knob a basis sets, each with its unit and source, beside
`make_scenario`'s checks of each and `evaluate`, which reads them all; split, a field would
sit apart from its check and its one use.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from capacity.catalog.engines import EngineProfile
from capacity.catalog.loader import Catalog, Gpu, Model, ModelVariant, default_catalog
from capacity.errors import InputError
from capacity.model.cost import (
    DEFAULT_CNY_PER_USD,
    Currency,
    convert,
    cost_per_mtok,
)
from capacity.model.kv import (
    DEFAULT_BLOCK_SIZE,
    KvPerToken,
    KvRequest,
    held_request_bytes,
    kv_bytes_per_token,
    kv_request_bytes,
)
from capacity.model.memory import (
    DEFAULT_HEADROOM,
    DEFAULT_OVERHEAD_GB,
    DEFAULT_UTIL,
    MemoryVerdict,
    VramBudget,
    max_concurrency,
    memory_verdict,
    vram_budget,
)
from capacity.model.moe import Routing, gemm_bytes_per_param, routing_on
from capacity.model.padding import check_padding
from capacity.model.parallel import DEFAULT_NCCL_GB, check_tp
from capacity.model.pipeline import check_pp, forward_comm_line, forward_comm_ms, stage_share, stream_slots
from capacity.model.prefill import (
    PrefillFlops,
    fixed_prefill_ms,
    prefill_flops,
    prefill_seconds,
    prefill_seconds_by_parts,
    step_mfu,
)
from capacity.model.roofline import (
    DEFAULT_STEP_METHOD,
    Bound,
    DecodeStep,
    StepModel,
    counts_as_engines,
    fixed_step_ms,
)
from capacity.model.roofline import step_method as step_method_of
from capacity.model.speculative import Draft, draft_step_fields, draft_weights_per_gpu_gb, kv_factor
from capacity.model.step_combine import check_ridge_sharpness
from capacity.types import FloatArray, IntArray, Note, StrArray
from capacity.units import GB, normalize_dtype

DEFAULT_MODEL = "qwen3.5-9b-awq"
DEFAULT_GPU = "rtx-4090"
DEFAULT_CONTEXT_TOKENS = 8192
DEFAULT_CONCURRENCY = (1, 50, 100)


def default_context_tokens(model: Model, default: int = DEFAULT_CONTEXT_TOKENS) -> int:
    """The context (tokens) where none is stated (`--ctx`, a page's link): `default`, the
    chapter's 8,192, or the model's own limit where that is shorter; one rule for the CLI and
    the pages. Examples: Llama-2-70B (4,096 tokens) -> 4,096; Qwen3.5-9B -> 8,192."""
    return min(default, model.max_context_tokens)


DEFAULT_EFF = 1.0
DEFAULT_MFU = 0.3
BATCH1_FACTOR_MAX = 2.0
"""The batch-1 step factor's upper bound: one sequence at most twice the formula's step."""


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """Every input of one what-if, resolved to numbers. Build it with `make_scenario`."""

    variant: ModelVariant
    gpu: Gpu
    n_gpus: int = 1
    tp: int = 1
    pp: int = 1
    """Pipeline stages of one copy of the model (F13, `capacity.model.pipeline`; 1: none)."""
    spare_gpus: int = 0
    """GPUs of an N+1 spare replica: paid for in every cost, never serving."""
    vram_gb: float
    bandwidth_gb_s: float
    tflops: float
    """Dense TFLOP/s of ONE GPU for the weight format; a TP group has `tflops_per_replica`."""
    weights_gb: float
    util: float = DEFAULT_UTIL
    overhead_gb: float = DEFAULT_OVERHEAD_GB
    nccl_gb: float = 0.0
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    prompt_tokens: int | None = None
    held_tokens: int | None = None
    """Tokens whose KV one request holds under an engine that admits by the tokens held (vLLM's
    blocks, SGLang's token pool; `Workload.held_tokens`: the prompt and the output), in pages of
    `block_size`; at most the context (`evaluate`'s `kv_held_bytes`). None: the whole context
    reserved per request (F3, the chapter's profile). Set by `with_admission`."""
    kv_dtype: str = "fp16"
    block_size: int = DEFAULT_BLOCK_SIZE
    eff: float = DEFAULT_EFF
    mfu: float = DEFAULT_MFU
    mfu_half_tokens: float = 0.0
    """Prefill GEMM efficiency curve (`capacity.model.prefill.step_mfu`): the tokens per
    forward pass at which MFU reaches half of `mfu` (its plateau); 0 = a constant MFU."""
    price_per_hour: float
    currency: Currency
    cny_per_usd: float = DEFAULT_CNY_PER_USD
    headroom: float = DEFAULT_HEADROOM
    eta_bw: float = 1.0
    step_overhead_ms: float = 0.0
    layer_overhead_ms: float = 0.0
    """F11: fixed time per layer per decode step, ms (`roofline.fixed_step_ms`; 0 on the spec
    sheet and the chapter)."""
    prefill_overhead_ms: float = 0.0
    linear_prefill_ms: float = 0.0
    """Per linear-attention layer and prefill, ms (F6, `prefill.fixed_prefill_ms`)."""
    prefill_layer_ms: float = 0.0
    """Per layer and prefill, ms: the kernel launches of a prefill pass run without CUDA
    graphs (F6, `prefill.fixed_prefill_ms`; 0 on the spec sheet, the chapter and vLLM)."""
    pp_handoff_ms: float = 0.0
    """F13: the engine's time per pipeline hand-off of a forward pass beyond the wire, ms
    (`pipeline.pp_comm_line`; 0 on the spec sheet and the chapter)."""
    request_latency_ms: float = 0.0
    """Time every request spends outside the GPU before its first token, ms (0 on the spec
    sheet and the chapter): the server's front end and its processes' hand-offs
    (tokenizer, scheduler, detokenizer). It adds to TTFT and E2E and to no GPU time
    (`Evaluation.ttft_s` against `Evaluation.prefill_s`; the event model's clients wait it)."""
    schedule_ahead: bool = True
    """Whether the engine schedules one step ahead where its profile's current release does
    (`EngineProfile.schedules_ahead`: vLLM's async scheduling, SGLang's overlap scheduler):
    in the event model a request that arrives while a step runs joins the step after the
    next. False: a release before that default (`forward_pass.as_released`)."""
    calibration: str | None = None
    warnings: tuple[str, ...] = field(default=())
    step_method: str = DEFAULT_STEP_METHOD.value
    """How the decode step combines its terms: 'chapter' (F4) or 'operator' (F4b)."""
    eta_kv: float | None = None
    """Operator method: achieved share of bandwidth reading KV (None: eta_bw)."""
    attn_sat_batch: float = 0.0
    """Operator method: batch (sequences) below which attention cannot fill the GPU (F4b's
    floor; 0 = no floor, the spec sheet)."""
    seq_overhead_ms: float = 0.0
    """Time per sequence per decode step, ms (sampling, scheduling, element-wise kernels)."""
    batch1_factor: float = 1.0
    """The decode step of exactly one sequence over the formula's (dimensionless; 1 on the
    spec sheet): an engine may run one sequence through other kernels (`combine_step`)."""
    batched_overhead_ms: float = 0.0
    """Fixed time every decode step of two or more sequences pays on top of the step overhead,
    ms (0 on the spec sheet): such an engine's GEMM path (`combine_step`)."""
    attn_mfu: float | None = None
    """Prefill attention's share of peak FLOP/s (F6b; None: MFU)."""
    draft: Draft | None = None
    """Speculative decoding's draft (F12, `capacity.model.speculative.make_draft`); None: none."""
    draft_overhead_ms: float = 0.0
    """F12's engine knob: the fixed time of each draft pass, ms (launches, sampling; 0 on the
    spec sheet)."""
    verify_overhead_ms: float = 0.0
    """F12's engine knob: time per token of a verify pass, ms (rejection sampling, KV
    bookkeeping; 0 on the spec sheet)."""
    ridge_sharpness: float = 0.0
    """F4c's sharpness k: memory and arithmetic combined as (t_mem^k + t_comp^k)^(1/k) where
    the step overlaps them (`roofline.ridge_ms`); 0: their max (the spec sheet, the chapter)."""
    cuda_graph_max_tokens: float = 0.0
    """F4d: the engine's largest captured CUDA graph, tokens (vLLM V1: 512); the decode GEMMs'
    rows are padded to the captured size (`capacity.model.padding`). 0: no padding."""
    gemm_tile_tokens: float = 0.0
    """F4d: the GEMM tile's rows, tokens; the decode GEMMs' rows round up to whole tiles.
    0 or 1: none."""
    embedding_lookup: bool = False
    """Whether the chapter's F4 counts an untied input embedding table as the lookup engines
    run (one row per sequence, neither read whole nor multiplied), as the operator method and
    the spec-sheet bound always do: True on a typical basis (`capacity.model.basis.TYPICAL_COUNTS`:
    it predicts the engines, which look the table up), False on the chapter's."""
    runtime_memory: bool = False
    """F3 budgets the memory the driver reports (`Gpu.memory_for`: an H100 SXM's 85.52 GB), not
    the spec sheet's in decimal GB (80, the chapter's): True on the spec sheet and a typical
    basis (`capacity.model.basis.TYPICAL_COUNTS`). A stated VRAM is taken as stated."""
    expert_gemm_share: float = 1.0
    """The share of the dense GEMMs' plateau an MoE model's routed-expert GEMMs reach that
    `mfu`, `eff` and `mfu_half_tokens` were resolved with on a typical basis
    (`capacity.fit.planning.typical_knobs_on`, `capacity.model.moe.expert_gemm_factor`): what
    the explanations name; 1 on every other basis (the knobs as stated)."""
    vram_stated: bool = False
    """`vram_gb` was stated (`make_scenario(vram_gb=...)`, `--vram`), not the catalog's."""

    @property
    def model(self) -> Model:
        return self.variant.model

    @property
    def budget_vram_gb(self) -> float:
        """The memory per GPU F3 budgets, GB: the driver's with `runtime_memory`, unless stated."""
        return self.vram_gb if self.vram_stated else self.gpu.memory_for(self.runtime_memory)

    @property
    def routing(self) -> Routing:
        """Routed experts and F6c's m_half scale here, as a pass's GEMMs see them (F6c)."""
        return routing_on(self.model, self.tflops, self.bandwidth_gb_s,
                          gemm_bytes_per_param(self.variant))

    @property
    def fixed_step_ms(self) -> float:
        """F11's fixed time of one decode step, ms: per step plus per layer x layers."""
        return fixed_step_ms(self.step_overhead_ms, self.layer_overhead_ms, self.model.layers)

    @property
    def fixed_prefill_ms(self) -> float:
        """F6's fixed time of one prefill, ms (`prefill.fixed_prefill_ms`): per prefill, per
        linear-attention layer and, without CUDA graphs for the prefill, per layer."""
        m = self.model
        return fixed_prefill_ms(self.prefill_overhead_ms, self.linear_prefill_ms,
                                m.layers_of("linear"), self.prefill_layer_ms, m.layers)

    @property
    def replicas(self) -> int:
        """Independent decode streams, each a TP group's step of the whole model: GPUs / TP.
        Without PP, the copies of the model; with PP (F13), each copy's PP micro-batches."""
        return self.n_gpus // self.tp

    @property
    def copies(self) -> int:
        """Copies of the model: GPUs / (TP x PP) (`replicas` without PP)."""
        return self.n_gpus // (self.tp * self.pp)

    @property
    def stage_share(self) -> float:
        """The largest PP stage's share of the layers (F13, `pipeline.stage_share`; 1 without
        PP): what one GPU holds of the weights and of a request's KV over TP's split alone."""
        return stage_share(self.model, self.pp)

    @property
    def paid_gpus(self) -> int:
        """GPUs in the costs (F7): the serving ones and the spare."""
        return self.n_gpus + self.spare_gpus

    @property
    def draft_weights_per_gpu_gb(self) -> float:
        """The draft's weights on one GPU (GB; split over TP like the target's; 0 without)."""
        return draft_weights_per_gpu_gb(self.draft, self.tp)

    @property
    def kv_factor(self) -> float:
        """KV a request holds over the target's alone (dimensionless): 1 + the draft's share."""
        return kv_factor(self.draft)

    @property
    def tflops_per_replica(self) -> float:
        """Dense TFLOP/s of one replica (a TP group): tflops x TP, what F4-F6 divide by."""
        return self.tflops * self.tp

    @property
    def weights_per_gpu_gb(self) -> float:
        """Weights one GPU holds: W / TP, and x `stage_share` with PP (decimal GB)."""
        return self.weights_gb * self.stage_share / self.tp

    @property
    def step_weights_gb(self) -> float:
        """Weights one decode stream's step reads per GPU of its TP group: W / TP (decimal GB),
        every stage's in turn with PP (F13)."""
        return self.weights_gb / self.tp

    @property
    def lookup_gb_per_gpu(self) -> float:
        """The untied input embedding table's share of the weights one GPU holds (decimal GB;
        0 when tied): what a decode step leaves unread where it counts the table as engines
        look it up (`ModelVariant.lookup_weight_share`, `StepModel.unread_weight_share`)."""
        return self.step_weights_gb * self.variant.lookup_weight_share

    @property
    def prompt(self) -> int:
        """Prompt tokens for TTFT (defaults to the context length)."""
        return self.prompt_tokens if self.prompt_tokens is not None else self.context_tokens

    def with_(self, **changes: object) -> Scenario:
        """A copy with some fields changed (no re-validation of catalog keys)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _positive(name: str, value: float, unit: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be > 0 {unit}, got {value}")


def make_scenario(
    model: str = DEFAULT_MODEL,
    gpu: str = DEFAULT_GPU,
    *,
    catalog: Catalog | None = None,
    weights: str | None = None,
    n_gpus: int = 1,
    tp: int = 1,
    pp: int = 1,
    spare_gpus: int = 0,
    vram_gb: float | None = None,
    bandwidth_gb_s: float | None = None,
    tflops: float | None = None,
    weights_gb: float | None = None,
    util: float = DEFAULT_UTIL,
    overhead_gb: float = DEFAULT_OVERHEAD_GB,
    nccl_gb: float | None = None,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    prompt_tokens: int | None = None,
    kv_dtype: str = "fp16",
    block_size: int = DEFAULT_BLOCK_SIZE,
    eff: float = DEFAULT_EFF,
    mfu: float = DEFAULT_MFU,
    mfu_half_tokens: float = 0.0,
    price_per_hour: float | None = None,
    currency: str | None = None,
    cny_per_usd: float = DEFAULT_CNY_PER_USD,
    headroom: float = DEFAULT_HEADROOM,
    allow_long_context: bool = False,
    eta_bw: float = 1.0,
    step_overhead_ms: float = 0.0,
    layer_overhead_ms: float = 0.0,
    prefill_overhead_ms: float = 0.0,
    request_latency_ms: float = 0.0,
    calibration: str | None = None,
    step_method: str = DEFAULT_STEP_METHOD.value,
    eta_kv: float | None = None,
    attn_sat_batch: float = 0.0,
    seq_overhead_ms: float = 0.0,
    attn_mfu: float | None = None,
    batch1_factor: float = 1.0,
    batched_overhead_ms: float = 0.0,
    draft: Draft | None = None,
    draft_overhead_ms: float = 0.0,
    verify_overhead_ms: float = 0.0,
    ridge_sharpness: float = 0.0,
    cuda_graph_max_tokens: float = 0.0,
    gemm_tile_tokens: float = 0.0,
) -> Scenario:
    """Resolve catalog keys and validate every input into a Scenario.

    Overrides (`vram_gb`, `bandwidth_gb_s`, `tflops`, `weights_gb`, `price_per_hour`) replace
    the catalog's figures. A context beyond the model's limit raises InputError unless
    `allow_long_context`, which records a warning instead.
    """
    cat = catalog or default_catalog()
    variant = cat.variant(model, weights)
    g = cat.gpu(gpu)
    check_tp(variant.model, n_gpus, tp)
    check_pp(variant.model, n_gpus, tp, pp)
    if pp > 1 and draft is not None:
        raise InputError("speculative decoding with pipeline parallelism is not modelled: "
                         "choose PP=1 or no draft")
    if not (isinstance(spare_gpus, int) and 0 <= spare_gpus <= 64):
        raise InputError(f"spare GPUs must be a whole number 0..64, got {spare_gpus}")
    if not (isinstance(util, int | float) and 0 < util <= 1):
        raise InputError(f"util must be in (0, 1] (a fraction of device memory), got {util}")
    vram = g.memory_gb if vram_gb is None else vram_gb
    bw = g.bandwidth_gb_s if bandwidth_gb_s is None else bandwidth_gb_s
    fl = g.tflops_for(variant.format.compute_dtype) if tflops is None else tflops
    w = variant.weights_gb if weights_gb is None else weights_gb
    for name, value, unit in (("VRAM", vram, "GB"), ("bandwidth", bw, "GB/s"),
                              ("TFLOP/s", fl, ""), ("weights", w, "GB"),
                              ("context", context_tokens, "tokens"), ("eff", eff, ""),
                              ("MFU", mfu, ""), ("eta_bw", eta_bw, ""),
                              ("exchange rate", cny_per_usd, "CNY per USD")):
        _positive(name, value, unit)
    if prompt_tokens is not None:
        _positive("prompt length", prompt_tokens, "tokens")
        if prompt_tokens > context_tokens:
            raise InputError(f"prompt of {prompt_tokens} tokens exceeds the context of "
                             f"{context_tokens} tokens")
    if eff > 1 or mfu > 1 or eta_bw > 1:
        raise InputError("eff, MFU and eta_bw are fractions of peak: each must be <= 1")
    for name, frac in (("eta_kv", eta_kv), ("attention MFU", attn_mfu)):
        if frac is not None and not (math.isfinite(frac) and 0 < frac <= 1):
            raise InputError(f"{name} is a fraction of peak: it must be in (0, 1], got {frac}")
    if not (math.isfinite(batch1_factor) and 0 < batch1_factor <= BATCH1_FACTOR_MAX):
        raise InputError(f"the batch-1 step factor must be in (0, {BATCH1_FACTOR_MAX:g}], got "
                         f"{batch1_factor}")
    method = step_method_of(step_method).value
    for name, value in (("overhead", overhead_gb), ("headroom", headroom),
                        ("step overhead", step_overhead_ms),
                        ("per-layer step overhead", layer_overhead_ms),
                        ("per-sequence overhead", seq_overhead_ms),
                        ("batched step overhead", batched_overhead_ms),
                        ("attention saturation batch", attn_sat_batch),
                        ("draft overhead", draft_overhead_ms),
                        ("verify overhead", verify_overhead_ms),
                        ("prefill overhead", prefill_overhead_ms),
                        ("request latency", request_latency_ms),
                        ("MFU half-efficiency tokens", mfu_half_tokens)):
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"{name} must be >= 0, got {value}")
    for problem in (check_ridge_sharpness(ridge_sharpness),
                    check_padding(cuda_graph_max_tokens, gemm_tile_tokens)):
        if problem:
            raise InputError(problem)
    if block_size < 1:
        raise InputError(f"block size must be >= 1 token, got {block_size}")
    warnings: list[str] = []
    limit = variant.model.max_context_tokens
    if context_tokens > limit:
        msg = str(context_limit_note(context_tokens, variant.model))
        if not allow_long_context:
            raise InputError(Note(msg + " (pass --allow-long-context to compute it anyway)",
                                  code="context_limit", context=context_tokens,
                                  model=variant.model.name, limit=limit))
        warnings.append(Note(msg + "; computed anyway", code="long_context",
                             context=context_tokens, model=variant.model.name, limit=limit))
    cur = currency or g.currency
    if cur not in ("CNY", "USD"):
        raise InputError(f"unknown currency '{cur}'; use CNY or USD")
    if price_per_hour is None:
        price = convert(g.price_per_hour, g.currency, cur, cny_per_usd)
    else:
        if not (math.isfinite(price_per_hour) and price_per_hour >= 0):
            raise InputError(f"price per hour must be >= 0, got {price_per_hour}")
        price = price_per_hour
    return Scenario(
        variant=variant, gpu=g, n_gpus=n_gpus, tp=tp, pp=pp, spare_gpus=spare_gpus,
        vram_gb=vram, vram_stated=vram_gb is not None, bandwidth_gb_s=bw,
        tflops=fl, weights_gb=w, util=util, overhead_gb=overhead_gb,
        nccl_gb=(DEFAULT_NCCL_GB if tp > 1 else 0.0) if nccl_gb is None else nccl_gb,
        context_tokens=int(context_tokens), prompt_tokens=prompt_tokens,
        kv_dtype=normalize_dtype(kv_dtype), block_size=block_size, eff=eff, mfu=mfu,
        mfu_half_tokens=float(mfu_half_tokens),
        price_per_hour=price, currency=cur, cny_per_usd=cny_per_usd,  # type: ignore[arg-type]
        headroom=headroom, eta_bw=eta_bw, step_overhead_ms=step_overhead_ms,
        layer_overhead_ms=float(layer_overhead_ms), prefill_overhead_ms=prefill_overhead_ms,
        request_latency_ms=float(request_latency_ms), calibration=calibration,
        warnings=tuple(warnings), step_method=method, eta_kv=eta_kv,
        attn_sat_batch=attn_sat_batch, seq_overhead_ms=seq_overhead_ms, attn_mfu=attn_mfu,
        batch1_factor=batch1_factor, batched_overhead_ms=batched_overhead_ms, draft=draft,
        draft_overhead_ms=draft_overhead_ms,
        verify_overhead_ms=verify_overhead_ms, ridge_sharpness=float(ridge_sharpness),
        cuda_graph_max_tokens=float(cuda_graph_max_tokens),
        gemm_tile_tokens=float(gemm_tile_tokens),
    )


def context_limit_note(context_tokens: int, model: Model) -> Note:
    """'context 300000 tokens exceeds Qwen3.5-9B's limit of 262144 tokens', with a code the
    pages say in their language (`capacity.report.i18n.error_text`)."""
    return Note(f"context {context_tokens} tokens exceeds {model.name}'s limit of "
                f"{model.max_context_tokens} tokens", code="context_limit",
                context=context_tokens, model=model.name, limit=model.max_context_tokens)


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """A scenario evaluated at arrays of concurrency (total) and context, every term kept.
    Arrays broadcast over `concurrency` and `context_tokens`. Memory figures are per GPU;
    throughput and cost are for the whole deployment."""

    scenario: Scenario
    concurrency: FloatArray
    context_tokens: FloatArray
    per_replica_concurrency: FloatArray
    kv_token: KvPerToken
    kv_request: KvRequest
    """F2 at the tokens a request holds: the context (F3's reservation), or `held_tokens`."""
    kv_held_bytes: FloatArray
    """KV one request holds in memory on one GPU, bytes, the target's (a draft's share is
    `Scenario.kv_factor`): F2 at the context (F3), or under an engine that admits by tokens its
    pages of `Scenario.held_tokens` (`kv.held_request_bytes`, a hybrid model's states
    included). What C_vram, the KV total and the verdict count."""
    kv_read_bytes: FloatArray
    """KV one sequence's decode step reads on one GPU, bytes: F2 at the context, or the pages
    of `Scenario.held_tokens` (the planner's `kvs`)."""
    vram: VramBudget
    max_concurrency_vram: IntArray
    max_concurrency_vram_paged: IntArray
    decode: DecodeStep
    aggregate_tok_s: FloatArray
    cost_per_mtok: FloatArray
    kv_total_bytes: FloatArray
    vram_subtotal_bytes: FloatArray
    verdict: StrArray
    prefill: PrefillFlops
    ttft_linear_s: FloatArray
    ttft_s: FloatArray
    """Time to first token with no queue, s: the prefill (`prefill_s`) plus the request latency
    outside the GPU (`Scenario.request_latency_ms`)."""
    prefill_s: FloatArray
    """The prompt's prefill on the GPU, s (F6 with attention, F6c, the prompt's all-reduces):
    what the event model and the simulated endpoint spend GPU time on."""
    step_model: StepModel   # one replica's decode step (`decode_model`)

    @functools.cached_property
    def crossover_concurrency(self) -> float | None:
        """F5's C* x the replicas (sequences; None: never, or many contexts), when first read:
        an MoE's search the event model's thousands of evaluations never need."""
        per_gpu = None if self.context_tokens.ndim else self.step_model.crossover_batch()
        return None if per_gpu is None else per_gpu * self.scenario.replicas

    @property
    def tpot_ms(self) -> FloatArray:
        """Time per output token = decode step time (ms)."""
        return self.decode.step_ms


def decode_model(s: Scenario, kv_request_bytes: npt.ArrayLike,
                 context_tokens: npt.ArrayLike | None = None) -> StepModel:
    """The decode step (F4 or F4b with F10's communication and F11's knobs) of one replica of
    `s`, at `kv_request_bytes` of KV per sequence per GPU (a scalar, or an array over contexts)
    and `context_tokens` (the attention FLOPs of F4b; default the scenario's context)."""
    comm = forward_comm_line(s.model, s.gpu, s.tp, s.pp, s.pp_handoff_ms)
    ctx = s.context_tokens if context_tokens is None else context_tokens
    step = StepModel.for_model(
        s.model, weights_bytes=s.step_weights_gb * GB,
        kv_request_bytes=np.asarray(kv_request_bytes, dtype=np.float64),
        bandwidth_gb_s=s.bandwidth_gb_s, tflops=s.tflops * s.tp, eff=s.eff, eta_bw=s.eta_bw,
        overhead_ms=s.fixed_step_ms, comm_fixed_ms=comm.fixed_ms, comm_per_seq_ms=comm.per_token_ms,
        comm_knee_seqs=comm.knee_tokens, comm_per_seq_above_ms=comm.above_ms,
        method=s.step_method, context_tokens=np.asarray(ctx, dtype=np.float64),
        eta_kv=s.eta_kv, attn_sat_batch=s.attn_sat_batch, seq_overhead_ms=s.seq_overhead_ms,
        batch1_factor=s.batch1_factor, batched_overhead_ms=s.batched_overhead_ms,
        ridge_sharpness=s.ridge_sharpness, cuda_graph_max_tokens=s.cuda_graph_max_tokens,
        gemm_tile_tokens=s.gemm_tile_tokens,
        lookup_weight_share=s.variant.lookup_weight_share, embedding_lookup=s.embedding_lookup)
    d = s.draft
    if d is None:
        return step
    return replace(step, **draft_step_fields(d, tp=s.tp, kv_request_bytes=kv_request_bytes),
                   draft_overhead_ms=s.draft_overhead_ms, verify_overhead_ms=s.verify_overhead_ms)


def evaluate(s: Scenario, concurrency: npt.ArrayLike = DEFAULT_CONCURRENCY,
             context_tokens: npt.ArrayLike | None = None) -> Evaluation:
    """Evaluate F1-F8 for every (concurrency, context) pair (numpy broadcasting rules).
    Pass `concurrency[:, None]` and `context[None, :]` for a grid."""
    C = np.asarray(concurrency, dtype=np.float64)
    if np.any(C < 0):
        raise InputError("concurrency must be >= 0")
    L = np.asarray(s.context_tokens if context_tokens is None else context_tokens,
                   dtype=np.float64)
    prompt = L if s.prompt_tokens is None else np.minimum(float(s.prompt_tokens), L)
    m = s.model
    c_rep = np.ceil(C / s.replicas)
    kv_tok = kv_bytes_per_token(m, s.kv_dtype, s.tp)
    if s.held_tokens is None:   # F3: the whole context reserved per request
        kv_req = kv_request_bytes(m, L, s.kv_dtype, s.tp, s.block_size)
        held_b, read_b, paged_b = kv_req.exact_bytes, kv_req.exact_bytes, kv_req.paged_bytes
    else:   # the engine's pages of the tokens a request holds (as `units.replica_units`)
        held = np.minimum(float(s.held_tokens), L)
        kv_req = kv_request_bytes(m, held, s.kv_dtype, s.tp, s.block_size)
        held_b = np.asarray(held_request_bytes(m, held, s.kv_dtype, s.tp, s.block_size),
                            dtype=np.float64)
        read_b, paged_b = kv_req.paged_bytes, held_b
    vram = vram_budget(vram_gb=s.budget_vram_gb, util=s.util,
                       weights_gb=s.weights_per_gpu_gb + s.draft_weights_per_gpu_gb,
                       overhead_gb=s.overhead_gb, nccl_gb=s.nccl_gb)
    # F13: a GPU holds its stage's share of each request's KV; a copy's slots split evenly
    # over its PP decode streams (`pipeline.stream_slots`)
    held_b, paged_b = held_b * s.stage_share, paged_b * s.stage_share
    c_vram = stream_slots(max_concurrency(vram.kv_budget_bytes, held_b * s.kv_factor),
                          s.pp) * s.replicas
    c_vram_paged = stream_slots(max_concurrency(vram.kv_budget_bytes, paged_b * s.kv_factor),
                                s.pp) * s.replicas
    step_model = decode_model(s, read_b, L)
    step = step_model.decode(c_rep)
    agg = np.asarray(np.broadcast_to(C, step.step_ms.shape) * 1e3 / step.step_ms)
    kv_total = c_rep * s.pp * held_b * s.kv_factor
    subtotal = vram.weights_bytes + vram.overhead_bytes + vram.nccl_bytes + kv_total
    pf = prefill_flops(m, prompt, by_operator=counts_as_engines(s.step_method))
    comm_prefill_s = forward_comm_ms(m, s.gpu, s.tp, prompt, s.pp, s.pp_handoff_ms) / 1e3
    # the whole prompt is one forward pass: its GEMMs run at step_mfu(prompt tokens) (F6c)
    routing = s.routing
    ttft_lin = prefill_seconds(pf.linear_flops / step_mfu(prompt, mfu=1.0,
                                                          half_tokens=s.mfu_half_tokens,
                                                          routing=routing),
                               s.tflops * s.tp, s.mfu)
    t0_ms = s.fixed_prefill_ms
    ttft = prefill_seconds_by_parts(pf, s.tflops * s.tp, s.mfu, s.attn_mfu, t0_ms / 1e3,
                                    half_tokens=s.mfu_half_tokens,
                                    routing=routing) + comm_prefill_s
    return Evaluation(
        scenario=s, concurrency=C, context_tokens=L, per_replica_concurrency=c_rep,
        kv_token=kv_tok, kv_request=kv_req, kv_held_bytes=held_b, kv_read_bytes=read_b,
        vram=vram, max_concurrency_vram=c_vram,
        max_concurrency_vram_paged=c_vram_paged, decode=step, aggregate_tok_s=agg,
        cost_per_mtok=cost_per_mtok(s.price_per_hour, s.paid_gpus, agg),
        kv_total_bytes=kv_total, vram_subtotal_bytes=subtotal,
        verdict=memory_verdict(subtotal, vram.usable_bytes, s.headroom), prefill=pf,
        ttft_linear_s=ttft_lin, ttft_s=ttft + s.request_latency_ms / 1e3, prefill_s=ttft,
        step_model=step_model,
    )


@dataclass(frozen=True, kw_only=True)
class TableRow:
    """One row of the capacity table (F8): memory per GPU, with speed and cost beside it."""

    concurrency: int
    context_tokens: int
    kv_request_bytes: float
    kv_total_bytes: float
    vram_subtotal_bytes: float
    usable_bytes: float
    verdict: MemoryVerdict
    ttft_s: float
    ttft_linear_s: float
    tpot_ms: float
    bound: Bound
    tok_s_per_request: float
    aggregate_tok_s: float
    cost_per_mtok: float


SEED_TABLE_ROWS: tuple[tuple[int, int], ...] = ((10, 8192), (50, 8192), (100, 8192))
"""The chapter's capacity table: 10, 50 and 100 concurrent requests at 8K."""


def capacity_table(s: Scenario, rows: Sequence[tuple[int, int]] = SEED_TABLE_ROWS
                   ) -> list[TableRow]:
    """Rows of concurrency x context with total KV, VRAM subtotal, verdict, TTFT and TPOT (F8)."""
    if not rows:
        return []
    C = np.array([r[0] for r in rows], dtype=np.float64)
    L = np.array([r[1] for r in rows], dtype=np.float64)
    if np.any(L <= 0) or np.any(C < 0):
        raise InputError("table rows need concurrency >= 0 and context > 0")
    ev = evaluate(s, C, L)
    out = []
    for i, (c, ctx) in enumerate(rows):
        out.append(TableRow(
            concurrency=int(c), context_tokens=int(ctx),
            kv_request_bytes=float(ev.kv_held_bytes[i]),
            kv_total_bytes=float(ev.kv_total_bytes[i]),
            vram_subtotal_bytes=float(ev.vram_subtotal_bytes[i]),
            usable_bytes=ev.vram.usable_bytes, verdict=MemoryVerdict(str(ev.verdict[i])),
            ttft_s=float(ev.ttft_s[i]), ttft_linear_s=float(ev.ttft_linear_s[i]),
            tpot_ms=float(ev.decode.step_ms[i]), bound=Bound(str(ev.decode.bound[i])),
            tok_s_per_request=float(ev.decode.tok_s_per_request[i]),
            aggregate_tok_s=float(ev.aggregate_tok_s[i]),
            cost_per_mtok=float(ev.cost_per_mtok[i]),
        ))
    return out


def valid_tp_sizes(model: Model, n_gpus: int) -> list[int]:
    """Every TP size that `check_tp` accepts for `model` on `n_gpus` GPUs (F10), ascending."""
    out = []
    for tp in range(1, n_gpus + 1):
        try:
            check_tp(model, n_gpus, tp)
        except InputError:
            continue
        out.append(tp)
    return out


def nearest_valid_tp(model: Model, n_gpus: int, tp: int) -> int:
    """The valid TP size (`valid_tp_sizes`) closest to `tp`; the smaller one on a tie."""
    sizes = valid_tp_sizes(model, n_gpus) or [1]
    return min(sizes, key=lambda v: (abs(v - tp), v))


def with_parallel(s: Scenario, n_gpus: int, tp: int, pp: int = 1) -> Scenario:
    """`s` on `n_gpus` GPUs at TP `tp` and PP `pp` (NCCL buffers as `make_scenario` sets them:
    the default when TP > 1 unless already set, none at TP 1). Does not check the sizes."""
    nccl = (s.nccl_gb or DEFAULT_NCCL_GB) if tp > 1 else 0.0
    return s.with_(n_gpus=n_gpus, tp=tp, pp=pp, nccl_gb=nccl)


def with_admission(s: Scenario, profile: EngineProfile, held_tokens: int,
                   block_tokens: int | None = None) -> Scenario:
    """`s` as an engine profile admits KV: under one that admits by the tokens held (vLLM,
    SGLang) a request holds the pages of `held_tokens` (`Workload.held_tokens`: its prompt and
    output) in the engine's page (`block_tokens`, vLLM's --block-size; default the profile's);
    else the whole context (F3). What the planner's slots count (`units.replica_units`), for
    the Explorer, an option's scenario and `capacity plan --engine`."""
    if profile.kv_admission != "tokens":
        return s.with_(held_tokens=None)
    _positive("tokens a request holds", held_tokens, "tokens")
    page = profile.kv_block_tokens if block_tokens is None else block_tokens
    if page < 1:
        raise InputError(f"block size must be >= 1 token, got {page}")
    return s.with_(held_tokens=int(held_tokens), block_size=int(page))


def with_weights(s: Scenario, variant: ModelVariant) -> Scenario:
    """`s` with another weight format of its model: the format's weights and TFLOP/s."""
    return s.with_(variant=variant, weights_gb=variant.weights_gb,
                   tflops=s.gpu.tflops_for(variant.format.compute_dtype))
