"""Measured vs predicted, level by level, for runs held out of a calibration: the table that
`python3 dev.py realtest` prints for llama.cpp (docs/accuracy.md, "Real engine").

For each level of a stored run (its `summary.csv` rows): TTFT p50 and p90, inter-token latency
p50 and mean, and output tok/s as measured, beside what the calibrated scenario predicts at the
run's own prompt and output lengths (`measured.run_scenario`): ITL p50 is F4's decode step at
the context a request holds while decoding, or under load the event model's median gap between a
request's tokens (the bench's ITL). ITL mean (every gap, the prompts processed between tokens
included) comes from the event model only (closed loops as run, replayed open loops). The median
of a level whose batch varies is a poor statistic to score: its gaps cluster by batch size, and
the median can jump from one cluster to the next with a few percent more load; the mean moves
smoothly. TTFT and output tok/s come from the event model under the run's load (closed loop at
each level's concurrency, or Poisson arrivals at its rate; `overlay.build_overlay`; an open-loop
level whose request rows are given replays their own send times instead of a new draw: with 16
requests, one draw's bursts are not another's), TTFT p90 from the same simulated distribution.
Errors are measured / predicted - 1. Beside them, the spec-sheet bound (`spec_bound`: the probed
entry with every knob at peak) that no measured ITL or TTFT may beat.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd

from capacity.bench.metrics import pass_bounds
from capacity.catalog.engines import DEFAULT_ENGINE
from capacity.catalog.loader import Catalog
from capacity.fit.calibration import Calibration, apply
from capacity.fit.measured import run_scenario
from capacity.fit.overlay import (
    ITL_METRIC,
    Load,
    Predicted,
    build_overlay,
    points_from_summary,
)
from capacity.fit.validate import spec_sheet
from capacity.model.scenario import Scenario, evaluate
from capacity.plan.closed_loop import burst_ttft_ms, closed_loop, closed_loop_as_run
from capacity.plan.events import ServiceModel, service_from_scenario, simulate

METRICS: tuple[tuple[str, str], ...] = (
    ("ttft_p50_ms", "TTFT p50 ms"), ("ttft_p90_ms", "TTFT p90 ms"),
    ("itl_p50_ms", "ITL p50 ms"), ("itl_mean_ms", "ITL mean ms"),
    ("output_tok_s", "output tok/s"))
"""(summary column, table heading) of each compared metric."""


STEADY_TTFT: Final = "ttft_p50_steady_ms"
"""A closed-loop level's predicted TTFT p50 in the steady state, the clients out of step
(`closed_loop.closed_loop`): the lower edge of its TTFT."""
BURST_TTFT: Final = "ttft_p50_burst_ms"
"""A closed-loop level's predicted TTFT p50 of its opening burst, every client's first request
at once to an idle replica (`closed_loop.burst_ttft_ms`): the upper edge of its TTFT."""
TTFT_EDGE_TOLERANCE: Final = 0.05
"""How far outside its two edges a closed-loop level's measured TTFT p50 may read and still
count as between them (`CheckRow.ttft_between`)."""


@dataclass(frozen=True, kw_only=True)
class CheckRow:
    """One level of a held-out run: measured and predicted values by summary column."""

    case: str
    concurrency: int
    request_rate_rps: float | None
    prompt_tokens: float
    output_tokens: float
    measured: dict[str, float]
    predicted: dict[str, float]
    spec: dict[str, float] = dataclasses.field(default_factory=dict)
    """The spec-sheet bound (`spec_bound`): the fastest ITL and TTFT the probed entry allows."""

    def within_bound(self, metric: str) -> bool | None:
        """True when the measured value is no faster than the spec-sheet bound (None where
        either is missing)."""
        m, b = self.measured.get(metric, math.nan), self.spec.get(metric, math.nan)
        if not (math.isfinite(m) and math.isfinite(b)):
            return None
        return m >= b * (1 - 1e-9)

    def ttft_between(self, tolerance: float = TTFT_EDGE_TOLERANCE) -> bool | None:
        """Whether a closed-loop level's measured TTFT p50 lies between the steady state with
        the clients out of step (`STEADY_TTFT`) and its opening burst (`BURST_TTFT`), the two
        edges `capacity plan --engine` and the Explorer show, `tolerance` either side (None:
        not a closed loop of two or more clients, or a value missing)."""
        m = self.measured.get("ttft_p50_ms", math.nan)
        lo = self.predicted.get(STEADY_TTFT, math.nan)
        hi = self.predicted.get(BURST_TTFT, math.nan)
        if self.concurrency < 2 or not all(math.isfinite(x) for x in (m, lo, hi)):
            return None
        return lo * (1 - tolerance) <= m <= hi * (1 + tolerance)

    def error(self, metric: str) -> float:
        """measured / predicted - 1 (NaN where either is missing)."""
        m, p = self.measured.get(metric, math.nan), self.predicted.get(metric, math.nan)
        return m / p - 1.0 if p > 0 and math.isfinite(m) and math.isfinite(p) else math.nan


@dataclass(frozen=True, kw_only=True)
class Drift:
    """How fast the machine ran when a held-out case was measured, against when the calibration's
    sweep was: one control level (the calibration's own model at concurrency 1, one prompt
    length, a few requests) measured right after the sweep (`baseline`) and again right before
    the case (`control`). `itl` and `ttft` are the control's ITL p50 and TTFT p50 over the
    baseline's (dimensionless; above 1: slower now). A VM whose speed wanders between runs
    (docs/accuracy.md, "Drift, again") moves every held-out case by its ratio; scaling the
    prediction by it (`drift_corrected`) leaves the model's own error. Example: the control's
    ITL p50 read 40 ms after the sweep and 36 ms before a case: itl = 0.9, and a predicted ITL
    of 60 ms reads 54 ms drift-corrected."""

    itl: float = 1.0
    ttft: float = 1.0

    @classmethod
    def of(cls, control: Mapping[str, float], baseline: Mapping[str, float]) -> Drift:
        """The ratios of `control`'s to `baseline`'s `itl_p50_ms` and `ttft_p50_ms` (1 where
        either is missing or not positive: no correction)."""
        def ratio(key: str) -> float:
            c, b = _num(control.get(key)), _num(baseline.get(key))
            return c / b if c > 0 and b > 0 else 1.0
        return cls(itl=ratio("itl_p50_ms"), ttft=ratio("ttft_p50_ms"))


DRIFT_SCALE: dict[str, str] = {"ttft_p50_ms": "ttft", "ttft_p90_ms": "ttft",
                               "itl_p50_ms": "itl", "itl_mean_ms": "itl", "output_tok_s": "itl"}
"""Which ratio of `Drift` each metric's prediction moves with: prefill times with TTFT's, the
decode gaps with ITL's, output tok/s inversely with ITL's (decode makes most of a request's
time)."""


def drift_corrected(row: CheckRow, drift: Drift) -> CheckRow:
    """`row` with its predictions scaled by the machine's drift (`Drift`): times x the ratio,
    output tok/s / the ITL ratio. The spec-sheet bound stays the probed entry's."""
    pred = {}
    for key, value in row.predicted.items():
        r = getattr(drift, DRIFT_SCALE[key]) if key in DRIFT_SCALE else 1.0
        pred[key] = value / r if key == "output_tok_s" else value * r
    return dataclasses.replace(row, predicted=pred)


