"""The engine step in the event model (issue 32): efficiency per forward pass (F6c), every
scheduler knob (max_num_seqs, the token budget, gpu_memory_utilization, the KV block, CPU
offload) and prefix caching inside the chunked-prefill path. Expected values are computed by
hand in each test."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from capacity.catalog.engines import engine_profile
from capacity.cli.main import main
from capacity.model.forward_pass import offload_ms, pass_slowdown, scenario_offload_ms
from capacity.model.prefix import cached_prefill_s
from capacity.model.scenario import Scenario, make_scenario
from capacity.plan.events import (
    OpenLoopPoint,
    ServiceModel,
    open_loop_load,
    service_from_scenario,
    simulate,
)
from capacity.sim.physics import SimPhysics


def _svc(**kw: object) -> ServiceModel:
    base: dict[str, object] = dict(
        slots=4, bandwidth_ms=np.full(5, 10.0), compute_ms=np.zeros(5), comm_ms=np.zeros(5),
        overhead_ms=0.0, prefill_ms=50.0, prompt_tokens=100, output_tokens=2)
    base.update(kw)
    return ServiceModel(**base)  # type: ignore[arg-type]


def _sd(m: float, half: float) -> float:
    """F6c's slowdown by hand: (1 + (m_half / m)^2.5)^(1/2.5) - 1."""
    return float((1 + (half / m) ** 2.5) ** 0.4 - 1)


def test_pass_slowdown_by_hand() -> None:
    # step_mfu(512, mfu=1, m_half=256) = 1 / (1 + 0.5^2.5)^0.4 = 1 / 1.067278: the GEMMs take
    # 6.7% longer than at the plateau; at the ridge (m = m_half) 2^0.4 - 1 = 0.3195
    assert pass_slowdown(512, 256) == pytest.approx(_sd(512, 256)) == pytest.approx(0.067278,
                                                                                    abs=1e-6)
    assert pass_slowdown(256, 256) == pytest.approx(2 ** 0.4 - 1)
    assert pass_slowdown(2048, 128) == pytest.approx((1 + (128 / 2048) ** 2.5) ** 0.4 - 1)
    assert pass_slowdown(512, 0) == 0.0          # constant MFU: nothing stretches


def test_mixed_step_runs_the_chunks_at_the_pass_efficiency() -> None:
    # 0.5 ms per prompt token at the plateau, 0.3 of it MFU-bound; a 50-token chunk rides with
    # 2 decode tokens: m = 52, slowdown (1 + (100 / 52)^2.5)^0.4 - 1 = 1.0665; prefill =
    # 25 + 15 x 1.0665 = 40.998 ms, above the 10 ms weight read
    k = np.arange(101, dtype=np.float64)
    svc = _svc(chunk_tokens=64, prefill_cum_ms=0.5 * k, mfu_cum_ms=0.3 * k, mfu_half_tokens=100)
    assert svc.mixed_step_ms(2, [(0, 50)]) == pytest.approx(25 + 15 * _sd(52, 100))
    assert svc.mixed_step_ms(2, [(0, 50)]) == pytest.approx(40.98, abs=0.01)
    flat = _svc(chunk_tokens=64, prefill_cum_ms=0.5 * k, mfu_cum_ms=0.3 * k)
    assert flat.mixed_step_ms(2, [(0, 50)]) == pytest.approx(25.0)   # m_half 0: today's
    # a larger pass runs nearer the plateau: 2 decode + 60 tokens, 30 + 18 x slowdown(62)
    assert svc.mixed_step_ms(2, [(0, 60)]) == pytest.approx(30 + 18 * _sd(62, 100))


def test_whole_prompt_batch_shares_one_pass_efficiency() -> None:
    # two 1,000-token prompts at m_half 500, each 130 ms alone, 60 ms of it MFU-bound at the
    # plateau: together one pass of 2,000 tokens runs nearer the plateau, 2 x 130 + 120 x
    # (slowdown(2000) - slowdown(1000)) = 260 + 120 x (0.012377 - 0.067278) = 253.412 ms
    svc = _svc(prompt_tokens=1000, prefill_ms=130.0, prefill_mfu_ms=60.0, mfu_half_tokens=500)
    assert svc.prompt_pass_ms([False]) == pytest.approx(130.0)
    assert svc.prompt_pass_ms([False, False]) == pytest.approx(
        260 + 120 * (_sd(2000, 500) - _sd(1000, 500)))
    assert svc.prompt_pass_ms([False, False]) == pytest.approx(253.412, abs=1e-3)


def test_offload_by_hand() -> None:
    # 4 GiB over PCIe 5.0 x16 (63 GB/s): 4 x 1.073741824 / 63 s = 68.174 ms per pass
    assert offload_ms(4, 63.0) == pytest.approx(4 * 1.073741824 / 63 * 1e3)
    svc = _svc(offload_ms=5.0)
    assert float(svc.step_ms[2]) == pytest.approx(15.0)          # 10 ms step + 5 ms
    assert svc.prompt_pass_ms([False, False]) == pytest.approx(105.0)   # once per pass
    with pytest.raises(Exception, match="exceeds"):
        scenario_offload_ms(_qwen(), 100.0)


