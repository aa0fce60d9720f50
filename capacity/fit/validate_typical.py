"""The scorecard's "Typical basis, nobody measured" section (`capacity validate`, issues 25, 32).

Every stated row of data/reference/published.csv predicted as a user without measurements
would: the chapter's step (F4) and F6 on the `typical:vllm` knobs, TTFT, E2E and throughput
through the event model under the row's engine profile (`validate.predict`, as the calibrated
section). Two bases:

- before (the basis until 2026-12-02, `BEFORE_ETA_BW`): bandwidth efficiency 0.65 with every
  fixed cost folded in (no per-layer overhead), held out for its source groups
  (`held_out_eta_bw`);
- after: bandwidth efficiency and F11's per-layer step overhead solved together by least
  absolute deviations from every group's lowest-concurrency decode point at 8 clients or fewer
  (`step_points`, `solve_step_knobs`, data/engines.toml's header), each group predicted with
  the solve over the points of other models or other GPUs (`held_out_step_knobs`).
Both with the prefill curve F6c, the MFU plateau held out (below), and a step row (`tpot_ms`,
`itl_ms`) scored against the event model's TPOT of a request, (E2E - TTFT) / (n - 1), mean or
median as the row states: what benchmark_serving's TPOT and genai-perf's ITL measure, other
requests' prefills (chunks mixed into the step, or prefill batches that pause decoding)
included. At C = 1 it is the F4 step.

Held out (every knob derived from published.csv, the scored row's group left out):
- the MFU plateau: the median over the other groups of (spec-sheet TTFT at MFU 1 / measured
  TTFT) / F6c's curve at L / the GPU's matmul ceiling on their rows at concurrency 1 (the
  rule the file's plateau comes from: a share of the ceiling,
  `capacity.catalog.matmul.typical_ceiling`), else the file's, and a row runs it on its own
  GPU's ceiling (`planning.typical_knobs_on`); m_half from the file (an external GEMM
  measurement);
- before, eta_bw: the median of spec-sheet step / measured TPOT over six source points
  (`ETA_BW_SOURCES`: the RTX 4090 vLLM sweep, the H100 SXM vLLM v0.11.0 point); a source
  group is scored with 0.65 x (the rule without it / the rule with all) (`held_out_eta_bw`);
- after, eta_bw and the per-layer overhead: each source group's lowest-concurrency TPOT is
  `t_bw / eta_bw + layers x t_layer` (t_bw the chapter's bandwidth term at eta_bw 1); twelve
  groups on five GPUs (bandwidths 1.0 to 8 TB/s, 24 to 80 layers) give both knobs, eta_bw
  a share of each GPU's copy ceiling kept at or below 1 (`ETA_BW_MAX`; 0.9 of the spec sheet
  until 2026-12-07). A group is scored with the points of other models or
  other GPUs only: no other engine or GPU count of its own model on its own GPU lends it
  its step.

Each group is predicted on its engine's knobs (`typical_latency.ENGINE_OF`: SGLang's groups on
data/engines.toml's [sglang], which differs from [vllm] in the decode arithmetic's `eff`, 0.3
of an H100's spec sheet where vLLM's runs at the prefill plateau, and in F4c's ridge, which
only vLLM's step has; every other group on [vllm]).

Every group carries a request latency outside the GPU (`Scenario.request_latency_ms`,
`capacity.fit.typical_latency`): SGLang's groups are predicted on `typical:sglang`, the same
knobs and the median of the other SGLang groups' latency points (measured less predicted TTFT
at their lowest concurrency, the groups the knobs rest on); every other group on
`typical:vllm` with the median of the other vLLM groups' points (the vLLM groups on CUDA
graphs measured at 8 clients or fewer), so no group's latency comes from its own rows.

Rows added to published.csv later (`ReferenceSweep.added`) are held out of the MFU plateau
and the SGLang latency and scored apart (`TypicalScorecard.error(..., added=True)`); the step
knobs' solve takes every group's point, each group held out of its own (above).
Errors are |predicted / measured - 1| below saturation (`validate.saturated_levels`).
Source: docs/method.md ("Bases", F6c), data/engines.toml.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.matmul import typical_bandwidth_ceiling, typical_ceiling
from capacity.fit import typical_bands as tb
from capacity.fit import typical_latency as tl
from capacity.fit import validate as v
from capacity.fit.measured import run_scenario
from capacity.fit.planning import (
    EXPERT_SHARE,
    fast_fixed_costs,
    on_typical,
    typical_knob_edges,
    typical_knobs_on,
)
from capacity.fit.reference import ReferenceSweep, load_reference
from capacity.fit.typical import TYPICAL_KNOBS, TypicalEfficiency, engines, typical_efficiency
from capacity.fit.validate_report import jsonable, write_between_markers
from capacity.model.basis import CHAPTER_KNOBS, TYPICAL_COUNTS
from capacity.model.forward_pass import as_released
from capacity.model.prefill import step_mfu
from capacity.model.scenario import Scenario

ENGINE: Final = "vllm"
ETA_BW_SOURCES: Final[tuple[str, ...]] = ("mistral-7b-v0.3-bf16 on rtx-4090 (vLLM)",
                         "qwen3-8b-bf16 on h100-sxm (vLLM)")
"""The groups whose decode points the 'before' basis' eta_bw (0.65, `BEFORE_ETA_BW`) is the
median over (data/engines.toml's header): every point of theirs with a TPOT (stated, or
derived from throughput and TTFT)."""
BEFORE_ETA_BW: Final = 0.65
"""data/engines.toml's eta_bw until 2026-12-02 (the 'before' basis: no per-layer overhead)."""
BEGIN: Final = "<!-- validate-typical:begin -->"
END: Final = "<!-- validate-typical:end -->"


