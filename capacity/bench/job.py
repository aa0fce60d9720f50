"""Run `capacity bench` (and the simulated endpoint) as background processes for the Measure page.

- `BenchJob` starts the child for one or more forms (`capacity.bench.form.MeasureForm`), one
  after the other, each in its own process group; it finds the run folder the child creates,
  reads its progress from the incrementally written `requests.csv` (`read_progress`) and stops
  it with SIGINT (the client marks the run "interrupted" and keeps every finished request), then
  SIGTERM, then SIGKILL, each after a bounded wait. The API key never appears on the child's
  command line: it goes to the child through the environment variable OPENAI_API_KEY only (the
  bench client writes it nowhere).
- `SimServer` starts `python -m capacity sim-server` on a free loopback port; `SimRegistry`
  holds the ones this process started.

The page's other parts: the form (`capacity.bench.form`), the guard (`capacity.bench.guard`),
the Connect check (`capacity.bench.connect`).
"""

from __future__ import annotations

import atexit
import csv
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx

from capacity import workspace
from capacity.bench.form import MeasureForm
from capacity.bench.guard import Guard, check_url
from capacity.bench.storage import redact
from capacity.errors import InputError

# ---------------------------------------------------------------------------------------------
# progress from requests.csv

@dataclass(frozen=True, kw_only=True)
class LevelProgress:
    """One concurrency level as measured so far (medians over successful requests, ms)."""

    concurrency: int
    total: int
    done: int = 0
    ok: int = 0
    errors: int = 0
    ttft_p50_ms: float | None = None
    tpot_p50_ms: float | None = None

    @property
    def fraction(self) -> float:
        """Share of the level's requests that have ended, 0..1."""
        return min(1.0, self.done / self.total) if self.total else 0.0


def _float(raw: str | None) -> float | None:
    try:
        v = float(raw) if raw not in (None, "") else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


def complete_rows(path: Path) -> list[dict[str, str]]:
    """The complete rows of a requests.csv being written: a last line without its newline or
    its row_complete marker (a write in progress, or a killed run) is left out."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    rows = list(csv.DictReader(text.splitlines()))
    return [r for r in rows if r.get("row_complete") == "1"]


def read_progress(path: Path, levels: Sequence[int], requests: int) -> list[LevelProgress]:
    """Done/total, errors and running TTFT/TPOT medians per level from a requests.csv."""
    rows = complete_rows(path)
    out = []
    for c in levels:
        mine = [r for r in rows if r.get("concurrency") == str(c)]
        ok = [r for r in mine if r.get("success") == "true"]
        ttft = [v for r in ok if (v := _float(r.get("ttft_ms"))) is not None]
        tpot = [v for r in ok if (v := _float(r.get("tpot_ms"))) is not None]
        out.append(LevelProgress(
            concurrency=c, total=requests, done=len(mine), ok=len(ok), errors=len(mine) - len(ok),
            ttft_p50_ms=statistics.median(ttft) if ttft else None,
            tpot_p50_ms=statistics.median(tpot) if tpot else None))
    return out


# ---------------------------------------------------------------------------------------------
# background processes

def _child_env(api_key: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(workspace.OPENAI_API_KEY, None)
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> int:
    """SIGINT, then SIGTERM, then SIGKILL, each after up to `grace_s`; returns the exit code."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait(timeout=grace_s)


