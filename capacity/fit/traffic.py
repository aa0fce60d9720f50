"""Size from a log: read a request log in place with DuckDB, summarise it, and turn its busiest
hour into the planner's inputs (docs/method.md, "Workloads"; docs/cli.md, `capacity workload`).

A log is CSV or JSON lines with, per request, a timestamp, prompt tokens and output tokens, and
optionally a conversation (or prefix) id. Columns are found by name (case-insensitive):

- timestamp: `timestamp`, `time`, `ts`, `start_unix_s` (`capacity bench`'s requests.csv),
  `arrival_time`, `created_at`, `metadata.request_start_ns` (AIPerf's profile_export.jsonl);
  a date-time text, or a number: seconds, or ms/ns where the name ends in `_ms`/`_ns` and ms
  in a Mooncake trace (`timestamp` beside `input_length`);
- prompt tokens: `prompt_tokens`, `input_tokens`, `ContextTokens` (Azure LLM trace),
  `input_length` (Mooncake), `Request tokens` (BurstGPT), `num_prompt_tokens`,
  `metrics.input_sequence_length.value` (AIPerf);
- output tokens: `output_tokens`, `completion_tokens`, `GeneratedTokens`, `output_length`,
  `Response tokens`, `num_output_tokens`, `metrics.output_sequence_length.value`;
- conversation / prefix id (optional): `conversation_id`, `session_id`, `prefix_id`,
  `conversation`, `SessionID`.

A vLLM benchmark result (`vllm bench serve --save-result --save-detailed`, one JSON object per
run with per-request arrays) is read as the log of its requests: `input_lens`, `output_lens`,
`errors` (a failed request) and `start_times` (each send, `time.perf_counter()` seconds; vLLM
versions before it saved no send times: then the lengths are summarised and the file says it
has no arrivals, `LogSummary.arrivals`).

A failed request (`success` false: a `capacity bench` row, a vLLM error), a row with a missing
or unreadable timestamp, a prompt that is not a whole number >= 1, or an output that is not a
whole number >= 1 (0 is a failed request in BurstGPT) is counted under its reason (the first
that applies, in that order) and left out: never dropped silently. The summary says how many
rows were read, kept and left out, and why.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from capacity.errors import InputError
from capacity.model.traffic import Arrivals, LengthDist, Traffic
from capacity.model.workload import Workload
from capacity.types import FloatArray, IntArray
from capacity.untrusted import loads_json

TS_NAMES = ("timestamp", "time", "ts", "start_unix_s", "arrival_time", "created_at",
            "metadata.request_start_ns")
PROMPT_NAMES = ("prompt_tokens", "input_tokens", "contexttokens", "input_length",
                "request tokens", "num_prompt_tokens", "metrics.input_sequence_length.value")
OUTPUT_NAMES = ("output_tokens", "completion_tokens", "generatedtokens", "output_length",
                "response tokens", "num_output_tokens", "metrics.output_sequence_length.value")
CONV_NAMES = ("conversation_id", "session_id", "prefix_id", "conversation", "sessionid")
BAD_REASONS = ("missing, unreadable or far-off timestamp (beyond +-1e11 s)",
               "prompt tokens not a whole number in 1..1e9",
               "output tokens not a whole number in 1..1e9", "failed request (success false)",
               "last row cut short (the file ends mid-row)")
MAX_ABS_TIMESTAMP_S = 1e11
"""Timestamps (seconds, after scaling) beyond +-1e11 (about 3,000 years from 1970) are bad rows:
+-1e308 overflowed the day count and one far-off start stretched the log's span."""
MAX_TOKENS_PER_REQUEST = 1e9
"""Prompt or output tokens beyond 1e9 are bad rows (one 1e30-token prompt overflowed the
integer columns and refused the whole file)."""
SAMPLE_ROWS = 100_000
"""Rows kept (about this many, chosen by a hash of their position) as the empirical length
distribution."""


