"""The buyer's chart (issue 26): output tokens per second per GPU paid against interactivity
(tokens per second per user), its Pareto front, and the cost per million tokens read off it
(docs/frontier.md).

Every configuration the planner builds (`capacity.plan.units.replica_units`: GPU x TP x
weights x KV x draft, every memory, step and prefill figure the planner's own) for each variant
of `configuration_variants` (engine profile with its basis, draft), at a geometric grid of
closed-loop concurrencies per replica up to its slots. Each point is one replica under a closed
loop of C users, in the steady state of the event model derived in closed form from the same
terms (`closed_loop`, capacity.fit.frontier_loop): interactivity (1000 / mean TPOT), throughput
per GPU (output tok/s / GPUs paid) and TTFT; more replicas multiply the fleet, not the figures
per GPU. On request (issue 27) disaggregated prefill/decode points
(`capacity.fit.frontier_disagg`) and a MoE model's wide expert-parallel points
(`capacity.fit.frontier_ep`) join them, each in groups of their own kind (`DEPLOYMENTS`).

The front of a group (GPU x engine x weights x KV x draft x deployment) keeps the points that no
other point of the group beats on both axes (`pareto_mask`); `cost_read_off` interpolates a
group's front at a target interactivity and prices it with each offer kind through the
planner's F7 (`capacity.model.cost.cost_per_mtok`). Pure and vectorised over configurations.
The search space lives in capacity.fit.frontier_space and the closed loop in
capacity.fit.frontier_loop; their public names are importable from here too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.offers import bundled_of_kind
from capacity.errors import InputError
from capacity.fit.frontier_disagg import disaggregated_block
from capacity.fit.frontier_ep import StepMemo, ep_pools_blocks, wide_ep_blocks
from capacity.fit.frontier_loop import (
    SteadyState,
    StepTerms,
    chunk_extra_ms,
    closed_loop,
    service_steady_state,
    service_terms,
    step_model_terms,
)
from capacity.fit.frontier_space import (
    AGGREGATED,
    CONCURRENCY_STEP,
    CONSUMER_KEY,
    DEFAULT_ENGINES,
    DEPLOYMENTS,
    DISAGGREGATED,
    EP_POOLS,
    FALLBACK_TYPICAL,
    PRICE_KINDS,
    WIDE_EP,
    FrontierInputs,
    PointBlock,
    Variant,
    concurrency_grid,
    configuration_variants,
    datacenter_gpus,
    is_datacenter,
    plan_inputs,
)
from capacity.model.cost import Currency, cost_per_mtok
from capacity.model.pipeline import copy_layout
from capacity.model.workload import Workload
from capacity.plan import search
from capacity.plan.options import Option, PlanInputs
from capacity.plan.pricing import PriceKind
from capacity.plan.units import ReplicaUnits, replica_units
from capacity.types import BoolArray, FloatArray, IntArray

__all__ = [
    "AGGREGATED", "CONCURRENCY_STEP", "CONSUMER_KEY", "DEFAULT_ENGINES", "DEPLOYMENTS",
    "DISAGGREGATED", "EP_POOLS", "FALLBACK_TYPICAL", "PRICE_KINDS", "WIDE_EP", "CostReadOff",
    "FrontPoint", "FrontValue", "Frontier", "FrontierInputs", "Group", "PointBlock", "PointTable",
    "SteadyState", "StepTerms", "Variant", "aggregated_block", "chunk_extra_ms", "closed_loop",
    "concurrency_grid", "configuration_variants", "cost_read_off", "datacenter_gpus",
    "event_check", "front_at", "frontier", "is_datacenter", "pareto_mask",
    "plan_inputs", "planner_option", "service_steady_state", "service_terms",
    "step_model_terms", "variant_of",
]

# ---------------------------------------------------------------------------------------------
# The points, the fronts


@dataclass(frozen=True, kw_only=True)
class FrontPoint:
    """One configuration at one concurrency: a point of the chart (per replica of TP GPUs; a
    decode replica and its share of the prefill pool, disaggregated; the EP group, wide EP)."""

    gpu: str
    gpu_name: str
    engine: str
    basis: str
    draft: str | None
    weights: str
    kv_dtype: str
    tp: int
    replicas: int  # 1: a point stands for any number of replicas (figures per GPU)
    n_gpus: int
    concurrency: int
    """Users in the closed loop of one replica."""
    interactivity_tok_s_per_user: float
    throughput_tok_s_per_gpu: float
    """Output tokens per second per GPU paid."""
    ttft_ms: float
    tpot_ms: float
    prefill_share: float
    price_per_gpu_hour: float
    """The catalog's price of one GPU-hour, in `currency`."""
    currency: Currency
    cost_per_mtok: float
    """F7 at the catalog price: cost per million output tokens (whole fleet cost / output)."""
    event_ttft_ms: float | None = None
    event_tpot_ms: float | None = None
    event_throughput_tok_s_per_gpu: float | None = None
    """The event model's mean TTFT, TPOT and throughput per GPU (`frontier(events=True)`)."""
    deployment: str = AGGREGATED
    """'aggregated', 'disaggregated', 'wide-ep' or 'ep-pools' (`DEPLOYMENTS`)."""
    prefill_tp: int = 0
    """Disaggregated: the TP of a prefill replica (0 otherwise)."""
    prefill_gpus: float = 0.0
    """Disaggregated: prefill GPUs one decode replica needs (fractional; 0 otherwise)."""
    layout: str = ""
    """The deployment in words ('' for aggregated)."""

    @property
    def pp(self) -> int:
        """Pipeline stages of an aggregated point's copy of the model (F13: its GPUs over its
        TP); 1 for the other kinds."""
        return self.n_gpus // self.tp if self.deployment == AGGREGATED else 1

    @property
    def gpus_paid(self) -> float:
        """GPUs the point's output is shared by: the replica's, plus a decode replica's
        prefill GPUs (disaggregated)."""
        return self.n_gpus + self.prefill_gpus

    @property
    def label(self) -> str:
        """'1 x H100 SXM (TP=1), fp8, fp8 KV, vllm, C=64' (and the layout of a disaggregated
        or wide-EP point)."""
        one = copy_layout(self.tp, self.pp)
        par = f" ({one})" if one else ""
        draft = f", draft {self.draft}" if self.draft else ""
        lay = f", {self.layout}" if self.layout else ""
        return (f"{self.n_gpus} x {self.gpu_name}{par}, {self.weights}, {self.kv_dtype} KV, "
                f"{self.engine}{draft}{lay}, C={self.concurrency}")


