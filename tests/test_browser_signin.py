"""Sign-in end to end (issue 29): the real app (`streamlit run`) with `[auth]` pointing at a real
OpenID Connect provider on 127.0.0.1 (oidc-provider-mock), driven in headless Chromium.

One test, three people: a viewer signs in through the provider's form and is refused a write
(Measure's buttons disabled, the reason shown); two editors in two browser contexts each start
a simulated endpoint and a measurement at the same moment, with the same label, and each sees
only their own simulator and run; on Results each lists only their own run until the first
shares theirs, and the second typing the first's simulator address is refused. The
secrets.toml is written to the test's tmp folder (never the repository) and passed with
`--secrets.files`. Screenshots go to the test's tmp folder (CAPACITY_SCREENSHOTS=DIR keeps
them).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from capacity.bench.job import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]

if not Path(CHROMIUM).exists():
    pytest.skip("needs /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
from tests.test_browser_measure import click_until  # noqa: E402  (after the skips above)

# looked up, not imported: both warn of deprecations at import (pytest makes warnings errors),
# and the provider runs in its own process anyway
for _needed in ("authlib", "oidc_provider_mock"):
    if importlib.util.find_spec(_needed) is None:
        pytest.skip(f"needs {_needed} (the dev group installs it)", allow_module_level=True)

PEOPLE = {
    "vera": {"email": "vera@partner.example", "name": "Vera Viewer", "email_verified": True},
    "ed1": {"email": "ed1@example.com", "name": "Edna One", "email_verified": True},
    "ed2": {"email": "ed2@example.com", "name": "Edgar Two", "email_verified": True},
}
ACCESS = '[access]\neditor = ["@example.com"]\ndefault = "viewer"\n'


def _wait_http(url: str, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not answer {url} within {timeout_s:g} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture
def provider() -> Iterator[str]:
    """oidc-provider-mock on a free loopback port, with the three people's claims."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-m", "oidc_provider_mock", "--host", "127.0.0.1",
         "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(url + "/.well-known/openid-configuration", "the OpenID provider")
        for sub, claims in PEOPLE.items():
            r = httpx.put(f"{url}/users/{quote(sub)}", json=claims, trust_env=False)
            assert r.status_code == 204, r.text
        yield url
    finally:
        _stop(proc)


@pytest.fixture
def app_url(provider: str, tmp_path: Path) -> Iterator[str]:
    """The app with sign-in: its secrets in the tmp folder, its workspace there too."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    secrets_toml = tmp_path / "secrets" / "secrets.toml"
    secrets_toml.parent.mkdir()
    secrets_toml.write_text(
        f'[auth]\nredirect_uri = "{url}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(32)}"\nclient_id = "capacity-test"\n'
        f'client_secret = "{secrets.token_hex(16)}"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n\n' + ACCESS,
        encoding="utf-8")
    env = {**os.environ, "CAPACITY_BENCH_DIR": str(tmp_path / "bench"),
           "CAPACITY_CUSTOM_DIR": str(tmp_path / "custom"),
           "CAPACITY_CALIBRATIONS_DIR": str(tmp_path / "cal")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "streamlit_app.py"),
         "--server.headless", "true", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
         f"--secrets.files={secrets_toml}"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        _wait_http(url + "/_stcore/health", "streamlit")
        yield url
    finally:
        _stop(proc)


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


def sign_in(page, url: str, sub: str, shots: Path | None = None) -> None:
    """Open the app, press Sign in, choose `sub` on the provider's form, come back signed in."""
    page.goto(url, wait_until="domcontentloaded")
    button = page.get_by_role("button", name="Sign in")
    button.wait_for(timeout=60_000)
    assert page.get_by_role("link", name="Measure").count() == 0  # no pages before sign-in
    if shots is not None:
        page.screenshot(path=str(shots / "sign-in.png"), full_page=True)
    button.click()
    page.locator("input[name=sub]").wait_for(timeout=30_000)
    page.locator("input[name=sub]").fill(sub)
    page.get_by_role("button", name="Authorize").click()
    page.get_by_text(f"Signed in as {PEOPLE[sub]['name']}").wait_for(timeout=60_000)


def fill(page, label: str, value: str) -> None:
    """Type into a Streamlit input and commit it (Enter), as a user does."""
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")


def start_measuring(page) -> None:
    """Press Start measuring until the run shows: on a loaded machine Streamlit can drop a click
    that lands while a rerun is still drawing (tests/test_browser_measure.py, `click_until`);
    a click is repeated only while the page still says no measurement runs."""
    running = page.get_by_text("Run 'sim-rtx-4090'")
    for _ in range(3):
        if page.get_by_text("No measurement running").count():
            page.get_by_role("button", name="Start measuring").click()
        try:
            running.first.wait_for(timeout=30_000)
            return
        except sync_api.TimeoutError:
            continue
    raise AssertionError(f"Start measuring never started a run: {page_text(page)}")


