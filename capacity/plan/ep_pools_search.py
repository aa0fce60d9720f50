"""The EP-pools search (docs/expert-parallel.md, "Prefill and decode on separate EP pools"):
every GPU with node data and every EP size a user buys (`ep_search.ep_sizes`), the prefill
layout with the least time per prompt and the decode layout (also the overlap) with the most
capacity within the TPOT target (`ep_pools.prefill_shape`, `decode_shape`), every pair of sizes
sized (`ep_pools.size_pools`); the cheapest option per GPU and pair of sizes, cheapest first
(`ep_pools_search`). `compare_pools` ranks the cheapest against wide EP serving both phases
(`ep_search.ep_search`) and says why; `evaluate_pools` gives one layout a person chose at a
rate (`capacity plan --prefill-pool XxEPn --decode-pool YxEPm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from capacity.catalog.loader import Catalog, Model, default_catalog
from capacity.catalog.nodes import node_shapes
from capacity.errors import InputError
from capacity.model.workload import single_requests
from capacity.plan.disagg import design_rate_per_s
from capacity.plan.ep_pools import (
    DecodeShape,
    EpPoolsOption,
    PrefillShape,
    decode_shape,
    pools_at,
    prefill_shape,
    size_pools,
)
from capacity.plan.ep_search import EpRejection, EpSearch, basis_of, ep_rejection, ep_sizes
from capacity.plan.options import PlanInputs
from capacity.types import Note


@dataclass(frozen=True, kw_only=True)
class EpPoolsSearch:
    """The EP-pools options of a set of planner inputs, cheapest first, and the GPUs without."""

    inputs: PlanInputs
    options: tuple[EpPoolsOption, ...]
    rejected: tuple[EpRejection, ...]
    design_rate_per_s: float
    max_gpus: int
    """The most GPUs (both pools and the spare) an option may use."""
    evaluated: int
    """Pairs of prefill and decode sizes sized (GPU x weights x KV x EP_p x EP_d)."""

    @property
    def best(self) -> EpPoolsOption | None:
        return self.options[0] if self.options else None


def _rank(o: EpPoolsOption) -> tuple[float, float, float, int, str]:
    """Cheapest per month, then per M tokens at capacity, then the lower TTFT, fewer GPUs."""
    return (round(o.cost_per_month, 6), o.cost_per_mtok, o.ttft_ms, o.n_gpus, o.label)


def _moe_model(inp: PlanInputs, cat: Catalog) -> tuple[Model, int]:
    """The inputs' model and its routed experts; InputError for a dense one (no routed
    experts to spread)."""
    model = cat.variant(inp.model).model
    if model.moe is None:
        raise InputError(f"{model.key} is not a mixture-of-experts model: expert-parallel pools "
                         "need routed experts (try deepseek-v3, qwen3-30b-a3b or "
                         "qwen3-235b-a22b)")
    return model, model.moe.experts


@dataclass(frozen=True, kw_only=True)
class PoolsLayout:
    """One EP-pools layout a person chose, at the workload's rate (`evaluate_pools`)."""

    option: EpPoolsOption
    """Its figures at the chosen counts (`pools_at`)."""
    matched: tuple[int, int] | None
    """The rate-matched counts (X, Y) of the same layouts (`size_pools` within
    `MAX_EVALUATED_GPUS`), None where none meets the SLOs."""


MAX_EVALUATED_GPUS: Final = 1024
"""The most GPUs the rate-matched counts of one evaluated layout may take (`evaluate_pools`)."""


