"""The Planner's inputs bound to the URL: `capacity.report.planner_url.PlannerState` <->
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
from capacity.catalog.loader import MAX_PRICE_PER_HOUR, MIN_PRICE_PER_HOUR, Catalog
from capacity.model.cost import convert
from capacity.model.speculative import DRAFT_KINDS
from capacity.plan.mix import MAX_WORKLOADS, MIX_NAME_CHARS, MixEntry
from capacity.plan.options import AUTO_DRAFT
from capacity.report.i18n import t
from capacity.report.planner_url import (
    MIX_FIELD_SEP,
    MIX_SEP,
    PlannerState,
    context_clamped_note,
    encode_mix,
    planner_decode,
    planner_encode,
)
from capacity.report.quote import offer_text, source_text
from capacity.types import Note

SAVED = "planner_saved_state"
NOTICES = "planner_notices"
WIDGETS: dict[str, str] = {
    "model": "planner_model", "mode": "planner_mode", "dau": "planner_dau",
    "rpu": "planner_rpu", "share": "planner_share", "hours": "planner_hours",
    "conc": "planner_conc", "ctx": "planner_ctx", "out": "planner_out",
    "prompt": "planner_prompt", "turns": "planner_turns", "turn_tokens": "planner_turn_tokens",
    "headroom": "planner_headroom", "ttft": "planner_ttft", "tpot": "planner_tpot",
    "pct": "planner_pct", "cost": "planner_cost_target", "gpus": "planner_gpus",
    "maxg": "planner_maxg", "kv": "planner_kv", "tp": "planner_tp", "cur": "planner_currency",
    "fx": "planner_fx", "cal": "planner_cal", "spare": "planner_spare",
    "growth": "planner_growth", "offer": "planner_offer", "engine": "planner_engine",
    "util": "planner_util", "mfu": "planner_mfu", "prefix": "planner_prefix",
    "prefix_share": "planner_prefix_share", "disagg": "planner_disagg",
    "fr_disagg": "planner_fr_disagg", "fr_wide_ep": "planner_fr_wide_ep",
    "wide_ep": "planner_wide_ep",
}
"""PlannerState field -> the widget key that edits it (`prices` is the price editor's, read by
`entered_prices`)."""
FLAGS: tuple[str, ...] = ("tp", "spare", "disagg", "fr_disagg", "fr_wide_ep", "wide_ep")
"""PlannerState fields that are 0/1 in the URL and a checkbox on the page."""


def _to_widget(state: PlannerState, name: str, catalog: Catalog) -> Any:
    if name == "gpus":
        return list(state.gpu_list(catalog))
    if name == "kv":
        return list(state.kv_list())
    if name in FLAGS:
        return bool(getattr(state, name))
    return getattr(state, name)


def _from_widget(name: str, value: Any, saved: PlannerState, catalog: Catalog) -> Any:
    if name == "gpus":
        chosen = [k for k in value if k in catalog.gpus]
        return "" if not chosen or sorted(chosen) == sorted(catalog.gpus) else ",".join(chosen)
    if name == "kv":
        return ",".join(value) or "fp16"
    if name in FLAGS:
        return int(bool(value))
    default = getattr(saved, name)
    if isinstance(default, float):
        return float(value)
    if isinstance(default, int):
        return int(value)
    return value


# ---- the mix section's added workloads (issue 13): `PlannerState.mix` <-> planner_mix_* ----
MIX_N = "planner_mix_n"
"""Widget key of the number of added workloads."""
MIX_FIELDS: tuple[str, ...] = ("name", "model", "dau", "rpu", "ctx", "out", "ttft", "tpot")


def mix_key(i: int, name: str) -> str:
    """Widget key of one field of added workload `i` (0-based)."""
    return f"planner_mix_{i}_{name}"


def _init_mix(saved: PlannerState, entered: bool) -> None:
    """Fill the mix section's keys from the saved state (first run, or entering the page)."""
    if not entered and MIX_N in st.session_state:
        return
    entries = saved.mix_entries()
    st.session_state[MIX_N] = len(entries)
    for i, e in enumerate(entries):
        for name in MIX_FIELDS:
            st.session_state[mix_key(i, name)] = getattr(e, name)


def _clean_name(text: object, fallback: str) -> str:
    """A workload's name as the link can hold it: printable, no separators, bounded."""
    name = "".join(c for c in str(text) if c.isprintable() and c not in (MIX_SEP, MIX_FIELD_SEP))
    return name.strip()[:MIX_NAME_CHARS].strip() or fallback


CLAMPED = "planner_ctx_clamped"
"""Session key: the contexts a model choice clamped, widget key of the context -> (the model
chosen, the notice that says so), kept while that model and its limit stay chosen."""


def clamp_context(catalog: Catalog, model_key: str, ctx_key: str) -> int:
    """The context limit (tokens) of the model chosen under widget key `model_key`; a context
    past it under `ctx_key` (a model just chosen with a shorter limit) is clamped to it first,
    so the run that reads the widgets plans what the selector will show, and the clamp is
    noted for `clamped_notice` (until another model or context is chosen)."""
    ss = st.session_state
    chosen = str(ss[model_key])
    model = catalog.variant(chosen).model
    limit, ctx = model.max_context_tokens, int(ss[ctx_key])
    clamped: dict[str, tuple[str, Note]] = ss.setdefault(CLAMPED, {})
    if ctx > limit:
        ss[ctx_key] = limit
        clamped[ctx_key] = (chosen, context_clamped_note(ctx, model))
    elif ctx_key in clamped and (clamped[ctx_key][0] != chosen or ctx != limit):
        del clamped[ctx_key]
    return limit


