"""A measurement plan: the smallest sweep that pins the knobs of a calibration (F11, F4b, F6b)
that its grid can pin, naming any it cannot (`MeasurementPlan.not_pinned`).

`measurement_plan(scenario)` picks, from a grid of prompt lengths (256 to 32K tokens, within
the model's context) and concurrency levels (1 to 256, within what fits in memory at that
length), the fewest (prompt length, concurrency) cells at which every knob of the operator step
(`OPERATOR_KNOBS`) and of prefill (`PREFILL_KNOBS`) is pinned down: the fit's own
`identifiability` (posterior over prior width < `PINNED_RATIO`), evaluated at typical knobs
(`design_knobs`: eff at the fit's own prior on the GPU). It is greedy: it starts from the
corners (shortest prompt at 1 and at the largest level, longest prompt at 1) and adds, one at a
time, the cell that pins the most knobs (then: shrinks the widths most), until every knob is
pinned or no cell helps. Each cell's `pins` names the knob whose term moves its time most
there: small batch and long context for the attention floor, large batch and short context for
eff, large batch and long context for eta_kv, batch 1 at a short prompt for the fixed overhead
and eta_w.

Decode cells are measured with `OUTPUT_TOKENS` output tokens (the step from the median
inter-token latency); prefill uses TTFT at concurrency 1 of each chosen prompt length, so
every prompt length's levels include 1. Source: docs/calibration.md (measurement plan).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capacity.fit.calibration_problem import (
    OPERATOR_KNOBS,
    OPERATOR_PROBLEM,
    PINNED_RATIO,
    PREFILL_KNOBS,
    PREFILL_PROBLEM,
    decode_basis,
    identifiability,
    prefill_basis,
)
from capacity.fit.ceilings import typical_eff
from capacity.fit.measured import MeasuredPoint
from capacity.model.roofline import StepMethod
from capacity.model.scenario import Scenario, evaluate

PROMPTS_TOKENS: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
"""Candidate prompt lengths (tokens)."""
LEVELS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
"""Candidate concurrency levels (requests). Above the engine's max_num_seqs (vLLM: 256 to
1024 by GPU) the excess waits in its queue: set it at least as high as the plan's largest."""
OUTPUT_TOKENS = 64
"""Output tokens per request: enough gaps for a median, a context that barely moves."""
CALIBRATION_PASSES = 2
"""Passes through a sweep's levels (`capacity bench --passes`): forward, then backward, so a
machine drifting during the sweep shifts no level against another. Measured on a cloud VM
with llama.cpp, a fit on one direction predicted the other direction's points 2.6-5.9% off
(median), a fit on both the pooled points 2.6% (docs/bench.md, "Measuring in passes")."""
DESIGN_KNOBS: dict[str, float] = {
    "eta_bw": 0.8, "eta_kv": 0.8, "eff": 0.5, "attn_sat_batch": 4.0, "step_overhead_ms": 0.5,
    "seq_overhead_ms": 0.005, "mfu": 0.4, "attn_mfu": 0.4, "prefill_overhead_ms": 10.0}
"""Typical knobs the plan is designed at (the priors, with a floor of 4 sequences, half a ms
of fixed and 5 us of per-sequence overhead: a knob whose term is zero cannot be seen); eff at
the fit's own prior on the GPU instead of the 0.5 here (`design_knobs`)."""


def design_knobs(s: Scenario) -> dict[str, float]:
    """`DESIGN_KNOBS` with eff where a fit on `s`'s GPU centres its prior
    (`capacity.fit.ceilings.typical_eff`: 0.706 on an RTX 4090 in BF16, 0.567 on an H100), so
    the plan looks for compute where the fit will: a batch's GEMMs bind later the faster they
    are taken to run."""
    return {**DESIGN_KNOBS, "eff": typical_eff(s)}
CHARS_PER_TOKEN = 4
"""Characters per prompt token for `capacity bench --prompt-chars` and the Measure page (about
4 for English text with common tokenizers; the simulated engine's default). The fit uses the
prompt tokens the server reports, so a different ratio moves the cells, not the fit."""
MAX_CELLS = 16
"""The plan stops growing here even if a knob is still not pinned."""


