"""F4c in `capacity calibrate` (issue 25): the sharpness is fitted under the operator step only
where the decode points span the ridge, and the report says when it is not pinned."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.fit.calibration import apply, fit
from capacity.fit.calibration_ridge import RIDGE_GRID, spans_ridge
from capacity.fit.calibration_store import load, save
from capacity.fit.measured import MeasuredPoint
from capacity.model.scenario import Scenario, evaluate, make_scenario

LEVELS = (1, 8, 24, 48, 64, 96, 128)


def _points(truth: Scenario) -> list[MeasuredPoint]:
    """Synthetic TPOTs: `truth`'s own step at each level (1000-token prompts, 200 out)."""
    pts = [MeasuredPoint(concurrency=c, context_tokens=1200, prompt_tokens=1000,
                         output_tokens=200, tpot_ms=1.0) for c in LEVELS]
    ev = evaluate(truth, np.array(LEVELS, dtype=float),
                  np.array([p.decode_context_tokens for p in pts]))
    return [MeasuredPoint(concurrency=p.concurrency, context_tokens=1200, prompt_tokens=1000,
                          output_tokens=200, tpot_ms=float(t))
            for p, t in zip(pts, ev.decode.step_ms, strict=True)]


def test_the_grid_is_one_to_eight_with_two_on_it() -> None:
    # 10 geometric values from 1 to 8: 8^(j/9); j = 3 is 8^(1/3) = 2
    assert len(RIDGE_GRID) == 10 and RIDGE_GRID[0] == 1.0 and RIDGE_GRID[-1] == pytest.approx(8)
    assert RIDGE_GRID[3] == pytest.approx(2.0)


@pytest.mark.slow
def test_a_sweep_across_the_ridge_recovers_its_sharpness(catalog: Catalog,
                                                         tmp_path: Path) -> None:
    # RTX 4090, Qwen3.5-9B AWQ at eff 0.3: 2 x 9e9 FLOP a sequence at 165.2 x 0.3 TFLOP/s is
    # 0.36 ms a sequence against about 6 ms of weights, so compute passes memory near 16-17
    # sequences: the levels 1 and 8 lie below the balance, 24..128 above it
    base = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog,
                         step_method="operator", context_tokens=1200)
    truth = base.with_(eff=0.3, eta_bw=0.8, ridge_sharpness=2.0)
    cal = fit(_points(truth), base, name="ridge-test", today="-")
    assert cal.ridge_sharpness == pytest.approx(2.0)
    assert any(getattr(n, "code", "") == "ridge_fitted" for n in cal.notes)
    assert max(abs(p.fitted_error) for p in cal.points) < 0.01
    # saved and read back, applied to a scenario: the scenario's step has the sharpness
    back = load(save(cal, tmp_path / "ridge.toml"))
    assert back.ridge_sharpness == pytest.approx(2.0)
    assert apply(back, base).ridge_sharpness == pytest.approx(2.0)


@pytest.mark.slow
def test_a_bandwidth_bound_sweep_leaves_the_max(catalog: Catalog) -> None:
    # eff 1: compute 0.11 ms a sequence against 6 ms of weights binds past 50 sequences; the
    # levels 1..48 stay below the balance, so the sweep does not span it
    base = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog,
                         step_method="operator", context_tokens=1200)
    truth = base.with_(eta_bw=0.8)
    pts = [p for p in _points(truth) if p.concurrency <= 48]
    cal = fit(pts, base, name="ridge-test", today="-")
    assert cal.ridge_sharpness is None
    assert any(getattr(n, "code", "") in ("ridge_not_spanned", "ridge_no_gain")
               for n in cal.notes)
    chapter = fit(pts, base.with_(step_method="chapter"), name="ridge-test", today="-")
    assert chapter.ridge_sharpness is None
    assert any(getattr(n, "code", "") == "ridge_chapter" for n in chapter.notes)


def test_spans_ridge_by_hand() -> None:
    # weights 10 ms at eta 1; GEMMs 2, 8, 12 ms at eff 1 (chapter: KV adds 0.5 ms)
    basis = {"weight_peak_ms": np.array([10.0, 10.0, 10.0]),
             "kv_peak_ms": np.array([0.5, 0.5, 0.5]),
             "gemm_peak_ms": np.array([2.0, 8.0, 12.0])}
    x = np.array([1.0, 0.0, 1.0])
    assert spans_ridge(basis, x, "operator")                      # 12 > 10 > 2
    assert not spans_ridge({**basis, "gemm_peak_ms": np.array([2.0, 8.0, 9.0])}, x, "operator")
    # at eff 0.5 the GEMMs are 4, 16, 24 ms: 16 and 24 above 10.5, 4 below
    assert spans_ridge({**basis, "gemm_peak_ms": np.array([2.0, 8.0, 9.0])},
                       np.array([1.0, 0.0, 0.5]), "chapter")
