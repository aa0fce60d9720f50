"""One disaggregated layout, evaluated: the Explorer's view of the two pools
(docs/disaggregation.md, "In the Explorer").

`capacity.plan.disagg` searches for the cheapest layout; this module takes a layout a person
chose (the prefill pool's GPU, TP and replicas X, the decode pool's GPU, TP and replicas Y, the
link) and gives its figures at any request rate, with the planner's own functions and replica
shapes (`disagg.replica_shapes`), so at the counts the planner picks the figures are the
planner's (tests/test_explorer_disagg.py):

- each pool's utilisation: a prefill replica's rho = rate / X x prefill (`prefill_ttft_ms`),
  a decode replica's share of its slots in use (mean batch / slots, `decode_load`), the link's
  rho (`link_wait_ms`, the busier of the sending and the receiving NICs);
- TTFT at the SLO quantile in its parts: prefill queue + prefill, KV hand-over + link wait,
  the first decode step (their sum is `DisaggOption.ttft_ms`'s);
- TPOT at the SLO quantile (`decode_load`);
- the rate-matched counts at the rate (`pool_counts`, the fewest X as the planner picks it);
- the rates at which each pool and the link saturate (rho = 1, or the decode slots full), and
  the curves of TTFT and TPOT against the rate (`pools_curve`) for the chart
  (`capacity.report.disagg_chart`);
- optionally the two-pool event model's points (`capacity.plan.events_disagg`) at a few rates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import InputError
from capacity.model.scenario import Scenario
from capacity.model.workload import request_duration_s
from capacity.plan.disagg import (
    DEFAULT_ADMISSION_STEPS,
    DEFAULT_DESCRIPTOR_US,
    DEFAULT_LINK_EFFICIENCY,
    DEFAULT_TRANSFER_LATENCY_MS,
    RHO_MAX,
    Link,
    decode_batch_rate,
    decode_capacity_per_s,
    decode_load,
    link_for,
    link_wait_ms,
    pool_counts,
    prefill_capacity_per_s,
    prefill_ttft_ms,
    replica_shapes,
    transfer_ms,
)
from capacity.plan.events_disagg import simulate_two_pools, two_pools
from capacity.plan.options import PlanInputs
from capacity.types import FloatArray

MAX_MATCHED_REPLICAS = 256
"""The largest prefill pool `matched_counts` tries (a pool past it is not a what-if)."""
CURVE_POINTS = 120
"""Request rates per curve (`pools_curve`)."""
EVENT_REQUESTS = 800
"""Requests per event-model point (`event_points`)."""


@dataclass(frozen=True, kw_only=True)
class PoolShape:
    """One replica of a pool as the planner sees it (`disagg.replica_shapes`): a GPU at a TP
    size with the Explorer's weights and KV precision."""

    gpu: str
    gpu_name: str
    tp: int
    prefill_ms: float
    """One prompt's prefill on this replica (F6 with TP communication), ms."""
    batched: bool
    """The engine prefills every waiting prompt in one batch (`prefill_ttft_ms`)."""
    prefill_fits: bool
    """One prompt's KV fits the replica's KV budget (it can prefill at all)."""
    slots: int
    """Sequences a decode replica holds (the KV budget and the engine's max_num_seqs)."""
    step_ms: tuple[float, ...]
    """The decode step at batch 0..slots (F4 with TP communication), ms."""
    handover_bytes: float
    """One prompt's KV per GPU of the group (`disagg.handover_bytes`), bytes."""
    descriptors: float
    """Transfer descriptors one rank posts for a prompt (`disagg_handover.descriptors_per_rank`)."""
    price_per_gpu_hour: float

    @property
    def steps(self) -> FloatArray:
        return np.asarray(self.step_ms, dtype=np.float64)


