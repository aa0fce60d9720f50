"""`capacity validate`'s section "Our own GPU: PyTorch kernels": the forward passes this project
measured itself on a data-centre GPU (data/reference/gpu_probe/, `benchmarks/gpu_step_probe.py`)
against the typical vLLM basis, with no knob fitted to them, and the spec sheet's bound.

Three kinds of pass, each a whole forward pass of a catalog model with random weights under
CUDA graphs, run eagerly and (`_compiled`) with each layer compiled by TorchInductor, which fuses
the norms, rotary embedding, residuals and activation as vLLM V1's compilation does: the nearest
to an engine's pass these rows hold (docs/accuracy.md, "Our own GPU measurement"):
- decode: `batch` sequences at `context` tokens of KV; predicted by the Explorer's decode step
  (`scenario.evaluate`, F4 with F11's knobs);
- prefill: one prompt of `tokens` tokens, nothing queued; predicted by F6 with the prefill curve
  F6c (`Evaluation.prefill_s`, the GPU's part of a TTFT);
- mixed: a decode batch and a prefill chunk in one pass, scored as what the chunk adds to the
  same batch's decode step (measured: the mixed pass less the decode row of that batch and
  context; predicted: the event model's `ServiceModel.mixed_step_ms` with and without the
  chunk), so the decode context, which the service model takes from the scenario, cancels.

Every row is also checked against the spec-sheet bound (the same pass with every efficiency at
its peak, no overhead): a measured pass faster than that bound is a row the spec sheet does
not bound. The eager passes are not an engine's (unfused norms and activations:
data/reference/gpu_probe/README.md), so the level of an eager decode step is expected above
the typical basis' (a vLLM-like engine's); the ratio of each step to the same context's
one-sequence step (`shape`) is what the hardware alone sets. A pass pairs with the latest row
before it of the same step, so with its own run's: a mixed pass with the decode step of its
batch and context, a decode step with the one-sequence step of its context.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from capacity import workspace
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CatalogError
from capacity.fit.planning import scenario_with_basis
from capacity.fit.validate import Spread
from capacity.fit.validate_report import between_markers, jsonable, write_between_markers
from capacity.fit.validate_typical import END as TYPICAL_END
from capacity.model.basis import SPEC_SHEET
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.plan.service_build import service_from_scenario
from capacity.untrusted import read_utf8

BEGIN: Final = "<!-- validate-gpu-probe:begin -->"
END: Final = "<!-- validate-gpu-probe:end -->"
FOLDER: Final = ("reference", "gpu_probe")
"""Where the probe's JSON lines live under the data folder; a file is `<gpu key>-<date>.jsonl`."""
BASIS: Final = "typical:vllm"
KINDS: Final = ("decode", "decode_compiled", "prefill", "prefill_compiled", "mixed",
                 "mixed_compiled")


@dataclass(frozen=True, kw_only=True)
class ProbeCheck:
    """One measured pass beside its predictions (ms)."""

    kind: str
    model: str
    gpu: str
    batch: int
    context: int
    tokens: int
    """Prompt tokens (prefill) or chunk tokens (mixed); 0 for decode."""
    measured_ms: float
    typical_ms: float
    spec_ms: float
    measured_shape: float = math.nan
    """decode: this step / the one-sequence step at the same context and run, measured (NaN
    else)."""
    typical_shape: float = math.nan

    @property
    def error(self) -> float:
        return self.typical_ms / self.measured_ms - 1.0

    @property
    def shape_error(self) -> float:
        return self.typical_shape / self.measured_shape - 1.0

    @property
    def bounded(self) -> bool:
        """The spec sheet is an upper bound on speed: its pass no longer than the measured."""
        return self.spec_ms <= self.measured_ms * (1.0 + 1e-9)


@dataclass(frozen=True, kw_only=True)
class ProbeScorecard:
    checks: tuple[ProbeCheck, ...]
    sources: tuple[str, ...]
    """The files scored (data folder relative) with each one's device and date."""
    copy_gb_s: float = math.nan
    gemm_tflops: float = math.nan
    """The fastest copy (GB/s, read + written) and bf16 GEMM (TFLOP/s) of the files."""

    def of(self, kind: str) -> tuple[ProbeCheck, ...]:
        return tuple(c for c in self.checks if c.kind == kind)

    def error(self, kind: str) -> Spread:
        return Spread.of(abs(c.error) for c in self.of(kind))

    def bias(self, kind: str) -> float:
        return Spread.of(c.error for c in self.of(kind)).median

    def shape_errors(self, kind: str = "decode") -> list[float]:
        return [c.shape_error for c in self.of(kind) if c.batch > 1]

    def shape_error(self, kind: str = "decode") -> Spread:
        return Spread.of(abs(e) for e in self.shape_errors(kind))

    @property
    def bounded(self) -> int:
        return sum(c.bounded for c in self.checks)


