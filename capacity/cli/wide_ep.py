"""Wide expert parallelism on the command line (docs/expert-parallel.md): `capacity size
--wide-ep` ranks EP deployments after the aggregated ones (text section, JSON key "wide_ep");
with `--disaggregated` too, EP deployments on separate prefill and decode pools against them
(section "Wide EP on disaggregated pools", JSON key "wide_ep_pools"); and `capacity plan --ep
N` evaluates one EP deployment a user asks for (memory per GPU, the KV sequences, the decode
step with its all-to-all, TPOT, tok/s per GPU, prefill and cost).

DeepSeek-R1 has DeepSeek-V3's architecture (the same config.json): the catalog calls both
`deepseek-v3`. The three deployments of issue 27:

    capacity plan --model deepseek-v3 --gpu h200-sxm --gpus 8 --ep 8
    capacity plan --model deepseek-v3 --gpu h100-sxm --gpus 16 --ep 16 --redundant-experts 32
    capacity plan --model deepseek-v3 --gpu gb200 --gpus 72 --ep 72 --redundant-experts 32
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from capacity.cli.common import MAX_GPUS_PER_DEPLOYMENT, whole
from capacity.errors import InputError
from capacity.report.tables import render

if TYPE_CHECKING:  # the EP model and search load only with --ep / --wide-ep
    from collections.abc import Callable

    from capacity.model.scenario import Scenario
    from capacity.plan.ep_pools import EpPoolsOption
    from capacity.plan.ep_pools_search import PoolsComparison
    from capacity.plan.ep_search import EpComparison, EpPlanOption
    from capacity.plan.options import Plan, PlanInputs
    from capacity.report.document import Block

OVERLAPS = ("two-batch", "sum")
"""`--overlap` values (`capacity.model.expert_parallel.Overlap`)."""
BATCH_LADDER = (1, 16, 64, 128)
"""Sequences per GPU `plan --ep` shows below the most the memory holds (without
--concurrency)."""


# ---------------------------------------------------------------------------------------------
# capacity size --wide-ep


def add_size_flags(group: Any) -> None:
    """`capacity size`'s wide-EP flags (in its search-space group)."""
    group.add_argument("--wide-ep", action="store_true",
                       help="also rank wide expert-parallel deployments of a MoE model (EP over "
                            "one node, 2, 4, ... nodes or an NVLink domain; DP or TP attention, "
                            "redundant experts) after these, and say whether they beat the "
                            "aggregated options (docs/expert-parallel.md; a rate or daily-user "
                            "workload)")
    group.add_argument("--wide-ep-max-gpus", type=whole(min=1, max=MAX_GPUS_PER_DEPLOYMENT),
                       default=None, metavar="N",
                       help="most GPUs a wide-EP option may use in all, replicas x EP (default: "
                            "--max-gpus; 72 reaches one GB200 NVL72 rack)")


def size_compare(args: argparse.Namespace, inp: PlanInputs, aggregated: Plan
                 ) -> EpComparison:
    """The wide-EP search of `capacity size` and its comparison with the aggregated plan."""
    from capacity.plan.ep_search import compare_ep, ep_search

    search = ep_search(inp, max_gpus=args.wide_ep_max_gpus)
    return compare_ep(inp, aggregated=aggregated, search=search)


def check_wide_ep(args: argparse.Namespace, inp: PlanInputs) -> None:
    """With --wide-ep: a dense model, a workload without an arrival rate or --mix is one line
    before any search (InputError)."""
    if not getattr(args, "wide_ep", False):
        return
    from capacity.catalog.loader import default_catalog

    if getattr(args, "mix", None):
        raise InputError("--wide-ep sizes one workload: drop --mix")
    m = default_catalog().variant(args.model).model
    if m.moe is None:
        raise InputError(f"--wide-ep: {m.key} is not a mixture-of-experts model (no routed "
                         "experts to spread); try deepseek-v3, qwen3-30b-a3b or qwen3-235b-a22b")
    if inp.workload.peak_rate_per_s is None:
        raise InputError("--wide-ep sizes EP deployments to an arrival rate: give --dau or "
                         "--log, not --peak-concurrency")


