"""The scorecard's speculative-decoding section (`capacity validate`, docs/accuracy.md,
"Speculative decoding: speed-up against batch"): published speed-ups of a draft against batch.

Each row of `data/reference/speculative.csv` (`load_speedups`) the step model can take (model,
GPU and weight format in the catalog, draft depth stated) becomes one `DraftCheck`: the row's
model and GPU at its TP (one replica) and weight format (the catalog's default where not
stated), a context of prompt + output where stated, else the dataset's typical length
(`DATASET_CONTEXT`, an assumption); the draft from `make_draft` at the row's kind and depth, tau
the row's own where stated, else the planner's published one (`draft_for`); F12's
`speedup(plain TPOT, drafted TPOT)` at concurrency = batch (at a fixed batch the throughput
ratio is the TPOT ratio) on each of `BASES`. Error = predicted / measured - 1. Only ratios are
published, so the spec sheet's bound is checked as: each sweep's spec-sheet speed-up at batch 1
is at most tau; the shape is the speed-up at a sweep's largest batch over its smallest
(`SweepTrend`). Rows not scored carry their reason (`Skipped`). Source: F12 (docs/method.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares

from capacity import workspace
from capacity.catalog.drafts import SpeedupRow, acceptance_for, depths_for, load_acceptance, load_speedups
from capacity.catalog.loader import Catalog, ModelVariant, default_catalog
from capacity.errors import CapacityError
from capacity.fit.calibration import Calibration, apply
from capacity.fit.calibration_store import load, saved_calibrations
from capacity.fit.planning import scenario_with_basis
from capacity.fit.typical import engines
from capacity.fit.validate import Spread, engine_family, relative_error
from capacity.fit.validate_report import END as SCORECARD_END
from capacity.fit.validate_report import (
    between_markers,
    error_cells,
    jsonable,
    not_scored_lines,
    write_between_markers,
)
from capacity.fit.validate_report import fmt_or_dash as _f
from capacity.model.basis import CHAPTER_KNOBS, TYPICAL_PREFIX
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.model.speculative import Draft, make_draft, speedup
from capacity.model.speculative import acceptance_length_from_rate as tau_from_rate
from capacity.model.speculative import acceptance_rate_from_length as rate_from_tau

TARGET_ERROR: Final = 0.15
"""Issue 26's target: the median |error| of the predicted speed-up within 15%."""
DATASET_CONTEXT: Final[dict[str, int]] = {"mt-bench": 1024}
"""Context a request holds (tokens) by dataset (lower case) where a row states no lengths:
MT-bench's two-turn questions and answers of up to 1K tokens, about 1K (an assumption)."""
DEFAULT_CONTEXT: Final = 1024
"""The context (tokens) for a dataset not in `DATASET_CONTEXT` (an assumption, stated)."""
FALLBACK_ENGINE: Final = "vllm"
"""The engine whose typical knobs a row gets when data/engines.toml has none for its own."""
TOLERANCE, DATASET_TAU = 1e-9, "typical, dataset's tau"  # the bound's slack; a basis's name
HELD_OUT: Final = "typical, held out"
BASES: Final[tuple[str, ...]] = ("spec", "typical", HELD_OUT, DATASET_TAU, "calibrated")
"""What each row is predicted on (`DraftCheck.predicted`): the spec sheet, the engine's typical
knobs, the same with the draft and verify overheads fitted on the OTHER sweeps alone
(`fit_overheads`: the typical knobs were fitted on these same sweeps), the typical knobs with tau
of the row's own dataset (a sensitivity), a calibration."""
BEGIN: Final = "<!-- validate-drafts:begin -->"
END: Final = "<!-- validate-drafts:end -->"
"""Markers of this section's generated part of docs/accuracy.md (after the scorecard's own)."""


