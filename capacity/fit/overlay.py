"""Measured points on predicted curves: what the Results page overlays (docs/app.md, Results).

Measured points come from a stored run (`points_from_summary`, the per-level rows of
`capacity.bench.store`), an import (`read_upload`, through `capacity.fit.imports`) or a published sweep
(`capacity.fit.reference`). Predictions without queueing come from `capacity.fit.validate_predict.predict`
(the accuracy table's; through `calibration.predict_ms`, hence F4 and F6 through `scenario.evaluate`)
for the spec-sheet scenario and, when given, the calibrated one (`calibration.apply`), at the run's
prompt and output lengths.

Four metrics vs concurrency, all long-form DataFrames so a chart can draw them directly:
- `ttft_ms`: time to first token, ms (predicted: prefill without queueing, F6; under load, see
  below);
- `tpot_ms`: time per output token, ms (predicted: the decode step, F4, at the context a request
  holds on average while decoding, prompt + output / 2);
- `tok_s_per_request`: 1000 / TPOT, tok/s;
- `aggregate_tok_s`: output tok/s of the whole level (predicted for a closed loop: each request
  is one prefill and n - 1 decode steps, C x n / (TTFT + (n - 1) x TPOT); without an output
  length, C x 1000 / TPOT).
Measured points carry p50 and, where the source has them, p90 and p99 (the band). Beyond the
predicted C_vram an engine cannot batch more requests: the rest wait, so the prediction at C
uses a batch of min(C, C_vram).

Under load (`load="closed"`, the bench's default): in a closed loop at concurrency C every
request's prefill competes with the other prefills and with decoding, so TTFT and aggregate
throughput come from the discrete-event model of continuous batching (`capacity.plan.queueing`:
`simulate(service_from_scenario(s), concurrency=C, n_requests=max(200, 4 C), seed=0)`; TTFT p50
with its p90/p99 as a band, aggregate = its output tok/s). `load="open"` does the same with each
level's Poisson arrival rate. TPOT (and tok/s per request) stay the decode step of F4: that is
what the calibration fits and what measured TPOT p50 follows (the bundled sample run, simulated
on vLLM's typical knobs: within 5% at concurrency 1-64 on that basis), whereas the event
model's TPOT carries its own prefill scheduling. The no-load prediction of TTFT and aggregate
is kept as a lighter series, `ROOFLINE` ("roofline, no queueing"), so the chapter's formula
stays visible; ratios compare with the under-load series.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from capacity.catalog.engines import DEFAULT_ENGINE
from capacity.errors import CapacityError, InputError
from capacity.fit.calibration import Calibration, apply
from capacity.fit.imports import read_measured
from capacity.fit.measured import MeasuredPoint, c_vram
from capacity.fit.validate_formulas import flat_levels
from capacity.fit.validate_predict import predict
from capacity.model.scenario import Scenario
from capacity.plan.closed_loop import closed_loop_as_run
from capacity.plan.events import service_from_scenario, simulate
from capacity.types import Note

METRICS = ("ttft_ms", "tpot_ms", "tok_s_per_request", "aggregate_tok_s")
MEASURED_COLUMNS = ("series", "concurrency", "metric", "p50", "p90", "p99")
PREDICTED_COLUMNS = ("series", "concurrency", "metric", "value", "p90", "p99")


class Predicted(StrEnum):
    """The predicted series of an overlay (measured series are named by their run or file)."""

    SPEC_SHEET = "spec-sheet"
    """The scenario with the catalog's figures and default efficiencies."""
    CALIBRATED = "calibrated"
    """The same scenario with a saved calibration's knobs applied (F11)."""
    ROOFLINE = "roofline"
    """The no-load prediction (F4/F6 without queueing), drawn next to the under-load one."""


class Load(StrEnum):
    """How an overlay predicts TTFT and aggregate throughput."""

    CLOSED = "closed"
    """Under load, a closed loop: C clients each send the next request when one ends."""
    OPEN = "open"
    """Under load, an open loop: Poisson arrivals at each level's measured rate."""
    NONE = "none"
    """F4/F6 without queueing (the roofline)."""


