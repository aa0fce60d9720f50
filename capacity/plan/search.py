"""The planner: from daily users and SLOs to ranked GPU options (F7-F10 (docs/method.md), section 6).

Search: every catalog GPU (or a subset) x GPU count 1..16 x tensor-parallel size (replicas =
GPUs / TP; a node's TP group chained over nodes as pipeline stages for a model no node holds,
F13) x KV precision x weight format of the chosen model x speculative-decoding draft
(none, and each of `PlanInputs.drafts`: F12, the draft's weights and KV in the memory check,
its verify pass and draft passes in the step, with `Scenario`'s definitions). A
configuration is kept when

- memory: the weights fit and the design concurrency per replica fits the KV slots
  (`C_vram`, F3) and `max_num_seqs`;
- SLO: the TTFT percentile and TPOT at the peak with headroom meet the targets (queueing,
  section 6, analytic path), and the load does not saturate the GPU.

Kept options are ranked by cost per month, then cost per million output tokens at the option's
SLO-feasible capacity (the highest arrival rate that still meets every SLO). Every GPU family
with no feasible configuration gets the reason of its closest configuration (memory, TTFT,
TPOT, throughput: the one that fails the fewest checks, then misses them by the least, as
`Option.miss_ratio` measures it), and configurations that miss on memory alone get the chapter's fixes
(more GPUs, FP8 KV, a shorter context). The search is vectorized over configurations;
`simulate_option` runs the discrete-event model for the chosen one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.nodes import NodeShape, node_shape
from capacity.errors import CapacityError
from capacity.model.cost import HOURS_PER_MONTH, cost_per_mtok
from capacity.model.fixes import suggest_fixes
from capacity.model.memory import (
    MemoryVerdict,
    memory_verdict,
)
from capacity.model.roofline import StepModel
from capacity.model.speculative import Draft
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
from capacity.plan.rate_search import Prompts, bisect_levels, chunking, rows_of, slo_capacity
from capacity.plan.units import ReplicaUnits, replica_units
from capacity.stats import gamma_quantile, gamma_quantile_at_most
from capacity.types import BoolArray, FloatArray, IntArray


def _load(*, step: StepModel, prefill_ms: FloatArray, wl: Workload, slo: Slo,
          rate: FloatArray | None, conc: FloatArray | None, limit: FloatArray,
          budget: FloatArray, prompts: Prompts, slots: FloatArray, ahead: FloatArray,
          tpot_quantile: bool = True) -> AnalyticLatency:
    """Analytic behaviour of one replica at an arrival rate, or at a closed-loop concurrency
    (then the rate that sustains it, lambda = C / duration, found by bisection). `budget`: the
    engine's mixed-step token budget per configuration (0 = none). `tpot_quantile` False:
    without the TPOT percentile (`analytic_latency`). `prompts`: what the configurations'
    requests prefill (`rate_search.Prompts`). `slots`: min(C_vram, max_num_seqs), the slot
    queue's servers (`queueing.slot_wait`: the requests arrive at random at that rate)."""
    ch: Any = chunking(budget, prompts, ahead)
    if rate is not None:
        return analytic_latency(rate_per_s=rate, step=step, prefill_ms=prefill_ms,
                                output_tokens=wl.output_tokens, quantile=slo.quantile,
                                limit=limit, tpot_quantile=tpot_quantile, slots=slots, **ch)
    assert conc is not None
    zero = np.zeros_like(conc)
    # the bisection reads the duration alone: no TTFT or TPOT percentile until the last call
    base = analytic_latency(rate_per_s=zero, step=step, prefill_ms=prefill_ms,
                            output_tokens=wl.output_tokens, quantile=slo.quantile,
                            concurrency=conc, tpot_quantile=False, ttft_quantile=False, **ch)

    def below(rates: list[FloatArray]) -> BoolArray:
        k = len(rates)
        tiled = np.tile(np.arange(conc.size), k)
        mid = np.concatenate(rates)
        r = analytic_latency(rate_per_s=mid, step=step.select(tiled),
                             prefill_ms=prefill_ms[tiled], output_tokens=wl.output_tokens,
                             quantile=slo.quantile, concurrency=conc[tiled],
                             tpot_quantile=False, ttft_quantile=False, **rows_of(ch, tiled))
        return np.asarray(~(mid * r.duration_s >= conc[tiled])).reshape(k, conc.size)
    lo = bisect_levels(zero, conc / base.duration_s, LOAD_STEPS, below)
    return analytic_latency(rate_per_s=lo, step=step, prefill_ms=prefill_ms,
                            output_tokens=wl.output_tokens, quantile=slo.quantile,
                            concurrency=conc, tpot_quantile=tpot_quantile, slots=slots, **ch)


