"""The KV hand-over between a prefill and a decode pool (docs/disaggregation.md, "The KV
hand-over"): the link, the bytes, and the time a connector takes to move them and hand the
request to the decode engine. One computation for the planner (`disagg.disagg_options`), the
two-pool panel (`disagg_pools`), the event model (`events_disagg`), the simulated endpoint
(`capacity.sim.disagg`, which takes its times from here) and the scorecard
(`capacity.fit.validate_disagg`).

One hand-over on an idle link, ms:

    t = latency + max(B_send / (bw_send x eta), B_recv / (bw_recv x eta))
        + n_desc x c_desc + k x s_decode

- B: KV bytes per GPU (`handover_bytes`), bw: GB/s per GPU (`link_for`), eta: the share of the
  line rate a connector reaches;
- n_desc: transfer descriptors one decode rank posts, one per KV block per KV-holding layer
  (`descriptors_per_rank`), c_desc: the cost of one (us);
- k x s_decode: the decode engine's admission delay, k decode steps of s_decode ms (the pull
  starts and its completion is seen at step boundaries);
- latency: the fixed part per request (transfer launch, notification).

The NICs are held for the bytes and the descriptors (`Link.busy_ms`); the latency and the
admission hold none. The spec sheet (`Link.spec`) is the line rate with no overhead: an upper
bound on speed. Sources of each default are in its docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Gpu, Model
from capacity.catalog.nodes import NodeShape, node_shape
from capacity.errors import InputError
from capacity.model.kv import extra_state_bytes, kv_request_bytes, tokens_held
from capacity.types import FloatArray

DEFAULT_LINK_EFFICIENCY = 0.85
"""Share of a link's line rate a KV hand-over reaches (dimensionless). Mooncake's Transfer
Engine moves 87 GB/s over 4 x 200 Gb/s RoCE (0.87) and 190 GB/s over 8 x 400 Gb/s (0.475)
(kvcache-ai/Mooncake README, 40 GB of Llama3-70B KV); inside vLLM, Mooncake's connector reached
142 GB/s of 200 GB/s (0.71) on a 4.5 GB hand-over and 0.64 on 1.13 GB
(kvcache-ai.github.io/Mooncake/performance/vllm-v1-support-benchmark.html, Qwen3-8B 1P1D,
8 x RoCE). 0.85 is the upper side of these; calibrate it on your fabric."""
DEFAULT_TRANSFER_LATENCY_MS = 1.0
"""Fixed time per hand-over that holds no NIC, ms. Mooncake's connector table above moves
20 MB in 0.54 ms and 38 MB in 0.61 ms (an intercept near 0.5 ms); vLLM's NixlConnector took
about 3 ms to launch one transfer before vllm-project/vllm#23887 (issue #23780, 2025-08-27).
1 ms is between them."""
DEFAULT_DESCRIPTOR_US = 3.75
"""Cost of one transfer descriptor, us, on the rank that posts it. vllm-project/vllm#50913
(2026-08-28, NixlConnector, 3P1D, --block-size 64, 1,000 requests): an average post time of
6.7 ms for 1,785 descriptors a transfer (6.7 / 1,785 = 3.75 us). The same RFC: going from
16- to 64-token blocks on a ~5K-token pull cut the transfer window by ~58 ms, which at 3.75 us
is 15,500 fewer descriptors, 234 fewer blocks on each of ~66 layers (the model's layer count
is not given there). The spec sheet has none."""
DESCRIPTOR_BLOCK_TOKENS = 16
"""Tokens per KV block, one descriptor per block per layer: vLLM's default --block-size 16,
the NixlConnector's unit of transfer (K and V of a block in one region, as FlashInfer's
layout stores them)."""
DEFAULT_ADMISSION_STEPS = 1.0
"""Decode steps the decode engine adds to a hand-over beyond the step the request joins in:
the pull starts with the step after the request reaches the scheduler and its completion is
seen at the end of a step (vLLM's `get_finished`, polled once a step; vllm-project/vllm-gaudi
#532). vllm-project/vllm#51919 (2026-08-12) measured ~58 ms p50 for the first decode forward
"incl. step alignment" at a TPOT of 30.2 ms: about two steps, one of which is the step the
request joins (already in the model). The spec sheet has none."""


@dataclass(frozen=True, kw_only=True)
class Link:
    """The path one hand-over takes: bandwidth per sending and per receiving GPU, one way,
    and the connector's costs (module docstring)."""

    kind: str
    """'nvlink' / 'infinity-fabric' (both pools in one scale-up domain) or the scale-out kind
    ('infiniband', 'roce', 'ethernet')."""
    send_gb_s: float
    """GB/s one prefill GPU sends at (line rate)."""
    recv_gb_s: float
    """GB/s one decode GPU receives at (line rate)."""
    efficiency: float = DEFAULT_LINK_EFFICIENCY
    latency_ms: float = DEFAULT_TRANSFER_LATENCY_MS
    descriptor_us: float = DEFAULT_DESCRIPTOR_US
    """us per transfer descriptor (`descriptors_per_rank`)."""
    admission_steps: float = DEFAULT_ADMISSION_STEPS
    """Decode steps of admission delay (`admission_ms`)."""

    def __post_init__(self) -> None:
        if not (self.send_gb_s > 0 and self.recv_gb_s > 0):
            raise InputError("link bandwidths must be > 0 GB/s")
        if not 0 < self.efficiency <= 1:
            raise InputError(f"link efficiency must be in (0, 1], got {self.efficiency}")
        for name, v in (("transfer latency", self.latency_ms),
                        ("descriptor cost", self.descriptor_us),
                        ("admission delay", self.admission_steps)):
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"{name} must be >= 0, got {v}")

    @property
    def scale_up(self) -> bool:
        """True when the hand-over stays in one NVLink / Infinity Fabric domain."""
        return self.kind in ("nvlink", "infinity-fabric")

    def spec(self) -> Link:
        """The same link on the spec sheet: line rate, no latency, descriptor cost or
        admission delay (an upper bound on speed)."""
        return replace(self, efficiency=1.0, latency_ms=0.0, descriptor_us=0.0,
                       admission_steps=0.0)

    def busy_ms(self, send_bytes_per_gpu: npt.ArrayLike, recv_bytes_per_gpu: npt.ArrayLike,
                descriptors: npt.ArrayLike = 0.0) -> FloatArray:
        """The time one hand-over holds the NICs, ms: max(send / (B_send x eta),
        recv / (B_recv x eta)) + descriptors x c_desc. Bytes per GPU (`handover_bytes`), B in
        GB/s (1 GB/s = 1e6 bytes per ms), c_desc in us. Llama-3.1-70B fp16 at 8K from one GPU
        to one GPU over 400 Gb/s (50 GB/s), eta 1: 2.684e9 / 5e7 = 53.7 ms; with 40,960
        descriptors at 3.75 us: + 153.6 ms."""
        return handover_busy_ms(send_bytes_per_gpu, self.send_gb_s, recv_bytes_per_gpu,
                                self.recv_gb_s, efficiency=self.efficiency,
                                descriptors=descriptors, descriptor_us=self.descriptor_us)

    def admission_ms(self, decode_step_ms: npt.ArrayLike) -> FloatArray:
        """The decode engine's admission delay, ms: k x the decode step it runs at
        (`DEFAULT_ADMISSION_STEPS`). Example: 1 step of 30 ms: 30 ms."""
        return np.asarray(self.admission_steps * np.asarray(decode_step_ms, dtype=np.float64))


