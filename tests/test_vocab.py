"""The vocabularies are StrEnums whose values are the strings files, URLs, JSON and message keys
use: a golden list per enum, one comment per member, the message keys each one feeds, the
summary.csv header of the bench, and `capacity plan --format json` unchanged by the enums."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from capacity.bench.job import JobState
from capacity.bench.metrics import (
    ERROR_TYPES,
    REQUEST_COLUMNS,
    SUMMARY_COLUMNS,
    ErrorType,
    LevelSummary,
    TokenSource,
    summarize,
)
from capacity.bench.storage import RunStatus, RunWriter
from capacity.bench.store import request_dtypes, summary_dtypes
from capacity.cli.main import main
from capacity.fit.calibration import PointKind
from capacity.fit.overlay import LOADS, Load, Predicted, SaturationKind
from capacity.model.fixes import FixKind
from capacity.model.memory import VERDICTS, MemoryVerdict, memory_verdict
from capacity.model.roofline import Bound
from capacity.model.scenario import capacity_table, make_scenario
from capacity.plan.options import REASONS, Reason
from capacity.report.explain import CONSTRAINTS, Constraint, Detail, ReliefKind, Status
from capacity.report.i18n import MESSAGES

GOLDEN: list[tuple[type[StrEnum], list[str]]] = [
    (MemoryVerdict, ["fits", "tight", "does_not_fit"]),
    (Bound, ["bandwidth", "compute"]),
    (FixKind, ["gpus", "tp", "weights", "kv_dtype", "context", "concurrency"]),
    (Reason, ["memory", "slots", "ttft", "tpot", "throughput", "cost"]),
    (Status, ["pass", "tight", "fail"]),
    (Constraint, ["memory", "bandwidth", "compute", "slo"]),
    (Detail, ["subtotal", "bandwidth_term", "compute_term", "ttft", "tpot", "cost"]),
    (ReliefKind, ["gpus", "weights", "kv_dtype", "context", "concurrency", "prompt", "tp", "price",
                  "mfu"]),
    (ErrorType, ["http_error", "timeout", "connect_error", "disconnected", "error_event",
                 "partial", "no_tokens", "malformed", "not_streaming", "client_error",
                 "too_large"]),
    (TokenSource, ["usage", "chunks", "chunks_usage_rejected"]),
    (RunStatus, ["running", "finished", "interrupted"]),
    (JobState, ["running", "finished", "stopped", "failed"]),
    (Predicted, ["spec-sheet", "calibrated", "roofline"]),
    (Load, ["closed", "open", "none"]),
    (SaturationKind, ["errors", "plateau", ""]),
    (PointKind, ["tpot", "ttft"]),
]


@pytest.mark.parametrize(("enum", "values"), GOLDEN, ids=[e.__name__ for e, _ in GOLDEN])
def test_values_are_the_strings_files_use(enum: type[StrEnum], values: list[str]) -> None:
    assert [m.value for m in enum] == values
    for m in enum:  # members ARE their strings: str(), f-strings, ==, hashing, JSON
        assert str(m) == f"{m}" == m.value and m == m.value and hash(m) == hash(m.value)
        assert json.dumps({"k": m}) == json.dumps({"k": m.value})


@pytest.mark.parametrize("enum", [e for e, _ in GOLDEN], ids=[e.__name__ for e, _ in GOLDEN])
def test_every_member_has_its_comment(enum: type[StrEnum]) -> None:
    body = ast.parse(textwrap.dedent(inspect.getsource(enum))).body[0]
    assert isinstance(body, ast.ClassDef)
    stmts = body.body
    documented = set()
    for i, node in enumerate(stmts):
        if isinstance(node, ast.Assign) and i + 1 < len(stmts):
            nxt = stmts[i + 1]
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) \
                    and isinstance(nxt.value.value, str) and nxt.value.value.strip():
                documented |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    assert documented == set(enum.__members__), set(enum.__members__) - documented


def test_tuples_of_members_are_the_enums() -> None:
    assert VERDICTS == tuple(MemoryVerdict) and REASONS == tuple(Reason)
    assert CONSTRAINTS == tuple(Constraint) and ERROR_TYPES == tuple(ErrorType)
    assert LOADS == tuple(Load)
    assert {f.value for f in FixKind} <= {r.value for r in ReliefKind}


def _keys(prefix: str) -> set[str]:
    return {k.removeprefix(prefix) for k in MESSAGES if k.startswith(prefix)}


@pytest.mark.parametrize(("prefix", "enum"), [
    ("v_", MemoryVerdict), ("quote_verdict_", MemoryVerdict), ("st_", Status),
    ("overall_", Status), ("c_", Constraint), ("q_", Constraint), ("d_", Detail),
    ("pl_reason_", Reason), ("quote_reason_", Reason), ("m_status_", JobState),
    ("r_load_", Load),
])
def test_message_keys_exist_for_every_member(prefix: str, enum: type[StrEnum]) -> None:
    assert {m.value for m in enum} <= _keys(prefix)


def test_relief_and_saturation_message_keys() -> None:
    assert {m.value for m in ReliefKind} <= _keys("r_")
    assert {SaturationKind.ERRORS.value, SaturationKind.PLATEAU.value, "none"} <= _keys("r_sat_")


def test_verdict_arrays_hold_the_plain_values() -> None:
    v = memory_verdict([9.9e9, 20.7e9, 34.2e9], 21.6e9)
    assert v.tolist() == ["fits", "tight", "does_not_fit"]
    assert list(v == MemoryVerdict.TIGHT) == [False, True, False]
    rows = capacity_table(make_scenario())
    assert [r.verdict for r in rows] == [MemoryVerdict.FITS, MemoryVerdict.TIGHT,
                                         MemoryVerdict.DOES_NOT_FIT]
    assert all(type(r.verdict) is MemoryVerdict and type(r.bound) is Bound for r in rows)


SUMMARY_HEADER = (
    "run_id,label,concurrency,request_rate_rps,endpoint,model,requests_total,requests_ok,"
    "requests_failed,error_types,duration_s,request_throughput_rps,output_tok_s,total_tok_s,"
    "goodput_rps,slo_ttft_ms,slo_tpot_ms,achieved_concurrency,"
    "ttft_mean_ms,ttft_p50_ms,ttft_p90_ms,ttft_p95_ms,ttft_p99_ms,ttft_max_ms,"
    "tpot_mean_ms,tpot_p50_ms,tpot_p90_ms,tpot_p95_ms,tpot_p99_ms,tpot_max_ms,"
    "itl_mean_ms,itl_p50_ms,itl_p90_ms,itl_p95_ms,itl_p99_ms,itl_max_ms,"
    "e2e_mean_ms,e2e_p50_ms,e2e_p90_ms,e2e_p95_ms,e2e_p99_ms,e2e_max_ms,"
    "queue_mean_ms,queue_p50_ms,queue_p90_ms,queue_p95_ms,queue_p99_ms,queue_max_ms,"
    "prompt_tokens_mean,output_tokens_mean,output_tokens_source,output_length_mismatches,"
    "client_cpu_s,client_cpu_share,loop_lag_p50_ms,loop_lag_p99_ms,client_bound,"
    "client_bound_reason,gpu,gpus,gpu_price_per_hour,currency,cost_per_mtok,row_complete"
)
"""summary.csv's header before LevelSummary existed (it was a hand-written tuple)."""


