"""F10: several GPUs. Tensor-parallel communication and memory; replica arithmetic.

Replicas: N independent copies; capacity and cost x N, no communication.
Tensor parallel TP=N: weights and KV heads split N ways (kv_heads < N replicates heads),
bandwidth and compute x N, plus two all-reduces of the activations per layer per step over
the interconnect, and NCCL buffers on each rank. Source: F10 (docs/method.md) and F3 (about 2 GiB of NCCL
buffers per rank measured on vLLM).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from capacity.catalog.loader import Gpu, Model
from capacity.errors import InputError
from capacity.types import FloatArray
from capacity.units import GB, GIB

ALLREDUCE_LATENCY_US: Final[dict[str, float]] = {
    "pcie": 25.0,
    "nvlink": 8.0,
    "infinity-fabric": 10.0,
}
"""Fixed cost of one small all-reduce (launch + sync), microseconds; an assumption by link kind.
Order of magnitude of nccl-tests small-message latency on PCIe and NVLink systems."""

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
    """Time of one ring all-reduce of `message_bytes` across `tp` ranks, in ms.

    latency + 2 (tp - 1) / tp x bytes / link bandwidth; 0 when tp = 1.
    """
    m = np.asarray(message_bytes, dtype=np.float64)
    if tp <= 1:
        return np.zeros_like(m)
    lat_ms = ALLREDUCE_LATENCY_US[gpu.interconnect_kind] / 1e3
    wire_ms = 2.0 * (tp - 1) / tp * m / (gpu.interconnect_gb_s * GB) * 1e3
    return np.asarray(lat_ms + wire_ms, dtype=np.float64)


def tp_comm_ms(model: Model, gpu: Gpu, tp: int, tokens: npt.ArrayLike
               ) -> FloatArray:
    """Communication time of one forward pass over `tokens` tokens with TP, in ms.

    Two all-reduces per layer (after attention and after the MLP) of tokens x hidden x 2 bytes.
    For a decode step `tokens` is the batch; for a prefill it is the prompt length.
    """
    msg = np.asarray(tokens, dtype=np.float64) * model.hidden * ACTIVATION_BYTES
    return np.asarray(2.0 * model.layers * allreduce_ms(msg, tp, gpu), dtype=np.float64)
