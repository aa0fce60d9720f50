"""The accuracy scorecard: the predictor against every measured row the project ships
(`capacity validate`, docs/accuracy.md; a user's own runs: `capacity.fit.run_accuracy`).

Each stated row of `data/reference/published.csv` becomes one `Check`: the measured figure
beside the spec-sheet prediction (`spec_sheet`: every knob at peak, no queueing, the bound) and
the calibrated leave-one-group-out prediction. Step: spec sheet F4 at min(C, C_vram) per replica
and the context a request holds on average while decoding (prompt + output / 2); calibrated, the
event model's TPOT (`pick`: the prefills that stall a closed loop's decode included, as the
measured TPOT and ITL). TTFT, throughput and E2E: spec sheet F6 and a closed loop
(`closed_loop_tok_s`, `e2e_ms`); calibrated, the event model under the row's engine profile
(`queued_levels`). Optimism (`optimism`) >= 1 means the
spec sheet is an upper bound on speed, the target for every row; a level is at saturation when
C exceeds the spec-sheet C_vram or its throughput is within 5% of a lower level's
(`saturated_levels`).

Leave-one-group-out (a group = GPU + engine + model): each group is fitted on its own
(`calibration.fit`), then predicted with the median knobs of other groups only: the same GPU and
engine (another model), else the same GPU, else the same engine, else all (`Check.calibrated_from`);
prefill knobs only from unqueued TTFTs (`unqueued_prefill`); added rows (`ReferenceSweep.added`)
are never donors. `configure` maps every scenario before it is predicted or fitted (a step
method is one parameter, `step_methods`). Within a group (`WithinLevel`): each decode level held
out of the group's own fit (whole levels), and the levels above half the largest predicted from
those below (`_extrapolated`). Rows in the band shown without calibration: `band_coverage`.
The report (Markdown, JSON) is `capacity.fit.validate_report`.
Source: docs/accuracy.md, docs/calibration.md, F3, F4, F6, F11 (docs/method.md).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError, InputError
from capacity.fit import calibration as calib
from capacity.fit import uncertainty
from capacity.fit.calibration_problem import PREFILL_KNOBS
from capacity.fit.measured import run_scenario
from capacity.fit.published_engines import SCHEDULER_OF as SCHEDULER_OF
from capacity.fit.published_engines import engine_family as engine_family
from capacity.fit.published_engines import release_of as release_of
from capacity.fit.published_engines import scheduled_as_run
from capacity.fit.published_engines import scheduler_of as scheduler_of
from capacity.fit.reference import (
    FROM_E2E,
    FROM_THROUGHPUT,
    REFERENCE_KEYS,
    ReferenceSweep,
    RunShape,
    StatedValue,
    load_reference,
)
from capacity.fit.validate_formulas import SATURATION_GAIN as SATURATION_GAIN
from capacity.fit.validate_formulas import closed_loop_tok_s as closed_loop_tok_s
from capacity.fit.validate_formulas import e2e_ms as e2e_ms
from capacity.fit.validate_formulas import relative_error as relative_error
from capacity.fit.validate_formulas import saturated_levels as saturated_levels
from capacity.fit.validate_predict import METRIC_OF as METRIC_OF
from capacity.fit.validate_predict import Metric as Metric
from capacity.fit.validate_predict import Prediction as Prediction
from capacity.fit.validate_predict import Queued as Queued
from capacity.fit.validate_predict import pick as pick
from capacity.fit.validate_predict import predict as predict
from capacity.fit.validate_predict import queued_levels as queued_levels
from capacity.fit.validate_predict import spec_sheet as spec_sheet
from capacity.model.scenario import Scenario
from capacity.untrusted import loads_toml

TOLERANCE = 1e-9
"""Relative slack of the upper-bound test (rounding only)."""
MIN_WITHIN_LEVELS = 3
"""Decode levels a group needs for the within-group check: each held-out fit then has at least
two."""


def optimism(metric: Metric, measured: float, predicted: float) -> float:
    """How much faster the prediction is than the measurement (a ratio): measured / predicted
    for times (step, TTFT), predicted / measured for throughput. >= 1: an upper bound on
    speed. Example: measured step 20 ms, spec-sheet 8 ms -> 2.5."""
    if metric == Metric.THROUGHPUT:
        return predicted / measured
    return measured / predicted


@dataclass(frozen=True, kw_only=True)
class Check:
    """One stated row: measured, spec-sheet and calibrated predictions (the metric's unit:
    ms, or tok/s for throughput)."""

    group: str
    gpu: str
    engine: str
    model: str
    source: str
    date: str
    tp: int
    concurrency: float
    prompt_tokens: float
    output_tokens: float
    metric: Metric
    stat: str
    measured: float
    spec: float
    saturated: bool
    calibrated: float | None = None
    calibrated_from: str = ""
    band_ms: tuple[float, float] | None = None
    """A decode-step row: the band a prediction without measurements shows (`uncertainty.band`
    without a calibration: the chapter's knobs to the typical ranges' slow edge), low and
    high, ms; None for other metrics."""
    added: str = ""
    """The day the row was added (`ReferenceSweep.added`; ''): held out of other groups' fits."""

    @property
    def in_band(self) -> bool | None:
        """Whether the measurement lies in `band_ms` (None without one)."""
        if self.band_ms is None:
            return None
        return self.band_ms[0] * (1 - TOLERANCE) <= self.measured <= self.band_ms[1] * (1 + TOLERANCE)

    @property
    def optimism(self) -> float:
        """Spec-sheet speed / measured speed (`optimism`)."""
        return optimism(self.metric, self.measured, self.spec)

    @property
    def upper_bound(self) -> bool:
        """The spec-sheet prediction is not slower than measured."""
        return self.optimism >= 1.0 - TOLERANCE

    @property
    def spec_error(self) -> float:
        return relative_error(self.spec, self.measured)

    @property
    def calibrated_error(self) -> float | None:
        return None if self.calibrated is None else relative_error(self.calibrated,
                                                                   self.measured)


