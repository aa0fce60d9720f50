"""Round five of the hostile-input checks (an audit of the shared deployment and the bench
client's hostile servers): servers that trickle a byte now and then, secrets in a base URL,
names that are not names."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from servers_server import MODELS, Request, head, json_answer

from capacity.bench.client import run_bench
from capacity.bench.config import BenchConfig
from capacity.bench.connect import connect_check
from capacity.bench.guard import measure_guard
from capacity.errors import BenchError

A10_TOML = Path(__file__).resolve().parents[2] / "data" / "gpus" / "a10.toml"


def trickle(conn: socket.socket, stop: threading.Event, pause_s: float = 0.2) -> None:
    """A byte now and then, for ever: never a read timeout, never an end."""
    while not stop.is_set():
        conn.sendall(b" ")
        time.sleep(pause_s)


def models_trickle(req: Request, conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(head(200, "application/json"))
    trickle(conn, stop)


def stream_trickle(req: Request, conn: socket.socket, stop: threading.Event) -> None:
    if req.path.endswith("/models"):
        conn.sendall(json_answer(MODELS))
        return
    conn.sendall(head())
    trickle(conn, stop)


@pytest.mark.parametrize("route", [models_trickle, stream_trickle], ids=["models", "stream"])
def test_connect_ends_within_its_timeout_against_a_trickling_server(serve: Any,
                                                                     route: Any) -> None:
    """The Measure page's Connect: a server that sends a space every 0.2 s (its /models body,
    or its streamed answer) held Connect, and the page, for ever; each exchange now ends
    within the timeout, with a report."""
    server = serve(route)
    t0 = time.perf_counter()
    rep = connect_check(server.base_url, timeout_s=1.0, guard=measure_guard({}))
    assert time.perf_counter() - t0 < 4
    assert not rep.ok
    if route is models_trickle:
        assert not rep.reachable and "did not answer in full within 1 s" in rep.message
    else:
        assert rep.models == ("m1",) and not rep.streams and "ReadTimeout" in rep.message


def test_connect_never_shows_the_password_of_the_url(serve: Any) -> None:
    """With CAPACITY_MEASURE=open a URL may carry user info: its password (and a `?key=`
    value) is redacted from Connect's report as it is from a run's files."""
    server = serve(models_trickle)
    url = server.base_url.replace("http://", "http://alice:hunter22secret@") + "?api_key=sk-q1w2e3"
    rep = connect_check(url, timeout_s=0.5, guard=measure_guard({"CAPACITY_MEASURE": "open"}))
    assert "hunter22secret" not in rep.message and "sk-q1w2e3" not in rep.message
    assert "[redacted]" in rep.message


def test_bench_ends_against_a_models_list_that_trickles(tmp_path: Path, serve: Any) -> None:
    """`capacity bench` (and a Measure page run) read /models first: a body that trickles
    forever held the run's start for ever; the exchange now ends within the stall limit and
    the connect timeout, with a one-line error."""
    server = serve(models_trickle)
    cfg = BenchConfig(base_url=server.base_url, concurrency=(1,), requests=1, warmup=0,
                      prompt_chars=50, max_tokens=4, timeout_s=1.0, connect_timeout_s=1.0,
                      out_dir=str(tmp_path), label="h")
    t0 = time.perf_counter()
    with pytest.raises(BenchError, match="did not answer in full within 2 s"):
        asyncio.run(asyncio.wait_for(run_bench(cfg, emit=lambda m: None), timeout=20))
    assert time.perf_counter() - t0 < 6


def test_a_measure_job_redacts_the_urls_password_and_keeps_the_key_for_the_next_run(
        tmp_path: Path) -> None:
    """The page's job log (its tail is shown on the page) named the password of an
    `http://user:pw@host` base URL (open mode) whenever the child printed the URL; and the
    next prompt length's child must still get the API key, not a secret of the URL."""
    from capacity.bench.form import MeasureForm
    from capacity.bench.job import BenchJob

    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "argv: $*"\necho "keylen=${#OPENAI_API_KEY}"\n',
                    encoding="utf-8")
    fake.chmod(0o755)
    url = "http://bob:pw-0123456789@127.0.0.1:9/v1"
    forms = [MeasureForm(base_url=url, prompt_chars=n) for n in (100, 200)]
    job = BenchJob.start(forms, "sk-key-abcdef", cwd=tmp_path, python=str(fake))
    for _ in range(2):
        job.proc.wait(timeout=30)
        tail = job.log_tail()
        assert "pw-0123456789" not in tail and "sk-key-abcdef" not in tail
        assert f"keylen={len('sk-key-abcdef')}" in tail  # the key, not the URL's password
        job._advance()
    job.stop()


# -- a name is a name: no line break at its end, no length a file system refuses ----------------

@pytest.mark.parametrize("bad", ["evil-gpu\n", "a" * 101])
def test_a_catalog_key_with_a_final_line_break_or_too_long_is_refused(tmp_path: Path,
                                                                      bad: str) -> None:
    """`$` matched before a final line feed, so an uploaded `key = "evil-gpu\\n"` was saved as
    `evil-gpu<LF>.toml`; and a key of 300 characters (a config.json's `_name_or_path`) was an
    OSError (file name too long) that the Catalog page showed as a traceback."""
    from capacity.catalog.custom import save_toml
    from capacity.catalog.loader import default_catalog
    from capacity.errors import CatalogError

    text = A10_TOML.read_text(encoding="utf-8").replace(
        'key = "a10"', f"key = {json.dumps(bad)}")
    with pytest.raises(CatalogError, match="must be 1-100 lower-case letters"):
        save_toml(text, default_catalog(), directory=tmp_path)
    assert not list(tmp_path.rglob("*"))


