"""One published level predicted, as the scorecard predicts it (`capacity validate`,
docs/accuracy.md): the unqueued formulas (F4's step, F6's TTFT, the closed loop's throughput
and E2E, `predict`) and the event model under the row's engine profile (`queued_levels`: the
steady closed loop every surface shows, or the run as the source ran it where it says), and the
statistic a row states picked from them (`pick`). `capacity.fit.validate` scores them.
Source: docs/accuracy.md ("What is compared"), docs/method.md ("One closed loop, out of step").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from capacity.errors import CapacityError
from capacity.fit import calibration as calib
from capacity.fit.measured import MeasuredPoint, c_vram
from capacity.fit.reference import RunShape
from capacity.fit.validate_formulas import closed_loop_tok_s, e2e_ms
from capacity.model.basis import SPEC_KNOBS
from capacity.model.scenario import Scenario
from capacity.plan import closed_loop as loops
from capacity.plan import events


class Metric(StrEnum):
    """What a check compares."""

    STEP = "step"
    """Decode step / inter-token latency (ms)."""
    TTFT = "ttft"
    """Time to first token (ms), predicted without queueing."""
    THROUGHPUT = "throughput"
    """Aggregate output tokens per second of a level."""
    E2E = "e2e"
    """A request's end-to-end latency (ms): TTFT + (n - 1) decode steps."""


METRIC_OF = {"tpot_ms": Metric.STEP, "itl_ms": Metric.STEP, "ttft_ms": Metric.TTFT,
             "agg_output_tps": Metric.THROUGHPUT, "e2e_ms": Metric.E2E}
"""The CSV's metric names (`reference.METRICS`) and what each measures."""


@dataclass(frozen=True, kw_only=True)
class Queued:
    """One closed-loop level through the event model (`capacity.plan.events.simulate`): TTFT
    and end-to-end latency as mean and median (ms, the statistic a row states), and the
    deployment's output tok/s."""

    ttft_mean_ms: float
    ttft_median_ms: float
    e2e_mean_ms: float
    e2e_median_ms: float
    tok_s: float
    tpot_mean_ms: float = math.nan
    tpot_median_ms: float = math.nan
    """A request's TPOT, (E2E - TTFT) / (n - 1), as mean and median (ms): the benchmark's
    TPOT, other requests' prefills included (NaN where not simulated)."""

    def time_ms(self, metric: Metric, stat: str) -> float:
        """TTFT, E2E or the step (the TPOT) in the row's statistic ('median', else the mean)."""
        if metric == Metric.TTFT:
            return self.ttft_median_ms if stat == "median" else self.ttft_mean_ms
        if metric == Metric.STEP:
            return self.tpot_median_ms if stat == "median" else self.tpot_mean_ms
        return self.e2e_median_ms if stat == "median" else self.e2e_mean_ms


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """Predictions of a scenario at measured levels: step and TTFT (ms), closed-loop
    throughput (tok/s), at the batch the engine can hold (min(C, C_vram)); with a scheduler,
    also each level through the event model (`queued`), which the picked TTFT, E2E and
    throughput then come from."""

    step_ms: tuple[float, ...]
    ttft_ms: tuple[float, ...]
    tok_s: tuple[float, ...]
    e2e_ms: tuple[float, ...]
    c_vram: int
    queued: tuple[Queued, ...] | None = None


def queued_levels(scenario: Scenario, concurrency: Sequence[float], output_tokens: float,
                  scheduler: str, run: RunShape | None = None, *, as_run_tok_s: bool = True
                  ) -> tuple[Queued, ...] | None:
    """Each closed-loop level of `concurrency` clients (the deployment's; ceil(C / replicas)
    per replica) through the event model under the `scheduler` profile: the scenario's prompt,
    `output_tokens` (at least 1) per request, the steady closed loop every surface shows
    (`closed_loop.closed_loop`). As the source ran it where `run` says (`ReferenceSweep.run`):
    with `run_prompts`, ceil(run_prompts / replicas) requests per replica from one burst on an
    idle server, all counted, the drain included (`events.simulate`, not phased): identical
    requests stay in lock step; with caps, each request its own prompt and output
    (`RunShape.lengths`, the context holding the longest), the mean TPOT each request's own;
    a level whose throughput row states its request count (`RunShape.level_prompts`), that
    throughput as the run (`_as_run_tok_s`: a bench's tokens over its run's duration; with
    `as_run_tok_s` False the steady loop's, for a caller that reads no throughput and need
    not pay for the run). None when the model cannot run it (no slot)."""
    out_tok = max(1, round(output_tokens))
    run = run or RunShape()
    varies = run.prompt_cap is not None or run.output_cap is not None
    if varies:
        scenario = scenario.with_(context_tokens=max(scenario.context_tokens, (
            run.prompt_cap or scenario.prompt) + (run.output_cap or out_tok)))
    got, svc = [], None
    for c in concurrency:
        per = max(1, math.ceil(float(c) / scenario.replicas))
        n = (loops.closed_loop_requests(per) if run.run_prompts is None
             else math.ceil(run.run_prompts / scenario.replicas))
        prompts, outs = run.lengths(scenario.prompt, output_tokens, n)
        try:
            svc = svc if svc is not None and not varies else events.service_from_scenario(
                scenario, output_tokens=out_tok, engine=scheduler, prompt_lengths=prompts,
                output_lengths=outs)
        except CapacityError:
            return None
        q = (loops.closed_loop(svc, concurrency=per, n_requests=n) if run.run_prompts is None
             else events.simulate(svc, concurrency=per, warmup_fraction=0.0, n_requests=n))
        tok_s = q.output_tok_s
        if (as_run_tok_s and run.run_prompts is None
                and (total := run.requests_at(c)) is not None):
            tok_s = _as_run_tok_s(scenario, run, output_tokens, scheduler, per,
                                  math.ceil(total / scenario.replicas),
                                  None if varies else svc)
        got.append(Queued(ttft_mean_ms=q.mean_ttft_ms, ttft_median_ms=q.ttft_ms[0.5],
                          e2e_mean_ms=q.mean_e2e_ms, e2e_median_ms=q.e2e_ms[0.5],
                          tok_s=tok_s * scenario.replicas,
                          tpot_mean_ms=q.mean_tpot_ms if outs is not None else
                          (q.mean_e2e_ms - q.mean_ttft_ms) / max(out_tok - 1, 1),
                          tpot_median_ms=q.tpot_ms[0.5]))
    return tuple(got)


