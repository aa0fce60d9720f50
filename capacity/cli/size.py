"""`capacity size`: from daily users (or peak concurrency) and SLOs to ranked GPU options.

Example (the chapter's customer): 500 daily users, 20 requests each, 30 % of them in a 2-hour
peak, 8K context, 256 output tokens, first token within 2 s and 50 ms per token:

    capacity size --dau 500 --requests-per-user 20 --peak-share 0.3 --peak-hours 2 \\
        --ctx 8192 --output-tokens 256 --slo-ttft-ms 2000 --slo-tpot-ms 50 --model qwen3.5-9b-awq

Or `--peak-concurrency 50` instead of the daily figures, or `--log FILE` to size from a request
log (CSV or JSON lines: timestamp, prompt and output tokens; see `capacity workload summarize`):
its busiest hour's rate, its mean lengths, a context that holds `--percentile` of its requests,
and SLOs checked at that percentile. `--quote FILE.md|FILE.pdf` writes the customer document.

`--mix FILE` sizes several workloads (models, traffic, SLOs: a TOML of [[workload]] tables, see
docs/method.md) on one fleet of one GPU type, each on its own replicas, and ranks the fleets;
the other flags (GPUs, prices, currency, efficiency) are shared by every workload.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from capacity.catalog.engines import DEFAULT_ENGINE
from capacity.catalog.loader import (
    BOUNDS,
    MAX_CONTEXT_TOKENS,
    MAX_PRICE_PER_HOUR,
    MIN_PRICE_PER_HOUR,
    Catalog,
    default_catalog,
)
from capacity.catalog.offers import OFFER_KINDS, bundled_of_kind, choose, load_offers, without_offer
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import (
    CNY_PER_USD,
    EFFICIENCY,
    FRACTION_OPEN,
    HEADROOM,
    MAX_NUM_SEQS,
    MS,
    comma_list,
    context_tokens,
    dumps,
    nonempty,
    number,
    print_catalog_warnings,
    whole,
)
from capacity.cli.plan_load import PREFIX_WHY, add_prefix_flags, add_turn_flags, turns_text
from capacity.cli.wide_ep import (
    add_size_flags,
    check_wide_ep,
    pools_compare,
    pools_json,
    pools_quote_section,
    pools_text,
    size_compare,
    size_json,
    size_quote_section,
    size_text,
)
from capacity.errors import InputError
from capacity.model.cost import DEFAULT_CNY_PER_USD
from capacity.model.memory import DEFAULT_HEADROOM, DEFAULT_OVERHEAD_GB, DEFAULT_UTIL
from capacity.model.scenario import DEFAULT_CONTEXT_TOKENS, DEFAULT_EFF, DEFAULT_MFU, DEFAULT_MODEL
from capacity.model.speculative import MAX_DEPTH
from capacity.model.workload import Workload
from capacity.plan.alternatives import Alternative, alternatives
from capacity.plan.deployment import Deployment
from capacity.plan.deployment import record as deployment_record
from capacity.plan.detail import prefix_served, simulate_option
from capacity.plan.drafting import DraftNote, draft_note
from capacity.plan.mix import MixPlan, load_mix, plan_mix
from capacity.plan.options import MAX_GPUS, REASON_TEXT, Option, Plan, PlanInputs, Slo
from capacity.plan.queueing import DEFAULT_MAX_NUM_SEQS
from capacity.plan.search import plan
from capacity.report.bases import band_text
from capacity.report.check import check_caption, check_record, miss_text
from capacity.report.i18n import t
from capacity.report.quote import (
    alternative_text,
    check_quote_path,
    draft_note_text,
    plan_basis_name,
    write_mix_quote,
    write_quote,
)
from capacity.report.tables import render

MAX_GPUS_LIMIT = 64
"""Largest --max-gpus (PlanInputs refuses more)."""

COLUMNS = ("rank", "option", "gpu", "gpus", "tp", "pp", "replicas", "weights", "kv_dtype", "draft",
           "cost_per_month", "cost_per_mtok", "ttft_ms", "tpot_ms", "design_concurrency",
           "max_rate_per_s", "memory_verdict", "binding")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "size", help=SUMMARIES["size"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    w = p.add_argument_group("workload")
    w.add_argument("--mix", default=None, metavar="FILE",
                   help="several workloads on one fleet: a TOML of [[workload]] tables (name, "
                        "model, dau or peak_concurrency, ctx, output_tokens, slo_ttft_ms, "
                        "slo_tpot_ms, ...); replaces --dau/--peak-concurrency and --model")
    w.add_argument("--log", default=None, metavar="FILE",
                   help="size from a request log (CSV or JSON lines with a timestamp, prompt and "
                        "output tokens): its busiest hour, mean lengths and --percentile context; "
                        "replaces --dau/--peak-concurrency and the length flags")
    w.add_argument("--percentile", type=number(min=50, max=99.9), default=None, metavar="P",
                   help="with --log: the percentile the SLOs hold for and the context covers "
                        "(50, 90, 95, 99 or 99.9; default 99)")
    w.add_argument("--dau", type=number(min=0, max=1e10, min_open=True), default=None, metavar="USERS",
                   help="daily active users (or give --peak-concurrency)")
    w.add_argument("--requests-per-user", type=number(min=0, max=1e6, min_open=True),
                   default=20.0, metavar="N",
                   help="requests per user per day (default 20)")
    w.add_argument("--peak-share", type=FRACTION_OPEN, default=0.3, metavar="FRACTION",
                   help="share of daily requests in the peak window (default 0.3)")
    w.add_argument("--peak-hours", type=number(min=0, max=24, min_open=True), default=2.0, metavar="HOURS",
                   help="length of the peak window, hours (default 2)")
    w.add_argument("--peak-concurrency", type=number(min=0, max=1e7, min_open=True),
                   default=None, metavar="C",
                   help="requests in flight at the peak, entered directly (instead of --dau)")
    w.add_argument("--ctx", type=whole(min=1, max=MAX_CONTEXT_TOKENS),
                   default=None, metavar="TOKENS",
                   help=f"context per request, tokens (default {DEFAULT_CONTEXT_TOKENS}, or the "
                        "model's limit when that is shorter)")
    w.add_argument("--prompt-tokens", type=whole(min=1, max=MAX_CONTEXT_TOKENS),
                   default=None, metavar="TOKENS",
                   help="prompt tokens per request (default = --ctx, as the chapter)")
    w.add_argument("--output-tokens", type=whole(min=1, max=MAX_CONTEXT_TOKENS),
                   default=256, metavar="TOKENS",
                   help="output tokens per request (default 256)")
    add_prefix_flags(w, "shared prefix (system prompt) a prefix cache holds once: prefill skips "
                        "what --engine's cache serves of it for --prefix-share of requests "
                        "(vLLM: whole KV blocks, on a hybrid model only the block ends its "
                        "prefill chunks stop at; SGLang and llama.cpp: none of a hybrid "
                        "model's; default 0: no prefix caching)")
    add_turn_flags(w, "conversations of N turns (each a request of the daily count and the "
                      "concurrency), turn k + 1's prompt the whole history (earlier prompts "
                      "and answers) plus --turn-tokens new ones, the history in --engine's "
                      "prefix cache (a chunked profile: vllm, sglang, llamacpp); the last turn "
                      "must fit --ctx (default 1: single requests of --prompt-tokens)")
    w.add_argument("--growth-per-month", type=number(min=0, max=100), default=0.0,
                   metavar="FRACTION",
                   help="traffic growth per month, compounding (0.1 = +10 %%); the quote says "
                        "the month the recommended fleet runs out (default 0)")
    w.add_argument("--headroom", type=HEADROOM, default=DEFAULT_HEADROOM, metavar="FRACTION",
                   help=f"headroom on the peak load (default {DEFAULT_HEADROOM})")
    s = p.add_argument_group("service-level objectives")
    s.add_argument("--slo-ttft-ms", type=MS, default=2000.0, metavar="MS",
                   help="time to first token target, ms (default 2000)")
    s.add_argument("--slo-tpot-ms", type=MS, default=50.0, metavar="MS",
                   help="time per output token target, ms (default 50)")
    s.add_argument("--slo-percentile", type=number(min=50, max=100, max_open=True), default=90.0, metavar="P",
                   help="percentile of requests the SLOs hold for (default 90)")
    s.add_argument("--slo-cost-per-mtok", type=number(min=0, max=1_000_000), default=0.0, metavar="COST",
                   help="most cost per million output tokens at SLO capacity, in --currency "
                        "(default 0: no cost target)")
    m = p.add_argument_group("search space")
    m.add_argument("--model", default=DEFAULT_MODEL,
                   help="model key; a format suffix (qwen3.5-9b-awq) fixes the weight format, "
                        f"a bare key searches every format (default {DEFAULT_MODEL})")
    m.add_argument("--weights", default=None, metavar="LIST",
                   help="weight formats to search, comma list (default: see --model)")
    m.add_argument("--gpus", default=None, metavar="LIST",
                   help="GPU keys to search, comma list (default: every catalog GPU)")
    m.add_argument("--max-gpus", type=whole(min=1, max=MAX_GPUS_LIMIT), default=MAX_GPUS, metavar="N",
                   help=f"largest GPU count to try (default {MAX_GPUS})")
    m.add_argument("--kv-dtypes", default="fp16,fp8", metavar="LIST",
                   help="KV precisions to search (default fp16,fp8)")
    m.add_argument("--no-tp", action="store_true", help="replicas only, no tensor parallel")
    m.add_argument("--spare", action="store_true",
                   help="N+1: add one spare replica (TP GPUs) to every option, in its costs")
    m.add_argument("--disaggregated", action="store_true",
                   help="also rank disaggregated prefill/decode deployments (a prefill pool and "
                        "a decode pool, the KV handed over NVLink or the NICs) beside these and "
                        "say which wins and why (docs/disaggregation.md; a rate or daily-user "
                        "workload); with --wide-ep, also EP deployments on separate prefill "
                        "and decode pools")
    add_size_flags(m)
    d = p.add_argument_group("speculative decoding (F12)")
    d.add_argument("--draft", action="append", default=[], metavar="KIND:K",
                   help="also search this draft beside none (repeatable or a comma list): "
                        "eagle:K, mtp:K or ngram:K (K tokens proposed per step), or auto: every "
                        "draft kind with published acceptance for the model "
                        "(data/speculative.toml) at depths 1 to its deepest published one; "
                        "the output says where the draft stops paying (default: no draft)")
    one = d.add_mutually_exclusive_group()
    one.add_argument("--acceptance-length", type=number(min=1, max=MAX_DEPTH + 1), default=None,
                     metavar="TAU",
                     help="tau for the drafts searched: tokens a sequence keeps per verify "
                          "pass, bonus token included (1..K+1; default: the published figure)")
    one.add_argument("--acceptance-rate", type=number(min=0, max=1), default=None,
                     metavar="ALPHA",
                     help="per-token acceptance rate for the drafts searched instead: tau = "
                          "(1 - alpha^(K+1)) / (1 - alpha) at each depth")
    e = p.add_argument_group("engine and cost")
    e.add_argument("--util", type=FRACTION_OPEN, default=DEFAULT_UTIL,
                   help=f"gpu_memory_utilization (default {DEFAULT_UTIL})")
    e.add_argument("--overhead-gb", type=number(min=0, max=BOUNDS["memory_gb"][1]),
                   default=DEFAULT_OVERHEAD_GB, metavar="GB",
                   help=f"runtime memory per GPU, GB (default {DEFAULT_OVERHEAD_GB})")
    e.add_argument("--eff", type=EFFICIENCY, default=DEFAULT_EFF,
                   help=f"decode compute efficiency (default {DEFAULT_EFF})")
    e.add_argument("--mfu", type=EFFICIENCY, default=DEFAULT_MFU,
                   help=f"prefill MFU (default {DEFAULT_MFU})")
    e.add_argument("--engine", default=DEFAULT_ENGINE, metavar="NAME",
                   help="scheduling the load model follows: chapter (default: whole prompts, KV "
                        "reserved at the context), vllm, vllmv0, sglang, llamacpp (data/engines.toml)")
    e.add_argument("--max-num-seqs", type=whole(min=1, max=MAX_NUM_SEQS),
                   default=None, metavar="N",
                   help=f"sequences per replica (default: the engine's; {DEFAULT_MAX_NUM_SEQS} for "
                        "the chapter, as vLLM)")
    e.add_argument("--currency", choices=("CNY", "USD"), default="CNY",
                   help="currency of costs (default CNY)")
    e.add_argument("--cny-per-usd", type=CNY_PER_USD, default=DEFAULT_CNY_PER_USD,
                   help=f"exchange rate (default {DEFAULT_CNY_PER_USD})")
    e.add_argument("--basis", default=None, metavar="BASIS",
                   help="what the speed figures rest on (docs/method.md, Bases): 'chapter' "
                        "(the default: the chapter's eff 1 and prefill MFU 0.3), 'spec' (the "
                        "spec sheet, every efficiency at its peak: the upper bound on speed), "
                        "'typical:ENGINE' (an engine's typical knobs, data/engines.toml) or a "
                        "saved calibration's name; --eff and --mfu apply to 'chapter' only")
    e.add_argument("--calibration", default=None, metavar="NAME", type=nonempty,
                   help="plan with a saved calibration's fitted efficiencies (capacity "
                        "calibrate); the same as --basis NAME")
    e.add_argument("--typical", default=None, metavar="ENGINE",
                   help="plan with the engine's typical efficiency (data/engines.toml: vllm, "
                        "sglang); the same as --basis typical:ENGINE")
    e.add_argument("--price", action="append", default=[], metavar="GPU=VALUE",
                   help="price of one GPU per hour in --currency, replacing the catalog's "
                        "(repeatable: --price rtx-4090=2.5 --price h100-sxm=19)")
    e.add_argument("--prices", default=None, metavar="FILE",
                   help="a prices file of [[offer]] tables (docs/method.md: prices as data)")
    e.add_argument("--offer-kind", choices=OFFER_KINDS, default=None,
                   help="price each GPU with its offer of this kind: from --prices (default "
                        "there: on-demand), else from the bundled published offers "
                        "(data/offers.toml: provider, date and source per row); a GPU "
                        "without one keeps its catalog price, and the output says so "
                        "(default: catalog prices)")
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("text", "json", "markdown", "csv"), default="text",
                   help="output format (default text)")
    o.add_argument("--top", type=whole(min=1, max=10_000), default=10, metavar="N",
                   help="options to show (default 10)")
    o.add_argument("--quote", default=None, metavar="FILE",
                   help="also write a quote for the best option: FILE.md or FILE.pdf")
    o.add_argument("--app-url", default=None, metavar="URL",
                   help="the app's public address (https://host) for the quote's link to the "
                        "Planner that reproduces it (default: $CAPACITY_PUBLIC_URL, else a "
                        "relative /planner link)")
    o.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="language of the quote (default en)")
    o.add_argument("--simulate", action="store_true",
                   help="check the best option with the discrete-event model at its design "
                        "load (2,000 requests; says which SLO it misses, if any)")
    o.add_argument("--chunked-prefill", type=whole(min=1, max=MAX_CONTEXT_TOKENS),
                   default=None, metavar="TOKENS",
                   help="token budget per step for the event model's chunked prefill "
                        "(vLLM max_num_batched_tokens; default: the engine's, off for the "
                        "chapter)")
    return p


PRICE_PER_HOUR = number(min=MIN_PRICE_PER_HOUR, max=MAX_PRICE_PER_HOUR)
"""The value of `--price GPU=VALUE`: a price per GPU-hour in the catalog's bounds, checked as
every numeric flag is (`capacity.cli.common.number`)."""


def inputs_from_args(args: argparse.Namespace) -> PlanInputs:
    """PlanInputs from the command line."""
    mix = getattr(args, "mix", None)
    log = getattr(args, "log", None)
    if log:
        if mix or args.dau is not None or args.peak_concurrency is not None:
            raise InputError("--log gives the traffic: drop --dau/--peak-concurrency/--mix")
        return _log_inputs(args)
    if getattr(args, "percentile", None) is not None:
        raise InputError("--percentile goes with --log; without a log use --slo-percentile")
    if args.dau is None and args.peak_concurrency is None and not mix:
        raise InputError("give --dau (daily active users) or --peak-concurrency (or --mix)")
    if mix and (args.dau is not None or args.peak_concurrency is not None):
        raise InputError("--mix gives each workload's traffic: drop --dau/--peak-concurrency")
    if args.top < 1:
        raise InputError(f"--top must be >= 1, got {args.top}")
    wl = Workload(daily_active_users=args.dau, requests_per_user_per_day=args.requests_per_user,
                  peak_share=args.peak_share, peak_hours=args.peak_hours,
                  # with --mix each workload brings its own traffic; this one is replaced
                  peak_concurrency=1.0 if mix else args.peak_concurrency,
                  context_tokens=context_tokens(args.ctx, args.model),
                  prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                  headroom=args.headroom, turns=args.turns, turn_tokens=args.turn_tokens or 0)
    kv = comma_list(args.kv_dtypes)
    assert kv is not None
    cat = default_catalog()
    overrides: dict[str, float] = {}
    for item in args.price:
        gpu, sep, value = item.partition("=")
        gpu = gpu.strip().lower()
        try:
            price = PRICE_PER_HOUR(value if sep else "")
        except argparse.ArgumentTypeError as exc:
            raise InputError(f"--price '{item[:60]}': give GPU=VALUE, e.g. rtx-4090=2.5; the "
                             f"value {exc}") from None
        if gpu not in cat.gpus:
            raise InputError(f"--price '{item}': '{gpu}' is not a catalog GPU")
        overrides[gpu] = price
    kind = args.offer_kind or ""
    if args.prices:
        offers = tuple(choose(load_offers(args.prices, cat), kind or "on-demand").values())
    elif kind:
        offers = bundled_of_kind(cat, kind)
    else:
        offers = ()
    inp = PlanInputs(
        model=args.model, workload=wl,
        slo=Slo(ttft_ms=args.slo_ttft_ms, tpot_ms=args.slo_tpot_ms,
                quantile=args.slo_percentile / 100.0, cost_per_mtok=args.slo_cost_per_mtok),
        gpus=comma_list(args.gpus), max_gpus=args.max_gpus, kv_dtypes=kv,
        formats=comma_list(args.weights), allow_tp=not args.no_tp, spare=args.spare,
        growth_per_month=args.growth_per_month,
        currency=args.currency,
        cny_per_usd=args.cny_per_usd, util=args.util, overhead_gb=args.overhead_gb,
        eff=args.eff, mfu=args.mfu, max_num_seqs=args.max_num_seqs, engine=args.engine,
        price_overrides=tuple(overrides.items()), offers=offers, offer_kind=kind,
        prefix_tokens=args.prefix_tokens,
        prefix_share=args.prefix_share if args.prefix_tokens else 0.0,
        drafts=_drafts(args), acceptance_length=getattr(args, "acceptance_length", None),
        acceptance_rate=getattr(args, "acceptance_rate", None))
    basis = basis_from_args(args)
    if basis is None:
        return inp  # the chapter's assumptions, with --eff and --mfu as given
    from capacity.fit.planning import with_basis

    return with_basis(inp, basis)


def _drafts(args: argparse.Namespace) -> tuple[str, ...]:
    """The draft keys of --draft (repeated, or comma lists), as given; PlanInputs checks them."""
    items = [x.strip().lower() for item in getattr(args, "draft", None) or ()
             for x in item.split(",")]
    if any(not x for x in items):
        raise InputError("--draft: give KIND:K (eagle:3, mtp:1, ngram:4), auto or none, "
                         "comma-separated without empty items")
    return tuple(items)


def basis_from_args(args: argparse.Namespace) -> str | None:
    """The basis string --basis, --calibration or --typical give (None: none given); at most
    one of them."""
    given = [x for x in (args.basis, args.calibration,
                         None if args.typical is None else "typical:" + args.typical)
             if x is not None]
    if len(given) > 1:
        raise InputError("give one of --basis, --calibration, --typical")
    return given[0] if given else None


def app_url(args: argparse.Namespace) -> str:
    """The Planner's address for a quote's link: --app-url, else $CAPACITY_PUBLIC_URL, else
    relative."""
    from capacity import workspace

    if args.app_url is None:
        return workspace.public_url() + "/planner"
    base: str = str(args.app_url).rstrip("/")
    if not workspace.is_link_base(base):   # `javascript:...` went into the quote's link
        raise InputError("--app-url must be an http:// or https:// address with a host and no "
                         "query, e.g. https://capacity.example.com")
    return base + "/planner"


def _log_inputs(args: argparse.Namespace) -> PlanInputs:
    """PlanInputs from a request log: its busiest hour (capacity.fit.traffic)."""
    from dataclasses import replace

    from capacity.fit.traffic import summarize_log

    pct = 99.0 if args.percentile is None else float(args.percentile)
    summary = summarize_log(args.log)
    wl = summary.workload(percentile=pct, headroom=args.headroom)
    args.log_summary = summary
    args.dau, args.requests_per_user, args.peak_share, args.peak_hours = (
        wl.daily_active_users, 1.0, 1.0, 1.0)
    args.ctx, args.prompt_tokens, args.output_tokens = (wl.context_tokens, wl.prompt_tokens,
                                                        wl.output_tokens)
    args.log = None
    args.percentile = None
    inp = inputs_from_args(args)
    return replace(inp, slo=replace(inp.slo, quantile=pct / 100.0))


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def option_record(rank: int, o: Option) -> dict[str, Any]:
    """One option as a flat record (the JSON and CSV interface): `cost_per_mtok` is at the
    SLO-feasible capacity, `cost_per_mtok_design` at the design load (F7, docs/method.md)."""
    return {"rank": rank, "option": o.label, "gpu": o.gpu, "gpus": o.n_gpus, "tp": o.tp,
            "pp": o.pp, "replicas": o.copies, "spare_gpus": o.spare_gpus,
            "paid_gpus": o.paid_gpus,
            "weights": o.weights, "kv_dtype": o.kv_dtype, "draft": o.draft or None,
            "draft_acceptance_length": o.draft_acceptance_length if o.draft else None,
            "draft_source": o.draft_source or None,
            "price_per_gpu_hour": o.price_per_hour,
            "cost_per_month": o.cost_per_month, "cost_per_mtok": _num(o.cost_per_mtok),
            "cost_per_mtok_design": _num(o.cost_per_mtok_design),
            "ttft_ms": _num(o.ttft_ms), "tpot_ms": _num(o.tpot_ms),
            "design_concurrency": _num(o.design_concurrency),
            "max_rate_per_s": _num(o.capacity_rate_per_s),
            "memory_verdict": o.memory_verdict, "binding": o.binding}


def to_json(p: Plan, top: int) -> dict[str, Any]:
    """The stable JSON interface of `capacity size`."""
    inp = p.inputs
    return {
        "model": inp.model, "currency": inp.currency, "evaluated": p.evaluated,
        "basis": inp.basis.value, "basis_name": inp.basis_string, "offer_kind": inp.offer_kind or None,
        "offers": {o.gpu: {"kind": o.kind, "provider": o.provider, "price": o.price,
                           "currency": o.currency, "per": o.per, "as_of": o.as_of,
                           "source": o.source}
                   for o in inp.offers if inp.gpus is None or o.gpu in inp.gpus},
        "peak_rate_per_s": p.peak_rate_per_s, "workload": asdict(inp.workload),
        "slo": asdict(inp.slo),
        "options": [option_record(i + 1, o) | {
            "peak_concurrency": _num(o.peak_concurrency),
            "capacity_rate_per_s": _num(o.capacity_rate_per_s),
            "slots_per_replica": o.slots_per_replica, "weights_gb": o.weights_gb,
            "deployment": deployment_record(Deployment.of(inp, o), o)}
            for i, o in enumerate(p.options[:top])],
        "rejected": [{"gpu": r.gpu, "reasons": list(r.reasons), "detail": r.detail}
                     for r in p.rejected],
        "near_misses": [{"option": m.option.label,
                         "fixes": [f.description for f in m.fixes]} for m in p.near_misses],
    }


def to_text(p: Plan, top: int, fmt: str = "text", cheaper: Sequence[Alternative] = (),
            note: DraftNote | None = None) -> str:
    """Ranked options, the draft's note, rejected families (what would make them feasible), near misses."""
    inp, wl = p.inputs, p.inputs.workload
    md = fmt == "markdown"

    def h(title: str) -> str:
        return f"\n## {title}\n" if md else f"\n{title}"

    if p.peak_rate_per_s is not None:
        load = (f"{wl.daily_active_users:,.0f} daily users x {wl.requests_per_user_per_day:g} "
                f"requests, {wl.peak_share:.0%} in {wl.peak_hours:g} h -> peak "
                f"{p.peak_rate_per_s:.3f} req/s")
    else:
        load = f"peak concurrency {wl.peak_concurrency:g} (entered)"
    q = inp.slo.quantile * 100
    out = [("# " if md else "") + f"{p.model_name}: {load}, +{wl.headroom:.0%} headroom",
           f"{wl.context_tokens} context / {wl.prompt} prompt / {wl.output_tokens} output tokens;"
           f" SLO p{q:g} TTFT <= {inp.slo.ttft_ms:g} ms, TPOT <= {inp.slo.tpot_ms:g} ms"
           + (f", <= {inp.slo.cost_per_mtok:g} {inp.currency}/M tok" if inp.slo.cost_per_mtok
              else "") + f"; {p.evaluated} configurations evaluated"]
    out += [turns_text(wl)] if wl.turns > 1 else []
    served, asked, kind = (0, 0, "") if p.best is None else prefix_served(inp, p.best)
    if served < asked:   # a shared prefix the best option's engine cache serves in part
        out.append(f"shared prefix: the best option's engine cache serves {served:,} of its "
                   f"{asked:,} tokens ({PREFIX_WHY[kind]}); the figures take {served:,}")
    cur = inp.currency
    if p.options:
        out.append(h(f"Options ({len(p.options)} meet every constraint; best {top} shown)"))
        out.append(render(
            ["#", "option", f"{cur}/GPU-h", f"{cur}/month", f"{cur}/M tok design",
             f"{cur}/M tok capacity", f"TTFT p{q:g} ms", f"TPOT p{q:g} ms", "in flight",
             "max req/s", "memory", "binding"],
            [[i + 1, o.label, o.price_per_hour, o.cost_per_month, o.cost_per_mtok_design,
              o.cost_per_mtok, o.ttft_ms, o.tpot_ms, o.design_concurrency,
              o.capacity_rate_per_s, o.memory_verdict, o.binding]
             for i, o in enumerate(p.options[:top])], fmt).rstrip("\n"))
        out.append(f"{cur}/GPU-h: the price of one GPU-hour (a spare is counted in the GPUs "
                   f"paid for, never in the price); {cur}/month: every GPU paid for x 730 h; "
                   f"{cur}/M tok: per million output tokens, the fleet's cost per hour over "
                   f"the output tokens per hour at the design load (peak + {wl.headroom:.0%}) "
                   f"and at the SLO-feasible capacity; TTFT, TPOT: p{q:g} at the design load; "
                   f"in flight: requests at the design load; max req/s: the SLO-feasible "
                   f"capacity, the highest arrival rate at which p{q:g} TTFT and TPOT still "
                   f"meet the targets. Basis: {plan_basis_name(inp, 'en')}")
    else:
        out.append(h("No configuration meets every constraint"))
    if note is not None:
        out.append(h(t("dr_title", "en")))
        out.append(("- " if md else "") + draft_note_text(note, "en"))
    if p.rejected:
        out.append(h("Ruled out"))
        out += [f"- {r.gpu_name}: {', '.join(REASON_TEXT[x] for x in r.reasons)}; {r.detail}"
                for r in p.rejected]
    if cheaper:
        out.append(h("Why this card: cheaper options that were ruled out, and what would "
                     "make them work"))
        out += [f"- {a.gpu_name}: {alternative_text(a, p.inputs, 'en')}" for a in cheaper]
    if p.near_misses:
        out.append(h("Cheaper but short of memory"))
        out += [f"- {m.option.label}: " + ("; ".join(f.description for f in m.fixes) or "-")
                for m in p.near_misses]
    return "\n".join(out) + "\n"


