"""Where a run goes: `<out>/<label>/<run_id>/{requests.csv, summary.csv, meta.json}` (docs/bench.md).

Both CSVs are flat, with one header row and units in the column names. `requests.csv` gets one
row per request as the request ends, flushed at once, so a killed run keeps what it measured;
`summary.csv` gets one row per level as the level ends. `meta.json` is written at the start and
rewritten at the end; it names the process that owns the run (`owner`: pid, host, process start
time), so a reader can tell a live `running` run from one whose process was killed
(`effective_status`). No API key ever reaches these files: callers pass arguments without it,
and `scrub` removes any key-like field that slips through.
"""

from __future__ import annotations

import csv
import json
import math
import numbers
import os
import re
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

import numpy as np

from capacity.bench.metrics import (
    REQUEST_COLUMNS,
    SUMMARY_COLUMNS,
    LevelSummary,
    RequestRecord,
    record_row,
)
from capacity.errors import InputError

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SECRET_KEYS = ("api_key", "apikey", "authorization", "token", "secret", "password")


class RunStatus(StrEnum):
    """A run's `status` in meta.json, as the bench client leaves it."""

    RUNNING = "running"
    """Started and not ended (or the process was killed before it could say)."""
    FINISHED = "finished"
    """Every level ran to its end."""
    INTERRUPTED = "interrupted"
    """Stopped by a signal or an error; the finished requests and levels are kept. A reader
    also shows a `running` run whose owning process is gone as interrupted
    (`effective_status`)."""


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux /proc), or None where
    unknown; with the pid it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces and ')'
    return fields[19] if len(fields) > 19 else None


def process_owner() -> dict[str, Any]:
    """This process as the owner of a run, for meta.json: pid, host, start time."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "process_start": _process_start(pid)}


def owner_alive(owner: object) -> bool | None:
    """Whether the process of a meta.json `owner` still runs: True, False, or None when it
    cannot be told (no owner recorded, another host, a malformed entry)."""
    if not isinstance(owner, Mapping) or owner.get("host") != socket.gethostname():
        return None
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OSError:
        return None
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True  # no /proc (not Linux): the pid exists
    if state.rpartition(")")[2].split()[:1] == ["Z"]:
        return False  # a zombie: exited, not yet reaped by its parent
    started = owner.get("process_start")
    return started is None or started == _process_start(pid)


def effective_status(meta: Mapping[str, Any]) -> str:
    """A run's status as meta.json says, except that a `running` run whose owning process
    is gone (killed, e.g. by SIGKILL, before it could say) is `interrupted`."""
    status = str(meta.get("status") or "")
    if status == RunStatus.RUNNING and owner_alive(meta.get("owner")) is False:
        return RunStatus.INTERRUPTED.value
    return status


def check_label(label: str) -> str:
    """A label is a folder name: letters, digits, '.', '_', '-' (at most 64)."""
    if not LABEL_RE.match(label):
        raise InputError(f"label '{label}' must be 1-64 letters, digits, '.', '_' or '-' "
                         "(it names a folder), e.g. capacity-8k")
    return label


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id: UTC time plus 6 random hex digits."""
    t = now or datetime.now(UTC)
    return t.strftime("%Y%m%dT%H%M%SZ") + "-" + os.urandom(3).hex()


def scrub(obj: Any) -> Any:
    """A copy of a JSON-like object without any secret-looking key."""
    if isinstance(obj, Mapping):
        return {k: scrub(v) for k, v in obj.items()
                if not any(s in str(k).lower() for s in _SECRET_KEYS)}
    if isinstance(obj, list | tuple):
        return [scrub(v) for v in obj]
    return obj


def _cell(v: object) -> object:
    """One CSV cell: numbers as plain decimals (numpy scalars included, never their repr
    `np.float64(...)`, which the store cannot parse), NaN and infinities as empty, booleans
    as true/false, text on one line."""
    if v is None:
        return ""
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, np.floating):  # str: the shortest round-trip decimal in its precision
        return str(v) if np.isfinite(v) else ""
    if isinstance(v, numbers.Real):
        return repr(float(v)) if math.isfinite(v) else ""
    if isinstance(v, str):
        return v.replace("\r", " ").replace("\n", " ")
    return v


class _CsvAppender:
    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = tuple(columns)
        new = not path.exists() or path.stat().st_size == 0
        self._fh: IO[str] = path.open("a", newline="", encoding="utf-8")
        self._w = csv.writer(self._fh, lineterminator="\n")
        if new:
            self._w.writerow(self.columns)
            self._fh.flush()

    def write(self, row: Mapping[str, Any]) -> None:
        self._w.writerow([_cell(row.get(c)) for c in self.columns])
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class RunWriter:
    """Writes one run's files incrementally. Use as a context manager."""

    def __init__(self, out_dir: str | os.PathLike[str], label: str, run_id: str | None = None
                 ) -> None:
        self.label = check_label(label)
        self.run_id = run_id or new_run_id()
        self.dir = Path(out_dir) / self.label / self.run_id
        try:
            self.dir.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise InputError(f"cannot create the run folder {self.dir}: {exc.strerror}; "
                             "pick another --out") from None
        self.requests_path = self.dir / "requests.csv"
        self.summary_path = self.dir / "summary.csv"
        self.meta_path = self.dir / "meta.json"
        self._requests = _CsvAppender(self.requests_path, REQUEST_COLUMNS)
        self._summary = _CsvAppender(self.summary_path, SUMMARY_COLUMNS)

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        tmp = self.meta_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(scrub(dict(meta)), indent=2, default=str) + "\n",
                       encoding="utf-8")
        tmp.replace(self.meta_path)

    def write_request(self, record: RequestRecord) -> None:
        self._requests.write(record_row(record))

    def write_summary(self, summary: LevelSummary | Mapping[str, Any]) -> None:
        """Append one level's row; a mapping (column -> value) for rows built by hand, e.g. an
        imported or synthetic run, with missing columns left empty."""
        self._summary.write(summary.to_row() if isinstance(summary, LevelSummary) else summary)

    def close(self) -> None:
        self._requests.close()
        self._summary.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
