"""Pasted vLLM startup logs (v0.6 to v0.11 phrasing) and their term-by-term reconciliation."""

from __future__ import annotations

from pathlib import Path

import pytest

from capacity.errors import InputError
from capacity.fit.vllm_log import implied_overhead_gb, parse_vllm_log, reconcile
from capacity.model.scenario import evaluate, make_scenario
from capacity.units import GB, GIB

LOGS = Path(__file__).parent / "fixtures" / "vllm_logs"


@pytest.mark.parametrize("name,expected", [
    pytest.param("v0.6.4.log", {"version": "0.6.4.post1", "weights_gib": 14.9888,
                                "total_gpu_gib": 23.99, "peak_torch_gib": 16.29,
                                "non_torch_gib": 0.49, "kv_cache_gib": 4.81,
                                "gpu_blocks": 2462, "block_size": 16, "max_concurrency": 4.81,
                                "max_concurrency_tokens": 8192,
                                "gpu_memory_utilization": 0.9}, id="v0.6"),
    pytest.param("v0.7.3.log", {"version": "0.7.3", "weights_gib": 14.9888,
                                "total_gpu_gib": 23.99, "activation_peak_gib": 1.2,
                                "non_torch_gib": 0.12, "kv_cache_gib": 5.28,
                                "gpu_blocks": 2703, "max_concurrency": 5.28,
                                "cuda_graph_gib": 0.49}, id="v0.7"),
    pytest.param("v0.8.5.log", {"version": "0.8.5", "weights_gib": 14.9889,
                                "kv_cache_gib": 4.76, "kv_cache_tokens": 38960,
                                "max_concurrency": 4.76, "max_concurrency_tokens": 8192,
                                "gpu_memory_utilization": 0.9}, id="v0.8-V1"),
    pytest.param("v0.11.0.log", {"version": "0.11.0", "weights_gib": 14.9889,
                                 "kv_cache_gib": 5.60, "kv_cache_tokens": 45872,
                                 "max_concurrency": 5.60, "max_concurrency_tokens": 8192,
                                 "gpu_memory_utilization": 0.9}, id="v0.11"),
])
def test_each_version_is_read(name: str, expected: dict[str, object]) -> None:
    log = parse_vllm_log((LOGS / name).read_text())
    for k, v in expected.items():
        assert getattr(log, k) == v, k


def test_derived_figures() -> None:
    v06 = parse_vllm_log((LOGS / "v0.6.4.log").read_text())
    assert v06.activation_gib == pytest.approx(16.29 - 14.9888)
    assert v06.runtime_overhead_gib == pytest.approx(16.29 - 14.9888 + 0.49)
    assert v06.kv_tokens == 2462 * 16
    v07 = parse_vllm_log((LOGS / "v0.7.3.log").read_text())
    assert v07.runtime_overhead_gib == pytest.approx(1.32)  # CUDA graphs are not in it
    assert v07.kv_tokens == 2703 * 16  # default block size


def test_reconcile_names_the_cause_of_each_gap() -> None:
    s = make_scenario("llama-3.1-8b-bf16", "rtx-4090")
    log = parse_vllm_log((LOGS / "v0.7.3.log").read_text())
    used, terms = reconcile(log, s)
    assert used.context_tokens == 8192 and used.util == 0.9
    by = {t.name.split(" (")[0]: t for t in terms}
    assert by["weights per GPU"].cause.startswith("consistent")
    assert by["weights per GPU"].logged == pytest.approx(14.9888 * GIB / GB)
    gpu = by["GPU memory"]
    assert gpu.logged == pytest.approx(25.76, abs=0.01) and gpu.predicted == 24
    assert "--vram" in gpu.cause  # the RTX 4090's '24 GB' are GiB
    assert "KV bytes per token agree (128.0 KiB)" in by["KV cache size"].cause
    mc = by["maximum concurrency at 8192 tokens"]
    assert mc.logged == 5.28 and mc.difference == pytest.approx(mc.predicted - 5.28)


def test_a_log_matching_the_prediction_reconciles_cleanly() -> None:
    s = make_scenario("llama-3.1-8b-bf16", "rtx-4090", vram_gb=23.99 * GIB / GB,
                      overhead_gb=1.32 * GIB / GB)
    ev = evaluate(s, [1], 8192)
    kv_gib = ev.vram.kv_budget_bytes / GIB
    tokens = int(ev.vram.kv_budget_bytes // ev.kv_token.bytes_per_token // 16 * 16)
    text = (LOGS / "v0.7.3.log").read_text().replace("5.28GiB", f"{kv_gib:.2f}GiB").replace(
        "# cuda blocks: 2703", f"# cuda blocks: {tokens // 16}").replace(
        "request: 5.28x", f"request: {tokens / 8192:.2f}x").replace(
        "model weights take 14.99GiB", f"model weights take {16.06e9 / GIB:.2f}GiB").replace(
        "Loading model weights took 14.9888 GB", f"Loading model weights took "
        f"{16.06e9 / GIB:.4f} GB")
    _, terms = reconcile(parse_vllm_log(text), s)
    assert terms and all(t.cause.startswith("consistent") for t in terms), [
        (t.name, t.logged, t.predicted) for t in terms]


def test_implied_overhead_for_the_v1_engine() -> None:
    s = make_scenario("llama-3.1-8b-bf16", "rtx-4090")
    log = parse_vllm_log((LOGS / "v0.11.0.log").read_text())
    got = implied_overhead_gb(log, s)
    assert got == pytest.approx((23.99 * 0.9 - 14.9889 - 5.60) * GIB / GB)
    _, terms = reconcile(log, s)
    assert any(t.name.startswith("runtime overhead (implied") for t in terms)


@pytest.mark.parametrize("text", [
    pytest.param("", id="empty"),
    pytest.param("INFO starting server\nvLLM API server version 0.9.0\n", id="no-memory-lines"),
])
def test_no_memory_lines_is_a_clear_error(text: str) -> None:
    with pytest.raises(InputError, match="no vLLM memory lines"):
        parse_vllm_log(text)


def test_kv_cache_size_is_predicted_in_whole_tokens() -> None:
    """Issue 14 item 13: '439453.125 tokens' is not a token count; vLLM floors it too."""
    log = (LOGS / "v0.11.0.log").read_text()
    _, terms = reconcile(parse_vllm_log(log), make_scenario("qwen3.5-9b-awq", "rtx-4090"))
    kv = next(x for x in terms if x.unit == "tokens")
    assert kv.predicted == int(kv.predicted) and kv.predicted > 0