def mix_text(m: MixPlan, top: int, fmt: str = "text") -> str:
    """The ranked fleets of a mix, then the best fleet's workloads with their shares."""
    md = fmt == "markdown"
    out = [("# " if md else "") + f"Mix of {len(m.workloads)} workloads: "
           + ", ".join(f"{w.name} ({w.inputs.model})" for w in m.workloads)]
    cur = m.workloads[0].inputs.currency
    if not m.fleets:
        out.append("No GPU type serves every workload")
    else:
        out.append(("\n## " if md else "\n") + "Fleets (one GPU type, each workload on its "
                   "own replicas)")
        out.append(render(["#", "GPU", "GPUs paid", f"{cur}/month"],
                          [[i + 1, f.gpu_name, f.paid_gpus, f.cost_per_month]
                           for i, f in enumerate(m.fleets[:top])], fmt).rstrip("\n"))
        best = m.fleets[0]
        out.append(("\n## " if md else "\n") + f"Best fleet: {best.gpu_name}, by workload")
        out.append(render(["workload", "option", "GPUs paid", f"{cur}/month", "share",
                           f"{cur}/M tok", "TTFT ms", "TPOT ms"],
                          [[p.name, p.option.label, p.option.paid_gpus,
                            p.option.cost_per_month, f"{best.share(p):.0%}",
                            p.option.cost_per_mtok, p.option.ttft_ms, p.option.tpot_ms]
                           for p in best.parts], fmt).rstrip("\n"))
    out += [f"- {g}: no option meets the SLOs of {', '.join(n)}" for g, n in m.short]
    return "\n".join(out) + "\n"