@dataclass(frozen=True, kw_only=True)
class Group:
    """One line of the chart: a GPU x engine x weights x KV x draft x deployment, and its Pareto
    front (ascending interactivity, so descending throughput per GPU)."""

    gpu: str
    gpu_name: str
    engine: str
    basis: str
    draft: str | None
    weights: str
    kv_dtype: str
    front: tuple[FrontPoint, ...]
    deployment: str = AGGREGATED

    @property
    def key(self) -> str:
        """'h100-sxm/vllm/fp8/fp8' (and '/DRAFT' with a draft, '/disaggregated' or '/wide-ep'
        for those kinds)."""
        kind = None if self.deployment == AGGREGATED else self.deployment
        return "/".join(x for x in (self.gpu, self.engine, self.weights, self.kv_dtype,
                                    self.draft, kind) if x)


@dataclass(frozen=True, kw_only=True)
class PointTable:
    """Every point, as columns (index i is one point): `row(i)` makes a FrontPoint."""

    gpu: list[str]
    gpu_name: list[str]
    engine: list[str]
    basis: list[str]
    draft: list[str | None]
    weights: list[str]
    kv_dtype: list[str]
    deployment: list[str]
    layout: list[str]
    tp: IntArray
    n_gpus: IntArray
    concurrency: IntArray
    interactivity_tok_s_per_user: FloatArray
    throughput_tok_s_per_gpu: FloatArray
    ttft_ms: FloatArray
    tpot_ms: FloatArray
    prefill_share: FloatArray
    price_per_gpu_hour: FloatArray
    prefill_tp: IntArray
    prefill_gpus: FloatArray
    group: IntArray
    on_front: BoolArray
    on_gpu_front: BoolArray
    currency: Currency

    def __len__(self) -> int:
        return int(self.tp.size)

    def row(self, i: int) -> FrontPoint:
        """Point i as a FrontPoint."""
        tp, thr, price = int(self.tp[i]), float(self.throughput_tok_s_per_gpu[i]), float(
            self.price_per_gpu_hour[i])
        return FrontPoint(
            gpu=self.gpu[i], gpu_name=self.gpu_name[i], engine=self.engine[i],
            basis=self.basis[i], draft=self.draft[i], weights=self.weights[i],
            kv_dtype=self.kv_dtype[i], tp=tp, replicas=1, n_gpus=int(self.n_gpus[i]),
            concurrency=int(self.concurrency[i]),
            interactivity_tok_s_per_user=float(self.interactivity_tok_s_per_user[i]),
            throughput_tok_s_per_gpu=thr, ttft_ms=float(self.ttft_ms[i]),
            tpot_ms=float(self.tpot_ms[i]), prefill_share=float(self.prefill_share[i]),
            price_per_gpu_hour=price, currency=self.currency,
            cost_per_mtok=float(cost_per_mtok(price, 1, thr)), deployment=self.deployment[i],
            prefill_tp=int(self.prefill_tp[i]), prefill_gpus=float(self.prefill_gpus[i]),
            layout=self.layout[i])


