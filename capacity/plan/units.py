"""The planner's configurations (docs/method.md, section 6): every GPU x TP x weight format x
KV precision x speculative-decoding draft of one replica, as parallel arrays
(`replica_units`): its memory (the weights, the KV slots C_vram, a shared prefix held once),
its F4 step, the prefill of its mean request and of each kind of request a TTFT percentile
runs over (a conversation's turns, a prefix's misses and hits, `prefix.request_kinds`), its
price and its engine's limits.
`capacity.plan.search.plan` turns them into deployments and checks them; the frontier
(`capacity.fit.frontier`) runs them in its closed loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from capacity.catalog.loader import Catalog, Gpu, Model, ModelVariant
from capacity.catalog.nodes import node_shape
from capacity.errors import InputError
from capacity.model.kv import DEFAULT_BLOCK_SIZE, held_request_bytes, kv_request_bytes
from capacity.model.memory import (
    max_concurrency,
    vram_budget,
)
from capacity.model.moe import gemm_bytes_per_param, routing_on
from capacity.model.parallel import DEFAULT_NCCL_GB, check_tp
from capacity.model.pipeline import forward_comm_line, forward_comm_ms, stage_share, stream_slots
from capacity.model.prefill import PrefillFlops, prefill_flops, prefill_seconds_by_parts
from capacity.model.prefix import (
    RequestKinds,
    mean_prefix_prefill,
    mean_turn_prefill,
    request_kinds,
)
from capacity.model.roofline import StepModel, counts_as_engines, fixed_step_ms
from capacity.model.scenario import context_limit_note
from capacity.model.speculative import Draft, draft_step_fields, draft_weights_per_gpu_gb, kv_factor
from capacity.plan.options import (
    PlanInputs,
)
from capacity.plan.rate_search import Prompts
from capacity.types import FloatArray, IntArray
from capacity.units import GB


@dataclass(frozen=True, kw_only=True)
class ReplicaUnits:
    """Per-replica configurations (GPU x TP x format x draft x KV), as parallel arrays and
    lists."""

    gpus: list[Gpu]
    tp: IntArray
    formats: list[str]
    kv: list[str]
    weights_gb: FloatArray
    c_vram: IntArray
    usable_bytes: FloatArray
    fixed_bytes: FloatArray
    kv_request_bytes: FloatArray
    """KV one request holds per GPU (bytes), the draft's beside the target's (`kv_factor`)."""
    prefill_ms: FloatArray
    new_tokens: FloatArray
    """The tokens the mean request prefills (its prompt less the cached share of a shared
    prefix, `prefix.mean_prefix_prefill`; a conversation's turns' mean,
    `prefix.mean_turn_prefill`), whose prefill is `prefill_ms`: what a mixed step's chunks
    carry of it."""
    kind_prefill_ms: FloatArray
    """The prefill (ms) of each kind of request a TTFT percentile runs over, one row per
    configuration (`prefix.request_kinds`: a conversation's turns, a shared prefix's misses
    and hits; one kind, the mean request, where requests do not differ); its new tokens
    `kind_new_tokens`, each kind's share of the requests `kind_weights`."""
    kind_new_tokens: FloatArray
    kind_weights: tuple[float, ...]
    step: StepModel
    price_per_hour: FloatArray
    seqs: FloatArray
    """max_num_seqs of each configuration's engine on its GPU."""
    budget: FloatArray
    """The engine's mixed-step token budget on each GPU (0: prefill batches pause decoding)."""
    ahead: FloatArray
    """1 where the engine schedules one step ahead (`EngineProfile.schedules_ahead`: vLLM since
    0.14.0, SGLang since 0.4.0), else 0: a request that finds it busy waits one more step for
    its first token (`queueing.analytic_latency`)."""
    node_gpus: IntArray
    """GPUs per node of a per-node offer (bought in whole nodes); 0 = priced per GPU."""
    drafts: list[Draft | None]
    """Each configuration's speculative-decoding draft (None: none)."""
    pp: IntArray | None = None
    """Pipeline stages of each configuration's copy of the model (F13; None: 1 everywhere). A
    unit with PP is one of its copy's PP decode streams: TP GPUs' share of the copy, its step the
    TP group's of the whole model, its slots the copy's split over the streams."""

    def stages(self) -> IntArray:
        """Each configuration's PP (1 where none)."""
        return (np.ones(self.tp.size, dtype=np.int64) if self.pp is None
                else np.asarray(self.pp, dtype=np.int64))

    @property
    def prompts(self) -> Prompts:
        """What each configuration's requests prefill, as the rate searches read it."""
        return Prompts(new_tokens=self.new_tokens, kind_prefill_ms=self.kind_prefill_ms,
                       kind_new_tokens=self.kind_new_tokens, kind_weights=self.kind_weights)


