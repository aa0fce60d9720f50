"""Wide expert parallelism for MoE models: DeepSeek-V3/R1 on 8 to 72+ GPUs (docs/expert-parallel.md).

A deployment of EP degree `ep` spreads the routed experts (and `redundant_experts` extra copies of
hot ones, as DeepSeek's and SGLang's EPLB do) over `ep` GPUs. Attention runs data-parallel (DP
attention: every GPU keeps a full copy of the attention and other shared weights and runs
attention for its own sequences) or tensor-parallel within groups of `attention_tp` GPUs.
Formulas (units in names; every one is in the docstring of its function):

- memory per GPU (F3 per GPU): shared weights / attention_tp + expert slots x one expert;
  KV budget = memory x util - weights - overhead - EP buffers; a sequence's KV lives on its
  attention group (MLA: the whole latent on every rank, `capacity.model.kv`);
- decode step at a total batch B: the busiest GPU sets the pace. Attention part: its group's
  B / groups sequences (shared weights + their KV read, 2 x shared params + attention FLOPs);
  expert part: its expert slots read, 2 x expert params x the token-expert pairs it receives,
  B k / ep on average times the imbalance factor (`imbalance_factor`); dispatch and combine
  all-to-alls per MoE layer over NVLink inside the scale-up domain and the NIC across it;
- combination: the sum of the three (`Overlap.SUM`) or two-batch overlap (`Overlap.TBO`, the
  default: SGLang and DeepSeek run it), two micro-batches of B / 2 whose all-to-alls hide
  behind the other's compute (the `EpKnobs.overlap` share of the shorter), each reading the
  weights once;
- knobs (`EpKnobs`, capacity/model/ep_knobs.py): achieved shares per part, neutral by default
  (the spec sheet); `typical_ep_knobs()` the published kernel figures of data/ep_knobs.toml;
- the spec-sheet bound (`bound_ms`): one overlap of all bytes and FLOPs at peak, balanced load,
  no communication: never slower than either combination at knobs <= 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from capacity.catalog.loader import Catalog, Gpu, ModelVariant, default_catalog
from capacity.catalog.moe_data import ImbalanceData, imbalance_data
from capacity.catalog.nodes import NodeShape, node_shape
from capacity.errors import InputError
from capacity.model.ep_knobs import (
    SPEC_KNOBS,
    EpKnobs,
    grouped_gemm_eff,
    remote_nodes_per_token,
)
from capacity.model.kv import kv_request_bytes
from capacity.model.memory import DEFAULT_OVERHEAD_GB, DEFAULT_UTIL
from capacity.model.moe import expected_experts_touched
from capacity.model.moe_imbalance import family_exponent, imbalance_factor
from capacity.model.parallel import DEFAULT_NCCL_GB, tp_comm_ms
from capacity.model.roofline import attention_flops_per_token
from capacity.units import GB, TERA

DISPATCH_BYTES_PER_ELEMENT: Final = 1.0
"""Bytes per hidden element a token carries to an expert (FP8 dispatch, DeepEP's and DeepSeek's
production setting; DeepEP README: 'FP8 dispatching and BF16 combining'). Its per-128 scales
(about 3 %) are left out."""
COMBINE_BYTES_PER_ELEMENT: Final = 2.0
"""Bytes per hidden element an expert output carries back (BF16 combine; DeepEP README)."""
SCALE_OUT_LATENCY_US: Final = 50.0
"""Fixed time of one all-to-all (dispatch or combine) across nodes, microseconds. Derived from
DeepEP's published low-latency kernels (H800, CX7 400 Gb/s, 128 tokens, hidden 7168, top-8): at
EP 256, dispatch 194 us and combine 360 us; their bytes at the NIC's 50 GB/s take 147 and 294 us;
the rest, 47 and 66 us, is the fixed part (about 50 us each)."""
SCALE_UP_LATENCY_US: Final = 8.0
"""Fixed time of one all-to-all inside an NVLink domain (8 us): an assumption, the order of
small-message latency on NVLink (F10's all-reduce, `capacity.model.parallel`, measures 8.5-9.3
us at 4 KiB on H100)."""
MAX_TOKENS_PER_RANK: Final = 256
"""Decode sequences per GPU a plan uses at most: DeepEP's README recommends that
num_max_dispatch_tokens_per_rank, 'the actual batch size in the decoding engine', stay below
256 (the low-latency buffers grow with it)."""
PREFILL_TOKENS_PER_GPU: Final = 16384
"""Prompt tokens per GPU in one prefill batch (SGLang's large-scale EP prefill: '16,384 tokens
per device'); sets the tokens per expert of the prefill grouped GEMMs."""
EP_BUFFER_GB: Final = DEFAULT_NCCL_GB
"""Communication buffers per GPU with EP > 1 (GB): F3's NCCL figure (about 2 GiB), assumed for
DeepEP's buffers too."""


class Overlap(StrEnum):
    """How a decode step combines compute and the all-to-alls."""

    SUM = "sum"
    """Operator by operator: attention, experts, then dispatch and combine, one after another."""
    TBO = "two-batch"
    """Two-batch overlap (DeepSeek inference system, SGLang's TBO): two micro-batches, each one's
    communication hidden behind the other's compute; each micro-batch reads the weights."""


DEFAULT_OVERLAP: Final = Overlap.TBO
"""The default: SGLang's large-scale EP deployments and DeepSeek's own system both overlap."""


@dataclass(frozen=True, kw_only=True)
class EpLayout:
    """Where the experts and attention live: EP degree, attention parallelism, redundancy."""

    ep: int
    """GPUs the routed experts are spread over (the whole deployment)."""
    attention_tp: int = 1
    """GPUs per attention group: 1 is DP attention (each GPU its own sequences, full copy of
    the shared weights); n > 1 is TP attention within groups of n GPUs."""
    redundant_experts: int = 0
    """Extra expert copies in total, over all GPUs (EPLB: 32 in DeepSeek's deployments)."""
    gpus_per_node: int = 8
    """GPUs per node (server, tray or NVL rack) the EP group is built of."""
    nvlink_domain: int = 8
    """GPUs that share one scale-up (NVLink / Infinity Fabric) domain."""

    def __post_init__(self) -> None:
        if self.ep < 1 or self.attention_tp < 1 or self.ep % self.attention_tp:
            raise InputError(f"attention TP {self.attention_tp} must divide EP {self.ep}")
        if self.redundant_experts < 0:
            raise InputError("redundant experts must be >= 0")

    @property
    def dp_attention(self) -> bool:
        return self.attention_tp == 1

    @property
    def attention_groups(self) -> int:
        """Attention groups (DP ranks): ep / attention_tp."""
        return self.ep // self.attention_tp

    @property
    def nodes(self) -> int:
        """Nodes spanned: ceil(ep / GPUs per node)."""
        return math.ceil(self.ep / self.gpus_per_node)

    @property
    def domain_ranks(self) -> int:
        """EP ranks that share a GPU's scale-up domain (itself included): min(ep, domain)."""
        return min(self.ep, self.nvlink_domain)

    @property
    def scale_up(self) -> bool:
        """All EP ranks inside one NVLink domain (no all-to-all traffic on the NIC)."""
        return self.ep <= self.nvlink_domain

    def describe(self) -> str:
        attn = "DP attention" if self.dp_attention else f"TP{self.attention_tp} attention"
        red = f", {self.redundant_experts} redundant experts" if self.redundant_experts else ""
        net = "NVLink" if self.scale_up else f"{self.nodes} nodes over the NIC"
        return f"EP{self.ep}, {attn}{red} ({net})"


def ep_layout(gpu: str, ep: int, *, attention_tp: int = 1, redundant_experts: int = 0,
              shape: NodeShape | None = None) -> EpLayout:
    """The layout of `ep` GPUs of catalog GPU `gpu` in its largest node (data/nodes.toml)."""
    s = shape or node_shape(gpu)
    return EpLayout(ep=ep, attention_tp=attention_tp, redundant_experts=redundant_experts,
                    gpus_per_node=s.max_gpus_per_node, nvlink_domain=s.nvlink_domain)


# -- the deployment -----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class EpSetup:
    """A model variant on a GPU in one EP layout at one context, resolved to numbers."""

    variant: ModelVariant
    gpu: Gpu
    layout: EpLayout
    context_tokens: int
    kv_dtype: str
    moe_layers: int
    exponent: float
    scale_out_gb_s: float
    """NIC bandwidth per GPU (GB/s, one direction; data/nodes.toml)."""
    tflops: float = 0.0
    """Dense TFLOP/s of one GPU at the weights' GEMM precision (0: from the catalog)."""
    family: str = ""
    warnings: tuple[str, ...] = field(default=())

    @property
    def experts(self) -> int:
        moe = self.variant.model.moe
        return moe.experts if moe else 1

    @property
    def active(self) -> int:
        moe = self.variant.model.moe
        return moe.active if moe else 1

    @property
    def bytes_per_param(self) -> float:
        """Weight bytes per parameter: stated weights / total parameters (B/param)."""
        return self.variant.weights_bytes / (self.variant.model.params_total_b * 1e9)

    @property
    def expert_bytes_per_param(self) -> float:
        """Bytes per routed-expert parameter: the format's bits / 8 where the weights are
        computed (experts are Linear modules, quantized; the embedding and head may keep more
        bits, `computed_weights_gb`), else the stated weights' average (B/param).
        DeepSeek-V3 FP8: 1.0."""
        v = self.variant
        return v.format.bits_per_weight / 8.0 if not v.weights_stated else self.bytes_per_param

    @property
    def shared_bytes(self) -> float:
        """Bytes of the weights outside the routed experts: the weights less the experts'.
        DeepSeek-V3 FP8: 672.85 - 654.5 x 1.0 = 18.35 GB (its embedding and head in BF16)."""
        m = self.variant.model
        return self.variant.weights_bytes - m.expert_params_b * 1e9 * self.expert_bytes_per_param

    @property
    def lookup_bytes(self) -> float:
        """Bytes of the input embedding table (looked up, never read whole):
        `ModelVariant.lookup_bytes`, its parameters at the format's embedding bits where the
        weights are computed, else the average bytes per parameter."""
        return self.variant.lookup_bytes

    @property
    def expert_params_b(self) -> float:
        """Parameters of ONE routed expert over all MoE layers, billions: X / E, with X the
        routed-expert parameters (`Model.expert_params_b`). DeepSeek-V3: 654.5 / 256 = 2.557."""
        return self.variant.model.expert_params_b / self.experts

    @property
    def shared_params_b(self) -> float:
        """Parameters outside the routed experts (attention, dense layers, shared experts,
        embeddings), billions: P_total - X. DeepSeek-V3: 16.5."""
        return self.variant.model.params_total_b - self.variant.model.expert_params_b

    @property
    def expert_slots(self) -> int:
        """Expert copies per GPU: ceil((E + R) / ep)."""
        return math.ceil((self.experts + self.layout.redundant_experts) / self.layout.ep)

    @property
    def peak_tflops(self) -> float:
        return self.tflops or self.gpu.tflops_for(self.variant.format.compute_dtype)

    @property
    def kv_request_bytes(self) -> float:
        """KV of one sequence on each GPU of its attention group at the context (bytes; F2 with
        TP = attention_tp: an MLA latent is whole on every rank)."""
        return float(kv_request_bytes(self.variant.model, self.context_tokens, self.kv_dtype,
                                      tp=self.layout.attention_tp).exact_bytes)

    @property
    def attention_flops(self) -> float:
        """Attention FLOPs of one decode token at the context (F4b's A, MLA absorbed:
        `attention_flops_per_token`), FLOP."""
        return float(attention_flops_per_token(self.variant.model, self.context_tokens))


def ep_setup(model: str, gpu: str, layout: EpLayout, *, context_tokens: int,
             kv_dtype: str = "fp16", weights: str | None = None, exponent: float | None = None,
             catalog: Catalog | None = None, data: ImbalanceData | None = None) -> EpSetup:
    """Resolve catalog keys into an `EpSetup` (InputError for a dense model, a bad layout)."""
    cat = catalog or default_catalog()
    variant = cat.variant(model, weights)
    g = cat.gpu(gpu)
    m = variant.model
    if m.moe is None:
        raise InputError(f"{m.key} is not a mixture-of-experts model: expert parallelism "
                         "needs routed experts")
    if layout.ep > m.moe.experts + layout.redundant_experts:
        raise InputError(f"EP {layout.ep} exceeds the {m.moe.experts} experts "
                         f"(+{layout.redundant_experts} redundant) of {m.key}")
    d = data or imbalance_data()
    info = d.models.get(m.key)
    fam = d.family_of(m.key)
    return EpSetup(variant=variant, gpu=g, layout=layout, context_tokens=context_tokens,
                   kv_dtype=kv_dtype, moe_layers=info.moe_layers if info else m.layers,
                   exponent=family_exponent(fam) if exponent is None else exponent,
                   scale_out_gb_s=node_shape(g.key).scale_out_gb_s, family=fam.key)


@dataclass(frozen=True, kw_only=True)
class EpMemory:
    """Memory of one GPU (GB unless named otherwise) and the batch it allows."""

    shared_gb: float
    experts_gb: float
    overhead_gb: float
    buffers_gb: float
    usable_gb: float
    kv_budget_gb: float
    kv_request_bytes: float
    max_sequences_per_group: int
    max_batch: int
    """Sequences the whole deployment holds: per group x attention groups (0: does not fit)."""


def ep_memory(s: EpSetup, *, util: float = DEFAULT_UTIL, overhead_gb: float = DEFAULT_OVERHEAD_GB,
              buffers_gb: float | None = None, memory_gb: float | None = None) -> EpMemory:
    """F3 per GPU under EP: shared weights / attention_tp (replicated under DP attention) +
    ceil((E + R) / ep) expert copies x one expert's bytes; KV budget = memory x util - those -
    overhead - EP buffers (GB); sequences per attention group = floor(budget / KV per
    sequence). DeepSeek-V3 FP8 on 8 H200, DP attention: 16.5 + 32 x 2.557 = 98.3 GB of weights.
    `memory_gb`: the memory per GPU the basis budgets (`Gpu.memory_for`; None: the spec
    sheet's figure as the chapter counts it)."""
    lay = s.layout
    shared = s.shared_bytes / GB / lay.attention_tp
    experts = s.expert_slots * s.expert_params_b * s.expert_bytes_per_param
    buf = (EP_BUFFER_GB if lay.ep > 1 else 0.0) if buffers_gb is None else buffers_gb
    usable = (s.gpu.memory_gb if memory_gb is None else memory_gb) * util
    budget = usable - shared - experts - overhead_gb - buf
    kv = s.kv_request_bytes
    per_group = max(int(budget * GB // kv), 0) if budget > 0 else 0
    return EpMemory(shared_gb=shared, experts_gb=experts, overhead_gb=overhead_gb,
                    buffers_gb=buf, usable_gb=usable, kv_budget_gb=budget, kv_request_bytes=kv,
                    max_sequences_per_group=per_group, max_batch=per_group * lay.attention_groups)


@dataclass(frozen=True, kw_only=True)
class EpStep:
    """One decode step of the deployment at a total batch, ms (the busiest GPU's)."""

    batch: float
    """Sequences decoding in the whole deployment."""
    attention_ms: float
    experts_ms: float
    comm_ms: float
    step_ms: float
    bound_ms: float
    """The spec-sheet bound at the same batch (`bound_ms`)."""
    imbalance: float
    overlap: str
    gpus: int
    fixed_ms: float = 0.0
    """The per-MoE-layer fixed time in the step (`EpKnobs.layer_overhead_us`), ms."""
    tp_comm_ms: float = 0.0
    """The TP attention groups' all-reduces in the step (`attention_tp_comm_ms`), ms."""

    @property
    def tpot_ms(self) -> float:
        return self.step_ms

    @property
    def tok_s_per_gpu(self) -> float:
        """Output tokens per second per GPU: B x 1000 / step / GPUs (tau = 1: no drafts)."""
        return self.batch * 1e3 / self.step_ms / self.gpus

    @property
    def bound_tok_s_per_gpu(self) -> float:
        return self.batch * 1e3 / self.bound_ms / self.gpus


def _touched(s: EpSetup, batch: float) -> float:
    """Share of a layer's experts a batch touches (uniform routing, F4): 1 - (1 - k/E)^B."""
    return float(expected_experts_touched(s.experts, s.active, max(batch, 1.0))) / s.experts


def compute_parts_ms(s: EpSetup, batch: float, *, imbalance: float, eta_bw: float = 1.0,
                     eff: float = 1.0, knobs: EpKnobs = SPEC_KNOBS) -> tuple[float, float]:
    """(attention part, expert part) of the busiest GPU's compute for `batch` sequences, ms.

    Attention part: max(S' x bytes/param / attention_tp / (BW eta_bw eta_d) + b_g x KV / (BW
    eta_bw eta_kv), b_g x 2 S' / attention_tp / (F_d eff e_d) + b_g x A / attention_tp / (F_a eff
    e_a)) with S' = S - lookup, b_g = B / attention groups (S: shared parameters; the input
    embedding is a lookup, F4b); A the attention FLOPs of one token (F4b's, MLA in the
    absorbed form: `attention_flops_per_token`), F_a the peak at `knobs.attention_dtype`
    (default: F), F_d the peak at `knobs.dense_dtype` (default: F; `_capped_peak`).
    Expert part: max(slots x X/E x bytes/param x touched(B) / (BW eta_bw), 2 X/E x gamma B k /
    ep / (F eff e_x)): the GPU's expert copies read, its token-expert pairs multiplied, e_x the
    grouped GEMM's share at gamma B k / ep / slots tokens per expert copy
    (`grouped_gemm_eff`). Each part on its own roofline, one after the other (F4b). The knobs'
    shares (eta_d, eta_kv, e_d, e_a, e_x) are 1 on the spec sheet. Unit: ms.
    """
    lay = s.layout
    bw = s.gpu.bandwidth_gb_s * GB * eta_bw
    f = s.peak_tflops * TERA * eff
    f_dense = _capped_peak(s, knobs.dense_dtype) * TERA * eff
    f_attn = _capped_peak(s, knobs.attention_dtype) * TERA * eff * knobs.attention_eff
    shared = (s.shared_params_b - s.variant.model.lookup_params_b) * 1e9
    b_g = batch / lay.attention_groups
    attn_s = max((s.shared_bytes - s.lookup_bytes) / lay.attention_tp / (bw * knobs.dense_eta_bw)
                 + b_g * s.kv_request_bytes / (bw * knobs.kv_eta_bw),
                 b_g * 2.0 * shared / lay.attention_tp / (f_dense * knobs.dense_eff)
                 + b_g * s.attention_flops / lay.attention_tp / f_attn)
    exp_bytes = (s.expert_slots * s.expert_params_b * 1e9 * s.expert_bytes_per_param
                 * _touched(s, batch))
    pairs = imbalance * batch * s.active / lay.ep
    e_x = grouped_gemm_eff(knobs.expert_eff_curve, pairs / s.expert_slots)
    exp_flops = 2.0 * s.expert_params_b * 1e9 * pairs
    return attn_s * 1e3, max(exp_bytes / bw, exp_flops / (f * e_x)) * 1e3


def _capped_peak(s: EpSetup, dtype: str) -> float:
    """TFLOP/s of a kernel run at `dtype`, at most the weights' peak (so the spec-sheet bound,
    at the weights' peak, stays a bound); '' = the weights' peak. Used for the attention
    kernel (`EpKnobs.attention_dtype`) and the GEMMs outside the routed experts
    (`EpKnobs.dense_dtype`: FP8 for DeepSeek's NVFP4 checkpoints, whose MLA projections stay
    FP8; with FP8 or BF16 weights the weights' own peak)."""
    if not dtype:
        return s.peak_tflops
    return min(s.gpu.tflops_for(dtype), s.peak_tflops)


def all_to_all_ms(s: EpSetup, batch: float, *, imbalance: float = 1.0,
                  latency: bool = True, knobs: EpKnobs = SPEC_KNOBS) -> float:
    """Dispatch + combine of one decode step over every MoE layer, ms (the busiest GPU).

    Per layer: 2 x latency + gamma x (B / ep) x k x hidden x (d + c) bytes x max(intra / BW_up,
    inter / BW_out), with d = 1 (FP8 dispatch) and c = 2 (BF16 combine) bytes per element,
    intra = (r - 1) / ep and inter = (ep - r) / ep the shares of destinations inside and outside
    the GPU's scale-up domain of r = min(ep, domain) ranks (local ones send nothing), BW_up the
    GPU's NVLink (`Gpu.interconnect_gb_s`) and BW_out its NIC (`NodeShape.scale_out_gb_s`).
    Latency: 8 us inside the domain, 50 us across it (`SCALE_UP_LATENCY_US`,
    `SCALE_OUT_LATENCY_US`). The knobs' achieved shares divide the bandwidths (BW_up x
    `scale_up_eta`, BW_out x `scale_out_eta`; 1 on the spec sheet). Example: 8 H200 (450
    GB/s), B = 1024, DeepSeek-V3 (hidden 7168, k = 8): 128 x 8 x 7168 x 3 x 7/8 / 450e9 =
    42.8 us + 16 us per layer, x 58 = 3.41 ms.
    """
    lay = s.layout
    if lay.ep <= 1:
        return 0.0
    r = lay.domain_ranks
    per_gpu_bytes = (imbalance * batch / lay.ep * s.active * s.variant.model.hidden
                     * (DISPATCH_BYTES_PER_ELEMENT + COMBINE_BYTES_PER_ELEMENT))
    wire = max((r - 1) / lay.ep * per_gpu_bytes
               / (s.gpu.interconnect_gb_s * GB * knobs.scale_up_eta),
               (lay.ep - r) / lay.ep * per_gpu_bytes / (s.scale_out_gb_s * GB * knobs.scale_out_eta))
    lat_us = SCALE_UP_LATENCY_US if lay.scale_up else SCALE_OUT_LATENCY_US
    return s.moe_layers * ((2.0 * lat_us * 1e-6 if latency else 0.0) + wire) * 1e3


def bound_ms(s: EpSetup, batch: float) -> float:
    """The spec-sheet bound on the step, ms: max(all bytes / BW, all FLOPs / F) at peak with
    balanced load (gamma = 1) and the all-to-alls fully hidden. A max of sums is at most the sum
    of the maxima, gamma >= 1, knobs <= 1 only slow down, and two micro-batches read the weights
    twice, so `ep_step` is never faster under either overlap."""
    lay = s.layout
    shared = (s.shared_params_b - s.variant.model.lookup_params_b) * 1e9
    b_g = batch / lay.attention_groups
    read = ((s.shared_bytes - s.lookup_bytes) / lay.attention_tp + b_g * s.kv_request_bytes
            + s.expert_slots * s.expert_params_b * 1e9 * s.expert_bytes_per_param
            * _touched(s, batch))
    flops = (b_g * (2.0 * shared + s.attention_flops) / lay.attention_tp
             + 2.0 * s.expert_params_b * 1e9 * batch * s.active / lay.ep)
    return max(read / (s.gpu.bandwidth_gb_s * GB), flops / (s.peak_tflops * TERA)) * 1e3


def attention_tp_comm_ms(s: EpSetup, batch: float) -> float:
    """The all-reduces of TP attention in one pass over `batch` sequences of the deployment,
    ms: two per layer (after attention, after the shared expert or dense MLP) of b_g x hidden
    x 2 bytes, b_g = batch / attention groups, over the group's scale-up link (F10,
    `capacity.model.parallel.tp_comm_ms`); 0 under DP attention (attention_tp = 1). In the
    step's compute, as the aggregated planner counts TP's all-reduces. Example (tests):
    DeepSeek-V3 on 8 H200, TP4 attention, 32 sequences: b_g 16, 229,376 B, 8 us + 1.5 x
    229,376 B / 450 GB/s = 8.765 us, x 2 x 61 layers = 1.069 ms."""
    if s.layout.attention_tp <= 1:
        return 0.0
    return float(tp_comm_ms(s.variant.model, s.gpu, s.layout.attention_tp,
                            batch / s.layout.attention_groups))


def ep_step(s: EpSetup, batch: float, *, eta_bw: float = 1.0, eff: float = 1.0,
            overhead_ms: float = 0.0, overlap: Overlap | str = DEFAULT_OVERLAP,
            knobs: EpKnobs = SPEC_KNOBS) -> EpStep:
    """The decode step at a total batch of `batch` sequences (ms), busiest GPU.

    SUM: t0 + C + all-to-all(B), C = attention(B) + experts(B) + fixed + TP all-reduces
    (`attention_tp_comm_ms`, 0 under DP attention). TBO: t0 + max(C, M) + (1 - overlap) x
    min(C, M), C = 2 [attention(B/2) + experts(B/2) + fixed + TP all-reduces], M = 2
    all-to-all(B/2): two micro-batches, each reading the weights, the `knobs.overlap` share of
    the shorter hidden behind the longer (1, the spec sheet: all, as DeepSeek's and SGLang's
    two-batch overlap aim at; fill and drain left out). fixed = MoE layers x
    `knobs.layer_overhead_us` per micro-batch (0 on the spec sheet). gamma at the micro-batch's
    size.
    """
    if batch <= 0:
        raise InputError("batch must be > 0 sequences")
    ov = Overlap(overlap)
    parts = 1 if ov == Overlap.SUM else 2
    b = batch / parts
    gamma = imbalance_factor(experts=s.experts, active=s.active, exponent=s.exponent,
                             gpus=s.layout.ep, redundant=s.layout.redundant_experts,
                             batch_tokens=b)
    attn, exp = compute_parts_ms(s, b, imbalance=gamma, eta_bw=eta_bw, eff=eff, knobs=knobs)
    comm = parts * all_to_all_ms(s, b, imbalance=gamma, knobs=knobs)
    fixed = parts * s.moe_layers * knobs.layer_overhead_us * 1e-3
    tp = parts * attention_tp_comm_ms(s, b)
    compute = parts * (attn + exp) + fixed + tp
    step = overhead_ms + (compute + comm if ov == Overlap.SUM else knobs.combine_ms(compute, comm))
    return EpStep(batch=batch, attention_ms=parts * attn, experts_ms=parts * exp, comm_ms=comm,
                  step_ms=step, bound_ms=bound_ms(s, batch), imbalance=gamma, overlap=ov.value,
                  gpus=s.layout.ep, fixed_ms=fixed, tp_comm_ms=tp)


def prefill_tok_s_per_gpu(s: EpSetup, prompt_tokens: int, *, mfu: float = 1.0,
                          imbalance: float = 1.0, knobs: EpKnobs = SPEC_KNOBS,
                          tokens_per_gpu: float = PREFILL_TOKENS_PER_GPU) -> float:
    """Input tokens per second per GPU of a compute-bound prefill (F6 per GPU), tok/s.

    Per prompt token, the GPU time of the deployment (the rate is tokens over ep GPUs): C = 2 (S -
    lookup) / (F_d e_d) + 4 x layers x q_heads x head_dim x L / 2 (causal attention, F6) / (F_a
    e_a) + 2 X/E x k x gamma / (F e_x) (its experts, spread over the EP group, the busiest GPU's
    share), all at MFU, over (1 - `comm_sm_share`); e_d, e_a the knobs' prefill shares, F_a the
    peak at `attention_dtype`, F_d at `dense_dtype` (`_capped_peak`), e_x the grouped GEMM's share
    at tokens_per_gpu x k x gamma / ep / slots tokens per expert copy, plus the fixed time 2
    micro-batches x MoE layers x `layer_overhead_us` / tokens_per_gpu. With `knobs.prefill_comm`
    the all-to-all M (`prefill_comm_us_per_token`) joins under the overlap: 1 / (max(C, M) + (1 -
    overlap) min(C, M)); else communication is hidden. The spec sheet: MFU 1, gamma 1, knobs
    neutral. The attention layout does not change C: TP attention splits each token's shared FLOPs
    over its group, and the group takes that many times the tokens (as `compute_parts_ms`' decode,
    b / groups x 2 S' / attention_tp = b x 2 S' / ep); its all-reduces are not counted here. Until
    2026-12-07 the shared part was divided by attention_tp once more, which made a TP attention
    layout prefill up to attention_tp times faster than DP attention."""
    m = s.variant.model
    k = knobs
    f = s.peak_tflops * TERA * mfu * (1.0 - k.comm_sm_share)
    f_dense = _capped_peak(s, k.dense_dtype) * TERA * mfu * (1.0 - k.comm_sm_share)
    f_attn = (_capped_peak(s, k.attention_dtype) * TERA * mfu * (1.0 - k.comm_sm_share)
              * k.prefill_attention_eff)
    shared = (s.shared_params_b - m.lookup_params_b) * 1e9
    attn = float(attention_flops_per_token(m, prompt_tokens, absorbed=False)) / 2.0
    e_x = grouped_gemm_eff(k.expert_eff_curve,
                           tokens_per_gpu * s.active * imbalance / s.layout.ep / s.expert_slots)
    compute_s = (2.0 * shared / (f_dense * k.prefill_dense_eff) + attn / f_attn
                 + 2.0 * s.expert_params_b * 1e9 * s.active * imbalance / (f * e_x)
                 + 2.0 * s.moe_layers * k.layer_overhead_us * 1e-6 / tokens_per_gpu)
    if not k.prefill_comm:
        return 1.0 / compute_s
    comm_s = prefill_comm_us_per_token(s, imbalance=imbalance, knobs=k) * 1e-6
    return 1.0 / (k.combine_ms(compute_s, comm_s))


def prefill_comm_us_per_token(s: EpSetup, *, imbalance: float = 1.0,
                              knobs: EpKnobs = SPEC_KNOBS) -> float:
    """A prompt token's dispatch + combine over every MoE layer, us (DeepEP's normal kernels).

    Per layer: hidden x (d + c) bytes x gamma x max(k (r - 1) / ep / (BW_up eta_up), n_remote /
    (BW_out eta_out)): k copies to the ranks of its scale-up domain over NVLink, one copy to
    each remote domain it touches over the NIC (NVLink-to-RDMA forwarding), n_remote =
    `remote_nodes_per_token` over ceil(ep / domain) domains. Example: 32 H100 (4 domains of 8),
    DeepSeek-V3: NIC 2.70 x 7168 x 3 / 50 GB/s = 1.16 us per layer, x 58 = 67.4 us."""
    lay = s.layout
    if lay.ep <= 1:
        return 0.0
    r = lay.domain_ranks
    per = s.variant.model.hidden * (DISPATCH_BYTES_PER_ELEMENT + COMBINE_BYTES_PER_ELEMENT)
    domains = math.ceil(lay.ep / lay.nvlink_domain)
    wire = max(s.active * (r - 1) / lay.ep / (s.gpu.interconnect_gb_s * GB * knobs.scale_up_eta),
               remote_nodes_per_token(domains, s.active)
               / (s.scale_out_gb_s * GB * knobs.scale_out_eta))
    return s.moe_layers * imbalance * per * wire * 1e6


# -- planning ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class EpOption:
    """One layout of a plan: memory, the batch used, the step and the throughput per GPU."""

    layout: EpLayout
    memory: EpMemory
    batch: int
    overlap: str
    step: EpStep | None
    """None where the weights do not fit."""
    exponent: float

    @property
    def fits(self) -> bool:
        return self.step is not None

    @property
    def tok_s_per_gpu(self) -> float:
        return self.step.tok_s_per_gpu if self.step else 0.0

    @property
    def tpot_ms(self) -> float:
        return self.step.tpot_ms if self.step else math.inf


def plan_ep(model: str, gpu: str, n_gpus: int, *, prompt_tokens: int, output_tokens: int,
            batch_per_gpu: int | None = None, kv_dtype: str = "fp16", weights: str | None = None,
            eta_bw: float = 1.0, eff: float = 1.0, overhead_ms: float = 0.0,
            util: float = DEFAULT_UTIL, overhead_gb: float = DEFAULT_OVERHEAD_GB,
            redundant_options: tuple[int, ...] = (0, 32),
            overlaps: tuple[Overlap | str, ...] = (Overlap.TBO, Overlap.SUM),
            catalog: Catalog | None = None, knobs: EpKnobs = SPEC_KNOBS,
            runtime_memory: bool = False) -> list[EpOption]:
    """The EP layouts of `n_gpus` GPUs for a model: DP attention, and TP attention within a
    node (2, 4 or 8 GPUs dividing the heads), each with the redundancy options whose copies
    divide evenly over the GPUs, under each overlap; the KV held at prompt + output tokens.
    The batch: `batch_per_gpu` x GPUs, else the most that fits (F3 per GPU) capped at
    `MAX_TOKENS_PER_RANK` per GPU. Sorted by throughput per GPU, the best first. Knobs: the
    spec sheet's by default (`knobs`: `EpKnobs`, e.g. `typical_ep_knobs()`); the memory the
    driver reports with `runtime_memory` (`Gpu.memory_for`, as the basis counts it)."""
    cat = catalog or default_catalog()
    shape = node_shape(cat.gpu(gpu).key)
    heads = min((grp.q_heads for grp in cat.variant(model, weights).model.layer_groups
                 if grp.q_heads), default=1)
    tps = [1] + [t for t in (2, 4, 8) if t <= min(n_gpus, shape.max_gpus_per_node)
                 and n_gpus % t == 0 and heads % t == 0]
    experts = cat.variant(model, weights).model.moe
    out: list[EpOption] = []
    for tp in tps:
        for red in redundant_options:
            if experts is None or (red and (experts.experts + red) % n_gpus):
                continue
            lay = ep_layout(gpu, n_gpus, attention_tp=tp, redundant_experts=red, shape=shape)
            s = ep_setup(model, gpu, lay, context_tokens=prompt_tokens + output_tokens,
                         kv_dtype=kv_dtype, weights=weights, catalog=cat)
            mem = ep_memory(s, util=util, overhead_gb=overhead_gb,
                            memory_gb=cat.gpu(gpu).memory_for(runtime_memory))
            cap = MAX_TOKENS_PER_RANK * n_gpus
            b = min(mem.max_batch, cap) if batch_per_gpu is None else batch_per_gpu * n_gpus
            fits = mem.max_batch >= max(b, 1)
            for ov in overlaps:
                step = ep_step(s, b, eta_bw=eta_bw, eff=eff, overhead_ms=overhead_ms,
                               overlap=ov, knobs=knobs) if fits and b > 0 else None
                out.append(EpOption(layout=lay, memory=mem, batch=b, overlap=Overlap(ov).value,
                                    step=step, exponent=s.exponent))
    return sorted(out, key=lambda o: -o.tok_s_per_gpu)
