"""The scorecard's MLPerf section (`capacity validate`, docs/accuracy.md, "MLPerf Inference"):
MLCommons' audited results for Llama-2-70B (data/reference/mlperf.csv) against the event model
on the spec sheet and the engine's typical basis, with nothing fitted to them (issue 25:
"MLPerf Inference server and offline results").

Each row of data/reference/mlperf.csv (`load_rows`) is one figure of one submission's run
(its `run`): the Offline scenario's output tokens per second (every query at once: the
deployment's capacity), the Server scenario's scheduled rate (Poisson arrivals, the result
valid only when the 99th percentiles of TTFT and TPOT stay within the benchmark's bounds, 2 s
and 200 ms for llama2-70b) and the Server run's TTFT, TPOT and E2E at that rate (means and
medians, as LoadGen's summary prints them). Each run states its system (GPUs, TP, hence
replicas), weights and KV precision, the batch cap the submission configured (`max_num_seqs`;
blank: the profile's default), the dataset's mean prompt and its longest, and the run's own mean
output (completed tokens / completed samples).

Predictions, per basis (`BASES`), from the row's deployment as a user without measurements
would set it up (`validate_open_loop.scenario_for` of the run as an open-loop run: weights, KV,
GPU count and TP, KV held at the longest prompt + the output, the engine's profile):
- Offline tokens/s: the replica's saturation rate (`ServiceModel.saturation_rate_per_s`, the
  most requests per second its steps sustain with prompts at the dataset's mean) x replicas x
  the run's mean output.
- Server rate: the highest Poisson rate (`slo_rate`) at which the event model's p99 TTFT and p99
  TPOT stay within the run's bounds over `min(requests, SERVER_REQUESTS)` requests a replica
  (the first 10 % warm-up), at most the saturation rate, found by bisection to `RATE_TOLERANCE`.
- TTFT, TPOT, E2E at the scheduled rate: `validate_open_loop.predict` (the open-loop section's
  computation, its request cap).

The spec sheet is an upper bound where its capacity is at or above the measured figure and its
latency at or below. The latencies at the scheduled rate are scored but read with care: a
submission schedules the highest rate its p99 bounds allow, close to its capacity, where the
queue and the batch in flight grow steeply with the load, so a latency there moves several
times as much as the capacity error behind it.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

from capacity import workspace
from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import InputError
from capacity.fit.open_loop_rows import OpenLoopRow, profile_for
from capacity.fit.validate import ErrorsByMetric, SpecTypicalCheck
from capacity.fit.validate_open_loop import END as OPEN_LOOP_END
from capacity.fit.validate_open_loop import Skipped, scenario_for
from capacity.fit.validate_open_loop import predict as open_loop_predict
from capacity.fit.validate_open_loop import skip_reason as open_loop_skip_reason
from capacity.fit.validate_report import (
    between_markers,
    csv_number,
    jsonable,
    not_scored_lines,
    spec_typical_error_lines,
    write_between_markers,
)
from capacity.fit.validate_report import fmt_or_dash as _f
from capacity.model.output_lengths import maxent_run
from capacity.plan.events import simulate
from capacity.plan.service import ServiceModel
from capacity.plan.service_build import service_from_scenario

ROWS_FILE: Final = "mlperf.csv"
BEGIN: Final = "<!-- validate-mlperf:begin -->"
END: Final = "<!-- validate-mlperf:end -->"
"""Markers of this section's generated part of docs/accuracy.md."""
TRTLLM_ROWS_FILE: Final = "trtllm_offline.csv"
TRTLLM_BEGIN: Final = "<!-- validate-trtllm:begin -->"
TRTLLM_END: Final = "<!-- validate-trtllm:end -->"
"""Markers of the section of TensorRT-LLM's performance overview (after the MLPerf one)."""
BASES: Final = ("spec", "typical")
SCENARIOS: Final = ("offline", "server")
METRICS: Final = {"output_tok_s": ("Offline throughput", "tokens/s", ("total",)),
                  "rate_per_s": ("Server rate", "req/s", ("scheduled",)),
                  "ttft_ms": ("TTFT at the rate", "ms", ("mean", "median")),
                  "tpot_ms": ("TPOT at the rate", "ms", ("mean", "median")),
                  "e2e_ms": ("E2E at the rate", "ms", ("mean", "median"))}