def _spawn(form: MeasureForm, api_key: str | None, root: Path, python: str
           ) -> tuple[subprocess.Popen[bytes], Path, set[Path]]:
    """Start `capacity bench` for one form in its own process group, its output in a temporary
    log; returns the process, the log and the run folders of its label that existed before."""
    before = _run_dirs(root / form.out_dir, form.label)
    fd, name = tempfile.mkstemp(prefix="capacity-bench-", suffix=".log")
    os.close(fd)
    with open(name, "wb") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(form.argv(python), cwd=root, env=_child_env(api_key),
                                stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return proc, Path(name), before


def _run_dirs(out_dir: Path, label: str) -> set[Path]:
    root = out_dir / label
    return {p for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()


class JobState(StrEnum):
    """Where a Measure job's child process stands (`BenchJob.status`); message keys m_status_*."""

    RUNNING = "running"
    """The child is still measuring."""
    FINISHED = "finished"
    """The child exited with status 0."""
    STOPPED = "stopped"
    """The user stopped it; the requests measured so far are kept."""
    FAILED = "failed"
    """The child exited with an error (its log says why)."""


@dataclass(kw_only=True, eq=False)
class BenchJob:
    """A `capacity bench` child process started from a form."""

    form: MeasureForm
    proc: subprocess.Popen[bytes]
    cwd: Path
    log_path: Path
    before: set[Path]
    started_unix_s: float
    stopped: bool = False
    run_dir: Path | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The API key, in memory only: redacted from the log the page shows."""

    queue: tuple[MeasureForm, ...] = ()
    """Forms still to run after this one (the other prompt lengths), one child at a time."""
    done_dirs: tuple[Path, ...] = ()
    """The run folders of the forms already run."""
    position: int = 1
    """Which form of the job runs now, 1-based (of `total`)."""
    total: int = 1
    python: str = sys.executable

    @classmethod
    def start(cls, form: MeasureForm | Sequence[MeasureForm], api_key: str | None = None, *,
              cwd: str | os.PathLike[str] = ".", python: str = sys.executable,
              guard: Guard | None = None, simulator_urls: Sequence[str] = ()) -> BenchJob:
        """Validate the form(s) and start the first child (the key goes in its environment
        only); several forms (`per_prompt`) run one after the other, the next when the one
        before finished. With `guard`, a URL it refuses raises InputError before any process
        starts."""
        forms = (form,) if isinstance(form, MeasureForm) else tuple(form)
        if not forms:
            raise InputError("nothing to measure: give at least one prompt length")
        for f in forms:
            f.validate()
            if guard is not None:
                check_url(f.base_url, guard, simulator_urls)
        root = Path(cwd)
        proc, log, before = _spawn(forms[0], api_key, root, python)
        job = cls(form=forms[0], proc=proc, cwd=root, log_path=log, before=before,
                  started_unix_s=time.time(), secrets=(api_key,) if api_key else (),
                  queue=forms[1:], total=len(forms), python=python)
        atexit.register(job.stop)  # an app that exits stops its runs (keeping what they measured)
        return job

    def _advance(self) -> None:
        """When the current child finished well and forms remain, start the next one."""
        if self.stopped or not self.queue or self.proc.poll() != 0:
            return
        d = self.find_run_dir()
        self.done_dirs = (*self.done_dirs, *([d] if d is not None else []))
        self.log_path.unlink(missing_ok=True)
        nxt, self.queue = self.queue[0], self.queue[1:]
        self.proc, self.log_path, self.before = _spawn(
            nxt, self.secrets[0] if self.secrets else None, self.cwd, self.python)
        self.form, self.run_dir, self.position = nxt, None, self.position + 1

    def run_dirs(self) -> list[Path]:
        """Every run folder the job has created so far, in the order run."""
        d = self.find_run_dir()
        return [*self.done_dirs, *([d] if d is not None else [])]

    def find_run_dir(self) -> Path | None:
        """The run folder the child created (None until it has)."""
        if self.run_dir is None:
            new = _run_dirs(self.cwd / self.form.out_dir, self.form.label) - self.before
            if new:
                self.run_dir = max(new, key=lambda p: p.name)
        return self.run_dir

    @property
    def running(self) -> bool:
        self._advance()
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        self._advance()
        return self.proc.poll()

    def progress(self) -> list[LevelProgress]:
        """Per-level progress read from the run's requests.csv (zeros before it exists)."""
        d = self.find_run_dir()
        path = d / "requests.csv" if d is not None else Path("/nonexistent/requests.csv")
        return read_progress(path, self.form.concurrency, self.form.requests)

    def status(self) -> JobState:
        """Running, finished, stopped by the user, or failed."""
        rc = self.returncode
        if rc is None:
            return JobState.RUNNING
        if self.stopped:
            return JobState.STOPPED
        return JobState.FINISHED if rc == 0 else JobState.FAILED

    def log_tail(self, lines: int = 12) -> str:
        """The end of the child's output (its error message when it failed), the API key
        redacted (the child redacts what it prints; this covers anything else)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(redact(line, self.secrets)
                         for line in text.strip().splitlines()[-lines:])

    def meta(self) -> dict[str, Any]:
        d = self.find_run_dir()
        try:
            return dict(json.loads((d / "meta.json").read_text())) if d is not None else {}
        except (OSError, ValueError):
            return {}

    def stop(self, grace_s: float = 5.0) -> int:
        """Stop the child keeping what it measured: SIGINT, then SIGTERM, then SIGKILL; the
        forms still queued do not run."""
        if self.running:
            self.stopped = True
        self.queue = ()
        rc = _stop_process(self.proc, grace_s)
        self.log_path.unlink(missing_ok=True)
        return rc

    def wait(self, timeout_s: float) -> int:
        return self.proc.wait(timeout=timeout_s)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(kw_only=True, eq=False)
class SimServer:
    """`capacity sim-server` in a child process on a free loopback port."""

    model: str
    gpu: str
    speedup: float
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def start(cls, model: str, gpu: str, *, speedup: float = 1.0,
              extra_args: Sequence[str] = (), ready_timeout_s: float = 60.0,
              python: str = sys.executable, cwd: str | os.PathLike[str] = ".") -> SimServer:
        """Start the server and wait (bounded) until /v1/models answers."""
        if not (math.isfinite(speedup) and speedup > 0):
            raise InputError(f"speedup must be > 0, got {speedup}")
        port = free_port()
        fd, name = tempfile.mkstemp(prefix="capacity-sim-", suffix=".log")
        os.close(fd)
        argv = [python, "-m", "capacity", "sim-server", "--model", model, "--gpu", gpu,
                "--host", "127.0.0.1", "--port", str(port), "--speedup", f"{speedup:g}",
                *extra_args]
        with open(name, "wb") as log:
            proc = subprocess.Popen(argv, cwd=Path(cwd), env=_child_env(None),
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        server = cls(model=model, gpu=gpu, speedup=speedup, port=port, proc=proc,
                     log_path=Path(name))
        atexit.register(server.stop)  # never outlive the app that started it
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = server.log_tail()
                server.stop()
                raise InputError(f"the simulated endpoint did not start: {tail or 'no output'}")
            try:
                r = httpx.get(server.base_url + "/models", timeout=1.0, trust_env=False)
                if r.status_code in (200, 401, 403):  # up (a key-protected one answers 401)
                    return server
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        server.stop()
        raise InputError(f"the simulated endpoint did not answer within {ready_timeout_s:g} s")

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self, grace_s: float = 5.0) -> None:
        _stop_process(self.proc, grace_s)
        self.log_path.unlink(missing_ok=True)


MAX_SIMULATORS = 4
"""Simulated endpoints one app process runs at once (`SimRegistry.find_or_start`): each is a
Python process of about 125 MB, and any visitor of a shared deployment could start them."""


class SimRegistry:
    """The simulated endpoints this process started, by pid, newest last: they outlive the
    browser tab that started them (the app stops them when it exits), so a page opened later
    reattaches to one (`latest`, `find`) or lists and stops them instead of starting another.
    Entries whose process has ended are dropped on every read. Thread-safe (a Streamlit server
    runs each session's script in its own thread)."""

    def __init__(self, max_running: int = MAX_SIMULATORS) -> None:
        self._lock = threading.Lock()
        self._starting = threading.Lock()
        self._by_pid: dict[int, SimServer] = {}
        self.max_running = max_running

    def find_or_start(self, model: str, gpu: str, speedup: float,
                      start: Callable[[], SimServer]) -> SimServer:
        """The live simulator of this configuration, else a new one from `start()`, added;
        InputError (nothing started) when `max_running` already run. One start at a time, so
        two sessions pressing Start together cannot both pass the limit."""
        with self._starting:
            found = self.find(model, gpu, speedup)
            if found is not None:
                return found
            live = len(self.running())
            if live >= self.max_running:
                raise InputError(f"{live} simulated endpoints are running, the most this app "
                                 f"starts (about 125 MB each): stop one first")
            return self.add(start())

    def add(self, server: SimServer) -> SimServer:
        with self._lock:
            self._by_pid[server.proc.pid] = server
        return server

    def running(self) -> list[SimServer]:
        """The live ones, oldest first (ended ones are forgotten)."""
        with self._lock:
            for pid in [p for p, s in self._by_pid.items() if not s.running]:
                del self._by_pid[pid]
            return list(self._by_pid.values())

    def latest(self) -> SimServer | None:
        live = self.running()
        return live[-1] if live else None

    def find(self, model: str, gpu: str, speedup: float) -> SimServer | None:
        """A live one with this configuration (the newest), None if there is none."""
        return next((s for s in reversed(self.running())
                     if (s.model, s.gpu, s.speedup) == (model, gpu, speedup)), None)

    def stop(self, pid: int, grace_s: float = 5.0) -> None:
        """Stop the one with this pid and forget it (nothing when there is none)."""
        with self._lock:
            server = self._by_pid.pop(pid, None)
        if server is not None:
            server.stop(grace_s)

    def stop_all(self, grace_s: float = 5.0) -> None:
        for s in self.running():
            self.stop(s.proc.pid, grace_s)
