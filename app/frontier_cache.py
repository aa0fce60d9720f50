"""The buyer's chart's data on the pages (app/frontier_view.py): the frontier, its chart spec and
its cost read-off, cached with `app.cache.cached` (keyed by their inputs and the workspace's data
version), and the measured points drawn on top (stored runs, published sweeps).

A `FrontierInputs` with `disaggregated` or `wide_ep` set is another key: the disaggregated and
wide-EP points (issue 27) are computed only for a page whose box for them is ticked, once per
inputs, and the page without them keeps its own entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from app import cache
from app import measure_state as ms
from capacity.bench.engine_info import sim_speedup
from capacity.errors import CapacityError
from capacity.fit.frontier import (
    PRICE_KINDS,
    CostReadOff,
    Frontier,
    FrontierInputs,
    cost_read_off,
    frontier,
)
from capacity.report.frontier_chart import MEASURED_COLUMNS, frontier_chart, published_points
from capacity.report.i18n import t

Point = tuple[float, float, str]
"""A point for the chart: (interactivity tok/s per user, throughput tok/s per GPU, label)."""


# ---- cached computing ------------------------------------------------------------------------
@cache.cached(max_entries=16)
def frontier_of(version: str, inp: FrontierInputs) -> Frontier:
    """`capacity.fit.frontier.frontier` for `inp` on the app's catalog."""
    del version
    return frontier(inp, cache.catalog())


@cache.cached(max_entries=32)
def chart_spec(version: str, inp: FrontierInputs, lang: str, interactivity: float | None,
               current: Point | None, measured: tuple[Point, ...]) -> dict[str, Any]:
    """The chart's Vega-Lite spec (`frontier_chart`), its width left to the page."""
    del version
    fr = frontier_of(inp)
    frame = pd.DataFrame(list(measured), columns=list(MEASURED_COLUMNS))
    cur = None if current is None else dict(zip(MEASURED_COLUMNS, current, strict=True))
    spec: dict[str, Any] = frontier_chart(fr, lang=lang, interactivity=interactivity,
                                          current=cur, measured=frame).to_dict()
    spec.pop("width", None)
    return spec


@cache.cached(max_entries=32)
def read_off(version: str, inp: FrontierInputs, interactivity: float) -> list[CostReadOff]:
    """`cost_read_off` at `interactivity` for every price kind."""
    del version
    return cost_read_off(frontier_of(inp), interactivity, PRICE_KINDS, cache.catalog())


# ---- measured points -------------------------------------------------------------------------
def _same_model(name: object, model: str) -> bool:
    """A run's or sweep's model names `model` (a catalog key, its format suffix aside; a served
    name such as 'Qwen/Qwen3-8B' counts by its last part)."""
    low = str(name or "").strip().lower().rsplit("/", 1)[-1]
    return bool(low) and (low == model or low.startswith(model + "-"))


def _num(v: object) -> float | None:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def run_points(model: str, gpus: Sequence[str], lang: str) -> tuple[list[Point], int, int]:
    """The stored runs' levels of `model` on one of `gpus` as chart points: interactivity =
    1000 / the level's mean TPOT (its median where no mean), throughput per GPU = its aggregate
    output tok/s / its GPUs. Also (runs plotted, runs of the model left out: another GPU, no
    TPOT and throughput, or a simulated endpoint run at a `--speedup` other than 1, whose times
    are that many times shorter than the GPU's it names: `engine_info.sim_speedup`)."""
    try:
        runs, _ = ms.runs()
    except CapacityError:
        return [], 0, 0
    pts: list[Point] = []
    shown = skipped = 0
    for r in runs.itertuples():
        meta = ms.run_meta(str(r.dir))
        meta_model = (meta.get("args") or {}).get("predict_model")
        if not (_same_model(r.model, model) or _same_model(meta_model, model)):
            continue
        if str(r.gpu) not in gpus or sim_speedup(meta) != 1.0:
            skipped += 1  # another GPU, or a simulator whose times are `speedup` x shorter
            continue
        got = []
        for row in ms.levels(str(r.run_id)).to_dict("records"):
            tpot = _num(row.get("tpot_mean_ms")) or _num(row.get("tpot_p50_ms"))
            out = _num(row.get("output_tok_s"))
            if tpot is None or out is None:
                continue
            n = _num(row.get("gpus")) or 1.0
            got.append((1e3 / tpot, out / n, t("frv_run_point", lang, label=r.label,
                                               c=f"{_num(row.get('concurrency')) or 0:g}")))
        shown, skipped = (shown + 1, skipped) if got else (shown, skipped + 1)
        pts += got
    return pts, shown, skipped


def published(model: str, gpus: Sequence[str], lang: str) -> list[Point]:
    """The published sweeps' levels of `model` on one of `gpus` (`published_points`)."""
    sweeps = [s for s in ms.reference_sweeps()
              if s.gpu_key in gpus and _same_model(s.model_key, model)]
    df = published_points(sweeps)
    return [(float(a), float(b), t("frv_published_point", lang, label=c))
            for a, b, c in df.itertuples(index=False)]
