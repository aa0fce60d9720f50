"""The buyer's chart's search space (docs/frontier.md, "What is enumerated"): what it is drawn
for (`FrontierInputs`), the variants of a configuration (engine, basis, draft), the planner's
inputs of a variant, the grid of concurrencies, and a block of points as columns, the form each
kind of deployment (aggregated, disaggregated, wide EP) hands its points to
`capacity.fit.frontier.frontier` in.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, Gpu, default_catalog
from capacity.catalog.offers import OFFER_KINDS
from capacity.errors import InputError
from capacity.fit.planning import with_basis
from capacity.fit.typical import engines as typical_engines
from capacity.model.basis import KNOB_FIELDS
from capacity.model.cost import DEFAULT_CNY_PER_USD, Currency
from capacity.model.workload import Workload, single_requests
from capacity.plan.options import DEFAULT_KV_DTYPES, MAX_GPUS, PlanInputs, Slo
from capacity.types import FloatArray, IntArray

AGGREGATED = "aggregated"
DISAGGREGATED = "disaggregated"
WIDE_EP = "wide-ep"
EP_POOLS = "ep-pools"
DEPLOYMENTS: tuple[str, ...] = (AGGREGATED, DISAGGREGATED, WIDE_EP, EP_POOLS)
"""The kinds of deployment a group is: one replica does both phases (aggregated); a prefill
pool and a decode pool hand the KV over (disaggregated, `capacity.fit.frontier_disagg`); a MoE
model's experts spread over a node or an NVLink domain (wide EP, `capacity.fit.frontier_ep`)."""

DEFAULT_ENGINES: tuple[str, ...] = ("vllm", "sglang", "llamacpp")
"""Engine profiles compared by default (data/engines.toml; 'chapter' is not an engine)."""
FALLBACK_TYPICAL = "vllm"
"""The engine whose typical efficiency stands in for one without (engines then differ by their
scheduling, not by guessed kernels)."""
DEFAULT_BASIS = ""
"""The basis `capacity frontier` draws on unless told otherwise: the chapter's assumptions, the
default of `capacity plan`, `capacity size`, the Explorer and the Planner (and so of the
quote), so that one deployment reads the same on a default run of each. Until 2026-12-08 the
command drew each engine on its own typical efficiency by default (`EACH_TYPICAL`), and the
Explorer's default chart read 74.3 tok/s per GPU for the RTX 4090 at 20 tok/s per user where
`capacity frontier --engines chapter` read 155.8."""
EACH_TYPICAL = "typical"
"""`capacity frontier --basis typical`: each engine on its own typical efficiency, vLLM's where
it has none (`FrontierInputs.basis` None)."""
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
    """One basis for every engine ('' the chapter's, 'spec', 'typical:vllm', a calibration...);
    None: each engine's typical efficiency, or FALLBACK_TYPICAL's where it has none. The
    command line and the pages pass one (`DEFAULT_BASIS` unless told otherwise)."""
    knobs: tuple[tuple[str, Any], ...] = ()
    """Efficiencies entered by hand, (`KNOB_FIELDS` name, value) pairs, set over the chapter's
    basis (`basis` ''): a plan's or a what-if's knobs that are no named basis
    (`BasisKind.ENTERED`), so the chart rests on the figures the rest of the page or quote
    does; () none."""
    formats: tuple[str, ...] | None = None
    kv_dtypes: tuple[str, ...] = DEFAULT_KV_DTYPES
    max_gpus: int = MAX_GPUS
    """Largest TP group tried (TP groups stay inside one node)."""
    currency: Currency = "CNY"
    cny_per_usd: float = DEFAULT_CNY_PER_USD
    drafts: tuple[str, ...] = ()
    """Speculative-decoding drafts drawn besides none ('eagle:3', or 'auto': every depth with
    published acceptance, `PlanInputs.draft_keys`); each is a group of its own (F12)."""
    disaggregated: bool = False
    """Also draw disaggregated prefill/decode points (`capacity.fit.frontier_disagg`)."""
    wide_ep: bool = False
    """Also draw wide expert-parallel points of a MoE model (`capacity.fit.frontier_ep`)."""
    ttft_ms: float = Slo().ttft_ms
    """TTFT budget of a disaggregated point, ms: its prefill replica's capacity is the highest
    rate whose TTFT quantile (prefill queue and run + KV hand-over + the first decode step)
    stays within it (the planner's default TTFT SLO)."""
    quantile: float = Slo().quantile
    """Percentile that TTFT budget is held at (the planner's default, p90)."""
    turns: int = 1
    """Requests as conversations of this many turns (`Workload.turns`: the planner's search
    holds their mean prompt and prefills their mean new tokens); 1: single requests. The
    disaggregated and wide-EP points plan single requests only."""
    turn_tokens: int = 0
    """The new tokens of every turn after the first (with `turns` > 1)."""
    prefix_tokens: int = 0
    """A shared prefix (system prompt) the engine's prefix cache holds once
    (`PlanInputs.prefix_tokens`: the planner's units hold it once and prefill the rest of a
    sharing request's prompt); 0: none. The disaggregated and wide-EP points plan requests with
    nothing cached."""
    prefix_share: float = 0.0
    """The share of requests that reuse the prefix (with `prefix_tokens`)."""

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
        if self.knobs and self.basis != "":
            raise InputError(f"knobs entered by hand go over the chapter's basis only, not "
                             f"'{self.basis}'")
        if bad := [k for k, _ in self.knobs if k not in KNOB_FIELDS]:
            raise InputError(f"unknown efficiency knobs {', '.join(map(str, bad))}")
        for e in self.engines:
            engine_profile(e)  # an unknown engine: InputError naming the known ones
        Slo(ttft_ms=self.ttft_ms, quantile=self.quantile)  # a bad budget: InputError
        wl = self.workload()   # a conversation that cannot run: InputError saying why
        if not (isinstance(self.prefix_tokens, int) and self.prefix_tokens >= 0
                and 0.0 <= self.prefix_share <= 1.0):
            raise InputError(f"a shared prefix is >= 0 tokens reused by a share in [0, 1] of "
                             f"requests, got {self.prefix_tokens} and {self.prefix_share}")
        for ticked, what in ((self.disaggregated, "disagg"), (self.wide_ep, "ep")):
            if ticked:
                single_requests(wl, what, prefix_tokens=self.prefix_tokens,
                                prefix_share=self.prefix_share)

    def workload(self, rate_per_s: float = 1.0) -> Workload:
        """The request's lengths (a conversation's turns) at `rate_per_s`, no headroom."""
        return Workload(rate_per_s=rate_per_s, context_tokens=self.context,
                        prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens,
                        headroom=0.0, turns=self.turns,
                        turn_tokens=self.turn_tokens if self.turns > 1 else 0)

    @property
    def context(self) -> int:
        """KV context per request, tokens (None given: a conversation's last turn and its
        answer, else prompt + output)."""
        step = self.output_tokens + self.turn_tokens if self.turns > 1 else 0
        return (self.context_tokens if self.context_tokens is not None
                else self.prompt_tokens + (self.turns - 1) * step + self.output_tokens)


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
    base = PlanInputs(model=inp.model, workload=inp.workload(rate_per_s),
                      gpus=gpus or inp.gpus or datacenter_gpus(catalog),
                      max_gpus=inp.max_gpus, kv_dtypes=inp.kv_dtypes, formats=inp.formats,
                      engine=v.engine, currency=inp.currency, cny_per_usd=inp.cny_per_usd,
                      drafts=(v.draft,) if v.draft else (), prefix_tokens=inp.prefix_tokens,
                      prefix_share=inp.prefix_share if inp.prefix_tokens else 0.0)
    out = with_basis(base, v.basis)
    return replace(out, **dict(inp.knobs)) if inp.knobs else out


