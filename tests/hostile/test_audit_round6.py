"""Round six of the hostile-input checks (an audit of Measure -> Results -> calibrate, 2026-12-08):
what a server answered or a stored run's files say is shown as plain text, a summary row edited
by hand is said instead of a traceback, Fit refuses a sped-up simulator's run as `capacity
calibrate` does, and Save asks before a bundled calibration's name is taken."""

from __future__ import annotations

import csv
import io
import json
import re
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from servers_server import DONE, Request, bench_rows, head, models_or, token, usage_event
from streamlit.testing.v1 import AppTest

from app import measure_state as ms
from app.format import WORD_JOINER, markdown_plain
from capacity.bench.job import JobRegistry
from capacity.fit.calibration_store import load_named
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


def as_read(text: str) -> str:
    """`text` as the renderer reads it once the backslash escapes are taken (the autolinker
    looks at this: `http\\://host` was a link)."""
    return text.replace("\\", "")


def test_markdown_plain_leaves_no_link_to_the_autolinker() -> None:
    """Streamlit (1.67) links a bare URL, a `www.` name and an e-mail address once the escapes
    are read: in Chromium `http\\://host`, `www\\.host` and `a\\@host` were links. A word joiner
    after `://`, `www` and `@` keeps them text (0 links, checked in Chromium, 2026-12-08)."""
    raw = "see http://127.0.0.1:9/x, HTTPS://e.com/, www.e.com, a@e.com, ![x](http://e/i.png)"
    out = as_read(markdown_plain(raw))
    assert out.replace(WORD_JOINER, "") == raw  # it reads the same
    for whole in ("http://1", "HTTPS://e", "www.e", "a@e"):
        assert whole not in out, whole


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


def test_a_servers_words_in_a_runs_warnings_are_plain_text(folders: Path) -> None:
    """A run's warnings quote the server (an error body) and its meta.json anyone with the
    folder can edit: shown as Markdown, an image in them was fetched by every browser that
    opened the run (checked in Chromium: the beacon was hit) and a link was clickable."""
    bench = folders / "bench"
    store_run(bench, "hostile", (1, 2, 4),
              warnings=[f"level 1: every request failed (the first: http_error: HTTP 500: "
                        f"{LINK_AND_IMAGE})"])
    meta = run_dir(bench, "hostile") / "meta.json"
    doc = json.loads(meta.read_text(encoding="utf-8"))
    doc["label"] = "![l](http://127.0.0.1:9/label.png)"  # the label comes from meta.json too
    meta.write_text(json.dumps(doc), encoding="utf-8")
    edit_cell(run_dir(bench, "hostile") / "summary.csv", "ttft_p50_ms", 1,
              "[cell](http://127.0.0.1:9/cell)")  # quoted by the store's note
    at = results_page()
    text = shown(at)
    # each is there, escaped: no image, no link, no HTML, no URL a browser would follow
    assert "HTTP 500" in text and "\\[cell\\]" in text and "label.png" in text
    assert "beacon.png" in text and "phish" in text
    assert "<b>" not in text and "![" not in text
    assert not re.search(r"(?<!\\)\]\(", text)  # no unescaped ](
    assert "http://127.0.0.1:9" not in as_read(text)  # no bare URL for the autolinker


def test_a_fit_of_a_sped_up_simulators_run_is_refused(folders: Path) -> None:
    """`capacity calibrate --label` refuses a run of `sim-server --speedup 20` (its times are
    20 times shorter than the GPU's); the Results page fitted it and saved a calibration of a
    GPU 20 times faster than physics. Fit now says why, as the command does."""
    bench = folders / "bench"
    store_run(bench, "fast-sim", (1, 2, 4, 8))
    meta = run_dir(bench, "fast-sim") / "meta.json"
    doc = json.loads(meta.read_text(encoding="utf-8"))
    doc["engine_info"] = {"engine": "capacity sim-server", "sim_speedup": 20.0}
    meta.write_text(json.dumps(doc), encoding="utf-8")
    at = results_page()
    at.button(key="r_fit").click().run()
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert "--speedup 20" in error and "fast-sim" in error
    assert ms.FITTED not in at.session_state
    assert not list((folders / "cal").glob("*.toml"))


def test_saving_under_a_bundled_calibrations_name_asks_first(folders: Path) -> None:
    """The bundled `rtx-4090-vllm-published` is read after the workspace's folder: Save under
    its name wrote the workspace's file at once and hid the bundled one from every user. Save
    now asks, as for a name saved already; Overwrite then writes it."""
    bundled = ROOT / "data" / "calibrations" / "rtx-4090-vllm-published.toml"
    assert bundled.is_file()
    store_run(folders / "bench", "sweep-a", (1, 2, 4, 8, 16, 32))
    at = results_page()
    at.button(key="r_fit").click().run()
    at.text_input(key="r_cal_name").set_value("rtx-4090-vllm-published").run()
    at.button(key="r_save").click().run()
    assert not at.exception
    assert not (folders / "cal" / "rtx-4090-vllm-published.toml").exists()
    assert any("is saved already" in w.value for w in at.warning)
    at.button(key="r_save_overwrite").click().run()
    assert (folders / "cal" / "rtx-4090-vllm-published.toml").is_file()
    assert bundled.is_file()  # the bundled file itself is never written


def test_connect_shows_a_servers_words_as_plain_text(serve: Any, folders: Path) -> None:
    """Connect's report quotes the server (a content type here): plain text on the page."""

    def not_a_stream(req: Request, conn: socket.socket, stop: threading.Event) -> None:
        body = b"{}"
        conn.sendall(head(200, f"text/html; x=[c](http://127.0.0.1:9/ct) {BEACON}",
                          length=len(body)) + body)

    server = serve(models_or(not_a_stream))
    at = AppTest.from_file(APP, default_timeout=60).switch_page("pages/measure.py")
    at.run()
    at.text_input(key="m_base_url").set_value(server.base_url)
    at.button(key="m_connect").click().run()
    assert not at.exception
    [warning] = [w.value for w in at.warning]
    assert "the response is not a stream" in warning
    assert "http://127.0.0.1:9" not in as_read(warning)
    assert not re.search(r"(?<!\\)\]\(", warning)


def test_a_calibration_files_name_that_is_no_name_is_not_shown(folders: Path) -> None:
    """A calibration file's `name` is what every page's captions call it: one edited to
    Markdown made the Results page fetch an image (the overlay's caption, the band's). A name
    that is not a name (`check_name`) gives way to the file's own."""
    text = (ROOT / "data" / "calibrations" / "rtx-4090-vllm-published.toml").read_text(
        encoding="utf-8")
    cal = folders / "cal"
    cal.mkdir()
    (cal / "edited.toml").write_text(text.replace(
        'name = "rtx-4090-vllm-published"', f'name = "![x]({BEACON})"', 1), encoding="utf-8")
    (cal / "kept.toml").write_text(text.replace(
        'name = "rtx-4090-vllm-published"', 'name = "other-name"', 1), encoding="utf-8")
    assert load_named("edited").name == "edited"
    assert load_named("kept").name == "other-name"  # a name stays what the file says
    store_run(folders / "bench", "sweep-a", (1, 2, 4, 8))
    at = results_page()
    at.selectbox(key="r_calibration").set_value("edited").run()
    assert not at.exception and not at.error
    text = shown(at)
    assert "calibration: edited" in text and "127.0.0.1" not in text
