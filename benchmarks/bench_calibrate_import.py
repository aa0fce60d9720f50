"""`capacity calibrate --measured` on a large per-request export: import + fit, timed.

Writes a CSV of 1,000,000 measured rows (our columns: concurrency, context_tokens, prompt and
output tokens, tpot_ms, ttft_ms) in a temporary folder: 6 concurrency levels x 3 prompt
lengths, each operating point measured many times with noise, as a per-request export of a
long sweep would be. Then times `read_measured` (DuckDB reads the file in place and groups
the rows by the point's keys, capacity/fit/imports.py) and `fit` on the aggregated points, three
times, and prints the median. Before the aggregation, 100,000 rows took 74 s and 4.4 M rows ran
past 120 s at 3.1 GB (issue 15, item 14); the target is a few seconds
(docs/reliability.md).

    .venv/bin/python benchmarks/bench_calibrate_import.py [--rows 1000000] [--repeat 3] [--tiny]
        [--json | --json-out PATH]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.fit.calibration import fit  # noqa: E402
from capacity.fit.imports import read_measured  # noqa: E402
from capacity.model.scenario import make_scenario  # noqa: E402

MODEL, GPU = "llama-3.1-8b-bf16", "rtx-4090"


def write_file(path: Path, rows: int, seed: int = 0) -> int:
    """The synthetic export; returns the number of distinct operating points."""
    rng = np.random.default_rng(seed)
    levels = np.array([1, 2, 4, 8, 16, 32])
    prompts = np.array([512, 2048, 6144])
    c = levels[rng.integers(0, levels.size, rows)]
    prompt = prompts[rng.integers(0, prompts.size, rows)]
    output = np.full(rows, 256)
    tpot = 22.0 + 0.15 * c + prompt / 4096.0 + rng.normal(0.0, 0.3, rows).clip(-5, 5)
    ttft = 40.0 + prompt / 40.0 * (1 + c / 64) + rng.normal(0.0, 2.0, rows).clip(-20, 20)
    with path.open("w", encoding="utf-8") as fh:
        fh.write("concurrency,context_tokens,prompt_tokens,output_tokens,tpot_ms,ttft_ms\n")
        for i in range(0, rows, 100_000):
            j = min(rows, i + 100_000)
            block = np.column_stack([c[i:j], prompt[i:j] + output[i:j], prompt[i:j],
                                     output[i:j], tpot[i:j].round(3), ttft[i:j].round(2)])
            np.savetxt(fh, block, fmt=["%d", "%d", "%d", "%d", "%.3f", "%.2f"],
                       delimiter=",")
    return levels.size * prompts.size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    add_arguments(ap)
    args = ap.parse_args(argv)
    if args.tiny:
        args.rows, args.repeat = 2_000, 1
    rec = Recorder("calibrate_import", args)
    base = make_scenario(MODEL, GPU)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "per_request_export.csv"
        t0 = time.perf_counter()
        distinct = write_file(path, args.rows)
        print(f"wrote {args.rows:,} rows ({path.stat().st_size / 1e6:.1f} MB, {distinct} "
              f"operating points) in {time.perf_counter() - t0:.1f} s")
        import_s, fit_s = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            points = read_measured(path, model=MODEL, gpu=GPU)
            t1 = time.perf_counter()
            cal = fit(points, base, name="bench")
            t2 = time.perf_counter()
            import_s.append(t1 - t0)
            fit_s.append(t2 - t1)
        assert len(points) == distinct, (len(points), distinct)
        total = [a + b for a, b in zip(import_s, fit_s, strict=True)]
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"import (DuckDB, grouped): median {statistics.median(import_s):.2f} s; "
              f"fit on {len(points)} points: median {statistics.median(fit_s):.2f} s")
        print(f"import + fit, median of {args.repeat}: {statistics.median(total):.2f} s "
              f"(runs: {', '.join(f'{t:.2f}' for t in total)}); peak memory {peak_mb:.0f} MB")
        print(f"fitted eta_bw {cal.eta_bw}, eff {cal.eff}, mfu {cal.mfu}")
    rec.add("import_fit_s", statistics.median(total), "s",
            target=("<", 5.0, "a few seconds (under 5 s)"),
            what=f"`capacity calibrate --measured` on a {args.rows:,}-row per-request CSV: "
                 f"import (DuckDB, grouped into {distinct} points) + fit")
    rec.add("import_s", statistics.median(import_s), "s", what="the import alone")
    rec.add("peak_memory_mb", peak_mb, "MB", what="the process's peak resident memory")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
