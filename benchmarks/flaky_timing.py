"""Flakiness check: the `timing`-marked tests, N times, with a CPU hog on every core.

  python3 benchmarks/flaky_timing.py                 # 20 runs, two busy-loop hogs
  python3 benchmarks/flaky_timing.py --runs 10 --hogs 0     # the same at idle
  python3 benchmarks/flaky_timing.py -- -k client_timing    # more pytest arguments after --

Each run is one `pytest -m timing` in a fresh process (as CI runs it), while `--hogs`
processes spin in pure-Python busy loops (default 2: both cores of the 2-core dev machine);
the hogs are started before the first run and always killed at the end (also on Ctrl-C). The
report gives the failure rate, the failures per test, each run's wall time, and the p50/max of
every figure a test records with `record_property` (the client's timing errors of
tests/test_bench_e2e.py::test_client_timing_error_against_the_truth: the noise floor its
tolerances are sized from). Exit status 1 when any run failed.

Results, 2026-11-30, the 2-core dev machine (shared with other work):
- `--runs 20` (two hogs): 0/20 runs failed; wall time per run p50 30.1 s, max 43.6 s (the 2
  timing tests: the client's timing error and concurrency 150). The client's TTFT error / true
  TTFT p50 1.8%, max 3.3%; TPOT error / true TPOT p50 0.8%, max 5.2% (limit 10% each).
- `--runs 10 --hogs 0 -- -k client_timing`: 0/10 failed; TTFT error p50 1.3%, max 2.3%; TPOT
  error p50 0.9%, max 2.3%.
Before the virtual clock, the model-vs-simulator tests (calibration, queueing) ran in real time
and `python3 dev.py test` failed about one run in three under load; they are no longer timing
tests (tests/test_integration_sim.py runs them on the virtual clock).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]


def start_hogs(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for p in hogs:
        if p.poll() is None:
            p.kill()
    for p in hogs:
        p.wait(10)


def collect(marker: str, extra: list[str]) -> list[str]:
    """The node ids of the tests `-m marker` selects (collected once, so that each run imports
    only their modules)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marker,
                          "-p", "no:cacheprovider", *extra], cwd=ROOT, capture_output=True,
                         text=True).stdout
    return [ln.strip() for ln in out.splitlines() if "::" in ln]


def one_run(xml_path: Path, tests: list[str], extra: list[str]
            ) -> tuple[int, float, list[str], dict[str, list[float]]]:
    """(pytest exit status, wall s, failed test ids, recorded figures) of one pytest run."""
    t0 = time.perf_counter()
    # its own session, so that an interrupted run takes its children (a sim-server) with it
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-o", "junit_family=xunit1", f"--junitxml={xml_path}", *extra,
                             *tests], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        rc = proc.wait()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    failed: list[str] = []
    figures: dict[str, list[float]] = defaultdict(list)
    if xml_path.exists():
        for case in ET.parse(xml_path).iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(name)
            for prop in case.iter("property"):
                try:
                    figures[str(prop.get("name"))].append(float(prop.get("value", "nan")))
                except ValueError:
                    pass
        xml_path.unlink()
    return rc, wall, failed, figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="pytest runs (default 20)")
    ap.add_argument("--hogs", type=int, default=2,
                    help="busy-loop processes during the runs (default 2; 0 = idle)")
    ap.add_argument("--marker", default="timing", help="pytest -m expression (default timing)")
    ap.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.hogs < 0:
        ap.error("--runs must be >= 1 and --hogs >= 0")

    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    tests = collect(args.marker, args.extra)
    if not tests:
        print(f"no test matches -m {args.marker!r}", file=sys.stderr)
        return 2
    print(f"{len(tests)} tests x {args.runs} runs, {args.hogs} CPU hog(s)", flush=True)
    walls: list[float] = []
    failed_runs = 0
    per_test: Counter[str] = Counter()
    figures: dict[str, list[float]] = defaultdict(list)
    hogs = start_hogs(args.hogs)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                rc, wall, failed, figs = one_run(Path(tmp) / f"run{i}.xml", tests, args.extra)
                walls.append(wall)
                failed_runs += rc != 0
                per_test.update(failed)
                for k, v in figs.items():
                    figures[k] += v
                note = f"FAILED {', '.join(failed) or f'(exit {rc})'}" if rc else "ok"
                shown = " ".join(f"{k}={v[-1]:.4f}" for k, v in sorted(figs.items()))
                print(f"run {i + 1}/{args.runs}: {wall:.1f} s, {note} {shown}", flush=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        stop_hogs(hogs)
    print(f"\n{failed_runs}/{args.runs} runs failed ({failed_runs / args.runs:.0%}) with "
          f"{args.hogs} CPU hog(s); wall time per run p50 {statistics.median(walls):.1f} s, "
          f"max {max(walls):.1f} s")
    for name, n in per_test.most_common():
        print(f"  {n} x {name}")
    for name, values in sorted(figures.items()):
        print(f"  {name}: p50 {statistics.median(values):.4f}, max {max(values):.4f} "
              f"({len(values)} values)")
    return 1 if failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