def test_a_catalog_save_that_cannot_write_is_a_message(tmp_path: Path) -> None:
    from capacity.catalog.custom import save_toml
    from capacity.catalog.loader import default_catalog
    from capacity.errors import CatalogError

    (tmp_path / "gpus").write_text("a file where the folder goes", encoding="utf-8")
    text = A10_TOML.read_text(encoding="utf-8").replace(
        'key = "a10"', 'key = "my-a10"')
    with pytest.raises(CatalogError, match="cannot save the custom entry 'my-a10'"):
        save_toml(text, default_catalog(), directory=tmp_path)


@pytest.mark.parametrize("name", ["run\n", "a" * 65])
def test_a_label_or_run_id_with_a_final_line_break_is_refused(name: str) -> None:
    from capacity.bench.storage import check_label, check_run_id
    from capacity.errors import InputError

    with pytest.raises(InputError):
        check_label(name)
    if name.endswith("\n"):  # a run id may be 80 characters long
        with pytest.raises(InputError):
            check_run_id(name)


# -- the closed Measure page: loopback by spelling, never by a resolver's answer ------------------

@pytest.mark.parametrize("host", ["sim.localhost", "db.internal.localhost", "x.localhost."])
def test_a_name_under_localhost_is_not_loopback(host: str) -> None:
    """glibc sends NAME.localhost to DNS (only 'localhost' is in /etc/hosts) and, with a
    search domain, on to NAME.localhost.<domain>: a wildcard record there reaches the internal
    network. The closed page refuses it before anything is resolved; it still counts as this
    machine where that is the safer answer (another user's simulator)."""
    from capacity.access import AccessDenied
    from capacity.bench.guard import check_not_foreign, check_url, is_loopback
    from capacity.errors import InputError

    assert not is_loopback(host)
    with pytest.raises(InputError, match="not loopback"):
        check_url(f"http://{host}:8000/v1", measure_guard({}))
    with pytest.raises(AccessDenied):
        check_not_foreign(f"http://{host}:8123/v1", {8123})


def test_a_host_name_alias_of_this_machine_cannot_reach_another_users_simulator() -> None:
    """In open mode any host passes the guard, and another user's simulator was refused only
    by the host's spelling: the machine's own name (an /etc/hosts alias of 127.0.0.1 on most
    Linux machines), or any name resolving to 127.0.0.1, reached it."""
    import socket as sock

    from capacity.access import AccessDenied
    from capacity.bench.guard import check_not_foreign

    alias = sock.gethostname()
    try:
        here = any(i[4][0] == "127.0.0.1" for i in sock.getaddrinfo(alias, 80))
    except OSError:
        here = False
    if not here:
        pytest.skip(f"this machine's name {alias!r} does not resolve to 127.0.0.1")
    with pytest.raises(AccessDenied):
        check_not_foreign(f"http://{alias}:8123/v1", {8123})
    check_not_foreign(f"http://{alias}:8124/v1", {8123})  # another port: not a simulator


def test_the_measure_pages_run_has_no_url_on_its_command_line(tmp_path: Path) -> None:
    # open mode allows http://user:password@host; its child's command line (in every local
    # user's `ps`) carried the password (an audit, 2026-12-07): the URL now goes through
    # $CAPACITY_BENCH_BASE_URL, as the key through $OPENAI_API_KEY
    from capacity import workspace
    from capacity.bench.form import MeasureForm
    from capacity.bench.job import _child_env

    url = "http://bob:pw-sekrit@127.0.0.1:9/v1"
    argv = MeasureForm(base_url=url).argv()
    assert not any("pw-sekrit" in a or "127.0.0.1:9" in a for a in argv)
    env = _child_env("sk-key", "", url)
    assert env[workspace.CAPACITY_BENCH_BASE_URL] == url
    assert env[workspace.OPENAI_API_KEY] == "sk-key"


def test_bench_measures_the_url_of_its_environment(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from capacity import workspace
    from capacity.cli.bench import config_from_args
    from capacity.cli.main import build_parser

    monkeypatch.setenv(workspace.CAPACITY_BENCH_BASE_URL, "http://127.0.0.1:8123/v1")
    args = build_parser().parse_args(["bench", "--out", str(tmp_path)])
    assert config_from_args(args).base_url == "http://127.0.0.1:8123/v1"
    args = build_parser().parse_args(["bench", "--base-url", "http://127.0.0.1:8124/v1",
                                      "--out", str(tmp_path)])
    assert config_from_args(args).base_url == "http://127.0.0.1:8124/v1"   # the flag wins
    monkeypatch.delenv(workspace.CAPACITY_BENCH_BASE_URL)
    args = build_parser().parse_args(["bench", "--out", str(tmp_path)])
    assert config_from_args(args).base_url == "http://127.0.0.1:8000/v1"
