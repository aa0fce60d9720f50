"""Issue 15, security of a shared deployment (items 1, 2, 3, 4 and 15), reproduced and held:

1. a calibration name from a page or a URL is a name, saved only in the calibrations folder;
2. the Measure page is closed by default: beyond loopback it refuses before connecting;
3. the API key never reaches a file, stdout/stderr or a log when a server echoes it back;
4. sizes from a flag or the page are bounded, and the client makes no per-slot objects up front;
15. CAPACITY_CALIBRATIONS_DIR is read by the Explorer and `capacity plan`.

Servers are on 127.0.0.1 only; "internal" hosts are addresses that are never connected to (a
patched socket fails the test if anything tries). Every test is bounded in time (`bounded`).
Limits: docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from capacity.bench import transport
from capacity.bench.client import run_bench
from capacity.bench.config import CLI_LIMITS, BenchConfig
from capacity.bench.connect import connect_check
from capacity.bench.form import PAGE_LIMITS, MeasureForm
from capacity.bench.guard import check_url, is_loopback, measure_guard
from capacity.bench.job import BenchJob
from capacity.bench.storage import RunWriter, redact, scrub
from capacity.catalog import custom as catalog_custom
from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.errors import BenchError, InputError
from capacity.fit import calibration as calib
from capacity.fit import calibration_store
from capacity.report.urlstate import decode

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "streamlit_app.py")
BUNDLED_CAL = ROOT / "data" / "calibrations" / "rtx-4090-vllm-published.toml"
KEY = "sk-hostile-0123456789abcdefSECRET"
LIMIT_S = 90



@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any connection or name lookup is recorded and fails."""
    calls: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        calls.append(repr(args[:2]))
        raise AssertionError(f"a connection was attempted: {args[:2]!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return calls


# -- 1. calibration names ---------------------------------------------------------------------

HOSTILE_NAMES = ["../../../../elsewhere/evil.toml", "data/custom/gpus/pwn.toml", "pwn.toml",
                 "a/b", "a\\b", "..", ".", ".hidden", "", "x" * 101, "café", "name with space",
                 "evil.TOML", "/etc/passwd", "nul\x00byte"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_page_name_is_never_a_path(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "cal"
    cal = calib.Calibration(name="x", model="m", gpu="g", eta_bw=0.5)
    with pytest.raises(InputError, match="calibration name"):
        calibration_store.check_name(name)
    with pytest.raises(InputError):
        calibration_store.save_named(cal, name, folder)
    with pytest.raises(InputError):
        calibration_store.load_named(name, folder)
    assert not any(tmp_path.rglob("*")), "nothing may be written for a bad name"


def test_a_good_name_is_saved_inside_the_folder_only(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    cal = calib.Calibration(name="rtx-4090_v1.2", model="m", gpu="g", eta_bw=0.5)
    path = calibration_store.save_named(cal, cal.name)
    assert path == tmp_path / "cal" / "rtx-4090_v1.2.toml"
    assert calibration_store.load_named("rtx-4090_v1.2").eta_bw == 0.5
    # the command line (a user's own shell) may still name a path
    elsewhere = tmp_path / "mine" / "x.toml"
    assert calibration_store.save(cal, str(elsewhere)) == elsewhere


def test_only_names_are_listed(tmp_path: Path) -> None:
    for stem in ("good-one", "x.toml", ".hidden", "sp ace"):
        (tmp_path / f"{stem}.toml").write_text("", encoding="utf-8")
    assert calibration_store.saved_calibrations(tmp_path) == ["good-one"]


@pytest.mark.parametrize("name", ["pwn.toml", "../../etc/passwd", "a/b", ".hidden"])
def test_a_link_names_a_calibration_never_a_file(name: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pwn.toml").write_text(BUNDLED_CAL.read_text(encoding="utf-8"),
                                       encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # 'pwn.toml' was read from the working folder as a path
    state, notices = decode({"calibration": name}, default_catalog())
    assert state.calibration == ""
    assert any("calibration" in n for n in notices)


def _results_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    monkeypatch.setenv("CAPACITY_CUSTOM_DIR", str(tmp_path / "custom"))
    monkeypatch.chdir(tmp_path / "cwd")
    at = AppTest.from_file(APP, default_timeout=60).switch_page("pages/results.py")
    at.run()
    assert not at.exception
    at.multiselect(key="r_reference").set_value(
        [at.multiselect(key="r_reference").options[0]]).run()
    assert not at.exception
    return at


@pytest.mark.parametrize("name", ["../../../../elsewhere/evil.toml",
                                  "data/custom/gpus/pwn.toml", "evil.toml"])
def test_results_page_refuses_a_path_as_a_name(name: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cwd" / "data" / "custom" / "gpus").mkdir(parents=True)
    at = _results_page(tmp_path, monkeypatch)
    at.text_input(key="r_cal_name").set_value(name)
    at.button(key="r_fit").click().run()
    assert not at.exception
    assert any("calibration name" in e.value for e in at.error)
    # a fitted calibration carrying a hostile name (e.g. from an older session) is not saved
    at.session_state["results_fitted_calibration"] = calib.Calibration(
        name=name, model="mistral-7b-v0.3-bf16", gpu="rtx-4090", eta_bw=0.5)
    at.run()
    at.button(key="r_save").click().run()
    assert not at.exception
    assert any("calibration name" in e.value for e in at.error)
    written = [p for p in tmp_path.rglob("*.toml")]
    assert written == [], f"a page wrote {written}"
    assert not (tmp_path / "cwd" / name).resolve().exists()


# -- 15. CAPACITY_CALIBRATIONS_DIR ------------------------------------------------------------

@pytest.fixture
def own_calibrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "my-calibrations"
    folder.mkdir()
    text = BUNDLED_CAL.read_text(encoding="utf-8").replace(
        'name = "rtx-4090-vllm-published"', 'name = "only-in-my-folder"')
    (folder / "only-in-my-folder.toml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(folder))
    monkeypatch.setenv(catalog_custom.ENV_VAR, str(tmp_path / "custom"))
    catalog_custom.clear_caches()
    yield folder
    catalog_custom.clear_caches()


def test_plan_reads_calibrations_from_the_configured_folder(
        own_calibrations: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--calibration", "only-in-my-folder", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["calibration"] == "only-in-my-folder"


def test_explorer_reads_calibrations_from_the_configured_folder(own_calibrations: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["calibration"] = "only-in-my-folder"
    at.run()
    assert not at.exception
    assert any("only-in-my-folder" in o for o in at.selectbox(key="ex_calibration").options)
    assert at.selectbox(key="ex_calibration").value == "only-in-my-folder"
    assert any("calibrated with 'only-in-my-folder'" in c.value for c in at.caption)


# -- 2. the Measure page is closed by default -------------------------------------------------

INTERNAL = ["http://10.0.0.7:8000/v1", "http://169.254.169.254/latest", "http://[fd00::1]:80/v1",
            "http://db.internal:5432/v1", "http://192.168.1.1/v1", "http://2130706433:80/v1",
            "http://[::ffff:127.0.0.1]:80/v1", "http://localhost.evil.example:80/v1"]


@pytest.mark.parametrize("url", INTERNAL)
def test_closed_by_default_refuses_before_connecting(url: str, no_network: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def no_child(*a: Any, **k: Any) -> Any:
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", no_child)
    guard = measure_guard({})
    with pytest.raises(InputError, match="not loopback") as first:
        connect_check(url, KEY, guard=guard)
    with pytest.raises(InputError, match="not loopback"):
        BenchJob.start(MeasureForm(base_url=url), KEY, guard=guard)
    # the same answer for any port of the host: open, closed or not HTTP cannot be told apart
    other_port = url.replace(":8000", ":22").replace(":80/", ":81/").replace(":5432", ":1")
    with pytest.raises(InputError) as second:
        connect_check(other_port, KEY, guard=guard)
    assert str(first.value) == str(second.value)
    assert no_network == []


def test_allow_list_and_open_are_explicit(no_network: list[str]) -> None:
    listed = measure_guard({"CAPACITY_MEASURE_ALLOW_HOSTS": "gpu1.lan"})
    check_url("http://gpu1.lan:8000/v1", listed)
    with pytest.raises(InputError, match="not in CAPACITY_MEASURE_ALLOW_HOSTS"):
        connect_check("http://10.0.0.7:8000/v1", guard=listed)
    check_url("http://10.0.0.7:8000/v1", measure_guard({"CAPACITY_MEASURE": "open"}))
    for typo in ("opne", "yes please"):  # a typo never opens a deployment
        with pytest.raises(InputError, match="not one of closed, open, off"):
            check_url("http://127.0.0.1:8000/v1", measure_guard({"CAPACITY_MEASURE": typo}))
    assert no_network == []


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "localhost", "LOCALHOST",
                                  "[::1]", "localhost."])
def test_loopback_stays_open_for_local_endpoints_and_the_simulator(host: str) -> None:
    url = f"http://{host}:8123/v1"
    check_url(url, measure_guard({}))
    assert is_loopback(host)
    listed = measure_guard({"CAPACITY_MEASURE_ALLOW_HOSTS": "gpu1.lan"})
    check_url(url, listed, [url])  # the simulator the app started


def test_measure_page_refuses_an_internal_host_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[str]) -> None:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    at = AppTest.from_file(APP, default_timeout=60).switch_page("pages/measure.py")
    at.run()
    assert not at.exception
    assert any("only endpoints on this machine" in c.value for c in at.caption)
    for url in ("http://10.0.0.7:8000/v1", "http://169.254.169.254/v1"):
        at.text_input(key="m_base_url").set_value(url)
        at.button(key="m_connect").click().run()
        assert any("not loopback" in e.value for e in at.error)
        assert not at.metric  # no reachable / auth / model report at all
        at.button(key="m_start").click().run()
        assert any("not loopback" in e.value for e in at.error)
    assert no_network == []


# -- 3. the API key never reaches disk or output ----------------------------------------------

class _Echo(BaseHTTPRequestHandler):
    """An OpenAI-like server that echoes the Authorization header everywhere it can."""

    protocol_version = "HTTP/1.1"
    counter = itertools.count()

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        auth = self.headers.get("Authorization", "")
        self._send(200, json.dumps({"object": "list", "echo": auth, "data": [
            {"id": "echo-model"}, {"id": auth}, {"id": auth.removeprefix("Bearer ")}]}).encode(),
            "application/json")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        auth = self.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        n = next(self.counter) % 4
        if n == 0:  # an error body with the header, the bare key, and one cut inside the key
            self._send(500, f"you sent {auth!r} i.e. {key}; {'x' * 170}{key}".encode(),
                       "text/plain")
            return
        if n == 1:  # an error event inside a 200 stream
            body = f"data: {json.dumps({'error': {'message': f'bad key {key} / {auth}'}})}\n\n"
        elif n == 2:  # a 400 whose body names the key (the client retries without options)
            self._send(400, json.dumps({"error": key}).encode(), "application/json")
            return
        else:  # a good stream whose id and finish reason echo the key
            chunks = [{"id": key, "choices": [{"index": 0, "delta": {"content": "tok"},
                                               "finish_reason": None}]}] * 4
            chunks.append({"id": key, "choices": [{"index": 0, "delta": {},
                                                   "finish_reason": key}]})
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._send(200, body.encode(), "text/event-stream")


@pytest.fixture
def echo_server() -> Iterator[str]:
    _Echo.counter = itertools.count()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _leaks(text: str) -> list[str]:
    """The pieces of KEY (8 characters or more) found in `text`."""
    return [KEY[i:i + 8] for i in range(len(KEY) - 7) if KEY[i:i + 8] in text]


def _files_leak(root: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        text = p.read_bytes().decode("utf-8", errors="replace")
        if p.suffix == ".parquet":  # compressed: read the values back
            text += repr(duckdb.sql(f"SELECT * FROM read_parquet('{p}')").fetchall())
        if leaks := _leaks(text):
            found[str(p.relative_to(root))] = leaks
    return found


def test_bench_cli_never_writes_or_prints_an_echoed_key(
        echo_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--base-url", echo_server, "--api-key", KEY, "--concurrency", "1,2",
                 "--requests", "8", "--warmup", "1", "--prompt-chars", "40", "--max-tokens", "4",
                 "--timeout", "10", "--label", "echo", "--out", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "every warm-up request failed" in out.err  # the warm-up message was printed...
    assert "[redacted]" in out.err  # ...with the key taken out
    assert _leaks(out.out + out.err) == []
    assert _files_leak(tmp_path) == {}
    (run_dir,) = (tmp_path / "echo").iterdir()
    rows = (run_dir / "requests.csv").read_text(encoding="utf-8")
    assert "[redacted]" in rows and "http_error" in rows and "error_event" in rows
    meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    assert meta["args"]["max_tokens"] == 4  # every non-secret argument is kept
    assert meta["args"]["prompt_chars"] == 40 and meta["args"]["timeout_s"] == 10
    assert meta["server_models"]["data"][0]["id"] == "echo-model"


@pytest.mark.parametrize("case", ["models-error", "warmup-403"])
def test_bench_errors_do_not_carry_the_key(case: str, tmp_path: Path) -> None:
    def route(request: httpx.Request) -> httpx.Response:
        auth = request.headers.get("authorization", "")
        if request.url.path.endswith("/models"):
            if case == "models-error":
                raise httpx.ReadError(f"peer said {auth} {'y' * 180}{KEY}")
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(403, text=f"forbidden: {KEY} ({auth})")

    def emit(msg: str) -> None:
        assert _leaks(msg) == [], msg

    cfg = BenchConfig(base_url="http://127.0.0.1:9/v1", concurrency=(1,), requests=1,
                      warmup=1, prompt_chars=20, max_tokens=2, timeout_s=10, label="err",
                      out_dir=str(tmp_path))
    with pytest.raises(BenchError) as err:
        asyncio.run(run_bench(cfg, KEY, emit=emit, transport=httpx.MockTransport(route)))
    assert "[redacted]" in str(err.value) and _leaks(str(err.value)) == [], str(err.value)
    assert _files_leak(tmp_path) == {}


def test_measure_job_log_and_tail_never_show_the_key(echo_server: str, tmp_path: Path) -> None:
    form = MeasureForm(base_url=echo_server, concurrency=(1,), requests=4, prompt_chars=40,
                       max_tokens=4, label="echo-job", warmup=1, timeout_s=10.0,
                       out_dir=str(tmp_path / "bench"))
    job = BenchJob.start(form, KEY, cwd=ROOT, guard=measure_guard({}))
    try:
        job.wait(timeout_s=LIMIT_S - 30)
        log = job.log_path.read_text(encoding="utf-8", errors="replace")
        assert job.returncode == 0, log
        assert "[redacted]" in log and _leaks(log) == []
        assert _leaks(job.log_tail(lines=1000)) == []
        assert KEY not in " ".join(job.proc.args if isinstance(job.proc.args, list) else [])
    finally:
        job.stop(grace_s=5)
    assert _files_leak(tmp_path) == {}


def test_log_tail_redacts_what_the_child_did_not(tmp_path: Path) -> None:
    job = BenchJob(form=MeasureForm(base_url="http://127.0.0.1:1/v1"),
                   proc=subprocess.Popen([sys.executable, "-c", "pass"]), cwd=tmp_path,
                   log_path=tmp_path / "log", before=set(), started_unix_s=0.0,
                   secrets=(KEY,))
    job.proc.wait(timeout=30)
    (tmp_path / "log").write_text(f"Traceback: header {KEY}\nAuthorization: Bearer other\n"
                                  f"cut {KEY[:10]}", encoding="utf-8")
    tail = job.log_tail()
    assert _leaks(tail) == [] and "Bearer other" not in tail and KEY[:10] not in tail


@pytest.mark.parametrize("text", [f"Bearer {KEY}", f"bearer%20{KEY}", json.dumps({"k": KEY}),
                                  f"x{KEY}y", f"cut at {KEY[:6]}",
                                  "Authorization: Bearer another-token-of-someone"])
def test_redact_takes_out_keys_and_bearer_tokens(text: str) -> None:
    out = redact(text, [KEY])
    assert "[redacted]" in out and _leaks(out) == [] and "another-token" not in out


def test_scrub_drops_secret_fields_only(tmp_path: Path) -> None:
    args = {"max_tokens": 4, "prompt_chars": 9, "ignore_eos": True, "api_key": KEY,
            "Authorization": KEY, "password": KEY, "access_token": KEY, "token": KEY}
    assert scrub(args) == {"max_tokens": 4, "prompt_chars": 9, "ignore_eos": True}
    with RunWriter(tmp_path, "w", secrets=[KEY]) as w:
        w.write_meta({"args": args, "note": f"echo {KEY}"})
    meta = json.loads((w.dir / "meta.json").read_text(encoding="utf-8"))
    assert meta["args"] == {"max_tokens": 4, "prompt_chars": 9, "ignore_eos": True}
    assert meta["note"] == "echo [redacted]"


# -- 4. bounded sizes -------------------------------------------------------------------------

@pytest.mark.parametrize("flags, says", [
    (["--concurrency", "1000000000"], "--concurrency 1000000000 is above the limit"),
    (["--prompt-chars", "2000000000"], "--prompt-chars 2000000000 is above the limit"),
    (["--request-rate", "1e-9"], "more than the limit of 86400 s"),
    (["--requests", "1000000000"], "--requests 1000000000 is above the limit"),
    (["--max-tokens", "1000000000"], "--max-tokens 1000000000 is above the limit"),
    (["--warmup", "1000000000"], "--warmup 1000000000 is above the limit"),
    (["--timeout", "1e12"], "--timeout 1e+12 s is above the limit"),
    (["--request-rate", "1e12"], "--request-rate 1e+12 requests/s is above the limit"),
    (["--gpus", "1000000000"], "--gpus 1000000000 is above the limit"),
    (["--concurrency", ",".join(map(str, range(1, 200)))], "levels is more than the limit"),
    (["--concurrency", "10000", "--requests", "10000", "--prompt-chars", "4000000"],
     "characters held at once"),
    (["--seed", "4294967296"], "--seed must be between"),
])
def test_bench_flags_beyond_limits_are_refused_in_one_line(
        flags: list[str], says: str, capsys: pytest.CaptureFixture[str],
        no_network: list[str], tmp_path: Path) -> None:
    code = main(["bench", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path),
                 *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and says in err, err
    assert no_network == [] and not any(tmp_path.iterdir())


@pytest.mark.parametrize("change, says", [
    ({"concurrency": (PAGE_LIMITS.concurrency + 1,)}, "concurrency"),
    ({"requests": PAGE_LIMITS.requests + 1}, "requests"),
    ({"prompt_chars": PAGE_LIMITS.prompt_chars + 1}, "prompt_chars"),
    ({"max_tokens": PAGE_LIMITS.max_tokens + 1}, "max_tokens"),
    ({"warmup": PAGE_LIMITS.warmup + 1}, "warmup"),
    ({"timeout_s": PAGE_LIMITS.timeout_s * 2}, "timeout_s"),
])
def test_the_page_has_lower_limits(change: dict[str, Any], says: str) -> None:
    assert PAGE_LIMITS.concurrency < CLI_LIMITS.concurrency
    with pytest.raises(InputError, match=f"{says} .* above the limit"):
        MeasureForm(base_url="http://127.0.0.1:8000/v1", **change).validate()


def test_measure_page_refuses_a_level_beyond_its_limit(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    at = AppTest.from_file(APP, default_timeout=60).switch_page("pages/measure.py")
    at.run()
    at.text_input(key="m_levels").set_value("1,1000000000")
    at.button(key="m_start").click().run()
    assert not at.exception
    assert any("above the limit of 512" in e.value for e in at.error)
    # the prompt lengths (a comma list) are held to the page's limit one by one
    at.text_input(key="m_levels").set_value("1")
    at.text_input(key="m_prompts").set_value(f"1000,{PAGE_LIMITS.prompt_chars + 1}")
    at.button(key="m_start").click().run()
    assert not at.exception
    assert any(f"prompt_chars {PAGE_LIMITS.prompt_chars + 1} is above the limit" in e.value
               for e in at.error)


def test_no_client_is_made_per_slot_up_front(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = httpx.AsyncClient

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, *a: Any, **k: Any) -> None:
            made.append(1)
            super().__init__(*a, **k)

    def route(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        body = ("data: " + json.dumps({"choices": [{"delta": {"content": "t"},
                                                    "finish_reason": "length"}]})
                + "\n\ndata: [DONE]\n\n")
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=body.encode())

    monkeypatch.setattr(transport.httpx, "AsyncClient", Counting)
    cfg = BenchConfig(base_url="http://127.0.0.1:9/v1", concurrency=(5000,), requests=3,
                      warmup=0, prompt_chars=10, max_tokens=1, out_dir=str(tmp_path),
                      label="lazy")
    result = asyncio.run(run_bench(cfg, transport=httpx.MockTransport(route),
                                   emit=lambda m: None))
    assert result.summaries[0].requests_ok == 3
    assert len(made) <= 3, f"{len(made)} clients for 3 requests"


_INTS = st.one_of(st.integers(-5, 5), st.integers(-(10**12), 10**12),
                  st.sampled_from([0, 1, 256, 257, 10_000, 10_001, 2**32, 2**63]))
_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.0, -1.0, 1e-9, 1e-3, 86_400.0, 86_401.0, 1e308]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conc=_INTS, requests=_INTS, chars=_INTS, tokens=_INTS, warmup=_INTS, gpus=_INTS,
       seed=_INTS, timeout=_FLOATS, rate=st.one_of(st.none(), _FLOATS))
def test_fuzzed_bench_sizes_run_within_limits_or_are_refused_in_one_line(
        conc: int, requests: int, chars: int, tokens: int, warmup: int, gpus: int, seed: int,
        timeout: float, rate: float | None) -> None:
    """Any value of bench's numeric flags: the run starts only within CLI_LIMITS; anything
    else is one line and exit 2, never a traceback (the run itself is replaced)."""
    started: list[BenchConfig] = []

    async def fake_run(cfg: BenchConfig, api_key: str | None = None, **_: Any) -> Any:
        started.append(cfg)  # run_bench's other keywords (meta_extra, find_max) are not used
        raise BenchError("stopped by the test")

    argv = ["bench", "--base-url", "http://127.0.0.1:9/v1", "--out", "/nonexistent/h15a",
            "--concurrency", str(conc), "--requests", str(requests), "--prompt-chars",
            str(chars), "--max-tokens", str(tokens), "--warmup", str(warmup), "--gpus",
            str(gpus), "--seed", str(seed), "--timeout", repr(timeout)]
    if rate is not None:
        argv += ["--request-rate", repr(rate)]
    err = io.StringIO()
    with mock.patch("capacity.cli.bench.run_bench", fake_run), \
            contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    assert code == 2
    if started:
        (cfg,) = started
        lim = CLI_LIMITS
        assert 1 <= max(cfg.concurrency) <= lim.concurrency
        assert 1 <= cfg.requests <= lim.requests and 1 <= cfg.prompt_chars <= lim.prompt_chars
        assert 1 <= cfg.max_tokens <= lim.max_tokens and 0 <= cfg.warmup <= lim.warmup
        assert 1 <= cfg.gpus <= lim.gpus and 0 < cfg.timeout_s <= lim.timeout_s
        assert cfg.request_rate is None or (
            0 < cfg.request_rate <= lim.request_rate_rps
            and cfg.requests / cfg.request_rate <= lim.schedule_s)
        assert "stopped by the test" in err.getvalue()
    else:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err.getvalue(), err.getvalue()


class _FakeSim:
    """What SimRegistry reads of a SimServer: its configuration, liveness and pid."""

    def __init__(self, model: str, pid: int) -> None:
        self.model, self.gpu, self.speedup = model, "rtx-4090", 1.0
        self.proc = type("P", (), {"pid": pid})()
        self.running = True

    def stop(self, grace_s: float = 5.0) -> None:
        self.running = False


def test_simulators_are_bounded_and_started_once_per_configuration() -> None:
    # issue 29: any visitor could start simulators without limit (about 125 MB each)
    from capacity.bench.job import MAX_SIMULATORS, SimRegistry

    assert 1 <= MAX_SIMULATORS <= 8
    reg = SimRegistry(max_running=2)
    started: list[str] = []

    def start(model: str) -> Any:
        started.append(model)
        return _FakeSim(model, 1000 + len(started))

    a = reg.find_or_start("m-a", "rtx-4090", 1.0, lambda: start("m-a"))
    assert reg.find_or_start("m-a", "rtx-4090", 1.0, lambda: start("m-a")) is a
    reg.find_or_start("m-b", "rtx-4090", 1.0, lambda: start("m-b"))
    with pytest.raises(InputError, match="2 simulated endpoints are running"):
        reg.find_or_start("m-c", "rtx-4090", 1.0, lambda: start("m-c"))
    assert started == ["m-a", "m-b"]  # the refused one started nothing
    reg.stop(a.proc.pid)
    reg.find_or_start("m-c", "rtx-4090", 1.0, lambda: start("m-c"))
    assert started == ["m-a", "m-b", "m-c"]
