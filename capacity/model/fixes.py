"""What turns a "does not fit" into a fit: every single change, one per kind, with what it costs.

`suggest_fixes` tries more GPUs, a larger TP, a smaller weight format, a smaller KV precision,
a shorter context and fewer concurrent requests on a `Scenario` (`evaluate`'s verdict, F8);
`by_cost` ranks them by the deployment's monthly cost (F7). Seed (docs/method.md, section 4):
100 x 8K on one RTX 4090 -> 2 cards, FP8 KV or a 4K context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.nodes import node_shape
from capacity.model.cost import HOURS_PER_MONTH
from capacity.model.memory import MemoryVerdict
from capacity.model.pipeline import copy_layout
from capacity.model.scenario import (
    Scenario,
    evaluate,
    valid_tp_sizes,
    with_parallel,
    with_weights,
)
from capacity.units import GB, bytes_per_element


class FixKind(StrEnum):
    """What a memory fix changes (`Fix.kind`); the same values as the Explorer's relief kinds."""

    GPUS = "gpus"
    """More GPUs in all (more replicas, or a larger TP group when the weights need it)."""
    TP = "tp"
    """A larger tensor-parallel size on the same GPUs (weights and KV split across them)."""
    WEIGHTS = "weights"
    """A smaller weight format of the same model (fp8, int4...)."""
    KV_DTYPE = "kv_dtype"
    """A smaller KV-cache precision (fp8, int4)."""
    CONTEXT = "context"
    """A shorter context per request."""
    CONCURRENCY = "concurrency"
    """Fewer requests held at once (at most C_vram)."""


@dataclass(frozen=True, kw_only=True)
class Fix:
    """One change that makes a memory verdict at least 'tight', and what it gives.

    `n_gpus` and `tp` are the fixed deployment's; `subtotal_gb` / `usable_gb` its VRAM per GPU
    (F8); `monthly_cost` (F7: price x GPUs x 730 h) and `cost_per_mtok` (F7 at the fixed
    concurrency) are in the scenario's currency: `by_cost` ranks by them.
    """

    kind: FixKind
    value: float | str
    verdict: MemoryVerdict
    description: str
    n_gpus: int
    tp: int
    subtotal_gb: float
    usable_gb: float
    monthly_cost: float
    cost_per_mtok: float
    pp: int = 1
    """The fixed deployment's pipeline stages (F13; 1: none)."""


MAX_FIX_GPUS = 64
"""The largest deployment `suggest_fixes` tries (the Explorer's GPU-count limit)."""


def _verdict_at(s: Scenario, concurrency: int) -> MemoryVerdict:
    return MemoryVerdict(str(evaluate(s, [concurrency]).verdict[0]))


def _fix(s: Scenario, concurrency: int, kind: FixKind, value: float | str,
         description: str) -> Fix | None:
    """The fix that `s` (the changed scenario) is, or None when it still does not fit."""
    ev = evaluate(s, [concurrency])
    verdict = MemoryVerdict(str(ev.verdict[0]))
    if verdict == MemoryVerdict.DOES_NOT_FIT:
        return None
    return Fix(kind=kind, value=value, verdict=verdict, description=description,
               n_gpus=s.n_gpus, tp=s.tp, pp=s.pp,
               subtotal_gb=float(ev.vram_subtotal_bytes[0]) / GB,
               usable_gb=ev.vram.usable_bytes / GB,
               monthly_cost=s.price_per_hour * s.paid_gpus * HOURS_PER_MONTH,
               cost_per_mtok=float(ev.cost_per_mtok[0]))