@dataclass(frozen=True, kw_only=True)
class DraftCheck:
    """One published speed-up beside its predictions (dimensionless ratios, > 1 = faster)."""

    sweep: str
    source: str
    batch: int
    measured: float
    tau: float
    """The acceptance length predicted with (tokens per verify pass, bonus token included)."""
    tau_from: str
    context_tokens: int
    context_from: str
    typical_engine: str
    """The engine whose data/engines.toml knobs the typical basis used."""
    spec: float
    typical: float
    calibrated: float | None = None
    calibrated_from: str = ""
    dataset_tau: float | None = None
    """tau of a published row of the row's own dataset (`published_tau`) where it differs from
    `tau`, and the typical speed-up with it; None otherwise."""
    typical_dataset_tau: float | None = None
    over_c_vram: bool = False
    """The batch exceeds the spec-sheet C_vram (F3) of the drafted setup at the context used."""
    held_out: float | None = None
    """The typical speed-up with the draft and verify overheads fitted on the other sweeps."""

    def predicted(self, basis: str) -> float | None:
        """The speed-up predicted on `basis` (one of `BASES`; None without it)."""
        return {"spec": self.spec, "typical": self.typical, "calibrated": self.calibrated,
                DATASET_TAU: self.typical_dataset_tau, HELD_OUT: self.held_out}[basis]

    def error(self, basis: str) -> float | None:
        """predicted / measured - 1 on `basis` (None without that basis)."""
        return None if (p := self.predicted(basis)) is None else relative_error(p, self.measured)


@dataclass(frozen=True, kw_only=True)
class SweepTrend:
    """One sweep's shape: the speed-up at its largest batch over that at its smallest, measured
    and on each basis; and the spec-sheet speed-up at batch 1 against tau (the bound)."""

    sweep: str
    batch_low: int
    batch_high: int
    tau: float
    tau_from: str
    measured: float
    spec: float
    typical: float
    calibrated: float | None
    spec_batch1: float
    dataset_tau: float | None = None

    @property
    def bounded(self) -> bool:
        """The spec-sheet speed-up at batch 1 is at most tau."""
        return self.spec_batch1 <= self.tau * (1.0 + TOLERANCE)


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A row not scored, and why."""
    row: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class DraftScorecard:
    """Every scored row, each sweep's shape, the rows not scored."""

    checks: tuple[DraftCheck, ...]
    sweeps: tuple[SweepTrend, ...]
    skipped: tuple[Skipped, ...]

    @property
    def sources(self) -> tuple[str, ...]:
        """The publications the scored rows come from (`publication`)."""
        return tuple(sorted({publication(c.source) for c in self.checks}))

    def errors(self, basis: str) -> list[float]:
        """predicted / measured - 1 of every row with `basis`."""
        return [e for c in self.checks if (e := c.error(basis)) is not None]

    def error(self, basis: str) -> Spread:
        """|predicted / measured - 1| over the rows with `basis`."""
        return Spread.of(abs(e) for e in self.errors(basis))


def publication(source: str) -> str:
    """A source without its table or anchor: 'arXiv:2503.01840 Table 3' -> 'arXiv:2503.01840'."""
    return re.sub(r"\s+Tables?\s+[\d\-, ]+$", "", source.split("#", 1)[0]).strip()


def label(r: SpeedupRow, *, sweep: bool = True) -> str:
    """A sweep's name, 'llama-3.1-8b on h100-sxm (SGLang), eagle k=3, throughput:
    arXiv:2503.01840 Table 3'; with `sweep` False, a row's (its batch included)."""
    on = f"{r.tp}x {r.gpu}" if r.tp > 1 else r.gpu
    k = "k not stated" if r.depth is None else f"k={r.depth}"
    at = "" if sweep else f", batch {r.batch}"
    return f"{r.model} on {on} ({engine_family(r.engine)}), {r.kind} {k}, {r.metric}{at}: {r.source}"


