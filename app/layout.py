"""Layout helpers the pages share: a row of key figures, a panel of them under a title, and a
collapsible section whose body runs only while it is open.

The figures themselves (`Metric`, `Panel`) are built by the pages' view modules
(`app.explorer_view`, `app.planner_view`, ...), which hold the words and number formats.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import streamlit as st

if TYPE_CHECKING:
    from streamlit.elements.lib.mutable_expander_container import ExpanderContainer


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


OPEN_SUFFIX = "__open"
"""`st.session_state[key + OPEN_SUFFIX]`: a section's (label, default, open) at the last run."""


def section(label: str, *, key: str, default: bool = False,
            icon: str | None = None) -> ExpanderContainer | None:
    """A collapsible section (an expander) whose body runs only while it is open: the container
    to draw the body into, or None while it is closed (then nothing of the body is computed or
    sent to the browser; issue 30, docs/benchmarks.md "Start-up").

    Opening or closing it reruns the page (`on_change="rerun"`). It opens as `default` says,
    and follows `default` whenever that changes (a reason to show it appeared, such as an
    engine chosen for the load view); otherwise it keeps what the user chose, also when its
    label changes with the inputs (Streamlit makes a new, closed element of an expander whose
    label or default changed: its state is carried over to it here). `st.session_state[key] =
    True` opens it from code (the tests do)."""
    memory = st.session_state.get(key + OPEN_SUFFIX)
    if memory is not None and (memory[0], memory[1]) != (label, default):
        # a new element this run: the user's choice carried over, or the new default
        st.session_state[key] = default if memory[1] != default else bool(memory[2])
    box = st.expander(label, expanded=default, key=key, on_change="rerun", icon=icon)
    is_open = bool(box.open)
    st.session_state[key + OPEN_SUFFIX] = (label, default, is_open)
    return box if is_open else None