@dataclass(frozen=True, kw_only=True)
class LengthSummary:
    """A token-length column: mean and percentiles (tokens), and a histogram on powers of two
    (`bins_tokens[i]` is the lower edge of bin i, `counts[i]` its rows; the last bin also holds
    everything longer)."""

    mean_tokens: float
    p50_tokens: float
    p90_tokens: float
    p99_tokens: float
    max_tokens: int
    bins_tokens: tuple[int, ...]
    counts: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class LogRequests:
    """A log's usable requests in send order (`summarize_log(keep_requests=N)`), for
    `capacity bench --replay`: arrays of one length."""

    send_s: FloatArray
    """Send time, seconds from the first kept request."""
    prompt_tokens: IntArray
    output_tokens: IntArray
    conversation: IntArray
    """A 64-bit hash of the conversation / prefix id, as signed int64; -1: none."""


@dataclass(frozen=True, kw_only=True)
class LogSummary:
    """What a request log says about its traffic."""

    path: str
    rows: int
    kept: int
    bad_rows: dict[str, int]
    """Rows left out, by reason (`BAD_REASONS`); every reason is listed, 0 when none."""
    columns: dict[str, str]
    """Which of the file's columns were read as timestamp, prompt, output, conversation."""
    span_s: float
    prompt: LengthSummary
    output: LengthSummary
    context_p_tokens: dict[float, float]
    """Percentiles of prompt + output tokens (the KV a request holds at its end)."""
    per_hour_of_day: tuple[float, ...]
    """Mean requests per clock hour 0..23 (UTC for absolute times, hours from the first
    request otherwise), over the days the log covers."""
    per_minute_of_day: tuple[float, ...]
    """Mean requests per minute 0..1439 of the day (same clock)."""
    absolute_time: bool
    busiest_hour_start_s: float
    busiest_hour_requests: int
    peak_rate_per_s: float
    """Requests in the busiest clock hour / 3600 (or rows / span for a log under an hour)."""
    burstiness_cv: float
    """Coefficient of variation of the inter-arrival gaps in the busiest hour (1 = Poisson;
    NaN with fewer than 10 gaps)."""
    prefix_reuse_share: float
    """Share of requests whose conversation / prefix id appeared earlier in the log."""
    sample_prompt_tokens: tuple[int, ...]
    sample_output_tokens: tuple[int, ...]
    arrivals: bool = True
    """False for a file with lengths but no send times (a vLLM result saved without
    `start_times`): the span, hours, busiest hour, rate and CV then mean nothing (0 or NaN) and
    the log cannot be sized for a rate (`workload`, `traffic` say so)."""
    requests: LogRequests | None = None
    """The first `keep_requests` usable requests in send order, when asked for."""

    def _need_arrivals(self) -> None:
        if not self.arrivals:
            raise InputError(f"{self.path}: no arrival times in this file (a vLLM result saved "
                             "without start_times, or every request at one instant): its "
                             "lengths are summarised, its rate is unknown; give a log with "
                             "timestamps, or the rate with --dau/--rpu")

    @property
    def busiest_hour_of_day(self) -> int:
        return int(math.floor((self.busiest_hour_start_s % 86400) / 3600)) \
            if self.absolute_time else int(self.busiest_hour_start_s // 3600)

    def traffic(self) -> Traffic:
        """The log as a workload: its lengths resampled (empirical), gamma arrivals at the
        busiest hour's rate with its CV (Poisson when the CV is within 5 % of 1)."""
        self._need_arrivals()
        cv = self.burstiness_cv if math.isfinite(self.burstiness_cv) else 1.0
        kind = "poisson" if abs(cv - 1.0) <= 0.05 else "gamma"
        return Traffic(prompt=LengthDist.empirical(self.sample_prompt_tokens),
                       output=LengthDist.empirical(self.sample_output_tokens),
                       arrivals=Arrivals(kind=kind, rate_per_s=self.peak_rate_per_s,
                                         cv=min(max(cv, 0.05), 20.0)),
                       name=Path(self.path).name, source=self.path)

    def workload(self, *, percentile: float = 99.0, headroom: float = 0.2) -> Workload:
        """F9 inputs for the busiest hour: its rate (as one hour holding every request of
        the window: DAU = rate x 3600, 1 request each, share 1, 1 peak hour), the mean prompt
        and output lengths (the analytic path takes means) and a context that holds the
        `percentile` of prompt + output tokens (memory is sized for long requests)."""
        self._need_arrivals()
        q = _percentile_key(percentile)
        ctx = max(1, math.ceil(self.context_p_tokens[q]))
        prompt = min(ctx, max(1, round(self.prompt.mean_tokens)))
        return Workload(daily_active_users=self.peak_rate_per_s * 3600.0,
                        requests_per_user_per_day=1.0, peak_share=1.0, peak_hours=1.0,
                        context_tokens=ctx, prompt_tokens=prompt,
                        output_tokens=max(1, round(self.output.mean_tokens)), headroom=headroom)


PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


def _percentile_key(p: float) -> float:
    if p not in PERCENTILES:
        raise InputError(f"percentile {p:g}: use one of {', '.join(f'{x:g}' for x in PERCENTILES)}")
    return p


def _pick(columns: list[str], names: tuple[str, ...]) -> str | None:
    low = {c.lower().strip(): c for c in columns}
    return next((low[n] for n in names if n in low), None)


def _is_json(path: Path) -> bool:
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        return True
    with path.open("rb") as f:
        head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{")


def _json_columns(path: Path) -> list[str]:
    """Dotted paths of the scalar fields of the first JSON line (nested objects flattened)."""
    try:
        with path.open("r", encoding="utf-8-sig") as f:
            first = f.readline()
        obj = loads_json(first)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: the first line is not a JSON object ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (at byte {exc.start:,}); save the file as "
                         "UTF-8") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: the first line is not a JSON object")
    out: list[str] = []

    def walk(prefix: str, o: dict[str, Any]) -> None:
        for k, v in o.items():
            name = f"{prefix}{k}"
            if isinstance(v, dict):
                walk(name + ".", v)
            else:
                out.append(name)
    walk("", obj)
    return out


def _ts_scale(name: str, mooncake: bool) -> float:
    low = name.lower()
    if low.endswith("_ns"):
        return 1e-9
    if low.endswith("_ms") or mooncake:
        return 1e-3
    return 1.0


VLLM_ARRAYS = ("input_lens", "output_lens")
"""The per-request arrays that mark a `vllm bench serve --save-result --save-detailed` file."""


def _vllm_results(path: Path) -> list[dict[str, Any]] | None:
    """The results of a `vllm bench serve --save-result --save-detailed` file (one JSON object
    per line: `--append-result` adds lines), or None when `path` is not one."""
    if not _is_json(path):
        return None
    try:
        return _vllm_lines(path)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (at byte {exc.start:,}); save the file as "
                         "UTF-8") from None


