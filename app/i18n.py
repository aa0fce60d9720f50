"""The app's translation helpers that are more than a lookup; the strings live in data/i18n/*.toml,
read by `capacity.report.i18n`.

`t(key, lang, **values)` (re-exported from `capacity.report.i18n`) formats one message;
`chart_labels(lang)` and `overlay_chart_labels(lang)` give the labels the chart builders in
`capacity.report.charts` and `capacity.report.overlay_charts` take; `verdict_text` and `status_text` name
F8's memory verdicts and the constraint statuses.
"""

from __future__ import annotations

from typing import Final

from capacity.report.i18n import LANG_NAMES, LANGS, MESSAGES, t

__all__ = ["CHART_LABELS", "LANGS", "LANG_NAMES", "MESSAGES", "OVERLAY_CHART_LABELS",
           "chart_labels", "overlay_chart_labels", "status_text", "t", "verdict_text"]


def _group(prefix: str) -> dict[str, tuple[str, ...]]:
    return {k.removeprefix(prefix): v for k, v in MESSAGES.items() if k.startswith(prefix)}


CHART_LABELS: Final = _group("chart_")
"""`capacity.report.charts` label name -> its text in each of `LANGS`: the `chart_*` messages."""

OVERLAY_CHART_LABELS: Final = _group("overlay_")
"""`capacity.report.overlay_charts` label name -> its text in each of `LANGS`: the `overlay_*`
messages."""


def _labels(table: dict[str, tuple[str, ...]], lang: str) -> dict[str, str]:
    i = LANGS.index(lang) if lang in LANGS else 0
    return {k: v[i] for k, v in table.items()}


def chart_labels(lang: str = "en") -> dict[str, str]:
    """Axis titles and series names for `capacity.report.charts` (Explorer) in `lang`."""
    return _labels(CHART_LABELS, lang)


def overlay_chart_labels(lang: str = "en") -> dict[str, str]:
    """Axis titles and series names for `capacity.report.overlay_charts` (Results) in `lang`."""
    return _labels(OVERLAY_CHART_LABELS, lang)


def verdict_text(verdict: str, lang: str = "en") -> str:
    """F8's memory verdict ('fits', 'tight', 'does_not_fit') in `lang`."""
    return t("v_" + verdict, lang)


def status_text(status: str, lang: str = "en") -> str:
    """A constraint status ('pass', 'tight', 'fail') in `lang`."""
    return t("st_" + status, lang)
