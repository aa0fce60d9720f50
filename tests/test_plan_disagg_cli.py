"""Issue 27: `capacity plan --prefill-pool XxTP --decode-pool YxTP --pool-rate R` evaluates one
disaggregated layout: the Explorer's two-pool figures (`capacity.plan.disagg_pools`) and the
costs `capacity size --disaggregated` gives the same layout, in text and JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capacity.catalog.loader import default_catalog
from capacity.cli.disagg_plan import parse_pool
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.model.workload import Workload
from capacity.plan.disagg_pools import (
    layout,
    matched_counts,
    pool_shapes,
    pools_at,
    saturation,
    with_counts,
)
from capacity.plan.options import PlanInputs, Slo

# the long-prompt, tight-TPOT workload of tests/test_disagg.py (Llama-3.1-70B FP8 on H100s,
# 8K prompts, 256 output tokens, p90 TTFT 2 s and TPOT 20 ms, USD)
SIZE = ["size", "--dau", "4800", "--requests-per-user", "10", "--peak-share", "0.3",
        "--peak-hours", "2", "--ctx", "16384", "--prompt-tokens", "8192", "--output-tokens",
        "256", "--slo-ttft-ms", "2500", "--slo-tpot-ms", "20", "--model", "llama-3.1-70b",
        "--gpus", "h100-sxm", "--currency", "USD", "--max-gpus", "32", "--weights", "fp8",
        "--kv-dtypes", "fp8", "--disaggregated", "--top", "3", "--format", "json"]
PLAN = ["plan", "--model", "llama-3.1-70b", "--weights", "fp8", "--gpu", "h100-sxm",
        "--kv-dtype", "fp8", "--ctx", "16384", "--prompt-tokens", "8192", "--output-tokens",
        "256", "--slo-ttft-ms", "2500", "--slo-tpot-ms", "20", "--currency", "USD"]


def _plan(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main([*PLAN, *flags, "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_parse_pool() -> None:
    assert parse_pool("2x4", 1, "--prefill-pool") == (2, 4)
    assert parse_pool(" 3X2 ", 1, "--prefill-pool") == (3, 2)
    assert parse_pool("5", 8, "--decode-pool") == (5, 8)     # TP from --tp
    assert parse_pool("0x4", 1, "--decode-pool") == (0, 4)   # 0: rate-matched
    for bad in ("x4", "2x", "two", "2x0", "-1x2", "2x4x8"):
        with pytest.raises(InputError, match="--prefill-pool"):
            parse_pool(bad, 1, "--prefill-pool")


@pytest.mark.slow
def test_the_figures_are_disagg_pools(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's figures are `pools_at`'s for the same layout built here from the library, and
    the layout's cost is what the catalog price gives by hand: 3 x 4 + 1 x 2 = 14 H100 at
    USD 2.7 an hour = 14 x 2.7 x 730 = USD 27,594 a month; at 2.4 req/s x 256 tokens,
    37.8 / (2.4 x 256 x 3600) x 1e6 = USD 17.09 per million output tokens."""
    data = _plan(capsys, "--prefill-pool", "3x4", "--decode-pool", "1x2", "--pool-rate", "2.4")
    inp = PlanInputs(model="llama-3.1-70b", formats=("fp8",), kv_dtypes=("fp8",),
                     gpus=("h100-sxm",), max_gpus=64, currency="USD",
                     workload=Workload(rate_per_s=2.4, context_tokens=16384,
                                       prompt_tokens=8192, output_tokens=256, headroom=0.0),
                     slo=Slo(ttft_ms=2500.0, tpot_ms=20.0, quantile=0.9))
    shapes = pool_shapes(inp, default_catalog())
    one = layout(inp, shapes, prefill_gpu="h100-sxm", prefill_tp=4, prefill_replicas=1,
                 decode_gpu="h100-sxm", decode_tp=2, decode_replicas=1)
    lay = with_counts(one, 3, 1)
    fig = pools_at(lay, 2.4)
    got = data["figures"]
    for k in ("prefill_utilization", "decode_utilization", "link_utilization",
              "prefill_queue_ms", "prefill_ms", "transfer_ms", "link_wait_ms", "first_step_ms",
              "ttft_ms", "tpot_ms", "tpot_mean_ms", "prefill_capacity_per_s",
              "decode_capacity_per_s"):
        assert got[k] == pytest.approx(getattr(fig, k), rel=1e-12), k
    parts = ("prefill_queue_ms", "prefill_ms", "transfer_ms", "link_wait_ms", "first_step_ms")
    assert sum(got[k] for k in parts) == pytest.approx(got["ttft_ms"], rel=1e-12)
    assert (data["matched"]["prefill_replicas"], data["matched"]["decode_replicas"]) == \
        matched_counts(one, 2.4)
    sat = saturation(lay)
    assert data["saturation_per_s"]["prefill"] == pytest.approx(sat.prefill_per_s)
    assert data["saturation_per_s"]["decode"] == pytest.approx(sat.decode_per_s)
    o = data["option"]
    assert (data["ratio"], data["gpus"], o["label"]) == (
        "3P+1D", 14, "3P+1D: prefill 3 x (4 x H100 SXM), decode 1 x (2 x H100 SXM), fp8, "
        "fp8 KV, infiniband")
    assert o["cost_per_month"] == pytest.approx(27_594.0)
    assert o["cost_per_mtok_design"] == pytest.approx(37.8 / (2.4 * 256 * 3600) * 1e6)
    assert o["cost_per_mtok_design"] == pytest.approx(17.09, abs=0.005)
    # 0 replicas: the rate-matched counts, the same layout
    auto = _plan(capsys, "--prefill-pool", "0x4", "--decode-pool", "0x2", "--pool-rate", "2.4")
    assert auto["ratio"] == "3P+1D" and auto["figures"] == data["figures"]


