"""Run `capacity bench` (and the simulated endpoint) as background processes for the Measure page.

- `BenchJob` starts the child for one or more forms (`capacity.bench.form.MeasureForm`), one
  after the other, each in its own process group; it finds the run folder the child creates,
  reads its progress from the incrementally written `requests.csv` (`read_progress`) and stops
  it with SIGINT (the client marks the run "interrupted" and keeps every finished request), then
  SIGTERM, then SIGKILL, each after a bounded wait. Neither the API key nor the base URL (which
  may carry a password) appears on the child's command line: they go to the child through the
  environment variables OPENAI_API_KEY and CAPACITY_BENCH_BASE_URL only (the bench client
  writes the key nowhere, the URL only redacted).
- `SimServer` starts `python -m capacity sim-server` on a free loopback port; `SimRegistry`
  holds the ones this process started and `JobRegistry` its measurements, each with the user
  who started it and bounded (`MAX_SIMULATORS`, `MAX_JOBS`): with sign-in a user sees and
  stops only their own, an admin everyone's (`capacity.access`, docs/sign-in.md).

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
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx

from capacity import workspace
from capacity.access import AccessDenied
from capacity.bench.form import MeasureForm
from capacity.bench.guard import Guard, check_not_foreign, check_url
from capacity.bench.storage import RUN_USER_ENV, new_run_id, redact, run_secrets
from capacity.bench.transport import auth_headers
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

def _child_env(api_key: str | None, started_by: str = "", base_url: str = ""
               ) -> dict[str, str]:
    """The child's environment: the API key and the base URL (only there: a URL may carry a
    password, and a command line is in every local user's process list), and who started the
    run (`RUN_USER_ENV`, meta.json's `started_by`); none of them inherited from the app's own."""
    env = dict(os.environ)
    for name in (workspace.OPENAI_API_KEY, workspace.CAPACITY_BENCH_BASE_URL, RUN_USER_ENV):
        env.pop(name, None)
    if api_key:
        env[workspace.OPENAI_API_KEY] = api_key
    if base_url:
        env[workspace.CAPACITY_BENCH_BASE_URL] = base_url
    if started_by:
        env[RUN_USER_ENV] = started_by
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


def _spawn(form: MeasureForm, api_key: str | None, root: Path, python: str, started_by: str = ""
           ) -> tuple[subprocess.Popen[bytes], Path, set[Path], str]:
    """Start `capacity bench` for one form in its own process group, its output in a temporary
    log; returns the process, the log, the run folders of its label that existed before and
    the run id the job gave the child (`--run-id`): two jobs of the same label started at the
    same moment each find their own folder, never the other's (issue 29). `started_by`: the
user the run's meta.json names as its owner ('' none)."""
    before = _run_dirs(root / form.out_dir, form.label)
    run_id = new_run_id()
    fd, name = tempfile.mkstemp(prefix="capacity-bench-", suffix=".log")
    os.close(fd)
    with open(name, "wb") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen([*form.argv(python), "--run-id", run_id], cwd=root,
                                env=_child_env(api_key, started_by, form.base_url), stdin=subprocess.DEVNULL,
                                stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return proc, Path(name), before, run_id


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
    """The API key, in memory only (the first item, when there is one), and the secrets of
    the base URLs (`run_secrets`): redacted from the log the page shows."""
    has_key: bool = False
    """Whether `secrets` starts with the API key (the next child's key)."""

    queue: tuple[MeasureForm, ...] = ()
    """Forms still to run after this one (the other prompt lengths), one child at a time."""
    done_dirs: tuple[Path, ...] = ()
    """The run folders of the forms already run."""
    position: int = 1
    """Which form of the job runs now, 1-based (of `total`)."""
    total: int = 1
    python: str = sys.executable
    run_id: str | None = None
    """The id the job gave the current child's run (`--run-id`); None: found by `before`."""
    started_by: str = ""
    """The user its runs' meta.json name as their owner (`capacity.access.RUN_OWNER_KEY`)."""

    @classmethod
    def start(cls, form: MeasureForm | Sequence[MeasureForm], api_key: str | None = None, *,
              cwd: str | os.PathLike[str] = ".", python: str = sys.executable,
              guard: Guard | None = None, simulator_urls: Sequence[str] = (),
              started_by: str = "", foreign_ports: Collection[int] = ()) -> BenchJob:
        """Validate the form(s) and start the first child (the key goes in its environment
        only); several forms (`per_prompt`) run one after the other, the next when the one
        before finished. With `guard`, a URL it refuses raises InputError before any process
        starts; a URL that reaches another user's simulator (`foreign_ports`:
        `SimRegistry.foreign_ports`) raises AccessDenied (`check_not_foreign`). `started_by`:
        the user each run's meta.json names as its owner ('' none: without sign-in)."""
        forms = (form,) if isinstance(form, MeasureForm) else tuple(form)
        if not forms:
            raise InputError("nothing to measure: give at least one prompt length")
        auth_headers(api_key)   # a key no header can carry: refused here, not by the child
        for f in forms:
            f.validate()
            if guard is not None:
                check_url(f.base_url, guard, simulator_urls)
            check_not_foreign(f.base_url, foreign_ports)
        root = Path(cwd)
        proc, log, before, run_id = _spawn(forms[0], api_key, root, python, started_by)
        job = cls(form=forms[0], proc=proc, cwd=root, log_path=log, before=before,
                  started_unix_s=time.time(),
                  secrets=tuple(dict.fromkeys(
                      s for f in forms for s in run_secrets(api_key, f.base_url))),
                  has_key=bool(api_key),
                  queue=forms[1:], total=len(forms), python=python, run_id=run_id,
                  started_by=started_by)
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
        self.proc, self.log_path, self.before, self.run_id = _spawn(
            nxt, self.secrets[0] if self.has_key else None, self.cwd, self.python,
            self.started_by)
        self.form, self.run_dir, self.position = nxt, None, self.position + 1

    def run_dirs(self) -> list[Path]:
        """Every run folder the job has created so far, in the order run."""
        d = self.find_run_dir()
        return [*self.done_dirs, *([d] if d is not None else [])]

    def find_run_dir(self) -> Path | None:
        """The run folder the child created (None until it has)."""
        if self.run_dir is None and self.run_id is not None:
            mine = self.cwd / self.form.out_dir / self.form.label / self.run_id
            self.run_dir = mine if mine.is_dir() else None
        elif self.run_dir is None:
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
MAX_SIMULATORS_PER_USER = 2
"""With sign-in, simulated endpoints one user runs at once (`find_or_start(per_owner=...)`), so
one user cannot take every slot of `MAX_SIMULATORS`."""
MAX_JOBS = 4
"""Measurements (`capacity bench` children) one app process runs at once (`JobRegistry`)."""
MAX_JOBS_PER_USER = 2
"""With sign-in, measurements one user runs at once (`JobRegistry.start(per_owner=...)`)."""


def _mine(owner: str, scope: str | None) -> bool:
    """Whether what `owner` started is within `scope` (None: everyone's)."""
    return scope is None or owner == scope


class SimRegistry:
    """The simulated endpoints this process started, by pid, newest last, each with its owner
    (the user who started it; '' without sign-in): they outlive the browser tab that started
    them (the app stops them when it exits), so a page opened later reattaches to one of its
    owner's (`latest`, `find`) or lists and stops them instead of starting another. A `scope`
    (an owner, or None for everyone's) limits what a call sees and stops (`capacity.access`).
    Entries whose process has ended are dropped on every read. Thread-safe (a Streamlit server
    runs each session's script in its own thread)."""

    def __init__(self, max_running: int = MAX_SIMULATORS) -> None:
        self._lock = threading.Lock()
        self._starting = threading.Lock()
        self._by_pid: dict[int, tuple[str, SimServer]] = {}
        self.max_running = max_running

    def find_or_start(self, model: str, gpu: str, speedup: float,
                      start: Callable[[], SimServer], *, owner: str = "",
                      per_owner: int | None = None) -> SimServer:
        """The owner's live simulator of this configuration, else a new one from `start()`,
        added as theirs; InputError (nothing started) when `max_running` already run, or the
        owner already runs `per_owner`. One start at a time, so two sessions pressing Start
        together cannot both pass the limit."""
        with self._starting:
            found = self.find(model, gpu, speedup, scope=owner)
            if found is not None:
                return found
            live = len(self.running())
            if live >= self.max_running:
                raise InputError(f"{live} simulated endpoints are running, the most this app "
                                 f"starts (about 125 MB each): stop one first")
            theirs = len(self.running(owner))
            if per_owner is not None and theirs >= per_owner:
                raise InputError(f"you run {theirs} simulated endpoints, the most one user "
                                 "starts: stop one first")
            return self.add(start(), owner)

    def add(self, server: SimServer, owner: str = "") -> SimServer:
        with self._lock:
            self._by_pid[server.proc.pid] = (owner, server)
        return server

    def _live(self) -> list[tuple[str, SimServer]]:
        with self._lock:
            for pid in [p for p, (_, s) in self._by_pid.items() if not s.running]:
                del self._by_pid[pid]
            return list(self._by_pid.values())

    def running(self, scope: str | None = None) -> list[SimServer]:
        """The live ones within `scope` (an owner; None: everyone's), oldest first (ended ones
        are forgotten)."""
        return [s for o, s in self._live() if _mine(o, scope)]

    def foreign_ports(self, scope: str | None) -> frozenset[int]:
        """The loopback ports of the live simulators outside `scope` (another user's; none for
        None, an admin's or the local user's scope): a measurement or Connect against one is
        refused (`capacity.bench.guard.check_not_foreign`)."""
        return frozenset(s.port for o, s in self._live() if not _mine(o, scope))

    def owner(self, server: SimServer) -> str | None:
        """Who started a live one (None when it is not this registry's, or has ended)."""
        return next((o for o, s in self._live() if s is server), None)

    def latest(self, scope: str | None = None) -> SimServer | None:
        live = self.running(scope)
        return live[-1] if live else None

    def find(self, model: str, gpu: str, speedup: float, *, scope: str | None = None
             ) -> SimServer | None:
        """A live one with this configuration within `scope` (the newest), None if none."""
        return next((s for s in reversed(self.running(scope))
                     if (s.model, s.gpu, s.speedup) == (model, gpu, speedup)), None)

    def stop(self, pid: int, grace_s: float = 5.0, *, scope: str | None = None) -> None:
        """Stop the one with this pid and forget it (nothing when there is none); with a
        `scope`, AccessDenied when it is someone else's (nothing stopped)."""
        with self._lock:
            entry = self._by_pid.get(pid)
            if entry is not None and not _mine(entry[0], scope):
                raise AccessDenied("this simulated endpoint was started by another user: "
                                   "only they or an admin may stop it")
            self._by_pid.pop(pid, None)
        if entry is not None:
            entry[1].stop(grace_s)

    def stop_all(self, grace_s: float = 5.0) -> None:
        for s in self.running():
            self.stop(s.proc.pid, grace_s)


MAX_RECENT_JOBS = 8
"""Ended measurements a `JobRegistry` keeps listing (`JobRegistry.visible`), newest first, so a
tab opened after a run ended still sees how it ended and where it was stored."""


@dataclass(frozen=True, kw_only=True)
class OwnedJob:
    """A measurement in a `JobRegistry`: its number there, its owner and the job; `ended_unix_s`
    is when the registry saw it end (None while it runs)."""

    number: int
    owner: str
    job: BenchJob
    ended_unix_s: float | None = None


class JobRegistry:
    """The measurements this process runs, each with its owner (the user who started it; ''
    without sign-in), bounded (`max_running` at once, `per_owner` per user when given). A
    browser session keeps its own job; the registry lets every tab of its user (a reloaded or
    new one too), and an admin, follow and stop it (`visible`, `stop`): runs are the
    deployment's, not a tab's (issue 28). A `scope` (an owner, or None for everyone's) limits
    what a call sees and stops. On every read, ended jobs leave the running ones and join the
    `keep_ended` most recent. Thread-safe."""

    def __init__(self, max_running: int = MAX_JOBS, keep_ended: int = MAX_RECENT_JOBS) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[int, tuple[str, BenchJob]] = {}
        self._ended: list[OwnedJob] = []
        """Ended jobs, newest first, at most `keep_ended`."""
        self._next = 1
        self.max_running = max_running
        self.keep_ended = keep_ended

    def start(self, owner: str, start: Callable[[], BenchJob], *,
              per_owner: int | None = None) -> BenchJob:
        """A new job from `start()`, registered as `owner`'s; InputError (nothing started)
        when `max_running` jobs, or `per_owner` of this owner's, already run. One start at a
        time, so two sessions cannot both pass the limit."""
        with self._lock:
            live = self._prune()
            if len(live) >= self.max_running:
                raise InputError(f"{len(live)} measurements are running, the most this app "
                                 "runs at once: wait for one to finish or stop one")
            theirs = sum(1 for o, _ in live.values() if o == owner)
            if per_owner is not None and theirs >= per_owner:
                raise InputError(f"you run {theirs} measurements, the most one user runs at "
                                 "once: wait for one to finish or stop one")
            job = start()
            self._jobs[self._next] = (owner, job)
            self._next += 1
            return job

    def _prune(self) -> dict[int, tuple[str, BenchJob]]:
        now = time.time()
        for n in [n for n, (_, j) in self._jobs.items() if not j.running]:
            owner, job = self._jobs.pop(n)
            self._ended.insert(0, OwnedJob(number=n, owner=owner, job=job, ended_unix_s=now))
        del self._ended[self.keep_ended:]
        return dict(self._jobs)

    def running(self, scope: str | None = None) -> list[OwnedJob]:
        """The live jobs within `scope`, oldest first."""
        with self._lock:
            live = self._prune()
        return [OwnedJob(number=n, owner=o, job=j) for n, (o, j) in live.items()
                if _mine(o, scope)]

    def visible(self, scope: str | None = None) -> list[OwnedJob]:
        """What a tab of `scope` lists: the live jobs within it, oldest first, then the recent
        ended ones within it, newest first (at most `keep_ended` kept in all)."""
        with self._lock:
            live = self._prune()
            ended = list(self._ended)
        return [*(OwnedJob(number=n, owner=o, job=j) for n, (o, j) in live.items()
                  if _mine(o, scope)), *(e for e in ended if _mine(e.owner, scope))]

    def stop(self, number: int, *, scope: str | None = None, grace_s: float = 5.0) -> None:
        """Stop the job with this number, keeping what it measured (nothing when there is
        none); with a `scope`, AccessDenied when it is someone else's (nothing stopped)."""
        with self._lock:
            entry = self._jobs.get(number)
            if entry is not None and not _mine(entry[0], scope):
                raise AccessDenied("this measurement was started by another user: only they "
                                   "or an admin may stop it")
        if entry is not None:
            entry[1].stop(grace_s)