@dataclass(frozen=True, kw_only=True)
class Frontier:
    """The chart's data: every point, each group's front, each GPU's front over its groups."""

    inputs: FrontierInputs
    model_name: str
    variants: tuple[Variant, ...]
    points: PointTable
    groups: tuple[Group, ...]
    gpu_fronts: dict[str, tuple[FrontPoint, ...]] = field(default_factory=dict)
    """GPU key -> the front over all of its groups (ascending interactivity)."""

    @property
    def evaluated(self) -> int:
        """Points evaluated (configurations x concurrencies)."""
        return len(self.points)


def pareto_mask(interactivity: npt.ArrayLike, throughput: npt.ArrayLike) -> BoolArray:
    """Which points are on the Pareto front of (interactivity, throughput), the chart's upper
    right: no other point has both >= with one > (equal points are all kept; NaN never
    is). O(n log n): sort by interactivity, then throughput, both descending; a point is
    dominated by a better throughput at a higher interactivity, or at its own."""
    x = np.asarray(interactivity, dtype=np.float64)
    y = np.asarray(throughput, dtype=np.float64)
    out = np.zeros(x.size, dtype=bool)
    ok = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    if ok.size == 0:
        return out
    order = ok[np.lexsort((-y[ok], -x[ok]))]
    xs, ys = x[order], y[order]
    pos = np.arange(xs.size)
    run_start = np.maximum.accumulate(np.where(np.r_[True, xs[1:] != xs[:-1]], pos, 0))
    best = np.maximum.accumulate(ys)
    before = np.where(run_start > 0, best[np.maximum(run_start - 1, 0)], -np.inf)
    out[order] = ~((before >= ys) | (ys[run_start] > ys))
    return out


