"""Run `capacity bench` (and the simulated endpoint) as background processes for the Measure page.

- `MeasureForm` holds the page's arguments and turns them into a `python -m capacity bench`
  command line. The API key never appears in it: `BenchJob.start` passes it to the child through
  the environment variable OPENAI_API_KEY only (the bench client writes it nowhere).
- `BenchJob` starts the child in its own process group, finds the run folder it creates, reads
  its progress from the incrementally written `requests.csv` (`read_progress`) and stops it with
  SIGINT (the client marks the run "interrupted" and keeps every finished request), then
  SIGTERM, then SIGKILL, each after a bounded wait.
- `SimServer` starts `python -m capacity sim-server` on a free loopback port.
- `connect_check` reports whether a base URL is reachable, accepts the key, lists models and
  streams a tiny request.
- `measure_guard` / `check_url`: closed by default, so that a shared deployment cannot be used
  to probe its network. Loopback only, unless CAPACITY_MEASURE_ALLOW_HOSTS=host1,host2 lists
  hosts (then only those, and loopback only for the simulator this process started) or
  CAPACITY_MEASURE=open allows any host; CAPACITY_MEASURE=off disables the page. A refused URL
  is refused before anything is connected or resolved (docs/configuration.md).
"""

from __future__ import annotations

import atexit
import csv
import ipaddress
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from capacity import workspace
from capacity.bench.client import MAX_BODY_BYTES, MAX_PASSES, BenchLimits
from capacity.bench.sse import loads_json
from capacity.bench.storage import check_label, redact
from capacity.errors import InputError

MEASURE_ENV = workspace.CAPACITY_MEASURE
ALLOW_HOSTS_ENV = workspace.CAPACITY_MEASURE_ALLOW_HOSTS


# ---------------------------------------------------------------------------------------------
# the guard

class MeasureMode(StrEnum):
    """CAPACITY_MEASURE: how far the Measure page may reach (docs/configuration.md)."""

    CLOSED = "closed"
    """The default: loopback only (127.0.0.0/8, ::1, localhost), plus the hosts of
    CAPACITY_MEASURE_ALLOW_HOSTS when set (then loopback only for the simulator the app
    started, unless the list names it)."""
    OPEN = "open"
    """Any host (a single-user install, or a deployment that trusts every user)."""
    OFF = "off"
    """The page does not measure at all (imports of measurements still work)."""


_MODE_WORDS: dict[str, MeasureMode] = {
    "": MeasureMode.CLOSED, "closed": MeasureMode.CLOSED, "on": MeasureMode.CLOSED,
    "1": MeasureMode.CLOSED, "true": MeasureMode.CLOSED, "yes": MeasureMode.CLOSED,
    "open": MeasureMode.OPEN, "any": MeasureMode.OPEN,
    "off": MeasureMode.OFF, "0": MeasureMode.OFF, "false": MeasureMode.OFF,
    "no": MeasureMode.OFF}


@dataclass(frozen=True, kw_only=True)
class Guard:
    """Whether the Measure page may run, and which hosts it may reach (None: any host)."""

    enabled: bool
    allow_hosts: frozenset[str] | None
    reason: str = ""
    loopback: bool = True
    """Whether any loopback URL is allowed (closed mode without an allow-list)."""


def measure_guard(env: Mapping[str, str] | None = None) -> Guard:
    """Read CAPACITY_MEASURE (closed by default; 'open'; 'off') and
    CAPACITY_MEASURE_ALLOW_HOSTS from `env` (default: the process environment, through
    `capacity.workspace.get`). An unknown CAPACITY_MEASURE value switches measuring off (a
    typo must not open a shared deployment)."""
    switch = workspace.get(MEASURE_ENV, env)
    mode = _MODE_WORDS.get(switch.lower())
    if mode is None:
        return Guard(enabled=False, allow_hosts=frozenset(), loopback=False,
                     reason=f"{MEASURE_ENV}={switch} is not one of closed, open, off: "
                            "measuring stays off until it is")
    if mode == MeasureMode.OFF:
        return Guard(enabled=False, allow_hosts=frozenset(), loopback=False,
                     reason=f"{MEASURE_ENV}={switch} switches measuring off on this "
                            "deployment")
    if mode == MeasureMode.OPEN:
        return Guard(enabled=True, allow_hosts=None)
    raw = workspace.get(ALLOW_HOSTS_ENV, env)
    hosts = frozenset(h.strip().lower().strip("[]") for h in raw.split(",") if h.strip())
    return Guard(enabled=True, allow_hosts=hosts, loopback=not hosts)


