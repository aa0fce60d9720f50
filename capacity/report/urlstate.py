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

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile, engine_profile
from capacity.catalog.loader import BOUNDS, Catalog, ModelVariant, default_catalog
from capacity.catalog.offers import OFFER_KINDS, Offer, bundled_of_kind
from capacity.errors import CapacityError, InputError
from capacity.model.basis import SPEC_SHEET, TYPICAL_PREFIX
from capacity.model.cost import DEFAULT_CNY_PER_USD, Currency
from capacity.model.forward_pass import scenario_offload_ms
from capacity.model.kv import DEFAULT_BLOCK_SIZE
from capacity.model.memory import DEFAULT_HEADROOM, DEFAULT_OVERHEAD_GB, DEFAULT_UTIL
from capacity.model.prefix import PrefixGrain, prefix_grain
from capacity.model.roofline import StepMethod
from capacity.model.scenario import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_EFF,
    DEFAULT_GPU,
    DEFAULT_MFU,
    Scenario,
    make_scenario,
    nearest_valid_tp,
    valid_tp_sizes,
    with_admission,
)
from capacity.model.speculative import DRAFT_KINDS, MAX_DEPTH, Draft, make_draft, parse_draft
from capacity.model.workload import MAX_TURNS, Workload
from capacity.plan.detail import design_concurrency_total
from capacity.plan.disagg import DEFAULT_LINK_EFFICIENCY, DEFAULT_TRANSFER_LATENCY_MS
from capacity.plan.options import Option, PlanInputs
from capacity.report.i18n import LANGS  # the languages: one per file in data/i18n/
from capacity.report.url_params import (
    basis_param,
    bundled_offers,
    default_context,
    engine_param,
    float_text,
    ignored_note,
    implied_money,
    implied_variant,
    knob_note,
    money_written,
    parse_number,
    weights_written,
    why_text,
)
from capacity.types import Note

if TYPE_CHECKING:
    from capacity.plan.deployment import Deployment
