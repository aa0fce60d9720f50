"""The scorecard's wide expert-parallel section (`capacity validate`, docs/accuracy.md, "MoE with
wide expert parallelism"): published large-scale EP serving of DeepSeek-V3/R1 against
`capacity.model.expert_parallel` (docs/expert-parallel.md).

Each row of data/reference/moe_ep.csv (`load_rows`) the model can take (model, GPU and weight
format in the catalog, no MTP, a prompt length stated) becomes one `EpCheck`: the row's EP
degree, attention parallelism and redundant experts (0 where not stated) on its GPU, the KV held
at prompt + output tokens (the prompt alone where no output length is stated), the row's overlap
(`overlap` column: two-batch unless the source says otherwise) and routing (`routing`: balanced
where the source simulated perfect balance, else the family's imbalance of
data/moe_imbalance.toml). Four bases:

- spec sheet: decode, the bound (`bound_ms`: peak, balanced, communication hidden) at the stated
  batch, else the most sequences that fit at util 1 with no overheads; prefill,
  `prefill_tok_s_per_gpu` at MFU 1 and balanced load;
- prior: the published kernel knobs of data/ep_knobs.toml (`typical_ep_knobs`), perfect overlap
  and no fixed per-layer time, at the stated batch, else the most that fit at the project's
  memory defaults (the sources fill the KV cache), the placement's imbalance;
- typical (in-sample): the prior plus the overlap and fixed per-layer time fitted to every
  scored row (`capacity.fit.ep_fit.fit_knobs`);
- held out: each row predicted with the two knobs fitted to the OTHER rows
  (`capacity.fit.ep_fit.leave_one_out`): the figure that counts against issue 27's target.

Error = predicted / measured - 1. The spec sheet must be an upper bound (error >= 0) on every
row. Rows not scored carry their reason.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final

from capacity import workspace
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.fit.ep_fit import EpFit, StepTerms, fit_knobs, leave_one_out
from capacity.fit.validate import Spread, relative_error
from capacity.fit.validate_drafts import END as DRAFTS_END
from capacity.fit.validate_report import (
    between_markers,
    error_cells,
    jsonable,
    not_scored_lines,
    write_between_markers,
)
from capacity.fit.validate_report import fmt_or_dash as _f
from capacity.model.ep_knobs import EpKnobs, typical_ep_knobs
from capacity.model.expert_parallel import (
    PREFILL_TOKENS_PER_GPU,
    EpSetup,
    Overlap,
    ep_layout,
    ep_memory,
    ep_setup,
    ep_step,
    prefill_comm_us_per_token,
    prefill_tok_s_per_gpu,
)
from capacity.model.moe_imbalance import imbalance_factor

ROWS_FILE: Final = "moe_ep.csv"
TARGET_ERROR: Final = 0.25
"""Issue 27's target: the typical basis within 25 % median of the rows' throughput per GPU."""
BASES: Final = ("spec", "prior", "typical", "held_out")
"""The scorecard's bases (module doc); `held_out` is the one issue 27's target applies to."""
BEGIN: Final = "<!-- validate-ep:begin -->"
END: Final = "<!-- validate-ep:end -->"
"""Markers of this section's generated part of docs/accuracy.md."""


@dataclass(frozen=True, kw_only=True)
class EpRow:
    """One published measurement of data/reference/moe_ep.csv (blank numbers: None)."""

    id: str
    model: str
    weights: str
    kv_dtype: str
    gpu: str
    gpu_source_name: str
    gpus: int | None
    ep: int | None
    dp_attention: bool
    attention_tp: int | None
    redundant_experts: int | None
    phase: str
    prompt_tokens: int | None
    output_tokens: int | None
    batch_per_gpu: int | None
    metric: str
    value_per_gpu: float
    tpot_ms: float | None
    mtp: str
    engine: str
    source: str
    as_of: str
    notes: str
    overlap: str = ""
    """How the source ran compute and all-to-all: 'sum' (operator by operator) or 'two-batch'
    (blank: two-batch)."""
    routing: str = ""
    """'balanced' where the source simulated perfect balance; blank: the family's imbalance."""


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


