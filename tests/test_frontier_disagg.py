"""Disaggregated and wide-EP points of the buyer's chart (issue 27; capacity.fit.frontier_disagg,
capacity.fit.frontier_ep, docs/frontier.md): figures by hand, when disaggregation wins, the EP
points of a MoE model, and the CLI's JSON against the library."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.fit.frontier import (
    AGGREGATED,
    DISAGGREGATED,
    EP_POOLS,
    WIDE_EP,
    Frontier,
    FrontierInputs,
    Group,
    configuration_variants,
    cost_read_off,
    front_at,
    frontier,
    plan_inputs,
)
from capacity.fit.frontier_disagg import disaggregated_figures
from capacity.fit.frontier_ep import batch_grid, ep_degrees
from capacity.model.basis import BasisKind
from capacity.model.ep_knobs import planning_ep_knobs
from capacity.model.expert_parallel import (
    ep_layout,
    ep_setup,
    ep_step,
    prefill_tok_s_per_gpu,
)
from capacity.model.moe_imbalance import imbalance_factor
from capacity.plan.disagg import prefill_capacity_per_s
from capacity.plan.units import replica_units
from capacity.report.frontier_chart import frontier_chart, frontier_frame, layout_text

SIMPLE = FrontierInputs(model="llama-3.1-8b", gpus=("h100-sxm",), engines=("vllm",),
                        formats=("bf16",), kv_dtypes=("fp16",), prompt_tokens=8192,
                        output_tokens=256, max_gpus=1, disaggregated=True)
DEEPSEEK = FrontierInputs(model="deepseek-v3", gpus=("h200-sxm",), engines=("sglang",),
                          formats=("fp8",), kv_dtypes=("fp8",), wide_ep=True,
                          disaggregated=True, currency="USD")


@cache
def fr_of(inp: FrontierInputs) -> Frontier:
    return frontier(inp)


def kind(fr: Frontier, deployment: str) -> list[Group]:
    return [g for g in fr.groups if g.deployment == deployment]


# -- disaggregated points -------------------------------------------------------------------------


def test_disaggregated_figures_by_hand() -> None:
    # C 10 sequences at 20 ms a step: 50 tok/s per user, 500 tok/s; 500 / 500 tokens = 1 req/s;
    # 1 / 2 req/s per prefill replica = 0.5 replicas x TP 2 = 1 GPU; 500 / (4 + 1) = 100
    f = disaggregated_figures(concurrency=[10.0], decode_step_ms=[20.0], output_tokens=500,
                              prefill_capacity_per_s=[2.0], prefill_tp=[2], decode_tp=[4])
    assert f.interactivity_tok_s_per_user[0] == pytest.approx(50.0)
    assert f.output_tok_s[0] == pytest.approx(500.0)
    assert f.rate_per_s[0] == pytest.approx(1.0)
    assert f.prefill_gpus[0] == pytest.approx(1.0)
    assert f.throughput_tok_s_per_gpu[0] == pytest.approx(100.0)
    assert f.prefill_share[0] == pytest.approx(0.2)


def test_a_disaggregated_point_by_hand() -> None:
    """Llama-3.1-8B BF16 on H100, TP 1 both pools, 8K prompts: the point's throughput per GPU
    with its fractional prefill GPUs, from its own step and the prefill replica's capacity."""
    fr = fr_of(SIMPLE)
    (agg,), (dis,) = kind(fr, AGGREGATED), kind(fr, DISAGGREGATED)
    assert dis.key == "h100-sxm/vllm/bf16/fp16/disaggregated" and agg.front and dis.front
    # KV hand-over: 32 layers x 2 x 8 heads x 128 x 2 B = 131,072 B a token, x 8192 tokens =
    # 1,073,741,824 B; both pools (1 + 1 GPU) in one NVLink domain: 450 GB/s one way x 0.85,
    # + 1 ms; + the decode rank's descriptors, 32 layers x 8192 / 16 blocks = 16,384 x 3.75 us
    # = 61.44 ms (docs/disaggregation.md); + one decode step of admission (the pair's step)
    wire = 1.0 + 1_073_741_824 / (450 * 0.85 * 1e6)
    assert wire == pytest.approx(3.807, abs=1e-3)
    descriptors_ms = 32 * 8192 / 16 * 3.75 / 1e3
    assert descriptors_ms == pytest.approx(61.44)
    v = configuration_variants(SIMPLE)[0]
    _, _, units = replica_units(plan_inputs(SIMPLE, v), default_catalog())
    assert units.tp.tolist() == [1]
    t_prefill = float(units.prefill_ms[0])
    # the typical vLLM basis' request latency outside the GPU is in the TTFT budget's use, as
    # the Planner's `Slo.at_engine` takes it (since 2026-12-07)
    lat = plan_inputs(SIMPLE, v).request_latency_ms
    assert lat == pytest.approx(7.84)
    for p in dis.front:
        s = p.tpot_ms  # pure decode steps: TPOT is the step at C
        transfer = wire + descriptors_ms + s
        assert p.interactivity_tok_s_per_user == pytest.approx(1000.0 / s)
        out = p.concurrency * 1000.0 / s
        rate = out / 256
        # the prefill replica at its part of the 2000 ms budget: less the hand-over, the first
        # step and the latency; vLLM's 8192-token budget on an 80 GB H100 (data/engines.toml) holds one 8K
        # prompt, not two: prompts one after another (FCFS, no batching factor)
        cap = float(prefill_capacity_per_s(t_prefill, 2000.0 - transfer - s - lat, 0.9, False))
        gpus = rate / cap * 1
        assert p.prefill_tp == 1 and p.prefill_gpus == pytest.approx(gpus, rel=1e-9)
        assert p.throughput_tok_s_per_gpu == pytest.approx(out / (1 + gpus), rel=1e-9)
        assert p.gpus_paid == pytest.approx(1 + gpus)
        assert p.prefill_share == pytest.approx(gpus / (1 + gpus))
        assert f"KV {transfer:.1f} ms over nvlink" in p.layout
        assert t_prefill + transfer + s + lat <= p.ttft_ms < 2000.0


