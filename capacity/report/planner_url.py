"""The Planner's state as URL query parameters: every Planner input in the link, with the
Explorer's rules (`capacity.report.url_params`: only what differs from the defaults is written;
a bad value falls back with a notice). A mix of workloads travels as one `mix` parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from capacity.catalog.engines import DEFAULT_ENGINE
from capacity.catalog.loader import (
    MAX_PRICE_PER_HOUR,
    MIN_PRICE_PER_HOUR,
    Catalog,
    Model,
    bound_problem,
    default_catalog,
)
from capacity.catalog.offers import OFFER_KINDS, Offer, bundled_of_kind
from capacity.errors import CapacityError, InputError
from capacity.model.basis import SPEC_SHEET, TYPICAL_PREFIX
from capacity.model.cost import DEFAULT_CNY_PER_USD, convert
from capacity.model.memory import DEFAULT_UTIL
from capacity.model.scenario import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MFU,
    context_limit_note,
)
from capacity.model.speculative import MAX_DEPTH, parse_draft
from capacity.model.workload import MAX_TURNS
from capacity.plan.mix import MAX_WORKLOADS, MIX_NAME_CHARS, MixEntry, MixWorkload
from capacity.plan.options import AUTO_DRAFT, PlanInputs
from capacity.report.i18n import LANGS  # the languages: one per file in data/i18n/
from capacity.types import Note

if TYPE_CHECKING:
    pass
from capacity.report.url_params import (
    basis_param,
    bundled_offers,
    default_context,
    engine_param,
    float_text,
    ignored_note,
    parse_number,
    why_text,
)

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
    prompt: int = 0
    """Prompt tokens per request (a conversation's first turn); 0 = the context (the
    chapter's reading)."""
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
    turns: int = 1
    """Turns per conversation (`Workload.turns`, the Explorer's `turns`); 1 = single requests."""
    turn_tokens: int = 0
    """The new message of every turn after the first, tokens (with `turns` > 1)."""
    draft: str = ""
    """Speculative-decoding drafts searched besides none (`PlanInputs.drafts`): '' = none,
    'auto', or keys 'eagle:3,mtp:1'."""
    tau: float = 0.0
    """Entered acceptance length for the drafts (tokens per verify pass); 0 = published."""
    alpha: float = 0.0
    """Entered per-token acceptance rate for the drafts (0..1); 0 = published."""
    disagg: int = 0
    """1: also rank disaggregated prefill/decode deployments beside the aggregated options
    (`capacity.plan.disagg.compare`, `capacity size --disaggregated`); 0 = aggregated only."""
    fr_disagg: int = 0
    """1: the buyer's chart also draws disaggregated prefill/decode points
    (`FrontierInputs.disaggregated`, their TTFT budget the SLO's `ttft` at `pct`)."""
    fr_wide_ep: int = 0
    """1: the buyer's chart also draws a MoE model's wide expert-parallel points
    (`FrontierInputs.wide_ep`; a dense model has none)."""
    wide_ep: int = 0
    """1: also rank a MoE model's wide expert-parallel deployments beside the aggregated options
    (`capacity.plan.ep_search.compare_ep`, `capacity size --wide-ep`); 0 = not; a dense model
    has none (a link's 1 falls back to 0 with a notice)."""

    def draft_list(self) -> tuple[str, ...]:
        """The drafts searched, as `PlanInputs.drafts` takes them."""
        return tuple(k for k in self.draft.split(",") if k)

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
        from capacity.plan.options import Slo

        model = catalog.variant(self.model).model
        if self.ctx > model.max_context_tokens:
            raise InputError(context_limit_note(self.ctx, model))
        dau = self.mode == "dau"
        wl = Workload(daily_active_users=float(self.dau) if dau else None,
                      requests_per_user_per_day=self.rpu, peak_share=self.share,
                      peak_hours=self.hours, peak_concurrency=None if dau else float(self.conc),
                      context_tokens=self.ctx, prompt_tokens=self.prompt or None,
                      output_tokens=self.out, headroom=self.headroom, turns=self.turns,
                      turn_tokens=self.turn_tokens if self.turns > 1 else 0)
        inp = PlanInputs(
            model=self.model, workload=wl,
            slo=Slo(ttft_ms=self.ttft, tpot_ms=self.tpot, quantile=self.pct / 100.0,
                    cost_per_mtok=self.cost),
            gpus=self.gpu_list(catalog), max_gpus=self.maxg, kv_dtypes=self.kv_list(),
            allow_tp=bool(self.tp), currency="USD" if self.cur == "USD" else "CNY",
            cny_per_usd=self.fx, price_overrides=self.price_list(), util=self.util,
            mfu=self.mfu, spare=bool(self.spare), growth_per_month=self.growth,
            offers=self.offer_list(catalog), offer_kind=self.offer, engine=self.engine,
            prefix_tokens=self.prefix, prefix_share=self.prefix_share if self.prefix else 0.0,
            drafts=self.draft_list(),
            # an acceptance goes with a draft (without one the page keeps it, unused)
            acceptance_length=(self.tau or None) if self.draft else None,
            acceptance_rate=(self.alpha or None) if self.draft and not self.tau else None)
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
                numbers.append(parse_number(text.strip(), kind, _PLANNER_RANGES[field_name]))
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


def draft_param(value: str) -> str:
    """A link's `draft` checked: '', 'auto' or kind:depth keys (ValueError saying what to
    write); the keys as `Draft.key` writes them, each once."""
    items = [x.strip() for x in value.lower().split(",") if x.strip()]
    keys = []
    for item in items:
        if item == AUTO_DRAFT:
            keys.append(item)
            continue
        try:
            kind, depth = parse_draft(item)
        except InputError as exc:
            raise ValueError(str(exc)) from None
        if kind != "none":
            keys.append(f"{kind}:{depth}")
    return ",".join(dict.fromkeys(keys))

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
    "tau": (0.0, MAX_DEPTH + 1.0), "alpha": (0.0, 1.0), "disagg": (0, 1),
    "prompt": (0, 10_000_000), "turns": (1, MAX_TURNS), "turn_tokens": (0, 10_000_000),
    "fr_disagg": (0, 1), "fr_wide_ep": (0, 1), "wide_ep": (0, 1),
}




