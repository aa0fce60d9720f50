"""The typical bases' request latency: a request's time outside the GPU (issues 25 and 32).

`Scenario.request_latency_ms` adds to every TTFT and E2E and to no GPU time (the front end's
processes, tokenizing, scheduling the first step, streaming the first token). No GPU term
predicts it; the published runs show it as their TTFT at the lowest load less the typical
basis' TTFT without it (`latency_points`). Two engines have their own figure in
data/engines.toml (`typical:sglang` since 2026-12-03, `typical:vllm` since 2026-12-04), each
the median of its source groups' points. One rule picks the sources of both: the engine's
groups run with CUDA graphs whose lowest TTFT level has `SOURCE_MAX_CLIENTS` clients or fewer,
rows of every date (the step knobs' rule: no queue to speak of there; a group run with
`--enforce-eager` pays a launch per kernel that the basis does not, and at 32 clients the TTFT
is mostly other prompts' prefills). Until 2026-12-06, night, SGLang's sources were the groups the
other knobs rest on, without the rows added later: two groups, both Qwen3-8B on one H100.

The scorecard (`capacity.fit.validate_typical`) predicts each group with the median of the
other groups' points of its engine (`held_out_latency`; the groups of engines without their
own figure, NIM and TensorRT-LLM, are predicted on `typical:vllm` with the vLLM points), so no
group's latency comes from its own rows. Source: docs/method.md ("Bases").
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from capacity.fit import validate as v
from capacity.fit.reference import ReferenceSweep

SGLANG: Final = "SGLang"
VLLM: Final = "vLLM"
FAMILIES: Final = (SGLANG, VLLM)
"""The engine families with a request latency of their own (`validate.engine_family`)."""
ENGINE_OF: Final = {SGLANG: "sglang", VLLM: "vllm"}
"""Each family's section of data/engines.toml."""
SOURCE_MAX_CLIENTS: Final = 8
"""A group is a source when its lowest TTFT level has this many clients or fewer (the step
knobs' `validate_typical.STEP_POINT_MAX_CLIENTS`)."""


class Row(Protocol):
    """What `latency_points` reads of a scorecard row (`validate_typical.TypicalRow`)."""

    @property
    def group(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def concurrency(self) -> float: ...
    @property
    def measured(self) -> float: ...
    @property
    def after(self) -> float: ...
    @property
    def saturated(self) -> bool: ...
    @property
    def prompt_tokens(self) -> float: ...


def family(sweeps: Sequence[ReferenceSweep]) -> str:
    """A group's engine family ('SGLang', 'vLLM', 'NIM', ...; `validate.engine_family`)."""
    return v.engine_family(sweeps[0].engine)


def is_sglang(sweeps: Sequence[ReferenceSweep]) -> bool:
    """Whether a group's engine is SGLang (`validate.engine_family`)."""
    return family(sweeps) == SGLANG


def latency_family(sweeps: Sequence[ReferenceSweep]) -> str:
    """The family whose points predict a group: SGLang's for an SGLang group, vLLM's for every
    other (they are predicted on `typical:vllm`)."""
    return SGLANG if is_sglang(sweeps) else VLLM


def _ttft_rows(rows: Sequence[Row], key: str) -> list[Row]:
    return [r for r in rows if r.group == key and r.metric == "ttft" and not r.saturated]


def is_source(sweeps: Sequence[ReferenceSweep], rows: Sequence[Row], key: str,
              fam: str) -> bool:
    """Whether group `key` (its `sweeps`, its scorecard `rows`) is a source of `fam`'s latency:
    one of `fam`'s groups, on CUDA graphs, whose lowest TTFT level below saturation has
    `SOURCE_MAX_CLIENTS` clients or fewer (module docstring)."""
    if family(sweeps) != fam:
        return False
    ttft = _ttft_rows(rows, key)
    return (all(s.cuda_graphs for s in sweeps) and bool(ttft)
            and min(r.concurrency for r in ttft) <= SOURCE_MAX_CLIENTS)


def latency_points(rows: Sequence[Row], groups: Mapping[str, Sequence[ReferenceSweep]],
                   fam: str = SGLANG) -> dict[str, float]:
    """Group -> measured TTFT - the typical basis' TTFT without a request latency (ms) at the
    group's lowest concurrency with a TTFT row below saturation, over its shortest prompts
    there (the median over those rows: a mean and a median, or several sweeps of one prompt
    length), for the source groups of `fam` (`is_source`): the time a request spends outside
    the GPU that no GPU term predicts. The shortest prompts, because there the GPU's share of
    the TTFT is least: at a longer prompt the difference is mostly the prefill's own error
    (since 2026-12-07, evening; before, every prompt length of the lowest level counted, and
    Llama-3.1-70B's 4,194-token prompts on 8 A100s, prefilled 108 ms faster than predicted,
    gave its group a point of -43 ms, a time outside the GPU below zero). The source of
    data/engines.toml's [sglang.request_latency_ms] and [vllm.request_latency_ms]."""
    out: dict[str, float] = {}
    for key, g in groups.items():
        if not is_source(g, rows, key, fam):
            continue
        ttft = _ttft_rows(rows, key)
        low = min(r.concurrency for r in ttft)
        at_low = [r for r in ttft if r.concurrency == low]
        short = min(r.prompt_tokens for r in at_low)
        out[key] = float(statistics.median(r.measured - r.after for r in at_low
                                           if r.prompt_tokens == short))
    return out


def held_out_latency(points: Mapping[str, float], group: str, engine: float) -> float:
    """The request latency (ms) for `group`: the median of the other groups' points, never
    below 0; the engine's value when no other group has one."""
    others = [x for k, x in points.items() if k != group]
    return max(0.0, float(statistics.median(others))) if others else engine


def group_latency(groups: Mapping[str, Sequence[ReferenceSweep]],
                  points: Mapping[str, Mapping[str, float]],
                  engine: Mapping[str, float]) -> dict[str, float]:
    """Every group's request latency for the scorecard (ms): held out of its own point, over
    the points of the family it is predicted with (`latency_family`); `points` and the
    engines file's values `engine` by family."""
    out = {}
    for key, g in groups.items():
        fam = latency_family(g)
        out[key] = held_out_latency(points.get(fam, {}), key, engine.get(fam, 0.0))
    return out


def points_text(sglang: Sequence[tuple[str, float]], vllm: Sequence[tuple[str, float]],
                groups: Sequence[tuple[str, float]]) -> str:
    """The scorecard's account of the latencies (ms): 'the SGLang points: g 8.0 ms, ...; the
    vLLM points: ...; each group predicted with: ...' ('none' for an empty list)."""
    def listed(pairs: Sequence[tuple[str, float]]) -> str:
        return ", ".join(f"{k} {x:.1f} ms" for k, x in pairs) or "none"
    return (f"the SGLang points: {listed(sglang)}; the vLLM points: {listed(vllm)}; each group "
            f"predicted with: {listed(groups)}")
