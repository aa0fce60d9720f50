"""The Explorer's inputs bound to the URL: `capacity.report.urlstate` <-> `st.query_params`.

On the first run of a session the query parameters are decoded (bad ones fall back with a
notice) into the widgets' session-state keys (`ex_<field>`); afterwards the widgets own the
values, and every run writes the encoded state back to the URL, so a copied link reopens the
same what-if. A copy of the state survives a visit to another page (Streamlit drops the state of
widgets that are not drawn), and the language lives in the shared sidebar (`lang`).

The state every page needs is set up here, once, by `app.bootstrap.run_app` before each page
run: `enter_page` notes whether this run entered a page (first run, or from another page) and
leaves the URL to the page that owns it; `seed_lang_switch` keeps the language across pages.
A widget's identity includes the page it is drawn on, so a value kept only by a widget is lost
on a page switch: the language and the Explorer's inputs are kept in plain session-state keys
and put back into their widgets' keys (docs/app-internals.md).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import streamlit as st

from capacity.catalog.loader import Catalog
from capacity.errors import CapacityError
from capacity.fit.calibration_store import saved_calibrations
from capacity.fit.typical import engines as typical_engines
from capacity.model.basis import SPEC_SHEET, TYPICAL_PREFIX
from capacity.model.cost import convert
from capacity.model.scenario import valid_tp_sizes
from capacity.model.speculative import DRAFT_KINDS
from capacity.plan.pricing import chosen_gpu_price
from capacity.report.urlstate import (
    DEFAULT_STATE,
    LANGS,
    PIN,
    ExplorerState,
    decode,
    decode_pin,
    encode,
    encode_pin,
)

PREFIX = "ex_"
SAVED = "explorer_saved_state"
NOTICES = "explorer_notices"
DECODED = "explorer_decoded_state"
FIELDS = tuple(f.name for f in fields(ExplorerState) if f.name != "lang")
LANG_SWITCH = "lang"
"""The sidebar's language switch (its widget key)."""
LANG = "app_lang"
"""The language itself: the switch's value, kept across pages."""
PAGE = "app_page"
ENTERED = "app_page_entered"


def key(field: str) -> str:
    """Session-state (and widget) key of one Explorer input."""
    return PREFIX + field


def init_lang() -> str:
    """The language: the `lang` query parameter on the first run, then the sidebar switch."""
    if LANG not in st.session_state:
        raw = st.query_params.get("lang", "en")
        st.session_state[LANG] = raw if raw in LANGS else "en"
    lang = st.session_state[LANG]
    return lang if lang in LANGS else "en"


def seed_lang_switch() -> None:
    """Give the sidebar's switch the language before it is drawn (every run: on another page
    the switch is a new widget that would otherwise start empty)."""
    st.session_state[LANG_SWITCH] = init_lang()


def on_lang_change() -> None:
    """The switch was clicked: its value becomes the language."""
    if st.session_state.get(LANG_SWITCH) in LANGS:
        st.session_state[LANG] = st.session_state[LANG_SWITCH]


def enter_page(url_path: str, lang: str, *, owns_query: bool) -> None:
    """Before each page run: note whether this run entered the page (`page_entered`), and,
    unless the page owns its query parameters (the Explorer), leave only the language in the
    URL, so a page does not carry the parameters of the one before."""
    st.session_state[ENTERED] = st.session_state.get(PAGE) != url_path
    st.session_state[PAGE] = url_path
    if not owns_query:
        params = {"lang": lang} if lang != "en" else {}
        if st.query_params.to_dict() != params:
            st.query_params.from_dict(params)


def page_entered() -> bool:
    """Whether this run entered the page (the app's first run, or a switch from another page
    or from the same page's other address) rather than rerunning it."""
    return bool(st.session_state.get(ENTERED, True))


