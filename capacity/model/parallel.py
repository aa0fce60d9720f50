"""F10: several GPUs. Tensor-parallel communication and memory; replica arithmetic.

Replicas: N independent copies; capacity and cost x N, no communication.
Tensor parallel TP=N: weights and KV heads split N ways (kv_heads < N replicates heads),
bandwidth and compute x N, plus two all-reduces of the activations per layer per step over
the interconnect, and NCCL buffers on each rank. Source: F10 (docs/method.md) and F3 (about 2 GiB of NCCL
buffers per rank measured on vLLM).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Gpu, Model
from capacity.errors import InputError
from capacity.types import FloatArray
from capacity.units import GB, GIB

ALLREDUCE_LATENCY_US: Final[dict[str, float]] = {
    "pcie": 25.0,
    "nvlink": 9.58,
    "infinity-fabric": 10.0,
}
"""Fixed cost of one all-reduce (launch + sync), microseconds, by link kind. NVLink: fitted with
`NVLINK_SMALL_BUS_GB_S` to the measured latencies of vLLM's custom all-reduce on H100 (NVLink 4)
at TP 2, 4 and 8 and 4 KiB to 1 MiB (15 points, github:sgl-project/sglang pull 2904, 'unit test
performance in H100 (without cuda graph)', 2025-01-15; `tests/test_allreduce_fit.py` refits
them): 8.5-9.3 us at 4 KiB for every TP. PCIe and Infinity Fabric: assumptions, the order of
nccl-tests small-message latency on such systems."""

NVLINK_SMALL_BUS_GB_S: Final = 50.7
"""Bus bandwidth (GB/s) of an NVLink all-reduce of at most `SMALL_MESSAGE_BYTES`: the rate the
fit above gives for 2 (tp - 1) / tp x bytes. Small messages do not fill the links (the
one-shot kernels run a few thread blocks); the 15 points lie within 23 % of the line. Beyond
`SMALL_MESSAGE_BYTES` the link's own rate (`Gpu.interconnect_gb_s`) applies."""

SMALL_MESSAGE_BYTES: Final = 1_048_576.0
"""The largest message measured in the fit above (1 MiB), bytes; a decode step's all-reduce of
b x hidden x 2 bytes stays below it up to b = 64 at hidden 8192."""

DEFAULT_NCCL_GB: Final = 2.0 * GIB / GB
"""NCCL buffers and communicator memory per rank when TP > 1 (about 2 GiB, F3 (docs/method.md))."""

ACTIVATION_BYTES: Final = 2.0
"""Bytes per activation element all-reduced (bf16)."""


def check_tp(model: Model, n_gpus: int, tp: int) -> None:
    """Raise InputError unless TP divides the GPU count and the attention heads."""
    if n_gpus < 1 or tp < 1:
        raise InputError(f"GPU count and TP must be >= 1, got {n_gpus} GPUs, TP={tp}")
    if n_gpus % tp:
        raise InputError(f"TP={tp} does not divide {n_gpus} GPUs (replicas = GPUs / TP)")
    for g in model.layer_groups:
        if g.kind == "linear":
            continue
        if g.q_heads % tp:
            raise InputError(f"TP={tp} does not divide the {g.q_heads} query heads of {model.name}")
        if g.kv_heads and g.kv_heads % tp and tp % g.kv_heads:
            raise InputError(f"TP={tp} and {g.kv_heads} KV heads of {model.name}: one must "
                             "divide the other")


def allreduce_ms(message_bytes: npt.ArrayLike, tp: int, gpu: Gpu) -> FloatArray:
    """Time of one ring all-reduce of `message_bytes` across `tp` ranks, in ms; 0 when tp = 1.

    latency + f x bytes / link bandwidth, f = 2 (tp - 1) / tp (each rank sends and receives
    f x bytes). Over NVLink the part of the message up to `SMALL_MESSAGE_BYTES` moves at
    `NVLINK_SMALL_BUS_GB_S` and the rest at the link's rate: latency + f x (min(S, 1 MiB) /
    50.7 + max(S - 1 MiB, 0) / link) (measured on H100 and used for every NVLink GPU).
    Examples (H100, 450 GB/s): 16 KiB at TP 8: 9.58 + 1.75 x 16384 / 50.7e3 = 10.15 us;
    8 MiB at TP 8: 9.58 + 1.75 x (1048576 / 50.7e3 + 7340032 / 450e3) = 74.3 us.
    Source: F10 (docs/method.md), `ALLREDUCE_LATENCY_US`.
    """
    m = np.asarray(message_bytes, dtype=np.float64)
    if tp <= 1:
        return np.zeros_like(m)
    f = 2.0 * (tp - 1) / tp
    lat_ms = ALLREDUCE_LATENCY_US[gpu.interconnect_kind] / 1e3
    link = gpu.interconnect_gb_s * GB
    if gpu.interconnect_kind == "nvlink":
        small = np.minimum(m, SMALL_MESSAGE_BYTES)
        wire_s = f * (small / (NVLINK_SMALL_BUS_GB_S * GB) + (m - small) / link)
    else:
        wire_s = f * m / link
    return np.asarray(lat_ms + wire_s * 1e3, dtype=np.float64)


