"""A per-level summary over 10,000,000 request rows stored as Parquet: a local folder, and the
same runs in a local S3-compatible server (moto) read through the store's mirror.

Writes 10 synthetic runs x 4 levels (the real requests.csv header, and its typed
requests.parquet copy, as `capacity bench` leaves a finished run) with DuckDB, then times
`RunStore(root)` plus its `level_stats` (`capacity runs --levels`; median of 3), beside the
four-quantile SQL of `bench_duckdb.py` for the ratio: over the folder,
and over `s3://bucket/runs` after uploading the files to moto (cold: the mirror is empty and
every object is fetched; warm: the mirror is current and only the listing is read).
docs/benchmarks.md target: under 2 s locally; the S3 time is reported.

    .venv/bin/python benchmarks/bench_store_10m.py [--rows 10000000] [--no-s3] [--tiny]
        [--json | --json-out PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_duckdb import SQL  # noqa: E402
from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.bench.metrics import REQUEST_COLUMNS  # noqa: E402
from capacity.bench.store import RunStore, request_dtypes  # noqa: E402


def write_runs(root: Path, rows: int, runs: int = 10, levels: tuple[int, ...] = (1, 10, 50, 100)
               ) -> None:
    per = rows // (runs * len(levels))
    types = request_dtypes()
    con = duckdb.connect()
    for r in range(runs):
        run_id = f"20261130T0000{r:02d}Z-synth"
        d = root / "synthetic" / run_id
        d.mkdir(parents=True)
        (d / "requests.csv").write_text(",".join(REQUEST_COLUMNS) + "\n")
        values = {
            "run_id": f"'{run_id}'", "label": "'synthetic'", "concurrency": "c",
            "request_index": "i", "response_id": "'id' || i", "start_unix_s": "1.8e9 + i * 0.01",
            "queue_ms": "0.01", "ttft_ms": "300 + 20 * c * (0.5 + random())",
            "first_chunk_ms": "1.0", "e2e_ms": "300 + 20 * c + 127 * (6 + 0.25 * c)",
            "tpot_ms": "(6 + 0.25 * c) * (0.8 + 0.4 * random())", "prompt_chars": "12000",
            "prompt_tokens": "3000", "output_tokens": "128", "output_tokens_source": "'usage'",
            "token_events": "128", "max_tokens": "128", "output_length_mismatch": "false",
            "finish_reason": "'length'", "success": "random() > 0.01", "endpoint": "'chat'",
            "model": "'synthetic'", "itl_ms": "''", "worker_id": "i % 2", "row_complete": "1"}
        cols = ", ".join(f"CAST({values.get(c, 'NULL')} AS {types[c]}) AS {c}"
                         for c in REQUEST_COLUMNS)
        levels_sql = ", ".join(f"({c})" for c in levels)
        con.execute(f"COPY (SELECT {cols} FROM (VALUES {levels_sql}) l(c), range({per}) t(i)) "
                    f"TO '{d / 'requests.parquet'}' (FORMAT parquet)")
        os.utime(d / "requests.parquet")  # newer than its CSV: the store reads it
    con.close()


def timed(root: str, repeat: int = 3, *, levels: bool = True) -> tuple[float, int]:
    """Median seconds of open + summary over `root`, and the rows it counted: the store's own
    `level_stats` (`capacity runs --levels`), or with `levels` False the four separate
    quantiles of bench_duckdb.py's SQL."""
    times, n = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        with RunStore(root) as st:
            df = st.level_stats() if levels else st.query(SQL)
        times.append(time.perf_counter() - t0)
        n = int(df["requests"].sum())
    return statistics.median(times), n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--no-s3", action="store_true")
    add_arguments(ap)
    args = ap.parse_args(argv)
    if args.tiny:
        args.rows = 4_000
    repeat = 1 if args.tiny else 3
    rec = Recorder("store_10m", args)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-store-10m-"))
    try:
        t0 = time.perf_counter()
        write_runs(tmp / "runs", args.rows)
        size = sum(p.stat().st_size for p in (tmp / "runs").rglob("*"))
        print(f"wrote {args.rows:,} rows as Parquet ({size / 2**20:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        secs, n = timed(str(tmp / "runs"), repeat)
        print(f"local folder: open + `capacity runs --levels` over {n:,} rows: {secs:.2f} s "
              "(median of 3; target < 2 s)", flush=True)
        four, _ = timed(str(tmp / "runs"), repeat, levels=False)
        print(f"local folder: open + four separate quantile_cont (bench_duckdb.py's SQL): "
              f"{four:.2f} s (median of 3); ratio {four / secs:.2f}", flush=True)
        rec.add("levels_local_s", secs, "s", target=("<", 2.0, "under 2 s"),
                what=f"open + `capacity runs --levels` over {n:,} request rows in Parquet, a "
                     f"local folder (median of {repeat})")
        rec.add("four_quantiles_local_s", four, "s",
                what="open + four separate quantile_cont (bench_duckdb.py's SQL), the same rows")
        if not args.no_s3:
            cold, warm = s3_times(tmp, repeat)
            rec.add("levels_s3_cold_s", cold, "s",
                    what="the same summary over s3:// (moto on 127.0.0.1), the mirror empty")
            rec.add("levels_s3_warm_s", warm, "s",
                    what="the same over s3://, the mirror current (only the listing read)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    rec.write()
    return 0


def s3_times(tmp: Path, repeat: int = 3) -> tuple[float, float]:
    """Seconds over s3:// cold (every object fetched) and warm (median of `repeat`)."""
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.environ.update({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                       "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "CAPACITY_HOME": str(tmp / "home")})
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="team-runs")
        for p in sorted((tmp / "runs").rglob("*")):  # CSV before its Parquet copy
            if p.is_file():
                s3.upload_file(str(p), "team-runs", "runs/" + p.relative_to(tmp / "runs")
                               .as_posix())
        t0 = time.perf_counter()
        with RunStore("s3://team-runs/runs") as st:
            n = int(st.level_stats()["requests"].sum())
        cold = time.perf_counter() - t0
        warm, _ = timed("s3://team-runs/runs", repeat)
        print(f"s3 (moto on 127.0.0.1): open + summary over {n:,} rows: cold {cold:.2f} s "
              f"(every object fetched), warm {warm:.2f} s (median of {repeat}, mirror current)")
        return cold, warm
    finally:
        moto.terminate()
        moto.wait(10)


if __name__ == "__main__":
    raise SystemExit(main())