def _vllm_lines(path: Path) -> list[dict[str, Any]] | None:
    """`_vllm_results` on a file that is JSON (UnicodeDecodeError for bytes that are not UTF-8)."""
    with path.open("r", encoding="utf-8-sig") as f:
        first = f.readline()
        try:
            obj = loads_json(first)
        except json.JSONDecodeError:
            return None
        if not (isinstance(obj, dict) and all(isinstance(obj.get(k), list) for k in VLLM_ARRAYS)):
            return None
        out = [obj]
        for n, line in enumerate(f, start=2):
            if line.strip():
                try:
                    more = loads_json(line)
                except json.JSONDecodeError:
                    raise InputError(f"{path}: line {n} is not a vLLM result (JSON)") from None
                if isinstance(more, dict) and all(isinstance(more.get(k), list)
                                                  for k in VLLM_ARRAYS):
                    out.append(more)
    return out


def _vllm_rows(results: list[dict[str, Any]], into: Path) -> bool:
    """Write the results' requests as a JSON-lines log (send time, prompt and output tokens,
    success) into `into`; True when every result has `start_times` (vLLM's
    `time.perf_counter()` at each send, seconds from an arbitrary origin)."""
    timed = all(isinstance(r.get("start_times"), list) for r in results)
    with into.open("w", encoding="utf-8") as f:
        for r in results:
            n = len(r["input_lens"])
            starts = r.get("start_times") if timed else None
            errors = r.get("errors") if isinstance(r.get("errors"), list) else None
            if len(r["output_lens"]) != n or (starts is not None and len(starts) != n) \
                    or (errors is not None and len(errors) != n):
                raise InputError("a vLLM result whose per-request arrays differ in length")
            for i in range(n):
                f.write(json.dumps({
                    "timestamp": starts[i] if starts is not None else 0.0,
                    "prompt_tokens": r["input_lens"][i], "output_tokens": r["output_lens"][i],
                    "success": not (errors is not None and errors[i])}) + "\n")
    return timed


