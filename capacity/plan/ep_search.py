"""Wide expert parallelism in the planner (docs/expert-parallel.md, "Planning"): MoE deployments
whose routed experts spread over one node, several nodes or a whole NVLink domain, sized to the
design load and priced as the aggregated planner prices GPUs.

For each GPU of the search that data/nodes.toml knows, the EP deployment sizes a user buys
(`ep_sizes`: nodes across the NIC, and NVLink domains and 8, 16, ... GPUs of one larger than a
node, an NVL72 rack); each within the GPU limit. For each size, every layout
`plan_ep` lists (DP or TP attention, redundant experts, two-batch overlap or not), at each KV
precision of the search. One deployment serves prefill and decode on the same GPUs:

- the decode step at every total batch 0..slots (`step_grid_ms`: `ep_step` at `GRID_POINTS`
  batches, linear in between), slots = the sequences the KV holds, at most
  `MAX_TOKENS_PER_RANK` per GPU;
- prefill: one prompt costs the deployment t = P / (ep x `prefill_tok_s_per_gpu`) ms (its GPUs
  prefill together, DP ranks in lockstep for the MoE layers), so prompts take rho = lambda t of
  its time and decode steps stretch by 1 / (1 - rho) (`ep_load`);
- TPOT: `disagg.decode_load` on the stretched steps (Little's law for the batch, its SLO
  quantile from the Poisson number in flight); TTFT: `disagg.prefill_ttft_ms` (M/D/1 wait of
  the prompts, batching factor) + the quantile of the residual decode step it arrives in;
- capacity per deployment: the highest rate meeting both SLOs (`ep_capacity_per_s`,
  bisection); replicas R = ceil(design rate / capacity); GPUs paid, cost per month and per
  million output tokens with the price and F7 of the aggregated planner (`Option`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np

from capacity.catalog.loader import Catalog, Gpu, default_catalog
from capacity.catalog.nodes import MAX_NODE_GPUS, NodeShape, node_shapes
from capacity.errors import InputError
from capacity.model.cost import HOURS_PER_MONTH, Currency, cost_per_mtok
from capacity.model.ep_knobs import SPEC_KNOBS, EpBasis, EpKnobs, ep_basis
from capacity.model.expert_parallel import (
    MAX_TOKENS_PER_RANK,
    PREFILL_TOKENS_PER_GPU,
    EpLayout,
    EpOption,
    EpSetup,
    ep_setup,
    ep_step,
    plan_ep,
    prefill_tok_s_per_gpu,
)
from capacity.model.moe_imbalance import imbalance_factor
from capacity.model.workload import single_requests
from capacity.plan.disagg import (
    RHO_MAX,
    decode_batch_rate,
    decode_load,
    design_rate_per_s,
    prefill_ttft_ms,
)
from capacity.plan.options import Plan, PlanInputs, Slo
from capacity.plan.search import plan as plan_aggregated
from capacity.types import FloatArray, Note

GRID_POINTS = 20
"""Total batches the decode step is computed at (geometric from 1 to the slots, every batch
where there are fewer); linear in between. The step is smooth in the batch (a kink where a
roofline part turns compute-bound), so 20 points cost under 1 % against every batch."""
CAPACITY_STEPS = 40
"""Bisection steps on a deployment's arrival rate (`ep_capacity_per_s`)."""
LINK_NAMES = {"nvlink": "NVLink", "infinity-fabric": "Infinity Fabric",
              "infiniband": "InfiniBand", "roce": "RoCE", "ethernet": "Ethernet"}
"""The links of data/nodes.toml in words."""
OVERLAP_TEXT = {"two-batch": "two-batch overlap", "sum": "no overlap"}
"""`Overlap` values in words (a label's)."""


# ---------------------------------------------------------------------------------------------
# One deployment under load


@dataclass(frozen=True, kw_only=True)
class EpLoad:
    """One EP deployment at an arrival rate (closed form, `ep_load`); times in ms."""

    rate_per_s: float
    """Arrivals to this deployment, req/s."""
    prefill_share: float
    """rho = rate x one prompt's prefill time: the share of the deployment's time prefilling."""
    batch: float
    """Mean sequences decoding in the deployment (Little's law, `disagg.decode_load`)."""
    batch_q: float
    """The batch at the SLO quantile."""
    step_ms: float
    """The decode step at the mean batch, prefill pauses left out (`ep_step`)."""
    tpot_ms: float
    """Mean TPOT: the step stretched by the prefill pauses, step / (1 - rho)."""
    tpot_q_ms: float
    ttft_ms: float
    """Mean TTFT: prefill + its M/D/1 wait (x the batching factor) + half a decode step."""
    ttft_q_ms: float

    def meets(self, slo: Slo) -> bool:
        """TTFT and TPOT at the SLO quantile within the SLOs, prefill at most `RHO_MAX`."""
        return (self.prefill_share <= RHO_MAX and self.tpot_q_ms <= slo.tpot_ms
                and self.ttft_q_ms <= slo.ttft_ms)