def clamped_notice(ctx_key: str) -> Note | None:
    """The notice of the context under `ctx_key` set to its model's limit by `clamp_context`
    (None when the context is the one chosen)."""
    entry = st.session_state.get(CLAMPED, {}).get(ctx_key)
    return None if entry is None else entry[1]


def _mix_from_widgets(saved: PlannerState, lang: str, catalog: Catalog) -> str:
    """`PlannerState.mix` from the mix section's widgets (a workload added this run gets its
    defaults here, before its widgets are drawn, so the URL holds it at once)."""
    ss = st.session_state
    n = max(0, min(MAX_WORKLOADS - 1, int(ss.get(MIX_N, 0))))
    entries = saved.mix_entries()
    out: list[MixEntry] = []
    for i in range(n):
        dflt = entries[i] if i < len(entries) else MixEntry(
            name=f"{t('mix_workload', lang)} {i + 2}", model=catalog.variant_keys()[0])
        for name in MIX_FIELDS:
            ss.setdefault(mix_key(i, name), getattr(dflt, name))
        if str(ss[mix_key(i, "model")]) in catalog.variant_keys():
            clamp_context(catalog, mix_key(i, "model"), mix_key(i, "ctx"))
        out.append(MixEntry(
            name=_clean_name(ss[mix_key(i, "name")], f"{i + 2}"),
            model=str(ss[mix_key(i, "model")]), dau=int(ss[mix_key(i, "dau")]),
            rpu=float(ss[mix_key(i, "rpu")]), ctx=int(ss[mix_key(i, "ctx")]),
            out=int(ss[mix_key(i, "out")]), ttft=float(ss[mix_key(i, "ttft")]),
            tpot=float(ss[mix_key(i, "tpot")])))
    return encode_mix(tuple(out))


# ---- speculative decoding (issue 26): `PlannerState.draft/tau/alpha` <-> planner_draft_* ----
DRAFT_MODE = "planner_draft_mode"
"""Widget key: 'none', 'auto' (every depth with published acceptance) or 'pick'."""
DRAFT_KEYS = "planner_draft_keys"
"""Widget key: the kind:depth drafts picked."""
ACC_KIND = "planner_acc_kind"
"""Widget key: the acceptance, 'published', 'length' (tau) or 'rate' (alpha)."""
ACC_VALUE = "planner_acc_value"
"""Widget key: the entered tau or alpha."""
DRAFT_CHOICES: tuple[str, ...] = tuple(f"{k}:{d}" for k in DRAFT_KINDS for d in range(1, 9))
"""The drafts the page offers to pick (depths 1..8 of each kind)."""
DEFAULT_TAU = 2.0
"""The acceptance value offered before one is entered (tau 2: one draft token kept a step)."""


def _init_draft(saved: PlannerState, entered: bool) -> None:
    """Fill the draft widgets from the saved state (first run, or entering the page)."""
    if not entered and DRAFT_MODE in st.session_state:
        return
    keys = [k for k in saved.draft_list() if k != AUTO_DRAFT]
    st.session_state[DRAFT_MODE] = ("auto" if AUTO_DRAFT in saved.draft_list()
                                    else "pick" if keys else "none")
    st.session_state[DRAFT_KEYS] = [k for k in keys if k in DRAFT_CHOICES]
    st.session_state[ACC_KIND] = "length" if saved.tau else "rate" if saved.alpha else "published"
    st.session_state[ACC_VALUE] = float(saved.tau or saved.alpha or DEFAULT_TAU)


def _draft_from_widgets(saved: PlannerState) -> dict[str, Any]:
    """`PlannerState.draft`, `tau` and `alpha` from the draft widgets (the saved ones when
    they are not drawn)."""
    ss = st.session_state
    if DRAFT_MODE not in ss:
        return {}
    mode = ss[DRAFT_MODE]
    draft = (AUTO_DRAFT if mode == "auto" else ",".join(ss.get(DRAFT_KEYS) or ())
             if mode == "pick" else "")
    kind, value = ss.get(ACC_KIND, "published"), float(ss.get(ACC_VALUE, DEFAULT_TAU))
    return {"draft": draft, "tau": value if kind == "length" else 0.0,
            "alpha": value if kind == "rate" else 0.0}


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
    if entered:   # a clamp is news on the run that made it, not on coming back to the page
        st.session_state.pop(CLAMPED, None)
    for name, key in WIDGETS.items():
        if entered or key not in st.session_state:
            st.session_state[key] = _to_widget(saved, name, catalog)
    _init_mix(saved, entered)
    _init_draft(saved, entered)
    return saved, list(st.session_state.get(NOTICES, []))


def from_widgets(lang: str, catalog: Catalog) -> PlannerState:
    """The state the widgets describe now (widgets not drawn keep their saved value)."""
    saved: PlannerState = st.session_state[SAVED]
    values = {name: _from_widget(name, st.session_state[key], saved, catalog)
              for name, key in WIDGETS.items() if key in st.session_state}
    state = replace(saved, lang=lang, mix=_mix_from_widgets(saved, lang, catalog), **values,
                    **_draft_from_widgets(saved))
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
    catalog's and are within the bounds of a price per GPU-hour (`MIN_PRICE_PER_HOUR`..
    `MAX_PRICE_PER_HOUR`, as a link's; any other keeps the catalog's)."""
    return ",".join(f"{r['gpu']}:{float(r['price']):g}" for r in rows
                    if r["price"] is not None
                    and MIN_PRICE_PER_HOUR <= float(r["price"]) <= MAX_PRICE_PER_HOUR
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