"""Metric column -> (label, unit, the statistics a row may state)."""
CAPACITY_METRICS: Final = ("output_tok_s", "rate_per_s")
"""The figures that are speeds (higher is faster); the others are latencies."""
SCENARIO_METRICS: Final = {"offline": ("output_tok_s",),
                           "server": ("rate_per_s", "ttft_ms", "tpot_ms", "e2e_ms")}
COLUMNS: Final = ("id", "run", "round", "submitter", "system", "scenario", "engine",
                  "engine_version", "profile", "model", "weights", "kv_dtype", "gpu",
                  "gpu_source_name", "model_source_name", "gpus", "tp", "max_num_seqs",
                  "prompt_tokens", "prompt_cap", "output_tokens", "requests", "rate_per_s",
                  "ttft_slo_ms", "tpot_slo_ms", "metric", "stat", "value", "quote", "source",
                  "as_of", "notes")
SERVER_REQUESTS: Final = 6000
"""Requests a replica simulates at most in the Server rate's search (the run's own count per
replica when smaller; an MLPerf Server run lasts 600-2,400 s, tens of thousands)."""
RATE_TOLERANCE: Final = 0.005
"""The Server rate's bisection stops when its bracket is this narrow (relative)."""


@dataclass(frozen=True, kw_only=True)
class MlperfRow:
    """One figure of one MLPerf run (data/reference/mlperf.csv), checked."""

    id: str
    run: str
    round: str
    submitter: str
    system: str
    scenario: str
    engine: str
    engine_version: str
    profile: str
    model: str
    weights: str
    kv_dtype: str
    gpu: str
    gpu_source_name: str
    model_source_name: str
    gpus: int
    tp: int
    max_num_seqs: int | None
    prompt_tokens: int
    prompt_cap: int
    output_tokens: int
    requests: int
    rate_per_s: float | None
    """The Server run's scheduled rate (req/s, all replicas); None for Offline."""
    ttft_slo_ms: float | None
    tpot_slo_ms: float | None
    """The Server run's p99 bounds (ms); None where an Offline run states none."""
    metric: str
    stat: str
    value: float
    quote: str
    source: str
    as_of: str
    notes: str

    @property
    def replicas(self) -> int:
        return self.gpus // self.tp

    @property
    def layout(self) -> str:
        return f"{self.replicas} x TP{self.tp}"


def _choice(r: dict[str, str], key: str, allowed: tuple[str, ...], where: str) -> str:
    text = (r.get(key) or "").strip().lower()
    if text not in allowed:
        raise InputError(f"{where}: column '{key}' must be one of {', '.join(allowed)}, "
                         f"got '{text}'")
    return text