def init_explorer(catalog: Catalog) -> list[str]:
    """Fill the widget keys from the URL (first run) or the saved state (on entering the page:
    its widgets are new ones); returns the notices about parameters that fell back to
    defaults."""
    if SAVED not in st.session_state:
        params = st.query_params.to_dict()
        state, notices = decode(params, catalog)
        if params.get(PIN):
            pinned, more = decode_pin(params[PIN], state, catalog)
            notices += more
            st.session_state[PINNED] = pinned
        st.session_state[SAVED] = state
        st.session_state[DECODED] = state
        st.session_state[NOTICES] = notices
    saved: ExplorerState = st.session_state[SAVED]
    entered = page_entered()
    for name in FIELDS:
        if entered or key(name) not in st.session_state:
            st.session_state[key(name)] = getattr(saved, name)
    if entered or key(PROMPT_FOLLOWS) not in st.session_state:
        st.session_state[key(PROMPT_FOLLOWS)] = saved.prompt == 0
    sync_prompt()
    return list(st.session_state.get(NOTICES, []))


PROMPT_FOLLOWS = "prompt_follows"
"""The switch 'the prompt follows the context' (`ex_prompt_follows`; `prompt=0` in the URL)."""


def sync_prompt() -> None:
    """Before the prompt input is drawn: while the prompt follows the context it shows the
    context; once set apart it keeps its own value (at least 1)."""
    if st.session_state.get(key(PROMPT_FOLLOWS), True):
        st.session_state[key("prompt")] = int(st.session_state[key("ctx")])
    elif int(st.session_state.get(key("prompt"), 0)) < 1:
        st.session_state[key("prompt")] = int(st.session_state[key("ctx")])


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
    if st.session_state.get(key(PROMPT_FOLLOWS), True):
        values["prompt"] = 0
    state = replace(DEFAULT_STATE, lang=lang, **values)
    st.session_state[SAVED] = state
    if state != st.session_state.get(DECODED):
        st.session_state[NOTICES] = []
    return state


PINNED = "explorer_pinned"
"""The pinned what-if of Compare (an ExplorerState), or None."""


def pinned_state(lang: str) -> ExplorerState | None:
    """The pinned what-if, in the page's language."""
    pinned: ExplorerState | None = st.session_state.get(PINNED)
    return None if pinned is None else replace(pinned, lang=lang)


def pin() -> None:
    """Pin the current what-if (the one the URL holds now)."""
    st.session_state[PINNED] = st.session_state.get(SAVED)


def unpin() -> None:
    """Drop the pinned what-if."""
    st.session_state[PINNED] = None


def write_url(state: ExplorerState) -> None:
    """Put the state into the query parameters (only what differs from the defaults), and the
    pinned what-if as its differences from it (`pin=`)."""
    params = encode(state)
    pinned = pinned_state(state.lang)
    if pinned is not None:
        params[PIN] = encode_pin(pinned, state)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)


def on_gpu_change(catalog: Catalog) -> None:
    """A new GPU brings its own price, converted to the chosen currency: its offer of the
    offer kind the price came from, else its catalog price (and no offer kind)."""
    gpu = catalog.gpus.get(st.session_state.get(key("gpu"), ""))
    if gpu is None:
        return
    price, kind = chosen_gpu_price(
        catalog, gpu, currency=st.session_state.get(key("currency"), "CNY"),
        cny_per_usd=float(st.session_state.get(key("rate"), DEFAULT_STATE.rate)),
        offer_kind=str(st.session_state.get(key("offer"), "")))
    st.session_state[key("offer")] = kind
    st.session_state[key("price")] = price
    st.session_state.get(TYPED, {}).pop("price", None)


def on_basis_change(catalog: Catalog) -> None:
    """A basis was chosen: the knob sliders take its values (the chapter's for '')."""
    show_basis_knobs(catalog)


BASIS_SLIDERS = {"eff": "eff", "mfu": "mfu", "eta_bw": "eta_bw",
                 "step_overhead_ms": "step_oh_ms", "prefill_overhead_ms": "prefill_oh_ms",
                 "step_method": "step"}
"""Scenario knob -> the Explorer input that shows it."""


