"""The Measure and Results pages in headless Chromium, served by a real `streamlit run`.

Results: a stored run is overlaid on the predicted curves (the charts draw), a calibration is
fitted from the browser and saved under the name typed after the fit. Measure: the simulator
starts from the page, and "Connect" reports that it streams; the "Calibration sweep" preset runs
exactly the plan's cells against it, and a second tab follows the running sweep (issue 28).
Screenshots go to the test's tmp folder (CAPACITY_SCREENSHOTS=DIR keeps them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from capacity.bench.job import free_port
from capacity.bench.store import RunStore
from tests.test_app_results import store_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]

if not Path(CHROMIUM).exists():
    pytest.skip("needs /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


def serve(env: dict[str, str]) -> Iterator[str]:
    """`streamlit run streamlit_app.py` (the real app) on a free port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "streamlit_app.py"),
         "--server.headless", "true", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/_stcore/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("streamlit did not start")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
def shots(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "shots"
    d.mkdir()
    yield d
    keep = os.environ.get("CAPACITY_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for f in d.iterdir():
            shutil.copy(f, keep)


IDLE_WAIT_MS = 5_000
"""How long `click_until` waits for the app to be idle before it clicks anyway (ms)."""


def click_until(page, name: str, expect, shots: Path, *, attempts: int, each_ms: int,
                state: str = "visible") -> None:
    """Click the button `name` until `expect` is in `state` (shows, by default), as a user
    retries a click that did nothing.

    On a loaded machine Streamlit can drop a click that lands while a rerun is still drawing
    (CI saw the simulator's Start button do nothing for 90 s). The buttons clicked here are
    idempotent: Start reuses a simulator already started with the same settings, Connect only
    reads. A click is repeated only while the button is still offered; it waits up to
    `IDLE_WAIT_MS` for the app to be idle, then clicks anyway: the Measure page's progress
    fragment reruns every second, so on a loaded machine the status widget can read
    "Running" at every look, and a click held back until it does not was never made (CI,
    2026-12-04: Stop, three tries of 30 s, no click). On the last failure the page (and any
    message it shows) is kept for the report.
    """
    for attempt in range(attempts):
        button = page.get_by_role("button", name=name)
        running = page.locator("[data-testid='stStatusWidget']").filter(has_text="Running")
        if button.count():
            for _ in range(IDLE_WAIT_MS // 100):
                if not running.count():
                    break
                page.wait_for_timeout(100)
            try:
                button.first.click(timeout=10_000)
            except sync_api.TimeoutError:
                pass  # hidden while a rerun redraws: wait, then look again
        try:
            expect.wait_for(state=state, timeout=each_ms)
            return
        except sync_api.TimeoutError:
            if attempt == attempts - 1:
                page.screenshot(path=str(shots / f"failed-{name}.png"), full_page=True)
                alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
                raise AssertionError(f"{name!r} never led to {expect}; the page says {alerts}") from None


def test_results_page_overlays_a_stored_run(tmp_path: Path, shots: Path) -> None:
    # a warning that quotes a server's error body: plain text, no link, no image (the browser
    # fetched a Markdown image in one, 2026-12-08; a bare URL was a link)
    store_run(tmp_path / "bench", "sweep-a", (1, 2, 4, 8, 16, 32), warnings=[
        "level 1: every request failed (the first: http_error: HTTP 500: "
        "![x](http://127.0.0.1:9/x.png) [click](http://127.0.0.1:9/) http://127.0.0.1:9/ "
        "www.example.com a@example.com)"])
    env = {"CAPACITY_BENCH_DIR": str(tmp_path / "bench"),
           "CAPACITY_CALIBRATIONS_DIR": str(tmp_path / "cal")}
    for url in serve(env):
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 3200})
            page.goto(url + "/results", wait_until="domcontentloaded")
            page.get_by_text("Measured on predicted").wait_for(timeout=60_000)
            page.locator(".vega-embed").nth(4).wait_for(timeout=30_000)
            assert page.locator(".vega-embed").count() == 5
            assert page.locator("[data-testid='stException']").count() == 0
            warned = page.locator("[data-testid='stAlert']").filter(has_text="HTTP 500")
            assert warned.count() == 1 and "x.png" in warned.inner_text()
            assert warned.locator("a, img").count() == 0
            page.screenshot(path=str(shots / "results.png"), full_page=True)
            click_until(page, "Fit", page.get_by_text("Fitted knobs of"), shots,
                        attempts=2, each_ms=60_000)
            assert page.locator("[data-testid='stException']").count() == 0
            page.screenshot(path=str(shots / "results-calibrated.png"), full_page=True)
            # issue 28: a name typed after the fit is the one Save writes (it wrote the old one)
            name = page.get_by_label("Name", exact=True)
            name.fill("browser-renamed")
            name.press("Tab")  # Streamlit takes a text field's value when it loses focus
            click_until(page, "Save", page.get_by_text("Saved to"), shots, attempts=2,
                        each_ms=30_000)
            assert sorted(p.name for p in (tmp_path / "cal").glob("*.toml")) == [
                "browser-renamed.toml"]  # not the fitted name, sweep-a
            page.get_by_text("Fitted knobs of 'browser-renamed'").wait_for(timeout=30_000)
            page.get_by_text("中文").click()
            page.get_by_text("结果：实测与预测").wait_for(timeout=30_000)
            assert page.locator("[data-testid='stException']").count() == 0
            page.screenshot(path=str(shots / "results-zh.png"), full_page=True)
            browser.close()


def test_measure_page_starts_the_simulator_and_connects(tmp_path: Path, shots: Path) -> None:
    env = {"CAPACITY_BENCH_DIR": str(tmp_path / "bench")}
    for url in serve(env):
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 3200})
            page.goto(url + "/measure", wait_until="domcontentloaded")
            # the first run has drawn the whole page (its last button) before we click: a click
            # that lands while the script is still starting up can be lost in its rerun
            page.get_by_role("button", name="Start measuring").wait_for(timeout=60_000)
            page.get_by_text("No GPU at hand?").click()
            try:
                # a label typed while the simulator starts is kept, the form still pointed at
                # the simulator (it lost the simulator, or the label: `app.measure_form.SimSwitch`)
                page.get_by_role("button", name="Start the simulated endpoint").click()
                label = page.get_by_label("Label", exact=True)
                label.fill("typed-meanwhile")
                label.press("Enter")
                # the simulator may take up to its own 60 s to start on a loaded machine
                click_until(page, "Start the simulated endpoint",
                            page.get_by_text("Simulated qwen3.5-9b-awq on rtx-4090"), shots,
                            attempts=3, each_ms=60_000)
                running = page.get_by_text("Simulated qwen3.5-9b-awq on rtx-4090").inner_text()
                sim_url = re.search(r"http://127\.0\.0\.1:\d+/v1", running)
                assert sim_url, running
                base_url = page.get_by_label("Base URL", exact=True)
                sync_api.expect(base_url).to_have_value(sim_url.group(0), timeout=30_000)
                assert label.input_value() == "typed-meanwhile"
                click_until(page, "Connect", page.get_by_text("streams (server-sent events)"),
                            shots, attempts=3, each_ms=30_000)
                assert page.locator("[data-testid='stException']").count() == 0
                page.screenshot(path=str(shots / "measure.png"), full_page=True)
            finally:
                # a Stop click can be dropped by a rerun as Start's can (CI saw it once):
                # retried the same way, and Stop is only offered while a simulator runs
                stop = page.get_by_role("button", name="Stop the simulated endpoint")
                if stop.count():
                    # a rerun can draw the simulator's expander closed again (seen under load):
                    # Stop, and Start after it, sit inside it
                    if not stop.first.is_visible():
                        page.get_by_text("No GPU at hand?").click()
                    click_until(page, "Stop the simulated endpoint",
                                page.get_by_role("button", name="Start the simulated endpoint"),
                                shots, attempts=3, each_ms=30_000)
            browser.close()


