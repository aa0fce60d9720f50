"""The fit's solver (`capacity.fit.calibration_problem.solve`): the Jacobian of its least squares
by forward differences over a stack of trial knobs, the models evaluated on such a stack, and the
memory of fits it has run."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scipy.optimize._numdiff import approx_derivative

from capacity.fit import calibration_problem as cp
from capacity.model.step_combine import combine_step, combine_step_ms


def _basis(n: int = 6) -> dict[str, np.ndarray]:
    """A decode basis of n points by hand (ms at peak): weights 4 ms, KV growing with the
    batch, arithmetic growing faster, no all-reduce."""
    b = np.array([1.0, 2.0, 8.0, 32.0, 64.0, 128.0][:n])
    return {"weight_peak_ms": np.full(n, 4.0), "kv_peak_ms": 0.01 * b,
            "gemm_peak_ms": 0.03 * b, "attention_peak_ms": 0.002 * b,
            "kv_request_peak_ms": np.full(n, 0.01), "comm_ms": np.zeros(n), "batch": b,
            "ridge_sharpness": np.zeros(n)}


def test_forward_jacobian_by_hand() -> None:
    """residuals x -> (x0 - 1, 2 x1, x0 x1) at (0.5, 2): [[1, 0], [0, 2], [2, 0.5]], within
    the forward difference's truncation (a step of about 1.5e-8 x max(1, |x|))."""
    def stacked(xs: np.ndarray) -> np.ndarray:
        return np.stack([xs[:, 0] - 1.0, 2.0 * xs[:, 1], xs[:, 0] * xs[:, 1]], axis=1)

    lo, hi = np.array([-5.0, -5.0]), np.array([5.0, 5.0])
    jac = cp.forward_jacobian(stacked, np.array([0.5, 2.0]), lo, hi)
    assert jac.shape == (3, 2)
    assert jac == pytest.approx(np.array([[1.0, 0.0], [0.0, 2.0], [2.0, 0.5]]), abs=1e-6)


@pytest.mark.parametrize("x", [(0.5, 2.0, 0.3), (0.9999999999, 3.0, 0.3),
                               (0.2, 5.0, 1.0), (-0.4, 1e-12, 0.7)])
def test_forward_jacobian_is_scipys_two_point(x: tuple[float, float, float]) -> None:
    """Step for step scipy's '2-point' scheme, at a bound too (the step turned back where it
    would leave [lo, hi]: x0 at its upper bound 1, x2 at 1): the same numbers to the bit."""
    lo, hi = np.array([-1.0, 0.0, 0.0]), np.array([1.0, 10.0, 1.0])
    x0 = np.array(x)

    def one(v: np.ndarray) -> np.ndarray:
        return np.array([np.sin(v[0]) * v[1], v[1] ** 2 + v[2], np.exp(v[2]) - v[0]])

    def stacked(xs: np.ndarray) -> np.ndarray:
        return np.array([one(row) for row in xs])

    ours = cp.forward_jacobian(stacked, x0, lo, hi)
    theirs = approx_derivative(one, x0, method="2-point", bounds=(lo, hi))
    assert np.array_equal(ours, theirs)


def test_models_on_a_stack_of_knobs_are_the_rows_of_each() -> None:
    """The decode step (chapter and operator, with the batch-1 factor and the batched
    overhead) and prefill on a stack of knob vectors: row k is the model at vector k, to
    the bit, so the Jacobian's trials in one call are the calls they replace."""
    basis = _basis()
    stacks = {
        cp.decode_step_ms: np.array([[0.8, 0.5, 0.6], [0.7, 1.0, 0.3], [0.9, 0.0, 1.0]]),
        cp.operator_step_ms: np.array([[0.8, 0.7, 0.5, 4.0, 0.3, 0.01, 1.0, 0.0],
                                       [0.6, 0.9, 0.2, 0.0, 1.0, 0.0, 0.7, 2.0]]),
    }
    for model, xs in stacks.items():
        rows = model(xs, basis)
        assert rows.shape == (len(xs), basis["batch"].size)
        for k, x in enumerate(xs):
            assert np.array_equal(rows[k], model(x, basis))
    pre = {"linear_ms": np.array([10.0, 40.0]), "attention_ms": np.array([1.0, 8.0]),
           "comm_ms": np.array([0.0, 0.5])}
    xs = np.array([[0.4, 0.4, 0.0], [0.5, 0.2, 20.0]])
    rows = cp.prefill_ms(xs, pre)
    # by hand: 10 / 0.5 + 1 / 0.2 + 20 = 45 ms; 40 / 0.5 + 8 / 0.2 + 20 + 0.5 = 140.5 ms
    assert rows[1] == pytest.approx([45.0, 140.5])
    for k, x in enumerate(xs):
        assert np.array_equal(rows[k], cp.prefill_ms(x, pre))