@dataclass(frozen=True, kw_only=True)
class TypicalRow:
    """One stated row: measured, and predicted on the typical basis before and after (the
    metric's unit), with the knobs `after` used."""

    group: str
    metric: str
    concurrency: float
    measured: float
    before: float
    after: float
    saturated: bool
    knobs: tuple[tuple[str, float], ...]
    engine: str = ""
    """The engine as the CSV states it, settings included (`ReferenceSweep.engine_text`)."""
    step_ms: float = math.nan
    spec_ms: float = math.nan
    """A step row's F4 decode step on the after knobs and on the spec sheet (ms; NaN for
    other metrics)."""
    added: str = ""
    """The day the row was added to published.csv ('' for the rows the knobs were derived on)."""
    stat: str = "mean"
    """The statistic the source states ('mean' or 'median')."""
    prompt_tokens: float = 0.0
    """The mean prompt of the row's sweep, tokens (`ReferenceSweep.prompt_tokens`): where the
    request latency is read (`typical_latency.latency_points`)."""

    @property
    def before_error(self) -> float:
        return v.relative_error(self.before, self.measured)

    @property
    def after_error(self) -> float:
        return v.relative_error(self.after, self.measured)


@dataclass(frozen=True, kw_only=True)
class TypicalScorecard:
    rows: tuple[TypicalRow, ...]
    latency_points: tuple[tuple[str, float], ...] = ()
    """SGLang group -> its measured TTFT less the typical TTFT without a request latency at
    its lowest concurrency (ms, `latency_points`): what data/engines.toml's
    [sglang.request_latency_ms] is the median of."""
    vllm_latency_points: tuple[tuple[str, float], ...] = ()
    """vLLM group -> its measured TTFT less the typical TTFT without a request latency at its
    lowest concurrency (ms, `typical_latency.latency_points`): what data/engines.toml's
    [vllm.request_latency_ms] is the median of."""
    latency_ms: tuple[tuple[str, float], ...] = ()
    """Group -> the request latency its rows were predicted with (ms), held out of it
    (`typical_latency.group_latency`)."""
    step_sources: tuple[str, ...] = ()
    """The groups whose decode points the step knobs are solved from (`step_points`)."""
    prefill_launches: tuple[tuple[str, float], ...] = ()
    """Group -> the per-layer prefill launches (ms) its stated release paid (`_run_as`:
    SGLang before 0.5.10), for the groups that paid any."""
    not_ahead: tuple[str, ...] = ()
    """The groups of an engine that schedules one step ahead today whose stated release did
    not (`_run_as`: vLLM before 0.14.0, SGLang before 0.4.0)."""
    edges: tuple[tb.EdgeRow, ...] = ()
    """Every TTFT, E2E and throughput row below saturation with its deployment predicted at
    the band's two edges, held out of its group (`typical_bands`)."""

    def error(self, metric: str, after: bool, added: bool | None = None,
              stat: str = "") -> v.Spread:
        """|error| below saturation of one metric, before or after; over the added rows only
        (`added=True`), the original ones (False) or all (None); over the rows whose source
        states `stat` ('mean' or 'median'; '' every row)."""
        return v.Spread.of(abs(r.after_error if after else r.before_error) for r in self.rows
                           if r.metric == metric and not r.saturated
                           and (added is None or bool(r.added) == added)
                           and (not stat or r.stat == stat))


def group_plateau(spec_ttft_ms: float, measured_ms: float, prompt_tokens: float,
                  half_tokens: float, weight_ratio: float = 1.0) -> float:
    """The prefill MFU plateau a measured unqueued TTFT implies (dimensionless share of the
    spec sheet; `_evidence` divides it by the GPU's matmul ceiling): (spec-sheet TTFT at
    MFU 1 / measured) / F6c's curve at L on a plateau of 1, `step_mfu(L, mfu=1)` =
    (1 + (m_half R / L)^k)^(-1/k), R the row's `Routing.half_ratio` at L (the MoE weight ratio,
    1 for a dense model, times m_half's scale on the device and weight format). Example: 0.534
    at L = 5000, m_half 262 -> 0.534 x (1 + (262 / 5000)^2.5)^0.4 = 0.5341."""
    curve = step_mfu(prompt_tokens, mfu=1.0, half_tokens=half_tokens * weight_ratio)
    return spec_ttft_ms / measured_ms / float(curve)


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The prefill plateaus one group's unqueued TTFT rows imply (concurrency 1), each as a
    share of its GPU's matmul ceiling (`typical_ceiling`), data/engines.toml's unit."""

    plateaus: tuple[float, ...]


def _evidence(sweeps: Sequence[ReferenceSweep], cat: Catalog, half: float) -> Evidence:
    """One group's prefill plateaus (rows at C = 1)."""
    plateaus: list[float] = []
    for s in sweeps:
        base = _scenario(s, cat).with_(calibration=None, **CHAPTER_KNOBS)
        levels = sorted({x.concurrency for x in s.stated})
        sp = v.predict(base.with_(mfu=1.0), levels, s.prompt_tokens, s.output_tokens)
        for x in s.stated:
            if v.METRIC_OF[x.metric] == v.Metric.TTFT and x.concurrency == 1:
                i = levels.index(x.concurrency)
                plateaus.append(group_plateau(
                    sp.ttft_ms[i], x.value, s.prompt_tokens, half,
                    float(base.routing.half_ratio(s.prompt_tokens)))
                    / typical_ceiling(base.gpu, base.variant.format.compute_dtype))
    return Evidence(plateaus=tuple(plateaus))


