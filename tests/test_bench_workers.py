"""The benchmark client's worker processes (`capacity bench --workers N`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from capacity.bench.client import run_bench
from capacity.bench.config import BenchConfig
from capacity.bench.metrics import ClientLoad, RequestRecord
from capacity.bench.runner import Compat, split_slots
from capacity.bench.store import RunStore
from capacity.bench.workers import WorkerPool, default_workers, loop_for
from capacity.cli.bench import add_parser, config_from_args
from capacity.errors import BenchError, InputError
from capacity.model.scenario import make_scenario
from capacity.sim.server import SimConfig, create_app, serve_in_thread


def test_split_slots_is_even_and_complete() -> None:
    assert split_slots(8, 3) == [3, 3, 2]
    assert split_slots(1, 2) == [1, 0]
    assert split_slots(1024, 2) == [512, 512]
    for level in range(1, 40):
        for n in range(1, 6):
            parts = split_slots(level, n)
            assert sum(parts) == level and max(parts) - min(parts) <= 1


def test_default_workers_follows_the_cores() -> None:
    assert default_workers() == len(os.sched_getaffinity(0))


def test_cli_default_workers_at_most_the_largest_level() -> None:
    import argparse

    sub = argparse.ArgumentParser().add_subparsers()
    p = add_parser(sub)
    cfg = config_from_args(p.parse_args(["--concurrency", "1", "--out", "x"]))
    assert cfg.workers == 1
    cfg = config_from_args(p.parse_args(["--concurrency", "1,512", "--out", "x"]))
    assert cfg.workers == min(default_workers(), 512)
    cfg = config_from_args(p.parse_args(["--workers", "3", "--out", "x"]))
    assert cfg.workers == 3


def test_the_workers_event_loop_keeps_kernel_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    import capacity.bench.workers as workers
    assert loop_for("asyncio") == "asyncio"
    monkeypatch.setattr(workers, "SO_TIMESTAMPNS", 35)  # Linux: stamps readable
    assert loop_for("auto") == "asyncio"
    monkeypatch.setattr(workers, "SO_TIMESTAMPNS", None)  # elsewhere: uvloop if installed
    has_uvloop = workers.importlib.util.find_spec("uvloop") is not None
    assert loop_for("auto") == ("uvloop" if has_uvloop else "asyncio")
    assert loop_for("uvloop") == ("uvloop" if has_uvloop else "asyncio")
    with pytest.raises(InputError, match="event_loop must be one of auto, asyncio, uvloop, "
                                         "got 'fast'"):
        BenchConfig(base_url="http://127.0.0.1:1/v1", event_loop="fast").validate()  # type: ignore[arg-type]


def test_bad_worker_counts_are_refused() -> None:
    with pytest.raises(InputError, match="workers must be between 1 and"):
        BenchConfig(base_url="http://127.0.0.1:1/v1", workers=0).validate()
    cfg = BenchConfig(base_url="http://127.0.0.1:1/v1", workers=2)
    with pytest.raises(InputError, match="workers=1"):
        asyncio.run(run_bench(cfg, transport=httpx.MockTransport(lambda r: httpx.Response(200)),
                              emit=lambda m: None))


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with serve_in_thread(create_app(make_scenario(), SimConfig(speedup=200))) as url:
        yield url


@pytest.mark.slow  # worker processes start in ~1 s each, more on a loaded machine
@pytest.mark.parametrize("rate", [None, 400.0])
def test_two_workers_share_a_level_and_every_record_is_kept(sim_url: str, tmp_path: Path,
                                                             rate: float | None) -> None:
    cfg = BenchConfig(base_url=sim_url, concurrency=(3, 6), requests=12, max_tokens=4,
                      prompt_chars=100, out_dir=str(tmp_path), workers=2, request_rate=rate,
                      warmup=0)
    result = asyncio.run(run_bench(cfg, emit=lambda m: None))
    assert [s.requests_ok for s in result.summaries] == [12, 12]
    assert all(s.client_cpu_s is not None and s.loop_lag_p50_ms is not None
               for s in result.summaries)
    with RunStore(tmp_path) as st:
        df = st.query("SELECT concurrency, request_index, worker_id, loop_lag_ms, stamp_source "
                      "FROM requests")
    assert len(df) == 24
    # the default event loop in the workers lets every token time be the kernel's (Linux)
    expected = "kernel" if sys.platform.startswith("linux") else "loop"
    assert set(df["stamp_source"]) == {expected}
    meta = json.loads(next(tmp_path.glob("bench/*/meta.json")).read_text())
    assert meta["stamp_sources"] == {expected: 24}
    for level in (3, 6):
        mine = df[df["concurrency"] == level]
        # exactly the level's requests, each sent once, by one of the two workers
        assert sorted(mine["request_index"]) == list(range(12))
        assert set(mine["worker_id"]) <= {0, 1}
    assert df["loop_lag_ms"].notna().all() and (df["loop_lag_ms"] >= 0).all()
    if rate is not None:  # open loop: request i goes to worker i mod 2
        assert (df["worker_id"] == df["request_index"] % 2).all()


def _silent_server() -> tuple[socket.socket, threading.Event]:
    """A loopback server that accepts, answers /models, and never answers a completion."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.1)
        held: list[socket.socket] = []
        try:
            loop(held)
        finally:
            for c in held:
                c.close()

    def loop(held: list[socket.socket]) -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)
            conn.settimeout(2)
            try:
                head = conn.recv(65536)
            except OSError:
                continue
            if head.startswith(b"GET"):
                body = b'{"data":[{"id":"m"}]}'
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(body), body))

    threading.Thread(target=serve, daemon=True).start()
    return srv, stop