def test_cost_read_off_prices_the_fractional_prefill_gpus() -> None:
    fr = fr_of(SIMPLE)
    (dis,) = kind(fr, DISAGGREGATED)
    p = dis.front[len(dis.front) // 2]
    (r,) = [r for r in cost_read_off(fr, p.interactivity_tok_s_per_user, ("catalog",))
            if r.group.deployment == DISAGGREGATED]
    # F7: price per GPU-hour / (tok/s per GPU paid x 3600) x 1e6; the input tokens pay the
    # prefill GPUs' share of the hour
    assert r.output_per_mtok == pytest.approx(
        p.price_per_gpu_hour / (p.throughput_tok_s_per_gpu * 3600) * 1e6)
    assert r.input_per_mtok == pytest.approx(
        p.price_per_gpu_hour * p.prefill_share / (p.throughput_tok_s_per_gpu * 8192 / 256 * 3600)
        * 1e6)


def _gain(prompt: int, output: int, interactivity: float) -> float:
    """Disaggregated over aggregated throughput per GPU at `interactivity` (Llama-3.1-70B FP8
    on H100, vLLM)."""
    fr = fr_of(FrontierInputs(model="llama-3.1-70b", gpus=("h100-sxm",), engines=("vllm",),
                              formats=("fp8",), kv_dtypes=("fp8",), prompt_tokens=prompt,
                              output_tokens=output, disaggregated=True))
    (agg,), (dis,) = kind(fr, AGGREGATED), kind(fr, DISAGGREGATED)
    a, d = front_at(agg.front, interactivity), front_at(dis.front, interactivity)
    assert a is not None and d is not None
    return d.throughput_tok_s_per_gpu / a.throughput_tok_s_per_gpu


def test_disaggregation_wins_long_prompts_at_high_interactivity() -> None:
    # 8K prompts, 256 outputs: each prompt on the decode GPUs stretches every other user's
    # TPOT, so at 80 tok/s per user (a 12.5 ms step; the typical basis' TP8 step at batch 1
    # is 10.5 ms: 80 layers x 72.7 us of per-layer overhead, F11, beside the weights' 3.1 ms
    # and the all-reduces' 1.6 ms, F10; both fronts end near 95 tok/s) the pools more than
    # 1.5x the tokens per GPU
    long_hi = _gain(8192, 256, 80.0)
    assert long_hi > 1.5
    # at the throughput end the prompts cost the aggregated replica no interactivity it needs
    assert _gain(8192, 256, 10.0) < 0.9
    # 128-token prompts: no real win at the throughput end (2.1% since F10's small-message
    # all-reduce, 2026-12-03; 6.6% since the typical basis budgets the memory the H100's
    # driver reports, 85.52 GB, 2026-12-07: the decode pool, free of prefills, runs a larger
    # batch at 20 tok/s in it, the aggregated replica no larger), and a far smaller one than
    # the long prompts' at 80 tok/s
    assert _gain(128, 1024, 20.0) < 1.08
    assert _gain(128, 1024, 80.0) < 1.1 < long_hi / 1.4


def test_default_frontier_has_no_new_points() -> None:
    fr = fr_of(FrontierInputs(model="llama-3.1-8b", gpus=("h100-sxm",), engines=("vllm",),
                              formats=("bf16",), kv_dtypes=("fp16",), prompt_tokens=8192,
                              output_tokens=256, max_gpus=1))
    assert {g.deployment for g in fr.groups} == {AGGREGATED}
    assert set(fr.points.deployment) == {AGGREGATED} and not fr.points.prefill_gpus.any()


def test_llamacpp_draws_no_disaggregated_points() -> None:
    fr = frontier(FrontierInputs(model="llama-3.1-8b", gpus=("h100-sxm",),
                                 engines=("llamacpp",), formats=("bf16",), kv_dtypes=("fp16",),
                                 max_gpus=1, disaggregated=True))
    assert kind(fr, DISAGGREGATED) == []


# -- wide EP ------------------------------------------------------------------------------------


def test_ep_degrees_from_the_node_shapes() -> None:
    # data/nodes.toml: HGX H200 8 GPUs in an 8-GPU NVLink domain; GB200 trays of 4 in NVL72
    assert ep_degrees("h200-sxm") == (8,)
    assert ep_degrees("gb200") == (4, 72)
    assert batch_grid(0).size == 0
    assert batch_grid(1).tolist() == [1.0]
    assert batch_grid(20).tolist() == [1.0, 2.0, 4.0, 8.0, 16.0, 20.0]


def test_wide_ep_points_for_deepseek_on_h200() -> None:
    fr = fr_of(DEEPSEEK)
    (ep,) = kind(fr, WIDE_EP)
    assert ep.key == "h200-sxm/sglang/fp8/fp8/wide-ep" and len(ep.front) >= 3
    cat = default_catalog()
    s = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8, redundant_experts=32),
                 context_tokens=2048, kv_dtype="fp8", weights="fp8", catalog=cat)
    pinp = plan_inputs(DEEPSEEK, configuration_variants(DEEPSEEK)[0])
    # a typical basis: the published and fitted EP knobs, the dense engine knobs neutral
    assert pinp.basis == BasisKind.TYPICAL
    ek = planning_ep_knobs()
    gamma = imbalance_factor(experts=256, active=8, exponent=s.exponent, gpus=8, redundant=32)
    # one 1024-token prompt takes the 8 GPUs' prefill of 1024 tokens and its share of a
    # pass's fixed time (16,384 tokens a GPU)
    p_ms = 1024 / (8 * prefill_tok_s_per_gpu(s, 1024, mfu=1.0, imbalance=gamma,
                                             knobs=ek)) * 1e3 + pinp.fixed_prefill_ms(
        s.variant.model) * 1024 / (8 * 16_384)
    for p in ep.front:
        assert (p.n_gpus, p.tp, p.layout) == (8, 1, "EP8, DP attention, 32 redundant experts "
                                                     "(NVLink)")
        step = ep_step(s, float(p.concurrency), eta_bw=1.0, eff=1.0, overhead_ms=0.0,
                       knobs=ek).step_ms
        # prefill pauses decoding: in the server T_s = C_s p + (n - 1) s(C_s), TPOT = s(C_s) +
        # (C_s - 1) p / (n - 1), so T_s = (n - 1) TPOT + p; each request spends the typical
        # SGLang basis' latency outside the GPU as well (its TTFT; since 2026-12-07), so the
        # server holds C_s = C T_s / (T_s + latency) of the C clients' requests, fewer than C
        lat = pinp.request_latency_ms
        assert lat == pytest.approx(13.23)
        t_s = 1023 * p.tpot_ms + p_ms
        inside = p.concurrency * t_s / (t_s + lat)
        assert 1.0 <= inside < p.concurrency
        assert p.tpot_ms < step + (p.concurrency - 1) * p_ms / 1023
        assert p.ttft_ms == pytest.approx(p_ms + lat, rel=1e-9)
        assert p.throughput_tok_s_per_gpu == pytest.approx(
            p.concurrency * 1024 / (t_s + lat) * 1e3 / 8, rel=1e-9)
        assert p.prefill_share == pytest.approx(inside * p_ms / t_s, rel=1e-3)


