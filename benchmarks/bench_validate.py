"""`capacity validate`: the whole accuracy scorecard over data/reference, timed.

Times `capacity.fit.validate.scorecard()` (every published row predicted at the spec sheet,
every GPU + engine + model group fitted, every group predicted from the others' knobs) and
`markdown()` in-process, `--repeat` times after one warm-up, and prints the median and range,
the number of rows and groups, and the load average before and after. A fresh process
(`capacity validate`, imports and catalog included) is timed once more. The target is a few
seconds (docs/accuracy.md); figures go to docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_validate.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.fit.validate import scorecard  # noqa: E402
from capacity.fit.validate_report import markdown  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    card = scorecard()  # warm-up: the catalog and the CSV are cached after it
    markdown(card)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        card = scorecard()
        markdown(card)
        times.append(time.perf_counter() - t0)
    print(f"scorecard + markdown: median {statistics.median(times):.2f} s "
          f"(range {min(times):.2f}-{max(times):.2f} s over {args.repeat}); "
          f"{len(card.checks)} rows, {len(card.groups)} groups")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "capacity", "validate", "--format", "json"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print(f"`capacity validate` in a fresh process: {time.perf_counter() - t0:.2f} s")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
