"""Worker processes of the benchmark client: `capacity bench --workers N` (docs/bench.md).

One Python process with one event loop tops out at a few hundred streams on a small machine:
its loop lags, its timestamps go late and the level it was asked for is never in flight. With
N workers, each a process with its own event loop and its own connections, a level's streams
are spread over N cores; this process (the coordinator) keeps the run's files and hands out
the work:
- closed loop: the level's slots are split between the workers (worker w gets
  `level // N`, plus one for the first `level % N`); a slot that is free takes the next
  request index from a shared counter (the credits), so the level's requests go to whichever
  worker has a free slot, and exactly `requests` are sent;
- open loop: the arrival schedule is drawn up front (`capacity.bench.client.arrival_schedule`),
  request i goes to worker i mod N with its send time, relative to a start time a little ahead
  (so every worker is waiting when it comes); each worker caps its own share of the level's
  concurrency.
Every record comes back to the coordinator as it ends and is written to requests.csv at once,
with its `worker_id` and the worst loop lag of its worker while it ran; at the level's end each
worker reports its CPU time and loop lag, and `client_bound` is judged per worker
(`capacity.bench.metrics.judge_workers`).

Each worker runs the event loop `loop_for(--event-loop)` picks: by default asyncio's where the
kernel's receive times can be read (Linux), so its token times are kernel stamps as in a
one-process run, else uvloop where installed. Workers are started with
the `spawn` method (safe with threads, and under pytest), ignore
SIGINT (Ctrl-C reaches the coordinator, which stops them), and are terminated when the run
ends for any reason; a worker whose coordinator was killed outright (SIGKILL) exits by itself
within a quarter of a second. A worker that dies is reported as a BenchError naming it and its exit
code, within a fraction of a second; the coordinator never waits on a dead worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Collection, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from capacity.bench.config import BenchConfig
from capacity.bench.metrics import ClientLoad, RequestRecord
from capacity.bench.runner import Compat, Runner, drive_level, split_slots
from capacity.bench.storage import redact
from capacity.bench.transport import client_pool, fetch_models
from capacity.errors import BenchError
from capacity.netstamp import SO_TIMESTAMPNS

START_AHEAD_S = 0.1
"""The level starts this long after its orders are sent, so every worker is waiting (s)."""
POLL_S = 0.2
"""How often the coordinator checks that its workers live while it waits for records (s)."""
START_TIMEOUT_S = 120.0
"""Longest a worker may take to start and make its first request (s)."""
PARENT_POLL_S = 0.25
"""How often a worker checks that the coordinator still lives (s)."""
STOP_WAIT_S = 5.0
"""How long a worker may take to stop when asked, before it is terminated (s)."""


def default_workers() -> int:
    """Worker processes by default: one per core this process may run on (1 on one core)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call (macOS, Windows)
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True, kw_only=True)
class LevelOrder:
    """What one worker runs of one level."""

    level: int
    """The level's concurrency (stored in every record)."""
    slots: int
    """This worker's share of it: streams at once."""
    indices: range
    """The request indices of the level (closed loop: the credits all workers draw from, in
    order)."""
    rate: float | None
    arrivals: tuple[tuple[int, float], ...]
    """Open loop: this worker's requests, (index, seconds after the start)."""
    start_unix_s: float
    """When the level starts, wall clock."""
    stream_options: bool
    ignore_eos: bool


@dataclass(frozen=True, kw_only=True)
class WorkerDone:
    """A worker's report at the end of a level."""

    worker_id: int
    load: ClientLoad
    dropped: tuple[str, ...]
    """Optional request fields it dropped (the server rejected them)."""


def _credits(counter: Any, indices: range) -> Iterator[int]:
    """The shared counter as an iterator of request indices, until all of `indices` are
    taken (by this worker or the others)."""
    while True:
        with counter.get_lock():
            j = int(counter.value)
            if j >= len(indices):
                return
            counter.value = j + 1
        yield indices[j]