def parse_row(r: dict[str, str], where: str) -> MlperfRow:
    """One raw CSV row checked into an MlperfRow (InputError naming `where` and the column)."""
    missing = [c for c in COLUMNS if c not in r]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}")
    for key in ("id", "run", "source", "quote", "model", "gpu", "weights"):
        if not r[key].strip():
            raise InputError(f"{where}: column '{key}' is empty")
    scenario = _choice(r, "scenario", SCENARIOS, where)
    metric = _choice(r, "metric", SCENARIO_METRICS[scenario], where)
    stat = _choice(r, "stat", METRICS[metric][2], where)
    gpus, tp = csv_number(r, "gpus", where), csv_number(r, "tp", where)
    if gpus % tp:
        raise InputError(f"{where}: {gpus} GPUs are not a whole number of TP {tp} replicas")
    rate = csv_number(r, "rate_per_s", where, whole=False, required=scenario == "server")
    if scenario == "offline" and rate is not None:
        raise InputError(f"{where}: an Offline run has no rate (column 'rate_per_s')")
    prompt, cap = csv_number(r, "prompt_tokens", where), csv_number(r, "prompt_cap", where)
    if cap < prompt:
        raise InputError(f"{where}: prompt_cap {cap} is below the mean prompt {prompt}")
    version = r["engine_version"].strip()
    return MlperfRow(
        id=r["id"].strip(), run=r["run"].strip(), round=r["round"].strip(),
        submitter=r["submitter"].strip(), system=r["system"].strip(), scenario=scenario,
        engine=r["engine"].strip(), engine_version=version,
        profile=profile_for(r["profile"].strip() or "vllm", version, where),
        model=r["model"].strip(), weights=r["weights"].strip(), kv_dtype=r["kv_dtype"].strip(),
        gpu=r["gpu"].strip(), gpu_source_name=r["gpu_source_name"].strip(),
        model_source_name=r["model_source_name"].strip(), gpus=gpus, tp=tp,
        max_num_seqs=csv_number(r, "max_num_seqs", where, required=False),
        prompt_tokens=prompt, prompt_cap=cap,
        output_tokens=csv_number(r, "output_tokens", where),
        requests=csv_number(r, "requests", where), rate_per_s=rate,
        ttft_slo_ms=csv_number(r, "ttft_slo_ms", where, whole=False,
                               required=scenario == "server"),
        tpot_slo_ms=csv_number(r, "tpot_slo_ms", where, whole=False,
                               required=scenario == "server"),
        metric=metric, stat=stat, value=csv_number(r, "value", where, whole=False),
        quote=r["quote"].strip(), source=r["source"].strip(), as_of=r["as_of"].strip(),
        notes=r["notes"].strip())


def run_key(r: MlperfRow) -> tuple[Any, ...]:
    """Everything that defines a row's run (all but the figure, its statistic and its words)."""
    return (r.scenario, r.system, r.profile, r.model, r.weights, r.kv_dtype, r.gpu, r.gpus,
            r.tp, r.max_num_seqs, r.prompt_tokens, r.prompt_cap, r.output_tokens, r.requests,
            r.rate_per_s, r.ttft_slo_ms, r.tpot_slo_ms, r.source)


def load_rows(path: Path | None = None) -> list[MlperfRow]:
    """Every row of data/reference/mlperf.csv, checked: InputError naming the file, line and
    column of the first bad row, a run whose rows disagree on anything but the figure, or a
    Server run whose stated rate figure is not its `rate_per_s`."""
    p = path or workspace.bundled_data_dir() / "reference" / ROWS_FILE
    with p.open(encoding="utf-8", newline="") as fh:
        rows = [parse_row(r, f"{p.name} line {i}")
                for i, r in enumerate(csv.DictReader(fh), start=2)]
    first: dict[str, MlperfRow] = {}
    for r in rows:
        r0 = first.setdefault(r.run, r)
        if run_key(r0) != run_key(r):
            raise InputError(f"{p.name}: rows {r0.id} and {r.id} of run '{r.run}' differ in "
                             "their setup")
        if r.metric == "rate_per_s" and r.value != r.rate_per_s:
            raise InputError(f"{p.name}: row {r.id} states the rate {r.value:g} but its run "
                             f"is scheduled at {r.rate_per_s:g}")
    return rows


def as_open_loop(r: MlperfRow) -> OpenLoopRow:
    """Row `r`'s run as an open-loop run (`validate_open_loop`): Poisson arrivals at its
    scheduled rate (an Offline run at its own rate is never simulated: 1 req/s stands in),
    prompts of varying length about the dataset's mean up to its longest, outputs at the
    run's mean, the batch cap as `max_num_seqs`."""
    return OpenLoopRow(
        id=r.id, run=r.run, engine=r.engine, engine_version=r.engine_version,
        profile=r.profile, model=r.model, weights=r.weights, kv_dtype=r.kv_dtype, gpu=r.gpu,
        gpu_source_name=r.gpu_source_name, model_source_name=r.model_source_name,
        gpus=r.gpus, tp=r.tp, prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens,
        lengths="mean", prompt_cap=r.prompt_cap, dataset="MLPerf", requests=r.requests,
        rate_per_s=r.rate_per_s or 1.0, arrivals="poisson", max_num_seqs=r.max_num_seqs,
        token_budget=None, gpu_memory_utilization=None, prefix_caching="",
        metric="ttft_ms", stat="mean", value=r.value, server_held=True, quote=r.quote,
        source=r.source, as_of=r.as_of, notes=r.notes)