def test_summary_columns_are_the_level_summary_fields(tmp_path: Path) -> None:
    assert ",".join(SUMMARY_COLUMNS) == SUMMARY_HEADER
    s = summarize([], run_id="r", label="l", concurrency=1, request_rate_rps=None,
                  endpoint="chat", model="m")
    assert isinstance(s, LevelSummary) and tuple(s.to_row()) == SUMMARY_COLUMNS
    with RunWriter(tmp_path, "l", run_id="r") as w:
        w.write_summary(s)
    assert w.summary_path.read_text().splitlines()[0] == SUMMARY_HEADER


def test_store_types_come_from_the_fields() -> None:
    d = summary_dtypes()
    assert tuple(d) == SUMMARY_COLUMNS
    assert {c for c, t in d.items() if t == "VARCHAR"} == {
        "run_id", "label", "endpoint", "model", "error_types", "output_tokens_source",
        "client_bound_reason", "gpu", "currency"}
    assert {c for c, t in d.items() if t == "BIGINT"} == {
        "concurrency", "requests_total", "requests_ok", "requests_failed",
        "output_length_mismatches", "gpus", "row_complete"}
    assert {c for c, t in d.items() if t == "BOOLEAN"} == {"client_bound"}
    r = request_dtypes()
    assert tuple(r) == REQUEST_COLUMNS
    assert r["error_type"] == r["output_tokens_source"] == "VARCHAR"
    assert r["success"] == "BOOLEAN" and r["http_status"] == "BIGINT"