def control_values(summary: pd.DataFrame) -> dict[str, float]:
    """A control run's ITL p50 and TTFT p50 (ms) at concurrency 1 (NaN where missing)."""
    one = summary[summary["concurrency"] == 1] if "concurrency" in summary else summary.iloc[:0]
    return {k: (_num(one[k].iloc[0]) if k in one and len(one) else math.nan)
            for k in ("itl_p50_ms", "ttft_p50_ms")}


def _num(x: object) -> float:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def check_run(summary: pd.DataFrame, *, case: str, model: str, gpu: str,
              calibration: Calibration, catalog: Catalog | None = None,
              engine: str = DEFAULT_ENGINE, max_num_seqs: int | None = None,
              requests: pd.DataFrame | None = None, passes: int | None = None
              ) -> list[CheckRow]:
    """Compare every level of one run (one prompt length, one model) with the calibrated
    prediction under the run's own load, scheduled as `engine` with `max_num_seqs` slots.
    `requests` (the run's request rows): open-loop levels replay their send times. A
    closed-loop level is predicted as it ran (`closed_loop_as_run`): its `requests_total` in
    `passes` closed loops from an idle server (None: the request rows' largest `pass_index`,
    else 1), not the steady state of an endless loop."""
    points = points_from_summary(summary, model=model, gpu=gpu, source=case)
    if not points:
        return []
    prompt = float(np.median([p.prompt_tokens or 1.0 for p in points]))
    output = float(np.median([p.output_tokens or 0.0 for p in points]))
    scenario = run_scenario(model, gpu, prompt_tokens=prompt, output_tokens=output,
                            catalog=catalog)
    open_loop = "request_rate_rps" in summary and summary["request_rate_rps"].notna().any()
    ov = build_overlay(points, scenario, series=case, calibration=calibration,
                       failures=summary, load=Load.OPEN if open_loop else Load.CLOSED,
                       engine=engine, max_num_seqs=max_num_seqs)
    bound = spec_bound(scenario)
    n_pass = passes if passes is not None else _passes(requests)
    svc: ServiceModel | None = None
    cal = Predicted.CALIBRATED.value
    pred = ov.predicted[ov.predicted["series"] == cal]
    rows: list[CheckRow] = []
    for rec in summary.to_dict("records"):
        c = float(rec["concurrency"])
        at = pred[np.isclose(pred["concurrency"].to_numpy(dtype=float), c)]

        def value(metric: str, column: str = "value", _at: pd.DataFrame = at) -> float:
            sel = _at.loc[_at["metric"] == metric, column]
            return float(sel.iloc[0]) if len(sel) else math.nan

        itl_p50 = value(ITL_METRIC)  # the event model's median gap (under load) ...
        if not math.isfinite(itl_p50):
            itl_p50 = value("tpot_ms")  # ... else the decode step at the level's batch
        predicted = {"ttft_p50_ms": value("ttft_ms"), "ttft_p90_ms": value("ttft_ms", "p90"),
                     "itl_p50_ms": itl_p50, "output_tok_s": value("aggregate_tok_s")}
        if open_loop and requests is not None:
            predicted |= replayed(requests, c, apply(calibration, scenario),
                                  output_tokens=max(1, round(output)), engine=engine,
                                  max_num_seqs=max_num_seqs)
        total = _num(rec.get("requests_total"))
        if not open_loop and math.isfinite(total) and total >= 1 and c >= 1:
            if svc is None:  # one replica model for every closed level of the run
                svc = service_from_scenario(apply(calibration, scenario),
                                            output_tokens=max(1, round(output)),
                                            engine=engine, max_num_seqs=max_num_seqs)
            n_passes = min(int(total), n_pass)
            bounds = pass_bounds(int(total), n_passes)
            predicted |= closed_loop_as_run(svc, concurrency=int(c), shares=[
                b - a for a, b in zip(bounds, bounds[1:], strict=False)])
            predicted[STEADY_TTFT] = closed_loop(svc, concurrency=int(c)).ttft_ms[0.5]
            predicted[BURST_TTFT] = burst_ttft_ms(svc, concurrency=int(c))[0.5]
        rows.append(CheckRow(
            case=case, concurrency=int(c), request_rate_rps=_num(rec.get("request_rate_rps"))
            if open_loop else None,
            prompt_tokens=_num(rec.get("prompt_tokens_mean")),
            output_tokens=_num(rec.get("output_tokens_mean")),
            measured={k: _num(rec.get(k)) for k, _ in METRICS},
            predicted=predicted,
            spec={"itl_p50_ms": float(bound.step_ms(max(c, 1.0))),
                  "ttft_p50_ms": bound.ttft_ms}))
    return rows