def eta_bw_points(sweeps: Sequence[ReferenceSweep], cat: Catalog) -> tuple[float, ...]:
    """The bandwidth efficiency each decode point of a group implies (dimensionless):
    spec-sheet step / measured TPOT at the point's batch. Example: 14.55 ms / 18.70 ms =
    0.78 (RTX 4090, Mistral-7B, C = 4)."""
    out: list[float] = []
    for s in sweeps:
        pts = [p for p in s.points if p.tpot_ms]
        if not pts:
            continue
        base = _scenario(s, cat).with_(calibration=None, **CHAPTER_KNOBS)
        levels = [p.concurrency for p in pts]
        spec = v.predict(v.spec_sheet(base), levels, s.prompt_tokens, s.output_tokens)
        out += [sp / float(p.tpot_ms or math.nan) for sp, p in zip(spec.step_ms, pts,
                                                                    strict=True)]
    return tuple(out)


def held_out_eta_bw(points: dict[str, tuple[float, ...]], group: str, engine: float) -> float:
    """eta_bw without `group` (dimensionless): the file's value `engine` scaled by the rule's
    median over the source points of the other groups / its median over all of them (the
    file's value was derived with an earlier spec-sheet step, so the ratio carries the
    leave-out, not the rule's absolute value); `engine` when `group` is no source or no
    other point is left. Example: {'a': (0.78, 0.70), 'b': (0.60,)}, 0.65, group 'b' ->
    0.65 x median(0.78, 0.70) / median(0.78, 0.70, 0.60) = 0.65 x 0.74 / 0.70 = 0.687."""
    every = [x for xs in points.values() for x in xs]
    rest = [x for k, xs in points.items() if k != group for x in xs]
    if group not in points or not rest:
        return engine
    return engine * float(statistics.median(rest)) / float(statistics.median(every))


@dataclass(frozen=True)
class StepPoint:
    """One source point of the step knobs: the chapter's step with no overhead, the weights
    counted as the typical basis counts them (`TYPICAL_COUNTS`: an untied input embedding table
    a lookup), its reads at
    the GPU's copy ceiling (eta_bw 1 in data/engines.toml's unit, a share of that ceiling:
    `capacity.catalog.matmul.typical_bandwidth_ceiling`; ms, its bandwidth term at these
    points' low concurrency on one GPU), the measured TPOT (ms) and the model's layers; the
    model and GPU (catalog keys) it was measured on."""

    bandwidth_ms: float
    tpot_ms: float
    layers: int
    model: str = ""
    gpu: str = ""


ETA_BW_MAX: Final = 1.0
"""The most of the GPU's copy ceiling a decode step's reads reach (data/engines.toml states
eta_bw as a share of it, `capacity.catalog.matmul.typical_eta_bw`): no step reads its weights
and KV faster than the device copies memory. The bound the step knobs' solve stays inside.
Until 2026-12-07 eta_bw was a share of the spec sheet bounded at 0.9 on every GPU (this
project's own H200 copies at 0.889 of its spec sheet)."""

STEP_POINT_MAX_CLIENTS: Final = 8
"""A group's lowest-concurrency decode point is a source of the step knobs (`step_points`)
when it was measured at this many clients or fewer: the step is bandwidth-bound there and few
other prompts' prefills are folded into the TPOT (at 32 and 64 clients they are: the MI300X
and the gpt-oss-120b on two and four H100s groups of published.csv)."""


def step_point(sweeps: Sequence[ReferenceSweep], cat: Catalog) -> StepPoint | None:
    """A group's lowest-concurrency decode point with a TPOT, as a `StepPoint` (None: none).
    At the lowest concurrency the step is bandwidth-bound and no other request's prefill is
    folded into a TPOT derived from throughput."""
    best: tuple[float, StepPoint] | None = None
    for s in sweeps:
        for p in s.points:
            if not p.tpot_ms or (best is not None and p.concurrency >= best[0]):
                continue
            base = _scenario(s, cat).with_(calibration=None, **{**CHAPTER_KNOBS, **TYPICAL_COUNTS})
            d = v.predict(base, [p.concurrency], s.prompt_tokens, s.output_tokens)
            ceiling = typical_bandwidth_ceiling(base.gpu)
            best = (p.concurrency, StepPoint(bandwidth_ms=float(d.step_ms[0]) / ceiling,
                                             tpot_ms=float(p.tpot_ms),
                                             layers=base.model.layers,
                                             model=s.model_key or "", gpu=s.gpu_key or ""))
    return None if best is None else best[1]


