"""A realtest's measurements as committed files, and its report generated from them.

`python3 dev.py realtest` (capacity/cli/realtest.py) measures llama.cpp on this CPU and writes
a *record*: one folder holding everything its report is computed from, and nothing else,

    record.json          the run's facts (date, machine, engine, threads, load, minutes) and
                         its cases: each held-out run's label and run id, the model, the levels
                         kept, whether its send times are replayed, its drift control's ratios
    custom/              the catalog entries it was predicted on (the probed CPU `cpu-probe`,
                         the GGUF models `rt-*`), as `capacity probe` and `catalog add-model`
                         wrote them
    calibrations/        the f32 model's calibration and the fit of both sizes (TOML)
    bench/<label>/<run>  each stored bench run it uses (meta.json, summary.csv, requests.csv)

`render(folder)` predicts every case again from these files (`engine_check.check_run` under
the llama.cpp profile, the saved calibration, the recorded catalog entries) and writes the
report: the realtest prints it, and `capacity validate --out docs/accuracy.md` puts the
records committed under data/reference/realtest/ into docs/accuracy.md (`write_section`),
so the real-engine tables there are generated from committed measurements, not pasted
(issue 25), and a test fails when they drift apart. Issue 31's figures (`size_report`,
`drift_report`) come from the same rows.
Source: docs/accuracy.md, "Real engine: llama.cpp on this CPU".
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from capacity import workspace
from capacity.bench.gguf_model import BIG_SHAPE, TEST_SHAPE, LlamaShape
from capacity.bench.store import RunStore
from capacity.catalog.loader import load_catalog
from capacity.errors import InputError
from capacity.fit import calibration as calib
from capacity.fit import calibration_store
from capacity.fit.engine_check import (
    BURST_TTFT,
    STEADY_TTFT,
    TTFT_EDGE_TOLERANCE,
    CheckRow,
    Drift,
    bound_counts,
    check_run,
    control_values,
    drift_corrected,
    markdown_table,
    median_abs_errors,
)
from capacity.fit.validate_report import between_markers, write_between_markers

GPU_KEY: Final = "cpu-probe"
"""The probed CPU's catalog key (`capacity probe --key`)."""
MODELS: Final = {"f32": "rt-llama156m-w32", "f16": "rt-llama156m-w16",
                 "wide": "rt-llama-wide-w32", "long": "rt-llama-long-w32",
                 "big": "rt-llama-big-w32"}
"""Catalog keys of the test models (a key may not end in a format suffix such as -f32)."""
SHORT_CHARS: Final = 450
"""The short prompt, characters (the bench's English filler: ~4.5 characters per token)."""
CASE_CONC, CASE_CONC_LONG, CASE_LEN = ("f32 C=3,5,6,7", "f32 C=3,5,6,7 prompt ~460",
                                      "f32 prompt ~200")
SWEEP_CASES: Final = (CASE_CONC, CASE_CONC_LONG, CASE_LEN)
"""The cases whose levels are the f32 model's points outside the calibration sweep."""
CASE_BIG, CASE_BIG_LONG = "big model (f32 fit)", "big model (f32 fit) prompt ~400"
SIZE_CASES: Final = (CASE_BIG, CASE_BIG_LONG)
"""The other size, predicted by the calibration of the f32 model alone (issue 31's transfer)."""
PASSES: Final = 2
"""Passes through each closed-loop run (`capacity bench --passes`): forward, then backward."""
RECORD_FILE: Final = "record.json"
BEGIN: Final = "<!-- realtest-record:begin -->"
END: Final = "<!-- realtest-record:end -->"
AFTER: Final = "### Result"
"""The generated section goes right after this heading of docs/accuracy.md."""


def step_weight_params(shape: LlamaShape) -> int:
    """Parameters a decode step reads (count): every layer's matrices and norms, the final norm
    and the output head (the embedding table itself where it is tied); an untied input
    embedding is a lookup of one row per sequence, not read (the operator step, F4b).
    TEST_SHAPE: 8 x 11,274,240 + 32,768,000 + 1,024 = 122,962,944."""
    return shape.params - (0 if shape.tied else shape.vocab * shape.hidden)


@dataclass(frozen=True, kw_only=True)
class Case:
    """One held-out run of a record: what it measured and how it is predicted."""

    name: str
    model: str
    """The catalog key of its model (`MODELS`)."""
    run: str
    """Its stored bench run, `<label>/<run id>` under bench/."""
    skip_levels: tuple[int, ...] = ()
    """Levels of the run left out of this case (the calibration's own, in the sweep's runs)."""
    replay: bool = False
    """An open-loop run predicted on its own send times (its request rows)."""
    control: str = ""
    """The drift control measured right before it, `<label>/<run id>` ('' for a case measured
    in the sweep's own passes: no drift to correct)."""