@pytest.mark.slow
@pytest.mark.parametrize("basis", [[], ["--basis", "typical:vllm", "--engine", "vllm"]],
                         ids=["chapter", "typical"])
def test_the_layout_size_picks_has_the_same_numbers(basis: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity size --disaggregated`'s layouts, each asked for by `capacity plan` at the
    design rate: every figure and cost of the option is the same number. On a typical basis
    too, whose request latency outside the GPU is in every TTFT: `with_counts` dropped it, and
    `plan --prefill-pool` (and the Explorer's pools) showed a TTFT 7.8 ms below `size`'s (an
    audit, 2026-12-07)."""
    assert main([*SIZE, *basis]) == 0
    size = json.loads(capsys.readouterr().out)["disaggregated"]
    assert len(size["options"]) >= 2
    for want in size["options"]:
        got = _plan(capsys, *basis, "--prefill-pool",
                    f"{want['prefill_replicas']}x{want['prefill_tp']}",
                    "--decode-pool", f"{want['decode_replicas']}x{want['decode_tp']}",
                    "--pool-rate", repr(want["design_rate_per_s"]))["option"]
        for k in ("ratio", "label", "gpus", "link", "prefill_replicas", "decode_replicas"):
            assert got[k] == want[k], k
        for k in ("ttft_ms", "tpot_ms", "tpot_mean_ms", "transfer_ms", "transfer_wait_ms",
                  "prefill_utilization", "link_utilization", "decode_batch", "prefill_ms",
                  "prefill_capacity_per_s", "decode_capacity_per_s", "capacity_rate_per_s",
                  "cost_per_month", "cost_per_mtok", "cost_per_mtok_design"):
            assert got[k] == pytest.approx(want[k], rel=1e-9), k


@pytest.mark.slow
def test_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--prefill-pool", "3x4", "--decode-pool", "1x2",
                 "--pool-rate", "2.4"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("3P+1D: prefill 3 x (4 x H100 SXM), decode 1 x (2 x H100 SXM)")
    for words in ("rate-matched counts 3P+1D", "utilisation: prefill replica",
                  "TTFT p90 in its parts", "KV hand-over", "first decode step", "TPOT p90",
                  "SLOs: TTFT p90 <= 2500 ms met, TPOT p90 <= 20 ms met",
                  "cost: USD 27,594/month"):
        assert words in text, words


@pytest.mark.parametrize(("flags", "message"), [
    (["--prefill-pool", "2x4", "--pool-rate", "1"], "go together"),
    (["--prefill-pool", "2x4", "--decode-pool", "1x2"], "--pool-rate"),
    (["--prefill-pool", "2x4", "--decode-pool", "1x2", "--pool-rate", "1", "--ep", "8"],
     "--ep does not apply"),
    (["--prefill-pool", "2x4", "--decode-pool", "1x2", "--pool-rate", "1", "--gpus", "8"],
     "--gpus does not apply"),
    (["--prefill-pool", "2xfour", "--decode-pool", "1x2", "--pool-rate", "1"],
     "REPLICASxTP"),
])
def test_refusals(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, *flags]) == 2
    assert message in capsys.readouterr().err