def pool_shapes(inp: PlanInputs, catalog: Catalog | None = None
                ) -> dict[tuple[str, int], PoolShape]:
    """Every (GPU, TP) replica shape of `inp` (its GPUs, its one weight format and KV
    precision), keyed by (GPU key, TP): the planner's `replica_shapes`, unchanged."""
    if inp.formats is None or len(inp.formats) != 1 or len(inp.kv_dtypes) != 1:
        raise InputError("the two pools take one weight format and one KV precision")
    _, units, grid = replica_shapes(inp, catalog or default_catalog())
    return {(u.gpu.key, u.tp): PoolShape(
        gpu=u.gpu.key, gpu_name=u.gpu.name, tp=u.tp, prefill_ms=u.prefill_ms,
        batched=u.batched, prefill_fits=u.prefill_fits, slots=u.slots,
        step_ms=tuple(float(v) for v in grid[j, : u.slots + 1]),
        handover_bytes=u.send_bytes, descriptors=u.descriptors, price_per_gpu_hour=u.price)
        for j, u in enumerate(units)}


@dataclass(frozen=True, kw_only=True)
class PoolLayout:
    """X prefill replicas and Y decode replicas, their link, and the workload and SLOs they
    are judged by."""

    prefill: PoolShape
    prefill_replicas: int
    decode: PoolShape
    decode_replicas: int
    link: Link
    output_tokens: int
    quantile: float
    ttft_slo_ms: float
    tpot_slo_ms: float
    request_latency_ms: float = 0.0
    """Time a request spends outside the GPU before the prefill pool sees it, ms
    (`PlanInputs.request_latency_ms`): a part of every TTFT."""

    def __post_init__(self) -> None:
        if self.prefill_replicas < 1 or self.decode_replicas < 1:
            raise InputError(f"each pool needs at least one replica: got "
                             f"{self.prefill_replicas} prefill and {self.decode_replicas} "
                             "decode replicas")
        if self.decode.slots < 1:
            raise InputError(f"a decode replica of {self.decode.tp} x {self.decode.gpu_name} "
                             "holds no sequence (the weights leave no room for one request's KV)")
        if not self.prefill.prefill_fits:
            raise InputError(f"a prefill replica of {self.prefill.tp} x "
                             f"{self.prefill.gpu_name} cannot hold one prompt's KV")
        if self.output_tokens < 1:
            raise InputError(f"output tokens must be >= 1, got {self.output_tokens}")

    @property
    def n_gpus(self) -> int:
        return self.prefill_replicas * self.prefill.tp + self.decode_replicas * self.decode.tp

    @property
    def ratio(self) -> str:
        """'2P+6D', as `DisaggOption.ratio`."""
        return f"{self.prefill_replicas}P+{self.decode_replicas}D"

    @property
    def busy_ms(self) -> float:
        """The time one hand-over holds the NICs (`Link.busy_ms`: the bytes and the decode
        rank's descriptors), ms."""
        return float(self.link.busy_ms(self.prefill.handover_bytes, self.decode.handover_bytes,
                                       self.decode.descriptors))

    def handover_ms(self, decode_step_ms: float) -> float:
        """One hand-over on idle links with the decode pool at a step of `decode_step_ms`
        (`disagg_handover.transfer_ms`: latency + busy + admission steps), ms."""
        return float(transfer_ms(send_bytes_per_gpu=self.prefill.handover_bytes,
                                 recv_bytes_per_gpu=self.decode.handover_bytes, link=self.link,
                                 descriptors=self.decode.descriptors,
                                 decode_step_ms=decode_step_ms))