def prefill_ms_per_prompt(prompt_tokens: int, ep: int, tok_s_per_gpu: float,
                          overhead_ms: float = 0.0) -> float:
    """The deployment's time for one prompt, ms: P / (ep x prefill tok/s per GPU) x 1000 +
    t0 x P / (ep x `PREFILL_TOKENS_PER_GPU`).

    Every GPU of an EP deployment steps together (the MoE layers' all-to-all joins the DP
    ranks), so prompts are prefilled by all `ep` GPUs at `prefill_tok_s_per_gpu` each (F6 per
    GPU). F6's fixed time t0 (`PlanInputs.fixed_prefill_ms`) is a prefill pass's, and an EP
    prefill pass carries `PREFILL_TOKENS_PER_GPU` tokens per GPU (SGLang's large-scale EP
    setting, which `prefill_tok_s_per_gpu` already spreads its own per-pass time over): a
    prompt takes its share of it. Until 2026-12-07 every prompt paid t0 whole (3.5 ms on the
    typical basis, 28 % of a 2K prompt on EP32), so the planner prefilled 23 % slower than
    SGLang measured where the function the scorecard holds against that run reads 14 % faster,
    and the buyer's chart counted no t0. Example: 2,000 tokens on 8 GPUs at 10,000 tok/s each:
    25 ms; with t0 = 3 ms, + 3 x 2,000 / 131,072 = 25.046 ms."""
    if tok_s_per_gpu <= 0 or ep < 1:
        raise InputError("prefill throughput must be > 0 tok/s on at least one GPU")
    return (prompt_tokens / (ep * tok_s_per_gpu) * 1e3
            + overhead_ms * prompt_tokens / (ep * PREFILL_TOKENS_PER_GPU))


def ep_load(step_ms: FloatArray, prefill_ms: float, rate_per_s: float, output_tokens: int,
            quantile: float) -> EpLoad:
    """One deployment at `rate_per_s` req/s, `step_ms` its decode step at batch 0..slots.

    rho = lambda t (t = `prefill_ms`, one prompt); decoding pauses while prompts prefill, so each
    step lasts s / (1 - rho) on average (the decode share of the time is 1 - rho); TPOT, the
    batch and its quantile: `disagg.decode_load` on those stretched steps (inf past the
    slots); TTFT: `disagg.prefill_ttft_ms` (t + the batching factor x the M/D/1 wait of the
    prompts, Kleinrock eq. 5.73) + the residual of the decode step in flight, uniform on
    [0, s]: s / 2 mean, q x s at the quantile (as `queueing.analytic_latency`). Saturated
    (inf) at rho >= 1. Example (tests): a flat 20 ms step, t 10 ms, 20 req/s: rho 0.2, TPOT
    25 ms, TTFT p50 10 + 0.5 x 25 = 22.5 ms."""
    rho = rate_per_s * prefill_ms / 1e3
    if rho >= 1:
        inf = math.inf
        return EpLoad(rate_per_s=rate_per_s, prefill_share=rho, batch=inf, batch_q=inf,
                      step_ms=inf, tpot_ms=inf, tpot_q_ms=inf, ttft_ms=inf, ttft_q_ms=inf)
    stretched = np.asarray(step_ms, dtype=np.float64) / (1.0 - rho)
    d = decode_load(stretched, rate_per_s, output_tokens, quantile)
    mean, q_ms, _ = prefill_ttft_ms(rate_per_s, prefill_ms, quantile)
    grid = np.arange(stretched.size, dtype=np.float64)
    s = float(np.interp(d.batch, grid, step_ms)) if math.isfinite(d.batch) else math.inf
    return EpLoad(rate_per_s=rate_per_s, prefill_share=rho, batch=d.batch, batch_q=d.batch_q,
                  step_ms=s, tpot_ms=d.tpot_ms, tpot_q_ms=d.tpot_q_ms,
                  ttft_ms=float(mean) + 0.5 * d.tpot_ms, ttft_q_ms=float(q_ms) + quantile * d.tpot_ms)


