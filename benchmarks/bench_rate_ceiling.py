"""The client's request-rate ceiling on one core: the highest Poisson rate that ONE client worker
process keeps on schedule against the simulated endpoint, and how many streams it then holds.

`capacity sim-server` (Llama-3.1-8B on one H200, 64 output tokens per request, up to 2,048
sequences) runs in its own process, a fresh one per rate (an empty engine each time);
`capacity bench --workers 1 --request-rate R` drives it in an open loop at increasing rates R.
With two or more cores the endpoint is pinned to the last core and the client to the first
(`os.sched_setaffinity`, what `taskset` does), so the client has one core to itself (on a
machine shared with other jobs, as much of it as the scheduler gives).

Per rate, from the client's own per-request records (the run store):
- schedule kept = offered span / achieved span: the time from the first to the last scheduled
  send (each request's due time: its send minus its `queue_ms`) over the time from the first to
  the last actual send; 1.0 when every request left on time, 0.8 when the client sent only 80%
  of the offered rate;
- send lag = `queue_ms`, how late each request left after it was due (p50 and p99, ms);
- in flight = the streams held open on average once the level is full (`steady_in_flight`);
and from the endpoint: its CPU share (/proc), how far its engine's steps fell behind the wall
clock at worst (`/sim/info` `behind_max_ms`: above a step's length the endpoint, not the client,
is the bottleneck) and its true E2E p50 (`/sim/truth`).

The ceiling is the highest rate whose schedule kept is >= 95% with a send lag p50 under 5 ms
(`capacity bench`'s own client-bound rule, CLIENT_QUEUE_LIMIT_MS). The issue's target (issue
28): >= 95% of 1,024 in flight at >= 200 requests/s on one client core. The endpoint (SIM_FLAGS)
is chosen so that 200 requests/s is that load and the engine keeps up with it: the same
scheduler in virtual time (`capacity.sim.virtual.run_virtual`, Poisson, 50-token prompts, 64
output tokens, 30 s) gives E2E p50 4.95 s at 200 requests/s (5.03 s in the last quarter, ~1,000
in flight), 4.26 s at 150 and 5.28 s at 220 (5.53 s in the last quarter: slowly filling). The
earlier endpoint (`--eff 0.05`, chapter engine) was itself saturated above ~48 requests/s (its
decode step at 1,024 sequences is 333 ms, 3,075 tokens/s; in virtual time its E2E p50 at 100
requests/s grows from 14 s to 24 s in the last quarter), so no rate above that measured the
client. The endpoint's figures per rate (true E2E, `behind_max_ms`, CPU) say when it, not the
client, sets the pace; `--eff` and `--speedup` change it.
docs/benchmarks.md, "The client's rate ceiling".

`--aiperf PATH` also runs AIPerf (`aiperf profile`, all its processes pinned to the client's
core) at the same rates (`--aiperf-rates`) on a fresh pinned endpoint each, and records the
send rate it reached, its streams in flight and its own credit-to-send lag (`aiperf_rate`).

    .venv/bin/python benchmarks/bench_rate_ceiling.py [--rates 50,100,150,200,250,300]
        [--seconds 20] [--aiperf /tmp/aiperf-venv/bin/aiperf [--aiperf-rates 50,100]]
        [--tiny] [--json | --json-out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_client import start_sim  # noqa: E402
from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.bench.metrics import CLIENT_QUEUE_LIMIT_MS  # noqa: E402
from capacity.bench.store import RunStore  # noqa: E402

KEEP_LIMIT = 0.95
"""The share of the offered schedule the client must keep (issue 28)."""
SIM_FLAGS = ["--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--max-num-seqs", "2048",
             "--engine", "vllm", "--bandwidth", "340", "--ctx", "256"]
"""The endpoint: Llama-3.1-8B on H200 (the issue's load) scheduled as vLLM (prefill chunks in
the decode steps), room for 2,048 sequences of up to 256 tokens, its memory bandwidth cut to
340 GB/s so that a request lasts ~5 s at 200 requests/s: ~1,000 streams in flight (module
docstring)."""


def cores() -> tuple[set[int] | None, set[int] | None]:
    """(client cores, endpoint cores): the first and the last core this process may use, or
    (None, None) on a single core or where affinity cannot be set."""
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None, None
    if len(mine) < 2:
        return None, None
    return {mine[0]}, {mine[-1]}


def steady_in_flight(start_s: np.ndarray, e2e_s: np.ndarray) -> float:
    """Streams open on average once the level is full: over the time from the first send plus
    the median E2E (the ramp-up is over) to the last send (the ramp-down has not begun), the
    mean count of requests with start <= t < start + E2E, sampled every 10 ms. Unit: streams.
    Source: this script's definition (the run's `achieved_concurrency` averages over the ramps
    too, so a 20 s level of 5 s requests reads ~20% low)."""
    ok = np.isfinite(e2e_s)
    start, end = np.sort(start_s[ok]), np.sort(start_s[ok] + e2e_s[ok])
    if start.size == 0:
        return 0.0
    t = np.arange(start[0] + float(np.median(e2e_s[ok])), start[-1], 0.01)
    if t.size == 0:
        return 0.0
    return float(np.mean(np.searchsorted(start, t, "right") - np.searchsorted(end, t, "right")))


def schedule_kept(start_s: np.ndarray, queue_ms: np.ndarray) -> float:
    """Offered span / achieved span of one level's sends (1.0 = on schedule). Unit: fraction.

    start_s: each request's send time (s); queue_ms: how late it left after it was due (ms), so
    its due time is start_s - queue_ms / 1000. Both spans run from the first to the last send
    of the same requests, so the Poisson schedule's own randomness cancels. Source: this
    script's definition (module docstring)."""
    due = start_s - queue_ms / 1e3
    achieved = float(start_s.max() - start_s.min())
    offered = float(due.max() - due.min())
    return offered / achieved if achieved > 0 else 1.0