def evaluate_pools(inp: PlanInputs, gpu: str, *, prefill: tuple[int, int],
                   decode: tuple[int, int], catalog: Catalog | None = None) -> PoolsLayout:
    """X prefill deployments of EP_p GPUs and Y decode deployments of EP_d GPUs of `gpu`
    (`prefill`, `decode`: (deployments, EP)) at the workload's rate: each pool's layout of its
    size as the search picks it (`prefill_shape`, `decode_shape`), its figures at those counts
    (`pools_at`) and the rate-matched counts; a count of 0 takes the rate-matched one (1 where
    there is none). The weights and KV precision: the inputs' first (`formats`, `kv_dtypes`).
    InputError for a dense model, no rate, a GPU without node data or an EP size that does not
    fit, said as the search says it."""
    cat = catalog or default_catalog()
    model, experts = _moe_model(inp, cat)
    rate = inp.workload.peak_rate_per_s
    if rate is None:
        raise InputError("EP pools need a request rate")
    shapes = node_shapes()
    g = cat.gpu(gpu)
    if g.key not in shapes:
        raise InputError(f"{g.name}: {ep_rejection('ep_rej_no_nodes')}")
    shape = shapes[g.key]
    for n in (prefill[1], decode[1]):
        if n < 1 or n > experts:
            raise InputError(f"EP{n}: give an EP size of 1..{experts} GPUs (the "
                             "routed experts)")
    weights = (inp.formats or (cat.variant(inp.model).format.key,))[0]
    kv = inp.kv_dtypes[0]
    b = basis_of(inp)
    pre = prefill_shape(inp, g, prefill[1], weights, kv, b, cat)
    dec = decode_shape(inp, g, decode[1], weights, kv, b, cat)
    for made in (pre, dec):
        if isinstance(made, Note):
            raise InputError(f"{g.name}: {made}")
    assert isinstance(pre, PrefillShape) and isinstance(dec, DecodeShape)
    variant_model = cat.variant(inp.model, weights).model
    found = size_pools(inp, g, shape, variant_model, weights, kv, pre, dec, rate,
                       MAX_EVALUATED_GPUS)
    matched = (None if isinstance(found, Note)
               else (found.prefill_replicas, found.decode_replicas))
    x = prefill[0] or (matched[0] if matched else 1)
    y = decode[0] or (matched[1] if matched else 1)
    return PoolsLayout(option=pools_at(inp, g, shape, variant_model, weights, kv, pre, dec,
                                       rate, x, y), matched=matched)


def ep_pools_search(inp: PlanInputs, catalog: Catalog | None = None, *,
                    max_gpus: int | None = None) -> EpPoolsSearch:
    """Every EP-pools option for the planner inputs (module docstring), cheapest first, one per
    GPU and pair of EP sizes (its best weights and KV precision), and one line per searched GPU
    without one. `max_gpus`: the most GPUs an option uses in all (both pools and the spare;
    None: `inp.max_gpus`). The knobs: the plan's EP basis (`ep_search.basis_of`), as the
    aggregated wide-EP plan. InputError for a dense model or a concurrency workload."""
    cat = catalog or default_catalog()
    model, experts = _moe_model(inp, cat)
    if inp.workload.peak_rate_per_s is None:
        raise InputError("EP-pools planning needs an arrival rate (daily users or a log), not "
                         "a peak concurrency")
    single_requests(inp.workload, "ep", prefix_tokens=inp.prefix_tokens,
                    prefix_share=inp.prefix_share)
    rate = design_rate_per_s(inp)
    limit = inp.max_gpus if max_gpus is None else max_gpus
    if limit < 1:
        raise InputError(f"the GPU limit must be >= 1, got {limit}")
    b = basis_of(inp)
    shapes = node_shapes()
    base = cat.variant(inp.model)
    formats = inp.formats if inp.formats is not None else (base.format.key,)
    best: dict[tuple[str, int, int], EpPoolsOption] = {}
    rejected: list[EpRejection] = []
    evaluated = 0
    for key in (inp.gpus if inp.gpus is not None else tuple(sorted(cat.gpus))):
        g = cat.gpu(key)
        if g.key not in shapes:
            rejected.append(EpRejection(gpu=g.key, gpu_name=g.name,
                                        detail=ep_rejection("ep_rej_no_nodes")))
            continue
        shape = shapes[g.key]
        sizes = ep_sizes(shape, limit, experts)
        why: Note | None = (ep_rejection("ep_rej_node_over", n=shape.max_gpus_per_node,
                                         limit=limit) if len(sizes) == 0 else None)
        for w in formats:
            variant_model = cat.variant(inp.model, w).model
            for kv in inp.kv_dtypes:
                pres: dict[int, PrefillShape] = {}
                decs: dict[int, DecodeShape] = {}
                for n in sizes:
                    made_p = prefill_shape(inp, g, n, w, kv, b, cat)
                    if isinstance(made_p, Note):
                        why = why or made_p
                    else:
                        pres[n] = made_p
                    if n + sizes[0] > limit:
                        continue  # a decode deployment leaves no GPU for the smallest prefill
                    made_d = decode_shape(inp, g, n, w, kv, b, cat)
                    if isinstance(made_d, Note):
                        why = why or made_d
                    else:
                        decs[n] = made_d
                for n_d, dec in decs.items():
                    for n_p, pre in pres.items():
                        evaluated += 1
                        o = size_pools(inp, g, shape, variant_model, w, kv, pre, dec, rate,
                                       limit)
                        if isinstance(o, Note):
                            why = why or o
                            continue
                        k = (g.key, n_p, n_d)
                        if k not in best or _rank(o) < _rank(best[k]):
                            best[k] = o
        if not any(k[0] == g.key for k in best):
            rejected.append(EpRejection(gpu=g.key, gpu_name=g.name, detail=why or ep_rejection(
                "ep_rej_no_size", n=shape.max_gpus_per_node, limit=limit)))
    return EpPoolsSearch(inputs=inp, options=tuple(sorted(best.values(), key=_rank)),
                         rejected=tuple(rejected), design_rate_per_s=rate, max_gpus=limit,
                         evaluated=evaluated)


