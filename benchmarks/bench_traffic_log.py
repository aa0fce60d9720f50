"""Sizing from a request log: a 1,000,000-row log summarised (DuckDB over the file in place) and
the planner's answer for its busiest hour (docs/benchmarks.md targets: summary under 5 s,
planner under 2 s).

Writes a synthetic log (CSV, and JSON lines with `--jsonl`) of `--rows` requests over one day:
lognormal prompt and output lengths, a daily profile that peaks in the afternoon, gamma
inter-arrival gaps (CV 2), conversation ids with three turns each and 1 % bad rows of three
kinds. Then times `capacity.fit.traffic.summarize_log` and `capacity.plan.search.plan` on
`LogSummary.workload()` (median of `--repeat` runs each).

    .venv/bin/python benchmarks/bench_traffic_log.py [--rows 1000000] [--jsonl] [--repeat 3]
        [--tiny] [--json | --json-out PATH]

Results go to `traffic_log.json` (CSV) or `traffic_log_jsonl.json` (`--jsonl`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.fit.traffic import summarize_log  # noqa: E402
from capacity.plan.options import PlanInputs, Slo  # noqa: E402
from capacity.plan.search import plan  # noqa: E402


def write_log(path: Path, rows: int, *, jsonl: bool, seed: int = 0) -> None:
    """A synthetic day of traffic in the columns a customer's log has."""
    rng = np.random.default_rng(seed)
    hours = np.arange(24)
    shares = 0.2 + np.exp(-0.5 * ((hours - 15) / 3.0) ** 2)
    per_hour = rng.multinomial(rows, shares / shares.sum())
    ts: list[np.ndarray] = []
    for h, n in enumerate(per_hour):
        gaps = rng.gamma(0.25, 1.0, size=n)   # CV 2
        ts.append(h * 3600.0 + np.cumsum(gaps) / gaps.sum() * 3599.0)
    t = np.concatenate(ts) + 1_767_225_600.0   # 2026-01-01 00:00 UTC
    df = pd.DataFrame({
        "timestamp": pd.to_datetime(t, unit="s").strftime("%Y-%m-%d %H:%M:%S.%f"),
        "prompt_tokens": np.rint(rng.lognormal(np.log(1000), 0.9, rows)).astype(np.int64),
        "output_tokens": np.rint(rng.lognormal(np.log(150), 0.8, rows)).astype(np.int64) + 1,
        "conversation_id": [f"c{i // 3}" for i in range(rows)],
    })
    bad = rng.choice(rows, size=rows // 100, replace=False)
    third = len(bad) // 3
    df["timestamp"] = df["timestamp"].astype(object)
    df.loc[bad[:third], "timestamp"] = "not a time"
    df["prompt_tokens"] = df["prompt_tokens"].astype(object)
    df.loc[bad[third:2 * third], "prompt_tokens"] = "n/a"
    df.loc[bad[2 * third:], "output_tokens"] = 0
    if jsonl:
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_csv(path, index=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--jsonl", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    add_arguments(ap)
    a = ap.parse_args(argv)
    if a.tiny:
        a.rows, a.repeat = 3_000, 1
    rec = Recorder("traffic_log_jsonl" if a.jsonl else "traffic_log", a)
    fmt = "JSON lines" if a.jsonl else "CSV"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("log.jsonl" if a.jsonl else "log.csv")
        t0 = time.perf_counter()
        write_log(path, a.rows, jsonl=a.jsonl)
        print(f"wrote {a.rows:,} rows ({path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s")
        size_mb = path.stat().st_size / 1e6
        times, summary = [], None
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            summary = summarize_log(path)
            times.append(time.perf_counter() - t0)
        assert summary is not None
        print(f"summary: median {statistics.median(times):.2f} s over {a.repeat} runs "
              f"(target < 5 s); {summary.kept:,} used, bad rows {summary.bad_rows}; busiest "
              f"hour {summary.busiest_hour_of_day}:00 at {summary.peak_rate_per_s:.2f} req/s, "
              f"CV {summary.burstiness_cv:.2f}, prefix reuse {summary.prefix_reuse_share:.0%}")
        rec.add("summary_s", statistics.median(times), "s", target=("<", 5.0, "under 5 s"),
                what=f"`summarize_log` over a {a.rows:,}-row request log ({fmt}, "
                     f"{size_mb:.0f} MB, 1 % bad rows), DuckDB over the file in place")
        inp = PlanInputs(model="qwen3.5-9b-awq", workload=summary.workload(percentile=99),
                         slo=Slo(ttft_ms=2000, tpot_ms=50, quantile=0.99), spare=True)
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            p = plan(inp)
            times.append(time.perf_counter() - t0)
        best = p.best.label if p.best is not None else "none"
        print(f"planner: median {statistics.median(times):.2f} s over {a.repeat} runs "
              f"(target < 2 s); {p.evaluated} configurations, best {best}")
    rec.add("planner_s", statistics.median(times), "s", target=("<", 2.0, "under 2 s"),
            what=f"the planner for the log's busiest hour ({p.evaluated:,} configurations)")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
