"""One forward pass of a continuous-batching engine (vLLM V1, SGLang, llama.cpp): what the
event model (`capacity.plan.events`) and the simulated endpoint (`capacity.sim.scheduler`)
both add to a step's prompt work and to every pass (docs/method.md, "Engine profiles").

- Efficiency per pass (F6c): a pass's prompt GEMMs run at `step_mfu(m)` with m the tokens the
  pass carries (decode tokens and prompt chunks; a prefill batch's prompt tokens), not at each
  prompt's own length. A prompt's prefill times are kept at the plateau MFU and the pass adds
  `mfu_part x (1 / step_mfu(m, mfu=1) - 1)` = `mfu_part x ((1 + (m_half / m)^k)^(1/k) - 1)`
  (k the curve's `MFU_CURVE_SHARPNESS`), `mfu_part` the time
  its MFU-bound FLOPs (the GEMMs; the attention too when attn_mfu is unset) take at the plateau.
- CPU offload (vLLM `--cpu-offload-gb X`, GiB per GPU): X GiB of weights live in host memory,
  streamed to the GPU over the host link on every forward pass: each pass adds
  X GiB / host-link GB/s, and the KV pool gains the X GiB the weights no longer hold.
- Eager mode (vLLM `--enforce-eager`, SGLang `--disable-cuda-graph`): every pass launches its
  kernels one by one from Python instead of replaying a captured CUDA graph, and pays the
  profile's `eager_layer_ms` per layer on top of F11's per-layer overhead; the GEMM rows are
  no longer padded to a captured graph (`eager_scenario`).
- Prefill without CUDA graphs (SGLang before 0.5.10, whose graphs covered decode batches only):
  a pass that carries prompt tokens pays the profile's `prefill_eager_layer_ms` per layer,
  once, whatever prompts it carries (`prefill_eager_scenario`).
- One unified KV cache (llama.cpp, `kv_attention = "unified"` in data/engines.toml): each
  ubatch of a pass attends to every cell in use, masked, not each sequence to its own, so a
  pass that carries several sequences computes query-key pairs across them that no sequence
  run alone would (`unified_kv_extra_pairs`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from capacity.catalog.engines import EngineProfile
from capacity.catalog.host_links import host_link
from capacity.catalog.loader import Model
from capacity.errors import InputError
from capacity.model.moe import DENSE, Routing
from capacity.model.prefill import step_mfu
from capacity.model.roofline import attention_flops_per_token
from capacity.model.scenario import Scenario
from capacity.units import GB, GIB, TERA


def pass_slowdown(step_tokens: float, half_tokens: float, routing: Routing = DENSE) -> float:
    """How much longer a pass's MFU-bound prompt work takes than at the plateau MFU, as a
    share of its plateau time (dimensionless): 1 / step_mfu(m, mfu=1) - 1 =
    (1 + (m_half R(m) / m)^k)^(1/k) - 1, k = `prefill.MFU_CURVE_SHARPNESS` (R =
    `Routing.half_ratio`: the MoE weight ratio, 1 for a dense model, times m_half's scale on
    the device and weight format).

    0 when `half_tokens` is 0 (a constant MFU) or the pass carries no tokens. Example: a pass
    of 512 tokens at m_half 256 runs its prompt GEMMs at 1 / 1.0673 of the plateau:
    slowdown (1 + 0.5^2.5)^0.4 - 1 = 0.0673.
    Source: F6c (docs/method.md, "Engine profiles").
    """
    if half_tokens <= 0 or step_tokens <= 0:
        return 0.0
    return _slowdown(float(step_tokens), float(half_tokens), routing)


@functools.lru_cache(maxsize=1 << 16)
def _slowdown(step_tokens: float, half_tokens: float, routing: Routing) -> float:
    """`pass_slowdown` for m > 0 and m_half > 0, remembered: a pure function the event loop
    and the saturation search call with the same few arguments hundreds of thousands of
    times a scorecard."""
    return 1.0 / float(step_mfu(step_tokens, mfu=1.0, half_tokens=half_tokens,
                                routing=routing)) - 1.0


def offload_ms(offload_gib: float, link_gb_s: float) -> float:
    """Time (ms) one forward pass spends streaming `offload_gib` GiB of offloaded weights over a
    host link of `link_gb_s` decimal GB/s: X x 2^30 / (B x 1e9) x 1e3.

    Example: 4 GiB over PCIe 5.0 x16 (63 GB/s) = 4 x 1.073741824 / 63 s = 68.2 ms.
    Source: vLLM `--cpu-offload-gb` (vllm/model_executor/models/utils.py, maybe_offload_to_cpu:
    the offloaded parameters are read from pinned host memory on every forward pass).
    """
    if not (math.isfinite(offload_gib) and offload_gib >= 0):
        raise InputError(f"CPU offload must be >= 0 GiB, got {offload_gib}")
    if not (math.isfinite(link_gb_s) and link_gb_s > 0):
        raise InputError(f"host-link bandwidth must be > 0 GB/s, got {link_gb_s}")
    return offload_gib * GIB / (link_gb_s * GB) * 1e3


def scenario_offload_ms(s: Scenario, offload_gib: float) -> float:
    """`offload_ms` over the scenario's GPU's host link (data/host_links.toml); InputError when
    the offload exceeds the weights one GPU holds (vLLM offloads weights only)."""
    if offload_gib * GIB > s.weights_per_gpu_gb * GB:
        raise InputError(f"--cpu-offload-gb {offload_gib:g} GiB exceeds the "
                         f"{s.weights_per_gpu_gb * GB / GIB:.2f} GiB of weights one GPU holds")
    return offload_ms(offload_gib, host_link(s.gpu.key).gb_s)


def eager_pass_ms(model: Model, profile: EngineProfile) -> float:
    """What every forward pass adds without CUDA graphs under `profile` (ms): the model's
    layers x the profile's `eager_layer_ms` (`eager_scenario`'s growth of F11). Example: 40 x
    0.339 = 13.56 ms (vLLM, Qwen3-14B)."""
    return model.layers * profile.eager_layer_ms


def eager_scenario(s: Scenario, profile: EngineProfile) -> Scenario:
    """`s` served without CUDA graphs under `profile`: F11's per-layer overhead grows by the
    profile's `eager_layer_ms` (ms per layer and forward pass: each kernel launched from Python,
    the norms and activations unfused) and the decode GEMMs are not padded to a captured graph
    (F4d's `cuda_graph_max_tokens` 0). InputError for a profile without an eager mode here.

    Example: the vLLM profile's 0.339 ms on a 40-layer model adds 13.56 ms to every step and
    prefill pass (Qwen3-14B: a 9.87 ms typical step becomes 23.43 ms).
    Source: data/engines.toml (`eager_layer_ms`, vllm-project/vllm-omni issue 7960 and
    sgl-project/sglang pull 1401); docs/method.md, "Eager mode"."""
    if profile.eager_layer_ms <= 0:
        raise InputError(f"the '{profile.key}' profile has no eager mode here (--enforce-eager: "
                         "vLLM; SGLang's --disable-cuda-graph: use --engine vllm or sglang)")
    return prefill_eager_scenario(
        s.with_(layer_overhead_ms=s.layer_overhead_ms + profile.eager_layer_ms,
                cuda_graph_max_tokens=0.0), profile)


def prefill_eager_scenario(s: Scenario, profile: EngineProfile) -> Scenario:
    """`s` with its prefill passes' kernels launched without CUDA graphs under `profile`: every
    forward pass that carries prompt tokens pays the profile's `prefill_eager_layer_ms` per
    layer, once (`Scenario.prefill_layer_ms`; F6's `prefill.fixed_prefill_ms` for a prompt
    alone, `ServiceModel.pass_prefill_ms` in the event model); `s` itself for a profile
    without such a cost, or for a scenario that carries a per-layer prefill cost already (an
    edge of a band around it, `planning.typical_knob_edges`).

    SGLang replayed CUDA graphs for decode batches only until piecewise CUDA graphs became its
    default for prefill (`EngineProfile.prefill_graphs_since`, 0.5.10); its earlier releases,
    and any run with --disable-cuda-graph, pay this. Example: Qwen3-235B-A22B's 94 layers x
    0.38 ms add 35.72 ms to a prefill pass. Source: data/engines.toml (sgl-project/sglang
    pulls 13094 and 11845); docs/method.md, "Prefill without CUDA graphs"."""
    if profile.prefill_eager_layer_ms <= 0 or s.prefill_layer_ms > 0:
        return s
    return s.with_(prefill_layer_ms=profile.prefill_eager_layer_ms)


def scheduled_as_released(s: Scenario, profile: EngineProfile, *, version: str,
                          date: str = "") -> Scenario:
    """`s` scheduled as `profile`'s engine at release `version` (or, not stated, on `date`)
    scheduled: not one step ahead where the profile's engine does so today and that release
    did not (`EngineProfile.schedules_ahead`: vLLM before 0.14.0, SGLang before 0.4.0);
    otherwise `s`. How the
    engine schedules, not how fast it runs: the spec sheet's predictions of a published run
    take it too (an upper bound on speed under that release's scheduling). Example: 'vLLM
    v0.11.0' under vLLM's profile -> `schedule_ahead` False; 'vLLM 0.25.1' -> `s`."""
    if profile.schedules_ahead_since and not profile.schedules_ahead(version, date):
        return s.with_(schedule_ahead=False)
    return s


def as_released(s: Scenario, profile: EngineProfile, *, version: str, date: str = "",
                cuda_graphs: bool = True) -> Scenario:
    """`s` as a run of `profile`'s engine at release `version` (or, not stated, on `date`) ran
    it: without CUDA graphs (`cuda_graphs` False: vLLM's --enforce-eager) `eager_scenario`;
    with them, a release that graphed decode batches only (`EngineProfile.prefill_runs_eager`:
    SGLang before 0.5.10, or a run dated before that default was merged)
    `prefill_eager_scenario`; and a release that waited for each step before scheduling the
    next (vLLM before 0.14.0, SGLang before 0.4.0) with `schedule_ahead` off
    (`scheduled_as_released`). Neither stated is not assumed: the current release's defaults.
    Example: 'SGLang 0.5.6' under the SGLang profile -> 0.38 ms a layer on every prefill pass;
    'SGLang 0.5.10' or 'not stated' -> unchanged; 'vLLM v0.11.0' under vLLM's -> not
    scheduled ahead."""
    s = scheduled_as_released(s, profile, version=version, date=date)
    if not cuda_graphs:
        return eager_scenario(s, profile)
    if profile.prefill_runs_eager(version, date):
        return prefill_eager_scenario(s, profile)
    return s


def dense_pairs(cells_before: float, new_tokens: int, ubatch_tokens: int,
                pad_tokens: int) -> float:
    """Query-key pairs one unified KV cache computes appending `new_tokens` tokens after
    `cells_before` cells in use (count): each ubatch of at most `ubatch_tokens` attends to
    every cell in use once it is stored, padded up to `pad_tokens`.

    Sum over ubatches of u x pad(cells_before + tokens stored so far). Example: 1,795 tokens
    (five 359-token prompts) into an empty cache, ubatches of 512, pad 256: 512 x 512 +
    512 x 1,024 + 512 x 1,536 + 259 x 2,048 = 2,103,296; one 359-token prompt: 359 x 512 =
    183,808. Source: llama.cpp src/llama-kv-cache.cpp (`get_n_kv`: the cells up to the last
    used one, padded to max(n_pad, 256)); n_ubatch 512 by default (common/common.h).
    """
    if new_tokens <= 0:
        return 0.0
    if ubatch_tokens < 1 or pad_tokens < 1:
        raise InputError("a ubatch and the KV padding must be >= 1 token")
    pairs, done = 0.0, 0
    while done < new_tokens:
        u = min(ubatch_tokens, new_tokens - done)
        done += u
        pairs += u * math.ceil((cells_before + done) / pad_tokens) * pad_tokens
    return pairs


def unified_kv_extra_pairs(*, chunks: Sequence[tuple[int, int]], ubatch_tokens: int,
                           pad_tokens: int) -> float:
    """Query-key pairs the prompt chunks of one pass ((done, tokens) each) compute across one
    another in one unified KV cache, beyond what each computes alone (count, >= 0):
    `dense_pairs` of the chunks together, after their `done` cells, less each chunk alone.

    Alone is what a calibration measures (a prompt by itself: the fitted prefill). The pairs
    between the chunks and the sequences decoding beside them are not counted: a decode step
    is fitted as measured, and the closed loop's steady state, one prompt a pass, stays the
    closed form's (docs/method.md, "One unified KV cache"). Example: the five-prompt burst of
    `dense_pairs`: 2,103,296 - 5 x 183,808 = 1,184,256 pairs; one prompt: 0.
    """
    if len(chunks) < 2:
        return 0.0
    cells = sum(d for d, _ in chunks)
    total = sum(n for _, n in chunks)
    alone = sum(dense_pairs(d, n, ubatch_tokens, pad_tokens) for d, n in chunks)
    return max(0.0, dense_pairs(cells, total, ubatch_tokens, pad_tokens) - alone)


def attention_pair_ms(s: Scenario) -> float:
    """Time (ms) of one query-key pair of attention on a replica at prefill attention's
    efficiency: 4 x q_heads x head_dim FLOPs per attending layer (`attention_flops_per_token`
    at one token of context, MLA decompressed as a prefill runs it) / (F x TP x attn_mfu, MFU
    when unset) x 1e3. Example: 8 layers of 16 x 64 at 0.0984 TFLOP/s and 0.83: 32,768 /
    8.17e10 s = 4.0e-4 ms."""
    flops = float(attention_flops_per_token(s.model, 1.0, absorbed=False))
    eff = s.mfu if s.attn_mfu is None else s.attn_mfu
    return flops / (s.tflops * s.tp * TERA * eff) * 1e3


@dataclass(frozen=True, kw_only=True)
class UnifiedKv:
    """One unified KV cache's attention across the prompts of a pass (llama.cpp), as the event
    model and the simulated endpoint both add it: `pair_ms` (`attention_pair_ms`) and the
    engine's ubatch and padding (data/engines.toml)."""

    pair_ms: float
    ubatch_tokens: int
    pad_tokens: int

    def extra_ms(self, chunks: Sequence[tuple[int, int]]) -> float:
        """What a pass's prompt `chunks` add across one another, ms: `unified_kv_extra_pairs`
        x `pair_ms`. Example: the five-prompt burst at 4.0e-4 ms a pair: 1,184,256 x
        4.0e-4 = 474 ms."""
        return self.pair_ms * unified_kv_extra_pairs(
            chunks=chunks, ubatch_tokens=self.ubatch_tokens, pad_tokens=self.pad_tokens)


def unified_kv(s: Scenario, profile: EngineProfile) -> UnifiedKv | None:
    """The scenario's `UnifiedKv` under an engine profile whose `kv_attention` is "unified"
    (None for "sequence": each sequence attends to its own cells, nothing is added)."""
    if profile.kv_attention != "unified":
        return None
    return UnifiedKv(pair_ms=attention_pair_ms(s), ubatch_tokens=profile.ubatch_tokens,
                     pad_tokens=profile.kv_pad_tokens)