def tp_comm_ms(model: Model, gpu: Gpu, tp: int, tokens: npt.ArrayLike
               ) -> FloatArray:
    """Communication time of one forward pass over `tokens` tokens with TP, in ms.

    Two all-reduces per layer (after attention and after the MLP) of tokens x hidden x 2 bytes.
    For a decode step `tokens` is the batch; for a prefill it is the prompt length.
    """
    msg = np.asarray(tokens, dtype=np.float64) * model.hidden * ACTIVATION_BYTES
    return np.asarray(2.0 * model.layers * allreduce_ms(msg, tp, gpu), dtype=np.float64)


@dataclass(frozen=True)
class CommLine:
    """A decode step's TP all-reduces against the tokens n it carries (F10), ms:
    `fixed_ms + per_token_ms x min(n, knee_tokens) + above_ms x max(n - knee_tokens, 0)`.
    Below the knee each all-reduce's message is small (`SMALL_MESSAGE_BYTES`), above it the
    extra bytes move at the link's rate. Example (Llama-3.1-70B, hidden 8192, 80 layers, H100
    TP 8): fixed 160 x 9.58 us = 1.533 ms, then 160 x 1.75 x 16384 B / 50.7 GB/s = 0.0905 ms a
    token up to 1 MiB / 16384 B = 64 tokens, and 160 x 1.75 x 16384 B / 450 GB/s = 0.0102 ms a
    token above."""

    fixed_ms: float = 0.0
    per_token_ms: float = 0.0
    knee_tokens: float = math.inf
    above_ms: float = 0.0

    def at(self, tokens: npt.ArrayLike) -> FloatArray:
        """The all-reduce time (ms) of a step of `tokens` tokens."""
        n = np.asarray(tokens, dtype=np.float64)
        return np.asarray(self.fixed_ms + self.per_token_ms * np.minimum(n, self.knee_tokens)
                          + self.above_ms * np.maximum(n - self.knee_tokens, 0.0),
                          dtype=np.float64)

    def at_ms(self, tokens: float) -> float:
        """`at` of one token count, as a float (ms): the same arithmetic without numpy's
        per-call cost (the event loop prices every pass with it)."""
        n = float(tokens)
        return (self.fixed_ms + self.per_token_ms * min(n, self.knee_tokens)
                + self.above_ms * max(n - self.knee_tokens, 0.0))

    def chunk_ms(self, done_tokens: int, tokens: int) -> float:
        """The all-reduces (ms) that F6 counts for prompt tokens done..done + tokens: F6 holds
        `at(P)` for a P-token prompt, so a chunk's share is at(done + tokens) - at(done), and
        the first chunk's (done = 0) is at(tokens), the fixed part with it. A prompt's chunks
        add up to at(P). Example (the class's H100 line): tokens 0..100 -> 1.533 + 64 x 0.0905
        + 36 x 0.0102 = 7.69 ms; 100..200 -> 100 x 0.0102 = 1.02 ms."""
        start = self.at_ms(done_tokens) if done_tokens > 0 else 0.0
        return self.at_ms(done_tokens + tokens) - start

    def added_ms(self, decode_tokens: float, prompt_tokens: float) -> float:
        """What `prompt_tokens` of prompt chunks add to the all-reduces of a forward pass that
        carries `decode_tokens` decode tokens (ms): at(decode + prompt) - at(decode), one
        message per layer for the whole pass. Example (the class's H100 line): 100 decode
        tokens and a 100-token chunk -> 100 x 0.0102 = 1.02 ms."""
        if prompt_tokens <= 0:
            return 0.0
        return self.at_ms(decode_tokens + prompt_tokens) - self.at_ms(decode_tokens)


def tp_comm_line(model: Model, gpu: Gpu, tp: int) -> CommLine:
    """`tp_comm_ms` of a decode step as a `CommLine` (the step models take its four numbers):
    exactly `tp_comm_ms(model, gpu, tp, n)` at every n. All zero when tp = 1."""
    if tp <= 1:
        return CommLine()
    token_bytes = model.hidden * ACTIVATION_BYTES
    knee = SMALL_MESSAGE_BYTES / token_bytes if gpu.interconnect_kind == "nvlink" else math.inf
    at = tp_comm_ms(model, gpu, tp, np.array([0.0, 1.0]))
    per_token = float(at[1] - at[0])
    above = per_token
    if math.isfinite(knee):
        f = 2.0 * (tp - 1) / tp
        above = 2.0 * model.layers * f * token_bytes / (gpu.interconnect_gb_s * GB) * 1e3
    return CommLine(fixed_ms=float(at[0]), per_token_ms=per_token, knee_tokens=knee,
                    above_ms=above)
