"""The scorecard's open-loop section (`capacity validate`, docs/accuracy.md, "Open-loop runs"):
published serving runs at a set request rate against the event model (issue 32).

Each row of data/reference/open_loop.csv (`open_loop_rows.load_rows`) is one figure (TTFT,
ITL, TPOT or E2E; a mean or a median, as the source states it) of one run: an engine (its
profile in data/engines.toml; a vLLM release before 0.8.0 ran V0, scheduled with the `vllmv0`
profile, `open_loop_rows.profile_for`) serving a model on TP x replicas GPUs, requests arriving
at `rate_per_s` (Poisson or evenly spaced, as the source says; Poisson where it does not),
fixed prompt and output lengths or, for datasets of varying lengths, the run's mean lengths (total tokens /
requests) and the longest prompt its dataset holds (`prompt_cap`), and the scheduler knobs
the source states (`max_num_seqs`, `token_budget`: vLLM's max_num_batched_tokens or SGLang's
chunked_prefill_size, `gpu_memory_utilization`,
`prefix_caching`; blank = the engine's default). Rows of one run share a `run` name.

A run is predicted as a user without measurements would (`predict`): `make_scenario` of the
row's model, weights, KV precision, GPU, GPU count and TP, held at prompt + output tokens, on
two bases (the spec sheet, `scenario_with_basis(s, 'spec')`, and the engine's typical basis,
`typical_basis`), through `capacity.plan.events.open_loop_load` under the row's engine profile
with its knobs, at most `MAX_REPLICA_REQUESTS` requests per replica (the run's own count when
smaller; the first 10 % left out as warm-up), seed 0. Where the dataset varies the prompts
and the profile prefills in chunks, each simulated request has its own prompt, the
maximum-entropy lengths with the run's mean (`prompt_lengths_of`); the outputs stay at their
mean, and a profile that prefills whole prompts (vLLM V0) runs every prompt at the mean. A
stated `prefix_caching = on` is the engine's prefix cache: on a hybrid model under vLLM V1 its
mamba 'align' mode (`service_from_scenario`'s `prefix_caching`); the runs share no prefix, so
nothing else changes. Error = predicted / measured - 1.

The section's statistics: the median |error| by basis and metric; the runs predicted to
saturate (`OpenLoopPoint.saturated`) that the real server held (`server_held` = yes, with the
evidence in the row's notes); and the knob check (`knob_pairs`): among runs of one source that
differ only by one scheduler knob and where the measured figure moves by more than
`KNOB_MOVE`, whether the prediction moves (by more than `PREDICTED_MOVE`) and in the same
direction. The band check (`OpenLoopCheck.in_band`, `band_predictions`): each run again at
the fast and the slow edge of its typical basis' band, the Planner's and the Explorer's
(data/engines.toml's step and TTFT error bands, taken from published.csv's closed-loop rows),
and how many figures lie between them. Nothing is fitted to these rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.fit.open_loop_rows import KNOBS, METRICS, OpenLoopRow, load_rows
from capacity.fit.planning import (
    EXPERT_SHARE,
    engine_knobs,
    on_typical,
    scenario_with_basis,
    typical_band_scenarios,
    typical_basis_for,
)
from capacity.fit.typical import typical_efficiency
from capacity.fit.validate import ErrorsByMetric, relative_error
from capacity.fit.validate_disagg import END as DISAGG_END
from capacity.fit.validate_report import (
    between_markers,
    error_cells,
    jsonable,
    not_scored_lines,
    write_between_markers,
)
from capacity.fit.validate_report import fmt_or_dash as _f
from capacity.model.basis import TYPICAL_PREFIX
from capacity.model.forward_pass import as_released, scheduled_as_released
from capacity.model.memory import DEFAULT_UTIL
from capacity.model.output_lengths import maxent_run
from capacity.model.scenario import Scenario, make_scenario
from capacity.plan.events import open_loop_load

BEGIN: Final = "<!-- validate-open-loop:begin -->"
END: Final = "<!-- validate-open-loop:end -->"
"""Markers of this section's generated part of docs/accuracy.md."""
BASES: Final = ("spec", "typical")
FALLBACK_TYPICAL: Final = "typical:vllm"
"""The typical basis of an engine without its own typical knobs in data/engines.toml."""
TARGETS: Final = {"e2e_ms": 0.15, "ttft_ms": 0.25, "itl_ms": 0.15}
"""Issue 32's targets: the typical basis's median |error| on E2E, TTFT and ITL."""
KNOB_MOVE: Final = 0.10
"""A knob pair counts when the measured figure moves by more than this fraction."""
PREDICTED_MOVE: Final = 0.01
"""The prediction 'moves' when it changes by more than this fraction (the simulation is
seeded, so any change comes from the knob)."""
LENGTH_MATCH: Final = 0.05
"""Two runs of a knob pair may differ in mean prompt or output length by at most this share."""
MAX_REPLICA_REQUESTS: Final = 1500
"""Requests simulated per replica at most (the run's own count per replica when smaller)."""


