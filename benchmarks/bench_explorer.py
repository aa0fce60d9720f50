"""Explorer speed (docs/benchmarks.md): one page rerun after a slider move, and the computation alone.

    .venv/bin/python benchmarks/bench_explorer.py [--runs N] [--tiny] [--json | --json-out PATH]

Prints medians and their ratio to the targets: a rerun of the Explorer page (AppTest, server
side, after a concurrency slider change: every card, curve, table and formula recomputed and
drawn) under 300 ms; the chart data alone (one vectorized evaluate over hundreds of concurrency
points, the TTFT and roofline curves, verdicts and the math); and a full grid of 400
concurrency points x 24 contexts, whose target is well under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.catalog.loader import default_catalog  # noqa: E402
from capacity.model.scenario import evaluate  # noqa: E402
from capacity.report.charts import chart_data, specs  # noqa: E402
from capacity.report.explain import Targets, explain, show_math  # noqa: E402
from capacity.report.urlstate import DEFAULT_STATE  # noqa: E402

RERUN_TARGET_MS = 300.0
GRID_TARGET_MS = 50.0


def ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1e3


def bench_computation(runs: int) -> tuple[float, float]:
    s = DEFAULT_STATE.scenario(default_catalog())
    specs(chart_data(s, 50))  # build the cached chart templates once, as the app does
    times = []
    for i in range(runs):
        c = 20 + i % 80  # a different concurrency each time, like a dragged slider
        t0 = time.perf_counter()
        d = chart_data(s, c, slo_ttft_ms=2000, slo_tpot_ms=50, slo_cost=1)
        specs(d)
        explain(s, c, Targets())
        show_math(s, c)
        times.append(time.perf_counter() - t0)
    grid_c = np.linspace(1, 512, 400)[:, None]
    grid_l = np.geomspace(512, 262144, 24)[None, :]
    grid = []
    for _ in range(runs):
        t0 = time.perf_counter()
        evaluate(s, grid_c, grid_l)
        grid.append(time.perf_counter() - t0)
    return ms(times), ms(grid)


def bench_rerun(runs: int, warmup: int = 2) -> float:
    os.environ.setdefault("CAPACITY_CUSTOM_DIR", tempfile.mkdtemp())
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    times = []
    for i in range(runs + warmup):
        value = 20 + (i * 7) % 150
        t0 = time.perf_counter()
        at.slider(key="ex_c").set_value(value).run()
        dt = time.perf_counter() - t0
        assert not at.exception, at.exception
        if i >= warmup:  # the first reruns warm imports and caches
            times.append(dt)
    return ms(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15, help="timed repetitions (default 15)")
    add_arguments(p)
    args = p.parse_args(argv)
    rec = Recorder("explorer", args)
    runs = 1 if args.tiny else args.runs
    comp_ms, grid_ms = bench_computation(runs)
    rerun_ms = bench_rerun(runs, warmup=0 if args.tiny else 2)
    print(f"chart data + verdicts + math (one state): median {comp_ms:7.1f} ms")
    print(f"grid 400 concurrency x 24 contexts:       median {grid_ms:7.1f} ms  "
          f"(target < {GRID_TARGET_MS:.0f} ms, ratio {grid_ms / GRID_TARGET_MS:.2f})")
    print(f"Explorer rerun after a slider change:     median {rerun_ms:7.1f} ms  "
          f"(target < {RERUN_TARGET_MS:.0f} ms, ratio {rerun_ms / RERUN_TARGET_MS:.2f})")
    print(f"computation share of the rerun: {comp_ms / rerun_ms:.0%}")
    rec.add("rerun_ms", rerun_ms, "ms", target=("<", RERUN_TARGET_MS, "under 300 ms"),
            what=f"one Explorer rerun after a concurrency slider move (AppTest, server side), "
                 f"median of {runs}")
    rec.add("chart_data_ms", comp_ms, "ms",
            what="the chart data, verdicts and math of one state (the rerun's computation)")
    rec.add("grid_400x24_ms", grid_ms, "ms", target=("<", GRID_TARGET_MS, "well under 50 ms"),
            what="one `evaluate` over 400 concurrency points x 24 contexts")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
