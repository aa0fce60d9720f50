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
)
from capacity.plan.search import Option, PlanInputs, design_concurrency_total
from capacity.units import KV_DTYPES

LANGS = ("en", "zh")


@dataclass(frozen=True, kw_only=True)
class ExplorerState:
    """Every Explorer input. Field names are the query-parameter names."""

    lang: str = "en"
    model: str = "qwen3.5-9b"
    weights: str = "awq"
    gpu: str = DEFAULT_GPU
    gpus: int = 1
    tp: int = 1
    ctx: int = DEFAULT_CONTEXT_TOKENS
    prompt: int = DEFAULT_CONTEXT_TOKENS
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
            prompt_tokens=min(self.prompt, self.ctx), kv_dtype=self.kv, block_size=self.block,
            eff=self.eff, mfu=self.mfu, price_per_hour=self.price, currency=self.currency,
            cny_per_usd=self.rate, headroom=self.headroom,
        )
        if not self.calibration:
            return s
        from capacity.fit.calibration import apply, load  # scipy: only when calibrated

        return apply(load(self.calibration), s)


DEFAULT_STATE = ExplorerState()

_RANGES: dict[str, tuple[float, float]] = {
    "gpus": (1, 64), "tp": (1, 16), "ctx": (1, 10_000_000), "prompt": (1, 10_000_000),
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
            notices.append(f"'{f.name}={raw}' ignored ({exc}); using {default}")
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
            if raw and (raw.startswith(".") or not all(c.isalnum() or c in "-_." for c in raw)):
                raise ValueError("a calibration name holds only letters, digits, '-', '_', '.'")
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
        from capacity.fit.calibration import calibration_path

        try:
            exists = calibration_path(state.calibration).exists()
        except CapacityError:
            exists = False
        if not exists:
            notices.append(f"'calibration={state.calibration}' is not a saved calibration; "
                           "using the spec-sheet prediction")
            state = replace(state, calibration="")
    try:
        state.scenario(catalog)
    except CapacityError as exc:
        notices.append(f"these settings cannot be computed ({exc}); using the defaults")
        state = replace(base, lang=state.lang)
    return state, notices


def explorer_state(inp: PlanInputs, o: Option, catalog: Catalog | None = None,
                   lang: str = "en") -> ExplorerState:
    """The Explorer's inputs for one option, for an 'open in Explorer' link.

    Every input that changes a verdict travels: the option (GPU, count, TP, formats), the
    workload at the design concurrency (peak + headroom), the engine and efficiency knobs, the
    price and exchange rate, and the targets: TTFT, TPOT and the cost target (0 when the plan
    has none, which turns the Explorer's cost check off instead of applying its default).
    """
    cat = catalog or default_catalog()
    wl = inp.workload
    c = design_concurrency_total(inp, o)
    return ExplorerState(
        lang=lang, model=cat.variant(inp.model).model.key, weights=o.weights, gpu=o.gpu,
        gpus=o.n_gpus, tp=o.tp, ctx=wl.context_tokens, prompt=wl.prompt, kv=o.kv_dtype,
        util=inp.util, overhead=inp.overhead_gb, c=max(1, c), slo_ttft_ms=inp.slo.ttft_ms,
        slo_tpot_ms=inp.slo.tpot_ms, slo_cost=inp.slo.cost_per_mtok,
        price=round(o.price_per_hour, 4), currency=inp.currency,
        rate=inp.cny_per_usd, eff=inp.eff, mfu=inp.mfu, headroom=inp.memory_headroom)
