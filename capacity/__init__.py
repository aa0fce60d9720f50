"""capacity: LLM-serving capacity planning from the chapter's four constraints.

Memory decides "can it run", bandwidth and compute decide "how fast", the SLO decides
"is it worth it". Start with `make_scenario` and `evaluate`::

    >>> from capacity import make_scenario, evaluate
    >>> ev = evaluate(make_scenario("qwen3.5-9b-awq", "rtx-4090"), [1, 50, 100])
    >>> int(ev.max_concurrency_vram)
    53
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below load on first use (PEP 562): `capacity --help` needs no numpy
    from capacity.catalog.loader import (
        Catalog,
        Gpu,
        Model,
        ModelVariant,
        WeightFormat,
        default_catalog,
        load_catalog,
    )
    from capacity.errors import (
        BenchError,
        CapacityError,
        CatalogError,
        InputError,
        StoreError,
        UnknownKeyError,
    )
    from capacity.model.cost import convert, cost_per_mtok
    from capacity.model.fixes import Fix, suggest_fixes
    from capacity.model.kv import kv_bytes_per_token, kv_request_bytes
    from capacity.model.memory import max_concurrency, memory_verdict, vram_budget
    from capacity.model.prefill import prefill_flops, prefill_seconds
    from capacity.model.roofline import crossover_concurrency, decode_step
    from capacity.model.scenario import (
        Evaluation,
        Scenario,
        TableRow,
        capacity_table,
        evaluate,
        make_scenario,
    )

_LAZY: dict[str, str] = {
    "Catalog": "capacity.catalog.loader",
    "Gpu": "capacity.catalog.loader",
    "Model": "capacity.catalog.loader",
    "ModelVariant": "capacity.catalog.loader",
    "WeightFormat": "capacity.catalog.loader",
    "default_catalog": "capacity.catalog.loader",
    "load_catalog": "capacity.catalog.loader",
    "BenchError": "capacity.errors",
    "CapacityError": "capacity.errors",
    "CatalogError": "capacity.errors",
    "InputError": "capacity.errors",
    "StoreError": "capacity.errors",
    "UnknownKeyError": "capacity.errors",
    "convert": "capacity.model.cost",
    "cost_per_mtok": "capacity.model.cost",
    "kv_bytes_per_token": "capacity.model.kv",
    "kv_request_bytes": "capacity.model.kv",
    "max_concurrency": "capacity.model.memory",
    "memory_verdict": "capacity.model.memory",
    "vram_budget": "capacity.model.memory",
    "prefill_flops": "capacity.model.prefill",
    "prefill_seconds": "capacity.model.prefill",
    "crossover_concurrency": "capacity.model.roofline",
    "decode_step": "capacity.model.roofline",
    "Evaluation": "capacity.model.scenario",
    "Fix": "capacity.model.fixes",
    "Scenario": "capacity.model.scenario",
    "TableRow": "capacity.model.scenario",
    "capacity_table": "capacity.model.scenario",
    "evaluate": "capacity.model.scenario",
    "make_scenario": "capacity.model.scenario",
    "suggest_fixes": "capacity.model.fixes",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (`from capacity import evaluate` works as ever)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'capacity' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "BenchError",
    "CapacityError",
    "Catalog",
    "CatalogError",
    "Evaluation",
    "Fix",
    "Gpu",
    "InputError",
    "Model",
    "ModelVariant",
    "Scenario",
    "StoreError",
    "TableRow",
    "UnknownKeyError",
    "WeightFormat",
    "capacity_table",
    "convert",
    "cost_per_mtok",
    "crossover_concurrency",
    "decode_step",
    "default_catalog",
    "evaluate",
    "kv_bytes_per_token",
    "kv_request_bytes",
    "load_catalog",
    "make_scenario",
    "max_concurrency",
    "memory_verdict",
    "prefill_flops",
    "prefill_seconds",
    "suggest_fixes",
    "vram_budget",
]