@dataclass(frozen=True, kw_only=True)
class Record:
    """record.json: the run's facts and its cases."""

    date: str
    """When the run started, ISO 8601 (UTC)."""
    machine: str
    engine: str
    threads: int
    parallel: int
    ctx_tokens: int
    total_slots: str
    minutes: float
    load_before: str
    load_after: str
    requests_text: str
    """How many requests each level had, as the report says it."""
    max_tokens: int
    calibration: str
    """The f32 calibration's file under calibrations/."""
    two_sizes: str
    """The fit of both sizes' file under calibrations/."""
    baseline: str
    """The drift control measured right after the sweep, `<label>/<run id>`."""
    cases: tuple[Case, ...]

    def runs(self) -> list[str]:
        """Every stored run the record uses (`<label>/<run id>`), once each."""
        return list(dict.fromkeys(
            [self.baseline, *(r for c in self.cases for r in (c.run, c.control) if r)]))


def write_record(folder: Path, record: Record, home: Path) -> Path:
    """Copy what `record` rests on out of the realtest's workspace `home` into `folder` (made
    anew): the custom catalog entries, the two calibrations, each case's stored run; then
    record.json. Returns `folder`."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "calibrations").mkdir(parents=True)
    shutil.copytree(home / "custom", folder / "custom")
    for name in (record.calibration, record.two_sizes):
        shutil.copy2(home / "calibrations" / name, folder / "calibrations" / name)
    for run in record.runs():
        shutil.copytree(home / "bench" / run, folder / "bench" / run,
                        ignore=shutil.ignore_patterns("*.parquet"))
    doc = asdict(record)
    (folder / RECORD_FILE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return folder


def read_record(folder: Path) -> Record:
    """record.json of a record folder."""
    try:
        doc: dict[str, Any] = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
        cases = tuple(Case(**{**c, "skip_levels": tuple(c.get("skip_levels", ()))})
                      for c in doc.pop("cases"))
        return Record(**doc, cases=cases)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InputError(f"{folder / RECORD_FILE}: not a realtest record ({exc})") from None


def _run_id(run: str) -> str:
    """The run id of `<label>/<run id>`."""
    return run.rsplit("/", 1)[-1]


def predict_rows(folder: Path) -> tuple[Record, list[CheckRow], calib.Calibration,
                                        calib.Calibration, dict[str, Drift]]:
    """Every case of the record at `folder` predicted again from its files: the rows, with the
    record, its two calibrations and each case's drift (its control's ITL and TTFT p50 over
    the baseline control's, `engine_check.Drift`; none for a case without a control)."""
    rec = read_record(folder)
    catalog = load_catalog(workspace.catalog_dir(), extra_dirs=[folder / "custom"])
    cal = calibration_store.load(folder / "calibrations" / rec.calibration)
    two = calibration_store.load(folder / "calibrations" / rec.two_sizes)
    rows: list[CheckRow] = []
    drifts: dict[str, Drift] = {}
    with RunStore(folder / "bench") as store:
        base = control_values(store.summary(_run_id(rec.baseline)))
        for c in rec.cases:
            drifts[c.name] = (Drift.of(control_values(store.summary(_run_id(c.control))), base)
                              if c.control else Drift())
            summary = store.summary(_run_id(c.run))
            if c.skip_levels:
                summary = summary[~summary["concurrency"].isin(c.skip_levels)]
            # the event model schedules as llama-server does: its --parallel slots, prompts in
            # n_batch chunks between decode steps (the llamacpp profile, data/engines.toml)
            rows += check_run(summary.reset_index(drop=True), case=c.name, model=c.model,
                              gpu=GPU_KEY, calibration=cal, catalog=catalog, engine="llamacpp",
                              max_num_seqs=rec.parallel,
                              requests=store.requests(_run_id(c.run)) if c.replay else None,
                              passes=PASSES)
    return rec, rows, cal, two, drifts


def sweep_errors(rows: Sequence[CheckRow]) -> str:
    """Issue 10's sweep target on the realtest: |ITL p50 error| over the f32 closed-loop
    levels the calibration did not see (`SWEEP_CASES`), as "median X, worst Y over N points"."""
    errs = [abs(r.error("itl_p50_ms")) for r in rows
            if r.case in SWEEP_CASES and math.isfinite(r.error("itl_p50_ms"))]
    if not errs:
        return "no point measured"
    return (f"median {float(np.median(errs)):.1%}, worst {max(errs):.1%} over {len(errs)} "
            "points")


