"""One decode step (F4 + F10 + F11) and one memory verdict (F8) for every caller.

The Explorer (`evaluate`), the event model (`service_from_scenario`), the planner's vectorized
grid, calibration's predictor and the simulated endpoint's physics must give the same step
times, because they all call `capacity.model.roofline.StepModel`. A copy of the formula that
drifts from it (a different MoE rule, a forgotten knob, communication added twice) fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.fit.calibration_problem import OPERATOR_KNOBS, decode_basis, decode_step_ms
from capacity.fit.measured import MeasuredPoint
from capacity.model.memory import memory_verdict
from capacity.model.moe import weight_bytes_read
from capacity.model.roofline import StepModel
from capacity.model.scenario import Scenario, decode_model, evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.events import service_from_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan
from capacity.plan.units import replica_units
from capacity.sim.scheduler import SimPhysics

RTOL = 1e-12
"""Where a caller converts units (the endpoint works in seconds): the same numbers up to the
last bits. Everywhere else the same arithmetic gives the same numbers bit for bit."""

SETUPS = {
    "dense": ("qwen3.5-9b-awq", "rtx-4090", 1, {}),
    "moe": ("qwen3-30b-a3b", "h100-sxm", 1, {}),
    "tp2": ("qwen3.5-9b-awq", "h100-sxm", 2, {}),
    "moe-tp2-fp8kv": ("qwen3-30b-a3b", "h100-sxm", 2, {"kv_dtype": "fp8", "eff": 0.6}),
    "operator": ("qwen3.5-9b-awq", "rtx-4090", 1, {
        "step_method": "operator", "eta_bw": 0.8, "eta_kv": 0.6, "attn_sat_batch": 3.0,
        "seq_overhead_ms": 0.02, "step_overhead_ms": 0.5, "attn_mfu": 0.2}),
    "operator-moe-tp2": ("qwen3-30b-a3b", "h100-sxm", 2, {
        "step_method": "operator", "eff": 0.6, "attn_sat_batch": 6.0}),
    "layer-tp2": ("qwen3.5-9b-awq", "h100-sxm", 2, {
        "eta_bw": 0.836, "step_overhead_ms": 0.3, "layer_overhead_ms": 0.0405}),
    "operator-layer": ("qwen3.5-9b-awq", "rtx-4090", 1, {
        "step_method": "operator", "layer_overhead_ms": 0.05, "seq_overhead_ms": 0.02}),
}
"""(model, GPU, TP, other inputs): dense, MoE (touched experts grow the weights read), tensor
parallel (all-reduce term) on the H100, and both with an efficiency below 1."""

BATCHES = np.array([0.0, 1.0, 2.0, 7.0, 16.0, 50.0, 128.0, 300.0])


def _scenario(catalog: Catalog, name: str, **changes: object) -> Scenario:
    model, gpu, tp, kw = SETUPS[name]
    return make_scenario(model, gpu, catalog=catalog, n_gpus=tp, tp=tp,
                         **{**kw, **changes})  # type: ignore[arg-type]


def _explorer(s: Scenario, batch: np.ndarray, context: float | None = None) -> np.ndarray:
    """Step times (ms) per replica batch through `evaluate` (total concurrency = batch)."""
    ev = evaluate(s, batch * s.replicas, context)
    return np.asarray(ev.decode.step_ms, dtype=np.float64)


@pytest.mark.parametrize("name", list(SETUPS))
def test_event_model_steps_are_the_explorers(catalog: Catalog, name: str) -> None:
    s = _scenario(catalog, name)
    svc = service_from_scenario(s, output_tokens=128, max_num_seqs=64)
    b = np.arange(svc.slots + 1, dtype=np.float64)
    if s.step_method == "chapter":
        np.testing.assert_array_equal(svc.step_ms, _explorer(s, b))
    else:  # the event model rebuilds the step as t0 + max(terms) + comm + serial: last bits
        np.testing.assert_allclose(svc.step_ms, _explorer(s, b), rtol=RTOL)


@pytest.mark.parametrize("name", list(SETUPS))
def test_planner_grid_steps_are_the_explorers(catalog: Catalog, name: str) -> None:
    s = _scenario(catalog, name)
    wl = Workload(peak_concurrency=10, context_tokens=s.context_tokens, output_tokens=256)
    inp = PlanInputs(model=s.variant.key, workload=wl, gpus=(s.gpu.key,), max_gpus=s.tp,
                     kv_dtypes=(s.kv_dtype,), eff=s.eff, eta_bw=s.eta_bw,
                     step_overhead_ms=s.step_overhead_ms, step_method=s.step_method,
                     layer_overhead_ms=s.layer_overhead_ms,
                     eta_kv=s.eta_kv, attn_sat_batch=s.attn_sat_batch,
                     seq_overhead_ms=s.seq_overhead_ms, attn_mfu=s.attn_mfu)
    _, _, u = replica_units(inp, catalog)
    rows = [j for j in range(len(u.gpus)) if int(u.tp[j]) == s.tp]
    assert len(rows) == 1
    grid = u.step.select(np.asarray(rows, dtype=np.int64))
    np.testing.assert_array_equal(grid.step_ms(BATCHES), _explorer(s, BATCHES))
    # and the whole grid at once, one batch per configuration (the search's call)
    every = np.arange(len(u.gpus), dtype=np.int64)
    per_config = u.step.select(every).step_ms(np.full(every.size, 50.0))
    assert float(per_config[rows[0]]) == pytest.approx(float(_explorer(s, BATCHES[[5]])[0]),
                                                       rel=RTOL)


@pytest.mark.parametrize("name", list(SETUPS))
def test_calibration_predictor_is_the_explorer_with_the_knobs(catalog: Catalog,
                                                              name: str) -> None:
    # a calibration's t0 holds the whole fixed time of a step (F11): it starts from no
    # per-layer overhead (`scenario_with_basis` applies it to the chapter's knobs)
    base = _scenario(catalog, name).with_(layer_overhead_ms=0.0)
    pts = [MeasuredPoint(concurrency=c, context_tokens=p + o, prompt_tokens=p, output_tokens=o,
                         tpot_ms=20.0)
           for c, p, o in ((1, 1000, 200), (8, 4000, 500), (32, 2000, 256), (96, 6000, 1000))]
    basis = decode_basis(base, pts)
    if base.step_method == "chapter":
        for eta, t0, eff in ((1.0, 0.0, 1.0), (0.72, 3.5, 0.4), (0.3, 0.0, 0.05)):
            predicted = decode_step_ms(np.array([eta, t0, eff]), basis)
            knobbed = base.with_(eta_bw=eta, eff=eff, step_overhead_ms=t0)
            ev = evaluate(knobbed, np.array([p.concurrency for p in pts]),
                          np.array([p.decode_context_tokens for p in pts]))
            np.testing.assert_array_equal(predicted, ev.decode.step_ms)  # bit for bit
        return
    for knobs in ((1.0, 1.0, 1.0, 0.0, 0.0, 0.0), (0.72, 0.5, 0.4, 4.0, 3.5, 0.01),
                  (0.3, 0.9, 0.05, 0.0, 0.0, 0.2)):
        predicted = decode_step_ms(np.array(knobs), basis, "operator")
        knobbed = base.with_(**dict(zip(OPERATOR_KNOBS, knobs, strict=True)))
        ev = evaluate(knobbed, np.array([p.concurrency for p in pts]),
                      np.array([p.decode_context_tokens for p in pts]))
        np.testing.assert_array_equal(predicted, ev.decode.step_ms)  # bit for bit


@pytest.mark.parametrize("name", list(SETUPS))
def test_simulated_endpoint_steps_are_the_explorers(catalog: Catalog, name: str) -> None:
    s = _scenario(catalog, name)
    physics = SimPhysics(s, max_num_seqs=256)
    for batch, ctx in ((1, 1024), (12, 4096), (40, 8192)):
        # the endpoint serves the deployment: its batch is the total concurrency
        ev = evaluate(s, [float(batch)], [float(ctx)])
        assert physics.step_s(batch, ctx) * 1e3 == pytest.approx(float(ev.decode.step_ms[0]),
                                                                 rel=RTOL)


@pytest.mark.parametrize("name", list(SETUPS))
def test_evaluate_is_the_step_model_over_contexts(catalog: Catalog, name: str) -> None:
    """evaluate's grid (batch x context) is StepModel.decode on the KV of each context, and the
    lean `step_ms` path the search uses gives the same numbers as the full `decode`."""
    s = _scenario(catalog, name, eta_bw=0.8, step_overhead_ms=2.0)
    ctx = np.array([512.0, 8192.0, 32768.0])
    ev = evaluate(s, BATCHES[:, None] * s.replicas, ctx[None, :])
    step = decode_model(s, ev.kv_request.exact_bytes, ctx[None, :])
    d = step.decode(BATCHES[:, None])
    for field in ("bandwidth_ms", "compute_ms", "comm_ms", "serial_ms", "step_ms"):
        np.testing.assert_array_equal(getattr(ev.decode, field), getattr(d, field))
    np.testing.assert_array_equal(step.step_ms(BATCHES[:, None]), d.step_ms)
    # t0 = the per-step overhead + layers x the per-layer one (F11, `fixed_step_ms`)
    assert s.fixed_step_ms == pytest.approx(2.0 + s.model.layers * s.layer_overhead_ms)
    assert np.all(d.step_ms >= s.fixed_step_ms + np.maximum(d.bandwidth_ms, d.compute_ms))
    np.testing.assert_allclose(d.step_ms, s.fixed_step_ms + np.maximum(
        d.bandwidth_ms, d.compute_ms) + d.comm_ms + d.serial_ms, rtol=1e-12)


def test_terms_add_up_to_the_chapter(seed: Scenario) -> None:
    """The chapter at C = 50: 19.12e9 B over 1008 GB/s = 18.97 ms, 9e11 FLOP over 165.2
    TFLOP/s = 5.45 ms; bandwidth binds."""
    d = decode_model(seed, float(evaluate(seed).kv_request.exact_bytes)).decode([50.0])
    assert float(d.weight_read_bytes[0] + d.kv_read_bytes[0]) == pytest.approx(
        5.7e9 + 50 * 268_435_456)
    assert float(d.flops[0]) == pytest.approx(9e11)
    assert float(d.bandwidth_ms[0]) == pytest.approx(18.97, abs=0.01)
    assert float(d.compute_ms[0]) == pytest.approx(5.45, abs=0.01)
    assert d.bound.tolist() == ["bandwidth"]


def test_moe_weights_read_match_the_catalog_rule(catalog: Catalog) -> None:
    s = _scenario(catalog, "moe")
    step = decode_model(s, 0.0)
    b = np.array([1.0, 4.0, 64.0, 4096.0])
    np.testing.assert_allclose(step.weight_read_bytes(b),
                               weight_bytes_read(s.model, s.weights_per_gpu_gb * 1e9, b),
                               rtol=RTOL)


def test_crossover_is_where_compute_overtakes(catalog: Catalog) -> None:
    for name in SETUPS:
        s = _scenario(catalog, name, context_tokens=256, eff=0.1)
        step = decode_model(s, float(evaluate(s).kv_request.exact_bytes))
        c = step.crossover_batch()
        assert c is not None
        lo, hi = 0.98 * c, 1.02 * c
        assert float(step.compute_ms(np.asarray(lo))) <= float(step.bandwidth_ms(np.asarray(lo)))
        assert float(step.compute_ms(np.asarray(hi))) > float(step.bandwidth_ms(np.asarray(hi)))


def test_step_model_broadcasts_configurations_against_batches() -> None:
    """Arrays of configurations broadcast against the batch, one row per configuration."""
    step = StepModel(weights_bytes=np.array([5.7e9, 16e9]), kv_request_bytes=np.array([2.7e8, 1e9]),
                     bandwidth_gb_s=np.array([1008.0, 3350.0]), tflops=np.array([165.2, 989.0]),
                     params_active_b=9.0)
    out = step.step_ms(np.array([[1.0], [10.0]]))
    assert out.shape == (2, 2)
    one = StepModel(weights_bytes=16e9, kv_request_bytes=1e9, bandwidth_gb_s=3350.0,
                    tflops=989.0, params_active_b=9.0)
    assert float(out[1, 1]) == float(one.step_ms(10.0))


# ---------------------------------------------------------------------------------------------
# F8: one memory verdict


def test_planner_memory_verdicts_are_the_explorers(catalog: Catalog) -> None:
    wl = Workload(peak_concurrency=50, context_tokens=8192, output_tokens=256, headroom=0.0)
    inp = PlanInputs(model="qwen3.5-9b", workload=wl, gpus=("rtx-4090", "h100-sxm"),
                     max_gpus=4, memory_headroom=0.2)
    p = plan(inp, catalog, keep_all=True)
    seen = set()
    for o in p.all_options:
        if o.c_vram_per_replica < 1:
            assert o.memory_verdict == "does_not_fit"
            continue
        s = option_scenario(inp, o, catalog)
        c = int(np.ceil(o.design_concurrency / o.replicas - 1e-9)) * o.replicas
        assert o.memory_verdict == str(evaluate(s, [c]).verdict[0]), o.label
        seen.add(o.memory_verdict)
    assert seen == {"fits", "tight", "does_not_fit"}


def test_verdict_needs_room_for_one_request() -> None:
    v = memory_verdict([10.0, 10.0], np.array([20.0, 20.0]), 0.2,
                       holds_a_request=np.array([True, False]))
    assert v.tolist() == ["fits", "does_not_fit"]