# -- the predictions ---------------------------------------------------------------------------
def typical_basis(profile: str) -> str:
    """The engine's typical basis ('typical:<profile>' where data/engines.toml has its knobs,
    else FALLBACK_TYPICAL, vLLM's)."""
    return typical_basis_for(profile)


def basis_text(r: OpenLoopRow, basis: str) -> str:
    """'spec' or the row's typical basis, as `scenario_with_basis` takes it."""
    return "spec" if basis == "spec" else typical_basis(r.profile)


@dataclass(frozen=True, kw_only=True)
class RunPrediction:
    """The event model of one run on one basis: mean and median of each metric (ms), the
    requests simulated and whether the rate outruns a replica."""

    basis: str
    mean_ms: dict[str, float]
    median_ms: dict[str, float]
    requests: int
    saturated: bool

    def value(self, metric: str, stat: str) -> float:
        return (self.mean_ms if stat == "mean" else self.median_ms)[metric]


def prompt_lengths_of(r: OpenLoopRow, catalog: Catalog) -> tuple[int, ...] | None:
    """Each simulated request's prompt (tokens) for a run whose prompts vary (`lengths =
    mean`) under a chunked-prefill profile: the maximum-entropy lengths on 1..cap with the
    run's mean (`output_lengths.maxent_lengths`, one per request a replica simulates), cap the
    row's `prompt_cap`, else the model's context. None: every prompt at the mean (fixed
    lengths, or a profile that prefills whole prompts: the event model takes one prompt
    length there). Example: mean 342, no cap, the model's 262,144-token context: about a
    fifth of the prompts are 528 tokens or longer (a geometric tail, e^(-528 / 342))."""
    if r.lengths != "mean" or not engine_profile(r.profile).chunked:
        return None
    cap = r.prompt_cap or catalog.models[r.model].max_context_tokens
    return maxent_run(r.prompt_tokens, int(cap), math.ceil(simulated_requests(r) / r.replicas))