def handover_busy_ms(send_bytes_per_gpu: npt.ArrayLike, send_gb_s: npt.ArrayLike,
                     recv_bytes_per_gpu: npt.ArrayLike, recv_gb_s: npt.ArrayLike, *,
                     efficiency: float, descriptors: npt.ArrayLike, descriptor_us: float
                     ) -> FloatArray:
    """`Link.busy_ms` over arrays of bandwidths (the planner's search, every pair of shapes at
    once), ms: max(send / (B_send x eta), recv / (B_recv x eta)) + descriptors x c_desc / 1e3.
    Bytes per GPU, B in GB/s (1 GB/s = 1e6 bytes per ms), c_desc in us."""
    send = np.asarray(send_bytes_per_gpu, dtype=np.float64)
    recv = np.asarray(recv_bytes_per_gpu, dtype=np.float64)
    bw_s = np.asarray(send_gb_s, dtype=np.float64) * efficiency * 1e6
    bw_r = np.asarray(recv_gb_s, dtype=np.float64) * efficiency * 1e6
    return np.asarray(np.maximum(send / bw_s, recv / bw_r)
                      + np.asarray(descriptors, dtype=np.float64) * descriptor_us / 1e3)


def link_for(prefill_gpu: Gpu, decode_gpu: Gpu, *, pool_gpus: int,
             efficiency: float = DEFAULT_LINK_EFFICIENCY,
             latency_ms: float = DEFAULT_TRANSFER_LATENCY_MS,
             descriptor_us: float = DEFAULT_DESCRIPTOR_US,
             admission_steps: float = DEFAULT_ADMISSION_STEPS,
             prefill_shape: NodeShape | None = None,
             decode_shape: NodeShape | None = None) -> Link:
    """The link between the pools. Scale-up (`Gpu.interconnect_gb_s` per GPU, one way) when
    both pools are the same GPU and all their `pool_gpus` fit one NVLink / Infinity Fabric
    domain of more than one GPU (`NodeShape.nvlink_domain`: 8 on an HGX board, 72 in a GB200
    NVL72 rack); else the scale-out NIC of each side (`NodeShape.scale_out_gb_s`, GB/s per GPU
    = Gb/s / 8; source: data/nodes.toml)."""
    ps = prefill_shape or node_shape(prefill_gpu.key)
    ds = decode_shape or node_shape(decode_gpu.key)
    costs = {"efficiency": efficiency, "latency_ms": latency_ms, "descriptor_us": descriptor_us,
             "admission_steps": admission_steps}
    if prefill_gpu.key == decode_gpu.key and 1 < ps.nvlink_domain and pool_gpus <= ps.nvlink_domain:
        bw = prefill_gpu.interconnect_gb_s
        return Link(kind=ps.fabric, send_gb_s=bw, recv_gb_s=bw, **costs)
    kind = ps.scale_out_kind if ps.scale_out_gbit_s <= ds.scale_out_gbit_s else ds.scale_out_kind
    return Link(kind=kind, send_gb_s=ps.scale_out_gb_s, recv_gb_s=ds.scale_out_gb_s, **costs)


