"""Published speculative-decoding data: acceptance lengths and measured speed-ups.

Two bundled, read-only files (each row with its source and date, as published):

- `data/speculative.toml`: one `[[acceptance]]` table per published acceptance length tau (mean
  tokens a sequence emits per target forward pass, bonus token included, so 1 <= tau <= depth + 1)
  for a model, a draft kind (`DRAFT_KINDS`) and a depth (draft tokens per step). Rows measured
  with a draft tree carry `tree_tokens` (tokens verified per step); lookups leave them out unless
  asked, since a tree accepts more, and costs more, than a chain of the same depth.
- `data/reference/speculative.csv`: speed-ups of a draft over no draft (throughput or TPOT)
  against batch size or concurrency, for scoring.

A bad row raises `InputError` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from capacity import workspace
from capacity.errors import InputError
from capacity.untrusted import loads_toml, read_utf8

DraftKind = Literal["mtp", "eagle", "ngram"]
DRAFT_KINDS: tuple[str, ...] = ("mtp", "eagle", "ngram")
"""mtp: the model's own multi-token-prediction module; eagle: a trained EAGLE/EAGLE-3 head;
ngram: prompt lookup (no weights)."""
ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm", "other")
SPEEDUP_METRICS: tuple[str, ...] = ("throughput", "tpot")
ACCEPTANCE_FILE = "speculative.toml"
SPEEDUP_FILE = "speculative.csv"
SPEEDUP_COLUMNS: tuple[str, ...] = (
    "model", "gpu", "engine", "tp", "weights", "kind", "depth", "batch", "metric", "speedup",
    "acceptance_length", "prompt_tokens", "output_tokens", "dataset", "source", "as_of", "notes")
_AS_OF = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
_ACCEPTANCE_KEYS = frozenset({
    "models", "family", "kind", "depth", "acceptance_length", "dataset", "source", "as_of",
    "notes", "draft_params_b", "draft_weights_gb", "temperature", "tree_tokens"})


@dataclass(frozen=True, kw_only=True)
class AcceptanceRow:
    """One published acceptance length: `acceptance_length` (tau, tokens per target forward pass
    per sequence, bonus token included) of a `kind` draft proposing `depth` tokens per step."""

    models: tuple[str, ...]
    family: str
    kind: str
    depth: int
    acceptance_length: float
    dataset: str
    source: str
    as_of: str
    notes: str = ""
    draft_params_b: float | None = None
    draft_weights_gb: float | None = None
    temperature: float | None = None
    tree_tokens: int | None = None
    """Draft tokens verified per step when the draft is a tree (None: a chain of `depth`)."""


@dataclass(frozen=True, kw_only=True)
class SpeedupRow:
    """One published speed-up (`metric` with the draft / without it) at one batch size."""

    model: str
    gpu: str
    engine: str
    tp: int
    weights: str
    kind: str
    depth: int | None
    batch: int
    metric: str
    speedup: float
    acceptance_length: float | None
    prompt_tokens: int | None
    output_tokens: int | None
    dataset: str
    source: str
    as_of: str
    notes: str = ""


class _Fields:
    """Typed reads of one row's fields; every error names the row and the field."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw, self.where = raw, where

    def fail(self, field: str, problem: str) -> InputError:
        return InputError(f"{self.where}: field '{field}' {problem}")

    def text(self, field: str, *, required: bool = True) -> str:
        value = self.raw.get(field, "")
        if not isinstance(value, str):
            raise self.fail(field, f"must be text, not {value!r}")
        if required and not value.strip():
            raise self.fail(field, "is missing or empty")
        return value.strip()

    def _blank(self, field: str) -> bool:
        return self.raw.get(field) is None or self.raw.get(field) == ""

    def number(self, field: str, *, low: float = 0.0) -> float:
        value = self.raw.get(field)
        if self._blank(field):
            raise self.fail(field, "is missing")
        try:
            number = math.nan if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number) or number < low:
            raise self.fail(field, f"must be a number >= {low:g}, not {value!r}")
        return number

    def maybe_number(self, field: str, *, low: float = 0.0) -> float | None:
        return None if self._blank(field) else self.number(field, low=low)

    def integer(self, field: str, *, low: int = 1) -> int:
        value = self.raw.get(field)
        if self._blank(field):
            raise self.fail(field, "is missing")
        if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(field, f"must be an integer >= {low}, not {value!r}")
        return value

    def maybe_integer(self, field: str, *, low: int = 1) -> int | None:
        return None if self._blank(field) else self.integer(field, low=low)

    def choice(self, field: str, choices: Sequence[str]) -> str:
        value = self.text(field)
        if value not in choices:
            raise self.fail(field, f"must be one of {', '.join(choices)}, not {value!r}")
        return value

    def as_of(self) -> str:
        value = self.text("as_of")
        if not _AS_OF.match(value):
            raise self.fail("as_of", f"must be a month YYYY-MM, not {value!r}")
        return value

    def tau(self, depth: int | None) -> float:
        tau = self.number("acceptance_length", low=1.0)
        if depth is not None and tau > depth + 1 + 1e-9:
            raise self.fail("acceptance_length", f"{tau:g} exceeds depth + 1 = {depth + 1}")
        return tau

    def maybe_tau(self, depth: int | None) -> float | None:
        return None if self._blank("acceptance_length") else self.tau(depth)