def scenario_for(r: OpenLoopRow, basis: str, catalog: Catalog,
                 expert_share: float | None = None) -> Scenario:
    """The row's deployment (all its GPUs, TP per replica), KV held at prompt + output (the
    longest prompt where prompts vary, `prompt_lengths_of`, and the longest output where a
    burst row states one, `OpenLoopRow.output_cap`), its
    gpu_memory_utilization (default: the model's), on `basis`; on the typical basis as its
    stated release ran (`forward_pass.as_released`: SGLang before 0.5.10 launched its prefill
    kernels without CUDA graphs), the spec sheet staying the bound. `expert_share`: on the
    typical basis, the MoE expert GEMM share instead of the engines file's (a scorecard's held
    out one, `TypicalEfficiency.expert_share_for`)."""
    lengths = prompt_lengths_of(r, catalog)
    prompt = r.prompt_tokens if lengths is None else max(lengths)
    s = make_scenario(r.model, r.gpu, catalog=catalog, weights=r.weights, n_gpus=r.gpus, tp=r.tp,
                      context_tokens=prompt + (r.output_cap or r.output_tokens),
                      prompt_tokens=r.prompt_tokens, kv_dtype=r.kv_dtype,
                      util=r.gpu_memory_utilization or DEFAULT_UTIL)
    text = basis_text(r, basis)
    if expert_share is not None and text.startswith(TYPICAL_PREFIX):
        typ = typical_efficiency(text.removeprefix(TYPICAL_PREFIX))
        s = on_typical(s, {**engine_knobs(typ), EXPERT_SHARE: expert_share})
    else:
        s = scenario_with_basis(s, text)
    if basis == "spec":   # the release's scheduling, no speed knob
        return scheduled_as_released(s, engine_profile(r.profile), version=r.engine_version,
                                     date=r.as_of)
    return as_released(s, engine_profile(r.profile), version=r.engine_version, date=r.as_of)


def simulated_requests(r: OpenLoopRow) -> int:
    """Requests the model runs for row `r`, all replicas: the run's count, at most
    MAX_REPLICA_REQUESTS per replica."""
    return min(r.requests, MAX_REPLICA_REQUESTS * r.replicas)


def predict(r: OpenLoopRow, basis: str, catalog: Catalog | None = None) -> RunPrediction:
    """Row `r`'s run on `basis` ('spec' or 'typical'): `open_loop_load` at the row's rate for
    `simulated_requests` / rate seconds, its arrivals, profile and knobs. Mean TPOT = (mean
    E2E - mean TTFT) / (output - 1) (exact for fixed lengths: each request's TPOT is its
    (E2E - TTFT) / (output - 1))."""
    cat = catalog or default_catalog()
    return _load(r, scenario_for(r, basis, cat), cat, basis_text(r, basis))


def band_predictions(r: OpenLoopRow, catalog: Catalog) -> tuple[RunPrediction, RunPrediction]:
    """Row `r`'s run at the fast and the slow edge of its typical basis' band, the Planner's
    and the Explorer's (`capacity.fit.planning.typical_band_scenarios`: data/engines.toml's
    step and TTFT error bands, taken from published.csv's closed-loop rows, none of these)."""
    basis = typical_basis(r.profile)
    fast, slow = typical_band_scenarios(scenario_for(r, "typical", catalog), basis.split(":")[1])
    return _load(r, fast, catalog, basis), _load(r, slow, catalog, basis)


def _load(r: OpenLoopRow, s: Scenario, cat: Catalog, basis: str) -> RunPrediction:
    """Row `r`'s run on scenario `s` (`predict`)."""
    n = simulated_requests(r)
    _, pts = open_loop_load(s, engine=r.profile, output_tokens=r.output_tokens,
                            stages=[[(r.rate_per_s, n / r.rate_per_s)]], kind=r.arrivals,
                            seed=0, max_num_seqs=r.max_num_seqs, chunk_tokens=r.token_budget,
                            prompt_lengths=prompt_lengths_of(r, cat),
                            prefix_caching=r.prefix_caching == "on")
    p = pts[0]
    tpot_mean = (p.e2e_mean_ms - p.ttft_mean_ms) / max(r.output_tokens - 1, 1)
    return RunPrediction(
        basis=basis,
        mean_ms={"ttft_ms": p.ttft_mean_ms, "itl_ms": p.itl_mean_ms, "tpot_ms": tpot_mean,
                 "e2e_ms": p.e2e_mean_ms},
        median_ms={"ttft_ms": p.ttft_ms[0.5], "itl_ms": p.itl_ms[0.5],
                   "tpot_ms": p.tpot_ms[0.5], "e2e_ms": p.e2e_ms[0.5]},
        requests=p.requests, saturated=p.saturated)