def planner_state(inp: PlanInputs, catalog: Catalog | None = None,
                  lang: str = "en", disagg: bool = False, wide_ep: bool = False
                  ) -> PlannerState:
    """The Planner's URL state for a plan's inputs (the link a quote carries); `disagg`: the
    quote ranks disaggregated prefill/decode beside them; `wide_ep`: wide expert-parallel
    deployments."""
    cat = catalog or default_catalog()
    wl = inp.workload
    every = tuple(sorted(cat.gpus))
    # the bundled offers of a kind travel as that kind (`offer=spot`); other offers (a prices
    # file) and entered prices as prices per GPU-hour in the plan's currency
    bundled = bundled_offers(inp, cat)
    entered = {o.gpu: convert(o.price_per_gpu_hour, o.currency, inp.currency, inp.cny_per_usd)
               for o in ([] if bundled else inp.offers)} | dict(inp.price_overrides)
    chosen = inp.gpus if inp.gpus is not None else every
    return PlannerState(
        lang=lang, model=inp.model, mode="dau" if wl.peak_concurrency is None else "conc",
        dau=int(round(wl.daily_active_users or DEFAULT_PLANNER.dau)),
        rpu=wl.requests_per_user_per_day, share=wl.peak_share, hours=wl.peak_hours,
        conc=int(math.ceil(wl.peak_concurrency or DEFAULT_PLANNER.conc)),
        ctx=wl.context_tokens, prompt=wl.prompt_tokens or 0, out=wl.output_tokens,
        headroom=wl.headroom, turns=wl.turns, turn_tokens=wl.turn_tokens,
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
        else DEFAULT_PLANNER.prefix_share, draft=draft_param(",".join(inp.drafts)),
        tau=inp.acceptance_length or 0.0, alpha=inp.acceptance_rate or 0.0,
        disagg=int(disagg), wide_ep=int(wide_ep))


def planner_gaps(inp: PlanInputs, state: PlannerState, catalog: Catalog | None = None
                 ) -> tuple[str, ...]:
    """The PlanInputs fields that a link to `state` does not reopen as `inp` holds them: the
    Planner has no input for them (max_num_seqs, overhead_gb, eff, weight formats), or a
    narrower range (max_gpus, KV precisions, SLO percentiles, peak hours). Empty when the
    link reproduces the plan; a quote that names its link as the Planner that reproduces it
    carries none otherwise."""
    cat = catalog or default_catalog()
    back, notices = planner_decode(planner_encode(state), cat)
    try:
        again = back.inputs(cat)
    except CapacityError:
        return ("inputs",)

    def same(x: PlanInputs) -> PlanInputs:  # what a link writes differently, the plan the same
        return replace(x, gpus=tuple(sorted(x.gpus or cat.gpus)),
                       prefix_tokens=x.prefix_tokens if x.prefix_share > 0 else 0,
                       price_overrides=tuple((k, float(f"{v:g}")) for k, v in x.price_overrides))

    a, b = same(inp), same(again)
    return tuple(f.name for f in fields(PlanInputs) if getattr(a, f.name) != getattr(b, f.name))