@dataclass(frozen=True, kw_only=True)
class Spread:
    """Median and range of a set of ratios or |errors| (NaN when empty)."""

    n: int
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        v = [x for x in values if math.isfinite(x)]
        if not v:
            return cls(n=0, median=math.nan, low=math.nan, high=math.nan)
        return cls(n=len(v), median=float(statistics.median(v)), low=min(v), high=max(v))


class ErrorsByMetric:
    """The error summaries of a section's scorecard whose `checks` each carry a `metric` and a
    signed `error(basis)` (predicted / measured - 1): the open-loop, disaggregated and MLPerf
    sections."""

    checks: Sequence[Any]

    def errors(self, basis: str, metric: str | None = None) -> list[float]:
        """predicted / measured - 1 of every check (of one metric) on `basis`."""
        return [c.error(basis) for c in self.checks if metric in (None, c.metric)]

    def error(self, basis: str, metric: str | None = None) -> Spread:
        """|predicted / measured - 1| over the checks (of one metric)."""
        return Spread.of(abs(e) for e in self.errors(basis, metric))

    def error_table(self, bases: Iterable[str], metrics: Iterable[str]
                    ) -> list[tuple[str, str | None, list[float]]]:
        """(basis, metric or None for all, signed errors) of each basis and each metric (all
        first) that has checks: the rows of a section's error-summary table."""
        return [(b, m, errs) for b in bases for m in (None, *metrics)
                if (errs := self.errors(b, m))]

    def error_json(self, bases: Iterable[str], metrics: Iterable[str]
                   ) -> dict[str, dict[str, dict[str, Any]]]:
        """The section JSON's `error`: per basis, per metric ('all' first), the |error| spread
        and the median signed error (`bias`)."""
        return {b: {m or "all": {**dataclasses.asdict(self.error(b, m)),
                                 "bias": Spread.of(self.errors(b, m)).median}
                    for m in (None, *metrics)} for b in bases}

    @property
    def spec_bound(self) -> tuple[int, int]:
        """(checks the spec sheet bounds, checks), for checks with `spec_bounds`
        (`SpecTypicalCheck`)."""
        return sum(c.spec_bounds for c in self.checks), len(self.checks)