def test_ep_pools_points_for_deepseek_on_h200_by_hand() -> None:
    """Both kinds ticked: an EP8 decode group in pure decode steps (TPOT = its step at the
    batch), the prefill EP8 groups it needs, fractional, within the TTFT budget (2 s at p90)
    less the KV hand-over (two groups are 16 GPUs: over the 400 Gb/s NIC, 61 x 576 B a token
    in FP8, 61 x 64 descriptors of 16 tokens, 1 ms, one admission step) and the first step;
    the figures `disaggregated_figures`'."""
    fr = fr_of(DEEPSEEK)
    (pools,) = kind(fr, EP_POOLS)
    assert pools.key == "h200-sxm/sglang/fp8/fp8/ep-pools" and len(pools.front) >= 3
    cat = default_catalog()
    s = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8, redundant_experts=32),
                 context_tokens=2048, kv_dtype="fp8", weights="fp8", catalog=cat)
    ek = planning_ep_knobs()
    gamma = imbalance_factor(experts=256, active=8, exponent=s.exponent, gpus=8, redundant=32)
    pinp = plan_inputs(DEEPSEEK, configuration_variants(DEEPSEEK)[0])
    p_ms = 1024 / (8 * prefill_tok_s_per_gpu(s, 1024, mfu=1.0, imbalance=gamma,
                                             knobs=ek)) * 1e3 + pinp.fixed_prefill_ms(
        s.variant.model) * 1024 / (8 * 16_384)
    busy = 61 * 576 * 1024 / (50e3 * 0.85 * 1e3) + 61 * 64 * 3.75 / 1e3
    for p in pools.front:
        step = ep_step(s, float(p.concurrency), eta_bw=1.0, eff=1.0, overhead_ms=0.0,
                       knobs=ek).step_ms
        assert p.tpot_ms == pytest.approx(step, rel=1e-9)
        xfer = 1.0 + step + busy
        assert p.layout.startswith("EP8, DP attention, 32 redundant experts (NVLink), prefill "
                                   "EP8 x ") and p.layout.endswith(
                                       f"KV {xfer:.1f} ms over infiniband")
        cap = float(prefill_capacity_per_s(p_ms, 2000.0 - xfer - step, 0.9))
        fig = disaggregated_figures(concurrency=[p.concurrency], decode_step_ms=[step],
                                    output_tokens=1024, prefill_capacity_per_s=[cap],
                                    prefill_tp=[8], decode_tp=[8])
        assert p.throughput_tok_s_per_gpu == pytest.approx(fig.throughput_tok_s_per_gpu[0])
        assert p.prefill_gpus == pytest.approx(fig.prefill_gpus[0])
        assert p.interactivity_tok_s_per_user == pytest.approx(1e3 / step)
        assert p.ttft_ms > p_ms + xfer + step   # the prefill pool's queue at that rate
    # one kind ticked draws no pools
    assert kind(frontier(replace(DEEPSEEK, disaggregated=False)), EP_POOLS) == []
    assert kind(frontier(replace(DEEPSEEK, wide_ep=False)), EP_POOLS) == []