def connect_until(page, text: str) -> None:
    """Press Connect until `text` shows: the click lands right after the Base URL's Enter
    started a rerun, and on a loaded machine Streamlit can drop it (as `start_measuring`'s;
    CI, 2026-12-07: the refusal never showed in 60 s after one click). Connecting again is
    harmless: the page answers the same address the same way."""
    shown = page.get_by_text(text).first
    for _ in range(3):
        page.get_by_role("button", name="Connect").click()
        try:
            shown.wait_for(timeout=30_000)
            return
        except sync_api.TimeoutError:
            continue
    raise AssertionError(f"Connect never answered '{text}': {page_text(page)}")


def results_runs(page, url: str, expect: int | None = None) -> int:
    """How many stored runs the Results page offers this user: the runs picked (chips) and
    the picker's other options (the list is a canvas; the picker is text). With `expect` (a
    run that should now appear), the page is loaded again (at most 3 times) while it offers
    another number: on a loaded CI machine one load read 1 run where the store held 2 (and,
    2026-12-03, five loads in a row did twice, on a machine running the suite beside it, while
    an idle one and one with two busy loops beside it pass: at most 8 loads now, each waiting
    up to 10 s for an option)."""
    got = _results_runs_once(page, url)
    for _ in range(7 if expect is not None else 0):
        if got == expect:
            break
        got = _results_runs_once(page, url)
    return got


def _results_runs_once(page, url: str) -> int:
    """One load of the Results page and its count (`results_runs`)."""
    page.goto(url + "/results", wait_until="domcontentloaded")
    page.get_by_text("Results: measured vs predicted").wait_for()
    box = page.locator("[data-testid='stMultiSelect']").filter(has_text="Runs to show")
    box.wait_for()
    page.locator(".vega-embed").first.wait_for()  # the page has drawn past the picker
    chips = box.locator(".react-aria-ComboBox [data-tag-index]").count()
    box.locator("input").click()
    # the dropdown draws after the click; on a loaded machine 500 ms was not always enough:
    # poll until the option count has held for a second (at most 15 s; no option at all is
    # believed only after 10 s)
    options, held_since, deadline = -1, time.monotonic(), time.monotonic() + 15
    while time.monotonic() < deadline:
        now = page.get_by_role("option").filter(has_text="sim-rtx-4090").count()
        if now != options:
            options, held_since = now, time.monotonic()
        elif time.monotonic() - held_since >= 1.0 and (options > 0 or
                                                       time.monotonic() > deadline - 5):
            break
        page.wait_for_timeout(200)
    page.keyboard.press("Escape")
    return chips + max(options, 0)