# -- the checks --------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class OpenLoopCheck:
    """One scored figure: measured and predicted on each basis (ms)."""

    id: str
    run: str
    model: str
    gpu: str
    layout: str
    profile: str
    rate_per_s: float
    prompt_tokens: int
    output_tokens: int
    metric: str
    stat: str
    measured: float
    spec: float
    typical: float
    source: str = ""
    band: tuple[float, float] = (math.nan, math.nan)
    """The typical prediction at the fast and the slow edge of its band (`band_predictions`)."""

    @property
    def in_band(self) -> bool | None:
        """Whether the measured figure lies in the band (it always holds the prediction);
        None where an edge has no figure."""
        edges = (*self.band, self.typical)
        if not all(math.isfinite(x) for x in edges):
            return None
        return min(edges) <= self.measured <= max(edges)

    def predicted(self, basis: str) -> float:
        return self.spec if basis == "spec" else self.typical

    def error(self, basis: str) -> float:
        """predicted / measured - 1 on 'spec' or 'typical'."""
        return relative_error(self.predicted(basis), self.measured)


@dataclass(frozen=True, kw_only=True)
class RunCheck:
    """One run: whether the real server held its rate, and whether each basis predicts it
    saturates."""

    run: str
    rate_per_s: float
    held: bool | None
    saturated: dict[str, bool]
    requests: int
    """Requests simulated (all replicas; the first 10 % per replica are warm-up)."""
    typical_basis: str


@dataclass(frozen=True, kw_only=True)
class KnobPair:
    """Two runs of one source that differ only by one scheduler knob, on one figure."""

    knob: str
    run_a: str
    run_b: str
    value_a: str
    value_b: str
    metric: str
    stat: str
    measured_a: float
    measured_b: float
    predicted_a: dict[str, float]
    predicted_b: dict[str, float]

    @property
    def measured_move(self) -> float:
        """b / a - 1 of the measured figure."""
        return self.measured_b / self.measured_a - 1.0

    def predicted_move(self, basis: str) -> float:
        return self.predicted_b[basis] / self.predicted_a[basis] - 1.0

    def moves(self, basis: str) -> bool:
        """The prediction changes by more than PREDICTED_MOVE."""
        return abs(self.predicted_move(basis)) > PREDICTED_MOVE

    def agrees(self, basis: str) -> bool:
        """The prediction moves, in the measured direction."""
        return self.moves(basis) and (self.predicted_move(basis) > 0) == (self.measured_move > 0)


@dataclass(frozen=True, kw_only=True)
class Skipped:
    id: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class OpenLoopScorecard(ErrorsByMetric):
    checks: tuple[OpenLoopCheck, ...]
    runs: tuple[RunCheck, ...]
    knob_pairs: tuple[KnobPair, ...]
    skipped: tuple[Skipped, ...]

    def band_coverage(self, metric: str | None = None) -> tuple[int, int]:
        """(inside, figures): the figures (of one metric) the typical basis' band holds."""
        got = [c.in_band for c in self.checks if metric in (None, c.metric)
               and c.in_band is not None]
        return sum(got), len(got)

    def saturated_but_held(self, basis: str) -> list[RunCheck]:
        """Runs the real server held that `basis` predicts to saturate."""
        return [r for r in self.runs if r.held is True and r.saturated[basis]]

    @property
    def held_runs(self) -> int:
        return sum(r.held is True for r in self.runs)

    def counted_pairs(self) -> list[KnobPair]:
        """Knob pairs whose measured figure moves by more than KNOB_MOVE."""
        return [p for p in self.knob_pairs if abs(p.measured_move) > KNOB_MOVE]

    def target_met(self) -> bool:
        """Issue 32's targets on the typical basis: each TARGETS metric's median |error|
        within its bound (a metric without figures does not count as met), no held run
        predicted to saturate, and every counted knob pair's prediction moving."""
        for m, bound in TARGETS.items():
            med = self.error("typical", m).median
            if not (math.isfinite(med) and med <= bound):
                return False
        return not self.saturated_but_held("typical") and all(
            p.moves("typical") for p in self.counted_pairs())