def test_combine_step_takes_knob_columns() -> None:
    """combine_step with a (k, 1) column of batch-1 factors and batched overheads: the
    factor applies where one sequence decodes, the overhead where two or more do."""
    b = np.array([1.0, 2.0])
    parts = combine_step(method="operator", weight_peak_ms=np.full(2, 4.0),
                         kv_peak_ms=np.zeros(2), gemm_peak_ms=np.zeros(2),
                         attention_peak_ms=np.zeros(2), kv_request_peak_ms=np.zeros(2),
                         comm_ms=np.zeros(2), batch=b, eta_bw=1.0,
                         batch1_factor=np.array([[1.0], [1.5]]),  # type: ignore[arg-type]
                         batched_overhead_ms=np.array([[0.0], [2.0]]))  # type: ignore[arg-type]
    # row 0: 4, 4; row 1: 4 x 1.5 = 6 at one sequence, 4 + 2 at two
    assert parts.step_ms == pytest.approx(np.array([[4.0, 4.0], [6.0, 6.0]]))


@pytest.mark.parametrize("method", ["chapter", "operator", "bound"])
@pytest.mark.parametrize("sharpness", [0.0, 2.5])
def test_combine_step_ms_is_combine_steps_step(method: str, sharpness: float) -> None:
    """The fit's step-only entry computes the step exactly as combine_step does (the same
    bytes, one computation): one knob vector and a stack of (k, 1) knob columns, with the
    batch-1 factor and the batched overhead on and off, batches 0 to 64."""
    rng = np.random.default_rng(7)
    b = np.array([0.0, 1.0, 2.0, 8.0, 64.0])
    terms = dict(weight_peak_ms=rng.uniform(1, 9, 5), kv_peak_ms=rng.uniform(0, 3, 5) * b,
                 gemm_peak_ms=rng.uniform(0, 4, 5) * b, attention_peak_ms=0.1 * b,
                 kv_request_peak_ms=rng.uniform(0, 1, 5), comm_ms=rng.uniform(0, 1, 5),
                 batch=b)
    knobs: list[dict[str, object]] = [
        dict(eta_bw=0.8, eta_kv=0.7, eff=0.5, attn_sat_batch=3.0, overhead_ms=1.5,
             seq_overhead_ms=0.01),
        dict(eta_bw=0.8, eff=0.5, batch1_factor=1.3, batched_overhead_ms=0.7),
        dict(eta_bw=np.array([[0.8], [0.6]]), eff=np.array([[0.5], [0.9]]),
             batch1_factor=np.array([[1.0], [1.2]]),
             batched_overhead_ms=np.array([[0.0], [2.0]]))]
    for kw in knobs:
        want = combine_step(method=method, **terms, **kw,  # type: ignore[arg-type]
                            ridge_sharpness=sharpness).step_ms
        got = combine_step_ms(method=method, **terms, **kw,  # type: ignore[arg-type]
                              ridge_sharpness=sharpness)
        assert got.shape == want.shape and np.array_equal(got, want)


