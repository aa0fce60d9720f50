"""The Explorer's tables: the capacity table (the rows the user edits -> the table shown and its
downloads) and the How-sure tables (the band and what moves it most), in the page's language.

Pure formatting, as `app.explorer_view`: the figures come from `app.cache`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from app.cache import Uncertainty
from app.format import short_num
from app.i18n import status_text, verdict_text
from capacity.fit.uncertainty import Sensitivity
from capacity.model.scenario import SEED_TABLE_ROWS
from capacity.report.bases import widening_text
from capacity.report.explain import TABLE_COLUMNS
from capacity.report.i18n import t
from capacity.report.tables import render

TABLE_FORMATS = {"kv_total_gb": "%.1f", "subtotal_gb": "%.1f", "usable_gb": "%.1f",
                 "ttft_s": "%.2f", "tpot_ms": "%.1f", "tok_s_per_request": "%.1f",
                 "aggregate_tok_s": "%.0f", "cost_per_mtok": "%.3f"}
"""The capacity table's number formats, by column."""
TABLE_FIRST = ("concurrency", "context_tokens", "verdict", "slo", "cost_per_mtok")
"""The verdicts and cost first: the measurements that follow scroll on a narrow page."""


def seed_rows(ctx: int) -> pd.DataFrame:
    """The rows the table editor starts with: the chapter's concurrencies at the context."""
    return pd.DataFrame({"concurrency": [c for c, _ in SEED_TABLE_ROWS],
                         "context_tokens": [ctx] * len(SEED_TABLE_ROWS)})


def edited_rows(edited: pd.DataFrame) -> tuple[list[tuple[int, int]], bool]:
    """The (concurrency, context) pairs of the editor's rows, and whether any was invalid (not a
    number, or below 1); empty cells are skipped."""
    rows = []
    bad = False
    for c, ctx in zip(edited["concurrency"], edited["context_tokens"], strict=True):
        if pd.isna(c) or pd.isna(ctx):
            continue
        if not (math.isfinite(c) and math.isfinite(ctx)) or c < 1 or ctx < 1:
            bad = True
            continue
        rows.append((int(c), int(ctx)))
    return rows, bad


@dataclass(frozen=True)
class CapacityTable:
    """The capacity table as the page shows it, and as the downloads write it."""

    shown: pd.DataFrame
    """Verdicts in words, columns in the page's language."""
    column_order: list[str]
    formats: dict[str, str]
    """Shown column -> its number format."""
    csv: str
    markdown: str


def capacity_table(table: pd.DataFrame, currency: str, lang: str) -> CapacityTable:
    """`app.cache.capacity_rows`' table in the page's language, with its CSV (raw figures,
    English column names) and Markdown (as shown) downloads."""
    shown = table.copy()
    shown["verdict"] = shown["verdict"].map(lambda v: verdict_text(v, lang))
    shown["slo"] = shown["slo"].map(lambda v: status_text(v, lang))
    headers = [t("col_" + c, lang) for c in TABLE_COLUMNS]
    at = TABLE_COLUMNS.index("cost_per_mtok")
    headers[at] = t("with_paren", lang, what=headers[at], detail=currency)
    shown.columns = headers
    order = [*TABLE_FIRST, *(c for c in TABLE_COLUMNS if c not in TABLE_FIRST)]
    raw = [[r[c] for c in TABLE_COLUMNS] for r in table.to_dict("records")]
    csv_headers = list(TABLE_COLUMNS)
    csv_headers[TABLE_COLUMNS.index("cost_per_mtok")] = f"cost_per_mtok_{currency.lower()}"
    return CapacityTable(
        shown=shown, column_order=[headers[TABLE_COLUMNS.index(c)] for c in order],
        formats={headers[TABLE_COLUMNS.index(c)]: f for c, f in TABLE_FORMATS.items()},
        csv=render(csv_headers, raw, "csv"),
        markdown=render(headers, shown.values.tolist(), "markdown"))


def knob_name(name: str, lang: str) -> str:
    """An input the uncertainty names, in words."""
    return t("in_" + name, lang)


def flags_text(unc: Uncertainty, lang: str) -> str:
    """The warning about the basis' knobs that look wrong (fitted past a limit, or too unsure)."""
    return t("unc_flags", lang) + "\n\n" + "\n".join(
        "- " + (t("unc_flag_high", lang, knob=knob_name(f.knob, lang), value=f.value,
                  limit=f.limit)
                if math.isfinite(f.limit) else
                t("unc_flag_std", lang, knob=knob_name(f.knob, lang), value=f.value, std=f.std))
        for f in unc.flags)


def widenings_text(unc: Uncertainty, lang: str) -> str:
    """Why the band is wider than the basis' own spread, one reason a line."""
    return t("unc_wider", lang) + "\n\n" + "\n".join(
        "- " + widening_text(w, lang) for w in unc.widenings)


def band_frame(unc: Uncertainty, lang: str) -> pd.DataFrame:
    """The band: low, middle and high of TPOT, TTFT and C_vram."""
    return pd.DataFrame(
        [[t("with_paren", lang, what=t("metric_tpot", lang), detail="ms"),
          *map(short_num, unc.step_ms)],
         [t("with_paren", lang, what=t("metric_ttft", lang), detail="s"),
          *map(short_num, unc.ttft_s)],
         [t("metric_cvram", lang), *(f"{int(v):,}" for v in unc.max_concurrency_vram)]],
        columns=[t("unc_quantity", lang), t("unc_low", lang), t("unc_mid", lang),
                 t("unc_high", lang)])


def sensitivity_frame(rows: Sequence[Sensitivity], lang: str) -> pd.DataFrame:
    """What moves one output most: each input's range and the output at its ends."""
    return pd.DataFrame(
        [[t("in_" + r.name, lang), f"{short_num(r.low)} .. {short_num(r.high)}",
          short_num(r.output_low), short_num(r.output_high), r.swing] for r in rows],
        columns=[t("sens_input", lang), t("sens_range", lang), t("unc_low", lang),
                 t("unc_high", lang), t("sens_swing", lang)])