async def _serve(worker_id: int, cfg: BenchConfig, api_key: str | None, model: str,
                 run_id: str, orders: Any, results: Any, counter: Any) -> None:
    loop = asyncio.get_running_loop()
    async with contextlib.AsyncExitStack() as stack:
        clients = client_pool(stack, cfg)
        runner = Runner(cfg, api_key, clients, model, None, lambda m: None,
                         run_id=run_id, worker_id=worker_id)
        # one request before saying ready: the first one pays for lazy imports and the
        # connection setup, which would otherwise land in the first level's loop lag
        first = await clients.get()
        with contextlib.suppress(BenchError):
            await fetch_models(first, cfg.base_url, api_key,
                               deadline_s=cfg.timeout_s + cfg.connect_timeout_s)
        clients.put(first)
        results.put(("ready", worker_id, None))
        while True:
            order: LevelOrder | None = await loop.run_in_executor(None, orders.get)
            if order is None:
                return
            runner.compat.stream_options = order.stream_options
            runner.compat.ignore_eos = order.ignore_eos
            t0_ns = time.perf_counter_ns() + int((order.start_unix_s - time.time()) * 1e9)
            delay = (t0_ns - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)

            def done(rec: RequestRecord) -> None:
                results.put(("record", worker_id, rec))

            load = await drive_level(runner, level=order.level, slots=order.slots,
                                     requests=len(order.indices), rate=order.rate,
                                     arrivals=order.arrivals, t0_ns=t0_ns,
                                     take=_credits(counter, order.indices), done=done)
            results.put(("done", worker_id, WorkerDone(
                worker_id=worker_id, load=load, dropped=tuple(runner.compat.dropped))))


def _exit_with(parent_pid: int) -> None:
    """Exit this process as soon as `parent_pid` is no longer its parent (the coordinator was
    killed, e.g. by SIGKILL, and cannot stop it): a worker never outlives its run."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(3)


def loop_for(choice: str) -> str:
    """The event loop a worker runs for `BenchConfig.event_loop`: `auto` is asyncio's where the
    kernel's receive times can be read (`capacity.netstamp.SO_TIMESTAMPNS`: Linux), so every
    token time is a kernel stamp, else uvloop where it is installed; otherwise as asked, with
    asyncio where uvloop is not installed."""
    if choice == "asyncio" or (choice == "auto" and SO_TIMESTAMPNS is not None):
        return "asyncio"
    return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"


def _run_loop(main: Coroutine[Any, Any, None], loop: str) -> None:
    """`main` on uvloop (its event loop, in C, costs a worker a fraction of asyncio's CPU per
    stream, but its sockets give no kernel stamps) or asyncio's, as `loop_for` chose."""
    if loop == "uvloop":
        import uvloop
        uvloop.run(main)
    else:
        asyncio.run(main)