def layout(inp: PlanInputs, shapes: dict[tuple[str, int], PoolShape], *, prefill_gpu: str,
           prefill_tp: int, prefill_replicas: int, decode_gpu: str, decode_tp: int,
           decode_replicas: int, efficiency: float = DEFAULT_LINK_EFFICIENCY,
           latency_ms: float = DEFAULT_TRANSFER_LATENCY_MS,
           descriptor_us: float = DEFAULT_DESCRIPTOR_US,
           admission_steps: float = DEFAULT_ADMISSION_STEPS,
           catalog: Catalog | None = None) -> PoolLayout:
    """The layout of two shapes of `shapes` (`pool_shapes`) and counts, on the link `link_for`
    picks for all their GPUs, judged by `inp`'s workload and SLOs. InputError names a shape
    the planner does not build (a TP the model or the node does not allow) or a bad count."""
    cat = catalog or default_catalog()
    for gpu, tp, role in ((prefill_gpu, prefill_tp, "prefill"), (decode_gpu, decode_tp,
                                                                  "decode")):
        if (gpu, tp) not in shapes:
            sizes = sorted(t for g, t in shapes if g == gpu)
            raise InputError(f"no {role} replica of TP {tp} on {cat.gpu(gpu).name} "
                             + (f"(the sizes that fit: {', '.join(map(str, sizes))})" if sizes
                                else "(no TP size on it holds the model)"))
    p, d = shapes[(prefill_gpu, prefill_tp)], shapes[(decode_gpu, decode_tp)]
    link = link_for(cat.gpu(prefill_gpu), cat.gpu(decode_gpu),
                    pool_gpus=prefill_replicas * prefill_tp + decode_replicas * decode_tp,
                    efficiency=efficiency, latency_ms=latency_ms, descriptor_us=descriptor_us,
                    admission_steps=admission_steps)
    slo = inp.slo
    return PoolLayout(prefill=p, prefill_replicas=prefill_replicas, decode=d,
                      decode_replicas=decode_replicas, link=link,
                      output_tokens=inp.workload.output_tokens, quantile=slo.quantile,
                      ttft_slo_ms=slo.ttft_ms, tpot_slo_ms=slo.tpot_ms,
                      request_latency_ms=inp.request_latency_ms)


@dataclass(frozen=True, kw_only=True)
class PoolFigures:
    """A layout's figures at one request rate (the whole deployment's, req/s). Times in ms at
    the SLO quantile unless named mean; utilisations as shares (1 = saturated)."""

    rate_per_s: float
    prefill_utilization: float
    """A prefill replica's rho = rate / X x prefill time."""
    decode_batch: float
    """A decode replica's mean batch (Little's law, `decode_load`)."""
    decode_utilization: float
    """A decode replica's share of its slots in use: mean batch / slots."""
    link_utilization: float
    """The busier of a prefill replica's sending and a decode replica's receiving NICs."""
    prefill_queue_ms: float
    """The prefill pool's quantile less one prefill: the wait and its batch-mates."""
    prefill_ms: float
    transfer_ms: float
    """One hand-over on idle links: latency, bytes, descriptors and the decode engine's
    admission steps at this rate's decode step (`PoolLayout.handover_ms`)."""
    link_wait_ms: float
    """The sending and the receiving waits' quantiles."""
    first_step_ms: float
    request_ms: float
    """The request's time outside the GPU (`PoolLayout.request_latency_ms`)."""
    ttft_ms: float
    """The sum of the six parts above (`DisaggOption.ttft_ms`)."""
    tpot_ms: float
    tpot_mean_ms: float
    prefill_capacity_per_s: float
    """Per prefill replica, req/s, at the TTFT left after the hand-over, its wait and the
    first step at this rate (`prefill_capacity_per_s`)."""
    decode_capacity_per_s: float
    """Per decode replica, req/s, at the TPOT SLO (`decode_capacity_per_s`)."""

    meets_ttft: bool
    """TTFT within its SLO."""
    meets_tpot: bool
    """TPOT within its SLO."""