def _other_size(rows: Sequence[CheckRow]) -> tuple[str, str]:
    """The other size's ITL p50 spread and TTFT p50 errors at concurrency 1, as text."""
    itl = [abs(r.error("itl_p50_ms")) for r in rows
           if r.case in SIZE_CASES and math.isfinite(r.error("itl_p50_ms"))]
    ttft1 = [f"{r.error('ttft_p50_ms'):+.1%}" for r in rows
             if r.case in SIZE_CASES and r.concurrency == 1
             and math.isfinite(r.error("ttft_p50_ms"))]
    size = (f"median {float(np.median(itl)):.1%}, worst {max(itl):.1%} over {len(itl)} levels"
            if itl else "no level measured")
    return size, ", ".join(ttft1) or "-"


def size_report(one: calib.Calibration, two: calib.Calibration,
                rows: Sequence[CheckRow]) -> list[str]:
    """Issue 31's held-out figures as report lines: the other size predicted by the f32
    model's calibration (`SIZE_CASES`, ITL p50 median and worst, TTFT p50 at concurrency 1),
    a whole level left out (the f32 fit's leave-one-level-out ITL error), and the fit of both
    sizes with each model held out whole (fitted on the other alone)."""
    def pct(v: float | None) -> str:
        return "-" if v is None or not math.isfinite(v) else f"{v:.1%}"

    size, ttft1 = _other_size(rows)
    by_model = []
    for m in two.models:
        e = [abs(p.model_out_error) for p in two.points
             if p.kind == calib.PointKind.TPOT and p.model == m and p.model_out_error is not None]
        if e:
            by_model.append(f"{m} {float(np.median(e)):.1%} median, {max(e):.1%} worst")
    split = ("not identified (the report's note; the band spans both ends)"
             if one.split_ridge_ms is not None else "identified")
    return [
        f"Another size, calibrated on the f32 model alone (issue 31: ITL p50 within 10% median, "
        f"25% worst; TTFT p50 at concurrency 1 within 15%): {MODELS['big']}, "
        f"{BIG_SHAPE.layers} layers, {step_weight_params(BIG_SHAPE) / step_weight_params(TEST_SHAPE):.2f}x "
        f"the weight reads: ITL p50 {size}; TTFT p50 at concurrency 1 {ttft1}. The f32 fit's "
        f"overhead / bandwidth split: {split}.", "",
        f"A whole concurrency level left out (issue 31: ITL p50 within 10% median): the f32 "
        f"fit's {one.holdout_method.split(';')[0]}: ITL median "
        f"{pct(one.median_abs_error(calib.PointKind.TPOT, 'held_out'))}; levels 3, 5, 6, 7 of "
        f"the same runs, never in the fit: {sweep_errors(rows)}.", "",
        f"Both sizes fitted together ({', '.join(two.models)}): eta_bw {two.eta_bw or 0:.3g}, "
        f"step overhead {two.step_overhead_ms or 0:.3g} ms"
        + (f", {two.batched_overhead_ms:.3g} ms more at two or more sequences"
           if two.batched_overhead_ms is not None else "")
        + "; each model held out whole and "
        f"predicted from the other's fit, decode step: {'; '.join(by_model) or '-'}; TTFT "
        f"{pct(two.median_abs_error(calib.PointKind.TTFT, 'model_out'))} median.",
    ]


def drift_report(rows: Sequence[CheckRow], drifts: dict[str, Drift]) -> list[str]:
    """The drift control's lines: each held-out case's control ratios (ITL p50, TTFT p50 of the
    f32 model at concurrency 1 before the case over right after the sweep), and issue 31's
    figures again with every prediction scaled by its case's ratios (`drift_corrected`): what
    is left is the model's error, not the machine's wander."""
    fixed = [drift_corrected(r, drifts.get(r.case, Drift())) for r in rows]
    ratios = ", ".join(f"{case} ITL x{d.itl:.2f}, TTFT x{d.ttft:.2f}"
                       for case, d in drifts.items() if d != Drift())
    size, ttft1 = _other_size(fixed)
    errors = median_abs_errors(fixed)
    return [
        f"Drift control (the f32 model at concurrency 1, ~{SHORT_CHARS} characters, measured "
        f"right after the sweep and again before each held-out run outside the sweep's "
        f"passes; ratio to the first): {ratios or '-'}.", "",
        f"Drift-corrected (each case's predictions x its control's ratio): another size ITL "
        f"p50 {size}; TTFT p50 at concurrency 1 {ttft1}; the f32 points outside the sweep "
        f"{sweep_errors(fixed)}; median |error| over every held-out level: "
        + ", ".join(f"{k} {v:.0%}" for k, v in errors.items()) + ".",
    ]