def worker_main(worker_id: int, cfg: BenchConfig, api_key: str | None, model: str,
                run_id: str, orders: Any, results: Any, counter: Any, parent_pid: int) -> None:
    """A worker process: run the levels it is sent until it gets None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    threading.Thread(target=_exit_with, args=(parent_pid,), daemon=True,
                     name="parent-watch").start()
    try:
        _run_loop(_serve(worker_id, cfg, api_key, model, run_id, orders, results, counter),
                  loop_for(cfg.event_loop))
    except BaseException as exc:  # report, then die: the coordinator names the worker
        text = redact(f"{type(exc).__name__}: {exc}", (api_key,) if api_key else ())
        with contextlib.suppress(Exception):
            results.put(("error", worker_id, text[:300]))
            results.close()
            results.join_thread()
        raise SystemExit(1) from None


class WorkerPool:
    """N worker processes for one run; `start`, then `run_level` per level, then `close`."""

    def __init__(self, cfg: BenchConfig, api_key: str | None, *, model: str, run_id: str
                 ) -> None:
        self.cfg = cfg
        self.n = cfg.workers
        ctx = mp.get_context("spawn")
        self._results: Any = ctx.Queue()
        self._counter: Any = ctx.Value("q", 0)
        self._orders: list[Any] = [ctx.Queue() for _ in range(self.n)]
        self._procs = [ctx.Process(
            target=worker_main, name=f"capacity-bench-worker-{w}", daemon=True,
            args=(w, cfg, api_key, model, run_id, self._orders[w], self._results,
                  self._counter, os.getpid())) for w in range(self.n)]
        self._started = False

    async def start(self) -> None:
        """Start the processes and wait until each is ready (they import the client, which
        takes a moment each), so that the first level starts with all of them."""
        loop = asyncio.get_running_loop()
        for p in self._procs:
            await loop.run_in_executor(None, p.start)
        self._started = True
        ready: set[int] = set()
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(ready) < self.n:
            if time.monotonic() > deadline:
                late = sorted(set(range(self.n)) - ready)
                raise BenchError(f"bench worker(s) {', '.join(map(str, late))} not ready after "
                                 f"{START_TIMEOUT_S:g} s (their first request to the server "
                                 "did not finish)")
            for kind, wid, payload in await loop.run_in_executor(None, self._get):
                if kind == "ready":
                    ready.add(wid)
                elif kind == "error":
                    raise BenchError(f"bench worker {wid} failed to start: {payload}")
            self._check_alive(ready, "start")

    def _check_alive(self, answered: Collection[int], when: str) -> None:
        for w, p in enumerate(self._procs):
            if w not in answered and not p.is_alive():
                raise BenchError(f"bench worker {w} died (exit code {p.exitcode}) at {when}; "
                                 "the finished requests are kept")

    def _get(self) -> list[tuple[str, int, Any]]:
        """The messages waiting (blocks up to POLL_S for the first)."""
        try:
            out = [self._results.get(timeout=POLL_S)]
        except queue.Empty:
            return []
        with contextlib.suppress(queue.Empty):
            while len(out) < 1000:
                out.append(self._results.get_nowait())
        return out

    async def run_level(self, *, level: int, slots: int, indices: range, rate: float | None,
                        arrivals: Sequence[tuple[int, float]] | None, compat: Compat,
                        on_record: Callable[[RequestRecord], None]) -> dict[int, ClientLoad]:
        """Run one level (`slots` streams at once, the requests `indices`; open loop: the
        `arrivals`, pairs of index and seconds after the start) on every worker; each record
        goes to `on_record` as it arrives. Returns each worker's load; BenchError when a worker
        dies or fails."""
        shares = split_slots(slots, self.n)
        self._counter.value = 0
        start = time.time() + START_AHEAD_S
        for w in range(self.n):
            mine = tuple(arrivals[w::self.n]) if arrivals is not None else ()
            self._orders[w].put(LevelOrder(
                level=level, slots=shares[w], indices=indices, rate=rate, arrivals=mine,
                start_unix_s=start, stream_options=compat.stream_options,
                ignore_eos=compat.ignore_eos))
        loop = asyncio.get_running_loop()
        loads: dict[int, ClientLoad] = {}
        while len(loads) < self.n:
            for kind, wid, payload in await loop.run_in_executor(None, self._get):
                if kind == "record":
                    on_record(payload)
                elif kind == "done":
                    loads[wid] = payload.load
                    for f in payload.dropped:
                        if f not in compat.dropped:
                            compat.dropped.append(f)
                            setattr(compat, f, False)
                else:
                    raise BenchError(f"bench worker {wid} failed at level {level}: {payload}")
            self._check_alive(loads, f"level {level}")
        return loads

    def close(self, *, graceful: bool = True) -> None:
        """Stop every worker: ask and wait a little (`graceful`, between levels), then
        terminate (and kill) the rest; an interrupted run terminates them at once."""
        if not self._started:
            return
        for q, p in zip(self._orders, self._procs, strict=True):
            if p.is_alive() and graceful:
                with contextlib.suppress(Exception):
                    q.put(None)
        deadline = time.monotonic() + (STOP_WAIT_S if graceful else 0.0)
        for p in self._procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self._procs:
            if p.is_alive():
                p.terminate()
                p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)
        for q in [*self._orders, self._results]:
            q.close()
            q.cancel_join_thread()
        self._started = False
