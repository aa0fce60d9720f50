"""The Explorer's words and figures: what `pages/explorer.py` shows, built from its results.

No widget is drawn here and nothing is computed: the results come from `app.cache` (which calls
`capacity/`); this module turns them into the page's sentences, key figures (`app.layout.Metric`)
and tables, in the page's language.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.cache import DeploymentView, LoadView
from app.format import tokens_label
from app.i18n import status_text, verdict_text
from app.layout import Metric, Panel
from capacity.catalog.drafts import depths_for
from capacity.catalog.loader import Catalog, Model
from capacity.errors import CapacityError
from capacity.model.basis import TYPICAL_PREFIX, BasisKind, kind_of_knobs, knobs_of
from capacity.model.draft_gain import MAX_BREAKEVEN_BATCH, DraftGain
from capacity.model.memory import MemoryVerdict
from capacity.model.prefix import TOKEN_GRAIN, PrefixEffect
from capacity.model.scenario import Scenario
from capacity.plan.events import MAX_LOAD_REQUESTS, OpenLoopPoint
from capacity.report.bases import basis_label, knobs_text, plateau_text
from capacity.report.explain import Constraint, Detail, Explanation, Relief, ReliefKind, Status, Verdict
from capacity.report.i18n import engine_label, error_text, t
from capacity.report.money import fmt_money, fmt_ms
from capacity.report.quote import figure_rows, nodes_text, option_label
from capacity.report.urlstate import KNOBS, ExplorerState

if TYPE_CHECKING:  # loaded by Compare only, after the headline (docs/benchmarks.md, "Start-up")
    import pandas as pd

CTX_OPTIONS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288,
               1048576]
"""The context lengths the slider offers (those the model takes)."""
CHART_HEIGHTS = {"step_time": 380, "throughput": 380, "vram": 250, "ttft": 380, "cost": 380,
                 "roofline": 380}
STATUS_COLOR = {Status.PASS: "green", Status.TIGHT: "orange", Status.FAIL: "red"}
STATUS_ICON = {Status.PASS: ":material/check_circle:", Status.TIGHT: ":material/warning:",
               Status.FAIL: ":material/block:"}
MEMORY_WORD = {Status.PASS: MemoryVerdict.FITS, Status.TIGHT: MemoryVerdict.TIGHT,
               Status.FAIL: MemoryVerdict.DOES_NOT_FIT}
COMPARED_FIELDS = ("model", "weights", "gpu", "gpus", "tp", "pp", "c", "ctx", "prompt", "kv",
                   "util", "overhead", "headroom", "slo_ttft_ms", "slo_tpot_ms", "slo_cost",
                   "currency", "price", "rate", "calibration", "eff", "mfu",
                   "eta_bw", "step_oh_ms", "prefill_oh_ms", "step", "draft", "draft_k",
                   "draft_accept", "draft_tau", "draft_alpha")
"""The inputs Compare names when the pinned what-if differs in them."""
FIELD_LABEL = {"calibration": "prediction"}
"""An input whose label's message key is not its name."""
CARRIED = re.compile(r"(.*) \(depth (\d+)\)")
"""A published acceptance of another depth, carried over at its per-token rate: `make_draft`'s
source, 'SOURCE (depth 7)'."""
LOAD_SECTION = "exs_load"
UNCERTAINTY_SECTION = "exs_unc"
CHARTS_SECTION = "exs_charts"
TABLE_SECTION = "exs_table"
FRONTIER_SECTION = "frv_ex"
POOLS_SECTION = "pd_ex"
MATH_SECTION = "exs_math"
"""The sections below the headline that run only while open (`app.layout.section`), by their
keys: `st.session_state[key] = True` opens one (the tests do)."""


def context_options(model: Model, ctx_now: int) -> list[int]:
    """The contexts this model takes (and the current one, even past its limit: it is flagged)."""
    return sorted({*(c for c in CTX_OPTIONS if c <= model.max_context_tokens),
                   model.max_context_tokens, ctx_now})


def verdict_word(v: Verdict, lang: str) -> str:
    """A verdict's status in words: memory says fits / tight / does not fit."""
    if v.constraint == Constraint.MEMORY:
        return verdict_text(MEMORY_WORD[v.status], lang)
    return status_text(v.status, lang)


