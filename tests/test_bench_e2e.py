"""The benchmark client end to end against the real simulated endpoint on a loopback port."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest

from capacity.bench.store import RunStore
from capacity.cli.main import main
from capacity.model.scenario import make_scenario
from capacity.sim.server import SimConfig, create_app, serve_in_thread

# subprocesses and real-time runs of several seconds each: outside the quick loop
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SEED = make_scenario()  # Qwen3.5-9B AWQ on an RTX 4090, 53 slots at 8K


@contextlib.contextmanager
def sim_process(*flags: str) -> Iterator[str]:
    """`capacity sim-server` in its own process (no GIL shared with the client) on a free
    loopback port; yields its base URL and stops it afterwards.

    The real CLI entry point (`python -m capacity`), which imports only the subcommand it runs:
    the others import pandas, DuckDB and SciPy (5-8 s of a loaded 2-core machine per start).
    """
    proc = subprocess.Popen([sys.executable, "-m", "capacity", "sim-server", "--port", "0",
                             *flags], cwd=str(ROOT), stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
        assert match, f"sim-server did not start: {line}"
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def truth_of(url: str) -> dict[str, dict[str, Any]]:
    reqs = httpx.get(url.removesuffix("/v1") + "/sim/truth").json()["requests"]
    return {t["id"]: t for t in reqs}


@dataclass(frozen=True)
class ChapterRun:
    code: int
    out: str
    run_id: str
    summary: pd.DataFrame
    reqs: pd.DataFrame
    truth: list[dict[str, Any]]
    """The server's truth of each stored request, in the same order."""
    out_dir: Path = Path()


@pytest.fixture(scope="module")
def chapter(tmp_path_factory: pytest.TempPathFactory) -> ChapterRun:
    """The chapter's command, scaled down: fewer requests, a 4,000-character prompt and
    --speedup 2 on the server (TTFT ~180 ms, TPOT ~3.4 ms), run once for the
    functional test and the timing test below."""
    out_dir = tmp_path_factory.mktemp("chapter")
    with sim_process("--speedup", "2") as url, contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["bench", "--base-url", url, "--concurrency", "2,4", "--requests", "8",
                     "--prompt-chars", "4000", "--max-tokens", "64", "--label", "capacity-8k",
                     "--out", str(out_dir), "--gpu", "rtx-4090"])
        truth = truth_of(url)
    [run_dir] = list((out_dir / "capacity-8k").iterdir())
    assert {p.name for p in run_dir.iterdir()} == {"requests.csv", "summary.csv", "meta.json",
                                                   "requests.parquet"}
    with RunStore(out_dir) as store:
        assert store.warnings == []
        summary = store.summary(run_dir.name)
        reqs = store.requests(run_dir.name)
    return ChapterRun(code=code, out=out.getvalue(), run_id=run_dir.name, summary=summary,
                      reqs=reqs, truth=[truth[r] for r in reqs["response_id"]],
                      out_dir=out_dir)


def test_chapter_command_runs_and_stores_what_it_measured(chapter: ChapterRun) -> None:
    assert chapter.code == 0
    assert "TTFT p50 ms" in chapter.out and "CNY per M tok" in chapter.out
    summary, reqs = chapter.summary, chapter.reqs
    assert list(summary["concurrency"]) == [2, 4]
    assert list(summary["requests_ok"]) == [8, 8]
    assert (summary["cost_per_mtok"] > 0).all()
    assert set(reqs["output_tokens_source"]) == {"usage"} and set(reqs["output_tokens"]) == {64}
    assert set(reqs["prompt_tokens"]) == {1000}
    assert {t["clock"] for t in chapter.truth} == {"real"}
    assert {t["output_tokens"] for t in chapter.truth} == {64}
    # the truth starts when the server has read the body and ends at the simulated emission,
    # which the server never delivers early: the client's TTFT can only be longer, on any
    # machine however busy
    assert (reqs["ttft_ms"] > np.array([t["ttft_ms"] for t in chapter.truth])).all()
    # the summary is exactly the stored requests' statistics
    for level in (2, 4):
        mine = summary[summary["concurrency"] == level].iloc[0]
        sel = reqs[reqs["concurrency"] == level]
        assert mine["ttft_p50_ms"] == pytest.approx(np.median(sel["ttft_ms"]), rel=1e-9)
        assert mine["tpot_p50_ms"] == pytest.approx(np.median(sel["tpot_ms"]), rel=1e-9)
        assert mine["ttft_p99_ms"] == pytest.approx(np.percentile(sel["ttft_ms"], 99),
                                                    rel=1e-9)


