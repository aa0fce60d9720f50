"""One disaggregated layout on the command line (issue 27, docs/disaggregation.md): `capacity
plan --prefill-pool XxTP --decode-pool YxTP --pool-rate R` evaluates the layout a person chose
(X prefill replicas of TP GPUs and Y decode replicas, on the plan's `--gpu` or the decode pool on
`--decode-gpu`, handing the KV over the link `disagg.link_for` picks) at R requests a second.

It prints what the Explorer's two-pool panel shows, from the same computation
(`capacity.plan.disagg_pools`: `pool_shapes`, `layout`, `matched_counts`, `with_counts`,
`pools_at`, `saturation`, the steps the Explorer's `explorer_pools` takes): the rate-matched
counts, each pool's and the link's utilisation, TTFT at the SLO percentile in its parts, TPOT,
the SLO capacity of a replica of each pool and where each part saturates; and its cost as
`capacity size --disaggregated` prices a layout (a `disagg.DisaggOption` of these figures:
cost per month, per million output tokens at the rate and at the SLO capacity).

    capacity plan --model llama-3.1-70b --weights fp8 --gpu h100-sxm --kv-dtype fp8 \
        --prefill-pool 1x4 --decode-pool 2x4 --pool-rate 3 --prompt-tokens 6000 \
        --ctx 8192 --output-tokens 256 --slo-ttft-ms 3000 --slo-tpot-ms 50

`disaggregated_text` is `capacity size --disaggregated`'s section (the search's winner and its
best deployments, `capacity.plan.disagg.compare`).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from capacity.cli.common import MAX_GPUS_PER_DEPLOYMENT, number
from capacity.errors import InputError
from capacity.report.tables import render

if TYPE_CHECKING:  # the pools' model loads only with --prefill-pool / --decode-pool
    from capacity.model.scenario import Scenario
    from capacity.plan.disagg import Comparison, DisaggOption
    from capacity.plan.disagg_pools import PoolFigures, PoolLayout, Saturation
    from capacity.plan.options import PlanInputs

POOL_MAX_GPUS = 64
"""The GPU limit of the pools' planner inputs: the Explorer's (`explorer_pools`), the most
`PlanInputs` takes; the replica shapes are built up to it."""
POOL_FLAGS = ("prefill_pool", "decode_pool")
"""The flags that ask for a disaggregated layout (both go together)."""
NOT_WITH_POOLS = (("ep", "--ep"), ("draft", "--draft"), ("vram", "--vram"),
                  ("bandwidth", "--bandwidth"), ("tflops", "--tflops"),
                  ("weights_gb", "--weights-gb"), ("rate", "--rate"), ("stages", "--stages"))
"""`capacity plan` flags the two pools do not take (the planner's replica shapes read the
catalog's GPU and weights; the load sections are the aggregated replica's)."""


def add_flags(p: argparse.ArgumentParser) -> None:
    """`capacity plan`'s flags for one disaggregated layout."""
    g = p.add_argument_group("disaggregated prefill/decode (docs/disaggregation.md)")
    g.add_argument("--prefill-pool", default=None, metavar="XxTP",
                   help="evaluate one disaggregated layout instead: X prefill replicas of TP "
                        "GPUs each on --gpu, e.g. 2x4 (X alone: TP = --tp; X = 0: the "
                        "rate-matched count), or for a MoE model X wide-EP deployments of N "
                        "GPUs, e.g. 1xEP32 (docs/expert-parallel.md); needs --decode-pool and "
                        "--pool-rate")
    g.add_argument("--decode-pool", default=None, metavar="YxTP",
                   help="Y decode replicas of TP GPUs each, e.g. 6x2 (Y = 0: the rate-matched "
                        "count), or Y wide-EP deployments, e.g. 1xEP72")
    g.add_argument("--decode-gpu", default=None, metavar="GPU",
                   help="the decode pool's GPU (default --gpu)")
    g.add_argument("--pool-rate", type=number(min=0, max=1e6, min_open=True), default=None,
                   metavar="REQ_S", help="requests a second the layout serves")
    g.add_argument("--slo-ttft-ms", type=number(min=0, max=1e7, min_open=True), default=2000.0,
                   metavar="MS", help="with the pools: TTFT target at --slo-percentile "
                                      "(default 2000)")
    g.add_argument("--slo-tpot-ms", type=number(min=0, max=1e6, min_open=True), default=50.0,
                   metavar="MS", help="with the pools: TPOT target (default 50)")
    g.add_argument("--slo-percentile", type=number(min=50, max=100, max_open=True),
                   default=90.0, metavar="P", help="with the pools: the percentile the SLOs "
                                                   "hold at (default 90)")
    g.add_argument("--link-efficiency", type=number(min=0, max=1, min_open=True), default=None,
                   metavar="SHARE", help="share of the link's bandwidth a KV hand-over gets "
                                         "(default the planner's)")
    g.add_argument("--link-latency-ms", type=number(min=0, max=10_000), default=None,
                   metavar="MS", help="fixed latency of a hand-over (default the planner's)")


