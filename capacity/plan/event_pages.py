"""The paged KV pool as the event loop keeps it (`capacity.plan.events.run_trace`, for a
`ServiceModel.paged` profile: vLLM, SGLang): per request the tokens it holds pages for, the
tokens it has emitted, its admission order, and the pool's claim, the event loop's hottest
sum (docs/method.md, "Engine profiles": the paged pool).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from capacity.plan.service import ServiceModel
from capacity.types import BoolArray


class PagedPool:
    """A paged pool as `run_trace` keeps it (`ServiceModel.paged`: vLLM, SGLang): the tokens
    each admitted request holds pages for, the tokens it has emitted, when it was (re)admitted,
    and the output each request generates (`ServiceModel.request_outputs`)."""

    def __init__(self, svc: ServiceModel, n: int, shares: BoolArray) -> None:
        assert svc.paged is not None
        self.kv = svc.paged
        self.top = len(self.kv.held_bytes) - 1
        self.out = svc.request_outputs(n)
        self.less = np.where(shares, self.kv.shared_bytes, 0.0)
        self.most = float(np.max(self.kv.held_bytes))
        """The most one request's claim can be (B): `run_trace` sums the pool's claim only
        when the requests, each at this bound, would not fit (the same decisions, fewer sums)."""
        self.shared = bool(np.any(self.less))   # stays valid: a preemption only zeroes `less`
        self.held = np.zeros(n, dtype=np.int64)
        self.emitted = np.zeros(n, dtype=np.int64)
        self.order = np.zeros(n, dtype=np.int64)
        self.redo = np.zeros(n, dtype=bool)
        self.admitted = 0
        self.preemptions = 0
        # the constant arrays `claim_at` reads element by element, as Python numbers (the same
        # values; a list is read faster than a numpy array one element at a time)
        self._held_bytes = self.kv.held_bytes_list
        self._out: list[int] = self.out.tolist()
        self._less: list[float] = self.less.tolist()

    def claim(self, ids: Sequence[int], extra: int = 0) -> float:
        """KV bytes `ids` take with `extra` more tokens each: the pages of what they hold
        (`PagedKv.held_bytes`, a prefix hit the shared prefix less) and the reserve of their
        remaining output (SGLang's share). The event loop's hottest call (hundreds of
        thousands a scorecard): fewer than 8 requests take a scalar path, and without a shared
        prefix nothing is subtracted (the same sums, fewer numpy calls)."""
        if not ids:
            return 0.0
        if len(ids) == 1:
            return self._one(ids[0], extra)
        if len(ids) < 8:
            # a few requests: Python floats, summed in order, which is numpy's own order for
            # fewer than 8 values (its pairwise sum unrolls from 8): the same bytes, no arrays
            return float(sum(self._one(i, extra) for i in ids))
        return self.claim_array(np.fromiter(ids, dtype=np.int64, count=len(ids)), extra)

    def claim_array(self, a: npt.NDArray[np.int64], extra: int = 0) -> float:
        """`claim` of the requests `a` (8 or more, as an array: the loop keeps one of its
        running requests while they stay the same)."""
        r = self.kv.reserve_output_share
        t = self.held[a] + extra
        if r:
            left = np.maximum(self.out[a] - self.emitted[a] - extra, 0)
            t = t + np.ceil(r * left).astype(np.int64)
        got = self.kv.held_bytes[np.minimum(t, self.top)]
        return float((got - self.less[a]).sum() if self.shared else got.sum())

    def _one(self, i: int, extra: int) -> float:
        """`claim` of request i alone (B)."""
        return self.claim_at(i, int(self.held[i]), extra)

    def claim_at(self, i: int, held: int, extra: int = 0) -> float:
        """`claim` of request i alone were it holding `held` tokens (B)."""
        one = held + extra
        r = self.kv.reserve_output_share
        if r:
            one += math.ceil(r * max(self._out[i] - int(self.emitted[i]) - extra, 0))
        return self._held_bytes[min(one, self.top)] - self._less[i]

    def target(self, i: int, prompt: int) -> int:
        """Tokens request i's (next) prefill ends at: its prompt, or after a preemption its
        prompt and the tokens it had generated (recompute)."""
        return prompt + int(self.emitted[i]) if self.redo[i] else prompt

    def admit_claim(self, i: int, prompt: int) -> float:
        """What admitting request i needs free: its prefill's pages plus one block."""
        return self.claim_at(i, self.target(i, prompt) + self.kv.block_tokens)
