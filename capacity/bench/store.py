"""Stored benchmark runs, queried in place with DuckDB (docs/bench.md, "Storage").

The one module that opens DuckDB over the run files under a root (default: the workspace's
bench folder, `capacity.workspace.prepare_bench_dir`, docs/configuration.md):
`<root>/<label>/<run_id>/{requests.csv, summary.csv, meta.json}`. It defines three views on an
in-memory database:
- `requests`: every complete row of every requests.csv (`read_csv` over the file list, union by
  name, so runs written by older or newer versions still load together);
- `summaries`: every row of every summary.csv;
- `runs`: one row per run (from meta.json and the rows above).
A file whose header is not ours (a foreign CSV) or that has no header yet is skipped with a
warning; a half-written last row of a killed run (no trailing newline, or missing its
`row_complete` marker) is dropped with a warning, and the rest of the file is kept.

A finished run also gets `requests.parquet`, a typed columnar copy of its complete rows
(`compact_run`, called by `capacity bench` when a run ends, or `capacity runs --compact` for
older runs). The `requests` view reads a run's Parquet file while it is at least as new as its
CSV, and the CSV otherwise: the CSV stays the source of truth and the row-by-row record of a
killed run, the Parquet file makes summaries over a million rows fast (docs/benchmarks.md).

User SQL (`query`) must be a single SELECT (or WITH ... SELECT); it runs with file access
limited to the root, and values go in as bound parameters, never by string formatting.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, get_args, get_type_hints

import duckdb
import pandas as pd

from capacity import workspace
from capacity.bench import s3
from capacity.bench.metrics import (
    REQUEST_COLUMNS,
    SUMMARY_COLUMNS,
    ClientLoad,
    LevelSummary,
    RequestRecord,
    judge_workers,  # the client's rule, not a copy of it
    summarize,
)
from capacity.bench.storage import (
    RunStatus,
    effective_status,
    levels_text,
    shard_numbers,
    write_summary_csv,
)
from capacity.errors import StoreError

PARQUET_NAME = "requests.parquet"
SHARD_GLOB = "shard-*of*"
"""The folders of a sharded run's shards: `<label>/<run_id>/shard-<i>of<N>/`."""
REQUIRED_REQUEST_COLUMNS = ("run_id", "label", "concurrency", "success", "ttft_ms")
REQUIRED_SUMMARY_COLUMNS = ("run_id", "label", "concurrency", "requests_ok")

def _duck_type(hint: Any) -> str:
    """DuckDB type of a field annotation: bool, int, float (optional or not), else text
    (str and the StrEnum vocabularies)."""
    kinds = set(get_args(hint)) - {type(None)} or {hint}
    if kinds <= {bool}:
        return "BOOLEAN"
    if kinds <= {int}:
        return "BIGINT"
    if kinds <= {float, int}:
        return "DOUBLE"
    return "VARCHAR"


def _dtypes(cls: type[RequestRecord] | type[LevelSummary]) -> dict[str, str]:
    hints = get_type_hints(cls)
    return {f.name: _duck_type(hints[f.name]) for f in fields(cls)}


def request_dtypes() -> dict[str, str]:
    """DuckDB types of the requests.csv columns (from RequestRecord's fields)."""
    return _dtypes(RequestRecord)


def summary_dtypes() -> dict[str, str]:
    """DuckDB types of the summary.csv columns (from LevelSummary's fields)."""
    return _dtypes(LevelSummary)


def _header(path: Path) -> list[str] | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
            line = fh.readline()
    except OSError:
        return None
    if not line.endswith("\n"):
        return None
    return [c.strip().strip('"') for c in line.rstrip("\r\n").split(",")]