def _qwen(**kw: object) -> Scenario:
    base: dict[str, object] = dict(vram_gb=80.0, util=0.9, weights_gb=16.0, overhead_gb=2.0,
                                   context_tokens=2048, prompt_tokens=512)
    base.update(kw)
    return make_scenario("qwen3-8b", "h100-sxm", **base)  # type: ignore[arg-type]


def test_kv_pool_knobs_by_hand() -> None:
    """Qwen3-8B KV: 36 layers x 8 heads x 128 x 2 (K, V) x 2 bytes = 147,456 B a token; a
    512 + 256-token request in 16-token pages holds 768 tokens = 113,246,208 B. Pool: 80 GB x
    0.9 - 16 - 2 = 54e9 B -> floor(54e9 / 113,246,208) = 476 (under vLLM's 1,024 on H100)."""
    per = 768 * 147_456
    s = _qwen()
    assert service_from_scenario(s, output_tokens=256, engine="vllm").slots == \
        math.floor(54e9 / per) == 476
    # gpu_memory_utilization 0.8: 64 - 18 = 46e9 -> 406
    low = service_from_scenario(_qwen(util=0.8), output_tokens=256, engine="vllm")
    assert low.slots == math.floor(46e9 / per) == 406
    # --cpu-offload-gb 2: the pool gains 2 GiB -> floor(56.147e9 / per) = 495; every pass
    # streams 2 GiB over PCIe 5.0 (63 GB/s): 34.09 ms
    off = service_from_scenario(s, output_tokens=256, engine="vllm", offload_gib=2.0)
    assert off.slots == math.floor((54e9 + 2 * 2**30) / per) == 495
    assert off.offload_ms == pytest.approx(2 * 1.073741824 / 63 * 1e3)
    # --block-size 256: 768 tokens take 3 pages = 768 tokens still; 640 + 256 = 896 -> 1,024
    blk = service_from_scenario(_qwen(prompt_tokens=640), output_tokens=256, engine="vllm",
                                block_tokens=256)
    assert blk.slots == math.floor(54e9 / (1024 * 147_456)) == 357
    # max_num_seqs caps the slots
    assert service_from_scenario(s, output_tokens=256, engine="vllm", max_num_seqs=64).slots == 64


