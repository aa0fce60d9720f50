"""The planner's searches on the arrival rate (docs/method.md, "The planner's search"): a
bisection that resolves several steps per call (`bisect_levels`), and the SLO-feasible capacity
of each configuration (`slo_capacity`: the highest rate at which every check passes), with the
memo that lets later searches reuse it. `capacity.plan.search` calls them.

Every shortcut here gives the plain computation's answer to the bit: the bisection visits the
rates one step at a time would visit, and the capacity's TPOT check asks
`gamma_quantile_at_most` what the percentile itself would answer (tests/test_search_speed.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from capacity.model.roofline import StepModel
from capacity.model.workload import Workload
from capacity.plan.options import Slo
from capacity.plan.queueing import analytic_latency
from capacity.stats import gamma_quantile_at_most
from capacity.types import BoolArray, FloatArray, IntArray


@dataclass(frozen=True, kw_only=True)
class Prompts:
    """What each configuration's requests prefill, one row per configuration (a shared
    prefix's cached share depends on the KV format's block alignment): the tokens the mean
    request prefills (`ReplicaUnits.new_tokens`: its prompt less the cached share of a shared
    prefix, a conversation's turns' mean), and the prefill (ms) and new tokens of each kind of
    request a TTFT percentile runs over (`prefix.request_kinds`: a conversation's turns, a
    prefix's misses and hits; one kind, the mean request, where requests do not differ), one
    column per kind, each kind's share of the requests `kind_weights`."""

    new_tokens: FloatArray
    kind_prefill_ms: FloatArray
    kind_new_tokens: FloatArray
    kind_weights: tuple[float, ...]

    def rows(self, idx: IntArray) -> Prompts:
        """These configurations' entries."""
        return Prompts(new_tokens=self.new_tokens[idx], kind_prefill_ms=self.kind_prefill_ms[idx],
                       kind_new_tokens=self.kind_new_tokens[idx], kind_weights=self.kind_weights)


def chunking(budget: FloatArray, prompts: Prompts,
             ahead: FloatArray | None = None) -> dict[str, object]:
    """The analytic path's prefill arguments for these configurations: the kinds of request
    a TTFT percentile runs over (`analytic_latency`'s `kind_prefill_ms`, chunked or not),
    whether the engine schedules one step ahead (`ahead`, 1 or 0 per configuration:
    `ReplicaUnits.ahead`; none given: 0) and, where a budget mixes chunks into the decode
    steps (none when 0), the budget and the tokens the mean request prefills."""
    q: dict[str, object] = {"kind_prefill_ms": prompts.kind_prefill_ms,
                            "kind_prompt_tokens": prompts.kind_new_tokens,
                            "kind_weights": prompts.kind_weights}
    if ahead is not None:
        q["ahead"] = ahead
    if not np.any(budget > 0):
        return q
    return {"chunk_tokens": np.where(budget > 0, budget, np.inf),
            "prompt_tokens": prompts.new_tokens, **q}


def rows_of(ch: dict[str, Any], rows: IntArray) -> dict[str, Any]:
    """`chunking`'s arguments for the configurations at `rows`."""
    return {k: (v[rows] if isinstance(v, np.ndarray) and v.ndim else v) for k, v in ch.items()}


BISECT_LEVELS = 3
"""Bisection steps resolved per check (`bisect_levels`): the 2^3 - 1 rates they may visit."""


def bisect_levels(lo: FloatArray, hi: FloatArray, steps: int,
                  passes: Callable[[list[FloatArray]], BoolArray],
                  levels: int = BISECT_LEVELS) -> FloatArray:
    """Bisection of [lo, hi] per configuration, `steps` steps (the midpoint becomes lo where
    it passes, else hi); returns lo. `passes(rates)` checks a list of arrays of rates at once
    (one row of its result per array, each configuration's answer its own). Each call
    resolves the next `levels` steps: it checks every midpoint they may visit (the midpoint,
    then both halves' midpoints, ...), each computed as the step-by-step bisection computes
    it, and the walk down them takes the steps one at a time would take, to the same end, in
    a third of the calls (numpy's cost per call, not per configuration, is most of a check)."""
    rows = np.arange(lo.size)
    done = 0
    while done < steps:
        depth = min(levels, steps - done)
        # the midpoints in heap order: node k's lower half is 2k+1, its upper half 2k+2
        bounds = [(lo, hi)]
        mids: list[FloatArray] = []
        for _ in range(depth):
            halves = []
            for a, b in bounds:
                m = 0.5 * (a + b)
                mids.append(m)
                halves += [(a, m), (m, b)]
            bounds = halves
        good = passes(mids)
        at = np.stack(mids)
        node = np.zeros(lo.size, dtype=np.int64)
        for _ in range(depth):
            g = good[node, rows]
            m = at[node, rows]
            lo = np.where(g, m, lo)
            hi = np.where(g, hi, m)
            node = 2 * node + 1 + g
        done += depth
    return lo


_CAPACITY_MEMO: dict[tuple[object, ...], float] = {}
_CAPACITY_MEMO_SIZE = 8192
"""Configurations (rows) whose capacity is kept: a search evaluates up to a few hundred."""
_CAPACITY_LOCK = threading.Lock()


def _key_of(x: object) -> object:
    """A hashable stand-in for a value of the capacity search's inputs (arrays by content)."""
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype.str, x.tobytes())
    return x


