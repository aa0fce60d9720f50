"""Disaggregated prefill/decode points of the buyer's chart (issue 27, docs/frontier.md,
"Disaggregated points").

A disaggregated configuration is a decode replica shape and a prefill replica shape of the
same GPU, weights and KV precision (each one of the planner's replica units,
`capacity.plan.units.replica_units`). At C sequences per decode replica, decoding in pure
decode steps (no prompt runs there; the step is the planner's F4 at batch C, s(C)):

    interactivity = 1000 / s(C)                   output tok/s = C x 1000 / s(C)
    rate = output tok/s / n                       prefill GPUs = rate / capacity x TP_prefill
    throughput per GPU = output tok/s / (TP_decode + prefill GPUs)

the prefill GPUs fractional (the ratio xPyD is chosen to match the decode replica's rate), the
capacity that of one prefill replica at its part of the TTFT budget
(`capacity.plan.disagg.prefill_capacity_per_s`: TTFT budget - the KV hand-over
(`disagg_handover.transfer_ms`'s terms over `disagg.link_for`) - the first decode step). This
is how
InferenceMAX draws its disaggregated points: output tok/s over every GPU of the prefill and
decode pools at a decode concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Model
from capacity.fit.frontier_loop import step_model_terms
from capacity.fit.frontier_space import (
    DISAGGREGATED,
    FrontierInputs,
    PointBlock,
    Variant,
    concurrency_grid,
)
from capacity.plan.disagg import (
    RHO_MAX,
    handover_bytes,
    link_for,
    link_wait_ms,
    prefill_capacity_per_s,
    prefill_ttft_ms,
)
from capacity.plan.disagg_handover import Link, descriptors_per_rank
from capacity.plan.options import PlanInputs
from capacity.plan.units import ReplicaUnits
from capacity.types import FloatArray

DISAGG_ENGINES: tuple[str, ...] = ("vllm", "sglang")
"""Engines that serve prefill and decode on separate pools: vLLM (disaggregated prefilling
with the NIXL / LMCache KV connectors, docs.vllm.ai "Disaggregated Prefilling") and SGLang
(PD disaggregation with Mooncake / NIXL transfer, docs.sglang.ai "PD Disaggregation");
llama.cpp has none."""


@dataclass(frozen=True, kw_only=True)
class DisaggFigures:
    """A decode replica at C sequences and the prefill GPUs it needs (arrays). Units: tok/s
    per user, tok/s, req/s, GPUs, tok/s per GPU paid, a fraction."""

    interactivity_tok_s_per_user: FloatArray
    output_tok_s: FloatArray
    """Output tokens per second of one decode replica."""
    rate_per_s: FloatArray
    """Requests per second one decode replica serves."""
    prefill_gpus: FloatArray
    """Prefill GPUs one decode replica needs (fractional)."""
    throughput_tok_s_per_gpu: FloatArray
    prefill_share: FloatArray
    """The prefill GPUs' share of the GPUs paid (the input tokens' share of the GPU-hour)."""


def disaggregated_figures(*, concurrency: npt.ArrayLike, decode_step_ms: npt.ArrayLike,
                          output_tokens: int, prefill_capacity_per_s: npt.ArrayLike,
                          prefill_tp: npt.ArrayLike, decode_tp: npt.ArrayLike) -> DisaggFigures:
    """The figures of a disaggregated point (module docstring). A decode replica carries C
    sequences in pure decode steps of s ms: 1000 / s tok/s per user, C x 1000 / s tok/s;
    Little's law over a request's n output tokens gives its rate, output tok/s / n req/s; the
    prefill pool then needs rate / capacity replicas of TP_prefill GPUs (capacity in req/s per
    prefill replica); throughput per GPU paid = output tok/s / (TP_decode + prefill GPUs).
    Example: C 10, s 20 ms, n 500, capacity 2 req/s, TP 2 prefill, TP 4 decode: 50 tok/s per
    user, 500 tok/s, 1 req/s, 1 prefill GPU, 500 / 5 = 100 tok/s per GPU, prefill share 0.2.
    Source: InferenceMAX's disaggregated points (output tok/s over all GPUs of both pools)."""
    c = np.asarray(concurrency, dtype=np.float64)
    s = np.asarray(decode_step_ms, dtype=np.float64)
    out = c * 1e3 / s
    rate = out / float(output_tokens)
    pre = rate / np.asarray(prefill_capacity_per_s, dtype=np.float64) * np.asarray(
        prefill_tp, dtype=np.float64)
    paid = np.asarray(decode_tp, dtype=np.float64) + pre
    return DisaggFigures(interactivity_tok_s_per_user=np.asarray(1e3 / s, dtype=np.float64),
                         output_tok_s=np.asarray(out, dtype=np.float64),
                         rate_per_s=np.asarray(rate, dtype=np.float64),
                         prefill_gpus=np.asarray(pre, dtype=np.float64),
                         throughput_tok_s_per_gpu=np.asarray(out / paid, dtype=np.float64),
                         prefill_share=np.asarray(pre / paid, dtype=np.float64))