PLAIN_STEP: dict[str, float] = {"verify_tokens": 1.0, "accepted_tokens": 1.0,
                                "draft_passes": 0.0, "draft_weights_bytes": 0.0,
                                "draft_kv_request_bytes": 0.0, "draft_params_b": 0.0}
"""`StepModel`'s F12 fields of a configuration without a draft (its defaults: a plain step)."""


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


def explicit_pipeline(tp: int | None, pp: int | None, tps: list[int], largest_node: int,
                      whole_node: int, max_gpus: int) -> tuple[int, int] | None:
    """The one (TP, PP) pipeline a caller asks for by both sizes (`replica_units`' `tp_only`
    and `pp_only` > 1: `deployment.assess` of the Explorer's what-if or `capacity plan --tp
    --pp`), where its TP group fits a node (and divides a per-node offer) and a copy fits
    `max_gpus`: built whatever the search's rules (`pipeline_layouts`: a whole node's TP group,
    only where one node cannot hold the model), which are about what to recommend, not what
    can be built. Until 2026-12-07 the Explorer offered PP = 2 for Llama-3.1-70B on 16 H100s at
    TP 8 and its deployment box answered that the planner could not build it. None otherwise.
    Example: TP 4 x PP 2 on 8-GPU nodes: (4, 2)."""
    if tp is None or pp is None or pp < 2 or tp not in tps or tp > largest_node:
        return None
    if whole_node and whole_node % tp:
        return None
    return (tp, pp) if tp * pp <= max_gpus else None