def test_the_pools_layout_in_chinese() -> None:
    lay = ("EP8, DP attention, 32 redundant experts (NVLink), prefill EP8 x 0.16 per decode "
           "deployment, KV 79.7 ms over infiniband")
    assert layout_text(lay, "en") == lay
    assert layout_text(lay, "zh") == ("解码 EP8，数据并行注意力，32 个冗余专家（NVLink），每个解码"
                                      "部署配 0.16 个 EP8 预填充部署，KV 传输 79.7 ms（经 "
                                      "infiniband）")


def test_no_wide_ep_points_for_a_dense_model() -> None:
    fr = frontier(FrontierInputs(model="llama-3.1-70b", gpus=("h200-sxm",), engines=("sglang",),
                                 formats=("fp8",), kv_dtypes=("fp8",), wide_ep=True))
    assert kind(fr, WIDE_EP) == [] and kind(fr, AGGREGATED)


# -- the surfaces ---------------------------------------------------------------------------------


CLI = ["frontier", "--model", "deepseek-v3", "--gpus", "h200-sxm", "--engines", "sglang",
       "--weights", "fp8", "--kv-dtypes", "fp8", "--currency", "USD", "--offer-kind", "catalog",
       "--interactivity", "20", "--basis", "typical"]
"""DEEPSEEK on the command line: each engine on its own typical efficiency, as the library
draws it when no basis is given (the command's default is the chapter's)."""