def mix_json(m: MixPlan, top: int) -> dict[str, Any]:
    """The JSON interface of `capacity size --mix`."""
    return {
        "workloads": [{"name": w.name, "model": w.inputs.model,
                       "workload": asdict(w.inputs.workload), "slo": asdict(w.inputs.slo)}
                      for w in m.workloads],
        "fleets": [{"rank": i + 1, "gpu": f.gpu, "gpus": f.n_gpus, "paid_gpus": f.paid_gpus,
                    "cost_per_month": f.cost_per_month,
                    "parts": [option_record(1, p.option) | {"workload": p.name,
                                                             "share": f.share(p)}
                              for p in f.parts]}
                   for i, f in enumerate(m.fleets[:top])],
        "short": [{"gpu": g, "workloads": list(n)} for g, n in m.short],
    }


def run_mix(args: argparse.Namespace, base: PlanInputs) -> int:
    m = plan_mix(load_mix(args.mix, base))
    if args.format == "json":
        print(dumps(mix_json(m, args.top), indent=2))
    elif args.format == "csv":
        cols = ("workload", *COLUMNS, "share")
        rows = ([option_record(1, p.option) | {"workload": p.name, "share": m.fleets[0].share(p)}
                 for p in m.fleets[0].parts] if m.fleets else [])
        print(render(list(cols), [[r[c] for c in cols] for r in rows], "csv"), end="")
    else:
        print(mix_text(m, args.top, args.format), end="")
    if args.quote:
        # the Planner link that reproduces the mix, when its section can hold every workload
        from capacity.report.planner_url import planner_mix_state, planner_url

        state = planner_mix_state(m.workloads, lang=args.lang)
        link = (None if state is None
                else planner_url(state, base=app_url(args)))
        path = write_mix_quote(args.quote, m, lang=args.lang, link=link)
        print(f"quote written to {path}", file=sys.stderr)
    return 0 if m.fleets else 1