@contextlib.contextmanager
def endpoint_at(speedup: str, eff: str, cores_: set[int] | None) -> Iterator[tuple[str, int]]:
    """A fresh simulated endpoint (an empty engine for each level), pinned to `cores_`; yields
    its base URL and process id."""
    proc, url = start_sim([*SIM_FLAGS, "--speedup", speedup, "--eff", eff])
    try:
        if cores_:
            os.sched_setaffinity(proc.pid, cores_)
        yield url, proc.pid
    finally:
        proc.kill()
        proc.wait()


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (/proc; 0 where unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sim_state(url: str) -> dict[str, Any]:
    """The endpoint's own view after a level: how far its engine's steps fell behind the wall
    clock at worst (`behind_max_ms`), its event loop's lag p99, and the median true E2E of
    the requests it served (`/sim/info`, `/sim/truth`)."""
    import httpx

    base = url.rsplit("/v1", 1)[0]
    try:
        info = httpx.get(f"{base}/sim/info", timeout=30).json()
        truth = httpx.get(f"{base}/sim/truth", timeout=60).json()["requests"]
    except (httpx.HTTPError, ValueError, KeyError):  # e.g. a truth the endpoint cannot encode
        info, truth = {}, []
    e2e = [t["e2e_ms"] for t in truth if t.get("status") == "ok" and t.get("e2e_ms") is not None]
    return {"behind_max_ms": float(info.get("behind_max_ms") or 0.0),
            "sim_lag_p99_ms": float(info.get("loop_lag_p99_ms") or 0.0),
            "true_e2e_p50_ms": float(np.median(e2e)) if e2e else float("nan")}


def one_rate(url: str, rate: float, requests: int, out: str, client: set[int] | None,
             tokens: int, sim_pid: int) -> dict[str, Any]:
    """One open-loop level at `rate` requests/s from one worker process; its figures."""
    label = f"rate{rate:g}"
    cmd = [sys.executable, "-m", "capacity", "bench", "--base-url", url, "--concurrency", "2048",
           "--request-rate", f"{rate:g}", "--requests", str(requests), "--warmup", "0",
           "--prompt-chars", "200", "--max-tokens", str(tokens), "--workers", "1",
           "--label", label, "--out", out, "--timeout", "60"]
    sim0, t0 = cpu_s(sim_pid), time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                          preexec_fn=(lambda: os.sched_setaffinity(0, client)) if client else None)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"capacity bench failed at {rate:g} req/s:\n{proc.stderr[-3000:]}")
    with RunStore(out) as st:
        r = st.query("SELECT start_unix_s, queue_ms, e2e_ms, success, stamp_source FROM requests "
                     "WHERE label = $l", {"l": label})
        s = st.query("SELECT * FROM summaries WHERE label = $l", {"l": label}).iloc[0]
    start = r["start_unix_s"].to_numpy(dtype=float)
    queue = r["queue_ms"].to_numpy(dtype=float)
    return {"rate": rate, "requests": len(r), "ok": float(r["success"].mean()),
            "kept": schedule_kept(start, queue),
            "lag_p50_ms": float(np.percentile(queue, 50)),
            "lag_p99_ms": float(np.percentile(queue, 99)),
            "in_flight": steady_in_flight(start, r["e2e_ms"].to_numpy(dtype=float) / 1e3),
            "e2e_p50_ms": float(s["e2e_p50_ms"] or 0.0),
            "cpu_share": float(s["client_cpu_share"] or 0.0),
            "endpoint_cpu_share": (cpu_s(sim_pid) - sim0) / wall if wall > 0 else 0.0,
            "stamps": ",".join(sorted(set(r["stamp_source"].dropna().astype(str)))),
            "client_bound": bool(s["client_bound"]), "load": os.getloadavg()[0],
            **sim_state(url)}