def test_prefix_hits_are_spread_evenly() -> None:
    svc = _svc(cached_tokens=80, prefix_share=0.5)
    assert svc.prefix_hits(10).tolist() == [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
    every = _svc(cached_tokens=80, prefix_share=1.0)
    assert every.prefix_hits(4).tolist() == [0, 1, 1, 1]   # the first computes the prefix


def test_prefix_cache_in_the_event_loop_by_hand() -> None:
    # one client, whole prompts: request 0 prefills 20 ms, every later one hits (5 ms)
    svc = _svc(slots=1, bandwidth_ms=np.array([0.0, 10.0]), compute_ms=np.zeros(2),
               comm_ms=np.zeros(2), prefill_ms=20.0, cached_tokens=80, prefix_share=1.0,
               hit_prefill_ms=5.0)
    q = simulate(svc, concurrency=1, n_requests=10, warmup_fraction=0.0)
    assert q.mean_ttft_ms == pytest.approx((20 + 9 * 5) / 10)
    assert q.ttft_ms[0.5] == pytest.approx(5.0)


def test_chunked_prefix_hit_adds_up_to_the_prefix_model() -> None:
    """One model of a cached prefix: a hit prompt's chunks in the event model (and in the
    simulated endpoint) add up to `prefix.cached_prefill_s`, overhead and all."""
    s = _qwen(prefill_overhead_ms=5.0, mfu=0.5, mfu_half_tokens=0.0)
    svc = service_from_scenario(s, output_tokens=64, engine="vllm", prefix_tokens=400,
                                prefix_share=1.0)
    whole = float(cached_prefill_s(s, 512, 400)) * 1e3
    assert svc.chunk_ms(400, 112) + svc.hit_first_ms == pytest.approx(whole)
    assert svc.hit_prefill_ms == pytest.approx(whole)
    phys = SimPhysics(s, profile=engine_profile("vllm"))
    assert (phys.chunk_s(400, 112) + phys.hit_first_s(512, 400)) * 1e3 == pytest.approx(whole)


def test_event_model_and_sim_share_the_pass_formula() -> None:
    s = _qwen(mfu=0.6, mfu_half_tokens=256.0)
    svc = service_from_scenario(s, output_tokens=64, engine="vllm")
    phys = SimPhysics(s, profile=engine_profile("vllm"))
    for chunks in ([(0, 512)], [(0, 200), (0, 300)]):
        assert phys.mixed_step_s(0, 512.0, chunks) * 1e3 == pytest.approx(
            svc.mixed_step_ms(0, chunks))
    # one whole prompt alone is the Explorer's TTFT (F6c at the prompt's own tokens)
    assert svc.mixed_step_ms(0, [(0, 512)]) == pytest.approx(svc.prefill_ms)


def _open(s: Scenario, rate: float, **kw: Any) -> OpenLoopPoint:
    return open_loop_load(s, engine="vllm", output_tokens=128, stages=[[(rate, 20.0)]],
                          **kw)[1][0]


@pytest.mark.slow
def test_each_knob_moves_the_prediction_the_engine_way() -> None:
    """Hand-reasoned directions at a busy open loop (typical-like knobs, m_half 256):
    a larger token budget puts more prompt tokens in each pass (nearer the plateau) -> lower
    TTFT; CPU offload adds a host-link read to every step -> higher ITL; a cached prefix skips
    most of the prefill -> lower TTFT; a lower memory utilisation or fewer seqs at a load above
    the slots -> higher TTFT."""
    s = _qwen(mfu=0.5, mfu_half_tokens=256.0, eta_bw=0.8)
    base = _open(s, 30.0)
    small = _open(s, 30.0, chunk_tokens=1024)
    assert small.ttft_mean_ms > base.ttft_mean_ms
    off = _open(s, 30.0, offload_gib=1.0)
    assert off.itl_mean_ms > base.itl_mean_ms + 10
    pre = _open(s, 30.0, prefix_tokens=384, prefix_share=0.9)
    assert pre.ttft_mean_ms < base.ttft_mean_ms
    few = _open(s, 30.0, max_num_seqs=8)
    assert few.ttft_mean_ms > base.ttft_mean_ms
    tight = _open(_qwen(mfu=0.5, mfu_half_tokens=256.0, eta_bw=0.8, util=0.245), 30.0)
    assert tight.ttft_mean_ms > base.ttft_mean_ms


def test_cli_knobs_and_misuse(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--vram", "80",
            "--weights-gb", "16", "--overhead-gb", "2", "--ctx", "2048", "--prompt-tokens",
            "512", "--output-tokens", "256", "--concurrency", "4", "--engine", "vllm",
            "--format", "json"]
    assert main(args + ["--gpu-memory-utilization", "0.8", "--cpu-offload-gb", "2"]) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    # 64 - 18 = 46e9 + 2 GiB = 48.147e9 / 113,246,208 = 425.2 -> 425 slots
    assert load["slots_per_replica"] == 425
    assert load["offload_ms_per_pass"] == pytest.approx(2 * 1.073741824 / 63 * 1e3)
    assert main(args + ["--prefix-tokens", "400", "--prefix-share", "0.5"]) == 0
    assert json.loads(capsys.readouterr().out)["load"]["cached_prefix_tokens"] == 400
    assert main(["plan", "--cpu-offload-gb", "2"]) == 2
    assert main(["plan", "--prefix-tokens", "100"]) == 2
    assert main(args + ["--cpu-offload-gb", "100"]) == 2
    err = capsys.readouterr().err
    assert "exceeds" in err and "Traceback" not in err


def test_host_links_catalog() -> None:
    from capacity.catalog.host_links import host_link, parse_host_links
    from capacity.errors import CatalogError

    assert host_link("h100-sxm").gb_s == 63.0          # PCIe 5.0 x16: 32 GT/s x 16 x 128/130 / 8
    assert host_link("no-such-gpu").link == "PCIe 4.0 x16"
    with pytest.raises(CatalogError, match="default"):
        parse_host_links('[x]\nlink = "a"\ngb_s = 1.0\nsource = "s"\n')
    with pytest.raises(CatalogError, match="gb_s"):
        parse_host_links('[default]\nlink = "a"\ngb_s = 0.0\nsource = "s"\n')


@pytest.mark.slow
def test_explorer_load_view_runs_the_cli_prefix_cache() -> None:
    """The Explorer's load view and `capacity plan --rate --prefix-tokens` are one computation:
    the what-if's URL-carried shared prefix is the engine's prefix cache on both surfaces."""
    from app import cache
    from capacity.catalog.loader import default_catalog
    from capacity.report.urlstate import ExplorerState

    state = ExplorerState(engine="vllm", load=4.0, prefix=4000, prefix_share=0.9)
    view = cache.load_view(state)
    s = state.scenario(default_catalog())
    seconds = min(max(60.0, 400.0 / 4.0), cache.OPEN_LOOP_REQUESTS / 4.0)
    _, points = open_loop_load(s, engine="vllm", output_tokens=state.out,
                               stages=[[(4.0, seconds)]], prefix_tokens=4000, prefix_share=0.9)
    assert view.point is not None
    assert view.point.ttft_ms == points[0].ttft_ms
    plain = cache.load_view(ExplorerState(engine="vllm", load=4.0))
    assert plain.point is not None and plain.point.ttft_ms[0.5] > view.point.ttft_ms[0.5]