def probe_files() -> list[Path]:
    """The committed probe files (the bundled data folder's), sorted by name."""
    folder = workspace.bundled_data_dir().joinpath(*FOLDER)
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def load_rows(path: Path) -> list[dict[str, Any]]:
    """One probe file's JSON lines; CatalogError naming the line that does not parse."""
    rows = []
    for i, line in enumerate(read_utf8(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CatalogError(f"{path.name} line {i}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or "kind" not in row:
            raise CatalogError(f"{path.name} line {i}: an object with a 'kind' is needed")
        rows.append(row)
    return rows


def gpu_of(path: Path) -> str:
    """The catalog GPU key of a probe file: its name less the date. Example:
    h200-sxm-20261204.jsonl -> h200-sxm."""
    return path.stem.rsplit("-", 1)[0]


def _pair(model: str, gpu: str, cat: Catalog, **kw: Any) -> tuple[Scenario, Scenario]:
    s = make_scenario(model, gpu, catalog=cat, **kw)
    return scenario_with_basis(s, BASIS), scenario_with_basis(s, SPEC_SHEET)


def _decode(r: dict[str, Any], gpu: str, cat: Catalog) -> tuple[float, float]:
    typ, spec = _pair(r["model"], gpu, cat, context_tokens=int(r["context"]))
    b = [int(r["batch"])]
    return (float(evaluate(typ, b).decode.step_ms[0]),
            float(evaluate(spec, b).decode.step_ms[0]))


def _prefill(r: dict[str, Any], gpu: str, cat: Catalog) -> tuple[float, float]:
    n = int(r["tokens"])
    typ, spec = _pair(r["model"], gpu, cat, context_tokens=n, prompt_tokens=n)
    return float(evaluate(typ, [1]).prefill_s) * 1e3, float(evaluate(spec, [1]).prefill_s) * 1e3


def _chunk_added(r: dict[str, Any], gpu: str, cat: Catalog) -> tuple[float, float]:
    """What the chunk adds to the batch's step in the event model's mixed pass, ms."""
    b, n = int(r["batch"]), int(r["chunk"])
    ctx = max(int(r["context"]), n) + 1
    out = []
    for s in _pair(r["model"], gpu, cat, context_tokens=ctx, prompt_tokens=n):
        sm = service_from_scenario(s, output_tokens=1, chunk_tokens=b + n, max_num_seqs=b,
                                   engine="vllm")
        out.append(sm.mixed_step_ms(b, [(0, n)]) - sm.mixed_step_ms(b, []))
    return out[0], out[1]


def gpu_probe_scorecard(catalog: Catalog | None = None,
                        files: list[Path] | None = None) -> ProbeScorecard:
    """Every decode, prefill and mixed row of the probe files on the typical basis and the spec
    sheet (module docstring)."""
    cat = catalog or default_catalog()
    checks: list[ProbeCheck] = []
    sources: list[str] = []
    copy, gemm = math.nan, math.nan
    for path in probe_files() if files is None else files:
        gpu = gpu_of(path)
        rows = load_rows(path)
        env = next((r for r in rows if r["kind"] == "env"), {})
        sources.append(f"{path.name} ({env.get('device', '?')}, {env.get('date', '?')}, "
                       f"torch {env.get('torch', '?')})")
        copy = max((r["bytes"] / r["ms"] / 1e6 for r in rows if r["kind"] == "copy"
                    and r.get("op") == "copy"), default=copy)
        gemm = max((float(r["tflops"]) for r in rows if r["kind"] in ("gemm", "mamf")),
                   default=gemm)
        # each pass pairs with the latest row before it of the same step (its run's)
        latest: dict[tuple[str, str, int, int], tuple[float, float]] = {}
        for r in rows:
            kind = r["kind"]
            if kind in ("decode", "decode_compiled"):
                typ, spec = _decode(r, gpu, cat)
                key = (kind, r["model"], int(r["context"]), int(r["batch"]))
                latest[key] = (float(r["ms"]), typ)
                base = latest.get((*key[:3], 1))
                checks.append(ProbeCheck(
                    kind=kind, model=r["model"], gpu=gpu, batch=int(r["batch"]),
                    context=int(r["context"]), tokens=0, measured_ms=float(r["ms"]),
                    typical_ms=typ, spec_ms=spec,
                    measured_shape=math.nan if base is None else float(r["ms"]) / base[0],
                    typical_shape=math.nan if base is None else typ / base[1]))
            elif kind in ("prefill", "prefill_compiled"):
                typ, spec = _prefill(r, gpu, cat)
                checks.append(ProbeCheck(kind=kind, model=r["model"], gpu=gpu, batch=1,
                                         context=0, tokens=int(r["tokens"]),
                                         measured_ms=float(r["ms"]), typical_ms=typ,
                                         spec_ms=spec))
            elif kind in ("mixed", "mixed_compiled"):
                step = kind.replace("mixed", "decode")  # mixed_compiled -> decode_compiled
                alone = latest.get((step, r["model"], int(r["context"]), int(r["batch"])))
                if alone is None:
                    continue
                typ, spec = _chunk_added(r, gpu, cat)
                checks.append(ProbeCheck(kind=kind, model=r["model"], gpu=gpu,
                                         batch=int(r["batch"]), context=int(r["context"]),
                                         tokens=int(r["chunk"]),
                                         measured_ms=float(r["ms"]) - alone[0],
                                         typical_ms=typ, spec_ms=spec))
    return ProbeScorecard(checks=tuple(checks), sources=tuple(sources), copy_gb_s=copy,
                          gemm_tflops=gemm)


# -- written out: Markdown (docs/accuracy.md), JSON -------------------------------------------
LABELS: Final = {"decode": "decode step (eager)",
                  "decode_compiled": "decode step (layers compiled)",
                  "prefill": "prefill, one prompt, no queue (eager)",
                  "prefill_compiled": "prefill, one prompt, no queue (layers compiled)",
                  "mixed": "what a prefill chunk adds to a decode step (eager)",
                  "mixed_compiled": "what a prefill chunk adds to a decode step (layers compiled)"}


def _row(c: ProbeCheck) -> str:
    what = (f"{c.tokens:,}" if c.kind.startswith("prefill") else
            f"{c.batch} x {c.context:,}" + (f" + {c.tokens:,}" if c.kind.startswith("mixed")
                                            else ""))
    shape = (f" | {c.measured_shape:.2f} | {c.typical_shape:.2f}" if c.kind.startswith("decode")
             else "")
    return (f"| {c.model} | {what} | {c.measured_ms:.2f} | {c.typical_ms:.2f} | "
            f"{c.error:+.1%} | {c.spec_ms:.2f}{'' if c.bounded else ' (faster!)'}{shape} |")


def markdown(card: ProbeScorecard) -> str:
    """The section's Markdown: the summary, then each kind's table."""
    if not card.checks:
        return "### Our own GPU: PyTorch kernels\n\nNo probe file is committed.\n"
    n = len(card.checks)
    lines = [
        "### Our own GPU: PyTorch kernels",
        "",
        "Whole forward passes measured by this project on its own GPU "
        "(`benchmarks/gpu_step_probe.py`; data/reference/gpu_probe/): "
        + "; ".join(card.sources) + ". Random weights, the catalog's shapes, bf16, CUDA "
        "graphs; not a serving engine. Run eagerly, its norms and activations take about 2 ms "
        "of Llama-3.1-8B's 6.3 ms one-sequence step, so that step's level is expected above "
        "the typical basis'; with each layer compiled (fused, as vLLM V1 compiles) it is the "
        f"nearest these rows come to an engine. Predicted on `{BASIS}` with no knob fitted to these rows "
        "(`capacity.fit.validate_gpu_probe`). The fastest copy measured "
        f"{card.copy_gb_s:,.0f} GB/s (data/matmul_ceilings.toml's `copy_gb_s`), the fastest "
        f"bf16 GEMM {card.gemm_tflops:,.0f} TFLOP/s.",
        "",
        "| rows | n | median abs. error | signed median | worst |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in KINDS:
        e = card.error(kind)
        if e.n:
            lines.append(f"| {LABELS[kind]} | {e.n} | {e.median:.1%} | {card.bias(kind):+.1%} | "
                         f"{e.high:.1%} |")
    for kind in ("decode", "decode_compiled"):
        sh = card.shape_error(kind)
        if sh.n:
            lines.append(f"| {LABELS[kind]} / its one-sequence step (shape) | {sh.n} | "
                         f"{sh.median:.1%} | {Spread.of(card.shape_errors(kind)).median:+.1%} "
                         f"| {sh.high:.1%} |")
    lines += ["", f"The spec sheet bounds {card.bounded} of {n} passes (its pass at every "
              "efficiency's peak is no longer than the measured one).", ""]
    heads = {"decode": ("batch x context", " | measured shape | typical shape"),
             "decode_compiled": ("batch x context", " | measured shape | typical shape"),
             "prefill": ("prompt tokens", ""), "prefill_compiled": ("prompt tokens", ""),
             "mixed": ("batch x context + chunk (ms added by the chunk)", ""),
             "mixed_compiled": ("batch x context + chunk (ms added by the chunk)", "")}
    for kind in KINDS:
        rows = card.of(kind)
        if not rows:
            continue
        head, extra = heads[kind]
        lines += [f"{LABELS[kind][0].upper()}{LABELS[kind][1:]}:", ""]
        cols = 6 + (2 if extra else 0)
        lines += [f"| model | {head} | measured ms | typical ms | error | spec-sheet ms{extra} |",
                  "|" + "---|" * 2 + "---:|" * (cols - 2)]
        lines += [_row(c) for c in rows]
        lines.append("")
    return "\n".join(lines)


def to_dict(card: ProbeScorecard) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None)."""
    return dict(jsonable({
        "basis": BASIS, "sources": list(card.sources), "copy_gb_s": card.copy_gb_s,
        "gemm_tflops": card.gemm_tflops, "bounded": card.bounded, "rows": len(card.checks),
        "error": {k: {**asdict(card.error(k)), "bias": card.bias(k)} for k in KINDS},
        "shape_error": {k: asdict(card.shape_error(k)) for k in ("decode", "decode_compiled")},
        "checks": [{**asdict(c), "error": c.error, "bounded": c.bounded} for c in card.checks]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the typical basis' section, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=TYPICAL_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