def pools_at(lay: PoolLayout, rate_per_s: float) -> PoolFigures:
    """The layout's figures at `rate_per_s`, with the planner's functions and its sums
    (`disagg_options`): rate / X on each prefill replica and its sending NICs, rate / Y on each
    decode replica and its receiving NICs; TTFT = prefill quantile + hand-over + both waits'
    quantiles + the first decode step. Unit: ms, req/s."""
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise InputError(f"request rate must be > 0 req/s, got {rate_per_s}")
    q, x, y = lay.quantile, lay.prefill_replicas, lay.decode_replicas
    busy = lay.busy_ms
    load = decode_load(lay.decode.steps, rate_per_s / y, lay.output_tokens, q)
    _, wq_s, rho_s = link_wait_ms(rate_per_s / x, busy, q)
    _, wq_r, rho_r = link_wait_ms(rate_per_s / y, busy, q)
    _, pre_q, rho_p = prefill_ttft_ms(rate_per_s / x, lay.prefill.prefill_ms, q,
                                      lay.prefill.batched)
    wait = float(wq_s) + float(wq_r)
    hand = lay.handover_ms(load.first_step_ms)
    req = lay.request_latency_ms
    ttft = float(pre_q) + hand + wait + load.first_step_ms + req
    budget = lay.ttft_slo_ms - hand - wait - load.first_step_ms - req
    cap_p = float(prefill_capacity_per_s(lay.prefill.prefill_ms, budget, q, lay.prefill.batched))
    return PoolFigures(
        rate_per_s=rate_per_s, prefill_utilization=float(rho_p), decode_batch=load.batch,
        decode_utilization=load.batch / lay.decode.slots,
        link_utilization=max(float(rho_s), float(rho_r)),
        prefill_queue_ms=float(pre_q) - lay.prefill.prefill_ms,
        prefill_ms=lay.prefill.prefill_ms, transfer_ms=hand, link_wait_ms=wait,
        first_step_ms=load.first_step_ms, request_ms=req,
        ttft_ms=ttft, tpot_ms=load.tpot_q_ms, tpot_mean_ms=load.tpot_ms, prefill_capacity_per_s=cap_p,
        decode_capacity_per_s=decode_capacity_per_s(lay.decode.steps, lay.output_tokens,
                                                     lay.tpot_slo_ms, q),
        meets_ttft=ttft <= lay.ttft_slo_ms, meets_tpot=load.tpot_q_ms <= lay.tpot_slo_ms)


def matched_counts(lay: PoolLayout, rate_per_s: float, catalog: Catalog | None = None
                   ) -> tuple[int, int] | None:
    """The rate-matched counts (X, Y) of the layout's two shapes at `rate_per_s`
    (`pool_counts`), as the planner picks them: Y = ceil(rate / decode capacity), then the
    fewest X whose prefill capacity at the TTFT left over (which grows with X: less link wait)
    covers rate / X, on the link `link_for` gives that many GPUs. None when no X up to
    MAX_MATCHED_REPLICAS does (a pool meets no load, or the link is saturated)."""
    fig = pools_at(lay, rate_per_s)
    if fig.decode_capacity_per_s <= 0:
        return None
    y = math.ceil(rate_per_s / fig.decode_capacity_per_s - 1e-9)
    # no fewer than keep a prefill replica within RHO_MAX (the planner's bound)
    low = max(1, math.ceil(rate_per_s * lay.prefill.prefill_ms / 1e3 / RHO_MAX - 1e-9))
    for x in range(low, MAX_MATCHED_REPLICAS + 1):
        trial = with_counts(lay, x, y, catalog)
        recv = float(link_wait_ms(rate_per_s / y, trial.busy_ms, lay.quantile)[2])
        if recv > RHO_MAX and not trial.link.scale_up:
            return None  # the receiving NICs: more prefill replicas never relieve them
        f = pools_at(trial, rate_per_s)
        if f.prefill_capacity_per_s <= 0 or f.link_utilization > RHO_MAX:
            continue
        px, _ = pool_counts(rate_per_s, f.prefill_capacity_per_s, f.decode_capacity_per_s)
        if px <= x:
            return x, y
    return None