LOADS: tuple[Load, ...] = tuple(Load)
LOAD_METRICS = ("ttft_ms", "aggregate_tok_s")
ITL_METRIC = "itl_ms"
"""Under load, the predicted frame also has the event model's inter-token gap (ms; p50 = the
bench's ITL p50, a decode step where prefills do not intervene): `python3 dev.py realtest`
compares it with the measured ITL; no measured series of that name is drawn."""
"""Metrics the event model predicts under load (TPOT stays F4's step, see the module doc)."""
LOAD_GRID_POINTS = 12
"""Log-spaced concurrencies simulated per curve (plus the measured levels and C_vram)."""


def _num(x: object) -> float | None:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def points_from_summary(summary: pd.DataFrame, *, model: str = "", gpu: str = "",
                        source: str = "") -> list[MeasuredPoint]:
    """One point per level of a stored run's summary rows (p50 as the central value).

    Levels with no successful request (no TPOT and no TTFT) are left out: they have nothing to
    overlay (their failures still count in `saturation`)."""
    out: list[MeasuredPoint] = []
    for row in summary.to_dict("records"):
        prompt = _num(row.get("prompt_tokens_mean"))
        output = _num(row.get("output_tokens_mean"))
        c = _num(row.get("concurrency"))
        if c is None or (_num(row.get("tpot_p50_ms")) is None
                         and _num(row.get("ttft_p50_ms")) is None):
            continue
        ctx = math.ceil((prompt or 1.0) + (output or 0.0))
        out.append(MeasuredPoint(
            model=model, gpu=gpu, concurrency=c, context_tokens=max(1, ctx),
            prompt_tokens=prompt, output_tokens=output,
            tpot_ms=_num(row.get("tpot_p50_ms")), ttft_ms=_num(row.get("ttft_p50_ms")),
            output_tok_s=_num(row.get("output_tok_s")),
            tpot_p90_ms=_num(row.get("tpot_p90_ms")), tpot_p99_ms=_num(row.get("tpot_p99_ms")),
            ttft_p90_ms=_num(row.get("ttft_p90_ms")), ttft_p99_ms=_num(row.get("ttft_p99_ms")),
            itl_p50_ms=_num(row.get("itl_p50_ms")),
            stat="median", source=source or str(row.get("run_id", ""))))
    return out


def read_upload(name: str, data: bytes, fmt: str | None = None, *, model: str = "",
                gpu: str = "", engine: str = "",
                concurrency: float | None = None) -> list[MeasuredPoint]:
    """Points from an uploaded file's bytes (CSV, `vllm bench serve` JSON, AIPerf export);
    the file name helps guess the format. InputError on anything malformed."""
    safe = Path(name).name or "upload"
    with tempfile.TemporaryDirectory(prefix="capacity-import-") as tmp:
        path = Path(tmp) / safe
        path.write_bytes(data)
        try:
            return read_measured(path, fmt, model=model, gpu=gpu, engine=engine,
                                 concurrency=concurrency)
        except CapacityError as exc:  # name the uploaded file, not the server's temp copy
            text = str(exc).replace(str(path), safe).replace(tmp, "")
            arg = exc.args[0] if exc.args else ""
            code = getattr(arg, "code", None)
            if code is None:
                raise InputError(text) from None
            params = {k: (v.replace(str(path), safe)
                          if isinstance(v, str) and not getattr(v, "code", None) else v)
                      for k, v in getattr(arg, "params", {}).items()}
            raise InputError(Note(text, code=code, **params)) from None


def measured_frame(points: Sequence[MeasuredPoint], series: str) -> pd.DataFrame:
    """Long form: one row per point and metric, p50 with the p90/p99 band where known."""
    rows: list[dict[str, object]] = []
    for p in points:
        mine: list[dict[str, object]] = []
        if p.ttft_ms is not None:
            mine.append({"metric": "ttft_ms", "p50": p.ttft_ms, "p90": p.ttft_p90_ms,
                         "p99": p.ttft_p99_ms})
        if p.tpot_ms is not None:
            mine.append({"metric": "tpot_ms", "p50": p.tpot_ms, "p90": p.tpot_p90_ms,
                         "p99": p.tpot_p99_ms})
            mine.append({"metric": "tok_s_per_request", "p50": 1e3 / p.tpot_ms,
                         "p90": 1e3 / p.tpot_p90_ms if p.tpot_p90_ms else None,
                         "p99": 1e3 / p.tpot_p99_ms if p.tpot_p99_ms else None})
        if p.output_tok_s is not None:
            mine.append({"metric": "aggregate_tok_s", "p50": p.output_tok_s, "p90": None,
                         "p99": None})
        rows += [{"series": series, "concurrency": p.concurrency, **r} for r in mine]
    return pd.DataFrame(rows, columns=list(MEASURED_COLUMNS)).astype(
        {"p50": "float64", "p90": "float64", "p99": "float64", "concurrency": "float64"})


