"""Engine profiles (data/engines.toml, `capacity.catalog.engines`): the simulated engine and the
event model follow the same one, and agree with each other under each."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from capacity.catalog.engines import (
    DEFAULT_ENGINE,
    engine_names,
    engine_profile,
    parse_profiles,
)
from capacity.errors import CatalogError, InputError
from capacity.fit.typical import engines as typical_engines
from capacity.model.roofline import mixed_step_time_ms
from capacity.model.scenario import decode_model, evaluate, make_scenario
from capacity.plan.events import service_from_scenario, simulate
from capacity.plan.queueing import analytic_latency
from capacity.sim.scheduler import SimConfig, SimPhysics, Simulator
from capacity.sim.virtual import Workload, run_virtual

ENGINES = ("chapter", "vllm", "vllmv0", "sglang", "llamacpp")


def test_profiles_carry_the_engines_defaults_and_their_sources() -> None:
    assert engine_names()[0] == DEFAULT_ENGINE and set(engine_names()) == set(ENGINES)
    for key in ENGINES:
        p = engine_profile(key)
        assert p.source and p.as_of
    vllm = engine_profile("vLLM")
    assert (vllm.max_seqs, vllm.token_budget_tokens, vllm.kv_block_tokens) == (256, 2048, 16)
    assert vllm.mixed and vllm.preempt and vllm.kv_admission == "tokens"
    # vLLM's larger defaults on >= 70 GiB GPUs, except the A100
    big = vllm.for_gpu("h100-sxm", 80.0)
    assert (big.max_seqs, big.token_budget_tokens) == (1024, 8192)
    assert vllm.for_gpu("a100-80gb", 80.0).token_budget_tokens == 2048
    sg = engine_profile("sglang")
    assert [sg.for_gpu("g", m).token_budget_tokens for m in (24, 80, 192)] == [2048, 8192, 16384]
    assert not sg.mixed and sg.reserve_output_share == 0.7
    ll = engine_profile("llama.cpp")
    assert ll.kv_admission == "context" and ll.mixed and ll.token_budget_tokens == 2048
    chapter = engine_profile()
    assert not chapter.chunked and not chapter.mixed and chapter.max_seqs == 256
    # the typical-efficiency tables of the same file still load, without the profiles
    assert "vllm" in typical_engines() and "profile" not in typical_engines()


@pytest.mark.parametrize(("text", "match"), [
    ('[profile.x]\nname = "x"\n', "needs name"),
    ('[profile.x]\nname="x"\nmax_seqs=4\ntoken_budget=0\nmixed=true\nkv_admission="context"\n'
     'kv_block_tokens=1\nreserve_output_share=0.0\npreempt=false\nsource="s"\nas_of="a"\n',
     "mixed step needs a token budget"),
    ('[profile.x]\nname="x"\nmax_seqs=4\ntoken_budget=8\nmixed=true\nkv_admission="context"\n'
     'kv_block_tokens=1\nreserve_output_share=0.0\npreempt=true\nsource="s"\nas_of="a"\n',
     "preemption needs"),
    ('[profile.x]\nname="x"\nmax_seqs=4\ntoken_budget=8\nmixed=true\nkv_admission="context"\n'
     'kv_block_tokens=1\nreserve_output_share=0.0\npreempt=false\nsource="s"\nas_of="a"\n'
     'kv_attention="paged"\n', "kv_attention must be one of sequence, unified"),
    ("[profile.x\n", "engines.toml"),
])
def test_bad_profiles_are_clear_errors(text: str, match: str) -> None:
    with pytest.raises(CatalogError, match=match):
        parse_profiles(text)


def test_unknown_engine_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="unknown engine 'tgi'.*chapter, llamacpp"):
        SimConfig(engine="tgi")


def run(engine: str, scenario: Any, workload: Workload) -> list[dict[str, Any]]:
    return run_virtual(scenario, workload, SimConfig(engine=engine))


@pytest.mark.slow
def test_vllm_admits_by_the_tokens_held_where_the_chapter_reserves_the_context() -> None:
    # the example: sized at 8K, one-thousand-token requests. Reserving 8K each, the
    # 4090 holds 53 of 150 users' requests (C_vram); vLLM's paged KV holds what they really
    # use (about 1,000 tokens each, in the hybrid model's 528-token blocks beside its states:
    # 166 fit) and admits all 150
    s = make_scenario()  # Qwen3.5-9B AWQ, RTX 4090, 8K
    w = Workload(prompt_tokens=800, output_tokens=200, requests=300, clients=150)
    peak: dict[str, int] = {}
    for engine in ("chapter", "vllm", "sglang"):
        sim = Simulator(s, SimConfig(engine=engine), clock="virtual")
        sim.now_s = 0.0
        for k in range(150):
            sim.submit(prompt_tokens=800, max_tokens=200, ignore_eos=True, fault=None,
                       arrival_s=0.0, seq_id=f"r{k}")
        while (step := sim.next_step()) is not None:
            sim.now_s += step.duration_s
            sim.complete(step)
        peak[engine] = sim.max_batch_seen
        assert len(sim.truth) == 150 and sim.preemptions == 0
    assert peak == {"chapter": 53, "vllm": 150, "sglang": 150}
    queued = {e: np.median([r["queue_ms"] for r in run(e, s, w)]) for e in ("chapter", "vllm")}
    assert queued["vllm"] < 0.5 * queued["chapter"]


def test_a_mixed_step_is_one_forward_pass_over_decode_and_chunks() -> None:
    s = make_scenario()
    p = SimPhysics(s, profile=engine_profile("vllm"))
    # chunks add up to the whole prompt's prefill (F6 with attention: later chunks cost more)
    whole = p.prefill_s(6000)
    parts = [p.chunk_s(done, 2000) for done in (0, 2000, 4000)]
    assert sum(parts) == pytest.approx(whole, rel=1e-12)
    assert parts[0] < parts[1] < parts[2]
    # one pass: the chunk's arithmetic joins the step's, the weights are read once
    d = evaluate(s, [10.0], [3008.0]).decode  # the 16-token bucket of 3000
    bw, comp = float(d.bandwidth_ms[0]), float(d.compute_ms[0])
    rest = float(d.overhead_ms + d.comm_ms[0] + d.serial_ms[0])
    assert p.mixed_step_s(10, 3000.0, [(2000, 2000)]) == pytest.approx(
        (rest + max(bw, comp + parts[1] * 1e3)) / 1e3, rel=1e-12)
    # cheaper than a step followed by the chunk, never cheaper than either alone
    assert p.mixed_step_s(10, 3000.0, [(2000, 2000)]) < p.step_s(10, 3000.0) + parts[1]
    assert p.mixed_step_s(10, 3000.0, [(2000, 2000)]) >= max(p.step_s(10, 3000.0), parts[1])
    # no decoding sequence: the weight read or the prompt's arithmetic, whichever is longer
    d0 = evaluate(s, [0.0], [16.0]).decode
    assert p.mixed_step_s(0, 0.0, [(0, 2000)]) == pytest.approx(
        (float(d0.overhead_ms + d0.comm_ms[0] + d0.serial_ms[0])
         + max(float(d0.bandwidth_ms[0]), float(d0.compute_ms[0]) + parts[0] * 1e3)) / 1e3,
        rel=1e-12)
    assert p.mixed_step_s(10, 3000.0, []) == p.step_s(10, 3000.0)


def test_mixed_step_time_by_hand() -> None:
    # bandwidth 10 ms, compute 2 ms: a 5 ms chunk hides under the weight read, a 20 ms one
    # makes the pass compute-bound (2 + 20); overheads add outside the overlap
    kw = {"bandwidth_ms": 10.0, "compute_ms": 2.0, "comm_ms": 0.0, "overhead_ms": 0.0,
          "serial_ms": 0.0}
    assert mixed_step_time_ms(**kw, prefill_ms=5.0) == 10.0
    assert mixed_step_time_ms(**kw, prefill_ms=20.0) == 22.0
    assert mixed_step_time_ms(**{**kw, "comm_ms": 1.5, "overhead_ms": 3.0, "serial_ms": 0.5},
                              prefill_ms=20.0) == 27.0


def drive(engine: str, scenario: Any, requests: list[tuple[float, int, int]]
          ) -> tuple[Simulator, list[tuple[float, list[str]]]]:
    """Run the engine on (arrival s, prompt, output) requests; every step's (duration s, ids
    of the sequences it gave a token)."""
    sim = Simulator(scenario, SimConfig(engine=engine), clock="virtual")
    sim.now_s = 0.0
    pending = sorted(requests)
    steps: list[tuple[float, list[str]]] = []
    k = 0
    while True:
        while pending and pending[0][0] <= sim.now_s:
            at, prompt, out = pending.pop(0)
            sim.submit(prompt_tokens=prompt, max_tokens=out, ignore_eos=True, fault=None,
                       arrival_s=at, seq_id=f"r{k}")
            k += 1
        step = sim.next_step()
        if step is None:
            if not pending:
                return sim, steps
            sim.now_s = pending[0][0]
            continue
        sim.now_s += step.duration_s
        steps.append((step.duration_s, [q.id for q in step.emit]))
        sim.complete(step)


def test_vllm_prefills_a_long_prompt_in_budget_sized_chunks_beside_the_decodes() -> None:
    # r0 (100-token prompt) decodes; r1, an 8,000-token prompt, arrives: vLLM cuts it into
    # chunks of the 2,048-token budget less r0's decode token, and every one of those steps
    # also gives r0 a token; the chapter prefills r1 whole while r0 waits
    s = make_scenario()
    reqs = [(0.0, 100, 200), (0.2, 8000, 8)]
    phys = SimPhysics(s, profile=engine_profile("vllm"))
    sim, steps = drive("vllm", s, reqs)
    mixed = [(d, ids) for d, ids in steps if d > 0.1]
    assert [ids for _, ids in mixed] == [["r0"], ["r0"], ["r0"], ["r0", "r1"]]
    done = 0
    for (d, _), n in zip(mixed, (2047, 2047, 2047, 1859), strict=True):
        ctx = 100.0  # r0 holds 100-300 tokens: its decode step is tiny beside the chunk
        assert d == pytest.approx(phys.chunk_s(done, n) + phys.step_s(1, ctx), rel=0.01)
        done += n
    assert sum(phys.chunk_s(d, n) for d, n in ((0, 2047), (2047, 2047), (4094, 2047),
                                               (6141, 1859))) == pytest.approx(
        phys.prefill_s(8000), rel=1e-12)
    _, chapter_steps = drive("chapter", s, reqs)
    stalls = [(d, ids) for d, ids in chapter_steps if d > 0.1]
    assert len(stalls) == 1 and stalls[0][1] == ["r1"]  # r0 waits the whole prefill
    assert stalls[0][0] == pytest.approx(phys.prefill_s(8000), rel=1e-12)
    assert max(d for d, _ in mixed) < 0.3 * stalls[0][0]


def test_llamacpp_has_fixed_slots_with_a_reserved_context() -> None:
    s = make_scenario(context_tokens=4096)
    truth = run("llamacpp", s, Workload(prompt_tokens=300, output_tokens=32, requests=16,
                                        clients=8))
    sim = Simulator(s, SimConfig(engine="llamacpp"), clock="virtual")
    assert sim.physics.slots == 4  # --parallel auto = 4 slots, each with the 4K context
    assert Simulator(s, SimConfig(engine="llamacpp", max_num_seqs=6),
                     clock="virtual").physics.slots == 6
    # 8 clients on 4 slots: half of each round waits for a slot
    assert sum(r["queue_ms"] > 0 for r in truth) >= 8
    assert all(r["status"] == "ok" and r["output_tokens"] == 32 for r in truth)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_full_kv_pool_preempts_and_recomputes(engine: str) -> None:
    # an 8.6 GB card leaves 540e6 B of KV pool: 20 requests of 500 + 400 tokens need far more,
    # so the newest are preempted (recomputed later); every request still ends with all its
    # tokens. Qwen3.5-9B is hybrid: a request holds its 24 linear layers' states beside its
    # attention tokens (`held_request_bytes`). vLLM: 528-token blocks of 8 x 4,096 B a token
    # (17,301,504 B) after 24 state pages of 528 x 4,096 B: floor((540e6 - 51,904,512) /
    # 17,301,504) = 28 blocks, 14,784 tokens. SGLang: token pages after 24 states of
    # 2,146,304 B: floor((540e6 - 51,511,296) / 32,768) = 14,907 tokens.
    s = make_scenario(vram_gb=8.6)
    sim = Simulator(s, SimConfig(engine=engine), clock="virtual")
    # as vLLM: a request must fit the pool
    assert sim.max_model_len == {"vllm": 14_784, "sglang": 14_907}[engine]
    truth = run(engine, s, Workload(prompt_tokens=500, output_tokens=400, requests=60,
                                    clients=20))
    assert len(truth) == 60 and all(r["output_tokens"] == 400 for r in truth)
    assert sum(r["preemptions"] for r in truth) > 0
    with pytest.raises(InputError, match="does not fit"):
        sim.submit(prompt_tokens=15_000, max_tokens=10, ignore_eos=True, fault=None,
                   arrival_s=0.0)


def _quantiles(truth: list[dict[str, Any]], key: str) -> tuple[float, float]:
    x = np.array([r[key] for r in truth])
    return float(np.quantile(x, 0.5)), float(np.quantile(x, 0.9))


def test_llamacpp_prompts_sent_together_attend_across_one_kv_cache() -> None:
    """llama.cpp keeps every slot's cells in one KV buffer and each ubatch attends to all of
    them (`forward_pass.unified_kv_extra_pairs`): four 359-token prompts sent together reach
    their first tokens later than four prompts' prefill alone, by the pairs across them:
    1,436 tokens in ubatches of 512, 512 x 512 + 512 x 1,024 + 412 x 1,536 = 1,419,264, less
    4 x 359 x 512 = 735,232 alone: 684,032 pairs. The simulated llama.cpp endpoint adds the same. On the
    realtest (docs/accuracy.md) such a burst measured 3,978 ms against 3,588 alone."""
    from dataclasses import replace

    from capacity.plan.closed_loop import burst_ttft_ms
    s = make_scenario(context_tokens=423, prompt_tokens=359)
    svc = service_from_scenario(s, output_tokens=64, engine="llamacpp")
    assert svc.unified_kv is not None and svc.slots == 4
    alone = replace(svc, unified_kv=None)
    extra = svc.unified_kv.extra_ms([(0, 359)] * 4)
    assert extra == pytest.approx(684_032 * svc.unified_kv.pair_ms)
    assert (burst_ttft_ms(svc, concurrency=4)[0.5] - burst_ttft_ms(alone, concurrency=4)[0.5]
            == pytest.approx(extra))
    # one prompt alone adds nothing; vLLM's paged attention keeps each sequence to its cells
    assert burst_ttft_ms(svc, concurrency=1) == burst_ttft_ms(alone, concurrency=1)
    assert service_from_scenario(s, output_tokens=64, engine="vllm").unified_kv is None
    sim = SimPhysics(s, profile=engine_profile("llamacpp"))
    assert sim.unified_kv is not None
    assert sim.mixed_step_s(0, 423.0, [(0, 359)] * 4) * 1e3 == pytest.approx(
        svc.mixed_step_ms(0, [(0, 359)] * 4), rel=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_the_event_model_follows_the_simulated_engine(engine: str) -> None:
    """Event model vs `run_virtual`, same profile: TTFT and TPOT p50/p90 within 10% at light
    and heavy Poisson load (the same seeded arrivals) and in a closed-loop burst."""
    prompt, out = 2000, 64
    s = make_scenario(context_tokens=prompt + out, prompt_tokens=prompt)  # 4090: budget 2048
    svc = service_from_scenario(s, output_tokens=out, engine=engine)
    assert svc.engine == engine
    sat = svc.saturation_rate_per_s
    loads: list[dict[str, Any]] = [{"rate_per_s": 0.3 * sat}, {"rate_per_s": 0.85 * sat},
                                   {"clients": 12}]
    for load in loads:
        n = 200
        w = Workload(prompt_tokens=prompt, output_tokens=out, requests=n, seed=3, **load)
        truth = run(engine, s, w)
        if "clients" in load:
            model = simulate(svc, concurrency=load["clients"], n_requests=n, warmup_fraction=0.0)
        else:
            model = simulate(svc, rate_per_s=load["rate_per_s"], n_requests=n, seed=3,
                             warmup_fraction=0.0)
        for key, got in (("ttft_ms", model.ttft_ms), ("tpot_ms", model.tpot_ms)):
            p50, p90 = _quantiles(truth, key)
            assert p50 == pytest.approx(got[0.5], rel=0.10), (load, key)
            assert p90 == pytest.approx(got[0.9], rel=0.10), (load, key)


def test_profiles_change_the_event_models_answer() -> None:
    # 6K prompts on a 4090: vLLM's 2,048-token chunks cut the TTFT tail under load (a prompt no
    # longer waits for a whole batch of prompts), the chapter's batches cut it less
    s = make_scenario(context_tokens=6128, prompt_tokens=6000)
    chap = service_from_scenario(s, output_tokens=128)
    vllm = service_from_scenario(s, output_tokens=128, engine="vllm")
    assert (vllm.chunk_tokens, vllm.mixed, chap.chunk_tokens) == (2048, True, None)
    rate = 0.5 * chap.saturation_rate_per_s
    a = simulate(chap, rate_per_s=rate, n_requests=1000, seed=2)
    b = simulate(vllm, rate_per_s=rate, n_requests=1000, seed=2)
    assert b.ttft_ms[0.9] < 0.9 * a.ttft_ms[0.9]


@pytest.mark.slow  # the event model, 2 x 4,000 requests of 6K prompts (3-7 s)
def test_the_analytic_path_follows_chunked_prefill() -> None:
    """The planner's fast path with vLLM's budget vs the event model (6K prompts on a 4090):
    TTFT mean and p90 within 10% at 25% and 50% of saturation; TPOT keeps most of the prefill's
    stall (a mixed step is one forward pass: a chunk's arithmetic partly hides under the weight
    read, so the mean is at most the unchunked one's and within 5% of it here)."""
    s = make_scenario(context_tokens=6128, prompt_tokens=6000)
    svc = service_from_scenario(s, output_tokens=128, engine="vllm")
    held = evaluate(s, [0], float(6000 + 64))
    step = decode_model(s, float(held.kv_request.exact_bytes))
    np.testing.assert_allclose(step.step_ms(np.arange(svc.slots + 1)), svc.step_ms, rtol=1e-9)
    for frac in (0.25, 0.5):
        rate = frac * svc.saturation_rate_per_s
        an = analytic_latency(rate_per_s=np.array([rate]), step=step,
                              prefill_ms=np.array([svc.prefill_ms]), output_tokens=128,
                              chunk_tokens=np.array([2048.0]), prompt_tokens=6000)
        plain = analytic_latency(rate_per_s=np.array([rate]), step=step,
                                 prefill_ms=np.array([svc.prefill_ms]), output_tokens=128)
        des = simulate(svc, rate_per_s=rate, n_requests=4000, seed=2)
        assert float(an.ttft_mean_ms[0]) == pytest.approx(des.mean_ttft_ms, rel=0.1)
        assert float(an.ttft_q_ms[0]) == pytest.approx(des.ttft_ms[0.9], rel=0.1)
        mean_tpot = float(np.mean(des.tpot_ms[0.5]))
        assert float(an.tpot_ms[0]) > mean_tpot  # the mean carries the stalls; p50 does not
        assert float(an.tpot_ms[0]) <= float(plain.tpot_ms[0])
        assert float(an.tpot_ms[0]) == pytest.approx(float(plain.tpot_ms[0]), rel=0.05)
        assert float(an.ttft_q_ms[0]) < float(plain.ttft_q_ms[0])
    with pytest.raises(InputError, match="prompt length"):
        analytic_latency(rate_per_s=np.array([0.1]), step=step,
                         prefill_ms=np.array([svc.prefill_ms]), output_tokens=128,
                         chunk_tokens=np.array([2048.0]))


def _plan_for(engine: str, users: int = 120, **kw: Any) -> Any:
    from capacity.model.workload import Workload as Load
    from capacity.plan.options import PlanInputs, Slo
    from capacity.plan.search import plan

    wl = Load(peak_concurrency=users, context_tokens=8192, prompt_tokens=800, output_tokens=200)
    return plan(PlanInputs(model="qwen3.5-9b-awq", workload=wl, slo=Slo(ttft_ms=1e7, tpot_ms=1e5),
                           gpus=("rtx-4090",), engine=engine, **kw), keep_all=True)


@pytest.mark.slow
def test_the_planner_follows_the_engine() -> None:
    # 120 users of 800 + 200 tokens sized at 8K, one 4090: the chapter reserves 8K per request
    # (53 fit), vLLM's paged KV holds what they use (the hybrid Qwen3.5-9B in its 528-token
    # blocks with its states: 166, as `capacity plan --engine vllm`), llama.cpp has 4 slots
    one = {e: next(o for o in _plan_for(e).all_options
                   if o.n_gpus == 1 and o.kv_dtype == "fp16" and o.weights == "awq")
           for e in ("chapter", "vllm", "llamacpp")}
    assert one["chapter"].c_vram_per_replica == 53
    assert one["vllm"].c_vram_per_replica == 166 and one["vllm"].slots_per_replica == 166
    assert "memory" in one["chapter"].failures and "memory" not in one["vllm"].failures
    assert one["llamacpp"].slots_per_replica == 4 and "memory" in one["llamacpp"].failures
    with pytest.raises(InputError, match="unknown engine"):
        _plan_for("tgi")
    # an explicit max_num_seqs wins over the engine's default
    assert _plan_for("llamacpp", max_num_seqs=8).all_options[0].slots_per_replica <= 8


def test_cli_engine_flags(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from capacity.cli.main import build_parser, main
    from capacity.cli.sim_server import config_from_args

    assert main(["plan", "--engine", "vllm", "--prompt-tokens", "800", "--output-tokens", "200",
                 "--concurrency", "1,150", "--format", "json"]) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    # the 4090's 14.4e9 B pool over one request of 1,000 tokens in vLLM's pages of the hybrid
    # Qwen3.5-9B: 86,507,520 B (`held_request_bytes`'s example) -> 166 slots, under max_num_seqs
    assert (load["engine"], load["slots_per_replica"], load["token_budget"]) == ("vllm", 166, 2048)
    assert [p["concurrency"] for p in load["points"]] == [1, 150]
    assert main(["plan", "--engine", "llamacpp", "--concurrency", "8"]) == 0
    assert "Under load: llama.cpp server" in capsys.readouterr().out
    assert main(["plan"]) == 0
    assert "Under load" not in capsys.readouterr().out  # the chapter's output is unchanged
    assert main(["plan", "--engine", "tgi"]) != 0
    assert "unknown engine 'tgi'" in capsys.readouterr().err
    cfg = config_from_args(build_parser("sim-server").parse_args(["sim-server", "--engine", "sglang"]))
    assert (cfg.engine, cfg.max_num_seqs) == ("sglang", None)
    assert main(["size", "--peak-concurrency", "20", "--gpus", "rtx-4090", "--engine",
                 "llamacpp", "--slo-ttft-ms", "1e7", "--slo-tpot-ms", "1e5", "--format",
                 "json"]) == 0
    opts = json.loads(capsys.readouterr().out)["options"]
    # 20 users (and the headroom) on replicas of 4 slots each
    assert opts and all(o["gpus"] >= 5 and o["slots_per_replica"] == 4 for o in opts)