def suggest_fixes(s: Scenario, concurrency: int, catalog: Catalog | None = None) -> list[Fix]:
    """Every single change that turns 'does not fit' at `concurrency` into a fit, one per kind,
    in this order (`by_cost` ranks them):

    more GPUs (the fewest that fit, at the smallest valid TP that fits, a TP group inside one
    node, else a node's TP group chained over nodes as PP stages, F13: `layouts`), a larger TP
    on the same GPUs (inside a node), a smaller weight format (the largest that fits), a
    smaller KV precision, a shorter context (halving), or fewer concurrent requests (C_vram).
    Empty when it already fits. `catalog` (default: `default_catalog`) lists the model's
    weight formats.

    Seed (docs/method.md, section 4): 100 x 8K on one RTX 4090 -> 2 cards, FP8 KV or 4K context.
    """
    if _verdict_at(s, concurrency) != MemoryVerdict.DOES_NOT_FIT:
        return []
    found: list[Fix | None] = []
    node = node_shape(s.gpu.key).max_gpus_per_node
    for n in range(s.n_gpus + 1, MAX_FIX_GPUS + 1):
        fix = next((f for tp, pp in layouts(s, n, node)
                    if (f := _fix(with_parallel(s, n, tp, pp), concurrency, FixKind.GPUS, n,
                                  f"{n} GPUs ({n // tp} replicas)"
                                  if pp == 1 and (tp == 1 or tp == s.tp)
                                  else f"{n} GPUs at {copy_layout(tp, pp)}")) is not None),
                   None)
        if fix is not None:
            found.append(fix)
            break
    found.append(next((f for tp in valid_tp_sizes(s.model, s.n_gpus) if s.tp < tp <= node
                       and s.n_gpus % (tp * s.pp) == 0
                       if (f := _fix(with_parallel(s, s.n_gpus, tp, s.pp), concurrency,
                                     FixKind.TP, tp, f"TP={tp} on {s.n_gpus} GPUs"))
                       is not None), None))
    cat = catalog or default_catalog()
    if s.model.key in cat.models:
        smaller = sorted((cat.variant(s.model.key, f.key)
                          for f in cat.formats_for(s.model) if f.key != s.variant.format.key),
                         key=lambda v: v.weights_gb, reverse=True)
        found.append(next((f for v in smaller if v.weights_gb < s.weights_gb
                           if (f := _fix(with_weights(s, v), concurrency, FixKind.WEIGHTS,
                                         v.format.key, f"{v.format.name} weights")) is not None),
                          None))
    for dtype in ("fp8", "int4"):
        if bytes_per_element(dtype) < bytes_per_element(s.kv_dtype):
            fix = _fix(s.with_(kv_dtype=dtype), concurrency, FixKind.KV_DTYPE, dtype,
                       f"{dtype.upper()} KV cache")
            if fix is not None:
                found.append(fix)
                break
    ctx = s.context_tokens
    while ctx > 256:
        ctx //= 2
        prompt = None if s.prompt_tokens is None else min(s.prompt_tokens, ctx)
        fix = _fix(s.with_(context_tokens=ctx, prompt_tokens=prompt), concurrency,
                   FixKind.CONTEXT, ctx, f"{ctx // 1024}K context" if ctx >= 1024
                   else f"{ctx}-token context")
        if fix is not None:
            found.append(fix)
            break
    c_max = int(evaluate(s, [1]).max_concurrency_vram)
    if 0 < c_max < concurrency:
        found.append(_fix(s, c_max, FixKind.CONCURRENCY, c_max,
                          f"at most {c_max} concurrent requests"))
    return [f for f in found if f is not None]


def layouts(s: Scenario, n_gpus: int, node_gpus: int) -> list[tuple[int, int]]:
    """The (TP, PP) layouts a fix tries on `n_gpus` GPUs, in order: every valid TP inside a
    node of `node_gpus` (PP 1), then a whole node's TP group (the largest TP a node holds, as
    the planner chains them: `capacity.plan.units.pipeline_layouts`) over n / TP nodes as PP
    stages where n is a whole number of such groups spanning more than one node (F13; none
    with a draft, which PP does not model). Example: DeepSeek-V3 on 16 H100s (nodes of 8):
    (1, 1), (2, 1), (4, 1), (8, 1), then (8, 2); on 11, TP 1 alone."""
    out = [(tp, 1) for tp in valid_tp_sizes(s.model, n_gpus) if tp <= node_gpus]
    node_tp = [tp for tp in valid_tp_sizes(s.model, node_gpus) if tp <= node_gpus]
    if node_tp and s.draft is None and n_gpus > node_gpus:
        tp = max(node_tp)
        pp = n_gpus // tp
        if pp >= 2 and tp * pp == n_gpus and pp <= s.model.layers:
            out.append((tp, pp))
    return out


def by_cost(fixes: Sequence[Fix]) -> list[Fix]:
    """`fixes` cheapest first: by the deployment's monthly cost, then cost per M tokens (F7)."""
    return sorted(fixes, key=lambda f: (f.monthly_cost, f.cost_per_mtok))
