"""Disaggregated prefill/decode (issue 27): the KV hand-over by hand, its contention, rate
matching, and the ranking against the aggregated planner with its reason."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.catalog.nodes import node_shape
from capacity.errors import InputError
from capacity.model.workload import Workload
from capacity.plan.disagg import (
    Link,
    compare,
    decode_batch_rate,
    decode_capacity_per_s,
    decode_load,
    disagg_options,
    handover_bytes,
    link_for,
    link_wait_ms,
    pool_counts,
    prefill_capacity_per_s,
    prefill_ttft_ms,
    replica_shapes,
    transfer_ms,
)
from capacity.plan.disagg_handover import descriptors_per_rank
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.queueing import md1_mean_wait_ms

LLAMA70 = default_catalog().variant("llama-3.1-70b").model
DC = ("h100-sxm", "h200-sxm", "b200", "a100-80gb-sxm", "mi300x")


def test_handover_bytes_are_the_whole_kv_split_over_the_group() -> None:
    # 80 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes = 327,680 B a token; 8K tokens
    assert handover_bytes(LLAMA70, "fp16", 8192, 1) == 8192 * 327_680 == 2_684_354_560
    # each of 4 ranks holds a quarter: the bytes crossing the network stay the whole KV
    assert handover_bytes(LLAMA70, "fp16", 8192, 4) * 4 == 2_684_354_560
    assert handover_bytes(LLAMA70, "fp8", 8192, 1) == 2_684_354_560 / 2


def test_transfer_time_by_hand() -> None:
    ib = Link(kind="infiniband", send_gb_s=50.0, recv_gb_s=50.0, efficiency=1.0, latency_ms=0.0)
    whole = handover_bytes(LLAMA70, "fp16", 8192, 1)
    quarter = handover_bytes(LLAMA70, "fp16", 8192, 4)
    # 2.684e9 B / (50 GB/s = 5e7 B/ms) = 53.687 ms from one GPU to one GPU
    one = float(transfer_ms(send_bytes_per_gpu=whole, recv_bytes_per_gpu=whole, link=ib))
    assert one == pytest.approx(53.687, abs=1e-3)
    # TP 4 to TP 4: four NICs each way, a quarter each: 13.42 ms
    assert float(transfer_ms(send_bytes_per_gpu=quarter, recv_bytes_per_gpu=quarter,
                             link=ib)) == pytest.approx(one / 4)
    # TP 4 to TP 1: the single receiving NIC bounds it
    assert float(transfer_ms(send_bytes_per_gpu=quarter, recv_bytes_per_gpu=whole,
                             link=ib)) == pytest.approx(one)
    # efficiency and the fixed latency: 53.687 / 0.85 + 1 = 64.16 ms
    real = Link(kind="infiniband", send_gb_s=50.0, recv_gb_s=50.0)
    assert float(transfer_ms(send_bytes_per_gpu=whole, recv_bytes_per_gpu=whole,
                             link=real)) == pytest.approx(one / 0.85 + 1.0)


def test_connector_costs_by_hand() -> None:
    """The hand-over as a connector does it: latency + bytes / (link x eta) + descriptors x
    their cost + the decode engine's admission steps (capacity/plan/disagg_handover.py)."""
    # one descriptor per 16-token block per layer: 8,192 / 16 = 512 blocks x 80 layers
    assert descriptors_per_rank(LLAMA70, 8192) == 512 * 80 == 40_960
    assert descriptors_per_rank(LLAMA70, 8193) == 513 * 80   # a partial block is one more
    assert descriptors_per_rank(LLAMA70, 8192, block_tokens=64) == 128 * 80
    whole = handover_bytes(LLAMA70, "fp16", 8192, 1)
    link = Link(kind="infiniband", send_gb_s=50.0, recv_gb_s=50.0, efficiency=1.0,
                latency_ms=1.0, descriptor_us=3.75, admission_steps=1.0)
    # NICs held: 2.684e9 / 5e7 = 53.687 ms + 40,960 x 3.75 us = 153.6 ms -> 207.287 ms
    assert float(link.busy_ms(whole, whole, 40_960)) == pytest.approx(53.687 + 153.6, abs=1e-3)
    # + 1 ms latency + one decode step of 12 ms = 220.287 ms
    assert float(transfer_ms(send_bytes_per_gpu=whole, recv_bytes_per_gpu=whole, link=link,
                             descriptors=40_960, decode_step_ms=12.0)) == pytest.approx(
        1.0 + 53.687 + 153.6 + 12.0, abs=1e-3)
    # the spec sheet: line rate, none of the overheads (an upper bound on speed)
    spec = link.spec()
    assert (spec.efficiency, spec.latency_ms, spec.descriptor_us, spec.admission_steps) == \
        (1.0, 0.0, 0.0, 0.0)
    assert float(transfer_ms(send_bytes_per_gpu=whole, recv_bytes_per_gpu=whole, link=spec,
                             descriptors=40_960, decode_step_ms=12.0)) == pytest.approx(
        53.687, abs=1e-3)
    with pytest.raises(InputError):
        Link(kind="infiniband", send_gb_s=50.0, recv_gb_s=50.0, descriptor_us=-1.0)


