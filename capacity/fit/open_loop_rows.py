"""The published open-loop runs as rows (data/reference/open_loop.csv), checked: each row one
figure (TTFT, ITL, TPOT or E2E; a mean or a median, as the source states it) of one run, with
the run's engine, its profile (data/engines.toml's [profile.*]; a vLLM release before 0.8.0
ran V0, `profile_for`), model, weights, KV precision, GPUs and TP, lengths (fixed, or the run's
means of varying lengths with the longest prompt its dataset holds), request count, rate and
arrivals, the scheduler knobs the source states, and its source. Scored by
`capacity.fit.validate_open_loop` (docs/accuracy.md, "Open-loop runs").
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from capacity import workspace
from capacity.catalog.engines import version_tuple
from capacity.errors import InputError
from capacity.fit.validate_report import csv_number
from capacity.plan.events import ARRIVALS

ROWS_FILE: Final = "open_loop.csv"
BURSTS_FILE: Final = "bursts.csv"
METRICS: Final = {"ttft_ms": "TTFT", "itl_ms": "ITL", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
"""Metric column -> label; every one in ms."""
BURST: Final = "burst"
"""The `arrivals` of a run that sent every request at once (a bench's default request rate,
`inf`, with no concurrency cap): its `rate_per_s` is blank (infinite). Such runs are scored
by `capacity.fit.validate_bursts` (data/reference/bursts.csv), never by the open-loop section."""
BURST_METRICS: Final = {**METRICS, "output_tok_s": "output throughput"}
"""A burst row's metrics: the open-loop ones (ms) and the run's output tokens over its
duration (tokens/s, stat 'total')."""
STATS: Final = ("mean", "median")
KNOBS: Final = ("max_num_seqs", "token_budget", "gpu_memory_utilization", "prefix_caching")
"""The scheduler knobs a row may state (blank: the engine's default)."""
COLUMNS: Final = ("id", "run", "engine", "engine_version", "profile", "model", "weights",
                  "kv_dtype", "gpu", "gpu_source_name", "model_source_name", "gpus", "tp",
                  "prompt_tokens", "output_tokens", "lengths", "prompt_cap", "dataset", "requests",
                  "rate_per_s", "arrivals", *KNOBS, "metric", "stat", "value", "server_held",
                  "quote", "source", "as_of", "notes")


@dataclass(frozen=True, kw_only=True)
class OpenLoopRow:
    """One published figure of one open-loop run (data/reference/open_loop.csv)."""

    id: str
    run: str
    engine: str
    engine_version: str
    profile: str
    """The engine profile the event model schedules with (data/engines.toml [profile.*])."""
    model: str
    weights: str
    kv_dtype: str
    gpu: str
    gpu_source_name: str
    model_source_name: str
    gpus: int
    tp: int
    prompt_tokens: int
    output_tokens: int
    lengths: str
    """'fixed' (every request) or 'mean' (the run's mean of varying lengths)."""
    prompt_cap: int | None
    """With `lengths = mean`: the longest prompt the run's dataset holds (tokens: a random
    dataset's stated input length, a client's ShareGPT filter); None: not stated, the model's
    context bounds it (`prompt_lengths_of`)."""
    dataset: str
    requests: int
    rate_per_s: float
    arrivals: str
    max_num_seqs: int | None
    token_budget: int | None
    gpu_memory_utilization: float | None
    prefix_caching: str
    metric: str
    stat: str
    value: float
    server_held: bool | None
    """Whether the real server kept up with the rate (None: the source does not tell)."""
    quote: str
    source: str
    as_of: str
    notes: str
    output_cap: int | None = None
    """On a burst row (the optional column): the longest output the run asked for, when its
    outputs varied about the stated mean (ShareGPT's replies; a random dataset's requests that
    stopped at end-of-sequence before the asked length); None: every output at the mean."""
    async_scheduling: bool = False
    """On a burst row (the optional column, 'on'): the server ran with vLLM's
    --async-scheduling, scheduling one step ahead whatever its release's default."""

    @property
    def replicas(self) -> int:
        return self.gpus // self.tp

    def knob(self, name: str) -> Any:
        return getattr(self, name)


def _choice(r: dict[str, str], key: str, allowed: Iterable[str], where: str,
            default: str = "") -> str:
    text = (r.get(key) or "").strip().lower() or default
    opts = tuple(allowed)
    if text not in opts:
        shown = ", ".join(o or "(blank)" for o in opts)
        raise InputError(f"{where}: column '{key}' must be one of {shown}, got '{text}'")
    return text


def parse_row(r: dict[str, str], where: str, *, bursts: bool = False) -> OpenLoopRow:
    """One raw CSV row checked into an OpenLoopRow (InputError naming `where` and the column).
    With `bursts` (data/reference/bursts.csv): a run sent at once (`BURST` arrivals, the rate
    blank), its metrics `BURST_METRICS`, an optional `output_cap`."""
    missing = [c for c in COLUMNS if c not in r]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}")
    for key in ("id", "run", "source", "quote"):
        if not r[key].strip():
            raise InputError(f"{where}: column '{key}' is empty")
    gpus, tp = csv_number(r, "gpus", where), csv_number(r, "tp", where)
    if gpus % tp:
        raise InputError(f"{where}: {gpus} GPUs are not a whole number of TP {tp} replicas")
    util = csv_number(r, "gpu_memory_utilization", where, whole=False, required=False)
    if util is not None and util > 1:
        raise InputError(f"{where}: gpu_memory_utilization must be <= 1, got {util:g}")
    held = _choice(r, "server_held", ("yes", "no", ""), where)
    if bursts and (r.get("rate_per_s") or "").strip():
        raise InputError(f"{where}: a run sent at once has no rate: leave 'rate_per_s' blank")
    version = r["engine_version"].strip()
    return OpenLoopRow(
        id=r["id"].strip(), run=r["run"].strip(), engine=r["engine"].strip(),
        engine_version=version,
        profile=profile_for(r["profile"].strip() or "vllm", version, where),
        model=r["model"].strip(), weights=r["weights"].strip(), kv_dtype=r["kv_dtype"].strip(),
        gpu=r["gpu"].strip(), gpu_source_name=r["gpu_source_name"].strip(),
        model_source_name=r["model_source_name"].strip(), gpus=gpus, tp=tp,
        prompt_tokens=csv_number(r, "prompt_tokens", where),
        output_tokens=csv_number(r, "output_tokens", where),
        lengths=_choice(r, "lengths", ("fixed", "mean"), where),
        prompt_cap=csv_number(r, "prompt_cap", where, required=False),
        dataset=r["dataset"].strip(),
        requests=csv_number(r, "requests", where),
        rate_per_s=(math.inf if bursts else csv_number(r, "rate_per_s", where, whole=False)),
        arrivals=_choice(r, "arrivals", (BURST,) if bursts else ARRIVALS, where,
                         default=BURST if bursts else "poisson"),
        max_num_seqs=csv_number(r, "max_num_seqs", where, required=False),
        token_budget=csv_number(r, "token_budget", where, required=False),
        gpu_memory_utilization=util,
        prefix_caching=_choice(r, "prefix_caching", ("on", "off", ""), where),
        metric=_choice(r, "metric", BURST_METRICS if bursts else METRICS, where),
        stat=_choice(r, "stat", (*STATS, "total") if bursts else STATS, where),
        value=csv_number(r, "value", where, whole=False),
        server_held=None if held == "" else held == "yes", quote=r["quote"].strip(),
        source=r["source"].strip(), as_of=r["as_of"].strip(), notes=r["notes"].strip(),
        output_cap=csv_number(r, "output_cap", where, required=False) if bursts else None,
        async_scheduling=bursts and _choice(r, "async_scheduling", ("on", ""), where) == "on")


