"""Round six of the hostile-input checks (an audit of Measure -> Results -> calibrate, 2026-12-08):
a summary row edited by hand is said instead of a traceback."""

from __future__ import annotations

import csv
import io
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from servers_server import DONE, Request, bench_rows, head, models_or, token, usage_event
from streamlit.testing.v1 import AppTest

from app import measure_state as ms
from capacity.bench.job import JobRegistry
from tests.test_app_results import store_run

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "streamlit_app.py")
RESULTS = "pages/results.py"
BEACON = "http://127.0.0.1:9/beacon.png"
"""A URL the page must never make the browser fetch (port 9: discard, nothing answers)."""
LINK_AND_IMAGE = f"![x]({BEACON}) [click](http://127.0.0.1:9/phish) <b>bold</b>"


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    monkeypatch.setattr(ms, "JOBS", JobRegistry())
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    return tmp_path


def results_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).switch_page(RESULTS)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(at: AppTest) -> str:
    """Every text the page hands to Streamlit's Markdown (alerts, captions, markdown, labels)."""
    return "\n".join([*(x.value for x in (*at.error, *at.warning, *at.info, *at.success,
                                          *at.caption, *at.markdown)),
                      *(x.label for x in at.toggle)])


def edit_cell(path: Path, column: str, row: int, value: str) -> None:
    """Set one cell of a CSV file, as an editor would."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    rows[row][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")


def run_dir(bench: Path, label: str) -> Path:
    [d] = (bench / label).iterdir()
    return d


def levels_shown(at: AppTest) -> set[int]:
    """The concurrencies of the accuracy table's rows (one per level and metric)."""
    for frame in at.dataframe:
        df = frame.value
        if "concurrency" in df.columns and "metric" in df.columns:
            return {int(c) for c in df["concurrency"]}
    raise AssertionError("no accuracy table on the page")


def test_a_summary_row_without_a_concurrency_is_said_not_a_traceback(folders: Path) -> None:
    """A summary.csv whose concurrency cell was emptied or edited to text: the Results page
    died with `float() argument must be ... not 'NAType'` (the row drawn at 'NA'). The row is
    left out and said; the other levels are shown and fitted."""
    bench = folders / "bench"
    store_run(bench, "edited", (1, 2, 4, 8))
    summary = run_dir(bench, "edited") / "summary.csv"
    edit_cell(summary, "concurrency", 2, "")      # level 2
    edit_cell(summary, "concurrency", 3, "abc")   # level 4
    at = results_page()
    assert levels_shown(at) == {1, 8}
    text = shown(at)
    assert "2 summary rows have no concurrency" in text
    assert "concurrency = 'abc'" in text  # the store names the cell
    at.button(key="r_fit").click().run()
    assert not at.exception and not at.error


def _tokens(req: Request, conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(head() + token("a") * 4 + usage_event(4) + DONE)


def test_a_level_whose_summary_row_lost_its_concurrency_comes_from_its_requests(
        serve: Any, folders: Path) -> None:
    """Nothing measured is lost: the level of a summary row without a concurrency is computed
    from its request rows, as a stopped run's levels are."""
    bench = folders / "bench"
    server = serve(models_or(_tokens))
    bench_rows(bench, server, 60, concurrency=(1, 2), requests=4, label="real")
    d = run_dir(bench, "real")
    (d / "requests.parquet").unlink(missing_ok=True)  # the CSV is the one edited here
    edit_cell(d / "summary.csv", "concurrency", 1, "")
    at = results_page()
    assert "1 summary row has no concurrency" in shown(at)
    assert levels_shown(at) == {1, 2}

