"""The buyer's chart (issue 26): output tokens per second per GPU paid against interactivity
(tokens per second per user), its Pareto front, and the cost per million tokens read off it
(docs/frontier.md).

Every configuration the planner builds (`capacity.plan.search.replica_units`: GPU x TP x
weights x KV x draft, every memory, step and prefill figure the planner's own) for each variant
of `configuration_variants` (engine profile with its basis, draft), at a geometric grid of
closed-loop concurrencies per replica up to its slots. Each point is one replica under a closed
loop of C users, in the steady state of the event model derived in closed form from the same
terms (`closed_loop`): interactivity (1000 / mean TPOT), throughput per GPU (output tok/s / GPUs
paid) and TTFT; more replicas multiply the fleet, not the figures per GPU.

The front of a group (GPU x engine x weights x KV x draft) keeps the points that no other point
of the group beats on both axes (`pareto_mask`); `cost_read_off` interpolates a group's front
at a target interactivity and prices it with each offer kind through the planner's F7
(`capacity.model.cost.cost_per_mtok`). Pure and vectorised over configurations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, Gpu, default_catalog
from capacity.catalog.offers import OFFER_KINDS, bundled_of_kind
from capacity.errors import InputError
from capacity.fit.planning import engines as typical_engines
from capacity.fit.planning import with_basis
from capacity.model.cost import DEFAULT_CNY_PER_USD, Currency, cost_per_mtok
from capacity.model.roofline import StepModel
from capacity.model.workload import Workload
from capacity.plan import search
from capacity.plan.options import DEFAULT_KV_DTYPES, MAX_GPUS, Option, PlanInputs
from capacity.plan.pricing import PriceKind
from capacity.types import BoolArray, FloatArray, IntArray

if TYPE_CHECKING:  # the event model loads only for `event_check` and the tests' comparisons
    from capacity.plan.events import ServiceModel

DEFAULT_ENGINES: tuple[str, ...] = ("vllm", "sglang", "llamacpp")
"""Engine profiles compared by default (data/engines.toml; 'chapter' is not an engine)."""
FALLBACK_TYPICAL = "vllm"
"""The engine whose typical efficiency stands in for one without (engines then differ by their
scheduling, not by guessed kernels)."""
CONCURRENCY_STEP = math.sqrt(2.0)
"""Ratio of the grid of closed-loop concurrencies per replica (1, 2, 3, 4, 6, 8, 11, ...)."""
PRICE_KINDS: tuple[str, ...] = ("catalog", *OFFER_KINDS)
"""What a read-off is priced with: the GPU catalog's price, or the bundled offers of a kind."""
CONSUMER_KEY = re.compile(r"rtx-\d{4}")
"""Catalog keys of consumer GeForce cards (rtx-4090): the GPU files have no segment field."""


def is_datacenter(gpu: Gpu) -> bool:
    """Whether `gpu` is a data-centre part: not a consumer GeForce RTX card (`CONSUMER_KEY`;
    workstation keys such as 'rtx-6000-ada' are not consumer cards)."""
    return CONSUMER_KEY.fullmatch(gpu.key) is None


def datacenter_gpus(catalog: Catalog | None = None) -> tuple[str, ...]:
    """The catalog's data-centre GPU keys (`is_datacenter`), sorted."""
    cat = catalog or default_catalog()
    return tuple(k for k in sorted(cat.gpus) if is_datacenter(cat.gpus[k]))


# ---------------------------------------------------------------------------------------------
# Inputs and the variants of a configuration