def test_a_sped_up_simulator_is_recorded_and_not_calibrated_on(
        chapter: ChapterRun, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's /metrics says its --speedup; the run records it (meta.json's
    engine_info.sim_speedup), warns that its times are that many times shorter than the
    simulated GPU's, and `capacity calibrate --label` refuses it rather than fit a GPU twice
    as fast as the one simulated."""
    import json

    from capacity.bench.storage import run_warnings

    meta = json.loads((chapter.out_dir / "capacity-8k" / chapter.run_id / "meta.json")
                      .read_text())
    assert meta["engine_info"]["engine"] == "capacity sim-server"
    assert meta["engine_info"]["sim_speedup"] == 2.0
    assert meta["engine_info"]["sim_engine"] == "chapter"   # its scheduling, from /sim/info
    assert any("--speedup 2: every time measured is 2 times shorter" in w
               for w in run_warnings(meta))
    assert "--speedup 2: every time measured" in chapter.out
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(chapter.out_dir))
    code = main(["calibrate", "--label", "capacity-8k", "--model", "qwen3.5-9b-awq",
                 "--gpu", "rtx-4090"])
    err = capsys.readouterr().err
    assert code == 2 and "measured capacity sim-server at --speedup 2" in err


TTFT_ERR_LIMIT = 0.10
"""The client's median TTFT error, as a share of the true median TTFT (see the test)."""
TPOT_ERR_LIMIT = 0.10
"""The client's median TPOT error (absolute), as a share of the true median TPOT."""


@pytest.mark.timing
def test_client_timing_error_against_the_truth(chapter: ChapterRun,
                                               record_property: Any) -> None:
    """The benchmark client's own timing error: its TTFT and TPOT minus the server's truth,
    paired by response id, medians over the 16 requests (one comparison, not one per level and
    metric: each extra median of 8 was another chance for a descheduled client to fail).

    Only real time can test this, so it depends on the machine: the truth is simulated time
    (a stall of the server delays delivery, not the truth), and the error is everything
    between the simulated emission and the client's clock: the server's delivery delay,
    loopback, the client's SSE parsing and scheduling. 64 output tokens: a first token read
    10 ms late moves a request's TPOT by 1/63 of that.

    Noise floor (benchmarks/flaky_timing.py, 2026-11-30, the 2-core dev machine, which other
    test suites shared): the TTFT error / true TTFT had p50 1.3% and max 2.3% over 10 runs
    without a hog, p50 1.8% and max 3.3% over 20 runs with both cores hogged; the TPOT error /
    true TPOT p50 0.9% and max 2.3% without, p50 0.8% and max 5.2% with. Hence 10% on each:
    3x and 2x the worst seen under load. A client that adds a tenth to what it measures fails
    here; one that measures too little (a TTFT below the truth) fails the functional test above.
    """
    true_ttft = np.array([t["ttft_ms"] for t in chapter.truth])
    true_tpot = np.array([t["tpot_ms"] for t in chapter.truth])
    err_ttft = chapter.reqs["ttft_ms"].to_numpy() - true_ttft
    err_tpot = chapter.reqs["tpot_ms"].to_numpy() - true_tpot
    ttft_rel = float(np.median(err_ttft) / np.median(true_ttft))
    tpot_rel = float(abs(np.median(err_tpot)) / np.median(true_tpot))
    record_property("ttft_err_rel", ttft_rel)
    record_property("tpot_err_rel", tpot_rel)
    assert ttft_rel < TTFT_ERR_LIMIT, (np.median(err_ttft), np.median(true_ttft))
    assert tpot_rel < TPOT_ERR_LIMIT, (np.median(err_tpot), np.median(true_tpot))