def summarize_log(path: str | Path, *, bins: int = 24, keep_requests: int = 0) -> LogSummary:
    """Read `path` in place (DuckDB) and summarise it (see the module docstring). A vLLM
    benchmark result (`vllm bench serve --save-result --save-detailed`: per-request arrays)
    is read as the log of its requests: `input_lens`, `output_lens`, `errors` and, when saved
    (newer vLLM), `start_times`; without them it has no arrivals (`LogSummary.arrivals`)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    results = _vllm_results(p)
    if results is None:
        s = _summarize(p, bins, keep_requests)
        # every kept request at one instant: lengths, but no arrival rate to size from (it
        # read as rows / 1e-9 s, 3e9 requests/s for three rows)
        return s if s.span_s > 0 else _without_arrivals(s)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rows = Path(tmp) / "vllm.jsonl"
        timed = _vllm_rows(results, rows)
        s = _summarize(rows, bins, keep_requests if timed else 0)
    cols = {"timestamp": "start_times", "prompt": "input_lens", "output": "output_lens"}
    if timed:
        return replace(s, path=str(p), columns=cols)
    del cols["timestamp"]
    return replace(_without_arrivals(s), path=str(p), columns=cols)


def _without_arrivals(s: LogSummary) -> LogSummary:
    """`s` as a log with request lengths but no arrivals (no send times, or all at one
    instant): the span, hours, busiest hour, rate and CV mean nothing."""
    return replace(s, arrivals=False, span_s=math.nan, per_hour_of_day=(0.0,) * 24,
                   per_minute_of_day=(0.0,) * 1440, busiest_hour_requests=0,
                   peak_rate_per_s=math.nan, burstiness_cv=math.nan)


def _ends_mid_row(p: Path) -> bool:
    """Whether a non-empty CSV file's last byte is not a line break: a writer killed mid-row
    (its rows end with one; a file saved by hand without a final line break loses its last
    row, counted with the rows left out)."""
    with p.open("rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return False
        f.seek(-1, 2)
        return f.read(1) not in (b"\n", b"\r")


def _summarize(p: Path, bins: int, keep: int = 0) -> LogSummary:
    import duckdb  # here: DuckDB adds a second to the start of every other command

    as_json = _is_json(p)
    con = duckdb.connect(":memory:")
    try:
        if as_json:
            cols = _json_columns(p)
            literal = "'" + str(p).replace("'", "''") + "'"
            flat = [c for c in cols if "." not in c]
            nested = len(flat) < len(cols)
            if nested:   # AIPerf's records: pull the dotted paths out of each object
                con.execute(f"CREATE VIEW src AS SELECT json FROM read_json_objects({literal}, "
                            "format='newline_delimited')")
            else:        # flat records: read the columns as text, every one
                spec = ", ".join("'" + c.replace("'", "''") + "': 'VARCHAR'" for c in flat)
                con.execute(f"CREATE VIEW src AS SELECT * FROM read_json({literal}, "
                            f"format='newline_delimited', columns={{{spec}}})")

            def cell(c: str) -> str:
                if not nested:
                    return '"' + c.replace('"', '""') + '"'
                path_expr = "$." + ".".join(f'"{part}"' for part in c.split("."))
                return f"json_extract_string(json, '{path_expr}')"
        else:
            # a run killed mid-write leaves a last row cut short: padded with NULLs, the
            # sniffer reads the file as it reads a whole one (without, it took the header
            # line for one column and refused the file), and the row is left out below
            rel = con.read_csv(str(p), header=True, all_varchar=True, null_padding=True)
            cols = list(rel.columns)
            rel.create_view("src")

            def cell(c: str) -> str:
                return '"' + c.replace('"', '""') + '"'
        ts_c, pr_c = _pick(cols, TS_NAMES), _pick(cols, PROMPT_NAMES)
        out_c, cv_c = _pick(cols, OUTPUT_NAMES), _pick(cols, CONV_NAMES)
        missing = [what for what, c in (("a timestamp", ts_c), ("prompt tokens", pr_c),
                                         ("output tokens", out_c)) if c is None]
        if missing:
            raise InputError(f"{p}: no column for {' and '.join(missing)} (found: "
                             f"{', '.join(cols[:12])}); see `capacity workload summarize --help`")
        assert ts_c is not None and pr_c is not None and out_c is not None
        succ_c = _pick(cols, ("success",))
        scale = _ts_scale(ts_c, mooncake=_pick(cols, ("input_length",)) is not None)
        ts_raw = f"nullif(trim({cell(ts_c)}), '')"
        probe = con.execute(f"SELECT count(TRY_CAST(t AS DOUBLE)), count(t) FROM (SELECT "
                            f"{ts_raw} AS t FROM src LIMIT 1000)").fetchone()
        numeric = probe is not None and probe[0] * 2 > probe[1]
        # one parse per file (numbers, or date-times: 26 characters keep microseconds)
        ts_expr = (f"TRY_CAST({ts_raw} AS DOUBLE) * {scale!r}" if numeric else
                   f"epoch(TRY_CAST(left({ts_raw}, 26) AS TIMESTAMP))")
        # the id as a 64-bit hash: reuse is counted on it (a collision among a million ids
        # has odds of 3e-8) and the table holds no strings
        # a blank id is no id: DuckDB hashes NULL to a constant, which would make every blank
        # cell one shared conversation (a bench log's empty prefix_id read as 100% reuse)
        conv_expr = (f"CASE WHEN nullif(trim({cell(cv_c)}), '') IS NULL THEN NULL::UBIGINT "
                     f"ELSE hash(trim({cell(cv_c)})) END") if cv_c else "NULL::UBIGINT"
        succ_expr = f"lower(trim({cell(succ_c)})) IN ('false', '0', 'no')" if succ_c else "false"
        reason = f"""CASE
            WHEN failed THEN 3
            WHEN ts IS NULL OR NOT isfinite(ts) OR abs(ts) > {MAX_ABS_TIMESTAMP_S!r} THEN 0
            WHEN prompt IS NULL OR NOT isfinite(prompt) OR prompt < 1 OR prompt != floor(prompt)
                OR prompt > {MAX_TOKENS_PER_REQUEST!r} THEN 1
            WHEN output IS NULL OR NOT isfinite(output) OR output < 1 OR output != floor(output)
                OR output > {MAX_TOKENS_PER_REQUEST!r} THEN 2
            ELSE -1 END"""
        # one pass over the file: parse, tag each row with its reason, keep the numbers only
        con.execute(f"""CREATE TABLE tagged AS SELECT ts, prompt, output, conv, {reason} AS bad
            FROM (SELECT {ts_expr} AS ts,
                         TRY_CAST({cell(pr_c)} AS DOUBLE) AS prompt,
                         TRY_CAST({cell(out_c)} AS DOUBLE) AS output,
                         {conv_expr} AS conv, {succ_expr} AS failed FROM src)""")
        if not as_json and _ends_mid_row(p):   # its last row, cut short
            con.execute("UPDATE tagged SET bad = 4 WHERE rowid = (SELECT max(rowid) FROM tagged)")
        counts = dict(con.execute("SELECT bad, count(*) FROM tagged GROUP BY bad").fetchall())
        rows = int(sum(counts.values()))
        kept = int(counts.get(-1, 0))
        bad = {BAD_REASONS[i]: int(counts.get(i, 0)) for i in range(len(BAD_REASONS))}
        if kept < 2:
            raise InputError(f"{p}: {rows} rows, {kept} usable (need at least 2): "
                             + ", ".join(f"{n} {r}" for r, n in bad.items() if n))
        con.execute("CREATE VIEW good AS SELECT rowid AS rid, ts, prompt::BIGINT AS prompt, "
                    "output::BIGINT AS output, conv FROM tagged WHERE bad = -1")
        # every whole-log figure in one pass: span, lengths, context percentiles, prefix reuse
        qs = [x / 100.0 for x in PERCENTILES]
        stats = con.execute(
            "SELECT min(ts), max(ts), avg(prompt), quantile_cont(prompt, [0.5, 0.9, 0.99]), "
            "max(prompt), avg(output), quantile_cont(output, [0.5, 0.9, 0.99]), max(output), "
            "quantile_cont(prompt + output, ?), count(conv) - count(DISTINCT conv) FROM good",
            [qs]).fetchone()
        assert stats is not None
        t0, t1 = stats[0], stats[1]
        ctx, reuse = stats[8:9], stats[9:10]
        absolute = float(t0) > 1e8   # after 1973: a Unix time, so the clock hour means something
        hists = {c: dict(con.execute(f"SELECT floor(log2({c}))::INT AS b, count(*) FROM good "
                                     "GROUP BY b").fetchall()) for c in ("prompt", "output")}
        lengths = {c: _length(stats[k:k + 3], hists[c], bins)
                   for c, k in (("prompt", 2), ("output", 5))}
        origin = 0.0 if absolute else float(t0)
        # calendar days the log touches (UTC), or started days since the first request
        days = (math.floor(float(t1) / 86400.0) - math.floor(float(t0) / 86400.0) + 1.0
                if absolute else math.floor((float(t1) - float(t0)) / 86400.0) + 1.0)
        minute = np.zeros(1440)
        for m, n in con.execute("SELECT floor(((ts - ?) % 86400) / 60)::INT AS m, count(*) "
                                "FROM good GROUP BY m", [origin]).fetchall():
            minute[int(m)] = n
        minute /= days
        hour = minute.reshape(24, 60).sum(axis=1)
        busiest = con.execute("SELECT floor((ts - ?) / 3600) AS h, count(*) AS n FROM good "
                              "GROUP BY h ORDER BY n DESC, h LIMIT 1", [origin]).fetchone()
        assert busiest is not None
        h_start = float(busiest[0]) * 3600.0 + origin
        span = float(t1) - float(t0)
        rate = int(busiest[1]) / 3600.0 if span >= 3600.0 else kept / max(span, 1e-9)
        # the busiest hour's gaps in numpy (a fixed summation order: the same CV every run)
        window = con.execute("SELECT ts FROM good WHERE ts >= ? AND ts < ? ORDER BY ts",
                             [h_start if span >= 3600.0 else float(t0),
                              h_start + 3600.0 if span >= 3600.0 else float(t1) + 1.0]
                             ).fetchnumpy()["ts"]
        g = np.diff(np.asarray(window, dtype=np.float64))
        cv = float(np.std(g) / np.mean(g)) if g.size >= 10 and np.mean(g) > 0 else math.nan
        # a seeded sample that does not depend on the threads: rows whose hashed position
        # falls under the share wanted (about SAMPLE_ROWS of them, in file order)
        share = min(1.0, SAMPLE_ROWS / kept)
        sample = con.execute("SELECT prompt, output FROM good WHERE hash(rid + 12) < ? "
                             "ORDER BY rid", [int(share * 2.0 ** 64) - 1]).fetchnumpy()
        kept_rows = None
        if keep > 0:   # the first `keep` requests in send order (ties in file order)
            got = con.execute("SELECT ts - ? AS t, prompt, output, coalesce((conv >> 1)::BIGINT, "
                              "-1) AS conv FROM good ORDER BY ts, rid LIMIT ?",
                              [float(t0), int(keep)]).fetchnumpy()
            kept_rows = LogRequests(
                send_s=np.asarray(got["t"], dtype=np.float64),
                prompt_tokens=np.asarray(got["prompt"], dtype=np.int64),
                output_tokens=np.asarray(got["output"], dtype=np.int64),
                conversation=np.asarray(got["conv"], dtype=np.int64))
    except duckdb.Error as exc:
        raise InputError(f"{p}: cannot read it as a request log ({str(exc).splitlines()[0]})"
                         ) from None
    finally:
        con.close()
    return LogSummary(
        path=str(p), rows=rows, kept=kept, bad_rows=bad,
        columns={k: v for k, v in (("timestamp", ts_c), ("prompt", pr_c), ("output", out_c),
                                   ("conversation", cv_c)) if v},
        span_s=span, prompt=lengths["prompt"], output=lengths["output"],
        context_p_tokens={p_: float(v) for p_, v in zip(PERCENTILES, ctx[0], strict=True)},
        per_hour_of_day=tuple(float(x) for x in hour),
        per_minute_of_day=tuple(float(x) for x in minute), absolute_time=absolute,
        busiest_hour_start_s=h_start, busiest_hour_requests=int(busiest[1]),
        peak_rate_per_s=rate, burstiness_cv=cv,
        prefix_reuse_share=float(reuse[0] if reuse else 0) / kept,
        sample_prompt_tokens=tuple(sample["prompt"].astype(np.int64).tolist()),
        sample_output_tokens=tuple(sample["output"].astype(np.int64).tolist()),
        requests=kept_rows)


def _length(row: Any, hist: dict[int, int], bins: int) -> LengthSummary:
    """A length column's summary from (mean, [p50, p90, p99], max) and its log2 histogram."""
    low = min(hist)
    top = min(max(hist), low + bins - 1)
    edges = tuple(2 ** b for b in range(low, top + 1))
    counts = tuple(int(hist.get(b, 0)) if b < top else
                   int(sum(v for k, v in hist.items() if k >= top)) for b in range(low, top + 1))
    return LengthSummary(mean_tokens=float(row[0]), p50_tokens=float(row[1][0]),
                         p90_tokens=float(row[1][1]), p99_tokens=float(row[1][2]),
                         max_tokens=int(row[2]), bins_tokens=edges, counts=counts)