@dataclass(frozen=True, kw_only=True)
class FrontierInputs:
    """What the chart is drawn for: a model, one request shape and the search space."""

    model: str
    prompt_tokens: int = 1024
    output_tokens: int = 1024
    context_tokens: int | None = None
    """KV context per request, tokens; None: prompt + output."""
    gpus: tuple[str, ...] | None = None
    """GPU keys; None: the catalog's data-centre GPUs (`datacenter_gpus`)."""
    engines: tuple[str, ...] = DEFAULT_ENGINES
    basis: str | None = None
    """One basis for every engine ('spec', 'typical:vllm', a calibration...); None: each
    engine's typical efficiency, or FALLBACK_TYPICAL's where it has none."""
    formats: tuple[str, ...] | None = None
    kv_dtypes: tuple[str, ...] = DEFAULT_KV_DTYPES
    max_gpus: int = MAX_GPUS
    """Largest TP group tried (TP groups stay inside one node)."""
    currency: Currency = "CNY"
    cny_per_usd: float = DEFAULT_CNY_PER_USD
    drafts: tuple[str, ...] = ()
    """Speculative-decoding drafts drawn besides none ('eagle:3', or 'auto': every depth with
    published acceptance, `PlanInputs.draft_keys`); each is a group of its own (F12)."""

    def __post_init__(self) -> None:
        if not (isinstance(self.prompt_tokens, int) and self.prompt_tokens >= 1):
            raise InputError(f"prompt must be a whole number >= 1 token, got {self.prompt_tokens}")
        if not (isinstance(self.output_tokens, int) and self.output_tokens >= 2):
            raise InputError(f"output must be >= 2 tokens (interactivity is 1000 / TPOT, the "
                             f"time between tokens), got {self.output_tokens}")
        if self.context_tokens is not None and self.context_tokens < self.prompt_tokens:
            raise InputError(f"context of {self.context_tokens} tokens is shorter than the "
                             f"prompt of {self.prompt_tokens}")
        if not self.engines:
            raise InputError("give at least one engine (vllm, sglang, llamacpp)")
        for e in self.engines:
            engine_profile(e)  # an unknown engine: InputError naming the known ones

    @property
    def context(self) -> int:
        """KV context per request, tokens."""
        return (self.context_tokens if self.context_tokens is not None
                else self.prompt_tokens + self.output_tokens)


@dataclass(frozen=True, kw_only=True)
class Variant:
    """What a configuration runs with besides its hardware: the engine's scheduling, the basis
    its speed figures rest on, and the speculative-decoding draft (None: none)."""

    engine: str
    basis: str
    draft: str | None = None


def configuration_variants(inp: FrontierInputs, catalog: Catalog | None = None
                           ) -> tuple[Variant, ...]:
    """Every variant of a configuration, the one place they are enumerated: each engine with
    its basis (`inp.basis`, else its typical efficiency or FALLBACK_TYPICAL's), and each draft:
    none, then `inp.drafts` ('auto' expanded for the model, `PlanInputs.draft_keys`)."""
    typical = typical_engines()
    keys: tuple[str, ...] = ()
    if inp.drafts:
        model_key = (catalog or default_catalog()).variant(inp.model).model.key
        keys = PlanInputs(model=inp.model, workload=Workload(rate_per_s=1.0),
                          drafts=inp.drafts).draft_keys(model_key)
    out = []
    for e in dict.fromkeys(engine_profile(x).key for x in inp.engines):
        basis = inp.basis if inp.basis is not None else (
            f"typical:{e}" if e in typical else
            f"typical:{FALLBACK_TYPICAL}" if FALLBACK_TYPICAL in typical else "")
        for draft in (None, *keys):
            out.append(Variant(engine=e, basis=basis, draft=draft))
    return tuple(out)


def plan_inputs(inp: FrontierInputs, v: Variant, *, gpus: tuple[str, ...] | None = None,
                rate_per_s: float = 1.0, catalog: Catalog | None = None) -> PlanInputs:
    """The planner's inputs for one variant (`with_basis` sets the knobs): the request's
    lengths at `rate_per_s` requests/s with no headroom (the search's units read only the
    lengths; `planner_option` gives the rate of a point)."""
    wl = Workload(rate_per_s=rate_per_s, context_tokens=inp.context,
                  prompt_tokens=inp.prompt_tokens, output_tokens=inp.output_tokens, headroom=0.0)
    base = PlanInputs(model=inp.model, workload=wl,
                      gpus=gpus or inp.gpus or datacenter_gpus(catalog),
                      max_gpus=inp.max_gpus, kv_dtypes=inp.kv_dtypes, formats=inp.formats,
                      engine=v.engine, currency=inp.currency, cny_per_usd=inp.cny_per_usd,
                      drafts=(v.draft,) if v.draft else ())
    return with_basis(base, v.basis)


# ---------------------------------------------------------------------------------------------
# The closed loop's steady state