def _passes(requests: pd.DataFrame | None) -> int:
    """A run's passes through its levels: the largest `pass_index` of its request rows (1
    without rows, or for a run from before `--passes`)."""
    if requests is None or "pass_index" not in requests:
        return 1
    top = pd.to_numeric(requests["pass_index"], errors="coerce").max()
    return int(top) if math.isfinite(top) and top >= 1 else 1


def replayed(requests: pd.DataFrame, concurrency: float, scenario: Scenario, *,
             output_tokens: int, engine: str, max_num_seqs: int | None) -> dict[str, float]:
    """The event model on one open-loop level's own send times (`start_unix_s` of its
    request rows at `concurrency`): TTFT p50/p90 and ITL p50 and mean (ms), output tok/s. Empty when
    the level has fewer than 10 requests with a send time."""
    at = requests[np.isclose(pd.to_numeric(requests["concurrency"], errors="coerce"),
                             concurrency)]
    sent = np.sort(pd.to_numeric(at["start_unix_s"], errors="coerce").dropna().to_numpy(
        dtype=np.float64))
    if sent.size < 10:
        return {}
    svc = service_from_scenario(scenario, output_tokens=output_tokens, engine=engine,
                                max_num_seqs=max_num_seqs)
    r = simulate(svc, arrivals_ms=(sent - sent[0]) * 1e3, warmup_fraction=0.0, itl=True)
    return {"ttft_p50_ms": r.ttft_ms[0.5], "ttft_p90_ms": r.ttft_ms[0.9],
            "itl_p50_ms": (r.itl_ms or {}).get(0.5, math.nan),
            "itl_mean_ms": math.nan if r.itl_mean_ms is None else r.itl_mean_ms,
            "output_tok_s": r.output_tok_s}


