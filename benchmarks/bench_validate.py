"""`capacity validate`: the whole accuracy scorecard over data/reference, timed.

Times `capacity.fit.validate.scorecard()` (every published row predicted at the spec sheet,
every GPU + engine + model group fitted, every group predicted from the others' knobs) and
`markdown()` in-process, `--repeat` times after one warm-up (the fits it remembers forgotten
before each run: `calibration_problem.solve`), and prints the median and range,
the number of rows and groups, and the load average before and after. One more run is timed
by part: its time in scipy's least squares and in the event model (`where_the_time_goes`),
what bounds the scorecard. The whole command
(`capacity validate --format json`: every section, imports and catalog included) is timed
once more in a fresh process, as a user runs it (its sections in one worker process per CPU)
and with `--jobs 1` (all in one process), and the ratio of the two printed. The target is a
few seconds (docs/accuracy.md); figures go to docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_validate.py [--repeat 5] [--tiny] [--json | --json-out PATH]

`--tiny`: one run without the warm-up, timed by part, and no fresh process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.fit.calibration_problem import forget_fits  # noqa: E402
from capacity.fit.validate import scorecard  # noqa: E402
from capacity.fit.validate_report import markdown  # noqa: E402


def where_the_time_goes() -> tuple[Any, dict[str, float]]:
    """One more scorecard + Markdown (fits forgotten), the time spent in scipy's least squares
    and in the event model's runs counted apart (wrapped for this run only: the timed runs
    above are not): what bounds the scorecard's time."""
    import scipy.optimize

    import capacity.plan.closed_loop as loops
    import capacity.plan.events as events

    spent = {"lsq_s": 0.0, "lsq_runs": 0.0, "events_s": 0.0, "events_runs": 0.0}
    lsq, run_trace = scipy.optimize.least_squares, events.run_trace

    def timed(fn: Any, key: str) -> Any:
        def inner(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[key + "_s"] += time.perf_counter() - t
                spent[key + "_runs"] += 1
        return inner

    scipy.optimize.least_squares = timed(lsq, "lsq")
    # the steady loops run it from events, a bench run's throughput from closed_loop
    events.run_trace = loops.run_trace = timed(run_trace, "events")
    try:
        forget_fits()
        t0 = time.perf_counter()
        card = scorecard()
        markdown(card)
        spent["total_s"] = time.perf_counter() - t0
    finally:
        scipy.optimize.least_squares, events.run_trace = lsq, run_trace
        loops.run_trace = run_trace
    return card, spent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    add_arguments(ap)
    args = ap.parse_args(argv)
    rec = Recorder("validate", args)
    repeat = 1 if args.tiny else args.repeat
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if args.tiny:   # one run, the one timed by part below (a tiny run's time is not judged)
        card, parts = where_the_time_goes()
        times = [parts["total_s"]]
    else:
        card = scorecard()  # warm-up: the catalog and the CSV are cached after it
        markdown(card)
        times = []
        for _ in range(repeat):
            forget_fits()   # each run fits as a fresh process does (a fit is remembered)
            t0 = time.perf_counter()
            card = scorecard()
            markdown(card)
            times.append(time.perf_counter() - t0)
        _, parts = where_the_time_goes()
    med = statistics.median(times)
    print(f"scorecard + markdown: median {med:.2f} s "
          f"(range {min(times):.2f}-{max(times):.2f} s over {repeat}); "
          f"{len(card.checks)} rows, {len(card.groups)} groups")
    rec.add("scorecard_s", med, "s", target=("<", 5.0, "a few seconds (under 5 s)"),
            what=f"`capacity validate`'s scorecard + Markdown in-process ({len(card.checks)} "
                 f"published rows, {len(card.groups)} groups)")
    print(f"one more run, timed by part: {parts['total_s']:.2f} s, of it scipy's least "
          f"squares {parts['lsq_s']:.2f} s ({parts['lsq_runs']:.0f} runs) and the event model "
          f"{parts['events_s']:.2f} s ({parts['events_runs']:.0f} runs)")
    rec.add("lsq_share", 100 * parts["lsq_s"] / parts["total_s"], "%",
            what=f"the scorecard's share of time in scipy's least squares (one more run, "
                 f"{parts['lsq_runs']:.0f} runs of it; the fits' multi-start)")
    rec.add("events_share", 100 * parts["events_s"] / parts["total_s"], "%",
            what=f"its share in the event model (`events.run_trace`, {parts['events_runs']:.0f} "
                 "runs: the closed loops of the published levels, and the runs whose "
                 "throughput rows state their count)")
    if not args.tiny:
        fresh = {}
        for jobs in (None, 1):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "capacity", "validate", "--format", "json",
                            *([] if jobs is None else ["--jobs", str(jobs)])],
                           cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            fresh[jobs] = time.perf_counter() - t0
        print(f"`capacity validate` in a fresh process: {fresh[None]:.2f} s on "
              f"{os.cpu_count()} CPUs, {fresh[1]:.2f} s with --jobs 1 "
              f"(ratio {fresh[None] / fresh[1]:.2f})")
        rec.add("fresh_process_s", fresh[None], "s",
                what=f"`capacity validate --format json` in a fresh process, imports and every "
                     f"section included (one worker per CPU: {os.cpu_count()})")
        rec.add("fresh_process_one_job_s", fresh[1], "s",
                what="the same with `--jobs 1` (every section in one process)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