def ttft_edges(rows: Sequence[CheckRow]) -> str:
    """Issue 31's stated bound on TTFT under a closed loop: at how many closed-loop levels of
    two or more clients the measured TTFT p50 lies between the steady state with the clients
    out of step and the opening burst (`CheckRow.ttft_between`), and by how much each level
    outside lies beyond its edge."""
    got = [(r, b) for r in rows if (b := r.ttft_between()) is not None]
    outside = []
    for r, b in got:
        if b:
            continue
        m = r.measured["ttft_p50_ms"]
        hi, lo = r.predicted[BURST_TTFT], r.predicted[STEADY_TTFT]
        where = f"{m / hi - 1:+.0%} over the burst" if m > hi else f"{m / lo - 1:+.0%} under " \
            "the steady state"
        outside.append(f"{r.case} C={r.concurrency}: {where}")
    return (f"TTFT p50 under a closed loop between its two edges (issue 31's stated bound, the "
            f"edges `capacity plan --engine` prints: no lower than the steady state with the "
            f"clients out of step, `closed_loop.closed_loop`, no higher than the opening burst, "
            f"every client's first request at once, `closed_loop.burst_ttft_ms`; "
            f"{TTFT_EDGE_TOLERANCE:.0%} either side): {sum(b for _, b in got)} of {len(got)} "
            f"levels" + (f" (outside: {'; '.join(outside)})" if outside else "") + ".")


def render(folder: Path) -> str:
    """The report of the record at `folder`, Markdown: its facts, the table of every held-out
    level (measured, predicted, error), the medians, issue 10's and issue 31's figures, the
    drift-corrected figures and the spec-sheet bound."""
    rec, rows, cal, two, drifts = predict_rows(folder)
    errors = median_abs_errors(rows)
    lines = [
        f"#### {rec.date[:10]}: llama.cpp realtest (record `{folder.name}`)", "",
        rec.machine,
        f"Engine: llama-server from {rec.engine}, --parallel {rec.parallel}, -c "
        f"{rec.ctx_tokens}, -t {rec.threads}; /props total_slots = {rec.total_slots}.",
        f"Calibration ({rec.calibration}): " + ", ".join(
            f"{k} {getattr(cal, k):.3g}" for k in calib.KNOBS if getattr(cal, k) is not None)
        + " (ms for the overheads).",
        f"Requests per level (all passes): {rec.requests_text}; {rec.max_tokens} output tokens; "
        f"run time {rec.minutes:.1f} min; 1-minute load average {rec.load_before} at the start, "
        f"{rec.load_after} at the end (other work on the machine slows the engine).", "",
        markdown_table(rows), "Median |error| over the held-out levels: " + ", ".join(
            f"{k} {v:.0%}" for k, v in errors.items()), "",
        f"Decode step on the f32 points outside the 8-point sweep (issue 10: 5% median, 20% "
        f"worst; ITL p50 of the closed loops {', '.join(SWEEP_CASES)}): {sweep_errors(rows)}.",
        "", *size_report(cal, two, rows), "", *drift_report(rows, drifts), "",
        "ITL p50 median |error| by case: " + ", ".join(
            f"{case} {median_abs_errors([r for r in rows if r.case == case])['itl_p50_ms']:.0%}"
            for case in dict.fromkeys(r.case for r in rows)) + ".", "",
        ttft_edges(rows), "",
        "Spec-sheet upper bound (the probed entry, every knob at peak, the faster step method; "
        "ITL against the decode step at the prompt's context, TTFT against one prompt's "
        "prefill alone): measured no faster on " + ", ".join(
            f"{k} {n} of {m} levels" for k, (n, m) in bound_counts(rows).items()) + ".",
    ]
    return "\n".join(lines) + "\n"


def records_dir() -> Path:
    """The committed realtest records (data/reference/realtest/, shipped with the package)."""
    return workspace.reference_dir() / "realtest"


def record_folders(root: Path | None = None) -> list[Path]:
    """The record folders under `root` (default `records_dir`), newest first."""
    base = records_dir() if root is None else root
    found = [p for p in base.iterdir() if (p / RECORD_FILE).is_file()] if base.is_dir() else []
    return sorted(found, key=lambda p: p.name, reverse=True)


def markdown(root: Path | None = None) -> str:
    """Every committed record's report, newest first: the generated part of docs/accuracy.md's
    real-engine result."""
    folders = record_folders(root)
    intro = (f"Generated by `capacity validate --out docs/accuracy.md` from the "
             f"{len(folders)} realtest record{'' if len(folders) == 1 else 's'} committed "
             "under data/reference/realtest/ (`capacity.fit.realtest_record`: the stored bench "
             "runs, the probed CPU and model entries and the calibrations each run wrote); each "
             "case is predicted again from those files. Earlier runs, reported before the "
             "records existed, follow by hand below.")
    return "\n".join([intro, "", *(render(f) for f in folders)])


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the real-engine "### Result" heading, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=AFTER)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
