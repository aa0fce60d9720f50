"""Wide expert parallelism on disaggregated pools (docs/expert-parallel.md, "Prefill and decode
on separate EP pools"): a MoE model served as the largest published deployments serve it
(DeepSeek's own H800 service, SGLang's 96-H100 DeepSeek deployment): X prefill deployments of
EP_p GPUs and Y decode deployments of EP_d GPUs of one GPU type, each request's KV handed from
the prefill rank that holds it to one decode rank.

Every part is one computation the rest of the planner already makes:

- a prefill deployment: one prompt costs it t = P / (EP_p x prefill tok/s per GPU) and its
  share of a pass's fixed time (`ep_search.prefill_ms_per_prompt`; `prefill_tok_s_per_gpu` at
  its layout's imbalance on the
  plan's EP basis, as the aggregated wide-EP plan prefills); only prompts run there, so its part
  of TTFT is `disagg.prefill_ttft_ms` (M/D/1 with the batching factor) and its capacity at its
  share of the TTFT target `disagg.prefill_capacity_per_s`;
- a decode deployment: pure decode steps at every total batch (`ep_search.step_grid_ms`,
  `ep_step`), the batch and TPOT by Little's law (`disagg.decode_load`), its capacity at the
  TPOT target `disagg.decode_capacity_per_s`;
- the hand-over: a request's KV at its prompt on one attention group (`handover_bytes` at the
  attention TP: MLA's latent whole on every rank of a group), over NVLink where both pools fit
  one NVLink domain (a GB200 NVL72 rack), else each GPU's NIC (data/nodes.toml);
  `disagg_handover.transfer_ms` (latency, bytes, descriptors, admission steps at the decode
  step of the load) and the M/D/1 waits of one sending and one receiving rank
  (`disagg.link_wait_ms`, each rank's share of the requests);
- TTFT at the SLO quantile = prefill + transfer + both waits + the first decode step + the
  request latency outside the GPU; pool sizes: Y = ceil(rate / decode capacity), X the fewest
  whose TTFT meets its target; GPUs paid = X EP_p + Y EP_d (+ one deployment of each as the N+1
  spare), whole nodes with a per-node offer; cost as the aggregated planner's (F7).

The search over GPUs and sizes, the comparison with wide EP serving both phases and the
evaluation of one layout a person chose are `capacity.plan.ep_pools_search`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from capacity.catalog.loader import Catalog, Gpu, Model
from capacity.catalog.nodes import NodeShape
from capacity.errors import InputError
from capacity.model.cost import HOURS_PER_MONTH, Currency, cost_per_mtok
from capacity.model.ep_knobs import EpBasis
from capacity.model.expert_parallel import (
    MAX_TOKENS_PER_RANK,
    EpLayout,
    EpOption,
    Overlap,
    ep_setup,
    plan_ep,
    prefill_tok_s_per_gpu,
)
from capacity.model.moe_imbalance import imbalance_factor
from capacity.plan.disagg import (
    RHO_MAX,
    decode_capacity_per_s,
    decode_load,
    link_wait_ms,
    prefill_capacity_per_s,
    prefill_ttft_ms,
)
from capacity.plan.disagg_handover import (
    DEFAULT_ADMISSION_STEPS,
    DEFAULT_DESCRIPTOR_US,
    DEFAULT_LINK_EFFICIENCY,
    DEFAULT_TRANSFER_LATENCY_MS,
    Link,
    descriptors_per_rank,
    handover_bytes,
)
from capacity.plan.ep_search import (
    LINK_NAMES,
    ep_rejection,
    prefill_ms_per_prompt,
    step_grid_ms,
)
from capacity.plan.options import PlanInputs
from capacity.types import FloatArray, Note

POOL_REJECTION_CODES: Final = ("epp_rej_count", "epp_rej_ttft", "epp_rej_tpot")
"""The codes of `pool_rejection` (each a message `note_<code>` in data/i18n), beside
`ep_search.REJECTION_CODES`, which the pools share for the reasons a layout does not fit."""


def pool_rejection(code: str, **p: int | float) -> Note:
    """Why a GPU serves no EP-pools option, beyond the wide-EP reasons (`ep_rejection`): a
    `Note` with `code` and its figures, its text the English of data/i18n/en.toml's
    `note_<code>` (tests/test_ep_pools.py holds the two equal)."""
    texts = {
        "epp_rej_count": ("EP{ep} decode deployments serve {cap:.2f} req/s each within the "
                          "TPOT target: {k} of them ({g} GPUs) for {rate:.2f} req/s, before "
                          "any prefill deployment, exceed {limit} GPUs"),
        "epp_rej_ttft": ("no count of prefill deployments meets TTFT {ttft:g} ms within "
                         "{limit} GPUs (one prompt takes {pre:.0f} ms on EP{ep})"),
        "epp_rej_tpot": ("an EP{ep} decode deployment misses TPOT {slo:g} ms even at one "
                         "sequence ({tpot:.1f} ms a step)"),
    }
    if code not in texts:
        raise InputError(f"unknown EP-pools rejection '{code}'")
    return Note(texts[code].format(**p), code=code, **p)


# ---------------------------------------------------------------------------------------------
# One pool's best layout at one EP size


@dataclass(frozen=True, kw_only=True)
class PrefillShape:
    """The prefill layout of one EP size with the least time per prompt."""

    option: EpOption
    tok_s_per_gpu: float
    """Input tokens per second per GPU (`prefill_tok_s_per_gpu`)."""
    prefill_ms: float
    """One prompt's time on the deployment, ms (`prefill_ms_per_prompt`, with its share of a
    pass's fixed time)."""
    imbalance: float
    """Busiest GPU's routed load over the mean at the prompt's tokens (gamma)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class DecodeShape:
    """The decode layout of one EP size with the most capacity within the TPOT target."""

    option: EpOption
    slots: int
    """Sequences the deployment decodes at most (its KV, capped at `MAX_TOKENS_PER_RANK` per
    GPU)."""
    grid: FloatArray
    """The decode step at total batch 0..slots, ms (`step_grid_ms`)."""
    capacity_per_s: float
    """Highest arrival rate per deployment within the TPOT target, req/s."""


def _prefill_rank(prefill_ms: float, lay: EpLayout) -> tuple[float, int, int]:
    """The least time per prompt, then DP attention (a TP group's all-reduces are not in the
    prefill's rate, `prefill_tok_s_per_gpu`), then fewer redundant experts."""
    return (round(prefill_ms, 9), lay.attention_tp, lay.redundant_experts)


def prefill_shape(inp: PlanInputs, g: Gpu, n: int, weights: str, kv: str, b: EpBasis,
                  cat: Catalog) -> PrefillShape | Note:
    """The prefill layout of EP size `n` on `g` (DP or TP attention, redundant experts:
    `plan_ep`'s, the KV of one prompt held) with the least time per prompt, or why none
    fits."""
    wl = inp.workload
    model = cat.variant(inp.model, weights).model
    best: PrefillShape | None = None
    why: Note | None = None
    for o in plan_ep(inp.model, g.key, n, prompt_tokens=wl.prompt, output_tokens=0,
                     kv_dtype=kv, weights=weights, eta_bw=b.eta_bw, eff=b.eff,
                     overhead_ms=b.overhead_ms, util=inp.util, overhead_gb=inp.overhead_gb,
                     overlaps=(Overlap.TBO,), catalog=cat, knobs=b.knobs,
                     runtime_memory=inp.runtime_memory):
        if o.memory.max_batch < 1:
            short = -o.memory.kv_budget_gb
            why = why or (ep_rejection("ep_rej_weights", ep=n, w=o.memory.shared_gb
                                       + o.memory.experts_gb, short=short) if short > 0 else
                          ep_rejection("ep_rej_kv", held=wl.prompt, ep=n))
            continue
        lay = o.layout
        s = ep_setup(inp.model, g.key, lay, context_tokens=wl.prompt, kv_dtype=kv,
                     weights=weights, exponent=o.exponent, catalog=cat)
        gamma = imbalance_factor(experts=s.experts, active=s.active, exponent=s.exponent,
                                 gpus=lay.ep, redundant=lay.redundant_experts,
                                 batch_tokens=float(wl.prompt))
        tok = prefill_tok_s_per_gpu(s, wl.prompt, mfu=b.mfu, imbalance=gamma, knobs=b.knobs)
        pre = prefill_ms_per_prompt(wl.prompt, lay.ep, tok, inp.fixed_prefill_ms(model))
        if best is None or _prefill_rank(pre, lay) < _prefill_rank(best.prefill_ms,
                                                                   best.option.layout):
            best = PrefillShape(option=o, tok_s_per_gpu=tok, prefill_ms=pre, imbalance=gamma)
    return best if best is not None else (why or ep_rejection("ep_rej_kv", held=wl.prompt,
                                                               ep=n))


def decode_shape(inp: PlanInputs, g: Gpu, n: int, weights: str, kv: str, b: EpBasis,
                 cat: Catalog) -> DecodeShape | Note:
    """The decode layout of EP size `n` on `g` (`plan_ep`'s layouts and overlaps, the KV held
    at prompt + output) with the most capacity within the TPOT target, or why none serves a
    load."""
    wl = inp.workload
    held = min(wl.context_tokens, wl.prompt + wl.output_tokens)
    best: DecodeShape | None = None
    why: Note | None = None
    for o in plan_ep(inp.model, g.key, n, prompt_tokens=wl.prompt,
                     output_tokens=held - wl.prompt, kv_dtype=kv, weights=weights,
                     eta_bw=b.eta_bw, eff=b.eff, overhead_ms=b.overhead_ms, util=inp.util,
                     overhead_gb=inp.overhead_gb, catalog=cat, knobs=b.knobs,
                     runtime_memory=inp.runtime_memory):
        mem = o.memory
        if mem.max_batch < 1:
            short = -mem.kv_budget_gb
            why = why or (ep_rejection("ep_rej_weights", ep=n, w=mem.shared_gb + mem.experts_gb,
                                       short=short) if short > 0 else
                          ep_rejection("ep_rej_kv", held=held, ep=n))
            continue
        if best is not None and o.step is not None and o.batch >= 2 and (
                (o.batch - 1) / (wl.output_tokens * o.step.step_ms / 1e3) <= best.capacity_per_s):
            continue  # its upper bound (every slot decoding) cannot beat the one found
        slots = min(mem.max_batch, MAX_TOKENS_PER_RANK * n)
        s = ep_setup(inp.model, g.key, o.layout, context_tokens=held, kv_dtype=kv,
                     weights=weights, exponent=o.exponent, catalog=cat)
        grid = step_grid_ms(s, slots, eta_bw=b.eta_bw, eff=b.eff, overhead_ms=b.overhead_ms,
                            overlap=o.overlap, knobs=b.knobs)
        cap = decode_capacity_per_s(grid, wl.output_tokens, inp.slo.tpot_ms, inp.slo.quantile)
        if cap <= 0:
            why = why or pool_rejection("epp_rej_tpot", ep=n, slo=inp.slo.tpot_ms,
                                        tpot=float(grid[1]))
            continue
        if best is None or cap > best.capacity_per_s:
            best = DecodeShape(option=o, slots=slots, grid=grid, capacity_per_s=cap)
    return best if best is not None else (why or ep_rejection("ep_rej_kv", held=held, ep=n))


# ---------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True, kw_only=True)
class EpPoolsOption:
    """X prefill and Y decode EP deployments of one GPU type, with their figures at the design
    load (peak x (1 + headroom)). The headline figures have the definitions of the aggregated
    `Option` and of `EpPlanOption`: `ttft_ms`, `tpot_ms` at the SLO quantile at the design
    load, `cost_per_month` = price per GPU-hour x GPUs paid x 730 h, `cost_per_mtok` F7 at the
    SLO-feasible capacity, `cost_per_mtok_design` F7 at the design load."""

    model: str
    gpu: str
    gpu_name: str
    weights: str
    kv_dtype: str
    gpus_per_node: int
    nvlink_domain: int
    scale_out_gbit_s: float
    """NIC bandwidth per GPU, Gb/s (data/nodes.toml)."""
    scale_out_kind: str
    fabric: str
    """The GPU's scale-up fabric ('nvlink', 'infinity-fabric')."""
    prefill_ep: int
    prefill_attention_tp: int
    prefill_redundant_experts: int
    prefill_replicas: int
    decode_ep: int
    decode_attention_tp: int
    decode_redundant_experts: int
    decode_overlap: str
    decode_replicas: int
    design_rate_per_s: float
    prefill_ms: float
    """One prompt's time on a prefill deployment, ms."""
    prefill_tok_s_per_gpu: float
    prefill_utilization: float
    """Share of each prefill deployment's time spent prefilling at the design load."""
    prefill_capacity_per_s: float
    """Per prefill deployment, req/s, at its share of the TTFT target."""
    handover_bytes: float
    """KV bytes one sending GPU moves for a request (`handover_bytes` at the attention TP)."""
    handover_link: str
    """'nvlink' (both pools in one NVLink domain) or the NIC's kind."""
    handover_gb_s: float
    """GB/s per GPU the hand-over runs at (line rate)."""
    transfer_ms: float
    """One hand-over on an idle link, ms (latency, bytes, descriptors, admission steps)."""
    transfer_wait_ms: float
    """The SLO quantile of the waits for the sending and the receiving rank, ms."""
    link_utilization: float
    decode_slots: int
    """Sequences one decode deployment holds at most."""
    decode_batch: float
    """Mean sequences decoding in one decode deployment at the design load."""
    decode_step_ms: float
    """The decode step at that batch, ms."""
    decode_capacity_per_s: float
    """Per decode deployment, req/s, within the TPOT target."""
    ttft_ms: float
    """TTFT at the SLO quantile at the design load, ms (the request latency included): the
    sum of `prefill_part_ms`, `transfer_ms`, `transfer_wait_ms`, `first_step_ms` and
    `request_latency_ms`."""
    prefill_part_ms: float
    """The prefill pool's part of TTFT at the SLO quantile: the prompt and its queue, ms."""
    first_step_ms: float
    """The decode step a request joins in (its first token), ms."""
    request_latency_ms: float = 0.0
    """Time outside the GPU on every request (`PlanInputs.request_latency_ms`), ms."""
    tpot_ms: float
    """TPOT at the SLO quantile at the design load, ms."""
    tpot_mean_ms: float
    spare_gpus: int = 0
    """One deployment of each pool as the N+1 spare (`PlanInputs.spare`)."""
    node_gpus: int = 0
    """GPUs per node of a per-node offer (bought in whole nodes); 0 = priced per GPU."""
    billed_gpus: int
    price_per_hour: float
    """Price of one GPU-hour (`PlanInputs.price_of`), in `currency`."""
    currency: Currency
    cost_per_month: float
    prompt_tokens: int
    """Prompt tokens per request (the workload's)."""
    output_tokens: int
    """Output tokens per request (the workload's)."""

    @property
    def n_gpus(self) -> int:
        """Serving GPUs: X EP_p + Y EP_d."""
        return self.prefill_replicas * self.prefill_ep + self.decode_replicas * self.decode_ep

    @property
    def paid_gpus(self) -> int:
        return self.billed_gpus

    @property
    def capacity_rate_per_s(self) -> float:
        """SLO-feasible capacity of the fleet, req/s: the smaller pool's (as
        `DisaggOption.capacity_rate_per_s`)."""
        return min(self.prefill_replicas * self.prefill_capacity_per_s,
                   self.decode_replicas * self.decode_capacity_per_s)

    @property
    def output_tok_s(self) -> float:
        """Output tokens per second at the design load: design rate x output tokens."""
        return self.design_rate_per_s * self.output_tokens

    @property
    def output_tok_s_per_gpu(self) -> float:
        """Output tok/s per serving GPU of both pools at the design load."""
        return self.output_tok_s / self.n_gpus

    @property
    def input_tok_s_per_prefill_gpu(self) -> float:
        """Prompt tok/s per prefill GPU at the design load: design rate x prompt tokens / the
        prefill GPUs (SGLang's and InferenceX's prefill figure)."""
        return (self.design_rate_per_s * self.prompt_tokens
                / (self.prefill_replicas * self.prefill_ep))

    @property
    def output_tok_s_per_decode_gpu(self) -> float:
        """Output tok/s per decode GPU at the design load (InferenceX's figure for a
        disaggregated run: output over the decode GPUs)."""
        return self.output_tok_s / (self.decode_replicas * self.decode_ep)

    @property
    def cost_per_mtok(self) -> float:
        """Cost per million output tokens at SLO capacity (F7), in `currency`."""
        return float(cost_per_mtok(self.cost_per_month / HOURS_PER_MONTH, 1,
                                   self.capacity_rate_per_s * self.output_tokens))

    @property
    def cost_per_mtok_design(self) -> float:
        """Cost per million output tokens at the design load (F7), in `currency`."""
        return float(cost_per_mtok(self.cost_per_month / HOURS_PER_MONTH, 1,
                                   self.output_tok_s))

    @property
    def ratio(self) -> str:
        """'1P+2D': prefill and decode deployments."""
        return f"{self.prefill_replicas}P+{self.decode_replicas}D"

    def _pool(self, ep: int, attention_tp: int, redundant: int) -> str:
        nodes = math.ceil(ep / self.gpus_per_node)
        per = min(ep, self.gpus_per_node)
        attn = "DP attention" if attention_tp == 1 else f"TP{attention_tp} attention"
        red = f", {redundant} redundant experts" if redundant else ""
        return (f"{nodes} node{'s' if nodes > 1 else ''} x {per} {self.gpu_name}: EP{ep}, "
                f"{attn}{red}")

    @property
    def prefill_label(self) -> str:
        """'4 nodes x 8 H100 SXM: EP32, DP attention, 32 redundant experts' (one deployment)."""
        return self._pool(self.prefill_ep, self.prefill_attention_tp,
                          self.prefill_redundant_experts)

    @property
    def decode_label(self) -> str:
        """One decode deployment in words, with its overlap."""
        over = "two-batch overlap" if self.decode_overlap == Overlap.TBO.value else "no overlap"
        return (self._pool(self.decode_ep, self.decode_attention_tp,
                           self.decode_redundant_experts) + f", {over}")

    @property
    def handover_text(self) -> str:
        """'InfiniBand 400 Gb/s' or 'NVLink': what carries the KV between the pools."""
        name = LINK_NAMES.get(self.handover_link, self.handover_link)
        return name if self.handover_link == self.fabric else (
            f"{name} {self.scale_out_gbit_s:g} Gb/s")

    @property
    def label(self) -> str:
        """'1P+2D: prefill 1 x (...), decode 2 x (...), fp8, fp8 KV, KV over InfiniBand
        400 Gb/s' (+ the spare)."""
        spare = " + 1 spare deployment of each" if self.spare_gpus else ""
        return (f"{self.ratio}: prefill {self.prefill_replicas} x ({self.prefill_label}), "
                f"decode {self.decode_replicas} x ({self.decode_label}), {self.weights}, "
                f"{self.kv_dtype} KV, KV over {self.handover_text}{spare}")


def handover_link(g: Gpu, shape: NodeShape, pool_gpus: int, *,
                  efficiency: float = DEFAULT_LINK_EFFICIENCY,
                  latency_ms: float = DEFAULT_TRANSFER_LATENCY_MS,
                  descriptor_us: float = DEFAULT_DESCRIPTOR_US,
                  admission_steps: float = DEFAULT_ADMISSION_STEPS) -> Link:
    """The KV's link between the pools (`disagg_handover.link_for`'s rule on one GPU type):
    the scale-up fabric at `Gpu.interconnect_gb_s` when all `pool_gpus` fit one NVLink domain
    of more than one GPU, else the NIC of each GPU (`NodeShape.scale_out_gb_s`)."""
    costs = {"efficiency": efficiency, "latency_ms": latency_ms,
             "descriptor_us": descriptor_us, "admission_steps": admission_steps}
    if 1 < shape.nvlink_domain and pool_gpus <= shape.nvlink_domain:
        bw = g.interconnect_gb_s
        return Link(kind=shape.fabric, send_gb_s=bw, recv_gb_s=bw, **costs)
    bw = shape.scale_out_gb_s
    return Link(kind=shape.scale_out_kind, send_gb_s=bw, recv_gb_s=bw, **costs)


def pools_at(inp: PlanInputs, g: Gpu, shape: NodeShape, model: Model, weights: str, kv: str,
             pre: PrefillShape, dec: DecodeShape, rate: float, x: int, y: int, *,
             link_knobs: dict[str, float] | None = None) -> EpPoolsOption:
    """X prefill and Y decode deployments of the two layouts at `rate` req/s (module
    docstring): the hand-over on the link both pools' GPUs put it on, each rank's wait, the
    prefill queue, the decode load, TTFT and TPOT at the SLO quantile (inf past a pool's or a
    link's saturation), each prefill deployment's capacity within its share of the TTFT target
    (0 where none is left), the GPUs paid and the cost."""
    wl, slo, q = inp.workload, inp.slo, inp.slo.quantile
    n_out = wl.output_tokens
    req = inp.request_latency_ms
    lay_p, lay_d = pre.option.layout, dec.option.layout
    load = decode_load(dec.grid, rate / y, n_out, q)
    step = load.first_step_ms if math.isfinite(load.first_step_ms) else float(dec.grid[-1])
    send = handover_bytes(model, kv, wl.prompt, lay_p.attention_tp)
    recv = handover_bytes(model, kv, wl.prompt, lay_d.attention_tp)
    desc = descriptors_per_rank(model, wl.prompt)
    link = handover_link(g, shape, x * lay_p.ep + y * lay_d.ep, **(link_knobs or {}))
    busy = float(link.busy_ms(send, recv, desc))
    fixed = link.latency_ms + float(link.admission_ms(step))
    # each request's KV leaves one attention group of a prefill deployment and lands on one of
    # a decode deployment: a rank's share of the requests
    _, wq_s, rho_s = link_wait_ms(rate / (x * lay_p.attention_groups), busy, q)
    _, wq_r, rho_r = link_wait_ms(rate / (y * lay_d.attention_groups), busy, q)
    _, pre_q, rho_p = prefill_ttft_ms(rate / x, pre.prefill_ms, q)
    wait = float(wq_s) + float(wq_r)
    ttft = float(pre_q) + fixed + busy + wait + load.first_step_ms + req
    budget = slo.ttft_ms - fixed - busy - wait - step - req
    cap_p = (float(prefill_capacity_per_s(pre.prefill_ms, budget, q))
             if math.isfinite(budget) and budget > 0 else 0.0)
    price = inp.price_of(g)
    node = price.node_gpus
    spare = (lay_p.ep + lay_d.ep) if inp.spare else 0
    serving = x * lay_p.ep + y * lay_d.ep
    billed = (math.ceil((serving + spare) / node) * node) if node else serving + spare
    return EpPoolsOption(
        model=model.key, gpu=g.key, gpu_name=g.name, weights=weights, kv_dtype=kv,
        gpus_per_node=shape.max_gpus_per_node, nvlink_domain=shape.nvlink_domain,
        scale_out_gbit_s=shape.scale_out_gbit_s, scale_out_kind=shape.scale_out_kind,
        fabric=shape.fabric, prefill_ep=lay_p.ep, prefill_attention_tp=lay_p.attention_tp,
        prefill_redundant_experts=lay_p.redundant_experts, prefill_replicas=x,
        decode_ep=lay_d.ep, decode_attention_tp=lay_d.attention_tp,
        decode_redundant_experts=lay_d.redundant_experts, decode_overlap=dec.option.overlap,
        decode_replicas=y, design_rate_per_s=rate, prefill_ms=pre.prefill_ms,
        prefill_tok_s_per_gpu=pre.tok_s_per_gpu, prefill_utilization=float(rho_p),
        prefill_capacity_per_s=cap_p, handover_bytes=send, handover_link=link.kind,
        handover_gb_s=link.send_gb_s, transfer_ms=fixed + busy, transfer_wait_ms=wait,
        link_utilization=max(float(rho_s), float(rho_r)), decode_slots=dec.slots,
        decode_batch=load.batch, decode_step_ms=load.tpot_ms,
        decode_capacity_per_s=dec.capacity_per_s, ttft_ms=ttft, prefill_part_ms=float(pre_q),
        first_step_ms=load.first_step_ms, request_latency_ms=req, tpot_ms=load.tpot_q_ms,
        tpot_mean_ms=load.tpot_ms, spare_gpus=spare, node_gpus=node, billed_gpus=billed,
        price_per_hour=price.per_gpu_hour, currency=inp.currency,
        cost_per_month=price.per_gpu_hour * billed * HOURS_PER_MONTH, prompt_tokens=wl.prompt,
        output_tokens=n_out)


def meets(o: EpPoolsOption, inp: PlanInputs) -> bool:
    """Both SLOs at their quantile, the prefill deployments and the links at utilisations
    <= `RHO_MAX`."""
    return (o.prefill_utilization <= RHO_MAX and o.link_utilization <= RHO_MAX
            and o.ttft_ms <= inp.slo.ttft_ms and o.tpot_ms <= inp.slo.tpot_ms)


def size_pools(inp: PlanInputs, g: Gpu, shape: NodeShape, model: Model, weights: str, kv: str,
               pre: PrefillShape, dec: DecodeShape, rate: float, limit: int, *,
               link_knobs: dict[str, float] | None = None) -> EpPoolsOption | Note:
    """One pair of pool layouts sized for `rate` req/s (module docstring): Y decode deployments
    by rate matching, then the fewest prefill deployments X whose TTFT at the SLO quantile
    meets the target (`pools_at`, `meets`); the option, or why none fits within `limit`
    GPUs."""
    lay_p, lay_d = pre.option.layout, dec.option.layout
    y = max(1, math.ceil(rate / dec.capacity_per_s - 1e-9))
    spare = (lay_p.ep + lay_d.ep) if inp.spare else 0
    if y * lay_d.ep + lay_p.ep + spare > limit:
        return pool_rejection("epp_rej_count", ep=lay_d.ep, cap=dec.capacity_per_s, k=y,
                              g=y * lay_d.ep, rate=rate, limit=limit)
    for x in range(1, (limit - y * lay_d.ep - spare) // lay_p.ep + 1):
        o = pools_at(inp, g, shape, model, weights, kv, pre, dec, rate, x, y,
                     link_knobs=link_knobs)
        if o.billed_gpus > limit:
            break
        if meets(o, inp):
            return o
    return pool_rejection("epp_rej_ttft", ttft=inp.slo.ttft_ms, limit=limit, pre=pre.prefill_ms,
                          ep=lay_p.ep)
