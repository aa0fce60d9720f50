"""F12's effect on one scenario: its drafted step against the same scenario without the draft.

The one computation behind every surface that shows what a draft buys (`capacity plan`'s
"Speculative decoding" section and JSON, the Explorer's panel and its "show the math"):

- the TPOT with the draft is `evaluate`'s (per emitted token: (t_verify + t_draft) / tau);
- the TPOT without it is `evaluate` of the same scenario with `draft=None`;
- the speed-up is their ratio (`capacity.model.speculative.speedup`: the same for per-user speed
  and for throughput at one concurrency);
- the engine step (`DecodeStep.engine_step_ms`) is the verify pass plus the draft
  (`StepModel.draft_ms`), the verify pass the rest;
- the break-even is `breakeven_batch` on the two step models at the scenario's context: the
  smallest batch per replica where the draft no longer pays, as a total concurrency (a replica
  holds ceil(C / replicas) sequences, so the first C at that batch is (b - 1) x replicas + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.roofline import breakeven_batch
from capacity.model.scenario import Scenario, decode_model, evaluate
from capacity.model.speculative import Draft, speedup
from capacity.types import FloatArray

MAX_BREAKEVEN_BATCH = 4096
"""The largest batch per replica the break-even search tries (`breakeven_batch`'s default)."""


@dataclass(frozen=True, kw_only=True)
class DraftGain:
    """What a scenario's draft does at each concurrency (total), every figure per replica's
    step unless said. Units: ms, dimensionless ratios, requests."""

    draft: Draft
    concurrency: FloatArray
    """Concurrent requests in all."""
    per_replica_concurrency: FloatArray
    """Sequences one replica decodes at once: ceil(C / replicas)."""
    tpot_ms: FloatArray
    """With the draft, per emitted token (`evaluate(s).tpot_ms`)."""
    plain_tpot_ms: FloatArray
    """The same scenario without the draft."""
    engine_step_ms: FloatArray
    """One engine step with the draft: the verify pass and the draft (tau tokens a sequence)."""
    verify_ms: FloatArray
    """The target's verify pass over k + 1 tokens a sequence (the engine step less the draft)."""
    draft_ms: FloatArray
    """The draft's k passes (and the verify overhead, F12's engine knob) in one step."""
    speedup: FloatArray
    """plain TPOT / drafted TPOT (> 1: the draft pays)."""
    breakeven_per_replica: int | None
    """The smallest batch per replica where the draft no longer pays; None: it pays up to
    `MAX_BREAKEVEN_BATCH`."""
    replicas: int

    @property
    def breakeven_concurrency(self) -> int | None:
        """The smallest total concurrency where the draft no longer pays (None: it pays up to
        `MAX_BREAKEVEN_BATCH` per replica)."""
        b = self.breakeven_per_replica
        return None if b is None else (b - 1) * self.replicas + 1


def draft_gain(s: Scenario, concurrency: npt.ArrayLike) -> DraftGain:
    """The draft of `s` at each total `concurrency` against no draft (InputError without a
    draft). The scenario's own context; `evaluate` gives both TPOTs."""
    if s.draft is None:
        raise InputError("the scenario has no speculative-decoding draft")
    c = np.atleast_1d(np.asarray(concurrency, dtype=np.float64))
    ev = evaluate(s, c)
    plain_s = s.with_(draft=None)
    plain = evaluate(plain_s, c)
    kv = float(ev.kv_read_bytes)
    drafted_model = decode_model(s, kv)
    draft_ms = np.asarray(drafted_model.draft_ms(ev.per_replica_concurrency), dtype=np.float64)
    engine = np.asarray(ev.decode.engine_step_ms, dtype=np.float64)
    return DraftGain(
        draft=s.draft, concurrency=c, per_replica_concurrency=ev.per_replica_concurrency,
        tpot_ms=ev.tpot_ms, plain_tpot_ms=plain.tpot_ms, engine_step_ms=engine,
        verify_ms=np.asarray(engine - draft_ms, dtype=np.float64), draft_ms=draft_ms,
        speedup=speedup(plain.tpot_ms, ev.tpot_ms),
        breakeven_per_replica=breakeven_batch(decode_model(plain_s, kv), drafted_model,
                                              MAX_BREAKEVEN_BATCH),
        replicas=s.replicas)