def skip_reason(r: OpenLoopRow, catalog: Catalog) -> str:
    """Why row `r` cannot be scored ('' when it can)."""
    try:
        catalog.gpu(r.gpu)
        catalog.variant(r.model, r.weights)
    except CapacityError as exc:
        return f"not in the catalog ({exc})"
    return ""


def _lengths_match(a: OpenLoopRow, b: OpenLoopRow) -> bool:
    return all(abs(x / y - 1.0) <= LENGTH_MATCH for x, y in
               ((a.prompt_tokens, b.prompt_tokens), (a.output_tokens, b.output_tokens)))


def _same_but(a: OpenLoopRow, b: OpenLoopRow) -> str:
    """The one knob runs a and b differ by ('' when none, or anything else differs)."""
    fixed = ("source", "profile", "model", "weights", "kv_dtype", "gpu", "gpus", "tp", "dataset",
             "rate_per_s", "arrivals")
    if any(getattr(a, f) != getattr(b, f) for f in fixed) or not _lengths_match(a, b):
        return ""
    diff = [k for k in KNOBS if a.knob(k) != b.knob(k)]
    return diff[0] if len(diff) == 1 else ""


def knob_pairs(rows: list[OpenLoopRow], preds: dict[str, dict[str, RunPrediction]]
               ) -> list[KnobPair]:
    """Every pair of predicted runs that differ only by one knob, on each figure both state."""
    by_run: dict[str, list[OpenLoopRow]] = {}
    for r in rows:
        if r.run in preds:
            by_run.setdefault(r.run, []).append(r)
    runs = list(by_run)
    out: list[KnobPair] = []
    for i, ra in enumerate(runs):
        for rb in runs[i + 1:]:
            a0, b0 = by_run[ra][0], by_run[rb][0]
            knob = _same_but(a0, b0)
            if not knob:
                continue
            figs_b = {(r.metric, r.stat): r for r in by_run[rb]}
            for fa in by_run[ra]:
                fb = figs_b.get((fa.metric, fa.stat))
                if fb is None:
                    continue
                out.append(KnobPair(
                    knob=knob, run_a=ra, run_b=rb, value_a=str(a0.knob(knob) or "default"),
                    value_b=str(b0.knob(knob) or "default"), metric=fa.metric, stat=fa.stat,
                    measured_a=fa.value, measured_b=fb.value,
                    predicted_a={b: preds[ra][b].value(fa.metric, fa.stat) for b in BASES},
                    predicted_b={b: preds[rb][b].value(fa.metric, fa.stat) for b in BASES}))
    return out