def aggregated_block(inp: FrontierInputs, v: Variant, pinp: PlanInputs,
                     units: ReplicaUnits) -> PointBlock:
    """The aggregated points of one variant: each of the planner's replica units of its draft
    (`units`, from `replica_units(pinp)`) under a closed loop (`closed_loop`) at every
    concurrency of `concurrency_grid` up to its slots, min(C_vram, max_num_seqs)."""
    # the units of this variant's draft alone (the search adds no draft beside each)
    mine = np.asarray([(d.key if d else None) == v.draft for d in units.drafts], dtype=bool)
    slots = np.where(mine, np.minimum(units.c_vram, units.seqs), 0).astype(np.int64)
    uidx, conc = concurrency_grid(slots)
    prof = [pinp.profile_for(g.key, g.memory_gb) for g in units.gpus]
    step = units.step.select(uidx)
    ss = closed_loop(   # per replica unit: a pipeline's decode stream (F13)
        concurrency=conc, terms=step_model_terms(step), comm_at=step.comm_at_tokens,
        decode_tokens_per_seq=step.verify_tokens,
        prefill_ms=units.prefill_ms[uidx],
        prompt_tokens=units.new_tokens[uidx],   # a conversation's mean, a prefix's rest
        output_tokens=inp.output_tokens,
        budget_tokens=np.asarray([p.token_budget_tokens for p in prof], dtype=np.float64)[uidx],
        mixed=np.asarray([p.mixed for p in prof], dtype=bool)[uidx],
        ahead=units.ahead[uidx], request_latency_ms=pinp.request_latency_ms)
    tp = units.tp[uidx].astype(np.int64)
    pp = units.stages()[uidx]   # a point is a whole copy: its PP streams, TP x PP GPUs
    rows = uidx.tolist()
    n = len(rows)
    return PointBlock(
        deployment=AGGREGATED, gpu=[units.gpus[i].key for i in rows],
        gpu_name=[units.gpus[i].name for i in rows], engine=[v.engine] * n,
        basis=[v.basis] * n, draft=[v.draft] * n, weights=[units.formats[i] for i in rows],
        kv_dtype=[units.kv[i] for i in rows], layout=[""] * n, tp=tp, n_gpus=tp * pp,
        concurrency=conc.astype(np.int64) * pp,
        interactivity_tok_s_per_user=ss.interactivity_tok_s_per_user,
        throughput_tok_s_per_gpu=ss.output_tok_s / tp, ttft_ms=ss.ttft_ms, tpot_ms=ss.tpot_ms,
        prefill_share=ss.prefill_share, price_per_gpu_hour=units.price_per_hour[uidx],
        prefill_tp=np.zeros(n, dtype=np.int64), prefill_gpus=np.zeros(n))


