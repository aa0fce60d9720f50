"""The app's caches: `st.cache_data` wrappers around the library, keyed by what they read.

A cached result depends on its arguments and on the files the library reads besides the bundled
data: the workspace's custom catalog entries and its calibrations. `data_version()` is a stamp of
those files (each one's name, size, modification time and inode), and `cached` puts it into the
key of every wrapper here. So a save by any session, by the command line or by another server on
the same workspace changes the key for every session at its next run; the entries cached for the
old files are not cleared (other sessions' results for unchanged inputs stay), they age out under
`max_entries`. Nothing about it is kept in `st.session_state` (docs/app-internals.md).
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import streamlit as st

from capacity import workspace
from capacity.catalog.loader import Catalog, load_catalog
from capacity.fit import calibration_store
from capacity.fit.planning import gpu_band, typical_band_scenarios, typical_ranges
from capacity.fit.traffic import LogSummary, summarize_log
from capacity.fit.uncertainty import KnobFlag, Sensitivity, Widening, band, sensitivity
from capacity.model.basis import TYPICAL_PREFIX
from capacity.model.kv import engine_block_tokens, extra_state_bytes
from capacity.model.prefix import PrefixEffect
from capacity.model.prefix import prefix_effect as model_prefix_effect
from capacity.plan.alternatives import Alternative, alternatives
from capacity.plan.closed_loop import LoadPoint, closed_loop_load
from capacity.plan.deployment import assess
from capacity.plan.detail import CurvePoint, load_curve, simulate_option
from capacity.plan.disagg import Comparison, compare
from capacity.plan.events import (
    MAX_LOAD_REQUESTS,
    OpenLoopPoint,
    QueueResult,
    open_loop_load,
)
from capacity.plan.mix import MixPlan, MixWorkload, plan_mix
from capacity.plan.options import GpuBand, Option, Plan, PlanInputs
from capacity.plan.search import plan as search_plan
from capacity.plan.service import ServiceModel
from capacity.report.document import blocks_pdf, render_markdown
from capacity.report.explain import Explanation, MathStep, Targets, explain, show_math, table_records
from capacity.report.quote import mix_quote_blocks, quote_markdown, quote_pdf
from capacity.report.quote_disagg import disagg_section
from capacity.report.urlstate import ExplorerState

if TYPE_CHECKING:  # pandas and the charts (altair) load where a result needs them, after the
    # Explorer's headline has been drawn (docs/benchmarks.md, "Start-up")
    import pandas as pd

    from capacity.plan.ep_pools_search import PoolsComparison
    from capacity.plan.ep_search import EpComparison
    from capacity.report.charts import ChartData

P = ParamSpec("P")
R = TypeVar("R")


def files_stamp(paths: Iterable[Path]) -> str:
    """A short digest of the files' names, sizes, modification times and inodes: it changes when
    one is added, removed or written (a save writes a temporary file and renames it over the old
    one: a new inode, even within one tick of the file system's clock)."""
    h = hashlib.blake2b(digest_size=8)
    for p in sorted(paths):
        try:
            s = p.stat()
        except OSError:  # removed meanwhile: as if never listed
            continue
        h.update(f"{p}\0{s.st_size}\0{s.st_mtime_ns}\0{s.st_ino}\n".encode())
    return h.hexdigest()


def data_version() -> str:
    """The stamp of the workspace's custom catalog entries and saved calibrations, the files a
    result reads besides the bundled data (which changes only with the installed package)."""
    custom = workspace.custom_dir()
    return files_stamp([*custom.glob("models/*.toml"), *custom.glob("gpus/*.toml"),
                        *workspace.calibrations_dir().glob("*.toml")])


def cached(max_entries: int) -> Callable[[Callable[Concatenate[str, P], R]], Callable[P, R]]:
    """`st.cache_data` whose key holds `data_version()`: the decorated function takes the version
    as its first argument (for the key only) and its callers leave it out."""

    def decorate(fn: Callable[Concatenate[str, P], R]) -> Callable[P, R]:
        inner = st.cache_data(max_entries=max_entries, show_spinner=False)(fn)

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return inner(data_version(), *args, **kwargs)

        return call

    return decorate


@st.cache_resource(max_entries=4, show_spinner=False)
def _catalog_at(data_dir: str, custom_dir: str, version: str) -> Catalog:
    del version  # part of the key only
    return load_catalog(data_dir, extra_dirs=[custom_dir])


def catalog() -> Catalog:
    """The catalog every page reads: the bundled entries plus the workspace's custom ones, read
    again whenever `data_version()` changes (raises CatalogError for a corrupt bundled file).
    One object shared by every session (`st.cache_resource`): it is never modified."""
    return _catalog_at(str(workspace.catalog_dir()), str(workspace.custom_dir()), data_version())


def targets(state: ExplorerState) -> Targets:
    """The SLOs in the state."""
    return Targets(ttft_ms=state.slo_ttft_ms, tpot_ms=state.slo_tpot_ms,
                   cost_per_mtok=state.slo_cost)


@dataclass(frozen=True, kw_only=True)
class ExplorerResult:
    """The Explorer's verdicts and math for one state (its charts: `explorer_specs`)."""

    explanation: Explanation
    math: tuple[MathStep, ...]


@cached(max_entries=64)
def explorer_result(version: str, state: ExplorerState) -> ExplorerResult:
    """Verdicts and the math for `state`."""
    del version  # part of the cache key only
    s = state.scenario(catalog())
    return ExplorerResult(explanation=explain(s, state.concurrency, targets(state), catalog()),
                          math=show_math(s, state.concurrency))


@cached(max_entries=64)
def explorer_specs(version: str, state: ExplorerState, labels: dict[str, str]
                   ) -> dict[str, dict[str, Any]]:
    """Every chart spec for `state` (labels in the page's language): apart from the verdicts,
    so that the page draws its headline before altair is loaded and the charts are built."""
    del version
    from capacity.report.charts import specs

    return specs(_chart_data(state), labels)


@dataclass(frozen=True, kw_only=True)
class Uncertainty:
    """The band around the prediction at the chosen concurrency, and what moves it most."""

    step_ms: tuple[float, float, float]
    ttft_s: tuple[float, float, float]
    max_concurrency_vram: tuple[int, int, int]
    calibrated: bool
    step_sensitivity: tuple[Sensitivity, ...]
    ttft_sensitivity: tuple[Sensitivity, ...]
    widenings: tuple[Widening, ...] = ()
    flags: tuple[KnobFlag, ...] = ()
    typical: str = ""
    """The engine whose typical basis the prediction is on ('' otherwise): the band spans that
    engine's ranges, as the Planner's does."""
    split_open: bool = False
    """The step's edges span the overhead / bandwidth split the calibration left open
    (`Band.split_open`)."""
    lookup_gb: float = 0.0
    """GB per GPU of an input embedding table the typical basis looks up rather than reads
    (`Scenario.embedding_lookup`, `capacity.model.basis.TYPICAL_COUNTS`: the prediction and
    both edges of its band); 0 where it reads all (a table tied to the output head, or not
    known to be apart from it)."""


@cached(max_entries=64)
def prefix_effect(version: str, state: ExplorerState) -> PrefixEffect:
    """`capacity.model.prefix.prefix_effect` for the Explorer's shared prefix, as much of it as
    the load view's engine's cache serves (`ExplorerState.prefix_grain`)."""
    del version
    s = state.scenario(catalog())
    return model_prefix_effect(s, state.prefix, state.prefix_share, state.prefix_grain(s))


@cached(max_entries=64)
def uncertainty(version: str, state: ExplorerState) -> Uncertainty:
    """`capacity.fit.uncertainty.band` and `sensitivity` for the Explorer's state."""
    del version
    s = state.scenario(catalog())
    cal = calibration_store.load_named(s.calibration) if s.calibration else None  # a calibration basis
    typical = (state.calibration.removeprefix(TYPICAL_PREFIX)
               if state.calibration.startswith(TYPICAL_PREFIX) else "")
    # on an engine's typical basis the band spans that engine's ranges: the Planner's band
    edges = typical_band_scenarios(s, typical) if typical and cal is None else None
    ranges = typical_ranges(s, typical) if edges is not None else None
    b = band(s, [state.concurrency], cal, edges=edges)
    return Uncertainty(
        step_ms=(float(b.step_ms[0][0]), float(b.step_ms[1][0]), float(b.step_ms[2][0])),
        ttft_s=b.ttft_s, max_concurrency_vram=b.max_concurrency_vram,
        calibrated=cal is not None,
        step_sensitivity=tuple(sensitivity(s, state.concurrency, "step_ms",
                                           ranges=ranges)[:5]),
        ttft_sensitivity=tuple(sensitivity(s, state.concurrency, "ttft_s", ranges=ranges)[:5]),
        widenings=b.widenings, flags=b.flags, typical=typical if edges is not None else "",
        split_open=b.split_open,
        lookup_gb=(s.lookup_gb_per_gpu if edges is not None and s.embedding_lookup
                   else 0.0),
    )


@cached(max_entries=64)
def capacity_rows(version: str, state: ExplorerState, rows: tuple[tuple[int, int], ...]
                  ) -> pd.DataFrame:
    """The capacity table for the edited scenario rows."""
    del version
    import pandas as pd

    s = state.scenario(catalog())
    return pd.DataFrame(table_records(s, list(rows), targets(state)))


def _chart_data(state: ExplorerState) -> ChartData:
    from capacity.report.charts import chart_data

    s = state.scenario(catalog())
    return chart_data(s, state.concurrency, slo_ttft_ms=state.slo_ttft_ms,
                      slo_tpot_ms=state.slo_tpot_ms, slo_cost=state.slo_cost)


@cached(max_entries=32)
def compare_charts(version: str, current: ExplorerState, pinned: ExplorerState,
                   labels: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Compare: the current and the pinned what-if's curves overlaid (`compare_specs`)."""
    del version
    from capacity.report.charts import compare_specs

    return compare_specs(_chart_data(current), _chart_data(pinned), labels)


@dataclass(frozen=True, kw_only=True)
class DeploymentView:
    """The Explorer's what-if as the deployment it is (`capacity.plan.deployment`): the
    planner's inputs and its figures for exactly this configuration."""

    inputs: PlanInputs
    option: Option


@cached(max_entries=64)
def deployment_view(version: str, state: ExplorerState) -> DeploymentView:
    """`deployment.assess` of the Explorer's state: the Planner's own figures for it."""
    del version
    d = state.deployment(catalog())
    return DeploymentView(inputs=d.inputs, option=assess(d, catalog()))


@dataclass(frozen=True, kw_only=True)
class LoadView:
    """The Explorer's load view: the engine's replica and the percentiles at the what-if's
    load: the design rate (`state.load`, an open loop) when set, else `state.c` clients."""

    engine: str
    slots: int
    prompt_tokens: int
    output_tokens: int
    point: LoadPoint | None
    """None when the users per replica exceed what the view simulates."""
    rate_per_s: float = 0.0
    """The open loop's rate (0: a closed loop of `state.c`)."""
    open_point: OpenLoopPoint | None = None
    """The open loop's TTFT, ITL and E2E, mean and percentiles (`capacity plan --rate`'s
    `open_loop.points`); None in a closed loop."""
    seconds: float = 0.0
    """How long the open loop's Poisson arrivals run (`capacity plan --duration`)."""
    chunk_tokens: int | None = None
    """The token budget the replica ran with (None: whole prompts)."""
    offload_ms: float = 0.0
    """What the CPU offload adds to every forward pass, ms."""
    max_seqs: int = 0
    """The max_num_seqs the replica ran with (the knob, else the profile's on the GPU)."""
    kv_page_tokens: int = 0
    """The KV page the engine admitted tokens in (the knob, else the profile's; on a hybrid
    model under vLLM the grown block, `kv.engine_block_tokens`)."""
    align_block_tokens: int = 0
    """Prefix caching on a hybrid model under vLLM: the block its prefill chunks end at
    (`ServiceModel.align_block_tokens`); 0: none."""
    eager_ms: float = 0.0
    """What running without CUDA graphs adds to every forward pass, ms (0: graphs)."""
    prefill_launch_ms: float = 0.0
    """What every pass that carries prompt tokens adds without CUDA graphs for the prefill
    (ms, `ServiceModel.pass_prefill_ms`)."""
    schedule_ahead: bool = False
    """The engine schedules one step ahead (`ServiceModel.schedule_ahead`: vLLM since
    0.14.0, SGLang since 0.4.0): a request that arrives during a step joins the step after the next."""
    state_bytes: float = 0.0
    """What a request holds in the engine's pages beyond the chapter's F2: a hybrid model's
    linear-layer states (`kv.extra_state_bytes`), bytes per GPU."""
    prefix_tokens: int = 0
    """The shared prefix asked for (tokens; 0: none)."""
    cached_prefix_tokens: int = 0
    """What the engine's cache serves of it (`ServiceModel.cached_tokens`), tokens."""
    prefix_cut: bool = False
    """The cache serves less of the prefix than asked (`ServiceModel.prefix_cut`)."""
    prefix_kind: str = "token"
    """Why (`ServiceModel.prefix_kind`: align, leaf, pages)."""
    turns: int = 1
    """Turns per conversation (`ServiceModel.turns`; 1: single requests)."""
    turn_tokens: int = 0
    """Each later turn's new message, tokens."""
    prefilled_tokens: float = 0.0
    """Prompt tokens a request prefills on average (`ServiceModel.new_prompt_tokens`)."""
    last_prompt_tokens: int = 0
    """The last turn's prompt, tokens (`ServiceModel.longest_prompt_tokens`)."""


OPEN_LOOP_REQUESTS = 2000
"""Requests the open-loop view simulates (at most; at least a minute of arrivals)."""


def open_loop_seconds(rate_per_s: float) -> float:
    """How long the load view's open loop runs at `rate_per_s` (s): at least a minute and 400
    requests' worth of arrivals, at most OPEN_LOOP_REQUESTS' worth (4 req/s: 100 s)."""
    return min(max(60.0, 400.0 / rate_per_s), OPEN_LOOP_REQUESTS / rate_per_s)


@cached(max_entries=64)
def load_view(version: str, state: ExplorerState) -> LoadView:
    """`capacity.plan.closed_loop.closed_loop_load` at the Explorer's concurrency, or
    `open_loop_load` at its design rate (Poisson arrivals, as `capacity plan --rate R
    --duration D`), under its engine, each request `state.out` output tokens, with the
    engine's knobs and the what-if's shared prefix in the engine's prefix cache
    (`ExplorerState.load_knobs`: `capacity plan`'s --max-num-seqs, --max-num-batched-tokens,
    --block-size, --cpu-offload-gb, --prefix-tokens, --prefix-share, --prefix-caching and
    --enforce-eager;
    InputError for a knob the engine refuses)."""
    del version
    s = state.scenario(catalog())
    knobs = state.load_knobs(s)
    prof = state.engine_of(s)
    knob_page = state.kvblk or prof.kv_block_tokens
    page = (engine_block_tokens(s.model, s.kv_dtype, s.tp, knob_page)
            if prof.kv_admission == "tokens" else knob_page)
    states = (extra_state_bytes(s.model, s.kv_dtype, s.tp, knob_page)
              if prof.kv_admission == "tokens" else 0.0)
    prompt = state.prompt_tokens
    out = state.out
    if state.load > 0:
        seconds = open_loop_seconds(state.load)
        svc, opts = open_loop_load(s, engine=state.engine, output_tokens=out,
                                   stages=[[(state.load, seconds)]], **knobs)
        p = opts[0]
        return LoadView(engine=svc.engine, slots=svc.slots, prompt_tokens=prompt,
                        output_tokens=out, rate_per_s=state.load, open_point=p,
                        seconds=seconds, chunk_tokens=svc.chunk_tokens,
                        offload_ms=svc.offload_ms, max_seqs=prof.max_seqs, kv_page_tokens=page,
                        align_block_tokens=svc.align_block_tokens, eager_ms=svc.eager_ms,
                        prefill_launch_ms=svc.pass_prefill_ms,
                        schedule_ahead=svc.schedule_ahead,
                        state_bytes=states, point=LoadPoint(concurrency=state.c, ttft_ms=p.ttft_ms,
                                        tpot_ms=p.tpot_ms), **_prefix_fields(svc))
    per_replica = -(-state.concurrency // s.replicas)
    svc, points = closed_loop_load(
        s, engine=state.engine, output_tokens=out,
        concurrency=[state.concurrency] if per_replica <= MAX_LOAD_REQUESTS else [], **knobs)
    return LoadView(engine=svc.engine, slots=svc.slots, prompt_tokens=prompt, output_tokens=out,
                    point=points[0] if points else None, chunk_tokens=svc.chunk_tokens,
                    offload_ms=svc.offload_ms, max_seqs=prof.max_seqs, kv_page_tokens=page,
                    align_block_tokens=svc.align_block_tokens, eager_ms=svc.eager_ms,
                    prefill_launch_ms=svc.pass_prefill_ms, schedule_ahead=svc.schedule_ahead,
                    state_bytes=states, **_prefix_fields(svc))


def _prefix_fields(svc: ServiceModel) -> dict[str, Any]:
    """The LoadView's shared-prefix and conversation fields of the replica's ServiceModel."""
    return {"prefix_tokens": svc.prefix_tokens, "cached_prefix_tokens": svc.cached_tokens,
            "prefix_cut": svc.prefix_cut, "prefix_kind": svc.prefix_kind, "turns": svc.turns,
            "turn_tokens": svc.turn_tokens, "prefilled_tokens": svc.new_prompt_tokens,
            "last_prompt_tokens": svc.longest_prompt_tokens}


# ---- the Planner -----------------------------------------------------------------------------
@cached(max_entries=32)
def plan(version: str, inp: PlanInputs) -> Plan:
    """`capacity.plan.search.plan`: the ranked options for the Planner's inputs."""
    del version
    return search_plan(inp, catalog())


@cached(max_entries=32)
def curve(version: str, inp: PlanInputs, o: Option) -> list[CurvePoint]:
    """The chosen option's TTFT percentiles over the request rate (`load_curve`)."""
    del version
    return load_curve(inp, o, catalog=catalog(), points=10, n_requests=400)


@cached(max_entries=32)
def simulation(version: str, inp: PlanInputs, o: Option) -> QueueResult:
    """The chosen option simulated at its design rate (`simulate_option`: its requests are
    `CHECK_REQUESTS`, as `capacity size --simulate` runs it)."""
    del version
    return simulate_option(inp, o, catalog())


@cached(max_entries=16)
def quotes(version: str, p: Plan, sim: QueueResult | None, lang: str, link: str,
           band: GpuBand | None,
           cheaper: tuple[Alternative, ...], cmp: Comparison | None = None,
           ep: EpComparison | None = None,
           pools: PoolsComparison | None = None) -> tuple[str, bytes]:
    """The plan's quote as Markdown and as PDF (with `cmp`: its disaggregated section; with
    `ep`: its wide expert-parallel section; with `pools`: its EP-pools section)."""
    del version
    more = [] if cmp is None else [disagg_section(cmp)]
    if ep is not None:
        from capacity.report.quote_ep import ep_section  # with the box on only

        more.append(ep_section(ep))
    if pools is not None:
        from capacity.report.quote_ep_pools import pools_section  # with both boxes on only

        more.append(pools_section(pools))
    return (quote_markdown(p, lang=lang, simulation=sim, catalog=catalog(), link=link,
                           band=band, cheaper=cheaper, sections=more),
            quote_pdf(p, lang=lang, simulation=sim, catalog=catalog(), link=link, band=band,
                      cheaper=cheaper, sections=more))


@cached(max_entries=32)
def disagg(version: str, inp: PlanInputs) -> Comparison:
    """`capacity.plan.disagg.compare`: the aggregated plan (this cache's `plan`) beside the
    disaggregated prefill/decode deployments, the winner and why (about a second)."""
    del version
    return compare(inp, catalog(), aggregated=plan(inp))


@cached(max_entries=16)
def wide_ep(version: str, inp: PlanInputs) -> EpComparison:
    """`capacity.plan.ep_search.compare_ep`: the aggregated plan (this cache's `plan`) beside
    the wide expert-parallel deployments of a MoE model, the winner and why (4 to 6 s of CPU
    for every catalog GPU within 16, 0.3 s for one or two GPU types)."""
    del version
    from capacity.plan.ep_search import compare_ep  # with the box on only

    return compare_ep(inp, catalog(), aggregated=plan(inp))


@cached(max_entries=16)
def ep_pools(version: str, inp: PlanInputs) -> PoolsComparison:
    """`capacity.plan.ep_pools_search.compare_pools`: the wide-EP options (this cache's `wide_ep`)
    against EP deployments on separate prefill and decode pools, the winner and why (about a
    second for every catalog GPU within 16)."""
    del version
    from capacity.plan.ep_pools_search import compare_pools, ep_pools_search  # both boxes on

    return compare_pools(wide_ep(inp).ep, ep_pools_search(inp, catalog()))


@cached(max_entries=32)
def cheaper(version: str, p: Plan) -> tuple[Alternative, ...]:
    """The cheaper alternatives to the GPUs the plan rejected (`capacity.plan.alternatives`)."""
    del version
    return alternatives(p, catalog())


@cached(max_entries=16)
def mix(version: str, workloads: tuple[MixWorkload, ...]) -> MixPlan:
    """`capacity.plan.mix.plan_mix`: the fleets that serve every workload."""
    del version
    return plan_mix(workloads, catalog())


@cached(max_entries=16)
def mix_quotes(version: str, m: MixPlan, lang: str, link: str) -> tuple[str, bytes]:
    """The mix's quote as Markdown and as PDF."""
    del version
    return (render_markdown(mix_quote_blocks(m, lang=lang, catalog=catalog(), link=link)),
            blocks_pdf(lambda lg: mix_quote_blocks(m, lang=lg, catalog=catalog(), link=link),
                       lang=lang))


@cached(max_entries=32)
def band_of(version: str, inp: PlanInputs, o: Option) -> GpuBand:
    """The GPU count the option may need, given the prediction's uncertainty (`gpu_band`)."""
    del version
    cal = calibration_store.load(inp.calibration) if inp.calibration else None
    return gpu_band(inp, o, cal, catalog())


@st.cache_data(max_entries=4, show_spinner=False)
def log_summary(name: str, data: bytes) -> LogSummary:
    """`capacity.fit.traffic.summarize_log` over the uploaded bytes (DuckDB reads a file: the
    upload goes to a temporary one, removed after)."""
    suffix = Path(name).suffix.lower() or ".csv"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"log{suffix}"
        path.write_bytes(data)
        s = summarize_log(path)
    return replace(s, path=name)