def open_loop_scorecard(rows: Iterable[OpenLoopRow] | None = None,
                        catalog: Catalog | None = None) -> OpenLoopScorecard:
    """Score every row (default: data/reference/open_loop.csv); the rows of one run share one
    simulation per basis."""
    cat = catalog or default_catalog()
    rows = list(load_rows() if rows is None else rows)
    preds: dict[str, dict[str, RunPrediction]] = {}
    bands: dict[str, tuple[RunPrediction, RunPrediction]] = {}
    failed: dict[str, str] = {}
    checks: list[OpenLoopCheck] = []
    skipped: list[Skipped] = []
    runs: list[RunCheck] = []
    for r in rows:
        why = failed.get(r.run) or skip_reason(r, cat)
        if not why and r.run not in preds:
            try:
                preds[r.run] = {b: predict(r, b, cat) for b in BASES}
                bands[r.run] = band_predictions(r, cat)
                runs.append(RunCheck(
                    run=r.run, rate_per_s=r.rate_per_s, held=r.server_held,
                    saturated={b: preds[r.run][b].saturated for b in BASES},
                    requests=simulated_requests(r), typical_basis=typical_basis(r.profile)))
            except CapacityError as exc:
                why = failed[r.run] = str(exc)
        if why:
            skipped.append(Skipped(id=r.id, reason=why))
            continue
        p = preds[r.run]
        checks.append(OpenLoopCheck(
            id=r.id, run=r.run, model=r.model, gpu=r.gpu,
            layout=f"{r.replicas} x TP{r.tp}" if r.replicas > 1 else f"TP{r.tp}",
            profile=r.profile, rate_per_s=r.rate_per_s, prompt_tokens=r.prompt_tokens,
            output_tokens=r.output_tokens, metric=r.metric, stat=r.stat, measured=r.value,
            spec=p["spec"].value(r.metric, r.stat), typical=p["typical"].value(r.metric, r.stat),
            source=r.source, band=(bands[r.run][0].value(r.metric, r.stat),
                                   bands[r.run][1].value(r.metric, r.stat))))
    return OpenLoopScorecard(checks=tuple(checks), runs=tuple(runs),
                             knob_pairs=tuple(knob_pairs(rows, preds)), skipped=tuple(skipped))


# -- written out: Markdown (docs/accuracy.md), JSON -------------------------------------------
def _v(v: float) -> str:
    return _f(v, ",.1f" if abs(v) < 100 else ",.0f")