def test_cli_json_equals_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CLI, "--format", "json", "--disaggregated", "--wide-ep"]) == 0
    data = json.loads(capsys.readouterr().out)
    fr = fr_of(DEEPSEEK)
    assert [g["key"] for g in data["groups"]] == [g.key for g in fr.groups]
    assert [g["deployment"] for g in data["groups"]] == [AGGREGATED, DISAGGREGATED, WIDE_EP,
                                                         EP_POOLS]
    assert data["ttft_budget_ms"] == 2000.0
    for rec, g in zip(data["groups"], fr.groups, strict=True):
        assert [p["throughput_tok_s_per_gpu"] for p in rec["front"]] == [
            p.throughput_tok_s_per_gpu for p in g.front]
        assert [p["interactivity_tok_s_per_user"] for p in rec["front"]] == [
            p.interactivity_tok_s_per_user for p in g.front]
        assert [p["prefill_gpus"] for p in rec["front"]] == [p.prefill_gpus for p in g.front]
        assert {p["deployment"] for p in rec["front"]} == {g.deployment}
    costs = {c["deployment"]: c for c in data["cost_at_interactivity"]}
    for r in cost_read_off(fr, 20.0, ("catalog",)):
        assert costs[r.group.deployment]["output_per_mtok"] == r.output_per_mtok
    # without the flags the records are as before
    assert main([*CLI, "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert [g["key"] for g in plain["groups"]] == ["h200-sxm/sglang/fp8/fp8"]
    assert "deployment" not in plain["groups"][0] and "ttft_budget_ms" not in plain
    assert "deployment" not in plain["groups"][0]["front"][0]


def test_cli_table_names_the_deployment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CLI, "--disaggregated", "--wide-ep"]) == 0
    out = capsys.readouterr().out
    assert "x deployment)" in out and "GPUs paid" in out
    assert "EP8, DP attention" in out and "per decode replica" in out
    assert main([*CLI, "--format", "csv", "--wide-ep"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.endswith("deployment,layout,prefill_tp,prefill_gpus,gpus_paid")


def test_chart_names_the_kind_in_legend_and_tooltip() -> None:
    fr = fr_of(DEEPSEEK)
    df = frontier_frame(fr, lang="en")
    assert set(df["style"]) == {"SGLang fp8/fp8", "SGLang fp8/fp8 disaggregated prefill/decode",
                                "SGLang fp8/fp8 wide EP", "SGLang fp8/fp8 wide-EP pools"}
    dis = df["deployment"].isin([DISAGGREGATED, EP_POOLS])
    assert (df["gpus_paid"][dis] > df["n_gpus"][dis]).all()
    assert np.array_equal(df["gpus_paid"][~dis], df["n_gpus"][~dis])
    assert sorted(df["gpus_paid"][dis]) == pytest.approx(sorted(
        fr.points.n_gpus[i] + fr.points.prefill_gpus[i] for i in range(len(fr.points))
        if fr.points.deployment[i] in (DISAGGREGATED, EP_POOLS)))
    spec = frontier_chart(fr, lang="zh").to_dict()
    titles = [t.get("title") for t in spec["layer"][2]["encoding"]["tooltip"]]
    assert "部署方式" in titles and "布局" in titles
    # a chart of aggregated groups alone keeps its tooltip
    plain = frontier_chart(frontier(FrontierInputs(
        model="llama-3.1-8b", gpus=("h100-sxm",), engines=("vllm",), formats=("bf16",),
        kv_dtypes=("fp16",), max_gpus=1)), lang="en").to_dict()
    assert "deployment" not in [t.get("title") for t in plain["layer"][2]["encoding"]["tooltip"]]