def frontier(inp: FrontierInputs, catalog: Catalog | None = None, *,
             events: bool = False) -> Frontier:
    """Evaluate every configuration x variant x concurrency, and the fronts (module docstring);
    with `inp.disaggregated` and `inp.wide_ep` the disaggregated and wide-EP points of each
    variant without a draft too. `events`: also run the event model on every aggregated front
    point (`event_check`; seconds)."""
    cat = catalog or default_catalog()
    gpus = inp.gpus or datacenter_gpus(cat)
    variants = configuration_variants(inp, cat)
    blocks: list[PointBlock] = []
    memo: StepMemo = {}
    model_name = ""
    for v in variants:
        pinp = plan_inputs(inp, v, gpus=gpus, catalog=cat)
        # the planner's replica units (GPU x TP x weights x KV x draft: C_vram, max_num_seqs,
        # prefill, price, the F4 step), its own figures
        model, formats, units = replica_units(pinp, cat, pipelines=True)
        model_name = model.name
        blocks.append(aggregated_block(inp, v, pinp, units))
        if inp.disaggregated and v.draft is None:
            blocks.append(disaggregated_block(inp, v, pinp, model, units))
        if inp.wide_ep and v.draft is None:
            blocks += wide_ep_blocks(inp, v, pinp, formats, cat, memo)
        if inp.wide_ep and inp.disaggregated and v.draft is None:
            blocks += ep_pools_blocks(inp, v, pinp, formats, cat, memo)
    blocks = [b for b in blocks if len(b)]
    if not blocks:
        raise InputError(f"{inp.model} fits no chosen GPU at a context of {inp.context} tokens "
                         f"(TP up to {inp.max_gpus}): choose bigger GPUs or a shorter context")

    def arr(name: str) -> npt.NDArray[np.generic]:
        return np.concatenate([getattr(b, name) for b in blocks])

    def col(name: str) -> list[Any]:
        return [x for b in blocks for x in getattr(b, name)] if len(blocks) > 1 else list(
            getattr(blocks[0], name))

    gpu: list[str] = col("gpu")
    deployment = [b.deployment for b in blocks for _ in range(len(b))]
    x = arr("interactivity_tok_s_per_user").astype(np.float64)
    y = arr("throughput_tok_s_per_gpu").astype(np.float64)
    index: dict[tuple[object, ...], int] = {}
    group = np.asarray([index.setdefault(k, len(index)) for k in zip(
        gpu, col("engine"), col("weights"), col("kv_dtype"), col("draft"), deployment,
        strict=True)], dtype=np.int64)
    by_gpu = {g: i for i, g in enumerate(dict.fromkeys(gpu))}
    on_gpu = _grouped_front(np.asarray([by_gpu[g] for g in gpu]), x, y)
    table = PointTable(
        gpu=gpu, gpu_name=col("gpu_name"), engine=col("engine"), basis=col("basis"),
        draft=col("draft"), weights=col("weights"), kv_dtype=col("kv_dtype"),
        deployment=deployment, layout=col("layout"),
        tp=arr("tp").astype(np.int64), n_gpus=arr("n_gpus").astype(np.int64),
        concurrency=arr("concurrency").astype(np.int64), interactivity_tok_s_per_user=x,
        throughput_tok_s_per_gpu=y, ttft_ms=arr("ttft_ms").astype(np.float64),
        tpot_ms=arr("tpot_ms").astype(np.float64),
        prefill_share=arr("prefill_share").astype(np.float64),
        price_per_gpu_hour=arr("price_per_gpu_hour").astype(np.float64),
        prefill_tp=arr("prefill_tp").astype(np.int64),
        prefill_gpus=arr("prefill_gpus").astype(np.float64), group=group,
        on_front=_grouped_front(group, x, y), on_gpu_front=on_gpu, currency=inp.currency)
    fr = Frontier(inputs=inp, model_name=model_name, variants=variants, points=table,
                  groups=_groups(table, len(index)))
    if events:
        fr = replace(fr, groups=tuple(replace(g, front=tuple(
            event_check(fr, p, cat) if p.deployment == AGGREGATED else p for p in g.front))
            for g in fr.groups))
    rows = sorted(np.flatnonzero(on_gpu).tolist(), key=lambda i: (x[i], -y[i]))
    return replace(fr, gpu_fronts={g: tuple(table.row(i) for i in rows if gpu[i] == g)
                                   for g in by_gpu})


def _grouped_front(group: IntArray, x: FloatArray, y: FloatArray) -> BoolArray:
    """`pareto_mask` within each group."""
    out = np.zeros(x.size, dtype=bool)
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    for rows in np.split(order, bounds):
        out[rows] = pareto_mask(x[rows], y[rows])
    return out


def _groups(table: PointTable, n: int) -> tuple[Group, ...]:
    """Each group with its front points, in the order the groups were first met."""
    rows_of: list[list[int]] = [[] for _ in range(n)]
    first: list[int] = [-1] * n
    for i, g in enumerate(table.group.tolist()):
        if first[g] < 0:
            first[g] = i
    x, y = table.interactivity_tok_s_per_user, table.throughput_tok_s_per_gpu
    for i in np.flatnonzero(table.on_front).tolist():
        rows_of[int(table.group[i])].append(i)
    out = []
    for g in range(n):
        i0 = first[g]
        rows = sorted(rows_of[g], key=lambda i: (x[i], -y[i]))
        out.append(Group(gpu=table.gpu[i0], gpu_name=table.gpu_name[i0],
                         engine=table.engine[i0], basis=table.basis[i0], draft=table.draft[i0],
                         weights=table.weights[i0], kv_dtype=table.kv_dtype[i0],
                         front=tuple(table.row(i) for i in rows),
                         deployment=table.deployment[i0]))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Reading the front: throughput and cost at a chosen interactivity


