"""Eager mode (vLLM --enforce-eager, SGLang --disable-cuda-graph): the profile's per-layer cost
on every forward pass and no CUDA-graph padding (`forward_pass.eager_scenario`;
docs/method.md, "Eager mode")."""

from __future__ import annotations

import json

import pytest

from capacity.catalog.engines import engine_profile
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.fit.planning import typical_knobs_on
from capacity.fit.typical import typical_efficiency
from capacity.model.forward_pass import eager_pass_ms, eager_scenario
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.plan.events import service_from_scenario
from tests.shipped import shipped


def _typical(model: str, gpu: str) -> Scenario:
    s = make_scenario(model=model, gpu=gpu, context_tokens=2048, prompt_tokens=1000)
    return s.with_(**typical_knobs_on(typical_efficiency("vllm").typical, s))


def test_the_profiles_state_their_eager_cost() -> None:
    # data/engines.toml: vLLM (22.5 - 13) / 28 layers, SGLang 0.88 / 32 layers; none elsewhere
    assert engine_profile("vllm").eager_layer_ms == pytest.approx((22.5 - 13) / 28, abs=5e-4)
    assert engine_profile("sglang").eager_layer_ms == pytest.approx(0.88 / 32, abs=5e-5)
    for key in ("chapter", "llamacpp"):
        assert engine_profile(key).eager_layer_ms == 0
        with pytest.raises(InputError, match=f"the '{key}' profile has no eager mode"):
            eager_scenario(make_scenario(), engine_profile(key))


def test_every_pass_pays_the_layers_eager_cost_and_no_graph_padding() -> None:
    # Qwen3-14B-AWQ on an A100 (40 layers) on the typical vLLM basis: 40 x 0.339 = 13.56 ms
    # (a calibration's F4d padding to vLLM's largest captured graph, 512 tokens)
    s = _typical("qwen3-14b-awq", "a100-80gb-sxm").with_(cuda_graph_max_tokens=512.0)
    assert s.model.layers == 40
    e = eager_scenario(s, engine_profile("vllm"))
    assert e.layer_overhead_ms == pytest.approx(s.layer_overhead_ms + 0.339)
    assert e.cuda_graph_max_tokens == 0.0
    assert e.fixed_step_ms - s.fixed_step_ms == pytest.approx(13.56)
    assert eager_pass_ms(s.model, engine_profile("vllm")) == pytest.approx(13.56)
    # one sequence: the step grows by exactly that (batch 1 is a captured size: no padding)
    one = float(evaluate(s, [1]).decode.step_ms[0])
    assert float(evaluate(e, [1]).decode.step_ms[0]) == pytest.approx(one + 13.56)
    # 50 sequences: a graph pads the GEMM rows to 56; eager runs 50, so it adds less than
    # 13.56 ms wherever the padded rows cost anything
    fifty = float(evaluate(s, [50]).decode.step_ms[0])
    assert float(evaluate(e, [50]).decode.step_ms[0]) <= fifty + 13.56 + 1e-9
    # the event model: its fixed cost per pass and what it reports
    graph = service_from_scenario(s, output_tokens=64, engine="vllm")
    eager = service_from_scenario(s, output_tokens=64, engine="vllm", enforce_eager=True)
    assert eager.overhead_ms - graph.overhead_ms == pytest.approx(13.56)
    assert graph.eager_ms == 0.0 and eager.eager_ms == pytest.approx(13.56)
    # SGLang's figure: 40 x 0.0275 = 1.1 ms
    sg = service_from_scenario(s, output_tokens=64, engine="sglang", enforce_eager=True)
    assert sg.eager_ms == pytest.approx(1.1)


def test_capacity_plan_takes_enforce_eager(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--engine", "vllm", "--concurrency", "1", "--prompt-tokens", "500",
            "--output-tokens", "32", "--format", "json"]
    assert main(base) == 0
    graph = json.loads(capsys.readouterr().out)["load"]
    assert main([*base, "--enforce-eager"]) == 0
    eager = json.loads(capsys.readouterr().out)["load"]
    # Qwen3.5-9B: 32 layers x 0.339 = 10.848 ms on every pass; one client decodes alone
    assert (graph["eager_ms_per_pass"], eager["eager_ms_per_pass"]) == (
        0.0, pytest.approx(10.848))
    tpot = (graph["points"][0]["tpot_ms"]["0.5"], eager["points"][0]["tpot_ms"]["0.5"])
    assert tpot[1] - tpot[0] == pytest.approx(10.848, rel=1e-6)
    assert main(["plan", "--engine", "vllm", "--enforce-eager", "--concurrency", "1"]) == 0
    assert "no CUDA graphs (eager) adds 10.85 ms to every forward pass" in (
        capsys.readouterr().out)
    assert main(["plan", "--engine", "llamacpp", "--enforce-eager"]) != 0
    assert "no eager mode" in capsys.readouterr().err
    assert main(["plan", "--enforce-eager"]) != 0
    assert "--enforce-eager and --no-async-scheduling shape the load sections" in capsys.readouterr().err


@pytest.mark.slow  # the typical scorecard (about 4 s)
def test_the_published_eager_group_is_scored_eager() -> None:
    """The scorecard predicts the one published group run with --enforce-eager (Qwen3-14B-AWQ
    on an A100, vLLM 0.9.1) with vLLM's eager cost: 40 x 0.339 = 13.56 ms more a step (the
    step with CUDA graphs 9.65 ms on the step knobs from sixteen other groups' points, its
    reads at the A100 80GB's copy ceiling, 0.840 of the spec sheet, the weights counted as
    engines read them, since 2026-12-07; 10.29 on the chapter's count that morning; 9.86 at
    0.9 of the spec sheet, 9.89 before the RTX 4090 Qwen2.5-7B points joined, 2026-12-06,
    night)."""
    rows = [r for r in shipped("typical").rows
            if r.group.startswith("qwen3-14b-awq") and r.metric == "step"]
    assert len(rows) == 2
    for r in rows:
        graphs = r.step_ms - 13.56
        assert graphs == pytest.approx(9.65, abs=0.01)
        assert r.after == pytest.approx(r.step_ms)   # one client: the TPOT is the step
        # +13.9% and +12.3% at 0.9 of the spec sheet; +15.6% and +13.9% at the A100's copy
        assert 0.1 < r.after / r.measured - 1 < 0.17


def test_the_simulated_endpoint_runs_eager_as_the_event_model_does() -> None:
    """`capacity sim-server --enforce-eager`: the endpoint's decode step of one sequence is
    the event model's with `enforce_eager` (10.848 ms more on the default Qwen3.5-9B)."""
    from capacity.sim.scheduler import SimConfig, Simulator

    s = make_scenario()
    steps = {}
    for eager in (False, True):
        sim = Simulator(s, SimConfig(engine="vllm", enforce_eager=eager), clock="virtual")
        steps[eager] = sim.physics.step_s(1, 500) * 1e3
    svc = service_from_scenario(s, output_tokens=64, engine="vllm", enforce_eager=True)
    assert steps[True] - steps[False] == pytest.approx(32 * 0.339)
    assert svc.eager_ms == pytest.approx(32 * 0.339)