def wants_pools(args: argparse.Namespace) -> bool:
    """Whether the command line asks for a disaggregated layout."""
    return any(getattr(args, f, None) is not None for f in POOL_FLAGS)


def parse_pool(text: str, default_tp: int, flag: str) -> tuple[int, int]:
    """'2x4' -> (2, 4) replicas x TP; '3' -> (3, default_tp); 0 replicas: rate-matched.
    InputError on anything else."""
    reps, sep, tp = text.strip().lower().partition("x")
    try:
        x, t = int(reps), (int(tp) if sep else default_tp)
    except ValueError:
        raise InputError(f"{flag} '{text[:40]}': give REPLICASxTP, e.g. 2x4") from None
    if not 0 <= x <= 4096 or not 1 <= t <= MAX_GPUS_PER_DEPLOYMENT:
        raise InputError(f"{flag} '{text[:40]}': replicas 0..4096 (0: rate-matched), TP "
                         f"1..{MAX_GPUS_PER_DEPLOYMENT}")
    return x, t


def parse_ep_pool(text: str, flag: str) -> tuple[int, int] | None:
    """'1xEP32' -> (1, 32) deployments x EP size (0 deployments: rate-matched); None for a TP
    pool ('2x4'); InputError for an EP pool written otherwise."""
    low = text.strip().lower().replace(" ", "")
    if "ep" not in low:
        return None
    m = re.fullmatch(r"(\d+)xep(\d+)", low)
    if m is None:
        raise InputError(f"{flag} '{text[:40]}': give DEPLOYMENTSxEPn, e.g. 1xEP32")
    x, n = int(m.group(1)), int(m.group(2))
    if not 0 <= x <= 4096 or not 1 <= n <= 1024:
        raise InputError(f"{flag} '{text[:40]}': deployments 0..4096 (0: rate-matched), EP "
                         "1..1024")
    return x, n


def check_args(args: argparse.Namespace) -> None:
    """The pools' own checks before any work: both pools and a rate, no flag they ignore."""
    if not wants_pools(args):
        return
    if args.prefill_pool is None or args.decode_pool is None:
        raise InputError("--prefill-pool and --decode-pool go together")
    if args.pool_rate is None:
        raise InputError("give --pool-rate REQ_S: the request rate the layout serves")
    for attr, flag in NOT_WITH_POOLS:
        if getattr(args, attr, None) not in (None, "none"):
            raise InputError(f"{flag} does not apply with --prefill-pool (the pools use the "
                             "catalog's GPU and weights)")
    if args.gpus != 1:
        raise InputError("--gpus does not apply with --prefill-pool: the pools give the GPUs")