def show_basis_knobs(catalog: Catalog) -> None:
    """Put the chosen basis' knobs into the sliders (a named basis sets them all; the URL then
    carries what the page shows)."""
    from capacity.fit.planning import scenario_with_basis

    basis = str(st.session_state.get(key("calibration"), ""))
    try:
        s = scenario_with_basis(from_widgets(init_lang()).scenario(catalog).with_(
            calibration=None), basis)
    except CapacityError:
        return
    for knob, name in BASIS_SLIDERS.items():
        st.session_state[key(name)] = getattr(s, knob)


def basis_choices() -> list[str]:
    """The prediction bases the Explorer and the Planner offer: the chapter's knobs (''), the
    spec sheet, each engine's typical knobs, every saved calibration."""
    return ["", SPEC_SHEET, *(TYPICAL_PREFIX + k for k in typical_engines()), *saved_calibrations()]


def scenario_spare(state: ExplorerState) -> int:
    """The spare GPUs of the what-if (one replica: TP GPUs)."""
    return state.spare * state.tp


def set_context(tokens: int) -> None:
    """A fix button: the context (and a prompt set apart, capped at it) becomes `tokens`."""
    st.session_state[key("ctx")] = int(tokens)
    if int(st.session_state.get(key("prompt"), 0)) > tokens:
        st.session_state[key("prompt")] = int(tokens)


def use_concurrency_as_load() -> None:
    """The deployment's figures at the concurrency `c` (a closed loop) instead of the design
    rate the Planner gave."""
    st.session_state[key("load")] = 0.0


TYPED = "explorer_typed_money"
"""For each money input: (currency, value) as the user last typed it, and the converted value
shown now; a conversion back to that currency returns the typed value."""


def on_currency_change() -> None:
    """Switching currency converts the hourly price (and the cost SLO) at the chosen rate.

    A round trip (CNY -> USD -> CNY) gives back the value typed in CNY, not the value converted
    twice through floating point: each input remembers what was typed and the converted value it
    showed, and while that is unchanged, converting back restores the typed one.
    """
    new = st.session_state.get(key("currency"), "CNY")
    old = "USD" if new == "CNY" else "CNY"
    rate = float(st.session_state.get(key("rate"), DEFAULT_STATE.rate))
    typed: dict[str, tuple[str, float, float, float]] = st.session_state.setdefault(TYPED, {})
    for name in ("price", "slo_cost"):
        value = float(st.session_state.get(key(name), getattr(DEFAULT_STATE, name)))
        origin = typed.get(name)
        if origin is not None and origin[0] == new and origin[2] == value and origin[3] == rate:
            st.session_state[key(name)] = origin[1]  # back where it was typed
            del typed[name]
            continue
        # exact, not rounded: a catalog price converted stays the catalog's price in the new
        # currency (the deployment box labels it so, not "entered"; rounded to 4 decimals it
        # was 0.2817 against the catalog's 0.28169..., a browser audit, 2026-12-07)
        converted = convert(value, old, new, rate)
        typed[name] = (old, value, converted, rate)
        st.session_state[key(name)] = converted


def on_model_change(catalog: Catalog) -> None:
    """A new model keeps the weight format when it has it, else takes the model's default; a
    context past the new model's limit becomes that limit (as the Planner's model choice)."""
    model = catalog.models.get(st.session_state.get(key("model"), ""))
    if model is None:
        return
    formats = [f.key for f in catalog.formats_for(model)]
    if st.session_state.get(key("weights")) not in formats:
        stated = [v.format for v in model.stated_variants]
        st.session_state[key("weights")] = stated[0] if stated else model.default_format
    if int(st.session_state.get(key("ctx"), 0)) > model.max_context_tokens:
        st.session_state[key("ctx")] = model.max_context_tokens


RELIEF_FIELDS = {"gpus": "gpus", "tp": "tp", "weights": "weights", "kv_dtype": "kv",
                 "context": "ctx", "concurrency": "c", "prompt": "prompt", "mfu": "mfu",
                 "price": "price"}
"""The Explorer input each relief kind (`capacity.report.explain.ReliefKind`) sets."""