def _row_keys(step: StepModel, prefill_ms: FloatArray, slots: FloatArray, wl: Workload,
              slo: Slo, budget: FloatArray, prompts: Prompts,
              ahead: FloatArray) -> list[tuple[object, ...]]:
    """One memo key per configuration: everything its capacity search reads (its own row of
    each per-configuration array, by its bits; the scalars, the request and the SLOs)."""
    n = prefill_ms.size

    def bits(x: np.ndarray[Any, Any]) -> list[object]:
        out: list[object] = (x.view(np.int64) if x.dtype == np.float64 else x).tolist()
        return [tuple(r) if isinstance(r, list) else r for r in out]   # a row of kinds
    common: list[object] = [bool(np.any(budget > 0)), wl.output_tokens, slo.ttft_ms,
                            slo.tpot_ms, slo.quantile, prompts.kind_weights]
    columns = [bits(np.ascontiguousarray(a, dtype=np.float64))
               for a in (prefill_ms, slots, budget, ahead, prompts.new_tokens,
                         prompts.kind_prefill_ms, prompts.kind_new_tokens)]
    for f in fields(step):
        x = getattr(step, f.name)
        if isinstance(x, np.ndarray) and x.shape == (n,):
            columns.append(bits(np.ascontiguousarray(x)))
        else:
            common.append((f.name, _key_of(x)))
    head = tuple(common)
    return [(head, *row) for row in zip(*columns, strict=True)]


def slo_capacity(*, step: StepModel, prefill_ms: FloatArray, slots: FloatArray,
                 wl: Workload, slo: Slo, budget: FloatArray, prompts: Prompts,
                 ahead: FloatArray | None = None) -> FloatArray:
    """Highest arrival rate per replica (req/s) at which every check still passes.

    It depends on the configuration and the request (prompt, output tokens, SLOs), not on the
    load, and each configuration's is found alone (`capacity_search`): a memo keyed by each
    configuration's inputs lets a new number of daily users or a new concurrency (the Planner,
    the Explorer's deployment box), or another search over some of the same configurations
    (the "cheaper if" alternatives), reuse it."""
    ahead = np.zeros_like(prefill_ms) if ahead is None else ahead
    keys = _row_keys(step, prefill_ms, slots, wl, slo, budget, prompts, ahead)
    with _CAPACITY_LOCK:  # the app's sessions plan in threads
        got = [_CAPACITY_MEMO.get(k) for k in keys]
    miss = [i for i, v in enumerate(got) if v is None]
    if miss:
        sel = np.asarray(miss, dtype=np.int64)
        # the chunking of the whole call (whether any configuration mixes prefill in), as
        # the search over all of them would have it
        found = capacity_search(step=step.select(sel), prefill_ms=prefill_ms[sel],
                                slots=slots[sel], wl=wl, slo=slo,
                                ch=rows_of(chunking(budget, prompts, ahead), sel)).tolist()
        with _CAPACITY_LOCK:
            for i, v in zip(miss, found, strict=True):
                got[i] = v
                _CAPACITY_MEMO[keys[i]] = v
            while len(_CAPACITY_MEMO) > _CAPACITY_MEMO_SIZE:
                _CAPACITY_MEMO.pop(next(iter(_CAPACITY_MEMO)))
    return np.asarray(got, dtype=np.float64)


CAPACITY_STEPS = 22
"""Bisection steps of the capacity search (to 2^-22 of the rate that saturates prefill)."""


def capacity_search(*, step: StepModel, prefill_ms: FloatArray, slots: FloatArray,
                    wl: Workload, slo: Slo, ch: dict[str, Any]) -> FloatArray:
    """`slo_capacity` by bisection (`bisect_levels`: every check only gets worse as the rate
    rises); `ch`: the chunked-prefill arguments (`chunking`) of these configurations. The
    first call also checks a rate of 1e-9: no capacity at all where that fails."""
    n = prefill_ms.size
    limit = slots * 4 + 4
    lo_ok: list[BoolArray] = []

    def passes(rates: list[FloatArray]) -> BoolArray:
        probe = not lo_ok
        if probe:
            rates = [*rates, np.full(n, 1e-9)]
        k = len(rates)
        tiled = np.tile(np.arange(n), k)
        r = analytic_latency(rate_per_s=np.concatenate(rates), step=step.select(tiled),
                             prefill_ms=prefill_ms[tiled], output_tokens=wl.output_tokens,
                             quantile=slo.quantile, limit=limit[tiled], tpot_quantile=False,
                             slots=slots[tiled], **rows_of(ch, tiled))
        good = ~r.saturated & (r.concurrency <= slots[tiled]) & (r.ttft_q_ms <= slo.ttft_ms)
        # TPOT p_q <= target, as `r.tpot_q_ms <= slo.tpot_ms` answers (the same gamma
        # quantile over output - 1 steps), asked only where the other checks pass
        at = np.flatnonzero(good)
        good[at] = gamma_quantile_at_most(r.decode_mean_ms[at], r.decode_var_ms2[at],
                                          slo.quantile, slo.tpot_ms,
                                          divisor=max(wl.output_tokens - 1, 1))
        good = good.reshape(k, n)
        if probe:
            lo_ok.append(good[-1])
            return np.asarray(good[:-1])
        return np.asarray(good)
    hi = np.where(prefill_ms > 0, 1e3 / np.maximum(prefill_ms, 1e-9), 1e6)
    lo = bisect_levels(np.zeros_like(hi), hi, CAPACITY_STEPS, passes)
    return np.asarray(np.where(lo_ok[0], lo, 0.0), dtype=np.float64)