def pool_inputs(args: argparse.Namespace, s: Scenario, basis: str) -> PlanInputs:
    """The planner's inputs for the layout, as `capacity size` builds them: the scenario's
    model, weight format, KV precision, memory, price and currency, the workload at
    --pool-rate (no headroom), the SLOs, the engine, and the basis (`with_basis`) or the
    scenario's --eff and --mfu."""
    from capacity.catalog.engines import DEFAULT_ENGINE
    from capacity.model.workload import Workload
    from capacity.plan.options import PlanInputs, Slo

    dgpu = args.decode_gpu or s.gpu.key
    wl = Workload(rate_per_s=float(args.pool_rate), context_tokens=s.context_tokens,
                  prompt_tokens=s.prompt, output_tokens=args.output_tokens, headroom=0.0)
    inp = PlanInputs(
        model=s.variant.model.key, workload=wl, formats=(s.variant.format.key,),
        gpus=tuple(dict.fromkeys((s.gpu.key, dgpu))), kv_dtypes=(s.kv_dtype,),
        max_gpus=POOL_MAX_GPUS, currency="USD" if s.currency == "USD" else "CNY",
        cny_per_usd=args.cny_per_usd, util=s.util, overhead_gb=s.overhead_gb,
        eff=args.eff, mfu=args.mfu, max_num_seqs=getattr(args, "max_num_seqs", None),
        engine=args.engine or DEFAULT_ENGINE,
        slo=Slo(ttft_ms=args.slo_ttft_ms, tpot_ms=args.slo_tpot_ms,
                quantile=args.slo_percentile / 100.0),
        price_overrides=((s.gpu.key, args.gpu_price),) if args.gpu_price is not None else ())
    if not basis:
        return inp
    from capacity.fit.planning import with_basis

    return with_basis(inp, basis)


@dataclass(frozen=True, kw_only=True)
class PoolsPlan:
    """One layout at one rate: the pools (`PoolLayout`), their figures (`pools_at`), the
    rate-matched counts (None: none up to the search's limit), the saturations and the
    layout priced as `capacity size --disaggregated` prices one (`DisaggOption`)."""

    inputs: PlanInputs
    layout: PoolLayout
    figures: PoolFigures
    matched: tuple[int, int] | None
    saturation: Saturation
    option: DisaggOption


def evaluate_pools(inp: PlanInputs, *, prefill: tuple[int, int], decode: tuple[int, int],
                   prefill_gpu: str, decode_gpu: str, efficiency: float | None = None,
                   latency_ms: float | None = None) -> PoolsPlan:
    """The layout's figures at the workload's rate, as the Explorer computes them
    (`report.disagg_chart.explorer_pools`: the planner's replica shapes, one replica of each
    pool, the rate-matched counts, the chosen counts with their link, `pools_at`); a count of
    0 takes the rate-matched one (1 where there is none). `prefill`, `decode`: (replicas,
    TP)."""
    from capacity.plan.disagg import DEFAULT_LINK_EFFICIENCY, DEFAULT_TRANSFER_LATENCY_MS
    from capacity.plan.disagg_pools import (
        layout,
        matched_counts,
        pool_shapes,
        pools_at,
        saturation,
        with_counts,
    )

    rate = inp.workload.peak_rate_per_s
    if rate is None:
        raise InputError("the two pools need a request rate")
    shapes = pool_shapes(inp)
    one = layout(inp, shapes, prefill_gpu=prefill_gpu, prefill_tp=prefill[1],
                 prefill_replicas=1, decode_gpu=decode_gpu, decode_tp=decode[1],
                 decode_replicas=1,
                 efficiency=DEFAULT_LINK_EFFICIENCY if efficiency is None else efficiency,
                 latency_ms=DEFAULT_TRANSFER_LATENCY_MS if latency_ms is None else latency_ms)
    matched = matched_counts(one, rate)
    x = prefill[0] or (matched[0] if matched else 1)
    y = decode[0] or (matched[1] if matched else 1)
    lay = with_counts(one, x, y)
    fig = pools_at(lay, rate)
    return PoolsPlan(inputs=inp, layout=lay, figures=fig, matched=matched,
                     saturation=saturation(lay), option=as_option(inp, lay, fig))


