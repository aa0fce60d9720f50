"""Benchmark: the buyer's chart (docs/frontier.md: under 2 s on 2 cores).

`frontier` for Llama-3.1-70B (every weight format, fp16 and fp8 KV) across the catalog's
data-centre GPUs, every TP size, the engines vLLM, SGLang and llama.cpp, at a geometric grid of
closed-loop concurrencies per replica; then the cost read-off at 50 tok/s per user for every
price kind, and `capacity frontier` from the shell (start-up included). Then, outside the
target, the opt-in kinds (issue 27): the same frontier with disaggregated points, and
DeepSeek-V3's with wide-EP points, and with both kinds (the EP-pools points too)
(`--kinds-repeat` runs each; 0 leaves them out).

    .venv/bin/python benchmarks/bench_frontier.py [--repeat 7] [--kinds-repeat 3] [--tiny]
        [--json | --json-out PATH]

`--tiny`: one run of each (the same frontiers: their size is the catalog's). A missed target is
recorded in the results, not in the exit status.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.catalog.loader import default_catalog  # noqa: E402
from capacity.fit.frontier import (  # noqa: E402
    FrontierInputs,
    cost_read_off,
    datacenter_gpus,
    frontier,
)

TARGET_S = 2.0
MOE_MODEL = "deepseek-v3"
"""The MoE model whose wide-EP frontier is timed (every weight format, every data-centre GPU)."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--model", default="llama-3.1-70b", help="bare key: every weight format")
    ap.add_argument("--kinds-repeat", type=int, default=3,
                    help="runs of the disaggregated and wide-EP frontiers (0: none)")
    add_arguments(ap)
    args = ap.parse_args(argv)
    cli_runs = 3
    if args.tiny:
        args.repeat, args.kinds_repeat, cli_runs = 1, 1, 1
    rec = Recorder("frontier", args)
    cat = default_catalog()
    inp = FrontierInputs(model=args.model)
    frontier(inp, cat)  # warm imports and the catalog
    print(f"load average {os.getloadavg()[0]:.2f}")
    times, reads = [], []
    fr = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        fr = frontier(inp, cat)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cost_read_off(fr, 50.0, catalog=cat)
        reads.append(time.perf_counter() - t0)
    assert fr is not None
    med = statistics.median(times)
    print(f"frontier: {fr.evaluated:,} points ({len(datacenter_gpus(cat))} data-centre GPUs x TP x "
          f"{len({g.weights for g in fr.groups})} weight formats x 2 KV x {len(fr.variants)} "
          f"engines x concurrencies), {len(fr.groups)} groups, "
          f"{sum(len(g.front) for g in fr.groups):,} front points")
    print(f"  median {med * 1e3:.0f} ms, min {min(times) * 1e3:.0f} ms, max "
          f"{max(times) * 1e3:.0f} ms over {args.repeat} runs; target < {TARGET_S * 1e3:.0f} ms"
          f" -> ratio {med / TARGET_S:.2f} ({'OK' if med < TARGET_S else 'MISSED'})")
    print(f"  cost read-off at 50 tok/s per user, 4 price kinds: median "
          f"{statistics.median(reads) * 1e3:.0f} ms")
    cli = []
    for _ in range(cli_runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "capacity", "frontier", "--model", args.model,
                        "--format", "json"], check=True, stdout=subprocess.DEVNULL)
        cli.append(time.perf_counter() - t0)
    print(f"capacity frontier --model {args.model} --format json (a fresh process): median "
          f"{statistics.median(cli):.2f} s over {cli_runs}")
    rec.add("frontier_ms", med * 1e3, "ms", target=("<", TARGET_S * 1e3, "under 2 s"),
            what=f"the buyer's chart (`capacity frontier`): {args.model} across "
                 f"{len(datacenter_gpus(cat))} data-centre GPUs x TP x weight formats x 2 KV x "
                 f"{len(fr.variants)} engines x concurrencies ({fr.evaluated:,} points), "
                 f"median of {args.repeat}")
    rec.add("cost_readoff_ms", statistics.median(reads) * 1e3, "ms",
            what="the cost read-off at 50 tok/s per user for 4 price kinds")
    rec.add("cli_json_s", statistics.median(cli), "s",
            what=f"`capacity frontier --format json` in a fresh process (median of {cli_runs})")
    for label, kinds in ((f"{args.model} --disaggregated", replace(inp, disaggregated=True)),
                         ("deepseek-v3 --wide-ep", FrontierInputs(model=MOE_MODEL, wide_ep=True)),
                         ("deepseek-v3 --disaggregated --wide-ep (with the EP pools)",
                          FrontierInputs(model=MOE_MODEL, wide_ep=True, disaggregated=True))):
        if args.kinds_repeat < 1:
            break
        runs = []
        for _ in range(args.kinds_repeat):
            t0 = time.perf_counter()
            kfr = frontier(kinds, cat)
            runs.append(time.perf_counter() - t0)
        print(f"{label} (opt-in, no target): {kfr.evaluated:,} points, {len(kfr.groups)} groups, "
              f"median {statistics.median(runs) * 1e3:.0f} ms over {args.kinds_repeat}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