def choose(page, label: str, option: str, tries: int = 3) -> None:
    """Pick `option` in the Streamlit selectbox labelled `label` (typed, then clicked). On a
    loaded machine the page may rerun between the click that opens the box and the typing,
    which then goes nowhere: the box is opened and typed into again, up to `tries` times."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(tries):
        field = page.get_by_label(label, exact=True)  # the box's input carries its label
        field.click()
        page.keyboard.press("Control+a")   # a retry replaces what an earlier one typed
        page.keyboard.type(option)
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=15_000)
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
    sync_api.expect(field).to_have_value(option, timeout=30_000)


def stored_cells(root: Path) -> list[tuple[int, int]]:
    """(prompt characters, concurrency) of every level of every finished run under `root`."""
    cells = []
    with RunStore(root) as store:
        for meta_path in root.glob("*/*/meta.json"):
            meta = json.loads(meta_path.read_text())
            assert meta["status"] == "finished", meta_path
            cells += [(meta["args"]["prompt_chars"], int(c))
                      for c in store.summary(meta["run_id"])["concurrency"]]
    return sorted(cells)


def test_calibration_preset_runs_the_plan_and_a_second_tab_follows_it(
        tmp_path: Path, shots: Path) -> None:
    """Issue 28, end to end in Chromium: "Calibration sweep" fills in the plan of the simulated
    Llama-3.1-8B on the H100 (its 256-token prompt up to concurrency 512, above the page's old
    limit), Start runs it against the simulator, a second tab of the same browser sees the
    sweep running with its progress bars, and the stored runs hold exactly the plan's cells."""
    from capacity.fit.sweep import measurement_plan
    from capacity.model.scenario import make_scenario

    plan = measurement_plan(make_scenario("llama-3.1-8b-bf16", "h100-sxm"))
    want = sorted((c.prompt_chars, c.concurrency) for c in plan.cells)
    assert (1024, 512) in want and len(plan.sweeps()) == 3
    bench = tmp_path / "bench"
    for url in serve({"CAPACITY_BENCH_DIR": str(bench)}):
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 3200})
            page = context.new_page()
            page.goto(url + "/measure", wait_until="domcontentloaded")
            page.get_by_role("button", name="Start measuring").wait_for(timeout=60_000)
            page.get_by_text("No GPU at hand?").click()
            choose(page, "Simulated model", "llama-3.1-8b-bf16")
            choose(page, "Simulated GPU", "h100-sxm")
            speedup = page.get_by_label("Speed-up", exact=True)
            speedup.fill("3")  # the sweep (about a minute at 1) in a third of its time
            speedup.press("Tab")
            try:
                click_until(page, "Start the simulated endpoint",
                            page.get_by_text("Simulated llama-3.1-8b-bf16 on h100-sxm at"),
                            shots, attempts=3, each_ms=60_000)
                click_until(page, "Calibration sweep",
                            page.get_by_text(f"{len(want)} cells in 3 runs"), shots,
                            attempts=3, each_ms=30_000)
                # the table of runs: each prompt length with its own levels
                first = ", ".join(map(str, plan.sweeps()[0][1]))
                page.get_by_test_id("stTable").get_by_text(first, exact=True).wait_for(
                    timeout=30_000)
                page.mouse.move(0, 0)  # no tooltip over the table
                page.screenshot(path=str(shots / "measure-preset.png"), full_page=True)
                requests = page.get_by_label("Requests per level", exact=True)
                requests.fill("4")  # 2 per pass: a quick sweep of every cell
                requests.press("Tab")
                click_until(page, "Start measuring", page.get_by_text(" of 3 (prompt ").first,
                            shots, attempts=3, each_ms=30_000)

                # a second tab of the same browser: its own session, the same deployment
                other = context.new_page()
                other.goto(url + "/measure", wait_until="domcontentloaded")
                other.get_by_text("Measurements running or recently run").wait_for(
                    timeout=60_000)
                other.get_by_text(": running").first.wait_for(timeout=30_000)
                other.get_by_text("Started from another tab").wait_for(timeout=10_000)
                # its progress: a bar per level with the requests done of 4
                other.get_by_test_id("stProgress").get_by_text(
                    re.compile(r"concurrency \d+: \d/4 done")).first.wait_for(timeout=10_000)
                assert other.get_by_text("No measurement running").count() == 0
                assert other.get_by_text(" of 3 (prompt ").count() == 1  # "Run i of 3 (...)"
                other.screenshot(path=str(shots / "measure-second-tab.png"), full_page=True)

                page.get_by_text("Open it in Results").wait_for(timeout=120_000)
                assert page.get_by_text("Stored as run").count() == 3
                assert page.locator("[data-testid='stException']").count() == 0
                page.screenshot(path=str(shots / "measure-preset-done.png"), full_page=True)
                other.get_by_text("Run 'calibration-p131072': finished").wait_for(
                    timeout=30_000)
            finally:
                stop = page.get_by_role("button", name="Stop the simulated endpoint")
                if stop.count():
                    # Streamlit disables every widget while its websocket reconnects (a busy
                    # 2-core machine): wait for the page to come back before the cleanup
                    sync_api.expect(stop).to_be_enabled(timeout=120_000)
                    stop.click()
            browser.close()
    assert stored_cells(bench) == want