def _acceptance_row(raw: Any, where: str) -> AcceptanceRow:
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: must be a table")
    f = _Fields(raw, where)
    unknown = sorted(set(raw) - _ACCEPTANCE_KEYS)
    if unknown:
        raise f.fail(unknown[0], f"is not a known field ({', '.join(sorted(_ACCEPTANCE_KEYS))})")
    models = raw.get("models")
    if (not isinstance(models, list) or not models
            or not all(isinstance(m, str) and m.strip() for m in models)):
        raise f.fail("models", f"must be a non-empty list of model keys, not {models!r}")
    depth = f.integer("depth")
    return AcceptanceRow(
        models=tuple(m.strip() for m in models), family=f.text("family"),
        kind=f.choice("kind", DRAFT_KINDS), depth=depth, acceptance_length=f.tau(depth),
        dataset=f.text("dataset"), source=f.text("source"), as_of=f.as_of(),
        notes=f.text("notes", required=False),
        draft_params_b=f.maybe_number("draft_params_b"),
        draft_weights_gb=f.maybe_number("draft_weights_gb"),
        temperature=f.maybe_number("temperature"),
        tree_tokens=f.maybe_integer("tree_tokens"))


def parse_acceptance(text: str, where: str = ACCEPTANCE_FILE) -> tuple[AcceptanceRow, ...]:
    """The `[[acceptance]]` rows of a speculative.toml text (InputError on a bad row)."""
    try:
        data = loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML ({exc})") from None
    tables = data.get("acceptance", [])
    if not isinstance(tables, list):
        raise InputError(f"{where}: 'acceptance' must be an array of tables ([[acceptance]])")
    return tuple(_acceptance_row(t, f"{where} [[acceptance]] #{i + 1}")
                 for i, t in enumerate(tables))


@cache
def _bundled_acceptance(path: str) -> tuple[AcceptanceRow, ...]:
    return parse_acceptance(read_utf8(path), Path(path).name)


def load_acceptance(path: str | Path | None = None) -> tuple[AcceptanceRow, ...]:
    """Published acceptance lengths (tau, tokens per target forward pass per sequence) from
    `path`, else the bundled data/speculative.toml (parsed once per process). Sources: each
    row's `source` and `as_of`."""
    if path is None:
        return _bundled_acceptance(str(workspace.bundled_data_dir() / ACCEPTANCE_FILE))
    return parse_acceptance(read_utf8(path), Path(path).name)


def _matching(model_key: str, kind: str, rows: Sequence[AcceptanceRow] | None,
              include_trees: bool) -> tuple[list[AcceptanceRow], list[AcceptanceRow]]:
    pool = [r for r in (load_acceptance() if rows is None else rows)
            if r.kind == kind and (include_trees or r.tree_tokens is None)]
    return [r for r in pool if model_key in r.models], [r for r in pool if "*" in r.models]