def aiperf_rate(aiperf: str, url: str, rate: float, requests: int, client: set[int] | None,
                tokens: int, sim_pid: int, tokenizer: str = "builtin") -> dict[str, Any]:
    """AIPerf (`aiperf profile`, every one of its processes pinned to the client's core) at
    `rate` requests/s, Poisson, on the same load: 50-token prompts,
    `tokens` output tokens with ignore_eos, streamed chat, no cap on concurrency; `tokenizer`: its
    `--tokenizer` (`builtin` downloads its tables once; offline, a local folder). Its figures
    from its own per-request export (`profile_export.jsonl`): the send rate it reached (its
    sends' span against the offered (N - 1) / rate, the Poisson draw's noise ~1/sqrt(N)
    included), streams in flight (`steady_in_flight`, as ours), its credit-to-send lag
    (start - credit issued) and E2E."""
    import json

    import httpx

    art = Path(tempfile.mkdtemp(prefix="aiperf-"))
    base = url.rsplit("/v1", 1)[0]
    model = httpx.get(f"{url}/models", timeout=30).json()["data"][0]["id"]
    cmd = [aiperf, "profile", "--model", model, "--url", base, "--endpoint-type",
           "chat", "--streaming", "--tokenizer", tokenizer, "--request-rate", f"{rate:g}",
           "--arrival-pattern", "poisson", "--request-count", str(requests),
           "--concurrency", "2048", "--synthetic-input-tokens-mean", "50",
           "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(tokens),
           "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
           "--ui", "none", "--artifact-dir", str(art),
           "--export-level", "records"]
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    sim0, t0 = cpu_s(sim_pid), time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env, cwd=art,
                          preexec_fn=(lambda: os.sched_setaffinity(0, client)) if client else None)
    wall = time.monotonic() - t0
    found = sorted(art.rglob("profile_export.jsonl"))
    if proc.returncode != 0 or not found:
        raise SystemExit(f"aiperf failed at {rate:g} req/s:\n{(proc.stdout + proc.stderr)[-3000:]}")
    meta = [json.loads(line)["metadata"] for line in found[0].read_text().splitlines() if line]
    start = np.array([m["request_start_ns"] for m in meta], dtype=float) / 1e9
    end = np.array([m["request_end_ns"] for m in meta], dtype=float) / 1e9
    credit = np.array([m.get("credit_issued_ns") or m["request_start_ns"] for m in meta],
                      dtype=float) / 1e9
    span = float(start.max() - start.min())
    version = subprocess.run([aiperf, "--version"], capture_output=True, text=True,
                             timeout=120).stdout.strip().split()[-1:] or ["?"]
    return {"rate": rate, "requests": len(meta), "version": version[0],
            "achieved_rps": (len(meta) - 1) / span if span > 0 else 0.0,
            "kept": ((len(meta) - 1) / rate) / span if span > 0 else 1.0,
            "in_flight": steady_in_flight(start, end - start),
            "lag_p50_ms": float(np.percentile((start - credit) * 1e3, 50)),
            "e2e_p50_ms": float(np.percentile((end - start) * 1e3, 50)),
            "endpoint_cpu_share": (cpu_s(sim_pid) - sim0) / wall if wall > 0 else 0.0,
            "load": os.getloadavg()[0], **sim_state(url)}