def service(r: MlperfRow, basis: str, catalog: Catalog, requests: int) -> ServiceModel:
    """One replica of row `r`'s deployment on `basis` ('spec' or 'typical') under its
    profile, `requests` prompts drawn about the dataset's mean where the profile prefills in
    chunks (the open-loop section's lengths, `maxent_run`)."""
    lengths = (maxent_run(r.prompt_tokens, r.prompt_cap, requests)
               if engine_profile(r.profile).chunked else None)
    s = scenario_for(as_open_loop(r), basis, catalog)
    if lengths is not None:   # KV held at this draw's longest prompt + the output
        s = s.with_(context_tokens=max(lengths) + r.output_tokens)
    return service_from_scenario(s, output_tokens=r.output_tokens, engine=r.profile,
                                 max_num_seqs=r.max_num_seqs, prompt_lengths=lengths)


def offline_tok_s(r: MlperfRow, basis: str, catalog: Catalog) -> float:
    """The deployment's capacity in output tokens/s: a replica's saturation rate x replicas x
    the run's mean output. Example: 21.5 req/s a replica x 4 replicas x 290 tokens = 24,940."""
    svc = service(r, basis, catalog, math.ceil(r.requests / r.replicas))
    return svc.saturation_rate_per_s * r.replicas * r.output_tokens


def slo_rate(r: MlperfRow, basis: str, catalog: Catalog) -> float:
    """The highest Poisson rate (req/s, all replicas) at which a replica's simulated p99 TTFT
    and p99 TPOT stay within the run's bounds, at most the saturation rate: the saturation rate
    itself when it passes, else a bisection from half of it (NaN when even that fails)."""
    n = max(10, min(math.ceil(r.requests / r.replicas), SERVER_REQUESTS))
    svc = service(r, basis, catalog, n)
    sat = svc.saturation_rate_per_s

    def holds(rate: float) -> bool:
        q = simulate(svc, rate_per_s=rate, n_requests=n, seed=0)
        assert r.ttft_slo_ms is not None and r.tpot_slo_ms is not None  # a Server row's
        return q.ttft_ms[0.99] <= r.ttft_slo_ms and q.tpot_ms[0.99] <= r.tpot_slo_ms

    if holds(sat):
        return sat * r.replicas
    lo, hi = 0.5 * sat, sat
    if not holds(lo):
        return math.nan
    while hi / lo - 1.0 > RATE_TOLERANCE:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    return lo * r.replicas


@dataclass(frozen=True, kw_only=True)
class MlperfCheck(SpecTypicalCheck):
    """One scored figure: measured and predicted on each basis (in the metric's unit)."""

    CAPACITY_METRICS: ClassVar[tuple[str, ...]] = CAPACITY_METRICS

    id: str
    run: str
    round: str
    submitter: str
    system: str
    scenario: str
    gpu: str
    layout: str
    profile: str
    metric: str
    stat: str
    measured: float
    spec: float
    typical: float
    source: str = ""
    model: str = ""
    weights: str = ""

    @property
    def table(self) -> str:
        """The source table the figure belongs to: model, weights, GPU and layout."""
        return f"{self.model} {self.weights} on {self.gpu} ({self.layout})"


@dataclass(frozen=True, kw_only=True)
class MlperfScorecard(ErrorsByMetric):
    checks: tuple[MlperfCheck, ...]
    skipped: tuple[Skipped, ...]


def skip_reason(r: MlperfRow, catalog: Catalog) -> str:
    """Why row `r` cannot be scored ('' when it can): the open-loop section's reason."""
    return open_loop_skip_reason(as_open_loop(r), catalog)