def option_json(o: EpPlanOption) -> dict[str, Any]:
    """One wide-EP option as JSON: its fields and the figures its properties give."""
    return {**asdict(o), "label": o.label, "deployment_label": o.deployment_label,
            "gpus": o.n_gpus, "paid_gpus": o.paid_gpus, "batch_per_gpu": o.batch_per_gpu,
            "output_tok_s_per_gpu": o.output_tok_s_per_gpu, "network": o.network}


def size_json(cmp: EpComparison, top: int) -> dict[str, Any]:
    """`capacity size --wide-ep --format json`'s "wide_ep" key."""
    s = cmp.ep
    return {"winner": cmp.winner, "reason": cmp.reason, "max_gpus": s.max_gpus,
            "design_rate_per_s": s.design_rate_per_s, "evaluated": s.evaluated,
            "options": [option_json(o) for o in s.options[:top]],
            "rejected": [{"gpu": r.gpu, "detail": str(r.detail), "code": r.detail.code,
                          "params": r.detail.params} for r in s.rejected]}


def size_quote_section(cmp: EpComparison) -> Callable[[str], list[Block]]:
    """`capacity size --wide-ep --quote FILE`'s section: the one the Planner page's quote
    carries (`capacity.report.quote_ep.ep_section`)."""
    from capacity.report.quote_ep import ep_section

    return ep_section(cmp)


def size_text(cmp: EpComparison, top: int) -> str:
    """`capacity size --wide-ep`'s section: the winner and why, the best EP options, and the
    GPUs without one."""
    s = cmp.ep
    q = f"p{s.inputs.slo.quantile * 100:g}"
    lines = ["", f"Wide expert parallelism (docs/expert-parallel.md): within {s.max_gpus} "
             f"GPUs, design load {s.design_rate_per_s:.2f} req/s",
             f"winner: {cmp.reason}"]
    for i, o in enumerate(s.options[:top], 1):
        lines.append(
            f"{i}. {o.label}: {o.paid_gpus} GPUs, {o.currency} {o.cost_per_month:,.0f}/month, "
            f"{o.currency} {o.cost_per_mtok_design:.3g}/M tok at the design load; TTFT {q} "
            f"{o.ttft_ms:,.0f} ms, TPOT {q} {o.tpot_ms:.1f} ms; {o.batch_per_gpu:.1f} sequences"
            f" and {o.output_tok_s_per_gpu:,.0f} output tok/s per GPU, all-to-all "
            f"{o.all_to_all_ms:.1f} ms of a {o.step_ms:.1f} ms step, prefill "
            f"{o.prefill_share:.0%} of the time; {o.capacity_rate_per_s:.2f} req/s at most")
    if not s.options:
        lines.append(f"no wide-EP deployment meets the SLOs within {s.max_gpus} GPUs")
    lines += [f"- {r.gpu_name}: {r.detail}" for r in s.rejected]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# capacity size --wide-ep --disaggregated: EP deployments on separate pools


def pools_compare(args: argparse.Namespace, inp: PlanInputs, wide: EpComparison
                  ) -> PoolsComparison:
    """The EP-pools search of `capacity size --wide-ep --disaggregated` (within
    --wide-ep-max-gpus, as the wide-EP search) against the wide-EP options."""
    from capacity.plan.ep_pools_search import compare_pools, ep_pools_search

    return compare_pools(wide.ep, ep_pools_search(inp, max_gpus=args.wide_ep_max_gpus))


def pools_option_json(o: EpPoolsOption) -> dict[str, Any]:
    """One EP-pools option as JSON: its fields and the figures its properties give."""
    return {**asdict(o), "label": o.label, "ratio": o.ratio, "prefill_label": o.prefill_label,
            "decode_label": o.decode_label, "handover": o.handover_text, "gpus": o.n_gpus,
            "paid_gpus": o.paid_gpus, "capacity_rate_per_s": o.capacity_rate_per_s,
            "cost_per_mtok": o.cost_per_mtok, "cost_per_mtok_design": o.cost_per_mtok_design,
            "output_tok_s_per_gpu": o.output_tok_s_per_gpu,
            "input_tok_s_per_prefill_gpu": o.input_tok_s_per_prefill_gpu,
            "output_tok_s_per_decode_gpu": o.output_tok_s_per_decode_gpu}


