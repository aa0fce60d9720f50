"""`capacity workload`: what a request log says about its traffic, and the named workloads.

    capacity workload summarize requests.csv          # lengths, busiest hour, burstiness, reuse
    capacity workload summarize trace.jsonl --format json
    capacity workload presets                         # chat, rag, code, agentic, summarize

A log is CSV or JSON lines with a timestamp, prompt tokens and output tokens per request, and
optionally a conversation or prefix id; the columns are found by name (`timestamp` or
`start_unix_s`, `prompt_tokens` or `input_length` or `ContextTokens`, `output_tokens` or
`GeneratedTokens`..., docs/method.md "Workloads"): `capacity bench`'s requests.csv, AIPerf's
profile_export.jsonl, the Azure LLM, BurstGPT and Mooncake traces read as they are. Rows that
cannot be used are counted with their reason. Size from it with `capacity size --log FILE`.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from capacity.cli.commands import SUMMARIES
from capacity.cli.common import dumps, whole
from capacity.fit.traffic import LogSummary, summarize_log, summary_record
from capacity.model.traffic import load_presets
from capacity.report.tables import render


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "workload", help=SUMMARIES["workload"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ws = p.add_subparsers(dest="workload_command", metavar="ACTION")
    ws.required = True
    s = ws.add_parser("summarize", help="summarise a request log (CSV or JSON lines)",
                      description="Lengths (mean, p50/p90/p99, histogram), arrivals per hour of "
                                  "the day, the busiest hour and its rate, burstiness (CV of the "
                                  "gaps) and prefix reuse of a request log, read in place.")
    s.add_argument("file", metavar="FILE", help="the log: .csv, or .jsonl/.json lines")
    s.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format (default text)")
    s.add_argument("--bins", type=whole(min=2, max=64), default=24, metavar="N",
                   help="most histogram bins (powers of two) per length (default 24)")
    ws.add_parser("presets", help="the named workloads of data/workloads.toml, with sources")
    return p


def _n(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}" if math.isfinite(x) else "-"


def summary_text(s: LogSummary) -> str:
    """The summary as a few lines of text (also printed by `capacity size --log`)."""
    left = sum(s.bad_rows.values())
    reasons = "; ".join(f"{n:,} {r}" for r, n in s.bad_rows.items() if n)
    cv = "-" if not math.isfinite(s.burstiness_cv) else f"{s.burstiness_cv:.2f}"
    when = (f"span {s.span_s / 3600:.2f} h; busiest hour "
            + (f"{s.busiest_hour_of_day:02d}:00 UTC" if s.absolute_time
               else f"#{s.busiest_hour_of_day} from the start")
            + f": {s.busiest_hour_requests:,} requests = {s.peak_rate_per_s:.3f} req/s; "
              f"burstiness CV {cv} (1 = Poisson); prefix reuse {s.prefix_reuse_share:.0%}"
            if s.arrivals else "no arrival times in this file (a vLLM result without "
                               "start_times, or every request at one instant): lengths "
                               "only, no rate or burstiness")
    lines = [
        f"{s.path}: {s.rows:,} rows, {s.kept:,} used, {left:,} left out"
        + (f" ({reasons})" if reasons else ""),
        "columns: " + ", ".join(f"{k} = {v}" for k, v in s.columns.items()),
        when,
        render(["tokens", "mean", "p50", "p90", "p99", "max"],
               [[name, _n(x.mean_tokens), _n(x.p50_tokens), _n(x.p90_tokens), _n(x.p99_tokens),
                 f"{x.max_tokens:,}"] for name, x in (("prompt", s.prompt),
                                                     ("output", s.output))], "text").rstrip(),
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.workload_command == "presets":
        rows = []
        for key, p in load_presets().items():
            t = p.traffic
            rows.append([key, p.name, _n(t.mean_prompt_tokens), _n(t.output.mean_tokens),
                         f"{t.arrivals.kind} CV {t.arrivals.cv:g}", t.prefix_tokens, t.turns])
        print(render(["key", "name", "prompt mean", "output mean", "arrivals", "prefix",
                      "turns"], rows, "text"), end="")
        for key, p in load_presets().items():
            print(f"\n{key}: " + " | ".join(p.sources)
                  + (f"\n  assumed (no source): {', '.join(p.assumed)}" if p.assumed else ""))
        return 0
    s = summarize_log(args.file, bins=args.bins)
    if args.format == "json":
        print(dumps(summary_record(s), indent=2))
    else:
        print(summary_text(s), end="")
    return 0
