"""The benchmark client (SPEC 7): SSE parsing, the async runner, metrics and run storage."""

from __future__ import annotations

from capacity.bench.client import BenchConfig, BenchResult, make_prompt, run_bench, run_bench_sync
from capacity.bench.metrics import REQUEST_COLUMNS, SUMMARY_COLUMNS, RequestRecord, summarize
from capacity.bench.sse import ChunkInfo, SseDecoder, SseEvent, classify
from capacity.bench.storage import RunWriter

__all__ = [
    "REQUEST_COLUMNS",
    "SUMMARY_COLUMNS",
    "BenchConfig",
    "BenchResult",
    "ChunkInfo",
    "RequestRecord",
    "RunWriter",
    "SseDecoder",
    "SseEvent",
    "classify",
    "make_prompt",
    "run_bench",
    "run_bench_sync",
    "summarize",
]