def step_points(groups: dict[str, list[ReferenceSweep]], cat: Catalog) -> dict[str, StepPoint]:
    """The source points of the step knobs, by group: each group's `step_point` where it was
    measured at `STEP_POINT_MAX_CLIENTS` clients or fewer, on an engine that runs its decode
    steps as CUDA graphs (a group run with `--enforce-eager` pays a launch per kernel that the
    typical basis, the engines' default, does not: Qwen3-14B-AWQ on an A100, 20.9 ms a step
    where its weights take 6.3 ms)."""
    out: dict[str, StepPoint] = {}
    for key, g in groups.items():
        if not all(s.cuda_graphs for s in g):
            continue
        low = min((p.concurrency for s in g for p in s.points if p.tpot_ms), default=math.inf)
        if low <= STEP_POINT_MAX_CLIENTS and (pt := step_point(g, cat)) is not None:
            out[key] = pt
    return out


def solve_step_knobs(points: Sequence[StepPoint]) -> tuple[float, float]:
    """(eta_bw, per-layer overhead ms) from decode points `TPOT = t_bw / eta_bw + layers x
    t_layer`, linear in (x = 1 / eta_bw, t_layer): least absolute deviations over two or more
    points, inside physics (eta_bw at most `ETA_BW_MAX`, t_layer at least 0); one point gives
    t_layer = 0, eta_bw = t_bw / TPOT (at most `ETA_BW_MAX`).

    The sum of |TPOT - t_bw x - layers t| is least at a vertex of the feasible (x, t): two
    points fitted exactly, or one point and one bound (x = 1 / ETA_BW_MAX or t = 0), or both
    bounds; every vertex is tried and the least sum taken (where several tie, every point of
    the segment between them is least: their mean).
    Absolute, not squared, deviations: a point the model cannot explain (gpt-oss-120b's MoE
    layers on one H100 or A100 cost twice a dense layer's 70 us) moves the knobs by what a
    median moves, not by the square of its miss (docs/method.md, F11).
    Example: (14.551, 18.70, 32) and (4.95, 7.38, 36) fitted exactly: t = (7.38 x 14.551 -
    18.70 x 4.95) / (36 x 14.551 - 32 x 4.95) = 0.040557 ms, x = (18.70 - 32 t) / 14.551 =
    1.19594 (eta_bw 0.836)."""
    if not points:
        raise ValueError("no decode point to derive the step knobs from")
    a = np.array([[p.bandwidth_ms, p.layers] for p in points], dtype=np.float64)
    y = np.array([p.tpot_ms for p in points], dtype=np.float64)
    x_min = 1.0 / ETA_BW_MAX
    if len(points) < 2:
        return min(float(a[0, 0] / y[0]), ETA_BW_MAX), 0.0
    cands = [(x_min, 0.0)]
    cands += [(x_min, (y[i] - a[i, 0] * x_min) / a[i, 1]) for i in range(len(y))]
    cands += [(y[i] / a[i, 0], 0.0) for i in range(len(y))]
    for i in range(len(y)):
        for j in range(i + 1, len(y)):
            m = a[[i, j]]
            if abs(np.linalg.det(m)) > 1e-12:
                sx, st = np.linalg.solve(m, y[[i, j]])
                cands.append((float(sx), float(st)))
    feasible = {(round(cx, 12), round(ct, 12)) for cx, ct in cands
                if cx >= x_min - 1e-12 and ct >= -1e-12}
    cost = {c: float(np.sum(np.abs(y - a[:, 0] * c[0] - a[:, 1] * c[1]))) for c in feasible}
    least = min(cost.values())
    tied = sorted(c for c, v in cost.items() if v <= least + 1e-9)
    x = max(float(np.mean([c[0] for c in tied])), x_min)
    t = max(float(np.mean([c[1] for c in tied])), 0.0)
    return 1.0 / x, t


def held_out_step_knobs(points: dict[str, StepPoint], model: str, gpu: str,
                        engine: dict[str, float]) -> dict[str, float]:
    """eta_bw and the per-layer overhead for a group of `model` on `gpu`: solved from the
    points measured on another model or another GPU (`solve_step_knobs`), so no engine,
    GPU count or later sweep of the same model on the same GPU lends it its own step; the
    file's (`engine`) when no such point is left."""
    rest = [p for p in points.values() if (p.model, p.gpu) != (model, gpu)]
    if not rest:
        return {"eta_bw": engine["eta_bw"], "layer_overhead_ms": engine["layer_overhead_ms"]}
    eta, layer = solve_step_knobs(rest)
    return {"eta_bw": eta, "layer_overhead_ms": layer}


def _scenario(s: ReferenceSweep, cat: Catalog) -> Scenario:
    """The row's deployment as `capacity validate` builds it (`validate`'s groups)."""
    return run_scenario(s.model_key or "", s.gpu_key or "", prompt_tokens=s.prompt_tokens,
                        output_tokens=s.output_tokens, n_gpus=s.gpus, tp=s.tp, catalog=cat)