def pipeline_layouts(tps: list[int], largest_node: int, whole_node: int, max_gpus: int
                     ) -> list[tuple[int, int]]:
    """The (TP, PP) layouts searched on one GPU: every TP inside a node with PP 1, and, with
    the planner's pipelines, a whole node's TP group (the largest TP a node holds) chained over
    PP = 2, 3, ... nodes while TP x PP stays within `max_gpus` (F13: vLLM's and SGLang's
    multi-node recipe, a TP group per node and the nodes as stages). `replica_units` keeps a
    pipeline of a weight format and KV precision only where that node's TP group cannot hold
    the model and one request (as the engines' docs advise: PP across nodes when one node is
    too small)."""
    inside = [tp for tp in tps if tp <= largest_node and not (whole_node and whole_node % tp)]
    out = [(tp, 1) for tp in inside]
    if inside:
        tp = max(inside)
        out += [(tp, pp) for pp in range(2, max_gpus // tp + 1) if tp * pp > largest_node]
    return out


def replica_units(inp: PlanInputs, cat: Catalog, tp_only: int | None = None, *,
                  pipelines: bool = False, pp_only: int | None = None
                  ) -> tuple[Model, list[ModelVariant], ReplicaUnits]:
    """The per-replica configurations; `tp_only`: those of that TP alone (each unit's figures
    are its own, whatever else is built beside it); `pipelines`: also a node's TP group
    chained over nodes as PP stages (F13, `pipeline_layouts`; without a draft), `pp_only`
    those of that PP alone."""
    variants = _variants(cat, inp.model, inp.formats)
    model = variants[0].model
    gpus = [cat.gpu(k) for k in (inp.gpus if inp.gpus is not None else sorted(cat.gpus))]
    if not gpus:
        raise InputError("choose at least one GPU")
    wl = inp.workload
    if wl.context_tokens > model.max_context_tokens and not inp.allow_long_context:
        raise InputError(context_limit_note(wl.context_tokens, model))
    tps = _tp_choices(model, inp.max_gpus, inp.allow_tp)
    operator = counts_as_engines(inp.step_method)
    whole_pf = prefill_flops(model, wl.prompt, by_operator=operator)

    def first_pf(hit: int) -> tuple[PrefillFlops, float]:  # a turn that finds the prefix
        return mean_prefix_prefill(whole_pf, model, hit, inp.prefix_share if hit > 0 else 0.0,
                                   by_operator=operator)
    # the kinds of request a TTFT percentile runs over (requests differ: turns, a prefix's
    # misses and hits); one where they do not, the mean request
    planned = inp.prefix_share if inp.prefix_tokens > 0 else 0.0
    mixed = wl.turns > 1 or planned > 0
    kinds_of: dict[int, RequestKinds] = {}   # by the tokens a hit finds cached

    def kinds_at(hit: int) -> RequestKinds:
        if hit not in kinds_of:
            kinds_of[hit] = request_kinds(model, wl, hit_tokens=hit, share=planned,
                                          by_operator=operator)
        return kinds_of[hit]
    weights = kinds_at(0).weights if mixed else (1.0,)

    # speculative decoding: no draft, then each draft searched (F12), per weight format
    draft_keys = ("", *inp.draft_keys(model.key))
    drafts = {v.format.key: [inp.draft_for(v, k) for k in draft_keys] for v in variants}
    d_l: list[Draft | None] = []
    g_l: list[Gpu] = []
    tp_l: list[int] = []
    pp_l: list[int] = []
    f_l: list[str] = []
    kv_l: list[str] = []
    kind_ms_l: list[list[float]] = []
    kind_new_l: list[list[float]] = []
    cols: dict[str, list[float]] = {k: [] for k in (
        "w", "cv", "usable", "fixed", "kvr", "kvs", "pre", "new", "bw", "fl", "eta",
        "ca", "cb", "ck", "cc", "price", "node", "seqs", "budget", "ahead", "lk", "eff")}
    kv_cache: dict[tuple[str, int, int, int], float] = {}
    held_cache: dict[tuple[str, int, int, int], float] = {}
    for g in gpus:
        prof = inp.profile_for(g.key, g.memory_gb)
        # KV per request: reserved at the context, or (vLLM, SGLang) the pages of the tokens a
        # request holds at its end, prompt + output (the pool holds every admitted request;
        # a conversation's turns in a steady mix: their mean prompt, the history included)
        held, block = ((wl.context_tokens, DEFAULT_BLOCK_SIZE) if prof.kv_admission == "context"
                       else (wl.held_tokens, prof.kv_block_tokens))
        budget = float(prof.token_budget_tokens) if prof.mixed else 0.0
        ahead = float(prof.schedules_ahead())
        pr = inp.price_of(g)
        price = pr.per_gpu_hour
        largest_node = node_shape(g.key).max_gpus_per_node
        # a per-node offer (and no entered per-GPU price) is bought in whole nodes of its size
        whole_node = pr.node_gpus
        # a TP group stays inside one node; with pipelines, a node's TP group over PP nodes
        layouts = [(tp, pp) for tp, pp in pipeline_layouts(tps, largest_node, whole_node,
                                                           inp.max_gpus)
                   if (pp == 1 or (pipelines and inp.allow_tp))   # replicas only: no PP
                   and (tp_only is None or tp == tp_only)
                   and (pp_only is None or pp == pp_only)]
        asked = explicit_pipeline(tp_only, pp_only, tps, largest_node, whole_node,
                                  inp.max_gpus) if pipelines and inp.allow_tp else None
        if asked is not None and asked not in layouts:
            layouts.append(asked)
        for tp, pp in layouts:
            comm = forward_comm_line(model, g, tp, pp, inp.pp_handoff_ms)
            share = stage_share(model, pp)   # F13: a GPU holds its stage's layers
            nccl = DEFAULT_NCCL_GB if tp > 1 else 0.0
            pre_cache: dict[tuple[int, str], tuple[float, float, list[float], list[float]]] = {}
            hits = {kv: inp.prefix_hit_tokens(model, g, kv, tp) for kv in inp.kv_dtypes}
            memory_gb = g.memory_for(inp.runtime_memory)   # F3's memory on the basis
            for v in variants:
                tflops_per_replica = g.tflops_for(v.format.compute_dtype) * tp
                # the draft's weights per GPU join the target's (Scenario's definitions)
                budgets = [(d, vram_budget(vram_gb=memory_gb, util=inp.util,
                                           weights_gb=v.weights_gb * share / tp
                                           + draft_weights_per_gpu_gb(d, tp),
                                           overhead_gb=inp.overhead_gb, nccl_gb=nccl))
                           for d in drafts[v.format.key] if pp == 1 or d is None]
                for (d, vb), kv in ((b, kv) for b in budgets for kv in inp.kv_dtypes):
                    hit = hits[kv]   # a shared prefix: what the engine's cache serves of it
                    p_share = inp.prefix_share if hit > 0 else 0.0
                    key = (kv, tp, held, block)
                    if key not in kv_cache:
                        kv_req = kv_request_bytes(model, held, kv, tp, block)
                        kv_cache[key] = float(kv_req.exact_bytes if prof.kv_admission == "context"
                                              else kv_req.paged_bytes)
                        # memory: the engine's pages (a hybrid model's states included)
                        held_cache[key] = (kv_cache[key] if prof.kv_admission == "context" else
                                           float(held_request_bytes(model, held, kv, tp, block)))
                    if p_share > 0 and (kv, -tp, hit, block) not in kv_cache:
                        prefix_req = kv_request_bytes(model, hit, kv, tp)
                        kv_cache[(kv, -tp, hit, block)] = float(
                            prefix_req.by_kind_bytes["full"] + prefix_req.by_kind_bytes["mla"])
                    prefix_kv = kv_cache[(kv, -tp, hit, block)] if p_share > 0 else 0.0
                    # memory holds a shared prefix once (from the budget) and the draft's KV
                    # beside the target's (x kv_factor); the step reads every sequence's keys,
                    # a cached prefix's included (an attention kernel reads each sequence's
                    # pages, shared or not, as the event model's step), the draft's own in
                    # its passes
                    # (F13: a GPU holds its stage's share of each request's and the prefix's KV)
                    factor = kv_factor(d) * share
                    kvr_mem = (held_cache[key] - p_share * prefix_kv) * factor
                    prefix_mem = prefix_kv * factor
                    if pp > 1 and (tp, pp) != asked and max_concurrency(vram_budget(
                            vram_gb=memory_gb, util=inp.util, weights_gb=v.weights_gb / tp,
                            overhead_gb=inp.overhead_gb, nccl_gb=nccl).kv_budget_bytes
                            - prefix_kv, held_cache[key] - p_share * prefix_kv) >= 1:
                        continue   # F13: one node's TP group holds it and a request: no pipeline
                    if (hit, v.format.key) not in pre_cache:  # the mean; each kind's
                        pf, new = mean_turn_prefill(first_pf(hit), model, wl,
                                                    by_operator=operator)
                        mean = _prefill_ms(inp, model, g, tp, v, pf, new, pp)
                        kinds = kinds_at(hit).prefills if mixed else ((pf, new),)
                        pre_cache[(hit, v.format.key)] = (
                            mean, new, [_prefill_ms(inp, model, g, tp, v, *k, pp) if mixed
                                        else mean for k in kinds], [k[1] for k in kinds])
                    pre_ms, new_ms, kind_ms, kind_new = pre_cache[(hit, v.format.key)]
                    d_l.append(d)
                    g_l.append(g)
                    tp_l.append(tp)
                    pp_l.append(pp)
                    f_l.append(v.format.key)
                    kv_l.append(kv)
                    kind_ms_l.append(kind_ms)
                    kind_new_l.append(kind_new)
                    for k, val in (("w", v.weights_gb), ("cv", float(stream_slots(
                            max_concurrency(vb.kv_budget_bytes - prefix_mem, kvr_mem), pp))),
                            ("usable", vb.usable_bytes),
                            ("fixed", vb.weights_bytes + vb.overhead_bytes + vb.nccl_bytes
                             + prefix_mem),
                            ("kvr", kvr_mem), ("kvs", kv_cache[key]), ("pre", pre_ms),
                            ("new", new_ms),
                            ("bw", g.bandwidth_gb_s),
                            ("fl", tflops_per_replica), ("ca", comm.fixed_ms),
                            ("cb", comm.per_token_ms), ("ck", comm.knee_tokens),
                            ("cc", comm.above_ms),
                            ("price", price), ("node", whole_node),
                            ("seqs", prof.max_seqs), ("budget", budget),
                            ("ahead", ahead),
                            ("lk", v.lookup_weight_share),
                            ("eff", inp.eff_on(g, v.format.compute_dtype, model)),
                            ("eta", inp.eta_bw_on(g))):
                        cols[k].append(val)
    a = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    tp_a = np.asarray(tp_l, dtype=np.int64)
    # the F4 step of every configuration at once: the same StepModel as `evaluate` (weights per
    # GPU as W / TP, like Scenario.weights_per_gpu_gb)
    step = plan_step(inp, model, a, a["w"] / tp_a * GB)
    if len(draft_keys) > 1:  # F12 per configuration, as `decode_model` sets it for a draft
        per_config: dict[str, Any] = {f: np.full(tp_a.size, v) for f, v in PLAIN_STEP.items()}
        groups: dict[tuple[int, int], list[int]] = {}
        for i, (d, tp) in enumerate(zip(d_l, tp_l, strict=True)):
            if d is not None:
                groups.setdefault((id(d), tp), []).append(i)
        for rows in groups.values():
            at = np.asarray(rows, dtype=np.int64)
            own = draft_step_fields(d_l[rows[0]], tp=tp_l[rows[0]],
                                    kv_request_bytes=a["kvs"][at])
            for f, val in own.items():
                per_config[f][at] = val
        step = replace(step, **per_config,
                       draft_overhead_ms=inp.draft_overhead_ms,
                       verify_overhead_ms=inp.verify_overhead_ms)
    units = ReplicaUnits(gpus=g_l, tp=tp_a, formats=f_l, kv=kv_l, weights_gb=a["w"],
                   c_vram=a["cv"].astype(np.int64), usable_bytes=a["usable"],
                   fixed_bytes=a["fixed"], kv_request_bytes=a["kvr"], prefill_ms=a["pre"],
                   new_tokens=a["new"],
                   kind_prefill_ms=np.asarray(kind_ms_l, dtype=np.float64).reshape(
                       len(kind_ms_l), len(weights)),
                   kind_new_tokens=np.asarray(kind_new_l, dtype=np.float64).reshape(
                       len(kind_new_l), len(weights)),
                   kind_weights=weights,
                   step=step, price_per_hour=a["price"], seqs=a["seqs"], budget=a["budget"],
                   ahead=a["ahead"],
                   node_gpus=a["node"].astype(np.int64), drafts=d_l,
                   pp=np.asarray(pp_l, dtype=np.int64))
    return model, variants, units


def plan_step(inp: PlanInputs, model: Model, a: dict[str, FloatArray],
              weights_bytes: FloatArray) -> StepModel:
    """The F4 step of many configurations at once, the same StepModel as `evaluate`:
    `weights_bytes` per GPU (W / TP, like Scenario.weights_per_gpu_gb) and the columns `a` of
    `replica_units` (and the disaggregated search's) per configuration: KV bytes a sequence
    reads (`kvs`), bandwidth, TFLOP/s per replica, decode GEMM and read efficiency (`eff`,
    `eta`: `PlanInputs.eff_on`, `eta_bw_on`), F10's all-reduce line (`ca`, `cb`, `ck`, `cc`)
    and the variant's unread lookup share (`lk`); the plan's knobs."""
    return StepModel.for_model(
        model, weights_bytes=weights_bytes, kv_request_bytes=a["kvs"],
        bandwidth_gb_s=a["bw"], tflops=a["fl"], eff=a["eff"], eta_bw=a["eta"],
        overhead_ms=fixed_step_ms(inp.step_overhead_ms, inp.layer_overhead_ms, model.layers),
        comm_fixed_ms=a["ca"], comm_per_seq_ms=a["cb"], comm_knee_seqs=a["ck"],
        comm_per_seq_above_ms=a["cc"], method=inp.step_method,
        context_tokens=float(inp.workload.context_tokens), eta_kv=inp.eta_kv,
        attn_sat_batch=inp.attn_sat_batch, seq_overhead_ms=inp.seq_overhead_ms,
        batch1_factor=inp.batch1_factor, batched_overhead_ms=inp.batched_overhead_ms,
        ridge_sharpness=inp.ridge_sharpness,
        cuda_graph_max_tokens=inp.cuda_graph_max_tokens, gemm_tile_tokens=inp.gemm_tile_tokens,
        lookup_weight_share=a["lk"], embedding_lookup=inp.embedding_lookup)


def _prefill_ms(inp: PlanInputs, model: Model, g: Gpu, tp: int, v: ModelVariant,
                pf: PrefillFlops, new_tokens: float, pp: int = 1) -> float:
    """The mean prompt's prefill on one replica of `v` on `tp` x `g` (ms): F6 by parts over
    `pf` at the plan's MFU, its fixed prefill time, and TP communication over `new_tokens`
    (and with PP its stages' hand-offs, F13)."""
    dtype = v.format.compute_dtype
    return (float(prefill_seconds_by_parts(
        pf, g.tflops_for(dtype) * tp, inp.mfu_on(g, dtype, model), inp.attn_mfu,
        inp.fixed_prefill_ms(model) / 1e3, half_tokens=inp.mfu_half_on(model),
        routing=routing_on(model, g.tflops_for(dtype), g.bandwidth_gb_s,
                           gemm_bytes_per_param(v)))) * 1e3
            + float(forward_comm_ms(model, g, tp, new_tokens, pp, inp.pp_handoff_ms)))
