"""The simulated endpoint's capacity: CPU per delivered token, plain (asyncio + h11) vs auto
(asyncio + httptools).

Starts `capacity sim-server --http-stack STACK` in its own process, drives it with
`capacity bench` (worker processes) at one closed-loop level, and reads the server process's
CPU time from /proc before and after. Capacity = output tokens delivered per CPU-second of the
server (tokens/s one core can stream), a figure that does not depend on how fast the client is;
also printed: the server's worst event-loop lag (`/sim/info`) and how far its emissions fell
behind the simulated schedule. docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_endpoint.py [--level 256] [--requests 1024] [--tokens 64]
        [--tiny] [--json | --json-out PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_client import start_sim  # noqa: E402
from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.bench.store import RunStore  # noqa: E402
from capacity.cli.main import main as capacity_main  # noqa: E402


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(stack: str, args: argparse.Namespace) -> dict[str, float]:
    proc, url = start_sim(["--model", "qwen3.5-9b-awq", "--gpu", "h200-sxm", "--eff", "0.05",
                           "--speedup", args.speedup, "--max-num-seqs", "2048",
                           "--http-stack", stack])
    out = tempfile.mkdtemp(prefix="bench-endpoint-")
    try:
        c0, t0 = cpu_s(proc.pid), time.perf_counter()
        assert capacity_main(["bench", "--base-url", url, "--concurrency", str(args.level),
                              "--requests", str(args.requests), "--prompt-chars", "200",
                              "--max-tokens", str(args.tokens), "--warmup", "0",
                              "--workers", str(args.workers), "--label", stack,
                              "--out", out]) == 0
        wall, cpu = time.perf_counter() - t0, cpu_s(proc.pid) - c0
        info = httpx.get(url.removesuffix("/v1") + "/sim/info").json()
        with RunStore(out) as st:
            row = st.query("SELECT sum(output_tokens) AS tok, avg(success::INT) AS ok, "
                           "any_value(achieved) AS ach FROM requests, (SELECT "
                           "achieved_concurrency AS achieved FROM summaries)").iloc[0]
        return {"tokens": float(row["tok"]), "ok": float(row["ok"]), "server_cpu_s": cpu,
                "wall_s": wall, "tok_per_cpu_s": float(row["tok"]) / cpu,
                "achieved": float(row["ach"]), "lag_max_ms": float(info["loop_lag_max_ms"]),
                "lag_p99_ms": float(info["loop_lag_p99_ms"]),
                "behind_max_ms": float(info["behind_max_ms"]), "stack": info["http_stack"]}
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", type=int, default=256)
    ap.add_argument("--requests", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--speedup", default="20")
    ap.add_argument("--workers", type=int, default=2)
    add_arguments(ap)
    args = ap.parse_args(argv)
    if args.tiny:
        args.level, args.requests, args.tokens, args.workers = 8, 16, 8, 1
    rec = Recorder("endpoint", args)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    load = (f"concurrency {args.level}, {args.requests:,} requests of {args.tokens} tokens, "
            f"speedup {args.speedup}")
    for stack in ("plain", "auto"):
        r = one(stack, args)
        print(f"{stack:5} ({r.pop('stack')}): " + ", ".join(f"{k} {v:,.4g}" for k, v in r.items()),
              flush=True)
        rec.add(f"{stack}_tok_per_cpu_s", r["tok_per_cpu_s"], "tokens/CPU-s",
                what=f"the simulated endpoint's output tokens per CPU-second, "
                     f"`--http-stack {stack}` ({load})")
        rec.add(f"{stack}_lag_p99_ms", r["lag_p99_ms"], "ms",
                what=f"its event-loop lag p99, `--http-stack {stack}`")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
