"""Wide expert parallelism (capacity/model/expert_parallel.py): hand-computed all-to-all time
over NVLink and over the NIC, the imbalance factor of a small case, memory per GPU, the
spec-sheet bound, the imbalance data and the three DeepSeek-R1 deployments of issue 27."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from capacity.catalog.loader import DATA_DIR, Catalog, default_catalog, parse_gpu
from capacity.catalog.moe_data import ep_knob_data, imbalance_data, parse_ep_knobs, parse_imbalance
from capacity.errors import CatalogError, InputError
from capacity.model.ep_knobs import (
    EpKnobs,
    grouped_gemm_eff,
    remote_nodes_per_token,
    typical_ep_knobs,
)
from capacity.model.expert_parallel import (
    EpLayout,
    Overlap,
    all_to_all_ms,
    bound_ms,
    compute_parts_ms,
    ep_layout,
    ep_memory,
    ep_setup,
    ep_step,
    plan_ep,
    prefill_comm_us_per_token,
    prefill_tok_s_per_gpu,
)
from capacity.model.moe_imbalance import (
    coverage,
    exponent_for_coverage,
    exponent_for_gini,
    family_exponent,
    gini,
    imbalance_factor,
    placement_imbalance,
    sampling_imbalance,
    static_imbalance,
    zipf_shares,
)
from capacity.model.parallel import DEFAULT_NCCL_GB
from capacity.model.roofline import attention_flops_per_token

PENDING_GB200 = DATA_DIR / "gpus" / "gb200.toml.pending"


def with_gb200() -> Catalog:
    """The catalog with GB200, whether it is bundled already or still pending (its file waits
    for the planner to handle the [4, 72] node sizes of data/nodes.toml's [gb200])."""
    cat = default_catalog()
    if "gb200" in cat.gpus or not PENDING_GB200.is_file():
        return cat
    import tomllib
    g = parse_gpu(PENDING_GB200, tomllib.loads(PENDING_GB200.read_text(encoding="utf-8")))
    return Catalog(models=cat.models, gpus={**cat.gpus, "gb200": g}, formats=cat.formats)


TYPICAL = typical_ep_knobs(overlap=0.45, layer_overhead_us=80.0)
X_B = 634.0 / (1.0 - 8 / 256)  # DeepSeek-V3's routed-expert parameters, billions
MLA_BYTES_PER_TOKEN = (512 + 64) * 2 * 61  # bf16 latent, 61 layers


def test_all_to_all_over_nvlink_by_hand() -> None:
    s = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8), context_tokens=1000)
    assert s.layout.scale_up and s.moe_layers == 58
    per_gpu = 1024 / 8 * 8 * 7168 * (1 + 2)  # tokens x k x hidden x (FP8 + BF16) bytes
    per_layer_s = 7 / 8 * per_gpu / 450e9 + 2 * 8e-6
    assert all_to_all_ms(s, 1024) == pytest.approx(58 * per_layer_s * 1e3, rel=1e-12)
    assert all_to_all_ms(s, 1024) == pytest.approx(3.411, abs=1e-3)


def test_all_to_all_over_the_nic_by_hand() -> None:
    lay = ep_layout("h100-sxm", 16)
    assert (lay.nodes, lay.scale_up, lay.domain_ranks) == (2, False, 8)
    s = ep_setup("deepseek-v3", "h100-sxm", lay, context_tokens=1000)
    assert s.scale_out_gb_s == pytest.approx(50.0)  # 400 Gb/s per GPU
    per_gpu = 1024 / 16 * 8 * 7168 * 3
    nvlink_s, nic_s = 7 / 16 * per_gpu / 450e9, 8 / 16 * per_gpu / 50e9
    assert nic_s > nvlink_s
    assert all_to_all_ms(s, 1024) == pytest.approx(58 * (nic_s + 2 * 50e-6) * 1e3, rel=1e-12)
    assert all_to_all_ms(s, 1024, imbalance=2.0, latency=False) == pytest.approx(
        58 * 2 * nic_s * 1e3, rel=1e-12)