def page_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def test_sign_in_a_viewer_refused_and_two_editors_kept_apart(app_url: str, tmp_path: Path,
                                                             shots: Path) -> None:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        viewport = {"width": 1400, "height": 2600}
        try:
            # -- a viewer: signs in, may look at Measure, may not measure
            viewer = browser.new_context(viewport=viewport).new_page()
            viewer.set_default_timeout(60_000)
            sign_in(viewer, app_url, "vera", shots)
            assert viewer.get_by_text("(viewer)").count() == 1
            viewer.goto(app_url + "/measure", wait_until="domcontentloaded")
            start = viewer.get_by_role("button", name="Start measuring")
            start.wait_for()
            assert start.is_disabled()
            viewer.get_by_text("Your role may not start or stop measurements").first.wait_for()
            viewer.get_by_text("No GPU at hand?").click()
            assert viewer.get_by_role("button", name="Start the simulated endpoint").is_disabled()
            assert viewer.get_by_role("button", name="Connect").is_disabled()
            viewer.screenshot(path=str(shots / "viewer-measure.png"), full_page=True)
            # sign-out ends the session at the provider too (its confirm form), then back
            viewer.get_by_role("button", name="Sign out").click()
            viewer.get_by_role("button", name="End session").click()
            viewer.get_by_role("button", name="Sign in").wait_for()
            assert viewer.get_by_text("Signed in as").count() == 0

            # -- two editors, two browser contexts (two cookie jars), measuring at once
            pages = {}
            for sub in ("ed1", "ed2"):
                pg = browser.new_context(viewport=viewport).new_page()
                pg.set_default_timeout(60_000)
                sign_in(pg, app_url, sub)
                assert pg.get_by_text("(editor)").count() == 1
                pg.goto(app_url + "/measure", wait_until="domcontentloaded")
                pg.get_by_role("button", name="Start measuring").wait_for()
                pg.get_by_text("No GPU at hand?").click()
                # CI saw this click dropped on a loaded machine (90 s with no simulator):
                # repeat it while the button is offered and the app idle, as a user would
                click_until(pg, "Start the simulated endpoint",
                            pg.get_by_text("Simulated qwen3.5-9b-awq on rtx-4090"), shots,
                            attempts=4, each_ms=30_000)
                pages[sub] = pg
            urls = {}
            for sub, pg in pages.items():
                m = re.search(r"http://127\.0\.0\.1:(\d+)/v1", page_text(pg))
                assert m, page_text(pg)
                urls[sub] = m.group(0)
            assert urls["ed1"] != urls["ed2"]  # the same settings: a simulator each
            for pg in pages.values():
                # the simulator's URL shows in the run that started it, the form's values in
                # the rerun after: typing before that rerun drew raced it (CI, 2026-12-07)
                label = pg.get_by_label("Label", exact=True)
                for _ in range(120):
                    if label.input_value() == "sim-rtx-4090":
                        break
                    pg.wait_for_timeout(250)
                fill(pg, "Concurrency levels", "1,2")
                fill(pg, "Requests per level", "4")
                fill(pg, "Prompt lengths, chars", "200")
                fill(pg, "Max output tokens", "16")
                # the same label for both: the run folders are told apart by their ids
                assert pg.get_by_label("Label", exact=True).input_value() == "sim-rtx-4090"
            for pg in pages.values():  # both start before either finishes
                start_measuring(pg)
            for sub, pg in pages.items():
                try:
                    pg.get_by_text("Stored as run").first.wait_for(timeout=180_000)
                except sync_api.TimeoutError:
                    pg.screenshot(path=str(shots / f"failed-{sub}.png"), full_page=True)
                    raise AssertionError(f"{sub}'s run never finished: {page_text(pg)}") from None
            runs = sorted(d.name for d in (tmp_path / "bench" / "sim-rtx-4090").iterdir())
            assert len(runs) == 2, runs
            seen = {}
            for sub, pg in pages.items():
                text = page_text(pg)
                pg.screenshot(path=str(shots / f"editor-{sub}.png"), full_page=True)
                seen[sub] = [r for r in runs if r in text]
                other = "ed2" if sub == "ed1" else "ed1"
                assert urls[other] not in text, f"{sub} sees {other}'s simulator"
                assert "Measurements running or recently run" not in text
                assert "Simulated endpoints this app started" not in text
            # each sees exactly one run, and it is their own: measured on their simulator
            assert len(seen["ed1"]) == 1 and len(seen["ed2"]) == 1, seen
            owners = {"ed1": "#ed1", "ed2": "#ed2"}
            for sub, (run,) in seen.items():
                meta = json.loads((tmp_path / "bench" / "sim-rtx-4090" / run / "meta.json")
                                  .read_text(encoding="utf-8"))
                assert meta["args"]["base_url"] == urls[sub], (sub, meta["args"], urls)
                # the run names its user (iss#sub at the provider), not shared yet
                assert meta["started_by"].endswith(owners[sub]) and meta["shared"] is False

            # -- Results: ed1's run is not in ed2's list until ed1 shares it
            ed1, ed2 = pages["ed1"], pages["ed2"]
            # no retry here: one load that offered another user's run would be a leak
            assert results_runs(ed2, app_url) == 1  # only their own
            assert results_runs(ed1, app_url) == 1
            share = ed1.get_by_text("with everyone")
            share.wait_for()
            ed1.screenshot(path=str(shots / "results-share.png"), full_page=True)
            share.click()
            deadline = time.monotonic() + 30
            ed1_meta = tmp_path / "bench" / "sim-rtx-4090" / seen["ed1"][0] / "meta.json"
            while (json.loads(ed1_meta.read_text(encoding="utf-8")).get("shared") is not True
                   and time.monotonic() < deadline):
                time.sleep(0.2)
            assert json.loads(ed1_meta.read_text(encoding="utf-8"))["shared"] is True
            ed1.screenshot(path=str(shots / "results-shared.png"), full_page=True)
            got = results_runs(ed2, app_url, expect=2)
            if got != 2:  # what the page showed, for the report
                ed2.screenshot(path=str(shots / "results-other-failed.png"), full_page=True)
            assert got == 2, page_text(ed2)  # ed1's run now too
            ed2.screenshot(path=str(shots / "results-other.png"), full_page=True)

            # -- ed2 typing ed1's simulator address is refused (it was only hidden before)
            ed2.goto(app_url + "/measure", wait_until="domcontentloaded")
            ed2.get_by_role("button", name="Start measuring").wait_for()
            fill(ed2, "Base URL", urls["ed1"])
            connect_until(ed2, "is a simulated endpoint another user started")
            ed2.screenshot(path=str(shots / "measure-refused.png"), full_page=True)
            for pg in pages.values():  # the simulator's expander opens on its own
                pg.goto(app_url + "/measure", wait_until="domcontentloaded")
                pg.get_by_role("button", name="Start measuring").wait_for()
            for pg in pages.values():
                stop = pg.get_by_role("button", name="Stop the simulated endpoint")
                # stopped (the expander may close with it); a dropped click is retried
                click_until(pg, "Stop the simulated endpoint", stop, shots, attempts=3,
                            each_ms=30_000, state="hidden")
        finally:
            browser.close()
