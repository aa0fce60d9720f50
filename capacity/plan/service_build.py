"""One replica from a Scenario (docs/method.md, queueing and "Engine profiles"):
`service_from_scenario` builds the `ServiceModel` the event model runs under an engine profile
and its knobs (max_num_seqs, the token budget, the KV block, CPU offload, a prefix cache,
multi-turn, prompts and outputs that vary), with the paged pool of vLLM's and SGLang's profiles
(`PagedKv`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile, engine_profile
from capacity.errors import InputError
from capacity.model.forward_pass import eager_pass_ms, eager_scenario, scenario_offload_ms, unified_kv
from capacity.model.kv import align_block_tokens, held_request_bytes
from capacity.model.memory import max_concurrency
from capacity.model.pipeline import forward_comm_line
from capacity.model.prefill import prefill_flops
from capacity.model.prefix import (
    ALIGN_PROFILE,
    cached_prefill,
    cached_prefill_s,
    prefix_grain,
    shared_prefix_bytes,
)
from capacity.model.roofline import DecodeStep, counts_as_engines
from capacity.model.scenario import Scenario, evaluate
from capacity.model.workload import held_tokens, mean_prompt_tokens
from capacity.plan.service import PagedKv, ServiceModel
from capacity.types import FloatArray, Note
from capacity.units import GIB, TERA


def _mfu_ms(s: Scenario, linear_flops: FloatArray, attention_flops: FloatArray) -> FloatArray:
    """The MFU-bound part of a prefill at the plateau MFU (ms): the GEMMs, and the attention
    too when the scenario has no attn_mfu (F6b runs it at MFU then)."""
    flops = linear_flops + (attention_flops if s.attn_mfu is None else 0.0)
    return np.asarray(flops / (s.tflops * s.tp * TERA * s.mfu) * 1e3, dtype=np.float64)


def _paged_pool(s: Scenario, prof: EngineProfile, *, output_tokens: int, pool_bytes: float,
                shared_bytes: float, slots: int, mixed_budget: int | None, held_tokens: int,
                decode: DecodeStep, cum_ms: FloatArray, mfu_cum_ms: FloatArray | None,
                longest_prompt: int) -> PagedKv:
    """The paged pool of `service_from_scenario` (vLLM, SGLang): a request's KV bytes per
    tokens held (F2 in the profile's pages, x the draft's factor), and the step and prefill
    arrays extended past `slots` and the prompt. The most requests at once is min(max_seqs,
    budget - 1 for mixed steps, floor(pool / the pages of one prompt)), at least `slots`.
    Example: 54e9 B of pool, 147,456 B a token, 1,000-token prompts (1,008 in 16-token pages:
    148.6e6 B): floor(54e9 / 148.6e6) = 363 requests, under vLLM's max_seqs of 1,024. With
    multi-turn the arrays reach the last turn's prompt (`longest_prompt`) + output."""
    top = longest_prompt + output_tokens + prof.kv_block_tokens
    t = np.arange(1, top + 1, dtype=np.float64)
    per = held_request_bytes(s.model, t, s.kv_dtype, s.tp, prof.kv_block_tokens)
    held_bytes = np.concatenate([[0.0], np.asarray(per, dtype=np.float64) * s.kv_factor])
    least = float(held_bytes[s.prompt]) - shared_bytes
    cap = prof.max_seqs if mixed_budget is None else min(prof.max_seqs, mixed_budget - 1)
    most = max(slots, min(cap, int(pool_bytes // least) if least > 0 else cap))
    terms = [np.asarray(x, dtype=np.float64) for x in
             (decode.bandwidth_ms, decode.compute_ms, decode.comm_ms, decode.serial_ms)]
    if most > slots:
        b = np.arange(slots + 1, most + 1, dtype=np.float64)
        more = evaluate(s, b * s.replicas,
                        None if held_tokens == s.context_tokens else float(held_tokens)).decode
        terms = [np.concatenate([a, np.asarray(x, dtype=np.float64)]) for a, x in
                 zip(terms, (more.bandwidth_ms, more.compute_ms, more.comm_ms, more.serial_ms),
                     strict=True)]
    # a recompute prefills prompt + the tokens generated so far: F6 up to prompt + output
    ks = np.arange(longest_prompt + 1, longest_prompt + output_tokens + 1, dtype=np.float64)
    plateau = s.with_(mfu_half_tokens=0.0, prompt_tokens=None, prefill_layer_ms=0.0)
    pre = evaluate(plateau, [s.replicas], ks)
    cum = np.concatenate([cum_ms, np.asarray(pre.prefill_s, dtype=np.float64).reshape(-1) * 1e3])
    mfu = None
    if mfu_cum_ms is not None:
        pf = prefill_flops(s.model, ks, by_operator=counts_as_engines(s.step_method))
        mfu = np.concatenate([mfu_cum_ms, _mfu_ms(s, pf.linear_flops, pf.attention_flops)])
    return PagedKv(pool_bytes=pool_bytes, held_bytes=held_bytes, shared_bytes=shared_bytes,
                   block_tokens=prof.kv_block_tokens,
                   reserve_output_share=prof.reserve_output_share, max_batch=most,
                   bandwidth_ms=terms[0], compute_ms=terms[1], comm_ms=terms[2],
                   serial_ms=terms[3], prefill_cum_ms=cum, mfu_cum_ms=mfu)


def service_from_scenario(s: Scenario, *, output_tokens: int,
                          max_num_seqs: int | None = None,
                          chunk_tokens: int | None = None,
                          engine: str | EngineProfile = DEFAULT_ENGINE,
                          block_tokens: int | None = None, offload_gib: float = 0.0,
                          prefix_tokens: int = 0, prefix_share: float = 0.0,
                          turns: int = 1, turn_tokens: int = 0,
                          prompt_lengths: Sequence[int] | None = None,
                          prefix_caching: bool = False, enforce_eager: bool = False,
                          output_lengths: Sequence[int] | None = None) -> ServiceModel:
    """One replica of `s` as a ServiceModel (`s.held_tokens` aside: the event model counts each
    request's own tokens): slots from F3 and max_num_seqs, steps from F4 (with
    TP communication), prefill from F6 with attention, through `scenario.evaluate` (the same
    numbers as the Explorer), scheduled as the engine profile says (`engine`, default the
    chapter's; `max_num_seqs` and `chunk_tokens` override its max_seqs and token budget).

    The engine's other knobs: `block_tokens` the KV page of token admission (vLLM's
    --block-size; default the profile's), `offload_gib` vLLM's --cpu-offload-gb (GiB per GPU:
    the KV pool gains it, every forward pass streams it over the host link,
    `forward_pass.scenario_offload_ms`), and a prefix cache (`prefix_tokens` of a shared system
    prompt that `prefix_share` of requests find cached, as much of it as the engine's cache
    serves, `prefix.prefix_grain`: their prefill skips it, `prefix.cached_prefill_s`, and its
    KV is held once, `prefix.shared_prefix_bytes`). The
    memory utilisation (vLLM's gpu_memory_utilization) is the scenario's `util`: the KV pool
    is util x VRAM - weights - overhead (F3).

    Multi-turn (`turns` > 1, chunked profiles only): conversations whose turn k + 1 sends the
    history (every earlier prompt and answer) and `turn_tokens` new ones
    (`ServiceModel.request_prompts`): the prefill arrays reach the last turn's prompt, the
    decode step is F4 at the turns' mean context (the history's KV is read every step), and
    the slots count the mean turn's prompt and answer.

    Prompts that vary (`prompt_lengths`, chunked profiles, one turn, no shared prefix): each
    request's own prompt (`ServiceModel.prompt_lengths`), the prefill arrays reaching the
    longest; the slots and the decode step stay at the scenario's prompt, their mean.
    `prefix_caching` (implied by a shared prefix or turns): the engine caches prefixes; under
    the vLLM profile on a hybrid model (linear-state layers with a `page_state_bytes`) that is
    its mamba 'align' mode, whose prefill chunks end at the hybrid attention block
    (`kv.align_block_tokens`, `prefix.align_chunk_tokens`); elsewhere nothing more.
    `enforce_eager`: `eager_scenario`."""
    s = s.with_(held_tokens=None)
    prof = engine_profile(engine) if isinstance(engine, str) else engine
    prof = prof.for_gpu(s.gpu.key, s.vram_gb).with_max_seqs(max_num_seqs)
    eager = eager_pass_ms(s.model, prof) if enforce_eager else 0.0
    s = eager_scenario(s, prof) if enforce_eager else s
    if block_tokens is not None:
        if block_tokens < 1:
            raise InputError(f"KV block size must be >= 1 token, got {block_tokens}")
        prof = replace(prof, kv_block_tokens=int(block_tokens))
    if not (math.isfinite(prefix_share) and 0 <= prefix_share <= 1):
        raise InputError(f"prefix share must be in [0, 1], got {prefix_share}")
    if prefix_tokens < 0:
        raise InputError(f"shared prefix must be >= 0 tokens, got {prefix_tokens}")
    budget = chunk_tokens if chunk_tokens is not None else prof.token_budget_tokens or None
    grain = prefix_grain(s.model, s.kv_dtype, s.tp, prof, budget)
    cached = grain.shared(prefix_tokens, s.prompt) if prefix_share > 0 else 0
    share = prefix_share if cached > 0 else 0.0
    if turns < 1 or (turns > 1 and turn_tokens < 1):
        raise InputError(f"multi-turn needs >= 1 turn and >= 1 new token a turn, got {turns} "
                         f"turns of {turn_tokens}")
    if turns > 1 and budget is None:
        raise InputError(f"multi-turn prefix caching runs in the chunked-prefill path: the "
                         f"'{prof.key}' profile prefills whole prompts; use vllm, sglang or "
                         "llamacpp")
    lengths = None if prompt_lengths is None else tuple(int(x) for x in prompt_lengths)
    if lengths is not None and (budget is None or turns > 1 or cached or not lengths
                                or min(lengths) < 1):
        raise InputError("per-request prompt lengths (>= 1 token each) need a chunked-prefill "
                         "profile, one turn and no shared prefix")
    outs = None if output_lengths is None else tuple(int(x) for x in output_lengths)
    if outs is not None and (not outs or min(outs) < 1 or turns > 1):
        raise InputError("per-request output lengths (>= 1 token each) need one turn")
    most_out = output_tokens if outs is None else max(outs)
    step_tokens = output_tokens + turn_tokens if turns > 1 else 0
    longest = s.prompt + (turns - 1) * step_tokens
    if lengths is not None:
        longest = max(lengths)
    if (lengths is not None or outs is not None) and longest + most_out > s.context_tokens:
        raise InputError(f"the longest prompt, {longest:,} tokens, and {most_out:,} "
                         f"output need more than the {s.context_tokens:,}-token context "
                         "(raise --ctx)")
    caching = prefix_caching or turns > 1 or (prefix_tokens > 0 and prefix_share > 0)
    align = (align_block_tokens(s.model, s.kv_dtype, s.tp, prof.kv_block_tokens)
             if caching and prof.key == ALIGN_PROFILE and budget is not None else 0)
    if longest + output_tokens > s.context_tokens and turns > 1:
        raise InputError(f"the last of {turns} turns needs {longest + output_tokens:,} tokens "
                         f"of context; the context is {s.context_tokens:,} (raise --ctx)")
    mean_prompt = mean_prompt_tokens(s.prompt, output_tokens, turns, turn_tokens)
    one = evaluate(s, [s.replicas])
    offload = scenario_offload_ms(s, offload_gib) if offload_gib else 0.0
    shared = float(shared_prefix_bytes(s.with_(block_size=prof.kv_block_tokens), cached))
    pool = float(one.vram.kv_budget_bytes) + offload_gib * GIB - (shared if share else 0.0)
    held = s.context_tokens
    if prof.kv_admission == "tokens":
        # the requests whose whole prompt + output fit the pool, in the engine's pages
        full = held_tokens(mean_prompt, output_tokens, s.context_tokens)
        per_req = float(held_request_bytes(s.model, float(full), s.kv_dtype, s.tp,
                                           prof.kv_block_tokens)) * s.kv_factor
        held = max(1, min(round(mean_prompt) + output_tokens // 2, s.context_tokens))
    else:
        per_req = float(one.kv_request.exact_bytes) * s.kv_factor
    c_vram = int(max_concurrency(pool, per_req - share * shared))
    slots = min(c_vram, prof.max_seqs)
    if slots < 1:
        raise InputError(Note(f"{s.variant.key} on {s.gpu.name} (TP={s.tp}) holds no request "
                              f"of {s.context_tokens} tokens: use more or bigger GPUs, a shorter "
                              "context or FP8 KV", code="no_slot", model=s.variant.key,
                              gpu=s.gpu.name, tp=s.tp, context=s.context_tokens))
    b = np.arange(0, slots + 1, dtype=np.float64)
    ev = evaluate(s, b * s.replicas, None if held == s.context_tokens else float(held))
    half = float(s.mfu_half_tokens)
    # prompts at the plateau, each pass stretches them; a pass pays the per-layer prefill
    # launches once, whatever prompts it carries (`ServiceModel.pass_prefill_ms`)
    plateau = s.with_(mfu_half_tokens=0.0, prefill_layer_ms=0.0)
    operator = counts_as_engines(s.step_method)
    cum = mfu_cum = None
    hit_first = 0.0
    turn_first = None
    if budget is not None:
        ks = np.arange(1, longest + 1, dtype=np.float64)
        pre = evaluate(plateau.with_(prompt_tokens=None), [s.replicas], ks)
        cum = np.concatenate([[0.0], np.asarray(pre.prefill_s, dtype=np.float64).reshape(-1) * 1e3])
        if half > 0:
            pf = prefill_flops(s.model, ks, by_operator=operator)
            mfu_cum = np.concatenate([[0.0], _mfu_ms(s, pf.linear_flops, pf.attention_flops)])
        if cached:
            hit_first = (float(cached_prefill_s(plateau, s.prompt, cached)) * 1e3
                         - float(cum[s.prompt] - cum[cached]))
        if turns > 1:
            p = s.prompt + np.arange(1, turns) * step_tokens
            whole_s = cached_prefill_s(plateau.with_(prompt_tokens=None), p, p - turn_tokens)
            turn_first = (np.asarray(whole_s, dtype=np.float64) * 1e3
                          - (cum[p] - cum[p - turn_tokens]))
    paged = None
    if prof.kv_admission == "tokens" and prof.preempt and cum is not None:
        paged = _paged_pool(s, prof, output_tokens=most_out, pool_bytes=pool,
                            shared_bytes=shared if share else 0.0, slots=slots,
                            mixed_budget=budget if prof.mixed else None, held_tokens=held,
                            decode=ev.decode, cum_ms=cum, mfu_cum_ms=mfu_cum,
                            longest_prompt=longest)
    whole = prefill_flops(s.model, float(s.prompt), by_operator=operator)
    hit_pf = cached_prefill(s, s.prompt, cached) if cached else None
    return ServiceModel(paged=paged,
        slots=slots, bandwidth_ms=np.asarray(ev.decode.bandwidth_ms, dtype=np.float64),
        compute_ms=np.asarray(ev.decode.compute_ms, dtype=np.float64),
        comm_ms=np.asarray(ev.decode.comm_ms, dtype=np.float64),
        overhead_ms=s.fixed_step_ms, prefill_ms=float(one.prefill_s) * 1e3,
        prompt_tokens=s.prompt, output_tokens=output_tokens, chunk_tokens=budget,
        mixed=prof.mixed or not prof.chunked, prefill_cum_ms=cum, engine=prof.key,
        serial_ms=np.asarray(ev.decode.serial_ms, dtype=np.float64),
        mfu_cum_ms=mfu_cum, mfu_half_tokens=half, routing=s.routing,
        prefill_mfu_ms=float(_mfu_ms(s, whole.linear_flops, whole.attention_flops)) if half else 0.0,
        cached_tokens=cached, prefix_share=share, prefix_tokens=int(prefix_tokens),
        prefix_kind=grain.kind,
        hit_prefill_ms=float(cached_prefill_s(s, s.prompt, cached)) * 1e3 if cached else 0.0,
        hit_mfu_ms=(float(_mfu_ms(s, hit_pf.linear_flops, hit_pf.attention_flops))
                    if hit_pf is not None and half else 0.0),
        hit_first_ms=hit_first, offload_ms=offload, eager_ms=eager, turns=turns,
        pass_prefill_ms=s.prefill_layer_ms * s.model.layers,
        turn_tokens=turn_tokens if turns > 1 else 0, turn_first_ms=turn_first,
        unified_kv=unified_kv(s, prof), request_latency_ms=s.request_latency_ms,
        schedule_ahead=s.schedule_ahead and prof.schedules_ahead(),
        comm_line=forward_comm_line(s.model, s.gpu, s.tp, s.pp, s.pp_handoff_ms),
        decode_tokens_per_seq=1.0 if s.draft is None else float(s.draft.verify_tokens),
        prompt_lengths=lengths, output_lengths=outs, align_block_tokens=align)