def load_rows(path: Path | None = None) -> list[EpRow]:
    """Every row of the published EP measurements (data/reference/moe_ep.csv)."""
    p = path or workspace.bundled_data_dir() / "reference" / ROWS_FILE
    with p.open(encoding="utf-8", newline="") as fh:
        return [EpRow(
            id=r["id"], model=r["model"], weights=r["weights"], kv_dtype=r["kv_dtype"],
            gpu=r["gpu"], gpu_source_name=r["gpu_source_name"], gpus=_int(r["gpus"]),
            ep=_int(r["ep"]), dp_attention=r["dp_attention"].strip().lower() == "true",
            attention_tp=_int(r["attention_tp"]), redundant_experts=_int(r["redundant_experts"]),
            phase=r["phase"], prompt_tokens=_int(r["prompt_tokens"]),
            output_tokens=_int(r["output_tokens"]), batch_per_gpu=_int(r["batch_per_gpu"]),
            metric=r["metric"], value_per_gpu=float(r["value_per_gpu"]),
            tpot_ms=float(r["tpot_ms"]) if r["tpot_ms"].strip() else None, mtp=r["mtp"],
            engine=r["engine"], source=r["source"], as_of=r["as_of"], notes=r["notes"],
            overlap=(r.get("overlap") or "").strip(), routing=(r.get("routing") or "").strip())
            for r in csv.DictReader(fh)]


@dataclass(frozen=True, kw_only=True)
class EpCheck:
    """One scored row: measured and predicted throughput per GPU (tok/s) on each basis."""

    id: str
    phase: str
    layout: str
    gpu: str
    context_tokens: int
    batch_per_gpu_spec: float
    batch_per_gpu_typical: float
    batch_from: str
    measured: float
    spec: float
    typical: float
    """In-sample: the prior plus the two knobs fitted to every scored row."""
    imbalance: float
    source: str
    prior: float = math.nan
    """The published knobs alone (perfect overlap, no fixed per-layer time)."""
    held_out: float = math.nan
    """The two knobs fitted to the other rows (leave-one-out)."""
    overlap: str = Overlap.TBO.value
    held_out_knobs: tuple[float, float] = (math.nan, math.nan)
    """(overlap, layer_overhead_us) fitted without this row."""

    def error(self, basis: str) -> float:
        """predicted / measured - 1 on a basis of `BASES`."""
        return relative_error(getattr(self, basis), self.measured)

    @property
    def bounded(self) -> bool:
        """The spec sheet is at or above the measured throughput."""
        return self.spec >= self.measured


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A row not scored, and why."""

    id: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class EpScorecard:
    checks: tuple[EpCheck, ...]
    skipped: tuple[Skipped, ...]
    fit: EpFit | None = None
    """The two knobs fitted to every scored row (None with fewer than two rows)."""

    def errors(self, basis: str, phase: str | None = None) -> list[float]:
        return [c.error(basis) for c in self.checks if phase in (None, c.phase)]

    def error(self, basis: str, phase: str | None = None) -> Spread:
        """|predicted / measured - 1| over the rows (of one phase)."""
        return Spread.of(abs(e) for e in self.errors(basis, phase))

    @property
    def bounded(self) -> int:
        return sum(c.bounded for c in self.checks)


def skip_reason(r: EpRow, catalog: Catalog) -> str:
    """Why row `r` cannot be scored ('' when it can)."""
    if r.mtp.strip().lower() == "yes":
        return "multi-token prediction (acceptance not stated): the model has tau = 1"
    if r.model not in catalog.models:
        return f"model '{r.model}' not in the catalog"
    try:
        catalog.gpu(r.gpu)
        catalog.variant(r.model, r.weights)
    except CapacityError as exc:
        return f"not in the catalog ({exc})"
    if r.ep is None or r.gpus is None:
        return "EP degree not stated"
    if r.prompt_tokens is None:
        return "prompt length not stated"
    if "cache hit" in r.notes and r.phase == "prefill":
        return "counts cached input tokens that were not computed"
    return ""


def setup_of(r: EpRow, catalog: Catalog | None = None) -> EpSetup:
    """Row `r`'s deployment: its GPU, EP, attention TP and redundancy; KV at prompt + output;
    balanced routing where the row says so."""
    assert r.ep is not None and r.prompt_tokens is not None
    lay = ep_layout(r.gpu, r.ep, attention_tp=r.attention_tp or 1,
                    redundant_experts=r.redundant_experts or 0)
    return ep_setup(r.model, r.gpu, lay, context_tokens=r.prompt_tokens + (r.output_tokens or 0),
                    kv_dtype=r.kv_dtype, weights=r.weights, catalog=catalog,
                    exponent=0.0 if r.routing == "balanced" else None)


def row_overlap(r: EpRow) -> Overlap:
    """The row's combination of compute and all-to-all (two-batch unless it says 'sum')."""
    return Overlap.SUM if r.overlap == "sum" else Overlap.TBO