def test_the_planner_hands_over_by_the_one_formula() -> None:
    """disagg_options' hand-over is transfer_ms of its own link, bytes, descriptors and the
    decode step at the design load (the first step it reports in TTFT)."""
    wl = Workload(rate_per_s=2.0, context_tokens=16384, prompt_tokens=8192, output_tokens=256)
    inp = _inputs(wl, Slo(ttft_ms=2500, tpot_ms=20), gpus=("h200-sxm",))
    o = disagg_options(inp)[0]
    step = decode_load(replica_step(inp, o.decode_tp), o.design_rate_per_s / o.decode_replicas,
                       256, inp.slo.quantile).first_step_ms
    want = transfer_ms(send_bytes_per_gpu=handover_bytes(LLAMA70, o.kv_dtype, 8192, o.prefill_tp),
                       recv_bytes_per_gpu=handover_bytes(LLAMA70, o.kv_dtype, 8192, o.decode_tp),
                       link=o.link, descriptors=descriptors_per_rank(LLAMA70, 8192),
                       decode_step_ms=step)
    assert o.transfer_ms == pytest.approx(float(want), rel=1e-12)


def replica_step(inp: PlanInputs, tp: int) -> np.ndarray:
    """The decode step at batch 0..slots of the H200 replica of `tp` GPUs (`replica_shapes`)."""
    _, units, grid = replica_shapes(inp)
    j = next(i for i, u in enumerate(units) if u.tp == tp and u.kv == "fp8"
             and u.weights == "fp8")
    return np.asarray(grid[j, : units[j].slots + 1])


def test_link_is_nvlink_inside_one_domain_else_the_nic() -> None:
    cat = default_catalog()
    h200, h100, b200 = cat.gpu("h200-sxm"), cat.gpu("h100-sxm"), cat.gpu("b200")
    inside = link_for(h200, h200, pool_gpus=8)
    assert inside.scale_up and inside.kind == "nvlink"
    assert inside.send_gb_s == h200.interconnect_gb_s == 450
    across = link_for(h200, h200, pool_gpus=12)
    assert not across.scale_up and across.kind == "infiniband"
    assert across.send_gb_s == node_shape("h200-sxm").scale_out_gb_s == 50
    mixed = link_for(b200, h100, pool_gpus=4)  # two GPU types: never one NVLink domain
    assert mixed.kind == "infiniband" and mixed.recv_gb_s == 50


def test_contention_is_md1_on_the_link() -> None:
    # 2 req/s on a 100 ms hand-over: rho 0.2, W = 0.2 x 100 / (2 x 0.8) = 12.5 ms
    mean, q90, rho = link_wait_ms(2.0, 100.0, 0.9)
    assert float(rho) == pytest.approx(0.2)
    assert float(mean) == pytest.approx(12.5) == md1_mean_wait_ms(0.2, 100.0)
    # exponential tail: W / rho x ln(rho / 0.1) = 62.5 x ln 2 = 43.32 ms
    assert float(q90) == pytest.approx(62.5 * math.log(2.0))
    # no contention at a trickle; a saturated link waits forever
    assert float(link_wait_ms(0.01, 100.0, 0.9)[1]) == 0.0
    assert math.isinf(float(link_wait_ms(10.0, 100.0, 0.9)[0]))


def test_prefill_pool_by_hand() -> None:
    # FCFS: t 400 ms at 1 req/s: rho 0.4, W = 0.4 x 400 / 1.2 = 133.3 ms, mean 533.3 ms
    mean, _, rho = prefill_ttft_ms(1.0, 400.0, 0.9, batched=False)
    assert float(rho) == pytest.approx(0.4) and float(mean) == pytest.approx(533.333, abs=1e-3)
    # batched: f = (1 + 0.8) / 1.4 on the wait
    assert float(prefill_ttft_ms(1.0, 400.0, 0.9)[0]) == pytest.approx(400 + 1.8 / 1.4 * 133.333,
                                                                        abs=1e-2)
    # the capacity is the rate whose quantile meets the budget (round trip)
    q = float(prefill_ttft_ms(1.0, 400.0, 0.9, batched=False)[1])
    assert float(prefill_capacity_per_s(400.0, q, 0.9, batched=False)) == pytest.approx(1.0,
                                                                                       rel=1e-6)
    assert float(prefill_capacity_per_s(400.0, 399.0, 0.9)) == 0.0  # idle misses it