def test_imbalance_small_case_by_hand() -> None:
    shares = zipf_shares(4, 1.0)  # 1, 1/2, 1/3, 1/4 over 25/12
    assert list(shares) == pytest.approx([0.48, 0.24, 0.16, 0.12])
    # 0.48 -> GPU0, 0.24 -> GPU1, 0.16 -> GPU1 (0.40), 0.12 -> GPU0 (GPU1 full): 0.60 / 0.50
    assert placement_imbalance(shares, 2) == pytest.approx(1.2)
    # one redundant copy of the hottest: 0.24 x 3, 0.16, 0.12 in 3 slots each -> 0.52 / 0.50
    assert placement_imbalance(shares, 2, redundant=1) == pytest.approx(1.04)
    assert sampling_imbalance(100, 8) == pytest.approx(1 + math.sqrt(2 * math.log(8) / 100))
    assert sampling_imbalance(100, 1) == 1.0
    assert imbalance_factor(experts=4, active=1, exponent=1.0, gpus=2, batch_tokens=50) == \
        pytest.approx(1.2 * (1 + math.sqrt(2 * math.log(2) / 25)))


def test_balanced_routing_is_balanced() -> None:
    assert imbalance_factor(experts=256, active=8, exponent=0.0, gpus=8) == pytest.approx(1.0)
    # 256 experts on 72 GPUs: 4 slots on some, 3 on others -> 4 / (256 / 72)
    assert imbalance_factor(experts=256, active=8, exponent=0.0, gpus=72) == pytest.approx(
        4 / (256 / 72))


def test_top_k_caps_an_experts_share() -> None:
    p = zipf_shares(16, 3.0, active=4)
    assert p.sum() == pytest.approx(1.0) and p.max() <= 0.25 + 1e-12


def test_measures_convert_to_exponents() -> None:
    s = exponent_for_gini(64, 0.24)
    assert gini(zipf_shares(64, s)) == pytest.approx(0.24, abs=1e-6)
    c = exponent_for_coverage(128, 65 / 128, 0.9)
    assert coverage(zipf_shares(128, c), 0.9) == pytest.approx(65 / 128, abs=1 / 128)
    data = imbalance_data()
    assert family_exponent(data.families["balanced"]) == 0.0
    assert data.family_of("deepseek-v3").key == "deepseek-v3"
    assert data.family_of("llama-3.1-8b").key == "balanced"
    # Qwen3-235B-A22B routes as Qwen3-30B-A3B does (128 experts, 8 active), on all 94 layers
    assert data.family_of("qwen3-235b-a22b").key == "qwen3-moe"
    assert data.models["qwen3-235b-a22b"].moe_layers == 94
    for fam in data.families.values():
        assert fam.source.strip() and fam.as_of.strip()


def test_bad_imbalance_file_is_named() -> None:
    with pytest.raises(CatalogError, match="balanced"):
        parse_imbalance("[family.x]\nname='x'\nmeasure='exponent'\nvalue=1\nsource='s'\n"
                        "as_of='2026'\n")
    with pytest.raises(CatalogError, match="measure 'skew'"):
        parse_imbalance("[family.balanced]\nname='b'\nmeasure='skew'\nvalue=0\nsource='s'\n"
                        "as_of='2026'\n")


def test_memory_per_gpu_by_hand() -> None:
    s = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8), context_tokens=1000)
    m = ep_memory(s)
    # FP8: 1 byte per parameter, the embedding table and output head in BF16 (2 x 129280 x
    # 7168 = 1.853 B parameters at 2 bytes): 671 + 1.853 = 672.85 GB
    emb = 2 * 129280 * 7168 / 1e9
    assert s.expert_bytes_per_param == 1.0
    assert s.variant.weights_gb == pytest.approx(671 + emb)
    assert m.shared_gb == pytest.approx(671 - X_B + emb)
    assert m.experts_gb == pytest.approx(32 * X_B / 256)
    assert m.kv_request_bytes == pytest.approx(MLA_BYTES_PER_TOKEN * 1000)
    budget = 141 * 0.9 - 671 - emb + X_B - 32 * X_B / 256 - 1.5 - DEFAULT_NCCL_GB
    assert m.kv_budget_gb == pytest.approx(budget)
    assert m.max_sequences_per_group == int(budget * 1e9 // (MLA_BYTES_PER_TOKEN * 1000))
    assert m.max_batch == 8 * m.max_sequences_per_group
    tp = ep_memory(ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8, attention_tp=8),
                            context_tokens=1000))
    assert tp.shared_gb == pytest.approx((671 - X_B + emb) / 8)  # split over the TP group
    assert tp.kv_request_bytes == pytest.approx(m.kv_request_bytes)  # MLA: whole on every rank
    red = ep_memory(ep_setup("deepseek-v3", "h200-sxm",
                             ep_layout("h200-sxm", 8, redundant_experts=32), context_tokens=1000))
    assert red.experts_gb == pytest.approx(36 * X_B / 256)