def quote_link(inp: PlanInputs, base: str, *, lang: str = "en", disagg: bool = False,
               wide_ep: bool = False) -> tuple[str | None, str]:
    """A quote's link to the Planner that reproduces `inp` (`planner_state`, `planner_url`), and
    '', or None and why there is none (`planner_gaps`: the Planner cannot hold an input)."""
    state = planner_state(inp, lang=lang, disagg=disagg, wide_ep=wide_ep)
    gaps = planner_gaps(inp, state)
    if gaps:
        said = {"formats": "weights", "slo": "the SLO", "workload": "the workload"}
        return None, ("no Planner link in it: the Planner cannot hold "
                      f"{', '.join(said.get(g, g) for g in gaps)} as given")
    return planner_url(state, base=base), ""


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
    if planner_gaps(first, state, catalog):
        return None
    return replace(state, mix=encode_mix(tuple(e for e in entries if e is not None)))


def planner_encode(state: PlannerState) -> dict[str, str]:
    """Query parameters for a Planner state: only the fields that differ from the defaults."""
    out: dict[str, str] = {}
    for f in fields(PlannerState):
        value = getattr(state, f.name)
        if value != getattr(DEFAULT_PLANNER, f.name):
            out[f.name] = float_text(value) if isinstance(value, float) else str(value)
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
            notices.append(ignored_note(f.name, raw, exc, default, False))
    state = replace(base, **changes)
    if "ctx" not in params and state.model in catalog.variant_keys():
        state = replace(state, ctx=default_context(state.ctx, catalog.variant(state.model).model,
                                                   stated=False))
    elif state.model in catalog.variant_keys():  # a stated context past the model's limit:
        # the limit, as choosing the model on the page does, the rest of the link kept
        model = catalog.variant(state.model).model
        if state.ctx > model.max_context_tokens:
            notices.append(ignored_note("ctx", str(state.ctx), ValueError(
                context_limit_note(state.ctx, model)), model.max_context_tokens, False))
            state = replace(state, ctx=model.max_context_tokens)
    try:
        state.inputs(catalog)
    except CapacityError as exc:
        notices.append(Note(f"these settings cannot be planned ({exc}); using the defaults",
                            code="link_cannot", why=why_text(exc)))
        state = replace(base, lang=state.lang)
    if state.wide_ep and catalog.variant(state.model).model.moe is None:
        notices.append(ignored_note("wide_ep", str(state.wide_ep), ValueError(Note(
            f"{state.model} is not a mixture-of-experts model", code="why_not_moe",
            model=state.model)), 0, False))
        state = replace(state, wide_ep=0)
    try:
        state.mix_workloads(catalog)
    except CapacityError as exc:
        notices.append(Note(f"'mix' ignored ({exc}); no added workloads", code="link_mix",
                            why=why_text(exc)))
        state = replace(state, mix="")
    return state, notices


def context_clamped_note(context_tokens: int, model: Model) -> Note:
    """The notice for a context set to the model's limit because the model chosen on the page
    takes no more: a link's clamped context in the same words, 'context 32768 tokens exceeds
    Llama-2-70B's limit of 4096 tokens; using 4096'."""
    why = context_limit_note(context_tokens, model)
    return Note(f"{why}; using {model.max_context_tokens}", code="ctx_clamped", why=why,
                using=model.max_context_tokens)


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
            return engine_param(value)
        if name == "draft":
            return draft_param(value)
        if name == "cur":
            if raw.upper() not in ("CNY", "USD"):
                raise ValueError("currency must be CNY or USD")
            return raw.upper()
        if name == "cal":
            raw = basis_param(raw)
            if raw and raw != SPEC_SHEET and not raw.startswith(TYPICAL_PREFIX):
                from capacity.fit.calibration_store import calibration_path

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
                if not math.isfinite(price) or bound_problem("price_per_hour", price):
                    raise ValueError(f"price of {gpu} must be a number in "
                                     f"[{MIN_PRICE_PER_HOUR:g}, {MAX_PRICE_PER_HOUR:,g}]")
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
    number: Any = parse_number(raw, kind, _PLANNER_RANGES.get(name, (-math.inf, math.inf)))
    if name == "pct" and number not in PLANNER_PCTS:
        raise ValueError(f"percentile must be one of {', '.join(map(str, PLANNER_PCTS))}")
    return number