@pytest.mark.slow
def test_a_worker_that_dies_is_reported_not_waited_on() -> None:
    srv, stop = _silent_server()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    cfg = BenchConfig(base_url=url, concurrency=(2,), requests=2, workers=2, model="m",
                      timeout_s=60.0)

    async def scenario() -> None:
        pool = WorkerPool(cfg, None, model="m", run_id="t")
        await pool.start()
        try:
            got: list[RequestRecord] = []
            task = asyncio.create_task(pool.run_level(
                level=2, slots=2, indices=range(2), rate=None, arrivals=None,
                compat=Compat(stream_options=True, ignore_eos=True), on_record=got.append))
            await asyncio.sleep(0.5)
            pid = pool._procs[1].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            t0 = time.monotonic()
            with pytest.raises(BenchError, match=r"worker 1 died \(exit code -9\)"):
                await asyncio.wait_for(task, 30)
            assert time.monotonic() - t0 < 10  # seen at the next poll, not at the timeout
        finally:
            pool.close(graceful=False)
        assert not any(p.is_alive() for p in pool._procs)

    try:
        asyncio.run(scenario())
    finally:
        stop.set()
        srv.close()


def test_judge_workers_names_the_bound_worker() -> None:
    from dataclasses import replace

    from capacity.bench.metrics import judge_workers, summarize

    row = summarize([], run_id="r", label="l", concurrency=2, request_rate_rps=None,
                    endpoint="chat", model="m")
    row = replace(row, duration_s=10.0)
    judged = judge_workers(row, {0: ClientLoad(cpu_s=2.0, loop_lag_p50_ms=0.5, loop_lag_p99_ms=3),
                                 1: ClientLoad(cpu_s=9.5, loop_lag_p50_ms=7.0,
                                               loop_lag_p99_ms=40)})
    assert judged.client_bound
    assert judged.client_bound_reason == ("worker 1: client CPU 95% of one core; "
                                          "worker 1: event-loop lag p50 7.0 ms")
    assert judged.client_cpu_s == pytest.approx(11.5)
    assert judged.client_cpu_share == pytest.approx(0.95)
    assert judged.loop_lag_p99_ms == 40
    calm = judge_workers(row, {0: ClientLoad(cpu_s=2.0, loop_lag_p50_ms=0.5, loop_lag_p99_ms=3),
                               1: ClientLoad(cpu_s=3.0, loop_lag_p50_ms=1.0, loop_lag_p99_ms=4)})
    assert not calm.client_bound and calm.client_bound_reason is None