@dataclass(frozen=True, kw_only=True)
class SpecBound:
    """The fastest a run can go on its spec sheet (`capacity.model.basis.SPEC_KNOBS`: every
    knob at peak, no overheads, the bound step, which no other step method undercuts), the
    decode step at the prompt's context (the least a request holds) and the prefill of one
    prompt alone (no queue, no other prompt). A measured ITL or TTFT below it breaks the upper
    bound."""

    scenario: Scenario
    ttft_ms: float

    def step_ms(self, concurrency: float) -> float:
        """The fastest decode step (ms) at `concurrency` sequences."""
        return float(np.asarray(evaluate(self.scenario, [concurrency]).decode.step_ms
                                ).reshape(-1)[0])


def spec_bound(scenario: Scenario) -> SpecBound:
    """`SpecBound` of a run's scenario (`measured.run_scenario`)."""
    peak = spec_sheet(scenario).with_(context_tokens=scenario.prompt)
    return SpecBound(scenario=peak,
                     ttft_ms=float(np.asarray(evaluate(peak).ttft_s).reshape(-1)[0]) * 1e3)


def bound_counts(rows: Sequence[CheckRow]) -> dict[str, tuple[int, int]]:
    """(levels within the spec-sheet bound, levels checked) for ITL p50 and TTFT p50."""
    out: dict[str, tuple[int, int]] = {}
    for key in ("itl_p50_ms", "ttft_p50_ms"):
        flags = [f for r in rows if (f := r.within_bound(key)) is not None]
        out[key] = (sum(flags), len(flags))
    return out


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _pct(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:+.0%}"


def markdown_table(rows: Sequence[CheckRow]) -> str:
    """One line per level: measured, predicted and error of each metric."""
    head = ["case", "C", "rate/s", "prompt tok"]
    for _, title in METRICS:
        head += [f"{title} meas", "pred", "err"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.case, str(r.concurrency),
                 "-" if r.request_rate_rps is None else f"{r.request_rate_rps:g}",
                 _fmt(r.prompt_tokens)]
        for key, _ in METRICS:
            cells += [_fmt(r.measured.get(key, math.nan)), _fmt(r.predicted.get(key, math.nan)),
                      _pct(r.error(key))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def median_abs_errors(rows: Sequence[CheckRow]) -> dict[str, float]:
    """Median |error| of each metric over the rows (NaN where none has both values)."""
    out: dict[str, float] = {}
    for key, _ in METRICS:
        errs = [abs(r.error(key)) for r in rows if math.isfinite(r.error(key))]
        out[key] = float(np.median(errs)) if errs else math.nan
    return out
