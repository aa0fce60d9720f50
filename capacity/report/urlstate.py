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
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from capacity.catalog.engines import DEFAULT_ENGINE, engine_names, engine_profile
from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.offers import OFFER_KINDS, Offer, bundled_of_kind
from capacity.errors import CapacityError, InputError
from capacity.model.basis import SPEC_SHEET, TYPICAL_PREFIX
from capacity.model.cost import DEFAULT_CNY_PER_USD, Currency, convert
from capacity.model.kv import DEFAULT_BLOCK_SIZE
from capacity.model.memory import DEFAULT_HEADROOM, DEFAULT_OVERHEAD_GB, DEFAULT_UTIL
from capacity.model.roofline import StepMethod
from capacity.model.scenario import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_EFF,
    DEFAULT_GPU,
    DEFAULT_MFU,
    Scenario,
    context_limit_note,
    make_scenario,
    nearest_valid_tp,
    valid_tp_sizes,
)
from capacity.plan.mix import MAX_WORKLOADS, MIX_NAME_CHARS, MixEntry, MixWorkload
from capacity.plan.search import Option, PlanInputs, design_concurrency_total
from capacity.types import Note

if TYPE_CHECKING:
    from capacity.plan.deployment import Deployment
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
    eta_bw: float = 1.0
    """Achieved share of the spec-sheet memory bandwidth in a decode step (1.0: the chapter's
    spec-sheet roofline; a Planner option on a typical-engine basis carries the engine's)."""
    step_oh_ms: float = 0.0
    """Fixed overhead per decode step, ms (0: spec-sheet)."""
    prefill_oh_ms: float = 0.0
    """Fixed overhead per prefill, ms (0: spec-sheet)."""
    engine: str = DEFAULT_ENGINE
    """Engine profile (data/engines.toml) the load view follows: chapter, vllm, sglang, llamacpp."""
    step: str = "chapter"
    """Decode-step method (`capacity.model.roofline.StepMethod`): 'chapter' (F4, one roofline
    over the whole step) or 'operator' (F4b, weight GEMMs then attention, each on its own
    roofline). A saved calibration's own method wins."""
    prefix: int = 0
    """Shared prefix (system prompt) tokens held in the prefix cache; 0 = none."""
    prefix_share: float = 0.9
    """Share of requests that reuse the shared prefix."""
    spare: int = 0
    """1: an N+1 spare replica (TP GPUs), paid for in every cost, never serving."""
    out: int = 256
    """Output tokens per request (the load view and the deployment's figures)."""
    load: float = 0.0
    """The design load, requests/s (the Planner's peak x (1 + headroom)); 0 = a closed loop of
    `c` requests."""
    pct: int = 90
    """The SLO percentile TTFT and TPOT are checked at (the deployment's figures)."""
    offer: str = ""
    """The offer kind `price` comes from (data/offers.toml: on-demand, reserved-1y, spot); ''
    = the catalog's price, or an entered one."""

    @property
    def prompt_tokens(self) -> int:
        """The prompt TTFT is for: the context when `prompt` is 0, else min(prompt, ctx)."""
        return min(self.prompt, self.ctx) if self.prompt else self.ctx

    @property
    def concurrency(self) -> int:
        """Concurrent requests in all (the URL's `c`), for code outside the URL codec."""
        return self.c

    def scenario(self, catalog: Catalog) -> Scenario:
        """The Scenario these inputs describe (prices in `currency`). A context beyond the
        model's limit is computed with a warning (`Scenario.warnings`, code `long_context`):
        the page says so and offers the limit, and a link in that state keeps its inputs.

        With `calibration` set, the saved calibration's fitted knobs replace the spec-sheet
        efficiencies (eff, MFU, bandwidth efficiency, per-step and prefill overheads, and the
        runtime memory overhead when it was measured): F11 (docs/method.md)'s "calibrated" prediction.
        """
        s = make_scenario(
            self.model, self.gpu, catalog=catalog, weights=self.weights, n_gpus=self.gpus,
            tp=self.tp, spare_gpus=self.spare * self.tp, util=self.util,
            overhead_gb=self.overhead, context_tokens=self.ctx,
            prompt_tokens=min(self.prompt, self.ctx) if self.prompt else None,
            kv_dtype=self.kv, block_size=self.block,
            eff=self.eff, mfu=self.mfu, price_per_hour=self.price, currency=self.currency,
            cny_per_usd=self.rate, headroom=self.headroom, eta_bw=self.eta_bw,
            step_overhead_ms=self.step_oh_ms, prefill_overhead_ms=self.prefill_oh_ms,
            step_method=self.step, allow_long_context=True,
        )
        if not self.calibration:
            return s
        from capacity.fit.planning import scenario_with_basis  # scipy: only when named

        return scenario_with_basis(s, self.calibration)

    def plan_inputs(self, catalog: Catalog) -> PlanInputs:
        """The planner's inputs for this what-if: its one GPU, format and KV precision, its
        workload at the design load (`load` req/s, else a closed loop of `c` requests, no
        further headroom), SLOs at `pct`, engine, prefix, basis and knobs, and its price with
        the source it has (the offer's or the catalog's exactly, else entered)."""
        from capacity.model.workload import Workload
        from capacity.plan.search import Slo

        wl = Workload(rate_per_s=self.load if self.load > 0 else None,
                      peak_concurrency=None if self.load > 0 else float(self.c),
                      context_tokens=self.ctx,
                      prompt_tokens=self.prompt_tokens if self.prompt else None,
                      output_tokens=self.out, headroom=0.0)
        g = catalog.gpu(self.gpu)
        cur: Currency = "USD" if self.currency == "USD" else "CNY"
        offers = tuple(o for o in self.offer_list(catalog) if o.gpu == g.key)
        base = PlanInputs(
            model=self.model, workload=wl, formats=(self.weights,), gpus=(g.key,),
            kv_dtypes=(self.kv,), max_gpus=max(self.gpus, 1), currency=cur,
            cny_per_usd=self.rate, util=self.util, overhead_gb=self.overhead,
            memory_headroom=self.headroom, engine=self.engine, spare=self.spare > 0,
            slo=Slo(ttft_ms=self.slo_ttft_ms, tpot_ms=self.slo_tpot_ms,
                    quantile=self.pct / 100.0, cost_per_mtok=self.slo_cost),
            offers=offers, offer_kind=self.offer,
            prefix_tokens=self.prefix, prefix_share=self.prefix_share if self.prefix else 0.0)
        derived = base.price_of(g).per_gpu_hour
        if not math.isclose(derived, self.price, rel_tol=1e-6, abs_tol=1e-9):
            base = replace(base, price_overrides=((g.key, self.price),))
        if self.calibration:
            from capacity.fit.planning import with_basis

            return with_basis(base, self.calibration)
        return replace(base, eff=self.eff, mfu=self.mfu, eta_bw=self.eta_bw,
                       step_overhead_ms=self.step_oh_ms, prefill_overhead_ms=self.prefill_oh_ms,
                       step_method=self.step)

    def offer_list(self, catalog: Catalog) -> tuple[Offer, ...]:
        """The bundled offers of kind `offer`, one per GPU (none when `offer` is '')."""
        return bundled_of_kind(catalog, self.offer)

    def deployment(self, catalog: Catalog) -> Deployment:
        """The deployment this what-if is (`capacity.plan.deployment`): the Planner's option
        it was opened from, with the same figures (`deployment.assess`)."""
        from capacity.plan.deployment import Deployment

        return Deployment(inputs=self.plan_inputs(catalog), gpu=self.gpu, weights=self.weights,
                          kv_dtype=self.kv, tp=self.tp, replicas=max(self.gpus // self.tp, 1))


STEP_METHODS: tuple[str, ...] = tuple(m.value for m in StepMethod)

DEFAULT_STATE = ExplorerState()

_RANGES: dict[str, tuple[float, float]] = {
    "gpus": (1, 64), "tp": (1, 16), "ctx": (1, 10_000_000), "prompt": (0, 10_000_000),
    "block": (1, 1024), "util": (0.01, 1.0), "overhead": (0.0, 1000.0), "c": (1, 100_000),
    "slo_ttft_ms": (1.0, 1e7), "slo_tpot_ms": (0.1, 1e6), "slo_cost": (0.0, 1e6),
    "price": (0.0, 1e5), "rate": (0.01, 1e4), "eff": (0.01, 1.0), "mfu": (0.01, 1.0),
    "headroom": (0.0, 2.0), "eta_bw": (0.01, 1.0), "step_oh_ms": (0.0, 1000.0),
    "prefill_oh_ms": (0.0, 100_000.0), "prefix": (0, 10_000_000), "prefix_share": (0.0, 1.0),
    "spare": (0, 1), "out": (1, 1_000_000), "load": (0.0, 1e6), "pct": (50, 99),
}



def _why(exc: BaseException) -> str:
    """An exception's message as a notice's reason: its `Note` when it has one (the page says
    it in its language), else its text."""
    arg = exc.args[0] if exc.args else ""
    return arg if isinstance(arg, Note) else str(exc)


def _ignored(name: str, raw: str, exc: BaseException, default: object,
             basis: bool) -> Note:
    """The notice for a link parameter that could not be used and fell back to `default`."""
    shown = raw if len(raw) <= 60 else raw[:60] + "..."
    if basis and not default:
        return Note(f"'{name}={shown}' ignored ({exc}); using the chapter's assumptions",
                    code="link_ignored_basis", name=name, value=shown, why=_why(exc))
    return Note(f"'{name}={shown}' ignored ({exc}); using {default}", code="link_ignored",
                name=name, value=shown, why=_why(exc), using=str(default))


def _number(raw: str, kind: type, bounds: tuple[float, float]) -> float | int:
    """A URL value as a finite number of `kind` (int or float) within `bounds`, or ValueError
    with the reason (the Explorer's and the Planner's links share it)."""
    try:
        number: float | int = float(raw)
    except ValueError:
        raise ValueError(Note("not a number", code="why_not_number")) from None
    if not math.isfinite(number):
        raise ValueError(Note("not a finite number", code="why_not_finite"))
    if kind is int:
        if number != int(number):
            raise ValueError(Note("not a whole number", code="why_not_whole"))
        number = int(number)
    lo, hi = bounds
    if not lo <= number <= hi:
        raise ValueError(Note(f"outside {lo:g}..{hi:g}", code="why_outside", lo=f"{lo:g}",
                              hi=f"{hi:g}"))
    return number

def _float_text(value: float) -> str:
    """A float as a link writes it: the shortest text that reads back to the same number
    ('13.135', '2', '1.6666666666666667'), so a link reopens exactly the figures it was
    made from (a price or a design load rounded to 6 digits would move them)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def encode(state: ExplorerState) -> dict[str, str]:
    """Query parameters for `state`: only the fields that differ from the defaults."""
    out: dict[str, str] = {}
    for f in fields(ExplorerState):
        value = getattr(state, f.name)
        if value != getattr(DEFAULT_STATE, f.name):
            out[f.name] = _float_text(value) if isinstance(value, float) else str(value)
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
            items.append(f"{f.name}:{_float_text(value)}" if isinstance(value, float) else
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
            notices.append(_ignored(f.name, raw, exc, default, f.name == "calibration"))
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
        if name == "engine":
            return _engine(value)
        if name == "step" and value not in STEP_METHODS:
            raise ValueError(f"step method must be one of {', '.join(STEP_METHODS)}")
        if name == "calibration":
            # a basis: 'spec', 'typical:ENGINE' or a saved calibration's name, never a path
            return _basis_param(raw)
        if name == "offer":
            if value and value not in OFFER_KINDS:
                raise ValueError(f"offer kind must be one of {', '.join(OFFER_KINDS)}")
            return value
        return value
    return _number(raw, kind, _RANGES.get(name, (-math.inf, math.inf)))


def _basis_param(raw: str) -> str:
    """A URL's basis (`capacity.fit.planning.check_basis`), or ValueError saying what a basis
    is: the chapter's (empty), 'spec', 'typical:ENGINE' or a saved calibration's name (a
    name, never a path: links must not read arbitrary files)."""
    from capacity.fit.planning import check_basis

    try:
        return check_basis(raw)
    except CapacityError as exc:
        raise ValueError(_why(exc)) from None


def _engine(value: str) -> str:
    """An engine profile's key, or ValueError naming the known ones."""
    try:
        return engine_profile(value).key
    except CapacityError:
        raise ValueError(f"engine must be one of {', '.join(engine_names())}") from None


def _check_catalog(state: ExplorerState, catalog: Catalog, base: ExplorerState
                   ) -> tuple[ExplorerState, list[str]]:
    notices: list[str] = []
    if state.gpu not in catalog.gpus:
        notices.append(Note(f"'gpu={state.gpu}' is not in the catalog; using {base.gpu}",
                            code="link_unknown", name="gpu", value=state.gpu, using=base.gpu))
        state = replace(state, gpu=base.gpu)
    if state.model not in catalog.models:
        notices.append(Note(f"'model={state.model}' is not in the catalog; using {base.model}",
                            code="link_unknown", name="model", value=state.model,
                            using=base.model))
        state = replace(state, model=base.model, weights=base.weights)
    formats = {f.key for f in catalog.formats_for(catalog.models[state.model])}
    if state.weights not in formats:
        fallback = catalog.models[state.model].default_format
        notices.append(Note(f"'weights={state.weights}' is not a format of {state.model}; "
                            f"using {fallback}", code="link_format", value=state.weights,
                            model=state.model, using=fallback))
        state = replace(state, weights=fallback)
    if state.calibration and state.calibration != SPEC_SHEET and not state.calibration.startswith(
            TYPICAL_PREFIX):
        from capacity.fit.calibration import named_path

        try:
            exists = named_path(state.calibration).is_file()
        except CapacityError:
            exists = False
        if not exists:
            notices.append(Note(f"'calibration={state.calibration}' is not a saved "
                                "calibration; using the chapter's assumptions",
                                code="link_no_calibration", value=state.calibration))
            state = replace(state, calibration="")
    model = catalog.models[state.model]
    if state.tp not in valid_tp_sizes(model, state.gpus):
        tp = nearest_valid_tp(model, state.gpus, state.tp)
        notices.append(Note(f"'tp={state.tp}' is not possible for {model.name} on {state.gpus} "
                            f"GPUs; using TP={tp}, the nearest size that is", code="link_tp",
                            value=state.tp, model=model.name, n=state.gpus, tp=tp))
        state = replace(state, tp=tp)
    try:
        state.scenario(catalog)
    except CapacityError as exc:
        notices.append(Note(f"these settings cannot be computed ({exc}); using the defaults",
                            code="link_cannot", why=_why(exc)))
        state = replace(base, lang=state.lang)
    return state, notices


def explorer_state(inp: PlanInputs, o: Option, catalog: Catalog | None = None,
                   lang: str = "en") -> ExplorerState:
    """The Explorer's inputs for one option, for an 'open in Explorer' link: exactly the
    deployment (`capacity.plan.deployment`) the option is, so the Explorer shows the Planner's
    figures for it.

    Everything that changes a figure travels: the option (GPU, serving GPUs, TP, formats, the
    N+1 spare as a spare, never folded into the price), the workload (context, prompt, output)
    and the design load (the peak x (1 + headroom) as a rate, or the design concurrency), the
    engine, the basis (its name, or the knobs entered), the price per GPU-hour and the offer
    kind it comes from, the exchange rate, and the targets: TTFT, TPOT at the plan's
    percentile and the cost target (0 when the plan has none, which turns the Explorer's cost
    check off instead of applying its default).
    """
    cat = catalog or default_catalog()
    wl = inp.workload
    c = design_concurrency_total(inp, o)
    return ExplorerState(
        lang=lang, model=cat.variant(inp.model).model.key, weights=o.weights, gpu=o.gpu,
        gpus=o.n_gpus, tp=o.tp, spare=1 if o.spare_gpus else 0, ctx=wl.context_tokens,
        prompt=0 if wl.prompt >= wl.context_tokens else wl.prompt, out=wl.output_tokens,
        kv=o.kv_dtype, util=inp.util, overhead=inp.overhead_gb, c=max(1, c),
        load=(wl.peak_rate_per_s * (1 + wl.headroom) if wl.peak_rate_per_s is not None
              else 0.0),
        pct=int(round(inp.slo.quantile * 100)), slo_ttft_ms=inp.slo.ttft_ms,
        slo_tpot_ms=inp.slo.tpot_ms, slo_cost=inp.slo.cost_per_mtok,
        price=o.price_per_hour, currency=inp.currency,
        offer=inp.offer_kind if _bundled(inp, cat) else "",
        rate=inp.cny_per_usd, headroom=inp.memory_headroom, calibration=inp.basis_string,
        eff=inp.eff, mfu=inp.mfu, eta_bw=inp.eta_bw, step_oh_ms=inp.step_overhead_ms,
        prefill_oh_ms=inp.prefill_overhead_ms, step=inp.step_method, engine=inp.engine,
        prefix=inp.prefix_tokens if inp.prefix_share > 0 else 0,
        prefix_share=inp.prefix_share if inp.prefix_tokens and inp.prefix_share > 0
        else DEFAULT_STATE.prefix_share)


# ---------------------------------------------------------------------------------------------
# The Planner's state: every Planner input in the URL, with the same rules as the Explorer's
# (only what differs from the defaults is written; a bad value falls back with a notice).


@dataclass(frozen=True, kw_only=True)
class PlannerState:
    """Every Planner input. Field names are the query-parameter names (short ones, kept here
    only); `inputs()` turns them into the planner's PlanInputs."""

    lang: str = "en"
    model: str = "qwen3.5-9b-awq"
    mode: str = "dau"
    """'dau' (daily users) or 'conc' (peak concurrency entered)."""
    dau: int = 500
    rpu: float = 20.0
    share: float = 0.3
    hours: float = 2.0
    conc: int = 50
    ctx: int = DEFAULT_CONTEXT_TOKENS
    out: int = 256
    headroom: float = 0.2
    ttft: float = 2000.0
    tpot: float = 50.0
    pct: int = 90
    cost: float = 0.0
    """Cost target per M output tokens at SLO capacity; 0 = none."""
    gpus: str = ""
    """Comma list of GPU keys; '' = every catalog GPU."""
    maxg: int = 16
    kv: str = "fp16,fp8"
    tp: int = 1
    """1: tensor parallel allowed; 0: replicas only."""
    cur: str = "CNY"
    fx: float = DEFAULT_CNY_PER_USD
    """Exchange rate, CNY per USD."""
    prices: str = ""
    """Entered prices per GPU-hour in `cur`, 'rtx-4090:2.5,h100-sxm:19'; '' = catalog prices."""
    offer: str = ""
    """Offer kind of the bundled published offers (on-demand, reserved-1y, spot; data/offers.toml)
    each GPU is priced with; '' = catalog prices. Entered `prices` win over offers."""
    util: float = DEFAULT_UTIL
    mfu: float = DEFAULT_MFU
    cal: str = ""
    """A saved calibration's name, or 'typical:ENGINE' for an engine's typical efficiency
    (data/engines.toml); '' = spec-sheet figures."""
    spare: int = 0
    """1: an N+1 spare replica per option."""
    growth: float = 0.0
    """Traffic growth per month (0.1 = +10 %)."""
    mix: str = ""
    """The mix section's added workloads (`capacity.plan.mix.MixEntry`), each
    `name|model|dau|rpu|ctx|out|ttft|tpot`, joined by ';' (at most MAX_WORKLOADS - 1); '' =
    none. They share the first workload's peak window, headroom, GPUs, prices and basis."""
    engine: str = DEFAULT_ENGINE
    """Engine profile whose scheduling the load model follows (data/engines.toml)."""
    prefix: int = 0
    """Shared prefix (system prompt) tokens a prefix cache holds once; 0 = no prefix caching
    (the Explorer's `prefix`)."""
    prefix_share: float = 0.9
    """Share of requests that reuse the shared prefix (the Explorer's `prefix_share`)."""

    def mix_entries(self) -> tuple[MixEntry, ...]:
        """The added workloads `mix` holds (checked when the URL was read)."""
        out = []
        for item in (x for x in self.mix.split(MIX_SEP) if x):
            name, model, dau, rpu, ctx, outp, ttft, tpot = item.split(MIX_FIELD_SEP)
            out.append(MixEntry(name=name, model=model, dau=int(dau), rpu=float(rpu),
                                ctx=int(ctx), out=int(outp), ttft=float(ttft),
                                tpot=float(tpot)))
        return tuple(out)

    def mix_workloads(self, catalog: Catalog, first_name: str = "main"
                      ) -> tuple[MixWorkload, ...]:
        """The mix these inputs describe: the page's own inputs as the first workload, then
        the added ones on top of them (empty when none is added)."""
        entries = self.mix_entries()
        if not entries:
            return ()
        base = self.inputs(catalog)
        return (MixWorkload(name=first_name, inputs=base),
                *(e.workload(base) for e in entries))

    def price_list(self) -> tuple[tuple[str, float], ...]:
        """The entered prices as (GPU key, price per GPU-hour in `cur`) pairs."""
        out = []
        for item in self.prices.split(","):
            if item:
                gpu, _, value = item.partition(":")
                out.append((gpu, float(value)))
        return tuple(out)

    def offer_list(self, catalog: Catalog) -> tuple[Offer, ...]:
        """The bundled offers of kind `offer`, one per GPU (none when `offer` is '')."""
        return bundled_of_kind(catalog, self.offer)

    def gpu_list(self, catalog: Catalog) -> tuple[str, ...]:
        """The chosen GPU keys (every catalog GPU when none is named)."""
        keys = tuple(k for k in self.gpus.split(",") if k)
        return keys or tuple(sorted(catalog.gpus))

    def kv_list(self) -> tuple[str, ...]:
        return tuple(k for k in self.kv.split(",") if k) or ("fp16",)

    def inputs(self, catalog: Catalog) -> PlanInputs:
        """The planner's inputs these values describe (raises InputError when inconsistent)."""
        from capacity.model.workload import Workload
        from capacity.plan.search import Slo

        model = catalog.variant(self.model).model
        if self.ctx > model.max_context_tokens:
            raise InputError(context_limit_note(self.ctx, model))
        dau = self.mode == "dau"
        wl = Workload(daily_active_users=float(self.dau) if dau else None,
                      requests_per_user_per_day=self.rpu, peak_share=self.share,
                      peak_hours=self.hours, peak_concurrency=None if dau else float(self.conc),
                      context_tokens=self.ctx, output_tokens=self.out, headroom=self.headroom)
        inp = PlanInputs(
            model=self.model, workload=wl,
            slo=Slo(ttft_ms=self.ttft, tpot_ms=self.tpot, quantile=self.pct / 100.0,
                    cost_per_mtok=self.cost),
            gpus=self.gpu_list(catalog), max_gpus=self.maxg, kv_dtypes=self.kv_list(),
            allow_tp=bool(self.tp), currency="USD" if self.cur == "USD" else "CNY",
            cny_per_usd=self.fx, price_overrides=self.price_list(), util=self.util,
            mfu=self.mfu, spare=bool(self.spare), growth_per_month=self.growth,
            offers=self.offer_list(catalog), offer_kind=self.offer, engine=self.engine,
            prefix_tokens=self.prefix, prefix_share=self.prefix_share if self.prefix else 0.0)
        if not self.cal:
            return inp  # the chapter's assumptions, with the MFU entered on the page
        from capacity.fit.planning import with_basis  # scipy: only when named

        return with_basis(inp, self.cal)


MIX_SEP = ";"
MIX_FIELD_SEP = "|"


def encode_mix(entries: tuple[MixEntry, ...]) -> str:
    """`PlannerState.mix` for some added workloads."""
    return MIX_SEP.join(MIX_FIELD_SEP.join((
        e.name, e.model, str(e.dau), f"{e.rpu:g}", str(e.ctx), str(e.out), f"{e.ttft:g}",
        f"{e.tpot:g}")) for e in entries)


def _mix_param(raw: str, catalog: Catalog) -> str:
    """A URL's `mix` checked item by item (ValueError naming the workload and why)."""
    items = [x for x in raw.split(MIX_SEP) if x.strip()]
    if len(items) > MAX_WORKLOADS - 1:
        raise ValueError(f"at most {MAX_WORKLOADS - 1} added workloads, got {len(items)}")
    entries = []
    kinds = (int, float, int, int, float, float)
    for i, item in enumerate(items):
        where = f"workload {i + 2}"
        fields_ = item.split(MIX_FIELD_SEP)
        if len(fields_) != 8:
            raise ValueError(f"{where}: give name|model|dau|rpu|ctx|out|ttft|tpot")
        name, model = fields_[0].strip(), fields_[1].strip().lower()
        if not name or len(name) > MIX_NAME_CHARS or not name.isprintable():
            raise ValueError(f"{where}: a name is 1..{MIX_NAME_CHARS} printable characters")
        if model not in catalog.variant_keys():
            raise ValueError(f"{where}: '{model}' is not a model (or model-format) key")
        numbers = []
        for field_name, kind, text in zip(("dau", "rpu", "ctx", "out", "ttft", "tpot"), kinds,
                                          fields_[2:], strict=True):
            try:
                numbers.append(_number(text.strip(), kind, _PLANNER_RANGES[field_name]))
            except ValueError as exc:
                raise ValueError(f"{where}: {field_name} {exc}") from None
        dau, rpu, ctx, out, ttft, tpot = numbers
        limit = catalog.variant(model).model.max_context_tokens
        if ctx > limit:
            raise ValueError(f"{where}: ctx {ctx} exceeds the model's {limit} tokens")
        entries.append(MixEntry(name=name, model=model, dau=int(dau), rpu=float(rpu),
                                ctx=int(ctx), out=int(out), ttft=float(ttft),
                                tpot=float(tpot)))
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError("the added workloads' names must differ")
    return encode_mix(tuple(entries))


DEFAULT_PLANNER = PlannerState()

PLANNER_PCTS: tuple[int, ...] = (50, 75, 90, 95, 99)
"""The SLO percentiles the Planner offers."""
PLANNER_KV: tuple[str, ...] = ("fp16", "fp8")
"""The KV precisions the Planner searches."""

_PLANNER_RANGES: dict[str, tuple[float, float]] = {
    "dau": (1, 1e9), "rpu": (0.1, 1e5), "share": (0.05, 1.0), "hours": (0.25, 24.0),
    "conc": (1, 1e6), "ctx": (1, 10_000_000), "out": (1, 1_000_000), "headroom": (0.0, 1.0),
    "ttft": (10.0, 1e7), "tpot": (1.0, 1e6), "cost": (0.0, 1e6), "maxg": (1, 16),
    "tp": (0, 1), "spare": (0, 1), "growth": (0.0, 10.0), "util": (0.5, 1.0),
    "mfu": (0.05, 1.0), "fx": (0.01, 1e4), "prefix": (0, 10_000_000), "prefix_share": (0.0, 1.0),
}


def _bundled(inp: PlanInputs, catalog: Catalog) -> bool:
    """Whether a plan's offers are the bundled ones of its offer kind (a link carries them
    as that kind; other offers, a prices file's, travel as entered prices)."""
    return bool(inp.offer_kind) and set(inp.offers) == set(
        bundled_of_kind(catalog, inp.offer_kind))


def planner_state(inp: PlanInputs, catalog: Catalog | None = None,
                  lang: str = "en") -> PlannerState:
    """The Planner's URL state for a plan's inputs (the link a quote carries)."""
    cat = catalog or default_catalog()
    wl = inp.workload
    every = tuple(sorted(cat.gpus))
    # the bundled offers of a kind travel as that kind (`offer=spot`); other offers (a prices
    # file) and entered prices as prices per GPU-hour in the plan's currency
    bundled = _bundled(inp, cat)
    entered = {o.gpu: convert(o.price_per_gpu_hour, o.currency, inp.currency, inp.cny_per_usd)
               for o in ([] if bundled else inp.offers)} | dict(inp.price_overrides)
    chosen = inp.gpus if inp.gpus is not None else every
    return PlannerState(
        lang=lang, model=inp.model, mode="dau" if wl.peak_concurrency is None else "conc",
        dau=int(round(wl.daily_active_users or DEFAULT_PLANNER.dau)),
        rpu=wl.requests_per_user_per_day, share=wl.peak_share, hours=wl.peak_hours,
        conc=int(math.ceil(wl.peak_concurrency or DEFAULT_PLANNER.conc)),
        ctx=wl.context_tokens, out=wl.output_tokens, headroom=wl.headroom,
        ttft=inp.slo.ttft_ms, tpot=inp.slo.tpot_ms, pct=int(round(inp.slo.quantile * 100)),
        cost=inp.slo.cost_per_mtok, gpus="" if tuple(sorted(chosen)) == every
        else ",".join(chosen), maxg=inp.max_gpus, kv=",".join(inp.kv_dtypes),
        tp=int(inp.allow_tp), cur=inp.currency, fx=inp.cny_per_usd,
        prices=",".join(f"{k}:{v:g}" for k, v in entered.items()), util=inp.util,
        mfu=inp.mfu if inp.basis_string == "" else DEFAULT_PLANNER.mfu,
        cal=inp.basis_string, spare=int(inp.spare),
        growth=inp.growth_per_month, offer=inp.offer_kind if bundled else "", engine=inp.engine,
        prefix=inp.prefix_tokens if inp.prefix_share > 0 else 0,
        prefix_share=inp.prefix_share if inp.prefix_tokens and inp.prefix_share > 0
        else DEFAULT_PLANNER.prefix_share)


def planner_mix_state(workloads: tuple[MixWorkload, ...], catalog: Catalog | None = None,
                      lang: str = "en") -> PlannerState | None:
    """The Planner's URL state for a mix (the link its quote carries): the first workload's
    inputs and the others as added workloads; None when one of them holds what the Planner's
    mix section cannot (its own peak window, headroom, prompt, GPUs...) or there are too many."""
    if not workloads or len(workloads) > MAX_WORKLOADS:
        return None
    first = workloads[0].inputs
    entries = [MixEntry.of(w, first) for w in workloads[1:]]
    if any(e is None or MIX_SEP in e.name or MIX_FIELD_SEP in e.name
           or len(e.name) > MIX_NAME_CHARS for e in entries):
        return None
    state = planner_state(first, catalog, lang)
    return replace(state, mix=encode_mix(tuple(e for e in entries if e is not None)))


def planner_encode(state: PlannerState) -> dict[str, str]:
    """Query parameters for a Planner state: only the fields that differ from the defaults."""
    out: dict[str, str] = {}
    for f in fields(PlannerState):
        value = getattr(state, f.name)
        if value != getattr(DEFAULT_PLANNER, f.name):
            out[f.name] = _float_text(value) if isinstance(value, float) else str(value)
    return out


def planner_url(state: PlannerState, base: str = "/planner") -> str:
    """A link that opens the Planner on `state` (relative unless `base` is absolute)."""
    q = planner_encode(state)
    return base + ("?" + urlencode(q) if q else "")


def planner_decode(params: Mapping[str, str | list[str]], catalog: Catalog,
                   base: PlannerState = DEFAULT_PLANNER) -> tuple[PlannerState, list[str]]:
    """Read query parameters into a Planner state; bad values fall back to `base` with a
    notice naming the parameter, the value and why. Unknown parameters are ignored."""
    notices: list[str] = []
    changes: dict[str, Any] = {}
    for f in fields(PlannerState):
        if f.name not in params:
            continue
        raw_value = params[f.name]
        raw = (raw_value[-1] if isinstance(raw_value, list) else raw_value).strip()
        default = getattr(base, f.name)
        try:
            changes[f.name] = _planner_parse(f.name, raw, type(default), catalog)
        except ValueError as exc:
            notices.append(_ignored(f.name, raw, exc, default, False))
    state = replace(base, **changes)
    try:
        state.inputs(catalog)
    except CapacityError as exc:
        notices.append(Note(f"these settings cannot be planned ({exc}); using the defaults",
                            code="link_cannot", why=_why(exc)))
        state = replace(base, lang=state.lang)
    try:
        state.mix_workloads(catalog)
    except CapacityError as exc:
        notices.append(Note(f"'mix' ignored ({exc}); no added workloads", code="link_mix",
                            why=_why(exc)))
        state = replace(state, mix="")
    return state, notices


def _planner_parse(name: str, raw: str, kind: type, catalog: Catalog) -> Any:
    if kind is str:
        value = raw.lower()
        if name == "lang" and value not in LANGS:
            raise ValueError(f"language must be one of {', '.join(LANGS)}")
        if name == "model" and value not in catalog.variant_keys():
            raise ValueError("not a model (or model-format) key of the catalog")
        if name == "mode" and value not in ("dau", "conc"):
            raise ValueError("mode must be dau or conc")
        if name == "mix":
            return _mix_param(raw, catalog)
        if name == "offer":
            if value and value not in OFFER_KINDS:
                raise ValueError(f"offer kind must be one of {', '.join(OFFER_KINDS)}")
            return value
        if name == "engine":
            return _engine(value)
        if name == "cur":
            if raw.upper() not in ("CNY", "USD"):
                raise ValueError("currency must be CNY or USD")
            return raw.upper()
        if name == "cal":
            raw = _basis_param(raw)
            if raw and raw != SPEC_SHEET and not raw.startswith(TYPICAL_PREFIX):
                from capacity.fit.calibration import calibration_path

                try:
                    exists = calibration_path(raw).exists()
                except CapacityError:
                    exists = False
                if not exists:
                    raise ValueError("not a saved calibration")
            return raw
        if name == "prices":
            pairs = []
            for item in (x.strip() for x in value.split(",") if x.strip()):
                gpu, sep, text = item.partition(":")
                try:
                    price = float(text) if sep else math.nan
                except ValueError:
                    price = math.nan
                if gpu not in catalog.gpus:
                    raise ValueError(f"unknown GPU {gpu}")
                if not (math.isfinite(price) and 0 < price <= 1e5):
                    raise ValueError(f"price of {gpu} must be a number in (0, 1e5]")
                pairs.append(f"{gpu}:{price:g}")
            return ",".join(pairs)
        if name in ("gpus", "kv"):
            items = [x.strip() for x in value.split(",") if x.strip()]
            known = set(catalog.gpus) if name == "gpus" else set(PLANNER_KV)
            bad = [x for x in items if x not in known]
            if bad:
                raise ValueError(f"unknown {'GPU' if name == 'gpus' else 'KV precision'} "
                                 f"{', '.join(bad)}")
            if name == "kv" and not items:
                raise ValueError("give at least one KV precision")
            return ",".join(dict.fromkeys(items))
        return value
    number: Any = _number(raw, kind, _PLANNER_RANGES.get(name, (-math.inf, math.inf)))
    if name == "pct" and number not in PLANNER_PCTS:
        raise ValueError(f"percentile must be one of {', '.join(map(str, PLANNER_PCTS))}")
    return number
