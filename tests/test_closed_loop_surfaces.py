"""One closed loop: every surface that predicts C clients with no think time shows the steady
state of `capacity.plan.closed_loop.closed_loop` (clients out of step), the one the scorecard scores
(docs/method.md, "Queueing"). The Explorer's overlay of a measured run predicts the run as the
bench ran it (`closed_loop_as_run`), a named second quantity (tests/test_overlay.py)."""

from __future__ import annotations

import json
import math

import pytest

from capacity.cli.main import main
from capacity.fit import validate
from capacity.model.scenario import make_scenario
from capacity.model.workload import Workload
from capacity.plan.closed_loop import burst_ttft_ms, closed_loop
from capacity.plan.detail import option_service, simulate_option
from capacity.plan.events import service_from_scenario
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan


def test_cli_plan_and_the_scorecard_show_the_same_closed_loop(
        capsys: pytest.CaptureFixture[str]) -> None:
    # the CLI's default model and GPU, 1,000-token prompts, 64 output tokens, 16 clients
    assert main(["plan", "--ctx", "4096", "--prompt-tokens", "1000", "--concurrency", "16",
                 "--engine", "vllm", "--output-tokens", "64", "--format", "json"]) == 0
    (pt,) = json.loads(capsys.readouterr().out)["load"]["points"]
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=4096, prompt_tokens=1000)
    q = closed_loop(service_from_scenario(s, output_tokens=64, engine="vllm"), concurrency=16)
    assert pt["ttft_ms"]["0.5"] == q.ttft_ms[0.5]
    assert pt["tpot_ms"]["0.9"] == q.tpot_ms[0.9]
    # the upper edge: the opening burst, every client's first request at once
    burst = burst_ttft_ms(service_from_scenario(s, output_tokens=64, engine="vllm"),
                          concurrency=16)
    assert pt["ttft_together_ms"]["0.5"] == burst[0.5] > q.ttft_ms[0.5]
    queued = validate.queued_levels(s, [16], 64, "vllm")
    assert queued is not None
    assert queued[0].ttft_median_ms == q.ttft_ms[0.5]
    assert queued[0].e2e_mean_ms == q.mean_e2e_ms


def test_the_planners_check_at_a_peak_concurrency_is_the_same_closed_loop() -> None:
    wl = Workload(peak_concurrency=20, context_tokens=8192, output_tokens=256, headroom=0.0)
    p = plan(PlanInputs(model="qwen3.5-9b-awq", workload=wl, slo=Slo(ttft_ms=5000, tpot_ms=200),
                        gpus=("rtx-4090",)))
    o = p.best
    assert o is not None
    got = simulate_option(p.inputs, o)
    want = closed_loop(option_service(p.inputs, o), concurrency=math.ceil(20 / o.replicas),
                       slo_ttft_ms=5000, slo_tpot_ms=200)
    assert got == want
