"""A realtest record (capacity.fit.realtest_record): the files a real-engine report is computed
from, written, read back, and rendered into docs/accuracy.md (issue 25: the real-engine tables
are generated from committed measurement files, not pasted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity.errors import InputError
from capacity.fit import realtest_record as rr
from tests.shipped import shipped

ROOT = Path(__file__).resolve().parents[1]
ACCURACY = ROOT / "docs" / "accuracy.md"


def _home(tmp_path: Path) -> Path:
    """A realtest workspace with one stored run, the catalog entries and two calibrations."""
    home = tmp_path / "home"
    for rel, text in {"custom/gpus/cpu-probe.toml": "key = 'cpu-probe'\n",
                      "custom/models/rt-a.toml": "key = 'rt-a'\n",
                      "calibrations/one.toml": "name = 'one'\n",
                      "calibrations/two.toml": "name = 'two'\n",
                      "calibrations/other.toml": "name = 'unused'\n",
                      "bench/rt-cal/run1/meta.json": "{}\n",
                      "bench/rt-cal/run1/summary.csv": "concurrency\n1\n",
                      "bench/rt-cal/run1/requests.csv": "concurrency\n1\n",
                      "bench/rt-cal/run1/requests.parquet": "x",
                      "bench/rt-cal/run0/summary.csv": "concurrency\n1\n",
                      "bench/rt-control-1/c1/summary.csv": "concurrency\n1\n",
                      "bench/rt-control-2/c2/summary.csv": "concurrency\n1\n",
                      "llama-server-f32.log": "log\n"}.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    return home


def _record(**kw: object) -> rr.Record:
    case = rr.Case(name="f32 prompt ~200", model="rt-a", run="rt-cal/run1",
                   skip_levels=(1, 2, 4, 8), control="rt-control-2/c2")
    base: dict[str, object] = dict(
        date="2026-12-02T15:54:00+00:00", machine="Machine: cpu", engine="llama.cpp",
        threads=1, parallel=8, ctx_tokens=8192, total_slots="8", minutes=35.2,
        load_before="0.6", load_after="1.1", requests_text="16, 24", max_tokens=64,
        calibration="one.toml", two_sizes="two.toml", baseline="rt-control-1/c1",
        cases=(case,))
    return rr.Record(**{**base, **kw})  # type: ignore[arg-type]


def test_a_record_holds_what_its_report_rests_on_and_reads_back(tmp_path: Path) -> None:
    home = _home(tmp_path)
    rec = _record()
    folder = rr.write_record(tmp_path / "rec", rec, home)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    # the case's run (no parquet copy: the CSVs are the record), both controls, the two
    # calibrations, the catalog entries, record.json; not the other run, the third
    # calibration or the logs
    assert files == ["bench/rt-cal/run1/meta.json", "bench/rt-cal/run1/requests.csv",
                     "bench/rt-cal/run1/summary.csv", "bench/rt-control-1/c1/summary.csv",
                     "bench/rt-control-2/c2/summary.csv", "calibrations/one.toml",
                     "calibrations/two.toml", "custom/gpus/cpu-probe.toml",
                     "custom/models/rt-a.toml", "record.json"]
    assert rr.read_record(folder) == rec
    assert rec.runs() == ["rt-control-1/c1", "rt-cal/run1", "rt-control-2/c2"]
    doc = json.loads((folder / "record.json").read_text())
    assert doc["cases"][0]["skip_levels"] == [1, 2, 4, 8] and doc["threads"] == 1
    # written anew: a second write replaces the folder
    rr.write_record(folder, _record(cases=()), home)
    assert [p.name for p in (folder / "bench").iterdir()] == ["rt-control-1"]
    assert rr.read_record(folder).cases == ()


def test_a_folder_that_is_not_a_record_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a realtest record"):
        rr.read_record(tmp_path)
    (tmp_path / "record.json").write_text('{"date": "2026"}')
    with pytest.raises(InputError, match=r"record\.json: not a realtest record"):
        rr.read_record(tmp_path)


def test_records_are_listed_newest_first(tmp_path: Path) -> None:
    for name in ("20261130T1740Z", "20261202T1554Z", "20261201T0900Z", "notes"):
        (tmp_path / name).mkdir()
    for name in ("20261130T1740Z", "20261202T1554Z", "20261201T0900Z"):
        (tmp_path / name / "record.json").write_text("{}")
    assert [p.name for p in rr.record_folders(tmp_path)] == [
        "20261202T1554Z", "20261201T0900Z", "20261130T1740Z"]
    assert rr.record_folders(tmp_path / "none") == []


def test_the_section_goes_after_the_result_heading(tmp_path: Path) -> None:
    doc = tmp_path / "acc.md"
    doc.write_text("# A\n\n### Result\n\nby hand\n")
    rr.write_section(doc, "generated")
    text = doc.read_text()
    assert text.index("### Result") < text.index(rr.BEGIN) < text.index("by hand")
    assert rr.section_of(text) == "generated"
    rr.write_section(doc, "again")
    assert rr.section_of(doc.read_text()) == "again" and doc.read_text().count(rr.BEGIN) == 1


@pytest.mark.slow
def test_committed_records_are_the_docs_real_engine_result() -> None:
    """Every record under data/reference/realtest/ predicted again from its files is what
    docs/accuracy.md shows (run `capacity validate --out docs/accuracy.md` after adding one)."""
    assert rr.record_folders(), "no realtest record is committed under data/reference/realtest/"
    committed = rr.section_of(ACCURACY.read_text(encoding="utf-8"))
    assert committed == shipped("realtest").rstrip("\n"), (
        "docs/accuracy.md's real-engine result is not current: run "
        "`capacity validate --out docs/accuracy.md`")


@pytest.mark.slow
def test_the_stated_closed_loop_ttft_bound_holds_on_the_committed_records() -> None:
    """Issue 31: TTFT under a closed loop is stated as lying between its two edges (clients out
    of step; the level as run, all at once). On the committed llama.cpp records it does at 22
    of 22 closed-loop levels of two or more clients in each of the four runs. Without the
    burst's prompts attending across llama.cpp's one KV cache
    (`forward_pass.unified_kv_extra_pairs`) the 2026-12-02 23:24 run read 20 of 22, two
    long-prompt levels 9% and 12% over the burst; the report names any level outside."""
    folders = rr.record_folders()
    assert len(folders) >= 4
    for folder in folders:
        _, rows, *_ = rr.predict_rows(folder)
        got = [(r, b) for r in rows if (b := r.ttft_between()) is not None]
        assert len(got) >= 20 and all(b for _, b in got)
        text = rr.ttft_edges(rows)
        assert f"{sum(b for _, b in got)} of {len(got)} levels" in text
        assert text.count("over the burst") + text.count("under the steady state") == sum(
            not b for _, b in got)



@pytest.mark.slow
def test_issue_31_targets_on_the_realtest_run_held_out_from_its_model_changes() -> None:
    """Issue 31's targets on the 2026-12-03 05:22 run (load 0.1 -> 1.2), the first measured
    after the batched overhead and the unified KV cache were settled on earlier runs: another
    size calibrated on one model within 10% median and 25% worst on ITL p50, TTFT p50 at
    concurrency 1 within 15%, a whole level left out within 10%, the closed-loop TTFT bound
    and the spec-sheet bound at every level. Predicted again from its files, so a change to
    the step, the fit or the event model that loses them fails here."""
    import math

    import numpy as np

    from capacity.fit.calibration import PointKind
    from capacity.fit.engine_check import bound_counts
    folder = rr.records_dir() / "20261203T0522Z"
    _, rows, cal, _, _ = rr.predict_rows(folder)
    size = [r for r in rows if r.case in rr.SIZE_CASES]
    itl = [abs(r.error("itl_p50_ms")) for r in size if math.isfinite(r.error("itl_p50_ms"))]
    assert len(itl) == 8 and float(np.median(itl)) < 0.10 and max(itl) < 0.25
    ttft1 = [r.error("ttft_p50_ms") for r in size if r.concurrency == 1]
    assert len(ttft1) == 2 and all(abs(e) < 0.15 for e in ttft1)
    assert cal.median_abs_error(PointKind.TPOT, "held_out") < 0.10
    assert all(b for r in rows if (b := r.ttft_between()) is not None)
    assert all(ok == n for ok, n in bound_counts(rows).values())
