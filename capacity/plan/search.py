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
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from capacity.catalog.loader import Catalog, Gpu, Model, ModelVariant, default_catalog
from capacity.catalog.nodes import node_shape
from capacity.errors import CapacityError, InputError
from capacity.model.cost import HOURS_PER_MONTH, cost_per_mtok
from capacity.model.kv import DEFAULT_BLOCK_SIZE, kv_request_bytes
from capacity.model.memory import (
    MemoryVerdict,
    max_concurrency,
    memory_verdict,
    vram_budget,
)
from capacity.model.parallel import DEFAULT_NCCL_GB, check_tp, tp_comm_ms
from capacity.model.prefill import PrefillFlops, prefill_flops, prefill_seconds_by_parts
from capacity.model.roofline import (
    StepModel,
    comm_coefficients_ms,
    counts_as_engines,
)
from capacity.model.scenario import (
    context_limit_note,
    suggest_fixes,
)
from capacity.model.workload import Workload
from capacity.plan.detail import design_concurrency_total, option_scenario
from capacity.plan.options import (
    REASON_TEXT,
    REASONS,
    NearMiss,
    Option,
    Plan,
    PlanInputs,
    Reason,
    Rejection,
    Slo,
)
from capacity.plan.queueing import AnalyticLatency, analytic_latency
from capacity.types import BoolArray, FloatArray, IntArray
from capacity.units import GB

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