StepTerms = Callable[[FloatArray], tuple[FloatArray, FloatArray, FloatArray]]
"""A replica's decode step at a (fractional) batch b: (bandwidth_ms, compute_ms, step_ms), the
terms `mixed_step_time_ms` combines (`StepParts`)."""


def step_model_terms(step: StepModel) -> StepTerms:
    """The planner's step (`StepModel.parts`, arrays of configurations) as StepTerms."""
    def terms(b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        p = step.parts(b)
        return p.bandwidth_ms, p.compute_ms, p.step_ms
    return terms


def service_terms(svc: ServiceModel) -> StepTerms:
    """The event model's step of one replica (`ServiceModel`'s arrays over batches 0..slots,
    `ServiceModel.step_ms`) as StepTerms, linear between whole batches."""
    grid = np.arange(svc.slots + 1, dtype=np.float64)
    arrays = (svc.bandwidth_ms, svc.compute_ms, svc.step_ms)

    def terms(b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        bw, cp, st = (np.asarray(np.interp(b, grid, a), dtype=np.float64) for a in arrays)
        return bw, cp, st
    return terms


def chunk_extra_ms(bandwidth_ms: npt.ArrayLike, compute_ms: npt.ArrayLike,
                   prefill_ms: npt.ArrayLike) -> FloatArray:
    """What prompt chunks of `prefill_ms` (F6 time) add to a step (ms): the mixed step,
    `roofline.mixed_step_time_ms` = t0 + max(bandwidth, compute + prefill) + comm + serial, less
    the plain step: max(bandwidth, compute + prefill) - max(bandwidth, compute). Vectorised;
    tests/test_frontier.py holds it to `mixed_step_time_ms` element by element."""
    bw = np.asarray(bandwidth_ms, dtype=np.float64)
    cp = np.asarray(compute_ms, dtype=np.float64)
    return np.asarray(np.maximum(bw, cp + np.asarray(prefill_ms)) - np.maximum(bw, cp),
                      dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class SteadyState:
    """One replica under a closed loop of C users with no think time, in steady state (arrays
    over configurations). Units: ms, requests, tok/s."""

    concurrency: FloatArray
    cycle_ms: FloatArray
    """T: one request's time in the server (E2E), the time between a user's requests."""
    ttft_ms: FloatArray
    tpot_ms: FloatArray
    """Mean time per output token after the first: (T - TTFT) / (n - 1)."""
    output_tok_s: FloatArray
    """Output tokens per second of the replica: C n / T."""
    prefill_share: FloatArray
    """Share of the replica's time that prefill adds (the prefill batches, or what prompt
    chunks add to the mixed steps): the input tokens' share of the GPU-hour."""
    decode_batch: FloatArray
    """Mean sequences a decode step carries."""

    @property
    def interactivity_tok_s_per_user(self) -> FloatArray:
        """1000 / TPOT: output tokens per second one user sees while decoding."""
        return np.asarray(1e3 / self.tpot_ms, dtype=np.float64)


def closed_loop(*, concurrency: npt.ArrayLike, terms: StepTerms, prefill_ms: npt.ArrayLike,
                prompt_tokens: int, output_tokens: int, budget_tokens: npt.ArrayLike,
                mixed: npt.ArrayLike) -> SteadyState:
    """The event model's closed loop (`events.simulate(concurrency=C)`, clients out of step),
    per replica, in closed form (docs/frontier.md). C users each send a request of P prompt and
    n output tokens when the last one ends; C <= the slots, so none waits for a slot, and
    requests arrive at step ends, where they are admitted at once.

    Prefill pauses decoding (whole prompts, B = 0: the chapter's profile; or prefill batches
    of at most B tokens, not mixed: SGLang): a prompt costs
    p = t (whole) or m (s(0) + extra(t / m)) with m = ceil(P / B) batches at the weight read of
    batch 0, and every decode step carries all C sequences, so per cycle
    T = C p + (n - 1) s(C), TTFT = p, TPOT = s(C) + (C - 1) p / (n - 1).

    Mixed chunked prefill (budget B, vLLM, llama.cpp): a step carries the b decoding sequences
    and up to B - b prompt tokens. A user's cycle is K steps: m = ceil(P / (B - C + 1)) with its
    chunks, n - 1 decoding, and any spent waiting behind other prompts, so
    K = max(m + n - 1, C (P + n - 1) / B) (the second when every step is full of tokens);
    b = C (n - 1) / K; N = min(K, C m) steps carry chunks of x = C t / N each (F6 split evenly),
    each adding extra(x) = `chunk_extra_ms`; T = K s(b) + N extra(x),
    TTFT = (K - n + 1)(s(b) + extra(x)), TPOT = (T - TTFT) / (n - 1).

    Throughput C n / T; prefill share C p / T (paused) or N extra(x) / T (mixed). t: F6 prefill
    of one prompt (ms), s(b): `terms`. Source: Little's law over one cycle (T = C / lambda) and
    the event model's scheduling (docs/method.md, Queueing, Engine profiles)."""
    c = np.asarray(concurrency, dtype=np.float64)
    t = np.broadcast_to(np.asarray(prefill_ms, dtype=np.float64), c.shape)
    big_b = np.broadcast_to(np.asarray(budget_tokens, dtype=np.float64), c.shape)
    mix = np.broadcast_to(np.asarray(mixed, dtype=bool), c.shape) & (big_b > 0)
    p_tok, dec = float(prompt_tokens), float(output_tokens - 1)
    if dec < 1:
        raise InputError("a closed loop's TPOT needs output >= 2 tokens")
    # prefill pauses decoding
    m0 = np.where(big_b > 0, np.ceil(p_tok / np.maximum(big_b, 1.0)), 1.0)
    bw0, cp0, s0 = terms(np.zeros_like(c))
    pt = np.where(big_b > 0, m0 * (s0 + chunk_extra_ms(bw0, cp0, t / m0)), t)
    _, _, s_c = terms(c)
    cycle_p = c * pt + dec * s_c
    # mixed chunked prefill
    per_step = np.maximum(big_b - (c - 1.0), 1.0)
    m = np.ceil(p_tok / per_step)
    k = np.maximum(m + dec, c * (p_tok + dec) / np.maximum(big_b, 1.0))
    b = c * dec / k
    n_chunk = np.minimum(k, c * m)
    bw, cp, s = terms(np.where(mix, b, c))
    extra = chunk_extra_ms(bw, cp, c * t / n_chunk)
    cycle_m = k * s + n_chunk * extra
    cycle = np.where(mix, cycle_m, cycle_p)
    ttft = np.where(mix, (k - dec) * (s + extra), pt)
    share = np.where(mix, n_chunk * extra, c * pt) / cycle
    return SteadyState(concurrency=c, cycle_ms=np.asarray(cycle, dtype=np.float64),
                       ttft_ms=np.asarray(ttft, dtype=np.float64),
                       tpot_ms=np.asarray((cycle - ttft) / dec, dtype=np.float64),
                       output_tok_s=np.asarray(c * output_tokens / cycle * 1e3, dtype=np.float64),
                       prefill_share=np.asarray(share, dtype=np.float64),
                       decode_batch=np.asarray(np.where(mix, b, c), dtype=np.float64))


def service_steady_state(svc: ServiceModel, concurrency: npt.ArrayLike) -> SteadyState:
    """`closed_loop` on the event model's own terms of one replica (its step over batches, its
    prefill, budget and mixing): what `events.simulate(svc, concurrency=C)` should show."""
    return closed_loop(concurrency=concurrency, terms=service_terms(svc),
                       prefill_ms=svc.prefill_ms, prompt_tokens=svc.prompt_tokens,
                       output_tokens=svc.output_tokens, budget_tokens=svc.chunk_tokens or 0,
                       mixed=svc.mixed)


# ---------------------------------------------------------------------------------------------
# The points, the fronts


@dataclass(frozen=True, kw_only=True)
class FrontPoint:
    """One configuration at one concurrency: a point of the chart (per replica of TP GPUs)."""

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

    @property
    def label(self) -> str:
        """'1 x H100 SXM (TP=1), fp8, fp8 KV, vllm, C=64'."""
        par = f" (TP={self.tp})" if self.tp > 1 else ""
        draft = f", draft {self.draft}" if self.draft else ""
        return (f"{self.n_gpus} x {self.gpu_name}{par}, {self.weights}, {self.kv_dtype} KV, "
                f"{self.engine}{draft}, C={self.concurrency}")


@dataclass(frozen=True, kw_only=True)
class Group:
    """One line of the chart: a GPU x engine x weights x KV x draft, and its Pareto front
    (ascending interactivity, so descending throughput per GPU)."""

    gpu: str
    gpu_name: str
    engine: str
    basis: str
    draft: str | None
    weights: str
    kv_dtype: str
    front: tuple[FrontPoint, ...]

    @property
    def key(self) -> str:
        """'h100-sxm/vllm/fp8/fp8' (and '/DRAFT' with a draft)."""
        return "/".join(x for x in (self.gpu, self.engine, self.weights, self.kv_dtype,
                                    self.draft) if x)


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
    tp: IntArray
    concurrency: IntArray
    interactivity_tok_s_per_user: FloatArray
    throughput_tok_s_per_gpu: FloatArray
    ttft_ms: FloatArray
    tpot_ms: FloatArray
    prefill_share: FloatArray
    price_per_gpu_hour: FloatArray
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
            kv_dtype=self.kv_dtype[i], tp=tp, replicas=1, n_gpus=tp,
            concurrency=int(self.concurrency[i]),
            interactivity_tok_s_per_user=float(self.interactivity_tok_s_per_user[i]),
            throughput_tok_s_per_gpu=thr, ttft_ms=float(self.ttft_ms[i]),
            tpot_ms=float(self.tpot_ms[i]), prefill_share=float(self.prefill_share[i]),
            price_per_gpu_hour=price, currency=self.currency,
            cost_per_mtok=float(cost_per_mtok(price, 1, thr)))


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


def _grid(slots: IntArray) -> tuple[IntArray, FloatArray]:
    """(unit, concurrency) of every point: the geometric grid below each unit's slots, and the
    slots themselves."""
    top = int(slots.max()) if slots.size else 0
    k = int(math.ceil(math.log(max(top, 1)) / math.log(CONCURRENCY_STEP))) + 1
    grid = np.unique(np.round(CONCURRENCY_STEP ** np.arange(k)))
    unit, col = np.nonzero(grid[None, :] < slots[:, None])
    full = np.flatnonzero(slots >= 1)
    units = np.concatenate([unit, full])
    conc = np.concatenate([grid[col], slots[full].astype(np.float64)])
    order = np.lexsort((conc, units))
    return units[order].astype(np.int64), conc[order]


def frontier(inp: FrontierInputs, catalog: Catalog | None = None, *,
             events: bool = False) -> Frontier:
    """Evaluate every configuration x variant x concurrency, and the fronts (module docstring).
    `events`: also run the event model on every front point (`event_check`; seconds)."""
    cat = catalog or default_catalog()
    gpus = inp.gpus or datacenter_gpus(cat)
    variants = configuration_variants(inp, cat)
    names: list[tuple[str, str, str, str, str, str | None, str]] = []
    parts: list[list[npt.NDArray[np.generic]]] = []
    model_name = ""
    for v in variants:
        pinp = plan_inputs(inp, v, gpus=gpus, catalog=cat)
        # the planner's replica units (GPU x TP x weights x KV x draft: C_vram, max_num_seqs,
        # prefill, price, the F4 step), its own figures
        model, _, units = search.replica_units(pinp, cat)
        model_name = model.name
        # the units of this variant's draft alone (the search adds no draft beside each)
        mine = np.asarray([(d.key if d else None) == v.draft for d in units.drafts], dtype=bool)
        slots = np.where(mine, np.minimum(units.c_vram, units.seqs), 0).astype(np.int64)
        uidx, conc = _grid(slots)
        prof = [pinp.profile_for(g.key, g.memory_gb) for g in units.gpus]
        ss = closed_loop(
            concurrency=conc, terms=step_model_terms(units.step.select(uidx)),
            prefill_ms=units.prefill_ms[uidx], prompt_tokens=inp.prompt_tokens,
            output_tokens=inp.output_tokens,
            budget_tokens=np.asarray([p.token_budget_tokens for p in prof], dtype=np.float64)[uidx],
            mixed=np.asarray([p.mixed for p in prof], dtype=bool)[uidx])
        tp = units.tp[uidx]
        names += [(units.gpus[i].key, units.gpus[i].name, v.engine, v.basis, units.formats[i],
                   v.draft, units.kv[i]) for i in uidx.tolist()]
        parts.append([tp, conc.astype(np.int64), ss.interactivity_tok_s_per_user,
                      ss.output_tok_s / tp, ss.ttft_ms, ss.tpot_ms, ss.prefill_share,
                      units.price_per_hour[uidx]])
    if not names:
        raise InputError(f"{inp.model} fits no chosen GPU at a context of {inp.context} tokens "
                         f"(TP up to {inp.max_gpus}): choose bigger GPUs or a shorter context")
    tp, conc, x, y, ttft, tpot, share, price = (np.concatenate(c) for c in zip(*parts, strict=True))
    gpu, gpu_name, engine, basis, weights, draft, kv = (list(c) for c in zip(*names, strict=True))
    index: dict[tuple[object, ...], int] = {}
    group = np.asarray([index.setdefault((n[0], n[2], n[4], n[6], n[5]), len(index))
                        for n in names], dtype=np.int64)
    by_gpu = {g: i for i, g in enumerate(dict.fromkeys(gpu))}
    on_gpu = _grouped_front(np.asarray([by_gpu[g] for g in gpu]), x, y)
    table = PointTable(
        gpu=gpu, gpu_name=gpu_name, engine=engine, basis=basis, draft=draft, weights=weights,
        kv_dtype=kv, tp=tp.astype(np.int64), concurrency=conc.astype(np.int64),
        interactivity_tok_s_per_user=x, throughput_tok_s_per_gpu=y, ttft_ms=ttft, tpot_ms=tpot,
        prefill_share=share, price_per_gpu_hour=price, group=group,
        on_front=_grouped_front(group, x, y), on_gpu_front=on_gpu, currency=inp.currency)
    fr = Frontier(inputs=inp, model_name=model_name, variants=variants, points=table,
                  groups=_groups(table, len(index)))
    if events:
        fr = replace(fr, groups=tuple(
            replace(g, front=tuple(event_check(fr, p, cat) for p in g.front)) for g in fr.groups))
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
                         front=tuple(table.row(i) for i in rows)))
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
    options = search.plan(pinp, cat, keep_all=True, only=(p.n_gpus, p.tp)).all_options
    return next(o for o in options if (o.weights, o.kv_dtype, o.draft or None)
                == (p.weights, p.kv_dtype, p.draft))