def with_counts(lay: PoolLayout, x: int, y: int, catalog: Catalog | None = None
                ) -> PoolLayout:
    """`lay` at X, Y replicas, its link chosen again for that many GPUs (`link_for`); every
    other field as `lay` has it (the request latency outside the GPU among them: a copy that
    named its fields dropped it, and the pools' TTFT on a typical basis lost 7.8 ms on
    `capacity plan --prefill-pool` and the Explorer where `capacity size` kept it)."""
    cat = catalog or default_catalog()
    link = link_for(cat.gpu(lay.prefill.gpu), cat.gpu(lay.decode.gpu),
                    pool_gpus=x * lay.prefill.tp + y * lay.decode.tp,
                    efficiency=lay.link.efficiency, latency_ms=lay.link.latency_ms,
                    descriptor_us=lay.link.descriptor_us,
                    admission_steps=lay.link.admission_steps)
    return replace(lay, prefill_replicas=x, decode_replicas=y, link=link)


@dataclass(frozen=True, kw_only=True)
class Saturation:
    """The request rates (req/s, the whole deployment's) at which each part saturates."""

    prefill_per_s: float
    """X x 1000 / prefill ms: the prefill replicas busy all the time (rho = 1)."""
    decode_per_s: float
    """Y x lambda(slots): the decode replicas' mean batch fills their slots
    (`decode_batch_rate` at the slots)."""
    link_per_s: float
    """min(X, Y) x 1000 / hand-over busy ms: the busier side's NICs busy all the time."""

    @property
    def first_per_s(self) -> float:
        return min(self.prefill_per_s, self.decode_per_s, self.link_per_s)


def saturation(lay: PoolLayout) -> Saturation:
    """Where each pool and the link saturate. Units: req/s. Example: X = 2 replicas of a
    400 ms prefill saturate at 2 x 1000 / 400 = 5 req/s; Y = 1 replica of s(b) = 10 + b ms,
    64 slots, 10 output tokens at 63 / (10 x 0.074 s) = 85.1 req/s."""
    lam = decode_batch_rate(lay.decode.steps, lay.output_tokens)
    busy = lay.busy_ms
    return Saturation(
        prefill_per_s=lay.prefill_replicas * 1e3 / max(lay.prefill.prefill_ms, 1e-9),
        decode_per_s=lay.decode_replicas * float(lam[-1]),
        link_per_s=(min(lay.prefill_replicas, lay.decode_replicas) * 1e3 / busy
                    if busy > 0 else math.inf))


@dataclass(frozen=True, kw_only=True)
class PoolsCurve:
    """TTFT and TPOT at the SLO quantile against the request rate (inf where saturated)."""

    rate_per_s: FloatArray
    ttft_ms: FloatArray
    tpot_ms: FloatArray
    prefill_utilization: FloatArray
    decode_utilization: FloatArray
    link_utilization: FloatArray
    saturation: Saturation


def curve_rates(lay: PoolLayout, rate_per_s: float, points: int = CURVE_POINTS) -> FloatArray:
    """The rates a curve is drawn at (req/s): from near 0 to 1.15 x the larger of `rate_per_s`
    and the last saturation within 3 x the first (a part that saturates much later would
    squash the chart; its rate is given in words)."""
    sat = saturation(lay)
    first = sat.first_per_s
    near = [r for r in (sat.prefill_per_s, sat.decode_per_s, sat.link_per_s)
            if r <= 3.0 * first and math.isfinite(r)]
    top = 1.15 * max([rate_per_s, *near])
    return np.linspace(top / points, top, points)


