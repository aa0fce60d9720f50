"""Per-level summaries over 1,000,000 stored request rows: DuckDB in place vs pandas.

Writes synthetic runs in the real requests.csv schema (10 runs x 4 levels x 25,000 requests)
under a temporary folder, opens them with `capacity.bench.store.RunStore` (views over the CSVs, read
in place), and times the summary query (count, ok, TTFT/TPOT p50/p99 with quantile_cont, output
tok/s) against the same in pandas (read_csv + groupby), then again after compacting the runs
to Parquet (what `capacity bench` does when a run ends). docs/benchmarks.md target: under 1 s.
pandas gets its best chance: only the columns the summary reads (`usecols`), the pyarrow
CSV engine (multi-threaded), and the same dtypes.

    .venv/bin/python benchmarks/bench_duckdb.py [--rows 1000000] [--tiny] [--json | --json-out PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.bench.metrics import REQUEST_COLUMNS  # noqa: E402
from capacity.bench.store import RunStore, compact_all  # noqa: E402

SQL = """
SELECT run_id, concurrency, count(*) AS requests, count(*) FILTER (WHERE success) AS ok,
       quantile_cont(ttft_ms, 0.5) FILTER (WHERE success) AS ttft_p50_ms,
       quantile_cont(ttft_ms, 0.99) FILTER (WHERE success) AS ttft_p99_ms,
       quantile_cont(tpot_ms, 0.5) FILTER (WHERE success) AS tpot_p50_ms,
       quantile_cont(tpot_ms, 0.99) FILTER (WHERE success) AS tpot_p99_ms,
       sum(output_tokens) FILTER (WHERE success)
         / (max(start_unix_s + e2e_ms / 1000) - min(start_unix_s)) AS output_tok_s