def _predict(scenario: Scenario, concurrency: np.ndarray, prompt_tokens: float,
             output_tokens: float) -> dict[str, np.ndarray]:
    """The four metrics at each concurrency without queueing: TTFT (ms, one prefill), TPOT
    (ms), tok/s per request and aggregate tok/s of a closed loop, the batch capped at C_vram.
    One computation with the accuracy table's (`capacity.fit.validate_predict.predict`), so
    the roofline drawn here is the figure that table shows."""
    p = predict(scenario, [float(c) for c in concurrency], prompt_tokens, output_tokens)
    step = np.asarray(p.step_ms, dtype=np.float64)
    return {"ttft_ms": np.asarray(p.ttft_ms, dtype=np.float64), "tpot_ms": step,
            "tok_s_per_request": 1e3 / step,
            "aggregate_tok_s": np.asarray(p.tok_s, dtype=np.float64)}


@lru_cache(maxsize=4096)
def _simulated(scenario: Scenario, output_tokens: int, concurrency: int | None,
               rate_per_s: float | None, engine: str = DEFAULT_ENGINE,
               max_num_seqs: int | None = None, requests: int | None = None
               ) -> dict[str, float]:
    """One seeded run of the event model under `engine`'s scheduling as the bench ran the
    level (cached: a rerun of the page costs nothing): Poisson arrivals at `rate_per_s` (200
    requests, their steady state: a run's own arrivals are `engine_check.replayed`'s), else
    `concurrency` clients from an idle server with the level's `requests` in one pass
    (`closed_loop.closed_loop_as_run`; None: max(200, 4 C)). TTFT and inter-token gap p50,
    p90, p99 (ms), output tok/s."""
    svc = service_from_scenario(scenario, output_tokens=output_tokens, engine=engine,
                                max_num_seqs=max_num_seqs)
    n = requests or max(200, 4 * (concurrency or 1))
    if rate_per_s is None:
        return closed_loop_as_run(svc, concurrency=concurrency or 1, shares=[n])
    r = simulate(svc, rate_per_s=rate_per_s, n_requests=n, seed=0, itl=True)
    got = {f"ttft_p{round(q * 100)}_ms": r.ttft_ms[q] for q in (0.5, 0.9, 0.99)}
    if r.itl_ms is not None:
        got |= {f"itl_p{round(q * 100)}_ms": r.itl_ms[q] for q in (0.5, 0.9, 0.99)}
    return got | {"output_tok_s": r.output_tok_s}