def as_option(inp: PlanInputs, lay: PoolLayout, fig: PoolFigures) -> DisaggOption:
    """The layout as `capacity size --disaggregated` lists a layout (`disagg.DisaggOption`),
    its figures `pools_at`'s: cost per month = (X x TP_p x price_p + Y x TP_d x price_d) x
    730 h (as `disagg_options`, no spare); its costs per million output tokens are
    `DisaggOption.cost_per_mtok` (at the SLO capacity) and `cost_per_mtok_design` (at the
    rate). Example: 1 x 4 + 2 x 4 GPUs at 2 an hour: 24 an hour, 17,520 a month."""
    from capacity.model.cost import HOURS_PER_MONTH
    from capacity.plan.disagg import DisaggOption

    p, d = lay.prefill, lay.decode
    x, y = lay.prefill_replicas, lay.decode_replicas
    return DisaggOption(
        prefill_gpu=p.gpu, prefill_gpu_name=p.gpu_name, prefill_tp=p.tp, prefill_replicas=x,
        decode_gpu=d.gpu, decode_gpu_name=d.gpu_name, decode_tp=d.tp, decode_replicas=y,
        weights=(inp.formats or ("",))[0], kv_dtype=inp.kv_dtypes[0], link=lay.link,
        design_rate_per_s=fig.rate_per_s, prefill_ms=fig.prefill_ms,
        prefill_utilization=fig.prefill_utilization, transfer_ms=fig.transfer_ms,
        transfer_wait_ms=fig.link_wait_ms, link_utilization=fig.link_utilization,
        ttft_ms=fig.ttft_ms, tpot_ms=fig.tpot_ms, tpot_mean_ms=fig.tpot_mean_ms,
        decode_batch=fig.decode_batch, prefill_capacity_per_s=fig.prefill_capacity_per_s,
        decode_capacity_per_s=fig.decode_capacity_per_s,
        price_per_hour_prefill=p.price_per_gpu_hour, price_per_hour_decode=d.price_per_gpu_hour,
        cost_per_month=(x * p.tp * p.price_per_gpu_hour + y * d.tp * d.price_per_gpu_hour)
        * HOURS_PER_MONTH, currency=inp.currency)


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def pools_json(r: PoolsPlan) -> dict[str, Any]:
    """`capacity plan --prefill-pool ... --format json`: the layout, its figures (`pools_at`'s
    fields), the rate-matched counts, the saturations, and the keys of `capacity size
    --disaggregated`'s options for the same layout (costs included). inf is null."""
    o, lay, out = r.option, r.layout, r.inputs.workload.output_tokens
    fig = {k: (_num(v) if isinstance(v, float) else v) for k, v in asdict(r.figures).items()}
    option = {**{k: v for k, v in asdict(o).items() if k != "link"}, "link": o.link.kind,
              "ratio": o.ratio, "label": o.label, "gpus": o.n_gpus,
              "capacity_rate_per_s": o.capacity_rate_per_s,
              "cost_per_mtok": o.cost_per_mtok(out), "cost_per_mtok_design":
                  o.cost_per_mtok_design(out)}
    sat = r.saturation
    return {"model": r.inputs.model, "engine": r.inputs.engine, "rate_per_s": r.figures.rate_per_s,
            "prompt_tokens": r.inputs.workload.prompt, "output_tokens": out,
            "slo": asdict(r.inputs.slo), "ratio": lay.ratio, "gpus": lay.n_gpus,
            "prefill": {"gpu": lay.prefill.gpu, "tp": lay.prefill.tp,
                        "replicas": lay.prefill_replicas, "prefill_ms": lay.prefill.prefill_ms},
            "decode": {"gpu": lay.decode.gpu, "tp": lay.decode.tp,
                       "replicas": lay.decode_replicas, "slots": lay.decode.slots},
            "link": asdict(lay.link) | {"scale_up": lay.link.scale_up},
            "matched": None if r.matched is None else {"prefill_replicas": r.matched[0],
                                                       "decode_replicas": r.matched[1]},
            "figures": fig,
            "saturation_per_s": {"prefill": _num(sat.prefill_per_s),
                                 "decode": _num(sat.decode_per_s), "link": _num(sat.link_per_s)},
            "option": {k: (_num(v) if isinstance(v, float) else v) for k, v in option.items()}}


