"""vLLM's async scheduling (on by default since 0.14.0) and SGLang's overlap scheduler (since
0.4.0): the engine fixes step n + 1's batch when step n starts, so a request that reaches a busy
engine joins the step after the next (docs/method.md, "Scheduled one step ahead"). Expected
values are computed by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from capacity.catalog.engines import engine_profile, parse_profiles
from capacity.errors import CatalogError, InputError
from capacity.fit.frontier_loop import closed_loop
from capacity.model.forward_pass import as_released, scheduled_as_released
from capacity.model.scenario import make_scenario
from capacity.plan.events import ServiceModel, run_trace, simulate
from capacity.plan.service_build import service_from_scenario
from capacity.sim.scheduler import SimConfig, Simulator


def _svc(**kw: object) -> ServiceModel:
    """Bandwidth 10 ms a step at every batch, no compute, 0.5 ms a prompt token (100-token
    prompts: 50 ms), 11-token answers (10 decode steps), a 200-token budget: a prompt's whole
    chunk rides one step of max(10, 50) = 50 ms."""
    base: dict[str, object] = dict(
        slots=4, bandwidth_ms=np.full(5, 10.0), compute_ms=np.zeros(5), comm_ms=np.zeros(5),
        overhead_ms=0.0, prefill_ms=50.0, prompt_tokens=100, output_tokens=11,
        chunk_tokens=200, prefill_cum_ms=0.5 * np.arange(101, dtype=np.float64))
    base.update(kw)
    return ServiceModel(**base)  # type: ignore[arg-type]


def test_a_request_that_reaches_a_busy_engine_waits_one_step_more() -> None:
    """A at 0 ms, B at 5 ms (during A's prefill step, 0..50). Waiting for each step: B joins
    the next step, 50..100 (A's first decode and B's chunk: 50 ms), first token at 100, TTFT
    95. Scheduled ahead: the step after A's prefill was fixed at 0, before B came: it decodes A
    alone, 50..60; B rides 60..110, TTFT 105, one 10 ms step more. A, on an idle engine,
    starts at once either way: 50."""
    arrivals = np.array([0.0, 5.0])
    sync = run_trace(_svc(), arrivals, None, 2)
    ahead = run_trace(_svc(schedule_ahead=True), arrivals, None, 2)
    assert list(sync.first_ms - arrivals) == pytest.approx([50.0, 95.0])
    assert list(ahead.first_ms - arrivals) == pytest.approx([50.0, 105.0])
    # A's 10 decode steps, one of them 50 ms with B's chunk, end at 190 either way; B's own
    # 10 follow its first token: 200 and 210
    assert list(sync.finish_ms) == pytest.approx([190.0, 200.0])
    assert list(ahead.finish_ms) == pytest.approx([190.0, 210.0])


def test_prefill_that_pauses_decoding_waits_the_same_step() -> None:
    """SGLang's scheduling (a prefill batch pauses decoding), the same arrivals: waiting for
    each step, B's prompt is the next batch, 50..100, TTFT 95, and both decode from 100 (10
    steps each: 200). Scheduled ahead, the step after A's prefill was fixed at 0: A's first
    decode step alone, 50..60; B's batch 60..110, TTFT 105; A's other 9 steps ride with B's
    10 from 110: A ends at 200, B at 210."""
    arrivals = np.array([0.0, 5.0])
    sync = run_trace(_svc(mixed=False), arrivals, None, 2)
    ahead = run_trace(_svc(mixed=False, schedule_ahead=True), arrivals, None, 2)
    assert list(sync.first_ms - arrivals) == pytest.approx([50.0, 95.0])
    assert list(ahead.first_ms - arrivals) == pytest.approx([50.0, 105.0])
    assert list(sync.finish_ms) == pytest.approx([200.0, 200.0])
    assert list(ahead.finish_ms) == pytest.approx([200.0, 210.0])


def test_an_idle_engine_admits_at_once() -> None:
    """B at 1,000 ms, long after A ended (50 ms of prefill and 10 steps: 150 ms): nothing was
    scheduled ahead, so B's TTFT is its prefill, 50 ms, as A's."""
    arrivals = np.array([0.0, 1000.0])
    r = run_trace(_svc(schedule_ahead=True), arrivals, None, 2)
    assert list(r.first_ms - arrivals) == pytest.approx([50.0, 50.0])


def test_the_closed_form_waits_the_step_from_two_users() -> None:
    """Two users, a flat 10 ms step, a prompt that one step prefills (no chunk cost: extra 0),
    n = 11: K = m + n - 1 + w = 1 + 10 + 1 = 12 steps a cycle against 11; TTFT = (K - 10 - 1)
    x 10 + 10 = 20 ms against 10; one user never finds the engine busy: 11 steps, 10 ms."""
    def terms(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = np.asarray(b, dtype=np.float64)
        return np.full_like(b, 10.0), np.zeros_like(b), np.full_like(b, 10.0)
    kw: dict[str, object] = dict(terms=terms, prefill_ms=0.0, prompt_tokens=100,
                                 output_tokens=11, budget_tokens=2048, mixed=True)
    two = closed_loop(concurrency=[1.0, 2.0], ahead=True, **kw)  # type: ignore[arg-type]
    sync = closed_loop(concurrency=[1.0, 2.0], **kw)  # type: ignore[arg-type]
    assert list(two.cycle_ms) == pytest.approx([110.0, 120.0])
    assert list(two.ttft_ms) == pytest.approx([10.0, 20.0])
    assert list(sync.cycle_ms) == pytest.approx([110.0, 110.0])
    assert list(sync.ttft_ms) == pytest.approx([10.0, 10.0])


def test_the_closed_form_with_paused_prefill() -> None:
    """Whole prompts of 50 ms that pause decoding, a flat 10 ms step, n = 11 (10 decode steps).
    Two users: each waits one decode step of the other (w = 1): K = 10 + 1 = 11 decode steps a
    cycle, T = 2 x 50 + 11 x 10 = 210 ms against 200, TTFT 10 + 50 = 60 against 50 (no gap of
    one step: K / C = 5.5). Eight: K / C = 1.375, x = 0.625 one-step gaps, every request
    paired (f = min(1, 1.25)), its pair's two prompts one batch (e = 1): TTFT = 10 + 50 + 50 =
    110, T = 8 x 50 + 11 x 10 = 510. Sixteen: more endings than decode steps (C / K = 16 / 11),
    groups of G = 2 x 16 / 11 = 2.909: TTFT = 10 + 1.909 x 50 + 50 = 155.45. A 60-token budget
    under 100-token prompts: the first prompt of a pair ends 2 x 60 / 100 = 1.2 p into the
    batch, e = (1.2 + 2) / 2 - 1 = 0.6: eight users' TTFT 10 + 0.6 x 50 + 50 = 90, its prefill
    two passes of max(10 ms read, 25 ms of chunk) = 25 ms: p = 50 as whole."""
    def terms(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = np.asarray(b, dtype=np.float64)
        return np.full_like(b, 10.0), np.zeros_like(b), np.full_like(b, 10.0)
    kw: dict[str, object] = dict(terms=terms, prefill_ms=50.0, prompt_tokens=100,
                                 output_tokens=11, budget_tokens=0, mixed=False)
    ahead = closed_loop(concurrency=[1.0, 2.0, 8.0, 16.0], ahead=True,
                        **kw)  # type: ignore[arg-type]
    sync = closed_loop(concurrency=[1.0, 2.0, 8.0, 16.0], **kw)  # type: ignore[arg-type]
    assert list(ahead.ttft_ms) == pytest.approx([50.0, 60.0, 110.0, 10 + 50 * 21 / 11 + 50])
    assert list(ahead.cycle_ms) == pytest.approx([150.0, 210.0, 510.0, 910.0])
    assert list(sync.ttft_ms) == pytest.approx([50.0] * 4)
    assert list(sync.cycle_ms) == pytest.approx([150.0, 200.0, 500.0, 900.0])
    chunked = closed_loop(concurrency=[8.0], ahead=True,
                          **{**kw, "budget_tokens": 60})  # type: ignore[arg-type]
    p = 2 * max(10.0, 25.0)
    assert float(chunked.ttft_ms[0]) == pytest.approx(10.0 + 0.6 * p + p)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_simulated_engine_waits_the_same_step(engine: str) -> None:
    """The simulated vLLM and SGLang engines in virtual time, the default what-if: A at 0, B
    1 ms later. Scheduled ahead, B's TTFT is its TTFT waiting for each step plus the decode
    step of A alone that was fixed before B came (`SimPhysics.step_s` at one sequence)."""
    s = make_scenario()
    ttft = {}
    for ahead in (False, True):
        sim = Simulator(s.with_(schedule_ahead=ahead), SimConfig(engine=engine), clock="virtual")
        sim.now_s = 0.0
        for k, at in enumerate((0.0, 0.001)):
            sim.submit(prompt_tokens=500, max_tokens=50, ignore_eos=True, fault=None,
                       arrival_s=at, seq_id=f"r{k}")
        while (step := sim.next_step()) is not None:
            sim.now_s += step.duration_s
            sim.complete(step)
        ttft[ahead] = sim.truth["r1"]["ttft_ms"]
        assert sim.schedule_ahead == ahead
    one_step_ms = Simulator(s, SimConfig(engine=engine), clock="virtual").physics.step_s(
        1, 501.0) * 1e3
    assert ttft[True] - ttft[False] == pytest.approx(one_step_ms, rel=0.02)


def test_which_releases_schedule_ahead() -> None:
    vllm = engine_profile("vllm")
    assert (vllm.schedules_ahead_since, vllm.schedules_ahead_released) == ("0.14.0", "2026-01-17")
    assert vllm.schedules_ahead("vLLM 0.25.1") and vllm.schedules_ahead("0.14.0")
    assert not vllm.schedules_ahead("vLLM v0.11.0")
    assert not vllm.schedules_ahead("vLLM (OpenAI server)", "2025-04-14 (log time stamps)")
    assert vllm.schedules_ahead("not stated", "2026-07-18")
    assert vllm.schedules_ahead("not stated", "undated")   # today's release
    sglang = engine_profile("sglang")
    assert (sglang.schedules_ahead_since, sglang.schedules_ahead_released) == ("0.4.0",
                                                                               "2024-12-04")
    assert sglang.schedules_ahead("SGLang v0.5.3.post3") and sglang.schedules_ahead("0.4.0")
    assert not sglang.schedules_ahead("SGLang 0.3.6")
    assert not sglang.schedules_ahead("not stated", "2024-11-20")
    for key in ("llamacpp", "chapter", "vllmv0"):
        assert not engine_profile(key).schedules_ahead(), key
    s = make_scenario()
    assert not as_released(s, vllm, version="vLLM v0.10.2").schedule_ahead
    assert as_released(s, vllm, version="vLLM 0.15.1") == s
    assert scheduled_as_released(s, sglang, version="SGLang 0.4.0") == s
    assert not scheduled_as_released(s, sglang, version="SGLang 0.3.6").schedule_ahead
    # the service model carries it where both the release and the profile say so
    assert service_from_scenario(s, output_tokens=8, engine="vllm").schedule_ahead
    assert not service_from_scenario(s.with_(schedule_ahead=False), output_tokens=8,
                                     engine="vllm").schedule_ahead
    assert service_from_scenario(s, output_tokens=8, engine="sglang").schedule_ahead
    assert not service_from_scenario(s, output_tokens=8, engine="llamacpp").schedule_ahead


NAMED = 'schedules_ahead_name = "async scheduling"\nschedules_ahead_off = "--no-async"\n'


@pytest.mark.parametrize(("extra", "match"), [
    ('schedules_ahead_since = "0.4.0"\n', "needs schedules_ahead_name"),
    ('schedules_ahead_since = "0.4.0"\nschedules_ahead_name = "x"\nschedules_ahead_off = "y"\n',
     "needs schedules_ahead_name"),
    ('mixed = true\nschedules_ahead_since = "soon"\n' + NAMED,
     "schedules_ahead_since must be a version"),
    ('mixed = true\nschedules_ahead_since = "0.14.0"\nschedules_ahead_released = "Jan"\n' + NAMED,
     "schedules_ahead_released must be a day"),
])
def test_a_bad_release_in_a_profile_is_a_clear_error(extra: str, match: str) -> None:
    mixed = "mixed = true\n" in extra
    text = ('[profile.x]\nname="x"\nmax_seqs=4\ntoken_budget=8\n'
            + ("" if mixed else "mixed=false\n")
            + 'kv_admission="tokens"\nkv_block_tokens=16\nreserve_output_share=0.0\n'
            'preempt=true\nsource="s"\nas_of="a"\n' + extra)
    with pytest.raises(CatalogError, match=match):
        parse_profiles(text)


def test_the_published_runs_of_earlier_releases_run_without_it() -> None:
    from capacity.fit import validate_typical as vt

    groups = vt.groups_of()
    sync = {k for k, g in groups.items() if not vt._run_as(g[0], vt._scenario(g[0], None))
            .schedule_ahead}
    assert sync == {"gpt-oss-120b-mxfp4 on a100-80gb-sxm (vLLM)",
                    "gpt-oss-120b-mxfp4 on h100-sxm (vLLM)",
                    "qwen3-14b-awq on a100-80gb-sxm (vLLM)", "qwen3-8b-bf16 on h100-sxm (vLLM)"}
    # TensorRT-LLM v1.2.0rc1 and NIM 1.8.0 are not vLLM releases: today's scheduling
    assert vt._run_as(groups["qwen3-8b-bf16 on h100-sxm (TensorRT-LLM)"][0], make_scenario()
                      ).schedule_ahead


def test_the_planners_wait_is_the_busy_engines_step() -> None:
    """The analytic path with long prompts (a prompt fills the budget: none share a step): the
    mean TTFT gains (1 - exp(-C)) x s, the step at the load's concurrency C."""
    from capacity.model.scenario import decode_model, evaluate
    from capacity.plan.queueing import analytic_latency

    s = make_scenario("qwen3-8b", "h100-sxm", context_tokens=8192, prompt_tokens=6000)
    svc = service_from_scenario(s, output_tokens=200, engine="vllm")
    step = decode_model(s, float(evaluate(s, [0], 6100.0).kv_request.exact_bytes))
    kw: dict[str, object] = dict(rate_per_s=np.array([0.3 * svc.saturation_rate_per_s]),
                                 step=step, prefill_ms=np.array([svc.prefill_ms]),
                                 output_tokens=200, chunk_tokens=np.array([2048.0]),
                                 prompt_tokens=6000)
    off = analytic_latency(**kw)  # type: ignore[arg-type]
    on = analytic_latency(**kw, ahead=np.array([1.0]))  # type: ignore[arg-type]
    c, s_ms = float(off.concurrency[0]), float(off.step_ms[0])
    want = (1 - math.exp(-c)) * s_ms
    assert float(on.ttft_mean_ms[0] - off.ttft_mean_ms[0]) == pytest.approx(want, rel=1e-9)
    assert float(on.ttft_q_ms[0] - off.ttft_q_ms[0]) == pytest.approx(want, rel=1e-9)
    assert float(on.tpot_ms[0]) == float(off.tpot_ms[0])
    # the ServiceModel with it off, for the check that the event model moves the same way
    base = simulate(replace(svc, schedule_ahead=False), rate_per_s=float(kw["rate_per_s"][0]),  # type: ignore[index]
                    n_requests=600, seed=1)
    moved = simulate(svc, rate_per_s=float(kw["rate_per_s"][0]), n_requests=600, seed=1)  # type: ignore[index]
    assert moved.mean_ttft_ms > base.mean_ttft_ms


