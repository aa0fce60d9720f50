"""Rows added to published.csv later are reported apart in the scorecard (issue 25)."""

from __future__ import annotations

import json
import math

import pytest

from capacity.fit import validate_added as va
from capacity.fit.validate import Check, Metric, Scorecard, Spread, WithinLevel
from capacity.fit.validate_report import markdown, to_json


def _check(group: str, metric: Metric, measured: float, calibrated: float, *,
           added: str = "", spec: float | None = None, saturated: bool = False,
           band: tuple[float, float] | None = None) -> Check:
    return Check(group=group, gpu="x", engine="vLLM", model="m", source="s", date="2026-01",
                 tp=1, concurrency=4.0, prompt_tokens=100.0, output_tokens=100.0, metric=metric,
                 stat="mean", measured=measured, spec=measured / 2 if spec is None else spec,
                 saturated=saturated, calibrated=calibrated, added=added, band_ms=band)


def _card() -> Scorecard:
    checks = (
        # original rows: step errors 10% and 30% (median 20%), one throughput row 5% off
        _check("old", Metric.STEP, 10.0, 11.0, band=(9.0, 12.0)),
        _check("old", Metric.STEP, 10.0, 7.0, band=(11.0, 12.0)),
        _check("old", Metric.THROUGHPUT, 100.0, 95.0, spec=200.0),
        # added rows: step errors 50% and 10% and 20% -> median 20%, worst 50%; one breaks
        # the spec-sheet bound (spec step 12 ms slower than the measured 10 ms)
        _check("new", Metric.STEP, 10.0, 15.0, added="2026-12-02", band=(8.0, 11.0)),
        _check("new", Metric.STEP, 10.0, 9.0, added="2026-12-02", spec=12.0),
        _check("new", Metric.STEP, 10.0, 12.0, added="2026-12-02", saturated=True),
    )
    within = (WithinLevel(group="old", concurrency=1, context_tokens=10, measured_ms=10.0,
                          held_out_ms=(10.4,)),
              WithinLevel(group="new", concurrency=1, context_tokens=10, measured_ms=20.0,
                          held_out_ms=(23.0,)))
    return Scorecard(checks=checks, upper_bound_rate=5 / 6, violations=(), optimism_by_gpu=(),
                     optimism_by_engine=(), logo_error=va.logo_spreads(checks),
                     groups=("new", "old"), within=within, within_methods=("operator",))


def test_row_sets_split_the_headline_figures_by_added_date() -> None:
    old, new = va.row_sets(_card())
    assert (old.added, old.rows, old.groups, old.upper_bound) == ("", 3, ("old",), 3)
    assert (new.added, new.rows, new.groups, new.upper_bound) == ("2026-12-02", 3, ("new",), 2)
    assert new.label == "rows added 2026-12-02" and old.label == "original rows"
    # original step rows: |11/10 - 1| = 0.1, |7/10 - 1| = 0.3
    s = old.logo(Metric.STEP, saturated=False)
    assert s.n == 2 and s.median == pytest.approx(0.2) and s.high == pytest.approx(0.3)
    assert old.logo(Metric.THROUGHPUT, saturated=False).median == pytest.approx(0.05)
    # added, below saturation: 0.5 and 0.1 -> median 0.3; at saturation: 0.2 alone
    s = new.logo(Metric.STEP, saturated=False)
    assert s.n == 2 and s.median == pytest.approx(0.3) and s.high == pytest.approx(0.5)
    assert new.logo(Metric.STEP, saturated=True).median == pytest.approx(0.2)
    assert math.isnan(new.logo(Metric.TTFT, saturated=False).median)
    # the band: 10 ms inside (9, 12), outside (11, 12); added: inside (8, 11), one without
    assert (old.band_below, new.band_below, new.band_saturated) == ((1, 2), (1, 1), (0, 0))
    # within group, by the set's groups: |10.4/10 - 1| = 0.04; |23/20 - 1| = 0.15
    assert old.within[0][1].median == pytest.approx(0.04)
    assert new.within[0][1].median == pytest.approx(0.15)


def test_the_whole_card_logo_equals_the_union_of_its_parts() -> None:
    card = _card()
    whole = dict(((m, w), s) for m, w, s in card.logo_error)
    # all four unsaturated step rows: 0.1, 0.3, 0.5, 0.1 -> median 0.2
    assert whole["step", "below"].median == pytest.approx(0.2)
    expected = Spread.of([0.1, 0.3, 0.5, 0.1])
    got = whole["step", "below"]
    assert got.n == expected.n == 4
    assert got.low == pytest.approx(expected.low) and got.high == pytest.approx(expected.high)