def pools_json(cmp: PoolsComparison, top: int) -> dict[str, Any]:
    """`capacity size --wide-ep --disaggregated --format json`'s "wide_ep_pools" key."""
    s = cmp.pools
    return {"winner": cmp.winner, "reason": cmp.reason, "max_gpus": s.max_gpus,
            "design_rate_per_s": s.design_rate_per_s, "evaluated": s.evaluated,
            "options": [pools_option_json(o) for o in s.options[:top]],
            "rejected": [{"gpu": r.gpu, "detail": str(r.detail), "code": r.detail.code,
                          "params": r.detail.params} for r in s.rejected]}


def pools_quote_section(cmp: PoolsComparison) -> Callable[[str], list[Block]]:
    """`capacity size --wide-ep --disaggregated --quote FILE`'s section: the one the Planner
    page's quote carries (`capacity.report.quote_ep_pools.pools_section`)."""
    from capacity.report.quote_ep_pools import pools_section

    return pools_section(cmp)


def pools_text(cmp: PoolsComparison, top: int) -> str:
    """`capacity size --wide-ep --disaggregated`'s section: the winner against the wide-EP
    options and why, the best EP-pools options, and the GPUs without one."""
    s = cmp.pools
    q = f"p{s.inputs.slo.quantile * 100:g}"
    lines = ["", f"Wide EP on disaggregated pools (docs/expert-parallel.md): within "
             f"{s.max_gpus} GPUs, design load {s.design_rate_per_s:.2f} req/s",
             f"winner: {cmp.reason}"]
    for i, o in enumerate(s.options[:top], 1):
        lines.append(
            f"{i}. {o.label}: {o.paid_gpus} GPUs, {o.currency} {o.cost_per_month:,.0f}/month, "
            f"{o.currency} {o.cost_per_mtok_design:.3g}/M tok at the design load; TTFT {q} "
            f"{o.ttft_ms:,.0f} ms (a prompt {o.prefill_ms:.1f} ms on its prefill deployment, "
            f"hand-over {o.transfer_ms:.1f} ms + wait {o.transfer_wait_ms:.1f} ms), TPOT {q} "
            f"{o.tpot_ms:.1f} ms; {o.input_tok_s_per_prefill_gpu:,.0f} input tok/s per prefill "
            f"GPU, {o.output_tok_s_per_decode_gpu:,.0f} output tok/s per decode GPU; a prefill "
            f"deployment serves {o.prefill_capacity_per_s:.2f} req/s, a decode deployment "
            f"{o.decode_capacity_per_s:.2f}")
    if not s.options:
        lines.append(f"no EP-pools option meets the SLOs within {s.max_gpus} GPUs")
    lines += [f"- {r.gpu_name}: {r.detail}" for r in s.rejected]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# capacity plan --ep N


def add_plan_flags(p: argparse.ArgumentParser) -> None:
    """`capacity plan`'s flags for one wide-EP deployment."""
    g = p.add_argument_group("wide expert parallelism (MoE; docs/expert-parallel.md)")
    g.add_argument("--ep", type=whole(min=1, max=MAX_GPUS_PER_DEPLOYMENT), default=None,
                   metavar="N",
                   help="evaluate one expert-parallel deployment of N GPUs instead (the routed "
                        "experts spread over them; --gpus a multiple of N, default N): memory "
                        "per GPU, KV sequences, the decode step and its all-to-all, TPOT, tok/s "
                        "per GPU, prefill, cost")
    g.add_argument("--attention-tp", type=whole(min=1, max=MAX_GPUS_PER_DEPLOYMENT), default=1,
                   metavar="N", help="with --ep: GPUs per attention group, 1 = DP attention "
                                     "(default 1)")
    g.add_argument("--redundant-experts", type=whole(min=0, max=4096), default=0, metavar="R",
                   help="with --ep: extra copies of hot experts over all GPUs (EPLB; DeepSeek "
                        "runs 32; default 0)")
    g.add_argument("--overlap", choices=OVERLAPS, default=OVERLAPS[0],
                   help="with --ep: two-batch overlap (default: two micro-batches hide each "
                        "other's all-to-all) or sum (operator by operator)")