def fails_under_load(ex: Explanation, dep: DeploymentView | None) -> bool:
    """Whether the four checks hold (none fails) while the what-if, as the deployment it is,
    fails at its design load (the Planner's check: the prefills that keep the requests
    coming, queueing, the SLO percentile): the page's one answer is then that it does not
    work."""
    return (dep is not None and not dep.option.feasible
            and all(v.status != Status.FAIL for v in ex.verdicts))


def headline_status(ex: Explanation, dep: DeploymentView | None) -> Status:
    """The status of the whole what-if: the worst of the four checks and of the deployment at
    its design load (`fails_under_load`)."""
    return Status.FAIL if fails_under_load(ex, dep) else ex.overall


def _join(names: Iterable[str], prefix: str, lang: str) -> str:
    """Failing checks in words (each the message `prefix + name`), as the headline lists them."""
    return ("、" if lang == "zh" else ", ").join(t(prefix + n, lang) for n in names)


def overall_markdown(ex: Explanation, lang: str, dep: DeploymentView | None = None) -> str:
    """The overall verdict as a coloured heading, naming the failing constraints, or, where
    only the deployment under load fails, what it fails on."""
    if dep is not None and fails_under_load(ex, dep):
        status = Status.FAIL
        text = t("overall_fail_load", lang, reasons=_join(dep.option.failures, "pl_reason_", lang))
    else:
        status = ex.overall
        failing = [v.constraint for v in ex.verdicts if v.status == Status.FAIL]
        text = t("overall_" + status, lang, names=_join(failing, "c_", lang))
    return f"#### :{STATUS_COLOR[status]}[{STATUS_ICON[status]} {text}]"


def key_metrics(ex: Explanation, state: ExplorerState, paid_gpus: int, lang: str) -> list[Metric]:
    """The headline's key figures at the what-if's concurrency."""
    fig, cur = ex.figures, state.currency
    return [
        Metric(t("metric_tpot", lang), f"{fig['step_ms']:.1f} ms",
               help=t("help_tpot" if ex.draft is None else "help_tpot_draft", lang)),
        Metric(t("metric_ttft", lang), f"{fig['ttft_s']:.2f} s", help=t("help_ttft", lang)),
        Metric(t("metric_tok_s", lang), f"{fig['tok_s_per_request']:,.1f}"),
        Metric(t("metric_agg", lang), f"{fig['aggregate_tok_s']:,.0f}"),
        Metric(t("metric_cost_at", lang, cur=cur, c=f"{state.c:,}"), f"{fig['cost_per_mtok']:,.3f}",
               help=t("help_metric_cost", lang, month=fmt_money(fig["monthly_cost"], cur, ",.0f"),
                      paid=paid_gpus)),
        Metric(t("metric_cvram", lang), f"{int(fig['c_vram']):,}", help=t("help_cvram", lang)),
    ]


def ttft_caption(state: ExplorerState, lang: str) -> str:
    """What the TTFT figure's prompt is: its own length, or the context's."""
    if state.prompt:
        return t("ttft_prompt_apart", lang, p=tokens_label(state.prompt_tokens),
                 ctx=tokens_label(state.ctx))
    return t("ttft_prompt_follows", lang, p=tokens_label(state.prompt_tokens))