def _saturated(s: ReferenceSweep, base: Scenario, levels: Sequence[float]) -> list[bool]:
    spec = v.predict(v.spec_sheet(base), levels, s.prompt_tokens, s.output_tokens)
    tok = {p.concurrency: p.output_tok_s for p in s.points}
    return v.saturated_levels(levels, [tok.get(c) for c in levels], spec.c_vram)  # all replicas


def held_out_knobs(others: Sequence[Evidence], engine: dict[str, float]) -> dict[str, float]:
    """The typical knobs with the MFU plateau from other groups only: the median of their
    group medians, capped at 1 (the file's plateau when no other group has a C = 1 TTFT).
    Example: other groups with plateaus (0.9, 0.7) and (0.5,): median(0.8, 0.5) = 0.65."""
    knobs = dict(engine)
    per_group = [statistics.median(e.plateaus) for e in others if e.plateaus]
    if per_group:
        knobs["mfu"] = min(float(statistics.median(per_group)), 1.0)
    return knobs


def groups_of(sweeps: Sequence[ReferenceSweep] | None = None) -> dict[str, list[ReferenceSweep]]:
    """The mapped published sweeps by group (GPU + engine + model, `validate.group_key`)."""
    groups: dict[str, list[ReferenceSweep]] = {}
    for s in (load_reference() if sweeps is None else sweeps):
        if s.gpu_key is not None and s.model_key is not None:
            groups.setdefault(v.group_key(s.model_key, s.gpu_key, s.gpus, s.engine),
                              []).append(s)
    return groups


def plateau_evidence(groups: dict[str, list[ReferenceSweep]], half_tokens: float,
                     catalog: Catalog | None = None) -> dict[str, Evidence]:
    """Each group's prefill plateaus at m_half = `half_tokens` (data/engines.toml's `mfu` is
    the median of their group medians)."""
    cat = catalog or default_catalog()
    return {k: _evidence(g, cat, half_tokens) for k, g in groups.items()}


def _step(p: v.Prediction, i: int, stat: str, queued: bool) -> float:
    """A step row's prediction: the event model's TPOT (the row's statistic) or F4's step."""
    if queued and p.queued is not None:
        q = p.queued[i]
        got = q.tpot_median_ms if stat == "median" else q.tpot_mean_ms
        if math.isfinite(got):
            return got
    return p.step_ms[i]


def typical_scorecard(sweeps: Sequence[ReferenceSweep] | None = None,
                      catalog: Catalog | None = None) -> TypicalScorecard:
    """Every mapped published row on the typical basis, before and after (module docstring)."""
    cat = catalog or default_catalog()
    groups = groups_of(sweeps)
    typ = typical_efficiency(ENGINE)
    old = {k: kept for k, g in groups.items() if (kept := [s for s in g if not s.is_added])}
    evidence = plateau_evidence(old, typ.typical["mfu_half_tokens"], cat)  # added: held out
    eta_points = {k: eta_bw_points(old[k], cat) for k in ETA_BW_SOURCES if k in old}
    knob_points = step_points(groups, cat)
    # a request's time outside the GPU (`capacity.fit.typical_latency`): each engine's source
    # groups predicted without it give its points; every group is then predicted with the
    # median of the other groups' points of its engine
    sources = {k: g for k, g in groups.items() if tl.family(g) in tl.FAMILIES}
    first = _rows(sources, cat, evidence, eta_points, knob_points, dict.fromkeys(sources, 0.0))
    points = {f: tl.latency_points(first, groups, f) for f in tl.FAMILIES}
    known = engines()
    fallback = {f: (known[e].typical["request_latency_ms"] if e in known else 0.0)
                for f, e in tl.ENGINE_OF.items()}
    latency = tl.group_latency(groups, points, fallback)
    rows = _rows(groups, cat, evidence, eta_points, knob_points, latency)
    # each group's release's per-layer prefill launches (`_run_as`), a knob its band scales
    released = {k: _run_as(g[0], _scenario(g[0], cat)) for k, g in groups.items()}
    launches = {k: s.prefill_layer_ms for k, s in released.items()}
    edges = _edges(groups, cat, evidence, eta_points, knob_points, latency, rows, launches)
    return TypicalScorecard(rows=tuple(rows), edges=tuple(edges),
                            latency_points=tuple(sorted(points[tl.SGLANG].items())),
                            vllm_latency_points=tuple(sorted(points[tl.VLLM].items())),
                            latency_ms=tuple(sorted(latency.items())),
                            step_sources=tuple(sorted(knob_points)),
                            prefill_launches=tuple(
                                (k, ms) for k, ms in sorted(launches.items()) if ms),
                            not_ahead=tuple(sorted(k for k, s in released.items()
                                                   if not s.schedule_ahead)))


