"""How the quote, the Planner and the Explorer write money and latencies, in every language: an
amount with its currency first ('CNY 10,220', 'USD 0.34'), a latency in ms or s ('17.9 ms',
'1.42 s'). One place, so the quote's sections (the recommendation, the buyer's chart, the
disaggregated and expert-parallel plans) and the pages never write the same kind of figure two
ways."""

from __future__ import annotations

import math


def fmt_money(x: float, cur: str, spec: str | None = None) -> str:
    """A cost as the Planner page and the quote both show it: 'CNY 10,220', 'CNY 2.81'; with a
    format `spec`, the number written that way ('CNY 0.123' for '.3f', 'CNY 5' for 'g'), the
    Explorer's figures keeping their own precision but the same order, the currency first."""
    if not math.isfinite(x):
        return "-"
    if spec is not None:
        return f"{cur} {x:{spec}}"
    return f"{cur} {x:,.0f}" if x >= 100 else f"{cur} {x:,.2f}"


def fmt_ms(x: float) -> str:
    """A latency as the Planner page and the quote both show it: '1.42 s', '17.9 ms'."""
    if not math.isfinite(x):
        return "-"
    return f"{x / 1e3:.2f} s" if x >= 1000 else f"{x:.1f} ms"


def fmt_price(x: float, cur: str) -> str:
    """A price per GPU-hour, always with two decimals ('CNY 13.13', 'USD 0.34'), three
    significant figures below 0.1 ('USD 0.0425')."""
    if not math.isfinite(x):
        return "-"
    return f"{cur} {x:,.2f}" if x >= 0.1 else f"{cur} {x:.3g}"
