"""The simulated engine's speculative decoding: the tokens each sequence keeps per engine step,
and the counters a real engine exposes about them.

With a draft (`Scenario.draft`, F12: kind, depth k, acceptance length tau) every engine step is
one verify pass over k + 1 tokens per sequence plus the draft's k passes
(`capacity.sim.scheduler.SimPhysics`), and each decoding sequence keeps 1..k+1 of its tokens:
the draft's tokens are accepted in order, each with probability alpha, until the first
rejection, and the target adds one token of its own (Leviathan et al. 2023, ICML, section 3;
alpha = `acceptance_rate_from_length(tau, k)`, so the mean is tau). `Acceptance` draws them
from a seeded generator (the same run gives the same draws) and counts them the way vLLM's
Prometheus metrics do (`vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
`..._num_accepted_tokens_total`: mean acceptance length = 1 + accepted / drafts);
`prometheus_text` writes them in the text exposition format for the endpoint's `/metrics`.
See docs/bench.md (sim-server).
"""

from __future__ import annotations

import math
import random

from capacity.model.speculative import Draft, acceptance_rate_from_length

METRIC_PREFIX = "capacity_sim:"
"""Prefix of the endpoint's own metrics (`capacity.bench.engine_info` names the engine by it)."""


class Acceptance:
    """Per-step acceptances of one draft, drawn from a seeded generator, and their counters.

    Counted per sequence per engine step as vLLM does: one draft of k tokens, and the draft
    tokens the target accepted (the bonus token not included). A sequence whose output ends
    inside a step keeps fewer tokens than it drew (`draw`'s caller caps them); the counters
    keep the draw, as an engine's acceptance counts what the verify pass accepted."""

    def __init__(self, draft: Draft, seed: int = 0) -> None:
        self.draft = draft
        self.depth = draft.depth
        self.rate = acceptance_rate_from_length(draft.acceptance_length, draft.depth)
        """alpha, the per-token acceptance probability whose mean length is tau."""
        self._log_rate = math.log(self.rate) if 0.0 < self.rate < 1.0 else 0.0
        self._rng = random.Random(f"acceptance:{seed}")  # its own stream, apart from faults'
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted_tokens = 0

    def draw(self) -> int:
        """Tokens one sequence keeps from one verify pass: 1 + the accepted draft tokens (1..k+1).

        The accepted count a is min(k, floor(ln u / ln alpha)) for u uniform on (0, 1], so
        P(a >= j) = alpha^j: the draft's tokens accepted in order, each with probability alpha,
        until the first rejection (one uniform number per draw); E[1 + a] = (1 - alpha^(k+1)) /
        (1 - alpha) = tau. alpha = 1: k + 1 always; alpha = 0: 1. Unit: tokens.
        """
        k = self.depth
        if self.rate >= 1.0:
            accepted = k
        elif self.rate <= 0.0:
            accepted = 0
        else:
            u = 1.0 - self._rng.random()  # (0, 1]: ln u is finite
            accepted = min(k, int(math.log(u) / self._log_rate))
        self.drafts += 1
        self.draft_tokens += k
        self.accepted_tokens += accepted
        return accepted + 1

    @property
    def mean_acceptance_length(self) -> float:
        """1 + accepted / drafts over the draws so far (tokens per verify pass; NaN before any)."""
        return 1.0 + self.accepted_tokens / self.drafts if self.drafts else math.nan


def _label(text: str) -> str:
    """A Prometheus label value: backslash, quote and newline escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(model_name: str, acceptance: Acceptance | None, *, running: int,
                    waiting: int, speedup: float = 1.0) -> str:
    """The endpoint's `/metrics` in Prometheus' text exposition format (version 0.0.4): its own
    gauges of running and waiting requests and of its `--speedup` (every delay divided by it:
    `capacity bench` records it, and a calibration refuses a run whose times it shortened)
    and, with a draft, vLLM's three speculative-decoding counters under vLLM's names and
    label (`model_name`)."""
    lab = f'{{model_name="{_label(model_name)}"}}'
    lines = [f"# HELP {METRIC_PREFIX}speedup Every simulated delay is divided by this.",
             f"# TYPE {METRIC_PREFIX}speedup gauge",
             f"{METRIC_PREFIX}speedup{lab} {float(speedup)!r}",
             f"# HELP {METRIC_PREFIX}num_requests_running Requests in the running batch.",
             f"# TYPE {METRIC_PREFIX}num_requests_running gauge",
             f"{METRIC_PREFIX}num_requests_running{lab} {running}",
             f"# HELP {METRIC_PREFIX}num_requests_waiting Requests waiting for a slot.",
             f"# TYPE {METRIC_PREFIX}num_requests_waiting gauge",
             f"{METRIC_PREFIX}num_requests_waiting{lab} {waiting}"]
    if acceptance is not None:
        for name, value, what in (
                ("num_drafts", acceptance.drafts, "Speculative drafts (one per sequence per step)."),
                ("num_draft_tokens", acceptance.draft_tokens, "Draft tokens proposed."),
                ("num_accepted_tokens", acceptance.accepted_tokens, "Draft tokens accepted.")):
            metric = f"vllm:spec_decode_{name}"
            lines += [f"# HELP {metric}_total {what}", f"# TYPE {metric}_total counter",
                      f"{metric}_total{lab} {float(value)!r}"]
    return "\n".join(lines) + "\n"