def load_panel(load: LoadView, state: ExplorerState, lang: str) -> Panel:
    """The load view (an expander titled with the engine): at a design rate (an open loop) the
    mean, p90 and p99 of TTFT, ITL and E2E, as `capacity plan --rate` gives them; in a closed
    loop of C users TTFT and TPOT p50/p90; or why there are none (more users than it
    simulates). The caption says what load that is and the engine knobs it ran with."""
    title = t("sec_load", lang, engine=engine_label(load.engine, lang))
    if load.point is None:
        return Panel(title, caption=t("load_too_many", lang, n=MAX_LOAD_REQUESTS))
    if load.open_point is not None:
        return Panel(title, open_metrics(load.open_point, lang), "  \n".join(x for x in (
            f":orange[{t('load_saturated', lang)}]" if load.open_point.saturated else "",
            t("load_caption_rate", lang, rate=f"{load.rate_per_s:.3g}",
              p=tokens_label(load.prompt_tokens), o=f"{load.output_tokens:,}",
              slots=slots_text(load.slots, state.pp, lang)),
            t("load_run_open", lang, rate=f"{load.rate_per_s:g}", s=f"{load.seconds:g}",
              n=f"{load.open_point.requests:,}"),
            knobs_caption(load, lang)) if x))
    metrics = []
    for name, q, values in (("load_ttft_p50", 0.5, load.point.ttft_ms),
                            ("load_ttft_p90", 0.9, load.point.ttft_ms),
                            ("load_tpot_p50", 0.5, load.point.tpot_ms),
                            ("load_tpot_p90", 0.9, load.point.tpot_ms)):
        if name.startswith("load_ttft"):
            metrics.append(Metric(t(name, lang), f"{values[q] / 1e3:,.2f} s"))
        else:
            metrics.append(Metric(t(name, lang), f"{values[q]:,.1f} ms"))
    if load.point.ttft_together_ms is not None:
        metrics.insert(2, Metric(t("load_ttft_together", lang),
                                 f"{load.point.ttft_together_ms[0.5] / 1e3:,.2f} s",
                                 help=t("help_load_ttft_together", lang)))
    caption = t("load_caption", lang, c=f"{state.c:,}", p=tokens_label(load.prompt_tokens),
                o=f"{load.output_tokens:,}", slots=slots_text(load.slots, state.pp, lang))
    return Panel(title, tuple(metrics), caption + "  \n" + knobs_caption(load, lang))


def slots_text(slots: int, pp: int, lang: str) -> str:
    """'177 slots per replica', or per decode stream where a pipeline's copy runs `pp` of them
    (F13: the load view simulates one stream)."""
    return (t("load_slots", lang, n=slots) if pp <= 1 else
            t("load_slots_pp", lang, n=slots, pp=pp))


def knobs_set(state: ExplorerState) -> bool:
    """Whether any engine knob of the load view is set (not the engine's default)."""
    return any(getattr(state, k) for k in KNOBS)


def open_metrics(p: OpenLoopPoint, lang: str) -> tuple[Metric, ...]:
    """An open loop's figures: TTFT and E2E in s (2 decimals), ITL in ms (1 decimal), each its
    mean, p90 and p99 (`OpenLoopPoint`, as `capacity plan --rate --format json` gives them in
    ms)."""
    out = []
    for name, mean, pct, unit in (("ttft", p.ttft_mean_ms, p.ttft_ms, "s"),
                                  ("itl", p.itl_mean_ms, p.itl_ms, "ms"),
                                  ("e2e", p.e2e_mean_ms, p.e2e_ms, "s")):
        for which, ms in (("mean", mean), ("p90", pct[0.9]), ("p99", pct[0.99])):
            shown = f"{ms / 1e3:,.2f} s" if unit == "s" else f"{ms:,.1f} ms"
            out.append(Metric(t(f"load_{name}_{which}", lang), shown))
    return tuple(out)


def knobs_caption(load: LoadView, lang: str) -> str:
    """The engine knobs the load view ran with, in words (the knobs' own values, else the
    profile's on the GPU)."""
    budget = (f"{load.chunk_tokens:,}" if load.chunk_tokens
              else t("load_budget_whole", lang))
    text = t("load_knobs_line", lang, seqs=f"{load.max_seqs:,}", budget=budget,
             page=f"{load.kv_page_tokens:,}")
    if load.offload_ms:
        text += " " + t("load_offload_line", lang, ms=f"{load.offload_ms:.2f}")
    if load.align_block_tokens:
        text += " " + t("load_align_line", lang, block=f"{load.align_block_tokens:,}")
    if load.eager_ms:
        text += " " + t("load_eager_line", lang, ms=f"{load.eager_ms:.2f}")
    if load.prefill_launch_ms:
        text += " " + t("load_prefill_launch_line", lang, ms=f"{load.prefill_launch_ms:.2f}")
    if load.schedule_ahead:
        text += " " + t("load_ahead_line", lang)
    if load.state_bytes > 0:
        text += " " + t("load_state_line", lang, mb=f"{load.state_bytes / 1e6:,.1f}")
    if load.turns > 1:
        text += " " + t("load_turns_line", lang, n=load.turns, t=f"{load.turn_tokens:,}",
                        last=f"{load.last_prompt_tokens:,}", mean=f"{load.prefilled_tokens:,.0f}")
    if load.prefix_cut:
        why = t("prefix_why_" + load.prefix_kind, lang)
        text += " " + t("load_prefix_line", lang, cached=f"{load.cached_prefix_tokens:,}",
                        prefix=f"{load.prefix_tokens:,}", why=why)
    return text


