"""The Explorer's inputs bound to the URL: `capacity.report.urlstate` <-> `st.query_params`.

On the first run of a session the query parameters are decoded (bad ones fall back with a
notice) into the widgets' session-state keys (`ex_<field>`); afterwards the widgets own the
values, and every run writes the encoded state back to the URL, so a copied link reopens the
same what-if. A copy of the state survives a visit to another page (Streamlit drops the state of
widgets that are not drawn), and the language lives in the shared sidebar (`lang`).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import streamlit as st

from capacity.catalog.loader import Catalog
from capacity.model.cost import convert
from capacity.report.urlstate import DEFAULT_STATE, LANGS, ExplorerState, decode, encode

PREFIX = "ex_"
SAVED = "explorer_saved_state"
NOTICES = "explorer_notices"
DECODED = "explorer_decoded_state"
FIELDS = tuple(f.name for f in fields(ExplorerState) if f.name != "lang")


def key(field: str) -> str:
    """Session-state (and widget) key of one Explorer input."""
    return PREFIX + field


def init_lang() -> str:
    """The language: the `lang` query parameter on the first run, then the sidebar switch."""
    if "lang" not in st.session_state:
        raw = st.query_params.get("lang", "en")
        st.session_state["lang"] = raw if raw in LANGS else "en"
    lang = st.session_state["lang"]
    return lang if lang in LANGS else "en"


def init_explorer(catalog: Catalog) -> list[str]:
    """Fill the widget keys from the URL (first run) or the saved state (return from another
    page); returns the notices about parameters that fell back to defaults."""
    if SAVED not in st.session_state:
        state, notices = decode(st.query_params.to_dict(), catalog)
        st.session_state[SAVED] = state
        st.session_state[DECODED] = state
        st.session_state[NOTICES] = notices
    saved: ExplorerState = st.session_state[SAVED]
    for name in FIELDS:
        if key(name) not in st.session_state:
            st.session_state[key(name)] = getattr(saved, name)
    return list(st.session_state.get(NOTICES, []))


def from_widgets(lang: str) -> ExplorerState:
    """The state the widgets describe now (and remember it for the next page visit)."""
    values: dict[str, Any] = {}
    for name in FIELDS:
        default = getattr(DEFAULT_STATE, name)
        value = st.session_state.get(key(name), default)
        if isinstance(default, float):
            value = float(value)
        elif isinstance(default, int):
            value = int(value)
        values[name] = value
    state = replace(DEFAULT_STATE, lang=lang, **values)
    st.session_state[SAVED] = state
    if state != st.session_state.get(DECODED):
        st.session_state[NOTICES] = []
    return state


def write_url(state: ExplorerState) -> None:
    """Put the state into the query parameters (only what differs from the defaults)."""
    params = encode(state)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)


def on_gpu_change(catalog: Catalog) -> None:
    """A new GPU brings its own catalog price, converted to the chosen currency."""
    gpu = catalog.gpus.get(st.session_state.get(key("gpu"), ""))
    if gpu is None:
        return
    cur = st.session_state.get(key("currency"), "CNY")
    rate = float(st.session_state.get(key("rate"), DEFAULT_STATE.rate))
    st.session_state[key("price")] = round(convert(gpu.price_per_hour, gpu.currency, cur,
                                                   rate), 4)


def on_currency_change() -> None:
    """Switching currency converts the hourly price (and the cost SLO) at the chosen rate."""
    new = st.session_state.get(key("currency"), "CNY")
    old = "USD" if new == "CNY" else "CNY"
    rate = float(st.session_state.get(key("rate"), DEFAULT_STATE.rate))
    for name in ("price", "slo_cost"):
        value = float(st.session_state.get(key(name), getattr(DEFAULT_STATE, name)))
        st.session_state[key(name)] = round(convert(value, old, new, rate), 4)


def on_model_change(catalog: Catalog) -> None:
    """A new model keeps the weight format when it has it, else takes the model's default."""
    model = catalog.models.get(st.session_state.get(key("model"), ""))
    if model is None:
        return
    formats = [f.key for f in catalog.formats_for(model)]
    if st.session_state.get(key("weights")) not in formats:
        stated = [v.format for v in model.stated_variants]
        st.session_state[key("weights")] = stated[0] if stated else model.default_format