FROM requests GROUP BY run_id, concurrency ORDER BY run_id, concurrency
"""


def write_synthetic(root: Path, rows: int, runs: int = 10,
                    levels: tuple[int, ...] = (1, 10, 50, 100)) -> None:
    rng = np.random.default_rng(0)
    per = rows // (runs * len(levels))
    for r in range(runs):
        run_id = f"20261130T0000{r:02d}Z-synth"
        d = root / "synthetic" / run_id
        d.mkdir(parents=True)
        frames = []
        for c in levels:
            ok = rng.random(per) > 0.01
            ttft = rng.lognormal(np.log(300 + 20 * c), 0.3, per)
            tpot = rng.lognormal(np.log(6 + 0.25 * c), 0.2, per)
            frames.append(pd.DataFrame({
                "run_id": run_id, "label": "synthetic", "concurrency": c, "request_rate_rps": "",
                "request_index": np.arange(per), "response_id": [f"id{i}" for i in range(per)],
                "start_unix_s": 1.8e9 + np.sort(rng.random(per)) * 600, "queue_ms": 0.01,
                "ttft_ms": np.where(ok, ttft, np.nan), "first_chunk_ms": 1.0,
                "e2e_ms": np.where(ok, ttft + 127 * tpot, np.nan),
                "tpot_ms": np.where(ok, tpot, np.nan), "itl_mean_ms": tpot, "itl_max_ms": 3 * tpot,
                "prompt_chars": 12000, "prompt_tokens": 3000,
                "output_tokens": np.where(ok, 128, 0), "output_tokens_source": "usage",
                "token_events": 128, "max_tokens": 128, "output_length_mismatch": "false",
                "finish_reason": "length", "success": np.where(ok, "true", "false"),
                "error_type": np.where(ok, "", "timeout"), "error_message": "",
                "http_status": 200, "endpoint": "chat", "model": "qwen3.5-9b-awq",
                "itl_ms": "", "row_complete": 1,
            }))
        # every stored column, in order; the ones these rows do not fill (the worker, server
        # timings, workload targets, passes...) stay empty, as a bench run leaves them
        df = pd.concat(frames).reindex(columns=list(REQUEST_COLUMNS))
        df.to_csv(d / "requests.csv", index=False)


USECOLS = ["run_id", "concurrency", "row_complete", "success", "ttft_ms", "tpot_ms",
           "start_unix_s", "e2e_ms", "output_tokens"]
"""The columns the summary reads (the CSV has every stored column)."""


def pandas_summary(root: Path) -> pd.DataFrame:
    df = pd.concat(pd.read_csv(p, usecols=USECOLS, engine="pyarrow")
                   for p in sorted(root.glob("*/*/requests.csv")))
    df = df[df["row_complete"] == 1]
    ok = df[df["success"]]
    g = ok.groupby(["run_id", "concurrency"])
    out = pd.DataFrame({
        "requests": df.groupby(["run_id", "concurrency"]).size(), "ok": g.size(),
        "ttft_p50_ms": g["ttft_ms"].quantile(0.5), "ttft_p99_ms": g["ttft_ms"].quantile(0.99),
        "tpot_p50_ms": g["tpot_ms"].quantile(0.5), "tpot_p99_ms": g["tpot_ms"].quantile(0.99),
    })
    ends = ok["start_unix_s"] + ok["e2e_ms"] / 1000
    end = ends.groupby([ok["run_id"], ok["concurrency"]]).max()
    start = df.groupby(["run_id", "concurrency"])["start_unix_s"].min()
    out["output_tok_s"] = g["output_tokens"].sum() / (end - start)
    return out.reset_index()


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times: list[float] = []
    result: object = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    add_arguments(ap)
    args = ap.parse_args(argv)
    if args.tiny:
        args.rows, args.repeat = 4_000, 1
    rec = Recorder("duckdb", args)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        write_synthetic(root, args.rows)
        size = sum(p.stat().st_size for p in root.rglob("*.csv")) / 1e6
        print(f"wrote {args.rows:,} rows ({size:.0f} MB of CSV) in {time.perf_counter() - t:.1f} s")

        def duck() -> pd.DataFrame:
            with RunStore(root) as s:
                return s.query(SQL)

        t_open, _ = timed(lambda: RunStore(root).close(), args.repeat)
        t_duck, d = timed(duck, args.repeat)
        t_pd, p = timed(lambda: pandas_summary(root), args.repeat)
        assert isinstance(d, pd.DataFrame) and isinstance(p, pd.DataFrame)
        np.testing.assert_allclose(d["ttft_p99_ms"].to_numpy(), p["ttft_p99_ms"].to_numpy(),
                                   rtol=1e-9)
        np.testing.assert_allclose(d["output_tok_s"].to_numpy(), p["output_tok_s"].to_numpy(),
                                   rtol=1e-9)
        print(f"open the store (views only):       median {t_open * 1e3:8.1f} ms")
        print(f"DuckDB summary, open + query:       median {t_duck * 1e3:8.1f} ms "
              f"({len(d)} levels)")
        print(f"pandas read_csv + groupby:          median {t_pd * 1e3:8.1f} ms")
        print(f"ratio pandas / DuckDB (CSV):        {t_pd / t_duck:8.1f} x")
        t = time.perf_counter()
        compacted = compact_all(root)
        print(f"compact {len(compacted)} runs to Parquet (once, as `capacity bench` does at "
              f"the end of a run): {time.perf_counter() - t:.1f} s")
        t_pq, q = timed(duck, args.repeat)
        assert isinstance(q, pd.DataFrame)
        np.testing.assert_allclose(q["ttft_p99_ms"].to_numpy(), p["ttft_p99_ms"].to_numpy(),
                                   rtol=1e-9)
        print(f"DuckDB summary over Parquet copies: median {t_pq * 1e3:8.1f} ms "
              f"(ratio pandas / DuckDB {t_pd / t_pq:.1f} x)")
        print(f"target: a summary over 1M rows under 1000 ms: CSV in place "
              f"{'met' if t_duck < 1 else 'NOT met'}, Parquet {'met' if t_pq < 1 else 'NOT met'}")
    rows = f"{args.rows:,} rows, {len(d)} levels"
    rec.add("duckdb_csv_s", t_duck, "s", target=("<", 1.0, "under 1 s"),
            what=f"per-level summary over {rows}: DuckDB over the CSVs in place, open + query")
    rec.add("duckdb_parquet_s", t_pq, "s", target=("<", 1.0, "under 1 s"),
            what="the same over the runs' Parquet copies, open + query")
    rec.add("pandas_csv_s", t_pd, "s",
            what="the same in pandas: read_csv (pyarrow engine, only the 9 columns used) + "
                 "groupby")
    rec.add("pandas_over_duckdb_csv", t_pd / t_duck, "x",
            what="pandas' time over DuckDB's, both reading the CSVs")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