def prefix_panel(pe: PrefixEffect, state: ExplorerState, lang: str) -> Panel:
    """A shared prefix's effect: TTFT, C_vram and cost with it, and their change."""
    cur = state.currency
    return Panel(
        t("prefix_title", lang, p=f"{pe.prefix_tokens:,}", share=f"{pe.share:.0%}"),
        (Metric(t("prefix_ttft", lang), f"{pe.ttft_s[1]:.2f} s",
                delta=f"{pe.ttft_s[1] - pe.ttft_s[0]:+.2f} s", delta_color="inverse"),
         Metric(t("prefix_cvram", lang), f"{pe.c_vram[1]:,}",
                delta=f"{pe.c_vram[1] - pe.c_vram[0]:+,}"),
         Metric(t("prefix_cost", lang, cur=cur), f"{pe.cost_per_mtok[1]:,.3f}",
                delta=f"{pe.cost_per_mtok[1] - pe.cost_per_mtok[0]:+,.3f}", delta_color="inverse")),
        t("prefix_caption", lang, t0=f"{pe.ttft_s[0]:.2f} s", c0=f"{pe.c_vram[0]:,}",
          cost0=fmt_money(pe.cost_per_mtok[0], cur, ",.3f"), p=f"{state.prompt_tokens:,}")
        + (" " + t("prefix_served", lang, prefix=f"{state.prefix:,}")
           if pe.prefix_tokens < TOKEN_GRAIN.shared(state.prefix, state.prompt_tokens) else ""))


def prediction_caption(s: Scenario, basis: str, lang: str) -> str:
    """What the Explorer's speed figures rest on, in words (`capacity.model.basis`)."""
    kind = kind_of_knobs(knobs_of(s), calibration=s.calibration or "",
                         typical=basis.removeprefix(TYPICAL_PREFIX)
                         if basis.startswith(TYPICAL_PREFIX) else "")
    if kind == BasisKind.CALIBRATED:   # its knobs as the quote's efficiency line words them,
        # the memory counted as the engine it measured counts it among them (MEASURED_COUNTS)
        return t("pred_basis_cal", lang, name=s.calibration, knobs=knobs_text(s, lang))
    if kind == BasisKind.TYPICAL:
        return t("pred_basis_typical", lang, engine=basis_label(basis, lang),
                 knobs=knobs_text(s, lang) + plateau_text(s, lang))
    if kind == BasisKind.SPEC_SHEET:
        return t("pred_basis_spec", lang)
    if kind == BasisKind.CHAPTER:
        return t("pred_basis_chapter", lang)
    return t("pred_basis_knobs", lang, eta_bw=s.eta_bw, eff=s.eff, mfu=s.mfu,
             t0=s.step_overhead_ms, p0=s.prefill_overhead_ms)


def draft_source(state: ExplorerState, catalog: Catalog, lang: str) -> tuple[str, bool]:
    """The draft's acceptance length and where it comes from (True), or why the what-if has no
    draft (False): no published figure for the model and kind (enter one), or a bad value."""
    model = catalog.models[state.model]
    try:
        d = state.draft_of(catalog.variant(state.model, state.weights))
    except CapacityError as exc:
        if state.draft_accept == "published" and not depths_for(model.key, state.draft):
            return t("draft_no_data", lang, kind=t("draft_kind_" + state.draft, lang),
                     model=model.name), False
        return t("draft_bad", lang, msg=error_text(exc, lang)), False
    if d is None:
        return "", True
    tau = f"{d.acceptance_length:.3g}"
    if state.draft_accept == "rate":
        return t("draft_src_rate", lang, tau=tau, alpha=f"{state.draft_alpha:g}",
                 k=d.depth), True
    if state.draft_accept == "length":
        return t("draft_src_entered", lang, tau=tau), True
    near = CARRIED.fullmatch(d.source)  # another depth's rate, carried over (`make_draft`)
    if near:
        return t("draft_src_near", lang, tau=tau, depth=near[2], source=near[1]), True
    return t("draft_src_published", lang, tau=tau, source=d.source), True


