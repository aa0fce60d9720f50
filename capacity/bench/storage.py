"""Where a run goes: `<out>/<label>/<run_id>/{requests.csv, summary.csv, meta.json}` (docs/bench.md).

Both CSVs are flat, with one header row and units in the column names. `requests.csv` gets one
row per request as the request ends, flushed at once, so a killed run keeps what it measured;
`summary.csv` gets one row per level as the level ends. `meta.json` is written at the start and
rewritten at the end; it names the process that owns the run (`owner`: pid, host, process start
time), so a reader can tell a live `running` run from one whose process was killed
(`effective_status`). No API key ever reaches these files: callers pass arguments without it,
`scrub` removes fields named like secrets (api_key, authorization, password...), and `redact`
replaces the key's value and `Bearer ...` tokens in every text a server could have echoed
(error messages, model lists, ids), in every row and in meta.json (docs/reliability.md).
"""

from __future__ import annotations

import csv
import json
import math
import numbers
import os
import re
import socket
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

import numpy as np

from capacity import workspace
from capacity.access import RUN_OWNER_KEY, RUN_SHARED_KEY
from capacity.bench.metrics import (
    REQUEST_COLUMNS,
    SUMMARY_COLUMNS,
    LevelSummary,
    RequestRecord,
    record_row,
)
from capacity.errors import InputError
from capacity.untrusted import loads_json, read_utf8, spreadsheet_text

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_SECRET_KEY_RE = re.compile(
    r"api[_-]?key|authorization|passw(or)?d|secret|access[_-]?token|auth[_-]?token|bearer"
    r"|^token$|^key$", re.IGNORECASE)
"""Field names whose values are secrets (`max_tokens` is not one)."""
MAX_SHARDS = 1024
"""Most shards (client machines) of one run (`--shard i/N`)."""
REDACTED = "[redacted]"
"""What a secret is replaced with."""
MIN_SECRET_CHARS = 4
"""Shorter keys are not looked for in text (every 'ab' of a message would go); `Bearer ...`
still is."""
MIN_CUT_SECRET_CHARS = 6
"""A text that ends in the first 6 characters of a secret or more was cut inside it: that start
is redacted too (fewer would erase ordinary word endings that a short key happens to start
with)."""
RUN_USER_ENV = workspace.CAPACITY_RUN_STARTED_BY
"""The environment variable through which the app's Measure page tells the `capacity bench`
child who started the run (`capacity.bench.job`): its value, the signed-in user's id, becomes
meta.json's `started_by` (`capacity.access.RUN_OWNER_KEY`) with `shared` false. Unset or empty
(the CLI, an app without sign-in): neither field is written, as before owners existed."""
_BEARER_RE = re.compile(r"(?i)\b(bearer)(\s+|%20|\+)(?!\[redacted\])[^\s\"',;}\])<>]+")


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


def levels_text(levels: object) -> str:
    """meta.json's `args.concurrency` (a list of levels) as '1,8,32'; anything else as text."""
    if isinstance(levels, list | tuple):
        return ",".join(str(c) for c in levels)
    return "" if levels is None else str(levels)[:100]


def shard_numbers(meta: Mapping[str, Any]) -> tuple[int, int]:
    """(shard_index, shard_count) of a meta.json: `shard_index` is 1-based as the client
    writes it (0: not said, older files), `shard_count` 1..MAX_SHARDS; (0, 1) when neither is
    there. ValueError naming the field when either is not a whole number in its range (a
    hand-edited `"shard_count": "x"` made every reader of the store fail)."""
    count = meta.get("shard_count")
    index = meta.get("shard_index")
    count, index = (1 if count is None else count), (0 if index is None else index)
    for name, value, low in (("shard_count", count, 1), ("shard_index", index, 0)):
        if isinstance(value, bool) or not isinstance(value, int) \
                or not low <= value <= MAX_SHARDS:
            raise ValueError(f"{name} {str(value)[:40]!r} is not a whole number in "
                             f"{low}..{MAX_SHARDS}")
    if index > count:
        raise ValueError(f"shard_index {index} is above shard_count {count}")
    return index, count


RUN_WARNINGS_SHOWN = 10
RUN_WARNING_CHARS = 300