# ---------------------------------------------------------------------------------------------
# One wide-EP deployment serving both phases against EP pools


@dataclass(frozen=True, kw_only=True)
class PoolsComparison:
    """The cheapest aggregated wide-EP option (one deployment does both phases) against the
    cheapest EP-pools option."""

    ep: EpSearch
    pools: EpPoolsSearch
    winner: str
    """'pools', 'wide-ep' or 'none' (neither meets the SLOs)."""
    reason: str


def _money(currency: str, v: float) -> str:
    return f"{currency} {v:,.0f}/month"


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def compare_pools(ep: EpSearch, pools: EpPoolsSearch) -> PoolsComparison:
    """Rank the cheapest wide-EP option (prefill and decode on the same GPUs, `ep_search`)
    against the cheapest EP-pools option by cost per month (ties to the wide-EP option: no
    hand-over, one kind of deployment to run), and say why in words from their own figures."""
    one, two = ep.best, pools.best
    pct = f"p{pools.inputs.slo.quantile * 100:g}"
    if two is not None and (one is None or two.cost_per_month < one.cost_per_month):
        head = (f"EP pools: {two.ratio} ({_gpus(two.paid_gpus)}, "
                f"{_money(two.currency, two.cost_per_month)}): the decode deployments run pure "
                f"decode steps (TPOT {pct} {two.tpot_ms:.1f} ms) while prompts take "
                f"{two.prefill_utilization:.0%} of each prefill deployment's time; KV hand-over "
                f"{two.transfer_ms:.1f} ms over {two.handover_text}")
        if one is None:
            return PoolsComparison(ep=ep, pools=pools, winner="pools", reason=(
                f"{head}; no wide-EP deployment serving both phases meets the SLOs within "
                f"{ep.max_gpus} GPUs"))
        return PoolsComparison(ep=ep, pools=pools, winner="pools", reason=(
            f"{head}; wide EP with both phases on the same GPUs needs {_gpus(one.paid_gpus)} "
            f"({_money(one.currency, one.cost_per_month)}): prompts take "
            f"{one.prefill_share:.0%} of each deployment's time and stretch its decode steps "
            f"(TPOT {pct} {one.tpot_ms:.1f} ms)"))
    if one is not None:
        if two is None:
            tail = f"no EP-pools option meets the SLOs within {pools.max_gpus} GPUs"
        elif two.cost_per_month > one.cost_per_month:
            tail = (f"the cheapest EP pools, {two.ratio} ({_gpus(two.paid_gpus)}), cost "
                    f"{_money(two.currency, two.cost_per_month)}: two pools of whole EP "
                    "deployments are more GPUs than this load needs")
        else:
            tail = (f"EP pools cost the same ({two.ratio}, {_gpus(two.paid_gpus)}), and one kind "
                    f"of deployment is simpler and hands no KV over ({two.transfer_ms:.1f} ms)")
        return PoolsComparison(ep=ep, pools=pools, winner="wide-ep", reason=(
            f"wide EP with both phases on the same GPUs: {one.label} ({_gpus(one.paid_gpus)}, "
            f"{_money(one.currency, one.cost_per_month)}, prompts {one.prefill_share:.0%} of "
            f"each deployment's time, TPOT {pct} {one.tpot_ms:.1f} ms); {tail}"))
    return PoolsComparison(ep=ep, pools=pools, winner="none", reason=(
        f"neither wide EP serving both phases nor EP pools meet TTFT "
        f"{pools.inputs.slo.ttft_ms:g} ms and TPOT {pools.inputs.slo.tpot_ms:g} ms within "
        f"{pools.max_gpus} GPUs"))