class SpecTypicalCheck:
    """A figure measured and predicted on the spec sheet and a typical basis (a section's
    dataclass supplies the fields; the MLPerf, TensorRT-LLM and saturated-run sections):
    signed errors, and whether the spec sheet is on the fast side of it, at or above on the
    metrics where faster is larger (`CAPACITY_METRICS`), at or below on latencies."""

    CAPACITY_METRICS: ClassVar[tuple[str, ...]] = ()
    metric: str
    measured: float
    spec: float
    typical: float

    def predicted(self, basis: str) -> float:
        return self.spec if basis == "spec" else self.typical

    def error(self, basis: str) -> float:
        """predicted / measured - 1 on 'spec' or 'typical'."""
        return relative_error(self.predicted(basis), self.measured)

    @property
    def spec_bounds(self) -> bool:
        """The spec sheet is on the fast side: capacity at or above, latency at or below."""
        if self.metric in self.CAPACITY_METRICS:
            return self.spec >= self.measured
        return self.spec <= self.measured


@dataclass(frozen=True, kw_only=True)
class WithinLevel:
    """One decode level of a group and its step predicted by fits of the group's other levels
    (ms), one per step method (`Scorecard.within_methods`); None where that fit failed."""

    group: str
    concurrency: float
    context_tokens: float
    """The context a request holds on average while decoding (prompt + output / 2), tokens."""
    measured_ms: float
    held_out_ms: tuple[float | None, ...]
    derived: str = ""
    """How the step was derived when the source does not state it ('' when it does)."""

    def error(self, i: int) -> float | None:
        """Relative error of method i's held-out prediction: predicted / measured - 1."""
        v = self.held_out_ms[i]
        return None if v is None else relative_error(v, self.measured_ms)


@dataclass(frozen=True, kw_only=True)
class Violation:
    """A row where the spec-sheet prediction is slower than measured, and why (from
    data/reference/keys.toml's [[upper_bound_exception]] entries, else 'not explained')."""

    check: Check
    reason: str


@dataclass(frozen=True, kw_only=True)
class Scorecard:
    """Every check, the upper-bound rate, optimism by GPU and engine, and the calibrated
    leave-one-group-out error by metric, below and at saturation."""

    checks: tuple[Check, ...]
    upper_bound_rate: float
    violations: tuple[Violation, ...]
    optimism_by_gpu: tuple[tuple[str, Spread], ...]
    optimism_by_engine: tuple[tuple[str, Spread], ...]
    logo_error: tuple[tuple[str, str, Spread], ...]
    """(metric, 'below' | 'at saturation', spread of |relative error|)."""
    groups: tuple[str, ...]
    step_method: str | None = None
    skipped: tuple[str, ...] = field(default=())
    within: tuple[WithinLevel, ...] = field(default=())
    """Each decode level of a group with enough of them, held out of its group's own fit."""
    within_methods: tuple[str, ...] = field(default=())
    """The step methods of `WithinLevel.held_out_ms`, in order."""
    extrapolated: tuple[WithinLevel, ...] = field(default=())
    """Decode levels above the largest a fit of the group's lower levels saw, up to twice it
    (`_extrapolated`), under the same step methods."""

    def extrapolated_error(self, method: str) -> Spread:
        """|predicted / measured - 1| of the decode step beyond the fitted range, one method."""
        i = self.within_methods.index(method)
        return Spread.of(abs(e) for w in self.extrapolated if (e := w.error(i)) is not None)

    def within_error(self, method: str) -> Spread:
        """|held-out / measured - 1| of the decode step over every within-group level, under
        one step method."""
        i = self.within_methods.index(method)
        return Spread.of(abs(e) for w in self.within if (e := w.error(i)) is not None)

    def logo(self, metric: Metric, saturated: bool) -> Spread:
        """The leave-one-group-out |error| of one metric, below or at saturation."""
        where = "at saturation" if saturated else "below"
        return next(s for m, w, s in self.logo_error if m == metric and w == where)


# ---------------------------------------------------------------------------------------------
# predictions

