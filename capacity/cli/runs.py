"""`capacity runs`: list stored benchmark runs, show one run's summary, or query them with SQL.

  capacity runs                          # every run: label, date, endpoint, levels, ok/failed
  capacity runs --label capacity-8k      # the latest run with that label, level by level
  capacity runs --levels                 # every level of every run, from its request rows
  capacity runs --sql "SELECT concurrency, quantile_cont(ttft_ms, 0.5) AS ttft_p50_ms
                       FROM requests WHERE success GROUP BY 1 ORDER BY 1"
Views: requests (one row per request), summaries (one row per level), runs (one row per run).
Only a single SELECT is accepted; the files are read in place and never changed.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from capacity import workspace
from capacity.bench.s3 import is_s3
from capacity.bench.store import RunStore, compact_all
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import dumps
from capacity.errors import InputError, StoreError
from capacity.report.tables import render
from capacity.untrusted import terminal_text


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "runs", help=SUMMARIES["runs"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where runs are stored: a folder, or s3://bucket/prefix read through "
                        "a local mirror (default: the workspace's bench folder, data/bench in "
                        "a checkout; docs/configuration.md)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--label", default=None, help="print the latest run with this label")
    g.add_argument("--run-id", default=None, help="print this run")
    g.add_argument("--sql", default=None, help="one read-only SELECT over the views")
    g.add_argument("--levels", action="store_true",
                   help="every level of every run recomputed from its request rows (requests, "
                        "ok, TTFT/TPOT p50 and p99, output tok/s): a team's whole store")
    g.add_argument("--compact", action="store_true",
                   help="write a typed Parquet copy (requests.parquet) of every run that lacks "
                        "a current one; queries then read it instead of the CSV")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="output format (default table)")
    return p


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):   # a list-valued column (`list(...)`, `[1, 2]`)
        return [_plain(x) for x in v.tolist()]
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return _plain(v.item())
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def print_frame(df: pd.DataFrame, fmt: str) -> None:
    rows = [[_plain(v) for v in row] for row in df.itertuples(index=False, name=None)]
    if fmt == "json":
        print(dumps([dict(zip(df.columns, r, strict=True)) for r in rows], indent=2,
                    default=str))
    else:
        print(render([str(c) for c in df.columns], rows, "csv" if fmt == "csv" else "text"),
              end="")


SUMMARY_VIEW = ("concurrency", "requests_ok", "requests_failed", "ttft_p50_ms", "ttft_p99_ms",
                "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "e2e_p50_ms", "output_tok_s",
                "request_throughput_rps", "goodput_rps", "achieved_concurrency",
                "cost_per_mtok", "client_bound")
RUNS_VIEW = ("run_id", "label", "started_at", "status", "base_url", "model", "levels",
             "requests_ok", "requests_failed", "shards")


def run(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = workspace.prepare_bench_dir()
    elif not is_s3(args.out) and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out}: not a folder")
    if args.compact and is_s3(args.out):
        raise InputError("--compact works on a local folder; runs written to s3:// by "
                         "capacity bench are uploaded with their Parquet copies")
    if args.compact:
        problems: list[str] = []
        done = compact_all(args.out, warnings=problems)
        for w in problems:
            print(f"warning: {w}", file=sys.stderr)
        print(f"compacted {len(done)} run(s)" + "".join(f"\n  {p}" for p in done))
        return 0
    with RunStore(args.out) as store:
        for w in store.warnings:
            print(f"warning: {w}", file=sys.stderr)
        if args.sql is not None:
            print_frame(store.query(args.sql), args.format)
        elif args.levels:
            print_frame(store.level_stats(), args.format)
        elif args.label is not None or args.run_id is not None:
            run_id = args.run_id or store.latest_run_id(args.label)
            df = store.summary(run_id)
            info = store.list_runs()
            info = info[info["run_id"] == run_id]
            if info.empty and df.empty:
                raise StoreError(f"no run '{run_id}' under {args.out} (`capacity runs` "
                                 "lists them)")
            if args.format == "table":
                if not info.empty:
                    r = info.iloc[0]
                    print(terminal_text(f"run {run_id} ({r['label']}), {r['started_at']}, "
                                        f"{r['status']}, {r['base_url']}, model {r['model']}"))
                if df.empty:
                    print("no completed level yet (a killed run?); its requests are in the "
                          "requests view")
                    return 0
                df = df[[c for c in SUMMARY_VIEW if c in df.columns]]
            print_frame(df, args.format)
        else:
            df = store.list_runs()
            if df.empty:
                print(f"no runs under {args.out} (run capacity bench first)")
                return 0
            print_frame(df[list(RUNS_VIEW)] if args.format == "table" else df, args.format)
    return 0
