"""Issue 30 (start-up speed): the planner's search takes fewer numpy calls, and every shortcut
gives the answer of the plain computation it replaces, to the bit (docs/benchmarks.md,
"Start-up"). Each test here checks one shortcut against that plain computation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.model.roofline import StepModel
from capacity.model.workload import Workload
from capacity.plan import rate_search, search
from capacity.plan.deployment import Deployment, assess
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.queueing import analytic_latency
from capacity.plan.units import replica_units
from capacity.stats import WH_SHAPE, gamma_quantile, gamma_quantile_at_most
from capacity.types import BoolArray, FloatArray

INPUTS = PlanInputs(model="qwen3.5-9b-awq", workload=Workload(daily_active_users=500),
                    gpus=("rtx-4090", "l40s", "h100-sxm"), max_gpus=4)


def _plain_bisection(lo: FloatArray, hi: FloatArray, steps: int,
                     passes: Callable[[FloatArray], BoolArray]) -> FloatArray:
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        good = passes(mid)
        lo, hi = np.where(good, mid, lo), np.where(good, hi, mid)
    return lo


@pytest.mark.parametrize("steps", [1, 2, 3, 7, 22, 30])
def test_bisect_ends_where_one_step_at_a_time_ends(steps: int) -> None:
    """`bisect_levels` checks the midpoints of three steps per call; the walk down them is the
    plain bisection's, so the end is the same float. A non-monotone test (a comb) would
    expose any midpoint taken from the wrong branch."""
    rng = np.random.default_rng(3)
    lo, hi = np.zeros(50), rng.uniform(0.5, 20.0, 50)
    target = rng.uniform(0.0, 20.0, 50)

    def one(x: FloatArray) -> BoolArray:
        return np.asarray((x <= target) ^ (np.floor(x * 7.3) % 5 == 0))

    calls: list[int] = []

    def many(rates: list[FloatArray]) -> BoolArray:
        calls.append(len(rates))
        return np.stack([one(r) for r in rates])
    want = _plain_bisection(lo, hi, steps, one)
    got = rate_search.bisect_levels(lo, hi, steps, many)
    assert np.array_equal(got, want)
    assert len(calls) == -(-steps // rate_search.BISECT_LEVELS)


def test_capacity_search_is_the_plain_bisection() -> None:
    """The capacity search (three steps per call, the TPOT check without the percentile) ends
    where 22 single steps of the full check end, for every configuration."""
    model, _, u = replica_units(INPUTS, default_catalog())
    slots = np.minimum(u.c_vram, u.seqs).astype(np.float64)
    wl, slo = INPUTS.workload, INPUTS.slo

    def ok(rate: FloatArray) -> BoolArray:
        r = analytic_latency(rate_per_s=rate, step=u.step, prefill_ms=u.prefill_ms,
                             output_tokens=wl.output_tokens, quantile=slo.quantile,
                             limit=slots * 4 + 4)
        return np.asarray(~r.saturated & (r.concurrency <= slots) & (r.ttft_q_ms <= slo.ttft_ms)
                          & (r.tpot_q_ms <= slo.tpot_ms))
    hi = np.where(u.prefill_ms > 0, 1e3 / np.maximum(u.prefill_ms, 1e-9), 1e6)
    want = np.where(ok(np.full_like(hi, 1e-9)), _plain_bisection(np.zeros_like(hi), hi, 22, ok),
                    0.0)
    got = rate_search.capacity_search(step=u.step, prefill_ms=u.prefill_ms, slots=slots,
                                      wl=wl, slo=slo, ch=rate_search.chunking(u.budget, u.prompts))
    assert np.array_equal(got, want)
    assert np.count_nonzero(got) > 10


def test_capacity_memo_gives_each_configuration_its_own_answer() -> None:
    """The memo is per configuration: a search over some of the configurations (the "cheaper
    if" alternatives, `assess`) gets the numbers the search over all of them found."""
    rate_search._CAPACITY_MEMO.clear()
    model, _, u = replica_units(INPUTS, default_catalog())
    slots = np.minimum(u.c_vram, u.seqs).astype(np.float64)
    wl, slo = INPUTS.workload, INPUTS.slo
    full = rate_search.slo_capacity(step=u.step, prefill_ms=u.prefill_ms, slots=slots,
                                    budget=u.budget, wl=wl, slo=slo, prompts=u.prompts)
    some = np.arange(0, u.prefill_ms.size, 3)
    rate_search._CAPACITY_MEMO.clear()
    alone = rate_search.slo_capacity(step=u.step.select(some), prefill_ms=u.prefill_ms[some],
                                     slots=slots[some], budget=u.budget[some], wl=wl, slo=slo,
                                     prompts=u.prompts.rows(some))
    assert np.array_equal(alone, full[some])
    again = rate_search.slo_capacity(step=u.step, prefill_ms=u.prefill_ms, slots=slots,
                                     budget=u.budget, wl=wl, slo=slo,
                                     prompts=u.prompts)  # a third from memo
    assert np.array_equal(again, full)


def test_assess_evaluates_one_deployment_as_the_plan_does() -> None:
    """`assess` runs the planner on its one deployment (`plan(only=...)`): every figure is
    the plan's own for that row, with the slower checks (capacity, TPOT percentile) on."""
    inp = replace(INPUTS, slo=Slo(cost_per_mtok=40.0))
    p = search.plan(inp, keep_all=True)
    for o in p.all_options[::7]:
        got = assess(Deployment.of(inp, o))
        assert got == replace(o, nodes=got.nodes)


@pytest.mark.parametrize("workload", [Workload(daily_active_users=500),
                                      Workload(peak_concurrency=10, output_tokens=128,
                                               context_tokens=4096)])
def test_kept_options_are_the_keep_all_options(workload: Workload) -> None:
    """Without `keep_all` the plan computes the TPOT percentile only for the options it keeps
    (and whether it is within the SLO for the others); they equal the keep-all plan's."""
    inp = replace(INPUTS, workload=workload)
    kept = search.plan(inp).configurations
    every = {(o.gpu, o.n_gpus, o.tp, o.weights, o.kv_dtype): o
             for o in search.plan(inp, keep_all=True).all_options}
    assert kept
    for o in kept:
        assert o == every[(o.gpu, o.n_gpus, o.tp, o.weights, o.kv_dtype)]
    assert len(kept) == sum(o.feasible for o in every.values())


@pytest.mark.slow
def test_quantile_at_most_answers_as_the_quantile_does() -> None:
    """`gamma_quantile_at_most` against `gamma_quantile(...) / divisor <= bound` on every branch:
    zero variance, a non-finite mean, Wilson-Hilferty shapes, Halley shapes, bounds at the
    quantile to 1e-12 either side, far above it, at zero and below."""
    rng = np.random.default_rng(11)
    n = 20000
    k = np.exp(rng.uniform(np.log(0.05), np.log(5 * WH_SHAPE), n))
    mean = np.exp(rng.uniform(-3.0, 8.0, n))
    var = mean * mean / k
    var[:30], mean[30:40], var[40:50] = 0.0, np.inf, np.inf
    for q in (0.5, 0.9, 0.99):
        for divisor in (1.0, 255.0):
            x = gamma_quantile(mean, var, q) / divisor
            f = np.exp(rng.normal(0.0, 0.3, n))
            f[::5], f[1::5], f[2::5] = 1.0, 1.0 + 1e-12, 1.0 - 1e-12
            bound = x * f
            bound[3::97], bound[4::97], bound[5::97] = np.inf, 0.0, -1.0
            got = gamma_quantile_at_most(mean, var, q, bound, divisor)
            assert np.array_equal(got, x <= bound)


def test_lean_step_is_the_parts_step_to_the_bit() -> None:
    """`StepModel.step_ms` takes a lean path under one overlap for dense models: the same
    operations as `parts(batch).step_ms` (and `parts` itself for MoE, the operator method and
    a batch-of-one factor), for scalars and arrays, at 0, 1, many and infinitely many."""
    cat = default_catalog()
    rng = np.random.default_rng(5)
    k = 40
    for key in ("qwen3.5-9b", "llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-27b"):
        model = cat.models[key]
        for method in ("chapter", "bound", "operator"):
            for eff, eta, t0, seq, b1 in ((1.0, 1.0, 0.0, 0.0, 1.0), (0.7, 0.8, 1.5, 0.03, 1.0),
                                          (0.5, 0.6, 0.2, 0.0, 1.3)):
                step = StepModel.for_model(
                    model, weights_bytes=rng.uniform(1e9, 5e10, k),
                    kv_request_bytes=rng.uniform(1e6, 1e9, k),
                    bandwidth_gb_s=rng.uniform(300.0, 8000.0, k),
                    tflops=rng.uniform(50.0, 5000.0, k), eff=eff, eta_bw=eta, overhead_ms=t0,
                    lookup_weight_share=0.0,
                    comm_fixed_ms=rng.uniform(0.0, 1.0, k),
                    comm_per_seq_ms=rng.uniform(0.0, 0.01, k), method=method,
                    context_tokens=4096.0, seq_overhead_ms=seq, batch1_factor=b1)
                for batch in (np.zeros(k), np.ones(k), rng.uniform(0.0, 300.0, k),
                              np.asarray(7.0)):
                    got, want = step.step_ms(batch), step.parts(batch).step_ms
                    assert got.shape == want.shape and np.array_equal(got, want)
        scalar = StepModel.for_model(model, weights_bytes=5e9, kv_request_bytes=2e8,
                                     bandwidth_gb_s=1008.0, tflops=165.2,
                                     lookup_weight_share=0.0)
        for c in (0.0, 1.0, 50.0, [1.0, 50.0, 100.0]):
            got, want = scalar.step_ms(c), scalar.parts(c).step_ms
            assert got.shape == want.shape and np.array_equal(got, want)