def run_warnings(meta: Mapping[str, Any]) -> list[str]:
    """The distinct warnings a run's meta.json records (client-bound levels, prefix-cache
    hits, one-burst levels...), in order, at most RUN_WARNINGS_SHOWN of them and
    RUN_WARNING_CHARS characters each: a meta.json is a file anyone with the folder can edit."""
    raw = meta.get("warnings")
    if not isinstance(raw, list):
        return []
    seen = dict.fromkeys(" ".join(w.split())[:RUN_WARNING_CHARS]
                         for w in raw if isinstance(w, str) and w.strip())
    return list(seen)[:RUN_WARNINGS_SHOWN]


def check_label(label: str) -> str:
    """A label is a folder name: letters, digits, '.', '_', '-' (at most 64)."""
    if not LABEL_RE.match(label):
        raise InputError(f"label '{label}' must be 1-64 letters, digits, '.', '_' or '-' "
                         "(it names a folder), e.g. capacity-8k")
    return label


RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}\Z")
"""Labels and run ids name folders: their end is matched by backslash-Z, never `$`, which
also matches before a final line break (a label 'x' plus a line feed)."""


def check_run_id(run_id: str) -> str:
    """A run id given by hand (`--run-id`) names a folder too: letters, digits, '.', '_', '-'
    (at most 80)."""
    if not RUN_ID_RE.match(run_id):
        raise InputError(f"run id '{run_id}' must be 1-80 letters, digits, '.', '_' or '-' "
                         "(it names a folder), e.g. 20261130-llama70b")
    return run_id


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id: UTC time plus 6 random hex digits."""
    t = now or datetime.now(UTC)
    return t.strftime("%Y%m%dT%H%M%SZ") + "-" + os.urandom(3).hex()


def scrub(obj: Any) -> Any:
    """A copy of a JSON-like object without the fields named like secrets (api_key,
    authorization, password, secret, access_token...); every other field is kept."""
    if isinstance(obj, Mapping):
        return {k: scrub(v) for k, v in obj.items() if not _SECRET_KEY_RE.search(str(k))}
    if isinstance(obj, list | tuple):
        return [scrub(v) for v in obj]
    return obj


_SECRET_QUERY_NAME = re.compile(r"(?i)key|token|secret|sig|pass|auth|cred|session")
"""A query parameter whose name says it carries a secret (`?key=`, `?api_key=`, `&sig=`,
`?access_token=`): its value is one (`url_secrets`)."""


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets a base URL may carry: its password (`http://user:pw@host`), or its user
    where there is no password (`https://TOKEN@host`: the token; a user name beside a password
    is a name, and redacting it would blank every 'admin' in a message), and the values of its
    query parameters whose names say they are secrets (`_SECRET_QUERY_NAME`;
    `api-version=2024-06-01` is kept). Example: 'http://u:sk-1@h/v1?key=sk-2&v=3' -> ('sk-1',
    'sk-2'); 'https://sk-3@h/v1' -> ('sk-3',)."""
    try:
        parts = urllib.parse.urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return ()
    query = urllib.parse.parse_qsl(parts.query)
    return tuple(x for x in (password if password else user,
                             *(v for k, v in query if _SECRET_QUERY_NAME.search(k))) if x)


def run_secrets(api_key: str | None, base_url: str) -> tuple[str, ...]:
    """Everything a run redacts (`redact`): the API key and the base URL's secrets
    (`url_secrets`), which would otherwise reach meta.json's `base_url` and every message that
    names the URL."""
    return tuple(s for s in (api_key, *url_secrets(base_url)) if s)


def redact(text: str, secrets: Sequence[str | None] = ()) -> str:
    """`text` with every secret's value (as is, JSON-escaped or URL-encoded) and every
    `Bearer <token>` replaced by [redacted]; the one function applied wherever text a server
    sent leaves the client (rows, meta.json, messages, logs).

    A text cut short (messages are shortened to a few hundred characters) may end inside a
    key: a trailing start of a secret, 6 characters or more, is redacted too. Returns `text`
    itself (the same object) when nothing changed."""
    out = _BEARER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    for secret in secrets:
        if not secret or len(secret) < MIN_SECRET_CHARS:
            continue
        for form in {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe=""),
                     urllib.parse.quote_plus(secret)}:
            if form in out:
                out = out.replace(form, REDACTED)
        for k in range(len(secret) - 1, MIN_CUT_SECRET_CHARS - 1, -1):
            if out.endswith(secret[:k]):
                out = out[:-k] + REDACTED
                break
    return text if out == text else out