def apply_relief(kind: str, value: float | str, n_gpus: int, tp: int, pp: int = 1) -> None:
    """A relief button was clicked: set the input it changes, and the GPUs, TP and PP it
    gives."""
    name = RELIEF_FIELDS[kind]
    default = getattr(DEFAULT_STATE, name)
    st.session_state[key(name)] = (float(value) if isinstance(default, float)
                                   else int(value) if isinstance(default, int) else str(value))
    if name == "prompt":
        st.session_state[key(PROMPT_FOLLOWS)] = False
    st.session_state[key("gpus")] = int(n_gpus)
    st.session_state[key("tp")] = int(tp)
    st.session_state[key("pp")] = int(pp)
    if name == "c" and int(value) > int(st.session_state.get("ex_c_max", 1024)):
        st.session_state["ex_c_max"] = int(value)


MAX_TP = 16
"""The largest TP size the Explorer offers (the URL's limit)."""
DRAFT_CHOICES: tuple[str, ...] = ("", *DRAFT_KINDS)
"""The speculative-decoding drafts the Explorer offers: none (''), then `DRAFT_KINDS`."""


def fit_draft_tau() -> None:
    """Before the acceptance-length input is drawn: an entered tau stays within 1..k+1 of the
    depth now chosen (a shallower draft cannot keep more tokens than it verifies)."""
    top = float(int(st.session_state[key("draft_k")]) + 1)
    tau = float(st.session_state.get(key("draft_tau"), DEFAULT_STATE.draft_tau))
    if not 1.0 <= tau <= top:
        st.session_state[key("draft_tau")] = min(max(tau, 1.0), top)


def valid_tps(catalog: Catalog) -> list[int]:
    """The TP sizes the chosen model allows on the chosen GPU count (F10), up to `MAX_TP`."""
    model = catalog.models[st.session_state[key("model")]]
    gpus = int(st.session_state[key("gpus")])
    return [tp for tp in valid_tp_sizes(model, gpus) if tp <= MAX_TP] or [1]


def valid_pps(catalog: Catalog) -> list[int]:
    """The PP sizes (F13) the chosen model allows on the chosen GPU count and TP: each a
    divisor of GPUs / TP, at most one stage a layer, up to `MAX_TP`."""
    model = catalog.models[st.session_state[key("model")]]
    per = int(st.session_state[key("gpus")]) // max(int(st.session_state[key("tp")]), 1)
    return [pp for pp in range(1, min(per, model.layers, MAX_TP) + 1) if per % pp == 0] or [1]


def fit_pp(catalog: Catalog) -> None:
    """Before the PP input is drawn: a PP the GPU count and TP no longer allow becomes 1."""
    if int(st.session_state.get(key("pp"), 1)) not in valid_pps(catalog):
        st.session_state[key("pp")] = 1


def fit_tp(catalog: Catalog) -> tuple[int, int] | None:
    """Before the TP input is drawn: a TP size the GPU count or the model no longer allows
    moves to the nearest valid one. Returns (old, new) when it moved, for the page to say so."""
    tp = int(st.session_state[key("tp")])
    sizes = valid_tps(catalog)
    if tp in sizes:
        return None
    new = min(sizes, key=lambda v: (abs(v - tp), v))
    st.session_state[key("tp")] = new
    return tp, new


MAX_CONCURRENCY = 100_000
"""The largest concurrency the Explorer takes (the URL's limit)."""
MAX_CONTEXT = 10_000_000
"""The largest context the Explorer takes (the URL's limit)."""
MIRRORED = ("c", "ctx")
"""Inputs drawn twice: a slider for the rough value, a number input (`ex_<name>_in`) for the
exact one."""


def mirror_inputs() -> None:
    """Before the sliders are drawn: their number inputs show the sliders' values."""
    for name in MIRRORED:
        st.session_state[key(name + "_in")] = int(st.session_state[key(name)])


def from_mirror(name: str) -> None:
    """A number input beside a slider changed: it sets the slider's value (and widens the
    concurrency slider when the number is beyond its end)."""
    value = int(st.session_state[key(name + "_in")])
    st.session_state[key(name)] = value
    if name == "c" and value > int(st.session_state.get("ex_c_max", 1024)):
        st.session_state["ex_c_max"] = value