Configure = Callable[[Scenario], Scenario]


def _same(s: Scenario) -> Scenario:
    return s


def step_methods() -> tuple[str, ...]:
    """The decode-step methods `Scenario` offers (its `step_method` or `method` field's values,
    when it has one), else () : `capacity validate --step-method` exists only then."""
    names = {f.name: f for f in dataclasses.fields(Scenario)}
    for name in ("step_method", "method"):
        if name in names:
            return ("chapter", "operator")
    return ()


def with_step_method(method: str | None) -> Configure:
    """A `configure` that sets the scenario's step method (identity for None)."""
    if method is None:
        return _same
    if method not in step_methods():
        raise InputError(f"step method '{method}' is not offered by this version "
                         f"(offered: {', '.join(step_methods()) or 'none'})")
    name = next(n for n in ("step_method", "method")
                if n in {f.name for f in dataclasses.fields(Scenario)})
    return lambda s: s.with_(**{name: method})


@dataclass(frozen=True, kw_only=True)
class _Group:
    key: str
    gpu: str
    engine: str
    sweeps: tuple[ReferenceSweep, ...]


def group_key(model: str, gpu: str, gpus: int, engine: str) -> str:
    """A group's name: GPU + engine + model, e.g. 'qwen3-8b-bf16 on h100-sxm (SGLang)'."""
    on = f"{gpus}x {gpu}" if gpus > 1 else gpu
    return f"{model} on {on} ({engine_family(engine)})"


def _scenario(s: ReferenceSweep, configure: Configure, catalog: Catalog) -> Scenario:
    assert s.model_key is not None and s.gpu_key is not None
    return scheduled_as_run(s, configure(run_scenario(
        s.model_key, s.gpu_key, prompt_tokens=s.prompt_tokens, output_tokens=s.output_tokens,
        n_gpus=s.gpus, tp=s.tp, catalog=catalog)))


def _fit_group(g: _Group, configure: Configure, catalog: Catalog) -> calib.Calibration | None:
    """The group's own calibration (all its points), or None when it cannot be fitted."""
    pts = [p for s in g.sweeps for p in s.points]
    try:
        return calib.fit(pts, _scenario(g.sweeps[0], configure, catalog), name=g.key,
                         engine=g.engine, today="-")
    except CapacityError:
        return None


def _then_method(configure: Configure, method: str) -> Configure:
    """`configure`, then the step method set to `method`."""
    return lambda s: configure(s).with_(step_method=method)


def _within_group(g: _Group, configure: Configure, catalog: Catalog, methods: Sequence[str],
                  own: calib.Calibration | None) -> list[WithinLevel]:
    """The group's decode levels, each predicted by a fit of the others (the fit's own
    held-out check), under each step method; [] when it has fewer than MIN_WITHIN_LEVELS.
    `own` is the group's fit under `configure` alone, reused for its method."""
    stepped = sum(calib.decode_measured_ms(p) is not None for sw in g.sweeps for p in sw.points)
    if stepped < MIN_WITHIN_LEVELS:  # no fit to run (each costs one fit per held-out level)
        return []
    per_method: list[dict[tuple[float, float, float], float | None]] = []
    levels: dict[tuple[float, float, float], str] = {}
    for m in methods:
        cal = (own if own is not None and own.step_method == m else
               _fit_group(g, _then_method(configure, m), catalog))
        got: dict[tuple[float, float, float], float | None] = {}
        for p in cal.points if cal is not None else ():
            if p.kind == calib.PointKind.TPOT:
                key = (p.concurrency, p.context_tokens, p.measured_ms)
                levels.setdefault(key, next((d.strip(" ()") for d in (FROM_THROUGHPUT, FROM_E2E)
                                             if p.source.endswith(d)), ""))
                got[key] = p.held_out_ms
        per_method.append(got)
    if len(levels) < MIN_WITHIN_LEVELS:
        return []
    return [WithinLevel(group=g.key, concurrency=c, context_tokens=ctx, measured_ms=ms,
                        held_out_ms=tuple(got.get((c, ctx, ms)) for got in per_method),
                        derived=levels[c, ctx, ms])
            for c, ctx, ms in sorted(levels, key=lambda k: (k[1], k[0]))]


