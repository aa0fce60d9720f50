"""The Explorer's state as URL query parameters: encode, decode, validate, fall back.

A copied link restores every input. Decoding never raises: an invalid or stale parameter (an
unknown GPU, util = 7) falls back to its default and adds a notice naming the parameter, the
bad value and why. Only parameters that differ from the defaults are written, so links stay short.
Pure (no Streamlit): the app binds it to `st.query_params`; the planner builds links with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import urlencode

from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.model.cost import DEFAULT_CNY_PER_USD
from capacity.model.kv import DEFAULT_BLOCK_SIZE
from capacity.model.memory import DEFAULT_HEADROOM, DEFAULT_OVERHEAD_GB, DEFAULT_UTIL
from capacity.model.scenario import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_EFF,
    DEFAULT_GPU,
    DEFAULT_MFU,
    Scenario,
    make_scenario,
    nearest_valid_tp,
    valid_tp_sizes,
)
from capacity.plan.search import Option, PlanInputs, design_concurrency_total
from capacity.units import KV_DTYPES

LANGS = ("en", "zh")


@dataclass(frozen=True, kw_only=True)
class ExplorerState:
    """Every Explorer input. Field names are the query-parameter names.

    `prompt` 0 means the prompt follows the context (TTFT for a prompt as long as `ctx`); a
    positive `prompt` is set apart from it (capped at `ctx`).
    """

    lang: str = "en"
    model: str = "qwen3.5-9b"
    weights: str = "awq"
    gpu: str = DEFAULT_GPU
    gpus: int = 1
    tp: int = 1
    ctx: int = DEFAULT_CONTEXT_TOKENS
    prompt: int = 0
    kv: str = "fp16"
    block: int = DEFAULT_BLOCK_SIZE
    util: float = DEFAULT_UTIL
    overhead: float = DEFAULT_OVERHEAD_GB
    c: int = 50
    slo_ttft_ms: float = 2000.0
    slo_tpot_ms: float = 50.0
    slo_cost: float = 1.0
    price: float = 2.0
    currency: str = "CNY"
    rate: float = DEFAULT_CNY_PER_USD
    eff: float = DEFAULT_EFF
    mfu: float = DEFAULT_MFU
    headroom: float = DEFAULT_HEADROOM
    calibration: str = ""

    @property
    def prompt_tokens(self) -> int:
        """The prompt TTFT is for: the context when `prompt` is 0, else min(prompt, ctx)."""
        return min(self.prompt, self.ctx) if self.prompt else self.ctx

    @property
    def concurrency(self) -> int:
        """Concurrent requests in all (the URL's `c`), for code outside the URL codec."""
        return self.c

    def scenario(self, catalog: Catalog) -> Scenario:
        """The Scenario these inputs describe (prices in `currency`).

        With `calibration` set, the saved calibration's fitted knobs replace the spec-sheet
        efficiencies (eff, MFU, bandwidth efficiency, per-step and prefill overheads, and the
        runtime memory overhead when it was measured): F11 (docs/method.md)'s "calibrated" prediction.
        """
        s = make_scenario(
            self.model, self.gpu, catalog=catalog, weights=self.weights, n_gpus=self.gpus,
            tp=self.tp, util=self.util, overhead_gb=self.overhead, context_tokens=self.ctx,
            prompt_tokens=min(self.prompt, self.ctx) if self.prompt else None,
            kv_dtype=self.kv, block_size=self.block,
            eff=self.eff, mfu=self.mfu, price_per_hour=self.price, currency=self.currency,
            cny_per_usd=self.rate, headroom=self.headroom,
        )
        if not self.calibration:
            return s
        from capacity.fit.calibration import apply, load_named  # scipy: only when calibrated

        return apply(load_named(self.calibration), s)


DEFAULT_STATE = ExplorerState()

_RANGES: dict[str, tuple[float, float]] = {
    "gpus": (1, 64), "tp": (1, 16), "ctx": (1, 10_000_000), "prompt": (0, 10_000_000),
    "block": (1, 1024), "util": (0.01, 1.0), "overhead": (0.0, 1000.0), "c": (1, 100_000),
    "slo_ttft_ms": (1.0, 1e7), "slo_tpot_ms": (0.1, 1e6), "slo_cost": (0.0, 1e6),
    "price": (0.0, 1e5), "rate": (0.01, 1e4), "eff": (0.01, 1.0), "mfu": (0.01, 1.0),
    "headroom": (0.0, 2.0),
}


def encode(state: ExplorerState) -> dict[str, str]:
    """Query parameters for `state`: only the fields that differ from the defaults."""
    out: dict[str, str] = {}
    for f in fields(ExplorerState):
        value = getattr(state, f.name)
        if value != getattr(DEFAULT_STATE, f.name):
            out[f.name] = f"{value:g}" if isinstance(value, float) else str(value)
    return out


PIN = "pin"
"""The query parameter of a pinned what-if (Compare): the pinned state's differences from the
current one, as `name:value` items joined by ',' (`pin=c:100,ctx:32768`); `same` when it
equals the current state. Links without it open without a pin."""
PIN_SAME = "same"


def encode_pin(pinned: ExplorerState, current: ExplorerState) -> str:
    """The `pin` parameter: the fields of `pinned` that differ from `current` (not `lang`)."""
    items = []
    for f in fields(ExplorerState):
        value = getattr(pinned, f.name)
        if f.name != "lang" and value != getattr(current, f.name):
            items.append(f"{f.name}:{value:g}" if isinstance(value, float) else
                         f"{f.name}:{value}")
    return ",".join(items) or PIN_SAME


def decode_pin(raw: str, current: ExplorerState, catalog: Catalog
               ) -> tuple[ExplorerState | None, list[str]]:
    """The pinned state a `pin` parameter describes relative to `current` (None when it is
    unreadable), and notices for the parts that fell back (as `decode` gives them)."""
    if raw.strip() == PIN_SAME:
        return current, []
    params: dict[str, str] = {}
    for item in raw.split(","):
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            return None, [f"'pin={raw}' ignored (items are name:value, joined by ','); "
                          "nothing is pinned"]
        params[name.strip()] = value
    unknown = sorted(set(params) - {f.name for f in fields(ExplorerState)} - {"lang"})
    if unknown:
        return None, [f"'pin={raw}' ignored (unknown {', '.join(unknown)}); nothing is pinned"]
    state, notices = decode(params, catalog, base=current)
    return replace(state, lang=current.lang), [f"pin: {n}" for n in notices]


def explorer_url(state: ExplorerState, base: str = "/explorer") -> str:
    """A relative link that opens the Explorer on `state`."""
    q = encode(state)
    return base + ("?" + urlencode(q) if q else "")


def decode(params: Mapping[str, str | list[str]], catalog: Catalog,
           base: ExplorerState = DEFAULT_STATE) -> tuple[ExplorerState, list[str]]:
    """Read query parameters into a state; bad values fall back to `base` with a notice.

    Unknown parameters are ignored silently (other pages may add their own).
    """
    notices: list[str] = []
    changes: dict[str, Any] = {}
    for f in fields(ExplorerState):
        if f.name not in params:
            continue
        raw_value = params[f.name]
        raw = raw_value[-1] if isinstance(raw_value, list) else raw_value
        default = getattr(base, f.name)
        try:
            changes[f.name] = _parse(f.name, raw, type(default))
        except ValueError as exc:
            fallback = ("the spec-sheet prediction" if f.name == "calibration" and not default
                        else default)
            notices.append(f"'{f.name}={raw}' ignored ({exc}); using {fallback}")
    state = replace(base, **changes)
    state, more = _check_catalog(state, catalog, base)
    notices += more
    return state, notices


def _parse(name: str, raw: str, kind: type) -> Any:
    raw = raw.strip()
    if kind is str:
        value: Any = raw.lower() if name not in ("currency",) else raw.upper()
        if name == "lang" and value not in LANGS:
            raise ValueError(f"language must be one of {', '.join(LANGS)}")
        if name == "kv" and value not in KV_DTYPES:
            raise ValueError(f"KV precision must be one of {', '.join(KV_DTYPES)}")
        if name == "currency" and value not in ("CNY", "USD"):
            raise ValueError("currency must be CNY or USD")
        if name == "calibration":
            # a saved calibration's name, never a path: links must not read arbitrary files
            from capacity.fit.calibration import check_name

            if raw:
                try:
                    check_name(raw)
                except CapacityError:
                    raise ValueError("a calibration name holds only letters, digits, '-', '_', "
                                     "'.' and does not end in .toml") from None
            return raw
        return value
    try:
        number = float(raw)
    except ValueError:
        raise ValueError("not a number") from None
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    if kind is int:
        if number != int(number):
            raise ValueError("not a whole number")
        number = int(number)
    lo, hi = _RANGES.get(name, (-math.inf, math.inf))
    if not lo <= number <= hi:
        raise ValueError(f"outside {lo:g}..{hi:g}")
    return number


def _check_catalog(state: ExplorerState, catalog: Catalog, base: ExplorerState
                   ) -> tuple[ExplorerState, list[str]]:
    notices: list[str] = []
    if state.gpu not in catalog.gpus:
        notices.append(f"'gpu={state.gpu}' is not in the catalog; using {base.gpu}")
        state = replace(state, gpu=base.gpu)
    if state.model not in catalog.models:
        notices.append(f"'model={state.model}' is not in the catalog; using {base.model}")
        state = replace(state, model=base.model, weights=base.weights)
    formats = {f.key for f in catalog.formats_for(catalog.models[state.model])}
    if state.weights not in formats:
        fallback = catalog.models[state.model].default_format
        notices.append(f"'weights={state.weights}' is not a format of {state.model}; "
                       f"using {fallback}")
        state = replace(state, weights=fallback)
    if state.calibration:
        from capacity.fit.calibration import named_path

        try:
            exists = named_path(state.calibration).is_file()
        except CapacityError:
            exists = False
        if not exists:
            notices.append(f"'calibration={state.calibration}' is not a saved calibration; "
                           "using the spec-sheet prediction")
            state = replace(state, calibration="")
    model = catalog.models[state.model]
    if state.tp not in valid_tp_sizes(model, state.gpus):
        tp = nearest_valid_tp(model, state.gpus, state.tp)
        notices.append(f"'tp={state.tp}' is not possible for {model.name} on {state.gpus} "
                       f"GPUs; using TP={tp}, the nearest size that is")
        state = replace(state, tp=tp)
    try:
        state.scenario(catalog)
    except CapacityError as exc:
        notices.append(f"these settings cannot be computed ({exc}); using the defaults")
        state = replace(base, lang=state.lang)
    return state, notices


def explorer_state(inp: PlanInputs, o: Option, catalog: Catalog | None = None,
                   lang: str = "en") -> ExplorerState:
    """The Explorer's inputs for one option, for an 'open in Explorer' link."""
    cat = catalog or default_catalog()
    wl = inp.workload
    c = design_concurrency_total(inp, o)
    return ExplorerState(
        lang=lang, model=cat.variant(inp.model).model.key, weights=o.weights, gpu=o.gpu,
        gpus=o.n_gpus, tp=o.tp, ctx=wl.context_tokens,
        prompt=0 if wl.prompt >= wl.context_tokens else wl.prompt, kv=o.kv_dtype,
        util=inp.util, overhead=inp.overhead_gb, c=max(1, c), slo_ttft_ms=inp.slo.ttft_ms,
        slo_tpot_ms=inp.slo.tpot_ms, price=round(o.price_per_hour, 4), currency=inp.currency,
        rate=inp.cny_per_usd, eff=inp.eff, mfu=inp.mfu, headroom=inp.memory_headroom)