# `capacity plan --format json` of the chapter's example, saved before the enums (numbers
# masked: they belong to the formulas, not to the vocabularies; every key, every string and
# the shape are compared).
PLAN_JSON_BEFORE = {
    "model": "qwen3.5-9b-awq", "gpu": "rtx-4090", "gpus": 0, "tp": 0,
    "pp": 0,  # added 2026-12-07 (F13: pipeline stages)
    "replicas": 0,
    "context_tokens": 0, "prompt_tokens": 0, "kv_dtype": "fp16", "currency": "CNY",
    "price_per_hour": 0, "weights_bytes": 0, "kv_bytes_per_token": 0,
    "kv_bytes_per_token_by_kind": {"full": 0, "sliding": 0, "mla": 0, "linear": 0},
    "kv_request_bytes": 0, "kv_request_paged_bytes": 0, "usable_bytes": 0,
    "kv_budget_bytes": 0, "weights_fit": True, "shortfall_bytes": 0,
    "max_concurrency_vram": 0, "max_concurrency_vram_paged": 0, "crossover_concurrency": None,
    "ttft_linear_s": 0, "ttft_s": 0, "calibration": None, "basis": "chapter",
    "basis_text": "the chapter's assumptions (decode eff 1, prefill MFU 0.3)",
    # the basis' knobs (added 2026-12-02, as `size`'s deployment states them): strings and None
    # kept, numbers masked
    "knobs": {"eff": 0, "mfu": 0, "eta_bw": 0, "step_overhead_ms": 0, "prefill_overhead_ms": 0,
              "step_method": "chapter", "eta_kv": None, "attn_sat_batch": 0,
              "seq_overhead_ms": 0, "batch1_factor": 0, "attn_mfu": None,
              "draft_overhead_ms": 0, "verify_overhead_ms": 0, "mfu_half_tokens": 0,
              "ridge_sharpness": 0, "cuda_graph_max_tokens": 0, "gemm_tile_tokens": 0,
              "layer_overhead_ms": 0, "batched_overhead_ms": 0,  # added 2026-12-03
              "request_latency_ms": 0,  # added 2026-12-03 (SGLang's latency outside the GPU)
              "linear_prefill_ms": 0,  # added 2026-12-03 (F6's linear-attention layers)
              "prefill_layer_ms": 0,  # added 2026-12-06 (a prefill without CUDA graphs)
              # added 2026-12-07: how the basis counts the weights (the chapter's: W whole)
              "embedding_lookup": False,
              "pp_handoff_ms": 0,  # added 2026-12-07 (F13's hand-off)
              "runtime_memory": False,  # added 2026-12-07, later (F3's driver memory)
              "expert_gemm_share": 0},  # added 2026-12-07, last (MoE expert GEMMs)
    "warnings": [],
    "points": [
        {"concurrency": 0, "bandwidth_ms": 0, "compute_ms": 0, "comm_ms": 0, "step_ms": 0,
         "bound": "bandwidth", "tok_s_per_request": 0, "aggregate_tok_s": 0,
         "cost_per_mtok": 0, "kv_total_bytes": 0, "vram_subtotal_bytes": 0, "verdict": v}
        for v in ("fits", "tight", "does_not_fit")],
    "table": [
        {"concurrency": 0, "context_tokens": 0, "kv_request_bytes": 0, "kv_total_bytes": 0,
         "vram_subtotal_bytes": 0, "usable_bytes": 0, "verdict": v, "ttft_s": 0,
         "ttft_linear_s": 0, "tpot_ms": 0, "bound": "bandwidth", "tok_s_per_request": 0,
         "aggregate_tok_s": 0, "cost_per_mtok": 0}
        for v in ("fits", "fits", "tight", "does_not_fit")],
}


def _mask(x: Any) -> Any:
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int | float):
        return 0
    if isinstance(x, dict):
        return {k: _mask(v) for k, v in x.items()}
    return [_mask(v) for v in x]


def test_plan_json_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--format", "json"]) == 0
    out = capsys.readouterr().out
    got = json.loads(out)
    assert json.dumps(_mask(got)) == json.dumps(PLAN_JSON_BEFORE)  # order of keys too
    assert "Verdict" not in out and "Bound" not in out and "<" not in out