def redact_obj(obj: Any, secrets: Sequence[str | None] = ()) -> Any:
    """A JSON-like object with `redact` applied to every string in it, keys included."""
    if isinstance(obj, str):
        return redact(obj, secrets)
    if isinstance(obj, Mapping):
        return {redact_obj(k, secrets): redact_obj(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v, secrets) for v in obj]
    return obj


def redact_record(record: RequestRecord, secrets: Sequence[str | None] = ()) -> RequestRecord:
    """The record with `redact` applied to its text fields (error message, response id,
    finish reason, model: all of them can come from the server)."""
    changes: dict[str, Any] = {f.name: new for f in fields(record)
               if isinstance(old := getattr(record, f.name), str)
               and (new := redact(old, secrets)) is not old}
    return replace(record, **changes) if changes else record


def _cell(v: object) -> object:
    """One CSV cell: numbers as plain decimals (numpy scalars included, never their repr
    `np.float64(...)`, which the store cannot parse), NaN and infinities as empty, booleans
    as true/false, text on one line and never a spreadsheet formula (`spreadsheet_text`: a
    server's `=HYPERLINK(...)` error message is stored as `'=HYPERLINK(...)`)."""
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
        return spreadsheet_text(v).replace("\r", " ").replace("\n", " ")
    return spreadsheet_text(str(v))


MAX_TEXT_CELL_CHARS = 1000
"""Longest text stored in one cell of requests.csv or summary.csv, characters: error
messages, response ids, finish reasons, model names, i.e. text a server chose. Longer text is
cut to this length, its end marked with '...' (`bound_cell`), so that no row comes near
DuckDB's 2 MiB line limit, beyond which the store would leave the row out."""
MAX_ITL_CELL_CHARS = 1 << 20
"""Longest `itl_ms` stored, characters (1 MiB: about 140,000 gaps of a few ms). A longer list
keeps its first gaps that fit, whole; the row's `itl_mean_ms` and `itl_max_ms`, and the
level's ITL percentiles in summary.csv, are computed from every gap before it is cut."""
CUT_MARK = "..."


def bound_cell(column: str, value: str) -> str:
    """`value` cut to the limit of its column before it is written: `MAX_ITL_CELL_CHARS` for
    `itl_ms` (at a gap's end, so it still parses as numbers), `MAX_TEXT_CELL_CHARS` for
    every other text (ending in '...'). Returns `value` itself when it fits."""
    if column == "itl_ms":
        if len(value) <= MAX_ITL_CELL_CHARS:
            return value
        return value[:max(0, value.rfind(" ", 0, MAX_ITL_CELL_CHARS + 1))].rstrip()
    if len(value) <= MAX_TEXT_CELL_CHARS:
        return value
    return value[:MAX_TEXT_CELL_CHARS - len(CUT_MARK)] + CUT_MARK


_WEIGHT_FILE_SUFFIXES = (".gguf", ".ggml", ".bin", ".safetensors", ".pt", ".pth", ".llamafile")
_PATH_START = re.compile(r"^(/|~|\.{1,2}[/\\]|[A-Za-z]:[/\\])")


def model_name(model_id: str) -> str:
    """A model id as a name. A server that reports its model as a file path (llama.cpp: the
    .gguf it loaded, `/models/llama-3.1-8b-q4_k_m.gguf`) is named by the file's stem
    (`llama-3.1-8b-q4_k_m`); any other id (`meta-llama/Llama-3.1-8B`, `m1`) is kept."""
    text = model_id.strip()
    if not (text.lower().endswith(_WEIGHT_FILE_SUFFIXES) or _PATH_START.match(text)):
        return model_id
    base = re.split(r"[/\\]", text.rstrip("/\\"))[-1]
    for suffix in _WEIGHT_FILE_SUFFIXES:
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return base or model_id


