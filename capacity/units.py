"""Units and element sizes used by every formula.

Memory and bandwidth are decimal (1 GB = 1e9 bytes, GB/s), as the chapter computes them;
per-token KV is shown in KiB (1024 bytes); compute in TFLOP/s (1e12 FLOP/s).
Source: docs/method.md ("Units").
"""

from __future__ import annotations

from typing import Final

from capacity.errors import InputError

GB: Final = 1e9
"""Bytes in one decimal gigabyte (the chapter's unit for memory)."""
GIB: Final = 1024.0**3
"""Bytes in one binary gibibyte (what drivers and vLLM logs report)."""
KIB: Final = 1024.0
"""Bytes in one KiB (the unit for per-token KV)."""
TERA: Final = 1e12
"""FLOP/s in one TFLOP/s."""

BYTES_PER_ELEMENT: Final[dict[str, float]] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}
"""Bytes per stored element by precision; int4/fp4 are 0.5 bytes, never 0 (a known bug elsewhere)."""

KV_DTYPES: Final = ("fp16", "bf16", "fp8", "int8", "int4", "fp32", "fp8_e4m3", "fp8_e5m2")
"""KV-cache precisions a user may choose (vLLM's `kv_cache_dtype` names plus int8/int4)."""

_ALIASES: Final = {"f16": "fp16", "half": "fp16", "float16": "fp16", "bfloat16": "bf16",
                   "f32": "fp32", "float32": "fp32", "auto": "fp16", "q8": "int8", "q4": "int4"}


def bytes_per_element(dtype: str) -> float:
    """Bytes per element of `dtype` (fp16 -> 2.0, fp8 -> 1.0, int4 -> 0.5).

    Raises InputError naming the accepted precisions for anything else.
    """
    name = _ALIASES.get(dtype.strip().lower(), dtype.strip().lower())
    try:
        return BYTES_PER_ELEMENT[name]
    except KeyError:
        raise InputError(
            f"unknown precision '{dtype}'; use one of {', '.join(KV_DTYPES)}"
        ) from None


def normalize_dtype(dtype: str) -> str:
    """Canonical name of a precision ('f16' -> 'fp16'); raises InputError when unknown."""
    bytes_per_element(dtype)
    name = dtype.strip().lower()
    return _ALIASES.get(name, name)