@pytest.mark.parametrize(("gpu", "ep", "tp", "red"), [
    ("h200-sxm", 8, 1, 0), ("h200-sxm", 8, 8, 32), ("h100-sxm", 16, 1, 32),
    ("h100-sxm", 16, 4, 0), ("gb200", 72, 1, 32), ("gb200", 72, 2, 0), ("b200", 8, 1, 0)])
@pytest.mark.parametrize("overlap", list(Overlap))
def test_the_spec_sheet_bounds_every_step(gpu: str, ep: int, tp: int, red: int,
                                          overlap: Overlap) -> None:
    lay = ep_layout(gpu, ep, attention_tp=tp, redundant_experts=red)
    cat = with_gb200()
    for ctx in (512, 4096, 32768):
        s = ep_setup("deepseek-v3", gpu, lay, context_tokens=ctx, catalog=cat)
        for batch in (1, 7, 64, 512, 4096, 20000):
            for eta, eff, t0 in ((1.0, 1.0, 0.0), (0.65, 0.3, 0.0), (0.46, 0.135, 2.0)):
                step = ep_step(s, batch, eta_bw=eta, eff=eff, overhead_ms=t0, overlap=overlap)
                assert step.step_ms >= step.bound_ms * (1 - 1e-12)
                assert step.bound_ms == bound_ms(s, batch)
            for k in (TYPICAL, replace(TYPICAL, overlap=0.0, layer_overhead_us=300.0)):
                step = ep_step(s, batch, overlap=overlap, knobs=k)
                assert step.step_ms >= step.bound_ms * (1 - 1e-12)


def test_prefill_bound() -> None:
    s = ep_setup("deepseek-v3", "h100-sxm", ep_layout("h100-sxm", 32, redundant_experts=32),
                 context_tokens=2000)
    spec = prefill_tok_s_per_gpu(s, 2000)
    assert prefill_tok_s_per_gpu(s, 2000, mfu=0.38, imbalance=1.1) < spec
    # per token: 2 x 37 B minus the untied embedding (0.93 B) and attention: at most F / 2P
    assert spec < 1979e12 / (2 * (37 - 7168 * 129280 / 1e9) * 1e9)


def test_prefill_is_the_same_gpu_time_under_tp_attention() -> None:
    """TP attention splits a token's shared FLOPs over its group, and the group takes that many
    times the tokens: per GPU of the deployment a prompt token costs the same (by hand at the
    spec sheet: 2 x shared + causal attention at F, experts at F, 16 H200)."""
    cat = default_catalog()
    dp = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 16), context_tokens=2000)
    tp = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 16, attention_tp=8),
                  context_tokens=2000)
    m = cat.variant("deepseek-v3").model
    f = dp.peak_tflops * 1e12
    shared = (dp.shared_params_b - m.lookup_params_b) * 1e9
    # a prefill decompresses MLA's latent: 61 x 4 x 128 x 160 a key, half the keys (causal)
    attn = 61 * 4 * 128 * 160 * 2000 / 2
    c = (2 * shared + attn) / f + 2 * dp.expert_params_b * 1e9 * dp.active / f
    assert 1 / prefill_tok_s_per_gpu(dp, 2000) == pytest.approx(c)
    assert prefill_tok_s_per_gpu(tp, 2000) == pytest.approx(prefill_tok_s_per_gpu(dp, 2000))


def test_layout_checks() -> None:
    with pytest.raises(InputError, match="divide"):
        EpLayout(ep=8, attention_tp=3)
    with pytest.raises(InputError, match="not a mixture-of-experts"):
        ep_setup("llama-3.1-8b", "h100-sxm", ep_layout("h100-sxm", 8), context_tokens=100)
    with pytest.raises(InputError, match="batch"):
        ep_step(ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8),
                         context_tokens=100), 0)


@pytest.mark.parametrize(("gpu", "n", "nodes", "scale_up"), [
    ("h200-sxm", 8, 1, True), ("h100-sxm", 16, 2, False), ("gb200", 72, 1, True)])