def draft_panel(g: DraftGain, state: ExplorerState, scenario: Scenario, lang: str,
                source: str) -> Panel:
    """What the draft does at the what-if's concurrency (`Explanation.draft`): TPOT with and
    without it, the speed-up, the engine step; where it stops paying, and its memory."""
    d = g.draft
    end = g.breakeven_concurrency
    return Panel(
        t("draft_title", lang, kind=t("draft_kind_" + d.kind, lang), k=d.depth),
        (Metric(t("draft_tpot", lang), f"{float(g.tpot_ms[0]):.1f} ms"),
         Metric(t("draft_tpot_plain", lang), f"{float(g.plain_tpot_ms[0]):.1f} ms"),
         Metric(t("draft_speedup", lang, c=f"{state.c:,}"), f"{float(g.speedup[0]):.2f}×"),
         Metric(t("draft_engine", lang), f"{float(g.engine_step_ms[0]):.1f} ms",
                help=t("help_draft_engine", lang, v=d.verify_tokens,
                       verify=f"{float(g.verify_ms[0]):.2f}",
                       draft=f"{float(g.draft_ms[0]):.2f}", tau=f"{d.acceptance_length:.3g}"))),
        "  \n".join(x for x in (
            source,
            t("draft_until", lang, c=f"{end:,}") if end is not None
            else t("draft_always", lang, n=f"{MAX_BREAKEVEN_BATCH:,}"),
            t("draft_memory", lang, gb=f"{scenario.draft_weights_per_gpu_gb:.2f}",
              kv=f"{d.kv_share:.1%}") if d.passes else "") if x))


def deployment_panel(dep: DeploymentView, state: ExplorerState, lang: str) -> Panel:
    """The what-if as the deployment it is: the Planner's figures for it, its load, its nodes
    and whether it meets every target."""
    o = dep.option
    load_words = (t("dep_load_rate", lang, rate=f"{state.load:.3g}") if state.load > 0
                  else t("dep_load_conc", lang, c=f"{state.c:,}"))
    verdict = (t("dep_ok", lang) if o.feasible else t("dep_fails", lang, reasons=t(
        "list_sep", lang).join(t("pl_reason_" + r, lang) for r in o.failures)))
    return Panel(t("dep_title", lang, label=option_label(o, lang)),
                 tuple(Metric(label, value, help=label)
                       for label, value in figure_rows(dep.inputs, o, lang)),
                 " · ".join(x for x in (load_words, nodes_text(o, lang), verdict) if x))


def shown_value(state: ExplorerState, name: str, catalog: Catalog, lang: str) -> str:
    """One input of a state as the page shows it."""
    v = getattr(state, name)
    if name == "model":
        return catalog.models[v].name if v in catalog.models else str(v)
    if name == "gpu":
        return catalog.gpus[v].name if v in catalog.gpus else str(v)
    if name == "weights":
        return catalog.formats[v].name if v in catalog.formats else str(v)
    if name == "ctx":
        return tokens_label(int(v))
    if name == "prompt":
        return tokens_label(state.prompt_tokens)
    if name == "calibration":
        return basis_label(str(v), lang)
    if name == "draft":
        return t("draft_kind_" + (str(v) or "none"), lang)
    if name == "draft_accept":
        return t("draft_accept_" + str(v), lang)
    if isinstance(v, float):
        return f"{v:g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def compare_diff_text(pinned: ExplorerState, state: ExplorerState, catalog: Catalog,
                      lang: str) -> str | None:
    """The inputs in which the pinned what-if differs from this one (None: in none)."""
    diff = [f for f in COMPARED_FIELDS if getattr(pinned, f) != getattr(state, f)]
    if not diff:
        return None
    return t("compare_diff", lang) + " " + t("list_sep", lang).join(
        t("compare_item", lang, name=t(FIELD_LABEL.get(f, f), lang),
          pinned=shown_value(pinned, f, catalog, lang), now=shown_value(state, f, catalog, lang))
        for f in diff) + "."


