"""`capacity frontier`: the buyer's chart as numbers (docs/frontier.md).

Every configuration the planner builds for a model and one request shape on a set of GPUs
(GPU x TP x weight format x KV precision x engine), at closed-loop concurrencies from 1 to the
replica's slots: output tokens per second per GPU against interactivity (tokens per second
per user, 1000 / TPOT), the Pareto front of each GPU x engine x weights x KV, and the cost per
million tokens where each front crosses --interactivity, at the catalog price and each kind
of published offer (data/offers.toml):

    capacity frontier --model llama-3.1-70b --prompt 1024 --output 1024 --interactivity 50
    capacity frontier --model llama-3.1-70b --gpus h100-sxm,b200 --engines vllm --format json
    capacity frontier --model deepseek-v3 --gpus h200-sxm,gb200 --disaggregated --wide-ep

--disaggregated adds disaggregated prefill/decode points (a decode replica and the prefill GPUs
it needs, fractional) and --wide-ep a MoE model's wide expert-parallel points (EP over a node
and over the NVLink domain); both together also a MoE model's wide-EP pools (a decode EP group
and the prefill EP groups it needs), each in groups of their own kind; their records then carry
`deployment`, `layout`, `prefill_tp`, `prefill_gpus` and `gpus_paid`.

Every engine rests on one basis: the chapter's unless --basis names another, as `capacity plan`,
`capacity size`, the Explorer and the Planner, so one deployment reads the same on each;
`--basis typical` draws each engine on its own typical efficiency.

`--format json` is the stable interface: `model`, `currency`, `workload`, `interactivity`,
`basis` (null: each engine's typical), `basis_text`, `evaluated`, `groups` (each with its
`front`, one record per point), `gpu_fronts`, `cost_at_interactivity` and, with --all-points,
`points`.
"""

from __future__ import annotations

import argparse
from typing import Any

from capacity.catalog.loader import MAX_CONTEXT_TOKENS
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import (
    CNY_PER_USD,
    comma_list,
    dumps,
    number,
    print_catalog_warnings,
    whole,
)
from capacity.cli.plan_load import add_prefix_flags, add_turn_flags
from capacity.fit.frontier import (
    DEFAULT_ENGINES,
    PRICE_KINDS,
    CostReadOff,
    FrontierInputs,
    FrontPoint,
    Group,
    cost_read_off,
    frontier,
)
from capacity.fit.frontier_space import AGGREGATED, DEFAULT_BASIS, EACH_TYPICAL
from capacity.model.cost import DEFAULT_CNY_PER_USD
from capacity.plan.options import MAX_GPUS
from capacity.report.bases import basis_label
from capacity.report.i18n import t
from capacity.report.tables import render

POINT_COLUMNS = ("gpu", "engine", "weights", "kv_dtype", "draft", "tp", "pp", "gpus",
                 "concurrency", "interactivity_tok_s_per_user", "throughput_tok_s_per_gpu",
                 "ttft_ms", "tpot_ms", "prefill_share", "price_per_gpu_hour", "cost_per_mtok",
                 "basis")