EVENT_WARMUP = 0.3
"""Share of a closed loop's requests the event check leaves out (the clients settle)."""


def event_requests(concurrency: int) -> int:
    """Requests the event check simulates for a closed loop of `concurrency` users: forty per
    user (the loop's start and drain stay a few per cent of it), 400 to 40,000."""
    return int(min(max(400, 40 * concurrency), 40_000))


def event_check(fr: Frontier, p: FrontPoint, catalog: Catalog | None = None) -> FrontPoint:
    """`p` with the event model's mean TTFT, TPOT and throughput per GPU: the planner's
    replica (`detail.option_service`: the engine profile's scheduling, KV held at its mean
    context) in a closed loop of `p.concurrency` users started a closed-form cycle / C apart
    (out of step), the first EVENT_WARMUP of requests left out; throughput by Little's law
    over the loop, C n / mean E2E (the simulated span includes the loop's drain)."""
    from capacity.plan.detail import option_service
    from capacity.plan.events import simulate

    pinp = plan_inputs(fr.inputs, variant_of(fr, p), gpus=(p.gpu,), catalog=catalog)
    svc = option_service(pinp, planner_option(fr, p, catalog), catalog)
    c, n = min(p.concurrency, svc.slots), svc.output_tokens
    cycle_ms = c * n / (p.throughput_tok_s_per_gpu * p.tp) * 1e3
    q = simulate(svc, concurrency=c, n_requests=event_requests(c), stagger_ms=cycle_ms / c,
                 warmup_fraction=EVENT_WARMUP)
    return replace(p, event_ttft_ms=q.mean_ttft_ms,
                   event_tpot_ms=(q.mean_e2e_ms - q.mean_ttft_ms) / (n - 1),
                   event_throughput_tok_s_per_gpu=c * n / q.mean_e2e_ms * 1e3 / p.tp)
