"""The simulated engine's physics: prefill, decode-step and mixed-step times and the KV account of
a Scenario under an engine profile (`SimPhysics`), the formulas the event model
(`capacity.plan.service.ServiceModel`) uses too; `capacity.sim.scheduler` schedules with them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from capacity.catalog.engines import DEFAULT_ENGINE, EngineProfile, engine_profile
from capacity.errors import InputError
from capacity.model.forward_pass import pass_slowdown, scenario_offload_ms, unified_kv
from capacity.model.kv import held_request_bytes
from capacity.model.memory import max_concurrency
from capacity.model.pipeline import forward_comm_line
from capacity.model.prefill import prefill_flops
from capacity.model.prefix import cached_prefill_s
from capacity.model.roofline import counts_as_engines, mixed_step_time_ms
from capacity.model.scenario import Scenario, evaluate
from capacity.units import GIB


def profile_with_knobs(profile: EngineProfile, *, token_budget: int | None = None,
                       block_tokens: int | None = None) -> EngineProfile:
    """The profile with vLLM's --max-num-batched-tokens (`token_budget`) and --block-size
    (`block_tokens`) where given (None keeps the profile's). InputError for a budget on a
    profile that prefills whole prompts (it has none to change), or one < 1 token."""
    if token_budget is not None:
        if not profile.chunked:
            raise InputError(f"max-num-batched-tokens: the '{profile.key}' profile prefills "
                             "whole prompts (no token budget); use vllm, sglang or llamacpp")
        if token_budget < 1:
            raise InputError(f"max-num-batched-tokens must be >= 1, got {token_budget}")
        profile = replace(profile, token_budget_tokens=int(token_budget))
    if block_tokens is not None:
        if block_tokens < 1:
            raise InputError(f"KV block size must be >= 1 token, got {block_tokens}")
        profile = replace(profile, kv_block_tokens=int(block_tokens))
    return profile


class SimPhysics:
    """Prefill and decode-step times (seconds, before speedup) and the KV account of a Scenario
    under an engine profile and its knobs, cached.

    The knobs are the event model's (`capacity.plan.service_build.service_from_scenario`):
    `max_num_seqs`, `token_budget` (vLLM's max_num_batched_tokens), `block_tokens` (the KV
    page, vLLM's --block-size) and `offload_gib` (vLLM's --cpu-offload-gb, GiB per GPU: the KV
    pool gains it, and every forward pass streams it over the host link, `offload_s`);
    gpu_memory_utilization is the scenario's `util` (the KV pool is F3's budget)."""

    def __init__(self, scenario: Scenario, max_num_seqs: int | None = None,
                 profile: EngineProfile | None = None, *, token_budget: int | None = None,
                 block_tokens: int | None = None, offload_gib: float = 0.0) -> None:
        scenario = scenario.with_(held_tokens=None)  # the engine counts each request's tokens
        self.scenario = scenario
        prof = profile or engine_profile(DEFAULT_ENGINE)
        self.profile = profile_with_knobs(
            prof.for_gpu(scenario.gpu.key, scenario.vram_gb).with_max_seqs(max_num_seqs),
            token_budget=token_budget, block_tokens=block_tokens)
        self._step: dict[tuple[int, int], tuple[float, ...]] = {}
        self._prefill: dict[int, float] = {0: 0.0}
        self._kv: dict[int, float] = {0: 0.0}
        ev = evaluate(scenario, [1])
        self.offload_s = scenario_offload_ms(scenario, offload_gib) / 1e3 if offload_gib else 0.0
        """What every forward pass adds streaming the offloaded weights (s; the event model's
        `ServiceModel.offload_ms`)."""
        self.kv_budget_bytes = float(ev.vram.kv_budget_bytes) + offload_gib * GIB
        self.c_vram = int(ev.max_concurrency_vram) if not offload_gib else int(
            max_concurrency(self.kv_budget_bytes,
                            float(ev.kv_request.exact_bytes) * scenario.kv_factor)
        ) * scenario.replicas
        if self.profile.kv_admission == "context":
            if self.c_vram < 1:
                raise InputError(
                    f"{scenario.variant.key} leaves no room for KV cache on {scenario.gpu.name} "
                    f"at {scenario.context_tokens} tokens: pick a bigger GPU, a smaller format "
                    "or context")
            self.slots = min(self.c_vram, self.profile.max_seqs)
        else:
            self.slots = self.profile.max_seqs
            if self.kv_bytes(1) > self.kv_budget_bytes:
                raise InputError(f"{scenario.variant.key} leaves no room for KV cache on "
                                 f"{scenario.gpu.name}: pick a bigger GPU or a smaller format")
        # prompts at the plateau MFU; each forward pass stretches their MFU-bound part (F6c)
        # a pass pays the per-layer prefill launches once, whatever prompts it carries
        # (`prefill_pass_s`; the event model's `ServiceModel.pass_prefill_ms`)
        self._prefill_scenario = scenario.with_(prompt_tokens=None, mfu_half_tokens=0.0,
                                                prefill_layer_ms=0.0)
        self.pass_prefill_s = scenario.prefill_layer_ms * scenario.model.layers / 1e3
        """What a forward pass that carries prompt tokens adds once (s): its layers' prefill
        kernels launched without CUDA graphs (`Scenario.prefill_layer_ms`)."""
        self._mfu: dict[int, float] = {0: 0.0}
        d = scenario.draft
        # F12's step per emitted token is the engine step over tau: at tau = 1 it IS the engine
        # step (verify pass + draft), every term of it (DecodeStep.engine_step_ms)
        self._step_scenario = (scenario if d is None
                               else scenario.with_(draft=replace(d, acceptance_length=1.0)))
        self.verify_tokens = 1 if d is None else d.verify_tokens
        """Tokens per decoding sequence in one step: 1, or k + 1 with a draft."""
        self.comm_line = forward_comm_line(scenario.model, scenario.gpu, scenario.tp,
                                           scenario.pp, scenario.pp_handoff_ms)
        """F10's all-reduces against a pass's tokens (the event model's `ServiceModel.comm_line`):
        a pass all-reduces all its tokens in one message per layer."""
        self.unified_kv = unified_kv(scenario, self.profile)
        """One unified KV cache (llama.cpp): a pass's prompt chunks attend across one another
        (the event model's `ServiceModel.unified_kv`); None: none."""

    def prefill_batch_s(self, chunks: list[tuple[int, int]], extra_s: float = 0.0) -> float:
        """A forward pass of prompt chunks alone (a prefill batch: the chapter, SGLang), s:
        `prefill_pass_s` with no decode tokens, its all-reduces paid once at the pass's tokens
        instead of per chunk (`comm_line`), plus `offload_s` (the event model's
        `ServiceModel.prompt_pass_ms` adds its offload and all-reduces once too)."""
        line = self.comm_line
        apart = sum(line.chunk_ms(d, n) for d, n in chunks)
        once = line.at_ms(sum(n for _, n in chunks)) if chunks else 0.0
        return self.prefill_pass_s(chunks, 0, extra_s) + (once - apart) / 1e3 + self.offload_s

    def prefill_s(self, prompt_tokens: int) -> float:
        """F6 prefill time (s) of one prompt, with the attention term (0 for no tokens)."""
        t = self._prefill.get(prompt_tokens)
        if t is None:
            ev = evaluate(self._prefill_scenario, [1], [float(prompt_tokens)])
            t = float(ev.prefill_s.reshape(-1)[0])
            self._prefill[prompt_tokens] = t
        return t

    def chunk_s(self, done_tokens: int, chunk_tokens: int) -> float:
        """Prefill time (s) of tokens done..done+chunk of a prompt at the plateau MFU: F6 at the
        chunk's end minus F6 at its start, so a prompt's chunks add up to its whole prefill (the
        fixed prefill overhead falls on the first chunk; each chunk attends to the tokens
        before it)."""
        return self.prefill_s(done_tokens + chunk_tokens) - self.prefill_s(done_tokens)

    def mfu_part_s(self, prompt_tokens: int) -> float:
        """The MFU-bound part of `prefill_s` (s, at the plateau): the GEMMs, and the attention
        too without an attn_mfu (F6b). 0 without `mfu_half_tokens` (nothing stretches)."""
        s = self.scenario
        if s.mfu_half_tokens <= 0 or prompt_tokens <= 0:
            return 0.0
        t = self._mfu.get(prompt_tokens)
        if t is None:
            pf = prefill_flops(s.model, float(prompt_tokens),
                               by_operator=counts_as_engines(s.step_method))
            flops = float(pf.linear_flops) + (float(pf.attention_flops) if s.attn_mfu is None
                                              else 0.0)
            t = flops / (s.tflops * s.tp * 1e12 * s.mfu)
            self._mfu[prompt_tokens] = t
        return t

    def hit_first_s(self, prompt_tokens: int, cached_tokens: int) -> float:
        """What a prefix hit's first chunk adds to `chunk_s` (s): the prefill overhead, the
        output head and TP communication's fixed part, so its chunks add up to
        `prefix.cached_prefill_s` at the plateau (the event model's `hit_first_ms`)."""
        if cached_tokens <= 0:
            return 0.0
        whole = float(cached_prefill_s(self._prefill_scenario.with_(prompt_tokens=prompt_tokens),
                                       prompt_tokens, cached_tokens))
        return whole - (self.prefill_s(prompt_tokens) - self.prefill_s(cached_tokens))

    def prefill_pass_s(self, chunks: list[tuple[int, int]], decode_tokens: int = 0,
                       extra_s: float = 0.0) -> float:
        """The prompt work of one forward pass that carries `decode_tokens` decode tokens and
        `chunks` ((done, tokens) each), s: the chunks' `chunk_s` + `extra_s` + their MFU-bound
        part stretched to step_mfu(decode tokens + chunk tokens) (F6c,
        `forward_pass.pass_slowdown`); the event model's `ServiceModel.mixed_step_ms` adds the
        same, and `pass_prefill_s` once when it carries chunks. Without `mfu_half_tokens` it is
        the chunks' `chunk_s` (and `pass_prefill_s`)."""
        base = (sum(self.chunk_s(d, n) for d, n in chunks) + extra_s
                + (self.pass_prefill_s if chunks else 0.0))
        m = decode_tokens + sum(n for _, n in chunks)
        stretch = pass_slowdown(m, self.scenario.mfu_half_tokens, self.scenario.routing)
        if stretch == 0.0:
            return base
        return base + stretch * sum(self.mfu_part_s(d + n) - self.mfu_part_s(d)
                                    for d, n in chunks)

    def _terms_ms(self, batch: int, mean_context_tokens: float) -> tuple[float, ...]:
        """F4's terms (ms) for `batch` sequences at a mean context (16-token buckets):
        step, bandwidth, compute, communication, serial, overhead. With a draft, the engine
        step's (F12 at an acceptance of 1: the verify pass's terms, the draft in serial)."""
        bucket = max(1, int(round(mean_context_tokens / 16.0)))
        key = (batch, bucket)
        t = self._step.get(key)
        if t is None:
            d = evaluate(self._step_scenario, [float(batch)], [bucket * 16.0]).decode
            t = tuple(float(np.asarray(x).reshape(-1)[0]) for x in
                      (d.step_ms, d.bandwidth_ms, d.compute_ms, d.comm_ms, d.serial_ms,
                       d.overhead_ms))
            self._step[key] = t
        return t

    def step_s(self, batch: int, mean_context_tokens: float) -> float:
        """F4 decode step time (s) for `batch` sequences at a mean context (16-token buckets);
        with a draft, one engine step (verify pass + draft, `DecodeStep.engine_step_ms`); a CPU
        offload adds `offload_s` (the step's fixed overhead grows by it, as the event model's)."""
        return self._terms_ms(batch, mean_context_tokens)[0] / 1e3 + self.offload_s

    def mixed_step_s(self, batch: int, mean_context_tokens: float,
                     chunks: list[tuple[int, int]], extra_s: float = 0.0) -> float:
        """One step that decodes `batch` sequences and prefills `chunks` ((done, tokens) each), s.

        One forward pass (`roofline.mixed_step_time_ms`, the event model's formula too): F4's
        terms at `batch` (the weight read alone without decoding sequences) with the chunks'
        prefill (`prefill_pass_s`: F6 at the pass's efficiency, F6c) and, with one unified KV
        cache, the chunks' attention across one another (`forward_pass.UnifiedKv`) added to
        the arithmetic; the weights are read once, and the pass's decode and prompt tokens
        all-reduced in one message per layer (`comm_line`).
        Without chunks it is `step_s`. With a draft the pass is the verify pass (its terms,
        the draft's time in serial): the chunks ride in the verify pass's headroom. Unit: s.
        Source: docs/method.md, "Engine profiles".
        """
        if not chunks:
            return self.step_s(batch, mean_context_tokens) if batch else 0.0
        _, bw, comp, comm, serial, overhead = self._terms_ms(batch, mean_context_tokens)
        cross = 0.0 if self.unified_kv is None else self.unified_kv.extra_ms(chunks)
        line, t = self.comm_line, batch * self.verify_tokens
        added = line.added_ms(t, sum(n for _, n in chunks))
        return mixed_step_time_ms(
            bandwidth_ms=bw, compute_ms=comp, comm_ms=comm, serial_ms=serial,
            overhead_ms=overhead + self.offload_s * 1e3,
            prefill_ms=self.prefill_pass_s(chunks, t, extra_s) * 1e3 + cross,
            prefill_comm_ms=sum(line.chunk_ms(d, n) for d, n in chunks),
            pass_comm_ms=comm + added) / 1e3

    def kv_bytes(self, tokens: int) -> float:
        """KV bytes (per GPU) a request holding `tokens` tokens takes in the engine's pages (F2)."""
        b = self._kv.get(tokens)
        if b is None:
            s = self.scenario
            b = float(held_request_bytes(s.model, float(tokens), s.kv_dtype, s.tp,
                                         self.profile.kv_block_tokens))
            self._kv[tokens] = b
        return b