def compare_frame(pinned_ex: Explanation, pinned: ExplorerState, ex: Explanation,
                  state: ExplorerState, lang: str,
                  deps: tuple[DeploymentView | None, DeploymentView | None] = (None, None)
                  ) -> pd.DataFrame:
    """Compare's table: the key figures and verdicts of the pinned what-if and of this one;
    the overall row is each one's headline (`headline_status`, with its deployment in
    `deps`, pinned first)."""
    import pandas as pd

    rows = [t("with_paren", lang, what=t("metric_tpot", lang), detail="ms"),
            t("with_paren", lang, what=t("metric_ttft", lang), detail="s"),
            t("metric_tok_s", lang), t("metric_agg", lang), t("col_cost_per_mtok", lang),
            t("metric_month", lang), t("metric_cvram", lang),
            *(t("c_" + v.constraint, lang) for v in ex.verdicts), t("compare_overall", lang)]
    return pd.DataFrame({t("unc_quantity", lang): rows,
                         t("chart_pinned", lang): key_numbers(pinned_ex, pinned, lang, deps[0]),
                         t("chart_current", lang): key_numbers(ex, state, lang, deps[1])})


def key_numbers(ex: Explanation, state: ExplorerState, lang: str,
                dep: DeploymentView | None = None) -> list[str]:
    """One what-if's column of the Compare table (`compare_frame`)."""
    f = ex.figures
    return [f"{f['step_ms']:.1f}", f"{f['ttft_s']:.2f}", f"{f['tok_s_per_request']:,.1f}",
            f"{f['aggregate_tok_s']:,.0f}", fmt_money(f["cost_per_mtok"], state.currency, ",.3f"),
            fmt_money(f["monthly_cost"], state.currency, ",.0f"), f"{int(f['c_vram']):,}",
            *(verdict_word(v, lang) for v in ex.verdicts),
            status_text(headline_status(ex, dep), lang)]


def card_title(v: Verdict, lang: str) -> str:
    """A verdict card's heading: the constraint and its status as a coloured badge."""
    return (f"**{t('c_' + v.constraint, lang)}** &nbsp; "
            f":{STATUS_COLOR[v.status]}-badge[{verdict_word(v, lang)}]")


def detail_text(v: Verdict, lang: str) -> str:
    """A verdict's measure against its limit, in words."""
    if v.detail == Detail.COST:   # money, the currency (its unit) first
        return t("d_cost", lang, value=fmt_money(v.value, v.unit, ".3f"),
                 limit=fmt_money(v.limit, v.unit, "g"))
    return t("d_" + v.detail, lang, value=v.value, limit=v.limit, unit=v.unit,
             value_s=v.value / 1e3, limit_s=v.limit / 1e3)