def unqueued_prefill(cal: calib.Calibration) -> bool:
    """Whether a fit's prefill knobs rest on TTFT without a queue: every TTFT point it
    fitted was measured at concurrency 1. A fit of TTFTs under load puts the queueing into
    the prefill knobs (the fixed prefill overhead soaks it up: 53 ms for Qwen3-8B on an H100 at
    4 clients, 632 ms on an MI300X at 32), which another group's prediction, queueing again
    in the event model, must not borrow."""
    ttft = [p for p in cal.points if p.kind == calib.PointKind.TTFT]
    return bool(ttft) and all(p.concurrency <= 1 for p in ttft)


def _extrapolated(g: _Group, configure: Configure, catalog: Catalog, methods: Sequence[str],
                  within: Sequence[WithinLevel]) -> list[WithinLevel]:
    """The group's decode levels above the largest one a fit saw, up to twice it: fitted on
    the levels up to half the group's largest (at least two of them), under each step method,
    each level above predicted (`WithinLevel.held_out_ms`). [] when the group has no such
    split. The levels are the within-group check's (those the decode fit uses)."""
    used = {(w.concurrency, w.context_tokens, w.measured_ms) for w in within if w.group == g.key}
    if not used:
        return []
    top = max(c for c, _, _ in used)
    train_levels = sorted({c for c, _, _ in used if c <= top / 2})
    if len(train_levels) < 2:
        return []
    edge = train_levels[-1]
    pts = [p for sw in g.sweeps for p in sw.points
           if (m := calib.decode_measured_ms(p)) is not None
           and (p.concurrency, p.decode_context_tokens, m) in used]
    train = [p for p in pts if p.concurrency <= edge]
    test = [p for p in pts if edge < p.concurrency <= 2 * edge]
    if not test:
        return []
    preds: list[list[float | None]] = []
    for method in methods:
        base = _then_method(configure, method)(_scenario(g.sweeps[0], _same, catalog))
        try:
            cal = calib.fit(train, base, name=g.key, engine=g.engine, today="-",
                            held_out=False)
        except CapacityError:
            preds.append([None] * len(test))
            continue
        step, _ = calib.predict_ms(calib.apply(cal, base), test)
        preds.append([float(x) for x in step])
    return [WithinLevel(group=g.key, concurrency=p.concurrency,
                        context_tokens=p.decode_context_tokens,
                        measured_ms=float(calib.decode_measured_ms(p) or math.nan),
                        held_out_ms=tuple(pr[i] for pr in preds),
                        derived=next((d.strip(" ()") for d in (FROM_THROUGHPUT, FROM_E2E)
                                      if p.source.endswith(d)), ""))
            for i, p in enumerate(test)]


def _median_knobs(cals: Sequence[calib.Calibration]) -> calib.Calibration:
    """A calibration whose every knob is the median of those that fitted it; the prefill knobs
    only from fits of unqueued TTFTs (`unqueued_prefill`), when any has them."""
    knobs: dict[str, Any] = {}
    clean = [c for c in cals if unqueued_prefill(c)]
    for n in calib.KNOBS:
        src = clean if n in PREFILL_KNOBS and clean else cals
        vals = [float(v) for c in src if (v := getattr(c, n)) is not None]
        if vals:
            knobs[n] = float(statistics.median(vals))
    return dataclasses.replace(calib.Calibration(name="leave-one-group-out", model="", gpu=""),
                               **knobs)


def _logo_calibration(g: _Group, fitted: dict[str, calib.Calibration]
                      ) -> tuple[calib.Calibration | None, str]:
    """Knobs for group `g` from other groups only, and which others they came from."""
    others = {k: c for k, c in fitted.items() if k != g.key}
    fam = engine_family(g.engine)
    tiers: tuple[tuple[str, Callable[[calib.Calibration], bool]], ...] = (
        ("same GPU and engine", lambda c: c.gpu == g.gpu and engine_family(c.engine) == fam),
        ("same GPU", lambda c: c.gpu == g.gpu),
        ("same engine", lambda c: engine_family(c.engine) == fam),
        ("all other groups", lambda c: True))
    for label, keep in tiers:
        chosen = [c for c in others.values() if keep(c)]
        if chosen:
            return _median_knobs(chosen), f"{label} ({len(chosen)})"
    return None, ""