def _ends_cleanly(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"
    except OSError:
        return False


_CHECKED: dict[tuple[Any, ...], tuple[list[str], int]] = {}
"""Per version of a CSV file (path, size, mtime, columns): its bad-row warnings and the number
of cells that do not fit their type (`RunStore._check_file`)."""

RUNS_VIEW_SQL = """
    CREATE VIEW runs AS
    WITH r AS (
        SELECT run_id, any_value(label) AS label,
               count(*) FILTER (WHERE success) AS requests_ok,
               count(*) FILTER (WHERE NOT success) AS requests_failed,
               min(start_unix_s) AS first_start_unix_s
        FROM requests GROUP BY run_id)
    SELECT coalesce(m.run_id, r.run_id) AS run_id,
           coalesce(m.label, r.label) AS label,
           coalesce(m.started_at,
                    CAST(to_timestamp(r.first_start_unix_s) AS VARCHAR)) AS started_at,
           m.status, m.base_url, m.endpoint, m.model, m.gpu, m.levels,
           coalesce(r.requests_ok, 0) AS requests_ok,
           coalesce(r.requests_failed, 0) AS requests_failed, m.dir, m.shards
    FROM run_meta m FULL OUTER JOIN r ON m.run_id = r.run_id
"""


class RunStore:
    """DuckDB views over the runs under `root`. Use as a context manager, or call `close`."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        """`root`: a folder, or `s3://bucket/prefix` (mirrored into a local cache first,
        `capacity.bench.s3.pull`); default: the workspace's bench folder."""
        if root is None:
            root = workspace.prepare_bench_dir()
        self.source = s3.url_of(root) if s3.is_s3(root) else str(root)
        self.warnings: list[str] = []
        self.root = s3.pull(root, warnings=self.warnings) if s3.is_s3(root) else Path(root)
        self.con = duckdb.connect(":memory:")
        try:
            self._build()
        except duckdb.Error as exc:
            self.con.close()
            raise StoreError(f"cannot read the runs under {self.root}: {exc}") from None

    # -- building the views ------------------------------------------------------------------
    def _files(self, name: str, required: Sequence[str], shards: bool = False) -> list[str]:
        good: list[str] = []
        if not self.root.is_dir():
            return good
        patterns = [f"*/*/{name}"] + ([f"*/*/{SHARD_GLOB}/{name}"] if shards else [])
        for path in sorted(p for pat in patterns for p in self.root.resolve().glob(pat)):
            header = _header(path)
            if header is None:
                self.warnings.append(f"skipped {path}: no complete header row (a run killed "
                           "before its first row, or not a CSV)")
                continue
            missing = [c for c in required if c not in header]
            if missing:
                self.warnings.append(f"skipped {path}: not a capacity {name} (missing "
                           f"{', '.join(missing)})")
                continue
            if path.stat().st_size > len(",".join(header)) + 1 and not _ends_cleanly(path):
                self.warnings.append(f"{path}: the last row is half-written (a killed run); "
                                     "it is dropped, the rest is kept")
            good.append(str(path))
        return good

    def _fresh_parquet(self, csv_files: list[str]) -> tuple[list[str], list[str]]:
        """Split the requests.csv files into (CSV files to read, Parquet copies to read
        instead): a copy is used while it is at least as new as its CSV and readable
        (`_parquet_problem`); an unreadable copy is skipped with a warning naming it, and
        its CSV is read instead."""
        csv_left: list[str] = []
        parquet: list[str] = []
        for csv_path in csv_files:
            pq = Path(csv_path).with_name(PARQUET_NAME)
            try:
                fresh = pq.stat().st_mtime >= Path(csv_path).stat().st_mtime
            except OSError:
                fresh = False
            if fresh and (why := self._parquet_problem(pq)) is not None:
                self.warnings.append(f"skipped {pq}: not a readable Parquet file ({why}); "
                                     "its requests.csv is read instead")
                fresh = False
            (parquet if fresh else csv_left).append(str(pq) if fresh else csv_path)
        return csv_left, parquet

    def _parquet_problem(self, path: Path) -> str | None:
        """Why DuckDB cannot read the Parquet file `path` (its footer, schema and row
        groups: a truncated, garbled or foreign file), or None; remembered per version of the
        file, as the CSV checks are."""
        try:
            st = path.stat()
        except OSError as exc:
            return exc.strerror or type(exc).__name__
        key = ("parquet", str(path), st.st_size, st.st_mtime_ns)
        if key not in _CHECKED:
            try:
                rel = self.con.read_parquet(str(path))
                rel.aggregate("count(*)").fetchall()
                missing = [c for c in REQUIRED_REQUEST_COLUMNS if c not in rel.columns]
                found: list[str] = [f"no column {', '.join(missing)}"] if missing else []
            except duckdb.Error as exc:
                found = [_first_line(str(exc))[:200]]
            if len(_CHECKED) > 10_000:
                _CHECKED.clear()
            _CHECKED[key] = (found, 0)
        problems = _CHECKED[key][0]
        return problems[0] if problems else None

    def _view(self, name: str, csv_files: list[str], columns: Sequence[str],
              dtypes: Mapping[str, str], parquet: Sequence[str] = ()) -> None:
        """A view over exactly these files. File names go to DuckDB as arguments of its
        relation API, never composed into SQL text; only our own view names are."""
        parts = []
        # Files with the same header are read together with their columns and types given,
        # so DuckDB does not sniff 100 MB of text per file; runs of other versions (another
        # header) form their own group, and the groups are united by column name.
        groups: dict[tuple[str, ...], list[str]] = {}
        for path in csv_files:
            found = _header(Path(path))
            if found is not None:
                groups.setdefault(tuple(found), []).append(path)
        for i, (cols, files) in enumerate(groups.items()):
            # 1. a typed read of each file, once per version of the file, that names every
            # row whose values do not fit their column (file and line, from DuckDB's rejects
            # table)
            typed_columns = {c: dtypes.get(c, "VARCHAR") for c in cols}
            bad_cells = 0
            for j, path in enumerate(files):
                found, cells = self._check_file(path, typed_columns, f"{name}_{i}_{j}")
                self.warnings.extend(found)
                bad_cells += cells
            # (ignore_errors: the rows named above are left out, not an error of the view)
            typed = self.con.read_csv(files, header=True, auto_detect=False, ignore_errors=True,
                                      columns=typed_columns)
            if not bad_cells:  # every cell fits its type: the typed read is the view
                if "row_complete" in cols:
                    typed = typed.filter("row_complete = 1")
                typed.create_view(f"{name}_csv{i}")
                parts.append(f"SELECT * FROM {name}_csv{i}")
                continue
            # 2. else the view reads text and casts each cell: a cell that does not fit its
            # type is NULL, and its row stays in every query whichever columns the query reads
            # (a typed read drops it only from the queries that read that column). Rows with a
            # wrong number of cells are left out (and were named above).
            self.con.read_csv(files, header=True, auto_detect=False, ignore_errors=True,
                              columns=dict.fromkeys(cols, "VARCHAR")
                              ).create_view(f"{name}_text{i}")
            cast = ", ".join(f"TRY_CAST({_ident(c)} AS {dtypes.get(c, 'VARCHAR')}) AS {_ident(c)}"
                             for c in cols)
            where = (" WHERE TRY_CAST(row_complete AS BIGINT) = 1" if "row_complete" in cols
                     else "")
            self.con.execute(f"CREATE VIEW {name}_csv{i} AS SELECT {cast} FROM {name}_text{i}"
                             + where)
            parts.append(f"SELECT * FROM {name}_csv{i}")
        if parquet:
            self.con.read_parquet(list(parquet), union_by_name=True).create_view(
                f"{name}_parquet")
            parts.append(f"SELECT * FROM {name}_parquet")
        if not parts:
            empty = pd.DataFrame({c: pd.Series(dtype=_pandas_dtype(dtypes[c])) for c in columns})
            self.con.from_df(empty).create_view(name)
            return
        # every column of this version, NULL where the files predate it (old runs lack the
        # workload's columns), so a query naming it works on any mix of runs
        parts.append("SELECT " + ", ".join(
            f"CAST(NULL AS {dtypes.get(c, 'VARCHAR')}) AS {_ident(c)}" for c in columns)
            + " WHERE false")
        self.con.execute(f"CREATE VIEW {name} AS " + " UNION ALL BY NAME ".join(parts))

    def _check_file(self, path: str, columns: dict[str, str], tag: str
                    ) -> tuple[list[str], int]:
        """(warnings, cells that do not fit their type) of one CSV file, read typed in full;
        remembered for this version of the file (size and modification time), so a page
        that reopens the store does not read an unchanged file again."""
        try:
            st = os.stat(path)
        except OSError:
            return [], 0
        key = (path, st.st_size, st.st_mtime_ns, tuple(columns.items()))
        if key in _CHECKED:
            return _CHECKED[key]
        rel = self.con.read_csv(path, header=True, auto_detect=False, store_rejects=True,
                                rejects_table=f"{tag}_rejects", rejects_scan=f"{tag}_scans",
                                columns=columns)
        rel.aggregate("count(COLUMNS(*))").fetchall()  # every column of every row
        found = _rejected_rows(self.con, f"{tag}_rejects", f"{tag}_scans")
        cells = int(self.con.execute(f"SELECT count(*) FROM {tag}_rejects "
                                     "WHERE error_type = 'CAST'").fetchall()[0][0])
        if len(_CHECKED) > 10_000:
            _CHECKED.clear()
        _CHECKED[key] = (found, cells)
        return found, cells

    def _build(self) -> None:
        root = str(self.root.resolve())
        self.request_files = self._files("requests.csv", REQUIRED_REQUEST_COLUMNS, shards=True)
        self.summary_files = self._files("summary.csv", REQUIRED_SUMMARY_COLUMNS)
        csv_left, parquet = self._fresh_parquet(self.request_files)
        self._view("requests", csv_left, REQUEST_COLUMNS, request_dtypes(), parquet)
        self._view("summaries", self.summary_files, SUMMARY_COLUMNS, summary_dtypes())
        self.con.from_df(self._meta_frame()).create_view("run_meta")
        self.con.execute(RUNS_VIEW_SQL)
        # user SQL may read files under the root only (the views' own files are there)
        self.con.execute("SET allowed_directories = $dirs", {"dirs": [root]})
        self.con.execute("SET enable_external_access = false")

    def _meta_frame(self) -> pd.DataFrame:
        rows: list[dict[str, Any]] = []
        if self.root.is_dir():
            for path in sorted(self.root.glob("*/*/meta.json")):
                meta = self._read_meta(path)
                if meta is not None:
                    rows.append(_meta_row(meta, path.parent, effective_status(meta), ""))
            for run_dir in sorted({p.parent.parent for p in
                                   self.root.glob(f"*/*/{SHARD_GLOB}/meta.json")}):
                if (run_dir / "meta.json").exists():
                    continue  # a whole-run meta.json wins
                metas = [m for p in sorted(run_dir.glob(f"{SHARD_GLOB}/meta.json"))
                         if (m := self._read_meta(p)) is not None]
                if metas:
                    status, shards = shard_status(metas)
                    rows.append(_meta_row(metas[0], run_dir, status, shards))
        cols = ("run_id", "label", "started_at", "status", "base_url", "endpoint", "model",
                "gpu", "levels", "dir", "shards")
        return pd.DataFrame(rows, columns=list(cols)).astype("string")

    def _read_meta(self, path: Path) -> dict[str, Any] | None:
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            str(meta["run_id"])
            if not isinstance(meta, dict) or not isinstance(meta.get("args") or {}, dict):
                raise TypeError
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            self.warnings.append(f"skipped {path}: not a readable run meta.json")
            return None
        try:
            shard_numbers(meta)
        except ValueError as exc:  # e.g. "shard_count": "x", edited by hand
            self.warnings.append(f"skipped {path}: {exc}")
            return None
        return meta

    # -- the Python API ----------------------------------------------------------------------
    def _df(self, sql: str, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
        try:
            return self.con.execute(sql, dict(params or {})).df()
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {exc}") from None

    def list_runs(self, *, label: str | None = None, since: str | None = None,
                  until: str | None = None, base_url: str | None = None,
                  endpoint: str | None = None, model: str | None = None) -> pd.DataFrame:
        """One row per run, newest first; filters by label, ISO date range, base URL, endpoint
        kind (chat|completions) and model (all optional)."""
        return self._df("""
            SELECT * FROM runs
            WHERE ($label IS NULL OR label = $label)
              AND ($since IS NULL OR started_at >= $since)
              AND ($until IS NULL OR started_at < $until)
              AND ($base_url IS NULL OR base_url = $base_url)
              AND ($endpoint IS NULL OR endpoint = $endpoint)
              AND ($model IS NULL OR model = $model)
            ORDER BY started_at DESC
        """, {"label": label, "since": since, "until": until, "base_url": base_url,
              "endpoint": endpoint, "model": model})

    def latest_run_id(self, label: str) -> str:
        runs = self.list_runs(label=label)
        if runs.empty:
            known = sorted(set(self.list_runs()["label"].dropna()))
            raise StoreError(f"no run labelled '{label}' under {self.root}"
                             + (f" (labels: {', '.join(known)})" if known else ""))
        return str(runs["run_id"].iloc[0])

    def summary(self, run_id: str) -> pd.DataFrame:
        """The per-level summary rows of one run, by concurrency."""
        return self._df("SELECT * FROM summaries WHERE run_id = $run_id ORDER BY concurrency",
                        {"run_id": run_id})

    def level_stats(self, run_id: str | None = None) -> pd.DataFrame:
        """Every level's statistics recomputed from its request rows (every run, or one):
        requests, ok, TTFT and TPOT p50/p99 (exact, `quantile_cont`), output tok/s (ok tokens
        over the level's span, the sum of its passes' spans in a run of `--passes`, between
        which other levels ran). A team's whole store in one query: each column's two
        quantiles come from one sort (a list of fractions), which halves the work of four
        separate quantiles. Units in the names."""
        return self._df("""
            WITH passes AS (
                SELECT run_id, concurrency, count(*) AS requests,
                       count(*) FILTER (WHERE success) AS ok,
                       sum(output_tokens) FILTER (WHERE success) AS tokens,
                       max(start_unix_s + e2e_ms / 1000) - min(start_unix_s) AS span_s
                FROM requests WHERE $run_id IS NULL OR run_id = $run_id
                GROUP BY run_id, concurrency, coalesce(pass_index, 1)),
            levels AS (
                SELECT run_id, concurrency,
                       quantile_cont(ttft_ms, [0.5, 0.99]) FILTER (WHERE success) AS ttft_q,
                       quantile_cont(tpot_ms, [0.5, 0.99]) FILTER (WHERE success) AS tpot_q
                FROM requests WHERE $run_id IS NULL OR run_id = $run_id
                GROUP BY run_id, concurrency)
            SELECT l.run_id, l.concurrency, p.requests, p.ok, ttft_q[1] AS ttft_p50_ms,
                   ttft_q[2] AS ttft_p99_ms, tpot_q[1] AS tpot_p50_ms, tpot_q[2] AS tpot_p99_ms,
                   p.tokens / nullif(p.span_s, 0) AS output_tok_s
            FROM levels l JOIN (SELECT run_id, concurrency, sum(requests) AS requests,
                                       sum(ok) AS ok, sum(tokens) AS tokens,
                                       sum(span_s) AS span_s
                                FROM passes GROUP BY run_id, concurrency) p
              USING (run_id, concurrency)
            ORDER BY run_id, concurrency""", {"run_id": run_id})

    def requests(self, run_id: str, concurrency: int | None = None) -> pd.DataFrame:
        """The per-request rows of one run (optionally one level)."""
        return self._df("""
            SELECT * FROM requests WHERE run_id = $run_id
              AND ($c IS NULL OR concurrency = $c)
            ORDER BY concurrency, start_unix_s""", {"run_id": run_id, "c": concurrency})

    def query(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None
              ) -> pd.DataFrame:
        """Run one read-only SELECT over the views, with bound parameters."""
        check_select(self.con, sql)
        try:
            if isinstance(params, Mapping):
                return self.con.execute(sql, dict(params)).df()
            return self.con.execute(sql, list(params or [])).df()
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {_first_line(str(exc))}") from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _meta_row(meta: Mapping[str, Any], run_dir: Path, status: str, shards: str
              ) -> dict[str, Any]:
    args = meta.get("args") or {}
    return {"run_id": str(meta["run_id"]), "label": str(meta.get("label", "")),
            "started_at": str(meta.get("started_at") or ""), "status": status,
            "base_url": str(args.get("base_url") or ""),
            "endpoint": str(args.get("endpoint") or ""), "model": str(meta.get("model") or ""),
            "gpu": str(args.get("gpu") or ""),
            "levels": levels_text(args.get("concurrency")),
            "dir": str(run_dir), "shards": shards}


def shard_status(metas: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(status, 'k/N finished') of a sharded run from its shards' meta.json: `finished` once
    every shard has finished, `running` while one runs, else `interrupted` (a shard stopped,
    or never came: the run is not complete). ValueError when a meta.json's shard numbers are
    not counts (`shard_numbers`)."""
    numbers = [shard_numbers(m) for m in metas]
    count = max(c for _, c in numbers)
    states = {i: effective_status(m) for (i, _), m in zip(numbers, metas, strict=True)}
    finished = sum(s == RunStatus.FINISHED for s in states.values())
    if finished == count and len(states) == count:
        status = RunStatus.FINISHED.value
    elif any(s == RunStatus.RUNNING for s in states.values()):
        status = RunStatus.RUNNING.value
    else:
        status = RunStatus.INTERRUPTED.value
    return status, f"{finished}/{count} finished"


def merge_shards(run_dir: str | os.PathLike[str]) -> Path | None:
    """The whole run's `summary.csv` from its shards, once every shard has finished: per
    level, `summarize` over every shard's requests, with each shard's client load (from its
    own summary row) judged as a worker's (`judge_workers`). Returns the file, or None while
    the run is not complete (then nothing is written)."""
    run = Path(run_dir)
    metas = []
    for p in sorted(run.glob(f"{SHARD_GLOB}/meta.json")):
        try:
            meta = json.loads(p.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                return None
            shard_numbers(meta)
        except (OSError, ValueError, RecursionError):
            return None  # unreadable, or not counts: RunStore names the file when it reads it
        metas.append(meta)
    if not metas or shard_status(metas)[0] != RunStatus.FINISHED:
        return None
    with RunStore(run.parent.parent) as st:
        reqs = st.query("SELECT * FROM requests WHERE run_id = $r", {"r": str(run.name)})
        parts = st.con.read_csv([str(p) for p in sorted(run.glob(f"{SHARD_GLOB}/summary.csv"))],
                                header=True, union_by_name=True, filename=True).df()
    meta = metas[0]
    args = meta.get("args") or {}
    names = {f.name for f in fields(RequestRecord)}
    rows = []
    for level, group in reqs.groupby("concurrency", sort=True):
        cells: list[dict[str, Any]] = [
            {k: (None if pd.isna(v) else v) for k, v in r.items() if k in names}
            for r in group.to_dict("records")]
        records = [RequestRecord(**c) for c in cells]
        row = summarize(records, run_id=str(meta["run_id"]), label=str(meta.get("label")),
                        concurrency=int(str(level)), request_rate_rps=args.get("request_rate"),
                        endpoint=str(args.get("endpoint") or ""), model=str(meta.get("model")),
                        slo_ttft_ms=args.get("slo_ttft_ms"), slo_tpot_ms=args.get("slo_tpot_ms"),
                        gpu=args.get("gpu"), gpus=int(args.get("gpus") or 1),
                        gpu_price_per_hour=args.get("gpu_price"), currency=args.get("currency"))
        mine = parts[parts["concurrency"] == level]
        loads = {_shard_number(str(x.filename)): ClientLoad(
                     cpu_s=_num(x.client_cpu_s), loop_lag_p50_ms=_num(x.loop_lag_p50_ms),
                     loop_lag_p99_ms=_num(x.loop_lag_p99_ms)) for x in mine.itertuples()}
        rows.append(judge_workers(row, loads, unit="shard") if loads else row)
    out = run / "summary.csv"
    tmp = run / "summary.csv.tmp"
    tmp.unlink(missing_ok=True)
    try:
        write_summary_csv(tmp, rows)
        tmp.replace(out)
    except OSError as exc:  # a full disk: no half file left, and the message says which
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror or str(exc), str(out)) from None
    return out


def _shard_number(path: str) -> int:
    m = re.search(r"shard-(\d+)of\d+", path)
    return int(m.group(1)) if m else 0


def _num(v: Any) -> float:
    return 0.0 if v is None or pd.isna(v) else float(v)


def compact_run(run_dir: str | os.PathLike[str]) -> Path | None:
    """Write `requests.parquet` beside a run's requests.csv: its complete rows, typed.

    Returns the path, or None when the run has no readable requests.csv. Written to a
    temporary name and renamed, so a reader never sees half a file.
    """
    csv_path = Path(run_dir) / "requests.csv"
    header = _header(csv_path)
    if header is None or any(c not in header for c in REQUIRED_REQUEST_COLUMNS):
        return None
    out = csv_path.with_name(PARQUET_NAME)
    tmp = out.with_name(PARQUET_NAME + ".tmp")
    columns = {c: request_dtypes().get(c, "VARCHAR") for c in header}
    con = duckdb.connect(":memory:")
    try:
        rel = con.read_csv(str(csv_path), header=True, auto_detect=False, store_rejects=True,
                           columns=columns)
        if "row_complete" in header:
            rel = rel.filter("row_complete = 1")
        rel.create_view("typed")
        con.execute("SELECT count(COLUMNS(*)) FROM typed").fetchall()
        bad = _rejected_rows(con, "reject_errors", "reject_scans")
        if bad:  # the copy would lose these rows: keep the CSV, which names them on every read
            raise StoreError(f"not compacted, {bad[0]}")
        con.table("typed").write_parquet(str(tmp))
        tmp.replace(out)
    except duckdb.Error as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot compact {csv_path}: {_first_line(str(exc))}") from None
    finally:
        con.close()
    return out


def compact_all(root: str | os.PathLike[str] | None = None,
                warnings: list[str] | None = None) -> list[Path]:
    """Compact every run (and shard) under `root` (default: the workspace's bench folder)
    whose Parquet copy is missing or older than its CSV, and write the summary of every
    sharded run whose shards have all finished since (`merge_shards`). A run that cannot be
    compacted (rows whose values do not fit their column) stays CSV only; why goes to
    `warnings` when given."""
    done = []
    folder = Path(root) if root is not None else workspace.prepare_bench_dir()
    for run_dir in sorted({p.parent.parent for p in folder.glob(f"*/*/{SHARD_GLOB}/meta.json")}):
        if not (run_dir / "summary.csv").exists():  # a sharded run complete since its end
            merged = merge_shards(run_dir)
            if merged is not None:
                done.append(merged)
    for csv_path in sorted([*folder.glob("*/*/requests.csv"),
                            *folder.glob(f"*/*/{SHARD_GLOB}/requests.csv")]):
        pq = csv_path.with_name(PARQUET_NAME)
        if pq.exists() and pq.stat().st_mtime >= csv_path.stat().st_mtime:
            continue
        try:
            path = compact_run(csv_path.parent)
        except StoreError as exc:
            if warnings is None:
                raise
            warnings.append(str(exc))
            continue
        if path is not None:
            done.append(path)
    return done


_CAST_ERROR = re.compile(r'Could not convert string "(.*?)" to \'(\w+)\'', re.S)
MAX_LISTED_ROWS = 5
"""Bad rows named one by one in a warning; the rest are counted."""


def _rejected_rows(con: duckdb.DuckDBPyConnection, errors: str, scans: str) -> list[str]:
    """One warning per file with rows that DuckDB rejected in a typed read, naming the file,
    the lines and the columns: a value that does not fit its column (`true` or 10^30 in an
    integer column, text in a number column; the views read it as NULL) or a row with too
    few or too many cells (left out). The last row
    of a file without a final newline is not listed: it is the half-written row of a killed
    run, which `RunStore._files` already reports."""
    rows = con.execute(f"""
        SELECT DISTINCT s.file_path, e.line, e.column_name, e.error_type, e.csv_line,
               e.line_byte_position, e.error_message
        FROM {errors} e JOIN {scans} s USING (scan_id, file_id)
        ORDER BY s.file_path, e.line""").fetchall()
    by_file: dict[str, list[str]] = {}
    for path, line, column, kind, text, start, message in rows:
        if not _ends_cleanly(Path(path)) and _is_last_line(Path(path), int(start), text):
            continue
        cast = _CAST_ERROR.search(str(message or ""))
        what = (f"{column} = '{cast.group(1)[:40]}' is not {cast.group(2)}, read as empty"
                if cast else f"{str(kind).lower()}, left out")
        entries = by_file.setdefault(str(path), [])
        if f"line {line}" not in (e.split(" (")[0] for e in entries):
            entries.append(f"line {line} ({what})")
    out = []
    for path, entries in by_file.items():
        shown = ", ".join(entries[:MAX_LISTED_ROWS])
        more = f" and {len(entries) - MAX_LISTED_ROWS} more" if len(entries) > MAX_LISTED_ROWS \
            else ""
        out.append(f"{path}: {len(entries)} row(s) with cells that do not fit their column's "
                   f"type: {shown}{more}")
    return out


def _ident(column: str) -> str:
    """A column name from a file's header as a quoted SQL identifier (quotes doubled), so
    that no header text is ever read as SQL."""
    return '"' + column.replace('"', '""') + '"'


def _is_last_line(path: Path, start: int, text: str | None) -> bool:
    try:
        return start + len((text or "").encode("utf-8")) >= path.stat().st_size - 1
    except OSError:
        return False


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def check_select(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """StoreError unless `sql` is exactly one SELECT (WITH ... SELECT included)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise StoreError(f"cannot parse the query: {_first_line(str(exc))}") from None
    if len(statements) != 1:
        raise StoreError(f"give exactly one SELECT statement, got {len(statements)}")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise StoreError(f"only SELECT queries are allowed (read-only), got "
                         f"{statements[0].type.name}")


def _pandas_dtype(duck: str) -> str:
    return {"DOUBLE": "float64", "BIGINT": "Int64", "BOOLEAN": "boolean"}.get(duck, "string")


def list_runs(root: str | os.PathLike[str] | None = None, **filters: str | None
              ) -> pd.DataFrame:
    """`RunStore(root).list_runs(**filters)`, closing the store."""
    with RunStore(root) as s:
        return s.list_runs(**filters)


def load_summary(root: str | os.PathLike[str], run_id: str) -> pd.DataFrame:
    with RunStore(root) as s:
        return s.summary(run_id)


def load_requests(root: str | os.PathLike[str], run_id: str) -> pd.DataFrame:
    with RunStore(root) as s:
        return s.requests(run_id)
