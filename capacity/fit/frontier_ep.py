"""Wide expert-parallel points of the buyer's chart for MoE models (issue 27, docs/frontier.md,
"Wide-EP points").

A deployment spreads the routed experts of a MoE model over EP GPUs with DP attention
(`capacity.model.expert_parallel`: `ep_setup`, `ep_memory`, `ep_step`), over one node and
over the GPU's NVLink domain (`ep_degrees`). Each is one replica of EP GPUs under a closed loop
of B users (`capacity.fit.frontier_loop.closed_loop`, as the aggregated points), B = batch per
GPU x EP at a geometric grid of batches per GPU up to what fits: its decode step is
`ep_step`'s (the busiest GPU's, two-batch overlap) and prefill pauses decoding, one prompt
taking P / (EP x `prefill_tok_s_per_gpu`) of the deployment's time. So interactivity =
1000 / TPOT and throughput per GPU = the step's tok/s per GPU with prefill's share of the GPU
time taken off: C n / T / EP.

With the disaggregated points ticked too, `ep_pools_blocks` draws wide-EP pools (docs/frontier.md,
"EP-pools points"): a decode deployment of EP GPUs in pure decode steps at each batch and the
prefill GPUs it needs, fractional, in prefill deployments of the same size, as the
disaggregated points count a decode replica and its prefill GPUs
(`frontier_disagg.disaggregated_figures`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from capacity.catalog.loader import Catalog, Gpu, ModelVariant
from capacity.catalog.nodes import node_shape
from capacity.fit.frontier_disagg import disaggregated_figures
from capacity.fit.frontier_loop import StepTerms, closed_loop
from capacity.fit.frontier_space import EP_POOLS, WIDE_EP, FrontierInputs, PointBlock, Variant
from capacity.model.ep_knobs import EpBasis, ep_basis
from capacity.model.expert_parallel import (
    MAX_TOKENS_PER_RANK,
    EpSetup,
    ep_layout,
    ep_memory,
    ep_setup,
    ep_step,
    prefill_tok_s_per_gpu,
)
from capacity.model.moe_imbalance import imbalance_factor, model_exponent
from capacity.plan.disagg import (
    RHO_MAX,
    handover_bytes,
    link_wait_ms,
    prefill_capacity_per_s,
    prefill_ttft_ms,
)
from capacity.plan.disagg_handover import descriptors_per_rank
from capacity.plan.ep_pools import handover_link
from capacity.plan.ep_search import prefill_ms_per_prompt
from capacity.plan.options import PlanInputs
from capacity.types import FloatArray

EP_ENGINES: tuple[str, ...] = ("vllm", "sglang")
"""Engines that run wide EP with DP attention: SGLang (large-scale EP with DeepEP, LMSYS blog
2025-05-05) and vLLM (--enable-expert-parallel with --data-parallel-size, docs.vllm.ai "Expert
Parallel Deployment"); llama.cpp has none."""
NODE_GPUS = 8
"""The largest node EP runs "over one node" in: an 8-GPU HGX / OAM board, a 4-GPU GB200
compute tray (the node sizes of data/nodes.toml of at most this many GPUs)."""
REDUNDANT_EXPERTS = 32
"""Extra copies of hot experts (EPLB), where they divide evenly over the GPUs: 32 in
DeepSeek's deployments (DeepSeek-V3 technical report, section 3.4; github.com/deepseek-ai/EPLB)."""
EP_BATCH_STEP = 2.0
"""Ratio of the grid of batches per GPU (1, 2, 4, ... up to what fits): each step of `ep_step`
places the experts anew (milliseconds), so the grid is coarser than the aggregated one."""


def ep_degrees(gpu: str) -> tuple[int, ...]:
    """The EP degrees drawn on `gpu` (data/nodes.toml): its largest node of at most NODE_GPUS
    GPUs that fits its NVLink domain, and the domain itself (72 on a GB200 NVL72); each >= 2."""
    s = node_shape(gpu)
    node = max((n for n in s.gpus_per_node if n <= min(NODE_GPUS, max(s.nvlink_domain, 1))),
               default=1)
    return tuple(sorted({n for n in (node, s.nvlink_domain) if n >= 2}))


def batch_grid(top: int) -> FloatArray:
    """Batches per GPU: EP_BATCH_STEP's powers below `top`, and `top` (none when top < 1)."""
    if top < 1:
        return np.zeros(0)
    k = int(math.ceil(math.log(top) / math.log(EP_BATCH_STEP))) if top > 1 else 0
    grid = np.round(EP_BATCH_STEP ** np.arange(k + 1))
    return np.unique(np.append(grid[grid < top], float(top)))


StepMemo = dict[tuple[object, ...], FloatArray]
"""`ep_step`'s steps of a deployment at its batches and knobs, kept through one `frontier`
call: engines on one basis share them."""


def basis_of(pinp: PlanInputs) -> EpBasis:
    """The EP knobs of the plan's basis (`capacity.model.ep_knobs.ep_basis`)."""
    return ep_basis(pinp.basis, eta_bw=pinp.eta_bw, eff=pinp.eff, mfu=pinp.mfu,
                    overhead_ms=pinp.step_overhead_ms)


def _steps_ms(s: EpSetup, batches: FloatArray, b: EpBasis, memo: StepMemo) -> FloatArray:
    """`ep_step` at each total batch with the basis's knobs, ms."""
    key = (s.variant.model.key, s.variant.format.key, s.gpu.key, s.layout, s.kv_dtype,
           s.context_tokens, tuple(batches.tolist()), b)
    if key not in memo:
        memo[key] = np.asarray([ep_step(s, float(n), eta_bw=b.eta_bw, eff=b.eff,
                                        overhead_ms=b.overhead_ms, knobs=b.knobs).step_ms
                                for n in batches])
    return memo[key]


def ep_terms(batches: FloatArray, steps_ms: FloatArray) -> StepTerms:
    """`ep_step`'s step over total batches as `closed_loop`'s terms, linear between them. The
    loop reads only the step where prefill pauses decoding (no token budget), so the bandwidth
    and compute terms carry the step and 0."""
    def terms(b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        st = np.asarray(np.interp(b, batches, steps_ms), dtype=np.float64)
        return st, np.zeros_like(st), st
    return terms


def _groups(inp: FrontierInputs, v: Variant, pinp: PlanInputs, formats: list[ModelVariant],
            catalog: Catalog) -> Iterator[tuple[Gpu, float, EpSetup, FloatArray]]:
    """Every EP group the chart draws for one variant (none with a draft, outside
    `EP_ENGINES` or for a dense model): each chosen GPU x EP degree (`ep_degrees`) x weight
    format x KV precision with DP attention and REDUNDANT_EXPERTS where they divide evenly, the
    KV held at the context; as (GPU, price per GPU-hour, setup, total batches: B = b x EP at
    a batch per GPU of `batch_grid` up to min(what fits (`ep_memory`, util and overhead from
    `pinp`), MAX_TOKENS_PER_RANK))."""
    if v.draft is not None or v.engine not in EP_ENGINES or not formats:
        return
    moe = formats[0].model.moe
    if moe is None:
        return
    exponent = model_exponent(formats[0].model.key)  # the family's, once (a bisection)
    for key in (pinp.gpus if pinp.gpus is not None else ()):
        gpu = catalog.gpu(key)
        price = pinp.price_of(gpu).per_gpu_hour
        for ep in ep_degrees(gpu.key):
            if ep > moe.experts:
                continue
            red = REDUNDANT_EXPERTS if (moe.experts + REDUNDANT_EXPERTS) % ep == 0 else 0
            lay = ep_layout(gpu.key, ep, redundant_experts=red)
            for f in formats:
                for kv in inp.kv_dtypes:
                    s = ep_setup(f.model.key, gpu.key, lay, context_tokens=inp.context,
                                 kv_dtype=kv, weights=f.format.key, exponent=exponent,
                                 catalog=catalog)
                    mem = ep_memory(s, util=pinp.util, overhead_gb=pinp.overhead_gb,
                                    memory_gb=gpu.memory_for(pinp.runtime_memory))
                    per_gpu = batch_grid(min(mem.max_batch // ep, MAX_TOKENS_PER_RANK))
                    if per_gpu.size:
                        yield gpu, price, s, per_gpu * ep


def wide_ep_blocks(inp: FrontierInputs, v: Variant, pinp: PlanInputs,
                   formats: list[ModelVariant], catalog: Catalog,
                   memo: StepMemo | None = None) -> list[PointBlock]:
    """The wide-EP points of one variant: every EP group of `_groups` at its batches, the
    basis's EP knobs (`basis_of`: on the typical basis the published and fitted EP knobs, else
    the basis's eta_bw, eff, per-step overhead and MFU). `memo`: steps already computed in
    this `frontier` call (`StepMemo`)."""
    memo = {} if memo is None else memo
    return [_block(inp, v, pinp, s, batches, price, memo)
            for _, price, s, batches in _groups(inp, v, pinp, formats, catalog)]


def _prefill_ms(inp: FrontierInputs, pinp: PlanInputs, s: EpSetup, basis: EpBasis) -> float:
    """One prompt's time on an EP deployment, ms: the planner's `prefill_ms_per_prompt` (P /
    (EP x `prefill_tok_s_per_gpu`) at the layout's imbalance and the prompt's share of a
    pass's fixed time), for the wide-EP and the EP-pools points."""
    ep = s.layout.ep
    gamma = imbalance_factor(experts=s.experts, active=s.active, exponent=s.exponent, gpus=ep,
                             redundant=s.layout.redundant_experts)
    return prefill_ms_per_prompt(
        inp.prompt_tokens, ep, prefill_tok_s_per_gpu(s, inp.prompt_tokens, mfu=basis.mfu,
                                                     imbalance=gamma, knobs=basis.knobs),
        pinp.fixed_prefill_ms(s.variant.model))


def _block(inp: FrontierInputs, v: Variant, pinp: PlanInputs, s: EpSetup, batches: FloatArray,
           price: float, memo: StepMemo) -> PointBlock:
    """The points of one EP deployment at total batches `batches` (module docstring)."""
    ep = s.layout.ep
    basis = basis_of(pinp)
    steps = _steps_ms(s, batches, basis, memo)
    prefill_ms = _prefill_ms(inp, pinp, s, basis)
    ss = closed_loop(concurrency=batches, terms=ep_terms(batches, steps), prefill_ms=prefill_ms,
                     prompt_tokens=inp.prompt_tokens, output_tokens=inp.output_tokens,
                     budget_tokens=0, mixed=False, request_latency_ms=pinp.request_latency_ms)
    n = int(batches.size)
    return PointBlock(
        deployment=WIDE_EP, gpu=[s.gpu.key] * n, gpu_name=[s.gpu.name] * n,
        engine=[v.engine] * n, basis=[v.basis] * n, draft=[None] * n,
        weights=[s.variant.format.key] * n, kv_dtype=[s.kv_dtype] * n,
        layout=[s.layout.describe()] * n, tp=np.full(n, s.layout.attention_tp, dtype=np.int64),
        n_gpus=np.full(n, ep, dtype=np.int64), concurrency=batches.astype(np.int64),
        interactivity_tok_s_per_user=ss.interactivity_tok_s_per_user,
        throughput_tok_s_per_gpu=ss.output_tok_s / ep, ttft_ms=ss.ttft_ms, tpot_ms=ss.tpot_ms,
        prefill_share=ss.prefill_share, price_per_gpu_hour=np.full(n, price),
        prefill_tp=np.zeros(n, dtype=np.int64), prefill_gpus=np.zeros(n))


def ep_pools_blocks(inp: FrontierInputs, v: Variant, pinp: PlanInputs,
                    formats: list[ModelVariant], catalog: Catalog,
                    memo: StepMemo | None = None) -> list[PointBlock]:
    """The EP-pools points of one variant: each EP group of `_groups` (the wide-EP points'), as
    a decode deployment in pure decode steps at each total batch, with the prefill GPUs it
    needs in prefill deployments of the same size (DP attention).

    Per point: one prompt takes P / (EP x `prefill_tok_s_per_gpu`) of a prefill deployment
    (`_prefill_ms`, as the wide-EP points); the KV hand-over of one prefill and one decode
    deployment on the link both put it on (`ep_pools.handover_link`; `disagg_handover`'s latency, bytes at DP
    attention, descriptors and the admission at the point's step); a prefill deployment's
    capacity at its part of the TTFT budget, `inp.ttft_ms` at `inp.quantile` less the
    hand-over and the first decode step (`prefill_capacity_per_s`, batched); the figures of
    `disaggregated_figures` (prefill GPUs = rate / capacity x EP, throughput over both).
    TTFT: the prefill pool's mean at that rate + the hand-over + the mean waits of a sending
    and a receiving rank + the first decode step. A point whose prefill alone misses the
    budget, or whose links run above RHO_MAX, is not drawn."""
    memo = {} if memo is None else memo
    basis = basis_of(pinp)
    blocks: list[PointBlock] = []
    for gpu, price, sd, batches in _groups(inp, v, pinp, formats, catalog):
        m, kv, ep = sd.variant.model, sd.kv_dtype, sd.layout.ep
        link = handover_link(gpu, node_shape(gpu.key), 2 * ep)
        pre_ms = _prefill_ms(inp, pinp, sd, basis)
        steps = _steps_ms(sd, batches, basis, memo)
        sent = handover_bytes(m, kv, inp.prompt_tokens, 1)
        busy = float(link.busy_ms(sent, sent, descriptors_per_rank(m, inp.prompt_tokens)))
        blocks.append(_pools_block(inp, v, sd, batches, steps, pre_ms, busy,
                                   link.latency_ms + link.admission_ms(steps), link.kind,
                                   price))
    return blocks


def _pools_block(inp: FrontierInputs, v: Variant, s: EpSetup, batches: FloatArray,
                 steps: FloatArray, pre_ms: float, busy_ms: float, fixed_ms: FloatArray,
                 link_kind: str, price: float) -> PointBlock:
    """The EP-pools points of one decode deployment at total batches `batches`
    (`ep_pools_blocks`)."""
    ep = s.layout.ep
    xfer = fixed_ms + busy_ms
    cap = prefill_capacity_per_s(pre_ms, inp.ttft_ms - xfer - steps, inp.quantile)
    fig = disaggregated_figures(concurrency=batches, decode_step_ms=steps,
                                output_tokens=inp.output_tokens,
                                prefill_capacity_per_s=np.where(cap > 0, cap, np.nan),
                                prefill_tp=ep, decode_tp=ep)
    w_send, _, rho_s = link_wait_ms(cap / ep, busy_ms, inp.quantile)
    w_recv, _, rho_r = link_wait_ms(fig.rate_per_s / ep, busy_ms, inp.quantile)
    ok = (cap > 0) & (rho_s <= RHO_MAX) & (rho_r <= RHO_MAX)
    ttft = prefill_ttft_ms(cap, pre_ms, inp.quantile)[0] + xfer + w_send + w_recv + steps
    keep = np.flatnonzero(ok)
    per = fig.prefill_gpus / ep
    n = int(keep.size)
    return PointBlock(
        deployment=EP_POOLS, gpu=[s.gpu.key] * n, gpu_name=[s.gpu.name] * n,
        engine=[v.engine] * n, basis=[v.basis] * n, draft=[None] * n,
        weights=[s.variant.format.key] * n, kv_dtype=[s.kv_dtype] * n,
        layout=[f"{s.layout.describe()}, prefill EP{ep} x {per[r]:.2f} per decode deployment, "
                f"KV {xfer[r]:.1f} ms over {link_kind}" for r in keep.tolist()],
        tp=np.full(n, s.layout.attention_tp, dtype=np.int64),
        n_gpus=np.full(n, ep, dtype=np.int64), concurrency=batches[keep].astype(np.int64),
        interactivity_tok_s_per_user=fig.interactivity_tok_s_per_user[keep],
        throughput_tok_s_per_gpu=fig.throughput_tok_s_per_gpu[keep], ttft_ms=ttft[keep],
        tpot_ms=steps[keep], prefill_share=fig.prefill_share[keep],
        price_per_gpu_hour=np.full(n, price), prefill_tp=np.full(n, ep, dtype=np.int64),
        prefill_gpus=fig.prefill_gpus[keep])
