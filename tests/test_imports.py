"""Imports: our CSV, `vllm bench serve` results and AIPerf exports, and clear errors."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from capacity.errors import InputError
from capacity.fit.imports import read_bench_label, read_measured
from capacity.fit.overlay import read_upload

FIX = Path(__file__).parent / "fixtures"


def test_our_csv_with_every_column() -> None:
    pts = read_measured(FIX / "measured_sweep.csv", model="llama-3.1-8b-bf16", gpu="rtx-4090")
    assert [p.concurrency for p in pts] == [1, 4, 16, 32]
    p = pts[2]
    assert (p.context_tokens, p.prompt_tokens, p.output_tokens) == (1152, 1024, 128)
    assert (p.tpot_ms, p.ttft_ms, p.output_tok_s) == (24.36, 612.7, 598.0)
    assert p.model == "llama-3.1-8b-bf16" and p.source == "measured_sweep.csv:4"
    assert p.decode_context_tokens == 1024 + 64


def test_our_csv_with_the_required_columns_only() -> None:
    pts = read_measured(FIX / "measured_minimal.csv", "csv")
    assert [(p.concurrency, p.context_tokens, p.tpot_ms) for p in pts] == [
        (1, 4096, 23.1), (8, 4096, 24.0)]
    assert pts[0].ttft_ms is None and pts[0].decode_context_tokens == 4096


def test_vllm_bench_serve_result() -> None:
    (p,) = read_measured(FIX / "vllm_bench_serve_c16.json")
    assert p.concurrency == 16 and p.engine == "vLLM"
    assert p.prompt_tokens == 1024 and p.output_tokens == 128 and p.context_tokens == 1152
    assert (p.tpot_ms, p.ttft_ms, p.output_tok_s) == (24.36, 612.70, 417.06)
    assert (p.tpot_p99_ms, p.ttft_p99_ms, p.stat) == (27.90, 1190.82, "median")
    assert p.model == "meta-llama/Llama-3.1-8B-Instruct"


def test_vllm_bench_serve_appended_results_are_a_sweep() -> None:
    pts = read_measured(FIX / "vllm_bench_serve_sweep.jsonl", gpu="rtx-4090")
    assert [p.concurrency for p in pts] == [1, 4, 16, 32]
    assert [p.tpot_ms for p in pts] == [22.48, 22.49, 24.36, 26.60]
    assert all(p.gpu == "rtx-4090" for p in pts)


def test_vllm_request_rate_run_gets_concurrency_from_littles_law(tmp_path: Path) -> None:
    f = tmp_path / "rate.json"
    f.write_text('{"completed": 100, "duration": 50.0, "mean_e2el_ms": 4000.0, '
                 '"total_input_tokens": 51200, "total_output_tokens": 12800, '
                 '"median_tpot_ms": 20.0, "request_rate": 2.0, "max_concurrency": null}')
    (p,) = read_measured(f)
    assert p.concurrency == pytest.approx(100 * 4.0 / 50.0)
    assert p.stat == "median" and p.ttft_ms is None


def test_aiperf_json_export() -> None:
    (p,) = read_measured(FIX / "profile_export_aiperf.json")
    assert p.concurrency == 8 and p.prompt_tokens == 1024 and p.output_tokens == 128
    assert (p.tpot_ms, p.ttft_ms, p.output_tok_s) == (23.30, 431.6, 252.43)
    assert (p.tpot_p90_ms, p.tpot_p99_ms, p.ttft_p99_ms) == (24.2, 25.3, 790.1)


def test_aiperf_csv_export_needs_and_takes_the_concurrency() -> None:
    with pytest.raises(InputError, match="does not record the concurrency"):
        read_measured(FIX / "profile_export_aiperf.csv")
    (p,) = read_measured(FIX / "profile_export_aiperf.csv", concurrency=8)
    (q,) = read_measured(FIX / "profile_export_aiperf.json")
    for name in ("concurrency", "prompt_tokens", "output_tokens", "tpot_ms", "ttft_ms",
                 "output_tok_s", "tpot_p99_ms", "ttft_p90_ms"):
        assert getattr(p, name) == getattr(q, name), name


@pytest.mark.parametrize("name,content,fmt,match", [
    pytest.param("a.csv", "", None, "empty", id="empty"),
    pytest.param("a.csv", "concurrency,context\n1,2\n", None,
                 "missing column.*context_tokens, tpot_ms", id="csv-missing-columns"),
    pytest.param("a.csv", "concurrency,context_tokens,tpot_ms\n4,2048,fast\n", None,
                 "line 2: 'tpot_ms' = 'fast' is not a number", id="csv-not-a-number"),
    pytest.param("a.csv", "concurrency,context_tokens,tpot_ms\n-4,2048,20\n", None,
                 "'concurrency' = '-4' must be a number > 0", id="csv-negative"),
    pytest.param("a.csv", "concurrency,context_tokens,tpot_ms\n4,2048,\n", None,
                 "'tpot_ms' is missing", id="csv-empty-cell"),
    pytest.param("a.csv", "concurrency,context_tokens,tpot_ms,prompt_tokens\n4,100,20,200\n",
                 None, "prompt_tokens 200 exceeds context_tokens 100", id="csv-prompt>ctx"),
    pytest.param("a.csv", "concurrency,context_tokens,tpot_ms\n", None, "no data rows",
                 id="csv-header-only"),
    pytest.param("a.csv", "concurrency,context_tokens,tpot_ms\n4,2048,20,9\n", None,
                 "more cells than header", id="csv-extra-cells"),
    pytest.param("r.json", '{"median_tpot_ms": 20, ', None, "does not parse", id="json-cut"),
    pytest.param("r.json", '{"foo": 1}', None, "neither vLLM bench keys", id="json-unknown"),
    pytest.param("r.json", '{"completed": 10, "median_ttft_ms": 50, "max_concurrency": 4, '
                 '"total_input_tokens": 100, "total_output_tokens": 100}', "vllm",
                 "'mean_tpot_ms' is missing", id="vllm-no-tpot"),
    pytest.param("r.json", '{"completed": 10, "median_tpot_ms": 20, "total_input_tokens": 1, '
                 '"total_output_tokens": 1}', None, "no 'max_concurrency'",
                 id="vllm-no-concurrency"),
    pytest.param("r.json", '{"completed": 0, "median_tpot_ms": 20}', None,
                 "'completed' = 0 must be a number > 0", id="vllm-nothing-completed"),
    pytest.param("p.json", '{"time_to_first_token": {"unit": "ms", "p50": 5}, '
                 '"inter_token_latency": {"unit": "ms", "p50": 2}}', None,
                 "input_config.loadgen.concurrency", id="aiperf-no-concurrency"),
    pytest.param("p.json", '{"time_to_first_token": 5, "input_config": {"loadgen": '
                 '{"concurrency": 4}}}', None, "'inter_token_latency' is missing",
                 id="aiperf-no-itl"),
    pytest.param("p.csv", "Metric,Value\nRequest Count,3\n", None,
                 "no 'Metric,avg,min,max", id="aiperf-csv-no-stats"),
    pytest.param("a.csv", "x", "yaml", "unknown import format", id="bad-format"),
])
def test_malformed_files_are_rejected_clearly(tmp_path: Path, name: str, content: str,
                                              fmt: str | None, match: str) -> None:
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(InputError, match=match) as err:
        read_measured(f, fmt)
    if "unknown import format" not in match:
        assert str(f) in str(err.value)  # the message names the file


def test_missing_file() -> None:
    with pytest.raises(InputError, match="no such file"):
        read_measured("/nonexistent/points.csv")


def test_stored_bench_run_by_label(tmp_path: Path) -> None:
    for c, tpot in ((10, 21.5), (50, 30.2)):
        d = tmp_path / "capacity-8k" / f"c{c}"
        d.mkdir(parents=True)
        (d / "summary.csv").write_text(
            "concurrency,requests_ok,ttft_p50_ms,tpot_p50_ms,tpot_p99_ms,prompt_tokens_mean,"
            f"output_tokens_mean,output_tok_s\n{c},100,800,{tpot},35,3000,128,400\n")
    pts = read_bench_label("capacity-8k", tmp_path, model="qwen3.5-9b-awq")
    assert [(p.concurrency, p.tpot_ms, p.ttft_ms) for p in pts] == [(10, 21.5, 800),
                                                                    (50, 30.2, 800)]
    assert pts[0].context_tokens == 3128 and pts[0].model == "qwen3.5-9b-awq"
    with pytest.raises(InputError, match="no stored bench run 'other'"):
        read_bench_label("other", tmp_path)
    bad = tmp_path / "odd" / "c1"
    bad.mkdir(parents=True)
    (bad / "summary.csv").write_text("level,latency\n1,2\n")
    with pytest.raises(InputError, match="no column for concurrency"):
        read_bench_label("odd", tmp_path)


@pytest.mark.parametrize("name, data", [
    ("my-run.csv", b"concurrency,context_tokens,tpot_ms\n1,abc,2\n"),
    ("my-run.csv", b"\xff\xfe"),
    ("my-run.json", b"[]"),
])
def test_an_upload_error_names_the_uploaded_file_not_the_servers_temp_copy(
        name: str, data: bytes) -> None:
    """Issue 14 item 13: the Results import said '/tmp/capacity-import-…/my-run.csv: …'."""
    with pytest.raises(InputError) as err:
        read_upload(name, data)
    assert str(err.value).startswith("my-run.") and "capacity-import-" not in str(err.value)
    assert tempfile.gettempdir() not in str(err.value)
