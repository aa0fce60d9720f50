"""The scorecard's rows added after the typical knobs were derived, reported apart (issue 25).

data/reference/published.csv's optional `added` column dates the rows added later
(`capacity.fit.reference.ReferenceSweep.added`, `validate.Check.added`; blank for the rows
data/engines.toml's typical knobs were derived on). Added rows are held out: the typical knobs
were not refitted on them, no leave-one-group-out prediction of another group borrows their
fits (`validate.scorecard` fits donors on the original rows only), and the typical section's
held-out knobs ignore them (`validate_typical`). `row_sets` splits a scorecard by that date and
gives each part the headline figures of the whole: how often the spec sheet is an upper bound,
the leave-one-group-out |predicted / measured - 1| by metric below and at saturation, how often
the band shown without measurements contains the measured decode step, and the within-group
decode-step error of the part's groups. `markdown` is the section beside the main tables.
Source: docs/accuracy.md (generated), issue 25 ("the scorecard says which rows are new").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from capacity.fit.validate import Check, Metric, Scorecard, Spread, band_coverage

ORIGINAL = ""
"""The `added` value of the rows the typical knobs were derived on."""
WHERE = (("below", False), ("at saturation", True))


def logo_spreads(checks: Iterable[Check]) -> tuple[tuple[str, str, Spread], ...]:
    """(metric, 'below' | 'at saturation', spread of |calibrated / measured - 1|) for each
    metric, as `Scorecard.logo_error` computes it, over `checks` only."""
    rows = list(checks)
    return tuple((m.value, w, Spread.of(abs(e) for c in rows if c.metric == m
                                        and c.saturated == f
                                        if (e := c.calibrated_error) is not None))
                 for m in Metric for w, f in WHERE)


@dataclass(frozen=True, kw_only=True)
class RowSet:
    """The scorecard's rows of one `added` date ('' = the original rows) and their figures."""

    added: str
    rows: int
    groups: tuple[str, ...]
    upper_bound: int
    """Rows where the spec-sheet prediction is not slower than measured."""
    logo_error: tuple[tuple[str, str, Spread], ...]
    band_below: tuple[int, int]
    """(decode-step rows below saturation inside the band without measurements, such rows)."""
    band_saturated: tuple[int, int]
    within: tuple[tuple[str, Spread], ...] = ()
    """Each step method's within-group |held-out / measured - 1| over this set's groups."""

    @property
    def label(self) -> str:
        return "original rows" if self.added == ORIGINAL else f"rows added {self.added}"

    def logo(self, metric: Metric, saturated: bool) -> Spread:
        """The leave-one-group-out |error| of one metric, below or at saturation."""
        where = "at saturation" if saturated else "below"
        return next(s for m, w, s in self.logo_error if m == metric and w == where)


def row_set(card: Scorecard, added: str) -> RowSet:
    """The figures of the rows of `card` whose `added` is `added`."""
    rows = [c for c in card.checks if c.added == added]
    groups = tuple(sorted({c.group for c in rows}))
    within = tuple(
        (m, Spread.of(abs(e) for w in card.within if w.group in groups
                      if (e := w.error(i)) is not None))
        for i, m in enumerate(card.within_methods))
    return RowSet(added=added, rows=len(rows), groups=groups,
                  upper_bound=sum(c.upper_bound for c in rows), logo_error=logo_spreads(rows),
                  band_below=band_coverage(rows, False),
                  band_saturated=band_coverage(rows, True), within=within)


def row_sets(card: Scorecard) -> tuple[RowSet, ...]:
    """The original rows, then the rows of each `added` date (oldest first); a set only where
    the scorecard has rows of it."""
    dates = sorted({c.added for c in card.checks} - {ORIGINAL})
    keys = ([ORIGINAL] if any(c.added == ORIGINAL for c in card.checks) else []) + dates
    return tuple(row_set(card, d) for d in keys)


def _p(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.1%}"


def _spread(s: Spread) -> str:
    return "-" if s.n == 0 else f"{_p(s.median)} / {_p(s.high)} ({s.n})"


def _share(inside: int, n: int) -> str:
    return f"{inside} of {n}" + (f" ({inside / n:.1%})" if n else "")


def markdown(card: Scorecard) -> list[str]:
    """The section's lines ([] when no row is marked added): one column per row set, one line
    per headline figure."""
    sets = row_sets(card)
    added = [s for s in sets if s.added != ORIGINAL]
    if not added:
        return []
    lines = ["", "### Rows added later, held out (published.csv's `added` column)", "",
             " ".join(f"{s.label.capitalize()}: {s.rows} in {len(s.groups)} groups "
                      f"({', '.join(s.groups)})." for s in added)
             + " They were added after data/engines.toml's typical knobs were derived and are "
             "held out: the knobs were not refitted on them, no other group's leave-one-group-"
             "out prediction borrows their fits, and the typical section's held-out knobs "
             "ignore them. Each figure for the original rows and for the added ones "
             "(|predicted / measured - 1|: median / worst (rows)):", "",
             "| figure | " + " | ".join(s.label for s in sets) + " |",
             "|---|" + "---:|" * len(sets)]

    def line(name: str, cells: Sequence[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    line("rows (groups)", [f"{s.rows} ({len(s.groups)})" for s in sets])
    line("spec sheet an upper bound", [_share(s.upper_bound, s.rows) for s in sets])
    for m in Metric:
        for where, flag in WHERE:
            line(f"leave one group out: {m.value}, {where}",
                 [_spread(s.logo(m, flag)) for s in sets])
    line("band contains the step, below saturation", [_share(*s.band_below) for s in sets])
    line("band contains the step, at saturation", [_share(*s.band_saturated) for s in sets])
    for i, method in enumerate(card.within_methods):
        line(f"within group ({method}), by the set's groups",
             [_spread(s.within[i][1]) for s in sets])
    return lines


def to_dict(card: Scorecard) -> list[dict[str, Any]]:
    """Every row set's figures, JSON-ready (NaN as None)."""
    def spread(s: Spread) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(s).items()}

    return [{"added": s.added, "rows": s.rows, "groups": list(s.groups),
             "upper_bound": s.upper_bound,
             "leave_one_group_out": [{"metric": metric, "levels": w, **spread(x)}
                                     for metric, w, x in s.logo_error],
             "band_coverage": {"below": dict(zip(("inside", "rows"), s.band_below, strict=True)),
                               "at saturation": dict(zip(("inside", "rows"), s.band_saturated,
                                                         strict=True))},
             "within_group": {method: spread(x) for method, x in s.within}}
            for s in row_sets(card)]