def mlperf_scorecard(catalog: Catalog | None = None,
                     rows: list[MlperfRow] | None = None) -> MlperfScorecard:
    """Every MLPerf figure against its predictions (module docstring)."""
    cat = catalog or default_catalog()
    checks: list[MlperfCheck] = []
    skipped: list[Skipped] = []
    memo: dict[tuple[str, str, str], float] = {}
    for r in rows if rows is not None else load_rows():
        reason = skip_reason(r, cat)
        if reason:
            skipped.append(Skipped(id=r.id, reason=reason))
            continue
        got: dict[str, float] = {}
        for basis in BASES:
            if r.metric == "output_tok_s":
                got[basis] = offline_tok_s(r, basis, cat)
            elif r.metric == "rate_per_s":
                got[basis] = slo_rate(r, basis, cat)
            else:
                key = (r.run, basis, f"{r.metric}:{r.stat}")
                if key not in memo:
                    p = open_loop_predict(as_open_loop(r), basis, cat)
                    for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
                        for st in ("mean", "median"):
                            memo[(r.run, basis, f"{m}:{st}")] = p.value(m, st)
                got[basis] = memo[key]
        checks.append(MlperfCheck(
            id=r.id, run=r.run, round=r.round, submitter=r.submitter, system=r.system,
            scenario=r.scenario, gpu=r.gpu, layout=r.layout, profile=r.profile,
            metric=r.metric, stat=r.stat, measured=r.value, spec=got["spec"],
            typical=got["typical"], source=r.source, model=r.model, weights=r.weights))
    return MlperfScorecard(checks=tuple(checks), skipped=tuple(skipped))


def trtllm_scorecard(catalog: Catalog | None = None) -> MlperfScorecard:
    """TensorRT-LLM's performance overview (data/reference/trtllm_offline.csv): offline runs of
    `trtllm-bench throughput`, scored as the MLPerf Offline figures are (`offline_tok_s`)."""
    return mlperf_scorecard(catalog, load_rows(
        workspace.bundled_data_dir() / "reference" / TRTLLM_ROWS_FILE))


def _v(v: float) -> str:
    return _f(v, ",.1f" if abs(v) < 100 else ",.0f")


def _error_lines(card: MlperfScorecard) -> list[str]:
    """The error by basis and metric, and the spec sheet's bound (both sections)."""
    return spec_typical_error_lines(card, BASES, {m: v[0] for m, v in METRICS.items()})