def url_host(base_url: str) -> str:
    """The host of an http(s) URL, lower-case; InputError for anything else."""
    try:
        parts = urlsplit(base_url.strip())
        host = parts.hostname
        _ = parts.port  # raises ValueError on a port outside 0-65535
    except ValueError as exc:
        raise InputError(f"base URL '{base_url[:200]}' is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InputError(f"base URL '{base_url[:200]}' must look like http://HOST:PORT/v1 "
                         "(http:// or https:// and a host)")
    return host.lower()


def is_loopback(host: str) -> bool:
    """Whether `host` is loopback by its spelling alone: 'localhost' (or NAME.localhost), an
    IPv4 address in 127.0.0.0/8 or ::1. Nothing is resolved: a name that resolves to loopback
    is not loopback here (a resolver could answer otherwise at connect time)."""
    h = host.lower().strip("[]").rstrip(".")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def check_url(base_url: str, guard: Guard, simulator_urls: Sequence[str] = ()) -> None:
    """InputError unless the guard allows `base_url`; nothing is connected or resolved.

    Closed (the default): loopback only; with CAPACITY_MEASURE_ALLOW_HOSTS, the listed hosts
    and, on loopback, only a simulator this process started (its URL in `simulator_urls`).
    Open: any host. The refusal names no more than the host the user typed."""
    host = url_host(base_url)
    if not guard.enabled:
        raise InputError(guard.reason or "measuring is switched off on this deployment")
    if guard.allow_hosts is None or host in guard.allow_hosts:
        return
    if is_loopback(host) and (guard.loopback or base_url.strip().rstrip("/") in
                              {u.rstrip("/") for u in simulator_urls}):
        return
    if guard.allow_hosts:
        raise InputError(f"host '{host}' is not in {ALLOW_HOSTS_ENV} "
                         f"({', '.join(sorted(guard.allow_hosts))}): this deployment only "
                         "measures those hosts (and the simulator it started on loopback)")
    raise InputError(f"host '{host}' is not loopback: this deployment measures only "
                     f"127.0.0.1/localhost unless {ALLOW_HOSTS_ENV} lists more hosts or "
                     f"{MEASURE_ENV}=open (docs/configuration.md)")


# ---------------------------------------------------------------------------------------------
# the form -> the bench command line

PAGE_LIMITS = BenchLimits(concurrency=256, levels=16, requests=10_000, prompt_chars=1_000_000,
                          max_tokens=100_000, warmup=100, gpus=1_024, timeout_s=3_600.0,
                          prompt_chars_in_flight=64_000_000)
"""The Measure page's limits, lower than `capacity bench`'s (a shared deployment runs what its
users ask for): docs/reliability.md."""

@dataclass(frozen=True, kw_only=True)
class MeasureForm:
    """The Measure page's arguments for `capacity bench` (no API key: it is never stored)."""

    base_url: str
    model: str | None = None
    concurrency: tuple[int, ...] = (1, 4, 16)
    requests: int = 32
    prompt_chars: int = 1000
    max_tokens: int = 128
    label: str = "measure"
    endpoint: str = "chat"
    warmup: int = 1
    passes: int = 1
    """Passes through the levels, forward then backward (`capacity bench --passes`)."""
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    gpu: str | None = None
    gpus: int = 1
    gpu_price: float | None = None
    currency: str | None = None
    predict_model: str | None = None
    request_rate: float | None = None
    """Open loop: Poisson arrivals at this rate, requests/s, capped by each level's
    concurrency (`capacity bench --request-rate`); None: a closed loop of C clients."""
    timeout_s: float = 600.0
    workload: str | None = None
    """A preset of data/workloads.toml whose lengths, shared prefix and (open loop) bursts
    each request draws (`capacity bench --workload`); None: every prompt has `prompt_chars`."""
    out_dir: str = field(default_factory=lambda: str(workspace.bench_dir()))
    """Where the run is stored (default: the workspace's bench folder, docs/configuration.md)."""

    def validate(self) -> None:
        """InputError naming the first bad field."""
        url_host(self.base_url)
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise InputError("concurrency levels must be whole numbers >= 1, e.g. 1,4,16")
        for name, v in (("requests", self.requests), ("prompt chars", self.prompt_chars),
                        ("max tokens", self.max_tokens), ("GPUs", self.gpus)):
            if v < 1:
                raise InputError(f"{name} must be >= 1, got {v}")
        if self.warmup < 0:
            raise InputError(f"warm-up must be >= 0, got {self.warmup}")
        if not 1 <= self.passes <= min(MAX_PASSES, self.requests):
            raise InputError(f"passes must be between 1 and {min(MAX_PASSES, self.requests)} "
                             f"(at most {MAX_PASSES}, and no more than the requests), got "
                             f"{self.passes}")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise InputError(f"timeout must be > 0 s, got {self.timeout_s}")
        if self.request_rate is not None and not (math.isfinite(self.request_rate)
                                                  and self.request_rate > 0):
            raise InputError(f"request rate must be > 0 requests/s, got {self.request_rate}")
        PAGE_LIMITS.check(concurrency=self.concurrency, requests=self.requests,
                          prompt_chars=self.prompt_chars, max_tokens=self.max_tokens,
                          warmup=self.warmup, gpus=self.gpus, timeout_s=self.timeout_s,
                          request_rate=self.request_rate, flags=False)
        check_label(self.label)
        if self.workload is not None:
            from capacity.model.traffic import preset

            preset(self.workload)  # InputError listing the presets

    def argv(self, python: str = sys.executable) -> list[str]:
        """The child's command line (the API key is never part of it)."""
        a = [python, "-m", "capacity", "bench", "--base-url", self.base_url,
             "--concurrency", ",".join(str(c) for c in self.concurrency),
             "--requests", str(self.requests), "--prompt-chars", str(self.prompt_chars),
             "--max-tokens", str(self.max_tokens), "--label", self.label,
             "--endpoint", self.endpoint, "--warmup", str(self.warmup),
             "--passes", str(self.passes),
             "--timeout", f"{self.timeout_s:g}", "--out", self.out_dir, "--gpus", str(self.gpus)]
        for flag, v in (("--model", self.model), ("--gpu", self.gpu),
                        ("--predict-model", self.predict_model), ("--currency", self.currency),
                        ("--workload", self.workload)):
            if v:
                a += [flag, v]
        for flag, x in (("--slo-ttft-ms", self.slo_ttft_ms), ("--slo-tpot-ms", self.slo_tpot_ms),
                        ("--gpu-price", self.gpu_price), ("--request-rate", self.request_rate)):
            if x is not None:
                a += [flag, f"{x:g}"]
        return a


