"""docs/benchmarks.md: the Explorer's full grid (512 concurrency points x 64 contexts) for every catalog GPU,
computed vectorized (one `evaluate` call per GPU) vs a plain Python loop over the same formulas.

Run: python3 dev.py run python benchmarks/bench_grid.py
Target: well under 50 ms for one GPU's grid (vectorized). Prints medians and the ratio.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from capacity.catalog.loader import default_catalog
from capacity.model.scenario import evaluate, make_scenario

N_C, N_L = 512, 64
REPEATS = 7


def grid_vectorized(s, c: np.ndarray, ctx: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    ev = evaluate(s, c[:, None], ctx[None, :])
    ttft = np.broadcast_to(ev.ttft_s, ev.decode.step_ms.shape)
    return float(ev.decode.step_ms.sum() + ttft.sum() + ev.cost_per_mtok.sum())


def grid_loop(s, c: np.ndarray, ctx: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    total = 0.0
    for cc in c:
        for ll in ctx:
            ev = evaluate(s, [float(cc)], float(ll))
            total += float(ev.decode.step_ms[0] + ev.ttft_s + ev.cost_per_mtok[0])
    return total


def median_ms(fn, *args, repeats: int = REPEATS) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    cat = default_catalog()
    c = np.arange(1, N_C + 1, dtype=float)
    ctx = np.unique(np.geomspace(256, 131072, N_L).round())
    ctx = np.concatenate([ctx, 131072 - np.arange(N_L - ctx.size)])[:N_L]
    print(f"grid: {N_C} concurrency points x {ctx.size} contexts = {N_C * ctx.size} points per GPU")
    print(f"{'gpu':16} {'vectorized ms':>14}")
    vec_times = []
    for key in sorted(cat.gpus):
        s = make_scenario("llama-3.1-8b-fp8", key, catalog=cat, context_tokens=131072)
        t = median_ms(grid_vectorized, s, c, ctx)
        vec_times.append(t)
        print(f"{key:16} {t:14.2f}")
    s = make_scenario(catalog=cat, context_tokens=131072, allow_long_context=True)
    vec = median_ms(grid_vectorized, s, c, ctx)
    # the loop is slow: time a 1/16 slice and scale (same formulas, same Python objects)
    sub_c = c[:: 16]
    loop = median_ms(grid_loop, s, sub_c, ctx, repeats=3) * (c.size / sub_c.size)
    assert np.isclose(grid_vectorized(s, sub_c, ctx), grid_loop(s, sub_c, ctx), rtol=1e-9)
    print(f"\nmedian vectorized grid over {len(vec_times)} GPUs: {statistics.median(vec_times):.2f} ms")
    print(f"seed scenario: vectorized {vec:.2f} ms, Python loop {loop:.0f} ms (scaled from 1/16), "
          f"ratio {loop / vec:.0f}x")
    print(f"target: < 50 ms per GPU grid -> {'met' if vec < 50 else 'MISSED'}")


if __name__ == "__main__":
    main()