def context_of(r: SpeedupRow) -> tuple[int, str]:
    """(context tokens a request holds, where it comes from): prompt + output where the row
    states both, else its dataset's typical length (`DATASET_CONTEXT`, an assumption)."""
    if r.prompt_tokens is not None and r.output_tokens is not None:
        return r.prompt_tokens + r.output_tokens, "stated"
    n = DATASET_CONTEXT.get(r.dataset.strip().lower())
    return (DEFAULT_CONTEXT, "assumed") if n is None else (n, f"assumed ({r.dataset})")


def published_tau(variant: ModelVariant, r: SpeedupRow, depth: int) -> float | None:
    """tau for row `r` at `depth` from data/speculative.toml's chain rows of the model and kind
    measured on the row's own dataset, as `make_draft` takes them (the nearest depth, its
    per-token rate carried over to `depth`); None when that dataset has no row."""
    name = r.dataset.strip().lower()
    rows = [a for a in load_acceptance() if a.dataset.strip().lower() == name]
    known = depths_for(variant.model.key, r.kind, rows)
    if not known:
        return None
    near = min(known, key=lambda d: (abs(d - depth), d))
    row = acceptance_for(variant.model.key, r.kind, near, rows)
    return None if row is None else tau_from_rate(rate_from_tau(row.acceptance_length, near), depth)


def draft_for(variant: ModelVariant, r: SpeedupRow, depth: int) -> tuple[Draft, str]:
    """The row's draft and where its tau comes from: the row's own, else `make_draft`'s
    published figure (the one the planner uses for this model, kind and depth)."""
    if r.acceptance_length is not None:
        return (make_draft(variant, r.kind, depth, acceptance_length=r.acceptance_length),
                "the row's own")
    return (d := make_draft(variant, r.kind, depth)), f"published: {d.source}"


def calibration_for(variant: str, gpu: str, engine: str) -> Calibration | None:
    """The first bundled calibration (data/calibrations: not a user's own, so the docs do not
    depend on them) of this model variant, GPU and engine family; None when there is none."""
    folder = workspace.bundled_calibrations_dir()
    for name in saved_calibrations(folder):
        if ((cal := load(name, folder)).model == variant and cal.gpu == gpu
                and engine_family(cal.engine) == engine_family(engine)):
            return cal
    return None


def predicted_speedup(s: Scenario, draft: Draft, batch: int) -> float:
    """F12's speed-up of `draft` on `s` at concurrency `batch`: the plain TPOT over the
    drafted TPOT (`speculative.speedup`)."""
    plain = np.asarray(evaluate(s.with_(draft=None), [batch]).tpot_ms).ravel()[0]
    drafted = np.asarray(evaluate(s.with_(draft=draft), [batch]).tpot_ms).ravel()[0]
    return float(np.asarray(speedup(plain, drafted)).ravel()[0])


def skip_reason(r: SpeedupRow, catalog: Catalog) -> str:
    """Why row `r` cannot be scored ('' when it can)."""
    if r.model not in catalog.models:
        return f"model '{r.model}' not in the catalog"
    try:
        catalog.gpu(r.gpu)
        if r.weights != "not stated":
            catalog.variant(r.model, r.weights)
    except CapacityError as exc:
        return f"not in the catalog ({exc})"
    return "" if r.depth is not None else "draft depth not stated by the source"


def typical_setup(r: SpeedupRow, catalog: Catalog | None = None
                  ) -> tuple[Scenario, Scenario, Draft, str, str]:
    """Row `r`'s setup without a draft (the catalog's figures, `context_of`), the same on the
    typical basis of its engine (`FALLBACK_ENGINE`'s knobs where data/engines.toml has none),
    its draft, where tau comes from and the engine whose knobs are used."""
    cat = catalog or default_catalog()
    assert r.depth is not None
    base = make_scenario(r.model, r.gpu, catalog=cat, n_gpus=r.tp, tp=r.tp,
                         context_tokens=context_of(r)[0],
                         weights=None if r.weights == "not stated" else r.weights)
    draft, tau_from = draft_for(base.variant, r, r.depth)
    eng = r.engine if r.engine in engines() else FALLBACK_ENGINE
    return base, scenario_with_basis(base, TYPICAL_PREFIX + eng), draft, tau_from, eng