def binding_text(ex: Explanation, state: ExplorerState, lang: str,
                 dep: DeploymentView | None = None) -> str:
    """What binds the what-if, and by how much: the sentence above the relief buttons (where
    only the deployment under load fails, `fails_under_load`, what it misses and why)."""
    b, d, fig = ex.binding, ex.binding_detail, ex.figures
    slo_ttft, slo_tpot = state.slo_ttft_ms / 1e3, state.slo_tpot_ms
    if dep is not None and fails_under_load(ex, dep):
        o = dep.option
        rate = f"{o.design_rate_per_s:.3g}"
        load = (t("b_load_rate", lang, rate=rate) if state.load > 0
                else t("b_load_conc", lang, c=f"{ex.concurrency:,}", rate=rate))
        if set(o.failures) <= {"cost"}:
            cur = state.currency
            return t("b_load_cost", lang, c=f"{ex.concurrency:,}", load=load,
                     cost=fmt_money(o.cost_per_mtok_design, cur, ",.3f"),
                     slo=fmt_money(state.slo_cost, cur, "g"),
                     decoding=fmt_money(fig["cost_per_mtok"], cur, ",.3f"))
        return t("b_load_fails", lang, c=f"{ex.concurrency:,}", load=load,
                 q=f"{dep.inputs.slo.quantile * 100:g}", ttft=fmt_ms(o.ttft_ms),
                 tpot=fmt_ms(o.tpot_ms), slo_ttft=f"{slo_ttft:g}", slo_tpot=f"{slo_tpot:g}",
                 reasons=_join(o.failures, "pl_reason_", lang))
    failing = any(v.status == Status.FAIL for v in ex.verdicts)
    if (b == Constraint.MEMORY and failing
            and ex.verdict(Constraint.MEMORY).status == Status.FAIL):
        if fig["weights_shortfall_gb"] > 0:
            return t("b_memory_weights", lang, short=fig["weights_shortfall_gb"])
        return t("b_memory" if fig["c_vram"] >= 1 else "b_memory_none", lang, c=ex.concurrency,
                 subtotal=fig["subtotal_gb"], usable=fig["usable_gb"], short=fig["shortfall_gb"],
                 c_vram=int(fig["c_vram"]))
    if ex.verdict(Constraint.SLO).status == Status.FAIL:
        if d == Detail.TTFT:
            return t("b_ttft", lang, ttft=fig["ttft_s"], slo=slo_ttft)
        if d == Detail.COST:
            return t("b_cost", lang, cost=fmt_money(fig["cost_per_mtok"], state.currency, ".3f"),
                     slo=fmt_money(state.slo_cost, state.currency, "g"))
        return t("b_tpot_compute" if b == Constraint.COMPUTE else "b_tpot_bandwidth", lang,
                 step=fig["step_ms"], slo=slo_tpot)
    if b == Constraint.MEMORY:
        return t("b_ok_memory", lang, subtotal=fig["subtotal_gb"], usable=fig["usable_gb"],
                 c_vram=int(fig["c_vram"]))
    if b == Constraint.COMPUTE:
        return t("b_ok_compute", lang, ttft=fig["ttft_s"], slo_ttft=slo_ttft)
    if b == Constraint.SLO:   # the cost target, closest to its limit of the passing checks
        return t("b_ok_cost", lang, cost=fmt_money(fig["cost_per_mtok"], state.currency, ".3f"),
                 slo=fmt_money(state.slo_cost, state.currency, "g"))
    return t("b_ok_bandwidth", lang, step=fig["step_ms"], slo=slo_tpot)


def relief_text(r: Relief, state: ExplorerState, catalog: Catalog, lang: str) -> str:
    """A relief button's label: the change, and the figure it gives."""
    value = r.value
    cur = state.currency
    if r.kind == ReliefKind.KV_DTYPE:
        value = str(value).upper()
    elif r.kind == ReliefKind.WEIGHTS:
        value = catalog.formats[str(value)].name if str(value) in catalog.formats else value
    elif r.kind == ReliefKind.CONTEXT:
        value = tokens_label(int(value))
    elif r.kind == ReliefKind.PRICE:
        value = fmt_money(float(value), cur, ".2f")
    if r.kind in (ReliefKind.PROMPT, ReliefKind.CONCURRENCY):
        value = f"{int(value):,}"
    kind: str = r.kind
    if r.kind == ReliefKind.CONCURRENCY and r.detail == Detail.COST:
        kind = "concurrency_cost"
    elif r.kind == ReliefKind.GPUS and r.pp > 1 and r.pp != state.pp:
        kind = "gpus_pp"
    elif r.kind == ReliefKind.GPUS and r.tp != state.tp:
        kind = "gpus_tp"
    elif r.kind == ReliefKind.TP and r.detail == Detail.SUBTOTAL:
        kind = "tp_memory"
    text = t("r_" + kind, lang, value=value, tp=r.tp, pp=r.pp, n=r.n_gpus)
    res = r.result
    if isinstance(res, str):  # a MemoryVerdict
        shown = t("r_memory_result", lang, verdict=verdict_text(res, lang), subtotal=r.subtotal_gb,
                  usable=r.usable_gb, cost=fmt_money(r.cost_per_mtok, cur, ".3f"))
    elif r.detail == Detail.TTFT or r.kind in (ReliefKind.PROMPT, ReliefKind.TP, ReliefKind.MFU):
        shown = t("relief_ttft", lang, s=res / 1e3)
    elif r.detail == Detail.COST or r.kind == ReliefKind.PRICE:
        shown = fmt_money(res, cur, ".3f")
    else:
        shown = t("relief_tpot", lang, ms=res)
    return f"{text} → {shown}"