LOAD_STEPS = 30
"""Bisection steps on the rate that sustains a closed loop's concurrency."""


def plan(inp: PlanInputs, catalog: Catalog | None = None, *, keep_all: bool = False,
         checks_only: bool = False, only: tuple[int, ...] | None = None) -> Plan:
    """Search, check and rank every configuration (see the module docstring).

    `keep_all` also returns every evaluated configuration (feasible or not) in `all_options`.
    `checks_only` skips the SLO-feasible capacity where no check needs it (no cost target):
    the feasibility and the design-load figures stay, the capacity and the cost per M tokens
    at it are NaN (for callers that ask only "does it pass?").
    `only` = (GPUs, TP) or (GPUs, TP, PP) evaluates the deployments of that many GPUs at that
    TP (and PP, else 1) alone (each configuration's figures are its own, whatever is searched
    beside it: `deployment.assess`), without the rejections and near misses of the others.
    Besides every TP inside a node, the search chains a node's TP group over nodes as pipeline
    stages where that group cannot hold the model and one request (F13,
    `units.pipeline_layouts`).
    """
    cat = catalog or default_catalog()
    wl, slo = inp.workload, inp.slo
    lat = inp.request_latency_ms   # outside the GPU: on every TTFT, off the engine's target
    model, _, u = replica_units(inp, cat, None if only is None else only[1], pipelines=True,
                                pp_only=None if only is None else (*only, 1)[2])
    # expand replica units into deployments: n = replicas x tp <= max_gpus, a PP copy's
    # decode streams whole (replicas a multiple of PP: F13)
    stages = u.stages()
    idx_l: list[int] = []
    rep_l: list[int] = []
    for i, (tp, pp) in enumerate(zip(u.tp.tolist(), stages.tolist(), strict=True)):
        for r in range(pp, inp.max_gpus // tp + 1, pp):
            if only is not None and only[:2] != (r * tp, tp):
                continue
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
    load = partial(_load, step=step, prefill_ms=pre, wl=wl, slo=slo, limit=lim, budget=bud,
                   prompts=u.prompts.rows(idx), slots=slots, ahead=u.ahead[idx])
    if peak_rate is not None:
        # the peak's own percentiles are not read unless it is the design load; the design
        # load's TPOT percentile, only where every option is kept (else below, where one is)
        peak = load(rate=peak_rate / reps, conc=None, tpot_quantile=h == 1.0 and keep_all)
        design = peak if h == 1.0 else load(  # no headroom: the design load is the peak
            rate=peak_rate * h / reps, conc=None, tpot_quantile=keep_all)
        design_c = np.maximum(design.concurrency, peak.concurrency * h)
    else:
        assert wl.peak_concurrency is not None
        c_rep = wl.peak_concurrency / reps
        peak = load(rate=None, conc=np.ceil(c_rep - 1e-9), tpot_quantile=h == 1.0 and keep_all)
        design_c = np.ceil(c_rep * h - 1e-9)
        design = peak if h == 1.0 else load(rate=None, conc=design_c, tpot_quantile=keep_all)
    # capacity is per replica unit: compute once per unit, then scale by replicas
    cap_unit = (np.full(u.prefill_ms.shape, np.nan) if checks_only and slo.cost_per_mtok <= 0
                else slo_capacity(step=u.step, prefill_ms=u.prefill_ms,
                                  slots=np.minimum(u.c_vram, u.seqs).astype(np.float64),
                                  wl=wl, slo=slo.at_engine(lat), budget=u.budget,
                                  prompts=u.prompts, ahead=u.ahead))
    cap = cap_unit[idx] * reps
    price = u.price_per_hour[idx]
    # N+1: one idle copy of the model (TP x PP GPUs) per deployment, paid for, not serving
    spare = u.tp[idx] * stages[idx] if inp.spare else np.zeros_like(n)
    # whole-node pricing: with a per-node offer, serving + spare GPUs round up to whole nodes
    node = u.node_gpus[idx]
    billed = np.where(node > 0, np.ceil((n + spare) / np.maximum(node, 1)) * node, n + spare)
    month = price * billed * HOURS_PER_MONTH
    mem_c = np.ceil(design_c - 1e-9)
    # a saturated load's concurrency grows without bound: that is the throughput check's
    # failure, not memory's or the slots' (as TTFT and TPOT below), or every saturated option
    # would read "the weights and KV never fit" on any number of GPUs
    fails_memory = (c_vram < 1) | (~design.saturated & (mem_c > c_vram))
    fails_slots = ~fails_memory & ~design.saturated & (mem_c > seqs)
    # prefill alone over the SLO is a TTFT failure at any load, saturated or not
    ttft_q, ttft_mean = design.ttft_q_ms + lat, design.ttft_mean_ms + lat
    fails_ttft = (~design.saturated & (ttft_q > slo.ttft_ms)) | (pre + lat > slo.ttft_ms)
    tpot_q = design.tpot_q_ms
    if keep_all:
        fails_tpot = ~design.saturated & (tpot_q > slo.tpot_ms)
    else:  # the same answer without the percentile (`gamma_quantile_at_most`; a NaN mean's
        # percentile is NaN, never over); the percentile itself below, where an option is kept
        live = np.flatnonzero(~design.saturated & ~np.isnan(design.decode_mean_ms))
        fails_tpot = np.zeros(idx.size, dtype=bool)
        fails_tpot[live] = ~gamma_quantile_at_most(
            design.decode_mean_ms[live], design.decode_var_ms2[live], slo.quantile,
            slo.tpot_ms, divisor=max(wl.output_tokens - 1, 1))
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
    if not keep_all:  # the TPOT percentile where an option is kept (no check fails), as
        # analytic_latency computes it; the rejected ones keep no figures
        kept = np.flatnonzero(~(fails_memory | fails_slots | fails_ttft | fails_tpot | fails_thr
                                | fails_cost))
        tpot_q = np.where(design.saturated, np.inf, np.nan)
        tpot_q[kept] = gamma_quantile(design.decode_mean_ms[kept], design.decode_var_ms2[kept],
                                      slo.quantile) / max(wl.output_tokens - 1, 1)
    # a target so small that a ratio overflows (a cost SLO of 1e-320) reads inf, as 1 / 0 does:
    # the check is failed by more than any number says, and `bind_i` treats it as the largest
    with np.errstate(divide="ignore", over="ignore"):
        ratios = np.stack([
            np.where(slots > 0, mem_c / np.maximum(slots, 1), np.inf),
            ttft_q / slo.ttft_ms, tpot_q / slo.tpot_ms,
            design.utilization,
            cpm_cap / cost_target if cost_target > 0 else np.zeros(idx.size)])
    names = (Reason.MEMORY, Reason.TTFT, Reason.TPOT, Reason.THROUGHPUT, Reason.COST)
    bind_i = np.argmax(np.where(np.isfinite(ratios), ratios, 1e300), axis=0)
    # each row's failed checks as one code (bit k: check k failed), its tuple of reasons built
    # below once per distinct code (a few dozen), not once per row
    codes = failure_codes(fails_memory, fails_slots, fails_ttft, fails_tpot, fails_thr,
                          fails_cost)
    # each row's figures as Python numbers, converted once per array (not per row and field)
    row = {k: v.tolist() for k, v in (
        ("code", codes), ("idx", idx), ("n", n), ("month", month), ("c_vram", c_vram), ("slots", slots),
        ("rate_peak", peak_rate_total), ("rate_design", design.rate_per_s * reps),
        ("c_peak", peak.concurrency * reps), ("c_design", design_c * reps),
        ("ttft", ttft_q), ("ttft_mean", ttft_mean),
        ("tpot", tpot_q), ("tpot_mean", design.tpot_ms), ("pre", pre),
        ("util", design.utilization), ("verdict", verdict), ("price", price), ("cap", cap),
        ("spare", spare), ("node", node), ("billed", billed), ("cpm_cap", cpm_cap),
        ("cpm_design", cpm_design), ("bind", bind_i),
        ("bind_ratio", ratios[bind_i, np.arange(idx.size)]))}
    unit = {k: v.tolist() for k, v in (("tp", u.tp), ("pp", stages), ("w", u.weights_gb),
                                        ("cv", u.c_vram), ("pre", u.prefill_ms),
                                        ("price", u.price_per_hour))}
    # of a GPU with no feasible configuration: how far each misses its checks (`_rejections`)
    miss = (np.full(idx.size, np.nan) if only is not None else _miss_ratios(
        u, idx, codes, inp, design=design, pre=pre, mem_c=mem_c, c_vram=c_vram, seqs=seqs,
        ttft_q=ttft_q, tpot_q=tpot_q, cap=cap, reps=reps, cpm_cap=cpm_cap)).tolist()
    failures = {c: failures_of(c) for c in set(row["code"])}  # (np.unique loads numpy.ma)
    options: list[Option] = []
    lite: dict[int, Option] = {}  # each unit's rejected option, copied per deployment
    for j in range(idx.size):
        i = row["idx"][j]
        fails = failures[row["code"][j]]
        if not keep_all and fails:
            if i not in lite:
                lite[i] = _lite(u, unit, i, int(row["n"][j]), fails, row["month"][j])
            options.append(_amended(lite[i], n_gpus=int(row["n"][j]), failures=fails,
                                    binding=fails[0], cost_per_month=row["month"][j],
                                    capacity_rate_per_s=row["cap"][j],
                                    design_rate_per_s=row["rate_design"][j],
                                    miss_ratio=miss[j]))
            continue
        options.append(Option(
            gpu=u.gpus[i].key, gpu_name=u.gpus[i].name, n_gpus=int(row["n"][j]),
            tp=unit["tp"][i], pp=unit["pp"][i], weights=u.formats[i], kv_dtype=u.kv[i],
            weights_gb=unit["w"][i], c_vram_per_replica=int(row["c_vram"][j]),
            slots_per_replica=int(row["slots"][j]), peak_rate_per_s=row["rate_peak"][j],
            design_rate_per_s=row["rate_design"][j], peak_concurrency=row["c_peak"][j],
            design_concurrency=row["c_design"][j],
            ttft_ms=row["ttft"][j], ttft_mean_ms=row["ttft_mean"][j],
            tpot_ms=row["tpot"][j], tpot_mean_ms=row["tpot_mean"][j],
            prefill_ms=row["pre"][j], utilization=row["util"][j],
            memory_verdict=MemoryVerdict(str(row["verdict"][j])),
            price_per_hour=row["price"][j], currency=inp.currency,
            cost_per_month=row["month"][j], capacity_rate_per_s=row["cap"][j],
            spare_gpus=int(row["spare"][j]), node_gpus=int(row["node"][j]),
            billed_gpus=int(row["billed"][j]),
            cost_per_mtok=row["cpm_cap"][j], cost_per_mtok_design=row["cpm_design"][j],
            failures=fails, binding=names[row["bind"][j]],
            binding_ratio=row["bind_ratio"][j], miss_ratio=miss[j],
            **_draft_fields(u.drafts[i]),
        ))
    ranked = sorted((o for o in options if o.feasible), key=_rank_key)
    feasible = _fold_twins(ranked)
    rejected = ([] if only is not None
                else _rejections(options, feasible, list(dict.fromkeys(g.key for g in u.gpus)),
                                 slo, lat))
    near = [] if only is not None else _near_misses(inp, cat, options, feasible)
    return Plan(inputs=inp, model_name=model.name, options=tuple(feasible),
                configurations=tuple(ranked),
                rejected=tuple(rejected), near_misses=tuple(near), evaluated=int(idx.size),
                peak_rate_per_s=peak_rate,
                all_options=tuple(options) if keep_all else ())


CHECKS: tuple[Reason, ...] = (Reason.MEMORY, Reason.SLOTS, Reason.TTFT, Reason.TPOT,
                              Reason.THROUGHPUT, Reason.COST)
"""The planner's checks in the order a configuration's failures list them (bit k of a
`failure_codes` code is check k)."""


def failure_codes(*fails: BoolArray) -> IntArray:
    """Each configuration's failed checks as one integer: bit k set where `fails[k]` is
    (`CHECKS` order; 0 = every check passes)."""
    codes = np.zeros(np.shape(fails[0]), dtype=np.int64)
    for k, f in enumerate(fails):
        codes |= np.asarray(f, dtype=np.int64) << k
    return codes


def failures_of(code: int) -> tuple[Reason, ...]:
    """The checks a `failure_codes` code says failed, in `CHECKS` order."""
    return tuple(r for k, r in enumerate(CHECKS) if code >> k & 1)


def _fold_twins(ranked: Sequence[Option]) -> list[Option]:
    """One row per deployment: options on the same GPU with the same count and TP (so the same
    cost per month) that differ only in weight format or KV precision collapse into the
    best-ranked one (lowest cost per M tokens, then most headroom by the rank key), which names
    the others in `variants`; each kept row gets its node layout. With whole-node pricing, the
    same GPU and TP on the same paid nodes is one deployment too: fewer GPUs used in the same
    nodes cost as much and serve less, so the best-ranked count stands for them. A draft is a
    way to run the same deployment: the best-ranked draft (or none) heads the row, and
    `variants` names only the format and KV twins that run that same draft."""
    groups: dict[tuple[str, int, int, int], list[Option]] = {}
    for o in ranked:
        groups.setdefault((o.gpu, o.paid_gpus if o.node_gpus else o.n_gpus, o.tp, o.pp),
                          []).append(o)
    out = []
    shapes: dict[str, NodeShape] = {}  # each GPU's node shape, looked up once
    for o in ranked:
        twins = groups[(o.gpu, o.paid_gpus if o.node_gpus else o.n_gpus, o.tp, o.pp)]
        if twins[0] is not o:
            continue
        if not o.node_gpus and o.gpu not in shapes:
            shapes[o.gpu] = node_shape(o.gpu)
        # a twin with another draft is the same deployment run otherwise, not a format or
        # KV twin of this row: the row names its own draft, the twins of that draft
        out.append(_amended(o, nodes=node_layout(o, shapes.get(o.gpu)), variants=tuple(
            (x.weights, x.kv_dtype) for x in twins[1:]
            if x.n_gpus == o.n_gpus and x.draft == o.draft)))
    return out


def _amended(o: Option, **changes: object) -> Option:
    """`dataclasses.replace(o, **changes)` for fields that need no check (Option has none):
    a copy of its fields with these changed, without running the generated __init__ again
    (a frozen dataclass sets each of its ~40 fields through object.__setattr__; a search
    folds hundreds of options)."""
    new = object.__new__(Option)
    new.__dict__.update(o.__dict__)
    new.__dict__.update(changes)
    return new


def node_layout(o: Option, shape: NodeShape | None = None) -> tuple[int, ...]:
    """GPUs per node of an option, the spare included (`NodeShape.layout`: each TP group in
    one node), or whole nodes of a per-node offer. `shape`: the GPU's node shape when the
    caller has it (else `node_shape` looks it up)."""
    if o.node_gpus:
        return (o.node_gpus,) * (o.paid_gpus // o.node_gpus)
    return (shape or node_shape(o.gpu)).layout(o.n_gpus + o.spare_gpus, o.tp)


def _lite(u: ReplicaUnits, unit: dict[str, list[Any]], i: int, n: int, fails: tuple[Reason, ...],
          month: float) -> Option:
    """A rejected configuration, without the numbers only kept options need (`unit`: the
    units' arrays as lists)."""
    nan = math.nan
    return Option(
        gpu=u.gpus[i].key, gpu_name=u.gpus[i].name, n_gpus=n, tp=unit["tp"][i],
        pp=unit["pp"][i], weights=u.formats[i], kv_dtype=u.kv[i], weights_gb=unit["w"][i],
        c_vram_per_replica=unit["cv"][i], slots_per_replica=0, peak_rate_per_s=nan,
        design_rate_per_s=nan, peak_concurrency=nan, design_concurrency=nan, ttft_ms=nan,
        ttft_mean_ms=nan, tpot_ms=nan, tpot_mean_ms=nan, prefill_ms=unit["pre"][i],
        utilization=nan,
        memory_verdict=None, price_per_hour=unit["price"][i], currency="CNY",
        cost_per_month=month, capacity_rate_per_s=nan, cost_per_mtok=nan, failures=fails,
        binding=fails[0], binding_ratio=nan, **_draft_fields(u.drafts[i]))


def _draft_fields(d: Draft | None) -> dict[str, Any]:
    """An option's draft fields: its key, tau and tau's source (none: '', 1, '')."""
    if d is None:
        return {}
    return {"draft": d.key, "draft_acceptance_length": d.acceptance_length,
            "draft_source": d.source}


def _rank_key(o: Option) -> tuple[float, float, int, int, int, str, str, str, str]:
    """Cost per month, then cost per M tokens at SLO capacity, then the configuration (no
    draft before a draft, no pipeline before one, at equal figures)."""
    return (round(o.cost_per_month, 6), o.cost_per_mtok, o.n_gpus, o.pp, o.tp, o.gpu,
            o.weights, o.kv_dtype, o.draft)


def _miss_ratios(u: ReplicaUnits, idx: IntArray, codes: IntArray, inp: PlanInputs, *,
                 design: AnalyticLatency, pre: FloatArray, mem_c: FloatArray,
                 c_vram: FloatArray, seqs: FloatArray, ttft_q: FloatArray, tpot_q: FloatArray,
                 cap: FloatArray, reps: FloatArray, cpm_cap: FloatArray) -> FloatArray:
    """How far each configuration of a GPU with no feasible one is from passing its checks
    (`Option.miss_ratio`): the largest of its failed checks' figures over their limits, each
    check's own (>= 1; inf where nothing it could be changed to passes); NaN for the rest
    and for those that fail more checks (or throughput or memory among as many) than its
    GPU's nearest: they cannot be its closest.

    - memory: the design concurrency per replica over C_vram; slots: over max_num_seqs;
    - TTFT: the percentile over the SLO, or where the load saturates (no percentile) the
      prefill alone and the time outside the GPU, the part of TTFT no load takes away;
    - TPOT: the percentile over the SLO;
    - throughput: the design load over the most the configuration carries within the SLOs
      (its SLO-feasible capacity: 1 / the share of the load it carries, as `alternatives`
      reads it), or, where its prefill alone misses the TTFT SLO at any load, the most it
      carries within the other SLOs (TTFT left out: the share it would carry once its prefill
      met the SLO);
    - cost: the cost per M tokens at SLO capacity over the target."""
    wl, slo, lat = inp.workload, inp.slo, inp.request_latency_ms
    miss = np.full(idx.size, np.nan)
    number: dict[str, int] = {}
    for g in u.gpus:
        number.setdefault(g.key, len(number))
    gpu = np.asarray([number[g.key] for g in u.gpus], dtype=np.int64)[idx]  # each row's GPU
    feasible = np.zeros(len(number), dtype=bool)
    feasible[gpu[codes == 0]] = True
    # the closest comes from the rows of its GPU's first class (`_nearness`): the fewest
    # failed checks, throughput and memory last among as many
    n_failed = sum((codes >> k & 1) for k in range(len(CHECKS)))
    order = (n_failed * 4 + (codes >> CHECKS.index(Reason.THROUGHPUT) & 1) * 2
             + (codes >> CHECKS.index(Reason.MEMORY) & 1))
    first = np.full(len(number), np.iinfo(np.int64).max)
    np.minimum.at(first, gpu, order)
    lost = np.flatnonzero(~feasible[gpu] & (order == first[gpu]))
    if lost.size == 0:
        return miss
    fails = [(codes[lost] >> k & 1).astype(bool) for k in range(len(CHECKS))]
    ratio: dict[Reason, FloatArray] = {}
    sat = design.saturated[lost]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio[Reason.MEMORY] = np.where(c_vram[lost] >= 1, mem_c[lost] / c_vram[lost], np.inf)
        ratio[Reason.SLOTS] = mem_c[lost] / seqs[lost]
        ratio[Reason.TTFT] = np.where(sat, pre[lost] + lat, ttft_q[lost]) / slo.ttft_ms
        tpot = tpot_q[lost].copy()
        redo = np.flatnonzero(fails[CHECKS.index(Reason.TPOT)] & np.isnan(tpot))
        tpot[redo] = gamma_quantile(  # the percentile a lean search skips for the rejected
            design.decode_mean_ms[lost[redo]], design.decode_var_ms2[lost[redo]],
            slo.quantile) / max(wl.output_tokens - 1, 1)
        ratio[Reason.TPOT] = tpot / slo.tpot_ms
        carried = cap[lost].copy()
        # prefill alone over the TTFT SLO: the capacity within the other SLOs
        slow = np.flatnonzero(fails[CHECKS.index(Reason.THROUGHPUT)]
                              & (pre[lost] + lat > slo.ttft_ms))
        if slow.size:
            units = np.unique(idx[lost[slow]])
            relaxed = slo_capacity(
                step=u.step.select(units), prefill_ms=u.prefill_ms[units],
                slots=np.minimum(u.c_vram[units], u.seqs[units]).astype(np.float64), wl=wl,
                slo=replace(slo, ttft_ms=math.inf), budget=u.budget[units],
                prompts=u.prompts.rows(units), ahead=u.ahead[units])
            carried[slow] = relaxed[np.searchsorted(units, idx[lost[slow]])] * reps[lost[slow]]
        design_rate = design.rate_per_s[lost] * reps[lost]
        ratio[Reason.THROUGHPUT] = np.where(carried > 0, design_rate / carried, np.inf)
        ratio[Reason.COST] = (cpm_cap[lost] / slo.cost_per_mtok if slo.cost_per_mtok > 0
                              else np.full(lost.size, np.nan))
    worst = np.zeros(lost.size)
    for k, r in enumerate(CHECKS):
        value = np.where(np.isnan(ratio[r]), np.inf, ratio[r])
        worst = np.where(fails[k], np.maximum(worst, value), worst)
    miss[lost] = worst
    return miss


def _nearness(o: Option) -> tuple[int, bool, bool, float, float]:
    """How near a configuration of a GPU with no feasible one comes to passing, smallest
    first: the fewest failed checks (one the load fails at any size, throughput, or memory,
    last among as many), then the smallest `miss_ratio` (how far it misses the worst of
    them: of configurations that fail on throughput alone, the one that carries the most of
    the load; with TTFT beside it, the one whose prefill and share of the load come nearest),
    then the cheapest."""
    miss = o.miss_ratio if not math.isnan(o.miss_ratio) else math.inf
    return (len(o.failures), Reason.THROUGHPUT in o.failures, Reason.MEMORY in o.failures,
            miss, o.cost_per_month)


def _rejections(options: Sequence[Option], feasible: Sequence[Option], gpu_keys: list[str],
                slo: Slo, latency_ms: float = 0.0) -> list[Rejection]:
    ok = {o.gpu for o in feasible}
    out = []
    for key in gpu_keys:
        if key in ok:
            continue
        mine = [o for o in options if o.gpu == key]
        if not mine:
            continue
        closest = min(mine, key=_nearness)
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
                       f"; prefill takes {pre_s:.2f} s and the request {latency_ms:g} ms outside "
                       f"the GPU (SLO {slo_s:g} s)"
                       if closest.prefill_ms + latency_ms > slo.ttft_ms else
                       f"; prefill takes {pre_s:.2f} s, and waiting behind other prompts at "
                       f"the peak pushes p{slo.quantile * 100:g} TTFT past {slo_s:g} s")
        out.append(Rejection(gpu=key, gpu_name=closest.gpu_name,
                             reasons=tuple(f for f in every if f in closest.failures),
                             detail=detail, closest=closest, never_fits=not fits_somewhere,
                             most_gpus=max(o.n_gpus for o in mine), latency_ms=latency_ms))
    return out


def _near_misses(inp: PlanInputs, cat: Catalog, options: Sequence[Option],
                 feasible: Sequence[Option], limit: int = 3) -> list[NearMiss]:
    """Cheapest configurations that fail on memory alone and are cheaper than the best option,
    with `suggest_fixes` (more GPUs, FP8 KV, a shorter context, fewer requests)."""
    best = feasible[0].cost_per_month if feasible else math.inf
    cands = sorted((o for o in options if o.failures == (Reason.MEMORY,)
                    and o.cost_per_month <= best), key=_rank_key)
    out: list[NearMiss] = []
    seen: set[tuple[str, int, int, int]] = set()
    for o in cands:
        k = (o.gpu, o.n_gpus, o.tp, o.pp)
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