def test_the_explorers_load_view_says_it() -> None:
    """The load view's caption names the engine's scheduling one step ahead where it ran so
    (vLLM), and only there."""
    from app.cache import LoadView
    from app.explorer_view import knobs_caption

    base = LoadView(engine="vllm", slots=8, prompt_tokens=500, output_tokens=64, point=None,
                    chunk_tokens=2048, max_seqs=256, kv_page_tokens=16)
    on = knobs_caption(replace(base, schedule_ahead=True), "en")
    assert "Scheduled one step ahead (vLLM's async scheduling" in on
    assert "Scheduled one step ahead" not in knobs_caption(base, "en")
    assert "提前一步调度" in knobs_caption(replace(base, schedule_ahead=True), "zh")


def test_capacity_plan_takes_vllms_no_async_scheduling(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity plan --engine vllm --no-async-scheduling` (vLLM's own flag, or a release
    before 0.14.0): the load sections wait for each step; the JSON says which it ran, the
    mean TTFT under load is lower without the wait, and an engine that does not schedule
    ahead here refuses the flag with the reason."""
    import json

    from capacity.cli.main import main

    base = ["plan", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--engine", "vllm",
            "--rate", "4", "--duration", "60", "--prompt-tokens", "500", "--output-tokens",
            "128", "--ctx", "1024", "--format", "json"]

    def load(argv: list[str]) -> dict[str, object]:
        assert main(argv) == 0
        got = json.loads(capsys.readouterr().out)["open_loop"]
        assert isinstance(got, dict)
        return got

    on, off = load(base), load([*base, "--no-async-scheduling"])
    assert (on["scheduled_ahead"], off["scheduled_ahead"]) == (True, False)
    ttft = [float(x["points"][0]["ttft_mean_ms"]) for x in (on, off)]  # type: ignore[index]
    assert ttft[1] < ttft[0]
    assert main(["plan", "--engine", "vllm", "--concurrency", "8", "--no-async-scheduling"]) == 0
    assert "async scheduling off" in capsys.readouterr().out
    # SGLang's own flag for its overlap scheduler: the same switch
    sg = [a if a != "vllm" else "sglang" for a in base]
    on, off = load(sg), load([*sg, "--disable-overlap-schedule"])
    assert (on["scheduled_ahead"], off["scheduled_ahead"]) == (True, False)
    assert main(["plan", "--engine", "sglang", "--concurrency", "8",
                 "--disable-overlap-schedule"]) == 0
    assert "overlap scheduler off (--disable-overlap-schedule)" in capsys.readouterr().out
    assert main([*[a if a != "vllm" else "llamacpp" for a in base], "--no-async-scheduling"]) != 0
    assert "only: vllm since 0.14.0, sglang since 0.4.0" in capsys.readouterr().err
    assert main(["plan", "--no-async-scheduling"]) != 0
    assert "--no-async-scheduling shape the load sections" in capsys.readouterr().err


def test_the_sim_server_takes_it_too() -> None:
    from capacity.cli.main import build_parser
    from capacity.cli.plan import scenario_from_args
    from capacity.cli.plan_load import check_async_flag

    args = build_parser().parse_args(["sim-server", "--engine", "vllm", "--no-async-scheduling"])
    check_async_flag(args)
    assert not Simulator(scenario_from_args(args), SimConfig(engine="vllm"),
                         clock="virtual").schedule_ahead
    args = build_parser().parse_args(["sim-server", "--engine", "sglang",
                                      "--disable-overlap-schedule"])
    check_async_flag(args)
    assert not Simulator(scenario_from_args(args), SimConfig(engine="sglang"),
                         clock="virtual").schedule_ahead
    args = build_parser().parse_args(["sim-server", "--no-async-scheduling"])
    with pytest.raises(InputError, match="only: vllm since"):
        check_async_flag(args)


def test_the_planners_batched_prefill_waits_the_step() -> None:
    """The Planner's analytic path under batched prefill (SGLang's, whose prompts are the next
    batch): scheduled ahead, the prompts that arrive during a batch wait the decode step fixed
    after it, (1 - exp(-C)) s on the mean and the percentile; against the event model, Qwen3-8B
    on an H100 with 1,024-token prompts at 10% and 50% of saturation, as close as without it."""
    from capacity.model.roofline import StepModel
    from capacity.model.scenario import evaluate
    from capacity.plan.queueing import analytic_latency

    s = make_scenario("qwen3-8b-bf16", "h100-sxm", prompt_tokens=1024, context_tokens=1280)
    svc = service_from_scenario(s, output_tokens=256)
    kv = float(evaluate(s, [0]).kv_request.exact_bytes)
    step = StepModel(weights_bytes=np.array([s.weights_gb * 1e9]),
                     kv_request_bytes=np.array([kv]), bandwidth_gb_s=np.array([s.bandwidth_gb_s]),
                     tflops=np.array([s.tflops]), params_active_b=s.model.params_active_b)
    for share in (0.1, 0.5):
        rate = share * svc.saturation_rate_per_s
        kw: dict[str, object] = dict(rate_per_s=np.array([rate]), step=step,
                                     prefill_ms=np.array([svc.prefill_ms]), output_tokens=256)
        on = analytic_latency(ahead=1.0, **kw)  # type: ignore[arg-type]
        off = analytic_latency(**kw)  # type: ignore[arg-type]
        gain = -math.expm1(-float(on.concurrency[0])) * float(on.step_ms[0])
        assert float(on.ttft_mean_ms[0] - off.ttft_mean_ms[0]) == pytest.approx(gain, rel=1e-9)
        assert float(on.ttft_q_ms[0] - off.ttft_q_ms[0]) == pytest.approx(gain, rel=1e-9)
        des = simulate(replace(svc, schedule_ahead=True), rate_per_s=rate, n_requests=4000,
                       seed=2)
        assert float(on.ttft_mean_ms[0]) == pytest.approx(des.mean_ttft_ms, rel=0.1)
        assert float(on.ttft_q_ms[0]) == pytest.approx(des.ttft_ms[0.9], rel=0.15)
