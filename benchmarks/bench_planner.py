"""Benchmark: the planner's full search (docs/method.md: under 1 s on 2 cores).

Every catalog GPU x count 1-16 x TP/replicas x KV precision (fp16, fp8) x every weight format
of the model, for the chapter's customer (500 daily users, 8K context, TTFT 2 s, TPOT 50 ms).
Prints the median wall time over several runs and the number of configurations evaluated,
plus the discrete-event check of the chosen option and the TTFT-vs-rate curve.

    .venv/bin/python benchmarks/bench_planner.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from capacity.catalog.loader import default_catalog
from capacity.model.workload import Workload
from capacity.plan.detail import load_curve, simulate_option
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.rate_search import _CAPACITY_MEMO
from capacity.plan.search import plan

TARGET_S = 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--model", default="qwen3.5-9b", help="bare key: every weight format")
    args = ap.parse_args(argv)
    cat = default_catalog()
    wl = Workload(daily_active_users=500, requests_per_user_per_day=20, peak_share=0.3,
                  peak_hours=2, context_tokens=8192, output_tokens=256)
    inp = PlanInputs(model=args.model, workload=wl, slo=Slo(ttft_ms=2000, tpot_ms=50))
    plan(inp, cat)  # warm imports and caches
    times = []
    result = None
    for _ in range(args.repeat):
        _CAPACITY_MEMO.clear()  # every run a cold search (the SLO capacity computed anew)
        t0 = time.perf_counter()
        result = plan(inp, cat)
        times.append(time.perf_counter() - t0)
    warm = []
    for dau in range(600, 600 + 100 * args.repeat, 100):  # another load, the same requests
        t0 = time.perf_counter()
        plan(replace(inp, workload=replace(wl, daily_active_users=dau)), cat)
        warm.append(time.perf_counter() - t0)
    assert result is not None and result.best is not None
    med = statistics.median(times)
    print(f"full search: {result.evaluated} configurations ({len(cat.gpus)} GPUs x counts 1-16 "
          f"x TP/replicas x 2 KV precisions x {len(cat.formats_for(cat.variant(args.model).model))}"
          f" weight formats)")
    print(f"  median {med * 1e3:.0f} ms, min {min(times) * 1e3:.0f} ms, max "
          f"{max(times) * 1e3:.0f} ms over {args.repeat} runs; target < {TARGET_S * 1e3:.0f} ms"
          f" -> ratio {med / TARGET_S:.2f} ({'OK' if med < TARGET_S else 'MISSED'})")
    print(f"  another number of daily users (the SLO capacity reused): median "
          f"{statistics.median(warm) * 1e3:.0f} ms, {statistics.median(warm) / med:.2f} of cold")
    print(f"  best: {result.best.label}, {result.best.cost_per_month:,.0f} "
          f"{result.best.currency}/month; {len(result.options)} feasible")
    t0 = time.perf_counter()
    sim = simulate_option(inp, result.best, cat, n_requests=2000)
    t_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    load_curve(inp, result.best, catalog=cat, points=10, n_requests=400)
    t_curve = time.perf_counter() - t0
    print(f"event model, chosen option (2000 requests): {t_sim * 1e3:.0f} ms; TTFT p90 "
          f"{sim.ttft_ms[0.9]:.0f} ms vs analytic {result.best.ttft_ms:.0f} ms")
    print(f"TTFT-vs-rate curve (10 rates x 400 requests): {t_curve * 1e3:.0f} ms")
    return 0 if med < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
