"""Read measurements engineers already have into `MeasuredPoint`s.

Formats:
- `csv`: our own columns `concurrency, context_tokens, tpot_ms` and optional `prompt_tokens`,
  `output_tokens`, `ttft_ms`, `output_tok_s` (one header row; units in the names).
- `vllm`: the result JSON that `vllm bench serve --save-result` writes (one object, or JSON
  lines from `--append-result`): `max_concurrency`, `completed`, `total_input_tokens`,
  `total_output_tokens`, `output_throughput`, `median_ttft_ms` / `mean_ttft_ms`, `median_tpot_ms` /
  `mean_tpot_ms`, `p99_ttft_ms`, `p99_tpot_ms`, `p90_*` where asked for.
- `aiperf`: AIPerf's `profile_export_aiperf.json` (metrics as objects with `unit`, `avg`, `p50`,
  `p90`, `p99`...; the concurrency in `input_config.loadgen.concurrency`) or its
  `profile_export_aiperf.csv` (a `Metric,avg,min,max,p1,...` section then a `Metric,Value`
  section; it does not record the concurrency, so pass it).

Every malformed file raises InputError naming the file and what is wrong; JSON nested deeper
than 64 levels is malformed (`capacity.untrusted.loads_json`), never a RecursionError.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from capacity.bench.engine_info import check_real_time
from capacity.bench.storage import read_run_meta
from capacity.errors import InputError
from capacity.fit.measured import MeasuredPoint, tpot_from_throughput
from capacity.types import Note
from capacity.untrusted import loads_json, read_capped

ImportFormat = Literal["csv", "vllm", "aiperf"]
FORMATS: tuple[ImportFormat, ...] = ("csv", "vllm", "aiperf")

CSV_REQUIRED = ("concurrency", "context_tokens", "tpot_ms")
CSV_OPTIONAL = ("prompt_tokens", "output_tokens", "ttft_ms", "output_tok_s")


MAX_MEASURED_FILE_BYTES = 1 << 30
"""The largest measurements file read (bytes, 1 GiB: ten million rows of a bench's requests);
a device such as /dev/zero, or a larger file, is refused before it is read (`read_capped`)."""


def _read_text(path: Path) -> str:
    try:
        return read_capped(path, MAX_MEASURED_FILE_BYTES).decode("utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(Note(f"{path}: cannot read it as UTF-8 text ({e})", code="imp_utf8",
                              file=path.name)) from None


def _number(path: Path, where: str, name: str, raw: Any, *, required: bool) -> float | None:
    """A finite number > 0 from a cell or a JSON value, or None when empty and optional."""
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        if required:
            raise InputError(Note(f"{path}: {where}: '{name}' is missing; it is required",
                                  code="imp_missing", file=path.name, where=where, name=name))
        return None
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise InputError(Note(f"{path}: {where}: '{name}' = {raw!r} is not a number",
                              code="imp_not_number", file=path.name, where=where, name=name,
                              value=str(raw)[:40])) from None
    if not math.isfinite(v) or v <= 0:
        if not required and v == 0:
            return None
        raise InputError(Note(f"{path}: {where}: '{name}' = {raw!r} must be a number > 0",
                              code="imp_not_positive", file=path.name, where=where, name=name,
                              value=str(raw)[:40]))
    return v


def detect_format(path: Path, text: str) -> ImportFormat:
    """Guess the format from the content: a JSON object with `*_tpot_ms` keys is vLLM, one
    with `time_to_first_token` or `inter_token_latency` objects is AIPerf; a CSV whose header
    is `Metric,...` is AIPerf's, any other CSV is ours."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        first = stripped.splitlines()[0] if stripped.startswith("{") else stripped
        try:
            obj = loads_json(stripped)
        except json.JSONDecodeError:
            try:
                obj = loads_json(first)
            except json.JSONDecodeError:
                raise InputError(Note(
                    f"{path}: looks like JSON but does not parse; expected a `vllm bench "
                    "serve` result or AIPerf profile_export_aiperf.json", code="imp_bad_json",
                    file=path.name)) from None
        if isinstance(obj, list) and obj:
            obj = obj[0]
        if isinstance(obj, Mapping):
            if any(k in obj for k in ("time_to_first_token", "inter_token_latency",
                                      "output_token_throughput")):
                return "aiperf"
            if any(str(k).endswith(("_tpot_ms", "_ttft_ms")) for k in obj):
                return "vllm"
        raise InputError(Note(
            f"{path}: a JSON file with neither vLLM bench keys (median_tpot_ms, ...) nor AIPerf "
            "metrics (time_to_first_token, ...); pass --format-in", code="imp_unknown_json",
            file=path.name))
    header = stripped.splitlines()[0] if stripped else ""
    if header.lower().startswith("metric,"):
        return "aiperf"
    return "csv"


def read_measured(path: str | Path, fmt: str | None = None, *, model: str = "",
                  gpu: str = "", engine: str = "",
                  concurrency: float | None = None) -> list[MeasuredPoint]:
    """Read a measurements file into points. `fmt` is `csv`, `vllm`, `aiperf` or None (guess).

    `model`, `gpu` and `engine` label the points (the files rarely say which GPU);
    `concurrency` is needed only for AIPerf's CSV, which does not record it.
    """
    p = Path(path)
    text = _read_text(p)
    if not text.strip():
        raise InputError(Note(f"{p}: the file is empty", code="imp_empty", file=p.name))
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown import format '{fmt}'; use one of {', '.join(FORMATS)}")
    kind = fmt or detect_format(p, text)
    labels = {"model": model, "gpu": gpu, "engine": engine}
    if kind == "csv":
        return _parse_csv_duckdb(p, text, **labels) or parse_csv(p, text, **labels)
    if kind == "vllm":
        return parse_vllm_json(p, text, **labels)
    if text.lstrip().startswith("{"):
        return parse_aiperf_json(p, text, **labels)
    return parse_aiperf_csv(p, text, concurrency=concurrency, **labels)


def parse_csv(path: Path, text: str, *, model: str = "", gpu: str = "",
              engine: str = "") -> list[MeasuredPoint]:
    """Our CSV: `concurrency, context_tokens, tpot_ms` (+ optional columns), one header row.

    Rows with the same concurrency, context, prompt and output tokens are one operating point
    measured several times: they become one point with the median of each measurement
    (`_point_from_group`), so a per-request export of millions of rows fits as fast as its
    levels. This is the row-by-row reader (exact line numbers in every message); files go
    through `_parse_csv_duckdb` first."""
    try:
        reader = csv.DictReader(io.StringIO(text))
        cols = [c.strip() for c in (reader.fieldnames or [])]
        _check_csv_columns(path, cols)
        groups: dict[tuple[float | None, ...], tuple[int, list[dict[str, float | None]]]] = {}
        for i, raw_row in enumerate(reader, start=2):
            row = {(k or "").strip(): v for k, v in raw_row.items()}
            if None in raw_row:
                raise InputError(f"{path}: line {i}: more cells than header columns")
            if all((v or "").strip() == "" for v in row.values() if isinstance(v, str)):
                continue
            where = Note(f"line {i}", code="imp_line", n=i)
            vals = {c: _number(path, where, c, row.get(c), required=c in CSV_REQUIRED)
                    for c in (*CSV_REQUIRED, *CSV_OPTIONAL)}
            ctx = vals["context_tokens"]
            assert ctx is not None
            prompt = vals["prompt_tokens"]
            if prompt is not None and prompt > ctx:
                raise InputError(f"{path}: {where}: prompt_tokens {prompt:g} exceeds "
                                 f"context_tokens {ctx:g}")
            key = tuple(vals[c] for c in CSV_KEYS)
            groups.setdefault(key, (i, []))[1].append(vals)
    except csv.Error as exc:
        raise InputError(Note(f"{path}: not a readable CSV ({exc})", code="imp_bad_csv",
                              file=path.name)) from None
    points = []
    for line, rows in groups.values():
        med = {c: _median([r[c] for r in rows]) for c in CSV_MEASURES}
        points.append(_point_from_group(path, line, len(rows), rows[0], med,
                                        model=model, gpu=gpu, engine=engine))
    if not points:
        raise InputError(Note(f"{path}: a header but no data rows", code="imp_no_rows",
                              file=path.name))
    return points


CSV_KEYS = ("concurrency", "context_tokens", "prompt_tokens", "output_tokens")
"""The columns that name an operating point; rows with equal keys are one point."""
CSV_MEASURES = ("tpot_ms", "ttft_ms", "output_tok_s")
"""The measured columns, summarised by their median over a point's rows."""


def _check_csv_columns(path: Path, cols: Sequence[str]) -> None:
    missing = [c for c in CSV_REQUIRED if c not in cols]
    if missing:
        raise InputError(Note(
            f"{path}: missing column{'' if len(missing) == 1 else 's'} {', '.join(missing)}; "
            f"the header must include {', '.join(CSV_REQUIRED)} (optional: "
            f"{', '.join(CSV_OPTIONAL)}); found: {', '.join(cols) or 'nothing'}",
            code="imp_missing_columns", n=len(missing), file=path.name,
            missing=", ".join(missing), required=", ".join(CSV_REQUIRED),
            found=", ".join(cols)[:200] or "-"))


def _median(values: Sequence[float | None]) -> float | None:
    """Median of the values that exist (None when none does); the mean of the two middle
    values for an even count, as DuckDB's `median`."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def _point_from_group(path: Path, line: int, n: int, keys: Mapping[str, float | None],
                      med: Mapping[str, float | None], *, model: str, gpu: str,
                      engine: str) -> MeasuredPoint:
    ctx = keys["context_tokens"]
    assert ctx is not None
    return MeasuredPoint(
        model=model, gpu=gpu, engine=engine, concurrency=float(keys["concurrency"] or 0),
        context_tokens=int(round(ctx)), prompt_tokens=keys["prompt_tokens"],
        output_tokens=keys["output_tokens"], tpot_ms=med["tpot_ms"],
        ttft_ms=med["ttft_ms"], output_tok_s=med["output_tok_s"],
        stat="as given" if n == 1 else f"median of {n} rows",
        source=f"{path.name}:{line}" + (f" (+{n - 1} rows)" if n > 1 else ""))


_BLANK_LINE = re.compile(r"\n[ \t\r]*\n")


def _parse_csv_duckdb(path: Path, text: str, *, model: str = "", gpu: str = "",
                      engine: str = "") -> list[MeasuredPoint] | None:
    """`parse_csv` for a file, in DuckDB: read in place, group by the point's keys, medians.

    Returns None when the file needs the row-by-row reader: a cell that is not a valid
    positive number, a prompt longer than its context, a ragged row, blank lines (line
    numbers would shift) or anything DuckDB cannot read; that reader then names the line."""
    first = text.split("\n", 1)[0]
    try:
        header = [c.strip() for c in next(csv.reader([first]))]
    except (csv.Error, StopIteration):
        return None
    _check_csv_columns(path, header)
    if len(set(header)) != len(header) or _BLANK_LINE.search(text.lstrip("\ufeff")):
        return None
    import duckdb  # here: DuckDB adds a second to the start of every other command

    present = [c for c in (*CSV_REQUIRED, *CSV_OPTIONAL) if c in header]
    con = duckdb.connect(":memory:")
    try:
        rel = con.read_csv(str(path), header=True, auto_detect=False, sep=",", quotechar='"',
                           escapechar='"', strict_mode=True,
                           columns={f"c{i}": "VARCHAR" for i in range(len(header))})
        rel.create("raw")  # a table: its rowid is the row's place in the file
        idx = {c: f"c{header.index(c)}" for c in present}
        cells = ", ".join(f"nullif(trim({idx[c]}), '') AS {c}_raw, "
                          f"TRY_CAST(nullif(trim({idx[c]}), '') AS DOUBLE) AS {c}"
                          for c in present)
        con.execute(f"CREATE VIEW v AS SELECT rowid + 2 AS line, {cells} FROM raw")
        empty = " AND ".join(f"{c}_raw IS NULL" for c in present)
        bad = [f"({c}_raw IS NOT NULL AND ({c} IS NULL OR NOT isfinite({c}) OR {c} < 0))"
               for c in present]
        bad += [f"coalesce({c}, 0) <= 0" for c in CSV_REQUIRED]
        if "prompt_tokens" in present:
            bad.append("prompt_tokens > context_tokens")
        con.execute(f"CREATE TABLE rows AS SELECT * FROM v WHERE NOT ({empty})")
        n_bad = con.execute(f"SELECT count(*) FROM rows WHERE {' OR '.join(bad)}").fetchone()
        if n_bad is None or n_bad[0]:
            return None

        def col(c: str) -> str:
            return (c if c in CSV_REQUIRED else f"nullif({c}, 0)") if c in present else "NULL"
        inner = ", ".join(f"{col(c)}::DOUBLE AS {c}" for c in (*CSV_KEYS, *CSV_MEASURES))
        meds = ", ".join(f"median({c}) AS {c}" for c in CSV_MEASURES)
        out = con.execute(f"SELECT min(line), count(*), {', '.join(CSV_KEYS)}, {meds} "
                          f"FROM (SELECT line, {inner} FROM rows) "
                          "GROUP BY ALL ORDER BY 1").fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()
    points = []
    for line, n, *vals in out:
        keys_d = dict(zip(CSV_KEYS, vals[:len(CSV_KEYS)], strict=True))
        med = dict(zip(CSV_MEASURES, vals[len(CSV_KEYS):], strict=True))
        points.append(_point_from_group(path, int(line), int(n), keys_d, med, model=model,
                                        gpu=gpu, engine=engine))
    if not points:
        raise InputError(Note(f"{path}: a header but no data rows", code="imp_no_rows",
                              file=path.name))
    return points


def _json_records(path: Path, text: str) -> list[Mapping[str, Any]]:
    """One JSON object, a list of them, or JSON lines."""
    try:
        obj = loads_json(text)
        records = obj if isinstance(obj, list) else [obj]
    except json.JSONDecodeError as e:
        records = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(loads_json(line))
            except json.JSONDecodeError:
                raise InputError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); "
                                 f"line {n} is not a JSON object either") from None
    for i, r in enumerate(records):
        if not isinstance(r, Mapping):
            raise InputError(f"{path}: record {i + 1} is not a JSON object")
    return records


def _pick(rec: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if rec.get(k) is not None:
            return rec[k]
    return None


def parse_vllm_json(path: Path, text: str, *, model: str = "", gpu: str = "",
                    engine: str = "") -> list[MeasuredPoint]:
    """`vllm bench serve` result JSON (or JSON lines): one point per result.

    Concurrency is `max_concurrency`; for a request-rate run without it, Little's law from
    the run itself: completed x mean E2E / duration. Prompt and output tokens per request
    are the totals / completed.
    """
    points: list[MeasuredPoint] = []
    for i, rec in enumerate(_json_records(path, text), start=1):
        where = Note(f"result {i}", code="imp_result", n=i)
        completed = _number(path, where, "completed", rec.get("completed"), required=True)
        assert completed is not None
        tpot_key = "median_tpot_ms" if rec.get("median_tpot_ms") is not None else "mean_tpot_ms"
        tpot = _number(path, where, tpot_key, rec.get(tpot_key), required=True)
        ttft_key = "median_ttft_ms" if rec.get("median_ttft_ms") is not None else "mean_ttft_ms"
        ttft = _number(path, where, ttft_key, rec.get(ttft_key), required=False)
        conc = _number(path, where, "max_concurrency", rec.get("max_concurrency"),
                       required=False)
        if conc is None:
            dur = _number(path, where, "duration", rec.get("duration"), required=False)
            e2e = _number(path, where, "mean_e2el_ms", rec.get("mean_e2el_ms"), required=False)
            if dur is None or e2e is None:
                raise InputError(f"{path}: {where}: no 'max_concurrency' (a request-rate run?) "
                                 "and no 'duration' + 'mean_e2el_ms' to derive it from; rerun "
                                 "with --max-concurrency or add it to the file")
            conc = completed * e2e / 1e3 / dur
        tin = _number(path, where, "total_input_tokens", rec.get("total_input_tokens"),
                      required=True)
        tout = _number(path, where, "total_output_tokens", rec.get("total_output_tokens"),
                       required=True)
        assert tin is not None and tout is not None
        prompt, out = tin / completed, tout / completed
        points.append(MeasuredPoint(
            model=model or str(rec.get("model_id") or ""), gpu=gpu,
            engine=engine or "vLLM", concurrency=conc,
            context_tokens=int(math.ceil(prompt + out)), prompt_tokens=prompt,
            output_tokens=out, tpot_ms=tpot, ttft_ms=ttft,
            output_tok_s=_number(path, where, "output_throughput",
                                 rec.get("output_throughput"), required=False),
            tpot_p90_ms=_number(path, where, "p90_tpot_ms", rec.get("p90_tpot_ms"),
                                required=False),
            tpot_p99_ms=_number(path, where, "p99_tpot_ms", rec.get("p99_tpot_ms"),
                                required=False),
            ttft_p90_ms=_number(path, where, "p90_ttft_ms", rec.get("p90_ttft_ms"),
                                required=False),
            ttft_p99_ms=_number(path, where, "p99_ttft_ms", rec.get("p99_ttft_ms"),
                                required=False),
            stat="median" if tpot_key.startswith("median") else "mean",
            source=f"{path.name}#{i}"))
    if not points:
        raise InputError(f"{path}: no results in the file")
    return points


def _metric(path: Path, obj: Mapping[str, Any], name: str, stat: str, *,
            required: bool) -> float | None:
    m = obj.get(name)
    if m is None:
        if required:
            raise InputError(f"{path}: metric '{name}' is missing (an AIPerf export of a "
                             "streaming run has time_to_first_token and inter_token_latency)")
        return None
    if not isinstance(m, Mapping):
        raise InputError(f"{path}: metric '{name}' should be an object with unit/avg/p50...")
    return _number(path, name, stat, m.get(stat), required=required)


def parse_aiperf_json(path: Path, text: str, *, model: str = "", gpu: str = "",
                      engine: str = "") -> list[MeasuredPoint]:
    """AIPerf `profile_export_aiperf.json`: one point (TPOT = inter_token_latency p50)."""
    try:
        obj = loads_json(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(obj, Mapping):
        raise InputError(f"{path}: expected one JSON object (profile_export_aiperf.json)")
    if isinstance(obj.get("records"), Mapping):  # older exports nest metrics under "records"
        obj = {**obj, **obj["records"]}
    cfg = obj.get("input_config")
    loadgen = cfg.get("loadgen") if isinstance(cfg, Mapping) else None
    conc_raw = loadgen.get("concurrency") if isinstance(loadgen, Mapping) else None
    conc = _number(path, "input_config.loadgen", "concurrency", conc_raw, required=False)
    if conc is None:
        raise InputError(f"{path}: no input_config.loadgen.concurrency: this importer takes "
                         "fixed-concurrency runs (aiperf profile --concurrency N)")
    names = cfg.get("endpoint", {}).get("model_names") if isinstance(cfg, Mapping) else None
    itl = _metric(path, obj, "inter_token_latency", "p50", required=True)
    isl = _metric(path, obj, "input_sequence_length", "avg", required=False)
    osl = _metric(path, obj, "output_sequence_length", "avg", required=False)
    if isl is None or osl is None:
        raise InputError(f"{path}: input_sequence_length and output_sequence_length (avg) are "
                         "needed to know the context")
    return [MeasuredPoint(
        model=model or (str(names[0]) if isinstance(names, Sequence) and names else ""),
        gpu=gpu, engine=engine, concurrency=conc, context_tokens=int(math.ceil(isl + osl)),
        prompt_tokens=isl, output_tokens=osl, tpot_ms=itl,
        ttft_ms=_metric(path, obj, "time_to_first_token", "p50", required=True),
        output_tok_s=_metric(path, obj, "output_token_throughput", "avg", required=False),
        tpot_p90_ms=_metric(path, obj, "inter_token_latency", "p90", required=False),
        tpot_p99_ms=_metric(path, obj, "inter_token_latency", "p99", required=False),
        ttft_p90_ms=_metric(path, obj, "time_to_first_token", "p90", required=False),
        ttft_p99_ms=_metric(path, obj, "time_to_first_token", "p99", required=False),
        stat="median", source=path.name)]


def _csv_rows(path: Path, text: str) -> list[list[str]]:
    try:
        return list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise InputError(f"{path}: not a readable CSV ({exc})") from None


def parse_aiperf_csv(path: Path, text: str, *, concurrency: float | None, model: str = "",
                     gpu: str = "", engine: str = "") -> list[MeasuredPoint]:
    """AIPerf `profile_export_aiperf.csv`: a statistics section (`Metric,avg,...,p50,...`) and a
    `Metric,Value` section. It does not record the concurrency: pass it."""
    stats: dict[str, dict[str, str]] = {}
    values: dict[str, str] = {}
    header: list[str] | None = None
    for row in _csv_rows(path, text):
        if not row or all(not c.strip() for c in row):
            header = None
            continue
        if row[0].strip() == "Metric":
            header = [c.strip() for c in row]
            continue
        if header is None:
            continue
        name = row[0].strip().lower()
        if header[:2] == ["Metric", "Value"]:
            values[name] = row[1] if len(row) > 1 else ""
        elif "p50" in header:
            stats[name] = dict(zip(header, row, strict=False))
    if not stats:
        raise InputError(f"{path}: no 'Metric,avg,min,max,...,p50,...' section; is this "
                         "AIPerf's profile_export_aiperf.csv?")
    if concurrency is None:
        raise InputError(f"{path}: AIPerf's CSV does not record the concurrency; pass it "
                         "(--concurrency N) or import profile_export_aiperf.json instead")

    def stat(metric: str, col: str, required: bool) -> float | None:
        row = stats.get(metric)
        if row is None:
            if required:
                raise InputError(f"{path}: row '{metric}' is missing")
            return None
        return _number(path, f"row '{metric}'", col, row.get(col), required=required)

    isl = stat("input sequence length (tokens)", "avg", True)
    osl = stat("output sequence length (tokens)", "avg", True)
    assert isl is not None and osl is not None
    tput = values.get("output token throughput (tokens/sec)")
    return [MeasuredPoint(
        model=model, gpu=gpu, engine=engine, concurrency=concurrency,
        context_tokens=int(math.ceil(isl + osl)), prompt_tokens=isl, output_tokens=osl,
        tpot_ms=stat("inter token latency (ms)", "p50", True),
        ttft_ms=stat("time to first token (ms)", "p50", False),
        output_tok_s=_number(path, "Metric,Value section", "Output Token Throughput", tput,
                             required=False),
        tpot_p90_ms=stat("inter token latency (ms)", "p90", False),
        tpot_p99_ms=stat("inter token latency (ms)", "p99", False),
        ttft_p90_ms=stat("time to first token (ms)", "p90", False),
        ttft_p99_ms=stat("time to first token (ms)", "p99", False),
        stat="median", source=path.name)]


BENCH_ALIASES: dict[str, tuple[str, ...]] = {
    "concurrency": ("concurrency",),
    "tpot_ms": ("tpot_p50_ms", "tpot_ms_p50", "median_tpot_ms", "tpot_median_ms", "tpot_ms"),
    "ttft_ms": ("ttft_p50_ms", "ttft_ms_p50", "median_ttft_ms", "ttft_median_ms", "ttft_ms"),
    "prompt_tokens": ("prompt_tokens_mean", "mean_prompt_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens_mean", "mean_output_tokens", "output_tokens"),
    "output_tok_s": ("output_tok_s", "output_tokens_per_s", "output_throughput_tok_s"),
    "tpot_p90_ms": ("tpot_p90_ms", "tpot_ms_p90", "p90_tpot_ms"),
    "tpot_p99_ms": ("tpot_p99_ms", "tpot_ms_p99", "p99_tpot_ms"),
    "ttft_p90_ms": ("ttft_p90_ms", "ttft_ms_p90", "p90_ttft_ms"),
    "ttft_p99_ms": ("ttft_p99_ms", "ttft_ms_p99", "p99_ttft_ms"),
    "itl_p50_ms": ("itl_p50_ms", "itl_ms_p50", "median_itl_ms"),
}
"""Column names a `capacity bench` per-level summary.csv may use for each field (docs/method.md
7 fixes units in names, not the names themselves; the first one present wins)."""


def parse_bench_summary(path: Path, text: str, *, model: str = "", gpu: str = "",
                        engine: str = "") -> list[MeasuredPoint]:
    """A `capacity bench` per-level summary.csv: one point per level (row)."""
    try:
        records = list(csv.DictReader(io.StringIO(text)))
        cols = [c.strip() for c in (csv.DictReader(io.StringIO(text)).fieldnames or [])]
    except csv.Error as exc:
        raise InputError(f"{path}: not a readable CSV ({exc})") from None
    pick = {f: next((a for a in aliases if a in cols), None)
            for f, aliases in BENCH_ALIASES.items()}
    needed = ("concurrency", "tpot_ms", "prompt_tokens", "output_tokens")
    missing = [f for f in needed if pick[f] is None]
    if missing:
        raise InputError(f"{path}: not a bench summary this version can read: no column for "
                         + ", ".join(f"{f} (one of {', '.join(BENCH_ALIASES[f])})"
                                     for f in missing))
    points = []
    for i, row in enumerate(records, start=2):
        vals = {f: _number(path, Note(f"line {i}", code="imp_line", n=i), c, row.get(c), required=f in needed)
                for f, c in pick.items() if c is not None}
        prompt, out = vals["prompt_tokens"], vals["output_tokens"]
        assert prompt is not None and out is not None
        points.append(MeasuredPoint(
            model=model, gpu=gpu, engine=engine, concurrency=float(vals["concurrency"] or 0),
            context_tokens=int(math.ceil(prompt + out)), prompt_tokens=prompt,
            output_tokens=out, tpot_ms=vals["tpot_ms"], ttft_ms=vals.get("ttft_ms"),
            output_tok_s=vals.get("output_tok_s"), tpot_p90_ms=vals.get("tpot_p90_ms"),
            tpot_p99_ms=vals.get("tpot_p99_ms"), ttft_p90_ms=vals.get("ttft_p90_ms"),
            ttft_p99_ms=vals.get("ttft_p99_ms"), itl_p50_ms=vals.get("itl_p50_ms"),
            stat="median",
            source=f"{path.parent.name}/{path.name}:{i}"))
    if not points:
        raise InputError(f"{path}: a header but no levels")
    return points


def read_bench_label(label: str, bench_dir: Path, *, model: str = "", gpu: str = "",
                     engine: str = "") -> list[MeasuredPoint]:
    """Every level of a stored bench run: `bench_dir/<label>/*/summary.csv` (and
    `bench_dir/<label>/summary.csv`)."""
    root = bench_dir / label
    files = sorted([*root.glob("*/summary.csv"), *root.glob("summary.csv")])
    if not files:
        raise InputError(f"no stored bench run '{label}' (looked for {root}/*/summary.csv); "
                         "run `capacity bench ... --label LABEL` first or pass --measured FILE")
    for f in files:   # a sped-up simulator's times are not a GPU's (its meta.json says so)
        check_real_time(read_run_meta(f.parent), f"bench run '{label}' ({f.parent.name})")
    return [p for f in files
            for p in parse_bench_summary(f, _read_text(f), model=model, gpu=gpu, engine=engine)]


__all__ = [
    "BENCH_ALIASES", "FORMATS", "ImportFormat", "detect_format", "parse_aiperf_csv",
    "parse_aiperf_json", "parse_bench_summary", "parse_csv", "parse_vllm_json",
    "read_bench_label", "read_measured", "tpot_from_throughput",
]