"""A point's record (JSON, CSV): `concurrency` is per replica of `gpus` (= TP x PP) GPUs (PP:
pipeline stages across nodes, F13); `cost_per_mtok` is per million output tokens at the catalog
price."""
KIND_COLUMNS = ("deployment", "layout", "prefill_tp", "prefill_gpus", "gpus_paid")
"""What a point's record adds with --disaggregated or --wide-ep: its kind of deployment, the
layout in words, a prefill replica's TP and the prefill GPUs a decode replica needs
(disaggregated; 0 otherwise), and the GPUs its throughput is shared by (TP, or the EP degree,
+ prefill GPUs)."""
COST_COLUMNS = ("gpu", "engine", "weights", "kv_dtype", "draft", "kind", "provider",
                "price_per_gpu_hour", "interactivity_tok_s_per_user",
                "throughput_tok_s_per_gpu", "output_per_mtok", "input_per_mtok",
                "output_split_per_mtok", "total_per_mtok")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "frontier", help=SUMMARIES["frontier"], description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    w = p.add_argument_group("model and request")
    w.add_argument("--model", required=True, metavar="KEY",
                   help="model key; a bare key searches every weight format, a format suffix "
                        "(llama-3.1-70b-fp8) fixes it")
    w.add_argument("--prompt", type=whole(min=1, max=MAX_CONTEXT_TOKENS), default=1024,
                   metavar="N", help="prompt tokens per request (default 1024)")
    w.add_argument("--output", type=whole(min=2, max=MAX_CONTEXT_TOKENS), default=1024,
                   metavar="N", help="output tokens per request (default 1024)")
    w.add_argument("--context", type=whole(min=1, max=MAX_CONTEXT_TOKENS), default=None,
                   metavar="N", help="KV context per request, tokens (default prompt + output; "
                                     "a conversation's last turn and its answer)")
    add_turn_flags(w, "conversations of N turns (each turn a request), turn k + 1's prompt the "
                      "whole history plus --turn-tokens new ones, the history in the engine's "
                      "prefix cache: each point holds the turns' mean prompt and prefills their "
                      "mean new tokens, as the planner does (default 1: single requests; not "
                      "with --disaggregated or --wide-ep)")
    add_prefix_flags(w, "a shared prefix (system prompt) the engine's prefix cache holds once: "
                        "each point holds it once and prefills the rest of the prompt of "
                        "--prefix-share of requests, as the planner does (default 0: none; not "
                        "with --disaggregated or --wide-ep)")
    s = p.add_argument_group("search space")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--gpus", default=None, metavar="LIST",
                   help="GPU keys, comma list (default: --datacenter)")
    g.add_argument("--datacenter", action="store_true",
                   help="every catalog GPU but the consumer GeForce RTX cards (the default)")
    s.add_argument("--engines", default=",".join(DEFAULT_ENGINES), metavar="LIST",
                   help=f"engine profiles, comma list (default {','.join(DEFAULT_ENGINES)}; "
                        "data/engines.toml)")
    s.add_argument("--weights", default=None, metavar="LIST",
                   help="weight formats, comma list (default: see --model)")
    s.add_argument("--kv-dtypes", default="fp16,fp8", metavar="LIST",
                   help="KV precisions (default fp16,fp8)")
    s.add_argument("--max-gpus", type=whole(min=1, max=64), default=MAX_GPUS, metavar="N",
                   help=f"most GPUs of one copy of the model (default {MAX_GPUS}): a TP group "
                        "stays in one node; a model no node holds chains a node's TP group over "
                        "nodes as pipeline stages (F13)")
    s.add_argument("--draft", action="append", default=None, metavar="KIND:K",
                   help="speculative-decoding draft drawn besides none, its own group (F12): "
                        "eagle:3, mtp:1, ngram:4, or auto (every depth with published "
                        "acceptance); repeat or comma-separate")
    s.add_argument("--disaggregated", action="store_true",
                   help="also draw disaggregated prefill/decode points (vLLM, SGLang): a "
                        "decode replica at each concurrency and the fractional prefill GPUs it "
                        "needs (docs/frontier.md)")
    s.add_argument("--wide-ep", action="store_true",
                   help="also draw wide expert-parallel points of a MoE model (vLLM, SGLang): "
                        "EP over a node and over the NVLink domain, DP attention; with "
                        "--disaggregated, also wide-EP pools (a decode EP group and the prefill "
                        "EP groups it needs)")
    s.add_argument("--ttft", type=number(min=0, max=600_000, min_open=True), default=2000.0,
                   metavar="MS", help="TTFT budget a disaggregated point's prefill replica is "
                                      "sized at, p90 (default 2000 ms)")
    s.add_argument("--basis", default=None, metavar="BASIS",
                   help="what the speed figures rest on, for every engine: 'chapter' (the "
                        "default, as capacity plan, capacity size and the pages: eff 1, "
                        "prefill MFU 0.3), 'spec', 'typical:ENGINE', a saved calibration, or "
                        "'typical': each engine on its own typical efficiency, vLLM's where it "
                        "has none")
    c = p.add_argument_group("cost")
    c.add_argument("--interactivity", type=number(min=0, max=100_000, min_open=True),
                   default=50.0, metavar="TOK_S",
                   help="tokens per second per user the cost is read at (default 50, i.e. "
                        "TPOT 20 ms)")
    c.add_argument("--offer-kind", choices=PRICE_KINDS, default=None,
                   help="price the read-off with this kind only: the catalog's price or the "
                        "bundled offers of a kind (default: every kind)")
    c.add_argument("--currency", choices=("CNY", "USD"), default="CNY",
                   help="currency of costs (default CNY)")
    c.add_argument("--cny-per-usd", type=CNY_PER_USD, default=DEFAULT_CNY_PER_USD,
                   help=f"exchange rate (default {DEFAULT_CNY_PER_USD})")
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("table", "json", "csv"), default="table",
                   help="output format (default table)")
    o.add_argument("--all-points", action="store_true",
                   help="every point evaluated, not only the fronts")
    o.add_argument("--events", action="store_true",
                   help="also run the discrete-event model on every front point (slow)")
    return p


