"""The scorecard's wide expert-parallel section (`capacity validate`, docs/accuracy.md, "MoE with
wide expert parallelism"): published large-scale EP serving of DeepSeek-V3/R1 against
`capacity.model.expert_parallel` (docs/expert-parallel.md).

Each row of data/reference/moe_ep.csv (`load_rows`) the model can take (model, GPU and weight
format in the catalog, no MTP stated, a prompt length stated) becomes one `EpCheck`: the row's
EP degree, attention parallelism and redundant experts (0 where not stated) on its GPU, the KV
held at prompt + output tokens (the prompt alone where no output length is stated), and

- decode rows (output tok/s per GPU): on the spec sheet, the bound (`bound_ms`: peak, balanced,
  communication hidden) at the stated batch, else the most sequences that fit at util 1 with
  no overheads; on the typical basis, vLLM's typical knobs (data/engines.toml: eta_bw, eff, the
  per-step overhead), the project's memory defaults, two-batch overlap, the family's imbalance
  (data/moe_imbalance.toml), at the stated batch, else the most that fit capped at
  `MAX_TOKENS_PER_RANK` per GPU;
- prefill rows (input tok/s per GPU): `prefill_tok_s_per_gpu` at MFU 1 and balanced load (spec
  sheet), at the typical MFU and the placement's imbalance (typical).

Error = predicted / measured - 1. The spec sheet must be an upper bound (error >= 0) on every
row. Rows not scored carry their reason. Nothing here is fitted to these rows.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from capacity import workspace
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.fit.planning import typical_efficiency
from capacity.fit.validate import Spread, relative_error
from capacity.fit.validate_drafts import END as DRAFTS_END
from capacity.fit.validate_report import between_markers, jsonable, write_between_markers
from capacity.model.expert_parallel import (
    MAX_TOKENS_PER_RANK,
    EpSetup,
    ep_layout,
    ep_memory,
    ep_setup,
    ep_step,
    imbalance_factor,
    prefill_tok_s_per_gpu,
)

ROWS_FILE: Final = "moe_ep.csv"
TARGET_ERROR: Final = 0.25
"""Issue 27's target: the typical basis within 25 % median of the rows' throughput per GPU."""
TYPICAL_ENGINE: Final = "vllm"
"""The engine whose data/engines.toml knobs the typical basis uses (the only one it has)."""
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
            engine=r["engine"], source=r["source"], as_of=r["as_of"], notes=r["notes"])
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
    imbalance: float
    source: str

    def error(self, basis: str) -> float:
        """predicted / measured - 1 on 'spec' or 'typical'."""
        return relative_error(self.spec if basis == "spec" else self.typical, self.measured)

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
    """Row `r`'s deployment: its GPU, EP, attention TP and redundancy; KV at prompt + output."""
    assert r.ep is not None and r.prompt_tokens is not None
    lay = ep_layout(r.gpu, r.ep, attention_tp=r.attention_tp or 1,
                    redundant_experts=r.redundant_experts or 0)
    return ep_setup(r.model, r.gpu, lay, context_tokens=r.prompt_tokens + (r.output_tokens or 0),
                    kv_dtype=r.kv_dtype, weights=r.weights, catalog=catalog)


def check_row(r: EpRow, catalog: Catalog | None = None) -> EpCheck:
    """Row `r` beside its predictions (the row must pass `skip_reason`)."""
    s = setup_of(r, catalog)
    knobs = typical_efficiency(TYPICAL_ENGINE).typical
    ep = s.layout.ep
    if r.phase == "prefill":
        assert r.prompt_tokens is not None
        gamma = imbalance_factor(experts=s.experts, active=s.active, exponent=s.exponent,
                                 gpus=ep, redundant=s.layout.redundant_experts)
        spec = prefill_tok_s_per_gpu(s, r.prompt_tokens)
        typ = prefill_tok_s_per_gpu(s, r.prompt_tokens, mfu=knobs["mfu"], imbalance=gamma)
        return EpCheck(id=r.id, phase=r.phase, layout=s.layout.describe(), gpu=r.gpu,
                       context_tokens=s.context_tokens, batch_per_gpu_spec=math.nan,
                       batch_per_gpu_typical=math.nan, batch_from="-", measured=r.value_per_gpu,
                       spec=spec, typical=typ, imbalance=gamma, source=r.source)
    roomy = ep_memory(s, util=1.0, overhead_gb=0.0, buffers_gb=0.0).max_batch
    usual = min(ep_memory(s).max_batch, MAX_TOKENS_PER_RANK * ep)
    if r.batch_per_gpu is not None:
        b_spec = b_typ = float(r.batch_per_gpu * ep)
        frm = "stated or derived by the row"
    else:
        b_spec, b_typ = float(roomy), float(usual)
        frm = f"most that fit (typical: at most {MAX_TOKENS_PER_RANK} per GPU)"
    if b_spec <= 0 or b_typ <= 0:
        raise CapacityError(f"{r.id}: the weights do not fit {r.gpu} at EP {ep}")
    step = ep_step(s, b_typ, eta_bw=knobs["eta_bw"], eff=knobs["eff"],
                   overhead_ms=knobs["step_overhead_ms"])
    spec = ep_step(s, b_spec).bound_tok_s_per_gpu
    return EpCheck(id=r.id, phase=r.phase, layout=s.layout.describe(), gpu=r.gpu,
                   context_tokens=s.context_tokens, batch_per_gpu_spec=b_spec / ep,
                   batch_per_gpu_typical=b_typ / ep, batch_from=frm, measured=r.value_per_gpu,
                   spec=spec, typical=step.tok_s_per_gpu, imbalance=step.imbalance,
                   source=r.source)