def test_the_three_deepseek_deployments(gpu: str, n: int, nodes: int, scale_up: bool) -> None:
    opts = plan_ep("deepseek-v3", gpu, n, prompt_tokens=2000, output_tokens=500,
                   eta_bw=0.65, eff=0.3, catalog=with_gb200())
    dp = [o for o in opts if o.layout.dp_attention and o.fits]
    assert dp and all(o.layout.nodes == nodes and o.layout.scale_up == scale_up for o in opts)
    best = opts[0]
    assert best.fits and best.tok_s_per_gpu > 0 and best.tpot_ms > 0
    assert best.batch <= 256 * n
    assert all(o.tok_s_per_gpu <= o.step.bound_tok_s_per_gpu for o in opts if o.step)


# -- the typical EP knobs (data/ep_knobs.toml, capacity/model/ep_knobs.py) --------------------
def test_grouped_gemm_eff_by_hand() -> None:
    curve = ((256.0, 0.449), (1024.0, 0.561))
    assert grouped_gemm_eff(curve, 512) == pytest.approx(0.449 + 0.112 / 2)  # halfway in log
    assert grouped_gemm_eff(curve, 32) == 0.449 and grouped_gemm_eff(curve, 1e6) == 0.561
    assert grouped_gemm_eff((), 512) == 1.0
    # DeepGEMM masked 4 x 256: gate-up 932, down 815 TFLOPS, 2/3 and 1/3 of the FLOPs, / 1979
    assert 1 / ((2 / 3) / 932 + (1 / 3) / 815) / 1979 == pytest.approx(0.449, abs=5e-4)


def test_mla_flops_remote_nodes_and_overlap_by_hand() -> None:
    m = default_catalog().variant("deepseek-v3", None).model
    assert attention_flops_per_token(m, 2000) == pytest.approx(61 * 2 * 128 * 1088 * 2000)
    # a prefill decompresses the latent: heads of head_dim 160, 4 x 128 x 160 = 81,920 a key
    assert attention_flops_per_token(m, 2000, absorbed=False) == pytest.approx(
        61 * 4 * 128 * 160 * 2000)
    assert remote_nodes_per_token(4, 8) == pytest.approx(3 * (1 - 0.75 ** 8))
    assert remote_nodes_per_token(1, 8) == 0.0
    k = EpKnobs(overlap=0.5)
    assert k.combine_ms(10.0, 4.0) == pytest.approx(10 + 0.5 * 4)
    assert EpKnobs().combine_ms(10.0, 4.0) == 10.0
    assert EpKnobs(overlap=0.0).combine_ms(4.0, 10.0) == 14.0
    with pytest.raises(InputError, match="overlap"):
        EpKnobs(overlap=1.5)


def test_typical_knobs_are_sourced() -> None:
    data = ep_knob_data()
    typ = typical_ep_knobs()
    for name, entry in data.items():
        assert entry.source.strip() and entry.derivation.strip(), name
        assert getattr(typ, name) == entry.value
    assert typ.overlap == 1.0 and typ.layer_overhead_us == 0.0  # fitted, not published
    assert typical_ep_knobs(overlap=0.4).overlap == 0.4
    with pytest.raises(CatalogError, match="source"):
        parse_ep_knobs("[knob.x]\nvalue = 0.5\n")
    with pytest.raises(CatalogError, match="increase"):
        parse_ep_knobs("[knob.x]\nvalue = [[2, 0.5], [1, 0.6]]\nsource='s'\nderivation='d'\n")