def on_schedule(row: dict[str, Any]) -> bool:
    """The ceiling's rule: >= 95% of the schedule kept and a send lag p50 under 5 ms."""
    return bool(row["kept"] >= KEEP_LIMIT and row["lag_p50_ms"] < CLIENT_QUEUE_LIMIT_MS
                and row["ok"] == 1.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="50,100,150,200,250,300",
                    help="offered rates, requests/s, increasing (default 50,...,300)")
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="schedule length per rate: rate x seconds requests (default 20)")
    ap.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    ap.add_argument("--speedup", default="1", help="the endpoint's --speedup (default 1)")
    ap.add_argument("--eff", default="1.0", help="the endpoint's --eff (default 1.0)")
    ap.add_argument("--aiperf", default=None, metavar="PATH",
                    help="also run AIPerf (its `aiperf` command, e.g. /tmp/aiperf-venv/bin/aiperf)"
                         " at the same rates on the same pinned endpoint; skipped without it")
    ap.add_argument("--aiperf-tokenizer", default="builtin",
                    help="AIPerf's --tokenizer (default builtin; offline: a local folder with "
                         "tokenizer.json, e.g. a WordLevel one built with `tokenizers`)")
    ap.add_argument("--aiperf-rates", default=None,
                    help="AIPerf's rates, requests/s (default: --rates)")
    add_arguments(ap)
    args = ap.parse_args(argv)
    if args.tiny:
        args.rates, args.seconds, args.tokens = "5,10", 2.0, 4
    rates = [float(x) for x in args.rates.split(",")]
    client, endpoint = cores()
    rec = Recorder("rate_ceiling", args)
    out = tempfile.mkdtemp(prefix="bench-rate-")
    rows = []
    for rate in rates:
        with endpoint_at(args.speedup, args.eff, endpoint) as (url, pid):
            row = one_rate(url, rate, max(10, int(rate * args.seconds)), out, client,
                           args.tokens, pid)
        rows.append(row)
        print(f"{rate:6g} req/s: kept {row['kept']:.1%}, send lag p50 {row['lag_p50_ms']:.2f}"
              f" ms p99 {row['lag_p99_ms']:.1f} ms, in flight {row['in_flight']:.0f}, E2E p50"
              f" {row['e2e_p50_ms'] / 1e3:.2f} s (true {row['true_e2e_p50_ms'] / 1e3:.2f} s),"
              f" client CPU {row['cpu_share']:.0%}, endpoint CPU "
              f"{row['endpoint_cpu_share']:.0%} (behind by {row['behind_max_ms']:.0f} ms at "
              f"worst), stamps {row['stamps']}, load {row['load']:.1f}", flush=True)
        if not on_schedule(row) and len(rows) >= 2 and not on_schedule(rows[-2]):
            break  # two rates off schedule in a row: the ceiling is below
    aiperf_rows = []
    if args.aiperf:
        for rate in [float(x) for x in (args.aiperf_rates or args.rates).split(",")]:
            with endpoint_at(args.speedup, args.eff, endpoint) as (url, pid):
                arow = aiperf_rate(args.aiperf, url, rate, max(10, int(rate * args.seconds)),
                                   client, args.tokens, pid, args.aiperf_tokenizer)
            aiperf_rows.append(arow)
            print(f"{rate:6g} req/s AIPerf: achieved {arow['achieved_rps']:.1f} req/s "
                  f"({arow['kept']:.1%} of the offered), in flight {arow['in_flight']:.0f}, "
                  f"E2E p50 {arow['e2e_p50_ms'] / 1e3:.2f} s (true "
                  f"{arow['true_e2e_p50_ms'] / 1e3:.2f} s), send lag p50 "
                  f"{arow['lag_p50_ms']:.1f} ms, endpoint CPU "
                  f"{arow['endpoint_cpu_share']:.0%}, load {arow['load']:.1f}", flush=True)
    kept = [r for r in rows if on_schedule(r)]
    best = max(kept, key=lambda r: r["rate"]) if kept else None
    ceiling = best["rate"] if best else 0.0
    rec.add("ceiling_rps", ceiling, "req/s",
            what="the highest offered Poisson rate one client worker keeps on schedule (>= 95% "
                 "of the offered rate, send lag p50 under 5 ms), Llama-3.1-8B on H200 simulated, "
                 f"64 output tokens; rates tried {args.rates}",
            target=(">=", 200, ">= 200 requests/s per client core"))
    rec.add("in_flight_at_ceiling", best["in_flight"] if best else 0.0, "streams",
            what="streams in flight (achieved concurrency) at that rate",
            target=(">=", 0.95 * 1024, ">= 95% of 1,024 in flight"))
    for r in rows:
        rec.add(f"kept_at_{r['rate']:g}_pct", 100 * r["kept"], "%",
                what=f"schedule kept at {r['rate']:g} req/s (send lag p50 "
                     f"{r['lag_p50_ms']:.2f} ms, p99 {r['lag_p99_ms']:.1f} ms; {r['in_flight']:.0f}"
                     f" in flight; E2E p50 {r['e2e_p50_ms'] / 1e3:.2f} s, the endpoint's true "
                     f"{r['true_e2e_p50_ms'] / 1e3:.2f} s; client CPU {r['cpu_share']:.0%} of a "
                     f"core, endpoint CPU {r['endpoint_cpu_share']:.0%}, its steps behind the "
                     f"clock by {r['behind_max_ms']:.0f} ms at worst; stamps {r['stamps']}; load "
                     f"{r['load']:.1f})")
    for a in aiperf_rows:
        rec.add(f"aiperf_achieved_at_{a['rate']:g}_rps", a["achieved_rps"], "req/s",
                what=f"AIPerf {a['version']} on the same load at {a['rate']:g} req/s offered "
                     f"(Poisson), one client core: requests/s it sent (its sends' span), "
                     f"{a['kept']:.1%} of the offered; {a['in_flight']:.0f} in flight; send lag "
                     f"p50 {a['lag_p50_ms']:.1f} ms (its credit-to-send time); E2E p50 "
                     f"{a['e2e_p50_ms'] / 1e3:.2f} s against the endpoint's true "
                     f"{a['true_e2e_p50_ms'] / 1e3:.2f} s; load {a['load']:.1f}")
    rec.notes = (f"client pinned to core {min(client)}, endpoint to core {min(endpoint)}"
                 if client and endpoint else "client and endpoint share the cores (no affinity)")
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