def ep_scorecard(rows: Iterable[EpRow] | None = None,
                 catalog: Catalog | None = None) -> EpScorecard:
    """Score every row (default: data/reference/moe_ep.csv)."""
    cat = catalog or default_catalog()
    checks: list[EpCheck] = []
    skipped: list[Skipped] = []
    for r in load_rows() if rows is None else rows:
        why = skip_reason(r, cat)
        if not why:
            try:
                checks.append(check_row(r, cat))
            except CapacityError as exc:
                why = str(exc)
        if why:
            skipped.append(Skipped(id=r.id, reason=why))
    return EpScorecard(checks=tuple(checks), skipped=tuple(skipped))


# -- written out: Markdown (docs/accuracy.md), JSON -------------------------------------------
def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None or not math.isfinite(v) else format(v, fmt)


def markdown(card: EpScorecard) -> str:
    """The section as Markdown: the result, the error by basis and phase, every row, the rows
    not scored."""
    typ, spec = card.error("typical"), card.error("spec")
    knobs = typical_efficiency(TYPICAL_ENGINE).typical
    lines = [
        "### MoE with wide expert parallelism", "",
        f"{len(card.checks)} rows of data/reference/moe_ep.csv (published large-scale EP serving "
        "of DeepSeek-V3/R1: SGLang on H100 and GB200 NVL72, DeepSeek's own H800 service) "
        "against capacity/model/expert_parallel.py (docs/expert-parallel.md). Typical basis: "
        f"{TYPICAL_ENGINE}'s knobs from data/engines.toml (eta_bw {knobs['eta_bw']:g}, eff "
        f"{knobs['eff']:g}, MFU {knobs['mfu']:g}), two-batch overlap, the imbalance of "
        "data/moe_imbalance.toml; median |error| "
        f"{_f(typ.median, '.1%')} (target: within {TARGET_ERROR:.0%}), worst "
        f"{_f(max(card.errors('typical'), key=abs, default=None), '+.1%')}. The spec sheet is "
        f"at or above the measured throughput on {card.bounded} of {len(card.checks)} rows "
        f"(median {_f(spec.median, '.1%')} above). Nothing is fitted to these rows.", "",
        "| basis | phase | rows | median abs error | worst | median signed |",
        "|---|---|---:|---:|---:|---:|"]
    for basis in ("spec", "typical"):
        for phase in (None, "decode", "prefill"):
            errs = card.errors(basis, phase)
            worst = max(errs, key=abs, default=None)
            lines.append(f"| {basis} | {phase or 'all'} | {len(errs)} | "
                         f"{_f(card.error(basis, phase).median, '.1%')} | {_f(worst, '+.1%')} | "
                         f"{_f(Spread.of(errs).median, '+.1%')} |")
    lines += ["", "| row | phase | layout | context | batch per GPU (spec / typical) | "
              "measured tok/s/GPU | spec | error | typical | error | imbalance |",
              "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for c in card.checks:
        lines.append(
            f"| {c.id} | {c.phase} | {c.gpu}, {c.layout} | {c.context_tokens} | "
            f"{_f(c.batch_per_gpu_spec, '.0f')} / {_f(c.batch_per_gpu_typical, '.0f')} | "
            f"{c.measured:,.0f} | {c.spec:,.0f} | {c.error('spec'):+.1%} | {c.typical:,.0f} | "
            f"{c.error('typical'):+.1%} | {c.imbalance:.3f} |")
    if card.skipped:
        lines += ["", "Not scored: " + "; ".join(f"{s.id}: {s.reason}"
                                                 for s in card.skipped) + "."]
    return "\n".join(lines) + "\n"


def to_dict(card: EpScorecard) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None)."""
    return dict(jsonable({
        "rows": len(card.checks), "target": TARGET_ERROR, "bounded": card.bounded,
        "error": {b: {**asdict(card.error(b)), "bias": Spread.of(card.errors(b)).median}
                  for b in ("spec", "typical")},
        "checks": [{**asdict(c), "error": {b: c.error(b) for b in ("spec", "typical")},
                    "bounded": c.bounded} for c in card.checks],
        "skipped": [asdict(s) for s in card.skipped]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the speculative-decoding section, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=DRAFTS_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
