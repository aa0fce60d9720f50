"""One EP-pools layout on the command line (issue 27, docs/expert-parallel.md, "Prefill and
decode on separate EP pools"): `capacity plan --prefill-pool XxEPn --decode-pool YxEPm
--pool-rate R` evaluates X prefill deployments of n GPUs and Y decode deployments of m GPUs of
the plan's `--gpu` at R requests a second (`capacity.plan.ep_pools_search.evaluate_pools`: each
pool's layout of its size as `capacity size --wide-ep --disaggregated` picks it, its figures
at those counts, the rate-matched counts), as text, JSON (the option's keys as that command's
JSON lists them) or CSV (TTFT in its parts).

SGLang's 96-H100 DeepSeek deployment (prefill on 4 nodes, decode on 9) at 20 req/s of 2K
prompts:

    capacity plan --model deepseek-v3 --gpu h100-sxm --kv-dtype fp8 --prefill-pool 1xEP32 \\
        --decode-pool 1xEP72 --pool-rate 20 --prompt-tokens 2000 --ctx 2500 \\
        --output-tokens 500 --slo-ttft-ms 2000 --slo-tpot-ms 100
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from capacity.report.tables import render

if TYPE_CHECKING:
    from capacity.plan.ep_pools_search import PoolsLayout
    from capacity.plan.options import PlanInputs


def _ms(v: float) -> str:
    return f"{v:,.1f}" if math.isfinite(v) else "inf (saturated)"


def _share(v: float) -> str:
    return f"{v:.0%}" if math.isfinite(v) else "inf"


def parts(r: PoolsLayout) -> list[list[str | float]]:
    """TTFT at the SLO quantile in its parts (ms): the prefill pool (the prompt and its queue),
    the hand-over, the ranks' waits, the first decode step, the request outside the GPU."""
    o = r.option
    rows: list[list[str | float]] = [
        ["prefill (queue and prompt)", o.prefill_part_ms], ["KV hand-over", o.transfer_ms],
        ["link wait", o.transfer_wait_ms], ["first decode step", o.first_step_ms]]
    if o.request_latency_ms > 0:
        rows.append(["request outside the GPU", o.request_latency_ms])
    return [*rows, ["TTFT", o.ttft_ms]]


def ep_pools_text(r: PoolsLayout, inp: PlanInputs, basis_text: str, fmt: str) -> str:
    """The layout, the rate-matched counts, the utilisations, TTFT in its parts, TPOT, the
    SLOs, the capacities and the cost."""
    md = fmt == "markdown"
    o = r.option
    pct, cur = f"p{inp.slo.quantile * 100:g}", inp.currency
    rate = o.design_rate_per_s
    lines = [("# " if md else "") + f"{o.label}: {o.n_gpus} GPUs, {inp.model}",
             f"basis: {basis_text}",
             f"at {rate:,.3g} req/s ({o.prompt_tokens:,} prompt and {o.output_tokens:,} output "
             "tokens): rate-matched counts " + ("none (no count meets the SLOs)" if r.matched
                                                is None else f"{r.matched[0]}P+{r.matched[1]}D"),
             f"prefill: a prompt takes {o.prefill_ms:,.1f} ms on one deployment "
             f"({o.prefill_tok_s_per_gpu:,.0f} tok/s per GPU), utilisation "
             f"{_share(o.prefill_utilization)}; {o.input_tok_s_per_prefill_gpu:,.0f} input tok/s "
             "per prefill GPU",
             f"decode: mean batch {o.decode_batch:,.1f} of {o.decode_slots:,} slots a "
             f"deployment, step {_ms(o.decode_step_ms)} ms; {o.output_tok_s_per_decode_gpu:,.0f} "
             "output tok/s per decode GPU",
             f"KV hand-over: {o.handover_bytes / 1e6:,.1f} MB a request per sending GPU over "
             f"{o.handover_text} ({o.handover_gb_s:,.4g} GB/s per GPU), link utilisation "
             f"{_share(o.link_utilization)}", ""]
    lines.append(("## " if md else "") + f"TTFT {pct} in its parts")
    lines.append(render(["part", "ms"], [[k, _ms(float(v))] for k, v in parts(r)],
                        fmt).rstrip("\n"))
    lines.append(f"TPOT {pct} {_ms(o.tpot_ms)} ms (mean {_ms(o.tpot_mean_ms)} ms)")
    lines.append(f"SLOs: TTFT {pct} <= {inp.slo.ttft_ms:g} ms "
                 + ("met" if o.ttft_ms <= inp.slo.ttft_ms else "missed") + f", TPOT {pct} <= "
                 f"{inp.slo.tpot_ms:g} ms " + ("met" if o.tpot_ms <= inp.slo.tpot_ms
                                               else "missed"))
    lines.append(f"capacity within the SLOs: a prefill deployment {o.prefill_capacity_per_s:,.3g}"
                 f" req/s, a decode deployment {o.decode_capacity_per_s:,.3g} req/s, the layout "
                 f"{o.capacity_rate_per_s:,.3g} req/s")
    lines.append(f"cost: {o.paid_gpus} GPUs, {cur} {o.cost_per_month:,.0f}/month; {cur} "
                 f"{o.cost_per_mtok_design:,.3g} per million output tokens at {rate:,.3g} req/s,"
                 f" {cur} {o.cost_per_mtok:,.3g} at the SLO capacity")
    return "\n".join(lines) + "\n"


def run_ep(args: argparse.Namespace, inp: PlanInputs, gpu: str, prefill: tuple[int, int],
           decode: tuple[int, int], basis_text: str) -> int:
    """`capacity plan --prefill-pool XxEPn --decode-pool YxEPm --pool-rate R`: the layout's
    figures as text or JSON (CSV: the TTFT parts). Exit 0."""
    from capacity.cli.common import dumps
    from capacity.cli.wide_ep import pools_option_json
    from capacity.errors import InputError
    from capacity.plan.ep_pools_search import evaluate_pools

    if args.decode_gpu not in (None, gpu):
        raise InputError("EP pools are one GPU type: drop --decode-gpu")
    r = evaluate_pools(inp, gpu, prefill=prefill, decode=decode)
    if args.format == "json":
        print(dumps({**pools_option_json(r.option), "model_key": inp.model,
                     "matched": None if r.matched is None else {
                         "prefill_replicas": r.matched[0], "decode_replicas": r.matched[1]},
                     "slo": {"ttft_ms": inp.slo.ttft_ms, "tpot_ms": inp.slo.tpot_ms,
                             "quantile": inp.slo.quantile},
                     "basis_text": basis_text}, indent=2))
    elif args.format == "csv":
        print(render(["part", "ms"], parts(r), "csv"), end="")
    else:
        print(ep_pools_text(r, inp, basis_text, args.format), end="")
    return 0