def offer_notes(inp: PlanInputs, catalog: Catalog | None = None) -> list[str]:
    """One line per searched GPU without an offer of the kind asked for (it keeps its catalog
    price): never a silent fallback."""
    if not inp.offer_kind:
        return []
    cat = catalog or default_catalog()
    gpus = inp.gpus if inp.gpus is not None else tuple(sorted(cat.gpus))
    entered = dict(inp.price_overrides)
    return [f"note: no {inp.offer_kind} offer for {cat.gpu(g).name}; priced at the catalog's "
            f"{cat.gpu(g).currency} {cat.gpu(g).price_per_hour:g} per GPU-hour"
            for g in without_offer({o.gpu: o for o in inp.offers}, gpus) if g not in entered]


def run(args: argparse.Namespace) -> int:
    print_catalog_warnings()
    if args.quote:
        check_quote_path(args.quote)  # a bad name is one line before any work
    inp = inputs_from_args(args)
    check_wide_ep(args, inp)  # --wide-ep's refusals: one line before any search
    for line in offer_notes(inp):
        print(line, file=sys.stderr)
    if args.mix:
        return run_mix(args, inp)
    p = plan(inp)
    over = inp.workload.tokens_over_context
    if over:
        print("warning: " + t("warn_tokens_over", "en", total=f"{over:,}",
                              ctx=f"{inp.workload.context_tokens:,}"), file=sys.stderr)
    # the cheaper alternatives and the draft's note go to the text, JSON and the quote; CSV
    # prints the ranked options alone, so it builds neither
    notes = args.format != "csv" or bool(args.quote)
    cheaper = alternatives(p) if p.rejected and notes else ()
    note = draft_note(p) if notes else None
    log_summary = getattr(args, "log_summary", None)
    if log_summary is not None and args.format in ("text", "markdown"):
        from capacity.cli.workload import summary_text

        print(summary_text(log_summary), end="\n")
    sim = None
    if (args.simulate or args.quote) and p.best is not None:
        sim = simulate_option(inp, p.best, chunk_tokens=args.chunked_prefill)
    cmp = None
    if args.disaggregated:
        from capacity.plan.disagg import compare

        cmp = compare(inp, aggregated=p)
    wide = size_compare(args, inp, p) if args.wide_ep else None
    pools = pools_compare(args, inp, wide) if wide is not None and args.disaggregated else None
    band = None   # the GPU band, once for the JSON and the quote (`gpu_band`, as the Planner)
    if p.best is not None and (args.quote or args.format == "json"):
        from capacity.fit.calibration_store import load
        from capacity.fit.planning import gpu_band

        band = gpu_band(inp, p.best, load(inp.calibration) if inp.calibration else None)
    if args.format == "json":
        data = to_json(p, args.top)
        data["tokens_over_context"] = over or None
        data["gpu_band"] = None if band is None or p.best is None else {
            "n_gpus": band.n_gpus, "low": band.low, "high": band.high,
            "slow_misses": [r.value for r in band.slow_misses],
            "widenings": [{"kind": str(w.kind), "measured": w.measured, "used": w.used,
                           "amount": w.amount, "output": w.output} for w in band.widenings],
            "text": band_text(p.best, band, inp.max_gpus, "en")}
        if cmp is not None:
            data["disaggregated"] = {
                "winner": cmp.winner, "reason": cmp.reason,
                "options": [{**{k: v for k, v in asdict(d).items() if k != "link"},
                             "link": d.link.kind, "ratio": d.ratio, "label": d.label,
                             "gpus": d.n_gpus, "capacity_rate_per_s": d.capacity_rate_per_s,
                             "cost_per_mtok": d.cost_per_mtok(inp.workload.output_tokens),
                             "cost_per_mtok_design": d.cost_per_mtok_design(
                                 inp.workload.output_tokens)}
                            for d in cmp.disaggregated[:args.top]]}
        if wide is not None:
            data["wide_ep"] = size_json(wide, args.top)
        if pools is not None:
            data["wide_ep_pools"] = pools_json(pools, args.top)
        data["draft_note"] = None if note is None else {
            **asdict(note), "outcome": note.outcome.value, "verify_bound": note.verify_bound.value,
            "failures": [r.value for r in note.failures],
            "capacity_rate_per_s": _num(note.capacity_rate_per_s),
            "plain_capacity_rate_per_s": _num(note.plain_capacity_rate_per_s),
            "text": draft_note_text(note, "en")}
        data["cheaper_alternatives"] = [
            {"gpu": a.gpu, "reasons": [r.value for r in a.reasons], "relaxations": [
                {"kind": r.kind.value, "value": r.value, "option": r.option.label,
                 "gpus": r.option.n_gpus, "tp": r.option.tp, "spare_gpus": r.option.spare_gpus,
                 "cost_per_month": r.option.cost_per_month,
                 "text": alternative_text(a, inp, "en")} for r in a.relaxations]}
            for a in cheaper]
        if sim is not None:
            data["simulation"] = check_record(sim, inp.slo)
        print(dumps(data, indent=2))
    elif args.format == "csv":
        print(render(list(COLUMNS), [[option_record(i + 1, o)[c] for c in COLUMNS]
                                     for i, o in enumerate(p.options[:args.top])], "csv"),
              end="")
    else:
        print(to_text(p, args.top, args.format, cheaper, note), end="")
        if cmp is not None:
            from capacity.cli.disagg_plan import disaggregated_text

            print(disaggregated_text(cmp, args.top), end="")
        if wide is not None:
            print(size_text(wide, args.top), end="")
        if pools is not None:
            print(pools_text(pools, args.top), end="")
        if sim is not None and args.simulate:
            print("\n" + "\n".join(x for x in (check_caption(sim, "en"),
                                               miss_text(sim, inp.slo, "en")) if x))
    if args.quote:
        from capacity.report.planner_url import quote_link
        from capacity.report.quote_disagg import disagg_section

        link, why = quote_link(inp, app_url(args), lang=args.lang, disagg=cmp is not None,
                               wide_ep=wide is not None)  # none where it opens another plan
        path = write_quote(args.quote, p, lang=args.lang, simulation=sim, link=link, band=band,
                           cheaper=cheaper, sections=(
                               *(() if cmp is None else (disagg_section(cmp),)),
                               *(() if wide is None else (size_quote_section(wide),)),
                               *(() if pools is None else (pools_quote_section(pools),))))
        print(f"quote written to {path}" + (f" ({why})" if why else ""), file=sys.stderr)
    return 0 if p.options else 1
