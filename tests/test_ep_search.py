"""Wide expert parallelism in the planner (capacity/plan/ep_search.py) and on the command line
(`capacity size --wide-ep`, `capacity plan --ep`): hand-computed sizing and cost, the same price
as the aggregated planner, the three DeepSeek deployments of issue 27, the JSON against the
library, and a dense model refused in one line."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest

from capacity.cli.main import build_parser, main
from capacity.cli.size import inputs_from_args
from capacity.errors import InputError
from capacity.model.ep_knobs import SPEC_KNOBS, EpKnobs, planning_ep_knobs
from capacity.model.workload import Workload
from capacity.plan.ep_search import (
    basis_of,
    compare_ep,
    ep_capacity_per_s,
    ep_load,
    ep_search,
    ep_sizes,
    prefill_ms_per_prompt,
    replicas_for,
)
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan

H200_PRICE = 20.0
"""CNY per GPU-hour entered for H200 in these tests (catalog prices move; this does not)."""


def _inputs(dau: float, **kw: object) -> PlanInputs:
    wl = Workload(daily_active_users=dau, context_tokens=2500, prompt_tokens=2000,
                  output_tokens=500)
    base: dict[str, object] = {"model": "deepseek-v3", "workload": wl, "gpus": ("h200-sxm",),
                               "max_gpus": 16, "kv_dtypes": ("fp8",),
                               "price_overrides": (("h200-sxm", H200_PRICE),)}
    return PlanInputs(**(base | kw))  # type: ignore[arg-type]


# -- hand-computed pieces ------------------------------------------------------------------------

def test_prefill_time_of_one_prompt_by_hand() -> None:
    # 2,000 tokens over 8 GPUs at 10,000 tok/s each: 2000 / 80,000 s = 25 ms; a pass's fixed
    # 3 ms is shared by its 16,384 x 8 tokens: the prompt's share is 3 x 2,000 / 131,072 ms
    assert prefill_ms_per_prompt(2000, 8, 10_000.0) == pytest.approx(25.0)
    assert prefill_ms_per_prompt(2000, 8, 10_000.0, overhead_ms=3.0) == pytest.approx(
        25.0 + 3.0 * 2000 / 131_072)


def test_load_of_one_deployment_by_hand() -> None:
    # a flat 20 ms step for batch 0..100, 10 ms of prefill per prompt, 20 req/s, 100 outputs
    grid = np.full(101, 20.0)
    load = ep_load(grid, 10.0, 20.0, 100, 0.5)
    assert load.prefill_share == pytest.approx(0.2)        # 20 /s x 0.010 s
    assert load.tpot_ms == pytest.approx(25.0)             # 20 / (1 - 0.2)
    assert load.tpot_q_ms == pytest.approx(25.0)           # p50: the batch at its mean
    # Little: B - 1 = 20 req/s x 100 steps x 25 ms = 50 others -> 51
    assert load.batch == pytest.approx(51.0)
    assert load.step_ms == pytest.approx(20.0)
    # TTFT p50: prefill 10 ms (rho 0.2 <= 0.5: the p50 prompt does not queue) + 0.5 x 25 ms
    assert load.ttft_q_ms == pytest.approx(22.5)
    # mean: 10 + f W + s / 2, W = 0.2 x 10 / (2 x 0.8) = 1.25, f = 1.4 / 1.2
    assert load.ttft_ms == pytest.approx(10 + 1.4 / 1.2 * 1.25 + 12.5)
    # past the prefill's capacity (rho >= 1) everything is infinite
    assert math.isinf(ep_load(grid, 10.0, 100.0, 100, 0.5).tpot_q_ms)


def test_capacity_and_replicas_by_hand() -> None:
    grid = np.full(101, 20.0)
    loose = Slo(ttft_ms=2000, tpot_ms=50, quantile=0.5)
    # no prefill: the slots bind, (100 - 1) / (100 x 0.020 s) = 49.5 req/s
    assert ep_capacity_per_s(grid, 0.0, 100, loose) == pytest.approx(49.5)
    # TPOT 25 ms with 10 ms prompts: 20 / (1 - 0.01 lambda) <= 25 -> lambda <= 20 req/s
    tight = Slo(ttft_ms=2000, tpot_ms=25, quantile=0.5)
    assert ep_capacity_per_s(grid, 10.0, 100, tight) == pytest.approx(20.0, rel=1e-6)
    # a step over the SLO at one sequence: no capacity
    assert ep_capacity_per_s(grid, 0.0, 100, Slo(tpot_ms=19, quantile=0.5)) == 0.0
    assert (replicas_for(100, 49.5), replicas_for(99, 49.5), replicas_for(0.1, 49.5)) == (3, 2, 1)
    with pytest.raises(InputError):
        replicas_for(1, 0)


def test_sizes_a_user_buys() -> None:
    from capacity.catalog.nodes import node_shape

    assert ep_sizes(node_shape("h100-sxm"), 64, 256) == (8, 16, 32, 64)
    assert ep_sizes(node_shape("h100-sxm"), 16, 256) == (8, 16)
    # 8-GPU slices of an NVL72 rack on NVLink (vLLM's GB200 decode instance), then racks
    assert ep_sizes(node_shape("gb200"), 64, 256) == (8, 16, 32, 64)
    assert ep_sizes(node_shape("gb200"), 144, 256) == (8, 16, 32, 64, 72, 144)
    assert ep_sizes(node_shape("gb200"), 4, 256) == ()
    assert ep_sizes(node_shape("h100-sxm"), 1024, 128) == (8, 16, 32, 64, 128)  # <= experts


# -- the search: replicas, cost, the aggregated planner's price --------------------------------

def test_option_replicas_and_cost_by_hand() -> None:
    # 20,000 users x 20 requests x 0.3 in 2 h = 16.667 req/s at the peak, x 1.2 = 20 req/s
    s = ep_search(_inputs(20_000))
    assert s.design_rate_per_s == pytest.approx(20.0)
    o = next(o for o in s.options if o.ep == 8)
    per_deployment = o.capacity_rate_per_s / o.replicas
    assert o.replicas == math.ceil(20.0 / per_deployment)
    assert o.n_gpus == o.paid_gpus == 8 * o.replicas
    # CNY 20 per GPU-hour x 8 GPUs x replicas x 730 h
    assert o.cost_per_month == pytest.approx(20 * 8 * o.replicas * 730)
    # F7 at the design load: CNY 160 x replicas an hour over 20 req/s x 500 tokens x 3600 s
    assert o.cost_per_mtok_design == pytest.approx(160 * o.replicas / (20 * 500 * 3600) * 1e6)
    assert o.cost_per_mtok == pytest.approx(160 * o.replicas
                                            / (o.capacity_rate_per_s * 500 * 3600) * 1e6)
    assert o.output_tok_s_per_gpu == pytest.approx(20 * 500 / o.n_gpus)
    assert o.tpot_ms <= 50 and o.ttft_ms <= 2000
    assert o.scale_up and o.link == "nvlink" and o.nodes == 1
    one = "1 node x 8 H200 SXM: EP8"
    assert o.label.startswith(one if o.replicas == 1 else f"{o.replicas} x ({one}")
    assert "all-to-all over NVLink" in o.label
    # cheapest first
    assert [x.cost_per_month for x in s.options] == sorted(x.cost_per_month for x in s.options)


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_one_deployment_costs_what_the_aggregated_planner_charges() -> None:
    inp = _inputs(2_000)  # 2 req/s: one deployment of 8 H200
    ep = next(o for o in ep_search(inp).options if o.ep == 8)
    assert ep.replicas == 1
    agg = next(a for a in plan(inp, only=(8, 8), keep_all=True).all_options
               if a.weights == ep.weights and a.kv_dtype == ep.kv_dtype)
    assert agg.n_gpus == 8 and agg.tp == 8
    # both: CNY 20 x 8 GPUs x 730 h = 116,800 a month; F7 at the design load 2 req/s x 500
    # tokens: 160 / 3.6e6 x 1e6 = 44.44 per million
    assert ep.cost_per_month == agg.cost_per_month == pytest.approx(116_800)
    assert ep.cost_per_mtok_design == pytest.approx(agg.cost_per_mtok_design)
    assert ep.cost_per_mtok_design == pytest.approx(160 / (2 * 500 * 3600) * 1e6)
    # with an N+1 spare: one more deployment of 8, as the aggregated planner adds a replica
    spare = next(o for o in ep_search(_inputs(2_000, spare=True)).options if o.ep == 8)
    assert spare.spare_gpus == 8 and spare.paid_gpus == 16
    assert spare.cost_per_month == pytest.approx(2 * ep.cost_per_month)


def test_compare_says_why_aggregated_wins_a_small_load() -> None:
    wl = Workload(daily_active_users=500, context_tokens=4096, prompt_tokens=1000,
                  output_tokens=200)
    inp = PlanInputs(model="qwen3-30b-a3b", workload=wl, gpus=("h100-sxm",), max_gpus=16,
                     kv_dtypes=("fp8",))
    cmp = compare_ep(inp)
    assert cmp.winner == "aggregated"
    assert cmp.aggregated.best is not None and cmp.aggregated.best.n_gpus < 8
    assert "one EP deployment is 8 GPUs, more than the load needs" in cmp.reason


def test_dense_model_and_concurrency_are_refused() -> None:
    with pytest.raises(InputError, match="not a mixture-of-experts"):
        ep_search(_inputs(2_000, model="qwen3-8b"))
    wl = Workload(peak_concurrency=10, context_tokens=2500, prompt_tokens=2000,
                  output_tokens=500)
    with pytest.raises(InputError, match="arrival rate"):
        ep_search(PlanInputs(model="deepseek-v3", workload=wl, gpus=("h200-sxm",)))


# -- the command line --------------------------------------------------------------------------

def _plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", "--model", "deepseek-v3", "--ctx", "2500", "--prompt-tokens", "2000",
                 *argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize(("gpu", "n", "red", "nodes", "link"), [
    ("h200-sxm", 8, 0, 1, "nvlink"),
    ("h100-sxm", 16, 32, 2, "infiniband"),
    ("gb200", 72, 32, 1, "nvlink")])
def test_the_three_deepseek_deployments_from_the_cli(
        capsys: pytest.CaptureFixture[str], gpu: str, n: int, red: int, nodes: int,
        link: str) -> None:
    r = _plan_json(capsys, "--gpu", gpu, "--gpus", str(n), "--ep", str(n),
                   "--redundant-experts", str(red), "--gpu-price", "10", "--currency", "USD")
    assert (r["ep"], r["replicas"], r["nodes"]) == (n, 1, nodes)
    assert r["crosses_nodes"] is (nodes > 1) and r["all_to_all_over_nic"] is (nodes > 1)
    assert r["all_to_all_link"] == link
    # weights per GPU by hand: X = (671 - 37) / (1 - 8/256) routed-expert parameters, the rest
    # shared, FP8 (1 byte per parameter) with the embedding and head in BF16 (2 x 129280 x
    # 7168 parameters, one more byte each); ceil((256 + R) / n) experts per GPU
    x = 634 / (1 - 8 / 256)
    emb = 2 * 129280 * 7168 / 1e9
    slots = math.ceil((256 + red) / n)
    assert r["expert_slots_per_gpu"] == slots
    assert r["weights_per_gpu_gb"] == pytest.approx(671 - x + emb + slots * x / 256, rel=1e-9)
    points = r["points"]
    assert isinstance(points, list) and points and all(p["fits"] for p in points)
    top = points[-1]
    assert top["batch"] == r["max_batch"] <= 256 * n
    assert 0 < top["tok_s_per_gpu"] <= top["bound_tok_s_per_gpu"]
    assert top["all_to_all_ms"] > 0 and top["tpot_ms"] == top["step_ms"]
    assert r["cost_per_month"] == pytest.approx(10 * n * 730)   # USD 10 x GPUs x 730 h


def test_plan_ep_takes_the_basis(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--gpu", "h200-sxm", "--gpus", "8", "--ep", "8")
    chapter = _plan_json(capsys, *argv)
    typical = _plan_json(capsys, *argv, "--typical", "vllm")
    assert (chapter["basis"], typical["basis"]) == ("chapter", "typical")
    assert typical["ep_knobs"] == _knobs_dict(planning_ep_knobs())
    assert chapter["ep_knobs"] == _knobs_dict(SPEC_KNOBS)
    # the typical EP knobs are achieved shares of the spec sheet: every step of a batch both
    # run is slower; the typical basis budgets the H200's memory as its driver reports it
    # (150.75 GB where the chapter counts 141), so it holds more sequences
    assert typical["max_batch"] > chapter["max_batch"]
    same = {c["batch"]: c for c in chapter["points"]}
    both = [(same[t["batch"]], t) for t in typical["points"] if t["batch"] in same]
    assert len(both) >= 2
    for c, t in both:
        assert t["step_ms"] > c["step_ms"] and t["bound_ms"] == pytest.approx(c["bound_ms"])


def _knobs_dict(k: EpKnobs) -> dict[str, Any]:
    """The knobs as the JSON carries them (tuples become lists)."""
    out: dict[str, Any] = json.loads(json.dumps(asdict(k)))
    return out


def test_plan_ep_text_names_the_network(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--gpus", "16",
                 "--ep", "16", "--ctx", "2500"]) == 0
    out = capsys.readouterr().out
    assert "2 nodes x 8 GPUs; all-to-all crosses nodes over InfiniBand 400 Gb/s" in out
    assert "Memory per GPU" in out and "step = TPOT ms" in out


@pytest.mark.parametrize("basis", [[], ["--typical", "vllm"]])
@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_size_wide_ep_json_is_the_library(capsys: pytest.CaptureFixture[str],
                                          basis: list[str]) -> None:
    argv = ["size", "--model", "deepseek-v3", "--dau", "20000", "--gpus", "h200-sxm",
            "--ctx", "2500", "--prompt-tokens", "2000", "--output-tokens", "500",
            "--kv-dtypes", "fp8", "--price", f"h200-sxm={H200_PRICE}", "--wide-ep", *basis]
    main([*argv, "--format", "json"])
    got = json.loads(capsys.readouterr().out)["wide_ep"]
    inp = inputs_from_args(build_parser("size").parse_args(argv))
    lib = compare_ep(inp)
    assert basis_of(inp).knobs == (planning_ep_knobs() if basis else SPEC_KNOBS)
    assert got["winner"] == lib.winner and got["reason"] == lib.reason
    assert got["design_rate_per_s"] == pytest.approx(lib.ep.design_rate_per_s)
    assert len(got["options"]) == len(lib.ep.options) > 0
    for g, o in zip(got["options"], lib.ep.options, strict=True):
        for key in ("gpu", "ep", "replicas", "paid_gpus", "label", "attention_tp",
                    "redundant_experts", "overlap", "link"):
            assert g[key] == getattr(o, key)
        for key in ("cost_per_month", "cost_per_mtok", "cost_per_mtok_design", "ttft_ms",
                    "tpot_ms", "batch", "capacity_rate_per_s", "all_to_all_ms",
                    "output_tok_s_per_gpu"):
            assert g[key] == pytest.approx(getattr(o, key))
    # the text section shows the same first option
    main(argv)
    text = capsys.readouterr().out
    assert "Wide expert parallelism" in text and f"1. {lib.ep.options[0].label}" in text


@pytest.mark.parametrize("argv", [
    ["size", "--model", "qwen3-8b", "--dau", "2000", "--wide-ep"],
    ["plan", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--ep", "8"]])
def test_dense_model_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not a mixture-of-experts model" in err
    assert err.count("\n") == 1 and "Traceback" not in err