def disaggregated_block(inp: FrontierInputs, v: Variant, pinp: PlanInputs, model: Model,
                        units: ReplicaUnits) -> PointBlock:
    """Every disaggregated point of one variant (no draft; `DISAGG_ENGINES` only): each replica
    unit without a draft as the decode replica at every concurrency of `concurrency_grid` up to
    its slots, with each unit of the same GPU, weights and KV precision as the prefill replica.

    Per pair: the KV hand-over on an idle link (`disagg_handover.transfer_ms`'s terms: the
    link's latency, its busy time for the F2 bytes per GPU at each side's TP and the decode
    rank's descriptors, and the decode side's admission at the pair's decode step; the link of
    one prefill and one decode replica, `link_for`); the
    prefill replica's capacity at its part of the TTFT budget, `inp.ttft_ms` at `inp.quantile`
    less the hand-over, the first decode step and the request's time outside the GPU
    (`PlanInputs.request_latency_ms`, as the Planner's `Slo.at_engine`;
    `prefill_capacity_per_s`, batched prefill where the engine's token budget holds two
    prompts); the figures (`disaggregated_figures`).
    TTFT: the prefill pool's mean at that rate + the hand-over + the mean waits for the sending
    and receiving links (`link_wait_ms`) + the first decode step + that latency. A pair whose prefill alone
    misses the budget, or whose link runs above RHO_MAX, draws no point."""
    if v.draft is not None or v.engine not in DISAGG_ENGINES:
        return PointBlock.empty(DISAGGREGATED)
    # no draft and no pipeline (F13): the pools are planned of TP replicas
    plain = np.asarray([d is None for d in units.drafts], dtype=bool) & (units.stages() == 1)
    slots = np.where(plain, np.minimum(units.c_vram, units.seqs), 0).astype(np.int64)
    d_idx, conc = concurrency_grid(slots)
    if d_idx.size == 0:
        return PointBlock.empty(DISAGGREGATED)
    s_c = step_model_terms(units.step.select(d_idx))(conc)[2]
    # each decode point against every prefill unit of its GPU, weights and KV
    shape_of = [(units.gpus[i].key, units.formats[i], units.kv[i]) for i in range(len(slots))]
    prefill_of: dict[tuple[str, str, str], list[int]] = {}
    for i in np.flatnonzero(slots >= 1).tolist():
        prefill_of.setdefault(shape_of[i], []).append(i)
    pairs = [(k, i) for k, j in enumerate(d_idx.tolist()) for i in prefill_of[shape_of[j]]]
    pt_k = np.asarray([k for k, _ in pairs], dtype=np.int64)
    p_idx = np.asarray([i for _, i in pairs], dtype=np.int64)
    j_idx = d_idx[pt_k]
    tp_d, tp_p = units.tp[j_idx].astype(np.int64), units.tp[p_idx].astype(np.int64)
    # the hand-over of each (GPU, KV, prefill TP, decode TP): the link's busy time (bytes and
    # descriptors) per shape, its latency, and the decode side's admission at the pair's step
    desc = descriptors_per_rank(model, inp.prompt_tokens)
    moved: dict[tuple[str, str, int, int], tuple[Link, float]] = {}
    busy, fixed, kind = np.zeros(len(pairs)), np.zeros(len(pairs)), []
    s_pair = s_c[pt_k]
    for n, (j, i) in enumerate(zip(j_idx.tolist(), p_idx.tolist(), strict=True)):
        g = units.gpus[j]
        key = (g.key, units.kv[j], int(units.tp[i]), int(units.tp[j]))
        if key not in moved:
            link = link_for(g, g, pool_gpus=key[2] + key[3])
            moved[key] = (link, float(link.busy_ms(
                handover_bytes(model, key[1], inp.prompt_tokens, key[2]),
                handover_bytes(model, key[1], inp.prompt_tokens, key[3]), desc)))
        link, busy[n] = moved[key]
        fixed[n] = link.latency_ms + float(link.admission_ms(s_pair[n]))
        kind.append(link.kind)
    xfer = fixed + busy
    prof = {g.key: pinp.profile_for(g.key, g.memory_gb) for g in units.gpus}
    budget_tok = np.asarray([prof[units.gpus[i].key].token_budget_tokens
                             if prof[units.gpus[i].key].chunked else 0 for i in p_idx.tolist()],
                            dtype=np.float64)
    batched = (budget_tok == 0) | (budget_tok >= 2 * inp.prompt_tokens)
    pre_ms = units.prefill_ms[p_idx]
    req = pinp.request_latency_ms   # outside the GPU: on every TTFT (`PlanInputs`)
    cap = prefill_capacity_per_s(pre_ms, inp.ttft_ms - xfer - s_pair - req, inp.quantile,
                                 batched)
    fig = disaggregated_figures(concurrency=conc[pt_k], decode_step_ms=s_pair,
                                output_tokens=inp.output_tokens,
                                prefill_capacity_per_s=np.where(cap > 0, cap, np.nan),
                                prefill_tp=tp_p, decode_tp=tp_d)
    w_send, _, rho_s = link_wait_ms(cap, busy, inp.quantile)
    w_recv, _, rho_r = link_wait_ms(fig.rate_per_s, busy, inp.quantile)
    ok = (cap > 0) & (rho_s <= RHO_MAX) & (rho_r <= RHO_MAX)
    ttft = prefill_ttft_ms(cap, pre_ms, inp.quantile, batched)[0] + xfer + w_send + w_recv \
        + s_pair + req
    keep = np.flatnonzero(ok)
    rows = keep.tolist()
    per_d = fig.prefill_gpus / np.maximum(tp_p, 1)
    j_rows, p_rows = j_idx[keep].tolist(), p_idx[keep].tolist()
    n = len(rows)
    return PointBlock(
        deployment=DISAGGREGATED, gpu=[units.gpus[j].key for j in j_rows],
        gpu_name=[units.gpus[j].name for j in j_rows], engine=[v.engine] * n,
        basis=[v.basis] * n, draft=[None] * n, weights=[units.formats[j] for j in j_rows],
        kv_dtype=[units.kv[j] for j in j_rows],
        layout=[f"prefill TP{int(units.tp[i])} x {per_d[r]:.2f} per decode replica, KV "
                f"{xfer[r]:.1f} ms over {kind[r]}" for r, i in zip(rows, p_rows, strict=True)],
        tp=tp_d[keep], n_gpus=tp_d[keep], concurrency=conc[pt_k][keep].astype(np.int64),
        interactivity_tok_s_per_user=fig.interactivity_tok_s_per_user[keep],
        throughput_tok_s_per_gpu=fig.throughput_tok_s_per_gpu[keep], ttft_ms=ttft[keep],
        tpot_ms=s_pair[keep], prefill_share=fig.prefill_share[keep],
        price_per_gpu_hour=units.price_per_hour[j_idx[keep]], prefill_tp=tp_p[keep],
        prefill_gpus=fig.prefill_gpus[keep])