def _group_knobs(key: str, g: Sequence[ReferenceSweep], evidence: dict[str, Evidence],
                 eta_points: dict[str, tuple[float, ...]], points: dict[str, StepPoint],
                 latency: dict[str, float]
                 ) -> tuple[TypicalEfficiency, dict[str, float], dict[str, float]]:
    """Group `key`'s engine basis and its knobs before and after (data/engines.toml's units),
    each derived without the group (module docstring), with `latency[key]` as the request
    latency where given."""
    typ = typical_efficiency(tl.ENGINE_OF.get(tl.family(g), ENGINE))
    plateau_k = held_out_knobs([e for k, e in evidence.items() if k != key], typ.typical)
    before_k = {**plateau_k, "layer_overhead_ms": 0.0,
                "eta_bw": held_out_eta_bw(eta_points, key, BEFORE_ETA_BW)}
    after_k = {**plateau_k, **held_out_step_knobs(points, g[0].model_key or "",
                                                  g[0].gpu_key or "", typ.typical),
               # the MoE expert GEMM share without the model's saturated runs (base model key)
               EXPERT_SHARE: typ.expert_share_for(default_catalog().variant(
                   g[0].model_key or "").model.key if g[0].model_key else "")}
    if key in latency:
        before_k = {**before_k, "request_latency_ms": latency[key]}
        after_k = {**after_k, "request_latency_ms": latency[key]}
    return typ, before_k, after_k


def _run_as(s: ReferenceSweep, scenario: Scenario) -> Scenario:
    """`scenario` as sweep `s` ran (`forward_pass.as_released`): with its engine profile's
    eager cost when it ran without CUDA graphs (`--enforce-eager`, docs/method.md "Eager
    mode"), with the per-layer prefill launches when its stated release graphed decode
    batches only (SGLang before 0.5.10; docs/method.md "Prefill without CUDA graphs"), and
    not scheduled one step ahead when its release waited for each step (vLLM before 0.14.0,
    SGLang before 0.4.0,
    by its version; docs/method.md "Scheduled one step ahead"), its release as
    `validate.release_of` reads it (a TensorRT-LLM or NIM version is not vLLM's: not
    stated, the current release's defaults)."""
    rel = v.release_of(s)
    if rel is None:
        return scenario
    return as_released(scenario, engine_profile(rel[0]), version=rel[1],
                       cuda_graphs=s.cuda_graphs)


def _rows(groups: dict[str, list[ReferenceSweep]], cat: Catalog, evidence: dict[str, Evidence],
          eta_points: dict[str, tuple[float, ...]], points: dict[str, StepPoint],
          latency: dict[str, float]) -> list[TypicalRow]:
    """Every stated row of `groups` on the typical basis, before and after (`typical_scorecard`),
    with `latency[group]` as the request latency where given."""
    rows: list[TypicalRow] = []
    for key, g in sorted(groups.items()):
        _, before_k, after_k = _group_knobs(key, g, evidence, eta_points, points, latency)
        for s in g:
            base = _scenario(s, cat).with_(calibration=None, **CHAPTER_KNOBS)
            levels = sorted({x.concurrency for x in s.stated})
            sched = v.scheduler_of(s.engine)
            # the basis before 2026-12-02 stated eta_bw on the spec sheet (`before_k`)
            before_s = base.with_(**{**typical_knobs_on(before_k, base),
                                     "eta_bw": before_k["eta_bw"]})
            before = v.predict(before_s, levels, s.prompt_tokens, s.output_tokens, sched,
                               s.run)
            after_s = _run_as(s, on_typical(base, after_k))
            after = (before if after_s == before_s else
                     v.predict(after_s, levels, s.prompt_tokens, s.output_tokens, sched,
                               s.run))
            spec = v.predict(v.spec_sheet(base), levels, s.prompt_tokens, s.output_tokens)
            sat = _saturated(s, base, levels)
            for x in s.stated:
                i = levels.index(x.concurrency)
                metric = v.METRIC_OF[x.metric]
                step = metric == v.Metric.STEP
                rows.append(TypicalRow(
                    group=key, metric=metric.value,
                    concurrency=x.concurrency, measured=x.value,
                    before=(_step(before, i, x.stat, True) if step
                            else v.pick(before, metric, i, x.stat)),
                    after=(_step(after, i, x.stat, True) if step
                           else v.pick(after, metric, i, x.stat)),
                    saturated=sat[i], engine=s.engine_text or s.engine, added=s.added,
                    stat=x.stat, prompt_tokens=float(s.prompt_tokens),
                    step_ms=after.step_ms[i] if step else math.nan,
                    spec_ms=spec.step_ms[i] if step else math.nan,
                    knobs=tuple(sorted((k, float(after_k.get(k, 0.0)))
                                       for k in ("eff", "eta_bw", EXPERT_SHARE,
                                                 "layer_overhead_ms", "mfu",
                                                 "mfu_half_tokens", "request_latency_ms",
                                                 "ridge_sharpness")))))
    return rows


TARGETS: Final = {"step": 0.08, "throughput": 0.10, "ttft": 0.20, "e2e": 0.15}
"""Issue 25's median targets below saturation."""


def _p(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:.1%}"