def markdown(card: MlperfScorecard) -> str:
    """The section as Markdown: the error by basis and metric, the spec sheet's bound, every
    figure, the rows not scored."""
    runs = sorted({c.run for c in card.checks})
    systems = sorted({f"{c.submitter} {c.system}" for c in card.checks})
    lines = [
        "### MLPerf Inference (audited)", "",
        f"{len(card.checks)} figures of {len(runs)} MLPerf Inference runs of Llama-2-70B "
        f"(data/reference/mlperf.csv; {', '.join(systems)}; each run's "
        "mlperf_log_summary.txt as MLCommons published it) against the event model on the spec "
        "sheet and the engine's typical basis (`capacity.fit.validate_mlperf`): the Offline "
        "scenario's tokens/s against a replica's saturation rate x replicas x the run's mean "
        "output; the Server scenario's scheduled rate against the highest Poisson rate at which "
        "the model's p99 TTFT and TPOT hold the benchmark's bounds (2 s, 200 ms; at most "
        f"{SERVER_REQUESTS:,} requests a replica, at most the saturation rate); the Server "
        "run's latencies at its scheduled rate through the open-loop section's computation. "
        "Prompts about the dataset's mean (222 tokens, at most 1,021), outputs at the run's "
        "mean. Nothing is fitted to these rows.", "",
        *_error_lines(card)]
    lines += ["", "| figure | system | GPU | layout | profile | metric | measured | spec | error "
              "| typical | error |", "|---|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for c in card.checks:
        label, unit, _ = METRICS[c.metric]
        lines.append(
            f"| {c.id} | {c.submitter} {c.system} | {c.gpu} | {c.layout} | {c.profile} | "
            f"{c.stat} {label} ({unit}) | {_v(c.measured)} | {_v(c.spec)} | "
            f"{_f(c.error('spec'), '+.1%')} | {_v(c.typical)} | "
            f"{_f(c.error('typical'), '+.1%')} |")
    lines += not_scored_lines([(s.id, s.reason) for s in card.skipped])
    return "\n".join(lines) + "\n"


def trtllm_markdown(card: MlperfScorecard) -> str:
    """TensorRT-LLM's section as Markdown: the error by basis, each source table's median on
    the typical basis (FP4 on Blackwell beside FP8 on Hopper, the same model and lengths),
    every figure, the rows not scored."""
    tables: dict[str, list[MlperfCheck]] = {}
    for c in card.checks:
        tables.setdefault(c.table, []).append(c)
    lines = [
        "### TensorRT-LLM's performance overview (offline, vendor)", "",
        f"{len(card.checks)} figures of {len(tables)} tables of TensorRT-LLM's performance "
        "overview (data/reference/trtllm_offline.csv, the v1.0 docs: `trtllm-bench throughput`, "
        "every request at once, fixed prompt and output lengths, 1,000 to 30,000 requests; "
        "ModelOpt's FP4 checkpoints on B200 and GB200, FP8 on H200 and H100) scored as the "
        "MLPerf Offline figures are (`capacity.fit.validate_mlperf.trtllm_scorecard`: a "
        "replica's saturation rate x replicas x the output; the batch at most the LLM API's "
        "default 2,048, KV in FP8). The engine is not a typical basis' own: the figures are "
        "scored on `typical:vllm`. Nothing is fitted to these rows; they are the evidence for "
        "the typical basis' FP4 rate (`capacity.catalog.matmul.FP4_AT_FP8_RATE`). Llama-3.3-70B "
        "is scored as the catalog's llama-3.1-70b (the same architecture); the page's Llama 4, "
        "Llama-3.1-405B and Qwen3-235B-A22B tables (MoE on attention DP and EP of sizes not "
        "stated) and its RTX 6000 Pro tables are not recorded.", "",
        *_error_lines(card), "",
        "| table | figures | typical, median signed | typical, median abs | spec, lowest |",
        "|---|---:|---:|---:|---:|"]
    for name, cs in tables.items():
        typ = sorted(c.error("typical") for c in cs)
        spec = min(c.error("spec") for c in cs)
        lines.append(f"| {name} | {len(cs)} | {_f(statistics.median(typ), '+.1%')} | "
                     f"{_f(statistics.median(abs(e) for e in typ), '.1%')} | "
                     f"{_f(spec, '+.1%')} |")
    lines += ["", "| figure | table | metric | measured | spec | error | typical | error |",
              "|---|---|---|---:|---:|---:|---:|---:|"]
    for c in card.checks:
        lines.append(f"| {c.id} | {c.table} | {c.stat} {METRICS[c.metric][0]} (tokens/s) | "
                     f"{_v(c.measured)} | {_v(c.spec)} | {_f(c.error('spec'), '+.1%')} | "
                     f"{_v(c.typical)} | {_f(c.error('typical'), '+.1%')} |")
    lines += not_scored_lines([(s.id, s.reason) for s in card.skipped])
    return "\n".join(lines) + "\n"


def write_trtllm_section(path: Path, generated: str) -> Path:
    """Put TensorRT-LLM's section between its markers in `path`, after the MLPerf section."""
    return write_between_markers(path, generated, TRTLLM_BEGIN, TRTLLM_END, after=END)


def trtllm_section_of(text: str) -> str:
    """TensorRT-LLM's generated section of a document ('' when it has none)."""
    return between_markers(text, TRTLLM_BEGIN, TRTLLM_END)


def to_dict(card: MlperfScorecard) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None)."""
    bound, total = card.spec_bound
    return dict(jsonable({
        "figures": len(card.checks), "runs": len({c.run for c in card.checks}),
        "spec_bound": {"bounded": bound, "figures": total},
        "error": card.error_json(BASES, METRICS),
        "checks": [{**asdict(c), "error": {b: c.error(b) for b in BASES},
                    "spec_bounds": c.spec_bounds} for c in card.checks],
        "skipped": [asdict(s) for s in card.skipped]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the open-loop section, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=OPEN_LOOP_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