def read_run_meta(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A run's meta.json as a dict, read as untrusted text (at most `read_utf8`'s 16 MiB,
    nesting bounded); {} where it is missing, unreadable or not a JSON object: the readers
    that only look something up in it (the Results page, `calibrate --label`'s check of a
    simulator's speedup) then find nothing."""
    try:
        obj = loads_json(read_utf8(Path(run_dir) / "meta.json"))
    except (OSError, ValueError, InputError, UnicodeDecodeError):
        return {}
    return obj if isinstance(obj, dict) else {}


def update_meta(run_dir: str | os.PathLike[str], changes: Mapping[str, Any],
                secrets: Sequence[str | None] = ()) -> None:
    """Add `changes` to a finished run's meta.json (atomically; redacted like the rest)."""
    path = Path(run_dir) / "meta.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta.update(redact_obj(json.loads(json.dumps(scrub(dict(changes)), default=str)), secrets))
    write_text_atomic(path, json.dumps(meta, indent=2) + "\n")


def _shared_on_disk(meta_path: Path) -> bool:
    """meta.json's `shared` as it is now (False when there is no readable file yet)."""
    try:
        return json.loads(meta_path.read_text(encoding="utf-8")).get(RUN_SHARED_KEY) is True
    except (OSError, ValueError, AttributeError, RecursionError):
        return False


def set_shared(run_dir: str | os.PathLike[str], shared: bool) -> None:
    """Write a run's `shared` into its meta.json (atomically, `update_meta`); who may is
    `capacity.access.may_share_run`, checked by the caller (the Results page)."""
    update_meta(run_dir, {RUN_SHARED_KEY: bool(shared)})


def write_text_atomic(path: Path, text: str) -> None:
    """Write `path` whole or not at all: into `<name>.tmp`, then renamed over it, so a reader
    never sees half a file. When the write fails (a full disk, a folder gone read-only) the
    temporary file is removed, `path` keeps its last complete version, and the OSError says
    the file (`filename`: the CLI's one line ends with it) with the system's reason."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # the folder itself is gone or read-only: nothing was left in it either
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


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
        """One row, every text cell bounded (`bound_cell`) so DuckDB reads every row."""
        self._w.writerow([_cell(bound_cell(c, v) if isinstance(v := row.get(c), str) else v)
                          for c in self.columns])
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def write_summary_csv(path: Path, rows: Sequence[LevelSummary]) -> None:
    """A summary.csv with these rows (e.g. the merged summary of a sharded run)."""
    out = _CsvAppender(path, SUMMARY_COLUMNS)
    try:
        for row in rows:
            out.write(row.to_row())
    finally:
        out.close()


class RunWriter:
    """Writes one run's files incrementally. Use as a context manager."""

    def __init__(self, out_dir: str | os.PathLike[str], label: str, run_id: str | None = None,
                 *, secrets: Sequence[str | None] = (), shard: str | None = None) -> None:
        """`secrets` (the API key): redacted from everything written (`redact`); `shard`:
        the folder of this shard inside the run's (`shard-<i>of<N>`), None for a whole run."""
        self._secrets = tuple(secrets)
        self.label = check_label(label)
        self.run_id = check_run_id(run_id) if run_id else new_run_id()
        self.dir = Path(out_dir) / self.label / self.run_id
        if shard is not None:
            self.dir = self.dir / shard
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
        self.started_by = workspace.run_started_by()
        """Who started the run from the app (`RUN_USER_ENV`), '' for nobody."""
        self.stamp_sources: dict[str, int] = {}
        """Requests written per `RequestRecord.stamp_source` (`none`: no byte read), for
        meta.json's `stamp_sources`."""

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Write meta.json (redacted, atomically: `write_text_atomic`)."""
        clean = redact_obj(json.loads(json.dumps(scrub(dict(meta)), default=str)),
                           self._secrets)
        model = clean.get("model")
        if isinstance(model, str) and model_name(model) != model:  # a file path: keep both
            clean["model_id"], clean["model"] = model, model_name(model)
        if self.started_by:  # the owner, and `shared` as its owner last set it (even mid-run)
            clean[RUN_OWNER_KEY] = self.started_by
            clean[RUN_SHARED_KEY] = _shared_on_disk(self.meta_path)
        write_text_atomic(self.meta_path, json.dumps(clean, indent=2) + "\n")

    def write_request(self, record: RequestRecord) -> None:
        src = record.stamp_source or "none"
        self.stamp_sources[src] = self.stamp_sources.get(src, 0) + 1
        self._requests.write(self._redacted(record_row(record)))

    def write_summary(self, summary: LevelSummary | Mapping[str, Any]) -> None:
        """Append one level's row; a mapping (column -> value) for rows built by hand, e.g. an
        imported or synthetic run, with missing columns left empty."""
        self._summary.write(self._redacted(
            summary.to_row() if isinstance(summary, LevelSummary) else summary))

    def _redacted(self, row: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: redact(v, self._secrets) if isinstance(v, str) else v for k, v in row.items()}
        if isinstance(out.get("model"), str):
            out["model"] = model_name(out["model"])
        return out

    def close(self) -> None:
        self._requests.close()
        self._summary.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