def test_the_report_says_which_rows_are_new() -> None:
    card = _card()
    md = markdown(card, today="2026-12-02")
    assert "6 measured rows in 2 groups (GPU + engine + model) from data/reference/published.csv" \
        ", 3 of them added later and held out" in md
    assert "### Rows added later, held out" in md
    assert "| figure | original rows | rows added 2026-12-02 |" in md
    assert "| spec sheet an upper bound | 3 of 3 (100.0%) | 2 of 3 (66.7%) |" in md
    assert "| leave one group out: step, below | 20.0% / 30.0% (2) | 30.0% / 50.0% (2) |" in md
    every = [line for line in md.splitlines() if line.startswith("| new | 100 / 100 |")]
    assert len(every) == 3 and all(line.endswith("| 2026-12-02 |") for line in every)
    old = [line for line in md.splitlines() if line.startswith("| old | 100 / 100 |")]
    assert len(old) == 3 and all(line.endswith("| - |") for line in old)
    assert '"added": "2026-12-02"' in to_json(card)


def test_no_section_without_added_rows() -> None:
    card = _card()
    old_only = Scorecard(checks=tuple(c for c in card.checks if not c.added), upper_bound_rate=1.0,
                         violations=(), optimism_by_gpu=(), optimism_by_engine=(),
                         logo_error=(), groups=("old",))
    assert va.markdown(old_only) == []
    assert [s.added for s in va.row_sets(old_only)] == [""]


@pytest.mark.slow  # three small scorecards over published groups (a few seconds)
def test_added_rows_are_never_donors_to_other_groups() -> None:
    import dataclasses

    from capacity.fit.reference import load_reference
    from capacity.fit.validate import scorecard

    sweeps = load_reference()
    a = [s for s in sweeps if s.gpu_key == "rtx-4090" and not s.is_added]
    b = [s for s in sweeps if s.gpu_key == "h100-sxm" and s.engine.startswith("vLLM")
         and not s.is_added]
    c = [s for s in sweeps if s.gpu_key == "mi300x"]
    assert a and b and c and not any(s.is_added for s in a + b + c)
    marked = [dataclasses.replace(s, added="2026-12-02") for s in c]

    def calibrated(card: Scorecard) -> list[float | None]:
        return [x.calibrated for x in card.checks if x.gpu == "rtx-4090"]

    without = calibrated(scorecard(a + b))
    held_out = scorecard(a + b + marked)
    assert calibrated(held_out) == without  # the added group lent the 4090 nothing
    assert calibrated(scorecard(a + b + c)) != without  # as an original group it would
    assert {x.added for x in held_out.checks if x.gpu == "mi300x"} == {"2026-12-02"}
    assert all(x.calibrated is not None for x in held_out.checks if x.gpu == "mi300x")


def test_typical_errors_split_original_and_added_rows() -> None:
    from capacity.fit import validate_typical as vt

    def row(measured: float, after: float, added: str = "") -> vt.TypicalRow:
        return vt.TypicalRow(group="g", metric="step", concurrency=1, measured=measured,
                             before=after, after=after, saturated=False, knobs=(), added=added)

    card = vt.TypicalScorecard(rows=(row(10, 11), row(10, 13), row(10, 15, "2026-12-02")))
    # original: 0.1 and 0.3 -> median 0.2; added: 0.5 alone; all: 0.1, 0.3, 0.5 -> 0.3
    assert card.error("step", True, False).median == pytest.approx(0.2)
    assert card.error("step", True, True).median == pytest.approx(0.5)
    assert card.error("step", True).median == pytest.approx(0.3)
    md = vt.markdown(card)
    assert ("Rows added 2026-12-02 (held out of the prefill plateau and the request latency; "
            "of the step knobs, as every group, their own)") in md
    assert "| step | 20.0% / 30.0% (2) | 50.0% / 50.0% (1) |" in md
    assert "| g (added 2026-12-02) |" in md


def test_typical_errors_split_by_the_statistic_the_source_states() -> None:
    from capacity.fit import validate_typical as vt

    def row(measured: float, after: float, stat: str) -> vt.TypicalRow:
        return vt.TypicalRow(group="g", metric="ttft", concurrency=16, measured=measured,
                             before=after, after=after, saturated=False, knobs=(), stat=stat)

    # means 0.6 and 0.2 (median 0.4, worst 0.6); the median 0.1 alone
    card = vt.TypicalScorecard(rows=(row(100, 40, "mean"), row(100, 120, "mean"),
                                     row(100, 110, "median")))
    assert card.error("ttft", True, stat="mean").median == pytest.approx(0.4)
    assert card.error("ttft", True, stat="median").median == pytest.approx(0.1)
    assert card.error("ttft", True).median == pytest.approx(0.2)   # 0.1, 0.2, 0.6
    md = vt.markdown(card)
    assert "| ttft | 40.0% / 60.0% (2) | 10.0% / 10.0% (1) |" in md
    assert "| step | - | - |" in md   # no step row: nothing to split
    got = vt.to_dict(card)["errors"]["ttft"]
    assert (got["after_mean"]["n"], got["after_median"]["n"]) == (2, 1)
    # a split with no rows is null in the JSON, not NaN (which JSON has no word for)
    assert vt.to_dict(card)["errors"]["step"]["after_median"] == {
        "n": 0, "median": None, "low": None, "high": None}
    json.dumps(vt.to_dict(card), allow_nan=False)
