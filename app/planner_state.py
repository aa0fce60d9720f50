"""The Planner's inputs bound to the URL: `capacity.report.urlstate.PlannerState` <->
`st.query_params`, as `app.state` does for the Explorer.

On the first run of a session the query parameters are decoded (bad ones fall back with a
notice) into the widgets' keys (`planner_*`); on entering the page again the saved state is put
back (Streamlit drops the state of widgets that were not drawn); every run writes the encoded
state to the URL, so a copied link reopens the same plan.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from app.state import SAVED as EXPLORER_SAVED
from app.state import page_entered
from capacity.catalog.loader import Catalog
from capacity.model.cost import convert
from capacity.report.i18n import t
from capacity.report.quote import offer_text, source_text
from capacity.report.urlstate import PlannerState, planner_decode, planner_encode

SAVED = "planner_saved_state"
NOTICES = "planner_notices"
WIDGETS: dict[str, str] = {
    "model": "planner_model", "mode": "planner_mode", "dau": "planner_dau",
    "rpu": "planner_rpu", "share": "planner_share", "hours": "planner_hours",
    "conc": "planner_conc", "ctx": "planner_ctx", "out": "planner_out",
    "headroom": "planner_headroom", "ttft": "planner_ttft", "tpot": "planner_tpot",
    "pct": "planner_pct", "cost": "planner_cost_target", "gpus": "planner_gpus",
    "maxg": "planner_maxg", "kv": "planner_kv", "tp": "planner_tp", "cur": "planner_currency",
    "fx": "planner_fx", "cal": "planner_cal", "spare": "planner_spare",
    "growth": "planner_growth", "offer": "planner_offer",
    "util": "planner_util", "mfu": "planner_mfu",
}
"""PlannerState field -> the widget key that edits it (`prices` is the price editor's, read by
`entered_prices`)."""


def _to_widget(state: PlannerState, name: str, catalog: Catalog) -> Any:
    if name == "gpus":
        return list(state.gpu_list(catalog))
    if name == "kv":
        return list(state.kv_list())
    if name in ("tp", "spare"):
        return bool(getattr(state, name))
    return getattr(state, name)


def _from_widget(name: str, value: Any, saved: PlannerState, catalog: Catalog) -> Any:
    if name == "gpus":
        chosen = [k for k in value if k in catalog.gpus]
        return "" if not chosen or sorted(chosen) == sorted(catalog.gpus) else ",".join(chosen)
    if name == "kv":
        return ",".join(value) or "fp16"
    if name in ("tp", "spare"):
        return int(bool(value))
    default = getattr(saved, name)
    if isinstance(default, float):
        return float(value)
    if isinstance(default, int):
        return int(value)
    return value


def init_planner(catalog: Catalog) -> tuple[PlannerState, list[str]]:
    """Fill the widget keys from the URL (first run) or the saved state (on entering the page);
    returns the state and the notices about parameters that fell back to defaults."""
    if SAVED not in st.session_state:
        # the URL is the Planner's own only when the session started here: coming from the
        # Explorer, the address still holds the Explorer's parameters
        params = ({} if EXPLORER_SAVED in st.session_state
                  else st.query_params.to_dict())
        state, notices = planner_decode(params, catalog)
        st.session_state[SAVED] = state
        st.session_state[NOTICES] = notices
    saved: PlannerState = st.session_state[SAVED]
    entered = page_entered()
    for name, key in WIDGETS.items():
        if entered or key not in st.session_state:
            st.session_state[key] = _to_widget(saved, name, catalog)
    return saved, list(st.session_state.get(NOTICES, []))


def from_widgets(lang: str, catalog: Catalog) -> PlannerState:
    """The state the widgets describe now (widgets not drawn keep their saved value)."""
    saved: PlannerState = st.session_state[SAVED]
    values = {name: _from_widget(name, st.session_state[key], saved, catalog)
              for name, key in WIDGETS.items() if key in st.session_state}
    state = replace(saved, lang=lang, **values)
    if state.cur != saved.cur and state.prices:
        # entered prices follow a currency switch at the exchange rate
        state = replace(state, prices=",".join(
            f"{k}:{convert(v, saved.cur, state.cur, state.fx):.4g}"
            for k, v in state.price_list()))
    if state != saved:
        st.session_state[NOTICES] = []
    st.session_state[SAVED] = state
    return state


def price_rows(state: PlannerState, catalog: Catalog, lang: str = "en") -> list[dict[str, Any]]:
    """The price editor's rows: each chosen GPU with its price per GPU-hour in the state's
    currency (entered, else its offer of the chosen kind, else the catalog's, converted), that
    base price (`catalog`) and where it comes from (the offer, or the catalog's source with a
    note when the chosen kind has no offer for the GPU)."""
    entered = dict(state.price_list())
    offers = {o.gpu: o for o in state.offer_list(catalog)}
    rows = []
    for key in state.gpu_list(catalog):
        g = catalog.gpus[key]
        offer = offers.get(key)
        if offer is not None:
            base = convert(offer.price_per_gpu_hour, offer.currency, state.cur, state.fx)
            source = offer_text(offer, lang)
        else:
            base = convert(g.price_per_hour, g.currency, state.cur, state.fx)
            source = source_text(g.price_source, lang)
            if state.offer:
                source = t("pl_no_offer", lang, kind=t("offer_kind_" + state.offer, lang),
                           src=source)
        rows.append({"gpu": key, "name": g.name, "price": round(entered.get(key, base), 4),
                     "catalog": round(base, 4), "source": source})
    return rows


def entered_prices(rows: list[dict[str, Any]]) -> str:
    """The editor's rows back to the state's `prices`: only prices that differ from the
    catalog's."""
    return ",".join(f"{r['gpu']}:{float(r['price']):g}" for r in rows
                    if r["price"] is not None and float(r["price"]) > 0
                    and abs(float(r["price"]) - float(r["catalog"])) > 1e-9)


def keep_prices(state: PlannerState, prices: str) -> PlannerState:
    """The state with the editor's prices (and remember it for the next run)."""
    if prices != state.prices:
        state = replace(state, prices=prices)
        st.session_state[SAVED] = state
    return state


def write_url(state: PlannerState) -> None:
    """Put the state into the query parameters (only what differs from the defaults)."""
    params = planner_encode(state)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
