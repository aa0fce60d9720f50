"""A prefill without CUDA graphs (SGLang before 0.5.10 replayed graphs for decode batches only):
every forward pass that carries prompt tokens pays the profile's per-layer launch cost once,
whatever prompts it carries (`forward_pass.prefill_eager_scenario`, `as_released`;
docs/method.md, "Prefill without CUDA graphs")."""

from __future__ import annotations

import pytest

from capacity.catalog.engines import engine_profile, version_tuple
from capacity.fit.planning import scenario_with_basis, typical_knobs_on
from capacity.fit.typical import typical_efficiency
from capacity.model.forward_pass import as_released, eager_scenario, prefill_eager_scenario
from capacity.model.prefill import fixed_prefill_ms
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.plan.events import service_from_scenario

LAYERS_70B = 80
PER_LAYER_MS = 0.38


def _typical_sglang(**kw: object) -> Scenario:
    s = make_scenario("llama-3.1-70b", "a100-80gb-sxm", n_gpus=8, tp=8, context_tokens=4096,
                      prompt_tokens=1000, **kw)  # type: ignore[arg-type]
    return s.with_(**typical_knobs_on(typical_efficiency("sglang").typical, s))


def test_the_fixed_prefill_time_by_hand() -> None:
    # 3.5 ms a prefill + 24 linear-attention layers x 0.2 ms + 94 layers x 0.38 ms
    assert fixed_prefill_ms(3.5, 0.2, 24, 0.38, 94) == pytest.approx(3.5 + 4.8 + 35.72)
    assert fixed_prefill_ms(3.5, 0.2, 24) == pytest.approx(8.3)   # the per-layer part is opt-in
    s = _typical_sglang()
    e = s.with_(prefill_layer_ms=PER_LAYER_MS)
    assert e.fixed_prefill_ms - s.fixed_prefill_ms == pytest.approx(80 * 0.38)
    # a prompt alone is one pass: its TTFT grows by exactly the layers' launches, its decode
    # step not at all
    one, eager = evaluate(s, [1]), evaluate(e, [1])
    assert (float(eager.ttft_s) - float(one.ttft_s)) * 1e3 == pytest.approx(30.4)
    assert float(eager.decode.step_ms[0]) == float(one.decode.step_ms[0])


def test_the_release_decides() -> None:
    assert version_tuple("SGLang v0.5.3.post3") == (0, 5, 3)
    assert version_tuple("SGLang 0.5.10") == (0, 5, 10)
    assert version_tuple("vLLM v0.11.0") == (0, 11, 0)
    assert version_tuple("0.4") == (0, 4, 0)
    assert version_tuple("SGLang (sglang-oai backend)") is None
    assert version_tuple("not stated") is None
    sg, vl = engine_profile("sglang"), engine_profile("vllm")
    # data/engines.toml: SGLang's 0.38 ms (pulls 13094 and 11845) until 0.5.10; vLLM none
    assert (sg.prefill_eager_layer_ms, sg.prefill_graphs_since) == (0.38, "0.5.10")
    assert vl.prefill_eager_layer_ms == 0.0
    assert sg.prefill_runs_eager("SGLang 0.5.6") and sg.prefill_runs_eager("v0.5.9")
    assert not sg.prefill_runs_eager("0.5.10") and not sg.prefill_runs_eager("0.6.0")
    assert not sg.prefill_runs_eager("not stated")   # a version not stated is not assumed
    assert not vl.prefill_runs_eager("0.5.6")
    # no version: a run dated before the default was merged (2026-03-02) ran an earlier release
    assert sg.prefill_graphs_merged == "2026-03-02"
    assert sg.prefill_runs_eager("SGLang (lmsysorg/sglang:latest, Sept 2025) + NIXL",
                                 "2025-09-14 (run date in results.csv)")
    assert sg.prefill_runs_eager("", "2026-03-01")
    assert not sg.prefill_runs_eager("", "2026-03-02")
    assert not sg.prefill_runs_eager("SGLang (version not stated)", "undated (read at commit x)")
    assert not sg.prefill_runs_eager("0.5.10", "2025-01-01")   # a stated version decides