def parse_levels(text: str) -> tuple[int, ...]:
    """'1, 4,16' -> (1, 4, 16); InputError naming the bad item."""
    out: list[int] = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        try:
            v = int(item)
        except ValueError:
            raise InputError(f"concurrency '{item}' is not a whole number: write e.g. 1,4,16"
                             ) from None
        if v < 1:
            raise InputError(f"concurrency {v} must be >= 1")
        out.append(v)
    if not out:
        raise InputError("give at least one concurrency level, e.g. 1,4,16")
    return tuple(out)


MAX_PROMPT_LENGTHS = 8
"""Prompt lengths one Measure job runs at most (one `capacity bench` run each)."""


def parse_prompt_chars(text: str) -> tuple[int, ...]:
    """'1000, 8000' -> (1000, 8000), each once in the order given; InputError naming the bad
    item, or when there are none or more than MAX_PROMPT_LENGTHS."""
    out: list[int] = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        try:
            v = int(item)
        except ValueError:
            raise InputError(f"prompt length '{item[:40]}' is not a whole number of characters: "
                             "write e.g. 1000,8000") from None
        if v < 1:
            raise InputError(f"prompt length {v} must be >= 1 character")
        out.append(v)
    out = list(dict.fromkeys(out))
    if not out:
        raise InputError("give at least one prompt length in characters, e.g. 1000,8000")
    if len(out) > MAX_PROMPT_LENGTHS:
        raise InputError(f"{len(out)} prompt lengths is more than the limit of "
                         f"{MAX_PROMPT_LENGTHS} per job (docs/reliability.md)")
    return tuple(out)


def per_prompt(form: MeasureForm, prompt_chars: Sequence[int]) -> tuple[MeasureForm, ...]:
    """One form per prompt length, run one after the other: with one length the form as it is
    (its label unchanged), with several each labelled '<label>-p<chars>' so that every length
    is its own run (Results can show and fit them together)."""
    if len(prompt_chars) == 1:
        return (replace(form, prompt_chars=prompt_chars[0]),)
    return tuple(replace(form, prompt_chars=c, label=f"{form.label}-p{c}") for c in prompt_chars)


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


