"""docs/benchmarks.md: the Explorer's full grid (512 concurrency points x 64 contexts) for every
catalog GPU, one vectorized `evaluate` call per GPU, against a plain Python loop over the same
formulas.

The loop is a fair baseline, not a loop of `evaluate` calls (which measures numpy's per-call
overhead, not vectorization): per context it takes the terms that do not depend on the
concurrency from the library (KV bytes per request, the prefill time, the decode step's
constants: 64 calls), and per point it does the decode step's arithmetic (F4 under one overlap,
the lean path of `StepModel.step_ms`), the aggregate throughput and the cost per million tokens
(F7) in plain Python floats. The two agree to 1e-9 (checked on every run).

    .venv/bin/python benchmarks/bench_grid.py [--tiny] [--json | --json-out PATH]

Target: well under 50 ms for one GPU's grid (vectorized).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402
from capacity.catalog.loader import default_catalog  # noqa: E402
from capacity.model.scenario import Scenario, decode_model, evaluate, make_scenario  # noqa: E402

MODEL = "llama-3.1-8b-fp8"
"""A dense model: its decode step takes the lean path the loop re-does in Python."""
TARGET_MS = 50.0


def grid_vectorized(s: Scenario, c: np.ndarray, ctx: np.ndarray) -> float:
    ev = evaluate(s, c[:, None], ctx[None, :])
    ttft = np.broadcast_to(ev.ttft_s, ev.decode.step_ms.shape)
    return float(ev.decode.step_ms.sum() + ttft.sum() + ev.cost_per_mtok.sum())


def grid_loop(s: Scenario, c: np.ndarray, ctx: np.ndarray) -> float:
    """The same sum, one point at a time in Python floats (per-context terms from the library)."""
    total = 0.0
    price = s.price_per_hour * s.paid_gpus
    for ll in ctx:
        one = evaluate(s, np.asarray([0.0]), float(ll))  # the context's KV bytes and prefill
        ttft_s = float(one.ttft_s)
        kv_req = float(one.kv_request.exact_bytes)
        step = decode_model(s, kv_req, float(ll))
        lean = step._lean
        if lean is None:
            raise SystemExit(f"{MODEL}: the decode step has no lean path; pick a dense model")
        weight_ms, bw_bytes_s, flop_s, flop_per_seq = (float(x) for x in lean)
        overhead, eta_bw, eff = step.overhead_ms, step.eta_bw, step.eff
        comm_fixed, comm_per_seq = float(step.comm_fixed_ms), float(step.comm_per_seq_ms)
        seq_overhead = float(step.seq_overhead_ms)
        for cc in c:
            b = math.ceil(float(cc) / s.replicas)
            kv_ms = b * kv_req / bw_bytes_s * 1e3
            gemm_ms = flop_per_seq * b / flop_s * 1e3
            step_ms = (overhead + max((weight_ms + kv_ms) / eta_bw, gemm_ms / eff)
                       + comm_fixed + comm_per_seq * b + seq_overhead * b)
            agg = float(cc) * 1e3 / step_ms
            total += step_ms + ttft_s + price / (agg * 3600.0) * 1e6
    return total


def median_ms(fn: Callable[..., float], *args: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    add_arguments(ap)
    args = ap.parse_args(argv)
    rec = Recorder("grid", args)
    n_c, n_l, repeats = (16, 8, 1) if args.tiny else (512, 64, args.repeat)
    cat = default_catalog()
    c = np.arange(1, n_c + 1, dtype=float)
    ctx = np.unique(np.geomspace(256, 131072, n_l).round())
    ctx = np.concatenate([ctx, 131072 - np.arange(n_l - ctx.size)])[:n_l]
    gpus = sorted(cat.gpus)[:2] if args.tiny else sorted(cat.gpus)
    print(f"grid: {n_c} concurrency points x {ctx.size} contexts = {n_c * ctx.size} points per GPU")
    print(f"{'gpu':16} {'vectorized ms':>14}")
    vec_times = []
    for key in gpus:
        s = make_scenario(MODEL, key, catalog=cat, context_tokens=131072)
        t = median_ms(grid_vectorized, s, c, ctx, repeats=repeats)
        vec_times.append(t)
        print(f"{key:16} {t:14.2f}")
    s = make_scenario(MODEL, "h200-sxm", catalog=cat, context_tokens=131072)
    vec = median_ms(grid_vectorized, s, c, ctx, repeats=repeats)
    loop = median_ms(grid_loop, s, c, ctx, repeats=max(1, repeats // 2))
    vec_sum, loop_sum = grid_vectorized(s, c, ctx), grid_loop(s, c, ctx)
    assert math.isclose(vec_sum, loop_sum, rel_tol=1e-9), (vec_sum, loop_sum)
    med = statistics.median(vec_times)
    points = f"{n_c} x {ctx.size} points"
    print(f"\nmedian vectorized grid over {len(vec_times)} GPUs: {med:.2f} ms")
    print(f"{MODEL} on h200-sxm: vectorized {vec:.2f} ms, Python loop {loop:.0f} ms, "
          f"ratio {loop / vec:.0f}x")
    print(f"target: < {TARGET_MS:.0f} ms per GPU grid -> {'met' if med < TARGET_MS else 'MISSED'}")
    rec.add("vectorized_ms", med, "ms", target=("<", TARGET_MS, "well under 50 ms"),
            what=f"the Explorer's grid ({points}), one vectorized `evaluate`, median over "
                 f"{len(vec_times)} GPUs")
    rec.add("python_loop_ms", loop, "ms",
            what=f"the same grid ({MODEL}, H200) as a Python loop over the same formulas "
                 "(per-point arithmetic in floats)")
    rec.add("loop_over_vectorized", loop / vec, "x",
            what="how many times slower the Python loop is than the vectorized grid")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
