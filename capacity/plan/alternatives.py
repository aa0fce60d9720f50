"""Why this card: the cheaper options the planner ruled out, and the one input that would make
each feasible (docs/method.md, "The planner's search").

For each GPU family with no feasible configuration, the cheapest configurations that cost less
per month than the recommendation and fail on speed alone (not memory) are tried against one
relaxation at a time:

- a looser TTFT target: the configuration's TTFT at the SLO percentile at the design load
  (at least its prefill alone) is the target that would pass it;
- a looser TPOT target: likewise its TPOT;
- shorter prompts: the longest prompt at which the configuration meets every check
  (bisection on the prompt length, each step the planner's own check of that deployment);
- fewer users: the daily users its SLO-feasible capacity serves (with daily users given; a
  closed loop's rate is not proportional to its concurrency, so none is offered for one).

Each relaxation is made on the configuration it relaxes least (the nearest to feasible: the
lowest TTFT or TPOT needed, the largest fleet still cheaper for prompts, the most users
served); every figure comes from the planner's search (`plan` with `keep_all`, and
`deployment.assess`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from capacity.catalog.loader import Catalog
from capacity.plan.deployment import Deployment, assess
from capacity.plan.options import Option, Plan, Reason
from capacity.plan.search import plan

SPEED = frozenset({Reason.TTFT, Reason.TPOT, Reason.THROUGHPUT, Reason.COST})
"""Failures a relaxation of the workload or the targets can lift (memory and slots cannot)."""
PROMPT_STEPS = 8
"""Bisection steps on the prompt length (to 1/256 of the prompt)."""


class Relax(StrEnum):
    """The one input that changes."""

    TTFT = "ttft"
    """A TTFT target of `value` ms."""
    TPOT = "tpot"
    """A TPOT target of `value` ms."""
    PROMPT = "prompt"
    """Prompts of at most `value` tokens."""
    USERS = "users"
    """At most `value` daily users (the same peak window and requests per user)."""


@dataclass(frozen=True, kw_only=True)
class Relaxation:
    """One input changed, and the configuration of the family it makes feasible (the one it
    relaxes least, see the module docstring)."""

    kind: Relax
    value: float
    option: Option
    """The configuration as the plan of the original inputs sees it (its cost, its failures)."""


@dataclass(frozen=True, kw_only=True)
class Alternative:
    """A GPU family the plan ruled out, cheaper than the recommendation, and what would make
    one of its configurations feasible."""

    gpu: str
    gpu_name: str
    reasons: tuple[Reason, ...]
    relaxations: tuple[Relaxation, ...]


def _longest_prompt(p: Plan, o: Option, catalog: Catalog | None) -> int | None:
    """The longest prompt (tokens) at which `o` meets every check, None when even one token
    does not."""
    inp = p.inputs
    wl = inp.workload

    def feasible(prompt: int) -> bool:
        d = Deployment(inputs=replace(inp, workload=replace(wl, prompt_tokens=prompt)),
                       gpu=o.gpu, weights=o.weights, kv_dtype=o.kv_dtype, tp=o.tp,
                       replicas=o.copies, draft=o.draft, pp=o.pp)
        return assess(d, catalog, checks_only=True).feasible

    hi = wl.prompt
    if not feasible(max(1, wl.prompt // 64)):
        return None
    lo = max(1, wl.prompt // 64)
    for _ in range(PROMPT_STEPS):
        if hi - lo <= max(1, wl.prompt // 256):
            break
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    return lo


def alternatives(p: Plan, catalog: Catalog | None = None, *, limit: int = 3,
                 prompts: bool = True) -> tuple[Alternative, ...]:
    """The ruled-out GPU families with a configuration cheaper than the recommendation (the
    cheapest `limit` of them), each with the relaxations that make one feasible.
    `prompts`: also bisect the prompt length (about 10 planner checks per family)."""
    best = p.best.cost_per_month if p.best is not None else math.inf
    families = [r for r in p.rejected if not r.never_fits]
    if not families:
        return ()
    inp = p.inputs
    every = plan(replace(inp, gpus=tuple(r.gpu for r in families)), catalog, keep_all=True)
    wl = inp.workload
    out: list[Alternative] = []
    for r in families:
        cands = [o for o in every.all_options if o.gpu == r.gpu and o.cost_per_month < best
                 and o.failures and set(o.failures) <= SPEED]
        if not cands:
            continue
        # each relaxation on the candidate it relaxes least: the nearest to feasible
        found: list[Relaxation] = []
        ttft_only = [o for o in cands if set(o.failures) == {Reason.TTFT}]
        if ttft_only:
            o = min(ttft_only, key=lambda x: (max(x.ttft_ms, x.prefill_ms), x.cost_per_month))
            found.append(Relaxation(kind=Relax.TTFT, value=max(o.ttft_ms, o.prefill_ms),
                                    option=o))
        tpot_only = [o for o in cands if set(o.failures) == {Reason.TPOT}]
        if tpot_only:
            o = min(tpot_only, key=lambda x: (x.tpot_ms, x.cost_per_month))
            found.append(Relaxation(kind=Relax.TPOT, value=o.tpot_ms, option=o))
        slow_prefill = [x for x in cands if Reason.TTFT in x.failures]
        if prompts and wl.prompt > 64 and slow_prefill:
            o = max(slow_prefill, key=lambda x: (x.cost_per_month, -x.n_gpus, -x.tp))
            longest = _longest_prompt(p, o, catalog)
            if longest is not None:
                found.append(Relaxation(kind=Relax.PROMPT, value=float(longest), option=o))
        # fewer users (daily users only: a closed loop's rate is not proportional to it)
        served = [x for x in cands if x.capacity_rate_per_s > 0 and x.design_rate_per_s > 0]
        if served and wl.daily_active_users is not None:
            o = max(served, key=lambda x: (x.capacity_rate_per_s / x.design_rate_per_s,
                                           -x.cost_per_month))
            users = math.floor(wl.daily_active_users * o.capacity_rate_per_s
                               / o.design_rate_per_s)
            if users >= 1:
                found.append(Relaxation(kind=Relax.USERS, value=float(users), option=o))
        if found:
            out.append(Alternative(gpu=r.gpu, gpu_name=r.gpu_name, reasons=r.reasons,
                                   relaxations=tuple(found)))
    out.sort(key=lambda a: min(x.option.cost_per_month for x in a.relaxations))
    return tuple(out[:limit])
