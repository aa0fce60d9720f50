"""capacity: LLM-serving capacity planning from the chapter's four constraints.

Memory decides "can it run", bandwidth and compute decide "how fast", the SLO decides
"is it worth it". Start with `make_scenario` and `evaluate`::

    >>> from capacity import make_scenario, evaluate
    >>> ev = evaluate(make_scenario("qwen3.5-9b-awq", "rtx-4090"), [1, 50, 100])
    >>> int(ev.max_concurrency_vram)
    53
"""

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
from capacity.model.kv import kv_bytes_per_token, kv_request_bytes
from capacity.model.memory import max_concurrency, memory_verdict, vram_budget
from capacity.model.prefill import prefill_flops, prefill_seconds
from capacity.model.roofline import crossover_concurrency, decode_step
from capacity.model.scenario import (
    Evaluation,
    Fix,
    Scenario,
    TableRow,
    capacity_table,
    evaluate,
    make_scenario,
    suggest_fixes,
)

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