def concurrency_grid(slots: IntArray) -> tuple[IntArray, FloatArray]:
    """(unit, concurrency) of every point: the geometric grid of ratio CONCURRENCY_STEP below
    each unit's slots, and the slots themselves, sorted by unit then concurrency."""
    top = int(slots.max()) if slots.size else 0
    k = int(math.ceil(math.log(max(top, 1)) / math.log(CONCURRENCY_STEP))) + 1
    grid = np.unique(np.round(CONCURRENCY_STEP ** np.arange(k)))
    unit, col = np.nonzero(grid[None, :] < slots[:, None])
    full = np.flatnonzero(slots >= 1)
    units = np.concatenate([unit, full])
    conc = np.concatenate([grid[col], slots[full].astype(np.float64)])
    order = np.lexsort((conc, units))
    return units[order].astype(np.int64), conc[order]


@dataclass(frozen=True, kw_only=True)
class PointBlock:
    """Points of one kind of deployment as columns (index i is one point), before the fronts.
    Units: tok/s per user, tok/s per GPU paid, ms, price per GPU-hour in the chart's currency.

    `tp`: the TP of a replica (aggregated), of a decode replica (disaggregated), of an
    attention group (wide EP); `n_gpus`: GPUs of that replica (the EP degree for wide EP);
    `prefill_tp`, `prefill_gpus`: a prefill replica's TP and the prefill GPUs one decode
    replica needs (fractional; 0 but for disaggregated points); `layout`: the deployment in
    words ('' for aggregated points)."""

    deployment: str
    gpu: list[str]
    gpu_name: list[str]
    engine: list[str]
    basis: list[str]
    draft: list[str | None]
    weights: list[str]
    kv_dtype: list[str]
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

    def __len__(self) -> int:
        return int(self.tp.size)

    @classmethod
    def empty(cls, deployment: str) -> PointBlock:
        """A block of no points (a kind of deployment that does not apply)."""
        no_int, no_float = np.zeros(0, dtype=np.int64), np.zeros(0)
        return cls(deployment=deployment, gpu=[], gpu_name=[], engine=[], basis=[], draft=[],
                   weights=[], kv_dtype=[], layout=[], tp=no_int, n_gpus=no_int,
                   concurrency=no_int, interactivity_tok_s_per_user=no_float,
                   throughput_tok_s_per_gpu=no_float, ttft_ms=no_float, tpot_ms=no_float,
                   prefill_share=no_float, price_per_gpu_hour=no_float, prefill_tp=no_int,
                   prefill_gpus=no_float)