@pytest.mark.timing
def test_concurrency_150_is_reached(tmp_path: Path) -> None:
    """httpx's default pool (100) would cap this; the server must see a batch of 150.

    A slow card (50 GB/s: every decode step >= 114 ms whatever the batch) and few tokens keep
    each request in flight for ~2.5 s with little CPU, so one wave of 150 shows the connection
    handling, not the 2-core machine.

    Launching the wave (150 new connections, 150 requests built on one event loop) takes
    0.1 s on an idle machine and over 0.6 s on a loaded one; that launch is in the level's
    duration but not in any request's E2E (the clock starts at the first byte sent), so
    achieved concurrency (sum of E2E / duration) fell to ~118 under load and a 0.85 x 150
    bound failed although all 150 streams were in flight together. The checks below are
    the property itself: the server's largest batch, every request still running when the
    last one was sent, and an achieved concurrency no 100-connection cap could reach.
    """
    with sim_process("--ctx", "2048", "--bandwidth", "50", "--speedup", "1.5") as url:
        code = main(["bench", "--base-url", url, "--concurrency", "150", "--requests", "150",
                     "--prompt-chars", "100", "--max-tokens", "24", "--warmup", "0",
                     "--label", "c150", "--out", str(tmp_path)])
        info = httpx.get(url.removesuffix("/v1") + "/sim/info").json()
    assert code == 0
    assert info["slots"] == 214 and info["max_batch_seen"] == 150
    with RunStore(tmp_path) as store:
        row = store.query("SELECT * FROM summaries").iloc[0]
        reqs = store.query("SELECT start_unix_s, e2e_ms FROM requests")
    assert row["requests_ok"] == 150
    # at most 100 in flight at any instant would give at most 100
    assert row["achieved_concurrency"] > 110
    # every request was in flight at the moment the last one started
    last_start = reqs["start_unix_s"].max()
    assert (reqs["start_unix_s"] + reqs["e2e_ms"] / 1e3 > last_start).all()


def test_faults_are_recorded_with_their_types(tmp_path: Path) -> None:
    cfg = SimConfig(speedup=50, fail_http=0.1, fail_disconnect=0.1, fail_error_event=0.1,
                    fail_stall=0.1, seed=7)
    app = create_app(SEED, cfg)
    with serve_in_thread(app) as url:
        code = main(["bench", "--base-url", url, "--concurrency", "8", "--requests", "40",
                     "--prompt-chars", "200", "--max-tokens", "8", "--warmup", "0",
                     "--timeout", "0.5", "--label", "faults", "--out", str(tmp_path)])
        injected = dict(app.state.sim.fault_counts)
    assert code == 0
    with RunStore(tmp_path) as store:
        got = store.query("SELECT error_type, count(*) AS n FROM requests WHERE NOT success "
                          "GROUP BY 1")
        ok = store.query("SELECT count(*) AS n FROM requests WHERE success")["n"].iloc[0]
    counts = dict(zip(got["error_type"], got["n"], strict=True))
    expected = {"http_error": injected["http_error"], "disconnected": injected["disconnect"],
                "error_event": injected["error_event"], "timeout": injected["stall"]}
    assert sum(expected.values()) > 0
    assert counts == {k: v for k, v in expected.items() if v}
    assert ok == 40 - sum(expected.values())


def test_killed_run_leaves_loadable_csvs_and_no_key(tmp_path: Path) -> None:
    """SIGKILL halfway: the CSVs load; the API key (from the environment) is in no file."""
    key = "sk-test-NEVER-WRITE-ME-1234"
    app = create_app(SEED, SimConfig(speedup=50, api_key=key))
    env = {**os.environ, "OPENAI_API_KEY": key, "PYTHONPATH": str(ROOT)}
    with serve_in_thread(app) as url:
        proc = subprocess.Popen(  # the CLI with only `bench` registered (see sim_process)
            [sys.executable, "-m", "capacity", "bench", "--base-url", url,
             "--concurrency", "2",
             "--requests", "5000", "--prompt-chars", "100", "--max-tokens", "4",
             "--label", "killed", "--out", str(tmp_path)],
            env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            csv_path = None
            while time.monotonic() < deadline:
                found = list(tmp_path.glob("killed/*/requests.csv"))
                if found and found[0].read_text().count("\n") > 21:
                    csv_path = found[0]
                    break
                time.sleep(0.05)
            assert csv_path is not None, "the run never wrote 20 rows"
            proc.send_signal(signal.SIGKILL)
            out = proc.communicate(timeout=10)[0].decode()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        with httpx.Client() as c:  # a second, completed run with --api-key
            assert c.get(url + "/models").status_code == 401
        assert main(["bench", "--base-url", url, "--api-key", key, "--requests", "3",
                     "--concurrency", "1", "--max-tokens", "2", "--label", "keyed",
                     "--out", str(tmp_path)]) == 0
    with RunStore(tmp_path) as store:
        runs = store.list_runs()
        killed = runs[runs["label"] == "killed"].iloc[0]
        # meta.json still says "running" (it never got to write "finished"), but its process
        # is gone, so every reader shows it interrupted (docs/reliability.md)
        assert killed["status"] == "interrupted"
        assert len(store.requests(killed["run_id"])) >= 20
        assert store.summary(killed["run_id"]).empty
        assert (store.requests(killed["run_id"])["success"]).all()
    assert key not in out
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