def test_compute_parts_with_knobs_by_hand() -> None:
    s = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8), context_tokens=1000)
    lookup = 7168 * 129280 / 1e9
    # FP8: 1 byte per parameter, the output head in BF16 (2 bytes; the lookup table is not read)
    shared = (671 - X_B - 2 * lookup) * 1e9 + lookup * 2e9
    bw = 4800e9
    k = EpKnobs(dense_eta_bw=0.5, kv_eta_bw=0.25,
                expert_eff_curve=((256.0, 0.449), (1024.0, 0.561)))
    attn, exp = compute_parts_ms(s, 1024, imbalance=1.0, knobs=k)
    b_g = 1024 / 8
    assert attn == pytest.approx((shared / (bw * 0.5) + b_g * MLA_BYTES_PER_TOKEN * 1000
                                  / (bw * 0.25)) * 1e3)
    # 1024 x 8 / 8 = 1024 pairs on 32 expert slots: 32 tokens per expert, the curve's flat 0.449
    flops = 2 * X_B / 256 * 1e9 * 1024
    read = 32 * X_B / 256 * 1e9 * (1 - (1 - 8 / 256) ** 1024)
    assert exp == pytest.approx(max(read / bw, flops / (1979e12 * 0.449)) * 1e3)
    # absorbed MLA at the BF16 peak: the FLOP term of the attention part
    k2 = EpKnobs(attention_dtype="bf16", attention_eff=0.5)
    attn2, _ = compute_parts_ms(s, 1024, imbalance=1.0, knobs=k2)
    mla = 61 * 2 * 128 * 1088 * 1000
    assert attn2 == pytest.approx(max(
        (shared + b_g * MLA_BYTES_PER_TOKEN * 1000) / bw,
        b_g * 2 * (671 - X_B - lookup) * 1e9 / 1979e12 + b_g * mla / (989e12 * 0.5)) * 1e3)


def test_step_with_overlap_and_layer_time_by_hand() -> None:
    lay = ep_layout("h100-sxm", 16)
    s = ep_setup("deepseek-v3", "h100-sxm", lay, context_tokens=2000)
    base = ep_step(s, 2048, overlap=Overlap.TBO)
    k = EpKnobs(overlap=0.4, layer_overhead_us=100.0)
    step = ep_step(s, 2048, overlap=Overlap.TBO, knobs=k)
    fixed = 2 * 58 * 100e-3  # two micro-batches x 58 MoE layers x 100 us, ms
    c = base.attention_ms + base.experts_ms + fixed
    assert step.fixed_ms == pytest.approx(fixed)
    assert step.step_ms == pytest.approx(max(c, base.comm_ms) + 0.6 * min(c, base.comm_ms))
    summed = ep_step(s, 2048, overlap=Overlap.SUM, knobs=k)
    one = ep_step(s, 2048, overlap=Overlap.SUM)
    assert summed.step_ms == pytest.approx(one.step_ms + 58 * 0.1)
    # NIC at 80 %: the all-to-all's wire part grows by 1 / 0.8, the latency does not
    wire = all_to_all_ms(s, 2048, latency=False)
    assert all_to_all_ms(s, 2048, latency=False, knobs=EpKnobs(scale_out_eta=0.8)) == \
        pytest.approx(wire / 0.8)


def test_prefill_comm_and_knobs_by_hand() -> None:
    s = ep_setup("deepseek-v3", "h100-sxm", ep_layout("h100-sxm", 32, redundant_experts=32),
                 context_tokens=2000)
    nic_us = 58 * 7168 * 3 * 3 * (1 - 0.75 ** 8) / 50e9 * 1e6  # 4 nodes: 2.70 remote
    assert prefill_comm_us_per_token(s) == pytest.approx(nic_us)
    assert nic_us == pytest.approx(67.4, abs=0.1)
    g = with_gb200()
    s4 = ep_setup("deepseek-v3", "gb200", ep_layout("gb200", 4), context_tokens=2000, catalog=g)
    assert prefill_comm_us_per_token(s4) == pytest.approx(58 * 7168 * 3 * 8 * 3 / 4 / 900e9 * 1e6)
    # compute at the knobs' shares, then combined with the all-to-all under the overlap
    c_s = 1 / prefill_tok_s_per_gpu(s, 2000, knobs=EpKnobs(comm_sm_share=0.5))
    assert c_s == pytest.approx(2 / prefill_tok_s_per_gpu(s, 2000))  # half the SMs: twice
    k = EpKnobs(comm_sm_share=0.5, prefill_comm=True, overlap=0.0)
    assert 1 / prefill_tok_s_per_gpu(s, 2000, knobs=k) == pytest.approx(c_s + nic_us * 1e-6)
    k1 = EpKnobs(comm_sm_share=0.5, prefill_comm=True, layer_overhead_us=50.0)
    assert 1 / prefill_tok_s_per_gpu(s, 2000, knobs=k1) == pytest.approx(
        max(c_s + 2 * 58 * 50e-6 / 16384, nic_us * 1e-6))


@pytest.mark.parametrize(("gpu", "ep", "red"), [("h100-sxm", 72, 32), ("gb200", 48, 0),
                                                ("h200-sxm", 8, 0)])