def point_record(p: FrontPoint, kinds: bool = False) -> dict[str, Any]:
    """A point as a flat record (POINT_COLUMNS, then KIND_COLUMNS with `kinds`, then the event
    model's figures)."""
    rec = {"gpu": p.gpu, "engine": p.engine, "weights": p.weights, "kv_dtype": p.kv_dtype,
           "draft": p.draft, "tp": p.tp, "pp": p.pp, "gpus": p.n_gpus,
           "concurrency": p.concurrency,
           "interactivity_tok_s_per_user": p.interactivity_tok_s_per_user,
           "throughput_tok_s_per_gpu": p.throughput_tok_s_per_gpu, "ttft_ms": p.ttft_ms,
           "tpot_ms": p.tpot_ms, "prefill_share": p.prefill_share,
           "price_per_gpu_hour": p.price_per_gpu_hour, "cost_per_mtok": p.cost_per_mtok,
           "basis": p.basis}
    if kinds:
        rec |= {"deployment": p.deployment, "layout": p.layout or None,
                "prefill_tp": p.prefill_tp, "prefill_gpus": p.prefill_gpus,
                "gpus_paid": p.gpus_paid}
    if p.event_tpot_ms is not None:
        rec |= {"event_ttft_ms": p.event_ttft_ms, "event_tpot_ms": p.event_tpot_ms,
                "event_throughput_tok_s_per_gpu": p.event_throughput_tok_s_per_gpu}
    return rec


def cost_record(r: CostReadOff, kinds: bool = False) -> dict[str, Any]:
    """A cost read-off as a flat record (COST_COLUMNS, and the group's `deployment` first with
    `kinds`)."""
    g = r.group
    rec: dict[str, Any] = {"deployment": g.deployment} if kinds else {}
    return rec | {
        "gpu": g.gpu, "engine": g.engine, "weights": g.weights, "kv_dtype": g.kv_dtype,
        "draft": g.draft, "kind": r.kind, "provider": r.provider or None,
        "price_per_gpu_hour": r.price_per_gpu_hour,
        "interactivity_tok_s_per_user": r.interactivity_tok_s_per_user,
        "throughput_tok_s_per_gpu": r.throughput_tok_s_per_gpu,
        "output_per_mtok": r.output_per_mtok, "input_per_mtok": r.input_per_mtok,
        "output_split_per_mtok": r.output_split_per_mtok, "total_per_mtok": r.total_per_mtok}


def group_record(g: Group, kinds: bool = False) -> dict[str, Any]:
    """A group with its front (`key`, with `kinds` its `deployment`, then its configuration)."""
    rec: dict[str, Any] = {"key": g.key} | ({"deployment": g.deployment} if kinds else {})
    return rec | {"gpu": g.gpu, "engine": g.engine, "basis": g.basis, "weights": g.weights,
                  "kv_dtype": g.kv_dtype, "draft": g.draft,
                  "front": [point_record(p, kinds) for p in g.front]}


def basis_of(text: str | None) -> str | None:
    """The basis `--basis` names (`check_basis`): `DEFAULT_BASIS` (the chapter's) when none is
    given; None for 'typical' (each engine's own typical efficiency)."""
    if text is None:
        return DEFAULT_BASIS
    if text.strip().lower() == EACH_TYPICAL:
        return None
    from capacity.fit.planning import check_basis
    return check_basis(text)


def basis_words(basis: str | None, lang: str = "en") -> str:
    """What a frontier's speed figures rest on, in words: the basis' name (`basis_label`), or
    each engine's typical efficiency (None)."""
    if basis is None:
        return t("fr_basis_each_typical", lang)
    return basis_label(basis, lang)