def test_solve_remembers_a_fit_and_forgets_on_request() -> None:
    """The same problem on the same points is fitted once: the second call returns the
    first's knobs (copies: changing them changes nothing remembered); other points, or the
    memory emptied, fit again."""
    basis = _basis()
    truth = np.array([0.75, 0.4, 0.45])
    measured = cp.decode_step_ms(truth, basis)
    cp.forget_fits()
    runs = []
    real = cp._solve

    def counted(*args: object) -> tuple[np.ndarray, np.ndarray]:
        runs.append(1)
        return real(*args)  # type: ignore[arg-type]

    mp = pytest.MonkeyPatch()
    mp.setattr(cp, "_solve", counted)
    try:
        x1, sd1 = cp.solve(cp.DECODE_PROBLEM, basis, measured)
        x1[0] = -1.0
        x2, sd2 = cp.solve(cp.DECODE_PROBLEM, basis, measured)
        assert len(runs) == 1
        assert x2[0] != -1.0
        assert cp.decode_step_ms(x2, basis) == pytest.approx(measured, rel=0.02)
        cp.solve(cp.DECODE_PROBLEM, basis, measured * 1.1)
        assert len(runs) == 2
        cp.forget_fits()
        x3, _ = cp.solve(cp.DECODE_PROBLEM, basis, measured)
        assert len(runs) == 3
        assert np.array_equal(x3, x2)
    finally:
        mp.undo()
        cp.forget_fits()