class SimRegistry:
    """The simulated endpoints this process started, by pid, newest last: they outlive the
    browser tab that started them (the app stops them when it exits), so a page opened later
    reattaches to one (`latest`, `find`) or lists and stops them instead of starting another.
    Entries whose process has ended are dropped on every read. Thread-safe (a Streamlit server
    runs each session's script in its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_pid: dict[int, SimServer] = {}

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


# ---------------------------------------------------------------------------------------------
# connect check

@dataclass(frozen=True, kw_only=True)
class ConnectReport:
    """What a base URL answered: reachable, key accepted, models, and whether it streams."""

    reachable: bool
    auth_ok: bool | None = None
    status: int | None = None
    models: tuple[str, ...] = ()
    streams: bool | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.reachable and bool(self.auth_ok) and bool(self.models) and bool(self.streams)


def connect_check(base_url: str, api_key: str | None = None, *, endpoint: str = "chat",
                  timeout_s: float = 10.0,
                  transport: httpx.BaseTransport | None = None, guard: Guard | None = None,
                  simulator_urls: Sequence[str] = ()) -> ConnectReport:
    """GET {base}/models (reachability, auth, model list), then a 2-token streamed request.

    With `guard`, a URL the guard refuses raises InputError before anything is connected or
    resolved, so the report (reachable or not, HTTP statuses) only ever describes hosts the
    deployment allows."""
    if guard is not None:
        check_url(base_url, guard, simulator_urls)
    url_host(base_url)
    report = _connect(base_url, api_key, endpoint=endpoint, timeout_s=timeout_s,
                      transport=transport)
    secrets = (api_key,) if api_key else ()
    return replace(report, message=redact(report.message, secrets),
                   models=tuple(redact(m, secrets) for m in report.models))


def _connect(base_url: str, api_key: str | None, *, endpoint: str, timeout_s: float,
             transport: httpx.BaseTransport | None) -> ConnectReport:
    base = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=timeout_s, transport=transport, trust_env=False,
                      follow_redirects=False, headers=headers) as client:
        try:
            with client.stream("GET", base + "/models") as r:
                # a hostile server cannot stall or flood Connect: the body is read up to a cap
                raw, too_large = _read_capped(r, MAX_BODY_BYTES) if r.status_code < 400 \
                    else (b"", False)
        except httpx.HTTPError as exc:
            return ConnectReport(reachable=False, message=f"cannot reach {base}/models: "
                                 f"{type(exc).__name__}: {exc}")
        if r.status_code in (401, 403):
            return ConnectReport(reachable=True, auth_ok=False, status=r.status_code,
                                 message=f"{base}/models answered {r.status_code}: the API key "
                                         "is missing or wrong")
        if r.status_code >= 400:
            return ConnectReport(reachable=True, status=r.status_code,
                                 message=f"{base}/models answered HTTP {r.status_code}: is this "
                                         "an OpenAI-compatible base URL (ending in /v1)?")
        try:
            if too_large:
                raise ValueError("model list too large")
            data = loads_json(raw.decode("utf-8", "replace")).get("data", [])
            models = tuple(str(m["id"])[:200] for m in data if isinstance(m, dict) and "id" in m)
        except (ValueError, AttributeError, TypeError):
            return ConnectReport(reachable=True, auth_ok=True, status=r.status_code,
                                 message=f"{base}/models did not answer an OpenAI model list")
        if not models:
            return ConnectReport(reachable=True, auth_ok=True, status=r.status_code,
                                 message=f"{base}/models lists no model")
        streams, note = _stream_probe(client, base, models[0], endpoint)
        return ConnectReport(reachable=True, auth_ok=True, status=r.status_code, models=models,
                             streams=streams, message=note)


PROBE_BYTES = 64 << 10
"""Connect's stream probe reads at most this much of the streamed answer (bytes)."""


def _has_data_line(buf: bytes) -> bool:
    return buf.startswith(b"data:") or b"\ndata:" in buf


def _read_capped(resp: httpx.Response, limit: int,
                 until: Callable[[bytes], bool] | None = None) -> tuple[bytes, bool]:
    """At most `limit` bytes of a streamed response (stopping early once `until` holds), and
    whether more was there: Connect never reads an unbounded body."""
    buf = bytearray()
    for chunk in resp.iter_bytes():
        buf += chunk
        if len(buf) > limit:
            return bytes(buf[:limit]), True
        if until is not None and until(bytes(buf)):
            break
    return bytes(buf), False


def _stream_probe(client: httpx.Client, base: str, model: str, endpoint: str
                  ) -> tuple[bool, str]:
    chat = endpoint == "chat"
    body: dict[str, Any] = {"model": model, "max_tokens": 2, "stream": True}
    if chat:
        body["messages"] = [{"role": "user", "content": "ping"}]
    else:
        body["prompt"] = "ping"
    path = "/chat/completions" if chat else "/completions"
    try:
        with client.stream("POST", base + path, json=body) as resp:
            if resp.status_code >= 400:
                return False, f"a streamed request answered HTTP {resp.status_code}"
            kind = resp.headers.get("content-type", "")
            head, _ = _read_capped(resp, PROBE_BYTES, until=_has_data_line)
            if _has_data_line(head):
                return True, "streams (server-sent events)"
            return False, f"the response is not a stream (content-type {kind or 'none'})"
    except httpx.HTTPError as exc:
        return False, f"a streamed request failed: {type(exc).__name__}: {exc}"