def acceptance_for(model_key: str, kind: str, depth: int,
                   rows: Sequence[AcceptanceRow] | None = None, *,
                   include_trees: bool = False) -> AcceptanceRow | None:
    """The published row for `model_key` (a catalog model key) with a `kind` draft of `depth`
    tokens: of several, the one whose tau is closest to their median (the first in file order on
    a tie); else a "*" (typical across models) row of that kind and depth; else None. Tree-draft
    rows count only with `include_trees`. `rows` defaults to the bundled data/speculative.toml."""
    exact, typical = _matching(model_key, kind, rows, include_trees)
    for group in (exact, typical):
        found = [r for r in group if r.depth == depth]
        if found:
            middle = statistics.median(r.acceptance_length for r in found)
            return min(found, key=lambda r: abs(r.acceptance_length - middle))
    return None


def depths_for(model_key: str, kind: str, rows: Sequence[AcceptanceRow] | None = None, *,
               include_trees: bool = False) -> tuple[int, ...]:
    """The draft depths (tokens per step) with published tau for `model_key` and `kind`, from
    its own rows or "*" rows, ascending; tree-draft rows count only with `include_trees`."""
    exact, typical = _matching(model_key, kind, rows, include_trees)
    return tuple(sorted({r.depth for r in (*exact, *typical)}))


def _speedup_row(raw: Mapping[str, Any], where: str) -> SpeedupRow:
    f = _Fields(raw, where)
    depth = f.maybe_integer("depth")
    return SpeedupRow(
        model=f.text("model"), gpu=f.text("gpu"), engine=f.choice("engine", ENGINES),
        tp=f.integer("tp"), weights=f.text("weights"), kind=f.choice("kind", DRAFT_KINDS),
        depth=depth, batch=f.integer("batch"), metric=f.choice("metric", SPEEDUP_METRICS),
        speedup=f.number("speedup", low=1e-9), acceptance_length=f.maybe_tau(depth),
        prompt_tokens=f.maybe_integer("prompt_tokens"),
        output_tokens=f.maybe_integer("output_tokens"),
        dataset=f.text("dataset"), source=f.text("source"), as_of=f.as_of(),
        notes=f.text("notes", required=False))


def parse_speedups(text: str, where: str = SPEEDUP_FILE) -> tuple[SpeedupRow, ...]:
    """The rows of a speculative.csv text: leading '#' lines are comments, then the header
    (exactly `SPEEDUP_COLUMNS`), then one row per measured point (InputError on a bad row,
    naming its line in the file)."""
    lines = text.splitlines()
    skipped = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    reader = csv.DictReader(lines[skipped:])
    if tuple(reader.fieldnames or ()) != SPEEDUP_COLUMNS:
        raise InputError(f"{where}: the header must be {','.join(SPEEDUP_COLUMNS)}, "
                         f"not {','.join(reader.fieldnames or ())}")
    rows = []
    for raw in reader:
        at = f"{where} line {skipped + reader.line_num}"
        if None in raw or any(v is None for v in raw.values()):
            raise InputError(f"{at}: {len(SPEEDUP_COLUMNS)} columns expected")
        rows.append(_speedup_row(raw, at))
    return tuple(rows)


@cache
def _bundled_speedups(path: str) -> tuple[SpeedupRow, ...]:
    return parse_speedups(read_utf8(path), Path(path).name)


def load_speedups(path: str | Path | None = None) -> tuple[SpeedupRow, ...]:
    """Published speed-ups of a draft over no draft (throughput or TPOT, >1 = faster) at each
    batch size, from `path`, else the bundled data/reference/speculative.csv (parsed once per
    process). Sources: each row's `source` and `as_of`."""
    if path is None:
        return _bundled_speedups(str(workspace.reference_dir() / SPEEDUP_FILE))
    return parse_speedups(read_utf8(path), Path(path).name)