def _batches(r: EpRow, s: EpSetup) -> tuple[float, float, str]:
    ep = s.layout.ep
    if r.batch_per_gpu is not None:
        return float(r.batch_per_gpu * ep), float(r.batch_per_gpu * ep), "stated by the row"
    roomy = ep_memory(s, util=1.0, overhead_gb=0.0, buffers_gb=0.0).max_batch
    usual = ep_memory(s).max_batch
    if roomy <= 0 or usual <= 0:
        raise CapacityError(f"{r.id}: the weights do not fit {r.gpu} at EP {ep}")
    return float(roomy), float(usual), "most that fit (spec: util 1, no overheads)"


def predict_row(r: EpRow, knobs: EpKnobs, catalog: Catalog | None = None) -> float:
    """Row `r`'s throughput per GPU (tok/s) with `knobs` at its own overlap: decode,
    `ep_step` at the typical batch; prefill, `prefill_tok_s_per_gpu` at the placement's
    imbalance (overlap 0 for a row run operator by operator)."""
    s = setup_of(r, catalog)
    if r.phase == "prefill":
        assert r.prompt_tokens is not None
        k = replace(knobs, overlap=0.0) if row_overlap(r) == Overlap.SUM else knobs
        return prefill_tok_s_per_gpu(s, r.prompt_tokens, imbalance=_placement(s), knobs=k)
    return ep_step(s, _batches(r, s)[1], overlap=row_overlap(r), knobs=knobs).tok_s_per_gpu


def _placement(s: EpSetup) -> float:
    return imbalance_factor(experts=s.experts, active=s.active, exponent=s.exponent,
                            gpus=s.layout.ep, redundant=s.layout.redundant_experts)


def row_terms(r: EpRow, catalog: Catalog | None = None) -> StepTerms:
    """Row `r` as `StepTerms` of the two fitted knobs, the published knobs fixed: decode from
    `ep_step`'s parts (compute without the fixed time, all-to-all); prefill from
    `prefill_tok_s_per_gpu` without communication and `prefill_comm_us_per_token`."""
    s = setup_of(r, catalog)
    prior = typical_ep_knobs()
    ov = row_overlap(r)
    if r.phase == "prefill":
        assert r.prompt_tokens is not None
        gamma = _placement(s)
        c_ms = 1e3 / prefill_tok_s_per_gpu(s, r.prompt_tokens, imbalance=gamma,
                                           knobs=replace(prior, prefill_comm=False))
        m_ms = prefill_comm_us_per_token(s, imbalance=gamma, knobs=prior) * 1e-3
        return StepTerms(compute_ms=c_ms, comm_ms=m_ms, overlapped=ov == Overlap.TBO,
                         fixed_ms_per_us=2.0 * s.moe_layers * 1e-3 / PREFILL_TOKENS_PER_GPU,
                         work=1.0, measured=r.value_per_gpu)
    b = _batches(r, s)[1]
    step = ep_step(s, b, overlap=ov, knobs=prior)
    parts = 1 if ov == Overlap.SUM else 2
    return StepTerms(compute_ms=step.attention_ms + step.experts_ms, comm_ms=step.comm_ms,
                     fixed_ms_per_us=parts * s.moe_layers * 1e-3, overlapped=ov == Overlap.TBO,
                     work=b / s.layout.ep, measured=r.value_per_gpu)