def markdown(card: OpenLoopScorecard) -> str:
    """The section as Markdown: the result against issue 32's targets, the error by basis and
    metric, saturation, the knob check, every figure, the rows not scored."""
    n_runs = len(card.runs)
    sources = len({c.source for c in card.checks})
    lines = [
        "### Open-loop runs (published)", "",
        f"{len(card.checks)} figures of {n_runs} published runs at a set request rate "
        f"(data/reference/open_loop.csv, {sources} sources) against the event "
        "model (`capacity.plan.events.open_loop_load`) under each run's engine profile, at its "
        "rate and arrivals (Poisson unless the source states constant); where its dataset "
        "varies the lengths, prompts drawn about the run's mean (the maximum-entropy lengths up "
        "to the dataset's longest; whole-prompt profiles at the mean) and outputs at the mean; "
        "at most "
        f"{MAX_REPLICA_REQUESTS:,} requests per replica (10 % warm-up). Bases: the spec sheet "
        "and the engine's typical basis (`typical:<engine>`, vLLM's where the engine has none), "
        "as the run's release ran it (SGLang's runs before 0.5.10, by version or run date, "
        "with their prefill passes' per-layer launches; docs/method.md, \"Prefill without CUDA "
        "graphs\"). Nothing is fitted to these rows.", "",
        "| basis | metric | figures | median abs error | worst | median signed | target |",
        "|---|---|---:|---:|---:|---:|---:|"]
    for basis, metric, errs in card.error_table(BASES, METRICS):
        target = TARGETS.get(metric or "") if basis == "typical" else None
        lines.append(f"| {basis} | {METRICS.get(metric or '', 'all')} | {error_cells(errs)} | "
                     f"{'-' if target is None else f'<= {target:.0%}'} |")
    inside, total = card.band_coverage()
    share = _f(inside / total if total else math.nan, ".1%")
    lines += ["", "The typical basis' band (the Planner's and the Explorer's: data/engines.toml's "
              "step and TTFT error bands, taken from published.csv's closed-loop rows, none of "
              f"these runs) holds {inside} of {total} figures ({share}; for an 80% band, "
              "75-85%): " + ", ".join(
                  f"{METRICS[m]} {a} of {n}" for m in METRICS
                  for a, n in (card.band_coverage(m),) if n) + "."]
    lines += ["", f"Runs predicted to saturate that the real server held ({card.held_runs} of "
              f"{n_runs} runs held, per the source's figures): "
              + "; ".join(f"{b}: {len(card.saturated_but_held(b))}"
                          + (f" ({', '.join(r.run for r in card.saturated_but_held(b))})"
                             if card.saturated_but_held(b) else "") for b in BASES)
              + " (target: 0)."]
    counted = card.counted_pairs()
    if not card.knob_pairs:
        lines += ["", "Knob check: no two runs in the set differ by one scheduler knob alone "
                  "(the sources vary the rate, not the knobs), so the check has nothing to "
                  "count yet."]
    else:
        lines += ["", f"Knob check: {len(card.knob_pairs)} figures of run pairs that differ by "
                  f"one scheduler knob, {len(counted)} of them with the measured figure moving "
                  f"by more than {KNOB_MOVE:.0%}; the prediction moves (by more than "
                  f"{PREDICTED_MOVE:.0%}) on "
                  + ", ".join(f"{b}: {sum(p.moves(b) for p in counted)}" for b in BASES)
                  + ", in the measured direction on "
                  + ", ".join(f"{b}: {sum(p.agrees(b) for p in counted)}" for b in BASES) + ".",
                  "", "| knob | runs (a / b) | values | figure | measured move | spec move | "
                  "typical move |", "|---|---|---|---|---:|---:|---:|"]
        for p in card.knob_pairs:
            lines.append(f"| {p.knob} | {p.run_a} / {p.run_b} | {p.value_a} / {p.value_b} | "
                         f"{p.stat} {METRICS[p.metric]} | {p.measured_move:+.1%} | "
                         f"{p.predicted_move('spec'):+.1%} | {p.predicted_move('typical'):+.1%} |")
    lines += ["", "| figure | GPU | layout | engine | rate/s | in / out | metric | measured ms | "
              "spec | error | typical | error |",
              "|---|---|---|---|---:|---|---|---:|---:|---:|---:|---:|"]
    for c in card.checks:
        lines.append(
            f"| {c.id} | {c.gpu} | {c.layout} | {c.profile} | {c.rate_per_s:g} | "
            f"{c.prompt_tokens} / {c.output_tokens} | {c.stat} {METRICS[c.metric]} | "
            f"{_v(c.measured)} | {_v(c.spec)} | {c.error('spec'):+.1%} | {_v(c.typical)} | "
            f"{c.error('typical'):+.1%} |")
    sat = [r for r in card.runs if any(r.saturated.values())]
    if sat:
        lines += ["", "Predicted to saturate: " + "; ".join(
            f"{r.run} ({', '.join(b for b in BASES if r.saturated[b])}; the real server "
            f"{'held' if r.held else 'did not hold' if r.held is False else 'unknown'})"
            for r in sat) + "."]
    lines += not_scored_lines([(s.id, s.reason) for s in card.skipped])
    return "\n".join(lines) + "\n"


def to_dict(card: OpenLoopScorecard) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None)."""
    return dict(jsonable({
        "figures": len(card.checks), "runs": len(card.runs), "targets": dict(TARGETS),
        "target_met": card.target_met(),
        "error": card.error_json(BASES, METRICS),
        "saturated_but_held": {b: [r.run for r in card.saturated_but_held(b)] for b in BASES},
        "band_coverage": {m or "all": dict(zip(("inside", "figures"), card.band_coverage(m),
                                               strict=True)) for m in (None, *METRICS)},
        "run_checks": [asdict(r) for r in card.runs],
        "knob_pairs": [{**asdict(p), "measured_move": p.measured_move,
                        "predicted_move": {b: p.predicted_move(b) for b in BASES},
                        "moves": {b: p.moves(b) for b in BASES},
                        "agrees": {b: p.agrees(b) for b in BASES}} for p in card.knob_pairs],
        "checks": [{**asdict(c), "error": {b: c.error(b) for b in BASES},
                    "in_band": c.in_band} for c in card.checks],
        "skipped": [asdict(s) for s in card.skipped]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the disaggregated section, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=DISAGG_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