def fit_overheads(rows: Sequence[SpeedupRow], catalog: Catalog | None = None
                  ) -> tuple[float, float]:
    """(draft_overhead_ms, verify_overhead_ms), F12's engine knobs (ms per draft pass, ms per
    verified token), that make the typical basis's speed-up fit the measured one on `rows`
    (least squares on predicted / measured - 1, both knobs >= 0, every other knob typical).
    data/engines.toml's typical values are the geometric mean of the fits on each sweep."""
    setups = [(typical_setup(r, catalog), r) for r in rows]

    def residuals(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.array([predicted_speedup(typ.with_(draft_overhead_ms=float(x[0]),
                                                     verify_overhead_ms=float(x[1])),
                                           draft, r.batch) / r.speedup - 1.0
                         for (_, typ, draft, _, _), r in setups])
    fit = least_squares(residuals, [0.5, 0.01], bounds=([0.0, 0.0], [50.0, 5.0]))
    return float(fit.x[0]), float(fit.x[1])


def fitted_sweeps(by_sweep: Mapping[str, Sequence[SpeedupRow]]
                  ) -> dict[str, Sequence[SpeedupRow]]:
    """The sweeps `fit_overheads` is run on: those of two batches or more. At one batch a
    speed-up cannot tell a draft pass's cost from a verified token's (two knobs, one figure):
    such a row is scored, on the others' fit, and fits nothing."""
    return {name: rows for name, rows in by_sweep.items() if len({r.batch for r in rows}) >= 2}


def check_row(r: SpeedupRow, catalog: Catalog | None = None,
              held_out: tuple[float, float] | None = None) -> DraftCheck:
    """Row `r` beside its predicted speed-up on each basis (the row must pass `skip_reason`);
    `held_out`: the overheads fitted without its sweep (`fit_overheads`)."""
    cat = catalog or default_catalog()
    assert r.depth is not None
    ctx, ctx_from = context_of(r)
    base, typ, draft, tau_from, eng = typical_setup(r, cat)
    spec = scenario_with_basis(base, "spec")
    cal = calibration_for(base.variant.key, r.gpu, r.engine)
    alt = None if r.acceptance_length is not None else published_tau(base.variant, r, r.depth)
    alt = None if alt is None or abs(alt - draft.acceptance_length) <= TOLERANCE else alt
    c_vram = np.asarray(evaluate(spec.with_(draft=draft), [1]).max_concurrency_vram).ravel()[0]
    return DraftCheck(
        sweep=label(r), source=r.source, batch=r.batch, measured=r.speedup,
        tau=draft.acceptance_length, tau_from=tau_from, context_tokens=ctx,
        context_from=ctx_from, typical_engine=eng, spec=predicted_speedup(spec, draft, r.batch),
        typical=predicted_speedup(typ, draft, r.batch),
        calibrated=None if cal is None else predicted_speedup(
            apply(cal, base.with_(**CHAPTER_KNOBS)), draft, r.batch),
        calibrated_from="" if cal is None else cal.name, dataset_tau=alt,
        typical_dataset_tau=None if alt is None else predicted_speedup(
            typ, make_draft(base.variant, r.kind, r.depth, acceptance_length=alt), r.batch),
        over_c_vram=r.batch > int(c_vram),
        held_out=None if held_out is None else predicted_speedup(
            typ.with_(draft_overhead_ms=held_out[0], verify_overhead_ms=held_out[1]), draft,
            r.batch))


def draft_scorecard(rows: Iterable[SpeedupRow] | None = None,
                    catalog: Catalog | None = None) -> DraftScorecard:
    """Score every row of `rows` (default: data/reference/speculative.csv); each sweep's
    shape, and its spec-sheet speed-up at batch 1 (`SweepTrend`)."""
    cat = catalog or default_catalog()
    checks: list[DraftCheck] = []
    skipped: list[Skipped] = []
    firsts: dict[str, SpeedupRow] = {}
    scored: list[SpeedupRow] = []
    for r in load_speedups() if rows is None else rows:
        try:
            if not (why := skip_reason(r, cat)):
                typical_setup(r, cat)  # e.g. no published tau for the model and draft kind
                scored.append(r)
        except CapacityError as exc:
            why = str(exc)
        if why:
            skipped.append(Skipped(row=label(r, sweep=False), reason=why))
    by_sweep: dict[str, list[SpeedupRow]] = {}
    for r in scored:
        by_sweep.setdefault(label(r), []).append(r)
    fitted = fitted_sweeps(by_sweep)
    for name, own in by_sweep.items():
        others = [r for other, rows in fitted.items() if other != name for r in rows]
        held = fit_overheads(others, cat) if others else None
        for r in own:
            checks.append(check_row(r, cat, held))
            firsts.setdefault(name, r)
    sweeps = []
    for name, first in firsts.items():
        if name not in fitted:  # one batch: no shape
            continue
        one = sorted((c for c in checks if c.sweep == name), key=lambda c: c.batch)
        lo, hi = one[0], one[-1]
        at1 = check_row(SpeedupRow(**{**asdict(first), "batch": 1}), cat)
        sweeps.append(SweepTrend(
            sweep=name, batch_low=lo.batch, batch_high=hi.batch, tau=lo.tau,
            tau_from=lo.tau_from, measured=hi.measured / lo.measured, spec=hi.spec / lo.spec,
            typical=hi.typical / lo.typical, spec_batch1=at1.spec, dataset_tau=lo.dataset_tau,
            calibrated=None if hi.calibrated is None or lo.calibrated is None
            else hi.calibrated / lo.calibrated))
    return DraftScorecard(checks=tuple(checks), sweeps=tuple(sweeps), skipped=tuple(skipped))


# -- written out: Markdown (docs/accuracy.md), JSON -------------------------------------------
def markdown(card: DraftScorecard) -> str:
    """The section as Markdown: what is scored and the result, the error by basis, each sweep's
    shape and bound, every row, the rows not scored."""
    spec, typ, alt = card.error("spec"), card.error("typical"), card.error(DATASET_TAU)
    held = card.error(HELD_OUT)
    over = sum(c.over_c_vram for c in card.checks)
    knobs = {e: engines()[e].typical for e in sorted({c.typical_engine for c in card.checks})}
    overheads = "".join(f" ({e}: {k['draft_overhead_ms']:g} ms a draft pass, "
                        f"{k.get('verify_overhead_ms', 0):g} ms a verified token; the file's "
                        "header says what they were fitted to)" for e, k in knobs.items()
                        if "draft_overhead_ms" in k)
    lines = [
        "### Speculative decoding: speed-up against batch", "",
        f"{len(card.checks)} rows from {len(card.sources)} source{'s' * (len(card.sources) != 1)} "
        f"({', '.join(card.sources) or 'none'}; {len(card.sweeps)} sweeps) of "
        "data/reference/speculative.csv; median error "
        f"{_f(spec.median, '.1%')} on the spec sheet, {_f(held.median, '.1%')} on the typical "
        "engine knobs with the draft and verify overheads fitted on the other sweep alone "
        f"(held out; target: within {TARGET_ERROR:.0%}), {_f(typ.median, '.1%')} with the "
        "typical overheads (fitted on these same sweeps). Each row is a draft's throughput or "
        "TPOT over the same server's without it at one batch, against F12's `speedup(plain "
        "TPOT, drafted TPOT)` at concurrency = batch (at a fixed batch the throughput ratio is "
        "the TPOT ratio). Setup: the row's model, GPU, TP and weight format (the catalog's "
        "default where not stated); context prompt + output where stated, else the dataset's "
        f"typical length (MT-bench: {DATASET_CONTEXT['mt-bench']} tokens, an assumption); tau "
        "the row's own where stated, else the one the planner uses (`make_draft`: "
        "data/speculative.toml's chain rows of the model and draft, at the nearest depth with "
        "its per-token rate carried over, whatever their dataset); the same with tau of the "
        f"row's own dataset: {_f(alt.median, '.1%')} ({alt.n} rows). Typical: data/engines.toml's"
        f" knobs for the row's engine, {FALLBACK_ENGINE}'s where it has none{overheads}. "
        "Calibrated: a "
        "calibration of the same model, GPU and engine in data/calibrations, where one exists. "
        f"{over} rows run a batch above the spec-sheet C_vram at the context used. The spec "
        "sheet's bound, with only ratios published: its speed-up at batch 1 is at most tau on "
        f"{sum(t.bounded for t in card.sweeps)} of {len(card.sweeps)} sweeps; at or above the "
        f"measured speed-up on {sum(e >= 0 for e in card.errors('spec'))} of {spec.n} rows.", "",
        "| basis | rows | median abs error | worst | median signed |",
        "|---|---:|---:|---:|---:|"]
    for basis in BASES:
        errs = card.errors(basis)
        lines.append(f"| {basis} | {error_cells(errs)} |")
    lines += ["", "Shape: the speed-up at a sweep's largest batch over that at its smallest, "
              "measured and predicted; and the spec-sheet speed-up at batch 1 against tau.", "",
              "| sweep | batches | tau | tau from | measured | spec | typical | calibrated | "
              "spec at batch 1 | at most tau | tau of the dataset's row |",
              "|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|"]
    lines += [f"| {t.sweep} | {t.batch_low}-{t.batch_high} | {t.tau:.2f} | {t.tau_from} | "
              f"{_f(t.measured, '.2f')}x | {_f(t.spec, '.2f')}x | {_f(t.typical, '.2f')}x | "
              f"{_f(t.calibrated, '.2f')} | {_f(t.spec_batch1, '.2f')}x | "
              f"{'yes' if t.bounded else 'no'} | {_f(t.dataset_tau, '.2f')} |"
              for t in card.sweeps]
    lines += ["", "| sweep | batch | measured | spec | error | typical | error | typical, "
              "dataset's tau | error | calibrated | error | context | batch > C_vram |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for c in card.checks:
        cells = " | ".join(f"{_f(c.predicted(b), '.2f')} | {_f(c.error(b), '+.1%')}"
                           for b in ("spec", "typical", DATASET_TAU, "calibrated"))
        lines.append(f"| {c.sweep} | {c.batch} | {c.measured:.2f} | {cells} | "
                     f"{c.context_tokens} {c.context_from} | {'yes' if c.over_c_vram else 'no'} |")
    lines += not_scored_lines([(s.row, s.reason) for s in card.skipped])
    return "\n".join(lines) + "\n"


def to_dict(card: DraftScorecard) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None): rows, sources, error by basis (median
    |error|, range, signed median as `bias`), each sweep's shape and bound, every row with its
    errors, the rows not scored."""
    return dict(jsonable({
        "rows": len(card.checks), "sources": list(card.sources), "target": TARGET_ERROR,
        "error": {b: {**asdict(card.error(b)), "bias": Spread.of(card.errors(b)).median}
                  for b in BASES},
        "sweeps": [{**asdict(t), "bounded": t.bounded} for t in card.sweeps],
        "checks": [{**asdict(c), "error": {b: c.error(b) for b in BASES}} for c in card.checks],
        "skipped": [asdict(s) for s in card.skipped]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the scorecard's END marker, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=SCORECARD_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
