"""One option of the plan, in detail (docs/method.md, section 6): its scenario (the
planner's inputs applied to one GPU x count x TP x weights x KV), the discrete-event model run
on it (`simulate_option`: TTFT/TPOT percentiles at the design rate), its TTFT-vs-rate curve
(`load_curve`) and the checks it fails (`check_option`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

import numpy as np

from capacity.catalog.loader import Catalog, default_catalog
from capacity.model.memory import (
    MemoryVerdict,
)
from capacity.model.prefix import TOKEN_GRAIN
from capacity.model.scenario import (
    Scenario,
    evaluate,
    make_scenario,
    with_admission,
)
from capacity.plan.options import (
    Option,
    PlanInputs,
    Reason,
    Slo,
)

if TYPE_CHECKING:  # the event models load when an option is simulated: `capacity size` and
    # the planner's search never run them, and they are a tenth of its start-up
    from capacity.plan.events import QueueResult, ServiceModel

# One option, in detail


def design_concurrency_total(inp: PlanInputs, o: Option) -> int:
    """Requests in flight the option is sized for, over all replicas (count): the peak
    concurrency with headroom when given, else the design concurrency (F9)."""
    wl = inp.workload
    if wl.peak_concurrency is not None:
        return int(math.ceil(wl.peak_concurrency * (1 + wl.headroom) - 1e-9))
    if math.isfinite(o.design_concurrency):
        return int(math.ceil(o.design_concurrency - 1e-9))
    return o.c_vram_per_replica * o.replicas + 1


def option_scenario(inp: PlanInputs, o: Option, catalog: Catalog | None = None) -> Scenario:
    """The Scenario of one option (the Explorer's view of it), its draft included; under an
    engine that admits by the tokens held, a request holds the pages of its prompt and output
    (`Workload.held_tokens`), as the search's slots count it (`units.replica_units`)."""
    cat = catalog or default_catalog()
    base = cat.variant(inp.model).model.key
    wl = inp.workload
    draft = inp.draft_for(cat.variant(base, o.weights), o.draft) if o.draft else None
    g = cat.gpu(o.gpu)
    return with_admission(make_scenario(
        base, o.gpu, catalog=cat, weights=o.weights, n_gpus=o.n_gpus, tp=o.tp, pp=o.pp,
        util=inp.util,
        overhead_gb=inp.overhead_gb, context_tokens=wl.context_tokens,
        prompt_tokens=wl.prompt_tokens, kv_dtype=o.kv_dtype,
        eff=inp.option_eff(cat, o.gpu, o.weights),
        mfu=inp.option_mfu(cat, o.gpu, o.weights),
        mfu_half_tokens=inp.option_mfu_half(cat),
        price_per_hour=o.price_per_hour, currency=inp.currency, cny_per_usd=inp.cny_per_usd,
        headroom=inp.memory_headroom, eta_bw=inp.option_eta_bw(cat, o.gpu),
        step_overhead_ms=inp.step_overhead_ms,
        layer_overhead_ms=inp.layer_overhead_ms, prefill_overhead_ms=inp.prefill_overhead_ms,
        calibration=inp.calibration or None,
        step_method=inp.step_method, eta_kv=inp.eta_kv, attn_sat_batch=inp.attn_sat_batch,
        seq_overhead_ms=inp.seq_overhead_ms, attn_mfu=inp.attn_mfu,
        batch1_factor=inp.batch1_factor, batched_overhead_ms=inp.batched_overhead_ms,
        request_latency_ms=inp.request_latency_ms,
        draft=draft, draft_overhead_ms=inp.draft_overhead_ms,
        verify_overhead_ms=inp.verify_overhead_ms, ridge_sharpness=inp.ridge_sharpness,
        cuda_graph_max_tokens=inp.cuda_graph_max_tokens, gemm_tile_tokens=inp.gemm_tile_tokens
    ).with_(linear_prefill_ms=inp.linear_prefill_ms, prefill_layer_ms=inp.prefill_layer_ms,
            embedding_lookup=inp.embedding_lookup, pp_handoff_ms=inp.pp_handoff_ms,
            runtime_memory=inp.runtime_memory, expert_gemm_share=inp.expert_gemm_share),
        inp.profile_for(g.key, g.memory_gb),
        wl.held_tokens)


def prefix_served(inp: PlanInputs, o: Option, catalog: Catalog | None = None
                  ) -> tuple[int, int, str]:
    """(served, asked, kind): tokens of the plan's shared prefix a sharing request finds cached
    on option `o` (what its engine's cache serves, `PlanInputs.prefix_hit_tokens`), the prefix
    capped below the prompt, and why the two may differ (`PrefixGrain.kind`); (0, 0, 'token')
    without one. Qwen3.5-9B under vLLM, 2,000 of 2,200-token prompts at a 2,048-token budget:
    (1,584, 2,000, 'align')."""
    if inp.prefix_tokens <= 0 or inp.prefix_share <= 0:
        return 0, 0, TOKEN_GRAIN.kind
    s = option_scenario(inp, o, catalog)
    grain = inp.prefix_grain_on(s.model, s.gpu, o.kv_dtype, o.tp)
    return (grain.shared(inp.prefix_tokens, s.prompt),
            TOKEN_GRAIN.shared(inp.prefix_tokens, s.prompt), grain.kind)


def prefix_c_vram(inp: PlanInputs, o: Option, catalog: Catalog | None = None) -> tuple[int, int]:
    """The option's C_vram per replica without and with the plan's shared prefix, as the search
    holds requests (`units.replica_units`: the engine's admission, KV reserved at the context
    or the pages of a request's prompt and output; with the prefix, the prefix once and each
    sharing request the rest): the quote's "without -> with". The second is the option's own
    `c_vram_per_replica`. Qwen3-8B int8 with fp8 KV on an RTX 4090, 4,000-token prompts of an
    8K context, 256 out, a 3,000-token prefix shared by 90 %: the chapter's profile 17 -> 25,
    vLLM's pages 33 -> 90."""
    from capacity.plan.units import replica_units

    cat = catalog or default_catalog()
    one = replace(inp, gpus=(o.gpu,), formats=(o.weights,), kv_dtypes=(o.kv_dtype,),
                  drafts=(o.draft,) if o.draft else ())
    got = []
    for x in (replace(one, prefix_tokens=0, prefix_share=0.0), one):
        _, _, u = replica_units(x, cat, tp_only=o.tp)
        row = next(i for i, d in enumerate(u.drafts) if (d.key if d else "") == o.draft)
        got.append(int(u.c_vram[row]))
    return got[0], got[1]


def option_service(inp: PlanInputs, o: Option, catalog: Catalog | None = None,
                   chunk_tokens: int | None = None) -> ServiceModel:
    """One replica of the option for the discrete-event model under the plan's engine
    profile, with the plan's shared prefix and a conversation's turns (`Workload.turns`), as
    `capacity plan --engine --prefix-tokens --turns` runs them: the prefix's hits prefill the
    rest of their prompt in the engine's chunks (whole prompts in batches under the chapter's
    profile) and the slots hold the prefix once, as the search's do."""
    from capacity.plan.events import service_from_scenario

    s = option_scenario(inp, o, catalog)
    wl = inp.workload
    return service_from_scenario(s, output_tokens=wl.output_tokens,
                                 max_num_seqs=inp.max_num_seqs, chunk_tokens=chunk_tokens,
                                 engine=inp.engine, turns=wl.turns, turn_tokens=wl.turn_tokens,
                                 prefix_tokens=inp.prefix_tokens,
                                 prefix_share=inp.prefix_share if inp.prefix_tokens else 0.0)


CHECK_REQUESTS: Final = 2000
"""Requests in the event model's check of a chosen option (`simulate_option`), the one figure
`capacity size --simulate` and `--quote`, the Planner's caption and its quote show. Its TTFT p90
moves 4-9 % from seed to seed at 2,000 (1,000: 9-20 %; four plans at their design load, six
seeds each), and a run takes 20-130 ms on 2 cores."""


def simulate_option(inp: PlanInputs, o: Option, catalog: Catalog | None = None, *,
                    n_requests: int = CHECK_REQUESTS, seed: int = 0,
                    chunk_tokens: int | None = None) -> QueueResult:
    """Discrete-event check of one option at its design load: Poisson arrivals at the design
    rate the planner sized it for (per replica: arrivals are split evenly, so one replica sees
    rate / replicas), a workload given as a peak concurrency too (its design rate is that
    concurrency over a request's time, Little's law): the load the page's headline figures
    describe. Users at a peak arrive at random, not as a benchmark's closed loop: its steady
    state (clients out of step, `closed_loop.closed_loop`) queues no prompt behind another
    and reads 13x below the headline's TTFT p90 (107 ms against 1.37 s, 40 users of
    Qwen3.5-9B AWQ on GB200s), its opening burst about 4x above it.

    A shared prefix (`prefix_tokens`, `prefix_share`) and a conversation's turns
    (`Workload.turns`) run in it as the plan holds them (`option_service`: hits and later
    turns prefill the rest of their prompt under the engine's scheduling, the slots hold the
    prefix once)."""
    from capacity.plan.events import simulate

    svc = option_service(inp, o, catalog, chunk_tokens)
    return simulate(svc, rate_per_s=o.design_rate_per_s / o.replicas, n_requests=n_requests,
                    seed=seed, slo_ttft_ms=inp.slo.ttft_ms, slo_tpot_ms=inp.slo.tpot_ms)


@dataclass(frozen=True, kw_only=True)
class CheckMiss:
    """An SLO the event model's check of an option misses at the plan's percentile q: fewer
    than q of its requests are within `target_ms`."""

    metric: str
    """'ttft' or 'tpot'."""
    within_share: float
    """The share of the check's requests within the target (under q)."""
    target_ms: float


def check_misses(sim: QueueResult, slo: Slo) -> tuple[CheckMiss, ...]:
    """The SLOs `sim` (`simulate_option`'s check at the design load) misses at `slo.quantile`:
    TTFT, then TPOT, where the share of requests within the target is under the quantile (its
    percentile above the target). The headline figures are the closed form's
    (`queueing.analytic_latency`), which runs optimistic where the slots or the KV pool are
    nearly full (docs/method.md, "The slot queue"): the surfaces say so where the check
    misses. Example: p90 TTFT target 2,000 ms, 86 % of the check's requests within it ->
    (CheckMiss('ttft', 0.86, 2000),)."""
    got = (("ttft", sim.ttft_met_share, slo.ttft_ms), ("tpot", sim.tpot_met_share, slo.tpot_ms))
    return tuple(CheckMiss(metric=m, within_share=share, target_ms=target)
                 for m, share, target in got if share < slo.quantile)


@dataclass(frozen=True, kw_only=True)
class CurvePoint:
    """TTFT and TPOT percentiles of the deployment at one total arrival rate."""

    rate_per_s: float
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    goodput_req_s: float
    throughput_req_s: float


def load_curve(inp: PlanInputs, o: Option, rates_per_s: Sequence[float] | None = None,
               catalog: Catalog | None = None, *, n_requests: int = 600, seed: int = 0,
               points: int = 12) -> list[CurvePoint]:
    """TTFT/TPOT percentiles vs total arrival rate for one option (discrete-event model).

    Default rates: `points` values from 5 % to 130 % of the saturation rate.
    """
    from capacity.plan.events import simulate

    svc = option_service(inp, o, catalog)
    reps = o.replicas
    if rates_per_s is None:
        top = svc.saturation_rate_per_s * reps
        rates_per_s = list(np.linspace(0.05, 1.3, points) * top)
    out = []
    for r in rates_per_s:
        q = simulate(svc, rate_per_s=r / reps, n_requests=n_requests, seed=seed,
                     slo_ttft_ms=inp.slo.ttft_ms, slo_tpot_ms=inp.slo.tpot_ms)
        out.append(CurvePoint(rate_per_s=float(r), ttft_ms=q.ttft_ms, tpot_ms=q.tpot_ms,
                              goodput_req_s=q.goodput_req_s * reps,
                              throughput_req_s=q.throughput_req_s * reps))
    return out


def check_option(inp: PlanInputs, o: Option, catalog: Catalog | None = None) -> list[Reason]:
    """Re-check one option through the Scenario path (make_scenario + evaluate), independent
    of the vectorized search: returns the failed checks ('memory', 'ttft', 'tpot')."""
    s = option_scenario(inp, o, catalog)
    c = design_concurrency_total(inp, o)
    ev = evaluate(s, [c])
    fails: list[Reason] = []
    if ev.verdict[0] == MemoryVerdict.DOES_NOT_FIT or c > int(ev.max_concurrency_vram):
        fails.append(Reason.MEMORY)
    zero_load_ttft_ms = float(ev.ttft_s) * 1e3
    if zero_load_ttft_ms > inp.slo.ttft_ms or o.ttft_ms > inp.slo.ttft_ms:
        fails.append(Reason.TTFT)
    if float(ev.decode.step_ms[0]) > inp.slo.tpot_ms or o.tpot_ms > inp.slo.tpot_ms:
        fails.append(Reason.TPOT)
    return fails
