"""Which engine ran a published row, as the scorecard schedules it: the engine's family
(`engine_family`, a row's engine without its version), the engine profile of data/engines.toml
whose scheduling the event model runs for it (`scheduler_of`), the release whose defaults it ran
(`release_of`) and the scenario scheduled as that release scheduled (`scheduled_as_run`).
Source: data/reference/published.csv's `engine` column, docs/accuracy.md.
"""

from __future__ import annotations

from capacity.catalog.engines import engine_profile
from capacity.fit.reference import ReferenceSweep
from capacity.model.forward_pass import scheduled_as_released
from capacity.model.scenario import Scenario


def engine_family(engine: str) -> str:
    """The engine without its version: 'SGLang v0.5.3' -> 'SGLang', 'NVIDIA NIM 1.8.0' ->
    'NIM', 'trtllm-serve' -> 'TensorRT-LLM'; an unknown engine keeps its first word."""
    e = engine.lower()
    for key, name in (("nim", "NIM"), ("tensorrt", "TensorRT-LLM"), ("trtllm", "TensorRT-LLM"),
                      ("sglang", "SGLang"), ("vllm", "vLLM"), ("llama.cpp", "llama.cpp"),
                      ("llama-server", "llama.cpp")):
        if key in e:
            return name
    return engine.split(" ")[0] if engine.strip() else "?"


SCHEDULER_OF = {"vLLM": "vllm", "SGLang": "sglang", "llama.cpp": "llamacpp",
                "NIM": "vllm", "TensorRT-LLM": "vllm"}
"""The engine profile (data/engines.toml) whose scheduling the scorecard's event model runs for
a row's engine family. TensorRT-LLM, and NIM that serves through it, batch in flight with
chunked context and paged KV: vLLM V1's profile is the nearest (docs/accuracy.md)."""


def scheduler_of(engine: str) -> str | None:
    """The engine profile for an engine's name (`SCHEDULER_OF`), None when unknown."""
    return SCHEDULER_OF.get(engine_family(engine))


def release_of(s: ReferenceSweep) -> tuple[str, str] | None:
    """(engine profile, release) of the run behind sweep `s` (`scheduler_of`); the release is
    read only where the row's engine is its profile's own (TensorRT-LLM's and NIM's versions
    are not vLLM's, whose profile schedules them: theirs count as not stated, ''). None for
    an engine without a profile."""
    sched = scheduler_of(s.engine)
    if sched is None:
        return None
    return sched, (s.engine if engine_family(s.engine).lower() == sched else "")


def scheduled_as_run(s: ReferenceSweep, scenario: Scenario) -> Scenario:
    """`scenario` scheduled as the release behind sweep `s` scheduled
    (`forward_pass.scheduled_as_released`: vLLM before 0.14.0 and SGLang before 0.4.0 not one
    step ahead)."""
    rel = release_of(s)
    if rel is None:
        return scenario
    return scheduled_as_released(scenario, engine_profile(rel[0]), version=rel[1])
