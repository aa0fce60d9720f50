"""F7: cost per million tokens, and currency conversion.

`cost per M tokens = price_per_hour x n_gpus / (aggregate tok/s x 3600) x 1e6`.
Source: F7 (docs/method.md). Seed: CNY 2/hour at 1,000 / 3,000 / 5,000 tok/s -> 0.56 / 0.19 / 0.11 CNY.
"""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.types import FloatArray

Currency = Literal["CNY", "USD"]
CURRENCIES: Final[tuple[Currency, ...]] = ("CNY", "USD")
DEFAULT_CNY_PER_USD: Final = 7.1
"""Default exchange rate (CNY per USD), an editable input; as of 2026-11, indicative only."""
HOURS_PER_MONTH: Final = 730.0
"""Average hours in a month (8760 / 12), for monthly cost."""


def cost_per_mtok(price_per_hour: float, n_gpus: int, aggregate_tok_s: npt.ArrayLike
                  ) -> FloatArray:
    """Cost (in the price's currency) of one million output tokens at a sustained rate (F7).

    Infinite where the rate is 0.
    """
    if price_per_hour < 0:
        raise InputError(f"price per hour must be >= 0, got {price_per_hour}")
    rate = np.asarray(aggregate_tok_s, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = price_per_hour * n_gpus / (rate * 3600.0) * 1e6
    return np.asarray(out, dtype=np.float64)


def convert(amount: float, src: str, dst: str, cny_per_usd: float = DEFAULT_CNY_PER_USD) -> float:
    """Convert between CNY and USD at `cny_per_usd`."""
    if cny_per_usd <= 0:
        raise InputError(f"exchange rate must be > 0 CNY per USD, got {cny_per_usd}")
    for c in (src, dst):
        if c not in CURRENCIES:
            raise InputError(f"unknown currency '{c}'; use CNY or USD")
    if src == dst:
        return amount
    return amount * cny_per_usd if src == "USD" else amount / cny_per_usd