def _exceptions(keys_path: Path | None) -> list[dict[str, Any]]:
    """[[upper_bound_exception]] entries of the key map: source (substring), metric,
    concurrency (optional) and reason."""
    path = keys_path or REFERENCE_KEYS
    try:
        data = loads_toml(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    return [dict(e) for e in data.get("upper_bound_exception", [])]


def _reason(c: Check, exceptions: Sequence[dict[str, Any]]) -> str:
    for e in exceptions:
        if (str(e.get("source", "")) in c.source and e.get("metric", c.metric) == c.metric
                and float(e.get("concurrency", c.concurrency)) == c.concurrency):
            return str(e["reason"])
    return "not explained"


def _spreads(checks: Sequence[Check], key: Callable[[Check], str]
             ) -> tuple[tuple[str, Spread], ...]:
    names = sorted({key(c) for c in checks})
    return tuple((n, Spread.of(c.optimism for c in checks if key(c) == n)) for n in names)


def scorecard(sweeps: Sequence[ReferenceSweep] | None = None, *,
              configure: Configure = _same, step_method: str | None = None,
              catalog: Catalog | None = None, keys_path: Path | None = None) -> Scorecard:
    """Run the predictor over every mapped published sweep (default: all of
    data/reference/published.csv) and score it. `configure` maps each scenario (a step
    method, a what-if); `step_method` only labels the result."""
    cat = catalog or default_catalog()
    all_sweeps = list(load_reference() if sweeps is None else sweeps)
    skipped = tuple(f"{s.label}: not in the catalog" for s in all_sweeps
                    if s.gpu_key is None or s.model_key is None)
    mapped = [s for s in all_sweeps if s.gpu_key is not None and s.model_key is not None]
    by_key: dict[str, list[ReferenceSweep]] = {}
    for s in mapped:
        k = group_key(s.model_key or "", s.gpu_key or "", s.gpus, s.engine)
        by_key.setdefault(k, []).append(s)
    groups = [_Group(key=k, gpu=v[0].gpu_key or "", engine=v[0].engine, sweeps=tuple(v))
              for k, v in sorted(by_key.items())]
    donors = [dataclasses.replace(g, sweeps=old) for g in groups  # added rows are held out
              if (old := tuple(s for s in g.sweeps if not s.is_added))]
    fitted = {g.key: c for g in donors if (c := _fit_group(g, configure, cat)) is not None}
    methods = step_methods()
    within = [w for g in groups for w in _within_group(g, configure, cat, methods, fitted.get(
        g.key) if all(not s.is_added for s in g.sweeps) else None)]
    extrapolated = [w for g in groups
                    for w in _extrapolated(g, configure, cat, methods, within)]
    checks: list[Check] = []
    for g in groups:
        logo_cal, logo_from = _logo_calibration(g, fitted)
        for s in g.sweeps:
            base = spec_sheet(_scenario(s, configure, cat))
            levels = sorted({v.concurrency for v in s.stated})
            spec = predict(base, levels, s.prompt_tokens, s.output_tokens)
            cal = (predict(calib.apply(logo_cal, base), levels, s.prompt_tokens,
                           s.output_tokens, scheduler_of(s.engine), s.run)
                   if logo_cal is not None else None)
            tok = {p.concurrency: p.output_tok_s for p in s.points}
            sat = dict(zip(levels, saturated_levels(
                levels, [tok.get(c) for c in levels], spec.c_vram),  # the deployment's already
                strict=True))
            steps = sorted({v.concurrency for v in s.stated
                            if METRIC_OF[v.metric] == Metric.STEP})  # the rows a band is for
            bands = dict(zip(steps, typical_step_bands(
                _scenario(s, configure, cat), steps, spec.c_vram, s.prompt_tokens,
                s.output_tokens, scheduler_of(s.engine), s.run), strict=True))
            for v in s.stated:
                i = levels.index(v.concurrency)
                row = _check(g, s, v, i, spec, cal, sat[v.concurrency], logo_from)
                checks.append(row if row.metric != Metric.STEP
                              else dataclasses.replace(row, band_ms=bands[v.concurrency]))
    exceptions = _exceptions(keys_path)
    violations = tuple(Violation(check=c, reason=_reason(c, exceptions))
                       for c in checks if not c.upper_bound)
    speed = [c for c in checks if c.metric != Metric.TTFT]
    logo = [(m.value, w, Spread.of(abs(e) for c in checks if c.metric == m and c.saturated == f
                                   if (e := c.calibrated_error) is not None))
            for m in Metric for w, f in (("below", False), ("at saturation", True))]
    return Scorecard(
        checks=tuple(checks),
        upper_bound_rate=(sum(c.upper_bound for c in checks) / len(checks)) if checks
        else math.nan,
        violations=violations, optimism_by_gpu=_spreads(speed, lambda c: c.gpu),
        optimism_by_engine=_spreads(speed, lambda c: engine_family(c.engine)),
        logo_error=tuple(logo), groups=tuple(g.key for g in groups), step_method=step_method,
        skipped=skipped, within=tuple(within), within_methods=tuple(methods),
        extrapolated=tuple(extrapolated))


def typical_step_bands(scenario: Scenario, concurrency: Sequence[float], c_vram_requests: int,
                       prompt_tokens: float, output_tokens: float, scheduler: str | None = None,
                       run: RunShape | None = None) -> list[tuple[float, float]]:
    """The band (low, high, ms) of a benchmark's TPOT for a user without measurements at each
    level: the decode step's band (`uncertainty.band` without a calibration, at the batch
    min(C, C_vram) and the context a request holds on average while decoding, prompt +
    output / 2, as `predict`), its slow edge stretched, with a `scheduler`, to the event
    model's TPOT (mean and median, `queued_levels`) at the slow edge's knobs
    (`uncertainty.typical_edges`): a benchmark's TPOT carries the other requests' prefills
    that stall the decode, as the step rows are scored (`run`: as the source ran)."""
    ctx = max(1, math.ceil(prompt_tokens + output_tokens / 2))
    batch = [min(float(c), float(max(1, c_vram_requests))) for c in concurrency]
    b = uncertainty.band(scenario.with_(context_tokens=ctx), batch)
    out = [(float(lo), float(hi)) for lo, hi in zip(b.step_ms[0], b.step_ms[2], strict=True)]
    slow = (None if scheduler is None else
            queued_levels(uncertainty.typical_edges(scenario)[1], concurrency, output_tokens,
                          scheduler, run, as_run_tok_s=False))
    if slow is None:
        return out
    return [(lo, max(hi, q.tpot_mean_ms, q.tpot_median_ms))
            for (lo, hi), q in zip(out, slow, strict=True)]


def band_coverage(checks: Iterable[Check], saturated: bool) -> tuple[int, int]:
    """(rows whose measured step lies in the typical band, decode-step rows with a band),
    below or at saturation."""
    rows = [c for c in checks if c.in_band is not None and c.saturated == saturated]
    return sum(bool(c.in_band) for c in rows), len(rows)


def _check(g: _Group, s: ReferenceSweep, v: StatedValue, i: int, spec: Prediction,
           cal: Prediction | None, saturated: bool, cal_from: str) -> Check:
    metric = METRIC_OF[v.metric]
    return Check(group=g.key, gpu=s.gpu_key or s.gpu_name, engine=s.engine,
                 model=s.model_key or s.model_name, source=s.source, date=s.date, tp=s.tp,
                 concurrency=v.concurrency, prompt_tokens=s.prompt_tokens,
                 output_tokens=s.output_tokens, metric=metric,
                 stat=v.stat, measured=v.value, spec=pick(spec, metric, i), saturated=saturated,
                 calibrated=None if cal is None else pick(cal, metric, i, v.stat),
                 calibrated_from=cal_from, added=s.added)
