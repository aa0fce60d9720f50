"""One saturation rate: the planner's check with a shared prefix (`detail.simulate_option`, which
`capacity size --simulate` and the Planner run) reports the replica's
`ServiceModel.saturation_rate_per_s` under the engine profile, the number the event model's
other surfaces show (issue 32), and runs the same replica: the engine's scheduling, the slots
the plan holds with the prefix once."""

from __future__ import annotations

import pytest

from capacity.model.scenario import Scenario, make_scenario
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario, option_service, simulate_option
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan
from capacity.plan.service_build import service_from_scenario


def _scenario() -> Scenario:
    return make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=4096, prompt_tokens=3000)


def test_the_mixed_profile_counts_its_mixed_steps_and_the_others_take_turns() -> None:
    """vLLM V1 (mixed steps): the rate is the mixed-step one, above taking turns; SGLang and the
    chapter (a prefill batch pauses decoding): taking turns, t_prefill + (n - 1) t_step(b) / b
    per request, with the prefix hits' shorter prefill."""
    s = _scenario()
    kw = {"output_tokens": 200, "max_num_seqs": 8, "prefix_tokens": 2000}
    vllm = service_from_scenario(s, engine="vllm", prefix_share=0.9, **kw)
    assert vllm.mixed and vllm.chunk_tokens is not None
    assert vllm.mixed_saturation_rate_per_s > 0
    assert vllm.saturation_rate_per_s == vllm.mixed_saturation_rate_per_s
    for engine in ("chapter", "sglang"):
        svc = service_from_scenario(s, engine=engine, prefix_share=0.9, **kw)
        b = svc.slots
        turns = 1e3 / (svc.mean_prefill_ms + 199 * float(svc.step_ms[b]) / b)
        assert svc.saturation_rate_per_s == pytest.approx(turns, rel=1e-12)


@pytest.mark.parametrize("engine", ["vllm", "chapter", "sglang"])
def test_simulate_option_with_a_prefix_runs_the_plans_replica(engine: str) -> None:
    """The planner's check with prefix caching planned reports the rate of the option's replica
    under the plan's engine (the mixed-step rate for vLLM, not the chapter's take-turns rate),
    on the slots the option holds with the prefix once, and finds the design load below it."""
    wl = Workload(daily_active_users=5000, context_tokens=4096, prompt_tokens=3000,
                  output_tokens=200)
    inp = PlanInputs(model="qwen3.5-9b-awq", workload=wl, gpus=("rtx-4090",),
                     prefix_tokens=2000, prefix_share=0.9, engine=engine)
    p = plan(inp)
    assert p.best is not None
    o = p.best
    res = simulate_option(p.inputs, o, n_requests=60)
    svc = service_from_scenario(option_scenario(p.inputs, o), output_tokens=200, engine=engine,
                                prefix_tokens=2000, prefix_share=0.9)
    assert res.saturation_rate_per_s == pytest.approx(svc.saturation_rate_per_s, rel=1e-12)
    assert not res.saturated
    assert option_service(p.inputs, o).slots == svc.slots == res.slots == o.slots_per_replica