NOT_WITH_EP = (("vram", "--vram"), ("bandwidth", "--bandwidth"), ("tflops", "--tflops"),
               ("weights_gb", "--weights-gb"), ("draft", "--draft"), ("engine", "--engine"),
               ("rate", "--rate"), ("stages", "--stages"))
"""`capacity plan` flags the EP model does not take (it reads the catalog's GPU and weights;
the load sections are the dense model's)."""


def check_plan_args(args: argparse.Namespace) -> None:
    """--ep's own checks before the scenario is built; --gpus defaults to --ep."""
    if args.ep is None:
        for flag, name in (("attention_tp", "--attention-tp"),
                           ("redundant_experts", "--redundant-experts")):
            if getattr(args, flag) != (1 if flag == "attention_tp" else 0):
                raise InputError(f"{name} goes with --ep N")
        return
    for attr, flag in NOT_WITH_EP:
        if getattr(args, attr, None) not in (None, "none"):
            raise InputError(f"{flag} does not apply with --ep (the EP model uses the catalog's "
                             "GPU and weights, and has no load section)")
    if args.tp != 1:
        raise InputError("--tp splits a dense replica; with --ep give --attention-tp")
    if args.gpus == 1:
        args.gpus = args.ep
    if args.gpus % args.ep:
        raise InputError(f"--gpus {args.gpus} is not a multiple of --ep {args.ep}")


def _batches(args: argparse.Namespace, ep: int, most: int, default_list: str) -> list[int]:
    """The total batches (sequences in the deployment) shown: --concurrency when given, else
    `BATCH_LADDER` per GPU below the most the KV holds (capped at 256 per GPU), and that."""
    if args.concurrency != default_list:
        return sorted({int(c) for c in args.concurrency.replace(" ", "").split(",") if c})
    return sorted({b * ep for b in BATCH_LADDER if b * ep < most} | ({most} if most else set()))