def pools_curve(lay: PoolLayout, rates: npt.ArrayLike) -> PoolsCurve:
    """TTFT and TPOT at the SLO quantile at each of `rates` (req/s), `pools_at`'s sums over an
    array (the capacities left out); inf past a saturation."""
    r = np.asarray(rates, dtype=np.float64)
    if r.size == 0 or not np.all(np.isfinite(r) & (r > 0)):
        raise InputError("request rates must be > 0 req/s")
    q, x, y = lay.quantile, lay.prefill_replicas, lay.decode_replicas
    busy = lay.busy_ms
    loads = [decode_load(lay.decode.steps, float(v) / y, lay.output_tokens, q) for v in r]
    first = np.asarray([ld.first_step_ms for ld in loads])
    _, wq_s, rho_s = link_wait_ms(r / x, busy, q)
    _, wq_r, rho_r = link_wait_ms(r / y, busy, q)
    _, pre_q, rho_p = prefill_ttft_ms(r / x, lay.prefill.prefill_ms, q, lay.prefill.batched)
    return PoolsCurve(
        rate_per_s=r, ttft_ms=pre_q + lay.link.latency_ms + busy + lay.link.admission_ms(first)
        + wq_s + wq_r + first + lay.request_latency_ms,
        tpot_ms=np.asarray([ld.tpot_q_ms for ld in loads]), prefill_utilization=rho_p,
        decode_utilization=np.asarray([ld.batch for ld in loads]) / lay.decode.slots,
        link_utilization=np.maximum(rho_s, rho_r), saturation=saturation(lay))


def closed_loop_rate_per_s(concurrency: float, ttft_s: float, tpot_ms: float,
                           output_tokens: int) -> float:
    """The request rate C requests in flight complete at: lambda = C / W, W = TTFT + output
    tokens x TPOT (Little's law; `request_duration_s`, F9). Unit: req/s. Example: 50 requests
    of 3 s + 256 x 20 ms = 8.12 s: 6.158 req/s."""
    w = float(request_duration_s(ttft_s, output_tokens, tpot_ms))
    if not (w > 0 and math.isfinite(w)):
        raise InputError("a request's duration must be > 0 s to turn concurrency into a rate")
    return concurrency / w


@dataclass(frozen=True, kw_only=True)
class EventPoint:
    """The two-pool event model at one rate: TTFT and TPOT at the SLO quantile's nearest
    reported percentile (p50, p90 or p99), ms."""

    rate_per_s: float
    percentile: float
    ttft_ms: float
    tpot_ms: float


def event_points(lay: PoolLayout, prefill: Scenario, decode: Scenario, rates: Sequence[float],
                 *, engine: str | EngineProfile = DEFAULT_ENGINE,
                 n_requests: int = EVENT_REQUESTS, seed: int = 0) -> list[EventPoint]:
    """The event model with two pools (`events_disagg.simulate_two_pools`) at `rates`: the
    layout's counts and hand-over at each rate (`PoolLayout.handover_ms` at `pools_at`'s
    decode step; its latency and admission steps hold no NIC), one prefill replica `prefill`
    and one decode replica `decode` (Scenarios with n_gpus = TP), the engine's scheduling.
    Rates at or past the first saturation are left out (the queue never settles)."""
    base = two_pools(prefill, decode, output_tokens=lay.output_tokens,
                     transfer_ms=lay.link.latency_ms + lay.busy_ms,
                     transfer_latency_ms=lay.link.latency_ms,
                     prefill_replicas=lay.prefill_replicas,
                     decode_replicas=lay.decode_replicas, engine=engine)
    pct = min((0.5, 0.9, 0.99), key=lambda p: abs(p - lay.quantile))
    first = saturation(lay).first_per_s
    out = []
    for r in rates:
        if not 0 < r < first:
            continue
        hand = pools_at(lay, float(r)).transfer_ms
        pools = replace(base, transfer_ms=hand, transfer_latency_ms=hand - lay.busy_ms)
        res = simulate_two_pools(pools, rate_per_s=float(r), n_requests=n_requests, seed=seed)
        out.append(EventPoint(rate_per_s=float(r), percentile=pct, ttft_ms=res.ttft_ms[pct],
                              tpot_ms=res.tpot_ms[pct]))
    return out
