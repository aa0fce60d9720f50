"""Per-level aggregates (docs/bench.md) and the run files' guarantees."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.bench.metrics import (
    REQUEST_COLUMNS,
    SUMMARY_COLUMNS,
    ClientLoad,
    summarize,
)
from capacity.bench.storage import RunWriter, check_label, scrub
from capacity.errors import InputError
from tests.test_store import record


def recs(n: int = 10) -> list:
    return [record(i, run_id="r", label="l", concurrency=4, ok=i != 3) for i in range(n)]


def test_summary_definitions() -> None:
    rs = recs()
    ok = [r for r in rs if r.success]
    row = summarize(rs, run_id="r", label="l", concurrency=4, request_rate_rps=None,
                    endpoint="chat", model="m", slo_ttft_ms=104.5, slo_tpot_ms=100.0,
                    gpu="rtx-4090", gpu_price_per_hour=2.0, currency="CNY")
    assert tuple(row.to_row()) == SUMMARY_COLUMNS
    first = min(r.start_unix_s for r in rs)
    last_end = max(r.start_unix_s + r.e2e_ms / 1e3 for r in ok)
    duration = last_end - first
    assert row.duration_s == pytest.approx(duration)
    assert row.requests_ok == 9 and row.requests_failed == 1
    assert row.error_types == "http_error:1"
    assert row.request_throughput_rps == pytest.approx(9 / duration)
    assert row.output_tok_s == pytest.approx(9 * 20 / duration)
    assert row.total_tok_s == pytest.approx(9 * 120 / duration)
    assert row.achieved_concurrency == pytest.approx(sum(r.e2e_ms for r in ok) / 1e3
                                                        / duration)
    assert row.goodput_rps == pytest.approx(4 / duration)  # TTFT 100..104 of the ok ones
    ttft = [r.ttft_ms for r in ok]
    assert row.ttft_p50_ms == pytest.approx(np.percentile(ttft, 50))
    assert row.ttft_p99_ms == pytest.approx(np.percentile(ttft, 99))
    assert row.ttft_max_ms == max(ttft) and row.ttft_mean_ms == pytest.approx(np.mean(ttft))
    assert row.itl_p50_ms == pytest.approx(np.percentile([10.0, 9.5] * 9, 50))
    assert row.cost_per_mtok == pytest.approx(2.0 / (row.output_tok_s * 3600) * 1e6)
    assert row.output_tokens_source == "usage"


def test_client_bound_flags() -> None:
    rs = recs()
    calm = summarize(rs, run_id="r", label="l", concurrency=4, request_rate_rps=None,
                     endpoint="chat", model="m", load=ClientLoad(cpu_s=0.01, loop_lag_p50_ms=0.2,
                                                     loop_lag_p99_ms=30))
    assert calm.client_bound is False and calm.client_cpu_share < 0.1
    busy = summarize(rs, run_id="r", label="l", concurrency=4, request_rate_rps=None,
                     endpoint="chat", model="m", load=ClientLoad(cpu_s=10, loop_lag_p50_ms=9,
                                                    loop_lag_p99_ms=50))
    assert busy.client_bound is True and "CPU" in busy.client_bound_reason
    assert "lag p50 9.0" in busy.client_bound_reason
    late = summarize([replace(r, queue_ms=9.0) for r in rs], run_id="r", label="l",
                     concurrency=4, request_rate_rps=None, endpoint="chat", model="m")
    assert late.client_bound is True and "late" in late.client_bound_reason
    # the same delay on requests 100x longer is not the client limiting the level
    slow = [replace(r, queue_ms=9.0, e2e_ms=(r.e2e_ms or 0.0) * 100) for r in rs]
    long = summarize(slow, run_id="r", label="l", concurrency=4, request_rate_rps=None,
                     endpoint="chat", model="m")
    assert long.client_bound is False


def test_all_failed_level() -> None:
    rs = [record(i, run_id="r", label="l", concurrency=2, ok=False) for i in range(3)]
    row = summarize(rs, run_id="r", label="l", concurrency=2, request_rate_rps=None,
                    endpoint="chat", model="m", gpu_price_per_hour=2.0)
    assert row.requests_ok == 0 and row.ttft_p50_ms is None
    assert row.output_tok_s is None and row.cost_per_mtok is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=0.1, max_value=1e5), min_size=1, max_size=50))
def test_percentiles_are_ordered(ttfts: list[float]) -> None:
    rs = [replace(record(i, run_id="r", label="l", concurrency=1), ttft_ms=t)
          for i, t in enumerate(ttfts)]
    row = summarize(rs, run_id="r", label="l", concurrency=1, request_rate_rps=None,
                    endpoint="chat", model="m")
    ps = [getattr(row, f"ttft_p{p}_ms") for p in (50, 90, 95, 99)]
    assert min(ttfts) <= ps[0] <= ps[1] <= ps[2] <= ps[3] <= row.ttft_max_ms == max(ttfts)


def test_csv_files_have_one_header_and_units(tmp_path: Path) -> None:
    with RunWriter(tmp_path, "x") as w:
        for r in recs(4):
            w.write_request(r)
            # each row is on disk as soon as it is written (a killed run keeps it)
            assert w.requests_path.read_text().count("\n") == 1 + r.request_index + 1
    with w.requests_path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == REQUEST_COLUMNS and len(rows) == 5
    assert all(len(r) == len(REQUEST_COLUMNS) for r in rows)
    timed = [c for c in REQUEST_COLUMNS if "ttft" in c or "tpot" in c or "e2e" in c]
    assert all(c.endswith("_ms") for c in timed)


def test_labels_and_scrub() -> None:
    assert check_label("capacity-8k") == "capacity-8k"
    for bad in ("", "../x", "a b", "x" * 65):
        with pytest.raises(InputError, match="label"):
            check_label(bad)
    assert scrub({"args": {"api_key": "k", "Authorization": "Bearer k", "n": 1}}) == {
        "args": {"n": 1}}