def check_row(r: EpRow, catalog: Catalog | None = None, *, fit: EpFit | None = None,
              held_out: EpFit | None = None) -> EpCheck:
    """Row `r` beside its predictions (the row must pass `skip_reason`): the spec sheet, the
    prior, the in-sample `fit` and the `held_out` fit (NaN where not given)."""
    s = setup_of(r, catalog)
    prior = typical_ep_knobs()

    def at(f: EpFit | None) -> float:
        if f is None:
            return math.nan
        return predict_row(r, replace(prior, overlap=f.overlap,
                                      layer_overhead_us=f.layer_overhead_us), catalog)

    if r.phase == "prefill":
        assert r.prompt_tokens is not None
        b_spec = b_typ = math.nan
        frm = "-"
        spec = prefill_tok_s_per_gpu(s, r.prompt_tokens)
        gamma = _placement(s)
    else:
        b_spec, b_typ, frm = _batches(r, s)
        spec = ep_step(s, b_spec).bound_tok_s_per_gpu
        gamma = ep_step(s, b_typ, overlap=row_overlap(r), knobs=prior).imbalance
        b_spec, b_typ = b_spec / s.layout.ep, b_typ / s.layout.ep
    return EpCheck(id=r.id, phase=r.phase, layout=s.layout.describe(), gpu=r.gpu,
                   context_tokens=s.context_tokens, batch_per_gpu_spec=b_spec,
                   batch_per_gpu_typical=b_typ, batch_from=frm, measured=r.value_per_gpu,
                   spec=spec, typical=at(fit), imbalance=gamma, source=r.source,
                   prior=predict_row(r, prior, catalog), held_out=at(held_out),
                   overlap=row_overlap(r).value,
                   held_out_knobs=(held_out.overlap, held_out.layer_overhead_us) if held_out
                   else (math.nan, math.nan))


def ep_scorecard(rows: Iterable[EpRow] | None = None,
                 catalog: Catalog | None = None) -> EpScorecard:
    """Score every row (default: data/reference/moe_ep.csv): fit the two knobs to the scored
    rows, and to each row's complement for its held-out prediction."""
    cat = catalog or default_catalog()
    ok: list[tuple[EpRow, StepTerms]] = []
    skipped: list[Skipped] = []
    for r in load_rows() if rows is None else rows:
        why = skip_reason(r, cat)
        if not why:
            try:
                ok.append((r, row_terms(r, cat)))
            except CapacityError as exc:
                why = str(exc)
        if why:
            skipped.append(Skipped(id=r.id, reason=why))
    terms = [t for _, t in ok]
    fit = fit_knobs(terms) if len(terms) >= 2 else None
    loo = [f for f, _ in leave_one_out(terms)] if len(terms) >= 2 else [None] * len(terms)
    checks = [check_row(r, cat, fit=fit, held_out=h) for (r, _), h in zip(ok, loo, strict=True)]
    return EpScorecard(checks=tuple(checks), skipped=tuple(skipped), fit=fit)


