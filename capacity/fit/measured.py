"""One measured operating point of a deployment: what a bench run, an import or a published
table says a model did on a GPU and engine at one concurrency and context.

Every figure is optional except concurrency and context, because sources differ: a
`vllm bench serve` result has TTFT, TPOT and throughput; a published blog table may have only
aggregate tok/s and TTFT (then TPOT is derived, see `tpot_from_throughput`). Times are ms,
throughputs are tok/s for the whole level (all concurrent requests together).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.model.scenario import Scenario, evaluate, make_scenario


def decode_context_tokens(prompt_tokens: float, output_tokens: float) -> float:
    """Tokens a request holds on average while decoding: prompt + output / 2 (the context
    grows by one token per step). Source: docs/method.md, decode context. Example: 500 + 64 / 2
    = 532."""
    return float(prompt_tokens) + float(output_tokens) / 2.0


@dataclass(frozen=True, kw_only=True)
class MeasuredPoint:
    """A measured point. `tpot_ms` and `ttft_ms` are the central value (median where the source
    has it, else mean; `stat` says which); percentiles are kept where the source has them.

    `context_tokens` is the longest context a request holds (prompt + output where known);
    `output_tok_s` is the aggregate output throughput of the level (tok/s, all requests).
    `model`, `gpu` and `engine` are catalog keys where known, else the source's own names.
    """

    model: str = ""
    gpu: str = ""
    engine: str = ""
    gpus: int = 1
    tp: int = 1
    concurrency: float
    context_tokens: int
    prompt_tokens: float | None = None
    output_tokens: float | None = None
    tpot_ms: float | None = None
    ttft_ms: float | None = None
    output_tok_s: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    """Median inter-token latency of the level (ms, over every gap of every request): the
    decode step without the stalls a request's mean TPOT includes (docs/calibration.md)."""
    stat: str = "median"
    source: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.concurrency) and self.concurrency > 0):
            raise InputError(f"{self.source or 'measured point'}: concurrency must be > 0, "
                             f"got {self.concurrency}")
        if self.context_tokens < 1:
            raise InputError(f"{self.source or 'measured point'}: context must be >= 1 token, "
                             f"got {self.context_tokens}")
        for name in ("prompt_tokens", "output_tokens", "tpot_ms", "ttft_ms", "output_tok_s",
                     "tpot_p90_ms", "tpot_p99_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise InputError(f"{self.source or 'measured point'}: {name} must be a number "
                                 f"> 0 (or left empty), got {v}")

    @property
    def decode_context_tokens(self) -> float:
        """Tokens a request holds on average while decoding (tokens): prompt + output / 2
        when both are known (the context grows by one token per step), else `context_tokens`.
        Source: docs/method.md, decode context."""
        if self.prompt_tokens is not None and self.output_tokens is not None:
            return decode_context_tokens(self.prompt_tokens, self.output_tokens)
        return float(self.context_tokens)

    @property
    def prefill_tokens(self) -> float:
        """Prompt length for TTFT (tokens): `prompt_tokens`, else `context_tokens`."""
        return self.prompt_tokens if self.prompt_tokens is not None else float(self.context_tokens)


def tpot_from_throughput(*, concurrency: float, output_tokens: float, output_tok_s: float,
                         ttft_ms: float | None) -> float | None:
    """TPOT in ms derived from a closed-loop level's aggregate output throughput.

    Each of C requests produces `output_tokens` in E2E = TTFT + (n - 1) x TPOT, so
    aggregate ~ C x n / E2E and TPOT = (C x n / aggregate x 1000 - TTFT) / (n - 1).
    Assumes a steady closed loop (every slot busy). None when n <= 1 or the result is not
    positive. Example: C = 4, n = 128, 210 tok/s, TTFT 63 ms -> 18.70 ms.
    """
    if output_tokens <= 1 or output_tok_s <= 0:
        return None
    e2e_ms = concurrency * output_tokens / output_tok_s * 1e3
    tpot = (e2e_ms - (ttft_ms or 0.0)) / (output_tokens - 1)
    return tpot if tpot > 0 else None


# -- the scenario a run was measured under (the Results page's, the scorecard's, the realtest's):
# here, with no pandas, so that `capacity validate` starts fast ------------------------------

def run_scenario(model: str, gpu: str, *, prompt_tokens: float, output_tokens: float,
                 n_gpus: int = 1, tp: int = 1, catalog: Catalog | None = None) -> Scenario:
    """The spec-sheet scenario a run was measured under: its model and GPU, a context of
    prompt + output tokens (the most a request holds) and its prompt for TTFT."""
    if prompt_tokens < 1 or output_tokens < 0:
        raise InputError("a run needs prompt tokens >= 1 and output tokens >= 0 to predict it")
    return make_scenario(model, gpu, catalog=catalog, n_gpus=n_gpus, tp=tp,
                         context_tokens=max(1, math.ceil(prompt_tokens + output_tokens)),
                         prompt_tokens=max(1, round(prompt_tokens)))


def c_vram(scenario: Scenario) -> int:
    """Predicted C_vram (requests, whole deployment) at the scenario's context (F3)."""
    return int(np.asarray(evaluate(scenario, [1]).max_concurrency_vram).ravel()[0])
