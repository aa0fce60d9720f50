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
from typing import Any

from capacity import workspace
from capacity.bench.client import (
    SUMMARY_TABLE_HEADERS,
    BenchConfig,
    BenchResult,
    run_bench,
    summary_table_rows,
)
from capacity.bench.engine_info import metrics_delta, probe_engine
from capacity.bench.s3 import is_s3, pull, push
from capacity.bench.storage import model_name, update_meta
from capacity.bench.workers import default_workers
from capacity.catalog.loader import BOUNDS, default_catalog
from capacity.cli.common import MS, check_base_url, number, whole
from capacity.cli.plan import parse_int_list
from capacity.errors import InputError, StoreError
from capacity.report.tables import render


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "bench", help="measure TTFT, TPOT and throughput of an OpenAI-compatible endpoint",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default="http://127.0.0.1:8000/v1",
                   help="the server's OpenAI base URL (default http://127.0.0.1:8000/v1)")
    p.add_argument("--model", default=None,
                   help="model name to request (default: the first of /v1/models)")
    p.add_argument("--api-key", default=None,
                   help="bearer token (default: $OPENAI_API_KEY); never written to any file")
    p.add_argument("--endpoint", choices=("chat", "completions"), default="chat",
                   help="/v1/chat/completions or /v1/completions (default chat)")
    # upper limits of sizes are BenchConfig.validate's, with their own message (docs/reliability.md)
    p.add_argument("--concurrency", default="10", metavar="LIST",
                   help="concurrent requests per level, a comma list (default 10)")
    p.add_argument("--requests", type=whole(min=1), default=100,
                   help="measured requests per level; aim for 3-5x the concurrency (default 100)")
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
    p.add_argument("--gpu-price", type=number(min=0, max=BOUNDS["price_per_hour"][1]),
                   default=None, metavar="PER_HOUR",
                   help="price per GPU-hour (default: the catalog's for --gpu)")
    p.add_argument("--currency", choices=("CNY", "USD"), default=None,
                   help="currency of --gpu-price (default: the catalog's, else CNY)")
    p.add_argument("--workers", type=whole(min=1), default=None, metavar="N",
                   help="client processes, each with its own event loop, that share the "
                        "streams (default: one per core available, at most the largest level; "
                        "1: this process alone)")
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
    return p


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
    check_base_url(args.base_url)
    levels = tuple(parse_int_list(args.concurrency, maximum=2**62))
    shard = parse_shard(args.shard)
    workers = args.workers or min(default_workers(), max(levels, default=1))
    return BenchConfig(
        # the level limits (and their message) are BenchConfig.validate's (docs/reliability.md)
        base_url=args.base_url, concurrency=levels,
        requests=args.requests, prompt_chars=args.prompt_chars, max_tokens=args.max_tokens,
        label=args.label, model=args.model, endpoint=args.endpoint, warmup=args.warmup,
        request_rate=args.request_rate, seed=args.seed, ignore_eos=args.ignore_eos,
        slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms, timeout_s=args.timeout,
        request_deadline_s=args.request_deadline_s,
        out_dir=str(args.out or workspace.prepare_bench_dir()), gpu=args.gpu, gpus=args.gpus,
        gpu_price=price, currency=currency,
        predict_model=args.predict_model, workers=workers, shard_index=shard[0],
        shard_count=shard[1], run_id=args.run_id,
        start_at_unix_s=parse_start_at(args.start_at) if args.start_at else None)


async def _bench_until_sigterm(cfg: BenchConfig, api_key: str | None,
                               meta_extra: dict[str, Any] | None = None) -> BenchResult | None:
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
        return await run_bench(cfg, api_key, meta_extra=meta_extra)
    except asyncio.CancelledError:
        if terminated:
            return None
        raise
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    cfg.validate()
    api_key = args.api_key or workspace.openai_api_key()
    args.api_key = None  # nothing downstream may see it through args
    print(f"capacity bench: {cfg.base_url}, levels {','.join(map(str, cfg.concurrency))}, "
          f"{cfg.requests} requests each, {cfg.prompt_chars} chars -> {cfg.max_tokens} tokens",
          file=sys.stderr, flush=True)
    engine = probe_engine(cfg.base_url, api_key)  # llama.cpp's /slots, /metrics... (or nothing)
    before = engine.pop("metrics", {})
    result = asyncio.run(_bench_until_sigterm(cfg, api_key, {"engine_info": engine}))
    if result is None:
        print("capacity bench: terminated (SIGTERM); the finished requests are kept",
              file=sys.stderr)
        return 143
    cur = cfg.currency or ""
    headers = list(SUMMARY_TABLE_HEADERS)
    headers[-1] = f"{cur} per M tok".strip()
    print(f"\nrun {result.run_id} ({cfg.label}), model {model_name(result.model)}")
    print(render(headers, summary_table_rows(result.summaries)), end="")
    for w in result.warnings:
        print(f"warning: {w}")
    if before:
        delta = metrics_delta(before, probe_engine(cfg.base_url, api_key).get("metrics", {}))
        update_meta(result.run_dir, {"server_metrics": delta},
                    secrets=(api_key,) if api_key else ())
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
