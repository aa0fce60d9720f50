"""The benchmark client: closed-loop levels (or a seeded Poisson open loop) of streamed requests.

This module runs a whole run (`run_bench`): it asks the server for its model, writes the run's
files as it goes (`capacity.bench.storage.RunWriter`), goes through the levels in their passes
(`pass_plan`) or the probes of `--find-max` (`capacity.bench.findmax`), warms each level up,
has each level run in this process or by the worker processes (`capacity.bench.workers`), and
summarizes it. The rest of the client lies below it, each part in its own module:
- `capacity.bench.config`: what a run is asked to do (`BenchConfig`, `BenchLimits`), checked;
- `capacity.bench.transport`: connections, requests sent in one write, capped reads;
- `capacity.bench.stream`: one streamed answer as it arrives, and its record;
- `capacity.bench.runner`: one process's requests and its part of a level (`drive_level`).

Every request ends as a `RequestRecord`; failures are recorded with an `error_type`, never
raised mid-run. Configuration errors (unreachable server, 401, unknown
model) raise BenchError before any measurement.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import platform
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from capacity.bench.config import ArrivalMode, BenchConfig, ConfigError
from capacity.bench.engine_info import speedup_warning
from capacity.bench.findmax import FindMaxConfig, FindMaxResult, Search, judge, probe_requests
from capacity.bench.metrics import (
    CACHED_SHARE_WARNING,
    ClientLoad,
    ErrorType,
    LevelSummary,
    RequestRecord,
    cached_share,
    judge_workers,
    pass_bounds,
    span_s,
    summarize,
)
from capacity.bench.runner import Runner, drive_level, split_slots
from capacity.bench.s3 import cache_dir as s3_cache_dir
from capacity.bench.s3 import claim_run, is_s3, push
from capacity.bench.storage import RunStatus, RunWriter, process_owner, redact, run_secrets
from capacity.bench.transport import client_pool, fetch_models, first_model
from capacity.bench.workers import WorkerPool
from capacity.errors import BenchError, InputError


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """What a run measured: its id and folder, the model asked, a summary row per level and the
    warnings that go with them."""

    run_id: str
    run_dir: str
    model: str
    summaries: tuple[LevelSummary, ...]
    warnings: tuple[str, ...]
    find_max: FindMaxResult | None = None
    """`--find-max`'s answer (None for a run of fixed levels)."""


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("capacity", "httpx", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def run_bench(cfg: BenchConfig, api_key: str | None = None, *,
                    emit: Callable[[str], None] = _stderr,
                    transport: httpx.AsyncBaseTransport | None = None,
                    meta_extra: dict[str, Any] | None = None,
                    find_max: FindMaxConfig | None = None) -> BenchResult:
    """Run every level of `cfg`, writing the run's files as it goes; returns the summaries.
    With `find_max`, the levels are the probes of its search (`capacity.bench.findmax`), and
    the answer is in the result and meta.json's `find_max`.

    The API key is redacted (`capacity.bench.storage.redact`) from everything that leaves
    the client: stored rows and meta.json, the messages passed to `emit`, the errors raised
    and the result, even when the server echoes it back."""
    secrets = run_secrets(api_key, cfg.base_url)

    def out(msg: str) -> None:
        emit(redact(msg, secrets))

    try:
        result = await _run_bench(cfg, api_key, emit=out, transport=transport,
                                  meta_extra=meta_extra, find_max=find_max)
    except (BenchError, InputError) as exc:
        clean = redact(str(exc), secrets)
        if clean == str(exc):
            raise
        raise type(exc)(clean) from None
    return replace(result, model=redact(result.model, secrets))


async def _run_bench(cfg: BenchConfig, api_key: str | None, *, emit: Callable[[str], None],
                     transport: httpx.AsyncBaseTransport | None,
                     meta_extra: dict[str, Any] | None,
                     find_max: FindMaxConfig | None = None) -> BenchResult:
    cfg.validate()
    if find_max is not None:
        find_max.validate()
        if cfg.passes > 1:
            raise ConfigError("{passes} goes through fixed levels; {find_max} picks its loads "
                              "as it goes: drop one of them")
    if transport is not None and cfg.workers > 1:
        raise ConfigError("a custom transport runs in this process only: use {workers}=1")
    warnings: list[str] = []
    if (w := speedup_warning(meta_extra or {})) is not None:
        warnings.append(w)
    async with contextlib.AsyncExitStack() as stack:
        clients = client_pool(stack, cfg, transport)
        first = await clients.get()
        models = await fetch_models(first, cfg.base_url, api_key,
                                     deadline_s=cfg.timeout_s + cfg.connect_timeout_s)
        clients.put(first)
        model = cfg.model or first_model(models)
        if model is None:
            raise BenchError(f"{cfg.base_url}/models lists no model: pass --model NAME")
        writer = RunWriter(_local_out(cfg.out_dir), cfg.label, run_id=cfg.run_id,
                           secrets=run_secrets(api_key, cfg.base_url),
                           shard=(f"shard-{cfg.shard_index + 1}of{cfg.shard_count}"
                                  if cfg.shard_count > 1 else None))
        if is_s3(cfg.out_dir):
            _claim(writer, cfg)
        started = datetime.now(UTC).isoformat()
        meta: dict[str, Any] = {
            "run_id": writer.run_id, "label": cfg.label, "status": RunStatus.RUNNING.value,
            "started_at": started, "finished_at": None,
            # the specs are the workload's requests (up to millions): their count and source
            "args": {**asdict(replace(cfg, specs=())), "specs": len(cfg.specs)}, "model": model,
            "server_models": models, "versions": _versions(), "owner": process_owner(),
            "shard_index": cfg.shard_index + 1, "shard_count": cfg.shard_count,
            **(meta_extra or {}),
        }
        writer.write_meta(meta)
        runner = Runner(cfg, api_key, clients, model, writer, emit)
        summaries: list[LevelSummary] = []
        parts: dict[int, list[_Part]] = {}  # the finished passes of levels not yet summarized
        pool: WorkerPool | None = None
        try:
            if cfg.workers > 1:
                pool = WorkerPool(cfg, api_key, model=model, run_id=writer.run_id)
                await pool.start()
                emit(f"  {cfg.workers} worker processes started")
            if cfg.start_at_unix_s is not None:
                wait_s = cfg.start_at_unix_s - time.time()
                if wait_s > 0:
                    emit(f"  waiting {wait_s:.1f} s for --start-at")
                    await asyncio.sleep(wait_s)
                elif wait_s < -1.0:
                    w = f"started {-wait_s:.1f} s after --start-at"
                    warnings.append(w)
                    emit("warning: " + w)
            if find_max is not None:
                fm_result = await _find_max(runner, find_max, warnings, pool, summaries)
                meta["find_max"] = fm_result.meta(find_max)
            plan = pass_plan(cfg.concurrency, cfg.passes, cfg.requests) if find_max is None \
                else []
            for k, (p, level, share) in enumerate(plan):
                if p == 0 and is_one_burst(level, cfg.requests):
                    w = (f"level {level}: {cfg.requests} requests < {BURST_FACTOR} x "
                         "concurrency: one burst, so ramp-up and tail dominate; use --requests "
                         f"{BURST_FACTOR * level} or more")
                    warnings.append(w)
                    emit("warning: " + w)
                if cfg.warmup:
                    await _warmup(runner, level, first=k == 0)
                tag = f", pass {p + 1}/{cfg.passes}" if cfg.passes > 1 else ""
                parts.setdefault(level, []).append(
                    await _run_part(runner, level, pool, share=share, tag=tag))
                if p == cfg.passes - 1:
                    row = _level_summary(runner, level, parts.pop(level), warnings)
                    _store_level(runner, row, summaries)
            if cfg.passes > 1:  # the last pass ends with the first level: list them as given
                summaries.sort(key=lambda r: cfg.concurrency.index(r.concurrency))
            meta["status"] = RunStatus.FINISHED.value
        except BaseException:
            meta["status"] = RunStatus.INTERRUPTED.value
            _store_unfinished(runner, parts, warnings, summaries)
            raise
        finally:
            if pool is not None:
                pool.close(graceful=meta["status"] == RunStatus.FINISHED.value)
            meta["finished_at"] = datetime.now(UTC).isoformat()
            meta["dropped_fields"] = runner.compat.dropped
            meta["warnings"] = warnings
            meta["stamp_sources"] = dict(sorted(writer.stamp_sources.items()))
            writer.write_meta(meta)
            writer.close()
    if is_s3(cfg.out_dir):  # the Parquet copy last, so that it is not older than its CSV
        _push(writer, cfg, [writer.requests_path, writer.summary_path, writer.meta_path,
                            writer.dir / "requests.parquet"])
    if "ignore_eos" in runner.compat.dropped:
        warnings.append("the server rejected ignore_eos: output lengths may differ from "
                        "--max-tokens (see output_length_mismatch)")
    if "stream_options" in runner.compat.dropped:
        warnings.append("the server rejected stream_options: output tokens are counted from "
                        "chunks (a lower bound)")
    return BenchResult(run_id=writer.run_id, run_dir=str(writer.dir), model=model,
                       summaries=tuple(summaries), warnings=tuple(warnings),
                       find_max=fm_result if find_max is not None else None)


def _store_level(runner: Runner, row: LevelSummary, summaries: list[LevelSummary]) -> None:
    """A level has ended: its summary row, the Parquet copy (and the upload)."""
    summaries.append(row)
    assert runner.writer is not None
    runner.writer.write_summary(row)
    _level_files(runner.writer, runner.cfg, runner.emit)


def _store_unfinished(runner: Runner, parts: dict[int, list[_Part]], warnings: list[str],
                      summaries: list[LevelSummary]) -> None:
    """A run stopped between a level's passes (`--passes`): a summary row for each level that
    finished some of its passes but not its last, pooled from those, and a warning that says
    so. The stopped pass's answered requests are in requests.csv, not in any row."""
    for level, done in parts.items():
        if not done:
            continue
        try:
            _store_level(runner, _level_summary(runner, level, done, warnings), summaries)
        except Exception as exc:  # the run is failing already: keep its own error
            warnings.append(f"level {level}: its finished passes were not summarized ({exc})")
            continue
        w = (f"level {level}: the run stopped after {len(done)} of {runner.cfg.passes} "
             "passes; its summary row pools the passes it finished")
        warnings.append(w)
        runner.emit("warning: " + w)


async def _find_max(runner: Runner, fm: FindMaxConfig, warnings: list[str],
                    pool: WorkerPool | None, summaries: list[LevelSummary]) -> FindMaxResult:
    """`--find-max`: probe loads as the search says (`capacity.bench.findmax.Search`), each
    probe a level of this run; an open loop's level is the run's largest concurrency (its
    cap), a closed loop's the probed concurrency."""
    cfg = runner.cfg
    search = Search(fm, requests_for=lambda x: probe_requests(fm, x, cfg.requests))
    t0 = time.monotonic()
    cap = max(cfg.concurrency)
    while (x := search.next_load(time.monotonic() - t0)) is not None:
        level, rate = (cap, x) if fm.by == "rate" else (int(x), None)
        n = probe_requests(fm, x, cfg.requests)
        if cfg.warmup and not summaries:
            await _warmup(runner, level, first=True)
        records: list[RequestRecord] = []
        t = time.monotonic()
        row = await _level(runner, level, warnings, pool, rate=rate, records_out=records,
                           requests=n)
        _store_level(runner, row, summaries)
        probe = judge(records, fm, load=x, duration_s=time.monotonic() - t)
        search.add(probe)

        def ms(v: float | None) -> str:
            return f"{v:.1f} ms" if v is not None else "-"

        runner.emit(f"  probe {x:.4g} {'req/s' if fm.by == 'rate' else 'in flight'}: "
                    f"p{fm.pct:g} TTFT {ms(probe.ttft_pct_ms)}, TPOT {ms(probe.tpot_pct_ms)}, "
                    f"{probe.failed} failed: {'meets' if probe.passed else 'misses'} the SLO")
    return search.result(time.monotonic() - t0)


def _claim(writer: RunWriter, cfg: BenchConfig) -> None:
    """Take the run's (or shard's) folder in the bucket before anything is uploaded
    (`capacity.bench.s3.claim_run`): a second writer of the same run id and shard is refused,
    and the empty local folder it had just made is removed."""
    try:
        claim_run(cfg.out_dir, writer.dir.relative_to(Path(_local_out(cfg.out_dir))).as_posix())
    except BaseException:
        writer.close()
        shutil.rmtree(writer.dir, ignore_errors=True)  # made by this writer (exist_ok=False)
        raise


def _local_out(out_dir: str) -> str:
    """Where a run's files are written: `out_dir`, or the local mirror of an s3:// one."""
    return str(s3_cache_dir(out_dir)) if is_s3(out_dir) else out_dir


def _push(writer: RunWriter, cfg: BenchConfig, files: list[Path]) -> None:
    """Upload a run's files to the s3:// out folder (in this order)."""
    push([f for f in files if f.exists()], Path(_local_out(cfg.out_dir)), cfg.out_dir)


def _level_files(writer: RunWriter, cfg: BenchConfig, emit: Callable[[str], None]) -> None:
    """After a level: a typed Parquet copy of every finished level's rows (requests.parquet,
    which the store reads while it is current), uploaded with the CSVs when --out is s3://."""
    from capacity.bench.store import compact_run  # DuckDB: imported once the first level ends
    from capacity.errors import StoreError

    try:
        compact_run(writer.dir)
    except StoreError as exc:
        emit(f"warning: stored as CSV only ({exc})")
    if is_s3(cfg.out_dir):
        _push(writer, cfg, [writer.requests_path, writer.summary_path, writer.meta_path,
                            writer.dir / "requests.parquet"])


async def _warmup(runner: Runner, level: int, first: bool) -> None:
    n = runner.cfg.warmup
    sem = asyncio.Semaphore(level)

    async def one(i: int) -> RequestRecord:
        async with sem:
            return await runner.one(level=level, rate=None, index=i,
                                    due_ns=time.perf_counter_ns(), tag="w")

    recs = await asyncio.gather(*(one(i) for i in range(n)))
    if first and all(not r.success for r in recs):
        r = recs[0]
        if r.error_type == ErrorType.HTTP_ERROR and (
                r.http_status == 429 or 300 <= (r.http_status or 0) < 400):
            raise BenchError(f"the warm-up request failed: {r.error_message}")
        client_side = r.error_type == ErrorType.HTTP_ERROR and 400 <= (r.http_status or 0) < 500
        if client_side or r.error_type == ErrorType.CONNECT_ERROR:
            raise BenchError(f"the warm-up request failed: {r.error_message} "
                             "(check --model, --endpoint and --api-key)")
        runner.emit(f"warning: every warm-up request failed ({r.error_type}: "
                    f"{r.error_message})")


def arrival_schedule(cfg: BenchConfig, level: int, rate: float | None = None,
                     requests: int | None = None) -> list[float]:
    """The open loop's arrival times of one level, s after its start, at `rate` (default the
    run's `request_rate`): seeded Poisson arrivals (by `seed + level`, so a rerun and every
    worker see the same schedule), or the workload's own (`ArrivalMode`)."""
    rate = rate if rate is not None else cfg.request_rate
    n = requests or cfg.requests
    if cfg.arrivals == ArrivalMode.REPLAY:
        times = [float(sp.at_s or 0.0) for sp in cfg.specs[:n]]
        return [t - times[0] for t in times]
    assert rate is not None
    if cfg.arrivals == ArrivalMode.SHAPE:
        return [float(sp.at_s or 0.0) / rate for sp in cfg.specs[:n]]
    rng = np.random.default_rng(cfg.seed + level)
    return [float(a) for a in np.cumsum(rng.exponential(1.0 / rate, n))]


BURST_FACTOR = 3
"""The bench's one rule for a level's size (docs/bench.md: aim for 3-5 x the concurrency): its
measured requests, all its passes together, at least this many times its concurrency, else
they are one burst whose ramp-up and tail dominate (`is_one_burst`)."""


def is_one_burst(level: int, requests: int) -> bool:
    """Whether `requests` measured at concurrency `level` (over all the level's passes) are too
    few for the rule (`BURST_FACTOR`). Concurrency 1 never is: its requests run one after
    another, with no ramp-up or tail to dominate."""
    return level > 1 and requests < BURST_FACTOR * level


def pass_plan(levels: Sequence[int], passes: int, requests: int
              ) -> list[tuple[int, int, range]]:
    """The order a run measures its levels in: (pass, level, request indices), `passes` times
    through `levels`, forward, backward, forward... (1, 2, 4, 8, 8, 4, 2, 1 for two passes),
    each pass with its share of a level's `requests` (shares differ by one at most). A machine
    whose speed drifts during the run (another tenant, heat, a CPU's boost running out) then
    shifts every level alike instead of the last ones most: in two passes of equally long
    levels, each level's two halves sit symmetrically about the run's middle."""
    bounds = pass_bounds(requests, passes)
    return [(p, level, range(bounds[p], bounds[p + 1]))
            for p in range(passes)
            for level in (levels if p % 2 == 0 else tuple(reversed(levels)))]


@dataclass(frozen=True)
class _Part:
    """One pass of a level: its records and each client process's load."""

    records: list[RequestRecord]
    loads: dict[int, ClientLoad]


def _merge_loads(parts: Sequence[_Part]) -> dict[int, ClientLoad]:
    """Each process's load over a level's passes: CPU seconds add up, event-loop lag is the
    worst pass's."""
    out: dict[int, ClientLoad] = {}
    for part in parts:
        for wid, ld in part.loads.items():
            was = out.get(wid)
            out[wid] = ld if was is None else ClientLoad(
                cpu_s=was.cpu_s + ld.cpu_s,
                loop_lag_p50_ms=max(was.loop_lag_p50_ms, ld.loop_lag_p50_ms),
                loop_lag_p99_ms=max(was.loop_lag_p99_ms, ld.loop_lag_p99_ms))
    return out


async def _level(runner: Runner, level: int, warnings: list[str],
                 pool: WorkerPool | None = None, *, rate: float | None = None,
                 records_out: list[RequestRecord] | None = None,
                 requests: int | None = None) -> LevelSummary:
    """Run one level in one go (open loop at `rate`, default the run's `request_rate`;
    `requests`, default the run's); its records are also appended to `records_out`."""
    part = await _run_part(runner, level, pool, share=range(requests or runner.cfg.requests),
                           rate=rate, records_out=records_out)
    return _level_summary(runner, level, [part], warnings, rate=rate)


async def _run_part(runner: Runner, level: int, pool: WorkerPool | None, *, share: range,
                    rate: float | None = None, records_out: list[RequestRecord] | None = None,
                    tag: str = "") -> _Part:
    """Run the requests `share` (indices of the level's requests) of one level: all of it, or
    one pass's (`pass_plan`). Open loop: the level's arrival schedule from `share`'s first
    request on, timed from the arrival before it."""
    cfg = runner.cfg
    # a shard runs its share of the level: every shard_count-th request, from its index on,
    # and its part of the concurrency (the request indices stay the level's)
    first = share.start + (cfg.shard_index - share.start) % cfg.shard_count
    indices = range(first, share.stop, cfg.shard_count)
    slots = split_slots(level, cfg.shard_count)[cfg.shard_index]
    n = len(indices)
    records: list[RequestRecord] = records_out if records_out is not None else []
    step = max(1, n // 10)
    rate = rate if rate is not None else cfg.request_rate

    def done(rec: RequestRecord) -> None:
        records.append(rec)
        if runner.writer is not None:
            runner.writer.write_request(rec)
        k = len(records)
        if k % step == 0 or k == n:
            ok = [r for r in records if r.success]
            ttft = np.median([r.ttft_ms for r in ok if r.ttft_ms is not None]) if ok else math.nan
            tp = [r.tpot_ms for r in ok if r.tpot_ms is not None]
            tpot = np.median(tp) if tp else math.nan
            runner.emit(f"  concurrency {level}{tag}: {k}/{n} done, {k - len(ok)} failed, "
                        f"TTFT p50 {ttft:.1f} ms, TPOT p50 {tpot:.2f} ms")

    arrivals = None
    if rate is not None:
        schedule = arrival_schedule(cfg, level, rate, share.stop)
        t0_s = schedule[share.start - 1] if share.start > 0 else 0.0
        arrivals = [(i, schedule[i] - t0_s) for i in indices]
    if pool is not None:
        loads = await pool.run_level(level=level, slots=slots, indices=indices, rate=rate,
                                     arrivals=arrivals, compat=runner.compat, on_record=done)
    else:
        loads = {0: await drive_level(runner, level=level, slots=slots, requests=n, rate=rate,
                                      arrivals=arrivals or [],
                                      t0_ns=time.perf_counter_ns(), take=iter(indices),
                                      done=done)}
    return _Part(records=records, loads=loads)


def _level_summary(runner: Runner, level: int, parts: Sequence[_Part], warnings: list[str],
                   *, rate: float | None = None) -> LevelSummary:
    """The summary row of a level from its passes (their records pooled; the level ran for
    the sum of their spans), with the client-bound and prefix-cache warnings."""
    cfg = runner.cfg
    rate = rate if rate is not None else cfg.request_rate
    records = [r for part in parts for r in part.records]
    loads = _merge_loads(parts)
    row = summarize(records, run_id=runner.run_id, label=cfg.label, concurrency=level,
                    request_rate_rps=rate, endpoint=cfg.endpoint, model=runner.model,
                    slo_ttft_ms=cfg.slo_ttft_ms, slo_tpot_ms=cfg.slo_tpot_ms,
                    load=loads[0] if len(loads) == 1 else None, gpu=cfg.gpu,
                    gpus=cfg.gpus, gpu_price_per_hour=cfg.gpu_price, currency=cfg.currency,
                    duration_s=sum(span_s(part.records) for part in parts))
    if len(loads) > 1:
        row = judge_workers(row, loads)
    if records and not any(r.success for r in records):   # the reason, not only a count
        first = records[0]
        w = (f"level {level}: every request failed (the first: {first.error_type}: "
             f"{first.error_message})")
        warnings.append(w)
        runner.emit("warning: " + w)
    if row.client_bound:
        w = (f"level {level}: the client may be the bottleneck ({row.client_bound_reason}); "
             "numbers at this level understate the server")
        warnings.append(w)
        runner.emit("warning: " + w)
    share = cached_share(records)
    if share is not None and share > CACHED_SHARE_WARNING:
        w = (f"level {level}: the server took {share:.0%} of the prompt tokens from its prefix "
             "cache (prompt_cached_tokens): TTFT here is shorter than a cold prefill's")
        warnings.append(w)
        runner.emit("warning: " + w)
    return row


def run_bench_sync(cfg: BenchConfig, api_key: str | None = None, **kw: Any) -> BenchResult:
    """`asyncio.run(run_bench(...))`."""
    return asyncio.run(run_bench(cfg, api_key, **kw))


def summary_table_rows(summaries: Sequence[LevelSummary]) -> list[list[object]]:
    """Rows of the end-of-run table (one per level)."""
    return [[s.concurrency, s.requests_ok, s.requests_failed, s.ttft_p50_ms, s.ttft_p99_ms,
             s.tpot_p50_ms, s.tpot_p99_ms, s.output_tok_s, s.achieved_concurrency,
             s.cost_per_mtok] for s in summaries]


SUMMARY_TABLE_HEADERS = ("concurrency", "ok", "failed", "TTFT p50 ms", "TTFT p99 ms",
                         "TPOT p50 ms", "TPOT p99 ms", "output tok/s", "achieved conc.",
                         "cost per M tok")