# -- written out: Markdown (docs/accuracy.md), JSON -------------------------------------------
def markdown(card: EpScorecard) -> str:
    """The section as Markdown: the result, the error by basis and phase, the fitted knobs,
    every row, the rows not scored."""
    ho, spec, prior = card.error("held_out"), card.error("spec"), card.error("prior")
    typ = card.error("typical")
    fit = card.fit
    fitted = (f"overlap {fit.overlap:.2f} and {fit.layer_overhead_us:.0f} us per MoE layer and "
              "micro-batch" if fit else "none (fewer than two rows)")
    lines = [
        "### MoE with wide expert parallelism", "",
        f"{len(card.checks)} rows of data/reference/moe_ep.csv (published large-scale EP serving "
        "of DeepSeek-V3/R1: SGLang on H100 and GB200 NVL72, DeepSeek's own H800 service; "
        f"{sum(c.phase == 'decode' for c in card.checks)} decode, "
        f"{sum(c.phase == 'prefill' for c in card.checks)} prefill) against "
        "capacity/model/expert_parallel.py (docs/expert-parallel.md). Typical EP basis: the "
        "published kernel knobs of data/ep_knobs.toml (DeepEP, DeepGEMM, FlashMLA, "
        "FlashAttention-3) plus two knobs fitted to these rows (capacity/fit/ep_fit.py), "
        f"in-sample {fitted}. **Held out** (each row predicted by the two knobs fitted to the "
        f"other rows alone): median |error| **{_f(ho.median, '.1%')}** (target: within "
        f"{TARGET_ERROR:.0%}; {'met' if ho.median <= TARGET_ERROR else 'NOT met'}), worst "
        f"{_f(max(card.errors('held_out'), key=abs, default=None), '+.1%')}; in-sample "
        f"{_f(typ.median, '.1%')}; the published knobs alone (perfect overlap, no fixed time) "
        f"{_f(prior.median, '.1%')}. The spec sheet is at or above the measured throughput on "
        f"{card.bounded} of {len(card.checks)} rows (median {_f(spec.median, '.1%')} above).", "",
        "| basis | phase | rows | median abs error | worst | median signed |",
        "|---|---|---:|---:|---:|---:|"]
    for basis in BASES:
        for phase in (None, "decode", "prefill"):
            errs = card.errors(basis, phase)
            lines.append(f"| {basis.replace('_', ' ')} | {phase or 'all'} | {error_cells(errs)} |")
    lines += ["", "| row | phase | layout | overlap | context | batch per GPU (spec / typical) | "
              "measured tok/s/GPU | spec | error | prior | error | typical | error | held out "
              "| error | knobs without the row | imbalance |",
              "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for c in card.checks:
        o, u = c.held_out_knobs
        lines.append(
            f"| {c.id} | {c.phase} | {c.gpu}, {c.layout} | {c.overlap} | {c.context_tokens} | "
            f"{_f(c.batch_per_gpu_spec, '.0f')} / {_f(c.batch_per_gpu_typical, '.0f')} | "
            f"{c.measured:,.0f} | {c.spec:,.0f} | {c.error('spec'):+.1%} | {c.prior:,.0f} | "
            f"{c.error('prior'):+.1%} | {_f(c.typical, ',.0f')} | {_f(c.error('typical'), '+.1%')}"
            f" | {_f(c.held_out, ',.0f')} | {_f(c.error('held_out'), '+.1%')} | "
            f"{_f(o, '.2f')}, {_f(u, '.0f')} us | {c.imbalance:.3f} |")
    lines += not_scored_lines([(s.id, s.reason) for s in card.skipped])
    return "\n".join(lines) + "\n"


def to_dict(card: EpScorecard) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None)."""
    return dict(jsonable({
        "rows": len(card.checks), "target": TARGET_ERROR, "bounded": card.bounded,
        "fit": asdict(card.fit) if card.fit else None,
        "error": {b: {**asdict(card.error(b)), "bias": Spread.of(card.errors(b)).median}
                  for b in BASES},
        "checks": [{**asdict(c), "error": {b: c.error(b) for b in BASES},
                    "bounded": c.bounded} for c in card.checks],
        "skipped": [asdict(s) for s in card.skipped]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the speculative-decoding section, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=DRAFTS_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
