"""Concurrency 1,024 against the simulated endpoint: streams in flight, client-bound workers,
client memory (issue 16's targets).

Starts `capacity sim-server` (httptools; Qwen3.5-9B AWQ on an H200 at --ctx 512, so
2,048 sequences fit and the engine never queues) in its own process, runs `capacity bench
--concurrency 1024 --workers N` as a subprocess, samples the resident memory of the client's
whole process tree (coordinator + workers) every 0.2 s, then reads the run:
- in flight on average: the time-weighted count of requests between their start and end, over
  the level's steady part (one median E2E cut at each end: the ramp-up of the first wave and
  the drain of the last), as a share of 1,024; and the whole level's `achieved_concurrency`;
- per worker: its CPU share and loop lag, and whether it was `client_bound`;
- the client's peak memory (sum of RSS over its processes).
Targets (docs/benchmarks.md): >= 95% in flight, no worker client_bound, < 500 MB.

    .venv/bin/python benchmarks/bench_fleet.py [--level 1024] [--requests 4096] [--tokens 64]
        [--tiny] [--json | --json-out PATH]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_client import start_sim  # noqa: E402
from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.bench.store import RunStore  # noqa: E402


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for t in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (t / "children").read_text().split()]
        except OSError:
            continue
    return total


def in_flight_share(starts: np.ndarray, ends: np.ndarray, level: int, cut_s: float) -> float:
    """Mean requests in flight over [first start + cut, last end - cut], over `level`."""
    lo, hi = starts.min() + cut_s, ends.max() - cut_s
    if hi <= lo:
        return float("nan")
    s, e = np.clip(starts, lo, hi), np.clip(ends, lo, hi)
    return float((e - s).sum() / (hi - lo) / level)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", type=int, default=1024)
    ap.add_argument("--requests", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--speedup", default="1")
    ap.add_argument("--workers", default=None)
    ap.add_argument("--http-stack", default="auto")
    add_arguments(ap)
    args = ap.parse_args(argv)
    if args.tiny:
        args.level, args.requests, args.tokens = 16, 32, 8
    rec = Recorder("fleet", args)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    proc, url = start_sim(["--model", "qwen3.5-9b-awq", "--gpu", "h200-sxm", "--eff", "0.05",
                           "--ctx", "512", "--speedup", args.speedup, "--max-num-seqs", "2048",
                           "--http-stack", args.http_stack])
    out = tempfile.mkdtemp(prefix="bench-fleet-")
    peak = 0
    try:
        cmd = [sys.executable, "-m", "capacity", "bench", "--base-url", url, "--concurrency",
               str(args.level), "--requests", str(args.requests), "--prompt-chars", "200",
               "--max-tokens", str(args.tokens), "--warmup", "2", "--label", "fleet",
               "--out", out, *(["--workers", args.workers] if args.workers else [])]
        t0 = time.perf_counter()
        bench = subprocess.Popen(cmd, cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)},
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        stop = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, tree_rss_bytes(bench.pid))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        text = bench.communicate()[0]
        stop.set()
        watcher.join()
        wall = time.perf_counter() - t0
        if bench.returncode != 0:
            print(text)
            return 1
        print("\n".join(line for line in text.splitlines() if "done," not in line))
    finally:
        proc.terminate()
        proc.wait(10)
    with RunStore(out) as st:
        r = st.query("SELECT start_unix_s, e2e_ms, worker_id, success FROM requests")
        s = st.query("SELECT * FROM summaries").iloc[0]
    ok = r[r["success"]]
    starts = ok["start_unix_s"].to_numpy()
    ends = starts + ok["e2e_ms"].to_numpy() / 1e3
    cut = float(np.median(ok["e2e_ms"])) / 1e3
    print(f"\nlevel {args.level}, {len(ok)}/{len(r)} ok in {wall:.1f} s, workers "
          f"{r['worker_id'].nunique()}")
    print(f"in flight on average (steady part): {in_flight_share(starts, ends, args.level, cut):.1%}"
          f"; whole level (achieved_concurrency / level): "
          f"{s['achieved_concurrency'] / args.level:.1%}")
    print(f"client_bound: {bool(s['client_bound'])} ({s['client_bound_reason']}); busiest worker "
          f"CPU {s['client_cpu_share']:.0%} of a core, loop lag p50 {s['loop_lag_p50_ms']:.2f} "
          f"ms, p99 {s['loop_lag_p99_ms']:.1f} ms")
    print(f"client memory peak (all its processes): {peak / 2**20:.0f} MB")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    share = in_flight_share(starts, ends, args.level, cut)
    load = (f"concurrency {args.level:,} against the simulator ({len(r):,} requests of "
            f"{args.tokens} tokens, workers {r['worker_id'].nunique()})")
    rec.add("in_flight_share", 100 * share, "%", target=(">=", 95.0, ">= 95% in flight"),
            what=f"requests in flight on average over the steady part, {load}")
    rec.add("client_bound_workers", float(bool(s["client_bound"])), "flag",
            target=("<", 0.5, "no worker client_bound"),
            what="1 when a client worker marked itself client_bound, else 0")
    rec.add("client_memory_mb", peak / 2**20, "MB", target=("<", 500.0, "under 500 MB"),
            what="the client's peak memory, all its processes")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