def _ms(v: float) -> str:
    return f"{v:,.1f}" if math.isfinite(v) else "inf (saturated)"


def _share(v: float) -> str:
    return f"{v:.0%}" if math.isfinite(v) else "inf"


def pools_text(r: PoolsPlan, basis_text: str, fmt: str) -> str:
    """`capacity plan --prefill-pool ...`'s text: the layout and its link, the rate-matched
    counts, the utilisations, TTFT in its parts, TPOT, the SLOs, capacities and cost."""
    md = fmt == "markdown"
    lay, f, o = r.layout, r.figures, r.option
    inp, out = r.inputs, r.inputs.workload.output_tokens
    pct, cur = f"p{inp.slo.quantile * 100:g}", inp.currency
    link = lay.link
    where = "inside one NVLink domain" if link.scale_up else "across nodes"
    lines = [("# " if md else "") + f"{o.label}: {lay.n_gpus} GPUs, {inp.model}",
             f"basis: {basis_text}; engine {inp.engine}",
             f"link: {link.kind} {where}, {link.send_gb_s:,.4g} GB/s sending and "
             f"{link.recv_gb_s:,.4g} GB/s receiving per GPU at {link.efficiency:.0%}, "
             f"{link.latency_ms:g} ms latency",
             f"at {f.rate_per_s:,.3g} req/s ({inp.workload.prompt:,} prompt and {out:,} output "
             "tokens): rate-matched counts "
             + ("none (a pool or the link cannot serve the rate)" if r.matched is None else
                f"{r.matched[0]}P+{r.matched[1]}D"),
             f"utilisation: prefill replica {_share(f.prefill_utilization)}, decode replica "
             f"{_share(f.decode_utilization)} of its {lay.decode.slots:,} slots (mean batch "
             f"{f.decode_batch:,.1f}), link {_share(f.link_utilization)}", ""]
    lines.append(("## " if md else "") + f"TTFT {pct} in its parts")
    lines.append(render(["part", "ms"], [
        ["prefill queue", _ms(f.prefill_queue_ms)], ["prefill", _ms(f.prefill_ms)],
        ["KV hand-over", _ms(f.transfer_ms)], ["link wait", _ms(f.link_wait_ms)],
        ["first decode step", _ms(f.first_step_ms)],
        *([["request outside the GPU", _ms(f.request_ms)]] if f.request_ms > 0 else []),
        ["TTFT", _ms(f.ttft_ms)]],
        fmt).rstrip("\n"))
    lines.append(f"TPOT {pct} {_ms(f.tpot_ms)} ms (mean {_ms(f.tpot_mean_ms)} ms)")
    lines.append(f"SLOs: TTFT {pct} <= {inp.slo.ttft_ms:g} ms "
                 + ("met" if f.meets_ttft else "missed") + f", TPOT {pct} <= "
                 f"{inp.slo.tpot_ms:g} ms " + ("met" if f.meets_tpot else "missed"))
    sat = r.saturation
    lines.append(f"capacity within the SLOs: a prefill replica {f.prefill_capacity_per_s:,.3g} "
                 f"req/s, a decode replica {f.decode_capacity_per_s:,.3g} req/s, the layout "
                 f"{o.capacity_rate_per_s:,.3g} req/s; saturation: prefill at "
                 f"{sat.prefill_per_s:,.3g}, decode at {sat.decode_per_s:,.3g}, link at "
                 f"{sat.link_per_s:,.3g} req/s")
    lines.append(f"cost: {cur} {o.cost_per_month:,.0f}/month; {cur} "
                 f"{o.cost_per_mtok_design(out):,.3g} per million output tokens at "
                 f"{f.rate_per_s:,.3g} req/s, {cur} {o.cost_per_mtok(out):,.3g} at the SLO "
                 "capacity")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, s: Scenario, basis: str, basis_text: str) -> int:
    """`capacity plan --prefill-pool XxTP --decode-pool YxTP --pool-rate R`: the layout's
    figures as text or JSON (CSV: the TTFT parts); with XxEPn pools, `run_ep`. Exit 0."""
    from capacity.cli.common import dumps

    ep = (parse_ep_pool(args.prefill_pool, "--prefill-pool"),
          parse_ep_pool(args.decode_pool, "--decode-pool"))
    if (ep[0] is None) != (ep[1] is None):
        raise InputError("give both pools as DEPLOYMENTSxEPn (wide-EP pools, e.g. 1xEP32) or "
                         "both as REPLICASxTP (e.g. 2x4)")
    if ep[0] is not None and ep[1] is not None:
        from capacity.cli.ep_pools_plan import run_ep

        return run_ep(args, pool_inputs(args, s, basis), s.gpu.key, ep[0], ep[1], basis_text)
    dgpu = args.decode_gpu or s.gpu.key
    inp = pool_inputs(args, s, basis)
    r = evaluate_pools(inp, prefill=parse_pool(args.prefill_pool, args.tp, "--prefill-pool"),
                       decode=parse_pool(args.decode_pool, args.tp, "--decode-pool"),
                       prefill_gpu=s.gpu.key, decode_gpu=dgpu,
                       efficiency=args.link_efficiency, latency_ms=args.link_latency_ms)
    if args.format == "json":
        print(dumps(pools_json(r) | {"basis_text": basis_text}, indent=2))
    elif args.format == "csv":
        f = r.figures
        print(render(["part", "ms"], [
            ["prefill_queue", f.prefill_queue_ms], ["prefill", f.prefill_ms],
            ["transfer", f.transfer_ms], ["link_wait", f.link_wait_ms],
            ["first_step", f.first_step_ms],
            *([["request", f.request_ms]] if f.request_ms > 0 else []),
            ["ttft", f.ttft_ms]], "csv"), end="")
    else:
        print(pools_text(r, basis_text, args.format), end="")
    return 0


def disaggregated_text(cmp: Comparison, top: int) -> str:
    """`capacity size --disaggregated`'s section: the winner and why, then the best
    disaggregated deployments with their hand-over and pools."""
    lines = ["", "Disaggregated prefill/decode (docs/disaggregation.md)",
             f"winner: {cmp.reason}"]
    pct = f"p{cmp.inputs.slo.quantile * 100:g}"
    for i, d in enumerate(cmp.disaggregated[:top], 1):
        lines.append(f"{i}. {d.label}: {d.n_gpus} GPUs, {d.currency} {d.cost_per_month:,.0f}/month;"
                     f" TTFT {pct} {d.ttft_ms:,.0f} ms (hand-over {d.transfer_ms:.1f} ms + wait "
                     f"{d.transfer_wait_ms:.1f} ms), TPOT {pct} {d.tpot_ms:.1f} ms; a prefill "
                     f"replica serves {d.prefill_capacity_per_s:.2f} req/s, a decode replica "
                     f"{d.decode_capacity_per_s:.2f}, for {d.design_rate_per_s:.2f} req/s")
    if not cmp.disaggregated:
        lines.append("no disaggregated deployment meets the SLOs within the search")
    return "\n".join(lines) + "\n"
