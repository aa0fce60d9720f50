"""Disaggregated prefill/decode (docs/disaggregation.md): a prefill pool and a decode pool that
hand each request's KV cache over a link, planned and ranked against the aggregated planner.

A request is prefilled on one replica of the prefill pool (its GPU, TP, X replicas), its KV
crosses a link to one replica of the decode pool (its GPU, TP, Y replicas), and the decode pool
produces every output token (the first in the step the request joins, as vLLM's P/D proxy
streams it). Formulas (units in the names; sources in each docstring):

- the hand-over (`capacity.plan.disagg_handover`): bytes per GPU F2 at the pool's TP
  (`handover_bytes`); the time: latency + max(sent per prefill GPU / its link, received per
  decode GPU / its link) + descriptors x their cost + the decode engine's admission steps
  (`transfer_ms`); the link is NVLink / Infinity Fabric when both pools fit one scale-up
  domain, else each GPU's scale-out NIC (`link_for`, data/nodes.toml);
- contention: each prefill replica's sending NICs and each decode replica's receiving NICs are
  FIFO servers with deterministic service; their waits are M/D/1's (`link_wait_ms`);
- prefill pool: M/D/1 per replica, with the batching factor of batched prefill
  (`prefill_ttft_ms`, as `capacity.plan.queueing`); decode pool: pure decode steps (F4,
  `StepModel`), the number in the pool by Little's law (`decode_load`);
- pool sizes: X = ceil(rate / prefill capacity), Y = ceil(rate / decode capacity), each
  capacity the highest rate per replica that meets its share of the SLOs (`compare`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Catalog, Gpu, Model, ModelVariant, default_catalog
from capacity.catalog.nodes import node_shape
from capacity.errors import InputError
from capacity.model.cost import HOURS_PER_MONTH, cost_per_mtok
from capacity.model.kv import DEFAULT_BLOCK_SIZE, held_request_bytes, kv_request_bytes
from capacity.model.memory import max_concurrency, vram_budget
from capacity.model.moe import gemm_bytes_per_param, routing_on
from capacity.model.parallel import DEFAULT_NCCL_GB, check_tp, tp_comm_line, tp_comm_ms
from capacity.model.prefill import prefill_flops, prefill_seconds_by_parts
from capacity.model.roofline import counts_as_engines
from capacity.model.workload import single_requests
from capacity.plan.disagg_handover import (
    DEFAULT_ADMISSION_STEPS as DEFAULT_ADMISSION_STEPS,
)
from capacity.plan.disagg_handover import (
    DEFAULT_DESCRIPTOR_US as DEFAULT_DESCRIPTOR_US,
)
from capacity.plan.disagg_handover import (
    DEFAULT_LINK_EFFICIENCY as DEFAULT_LINK_EFFICIENCY,
)
from capacity.plan.disagg_handover import (
    DEFAULT_TRANSFER_LATENCY_MS as DEFAULT_TRANSFER_LATENCY_MS,
)
from capacity.plan.disagg_handover import Link as Link
from capacity.plan.disagg_handover import descriptors_per_rank, handover_busy_ms
from capacity.plan.disagg_handover import handover_bytes as handover_bytes
from capacity.plan.disagg_handover import link_for as link_for
from capacity.plan.disagg_handover import transfer_ms as transfer_ms
from capacity.plan.options import Option, Plan, PlanInputs
from capacity.plan.queueing import wait_quantile_ms
from capacity.plan.search import plan as plan_aggregated
from capacity.plan.units import plan_step
from capacity.stats import normal_quantile
from capacity.types import FloatArray
from capacity.units import GB

RHO_MAX = 0.95
"""Highest utilisation a prefill replica or a link is planned at (queues past it are long)."""
PREFILL_GRID = 48
"""Bisection steps on a prefill replica's utilisation (`prefill_capacity_per_s`)."""


# ---------------------------------------------------------------------------------------------
# Contention on the link


