"""Layout helpers the pages share: a row of key figures, and a panel of them under a title.

The figures themselves (`Metric`, `Panel`) are built by the pages' view modules
(`app.explorer_view`, `app.planner_view`, ...), which hold the words and number formats.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import streamlit as st


@dataclass(frozen=True)
class Metric:
    """One key figure: what `st.metric` shows."""

    label: str
    value: str
    help: str | None = None
    delta: str | None = None
    delta_color: Literal["normal", "inverse", "off"] = "normal"


@dataclass(frozen=True)
class Panel:
    """A titled group of key figures with a caption under them."""

    title: str
    metrics: tuple[Metric, ...] = field(default_factory=tuple)
    caption: str = ""


def metric_row(metrics: Iterable[Metric], *, key: str | None = None) -> None:
    """The figures in one row that wraps: each as wide as its value, none cut off on a narrow
    page."""
    with st.container(horizontal=True, wrap=True, gap="medium", key=key):
        for m in metrics:
            st.metric(m.label, m.value, help=m.help, delta=m.delta, delta_color=m.delta_color,
                      width="content")


def panel(p: Panel, *, numbers_key: str | None = None, title: bool = True) -> None:
    """A panel's content, in the container the page gives it: its title in bold (unless the
    container shows it, an expander's label), its figures (`metric_row`), its caption."""
    if title:
        st.markdown(f"**{p.title}**")
    if p.metrics:
        metric_row(p.metrics, key=numbers_key)
    if p.caption:
        st.caption(p.caption)