def handover_bytes(model: Model, kv_dtype: str, prompt_tokens: float, tp: int) -> float:
    """KV bytes one GPU of a TP group holds for a prompt: F2 at `tp` (exact, not paged), and a
    hybrid model's linear-layer states, which the decode side needs to go on and the chapter's
    F2 leaves out (`kv.extra_state_bytes` in a token pool). Unit: bytes.
    Each prefill GPU sends its share and each decode GPU receives its own, so what crosses the
    network per request is the whole KV (all layers: F1 x prompt): the decode pool's TP split
    changes how many NICs receive it, not the bytes. Where heads do not split (fewer KV heads
    than ranks, MLA's latent) every rank holds, and here sends or receives, a copy.
    Llama-3.1-70B, fp16 KV, TP 1: 80 layers x 2 x 8 heads x 128 x 2 B = 327,680 B a token;
    8,192 tokens -> 2,684,354,560 B. Qwen3.5-9B, bf16 KV, TP 1, 1,000 tokens: 8 x 4,096 x
    1,000 + 24 x 2,146,304 = 84,279,296 B."""
    return (float(kv_request_bytes(model, float(prompt_tokens), kv_dtype, tp).exact_bytes)
            + extra_state_bytes(model, kv_dtype, tp, 1))


def descriptors_per_rank(model: Model, prompt_tokens: float,
                         block_tokens: int = DESCRIPTOR_BLOCK_TOKENS) -> float:
    """Transfer descriptors one decode rank posts for a prompt: one per KV block per layer,
    sum over layers of ceil(tokens held / block) (a sliding layer holds its window), one per
    linear-attention layer (its state). TP splits each block's heads, not the blocks, so every
    rank posts them all. Unit: descriptors. Llama-3.1-70B at 8,192 tokens, 16-token blocks:
    80 x 512 = 40,960."""
    if block_tokens < 1:
        raise InputError(f"block size must be >= 1 token, got {block_tokens}")
    n = 0.0
    for g in model.layer_groups:
        if g.kind == "linear":
            n += g.count
        else:
            n += g.count * math.ceil(float(tokens_held(g, float(prompt_tokens))) / block_tokens)
    return n


def transfer_ms(*, send_bytes_per_gpu: npt.ArrayLike, recv_bytes_per_gpu: npt.ArrayLike,
                link: Link, descriptors: npt.ArrayLike = 0.0,
                decode_step_ms: npt.ArrayLike = 0.0) -> FloatArray:
    """One hand-over on an idle link, ms (module docstring): latency + `Link.busy_ms` (bytes
    and descriptors) + `Link.admission_ms` (k decode steps of `decode_step_ms`). Every GPU of
    a group moves its share at once (NIXL and Mooncake stripe a transfer over the NICs), so
    the slower side bounds it. Llama-3.1-70B fp16 at 8K from one H100 to one H100 over
    400 Gb/s (50 GB/s), eta 1, no latency, descriptors or admission: 2.684e9 / 5e7 = 53.7 ms;
    from TP 4: 13.4 ms."""
    return np.asarray(link.latency_ms
                      + link.busy_ms(send_bytes_per_gpu, recv_bytes_per_gpu, descriptors)
                      + link.admission_ms(decode_step_ms))