def test_memory_is_bounded() -> None:
    """At most SOLVED_KEPT fits are remembered, the oldest dropped first."""
    basis = _basis(4)
    cp.forget_fits()
    try:
        for k in range(cp.SOLVED_KEPT):
            cp._solved[bytes([k % 256, k // 256])] = (np.zeros(1), np.zeros(1))
        measured = cp.decode_step_ms(np.array([0.8, 0.1, 0.5]), basis)
        cp.solve(cp.DECODE_PROBLEM, basis, measured)
        assert len(cp._solved) == cp.SOLVED_KEPT
        assert bytes([0, 0]) not in cp._solved and bytes([1, 0]) in cp._solved
        assert cp._fit_key(cp.DECODE_PROBLEM, basis, measured) in cp._solved
    finally:
        cp.forget_fits()


@pytest.mark.parametrize("problem", [cp.DECODE_PROBLEM, cp.OPERATOR_PROBLEM, cp.BATCH1_PROBLEM])
def test_stacked_jacobian_fits_what_scipys_does(problem: cp.Problem) -> None:
    """A shipped problem fitted with its trials stacked and with scipy's own '2-point'
    Jacobian (one model call per knob): the same knobs and errors, to the bit."""
    from dataclasses import replace

    basis = _basis()
    rng = np.random.default_rng(3)
    measured = cp.decode_step_ms(np.array([0.7, 0.6, 0.4]), basis) * rng.uniform(0.97, 1.03, 6)
    cp.forget_fits()
    try:
        fast = cp.solve(problem, basis, measured)
        plain = cp.solve(replace(problem, takes_stacks=False), basis, measured)
    finally:
        cp.forget_fits()
    assert np.array_equal(fast[0], plain[0])
    assert np.array_equal(fast[1], plain[1], equal_nan=True)


def test_prior_residuals_by_hand() -> None:
    """eta_bw 0.8 e (log, centre 0.8): 0.02 x 1 / 1; eta_kv 0.8 e^2, tied to the fitted
    eta_bw: 0.02 x log(e) = 0.02; step overhead 5 ms against a median measured time of 10 ms
    (centre 0): 0.02 x 5 / 10 = 0.01. A stack gives each row its own (the second row at the
    priors: zeros)."""
    e = float(np.e)
    names = ("eta_bw", "eta_kv", "step_overhead_ms")
    one = cp._prior_residuals(names, np.array([0.8 * e, 0.8 * e * e, 5.0]), 10.0)
    assert one == pytest.approx([0.02, 0.02, 0.01])
    rows = cp._prior_residuals(names, np.array([[0.8 * e, 0.8 * e * e, 5.0], [0.8, 0.8, 0.0]]),
                               10.0)
    assert rows.shape == (2, 3)
    assert np.array_equal(rows[0], one) and rows[1] == pytest.approx([0.0, 0.0, 0.0])
    # eta_kv alone (its partner not fitted): centred on its own prior, 0.8
    assert cp._prior_residuals(("eta_kv",), np.array([0.8 * e]), 10.0) == pytest.approx([0.02])


def test_a_problems_own_prior_centre_by_hand() -> None:
    """`with_priors` moves a knob's prior centre (eff at 0.706 instead of `PRIORS`' 0.5): at eff
    0.706 e the term is 0.02 x log(e) / 1 = 0.02, at 0.706 nothing; the other knobs keep
    theirs; a centre for a knob the problem does not fit is dropped; and the fit's memory
    tells two problems apart by their centres."""
    e = float(np.e)
    moved = cp.with_priors(cp.DECODE_PROBLEM, {"eff": 0.706, "mfu": 0.9})
    assert moved.priors == (("eff", 0.706),)
    names = moved.names   # eta_bw, step_overhead_ms, eff
    at = np.array([0.8, 0.0, 0.706 * e])
    assert cp._prior_residuals(names, at, 10.0, moved.priors) == pytest.approx([0.0, 0.0, 0.02])
    assert cp._prior_residuals(names, at, 10.0) == pytest.approx(
        [0.0, 0.0, 0.02 * (1.0 + np.log(0.706 / 0.5))])
    assert cp.with_priors(cp.PREFILL_PROBLEM, {"eff": 0.706}) is cp.PREFILL_PROBLEM
    basis, measured = _basis(4), np.full(4, 2.0)
    assert cp._fit_key(moved, basis, measured) != cp._fit_key(cp.DECODE_PROBLEM, basis, measured)


def test_the_eff_prior_is_the_typical_plateau_on_the_device() -> None:
    """A fit's eff prior is the typical basis' GEMM plateau (0.706 of the measured matmul
    ceiling) on the GPU in the weights' GEMM precision: an RTX 4090 in BF16 reaches its spec
    sheet (0.706), an H100 0.803 of it (0.567), an A100 0.869 (0.614), an H100 in FP8 0.709
    (0.501); the Qwen3.5-9B AWQ worked example's GEMMs run in BF16 on the RTX 4090 (0.706)."""
    from capacity.fit.ceilings import typical_eff
    from capacity.model.scenario import make_scenario
    for model, gpu, weights, want in (("qwen2.5-7b", "rtx-4090", "bf16", 0.706),
                                      ("llama-3.1-8b", "h100-sxm", "bf16", 0.706 * 0.803),
                                      ("llama-3.1-8b", "a100-80gb-sxm", "bf16", 0.706 * 0.869),
                                      ("llama-3.1-8b", "h100-sxm", "fp8", 0.706 * 0.709)):
        s = make_scenario(model, gpu, weights=weights)
        assert typical_eff(s) == pytest.approx(want, rel=2e-3), (model, gpu, weights)
    assert typical_eff(make_scenario("qwen3.5-9b-awq", "rtx-4090")) == pytest.approx(0.706)


def test_the_memory_is_safe_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's sessions fit in threads of one process: eight threads asking for twelve fits
    a thousand times each through a memory of two (look-ups racing other threads' evictions;
    the least squares replaced by an instant stand-in so that the threads collide often)
    raise nothing, and each answer is its own problem's."""
    from concurrent.futures import ThreadPoolExecutor

    basis = _basis(4)
    cases = [np.full(4, 1.0 + k) for k in range(12)]
    monkeypatch.setattr(cp, "SOLVED_KEPT", 2)
    monkeypatch.setattr(cp, "_solve", lambda _p, _b, m: (m[:3].copy(), np.zeros(3)))

    def work(offset: int) -> bool:
        ok = True
        for i in range(1000):
            k = (offset * 5 + i) % len(cases)
            x, _ = cp.solve(cp.DECODE_PROBLEM, basis, cases[k])
            ok &= bool(x[0] == 1.0 + k)
        return ok

    cp.forget_fits()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # threads switch every few bytecodes: collisions are likely
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert all(pool.map(work, range(8)))
    finally:
        sys.setswitchinterval(interval)
        cp.forget_fits()
