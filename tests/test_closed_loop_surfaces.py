"""One closed loop: every surface that predicts C clients with no think time shows the steady
state of `capacity.plan.closed_loop.closed_loop` (clients out of step), the one the scorecard
scores (docs/method.md, "Queueing"). The Explorer's overlay of a measured run predicts the run
as the bench ran it (`closed_loop_as_run`, tests/test_overlay.py). The Planner's users at a
peak are not a closed loop: its check runs the design rate it sized for."""

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
from capacity.plan.events import service_from_scenario, simulate
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


def test_the_planners_check_at_a_peak_concurrency_runs_the_load_it_sized_for() -> None:
    # 40 requests in flight at the peak are users arriving at random, at the design rate the
    # planner sized for (Little's law): the event check runs that load, so its TTFT and TPOT
    # p90 are the headline's (the closed form's) within 15 %; a benchmark's closed loop of 40
    # clients out of step would read 13x below the TTFT (no prompt waits behind another)
    wl = Workload(peak_concurrency=40, context_tokens=8192, output_tokens=256)
    p = plan(PlanInputs(model="qwen3.5-9b-awq", workload=wl, slo=Slo(ttft_ms=2000, tpot_ms=50)))
    o = p.best
    assert o is not None and math.isfinite(o.design_rate_per_s)
    got = simulate_option(p.inputs, o)
    svc = option_service(p.inputs, o)
    assert got == simulate(svc, rate_per_s=o.design_rate_per_s / o.replicas, n_requests=2000,
                           slo_ttft_ms=2000, slo_tpot_ms=50)
    assert got.ttft_ms[0.9] == pytest.approx(o.ttft_ms, rel=0.15)
    assert got.tpot_ms[0.9] == pytest.approx(o.tpot_ms, rel=0.15)
    c = math.ceil(40 * (1 + wl.headroom) / o.replicas - 1e-9)
    assert closed_loop(svc, concurrency=c).ttft_ms[0.9] < got.ttft_ms[0.9] / 5
