"""F3: the VRAM budget and the concurrency it allows; F8: the memory verdict.

`KV_budget = VRAM x util - W - overhead`; `C_vram = floor(KV_budget / KV_request)`.
`util` follows vLLM's `gpu_memory_utilization` (a fraction of TOTAL device memory; TensorRT-LLM's
is a fraction of free memory). A budget <= 0 means the weights do not fit: the result says so and
by how much, never a negative concurrency. Source: F3 (docs/method.md).
Seed: 24 GB x 0.9 - 5.7 - 1.5 = 14.4 GB; / 0.268 GB per request -> C_vram = 53.
`memory_verdict` (fits / tight / does_not_fit with headroom) is the only F8 verdict: the
Explorer, the capacity table, the charts, the explanations and the planner all use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.types import IntArray, StrArray
from capacity.units import GB

DEFAULT_UTIL = 0.9
DEFAULT_OVERHEAD_GB = 1.5
DEFAULT_HEADROOM = 0.2


@dataclass(frozen=True, kw_only=True)
class VramBudget:
    """Memory account of one GPU (one TP rank), in bytes."""

    vram_bytes: float
    util: float
    usable_bytes: float
    weights_bytes: float
    overhead_bytes: float
    nccl_bytes: float
    kv_budget_bytes: float

    @property
    def weights_fit(self) -> bool:
        """False when weights + overhead leave no room for any KV."""
        return self.kv_budget_bytes > 0

    @property
    def shortfall_bytes(self) -> float:
        """Bytes missing for the weights and overhead alone (0 when they fit)."""
        return max(0.0, -self.kv_budget_bytes)


def vram_budget(*, vram_gb: float, util: float, weights_gb: float, overhead_gb: float,
                nccl_gb: float = 0.0) -> VramBudget:
    """KV budget of one GPU in bytes: VRAM x util - weights - overhead - NCCL buffers (F3).

    `weights_gb` is what this GPU holds (the whole model, or its 1/TP shard).
    """
    if not 0 < util <= 1:
        raise InputError(f"util must be in (0, 1] (a fraction of device memory), got {util}")
    for name, value in (("VRAM", vram_gb), ("weights", weights_gb)):
        if value <= 0:
            raise InputError(f"{name} must be > 0 GB, got {value}")
    for name, value in (("overhead", overhead_gb), ("NCCL memory", nccl_gb)):
        if value < 0:
            raise InputError(f"{name} must be >= 0 GB, got {value}")
    usable = vram_gb * GB * util
    budget = usable - weights_gb * GB - overhead_gb * GB - nccl_gb * GB
    return VramBudget(vram_bytes=vram_gb * GB, util=util, usable_bytes=usable,
                      weights_bytes=weights_gb * GB, overhead_bytes=overhead_gb * GB,
                      nccl_bytes=nccl_gb * GB, kv_budget_bytes=budget)


def max_concurrency(kv_budget_bytes: float, kv_request_bytes: npt.ArrayLike
                    ) -> IntArray:
    """C_vram = floor(KV_budget / KV_request), 0 when the budget is not positive (F3).

    Unit: requests held at once at the given context. Seed: floor(14.4e9 / 268435456) = 53.
    """
    kv = np.asarray(kv_request_bytes, dtype=np.float64)
    if kv_budget_bytes <= 0:
        return np.zeros(kv.shape, dtype=np.int64)
    with np.errstate(divide="ignore"):
        c = np.floor(kv_budget_bytes / kv)
    # a request that holds no KV (a cached prefix covering it all) is no memory limit: the
    # largest count, as an int64 (2^63 - 1 as a float rounds up to 2^63, which overflows)
    big = np.iinfo(np.int64).max
    fits = np.isfinite(c) & (c < 2.0**62)
    return np.where(fits, np.where(fits, c, 0.0).astype(np.int64), big)


class MemoryVerdict(StrEnum):
    """F8's memory verdict of one point (per GPU); the values are what files and JSON carry."""

    FITS = "fits"
    """The subtotal with the headroom fits: subtotal x (1 + headroom) <= VRAM x util."""
    TIGHT = "tight"
    """The subtotal fits but not with the headroom: no margin for spikes or fragmentation."""
    DOES_NOT_FIT = "does_not_fit"
    """The subtotal exceeds VRAM x util: the engine would refuse or preempt."""


VERDICTS: tuple[MemoryVerdict, ...] = tuple(MemoryVerdict)
"""Every memory verdict, best first: the order of `headroom_level` (0, 1, 2)."""


def headroom_level(value: npt.ArrayLike, limit: npt.ArrayLike,
                   headroom: float = DEFAULT_HEADROOM) -> IntArray:
    """F8's rule on any quantity against its limit: 0 when value x (1 + headroom) <= limit
    (fits with headroom), 1 when value <= limit (tight), 2 otherwise (over).

    The memory verdict applies it to the VRAM subtotal against VRAM x util; the explanations
    apply it to speed and cost against their targets. Unit: a level (0, 1, 2).
    """
    if headroom < 0:
        raise InputError(f"headroom must be >= 0, got {headroom}")
    v = np.asarray(value, dtype=np.float64)
    lim = np.asarray(limit, dtype=np.float64)
    return np.asarray(np.where(v * (1 + headroom) <= lim, 0, np.where(v <= lim, 1, 2)),
                      dtype=np.int64)


def memory_verdict(subtotal_bytes: npt.ArrayLike, usable_bytes: npt.ArrayLike,
                   headroom: float = DEFAULT_HEADROOM, *,
                   holds_a_request: npt.ArrayLike = True) -> StrArray:
    """F8 verdict: 'fits' if subtotal x (1 + headroom) <= VRAM x util, 'tight' if subtotal
    alone fits, else 'does_not_fit'; also 'does_not_fit' where `holds_a_request` is False (not
    one request's KV fits, C_vram < 1). Seed: 9.9 GB fits, 20.7 GB tight, 34.2 GB does not
    (21.6). Used by `scenario.evaluate` (Explorer, table, explanations, charts) and the planner.
    """
    level = np.where(holds_a_request, headroom_level(subtotal_bytes, usable_bytes, headroom), 2)
    return np.asarray(np.asarray([v.value for v in VERDICTS])[level], dtype=np.str_)