def test_as_released_and_eager_mode() -> None:
    s = _typical_sglang()
    sg = engine_profile("sglang")
    assert s.prefill_layer_ms == 0.0   # the typical basis: today's SGLang graphs its prefill
    assert as_released(s, sg, version="SGLang 0.5.6").prefill_layer_ms == PER_LAYER_MS
    assert as_released(s, sg, version="SGLang 0.5.10") == s
    assert as_released(s, sg, version="not stated") == s
    assert as_released(s, engine_profile("vllm"), version="vLLM 0.25.1") == s
    # a scenario that carries the cost already (a band's edge) keeps its own
    edge = s.with_(prefill_layer_ms=0.5)
    assert prefill_eager_scenario(edge, sg).prefill_layer_ms == 0.5
    # --disable-cuda-graph: decode passes pay SGLang's 0.0275 ms a layer, prefill passes the
    # launches as well
    e = as_released(s, sg, version="SGLang 0.5.10", cuda_graphs=False)
    assert e == eager_scenario(s, sg)
    assert e.layer_overhead_ms == pytest.approx(s.layer_overhead_ms + 0.0275)
    assert e.prefill_layer_ms == PER_LAYER_MS
    assert scenario_with_basis(s, "typical:sglang").prefill_layer_ms == 0.0


def test_a_pass_pays_the_launches_once_whatever_prompts_it_carries() -> None:
    s = _typical_sglang()
    e = s.with_(prefill_layer_ms=PER_LAYER_MS)
    pass_ms = LAYERS_70B * PER_LAYER_MS
    graph = service_from_scenario(s, output_tokens=32, engine="sglang")
    eager = service_from_scenario(e, output_tokens=32, engine="sglang")
    assert (graph.pass_prefill_ms, eager.pass_prefill_ms) == (0.0, pytest.approx(pass_ms))
    # a prompt alone (the analytic figures' unit) counts it once; the chunks do not
    assert eager.prefill_ms - graph.prefill_ms == pytest.approx(pass_ms)
    assert eager.chunk_ms(0, 500) == pytest.approx(graph.chunk_ms(0, 500))
    # SGLang's prefill batch of two 500-token prompts, and of one: each pays it once
    for chunks in ([(0, 500), (0, 500)], [(0, 500)], [(200, 300)]):
        assert eager.mixed_step_ms(0, chunks) - graph.mixed_step_ms(0, chunks) == \
            pytest.approx(pass_ms), chunks
    # a decode step carries no prompt: nothing
    assert eager.mixed_step_ms(4, []) == pytest.approx(graph.mixed_step_ms(4, []))
    # whole prompts (the chapter's profile): three prompts in one pass, once
    whole_g = service_from_scenario(s, output_tokens=32, engine="chapter")
    whole_e = service_from_scenario(e, output_tokens=32, engine="chapter")
    assert whole_e.prompt_pass_ms([False] * 3) - whole_g.prompt_pass_ms([False] * 3) == \
        pytest.approx(pass_ms)


def test_the_simulated_endpoint_pays_it_as_the_event_model_does() -> None:
    from capacity.sim.scheduler import SimConfig, Simulator

    s = _typical_sglang()
    e = s.with_(prefill_layer_ms=PER_LAYER_MS)
    sims = [Simulator(x, SimConfig(engine="sglang"), clock="virtual").physics for x in (s, e)]
    chunks = [(0, 500), (0, 500)]
    assert (sims[1].prefill_batch_s(chunks) - sims[0].prefill_batch_s(chunks)) * 1e3 == \
        pytest.approx(LAYERS_70B * PER_LAYER_MS)
    assert sims[1].chunk_s(0, 500) == pytest.approx(sims[0].chunk_s(0, 500))
    svc = service_from_scenario(e, output_tokens=32, engine="sglang")
    assert sims[1].pass_prefill_s * 1e3 == pytest.approx(svc.pass_prefill_ms)
    # `capacity sim-server --engine sglang --enforce-eager` pays it as `capacity plan` does
    eager = Simulator(s, SimConfig(engine="sglang", enforce_eager=True), clock="virtual")
    assert eager.physics.pass_prefill_s * 1e3 == pytest.approx(LAYERS_70B * PER_LAYER_MS)


def test_the_open_loop_rows_run_as_their_release() -> None:
    from capacity.catalog.loader import default_catalog
    from capacity.fit.open_loop_rows import load_rows
    from capacity.fit.validate_open_loop import scenario_for

    cat = default_catalog()
    rows = [r for r in load_rows() if r.profile == "sglang"]
    stated = [r for r in rows if r.engine_version == "v0.5.9"]
    unstated = [r for r in rows if r.engine_version == "not stated"]
    assert stated and unstated
    assert scenario_for(stated[0], "typical", cat).prefill_layer_ms == PER_LAYER_MS
    assert scenario_for(stated[0], "spec", cat).prefill_layer_ms == 0.0   # the bound stays
    assert scenario_for(unstated[0], "typical", cat).prefill_layer_ms == 0.0