@dataclass(frozen=True, kw_only=True)
class FrontValue:
    """A front read at an interactivity: the throughput per GPU there and the prefill share,
    linear between the two front points around it."""

    interactivity_tok_s_per_user: float
    throughput_tok_s_per_gpu: float
    prefill_share: float


def front_at(front: Sequence[FrontPoint], interactivity: float) -> FrontValue | None:
    """The front at `interactivity` (tok/s per user): linear between neighbouring points
    (ascending interactivity); below the front's lowest interactivity, its most productive
    point (a deployment faster than asked for); None above its highest (the front does not
    reach it)."""
    if not front or not (math.isfinite(interactivity) and interactivity > 0):
        return None
    xs = np.asarray([p.interactivity_tok_s_per_user for p in front])
    if interactivity > xs[-1]:
        return None
    ys = np.asarray([p.throughput_tok_s_per_gpu for p in front])
    ph = np.asarray([p.prefill_share for p in front])
    at = max(interactivity, float(xs[0]))
    return FrontValue(interactivity_tok_s_per_user=interactivity,
                      throughput_tok_s_per_gpu=float(np.interp(at, xs, ys)),
                      prefill_share=float(np.interp(at, xs, ph)))


@dataclass(frozen=True, kw_only=True)
class CostReadOff:
    """A group's cost per million tokens at the target interactivity, at one price kind.
    None where the front does not reach the target or the GPU has no offer of the kind.

    - `output_per_mtok`: F7 as the planner defines it, the fleet's cost per hour over the
      output tokens per hour: price per GPU-hour / (throughput per GPU x 3600) x 1e6;
    - `input_per_mtok`, `output_split_per_mtok`: the GPU-hour split by the prefill share
      (the time prefill adds), each phase's share over its own tokens;
    - `total_per_mtok`: the fleet's cost per hour over every token, input and output."""

    group: Group
    kind: str
    """'catalog' or an offer kind (on-demand, reserved-1y, spot)."""
    price_per_gpu_hour: float | None
    currency: Currency
    provider: str
    interactivity_tok_s_per_user: float
    throughput_tok_s_per_gpu: float | None
    output_per_mtok: float | None
    input_per_mtok: float | None
    output_split_per_mtok: float | None
    total_per_mtok: float | None