@dataclass(frozen=True, kw_only=True)
class PlanCell:
    """One measurement: `concurrency` requests of `prompt_tokens` + `output_tokens` tokens.
    `pins`: the knob whose term moves this cell's time most (decode; 'ttft' for prefill)."""

    prompt_tokens: int
    concurrency: int
    output_tokens: int
    pins: str

    @property
    def prompt_chars(self) -> int:
        """The prompt length to ask `capacity bench` for, characters (`CHARS_PER_TOKEN`)."""
        return self.prompt_tokens * CHARS_PER_TOKEN


@dataclass(frozen=True, kw_only=True)
class MeasurementPlan:
    """The cells, and each knob's width ratio (< PINNED_RATIO: pinned) once measured."""

    model: str
    gpu: str
    cells: tuple[PlanCell, ...]
    ratios: tuple[tuple[str, float], ...]

    @property
    def not_pinned(self) -> tuple[str, ...]:
        """Knobs this plan still leaves at their prior (none when it pins every knob)."""
        return tuple(n for n, r in self.ratios if r >= PINNED_RATIO)

    def sweeps(self) -> list[tuple[int, tuple[int, ...]]]:
        """(prompt tokens, its concurrency levels), one bench run each, shortest first."""
        by: dict[int, set[int]] = {}
        for c in self.cells:
            by.setdefault(c.prompt_tokens, set()).add(c.concurrency)
        return [(p, tuple(sorted(v))) for p, v in sorted(by.items())]

    def to_json(self) -> dict[str, object]:
        """The plan as JSON (cells, sweeps, ratios, what stays unpinned)."""
        return {"model": self.model, "gpu": self.gpu, "output_tokens": OUTPUT_TOKENS,
                "passes": CALIBRATION_PASSES,
                "cells": [{**c.__dict__, "prompt_chars": c.prompt_chars} for c in self.cells],
                "sweeps": [{"prompt_tokens": p, "prompt_chars": p * CHARS_PER_TOKEN,
                            "concurrency": list(c)} for p, c in self.sweeps()],
                "ratios": dict(self.ratios), "pinned_below": PINNED_RATIO,
                "not_pinned": list(self.not_pinned)}


def _points(cells: list[tuple[int, int]]) -> list[MeasuredPoint]:
    return [MeasuredPoint(concurrency=float(c), context_tokens=p + OUTPUT_TOKENS,
                          prompt_tokens=float(p), output_tokens=float(OUTPUT_TOKENS))
            for p, c in cells]


def _decode_ratios(s: Scenario, cells: list[tuple[int, int]]) -> np.ndarray:
    pts = _points(cells)
    basis = decode_basis(s, pts)
    k = design_knobs(s)
    x = np.array([k[n] for n in OPERATOR_KNOBS])
    model = OPERATOR_PROBLEM.model
    return identifiability(OPERATOR_KNOBS, model, x, basis, model(x, basis))


def _prefill_ratios(s: Scenario, prompts: list[int]) -> np.ndarray:
    pts = _points([(p, 1) for p in prompts])
    basis = prefill_basis(s, pts)
    x = np.array([DESIGN_KNOBS[n] for n in PREFILL_KNOBS])
    model = PREFILL_PROBLEM.model
    return identifiability(PREFILL_KNOBS, model, x, basis, model(x, basis))


def _score(r: np.ndarray) -> tuple[int, float]:
    return int(np.sum(r >= PINNED_RATIO)), float(np.sum(np.minimum(r, 1.0) ** 2))


def candidate_cells(s: Scenario) -> list[tuple[int, int]]:
    """Every (prompt, concurrency) of the grid that the model's context and memory allow."""
    s = s.with_(step_method=StepMethod.OPERATOR.value)
    out = []
    for p in PROMPTS_TOKENS:
        ctx = p + OUTPUT_TOKENS
        if ctx > s.model.max_context_tokens:
            continue
        slots = int(np.asarray(evaluate(s, [1.0], [float(ctx)]).max_concurrency_vram).flat[0])
        out += [(p, c) for c in LEVELS if c <= slots]
    return out