def _edges(groups: dict[str, list[ReferenceSweep]], cat: Catalog,
           evidence: dict[str, Evidence], eta_points: dict[str, tuple[float, ...]],
           points: dict[str, StepPoint], latency: dict[str, float],
           rows: Sequence[TypicalRow], launches: dict[str, float]) -> list[tb.EdgeRow]:
    """Every TTFT, E2E and throughput row below saturation with its deployment predicted at
    the two edges of the band (`typical_knob_edges`) on its group's knobs after, the step's
    and TTFT's error bands over the other groups' rows (`typical_bands.held_out_basis`), the
    group's per-layer prefill launches (`launches`, ms) among the knobs the band scales."""
    after = {(r.group, r.metric, r.concurrency, r.stat, r.measured): r.after for r in rows}
    out: list[tb.EdgeRow] = []
    for key, g in sorted(groups.items()):
        typ, _, after_k = _group_knobs(key, g, evidence, eta_points, points, latency)
        bands = {}
        for m in ("step", "ttft"):
            try:
                bands[m] = tb.error_band(rows, m, exclude=key)
            except ValueError:   # no other group has such a row: the file's band
                pass
        held = tb.held_out_basis(typ, bands.get("step"), bands.get("ttft"))
        planned_k = {**{k: float(after_k[k]) for k in TYPICAL_KNOBS},
                     "prefill_layer_ms": launches[key]}
        slow_k, fast_k = typical_knob_edges(held, planned_k)
        for s in g:
            base = _scenario(s, cat).with_(calibration=None, **CHAPTER_KNOBS)
            every = sorted({x.concurrency for x in s.stated})
            sat = dict(zip(every, _saturated(s, base, every), strict=True))
            scored = [x for x in s.stated if v.METRIC_OF[x.metric].value in tb.EDGE_METRICS
                      and not sat[x.concurrency]]
            if not scored:
                continue
            levels = sorted({x.concurrency for x in scored})
            slow_s, fast_s = (on_typical(base, {**after_k, **k}) for k in (slow_k, fast_k))
            if held.step_error is not None:   # as the Planner and the Explorer solve them
                fast_s = fast_s.with_(**fast_fixed_costs(
                    on_typical(base, {**after_k, **planned_k}), fast_s, held.step_error[1]))
            slow, fast = (v.predict(_run_as(s, sc), levels, s.prompt_tokens, s.output_tokens,
                                    v.scheduler_of(s.engine), s.run) for sc in (slow_s, fast_s))
            for x in scored:
                m, i = v.METRIC_OF[x.metric], levels.index(x.concurrency)
                out.append(tb.EdgeRow(
                    group=key, metric=m.value, concurrency=x.concurrency, measured=x.value,
                    after=after[(key, m.value, x.concurrency, x.stat, x.value)],
                    slow=v.pick(slow, m, i, x.stat), fast=v.pick(fast, m, i, x.stat),
                    added=s.added))
    return out