def cost_read_off(fr: Frontier, interactivity: float, kinds: Sequence[str] = PRICE_KINDS,
                  catalog: Catalog | None = None) -> list[CostReadOff]:
    """Every group's cost per million tokens at `interactivity`, for each price kind: the
    group's front throughput there (`front_at`) priced with the planner's rule
    (`PlanInputs.price_of`: the GPU's offer of the kind from the bundled data/offers.toml,
    converted to the chart's currency; 'catalog': the GPU catalog's price) through F7."""
    cat = catalog or default_catalog()
    inp = fr.inputs
    out: list[CostReadOff] = []
    n_in, n_out = float(inp.prompt_tokens), float(inp.output_tokens)
    for kind in kinds:
        if kind not in PRICE_KINDS:
            raise InputError(f"price kind '{kind}' is not one of {', '.join(PRICE_KINDS)}")
        offer_kind = "" if kind == "catalog" else kind
        pinp = PlanInputs(model=inp.model, workload=Workload(rate_per_s=1.0),
                          currency=inp.currency, cny_per_usd=inp.cny_per_usd,
                          offers=bundled_of_kind(cat, offer_kind), offer_kind=offer_kind)
        for g in fr.groups:
            price = pinp.price_of(cat.gpu(g.gpu))
            missing = bool(offer_kind) and price.kind == PriceKind.CATALOG
            at = front_at(g.front, interactivity)
            per_h = None if missing else price.per_gpu_hour
            if at is None or per_h is None:
                out.append(CostReadOff(
                    group=g, kind=kind, price_per_gpu_hour=per_h, currency=inp.currency,
                    provider="", interactivity_tok_s_per_user=interactivity,
                    throughput_tok_s_per_gpu=None if at is None else at.throughput_tok_s_per_gpu,
                    output_per_mtok=None, input_per_mtok=None, output_split_per_mtok=None,
                    total_per_mtok=None))
                continue
            thr, share = at.throughput_tok_s_per_gpu, at.prefill_share
            out.append(CostReadOff(
                group=g, kind=kind, price_per_gpu_hour=per_h, currency=inp.currency,
                provider=price.offer.provider if price.offer else "",
                interactivity_tok_s_per_user=interactivity, throughput_tok_s_per_gpu=thr,
                output_per_mtok=float(cost_per_mtok(per_h, 1, thr)),
                input_per_mtok=float(cost_per_mtok(per_h * share, 1, thr * n_in / n_out)),
                output_split_per_mtok=float(cost_per_mtok(per_h * (1.0 - share), 1, thr)),
                total_per_mtok=float(cost_per_mtok(per_h, 1, thr * (n_in + n_out) / n_out))))
    return out


# ---------------------------------------------------------------------------------------------
# A point through the planner's own path, and the event model


def variant_of(fr: Frontier, p: FrontPoint) -> Variant:
    """The variant a point was evaluated with."""
    return next(v for v in fr.variants if (v.engine, v.draft) == (p.engine, p.draft))


def planner_option(fr: Frontier, p: FrontPoint, catalog: Catalog | None = None) -> Option:
    """The planner's Option for a point's configuration (one replica of TP GPUs) at the
    point's load, the arrival rate its closed loop sustains (C / T): `plan` with that rate and
    no headroom, so its `cost_per_mtok_design` is F7 at the point's output tokens per hour."""
    cat = catalog or default_catalog()
    rate = p.throughput_tok_s_per_gpu * p.n_gpus / fr.inputs.output_tokens
    pinp = replace(plan_inputs(fr.inputs, variant_of(fr, p), gpus=(p.gpu,), rate_per_s=rate,
                               catalog=cat), formats=(p.weights,), kv_dtypes=(p.kv_dtype,))
    options = search.plan(pinp, cat, keep_all=True, only=(p.n_gpus, p.tp, p.pp)).all_options
    return next(o for o in options if (o.weights, o.kv_dtype, o.draft or None)
                == (p.weights, p.kv_dtype, p.draft))


def event_check(fr: Frontier, p: FrontPoint, catalog: Catalog | None = None) -> FrontPoint:
    """`p` with the event model's mean TTFT, TPOT and throughput per GPU: the planner's
    replica (`detail.option_service`: the engine profile's scheduling, KV held at its mean
    context) in the steady closed loop of `p.concurrency` users every surface shows
    (`capacity.plan.closed_loop.closed_loop`, clients out of step); its throughput the
    loop's own, C n / mean E2E (`capacity.plan.events.steady_span_s`)."""
    from capacity.plan.closed_loop import closed_loop as event_closed_loop
    from capacity.plan.detail import option_service

    pinp = plan_inputs(fr.inputs, variant_of(fr, p), gpus=(p.gpu,), catalog=catalog)
    svc = option_service(pinp, planner_option(fr, p, catalog), catalog)
    c, n = min(p.concurrency // p.pp, svc.slots), svc.output_tokens   # a stream's users
    q = event_closed_loop(svc, concurrency=c)
    return replace(p, event_ttft_ms=q.mean_ttft_ms,
                   event_tpot_ms=(q.mean_e2e_ms - q.mean_ttft_ms) / (n - 1),
                   event_throughput_tok_s_per_gpu=q.output_tok_s / p.tp)