from capacity.units import GB, GIB, KV_DTYPES


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
    pp: int = 1   # pipeline stages of one copy (F13): a copy is TP x PP GPUs
    ctx: int = DEFAULT_CONTEXT_TOKENS
    prompt: int = 0
    kv: str = "fp16"
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
    """1: an N+1 spare replica (TP x PP GPUs), paid for in every cost, never serving."""
    out: int = 256
    """Output tokens per request (the load view and the deployment's figures)."""
    load: float = 0.0
    """The design load, requests/s (the Planner's peak x (1 + headroom)); 0 = a closed loop of
    `c` requests."""
    pct: int = 90
    """The SLO percentile TTFT and TPOT are checked at (the deployment's figures)."""
    offer: str = ""
    """The offer kind `price` comes from (data/offers.toml); '' = the catalog's or entered."""
    draft: str = ""
    """Speculative decoding's draft (F12): '' none, 'mtp', 'eagle' or 'ngram'."""
    draft_k: int = 3
    """The draft's depth k: tokens it proposes per step."""
    draft_accept: str = "published"
    """Where the acceptance length tau comes from (`ACCEPT_MODES`): 'published'
    (data/speculative.toml), 'length' (`draft_tau`) or 'rate' (`draft_alpha`)."""
    draft_tau: float = 2.0
    """An entered acceptance length: tokens a sequence keeps per step (1..k+1)."""
    draft_alpha: float = 0.7
    """An entered per-token acceptance rate (tau = (1 - alpha^(k+1)) / (1 - alpha))."""
    dis_rate: float = 0.0
    """The two pools' request rate (disaggregated prefill/decode, `capacity.plan.disagg_pools`),
    req/s; 0: `load`, else the deployment's for `c` in flight (`disagg_chart.explorer_rate`)."""
    dis_ptp: int = 0
    """A prefill replica's TP (0: `tp`)."""
    dis_px: int = 0
    """Prefill replicas (0: rate-matched, `disagg_pools.matched_counts`)."""
    dis_dgpu: str = ""
    """The decode pool's GPU ('': `gpu`)."""
    dis_dtp: int = 0
    """A decode replica's TP (0: `tp`)."""
    dis_dy: int = 0
    """Decode replicas (0: rate-matched)."""
    dis_eff: float = DEFAULT_LINK_EFFICIENCY
    """The KV hand-over's share of the link's line rate."""
    dis_lat_ms: float = DEFAULT_TRANSFER_LATENCY_MS
    """Fixed time per hand-over, ms."""
    fr_disagg: int = 0
    """1: the buyer's chart also draws disaggregated prefill/decode points
    (`FrontierInputs.disaggregated`, their TTFT budget `slo_ttft_ms` at `pct`)."""
    fr_wide_ep: int = 0
    """1: the buyer's chart also draws a MoE model's wide expert-parallel points
    (`FrontierInputs.wide_ep`; a dense model has none)."""
    seqs: int = 0
    """The load view's max_num_seqs: sequences a replica decodes at once (vLLM
    --max-num-seqs, SGLang --max-running-requests, llama.cpp --parallel); 0 = the engine
    profile's default on the GPU. The deployment's figures use it too (the Planner's
    `max_num_seqs`)."""
    budget: int = 0
    """The load view's token budget: tokens one step may carry (vLLM
    --max-num-batched-tokens, SGLang --chunked-prefill-size, llama.cpp --batch-size); 0 = the
    profile's default on the GPU. A chunked profile only (`load_knobs`)."""
    kvblk: int = 0
    """The load view's KV page, tokens (vLLM --block-size): the unit in which the engine admits
    a request's tokens; 0 = the profile's. The one KV page input: the memory figures' pages
    too (`with_admission` under an engine that admits by tokens; `capacity plan --block-size`).
    A link's `block` (the old memory-only page, which no figure of the page showed) is
    ignored."""
    offload: float = 0.0
    """The load view's CPU offload, GiB of each GPU's weights kept in host memory (vLLM
    --cpu-offload-gb); 0 = none."""
    pcache: int = 0
    """1: the load view's engine caches prefixes (vLLM --enable-prefix-caching; `capacity plan
    --prefix-caching`): on a hybrid model under vLLM its mamba align mode
    (`service_from_scenario`'s `prefix_caching`); nothing elsewhere."""
    eager: int = 0
    """1: the load view's engine runs without CUDA graphs (vLLM --enforce-eager, SGLang
    --disable-cuda-graph; `capacity plan --enforce-eager`): every forward pass pays the
    profile's per-layer eager cost (`forward_pass.eager_scenario`)."""
    turns: int = 1
    """The load view's conversations: turns each (`capacity plan --turns`); turn k + 1's
    prompt is the whole history plus `turn_tokens` new ones, the history in the prefix cache
    (`ServiceModel.request_prompts`). 1: single requests."""
    turn_tokens: int = 0
    """The new message of every turn after the first, tokens (`capacity plan --turn-tokens`;
    needed with `turns` > 1)."""

    def engine_of(self, s: Scenario) -> EngineProfile:
        """The load view's engine profile on the scenario's GPU (its tier's defaults), with
        `seqs` when one is set: what a blank knob means."""
        return engine_profile(self.engine).for_gpu(s.gpu.key, s.vram_gb).with_max_seqs(
            self.seqs or None)

    def prefix_grain(self, s: Scenario) -> PrefixGrain:
        """What the load view's engine's cache serves a shared prefix from
        (`prefix.prefix_grain`, at the token budget and KV page `load_knobs` pass it; the
        chapter's every token)."""
        prof = self.engine_of(s)
        return prefix_grain(s.model, s.kv_dtype, s.tp, prof,
                            self.budget or prof.token_budget_tokens or None,
                            block_size=self.kvblk or None)

    def load_knobs(self, s: Scenario) -> dict[str, Any]:
        """The load view's engine knobs as the event model's keyword arguments
        (`closed_loop.closed_loop_load`, `events.open_loop_load`): the names and meanings of `capacity
        plan`'s `SchedulerKnobs.kwargs()` (a 0 knob is None: the engine's default), the shared
        prefix as the engine's prefix cache. InputError (a `Note` naming the parameter) for a
        knob the engine refuses: a token budget under a profile that prefills whole prompts, a
        budget not above max_num_seqs where decode tokens share the step (vLLM refuses a budget
        below max_num_seqs; the event model needs one above the slots), or an offload beyond
        the weights one GPU holds (`forward_pass.scenario_offload_ms`)."""
        prof = self.engine_of(s)
        if self.budget and not prof.chunked:
            raise InputError(Note(
                f"the {prof.key} profile prefills whole prompts: it has no token budget "
                "(clear it, or choose vLLM, SGLang or llama.cpp)", code="knob_budget_whole",
                name="budget", engine=prof.key))
        if self.budget and prof.mixed and self.budget <= prof.max_seqs:
            raise InputError(Note(
                f"a token budget of {self.budget:,} must exceed max_num_seqs "
                f"({prof.max_seqs:,}): the decode tokens share the step",
                code="knob_budget_seqs", name="budget", budget=f"{self.budget:,}",
                seqs=f"{prof.max_seqs:,}"))
        if self.eager and prof.eager_layer_ms <= 0:
            raise InputError(Note(
                f"the {prof.key} profile has no eager mode here (vLLM's --enforce-eager, "
                "SGLang's --disable-cuda-graph): turn it off, or choose vLLM or SGLang",
                code="knob_eager_engine", name="eager", engine=prof.key))
        if self.offload:
            try:
                scenario_offload_ms(s, self.offload)
            except InputError:
                held = f"{s.weights_per_gpu_gb * GB / GIB:.2f}"
                raise InputError(Note(
                    f"a CPU offload of {self.offload:g} GiB exceeds the {held} GiB of weights "
                    "one GPU holds", code="knob_offload", name="offload",
                    gib=f"{self.offload:g}", held=held)) from None
        if self.turns > 1:
            self._check_turns(s, prof)
        return {"max_num_seqs": self.seqs or None, "chunk_tokens": self.budget or None,
                "block_tokens": self.kvblk or None, "offload_gib": float(self.offload),
                "prefix_tokens": self.prefix,
                "prefix_share": self.prefix_share if self.prefix else 0.0,
                **({"prefix_caching": True} if self.pcache else {}),
                **({"enforce_eager": True} if self.eager else {}),
                **({"turns": self.turns, "turn_tokens": self.turn_tokens}
                   if self.turns > 1 else {})}

    def _check_turns(self, s: Scenario, prof: EngineProfile) -> None:
        """InputError (a `Note` naming `turns`) for conversations the load view cannot run: no
        new message a turn, a profile that prefills whole prompts, or a last turn past the
        context (as `capacity plan --turns` refuses them)."""
        last = self.prompt_tokens + (self.turns - 1) * (self.out + self.turn_tokens) + self.out
        if self.turn_tokens < 1:
            raise InputError(Note("conversations need a new message of at least 1 token a "
                                  "turn", code="knob_turns_tokens", name="turns"))
        if not prof.chunked:
            raise InputError(Note(
                f"the {prof.key} profile prefills whole prompts: multi-turn caching runs in "
                "the chunked path (choose vLLM, SGLang or llama.cpp)", code="knob_turns_whole",
                name="turns", engine=prof.key))
        if last > s.context_tokens:
            raise InputError(Note(
                f"the last of {self.turns} turns needs {last:,} tokens of context; the "
                f"context is {s.context_tokens:,}", code="knob_turns_ctx", name="turns",
                n=self.turns, last=f"{last:,}", ctx=f"{s.context_tokens:,}"))

    def with_draft_of(self, o: Option) -> ExplorerState:
        """This state with an option's draft (F12): its kind and depth, its tau as an entered
        length (the Planner's, published or entered); unchanged without a draft."""
        if not o.draft:
            return self
        kind, depth = parse_draft(o.draft)
        return replace(self, draft=kind, draft_k=depth, draft_accept="length",
                       draft_tau=o.draft_acceptance_length)

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

        Under an engine that admits by the tokens held (vLLM, SGLang) a request holds the pages of
        its prompt and output (`Workload.held_tokens`, the engine's page), as the deployment's
        slots count it; else the whole context (F3).
        """
        s = make_scenario(
            self.model, self.gpu, catalog=catalog, weights=self.weights, n_gpus=self.gpus,
            tp=self.tp, pp=self.pp, spare_gpus=self.spare * self.tp * self.pp, util=self.util,
            overhead_gb=self.overhead, context_tokens=self.ctx,
            prompt_tokens=min(self.prompt, self.ctx) if self.prompt else None,
            kv_dtype=self.kv, block_size=self.kvblk or DEFAULT_BLOCK_SIZE,
            eff=self.eff, mfu=self.mfu, price_per_hour=self.price, currency=self.currency,
            cny_per_usd=self.rate, headroom=self.headroom, eta_bw=self.eta_bw,
            step_overhead_ms=self.step_oh_ms, prefill_overhead_ms=self.prefill_oh_ms,
            step_method=self.step, allow_long_context=True,
        )
        if self.calibration:
            from capacity.fit.planning import scenario_with_basis  # scipy: only when named

            s = scenario_with_basis(s, self.calibration)
        s = with_admission(s, engine_profile(self.engine), self.workload().held_tokens,
                           self.kvblk or None)
        draft = self.usable_draft(s.variant)
        return s if draft is None else s.with_(draft=draft)

    def draft_of(self, variant: ModelVariant) -> Draft | None:
        """The draft these inputs describe for `variant` (None: no draft): tau entered as a
        length or a rate, else the published one (`make_draft`, InputError when none is
        published for the model and kind, or an entered tau is outside 1..k+1)."""
        if not self.draft:
            return None
        return make_draft(variant, self.draft, self.draft_k,
                          acceptance_length=self.draft_tau if self.draft_accept == "length"
                          else None,
                          acceptance_rate=self.draft_alpha if self.draft_accept == "rate"
                          else None)

    def usable_draft(self, variant: ModelVariant) -> Draft | None:
        """`draft_of`, or None where it cannot be made: the what-if is then computed without
        a draft and the page says why (`draft_of`'s error)."""
        try:
            return self.draft_of(variant)
        except InputError:
            return None

    def _plan_draft(self, catalog: Catalog) -> dict[str, Any]:
        """The planner's draft fields for this what-if's usable draft (F12): its key and the
        tau it runs at, as an entered length (the Explorer's, published or entered)."""
        d = self.usable_draft(catalog.variant(self.model, self.weights))
        return {} if d is None else {"drafts": (d.key,), "acceptance_length": d.acceptance_length}

    def plan_inputs(self, catalog: Catalog) -> PlanInputs:
        """The planner's inputs for this what-if: its one GPU, format and KV precision, its
        workload at the design load (`load` req/s, else a closed loop of `c` requests, no
        further headroom), SLOs at `pct`, engine, prefix, basis and knobs, and its price with
        the source it has (the offer's or the catalog's exactly, else entered)."""
        from capacity.plan.options import Slo

        wl = self.workload()
        g = catalog.gpu(self.gpu)
        cur: Currency = "USD" if self.currency == "USD" else "CNY"
        offers = tuple(o for o in self.offer_list(catalog) if o.gpu == g.key)
        base = PlanInputs(
            model=self.model, workload=wl, formats=(self.weights,), gpus=(g.key,),
            kv_dtypes=(self.kv,), max_gpus=max(self.gpus, 1), currency=cur,
            cny_per_usd=self.rate, util=self.util, overhead_gb=self.overhead, engine=self.engine,
            memory_headroom=self.headroom, spare=self.spare > 0, allow_long_context=True,  # noted
            slo=Slo(ttft_ms=self.slo_ttft_ms, tpot_ms=self.slo_tpot_ms,
                    quantile=self.pct / 100.0, cost_per_mtok=self.slo_cost),
            offers=offers, offer_kind=self.offer, max_num_seqs=self.seqs or None,
            prefix_tokens=self.prefix, prefix_share=self.prefix_share if self.prefix else 0.0,
            **self._plan_draft(catalog))
        derived = base.price_of(g).per_gpu_hour
        if not math.isclose(derived, self.price, rel_tol=1e-6, abs_tol=1e-9):
            base = replace(base, price_overrides=((g.key, self.price),))
        if self.calibration:
            from capacity.fit.planning import with_basis

            return with_basis(base, self.calibration)
        return replace(base, eff=self.eff, mfu=self.mfu, eta_bw=self.eta_bw,
                       step_overhead_ms=self.step_oh_ms, prefill_overhead_ms=self.prefill_oh_ms,
                       step_method=self.step)

    def workload(self) -> Workload:
        """The planner's workload of this what-if: the design load (`load` req/s, else a closed
        loop of `c` requests, no further headroom), its context, prompt and output, and the
        conversations the load view runs (it falls back to single requests where they cannot
        run)."""
        wl = Workload(rate_per_s=self.load if self.load > 0 else None,
                      peak_concurrency=None if self.load > 0 else float(self.c),
                      context_tokens=self.ctx,
                      prompt_tokens=self.prompt_tokens if self.prompt else None,
                      output_tokens=self.out, headroom=0.0)
        if self.turns > 1 and engine_profile(self.engine).chunked:
            try:
                wl = replace(wl, turns=self.turns, turn_tokens=self.turn_tokens)
            except InputError:
                pass
        return wl

    def offer_list(self, catalog: Catalog) -> tuple[Offer, ...]:
        """The bundled offers of kind `offer`, one per GPU (none when `offer` is '')."""
        return bundled_of_kind(catalog, self.offer)

    def deployment(self, catalog: Catalog) -> Deployment:
        """The deployment this what-if is (`capacity.plan.deployment`): the Planner's option
        it was opened from, with the same figures (`deployment.assess`)."""
        from capacity.plan.deployment import Deployment

        inp = self.plan_inputs(catalog)
        return Deployment(inputs=inp, gpu=self.gpu, weights=self.weights,
                          kv_dtype=self.kv, tp=self.tp, pp=self.pp,
                          replicas=max(self.gpus // (self.tp * self.pp), 1),
                          draft=inp.drafts[0] if inp.drafts else "")


STEP_METHODS: tuple[str, ...] = tuple(m.value for m in StepMethod)
ACCEPT_MODES: tuple[str, ...] = ("published", "length", "rate")
"""Where a draft's acceptance length comes from (`ExplorerState.draft_accept`)."""

DEFAULT_STATE = ExplorerState()

MAX_NUM_SEQS = 65_536
"""The most `seqs` a link or the page takes (`capacity plan --max-num-seqs`' bound)."""
MAX_BATCHED_TOKENS = 1_048_576
"""The most `budget` tokens (`capacity plan --max-num-batched-tokens`' bound)."""
MAX_KV_PAGE = 4096
"""The most `kvblk` tokens (`capacity plan --block-size`' bound)."""
MAX_OFFLOAD_GIB = BOUNDS["memory_gb"][1]
"""The most `offload` GiB (`capacity plan --cpu-offload-gb`' bound)."""
KNOBS: tuple[str, ...] = ("seqs", "budget", "kvblk", "offload")
"""The load view's engine knobs (`ExplorerState.load_knobs`)."""

_RANGES: dict[str, tuple[float, float]] = {
    "gpus": (1, 64), "tp": (1, 16), "pp": (1, 16), "ctx": (1, 10_000_000), "prompt": (0, 10_000_000),
    "util": (0.01, 1.0), "overhead": (0.0, 1000.0), "c": (1, 100_000),
    "slo_ttft_ms": (1.0, 1e7), "slo_tpot_ms": (0.1, 1e6), "slo_cost": (0.0, 1e6),
    "price": (0.0, 1e5), "rate": (0.01, 1e4), "eff": (0.01, 1.0), "mfu": (0.01, 1.0),
    "headroom": (0.0, 2.0), "eta_bw": (0.01, 1.0), "step_oh_ms": (0.0, 1000.0),
    "prefill_oh_ms": (0.0, 100_000.0), "prefix": (0, 10_000_000), "prefix_share": (0.0, 1.0),
    "spare": (0, 1), "out": (1, 1_000_000), "load": (0.0, 1e6), "pct": (50, 99),
    "draft_k": (1, MAX_DEPTH), "draft_tau": (1.0, MAX_DEPTH + 1.0), "draft_alpha": (0.0, 1.0),
    "dis_rate": (0.0, 1e6), "dis_ptp": (0, 16), "dis_px": (0, 4096), "dis_dtp": (0, 16),
    "dis_dy": (0, 4096), "dis_eff": (0.01, 1.0), "dis_lat_ms": (0.0, 10_000.0),
    "fr_disagg": (0, 1), "fr_wide_ep": (0, 1),
    "seqs": (0, MAX_NUM_SEQS), "budget": (0, MAX_BATCHED_TOKENS), "kvblk": (0, MAX_KV_PAGE),
    "offload": (0.0, MAX_OFFLOAD_GIB), "pcache": (0, 1), "eager": (0, 1),
    "turns": (1, MAX_TURNS), "turn_tokens": (0, 10_000_000),
}


def encode(state: ExplorerState) -> dict[str, str]:
    """Query parameters for `state`: the fields that differ from the defaults, the money
    inputs with a GPU, offer kind or currency (else `decode` implies them, `implied_money`) and
    the weight format with a model (else the model's default, `implied_variant`)."""
    out: dict[str, str] = {}
    for f in fields(ExplorerState):
        value = getattr(state, f.name)
        if value != getattr(DEFAULT_STATE, f.name):
            out[f.name] = float_text(value) if isinstance(value, float) else str(value)
    for name in money_written(out) | weights_written(out):
        value = getattr(state, name)
        out.setdefault(name, float_text(value) if isinstance(value, float) else str(value))
    return out


PIN = "pin"
"""The query parameter of a pinned what-if (Compare): the pinned state's differences from the
current one, as `name:value` items joined by ',' (`pin=c:100,ctx:32768`); `same` when it
equals the current state. Links without it open without a pin."""
PIN_SAME = "same"


def encode_pin(pinned: ExplorerState, current: ExplorerState) -> str:
    """The `pin` parameter: the fields of `pinned` that differ from `current` (not `lang`), its
    money inputs with a GPU, offer kind or currency and its format with a model, as `encode`."""
    names = {f.name for f in fields(ExplorerState)
             if f.name != "lang" and getattr(pinned, f.name) != getattr(current, f.name)}
    names |= money_written(names) | weights_written(names)
    items = []
    for f in fields(ExplorerState):
        value = getattr(pinned, f.name)
        if f.name in names:
            items.append(f"{f.name}:{float_text(value)}" if isinstance(value, float) else
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
            return None, [Note(f"'pin={raw}' ignored (items are name:value, joined by ','); "
                               "nothing is pinned", code="link_pin_items", value=raw)]
        params[name.strip()] = value
    unknown = sorted(set(params) - {f.name for f in fields(ExplorerState)} - {"lang"})
    if unknown:
        return None, [Note(f"'pin={raw}' ignored (unknown {(names := ', '.join(unknown))}); "
                           "nothing is pinned", code="link_pin_unknown", value=raw, names=names)]
    state, ns = decode(params, catalog, base=current)
    return replace(state, lang=current.lang), [Note("pin: " + n, code="link_pin_part", notice=n) for n in ns]


def explorer_url(state: ExplorerState, base: str = "/explorer") -> str:
    """A relative link that opens the Explorer on `state`."""
    q = encode(state)
    return base + ("?" + urlencode(q) if q else "")


def decode(params: Mapping[str, str | list[str]], catalog: Catalog,
           base: ExplorerState = DEFAULT_STATE) -> tuple[ExplorerState, list[str]]:
    """Read query parameters into a state; bad values fall back to `base` with a notice. A
    `model` is the variant `capacity plan --model` reads (`implied_variant`).

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
            if f.name in KNOBS and not default:  # blank: the engine's own default
                notices.append(knob_note(f.name, raw, exc))
                continue
            notices.append(ignored_note(f.name, raw, exc, default or (
                "none" if f.name == "draft" else default), f.name == "calibration"))
    state = replace(base, **{**changes, **implied_variant(changes, params, catalog)})
    state, more = _check_catalog(state, catalog, base, ctx_stated="ctx" in params)
    notices += more
    return replace(state, **implied_money(state, base, params, catalog)), notices


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
            return engine_param(value)
        if name == "step" and value not in STEP_METHODS:
            raise ValueError(f"step method must be one of {', '.join(STEP_METHODS)}")
        if name == "calibration":
            # a basis: 'spec', 'typical:ENGINE' or a saved calibration's name, never a path
            return basis_param(raw)
        if name == "draft":
            if value == "none":
                return ""
            if value and value not in DRAFT_KINDS:
                raise ValueError(f"draft must be one of none, {', '.join(DRAFT_KINDS)}")
            return value
        if name == "draft_accept" and value not in ACCEPT_MODES:
            raise ValueError(f"acceptance must be one of {', '.join(ACCEPT_MODES)}")
        if name == "offer":
            if value and value not in OFFER_KINDS:
                raise ValueError(f"offer kind must be one of {', '.join(OFFER_KINDS)}")
            return value
        return value
    return parse_number(raw, kind, _RANGES.get(name, (-math.inf, math.inf)))


def _check_catalog(state: ExplorerState, catalog: Catalog, base: ExplorerState,
                   ctx_stated: bool = True) -> tuple[ExplorerState, list[str]]:
    notices: list[str] = []
    if state.gpu not in catalog.gpus:
        notices.append(Note(f"'gpu={state.gpu}' is not in the catalog; using {base.gpu}",
                            code="link_unknown", name="gpu", value=state.gpu, using=base.gpu))
        state = replace(state, gpu=base.gpu)
    if state.dis_dgpu and state.dis_dgpu not in catalog.gpus:
        notices.append(Note(f"'dis_dgpu={state.dis_dgpu}' is not in the catalog; using "
                            f"{base.dis_dgpu or state.gpu}", code="link_unknown",
                            name="dis_dgpu", value=state.dis_dgpu,
                            using=base.dis_dgpu or state.gpu))
        state = replace(state, dis_dgpu=base.dis_dgpu if base.dis_dgpu in catalog.gpus else "")
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
    state = replace(state, ctx=default_context(state.ctx, catalog.models[state.model],
                                               ctx_stated))
    if state.calibration and state.calibration != SPEC_SHEET and not state.calibration.startswith(
            TYPICAL_PREFIX):
        from capacity.fit.calibration_store import named_path

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
    if state.gpus % (state.tp * state.pp) or state.pp > model.layers:
        notices.append(Note(f"'pp={state.pp}' is not possible for {model.name} on {state.gpus} GPUs "
                            f"at TP={state.tp}; using PP=1", code="link_pp", value=state.pp,
                            model=model.name, n=state.gpus, tp=state.tp))
        state = replace(state, pp=1)
    if state.draft and state.draft_accept == "length" and state.draft_tau > state.draft_k + 1:
        tau = min(base.draft_tau, state.draft_k + 1.0)
        notices.append(ignored_note("draft_tau", float_text(state.draft_tau), ValueError(Note(
            f"outside 1..{state.draft_k + 1}", code="why_outside", lo="1",
            hi=f"{state.draft_k + 1}")), float_text(tau), False))
        state = replace(state, draft_tau=tau)
    try:
        s = state.scenario(catalog)
    except CapacityError as exc:
        notices.append(Note(f"these settings cannot be computed ({exc}); using the defaults",
                            code="link_cannot", why=why_text(exc)))
        return replace(base, lang=state.lang), notices
    return _check_knobs(state, s, notices)


def _check_knobs(state: ExplorerState, s: Scenario, notices: list[str]
                 ) -> tuple[ExplorerState, list[str]]:
    """The engine knobs the engine refuses (`load_knobs`), each back to its default (the
    engine's own) with a notice naming it, as a bad value in a link gets."""
    for _ in (*KNOBS, "eager", "turns"):   # each knob the engine may refuse, at most once
        try:
            state.load_knobs(s)
        except InputError as exc:
            name = str(getattr(why_text(exc), "params", {}).get("name", "budget"))
            raw = float_text(getattr(state, name)) if name == "offload" else str(
                getattr(state, name))
            notices.append(knob_note(name, raw, exc))
            state = replace(state, **{name: getattr(DEFAULT_STATE, name)})
        else:
            break
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
        gpus=o.n_gpus, tp=o.tp, pp=o.pp, spare=1 if o.spare_gpus else 0, ctx=wl.context_tokens,
        prompt=0 if wl.prompt >= wl.context_tokens else wl.prompt, out=wl.output_tokens,
        kv=o.kv_dtype, util=inp.util, overhead=inp.overhead_gb, c=max(1, c),
        load=(wl.peak_rate_per_s * (1 + wl.headroom) if wl.peak_rate_per_s is not None
              else 0.0),
        pct=int(round(inp.slo.quantile * 100)), slo_ttft_ms=inp.slo.ttft_ms,
        slo_tpot_ms=inp.slo.tpot_ms, slo_cost=inp.slo.cost_per_mtok,
        price=o.price_per_hour, currency=inp.currency,
        offer=inp.offer_kind if bundled_offers(inp, cat) else "",
        rate=inp.cny_per_usd, headroom=inp.memory_headroom, calibration=inp.basis_string,
        eff=inp.option_eff(cat, o.gpu, o.weights),
        mfu=inp.option_mfu(cat, o.gpu, o.weights),
        eta_bw=inp.option_eta_bw(cat, o.gpu), step_oh_ms=inp.step_overhead_ms,
        prefill_oh_ms=inp.prefill_overhead_ms, step=inp.step_method, engine=inp.engine,
        prefix=inp.prefix_tokens if inp.prefix_share > 0 else 0,
        prefix_share=inp.prefix_share if inp.prefix_tokens and inp.prefix_share > 0
        else DEFAULT_STATE.prefix_share, seqs=inp.max_num_seqs or 0, turns=wl.turns,
        turn_tokens=wl.turn_tokens).with_draft_of(o)