def link_wait_ms(rate_per_s: npt.ArrayLike, service_ms: npt.ArrayLike, quantile: float
                 ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Contention on one link: (mean wait ms, q-quantile wait ms, utilisation rho).

    The link is a FIFO server with deterministic service (equal prompts): rho = lambda x S,
    W = rho S / (2 (1 - rho)) (M/D/1, Pollaczek-Khinchine; `queueing.md1_mean_wait_ms`), the
    quantile from the exponential tail (`queueing.wait_quantile_ms`); inf at rho >= 1.
    Source: Kleinrock, Queueing Systems vol. 1, eq. 5.73. Example: 2 req/s on a 100 ms
    transfer: rho 0.2, W = 0.2 x 100 / 1.6 = 12.5 ms."""
    lam = np.asarray(rate_per_s, dtype=np.float64)
    s_ms = np.asarray(service_ms, dtype=np.float64)
    rho = lam * s_ms / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):  # md1_mean_wait_ms over arrays
        mean = np.where(rho < 1, rho * s_ms / (2.0 * (1.0 - rho)), np.inf)
    return mean, wait_quantile_ms(mean, rho, quantile), rho


# ---------------------------------------------------------------------------------------------
# The two pools in closed form


def prefill_ttft_ms(rate_per_s: npt.ArrayLike, prefill_ms: npt.ArrayLike, quantile: float,
                    batched: npt.ArrayLike = True) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The prefill pool's part of TTFT on one replica: (mean ms, q-quantile ms, rho).

    Only prompts run there (no decode steps between them), so `analytic_latency`'s form with
    s = 0: E = t + f W, q-quantile t + f W_q, W the M/D/1 wait of the prompts one after another
    (rho = lambda t), f = (1 + 2 rho) / (1 + rho) when every prompt waiting at a scheduling
    point is prefilled in one batch (the chapter's profile), 1 for FCFS one at a time. Source:
    docs/method.md, "Queueing"; Kleinrock eq. 5.73. Example: t 400 ms at 1 req/s, FCFS:
    rho 0.4, W = 0.4 x 400 / 1.2 = 133 ms, mean 533 ms."""
    t = np.asarray(prefill_ms, dtype=np.float64)
    w, wq, rho = link_wait_ms(rate_per_s, t, quantile)
    f = np.where(np.asarray(batched, dtype=bool), (1 + 2 * rho) / (1 + rho), 1.0)
    return t + f * w, t + f * wq, rho


def prefill_capacity_per_s(prefill_ms: npt.ArrayLike, budget_ms: npt.ArrayLike, quantile: float,
                           batched: npt.ArrayLike = True) -> FloatArray:
    """The highest arrival rate (req/s) at which one prefill replica keeps its part of TTFT
    (`prefill_ttft_ms`'s quantile) within `budget_ms`, at rho <= RHO_MAX; 0 where even an
    idle replica misses it. Bisection on rho (PREFILL_GRID steps; the quantile grows with
    rho). Unit: req/s per replica."""
    t = np.asarray(prefill_ms, dtype=np.float64)
    b = np.asarray(budget_ms, dtype=np.float64)
    t, b = np.broadcast_arrays(t, b)
    lo = np.zeros(t.shape)
    hi = np.full(t.shape, RHO_MAX)
    ok_hi = prefill_ttft_ms(hi / np.maximum(t, 1e-9) * 1e3, t, quantile, batched)[1] <= b
    lo = np.where(ok_hi, hi, lo)
    for _ in range(PREFILL_GRID):
        mid = (lo + hi) / 2
        ok = prefill_ttft_ms(mid / np.maximum(t, 1e-9) * 1e3, t, quantile, batched)[1] <= b
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return np.asarray(np.where(t <= b, lo / np.maximum(t, 1e-9) * 1e3, 0.0))


@dataclass(frozen=True, kw_only=True)
class DecodeLoad:
    """One decode replica at an arrival rate (closed form, `decode_load`)."""

    batch: float
    """Mean batch a request decodes in (itself + the mean others)."""
    batch_q: float
    """The batch at the SLO percentile."""
    tpot_ms: float
    tpot_q_ms: float
    first_step_ms: float
    """The step a request joins in (its first token), at the mean batch."""


def decode_batch_rate(step_ms: FloatArray, output_tokens: int) -> FloatArray:
    """Arrival rate per decode replica (req/s) at which the mean batch is B = 0, 1, 2...:
    lambda(B) = (B - 1) / (n x s(B)) for B >= 1 (Little: the others in the pool, B - 1, are
    lambda x the n steps a request stays, each s(B) ms; M/G/infinity below the slots), 0 at
    B <= 1. Unit: req/s; step_ms in ms, indexed by batch."""
    b = np.arange(step_ms.shape[-1], dtype=np.float64)
    return np.asarray(np.maximum(b - 1, 0) / (output_tokens * step_ms / 1e3))


def _batch_q(b: FloatArray | float, z: float) -> FloatArray:
    """The batch at the quantile: 1 + L + z sqrt(L), L = B - 1 others ~ Poisson(L) (normal
    approximation)."""
    others = np.maximum(np.asarray(b, dtype=np.float64) - 1, 0)
    return np.asarray(1 + others + z * np.sqrt(others))


def decode_load(step_ms: FloatArray, rate_per_s: float, output_tokens: int,
                quantile: float) -> DecodeLoad:
    """TPOT of one decode replica under `rate_per_s` (pure decode steps: no prefill runs there).
    step_ms: F4's step at batch 0..slots (ms). The mean batch solves lambda(B) = rate
    (`decode_batch_rate`, interpolated); TPOT is s(B), its quantile s(B_q) with B_q from the
    Poisson number in the pool (`_batch_q`). A rate past the slots gives inf."""
    lam = decode_batch_rate(step_ms, output_tokens)
    grid = np.arange(step_ms.size, dtype=np.float64)
    if rate_per_s > lam[-1]:
        return DecodeLoad(batch=math.inf, batch_q=math.inf, tpot_ms=math.inf,
                          tpot_q_ms=math.inf, first_step_ms=math.inf)
    b = float(np.interp(rate_per_s, lam[1:], grid[1:])) if rate_per_s > 0 else 1.0
    bq = float(_batch_q(b, normal_quantile(quantile)))
    s = float(np.interp(b, grid, step_ms))
    sq = float(np.interp(bq, grid, step_ms)) if bq <= grid[-1] else math.inf
    return DecodeLoad(batch=b, batch_q=bq, tpot_ms=s, tpot_q_ms=sq, first_step_ms=s)


def decode_capacity_per_s(step_ms: FloatArray, output_tokens: int, tpot_slo_ms: float,
                          quantile: float) -> float:
    """The highest arrival rate per decode replica (req/s) whose TPOT quantile meets the SLO
    within the slots: lambda(B) at the largest B with s(B_q) <= SLO and B_q <= slots (lambda
    grows with B). 0 when one sequence alone misses it."""
    grid = np.arange(step_ms.size, dtype=np.float64)
    bq = _batch_q(grid, normal_quantile(quantile))
    sq = np.interp(np.minimum(bq, grid[-1]), grid, step_ms)
    ok = (grid >= 1) & (bq <= grid[-1]) & (sq <= tpot_slo_ms)
    if not ok.any():
        return 0.0
    return float(decode_batch_rate(step_ms, output_tokens)[int(np.flatnonzero(ok)[-1])])


def pool_counts(rate_per_s: float, prefill_capacity_per_s: float,
                decode_capacity_per_s: float) -> tuple[int, int]:
    """Rate matching: (X, Y) = (ceil(rate / prefill capacity), ceil(rate / decode capacity)),
    the fewest replicas of each pool that both sustain `rate_per_s` (each capacity per replica,
    req/s). Example: 6 req/s, 2.5 and 4 req/s per replica -> 3P + 2D."""
    if prefill_capacity_per_s <= 0 or decode_capacity_per_s <= 0:
        raise InputError("a pool that meets no load cannot be sized")
    return (max(1, math.ceil(rate_per_s / prefill_capacity_per_s - 1e-9)),
            max(1, math.ceil(rate_per_s / decode_capacity_per_s - 1e-9)))


# ---------------------------------------------------------------------------------------------
# Options and the search


@dataclass(frozen=True, kw_only=True)
class DisaggOption:
    """One disaggregated deployment: X prefill replicas, Y decode replicas and their link, with
    its figures at the design load (peak x (1 + headroom))."""

    prefill_gpu: str
    prefill_gpu_name: str
    prefill_tp: int
    prefill_replicas: int
    decode_gpu: str
    decode_gpu_name: str
    decode_tp: int
    decode_replicas: int
    weights: str
    kv_dtype: str
    link: Link
    design_rate_per_s: float
    prefill_ms: float
    """One prompt's prefill on a prefill replica (F6 with TP communication), ms."""
    prefill_utilization: float
    transfer_ms: float
    """One hand-over on an idle link, ms (`transfer_ms`: latency, bytes, descriptors and the
    decode engine's admission steps at the design load's decode step)."""
    transfer_wait_ms: float
    """The SLO quantile of the wait for the links (sending and receiving), ms."""
    link_utilization: float
    """The busier of a prefill replica's sending and a decode replica's receiving NICs."""
    ttft_ms: float
    """Prefill-pool quantile + transfer + its wait quantile + the first decode step, ms."""
    tpot_ms: float
    """TPOT at the SLO quantile, ms."""
    tpot_mean_ms: float
    decode_batch: float
    prefill_capacity_per_s: float
    """Per prefill replica, req/s, at its part of the TTFT SLO."""
    decode_capacity_per_s: float
    """Per decode replica, req/s, at the TPOT SLO."""
    price_per_hour_prefill: float
    price_per_hour_decode: float
    spare_gpus: int = 0
    cost_per_month: float
    currency: str

    @property
    def n_gpus(self) -> int:
        """Serving GPUs of both pools."""
        return self.prefill_replicas * self.prefill_tp + self.decode_replicas * self.decode_tp

    @property
    def ratio(self) -> str:
        """'2P+6D': prefill and decode replicas."""
        return f"{self.prefill_replicas}P+{self.decode_replicas}D"

    @property
    def capacity_rate_per_s(self) -> float:
        """SLO-feasible capacity, req/s: the smaller pool's, min(X x prefill capacity per
        replica, Y x decode capacity per replica), each at its share of the SLOs (`compare`).
        Example: 2 x 1.5 and 1 x 2.5 req/s -> 2.5 req/s."""
        return min(self.prefill_replicas * self.prefill_capacity_per_s,
                   self.decode_replicas * self.decode_capacity_per_s)

    def cost_per_mtok(self, output_tokens: int) -> float:
        """Cost per million output tokens at SLO capacity, in `currency` (F7, as
        `Option.cost_per_mtok`): the deployment's cost per hour (cost per month / 730 h, both
        pools and the spare) / (`capacity_rate_per_s` x output tokens per request). Example:
        7,300 a month (10 an hour) at 2.5 req/s x 200 tokens: 10 / 1.8e6 x 1e6 = 5.556."""
        return float(cost_per_mtok(self.cost_per_month / HOURS_PER_MONTH, 1,
                                   self.capacity_rate_per_s * output_tokens))

    def cost_per_mtok_design(self, output_tokens: int) -> float:
        """Cost per million output tokens at the design load, in `currency` (F7, as
        `Option.cost_per_mtok_design`): cost per hour / (design rate x output tokens).
        Example: 10 an hour at 2 req/s x 200 tokens: 10 / 1.44e6 x 1e6 = 6.944."""
        return float(cost_per_mtok(self.cost_per_month / HOURS_PER_MONTH, 1,
                                   self.design_rate_per_s * output_tokens))

    @property
    def label(self) -> str:
        """'2P+6D: prefill 2 x (4 x H200 SXM), decode 6 x (2 x H200 SXM), fp8, fp8 KV, nvlink'."""
        return (f"{self.ratio}: prefill {self.prefill_replicas} x ({self.prefill_tp} x "
                f"{self.prefill_gpu_name}), decode {self.decode_replicas} x ({self.decode_tp} x "
                f"{self.decode_gpu_name}), {self.weights}, {self.kv_dtype} KV, {self.link.kind}")


@dataclass(frozen=True, kw_only=True)
class ReplicaShape:
    """One replica shape (GPU x TP x weights x KV) as both pools see it."""

    gpu: Gpu
    tp: int
    weights: str
    kv: str
    price: float
    prefill_ms: float
    prefill_fits: bool
    slots: int
    send_bytes: float
    descriptors: float
    """Transfer descriptors one rank posts for a prompt (`descriptors_per_rank`)."""
    batched: bool
    """The engine prefills every waiting prompt in one batch (no token budget, or one that holds
    two prompts or more): `prefill_ttft_ms`'s batching factor applies."""


def _units(inp: PlanInputs, cat: Catalog) -> tuple[Model, list[ReplicaShape], FloatArray]:
    """Every replica shape and the decode step of each at batch 0..max slots (one StepModel,
    vectorized over the shapes: F4 with TP communication, as `evaluate` and the planner)."""
    base = cat.variant(inp.model)
    model = base.model
    if inp.formats is None and model.key != inp.model.strip().lower():
        variants: list[ModelVariant] = [base]
    else:
        keys = inp.formats or tuple(f.key for f in cat.formats_for(model))
        variants = [cat.variant(model.key, k) for k in keys]
    wl = inp.workload
    prompt = wl.prompt
    pf = prefill_flops(model, prompt, by_operator=counts_as_engines(inp.step_method))
    gpus = [cat.gpu(k) for k in (inp.gpus if inp.gpus is not None else sorted(cat.gpus))]
    units: list[ReplicaShape] = []
    desc = descriptors_per_rank(model, prompt)
    sent: dict[tuple[str, int], float] = {}
    cols: dict[str, list[float]] = {
        k: [] for k in ("w", "kvs", "bw", "fl", "ca", "cb", "ck", "cc", "lk", "eff", "eta")}
    for g in gpus:
        prof = inp.profile_for(g.key, g.memory_gb)
        budget = prof.token_budget_tokens if prof.chunked else 0
        largest = node_shape(g.key).max_gpus_per_node
        held, block = ((wl.context_tokens, DEFAULT_BLOCK_SIZE) if prof.kv_admission == "context"
                       else (wl.held_tokens, prof.kv_block_tokens))
        for tp in (1, 2, 4, 8):
            if tp > largest or (tp > 1 and not inp.allow_tp):
                continue
            try:
                check_tp(model, tp, tp)
            except InputError:
                continue
            comm = tp_comm_line(model, g, tp)
            comm_prompt = float(tp_comm_ms(model, g, tp, float(prompt)))
            for v in variants:
                fl = g.tflops_for(v.format.compute_dtype) * tp
                pre = float(prefill_seconds_by_parts(
                    pf, fl, inp.mfu_on(g, v.format.compute_dtype, model), inp.attn_mfu,
                    inp.fixed_prefill_ms(model) / 1e3,
                    half_tokens=inp.mfu_half_on(model), routing=routing_on(
                        model, g.tflops_for(v.format.compute_dtype), g.bandwidth_gb_s,
                        gemm_bytes_per_param(v)))) * 1e3
                vb = vram_budget(vram_gb=g.memory_for(inp.runtime_memory), util=inp.util,
                                 weights_gb=v.weights_gb / tp,
                                 overhead_gb=inp.overhead_gb,
                                 nccl_gb=DEFAULT_NCCL_GB if tp > 1 else 0.0)
                for kv in inp.kv_dtypes:
                    req = kv_request_bytes(model, float(held), kv, tp, block)
                    kvr = float(req.exact_bytes if prof.kv_admission == "context"
                                else req.paged_bytes)
                    held_b = (kvr if prof.kv_admission == "context"   # memory: the engine's pages
                              else float(held_request_bytes(model, float(held), kv, tp, block)))
                    c_vram = int(max_concurrency(vb.kv_budget_bytes, held_b))
                    if (kv, tp) not in sent:
                        sent[(kv, tp)] = handover_bytes(model, kv, prompt, tp)
                    send = sent[(kv, tp)]
                    units.append(ReplicaShape(
                        gpu=g, tp=tp, weights=v.format.key, kv=kv,
                        price=inp.price_of(g).per_gpu_hour, prefill_ms=pre + comm_prompt,
                        prefill_fits=int(max_concurrency(vb.kv_budget_bytes, send)) >= 1,
                        slots=min(c_vram, prof.max_seqs), send_bytes=send, descriptors=desc,
                        batched=budget == 0 or budget >= 2 * prompt))
                    for k, val in (("w", v.weights_gb / tp * GB), ("kvs", kvr),
                                   ("bw", g.bandwidth_gb_s), ("fl", fl), ("ca", comm.fixed_ms),
                                   ("cb", comm.per_token_ms), ("ck", comm.knee_tokens),
                                   ("cc", comm.above_ms),
                                   ("lk", v.lookup_weight_share),
                                   ("eff", inp.eff_on(g, v.format.compute_dtype, model)),
                                   ("eta", inp.eta_bw_on(g))):
                        cols[k].append(val)
    if not units:
        raise InputError(f"no GPU and TP size in the search can hold {model.name}")
    a = {k: np.asarray(v, dtype=np.float64)[:, None] for k, v in cols.items()}
    step = plan_step(inp, model, a, a["w"])  # `lk`: the table's share of each shape's bytes
    top = max(max(u.slots for u in units), 1)
    grid = np.asarray(step.step_ms(np.arange(top + 1, dtype=np.float64)[None, :]),
                      dtype=np.float64)
    return model, units, grid


def replica_shapes(inp: PlanInputs, catalog: Catalog | None = None
                   ) -> tuple[Model, list[ReplicaShape], FloatArray]:
    """Every replica shape of `inp` and its decode step at batch 0..max slots (`_units`, as
    `disagg_options` builds them), for a caller that evaluates a given pool layout
    (`capacity.plan.disagg_pools`, the Explorer's view of the two pools)."""
    return _units(inp, catalog or default_catalog())


def design_rate_per_s(inp: PlanInputs) -> float:
    """The design load: the peak arrival rate x (1 + headroom), req/s (as the planner's).
    A workload given as a peak concurrency (closed loop) has no rate: InputError."""
    peak = inp.workload.peak_rate_per_s
    if peak is None:
        raise InputError("disaggregated planning needs an arrival rate (daily users or a rate), "
                         "not a peak concurrency")
    return peak * (1 + inp.workload.headroom)


def disagg_options(inp: PlanInputs, catalog: Catalog | None = None, *,
                   efficiency: float = DEFAULT_LINK_EFFICIENCY,
                   latency_ms: float = DEFAULT_TRANSFER_LATENCY_MS,
                   descriptor_us: float = DEFAULT_DESCRIPTOR_US,
                   admission_steps: float = DEFAULT_ADMISSION_STEPS) -> list[DisaggOption]:
    """Every disaggregated deployment that meets the SLOs within `inp.max_gpus` GPUs, cheapest
    first (cost per month, then TTFT), one row per pool layout (the best weights and KV of the
    same GPUs, TP and counts): each decode shape sized by rate matching (Y = ceil(rate / its
    capacity)), then each prefill shape of the same weights and KV precision (GPUs may differ)
    at the fewest replicas X whose TTFT (prefill quantile + transfer + link wait quantiles +
    the first decode step) meets its SLO. The hand-over is `disagg_handover`'s: latency, the
    bytes and descriptors on the link, the admission steps at the decode step of the design
    load. Vectorized over prefill shapes x X."""
    knobs = Link(kind="-", send_gb_s=1.0, recv_gb_s=1.0, efficiency=efficiency,
                 latency_ms=latency_ms, descriptor_us=descriptor_us,
                 admission_steps=admission_steps)   # checks the knobs
    single_requests(inp.workload, "disagg", prefix_tokens=inp.prefix_tokens,
                    prefix_share=inp.prefix_share)
    cat = catalog or default_catalog()
    model, units, grid = _units(inp, cat)
    wl, slo, q = inp.workload, inp.slo, inp.slo.quantile
    req = inp.request_latency_ms   # outside the GPU: on every TTFT (`PlanInputs`)
    rate = design_rate_per_s(inp)
    n_out = wl.output_tokens
    shapes = {u.gpu.key: node_shape(u.gpu.key) for u in units}
    col = {k: np.asarray([getattr(u, k) for u in units], dtype=np.float64)
           for k in ("tp", "price", "prefill_ms", "send_bytes")}
    batched = np.asarray([u.batched for u in units])
    fits = np.asarray([u.prefill_fits for u in units]) & (col["prefill_ms"] + req < slo.ttft_ms)
    group = [(u.weights, u.kv) for u in units]
    out_bw = np.asarray([shapes[u.gpu.key].scale_out_gb_s for u in units])
    up_bw = np.asarray([u.gpu.interconnect_gb_s for u in units])
    domain = np.asarray([shapes[u.gpu.key].nvlink_domain for u in units], dtype=np.float64)
    xs = np.arange(1, inp.max_gpus + 1, dtype=np.float64)[None, :]
    made: list[DisaggOption] = []
    budgets: list[FloatArray] = []
    prefill_rows: list[npt.NDArray[np.int64]] = []
    recv_bytes: dict[tuple[str, int], float] = {}
    for j, d in enumerate(units):
        cap_d = (decode_capacity_per_s(grid[j, : d.slots + 1], n_out, slo.tpot_ms, q)
                 if d.slots >= 1 else 0.0)
        if cap_d <= 0:
            continue
        y = math.ceil(rate / cap_d - 1e-9)
        if y * d.tp >= inp.max_gpus:
            continue
        load = decode_load(grid[j, : d.slots + 1], rate / y, n_out, q)
        idx = np.flatnonzero(fits & np.asarray([g == group[j] for g in group]))
        if idx.size == 0:
            continue
        tp_p = col["tp"][idx, None]
        pool = xs * tp_p + y * d.tp
        same = np.asarray([units[i].gpu.key == d.gpu.key for i in idx])[:, None]
        up = same & (domain[idx, None] > 1) & (pool <= domain[idx, None])
        if (d.kv, d.tp) not in recv_bytes:
            recv_bytes[(d.kv, d.tp)] = handover_bytes(model, d.kv, wl.prompt, d.tp)
        recv = recv_bytes[(d.kv, d.tp)]
        b_send = np.where(up, up_bw[idx, None], out_bw[idx, None])
        b_recv = np.where(up, up_bw[idx, None], shapes[d.gpu.key].scale_out_gb_s)
        busy = handover_busy_ms(col["send_bytes"][idx, None], b_send, recv, b_recv,
                                efficiency=efficiency, descriptors=d.descriptors,
                                descriptor_us=descriptor_us)
        fixed = latency_ms + float(knobs.admission_ms(load.first_step_ms))
        _, wq_s, rho_s = link_wait_ms(rate / xs, busy, q)
        _, wq_r, rho_r = link_wait_ms(np.full(busy.shape, rate / y), busy, q)
        _, pre_q, rho_p = prefill_ttft_ms(rate / xs, col["prefill_ms"][idx, None], q,
                                          batched[idx, None])
        wait = wq_s + wq_r
        ttft = pre_q + fixed + busy + wait + load.first_step_ms + req
        ok = ((pool <= inp.max_gpus) & (rho_p <= RHO_MAX) & (rho_s <= RHO_MAX)
              & (rho_r <= RHO_MAX) & (ttft <= slo.ttft_ms))
        rows = np.flatnonzero(ok.any(axis=1))
        if rows.size == 0:
            continue
        first = np.argmax(ok[rows], axis=1)
        budgets.append(slo.ttft_ms - fixed - busy[rows, first] - wait[rows, first]
                       - load.first_step_ms - req)
        prefill_rows.append(idx[rows])
        for r, c in zip(rows.tolist(), first.tolist(), strict=True):
            p = units[int(idx[r])]
            x = c + 1
            is_up = bool(up[r, c])
            link = Link(kind=shapes[p.gpu.key].fabric if is_up else min(
                (shapes[p.gpu.key], shapes[d.gpu.key]), key=lambda sh: sh.scale_out_gbit_s
            ).scale_out_kind, send_gb_s=float(b_send[r, c]), recv_gb_s=float(b_recv[r, c]),
                efficiency=efficiency, latency_ms=latency_ms, descriptor_us=descriptor_us,
                admission_steps=admission_steps)
            spare_month = (p.tp * p.price + d.tp * d.price) if inp.spare else 0.0
            o = DisaggOption(
                prefill_gpu=p.gpu.key, prefill_gpu_name=p.gpu.name, prefill_tp=p.tp,
                prefill_replicas=x, decode_gpu=d.gpu.key, decode_gpu_name=d.gpu.name,
                decode_tp=d.tp, decode_replicas=y, weights=d.weights, kv_dtype=d.kv, link=link,
                design_rate_per_s=rate, prefill_ms=p.prefill_ms,
                prefill_utilization=float(rho_p[r, c]),
                transfer_ms=fixed + float(busy[r, c]), transfer_wait_ms=float(wait[r, c]),
                link_utilization=max(float(rho_s[r, c]), float(rho_r[r, c])),
                ttft_ms=float(ttft[r, c]), tpot_ms=load.tpot_q_ms, tpot_mean_ms=load.tpot_ms,
                decode_batch=load.batch, prefill_capacity_per_s=math.nan,
                decode_capacity_per_s=cap_d, price_per_hour_prefill=p.price,
                price_per_hour_decode=d.price, spare_gpus=(p.tp + d.tp) if inp.spare else 0,
                cost_per_month=(x * p.tp * p.price + y * d.tp * d.price + spare_month)
                * HOURS_PER_MONTH, currency=inp.currency)
            made.append(o)
    if not made:
        return []
    # each prefill replica's capacity at its share of the TTFT SLO, in one bisection
    at = np.concatenate(prefill_rows)
    cap_p = prefill_capacity_per_s(col["prefill_ms"][at], np.concatenate(budgets), q,
                                   batched[at]).tolist()
    found: dict[tuple[str, int, int, str, int, int], DisaggOption] = {}
    for o, cap in zip(made, cap_p, strict=True):
        o = replace(o, prefill_capacity_per_s=cap)
        key = (o.prefill_gpu, o.prefill_tp, o.prefill_replicas, o.decode_gpu, o.decode_tp,
               o.decode_replicas)
        if key not in found or _rank(o) < _rank(found[key]):
            found[key] = o
    return sorted(found.values(), key=_rank)


def _rank(o: DisaggOption) -> tuple[float, float, float, int, str]:
    """Cheapest first, then the lower TTFT and TPOT, then fewer GPUs."""
    return (o.cost_per_month, o.ttft_ms, o.tpot_ms, o.n_gpus, o.label)


# ---------------------------------------------------------------------------------------------
# Aggregated against disaggregated


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Both rankings for one set of planner inputs, the winner and why."""

    inputs: PlanInputs
    aggregated: Plan
    disaggregated: tuple[DisaggOption, ...]
    winner: str
    """'aggregated', 'disaggregated' or 'none' (neither meets the SLOs)."""
    reason: str

    @property
    def best_aggregated(self) -> Option | None:
        return self.aggregated.best

    @property
    def best_disaggregated(self) -> DisaggOption | None:
        return self.disaggregated[0] if self.disaggregated else None


def _money(currency: str, v: float) -> str:
    return f"{currency} {v:,.0f}/month"


def prefill_share(o: Option, prompt_ms: float | None = None) -> float:
    """The share of an aggregated replica's time spent prefilling at the design load:
    rate per replica x prefill time (dimensionless)."""
    t = o.prefill_ms if prompt_ms is None else prompt_ms
    return o.design_rate_per_s / max(o.replicas, 1) * t / 1e3


def _reason(inp: PlanInputs, agg: Option | None, dis: DisaggOption | None,
            plan: Plan) -> tuple[str, str]:
    """(winner, reason in words), from the two cheapest options' own figures."""
    wl, slo = inp.workload, inp.slo
    pct = f"p{round(slo.quantile * 100)}"
    prompts = (f"{wl.prompt // 1024}K prompts" if wl.prompt >= 1024 and wl.prompt % 1024 == 0
               else f"{wl.prompt:,}-token prompts")
    if dis is not None and (agg is None or dis.cost_per_month < agg.cost_per_month):
        head = (f"disaggregated: {dis.ratio} ({dis.prefill_tp} x {dis.prefill_gpu_name} per "
                f"prefill replica, {dis.decode_tp} x {dis.decode_gpu_name} per decode replica, "
                f"{dis.n_gpus} GPUs, {_money(dis.currency, dis.cost_per_month)}) meets TPOT "
                f"{slo.tpot_ms:g} ms at {prompts} with pure decode steps (TPOT {pct} "
                f"{dis.tpot_ms:.1f} ms; KV hand-over {dis.transfer_ms:.1f} ms over "
                f"{dis.link.kind})")
        if agg is None:
            why = "; ".join(f"{r.gpu_name}: {r.detail}" for r in plan.rejected[:3])
            return "disaggregated", (f"{head}; no aggregated configuration meets the SLOs "
                                     f"within {inp.max_gpus} GPUs ({why})")
        if dis.n_gpus < agg.n_gpus:
            why = (f"aggregated needs {agg.n_gpus} x {agg.gpu_name} "
                   f"({_money(agg.currency, agg.cost_per_month)}) because prefill takes "
                   f"{prefill_share(agg):.0%} of each replica's time at the design load and its "
                   f"prompts stretch the decode steps around them (TPOT {pct} "
                   f"{agg.tpot_ms:.1f} ms at that size)")
        else:
            why = (f"aggregated needs {agg.n_gpus} x {agg.gpu_name} "
                   f"({_money(agg.currency, agg.cost_per_month)}): one GPU type must do both "
                   f"phases, while the pools put prefill on {dis.prefill_gpu_name} and decode on "
                   f"{dis.decode_gpu_name}, each on the GPU that does its phase cheapest")
        return "disaggregated", f"{head}; {why}"
    if agg is not None:
        cheap = ("" if dis is None else
                 f" against {_money(dis.currency, dis.cost_per_month)} for the cheapest "
                 f"disaggregated ({dis.ratio}, {dis.n_gpus} GPUs)")
        tail = ("no disaggregated deployment meets the SLOs within "
                f"{inp.max_gpus} GPUs" if dis is None else
                f"the KV hand-over ({dis.transfer_ms:.1f} ms) and a second pool cost more"
                if dis.cost_per_month > agg.cost_per_month else
                "at the same cost one pool is simpler and hands no KV over "
                f"({dis.transfer_ms:.1f} ms)")
        return "aggregated", (
            f"aggregated: {agg.label} ({_money(agg.currency, agg.cost_per_month)}){cheap}; "
            f"{prompts} take {prefill_share(agg):.0%} of a replica's time, so decode steps "
            f"stay almost untouched (TPOT {pct} {agg.tpot_ms:.1f} ms), and {tail}")
    return "none", (f"neither an aggregated nor a disaggregated deployment meets TTFT "
                    f"{slo.ttft_ms:g} ms and TPOT {slo.tpot_ms:g} ms within {inp.max_gpus} GPUs")


def compare(inp: PlanInputs, catalog: Catalog | None = None, *,
            efficiency: float = DEFAULT_LINK_EFFICIENCY,
            latency_ms: float = DEFAULT_TRANSFER_LATENCY_MS,
            descriptor_us: float = DEFAULT_DESCRIPTOR_US,
            admission_steps: float = DEFAULT_ADMISSION_STEPS,
            aggregated: Plan | None = None) -> Comparison:
    """Rank the planner's aggregated options (`capacity.plan.search.plan`, or `aggregated`
    when the caller has it) and the disaggregated ones (`disagg_options`) by cost per month
    meeting the SLOs, and say which wins and why."""
    cat = catalog or default_catalog()
    p = aggregated if aggregated is not None else plan_aggregated(inp, cat)
    dis = disagg_options(inp, cat, efficiency=efficiency, latency_ms=latency_ms,
                         descriptor_us=descriptor_us, admission_steps=admission_steps)
    winner, reason = _reason(inp, p.best, dis[0] if dis else None, p)
    return Comparison(inputs=inp, aggregated=p, disaggregated=tuple(dis), winner=winner,
                      reason=reason)