def test_decode_pool_and_rate_matching_by_hand() -> None:
    step = 10.0 + np.arange(0, 65, dtype=np.float64)   # s(b) = 10 + b ms, 64 slots
    # lambda(B) = (B - 1) / (n s(B)): n = 10 tokens, B = 3 -> 2 / (10 x 0.013 s) = 15.38 req/s
    assert decode_batch_rate(step, 10)[3] == pytest.approx(2 / 0.13)
    # at the median (z = 0) the largest B with s(B) <= 20 ms is 10: 9 / (10 x 0.020) = 45
    assert decode_capacity_per_s(step, 10, 20.0, 0.5) == pytest.approx(45.0)
    load = decode_load(step, 45.0, 10, 0.5)
    assert load.batch == pytest.approx(10.0) and load.tpot_ms == pytest.approx(20.0)
    # rate matching: 6 req/s on 2.5 and 4 req/s per replica -> 3P + 2D
    assert pool_counts(6.0, 2.5, 4.0) == (3, 2)
    assert pool_counts(5.0, 2.5, 5.0) == (2, 1)


def _inputs(wl: Workload, slo: Slo, gpus: tuple[str, ...] = DC, max_gpus: int = 32) -> PlanInputs:
    return PlanInputs(model="llama-3.1-70b", workload=wl, slo=slo, gpus=gpus, currency="USD",
                      max_gpus=max_gpus)


def test_long_prompts_tight_tpot_rank_disaggregated_first() -> None:
    # 8K prompts, 256 output, TPOT 20 ms: prefill would stretch every decode step
    wl = Workload(rate_per_s=2.0, context_tokens=16384, prompt_tokens=8192, output_tokens=256)
    c = compare(_inputs(wl, Slo(ttft_ms=2000, tpot_ms=20)))
    best, agg = c.best_disaggregated, c.best_aggregated
    assert c.winner == "disaggregated" and best is not None and agg is not None
    assert best.cost_per_month < agg.cost_per_month
    assert best.tpot_ms <= 20 and best.ttft_ms <= 2000
    assert c.reason.startswith(f"disaggregated: {best.ratio} ")
    assert "meets TPOT 20 ms at 8K prompts" in c.reason and "aggregated needs" in c.reason
    # the pools are rate-matched: each sustains the design load
    assert best.prefill_replicas * best.prefill_capacity_per_s >= best.design_rate_per_s
    assert best.decode_replicas * best.decode_capacity_per_s >= best.design_rate_per_s
    # one GPU type: the aggregated replicas lose their time to prefill (TTFT 2.5 s leaves
    # room for the connector's hand-over: 40,960 descriptors at 3.75 us are 154 ms)
    h200 = compare(_inputs(wl, Slo(ttft_ms=2500, tpot_ms=20), gpus=("h200-sxm",)))
    d, a = h200.best_disaggregated, h200.best_aggregated
    assert h200.winner == "disaggregated" and d is not None and a is not None
    assert d.n_gpus < a.n_gpus and "prompts stretch the decode steps" in h200.reason
    # at 2 s the hand-over pushes 3P+1D past the TTFT: the next layout costs more than
    # aggregated, and the reason names the hand-over
    tight = compare(_inputs(wl, Slo(ttft_ms=2000, tpot_ms=20), gpus=("h200-sxm",)))
    assert tight.winner == "aggregated" and tight.best_disaggregated is not None
    assert tight.best_disaggregated.n_gpus > d.n_gpus
    assert "the KV hand-over" in tight.reason and "a second pool cost more" in tight.reason


def test_short_chat_ranks_aggregated_first() -> None:
    wl = Workload(rate_per_s=8.0, context_tokens=4096, prompt_tokens=200, output_tokens=200)
    c = compare(_inputs(wl, Slo(ttft_ms=1000, tpot_ms=50), max_gpus=16))
    agg, dis = c.best_aggregated, c.best_disaggregated
    assert c.winner == "aggregated" and agg is not None and dis is not None
    assert agg.cost_per_month < dis.cost_per_month
    assert c.reason.startswith("aggregated: ")
    assert "decode steps stay almost untouched" in c.reason
    assert "a second pool cost more" in c.reason


def test_size_cli_ranks_disaggregated_beside_aggregated(capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity size --disaggregated`: the winner with its reason in text, both rankings in
    JSON; the long-prompt, tight-TPOT workload of the test above at 2.4 req/s design load."""
    import json

    from capacity.cli.main import main

    args = ["size", "--dau", "4800", "--requests-per-user", "10", "--peak-share", "0.3",
            "--peak-hours", "2", "--ctx", "16384", "--prompt-tokens", "8192",
            "--output-tokens", "256", "--slo-ttft-ms", "2500", "--slo-tpot-ms", "20",
            "--model", "llama-3.1-70b", "--gpus", "h100-sxm", "--currency", "USD",
            "--max-gpus", "32", "--disaggregated", "--top", "2"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Disaggregated prefill/decode" in text and "winner: disaggregated: " in text
    assert main([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    d = data["disaggregated"]
    assert d["winner"] == "disaggregated" and d["options"][0]["ratio"].endswith("D")
    assert d["options"][0]["cost_per_month"] < data["options"][0]["cost_per_month"]