def ep_capacity_per_s(step_ms: FloatArray, prefill_ms: float, output_tokens: int,
                      slo: Slo) -> float:
    """The highest arrival rate (req/s) one deployment serves within both SLOs (`ep_load`):
    bisection (`CAPACITY_STEPS`) between 0 and the smaller of the rate that fills the slots
    (`disagg.decode_batch_rate`) and RHO_MAX / t; 0 when one request alone misses an SLO.
    Example (tests): a flat 20 ms step, 100 slots, 100 output tokens, no prefill, p50:
    (100 - 1) / (100 x 0.02 s) = 49.5 req/s."""
    top = float(decode_batch_rate(np.asarray(step_ms, dtype=np.float64), output_tokens)[-1])
    if prefill_ms > 0:
        top = min(top, RHO_MAX / prefill_ms * 1e3)
    q = slo.quantile

    def ok(rate: float) -> bool:
        return ep_load(step_ms, prefill_ms, rate, output_tokens, q).meets(slo)
    if top <= 0 or not ok(0.0):
        return 0.0
    if ok(top):
        return top
    lo, hi = 0.0, top
    for _ in range(CAPACITY_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def replicas_for(rate_per_s: float, capacity_per_s: float) -> int:
    """EP deployments for a design rate: ceil(rate / one deployment's SLO-feasible capacity),
    at least 1 (req/s both). Example: 100 req/s at 49.5 each -> 3; 99 -> 2."""
    if capacity_per_s <= 0:
        raise InputError("a deployment that meets no load cannot be replicated")
    return max(1, math.ceil(rate_per_s / capacity_per_s - 1e-9))


def step_grid_ms(s: EpSetup, slots: int, *, eta_bw: float, eff: float, overhead_ms: float,
                 overlap: str, knobs: EpKnobs = SPEC_KNOBS) -> FloatArray:
    """The decode step (ms, `ep_step`, the busiest GPU) at every total batch 0..`slots`:
    computed at `GRID_POINTS` batches spaced geometrically from 1 to the slots (each batch when
    there are fewer), linear in between; batch 0 takes batch 1's step. `knobs`: the EP knobs
    of the basis (`basis_of`; the spec sheet's by default)."""
    pts = np.unique(np.round(np.geomspace(1, slots, min(GRID_POINTS, slots))).astype(int))
    at = np.asarray([ep_step(s, float(b), eta_bw=eta_bw, eff=eff, overhead_ms=overhead_ms,
                             overlap=overlap, knobs=knobs).step_ms for b in pts])
    return np.asarray(np.interp(np.arange(slots + 1), pts, at), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True, kw_only=True)
class EpPlanOption:
    """R replicas of one wide-EP deployment (EP over `ep` GPUs) with its figures at the design
    load (peak x (1 + headroom)) and its cost. The headline figures have the definitions of the
    aggregated `Option`: `ttft_ms`, `tpot_ms` at the SLO quantile at the design load,
    `cost_per_month` = price per GPU-hour x GPUs paid x 730 h, `cost_per_mtok` F7 at the
    SLO-feasible capacity, `cost_per_mtok_design` F7 at the design load."""

    model: str
    """Catalog model key."""
    gpu: str
    gpu_name: str
    weights: str
    """Weight format (`fp8`)."""
    kv_dtype: str
    ep: int
    """GPUs of one deployment, the routed experts spread over all of them."""
    attention_tp: int
    """1: DP attention; n: TP attention in groups of n GPUs."""
    redundant_experts: int
    overlap: str
    """'two-batch' or 'sum' (`expert_parallel.Overlap`)."""
    nodes: int
    """Nodes one deployment spans (ceil(ep / GPUs per node))."""
    gpus_per_node: int
    nvlink_domain: int
    scale_up: bool
    """The all-to-all stays in one NVLink / Infinity Fabric domain (no NIC traffic)."""
    link: str
    """What carries the all-to-all across GPUs: the fabric ('nvlink', 'infinity-fabric')
    inside one domain, else the scale-out kind ('infiniband', 'roce', 'ethernet')."""
    scale_out_gbit_s: float
    """NIC bandwidth per GPU, Gb/s (data/nodes.toml); used where `scale_up` is False."""
    replicas: int
    """EP deployments serving the design load."""
    spare_gpus: int = 0
    """GPUs of an N+1 spare deployment (`PlanInputs.spare`: one more deployment of `ep`)."""
    node_gpus: int = 0
    """GPUs per node of a per-node offer (bought in whole nodes); 0 = priced per GPU."""
    billed_gpus: int
    """GPUs paid for: serving + spare, whole nodes with a per-node offer."""
    weights_per_gpu_gb: float
    """Shared weights / attention TP + the GPU's expert copies, GB (`ep_memory`)."""
    kv_budget_per_gpu_gb: float
    max_sequences_per_gpu: float
    """Sequences the KV holds per GPU (per attention group / attention TP)."""
    slots: int
    """Sequences one deployment decodes at most: the KV's, capped at 256 per GPU."""
    design_rate_per_s: float
    """The design load of the whole fleet, req/s."""
    capacity_rate_per_s: float
    """SLO-feasible capacity of the fleet (replicas x one deployment's), req/s."""
    batch: float
    """Mean sequences decoding in one deployment at the design load."""
    step_ms: float
    """Decode step at that batch, ms (prefill pauses left out)."""
    attention_ms: float
    experts_ms: float
    all_to_all_ms: float
    """Dispatch + combine of that step over every MoE layer, ms (hidden under two-batch
    overlap where compute is longer)."""
    imbalance: float
    """Busiest GPU's routed load over the mean at that batch (gamma)."""
    prefill_ms: float
    """One prompt's share of the deployment's time, ms (`prefill_ms_per_prompt`)."""
    prefill_tok_s_per_gpu: float
    prefill_share: float
    """Share of each deployment's time spent prefilling at the design load."""
    ttft_ms: float
    """TTFT at the SLO quantile at the design load, ms."""
    ttft_mean_ms: float
    tpot_ms: float
    """TPOT at the SLO quantile at the design load, ms."""
    tpot_mean_ms: float
    price_per_hour: float
    """Price of one GPU-hour (`PlanInputs.price_of`), in `currency`."""
    currency: Currency
    cost_per_month: float
    cost_per_mtok: float
    """Cost per million output tokens at SLO capacity (F7), in `currency`."""
    cost_per_mtok_design: float
    """Cost per million output tokens at the design load (F7), in `currency`."""
    output_tok_s: float
    """Output tokens per second of the fleet at the design load: design rate x output tokens."""

    @property
    def n_gpus(self) -> int:
        """Serving GPUs: replicas x EP."""
        return self.replicas * self.ep

    @property
    def paid_gpus(self) -> int:
        return self.billed_gpus

    @property
    def batch_per_gpu(self) -> float:
        """Mean sequences per GPU at the design load."""
        return self.batch / self.ep

    @property
    def output_tok_s_per_gpu(self) -> float:
        """Output tokens per second per serving GPU at the design load: `output_tok_s` / GPUs."""
        return math.nan if not self.n_gpus else self.output_tok_s / self.n_gpus

    @property
    def network(self) -> str:
        """'NVLink' or 'InfiniBand 400 Gb/s': what carries the all-to-all."""
        name = LINK_NAMES.get(self.link, self.link)
        return name if self.scale_up else f"{name} {self.scale_out_gbit_s:g} Gb/s"

    @property
    def deployment_label(self) -> str:
        """'2 nodes x 8 H100 SXM: EP16, DP attention, 32 redundant experts, all-to-all over
        InfiniBand 400 Gb/s' (one deployment)."""
        per = min(self.ep, self.gpus_per_node)
        attn = "DP attention" if self.attention_tp == 1 else f"TP{self.attention_tp} attention"
        red = f", {self.redundant_experts} redundant experts" if self.redundant_experts else ""
        return (f"{self.nodes} node{'s' if self.nodes > 1 else ''} x {per} {self.gpu_name}: "
                f"EP{self.ep}, {attn}{red}, {OVERLAP_TEXT.get(self.overlap, self.overlap)}, "
                f"{self.weights}, "
                f"{self.kv_dtype} KV, all-to-all over {self.network}")

    @property
    def label(self) -> str:
        """The deployment, with '3 x (...)' for replicas and '+ spare' for an N+1 spare."""
        spare = " + 1 spare deployment" if self.spare_gpus else ""
        if self.replicas == 1:
            return self.deployment_label + spare
        return f"{self.replicas} x ({self.deployment_label}){spare}"


@dataclass(frozen=True, kw_only=True)
class EpRejection:
    """Why a GPU of the search has no wide-EP option."""

    gpu: str
    gpu_name: str
    detail: Note
    """The reason in English (as the CLI prints it), with its code and figures
    (`ep_rejection`): the Planner page and the quote say it in their language
    (`capacity.report.i18n.note_text`, key `note_<code>`), reading no sentence back."""


REJECTION_CODES = ("ep_rej_no_nodes", "ep_rej_node_over", "ep_rej_no_size", "ep_rej_bound",
                   "ep_rej_count", "ep_rej_weights", "ep_rej_kv", "ep_rej_slo")
"""The codes of `ep_rejection` (each a message `note_<code>` in data/i18n)."""


def ep_rejection(code: str, **p: int | float) -> Note:
    """Why a GPU (or one EP size of it) serves no wide-EP option: a `Note` with `code` and its
    figures `p`, its text the English of data/i18n/en.toml's `note_<code>`
    (tests/test_planner_ep.py holds the two equal). Two capacities are never confused: `cap`
    of ep_rej_bound is an upper bound (every KV slot decoding, no prefill, the SLOs aside:
    `_upper_capacity_per_s`), of ep_rej_count the SLO-feasible capacity (`ep_capacity_per_s`).
    """
    texts = {
        "ep_rej_no_nodes": "no node data (data/nodes.toml): its NVLink domain and NIC are unknown",
        "ep_rej_node_over": "one node of {n} is over the limit of {limit} GPUs",
        "ep_rej_no_size": "no EP size of {n}-GPU nodes fits within {limit} GPUs",
        "ep_rej_bound": ("EP{ep} cannot serve more than {cap:.2f} req/s per deployment even "
                         "with every KV slot decoding and no prefill, before the SLOs: {k} "
                         "deployments for {rate:.2f} req/s would exceed {limit} GPUs"),
        "ep_rej_count": ("EP{ep} serves {cap:.2f} req/s per deployment within the SLOs: {k} "
                         "deployments ({g} GPUs) for {rate:.2f} req/s exceed {limit} GPUs"),
        "ep_rej_weights": ("the weights do not fit on {ep} GPUs ({w:.1f} GB of weights per "
                           "GPU, {short:.1f} GB short)"),
        "ep_rej_kv": "no sequence of {held} tokens fits beside the weights on {ep} GPUs",
        "ep_rej_slo": ("EP{ep} misses the SLOs even at one request (TPOT {tpot:.1f} ms at one "
                       "sequence, prefill {pre:.0f} ms)"),
    }
    if code not in texts:
        raise InputError(f"unknown wide-EP rejection '{code}'")
    return Note(texts[code].format(**p), code=code, **p)


@dataclass(frozen=True, kw_only=True)
class EpSearch:
    """The wide-EP options of a set of planner inputs, cheapest first, and the GPUs without."""

    inputs: PlanInputs
    options: tuple[EpPlanOption, ...]
    rejected: tuple[EpRejection, ...]
    design_rate_per_s: float
    max_gpus: int
    """The most GPUs (replicas x EP + spare) an option may use."""
    evaluated: int
    """Layouts evaluated (GPU x size x layout x overlap x KV precision)."""

    @property
    def best(self) -> EpPlanOption | None:
        return self.options[0] if self.options else None


EP_BASE_GPUS: Final = 8
"""The smallest wide-EP deployment in a larger scale-up domain: DeepEP's intranode EP8, vLLM's
GB200 decode instance (8 GPUs of an NVL72 rack)."""


def ep_sizes(shape: NodeShape, max_gpus: int, experts: int) -> tuple[int, ...]:
    """EP deployment sizes a user buys of one GPU: its largest node, 2, 4, ... nodes (over the
    NIC), the NVLink domain where larger than a node, and 8, 16, ... GPUs of a domain larger
    than `EP_BASE_GPUS` (an NVL72 rack of 4-GPU trays); each at most `max_gpus` and the routed
    experts. H100 within 64: 8, 16, 32, 64; GB200 within 144: 8, 16, 32, 64, 72, 144."""
    node = shape.max_gpus_per_node
    out = {node * 2 ** k for k in range(12) if node * 2 ** k <= max_gpus}
    if node < shape.nvlink_domain <= max_gpus:
        out.add(shape.nvlink_domain)
    if shape.nvlink_domain > EP_BASE_GPUS >= shape.gpus_per_node[0]:
        out |= {n for n in (EP_BASE_GPUS * 2 ** k for k in range(12))
                if n < shape.nvlink_domain and n <= max_gpus}
    return tuple(sorted(n for n in out if n <= experts))


FP4_EP_FORMAT: Final = "nvfp4"
"""Wide EP's format on FP4 tensor cores, as SGLang's and vLLM's GB200 DeepSeek deployments."""


def _weights_keys(inp: PlanInputs, cat: Catalog, gpu: Gpu) -> tuple[str, ...]:
    """The weight formats searched on `gpu`: `inp.formats`, else the key's own suffix, else the
    model's default (FP8 for DeepSeek-V3) and, where the GPU multiplies FP4, NVFP4 (as the
    aggregated search beside it does: 4-bit replicas against 4-bit EP)."""
    base = cat.variant(inp.model)
    if inp.formats is not None:
        return inp.formats
    own = base.format.key
    if (gpu.fp4_tflops and own != FP4_EP_FORMAT and inp.model.strip().lower() == base.model.key
            and FP4_EP_FORMAT in {f.key for f in cat.formats_for(base.model)}):
        return (own, FP4_EP_FORMAT)
    return (own,)


def _rank(o: EpPlanOption) -> tuple[float, float, int, str]:
    """Cheapest per month, then per M tokens at capacity, then fewer GPUs."""
    return (round(o.cost_per_month, 6), o.cost_per_mtok, o.n_gpus, o.label)


def _option(inp: PlanInputs, g: Gpu, shape: NodeShape, o: EpOption, setup: EpSetup,
            grid: FloatArray, kv: str, pre_tok_s: float, rate: float, cap: float,
            max_gpus: int, b: EpBasis) -> EpPlanOption | Note:
    """The option of one layout at the design rate, or why it does not serve it."""
    lay: EpLayout = o.layout
    n_out = inp.workload.output_tokens
    reps = replicas_for(rate, cap)
    spare = lay.ep if inp.spare else 0
    price = inp.price_of(g)
    node = price.node_gpus
    serving = reps * lay.ep
    billed = (math.ceil((serving + spare) / node) * node) if node else serving + spare
    if billed > max_gpus:
        return ep_rejection("ep_rej_count", ep=lay.ep, cap=cap, k=reps, g=billed, rate=rate,
                            limit=max_gpus)
    pre_ms = prefill_ms_per_prompt(inp.workload.prompt, lay.ep, pre_tok_s,
                                   inp.fixed_prefill_ms(setup.variant.model))
    load = ep_load(grid, pre_ms, rate / reps, n_out, inp.slo.quantile)
    step = ep_step(setup, max(load.batch, 1.0), eta_bw=b.eta_bw, eff=b.eff,
                   overhead_ms=b.overhead_ms, overlap=o.overlap, knobs=b.knobs)
    hourly = price.per_gpu_hour * billed
    mem = o.memory
    return EpPlanOption(
        model=setup.variant.model.key, gpu=g.key, gpu_name=g.name,
        weights=setup.variant.format.key, kv_dtype=kv, ep=lay.ep,
        attention_tp=lay.attention_tp, redundant_experts=lay.redundant_experts,
        overlap=o.overlap, nodes=lay.nodes, gpus_per_node=lay.gpus_per_node,
        nvlink_domain=lay.nvlink_domain, scale_up=lay.scale_up,
        link=shape.fabric if lay.scale_up else shape.scale_out_kind,
        scale_out_gbit_s=shape.scale_out_gbit_s, replicas=reps, spare_gpus=spare,
        node_gpus=node, billed_gpus=billed,
        weights_per_gpu_gb=mem.shared_gb + mem.experts_gb,
        kv_budget_per_gpu_gb=mem.kv_budget_gb,
        max_sequences_per_gpu=mem.max_batch / lay.ep, slots=grid.size - 1,
        design_rate_per_s=rate, capacity_rate_per_s=cap * reps, batch=load.batch,
        step_ms=step.step_ms, attention_ms=step.attention_ms, experts_ms=step.experts_ms,
        all_to_all_ms=step.comm_ms, imbalance=step.imbalance, prefill_ms=pre_ms,
        prefill_tok_s_per_gpu=pre_tok_s, prefill_share=load.prefill_share,
        ttft_ms=load.ttft_q_ms + inp.request_latency_ms,
        ttft_mean_ms=load.ttft_ms + inp.request_latency_ms, tpot_ms=load.tpot_q_ms,
        tpot_mean_ms=load.tpot_ms, price_per_hour=price.per_gpu_hour, currency=inp.currency,
        cost_per_month=hourly * HOURS_PER_MONTH,
        cost_per_mtok=float(cost_per_mtok(1.0, 1, cap * reps * n_out)) * hourly,
        cost_per_mtok_design=float(cost_per_mtok(1.0, 1, rate * n_out)) * hourly,
        output_tok_s=rate * n_out)


def _upper_capacity_per_s(o: EpOption, output_tokens: int) -> float:
    """An upper bound on a layout's capacity, req/s, from `plan_ep`'s own step at its slots:
    (slots - 1) / (output tokens x step(slots)) (the rate that fills every slot,
    `disagg.decode_batch_rate`; prefill pauses and the SLOs only lower it). 0 if it does not
    fit."""
    if o.step is None or o.batch < 2:
        return 0.0
    return (o.batch - 1) / (output_tokens * o.step.step_ms / 1e3)


def basis_of(inp: PlanInputs) -> EpBasis:
    """The EP knobs of the plan's basis (`capacity.model.ep_knobs.ep_basis`): on the typical
    basis the published and fitted EP knobs with the dense knobs neutral, on every other the
    plan's own eta_bw, eff, MFU and step overhead on the spec sheet's EP knobs."""
    return ep_basis(inp.basis, eta_bw=inp.eta_bw, eff=inp.eff, mfu=inp.mfu,
                    overhead_ms=inp.step_overhead_ms)


def ep_search(inp: PlanInputs, catalog: Catalog | None = None, *,
              max_gpus: int | None = None) -> EpSearch:
    """Every wide-EP option for the planner inputs (see the module docstring), cheapest first,
    one per GPU and deployment size (its best layout, KV precision and overlap by the same
    rank), and one line per searched GPU without one. `max_gpus`: the most GPUs an option uses
    in all (replicas x EP + spare; None: `inp.max_gpus`; a GB200 NVL72 rack needs 72, over
    `PlanInputs`' limit of 64). The knobs: the plan's basis (`basis_of`), handed to `plan_ep`,
    `ep_step` and `prefill_tok_s_per_gpu`. InputError for a dense model or a concurrency
    workload.

    Layouts of one size are tried by their upper bound on capacity (`plan_ep`'s step at the
    slots), the highest first; one whose bound needs more GPUs than the limit, or cannot beat
    the option found for that GPU and size (more replicas, or as many with less capacity), is
    skipped without its step grid, and
    a size whose single deployment costs more than the cheapest option of that GPU ends it."""
    cat = catalog or default_catalog()
    model = cat.variant(inp.model).model
    if model.moe is None:
        raise InputError(f"{model.key} is not a mixture-of-experts model: wide expert "
                         "parallelism needs routed experts (try deepseek-v3, qwen3-30b-a3b or "
                         "qwen3-235b-a22b)")
    if inp.workload.peak_rate_per_s is None:
        raise InputError("wide-EP planning needs an arrival rate (daily users or a log), "
                         "not a peak concurrency")
    single_requests(inp.workload, "ep", prefix_tokens=inp.prefix_tokens,
                    prefix_share=inp.prefix_share)
    rate = design_rate_per_s(inp)
    limit = inp.max_gpus if max_gpus is None else max_gpus
    if limit < 1:
        raise InputError(f"the GPU limit must be >= 1, got {limit}")
    b = basis_of(inp)
    wl = inp.workload
    held = min(wl.context_tokens, wl.prompt + wl.output_tokens)
    shapes = node_shapes()
    best: dict[tuple[str, int], EpPlanOption] = {}
    rejected: list[EpRejection] = []
    evaluated = 0
    for key in (inp.gpus if inp.gpus is not None else tuple(sorted(cat.gpus))):
        g = cat.gpu(key)
        if g.key not in shapes:
            rejected.append(EpRejection(gpu=g.key, gpu_name=g.name,
                                        detail=ep_rejection("ep_rej_no_nodes")))
            continue
        shape = shapes[g.key]
        sizes = ep_sizes(shape, limit, model.moe.experts)
        least = min(ep_sizes(shape, MAX_NODE_GPUS, model.moe.experts), default=shape.max_gpus_per_node)
        why: Note | None = (ep_rejection("ep_rej_node_over", n=least, limit=limit)
                            if not sizes else None)
        weights = _weights_keys(inp, cat, g)
        cheapest = math.inf
        per_gpu_month = inp.price_of(g).per_gpu_hour * HOURS_PER_MONTH
        for n in sizes:
            if n * per_gpu_month > cheapest:
                break  # one deployment of this size costs more than an option found
            cands = [(w, kv, o) for w in weights for kv in inp.kv_dtypes
                     for o in plan_ep(inp.model, g.key, n, prompt_tokens=wl.prompt,
                                      output_tokens=held - wl.prompt, kv_dtype=kv, weights=w,
                                      eta_bw=b.eta_bw, eff=b.eff,
                                      overhead_ms=b.overhead_ms, util=inp.util,
                                      overhead_gb=inp.overhead_gb, catalog=cat,
                                      knobs=b.knobs, runtime_memory=inp.runtime_memory)]
            cands.sort(key=lambda c: -_upper_capacity_per_s(c[2], wl.output_tokens))
            size_why: Note | None = None
            for w, kv, o in cands:
                found = best.get((g.key, n))
                upper = _upper_capacity_per_s(o, wl.output_tokens)
                if upper > 0 and replicas_for(rate, upper) * n > limit:
                    size_why = size_why or ep_rejection(
                        "ep_rej_bound", ep=n, cap=upper, k=replicas_for(rate, upper),
                        rate=rate, limit=limit)
                    continue  # even its bound needs more GPUs than the limit
                if found is not None and upper > 0:
                    reps = replicas_for(rate, upper)
                    if reps > found.replicas or (reps == found.replicas and upper
                                                 <= found.capacity_rate_per_s / found.replicas):
                        continue  # cannot beat the option found for this size
                evaluated += 1
                made = _evaluate(inp, g, shape, o, kv, w, held, rate, limit, cat, b)
                if isinstance(made, Note):
                    size_why = size_why or made
                    continue
                if found is None or _rank(made) < _rank(found):
                    best[(g.key, n)] = made
                cheapest = min(cheapest, made.cost_per_month)
            why = size_why or why
        if not any(k[0] == g.key for k in best):
            rejected.append(EpRejection(gpu=g.key, gpu_name=g.name, detail=why or ep_rejection(
                "ep_rej_no_size", n=shape.max_gpus_per_node, limit=limit)))
    return EpSearch(inputs=inp, options=tuple(sorted(best.values(), key=_rank)),
                    rejected=tuple(rejected), design_rate_per_s=rate, max_gpus=limit,
                    evaluated=evaluated)


def _evaluate(inp: PlanInputs, g: Gpu, shape: NodeShape, o: EpOption, kv: str, weights: str,
              held: int, rate: float, limit: int, cat: Catalog,
              b: EpBasis) -> EpPlanOption | Note:
    """One layout of `plan_ep`: its step grid, prefill and capacity, then the option (or why
    it serves no load)."""
    lay = o.layout
    mem = o.memory
    if mem.max_batch < 1:
        short = -mem.kv_budget_gb
        return (ep_rejection("ep_rej_weights", ep=lay.ep, w=mem.shared_gb + mem.experts_gb,
                             short=short) if short > 0 else
                ep_rejection("ep_rej_kv", held=held, ep=lay.ep))
    slots = min(mem.max_batch, MAX_TOKENS_PER_RANK * lay.ep)
    s = ep_setup(inp.model, g.key, lay, context_tokens=held, kv_dtype=kv, weights=weights,
                 exponent=o.exponent, catalog=cat)
    grid = step_grid_ms(s, slots, eta_bw=b.eta_bw, eff=b.eff, overhead_ms=b.overhead_ms,
                        overlap=o.overlap, knobs=b.knobs)
    gamma = imbalance_factor(experts=s.experts, active=s.active, exponent=s.exponent,
                             gpus=lay.ep, redundant=lay.redundant_experts,
                             batch_tokens=float(inp.workload.prompt))
    pre_tok_s = prefill_tok_s_per_gpu(s, inp.workload.prompt, mfu=b.mfu, imbalance=gamma,
                                      knobs=b.knobs)
    pre_ms = prefill_ms_per_prompt(inp.workload.prompt, lay.ep, pre_tok_s,
                                   inp.fixed_prefill_ms(s.variant.model))
    cap = ep_capacity_per_s(grid, pre_ms, inp.workload.output_tokens,
                            inp.slo.at_engine(inp.request_latency_ms))
    if cap <= 0:
        return ep_rejection("ep_rej_slo", ep=lay.ep, tpot=float(grid[1]), pre=pre_ms)
    return _option(inp, g, shape, o, s, grid, kv, pre_tok_s, rate, cap, limit, b)


def ep_options(inp: PlanInputs, catalog: Catalog | None = None, *,
               max_gpus: int | None = None) -> tuple[EpPlanOption, ...]:
    """The wide-EP options of `ep_search`, cheapest first."""
    return ep_search(inp, catalog, max_gpus=max_gpus).options


# ---------------------------------------------------------------------------------------------
# Aggregated against wide EP


@dataclass(frozen=True, kw_only=True)
class EpComparison:
    """The cheapest aggregated option (TP within a node) against the cheapest wide-EP one."""

    aggregated: Plan
    ep: EpSearch
    winner: str
    """'aggregated', 'wide-ep' or 'none' (neither meets the SLOs)."""
    reason: str


def _money(currency: str, v: float) -> str:
    return f"{currency} {v:,.0f}/month"


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def compare_ep(inp: PlanInputs, catalog: Catalog | None = None, *,
               aggregated: Plan | None = None, search: EpSearch | None = None,
               max_gpus: int | None = None) -> EpComparison:
    """Rank the cheapest aggregated option (`search.plan`, or `aggregated`) against the
    cheapest wide-EP option (`ep_search`, or `search`) by cost per month, and say why in
    words from their own figures (ties go to aggregated: one engine per replica, no
    all-to-all)."""
    cat = catalog or default_catalog()
    p = aggregated if aggregated is not None else plan_aggregated(inp, cat)
    eps = search if search is not None else ep_search(inp, cat, max_gpus=max_gpus)
    agg, ep = p.best, eps.best
    pct = f"p{inp.slo.quantile * 100:g}"
    n_out = inp.workload.output_tokens
    if ep is not None and (agg is None or ep.cost_per_month < agg.cost_per_month):
        head = (f"wide EP: {ep.label} ({_money(ep.currency, ep.cost_per_month)}, "
                f"{_gpus(ep.paid_gpus)}) decodes {ep.batch:,.0f} sequences per deployment at "
                f"TPOT {pct} {ep.tpot_ms:.1f} ms, {ep.output_tok_s_per_gpu:,.0f} output tok/s "
                f"per GPU, each GPU reading {ep.weights_per_gpu_gb:.0f} GB of weights a step")
        if agg is None:
            return EpComparison(aggregated=p, ep=eps, winner="wide-ep", reason=(
                f"{head}; no aggregated configuration meets the SLOs within "
                f"{inp.max_gpus} GPUs"))
        per_gpu = agg.design_rate_per_s * n_out / agg.n_gpus
        return EpComparison(aggregated=p, ep=eps, winner="wide-ep", reason=(
            f"{head}; aggregated needs {agg.label} ({_money(agg.currency, agg.cost_per_month)},"
            f" {_gpus(agg.paid_gpus)}): each TP={agg.tp} replica holds every expert and decodes "
            f"{agg.slots_per_replica} sequences at most, {per_gpu:,.0f} output tok/s per GPU"))
    if agg is not None:
        per_gpu = agg.design_rate_per_s * n_out / agg.n_gpus
        tail = (f"no wide-EP deployment meets the SLOs within {eps.max_gpus} GPUs"
                if ep is None else
                f"the cheapest wide-EP option, {ep.label}, costs "
                f"{_money(ep.currency, ep.cost_per_month)} for {_gpus(ep.paid_gpus)}"
                + (f": one EP deployment is {ep.ep} GPUs, more than the load needs"
                   if ep.replicas == 1 and ep.n_gpus > agg.n_gpus else
                   f" ({ep.output_tok_s_per_gpu:,.0f} output tok/s per GPU)"))
        return EpComparison(aggregated=p, ep=eps, winner="aggregated", reason=(
            f"aggregated: {agg.label} ({_money(agg.currency, agg.cost_per_month)}, "
            f"{_gpus(agg.paid_gpus)}, TPOT {pct} {agg.tpot_ms:.1f} ms, {per_gpu:,.0f} output "
            f"tok/s per GPU) serves the design load; {tail}"))
    return EpComparison(aggregated=p, ep=eps, winner="none", reason=(
        f"neither an aggregated nor a wide-EP deployment meets TTFT {inp.slo.ttft_ms:g} ms and "
        f"TPOT {inp.slo.tpot_ms:g} ms within the GPU limits ({inp.max_gpus} aggregated, "
        f"{eps.max_gpus} wide EP)"))
