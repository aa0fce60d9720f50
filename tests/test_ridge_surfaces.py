"""F4c and F4d on every surface: the Explorer's `evaluate`, the planner's grid, the event model,
the simulated endpoint, the calibration predictor and the typical basis compute the same step
through `roofline.StepModel` / `combine_step` (issue 25)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.fit.calibration_problem import decode_basis, decode_step_ms
from capacity.fit.measured import MeasuredPoint
from capacity.fit.planning import scenario_with_basis, with_basis
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.events import service_from_scenario
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.plan.units import replica_units
from capacity.sim.scheduler import SimPhysics

SHAPE = {"ridge_sharpness": 2.0, "cuda_graph_max_tokens": 512.0, "gemm_tile_tokens": 16.0}
SETUPS = {
    "chapter": {"eff": 0.3, **SHAPE},
    "operator": {"eff": 0.3, "step_method": "operator", "eta_bw": 0.8, **SHAPE},
}
BATCHES = np.array([0.0, 1.0, 7.0, 24.0, 50.0, 128.0, 300.0])


def _scenario(catalog: Catalog, name: str) -> Scenario:
    return make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog,
                         **SETUPS[name])  # type: ignore[arg-type]


def _explorer(s: Scenario, batch: np.ndarray) -> np.ndarray:
    return np.asarray(evaluate(s, batch).decode.step_ms, dtype=np.float64)


@pytest.mark.parametrize("name", list(SETUPS))
def test_the_knobs_change_the_step(catalog: Catalog, name: str) -> None:
    s = _scenario(catalog, name)
    plain = s.with_(ridge_sharpness=0.0, cuda_graph_max_tokens=0.0, gemm_tile_tokens=0.0)
    assert np.all(_explorer(s, BATCHES[1:]) > _explorer(plain, BATCHES[1:]))


@pytest.mark.parametrize("name", list(SETUPS))
def test_planner_grid_is_the_explorer(catalog: Catalog, name: str) -> None:
    s = _scenario(catalog, name)
    wl = Workload(peak_concurrency=10, context_tokens=s.context_tokens, output_tokens=256)
    inp = PlanInputs(model=s.variant.key, workload=wl, gpus=(s.gpu.key,), max_gpus=1,
                     kv_dtypes=(s.kv_dtype,), eff=s.eff, eta_bw=s.eta_bw,
                     step_method=s.step_method, **SHAPE)  # type: ignore[arg-type]
    _, _, u = replica_units(inp, catalog)
    grid = u.step.select(np.asarray([0], dtype=np.int64))
    np.testing.assert_array_equal(grid.step_ms(BATCHES), _explorer(s, BATCHES))
    # an option's scenario (the Planner's link to the Explorer) carries the knobs
    p = plan(replace(inp, slo=Slo(ttft_ms=600_000.0, tpot_ms=5000.0)), catalog)
    assert p.best is not None
    o = option_scenario(inp, p.best, catalog)
    assert (o.ridge_sharpness, o.cuda_graph_max_tokens, o.gemm_tile_tokens) == (2.0, 512.0, 16.0)


@pytest.mark.parametrize("name", list(SETUPS))
def test_event_model_and_endpoint_are_the_explorer(catalog: Catalog, name: str) -> None:
    s = _scenario(catalog, name)
    svc = service_from_scenario(s, output_tokens=128, max_num_seqs=64)
    b = np.arange(svc.slots + 1, dtype=np.float64)
    np.testing.assert_allclose(svc.step_ms, _explorer(s, b), rtol=1e-12)
    physics = SimPhysics(s, max_num_seqs=256)
    for batch, ctx in ((1, 1024), (24, 4096), (50, 8192)):
        ev = evaluate(s, [float(batch)], [float(ctx)])
        assert physics.step_s(batch, ctx) * 1e3 == pytest.approx(float(ev.decode.step_ms[0]),
                                                                 rel=1e-12)


@pytest.mark.parametrize("name", list(SETUPS))
def test_calibration_predictor_is_the_explorer(catalog: Catalog, name: str) -> None:
    base = _scenario(catalog, name)
    pts = [MeasuredPoint(concurrency=c, context_tokens=p + o, prompt_tokens=p, output_tokens=o,
                         tpot_ms=20.0)
           for c, p, o in ((1, 1000, 200), (24, 4000, 500), (50, 2000, 256), (96, 6000, 1000))]
    basis = decode_basis(base, pts)
    ev = evaluate(base, np.array([p.concurrency for p in pts]),
                  np.array([p.decode_context_tokens for p in pts]))
    if base.step_method == "chapter":
        x = np.array([base.eta_bw, base.step_overhead_ms, base.eff])
        np.testing.assert_array_equal(decode_step_ms(x, basis), ev.decode.step_ms)
    else:
        x = np.array([base.eta_bw, base.eta_bw, base.eff, 0.0, 0.0, 0.0])
        np.testing.assert_array_equal(decode_step_ms(x, basis, "operator"), ev.decode.step_ms)


def test_typical_basis_reaches_planner_and_explorer(catalog: Catalog) -> None:
    # whatever the shipped engines file sets, the planner's inputs and the Explorer's scenario
    # on the typical basis carry the same step-shape knobs and compute the same step
    s = scenario_with_basis(make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog),
                            "typical:vllm")
    wl = Workload(peak_concurrency=10, context_tokens=s.context_tokens, output_tokens=256)
    inp = with_basis(PlanInputs(model=s.variant.key, workload=wl, gpus=(s.gpu.key,),
                                max_gpus=1, kv_dtypes=(s.kv_dtype,)), "typical:vllm")
    for k in SHAPE:
        assert getattr(inp, k) == getattr(s, k), k
    _, _, u = replica_units(inp, catalog)
    grid = u.step.select(np.asarray([0], dtype=np.int64))
    np.testing.assert_array_equal(grid.step_ms(BATCHES), _explorer(s, BATCHES))


GPUS_BY_CEILING = ("a100-80gb-sxm", "h100-sxm", "mi300x")
"""GPUs whose measured bf16 matmul ceilings differ (0.869, 0.803, 0.511 of their spec sheets)."""


def test_typical_basis_runs_each_gpus_own_plateau(catalog: Catalog) -> None:
    """typical:vllm's eff, like its MFU plateau, is a share of each GPU's measured matmul
    ceiling: the planner's grid over GPUs of different ceilings, the disaggregated planner's
    pools and the Explorer's scenario of each GPU compute one step, at that GPU's eff (0.706 x
    0.869 = 0.614 on an A100, 0.706 x 0.803 = 0.567 on an H100, 0.706 x 0.511 = 0.361 on an
    MI300X), and an A100 option's scenario (the Planner's link to the Explorer) carries its
    own."""
    from capacity.catalog.matmul import typical_mfu
    from capacity.plan.disagg import _units

    wl = Workload(peak_concurrency=10, context_tokens=4096, output_tokens=256)
    inp = with_basis(PlanInputs(model="llama-3.1-8b", workload=wl, gpus=GPUS_BY_CEILING,
                                max_gpus=1, kv_dtypes=("fp16",), formats=("bf16",)),
                     "typical:vllm")
    assert inp.eff == 0.706 and inp.ridge_sharpness == 2.5
    _, _, u = replica_units(inp, catalog)
    _, shapes, pool_grid = _units(inp, catalog)
    effs = {}
    for gpu in GPUS_BY_CEILING:
        s = scenario_with_basis(make_scenario("llama-3.1-8b", gpu, catalog=catalog,
                                              context_tokens=4096, kv_dtype="fp16"),
                                "typical:vllm")
        effs[gpu] = s.eff
        assert s.eff == pytest.approx(typical_mfu(0.706, s.gpu, "bf16")) == pytest.approx(s.mfu)
        i = next(i for i, g in enumerate(u.gpus) if g.key == gpu and u.tp[i] == 1)
        grid = u.step.select(np.asarray([i], dtype=np.int64))
        np.testing.assert_allclose(grid.step_ms(BATCHES), _explorer(s, BATCHES), rtol=1e-12)
        j = next(j for j, sh in enumerate(shapes) if sh.gpu.key == gpu and sh.tp == 1)
        top = pool_grid.shape[1] - 1
        np.testing.assert_allclose(pool_grid[j], _explorer(s, np.arange(top + 1.0)), rtol=1e-12)
    assert effs == pytest.approx({"a100-80gb-sxm": 0.706 * 271.2 / 312,
                                  "h100-sxm": 0.706 * 794.5 / 989,
                                  "mi300x": 0.706 * 668.4 / 1307.4}, abs=1e-3)
    a100 = replace(inp, gpus=("a100-80gb-sxm",), slo=Slo(ttft_ms=600_000.0, tpot_ms=5000.0))
    p = plan(a100, catalog)
    assert p.best is not None
    assert option_scenario(a100, p.best, catalog).eff == pytest.approx(effs["a100-80gb-sxm"])