V1_FROM: Final = (0, 8, 0)
"""The first vLLM release whose default engine is V1: v0.8.0's release notes, "We have now
enabled V1 engine by default (#13726)" (github:vllm-project/vllm, releases, 2025-03-18)."""
V0_LONG_CHUNKED_FROM: Final = (0, 5, 3)
"""From about here V0 turns chunked prefill on by itself for models with max_model_len > 32K
(vllm-project/vllm#6666, "Enable chunked prefill by default for long context models", merged
2024-07-23, after 0.5.2), so a V0 run of these versions schedules whole prompts only when its
context is shorter or the flag was off: such a row names its profile itself."""
V0_PROFILE: Final = "vllmv0"
"""data/engines.toml's vLLM V0 profile (whole prompts, prefill first, paged KV)."""


def profile_for(profile: str, version: str, where: str = "") -> str:
    """The profile a row is scheduled with: its `profile` column, except that a vLLM run of a
    release before `V1_FROM` ran the V0 engine (`V0_PROFILE`: whole prompts, prefill first;
    chunked prefill was off by default). InputError for a 'vllm' row of `V0_LONG_CHUNKED_FROM`
    up to V1 (V0, chunked prefill on or off by the model's context): name the profile. A vLLM
    run whose version is not stated keeps 'vllm' (V1, today's default)."""
    v = version_tuple(version)
    if profile != "vllm" or v is None or v >= V1_FROM:
        return profile
    if v >= V0_LONG_CHUNKED_FROM:
        raise InputError(f"{where}: vLLM {version} ran the V0 engine, whose chunked prefill is on "
                         "by default for contexts above 32K tokens: state the profile "
                         f"('{V0_PROFILE}' when chunked prefill was off)")
    return V0_PROFILE


def load_rows(path: Path | None = None, *, bursts: bool = False) -> list[OpenLoopRow]:
    """Every row of the published open-loop runs (data/reference/open_loop.csv; with `bursts`,
    the runs sent at once, data/reference/bursts.csv: `parse_row`), checked: InputError naming
    the file, line and column of the first bad row, or a run whose rows disagree on anything
    but the figure."""
    p = path or workspace.bundled_data_dir() / "reference" / (BURSTS_FILE if bursts
                                                               else ROWS_FILE)
    with p.open(encoding="utf-8", newline="") as fh:
        rows = [parse_row(r, f"{p.name} line {i}", bursts=bursts)
                for i, r in enumerate(csv.DictReader(fh), start=2)]
    first: dict[str, OpenLoopRow] = {}
    for r in rows:
        r0 = first.setdefault(r.run, r)
        if run_key(r0) != run_key(r):
            raise InputError(f"{p.name}: rows {r0.id} and {r.id} of run '{r.run}' differ in "
                             "their setup")
    return rows


def run_key(r: OpenLoopRow) -> tuple[Any, ...]:
    """Everything that defines a row's run (all but the figure, its statistic and its words)."""
    return (r.profile, r.model, r.weights, r.kv_dtype, r.gpu, r.gpus, r.tp, r.prompt_tokens,
            r.output_tokens, r.lengths, r.prompt_cap, r.output_cap, r.async_scheduling,
            r.dataset, r.requests, r.rate_per_s, r.arrivals,
            *(r.knob(k) for k in KNOBS), r.source, r.server_held)