def _as_run_tok_s(scenario: Scenario, run: RunShape, output_tokens: float, scheduler: str,
                  concurrency: int, requests: int, svc: events.ServiceModel | None = None
                  ) -> float:
    """One replica's output throughput of a bench level as it ran (`as_run_tok_s`): its
    `requests` requests from `concurrency` clients at once on an idle replica, each with its
    own lengths where the run's varied (`RunShape.lengths` drawn for that many); `svc`, the
    level's service where every request has the mean lengths."""
    if svc is None:
        prompts, outs = run.lengths(scenario.prompt, output_tokens, requests)
        svc = events.service_from_scenario(scenario, output_tokens=max(1, round(output_tokens)),
                                           engine=scheduler, prompt_lengths=prompts,
                                           output_lengths=outs)
    return loops.as_run_tok_s(svc, concurrency=concurrency, requests=requests)


def predict(scenario: Scenario, concurrency: Sequence[float], prompt_tokens: float,
            output_tokens: float, scheduler: str | None = None,
            run: RunShape | None = None) -> Prediction:
    """The four metrics at each concurrency (`calibration.predict_ms`, i.e. `evaluate`),
    with the batch capped at the spec-sheet C_vram (F3) of the scenario; with a `scheduler`
    (an engine profile), TTFT, E2E and throughput also through the event model, queueing
    included (`queued_levels`, as the source ran it where `run` says)."""
    cap = max(1, c_vram(scenario))
    batch = [min(float(c), float(cap)) for c in concurrency]
    ctx = max(1, math.ceil(prompt_tokens + output_tokens))
    pts = [MeasuredPoint(concurrency=b, context_tokens=ctx, prompt_tokens=prompt_tokens,
                         output_tokens=output_tokens if output_tokens > 0 else None)
           for b in batch]
    step, ttft = calib.predict_ms(scenario, pts)
    tok = [closed_loop_tok_s(b, output_tokens, float(t), float(s))
           for b, t, s in zip(batch, ttft, step, strict=True)]
    queued = (None if scheduler is None else
              queued_levels(scenario, concurrency, output_tokens, scheduler, run))
    return Prediction(step_ms=tuple(float(x) for x in step),
                      ttft_ms=tuple(float(x) for x in ttft), tok_s=tuple(tok),
                      e2e_ms=tuple(e2e_ms(output_tokens, float(t), float(s))
                                   for t, s in zip(ttft, step, strict=True)), c_vram=cap,
                      queued=queued)


def spec_sheet(s: Scenario) -> Scenario:
    """`s` on the spec-sheet basis (`capacity.model.basis.SPEC_KNOBS`): every efficiency at
    its peak (eta_bw = eff = MFU = 1, no overheads) and the bound step (the chapter's MFU of
    0.3 is a typical value, not the spec sheet)."""
    return s.with_(calibration=None, **SPEC_KNOBS)


def pick(p: Prediction, metric: Metric, i: int, stat: str = "mean") -> float:
    """Level i's prediction of `metric` in the row's statistic: from the event model when the
    prediction ran it (the step as its TPOT, (E2E - TTFT) / (n - 1), what a benchmark's TPOT
    and ITL measure in a closed loop: other requests' prefills that stall the decode
    included), else the unqueued formulas (the step: F4 alone)."""
    if p.queued is not None:
        q = p.queued[i]
        got = q.tok_s if metric == Metric.THROUGHPUT else q.time_ms(metric, stat)
        if math.isfinite(got):
            return got
    return {Metric.STEP: p.step_ms, Metric.TTFT: p.ttft_ms, Metric.THROUGHPUT: p.tok_s,
            Metric.E2E: p.e2e_ms}[metric][i]