def markdown(card: TypicalScorecard) -> str:
    """The section as Markdown, between its markers' content."""
    sglang = tl.ENGINE_OF[tl.SGLANG]
    eff = {e: typical_efficiency(e).typical["eff"] for e in (sglang, ENGINE)}
    lines = ["### Typical basis, nobody measured", "",
             "Each published row predicted on `typical:vllm` with no measurement of its own "
             "(chapter step F4, F6 with the prefill curve F6c, the event model for TTFT, E2E "
             "and throughput: the steady closed loop, a throughput row that states its run's "
             "request count as that run, `level_prompts`); SGLang's rows on `typical:sglang`, "
             "the same knobs but for the "
             f"decode arithmetic's eff ({eff[sglang]:.3g} of each GPU's measured matmul "
             f"ceiling; vLLM's {eff[ENGINE]:.3g}, the prefill plateau) and F4c's ridge, "
             "vLLM's only. Each row carries a request latency outside the GPU: the median of "
             "the other groups' measured less predicted TTFT at their lowest concurrency and "
             "shortest prompts there, SGLang's for an SGLang "
             f"group, else the vLLM groups' on CUDA graphs at {tl.SOURCE_MAX_CLIENTS} clients "
             "or fewer (" + tl.points_text(card.latency_points, card.vllm_latency_points,
                                        card.latency_ms) + "). Knobs derived from published.csv are "
             "held out: the MFU "
             "plateau re-derived without the row's group, the step knobs without any point "
             "of the row's model on its GPU; m_half comes from an external GEMM table. "
             "Before (the basis until 2026-12-02): eta_bw 0.65 with every fixed cost folded "
             "in. After: eta_bw and F11's per-layer step overhead solved together by least "
             "absolute deviations from the lowest-concurrency decode points of "
             f"{len(card.step_sources)} "
             f"groups measured at {STEP_POINT_MAX_CLIENTS} clients or fewer with CUDA graphs "
             "(data/engines.toml's header), eta_bw a share of each GPU's measured copy ceiling "
             "(data/matmul_ceilings.toml's `copy_gb_s`; the median share where a GPU has none) "
             "and at most 1 of it, so a deep model split over 8 GPUs keeps its per-layer cost. "
             "A step row is scored against the event model's TPOT, "
             "(E2E - TTFT) / (n - 1), which is what the benchmarks' TPOT and ITL measure "
             "(other requests' prefills included). A group run without CUDA graphs "
             "(`--enforce-eager`) is predicted after with its engine profile's eager cost per "
             "layer and forward pass (data/engines.toml's `eager_layer_ms`, from sources "
             "outside published.csv; docs/method.md, \"Eager mode\"); a group whose stated "
             "release graphed decode batches only (SGLang before 0.5.10) with its prefill "
             "passes' per-layer launches (data/engines.toml's `prefill_eager_layer_ms`, from "
             "sources outside published.csv; docs/method.md, \"Prefill without CUDA graphs\"): "
             + (", ".join(f"{k} ({ms:g} ms a layer)" for k, ms in card.prefill_launches)
                or "none") + ". vLLM's releases since 0.14.0 and SGLang's since 0.4.0 schedule "
             "one step ahead (a request that arrives during a step joins the step after the "
             "next; docs/method.md, \"Scheduled one step ahead\"), and so does every group "
             "of those profiles whose release is not stated; the groups of earlier releases "
             "are predicted without it: " + (", ".join(card.not_ahead) or "none") + ". |predicted / measured "
             "- 1| below saturation.", "",
             "| metric | rows | before median | before worst | after median | after worst "
             "| target (median) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for m, target in TARGETS.items():
        b, a = card.error(m, False), card.error(m, True)
        lines.append(f"| {m} | {a.n} | {_p(b.median)} | {_p(b.high)} | {_p(a.median)} | "
                     f"{_p(a.high)} | <= {target:.0%} |")
    def split(text: str, heads: str, parts: Callable[[str], tuple[v.Spread, v.Spread]]
              ) -> list[str]:   # the table above split two ways, after (median / worst, rows)
        return ["", text, "", f"| metric | {heads} |", "|---|---:|---:|", *(
            f"| {m} | " + " | ".join(f"{_p(x.median)} / {_p(x.high)} ({x.n})" if x.n else "-"
                                     for x in parts(m)) + " |" for m in TARGETS)]
    dates = sorted({r.added for r in card.rows} - {""})
    if dates:  # the rows the knobs rest on, the rows added later
        lines += split(f"Rows added {', '.join(dates)} (held out of the prefill plateau and "
                       "the request latency; of the step knobs, as every group, their own) "
                       "beside the original rows, after (median / worst, rows):",
                       "original rows | added rows",
                       lambda m: (card.error(m, True, False), card.error(m, True, True)))
    lines += split("By the statistic the source states, after (median / worst, rows; a mean "
                   "carries a run's opening burst and its few long waits, which the steady "
                   "closed loop does not, a median hardly):", "means | medians",
                   lambda m: (card.error(m, True, stat="mean"),
                              card.error(m, True, stat="median")))
    lines += ["", *tb.step_band_lines(card, typical_efficiency(ENGINE).step_error),
              *([""] if card.edges else []), *tb.edge_lines(card)]
    lines += ["", "Step rows (ms; spec: the spec-sheet F4 step; F4: the typical step after; "
              "TPOT: the event model's, scored after; * saturated, not scored):", "",
              "| group | engine as stated | C | measured | spec | F4 | TPOT | error before "
              "| error after |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in card.rows:
        if r.metric == "step":
            lines.append(f"| {r.group}{f' (added {r.added})' if r.added else ''} | {r.engine} "
                         f"| {r.concurrency:g}"
                         f"{'*' if r.saturated else ''} | {r.measured:.2f} | {r.spec_ms:.2f} "
                         f"| {r.step_ms:.2f} | {r.after:.2f} | {r.before_error:+.1%} "
                         f"| {r.after_error:+.1%} |")
    knobs = sorted({(r.group, r.knobs) for r in card.rows})
    lines += ["", "Held-out knobs per group (eff and mfu in data/engines.toml's unit, shares "
              "of the GPU's measured matmul ceiling, eta_bw a share of its measured copy "
              "ceiling; ridge_sharpness 0: the max): " + "; ".join(
        f"{g}: " + ", ".join(f"{k} {x:.3g}" for k, x in kn) for g, kn in knobs) + ".",
        ""]
    return "\n".join(lines)


def to_dict(card: TypicalScorecard) -> dict[str, Any]:
    """The section as JSON-ready data: the error table and every row."""
    table = {m: {"before": vars(card.error(m, False)), "after": vars(card.error(m, True)),
                 "after_original": vars(card.error(m, True, False)),
                 "after_added": vars(card.error(m, True, True)),
                 "after_mean": vars(card.error(m, True, stat="mean")),
                 "after_median": vars(card.error(m, True, stat="median"))} for m in TARGETS}
    latency = {"sglang_points": dict(card.latency_points),
               "vllm_points": dict(card.vllm_latency_points), "groups": dict(card.latency_ms)}
    doc: dict[str, Any] = jsonable({
        "errors": table, **tb.to_dict(card), "step_sources": list(card.step_sources),
        "request_latency_ms": latency, "not_scheduled_ahead": list(card.not_ahead),
        "rows": [{**vars(r), "knobs": dict(r.knobs)} for r in card.rows]})
    return doc


def write_section(path: Path, generated: str) -> Path:
    """Write the section between its markers at the end of `path`."""
    return write_between_markers(path, generated, BEGIN, END)