def test_typical_knobs_stay_under_the_spec_sheet(gpu: str, ep: int, red: int) -> None:
    cat = with_gb200()
    knobs = typical_ep_knobs(overlap=0.45, layer_overhead_us=80.0)
    for ctx in (1000, 8000):
        s = ep_setup("deepseek-v3", gpu, ep_layout(gpu, ep, redundant_experts=red),
                     context_tokens=ctx, catalog=cat)
        for batch in (8, 512, 8192):
            for ov in Overlap:
                step = ep_step(s, batch, overlap=ov, knobs=knobs)
                assert step.step_ms >= step.bound_ms
                assert step.step_ms >= ep_step(s, batch, overlap=ov).step_ms
        assert prefill_tok_s_per_gpu(s, ctx, knobs=knobs) < prefill_tok_s_per_gpu(s, ctx)
    opts = plan_ep("deepseek-v3", gpu, ep, prompt_tokens=2000, output_tokens=500, catalog=cat,
                   knobs=knobs)
    spec = plan_ep("deepseek-v3", gpu, ep, prompt_tokens=2000, output_tokens=500, catalog=cat)
    assert opts[0].tok_s_per_gpu < spec[0].tok_s_per_gpu


def test_tp_attention_all_reduces_by_hand() -> None:
    """TP attention in groups of 4 on 8 H200s: two all-reduces a layer of the group's
    sequences' activations over NVLink (F10: 9.58 us each, a message under 1 MiB at 50.7 GB/s);
    none under DP attention."""
    from capacity.model.expert_parallel import attention_tp_comm_ms
    tp4 = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8, attention_tp=4),
                   context_tokens=2048, kv_dtype="fp8", weights="fp8")
    # 32 sequences over 2 groups: 16 x 7,168 hidden x 2 B = 229,376 B a message
    one = 9.58e-3 + 2 * 3 / 4 * 229_376 / 50.7e9 * 1e3  # ms
    assert attention_tp_comm_ms(tp4, 32) == pytest.approx(2 * 61 * one, rel=1e-12)
    assert 2 * 61 * one == pytest.approx(1.997, abs=1e-3)
    dp = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8),
                  context_tokens=2048, kv_dtype="fp8", weights="fp8")
    assert attention_tp_comm_ms(dp, 32) == 0.0
    # in the step: each micro-batch of two-batch overlap pays its own, summed with compute
    st = ep_step(tp4, 64, overlap=Overlap.SUM)
    assert st.tp_comm_ms == pytest.approx(attention_tp_comm_ms(tp4, 64), rel=1e-12)
    assert st.step_ms == pytest.approx(st.attention_ms + st.experts_ms + st.comm_ms
                                       + st.tp_comm_ms, rel=1e-12)
    assert ep_step(dp, 64).tp_comm_ms == 0.0


def test_the_placement_skew_is_memoised() -> None:
    static_imbalance.cache_clear()
    a = imbalance_factor(experts=256, active=8, exponent=0.5, gpus=16, redundant=32)
    b = imbalance_factor(experts=256, active=8, exponent=0.5, gpus=16, redundant=32,
                         batch_tokens=1e9)
    assert static_imbalance.cache_info().hits >= 1
    assert a == placement_imbalance(zipf_shares(256, 0.5, 8), 16, 32)
    assert b == pytest.approx(a, rel=1e-3)


def test_mla_decode_attention_is_one_count_on_both_paths() -> None:
    """The tensor-parallel step (F4b) and the wide-EP step count DeepSeek's decode attention
    alike, in the absorbed form: 61 x 2 x 128 x (2 x 512 + 64) FLOPs a key at 2,000 tokens.
    Until 2026-12-07 the TP path counted 81,920 a key and layer, the EP path 278,528."""
    from capacity.model.scenario import decode_model, make_scenario

    cat = default_catalog()
    want = 61 * 2 * 128 * 1088 * 2000
    ep = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8), context_tokens=2000)
    assert ep.attention_flops == pytest.approx(want)
    tp = make_scenario("deepseek-v3", "h200-sxm", n_gpus=8, tp=8, context_tokens=2000,
                       catalog=cat)
    step = decode_model(tp, 0.0)
    assert float(step.attention_flops(np.array([1.0]))[0]) == pytest.approx(want)