def hourly_profile(summary: LogSummary) -> FloatArray:
    """Share of the day's requests per hour 0..23 (sums to 1)."""
    h = np.asarray(summary.per_hour_of_day, dtype=np.float64)
    return np.asarray(h / h.sum(), dtype=np.float64) if h.sum() > 0 else h


def summary_record(s: LogSummary) -> dict[str, Any]:
    """The summary as plain data (the CLI's JSON)."""
    def length(x: LengthSummary) -> dict[str, Any]:
        return {"mean_tokens": x.mean_tokens, "p50_tokens": x.p50_tokens,
                "p90_tokens": x.p90_tokens, "p99_tokens": x.p99_tokens,
                "max_tokens": x.max_tokens,
                "histogram": [{"from_tokens": b, "requests": n}
                              for b, n in zip(x.bins_tokens, x.counts, strict=True)]}
    return {"path": s.path, "rows": s.rows, "kept": s.kept, "bad_rows": s.bad_rows,
            "columns": s.columns, "span_s": s.span_s if math.isfinite(s.span_s) else None,
            "prompt": length(s.prompt),
            "output": length(s.output),
            "context_tokens": {f"p{k:g}": v for k, v in s.context_p_tokens.items()},
            "per_hour_of_day": list(s.per_hour_of_day),
            "busiest_hour_of_day": s.busiest_hour_of_day,
            "busiest_hour_requests": s.busiest_hour_requests,
            "peak_rate_per_s": s.peak_rate_per_s if math.isfinite(s.peak_rate_per_s) else None,
            "burstiness_cv": s.burstiness_cv if math.isfinite(s.burstiness_cv) else None,
            "prefix_reuse_share": s.prefix_reuse_share, "arrivals": s.arrivals}