def plan_record(args: argparse.Namespace, s: Scenario, basis: str, default_list: str
                ) -> dict[str, Any]:
    """One EP deployment's figures (the JSON interface of `capacity plan --ep`), on the basis
    `basis` names ('' the chapter's, 'spec', 'typical:ENGINE' or a calibration): its EP knobs
    (`ep_knobs.ep_basis`, as `capacity size --wide-ep` and the frontier take them)."""
    from capacity.catalog.loader import default_catalog
    from capacity.catalog.nodes import node_shape
    from capacity.model.basis import kind_of_knobs, knobs_of
    from capacity.model.cost import HOURS_PER_MONTH, cost_per_mtok
    from capacity.model.ep_knobs import ep_basis
    from capacity.model.expert_parallel import (
        MAX_TOKENS_PER_RANK,
        ep_layout,
        ep_memory,
        ep_setup,
        ep_step,
        prefill_tok_s_per_gpu,
    )
    from capacity.model.moe_imbalance import imbalance_factor
    from capacity.plan.ep_search import LINK_NAMES, prefill_ms_per_prompt

    cat = default_catalog()
    typical = basis.removeprefix("typical:") if basis.startswith("typical:") else ""
    kind = kind_of_knobs(knobs_of(s), calibration=s.calibration or "", typical=typical)
    b = ep_basis(kind, eta_bw=s.eta_bw, eff=s.eff, mfu=s.mfu, overhead_ms=s.step_overhead_ms)
    lay = ep_layout(s.gpu.key, args.ep, attention_tp=args.attention_tp,
                    redundant_experts=args.redundant_experts)
    setup = ep_setup(s.variant.model.key, s.gpu.key, lay, context_tokens=s.context_tokens,
                     kv_dtype=s.kv_dtype, weights=s.variant.format.key, catalog=cat)
    mem = ep_memory(setup, util=s.util, overhead_gb=s.overhead_gb,
                    memory_gb=s.budget_vram_gb)
    most = min(mem.max_batch, MAX_TOKENS_PER_RANK * lay.ep)
    gamma = imbalance_factor(experts=setup.experts, active=setup.active,
                             exponent=setup.exponent, gpus=lay.ep,
                             redundant=lay.redundant_experts, batch_tokens=float(s.prompt))
    pre = prefill_tok_s_per_gpu(setup, s.prompt, mfu=b.mfu, imbalance=gamma, knobs=b.knobs)
    shape = node_shape(s.gpu.key)
    link = shape.fabric if lay.scale_up else shape.scale_out_kind
    points = []
    for n in _batches(args, lay.ep, most, default_list):
        st = ep_step(setup, float(n), eta_bw=b.eta_bw, eff=b.eff, overhead_ms=b.overhead_ms,
                     overlap=args.overlap, knobs=b.knobs)
        points.append({
            "batch": n, "batch_per_gpu": n / lay.ep, "fits": n <= mem.max_batch,
            "attention_ms": st.attention_ms, "experts_ms": st.experts_ms,
            "all_to_all_ms": st.comm_ms, "imbalance": st.imbalance, "step_ms": st.step_ms,
            "tpot_ms": st.tpot_ms, "tok_s_per_gpu": st.tok_s_per_gpu,
            "aggregate_tok_s": st.tok_s_per_gpu * lay.ep * (s.n_gpus // lay.ep),
            "bound_ms": st.bound_ms, "bound_tok_s_per_gpu": st.bound_tok_s_per_gpu,
            "cost_per_mtok": float(cost_per_mtok(s.price_per_hour, lay.ep,
                                                 st.tok_s_per_gpu * lay.ep))})
    return {
        "model": setup.variant.model.key, "weights": setup.variant.format.key,
        "gpu": s.gpu.key, "gpu_name": s.gpu.name, "gpus": s.n_gpus, "ep": lay.ep,
        "replicas": s.n_gpus // lay.ep, "attention_tp": lay.attention_tp,
        "dp_attention": lay.dp_attention, "redundant_experts": lay.redundant_experts,
        "overlap": args.overlap, "context_tokens": s.context_tokens, "prompt_tokens": s.prompt,
        "kv_dtype": s.kv_dtype, "nodes": lay.nodes, "gpus_per_node": lay.gpus_per_node,
        "nvlink_domain": lay.nvlink_domain, "crosses_nodes": lay.nodes > 1,
        "all_to_all_over_nic": not lay.scale_up, "all_to_all_link": link,
        "all_to_all_link_name": LINK_NAMES.get(link, link),
        "scale_out_gbit_s": shape.scale_out_gbit_s, "moe_layers": setup.moe_layers,
        "imbalance_family": setup.family, "imbalance_exponent": setup.exponent,
        "expert_slots_per_gpu": setup.expert_slots, "memory": asdict(mem),
        "weights_per_gpu_gb": mem.shared_gb + mem.experts_gb,
        "max_sequences_per_gpu": mem.max_batch / lay.ep, "max_batch": most,
        "prefill_tok_s_per_gpu": pre,
        "prefill_ms": prefill_ms_per_prompt(s.prompt, lay.ep, pre, s.prefill_overhead_ms),
        "price_per_hour": s.price_per_hour, "currency": s.currency,
        "cost_per_month": s.price_per_hour * s.n_gpus * HOURS_PER_MONTH,
        "basis": kind.value, "eta_bw": b.eta_bw, "eff": b.eff, "mfu": b.mfu,
        "step_overhead_ms": b.overhead_ms, "ep_knobs": asdict(b.knobs), "points": points}


def plan_text(r: dict[str, Any], basis_text: str, fmt: str) -> str:
    """`capacity plan --ep`'s text: the layout, memory per GPU, the step table, prefill, cost."""
    md = fmt == "markdown"
    m = r["memory"]
    attn = "DP attention" if r["dp_attention"] else f"TP{r['attention_tp']} attention"
    red = f", {r['redundant_experts']} redundant experts" if r["redundant_experts"] else ""
    per = min(r["ep"], r["gpus_per_node"])
    net = (f"all-to-all over {r['all_to_all_link_name']} inside one domain of "
           f"{r['nvlink_domain']}" if not r["all_to_all_over_nic"] else
           f"all-to-all crosses nodes over {r['all_to_all_link_name']} "
           f"{r['scale_out_gbit_s']:g} Gb/s per GPU (NVLink inside each node)")
    reps = f" ({r['replicas']} deployments)" if r["replicas"] > 1 else ""
    out = [("# " if md else "") + f"{r['model']} ({r['weights']}) on {r['gpus']} x "
           f"{r['gpu_name']}{reps}: EP{r['ep']}, {attn}{red}, {r['overlap']} overlap",
           f"{r['nodes']} node{'s' if r['nodes'] > 1 else ''} x {per} GPUs; {net}",
           f"basis: {basis_text}", ""]
    fits = r["max_batch"] >= 1
    out.append(f"Memory per GPU: {m['shared_gb']:.1f} GB shared weights + "
               f"{r['expert_slots_per_gpu']} experts ({m['experts_gb']:.1f} GB) = "
               f"{r['weights_per_gpu_gb']:.1f} GB; {m['usable_gb']:.1f} GB usable - weights - "
               f"{m['overhead_gb']:g} GB overhead - {m['buffers_gb']:.2f} GB EP buffers = "
               f"{m['kv_budget_gb']:.1f} GB for KV")
    out.append(f"KV: {m['kv_request_bytes'] / 1e6:.1f} MB per sequence of {r['context_tokens']} "
               f"tokens ({r['kv_dtype']}) -> {r['max_sequences_per_gpu']:.0f} sequences per GPU,"
               f" {m['max_batch']:,} in the deployment" + (
                   f" (a plan uses at most {r['max_batch']:,}: 256 per GPU)"
                   if r["max_batch"] < m["max_batch"] else "") if fits else
               "the weights and one sequence do not fit: no batch to decode")
    if r["points"]:
        cur = r["currency"]
        out.append("")
        out.append(("## " if md else "") + f"Decode step of the busiest GPU ({r['moe_layers']} "
                   f"MoE layers; imbalance family {r['imbalance_family']}, exponent "
                   f"{r['imbalance_exponent']:.2f})")
        out.append(render(
            ["batch", "per GPU", "attention ms", "experts ms", "all-to-all ms", "imbalance",
             "step = TPOT ms", "tok/s per GPU", "bound tok/s per GPU", f"{cur}/M tok", "fits"],
            [[p["batch"], p["batch_per_gpu"], p["attention_ms"], p["experts_ms"],
              p["all_to_all_ms"], p["imbalance"], p["step_ms"], p["tok_s_per_gpu"],
              p["bound_tok_s_per_gpu"], p["cost_per_mtok"], "yes" if p["fits"] else "no"]
             for p in r["points"]], fmt).rstrip("\n"))
    out.append("")
    at = ("the typical EP knobs" if r["basis"] == "typical" else f"MFU {r['mfu']:g}")
    out.append(f"Prefill: {r['prefill_tok_s_per_gpu']:,.0f} input tok/s per GPU at {at}; a "
               f"{r['prompt_tokens']:,}-token prompt takes {r['prefill_ms']:.1f} ms of the "
               "deployment's time")
    out.append(f"Cost: {r['currency']} {r['price_per_hour']:g} per GPU-hour x {r['gpus']} = "
               f"{r['currency']} {r['cost_per_month']:,.0f}/month")
    return "\n".join(out) + "\n"


def plan_run(args: argparse.Namespace, s: Scenario, basis: str, basis_text: str,
             default_list: str) -> int:
    """`capacity plan --ep N`: the record, as JSON or text (CSV: the step table). Exit 0, as
    `capacity plan` (a deployment that does not fit says so)."""
    from capacity.cli.common import dumps

    r = plan_record(args, s, basis, default_list)
    if args.format == "json":
        print(dumps(r | {"basis_text": basis_text}, indent=2))
    elif args.format == "csv":
        cols = list(r["points"][0]) if r["points"] else ["batch"]
        print(render(cols, [[p[c] for c in cols] for p in r["points"]], "csv"), end="")
    else:
        print(plan_text(r, basis_text, args.format), end="")
    return 0