def test_the_disaggregated_rows_run_as_their_release() -> None:
    from capacity.catalog.loader import default_catalog
    from capacity.fit.validate_disagg import _scenario, load_rows

    cat = default_catalog()
    rows = load_rows()
    dated = next(r for r in rows if r.group.startswith("dstack-h200"))   # September 2025
    undated = next(r for r in rows if r.group.startswith("mooncake") and r.profile == "sglang")
    vllm = next(r for r in rows if r.profile == "vllm")
    assert _scenario(dated, dated.prefill_tp, "typical", cat).prefill_layer_ms == PER_LAYER_MS
    assert _scenario(dated, dated.prefill_tp, "spec", cat).prefill_layer_ms == 0.0
    assert _scenario(undated, undated.prefill_tp, "typical", cat).prefill_layer_ms == 0.0
    assert _scenario(vllm, vllm.prefill_tp, "typical", cat).prefill_layer_ms == 0.0


@pytest.mark.slow  # the typical scorecard
def test_the_scorecard_runs_each_published_sglang_group_as_its_release() -> None:
    from capacity.fit import validate_typical as vt

    groups = vt.groups_of()
    cat_s = {k: g for k, g in groups.items() if "(SGLang)" in k}
    assert cat_s
    for key, g in cat_s.items():
        s = vt._scenario(g[0], None)
        want = PER_LAYER_MS if engine_profile("sglang").prefill_runs_eager(g[0].engine) else 0.0
        assert vt._run_as(g[0], s).prefill_layer_ms == want, key
    # the 0.5.6 cookbook groups pay it; the gpt-oss-20b group states no release
    assert vt._run_as(groups["qwen3-235b-a22b-bf16 on 8x b200 (SGLang)"][0],
                      vt._scenario(groups["qwen3-235b-a22b-bf16 on 8x b200 (SGLang)"][0],
                                   None)).prefill_layer_ms == PER_LAYER_MS
    g20 = groups["gpt-oss-20b-mxfp4 on h100-sxm (SGLang)"][0]
    assert vt._run_as(g20, vt._scenario(g20, None)).prefill_layer_ms == 0.0


def test_capacity_plan_under_sglang_eager_pays_the_prefill_launches(
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from capacity.cli.main import main

    base = ["plan", "--engine", "sglang", "--concurrency", "1", "--prompt-tokens", "500",
            "--output-tokens", "32", "--format", "json"]
    assert main(base) == 0
    graph = json.loads(capsys.readouterr().out)["load"]
    assert main([*base, "--enforce-eager"]) == 0
    eager = json.loads(capsys.readouterr().out)["load"]
    # Qwen3.5-9B's 32 layers: 32 x 0.0275 on every pass, 32 x 0.38 = 12.16 ms more on a pass
    # that carries prompt tokens
    assert (graph["prefill_launch_ms_per_pass"], eager["prefill_launch_ms_per_pass"]) == (
        0.0, pytest.approx(12.16))
    assert eager["eager_ms_per_pass"] == pytest.approx(0.88)
    ttft = (graph["points"][0]["ttft_ms"]["0.5"], eager["points"][0]["ttft_ms"]["0.5"])
    assert ttft[1] - ttft[0] == pytest.approx(12.16 + 0.88, rel=0.05)
    assert main(["plan", "--engine", "sglang", "--enforce-eager", "--concurrency", "1"]) == 0
    assert "the prefill without CUDA graphs adds 12.16 ms to every pass that carries prompt " \
        "tokens" in capsys.readouterr().out


def test_the_two_pools_prefill_batch_pays_it_once() -> None:
    from capacity.plan.events_disagg import _Prefill, _prefill_batch

    s = _typical_sglang()
    e = s.with_(prefill_layer_ms=PER_LAYER_MS)
    for engine in ("chapter", "sglang"):   # whole prompts; SGLang's chunked prefill batch
        took = []
        for x in (s, e):
            svc = service_from_scenario(x, output_tokens=1, engine=engine)
            r = _Prefill()
            r.queue.extend([0, 1, 2])
            took.append(_prefill_batch(svc, r))
        (graph_ms, graph_done), (eager_ms, eager_done) = took
        assert graph_done == eager_done and len(graph_done) >= 2, engine
        assert eager_ms - graph_ms == pytest.approx(LAYERS_70B * PER_LAYER_MS), engine