def inputs_from_args(args: argparse.Namespace) -> FrontierInputs:
    """FrontierInputs from the command line."""
    engines = comma_list(args.engines, "engines (vllm,sglang,llamacpp)")
    kv = comma_list(args.kv_dtypes, "KV precisions (fp16,fp8)")
    assert engines is not None and kv is not None
    basis = basis_of(args.basis)
    return FrontierInputs(
        model=args.model, prompt_tokens=args.prompt, output_tokens=args.output,
        context_tokens=args.context, gpus=comma_list(args.gpus, "GPU keys"), engines=engines,
        basis=basis, formats=comma_list(args.weights, "weight formats"), kv_dtypes=kv,
        max_gpus=args.max_gpus, currency=args.currency, cny_per_usd=args.cny_per_usd,
        disaggregated=args.disaggregated, wide_ep=args.wide_ep, ttft_ms=args.ttft,
        turns=args.turns, turn_tokens=args.turn_tokens or 0, prefix_tokens=args.prefix_tokens,
        prefix_share=args.prefix_share if args.prefix_tokens else 0.0,
        drafts=tuple(k.strip() for d in args.draft or () for k in d.split(",") if k.strip()))


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def run(args: argparse.Namespace) -> int:
    print_catalog_warnings()
    inp = inputs_from_args(args)
    fr = frontier(inp, events=args.events)
    costs = cost_read_off(fr, args.interactivity,
                          (args.offer_kind,) if args.offer_kind else PRICE_KINDS)
    fronts = [p for g in fr.groups for p in g.front]
    shown = [fr.points.row(i) for i in range(len(fr.points))] if args.all_points else fronts
    kinds = inp.disaggregated or inp.wide_ep
    if args.format == "json":
        data: dict[str, Any] = {
            "model": inp.model, "model_name": fr.model_name, "currency": inp.currency,
            "workload": {"prompt_tokens": inp.prompt_tokens, "output_tokens": inp.output_tokens,
                         "context_tokens": inp.context, "turns": inp.turns,
                         "turn_tokens": inp.turn_tokens, "prefix_tokens": inp.prefix_tokens,
                         "prefix_share": inp.prefix_share},
            "interactivity": args.interactivity,
            "basis": inp.basis, "basis_text": basis_words(inp.basis),
            "evaluated": fr.evaluated,
            "groups": [group_record(g, kinds) for g in fr.groups],
            "gpu_fronts": {k: [point_record(p, kinds) for p in v]
                           for k, v in fr.gpu_fronts.items()},
            "cost_at_interactivity": [cost_record(r, kinds) for r in costs]}
        if kinds:
            data["ttft_budget_ms"] = inp.ttft_ms
        if args.all_points:
            data["points"] = [point_record(p, kinds) for p in shown]
        print(dumps(data, indent=2))
    elif args.format == "csv":
        cols = [*POINT_COLUMNS, *(KIND_COLUMNS if kinds else ())]
        print(render(cols, [[point_record(p, kinds)[c] for c in cols] for p in shown], "csv"),
              end="")
    else:
        cur = inp.currency
        print(f"{fr.model_name}: {inp.prompt_tokens} prompt / {inp.output_tokens} output tokens, "
              f"{inp.context} context; {fr.evaluated:,} points, {len(fronts):,} on the fronts of "
              f"{len(fr.groups)} groups (GPU x engine x weights x KV x draft"
              f"{' x deployment' if kinds else ''}); basis: {basis_words(inp.basis)}")
        extra = ["deployment", "GPUs paid", "layout"] if kinds else []
        print(render(["GPU", "engine", "weights", "KV", "draft", "TP", "C", "tok/s/user",
                      "tok/s/GPU", "TTFT ms", f"{cur}/M out", *extra],
                     [[p.gpu, p.engine, p.weights, p.kv_dtype, p.draft or "-",
                       p.tp if p.pp == 1 else f"{p.tp} x PP{p.pp}", p.concurrency,
                       _fmt(p.interactivity_tok_s_per_user), _fmt(p.throughput_tok_s_per_gpu),
                       _fmt(p.ttft_ms, 0), _fmt(p.cost_per_mtok, 3),
                       *([p.deployment, _fmt(p.gpus_paid, 2), p.layout or "-"] if kinds
                         else [])] for p in shown],
                     "text").rstrip("\n"))
        print(f"\nCost per million tokens at {args.interactivity:g} tok/s per user ({cur}; "
              "'-': the front does not reach it, or no offer of that kind)")
        reach = sorted(costs, key=lambda r: (r.output_per_mtok is None,
                                             r.output_per_mtok or 0.0))
        print(render(["GPU", "engine", "weights", "KV", "draft",
                      *(["deployment"] if kinds else []), "price", f"{cur}/GPU-h",
                      "tok/s/GPU", "out", "in", "total"],
                     [[r.group.gpu, r.group.engine, r.group.weights, r.group.kv_dtype,
                       r.group.draft or "-", *([r.group.deployment] if kinds else []), r.kind,
                       _fmt(r.price_per_gpu_hour, 2), _fmt(r.throughput_tok_s_per_gpu),
                       _fmt(r.output_per_mtok, 3), _fmt(r.input_per_mtok, 3),
                       _fmt(r.total_per_mtok, 3)] for r in reach], "text").rstrip("\n"))
        print("out: the fleet's cost over the output tokens (F7, as `capacity size`); in: the "
              "prefill share of the GPU-hour over the input tokens; total: the fleet's cost "
              "over all tokens. Figures per GPU hold for any number of replicas.")
        if kinds:
            print(f"Disaggregated: a decode replica (TP) and the prefill GPUs it needs at a TTFT "
                  f"budget of {inp.ttft_ms:g} ms (fractional: the xPyD ratio matched); wide EP: "
                  "one EP group with DP attention. 'GPUs paid' is what tok/s/GPU divides by; "
                  f"'{AGGREGATED}' points are one replica of TP GPUs.")
    return 0