def measurement_plan(s: Scenario) -> MeasurementPlan:
    """The smallest sweep (greedy, module docstring) that pins the knobs on `s`'s model, GPU,
    TP and KV precision that its grid can pin (the rest: `MeasurementPlan.not_pinned`)."""
    s = s.with_(step_method=StepMethod.OPERATOR.value, eta_kv=None, attn_mfu=None)
    grid = candidate_cells(s)
    if not grid:
        return MeasurementPlan(model=s.variant.key, gpu=s.gpu.key, cells=(), ratios=())
    prompts = sorted({p for p, _ in grid})
    short, long_ = prompts[0], prompts[-1]
    chosen = list(dict.fromkeys([(short, 1), max((c for c in grid if c[0] == short),
                                                 key=lambda c: c[1]), (long_, 1)]))
    ratios = _decode_ratios(s, chosen)
    while _score(ratios)[0] and len(chosen) < MAX_CELLS:
        best: tuple[tuple[int, float], tuple[int, int], np.ndarray] | None = None
        for cell in grid:
            if cell in chosen:
                continue
            trial = [*chosen, cell] + ([(cell[0], 1)] if (cell[0], 1) not in chosen
                                       and cell[1] != 1 else [])
            r = _decode_ratios(s, trial)
            # a cell that needs its prompt's batch-1 cell too costs a little more
            sc = (_score(r)[0], _score(r)[1] + 0.01 * (len(trial) - len(chosen) - 1))
            if best is None or sc < best[0]:
                best = (sc, cell, r)
        if best is None or best[0][0] > _score(ratios)[0] or (
                best[0][0] == _score(ratios)[0] and _score(best[2])[1] > _score(ratios)[1] - 0.02):
            break  # no cell pins another knob, nor narrows the others by much
        cell = best[1]
        chosen += [cell] + ([(cell[0], 1)] if (cell[0], 1) not in chosen else [])
        chosen = list(dict.fromkeys(chosen))
        ratios = best[2]
    # prefill: TTFT at concurrency 1 of the chosen prompt lengths, plus longer ones if needed
    pre_prompts = sorted({p for p, _ in chosen})
    pre = _prefill_ratios(s, pre_prompts)
    for p in reversed(prompts):
        if not _score(pre)[0]:
            break
        if p in pre_prompts:
            continue
        r = _prefill_ratios(s, sorted([*pre_prompts, p]))
        if _score(r) < _score(pre):
            pre_prompts = sorted([*pre_prompts, p])
            chosen.append((p, 1))
            pre = r
    cells = [PlanCell(prompt_tokens=p, concurrency=c, output_tokens=OUTPUT_TOKENS,
                      pins=_dominant(s, p, c)) for p, c in sorted(set(chosen))]
    return MeasurementPlan(
        model=s.variant.key, gpu=s.gpu.key, cells=tuple(cells),
        ratios=tuple(zip((*OPERATOR_KNOBS, *PREFILL_KNOBS),
                         (float(v) for v in np.concatenate([ratios, pre])), strict=True)))


def _dominant(s: Scenario, prompt: int, concurrency: int) -> str:
    """The knob whose term is the largest share of this cell's decode step at the design
    knobs: eta_bw (weights read), eff (GEMM arithmetic), eta_kv (KV read), attn_sat_batch
    (the floor), step_overhead_ms, seq_overhead_ms."""
    k = design_knobs(s)
    b = decode_basis(s, _points([(prompt, concurrency)]))
    w = float(b["weight_peak_ms"][0]) / k["eta_bw"]
    g = float(b["gemm_peak_ms"][0]) / k["eff"]
    kv = float(b["kv_peak_ms"][0]) / k["eta_kv"]
    floor = float(b["kv_request_peak_ms"][0]) * k["attn_sat_batch"] / k["eta_kv"]
    terms = {"eta_bw": w if w >= g else 0.0, "eff": g if g > w else 0.0,
             "eta_kv": kv if kv >= floor else 0.0, "attn_sat_batch": floor if floor > kv else 0.0,
             "step_overhead_ms": k["step_overhead_ms"],
             "seq_overhead_ms": k["seq_overhead_ms"] * concurrency}
    if concurrency == 1:  # batch 1 of every prompt length is also its TTFT point
        terms.pop("eff")
    return max(terms, key=lambda n: terms[n])