def _under_load(scenario: Scenario, concurrency: np.ndarray, output_tokens: float,
                rates_per_s: Sequence[float | None] | None, engine: str = DEFAULT_ENGINE,
                max_num_seqs: int | None = None, requests: Sequence[int | None] | None = None
                ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """TTFT (p50, p90, p99, ms), aggregate output tok/s (p50; no band) and the inter-token
    gap (`ITL_METRIC`: p50, p90, p99, ms, token-weighted) at each concurrency from the event
    model as the bench ran each level (`_simulated`): a closed loop of round(C) clients with
    the level's `requests[i]`, or Poisson arrivals at `rates_per_s[i]` where given (NaN where
    a level of an open-loop run has no rate)."""
    out = max(1, round(output_tokens))
    ttft = np.full((3, concurrency.size), np.nan)
    itl = np.full((3, concurrency.size), np.nan)
    agg = np.full(concurrency.size, np.nan)
    for i, c in enumerate(concurrency):
        rate = rates_per_s[i] if rates_per_s is not None else None
        if rates_per_s is not None and rate is None:
            continue
        closed = rate is None
        r = _simulated(scenario, out, max(1, round(float(c))) if closed else None, rate, engine,
                       max_num_seqs, requests[i] if closed and requests is not None else None)
        ttft[:, i] = [r["ttft_p50_ms"], r["ttft_p90_ms"], r["ttft_p99_ms"]]
        itl[:, i] = [r.get("itl_p50_ms", np.nan), r.get("itl_p90_ms", np.nan),
                     r.get("itl_p99_ms", np.nan)]
        agg[i] = r["output_tok_s"]
    nan = np.full(concurrency.size, np.nan)
    return {"ttft_ms": (ttft[0], ttft[1], ttft[2]), "aggregate_tok_s": (agg, nan, nan),
            ITL_METRIC: (itl[0], itl[1], itl[2])}


def _requests(failures: pd.DataFrame | None, cs: np.ndarray, grid: np.ndarray
              ) -> tuple[list[int | None], list[int | None]] | None:
    """Each measured level's requests (`requests_total` of its per-level row) and, for every
    point of `grid`, the nearest measured level's at or below it (the first level's below
    it); None without a `requests_total` column."""
    if failures is None or "requests_total" not in failures:
        return None
    by_c = {float(c): int(n) for c, r in zip(failures["concurrency"],
                                              failures["requests_total"], strict=True)
            if (n := _num(r)) is not None and n >= 1}
    if not by_c:
        return None
    levels = sorted(by_c)
    here: list[int | None] = [by_c.get(float(c)) for c in cs]
    at_grid: list[int | None] = [
        by_c[levels[max(0, int(np.searchsorted(levels, float(g), side="right")) - 1)]]
        for g in grid]
    return here, at_grid


def _rates(failures: pd.DataFrame | None, cs: np.ndarray) -> list[float | None] | None:
    """Each measured level's arrival rate (req/s) from per-level rows with `request_rate_rps`
    (an open-loop run), or None when no level has one (a closed loop)."""
    if failures is None or "request_rate_rps" not in failures:
        return None
    by_c = {float(c): _num(r) for c, r in zip(failures["concurrency"],
                                              failures["request_rate_rps"], strict=True)}
    rates = [by_c.get(float(c)) for c in cs]
    return rates if any(r is not None for r in rates) else None


@dataclass(frozen=True, kw_only=True)
class Overlay:
    """Everything the Results page draws for one set of measured points."""

    measured: pd.DataFrame
    predicted: pd.DataFrame
    ratios: pd.DataFrame
    c_vram_spec: int
    c_vram_calibrated: int | None
    saturation: Saturation
    prompt_tokens: float
    output_tokens: float
    calibration: str | None
    load: Load = Load.NONE
    """How TTFT and aggregate were predicted: under load (closed or open loop, the event
    model) or without queueing."""


class SaturationKind(StrEnum):
    """What marks the measured saturation point (`Saturation.kind`); message keys r_sat_*."""

    ERRORS = "errors"
    """The first level with failed requests (an OOM or a rejection)."""
    PLATEAU = "plateau"
    """Aggregate throughput stops growing with the concurrency (`flat_levels`)."""
    NONE = ""
    """Neither is seen in the measured range."""


@dataclass(frozen=True, kw_only=True)
class Saturation:
    """Where the measurement stops scaling: the first level with failed requests (an OOM or
    rejection), or the level before the first whose aggregate throughput is at most
    (1 + `SATURATION_GAIN`) x a lower level's (a plateau: `validate_formulas.flat_levels`, the
    rule of the accuracy table's saturated column). None when neither is seen."""

    concurrency: float | None
    kind: SaturationKind
    c_vram: int

    @property
    def ratio(self) -> float | None:
        """Measured saturation / predicted C_vram (None without a measured point)."""
        return None if self.concurrency is None or self.c_vram < 1 else \
            self.concurrency / self.c_vram


def saturation(levels: pd.DataFrame, predicted_c_vram: int) -> Saturation:
    """From per-level rows with `concurrency`, `aggregate_tok_s` and optional
    `requests_failed` (see `Saturation`)."""
    df = levels.sort_values("concurrency")
    if "requests_failed" in df:
        bad = df[df["requests_failed"].fillna(0) > 0]
        if not bad.empty:
            return Saturation(concurrency=float(bad["concurrency"].iloc[0]), kind=SaturationKind.ERRORS,
                              c_vram=predicted_c_vram)
    c = df["concurrency"].to_numpy(dtype=float)
    agg = df["aggregate_tok_s"].to_numpy(dtype=float)
    tok = [float(a) if math.isfinite(a) and a > 0 else None for a in agg]
    for i, flat in enumerate(flat_levels(c.tolist(), tok)):
        if flat:  # never the first level: a flat one has a lower one
            return Saturation(concurrency=float(c[i - 1]), kind=SaturationKind.PLATEAU,
                              c_vram=predicted_c_vram)
    return Saturation(concurrency=None, kind=SaturationKind.NONE, c_vram=predicted_c_vram)


def typical_lengths(points: Sequence[MeasuredPoint]) -> tuple[float, float]:
    """Median prompt and output tokens of the points (context when no prompt is given)."""
    prompts = [p.prefill_tokens for p in points]
    outs = [p.output_tokens for p in points if p.output_tokens is not None]
    if not prompts:
        raise InputError("no measured points to overlay")
    return float(np.median(prompts)), float(np.median(outs)) if outs else 0.0


def build_overlay(points: Sequence[MeasuredPoint], scenario: Scenario, *, series: str,
                  calibration: Calibration | None = None,
                  failures: pd.DataFrame | None = None, grid_points: int = 48,
                  load: Load | str | None = None, engine: str = DEFAULT_ENGINE,
                  max_num_seqs: int | None = None) -> Overlay:
    """Measured frame, spec-sheet (and calibrated) curves over the measured range, ratios per
    point, and the saturation point vs the predicted C_vram.

    `scenario` is the spec-sheet scenario (see `run_scenario`); `failures` optional per-level
    rows with `concurrency`, `requests_failed` and, for an open-loop run, `request_rate_rps`.
    `load`: "closed" (the default, or "open" when `failures` carries arrival rates) predicts
    TTFT and aggregate tok/s under load with the event model, on about `LOAD_GRID_POINTS`
    concurrencies; "none" keeps F4/F6 without queueing (then `grid_points` per curve). Without
    an output length (or, open loop, without any rate), or where not one request fits in memory,
    the prediction falls back to "none". `engine` (an engine profile, data/engines.toml) and
    `max_num_seqs` (its slots, e.g. llama.cpp's --parallel) set the event model's scheduling."""
    if not points:
        raise InputError("no measured points to overlay: pick a run or import a file")
    if load is not None and load not in LOADS:
        raise InputError(f"load must be one of {', '.join(LOADS)}, got {load!r}")
    mode = Load(load) if load is not None else None
    prompt, output = typical_lengths(points)
    measured = measured_frame(points, series)
    cs = np.array(sorted({p.concurrency for p in points}), dtype=np.float64)
    rates = _rates(failures, cs)
    if mode is None:
        mode = Load.OPEN if rates is not None else Load.CLOSED
    if output < 1 or (mode == Load.OPEN and rates is None):
        mode = Load.NONE
    spec_cv = c_vram(scenario)
    scenarios: list[tuple[str, Scenario]] = [(Predicted.SPEC_SHEET.value, scenario)]
    cal_cv: int | None = None
    if calibration is not None:
        cal_s = apply(calibration, scenario)
        scenarios.append((Predicted.CALIBRATED.value, cal_s))
        cal_cv = c_vram(cal_s)
    if min(spec_cv, spec_cv if cal_cv is None else cal_cv) < 1:
        mode = Load.NONE  # not one request fits: nothing to queue (the C_vram rule says so)
    hi = max(float(cs.max()), 1.0) * 1.5
    extra_c = [float(spec_cv)] if 1 <= spec_cv <= hi else []
    if mode == Load.NONE:
        grid = np.unique(np.concatenate([np.geomspace(1.0, hi, grid_points), cs, extra_c]))
    elif mode == Load.CLOSED:  # whole clients: the event model runs round(C) of them
        grid = np.unique(np.concatenate([np.round(np.geomspace(1.0, hi, LOAD_GRID_POINTS)),
                                         cs, extra_c]))
    else:  # open loop: only the measured levels have an arrival rate
        grid = cs
    counts = _requests(failures, cs, grid)
    grid_rates = None if rates is None else [
        rates[int(np.searchsorted(cs, c))] if c in cs else None for c in grid]
    pred_rows: list[pd.DataFrame] = []
    at_points: dict[str, dict[str, np.ndarray]] = {}

    def frame(name: str, x: np.ndarray, metric: str, value: np.ndarray,
              p90: np.ndarray | None = None, p99: np.ndarray | None = None) -> pd.DataFrame:
        nan = np.full(x.size, np.nan)
        return pd.DataFrame({"series": name, "concurrency": x, "metric": metric,
                             "value": value, "p90": nan if p90 is None else p90,
                             "p99": nan if p99 is None else p99})

    for name, s in scenarios:
        curve = _predict(s, grid, prompt, output)
        here = _predict(s, cs, prompt, output)
        if mode != Load.NONE:
            loaded = _under_load(s, grid, output, grid_rates, engine, max_num_seqs,
                                 None if counts is None else counts[1])
            loaded_here = _under_load(s, cs, output, rates, engine, max_num_seqs,
                                      None if counts is None else counts[0])
            for m in LOAD_METRICS:
                pred_rows.append(frame(name, grid, m, *loaded[m]))
                here[m] = loaded_here[m][0]
            pred_rows.append(frame(name, grid, ITL_METRIC, *loaded[ITL_METRIC]))
            pred_rows += [frame(name, grid, m, curve[m]) for m in METRICS
                          if m not in LOAD_METRICS]
        else:
            pred_rows += [frame(name, grid, m, curve[m]) for m in METRICS]
        at_points[name] = here
    roofline = Predicted.ROOFLINE.value
    if mode != Load.NONE:  # the formula without queueing, from the best scenario we have
        best_name, best = scenarios[-1]
        roof = _predict(best, grid, prompt, output)
        pred_rows += [frame(roofline, grid, m, roof[m]) for m in LOAD_METRICS]
        at_points[roofline] = _predict(best, cs, prompt, output)
    predicted = pd.concat(pred_rows, ignore_index=True)
    predicted = predicted[np.isfinite(predicted["value"].to_numpy(dtype=float))].reset_index(
        drop=True)
    names = [n for n, _ in scenarios] + ([roofline] if mode != Load.NONE else [])
    rrows: list[dict[str, object]] = []
    for m in METRICS:
        sub = measured[measured["metric"] == m]
        for c, v in zip(sub["concurrency"], sub["p50"], strict=True):
            i = int(np.searchsorted(cs, c))
            row: dict[str, object] = {"concurrency": c, "metric": m, "measured": v}
            for name in names:
                pv = float(at_points[name][m][i]) if name != roofline or m in LOAD_METRICS \
                    else math.nan
                row[name] = pv
                row[f"ratio_{name}"] = v / pv if pv > 0 else math.nan
            rrows.append(row)
    cols = ["concurrency", "metric", "measured"] + [c for n in names
                                                      for c in (n, f"ratio_{n}")]
    ratios = pd.DataFrame(rrows, columns=cols)
    levels = pd.DataFrame({"concurrency": cs})
    agg = measured[measured["metric"] == "aggregate_tok_s"].groupby("concurrency")["p50"].mean()
    levels["aggregate_tok_s"] = levels["concurrency"].map(agg)
    if failures is not None and "requests_failed" in failures:
        fail = failures.groupby("concurrency")["requests_failed"].sum()
        levels = pd.concat([levels, pd.DataFrame({"concurrency": fail.index.astype(float)})]
                           ).drop_duplicates("concurrency")
        levels["requests_failed"] = levels["concurrency"].map(fail).fillna(0)
    return Overlay(measured=measured, predicted=predicted, ratios=ratios, c_vram_spec=spec_cv,
                   c_vram_calibrated=cal_cv, saturation=saturation(levels, spec_cv),
                   prompt_tokens=prompt, output_tokens=output,
                   calibration=calibration.name if calibration is not None else None,
                   load=mode)


def median_abs_error(ratios: pd.DataFrame, series: str, metric: str) -> float | None:
    """Median |measured / predicted - 1| of one predicted series on one metric (a fraction)."""
    col = f"ratio_{series}"
    if col not in ratios:
        return None
    r = ratios.loc[ratios["metric"] == metric, col].dropna().to_numpy(dtype=float)
    return float(np.median(np.abs(r - 1.0))) if r.size else None


def filter_runs(runs: pd.DataFrame, *, labels: Sequence[str] = (),
                endpoints: Sequence[str] = (), models: Sequence[str] = (),
                since: str | None = None, until: str | None = None) -> pd.DataFrame:
    """The stored runs (`RunStore.list_runs`) that match every non-empty filter: labels,
    endpoints (base URLs), models, and an ISO date range [since, until] (inclusive days)."""
    keep = pd.Series(True, index=runs.index)
    for col, allowed in (("label", labels), ("base_url", endpoints), ("model", models)):
        if allowed:
            keep &= runs[col].isin(list(allowed))
    day = runs["started_at"].astype("string").str.slice(0, 10)
    if since:
        keep &= day >= since
    if until:
        keep &= day <= until
    return runs[keep.fillna(False)]


COMPARE_COLUMNS = {"ttft_p50_ms": "TTFT p50 ms", "tpot_p50_ms": "TPOT p50 ms",
                   "output_tok_s": "output tok/s", "requests_failed": "failed"}


def compare_table(summaries: Sequence[tuple[str, pd.DataFrame]],
                  headers: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Runs side by side: one row per concurrency, one column per (run, metric).

    `headers` names the columns in the reader's language (keys: "concurrency" and those of
    COMPARE_COLUMNS); the English names otherwise."""
    names = {"concurrency": "concurrency", **COMPARE_COLUMNS, **(headers or {})}
    parts = []
    for name, df in summaries:
        cols = [c for c in COMPARE_COLUMNS if c in df]
        part = df.set_index("concurrency")[cols].rename(
            columns={c: f"{name}: {names[c]}" for c in cols})
        parts.append(part[~part.index.duplicated()])
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, axis=1).sort_index()
    out.index.name = names["concurrency"]
    return out.reset_index()


def summary_from_requests(requests: pd.DataFrame) -> pd.DataFrame:
    """Per-level rows (the summary.csv columns the overlay reads) computed from request rows:
    for a level a stopped run never summarized, so what was measured still shows.

    Percentiles use numpy's linear interpolation (as the bench summary does); output tok/s is
    the level's output tokens over the span from its first start to its last end."""
    rows: list[dict[str, object]] = []
    if requests.empty:
        return pd.DataFrame(rows)
    for c, g in requests.groupby("concurrency"):
        ok = g[g["success"].fillna(False).astype(bool)]
        row: dict[str, object] = {"concurrency": c, "requests_total": len(g),
                                  "requests_ok": len(ok), "requests_failed": len(g) - len(ok)}
        for m in ("ttft", "tpot"):
            v = ok[f"{m}_ms"].dropna().to_numpy(dtype=float)
            for q in (50, 90, 99):
                row[f"{m}_p{q}_ms"] = float(np.percentile(v, q)) if v.size else None
        if not ok.empty:
            start = ok["start_unix_s"].to_numpy(dtype=float)
            end = start + ok["e2e_ms"].fillna(0).to_numpy(dtype=float) / 1e3
            span = float(end.max() - start.min())
            row["output_tok_s"] = float(ok["output_tokens"].sum()) / span if span > 0 else None
            row["prompt_tokens_mean"] = float(ok["prompt_tokens"].mean()) \
                if ok["prompt_tokens"].notna().any() else None
            row["output_tokens_mean"] = float(ok["output_tokens"].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def complete_levels(summary: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """The summary rows plus, for levels the summary lacks (a stopped run), rows computed
    from the requests (`summary_from_requests`), by concurrency."""
    have = set(summary["concurrency"].tolist()) if "concurrency" in summary else set()
    extra = summary_from_requests(requests[~requests["concurrency"].isin(list(have))]) \
        if not requests.empty else pd.DataFrame()
    if extra.empty:
        return summary
    if summary.empty:
        return extra.sort_values("concurrency").reset_index(drop=True)
    return pd.concat([summary, extra], ignore_index=True).sort_values(
        "concurrency").reset_index(drop=True)
