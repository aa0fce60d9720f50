"""The Catalog page's tables: one row per model and per GPU, with derived columns (KV per token)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capacity.catalog.custom import is_custom
from capacity.catalog.loader import Catalog, Model
from capacity.catalog.matmul import measured_matmul
from capacity.model.kv import kv_bytes_per_token
from capacity.units import KIB


def _layers_text(model: Model, kind_names: Mapping[str, str], window: str) -> str:
    parts = []
    for g in model.layer_groups:
        name = kind_names.get(g.kind, g.kind)
        if g.kind == "sliding":
            name = window.format(kind=name, w=g.window_tokens)
        parts.append(f"{g.count} {name}")
    return " + ".join(parts)


def model_rows(catalog: Catalog, *, kind_names: Mapping[str, str] | None = None,
               window: str = "{kind} (w={w})") -> list[dict[str, Any]]:
    """One row per model: layers by kind, KV per token (fp16 and fp8, KiB), whether the output
    head shares the input embedding table ('tied', 'separate', 'unknown'), weights per format
    (GB, stated sizes marked), limits, source and date. `kind_names` names the layer kinds
    ('full', 'sliding'...: as they are when absent) and `window` a sliding group (`{kind}`, its
    name, and `{w}`, its window in tokens: '{kind}（窗口 {w}）' in Chinese, with the full-width
    brackets), so a page can show them in its language."""
    rows = []
    for m in sorted(catalog.models.values(), key=lambda m: m.key):
        weights = {}
        for f in catalog.formats_for(m):
            v = catalog.variant(m.key, f.key)
            weights[f.key] = f"{v.weights_gb:.1f}" + ("*" if v.weights_stated else "")
        rows.append({
            "key": m.key, "name": m.name, "params_total_b": m.params_total_b,
            "params_active_b": m.params_active_b, "layers": _layers_text(m, kind_names or {}, window),
            "kv_kib_per_token_fp16": kv_bytes_per_token(m, "fp16").bytes_per_token / KIB,
            "kv_kib_per_token_fp8": kv_bytes_per_token(m, "fp8").bytes_per_token / KIB,
            "max_context_tokens": m.max_context_tokens,
            "embeddings": ("unknown" if m.tied_embeddings is None
                           else "tied" if m.tied_embeddings else "separate"),
            "weights_gb": ", ".join(f"{k} {v}" for k, v in weights.items()),
            "custom": is_custom(m.path), "source": m.source, "as_of": m.as_of,
        })
    return rows


def gpu_rows(catalog: Catalog) -> list[dict[str, Any]]:
    """One row per GPU: memory, bandwidth, dense rates, the fastest measured matmul (BF16 and
    FP8 TFLOP/s, data/matmul_ceilings.toml; None where nobody published one) and device copy
    (GB/s; None where not measured), interconnect, price, source and date."""
    rows = []
    for g in sorted(catalog.gpus.values(), key=lambda g: g.key):
        mamf = measured_matmul(g.key)
        rows.append({
            "key": g.key, "name": g.name, "memory_gb": g.memory_gb,
            "memory_driver_gib": g.memory_driver_gib, "memory_type": g.memory_type,
            "bandwidth_gb_s": g.bandwidth_gb_s,
            "copy_gb_s": None if mamf is None else mamf.copy_gb_s,
            "bf16_tflops": g.bf16_tflops,
            "fp8_tflops": g.fp8_tflops, "int8_tops": g.int8_tops, "fp4_tflops": g.fp4_tflops,
            "mamf_bf16_tflops": None if mamf is None else mamf.bf16_tflops,
            "mamf_fp8_tflops": None if mamf is None else mamf.fp8_tflops,
            "interconnect": g.interconnect, "price_per_hour": g.price_per_hour,
            "currency": g.currency, "price_as_of": g.price_as_of,
            "custom": is_custom(g.path), "source": g.source, "as_of": g.as_of,
        })
    return rows
