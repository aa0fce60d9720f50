"""`capacity bench`: measure an OpenAI-compatible endpoint at several concurrency levels.

The chapter's command, as written:
  capacity bench --base-url http://127.0.0.1:8000/v1 --concurrency 10,50,100 --requests 100 \\
      --prompt-chars 12000 --max-tokens 128 --label capacity-8k
Each run writes <out>/<label>/<run_id>/{requests.csv, summary.csv, meta.json}. The API key
(--api-key, else OPENAI_API_KEY) is sent to the server and written nowhere. SIGTERM stops a run
like Ctrl-C (SIGINT): meta.json says `interrupted` and every finished request is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import re
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from capacity import workspace
from capacity.bench.client import (
    SUMMARY_TABLE_HEADERS,
    BenchResult,
    run_bench,
    summary_table_rows,
)
from capacity.bench.config import (
    EVENT_LOOPS,
    ArrivalMode,
    BenchConfig,
    ConfigError,
    RequestSpec,
)
from capacity.bench.engine_info import metrics_delta, probe_engine
from capacity.bench.findmax import FindMaxConfig, describe
from capacity.bench.s3 import is_s3, pull, push
from capacity.bench.storage import model_name, redact, run_secrets, update_meta
from capacity.bench.workers import default_workers
from capacity.catalog.loader import MAX_PRICE_PER_HOUR, MIN_PRICE_PER_HOUR, default_catalog
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import MS, check_base_url, number, whole
from capacity.cli.plan import parse_int_list
from capacity.errors import InputError, StoreError
from capacity.report.tables import render


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "bench", help=SUMMARIES["bench"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default=None,
                   help="the server's OpenAI base URL (default $CAPACITY_BENCH_BASE_URL, else "
                        f"{DEFAULT_BASE_URL})")
    p.add_argument("--model", default=None,
                   help="model name to request (default: the first of /v1/models)")
    p.add_argument("--api-key", default=None,
                   help="bearer token (default: $OPENAI_API_KEY); never written to any file")
    p.add_argument("--endpoint", choices=("chat", "completions"), default="chat",
                   help="/v1/chat/completions or /v1/completions (default chat)")
    # upper limits of sizes are BenchConfig.validate's, with their own message (docs/reliability.md)
    p.add_argument("--concurrency", default=None, metavar="LIST",
                   help="concurrent requests per level, a comma list (default 10; with "
                        f"--find-max by rate: the in-flight cap, default {FIND_MAX_CAP})")
    p.add_argument("--requests", type=whole(min=1), default=100,
                   help="measured requests per level; aim for 3-5x the concurrency (default 100)")
    p.add_argument("--passes", type=whole(min=1), default=1, metavar="N",
                   help="go through the levels N times, forward then backward, each pass "
                        "with its share of --requests, so that a machine drifting during the "
                        "run biases no level; a level's row pools its passes (default 1)")
    p.add_argument("--warmup", type=whole(min=0), default=1,
                   help="unmeasured warm-up requests before each level (default 1)")
    p.add_argument("--prompt-chars", type=whole(min=1), default=1000, metavar="CHARS",
                   help="prompt length in characters, a unique nonce first (default 1000)")
    p.add_argument("--max-tokens", type=whole(min=1), default=128, metavar="TOKENS",
                   help="output tokens requested per request (default 128)")
    p.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=True,
                   help="ask the server to ignore EOS so every output has --max-tokens "
                        "(default on; dropped automatically if the server rejects it)")
    p.add_argument("--request-rate", type=number(min=0, min_open=True), default=None, metavar="RPS",
                   help="open loop: Poisson arrivals at this rate, requests/s, capped by the "
                        "level's concurrency (default: closed loop)")
    p.add_argument("--seed", type=whole(min=0),
                   default=0, help="seed for arrivals and prompts (default 0)")
    p.add_argument("--slo-ttft-ms", type=MS, default=None, metavar="MS",
                   help="TTFT objective for goodput, ms")
    p.add_argument("--slo-tpot-ms", type=MS, default=None, metavar="MS",
                   help="TPOT objective for goodput, ms")
    p.add_argument("--timeout", type=number(min=0, min_open=True), default=600.0, metavar="S",
                   help="per-stream stall limit: seconds without a byte (default 600; long "
                        "prefills under load are slow)")
    p.add_argument("--request-deadline-s", type=number(min=0, max=2_000_000, min_open=True),
                   default=None, metavar="S",
                   help="per-request deadline: a request still running after S seconds ends "
                        "as a timeout (default: --timeout + 1 s per --max-tokens)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where runs are stored: a folder, or s3://bucket/prefix (uploaded as "
                        "levels end; default: the workspace's bench folder, data/bench in a "
                        "checkout; docs/configuration.md)")
    p.add_argument("--label", default="bench", help="run label, a folder name (default bench)")
    p.add_argument("--gpu", default=None,
                   help="catalog GPU key of the server, for cost per M tokens and the overlay")
    p.add_argument("--gpus", type=whole(min=1),
                   default=1, help="GPUs behind the endpoint (default 1)")
    p.add_argument("--gpu-price", type=number(min=MIN_PRICE_PER_HOUR, max=MAX_PRICE_PER_HOUR),
                   default=None, metavar="PER_HOUR",
                   help="price per GPU-hour (default: the catalog's for --gpu)")
    p.add_argument("--currency", choices=("CNY", "USD"), default=None,
                   help="currency of --gpu-price (default: the catalog's, else CNY)")
    p.add_argument("--workers", type=whole(min=1), default=None, metavar="N",
                   help="client processes, each with its own event loop, that share the "
                        "streams (default: one per core available, at most the largest level; "
                        "1: this process alone)")
    p.add_argument("--event-loop", choices=EVENT_LOOPS, default="auto",
                   help="the worker processes' event loop: auto (asyncio where the kernel's "
                        "receive times can be read, so token times are kernel stamps; else "
                        "uvloop where installed), asyncio, or uvloop (less CPU per stream, "
                        "token times taken in the loop; docs/bench.md)")
    # --shard and --start-at are not numbers: parsed by config_from_args (InputError)
    p.add_argument("--shard", default="1/1", metavar="I/N",
                   help="run shard I of N (1-based): this client sends every N-th request of "
                        "each level and its share of the concurrency; every shard needs the "
                        "same flags, --run-id and --start-at (default 1/1: the whole run)")
    p.add_argument("--run-id", default=None, metavar="ID",
                   help="the run's id, the same on every shard (default: a new one)")
    p.add_argument("--start-at", default=None, metavar="TIME",
                   help="start the first level at this time: ISO 8601 (UTC unless it says), "
                        "e.g. 2026-11-30T10:00:00Z, or seconds since 1970 (default: at once)")
    p.add_argument("--predict-model", default=None, metavar="KEY",
                   help="catalog model the endpoint serves (stored for the predicted overlay)")
    w = p.add_argument_group("workload (docs/bench.md#sending-a-workload)")
    w.add_argument("--workload", default=None, metavar="PRESET|FILE",
                   help="draw each request's prompt and output tokens and shared prefix from a "
                        "preset of data/workloads.toml (chat, rag, ...) or a TOML file of that "
                        "shape (FILE#KEY for one of several); seeded by --seed; with "
                        "--request-rate, arrivals follow its arrival process (bursts)")
    w.add_argument("--replay", default=None, metavar="LOG",
                   help="replay a request log (CSV/JSONL, a capacity bench requests.csv, vLLM "
                        "or AIPerf export): its lengths and send times, up to --requests rows")
    w.add_argument("--prompt-tokens", default=None, metavar="LIST",
                   help="prompt lengths in tokens, a comma list (e.g. 256,1024,4096): request "
                        "i of a level gets the (i mod n)-th, with --max-tokens")
    w.add_argument("--chars-per-token", type=number(min=0.5, max=64), default=4.0,
                   metavar="CHARS", help="characters sent per token of --workload, --replay or "
                   "--prompt-tokens (default 4, the simulated endpoint's)")
    f = p.add_argument_group("highest load within the SLO (docs/bench.md#find-max)")
    f.add_argument("--find-max", action="store_true",
                   help="search the highest request rate (or concurrency) at which the --slo-pct "
                        "percentile of TTFT and TPOT meets --slo-ttft-ms and --slo-tpot-ms: "
                        "each probe is a level of --requests requests")
    f.add_argument("--find-max-by", choices=("rate", "concurrency"), default="rate",
                   help="search open-loop request rate (capped at --concurrency in flight) or "
                        "closed-loop concurrency (default rate)")
    f.add_argument("--slo-pct", type=number(min=1, max=100), default=90.0, metavar="PCT",
                   help="percentile of TTFT and TPOT that must meet the targets (default 90)")
    f.add_argument("--find-max-start", type=number(min=0.001, max=1e6), default=1.0,
                   metavar="LOAD", help="first load probed, req/s or requests (default 1)")
    f.add_argument("--find-max-tolerance", type=number(min=0.001, max=1), default=0.05,
                   metavar="FRACTION",
                   help="stop when the bracket's hi/lo - 1 is within it (default 0.05)")
    f.add_argument("--probe-seconds", type=number(min=0.1, max=86_400), default=10.0,
                   metavar="S", help="a rate probe sends rate x S requests, at least 30, at "
                   "most --requests (default 10 s)")
    f.add_argument("--max-seconds", type=number(min=1, max=86_400), default=600.0, metavar="S",
                   help="wall-time bound of the search (default 600 s)")
    f.add_argument("--max-requests", type=whole(min=1, max=10_000_000), default=20_000,
                   metavar="N", help="bound on the requests of all probes (default 20000)")
    return p


DEFAULT_BASE_URL: Final = "http://127.0.0.1:8000/v1"
"""The base URL `capacity bench` measures without --base-url or $CAPACITY_BENCH_BASE_URL."""

FIND_MAX_CAP = 1024
"""In-flight cap of a --find-max rate search when --concurrency is not given."""

FLAGS: dict[str, str] = {
    "base_url": "--base-url", "concurrency": "--concurrency", "requests": "--requests",
    "prompt_chars": "--prompt-chars", "max_tokens": "--max-tokens", "label": "--label",
    "model": "--model", "endpoint": "--endpoint", "warmup": "--warmup", "passes": "--passes",
    "request_rate": "--request-rate", "seed": "--seed", "ignore_eos": "--ignore-eos",
    "slo_ttft_ms": "--slo-ttft-ms", "slo_tpot_ms": "--slo-tpot-ms", "timeout_s": "--timeout",
    "request_deadline_s": "--request-deadline-s", "out_dir": "--out", "gpu": "--gpu",
    "gpus": "--gpus", "gpu_price": "--gpu-price", "currency": "--currency",
    "predict_model": "--predict-model", "workers": "--workers", "event_loop": "--event-loop",
    "shard_index": "--shard I",
    "shard_count": "--shard N", "run_id": "--run-id", "start_at_unix_s": "--start-at",
    "specs": "--workload, --replay or --prompt-tokens",
    "arrivals": "the arrivals of --workload or --replay",
    "chars_per_token": "--chars-per-token", "workload": "--workload", "find_max": "--find-max",
}
"""The flag that sets each `BenchConfig` field (and `run_bench`'s `find_max`): a `ConfigError`
names fields, the CLI says the same with the flags the user typed (`flag_message`)."""
NO_FLAG = frozenset({"stream_usage", "connect_timeout_s"})
"""`BenchConfig` fields no flag sets (their own names stand in an error)."""


def flag_message(exc: ConfigError) -> str:
    """A configuration error's message with each field called by its flag."""
    return exc.named(lambda name: FLAGS.get(name, name))


def _workload_traffic(text: str) -> tuple[Any, str]:
    """(Traffic, description) of --workload: a preset key, FILE or FILE#KEY."""
    from capacity.model.traffic import load_presets, preset

    path_text, _, key = text.partition("#")
    path = Path(path_text)
    if not path.suffix == ".toml" and not key:
        pr = preset(text)
        return pr.traffic, f"preset {pr.key}"
    if not path.is_file():
        raise InputError(f"--workload '{text}': no such preset or file")
    found = load_presets(path)
    if key:
        if key not in found:
            raise InputError(f"--workload {text}: no [workload.{key}]; the file has "
                             f"{', '.join(sorted(found)) or 'none'}")
        return found[key].traffic, f"{path.name}#{key}"
    if len(found) != 1:
        raise InputError(f"--workload {text}: the file has {len(found)} workloads "
                         f"({', '.join(sorted(found)) or 'none'}): give FILE#KEY")
    return next(iter(found.values())).traffic, path.name


def workload_specs(args: argparse.Namespace
                   ) -> tuple[tuple[RequestSpec, ...], ArrivalMode, str | None, float | None,
                              int]:
    """(specs, arrival mode, description, request rate, requests per level) from
    --workload, --replay or --prompt-tokens (at most one of them)."""
    given = [f for f, v in (("--workload", args.workload), ("--replay", args.replay),
                            ("--prompt-tokens", args.prompt_tokens)) if v]
    if len(given) > 1:
        raise InputError(f"give one of {' and '.join(given)}")
    rate, n = args.request_rate, args.requests
    if args.prompt_tokens:
        lengths = parse_int_list(args.prompt_tokens, maximum=1_000_000)
        return (tuple(RequestSpec(prompt_tokens=x, output_tokens=args.max_tokens)
                      for x in lengths), ArrivalMode.POISSON,
                f"prompt tokens {','.join(map(str, lengths))}", rate, n)
    if args.workload:
        traffic, desc = _workload_traffic(args.workload)
        # arrivals drawn at 1 request/s: the level's rate scales them (ArrivalMode.SHAPE)
        smp = traffic.with_rate(1.0).sample(n, seed=args.seed)
        specs = tuple(RequestSpec(prompt_tokens=int(smp.prompt_tokens[i]),
                                  output_tokens=int(smp.output_tokens[i]),
                                  prefix_id=int(smp.prefix_ids[i]),
                                  prefix_tokens=int(smp.cached_tokens[i]),
                                  at_s=float(smp.arrival_ms[i]) / 1e3) for i in range(n))
        mode = ArrivalMode.SHAPE if rate is not None or args.find_max else ArrivalMode.POISSON
        return specs, mode, desc, rate, n
    if args.replay:
        from capacity.fit.traffic import summarize_log

        if rate is not None:
            raise InputError("--replay sends each request at the log's own time: drop "
                             "--request-rate")

        log = summarize_log(args.replay, keep_requests=n)
        if not log.arrivals or log.requests is None:
            raise InputError(f"--replay {args.replay}: the log has no send times to replay")
        rq = log.requests
        specs_l: list[RequestSpec] = []
        history: dict[int, int] = {}
        convs: dict[int, int] = {}
        for i in range(rq.send_s.size):
            prompt, out, conv = (int(rq.prompt_tokens[i]), int(rq.output_tokens[i]),
                                 int(rq.conversation[i]))
            held = history.get(conv, 0) if conv >= 0 else 0
            # a later turn of a conversation starts with the earlier turn's prompt and answer
            pid = 1 + convs.setdefault(conv, len(convs)) if 0 < held < prompt else -1
            specs_l.append(RequestSpec(prompt_tokens=prompt, output_tokens=out, prefix_id=pid,
                                       prefix_tokens=held if pid >= 0 else 0,
                                       at_s=float(rq.send_s[i])))
            if conv >= 0:
                history[conv] = prompt + out
        span = specs_l[-1].at_s or 0.0
        if len(specs_l) < 2 or span <= 0:
            raise InputError(f"--replay {args.replay}: need 2 or more requests over a time span")
        mean_rate = (len(specs_l) - 1) / span
        return (tuple(specs_l), ArrivalMode.REPLAY,
                f"replay {Path(args.replay).name} ({log.kept} usable of {log.rows} rows)",
                mean_rate, len(specs_l))
    return (), ArrivalMode.POISSON, None, rate, n


def find_max_from_args(args: argparse.Namespace) -> FindMaxConfig | None:
    """--find-max's settings, or None without it."""
    if not args.find_max:
        return None
    if args.slo_ttft_ms is None or args.slo_tpot_ms is None:
        raise InputError("--find-max needs the targets: --slo-ttft-ms MS and --slo-tpot-ms MS")
    if args.replay:
        raise InputError("--find-max sets the load itself: it cannot --replay a log's times")
    if args.shard != "1/1":
        raise InputError("--find-max decides each probe from the last one: run it on one "
                         "machine (no --shard), with --workers for more streams")
    if args.find_max_by == "rate" and args.request_rate is not None:
        raise InputError("--find-max searches the rate: drop --request-rate")
    fm = FindMaxConfig(by=args.find_max_by, slo_ttft_ms=args.slo_ttft_ms,
                       slo_tpot_ms=args.slo_tpot_ms, pct=args.slo_pct, start=args.find_max_start,
                       tolerance=args.find_max_tolerance, max_seconds=args.max_seconds,
                       probe_seconds=args.probe_seconds,
                       max_requests=args.max_requests)
    fm.validate()
    return fm


def parse_shard(text: str) -> tuple[int, int]:
    """`--shard I/N` (1-based) as (0-based index, count)."""
    m = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise InputError(f"--shard '{text}' is not I/N with 1 <= I <= N, e.g. 2/4")
    return int(m.group(1)) - 1, int(m.group(2))


def parse_start_at(text: str) -> float:
    """`--start-at`: ISO 8601 (UTC when no offset is given) or seconds since 1970."""
    try:
        return number(min=0, max=1e11)(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--start-at '{text}' is not a time: give ISO 8601, e.g. 2026-11-30T10:00:00Z, or "
            "seconds since 1970") from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    price, currency = args.gpu_price, args.currency
    if args.gpu is not None:
        g = default_catalog().gpu(args.gpu)
        if price is None:
            price, currency = g.price_per_hour, currency or g.currency
        currency = currency or g.currency
    if args.predict_model is not None:
        default_catalog().variant(args.predict_model)
    if price is not None and currency is None:
        currency = "CNY"
    args.base_url = args.base_url or workspace.bench_base_url() or DEFAULT_BASE_URL
    check_base_url(args.base_url)
    fm = find_max_from_args(args)
    conc = args.concurrency or (str(FIND_MAX_CAP) if fm is not None and fm.by == "rate" else "10")
    levels = tuple(parse_int_list(conc, maximum=2**62))
    specs, mode, desc, rate, requests = workload_specs(args)
    shard = parse_shard(args.shard)
    workers = args.workers or min(default_workers(), max(levels, default=1))
    return BenchConfig(
        # the level limits (and their message) are BenchConfig.validate's (docs/reliability.md)
        base_url=args.base_url, concurrency=levels,
        requests=requests, prompt_chars=args.prompt_chars, max_tokens=args.max_tokens,
        label=args.label, model=args.model, endpoint=args.endpoint, warmup=args.warmup,
        passes=args.passes,
        request_rate=rate, seed=args.seed, ignore_eos=args.ignore_eos,
        slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms, timeout_s=args.timeout,
        request_deadline_s=args.request_deadline_s,
        out_dir=str(args.out or workspace.prepare_bench_dir()), gpu=args.gpu, gpus=args.gpus,
        gpu_price=price, currency=currency,
        predict_model=args.predict_model, workers=workers, event_loop=args.event_loop,
        shard_index=shard[0],
        shard_count=shard[1], run_id=args.run_id,
        start_at_unix_s=parse_start_at(args.start_at) if args.start_at else None,
        specs=specs, arrivals=mode, chars_per_token=args.chars_per_token, workload=desc)


async def _bench_until_sigterm(cfg: BenchConfig, api_key: str | None,
                               meta_extra: dict[str, Any] | None = None,
                               find_max: FindMaxConfig | None = None) -> BenchResult | None:
    """`run_bench`, cancelled by SIGTERM as asyncio cancels it on SIGINT, so the run ends as
    `interrupted` with its files written (a job started with `&` ignores SIGINT, and a
    process manager stops with SIGTERM); None when SIGTERM stopped it."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError):  # no signal handlers here (Windows, a thread)
        pass
    try:
        return await run_bench(cfg, api_key, meta_extra=meta_extra, find_max=find_max)
    except asyncio.CancelledError:
        if terminated:
            return None
        raise
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)


def run(args: argparse.Namespace) -> int:
    """`capacity bench`; a configuration error names the flags that set its fields."""
    try:
        return _run(args)
    except ConfigError as exc:
        raise InputError(flag_message(exc)) from None


def _run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    cfg.validate()
    fm = find_max_from_args(args)
    api_key = args.api_key or workspace.openai_api_key()
    args.api_key = None  # nothing downstream may see it through args
    what = (cfg.workload or f"{cfg.prompt_chars} chars -> {cfg.max_tokens} tokens")
    levels = (f"find-max by {fm.by}" if fm is not None
              else f"levels {','.join(map(str, cfg.concurrency))}")
    secrets = run_secrets(api_key, cfg.base_url)
    print(redact(f"capacity bench: {cfg.base_url}, {levels}, {cfg.requests} requests each, "
                 f"{what}", secrets), file=sys.stderr, flush=True)
    engine = probe_engine(cfg.base_url, api_key)  # llama.cpp's /slots, /metrics... (or nothing)
    before = engine.pop("metrics", {})
    result = asyncio.run(_bench_until_sigterm(cfg, api_key, {"engine_info": engine}, fm))
    if result is None:
        print("capacity bench: terminated (SIGTERM); the finished requests are kept",
              file=sys.stderr)
        return 143
    cur = cfg.currency or ""
    headers = list(SUMMARY_TABLE_HEADERS)
    headers[-1] = f"{cur} per M tok".strip()
    print(f"\nrun {result.run_id} ({cfg.label}), model {model_name(result.model)}")
    print(render(headers, summary_table_rows(result.summaries)), end="")
    if result.find_max is not None and fm is not None:
        print(describe(result.find_max, fm))
    for w in result.warnings:
        print(f"warning: {w}")
    if before:
        delta = metrics_delta(before, probe_engine(cfg.base_url, api_key).get("metrics", {}))
        update_meta(result.run_dir, {"server_metrics": delta}, secrets=secrets)
        if "llamacpp_tpot_ms" in delta:
            print(f"server ({engine.get('engine', '?')}, {engine.get('slots', '?')} slots): "
                  f"{delta['llamacpp_tpot_ms']:.2f} ms per output token over "
                  f"{delta.get('llamacpp:tokens_predicted_total', 0):.0f} tokens, prompt "
                  f"{delta.get('llamacpp_prompt_tok_s', math.nan):.0f} tok/s per sequence (its "
                  "own clock; whole run, warm-ups included)")
    # imported here: DuckDB and pandas would add seconds to the start of every run
    from capacity.bench.store import compact_run, merge_shards

    try:  # a typed Parquet copy for fast queries; requests.csv stays the record
        compact_run(result.run_dir)
    except StoreError as exc:
        print(f"warning: stored as CSV only ({exc})")
    if cfg.shard_count > 1:  # the last shard to finish writes the whole run's summary
        run_dir = Path(result.run_dir).parent
        if is_s3(cfg.out_dir):
            pull(cfg.out_dir)  # the other shards' files, from the bucket
        merged = merge_shards(run_dir)
        if merged is not None and is_s3(cfg.out_dir):
            push([merged], run_dir.parent.parent, cfg.out_dir)
        print(f"shard {cfg.shard_index + 1}/{cfg.shard_count} done; " + (
            "every shard has finished: the run's summary.csv is written" if merged else
            "the run is complete when every shard is (capacity runs --compact merges it)"))
    print(f"stored in {result.run_dir}" + (f" (uploaded to {cfg.out_dir})"
                                           if is_s3(cfg.out_dir) else ""))
    return 0
