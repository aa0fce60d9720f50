"""The scorecard's wide-EP section (capacity/fit/validate_ep.py): every published row of
data/reference/moe_ep.csv is dated and sourced, the spec sheet is an upper bound on every scored
row, the rows not scored say why, and the section's Markdown and JSON round-trip."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from capacity.fit.ep_fit import (
    LAYER_OVERHEAD_GRID,
    OVERLAP_GRID,
    StepTerms,
    fit_knobs,
    leave_one_out,
)
from capacity.fit.validate import Spread
from capacity.fit.validate_ep import (
    BASES,
    BEGIN,
    END,
    ep_scorecard,
    load_rows,
    markdown,
    predict_row,
    row_terms,
    section_of,
    skip_reason,
    to_dict,
    write_section,
)
from capacity.model.ep_knobs import typical_ep_knobs
from tests.shipped import shipped
from tests.test_expert_parallel import with_gb200


def test_rows_are_dated_and_sourced() -> None:
    rows = load_rows()
    assert len(rows) >= 10 and len({r.id for r in rows}) == len(rows)
    for r in rows:
        assert r.source.startswith("https://") and r.as_of.strip() and r.notes.strip(), r.id
        assert r.value_per_gpu > 0 and r.phase in ("decode", "prefill"), r.id


def test_the_spec_sheet_bounds_every_scored_row() -> None:
    card = ep_scorecard(catalog=with_gb200())
    assert len(card.checks) >= 5
    assert card.bounded == len(card.checks)
    assert {c.phase for c in card.checks} == {"decode", "prefill"}
    for c in card.checks:
        assert c.spec >= c.typical > 0 and c.imbalance >= 1.0, c.id
        assert c.spec >= c.prior > 0 and c.spec >= c.held_out > 0, c.id


def test_rows_not_scored_say_why() -> None:
    card = ep_scorecard(catalog=with_gb200())
    reasons = {s.id: s.reason for s in card.skipped}
    assert "multi-token prediction" in reasons["inferencex-gb200-fp4-mtp"]
    assert "sglang-gb200-decode-p2-fp4" not in reasons  # NVFP4 is a catalog format
    assert {"sglang-gb200-prefill-p2-fp4", "vllm-gb200-decode-nvfp4"} <= {c.id for c in card.checks}
    row = next(r for r in load_rows() if r.id == "sglang-gb200-decode-p1")
    assert skip_reason(replace(row, ep=None), with_gb200()) == "EP degree not stated"
    assert "mxfp6" in skip_reason(replace(row, weights="mxfp6"), with_gb200())


def test_section_markdown_json_and_markers(tmp_path: Path) -> None:
    card = shipped("ep")
    text = markdown(card)
    assert text.startswith("### MoE with wide expert parallelism")
    assert f"on {len(card.checks)} of {len(card.checks)} rows" in text
    data = to_dict(card)
    json.dumps(data, allow_nan=False)
    assert data["rows"] == len(card.checks) and data["bounded"] == len(card.checks)
    assert set(data["error"]) == set(BASES) and data["fit"]["rows"] == len(card.checks)
    assert f"**{card.error('held_out').median:.1%}**" in text
    doc = tmp_path / "accuracy.md"
    doc.write_text("# Accuracy\n\nbefore\n", encoding="utf-8")
    write_section(doc, text)
    write_section(doc, text)  # idempotent: replaces between the markers
    out = doc.read_text(encoding="utf-8")
    assert out.count(BEGIN) == 1 and out.count(END) == 1 and "before" in out
    assert section_of(out) == text.rstrip()


# -- the fit of the two unpublished knobs and its held-out score (capacity/fit/ep_fit.py) -----
def _terms(compute: float, comm: float, overlapped: bool, measured: float) -> StepTerms:
    return StepTerms(compute_ms=compute, comm_ms=comm, fixed_ms_per_us=0.1,
                     overlapped=overlapped, work=100.0, measured=measured)


def test_step_terms_by_hand() -> None:
    t = _terms(30.0, 50.0, True, 1.0)
    # C' = 30 + 40 us x 0.1 = 34; max(34, 50) + (1 - 0.6) x 34 = 63.6 ms for 100 tokens
    assert t.predict(0.6, 40.0) == pytest.approx(100 * 1e3 / 63.6)
    s = _terms(30.0, 50.0, False, 1.0)
    assert s.predict(0.6, 40.0) == pytest.approx(100 * 1e3 / (34 + 50))


def test_synthetic_rows_recover_their_knobs() -> None:
    shapes = [(30.0, 50.0, True), (60.0, 20.0, True), (40.0, 40.0, True), (10.0, 5.0, False),
              (80.0, 70.0, True), (25.0, 60.0, False)]
    true_o, true_u = 0.6, 40.0
    rows = [_terms(c, m, ov, 1.0) for c, m, ov in shapes]
    rows = [_terms(c, m, ov, r.predict(true_o, true_u)) 
            for (c, m, ov), r in zip(shapes, rows, strict=True)]
    fit = fit_knobs(rows)
    assert (fit.overlap, fit.layer_overhead_us) == pytest.approx((true_o, true_u))
    assert fit.rms_log_error == pytest.approx(0.0, abs=1e-12)
    for f, _ in leave_one_out(rows):  # exact rows: every held-out fit recovers them too
        assert (f.overlap, f.layer_overhead_us) == pytest.approx((true_o, true_u))
    assert true_o in OVERLAP_GRID and true_u in LAYER_OVERHEAD_GRID


def test_held_out_prediction_ignores_the_rows_own_measurement() -> None:
    rows = [r for r in load_rows() if not skip_reason(r, with_gb200())]
    terms = [row_terms(r, with_gb200()) for r in rows]
    base = leave_one_out(terms)
    moved = list(terms)
    moved[0] = replace(terms[0], measured=terms[0].measured * 3.0)
    again = leave_one_out(moved)
    assert again[0][1] == base[0][1]  # row 0's own prediction: unchanged
    assert any(a[1] != b[1] for a, b in zip(again[1:], base[1:], strict=True))  # the others see it
    assert fit_knobs(moved) != fit_knobs(terms)  # the in-sample fit does


def test_scorecard_uses_the_fits_one_computation() -> None:
    card = ep_scorecard(catalog=with_gb200())
    rows = {r.id: r for r in load_rows()}
    fit = card.fit
    assert fit is not None and fit.rows == len(card.checks) >= 10
    for c in card.checks:
        r = rows[c.id]
        terms = row_terms(r, with_gb200())
        assert c.typical == pytest.approx(terms.predict(fit.overlap, fit.layer_overhead_us),
                                          rel=1e-9)
        o, u = c.held_out_knobs
        assert c.held_out == pytest.approx(terms.predict(o, u), rel=1e-9)
        k = typical_ep_knobs(overlap=o, layer_overhead_us=u)
        assert c.held_out == pytest.approx(predict_row(r, k, with_gb200()), rel=1e-12)
        assert c.prior == pytest.approx(terms.predict(1.0, 0.0), rel=1e-9)
    ho = Spread.of(abs(e) for e in card.errors("held_out"))
    assert ho.median == card.error("held_out").median and not math.isnan(ho.median)
    assert ho.median <= 0.25  # issue 27's target, scored held out


def test_the_stored_planning_knobs_are_the_fit_of_every_row() -> None:
    """data/ep_knobs.toml's [fitted] values are what the fit gives on today's rows: a row
    added or corrected without refitting fails here, not silently in the planner."""
    from capacity.catalog.moe_data import ep_fitted_data
    from capacity.model.ep_knobs import planning_ep_knobs, typical_ep_knobs

    fit = shipped("ep").fit
    assert fit is not None
    stored = {k: e.value for k, e in ep_fitted_data().items()}
    assert stored == {"overlap": fit.overlap, "layer_overhead_us": fit.layer_overhead_us}
    k = planning_ep_knobs()
    assert (k.overlap, k.layer_overhead_us) == (0.43, 59.0)
    # every published knob as in the prior; only the two fitted ones differ
    assert replace(k, overlap=1.0, layer_overhead_us=0.0) == typical_ep_knobs()
