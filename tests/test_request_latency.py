"""A request's time outside the GPU (`Scenario.request_latency_ms`, issues 25 and 32): SGLang's
front end passes every request between its processes, 9-30 ms on published runs that no GPU
term predicts. It adds to every TTFT and E2E each surface computes and to no GPU time: the
closed forms, the Planner, the event model (a closed loop's clients wait it), the two pools,
the log-driven model and the simulated endpoint; the typical SGLang basis holds it."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace

import httpx
import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.fit import typical_latency as tl
from capacity.fit import validate_typical as vt
from capacity.fit.planning import scenario_with_basis, with_typical
from capacity.fit.typical import engines, typical_efficiency
from capacity.model.prefix import prefix_capacity_table, prefix_effect
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.events import service_from_scenario, simulate
from capacity.plan.events_disagg import simulate_two_pools, two_pools
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.sim.scheduler import SimConfig
from capacity.sim.server import create_app, serve_in_thread
from capacity.sim.virtual import Workload as VirtualWorkload
from capacity.sim.virtual import run_virtual
from tests.shipped import shipped

L_MS = 40.0


def _scenario(catalog: Catalog, latency_ms: float = 0.0) -> Scenario:
    return make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog, context_tokens=2048,
                         prompt_tokens=512, request_latency_ms=latency_ms)


def test_ttft_is_the_prefill_and_the_latency_outside(catalog: Catalog) -> None:
    a, b = (evaluate(_scenario(catalog, x), [1, 8]) for x in (0.0, L_MS))
    assert float(a.ttft_s) == float(a.prefill_s)              # none: TTFT is the prefill
    assert float(b.prefill_s) == float(a.prefill_s)            # the GPU's work is the same
    assert float(b.ttft_s) == pytest.approx(float(a.ttft_s) + L_MS / 1e3)
    np.testing.assert_array_equal(b.decode.step_ms, a.decode.step_ms)
    with pytest.raises(Exception, match="request latency must be >= 0"):
        _scenario(catalog, -1.0)


def test_a_prefix_hit_shrinks_the_prefill_not_the_latency(catalog: Catalog) -> None:
    s0, s1 = _scenario(catalog), _scenario(catalog, L_MS)
    e0, e1 = prefix_effect(s0, 256, 1.0), prefix_effect(s1, 256, 1.0)
    assert e1.ttft_s[0] == pytest.approx(e0.ttft_s[0] + L_MS / 1e3)
    assert e1.ttft_s[1] == pytest.approx(e0.ttft_s[1] + L_MS / 1e3)
    r0 = prefix_capacity_table(s0, [(4, 2048)], 256, 0.5)[0]
    r1 = prefix_capacity_table(s1, [(4, 2048)], 256, 0.5)[0]
    assert r1.ttft_s == pytest.approx(r0.ttft_s + L_MS / 1e3)


def test_the_event_model_open_loop_shifts_ttft_and_e2e_by_it(catalog: Catalog) -> None:
    # the same seeded arrivals reach the engine L later: its work is the same, every TTFT and
    # E2E is L longer, the wait at the engine is not
    out = {}
    for x in (0.0, L_MS):
        svc = service_from_scenario(_scenario(catalog, x), output_tokens=64, engine="vllm")
        out[x] = simulate(svc, rate_per_s=2.0, n_requests=200, seed=3)
    a, b = out[0.0], out[L_MS]
    assert b.mean_ttft_ms == pytest.approx(a.mean_ttft_ms + L_MS)
    assert b.mean_e2e_ms == pytest.approx(a.mean_e2e_ms + L_MS)
    assert b.mean_queue_ms == pytest.approx(a.mean_queue_ms, abs=1e-9)
    assert b.tpot_ms[0.5] == pytest.approx(a.tpot_ms[0.5])


def test_a_closed_loop_client_waits_it_out(catalog: Catalog) -> None:
    # one client, whole prompts: each request is L + its prefill + 63 steps, back to back, so
    # the client's throughput is 1 / (E2E) with E2E L longer
    out = {}
    for x in (0.0, L_MS):
        svc = service_from_scenario(_scenario(catalog, x), output_tokens=64)
        out[x] = simulate(svc, concurrency=1, n_requests=50)
    a, b = out[0.0], out[L_MS]
    assert b.mean_e2e_ms == pytest.approx(a.mean_e2e_ms + L_MS)
    assert b.throughput_req_s == pytest.approx(1e3 / b.mean_e2e_ms, rel=0.02)
    assert b.throughput_req_s == pytest.approx(a.throughput_req_s * a.mean_e2e_ms
                                               / b.mean_e2e_ms, rel=0.02)


def test_the_planner_reports_it_and_leaves_the_engine_less_of_the_target(
        catalog: Catalog) -> None:
    wl = Workload(daily_active_users=300, requests_per_user_per_day=20, context_tokens=2048,
                  prompt_tokens=512, output_tokens=128)
    base = PlanInputs(model="qwen3.5-9b-awq", workload=wl, slo=Slo(ttft_ms=2000, tpot_ms=60),
                      gpus=("rtx-4090",), formats=("awq",), kv_dtypes=("fp16",), max_gpus=2)
    a = plan(base, catalog)
    b = plan(replace(base, request_latency_ms=L_MS), catalog)
    assert a.best is not None and b.best is not None and a.best.label == b.best.label
    assert b.best.ttft_ms == pytest.approx(a.best.ttft_ms + L_MS)
    assert b.best.ttft_mean_ms == pytest.approx(a.best.ttft_mean_ms + L_MS)
    assert b.best.prefill_ms == pytest.approx(a.best.prefill_ms)   # GPU work, unchanged
    # a TTFT target between the two: met without the latency, missed with it
    tight = Slo(ttft_ms=a.best.ttft_ms + L_MS / 2, tpot_ms=60)
    ok = plan(replace(base, slo=tight), catalog)
    miss = plan(replace(base, slo=tight, request_latency_ms=L_MS), catalog)
    assert any(o.label == a.best.label for o in ok.options if not o.failures)
    assert all(o.label != a.best.label for o in miss.options if not o.failures)
    assert Slo(ttft_ms=2000).at_engine(25.0).ttft_ms == 1975.0
    assert Slo(ttft_ms=20).at_engine(25.0).ttft_ms == 1e-9


def test_two_pools_and_the_simulated_pools_shift_ttft_by_it(catalog: Catalog) -> None:
    res = {}
    for x in (0.0, L_MS):
        s = make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog, context_tokens=4096,
                          prompt_tokens=2048, request_latency_ms=x)
        pools = two_pools(s, s, output_tokens=32, transfer_ms=5.0, prefill_replicas=1,
                          decode_replicas=1)
        res[x] = simulate_two_pools(pools, rate_per_s=2.0, n_requests=100)
    assert res[L_MS].mean_ttft_ms == pytest.approx(res[0.0].mean_ttft_ms + L_MS)
    assert res[L_MS].e2e_ms[0.5] == pytest.approx(res[0.0].e2e_ms[0.5] + L_MS)


def test_the_simulated_engine_in_virtual_time_counts_it_from_the_send(catalog: Catalog) -> None:
    w = VirtualWorkload(prompt_tokens=512, output_tokens=16, requests=20, rate_per_s=1.0)
    a = run_virtual(_scenario(catalog), w)
    b = run_virtual(_scenario(catalog, L_MS), w)
    assert [r["arrival_s"] for r in b] == pytest.approx([r["arrival_s"] for r in a])
    assert [r["ttft_ms"] for r in b] == pytest.approx([r["ttft_ms"] + L_MS for r in a])
    assert [r["queue_ms"] for r in b] == pytest.approx([r["queue_ms"] for r in a])


def test_the_simulated_endpoint_over_http_delays_the_first_token(catalog: Catalog) -> None:
    # 127.0.0.1 only: one request to an endpoint 20x faster than the model, L = 400 ms model
    # time (20 ms real); the truth's TTFT counts from the send and holds it
    s = _scenario(catalog, 400.0)
    body = {"model": s.variant.key, "prompt": "x" * 2048, "max_tokens": 4, "ignore_eos": True}
    with serve_in_thread(create_app(s, SimConfig(speedup=20.0))) as url:
        async def go() -> None:
            async with httpx.AsyncClient(timeout=60) as c:
                (await c.post(url + "/completions", json=body)).raise_for_status()
        asyncio.run(go())
        truth = httpx.get(url.removesuffix("/v1") + "/sim/truth").json()["requests"]
    prefill_ms = float(evaluate(s, [1]).prefill_s) * 1e3
    assert truth[0]["ttft_ms"] * 20.0 == pytest.approx(400.0 + prefill_ms, rel=0.05)


def test_each_typical_basis_holds_its_engines_latency() -> None:
    sg, vl = typical_efficiency("sglang"), typical_efficiency("vllm")
    assert vl.typical["request_latency_ms"] == pytest.approx(7.84)
    assert sg.typical["request_latency_ms"] == pytest.approx(13.23)
    # every other knob but the decode arithmetic's eff is vLLM's (one set for both engines);
    # SGLang keeps 0.3, vLLM runs its decode GEMMs at the prefill plateau, 0.706 x 0.803
    assert (sg.typical["eff"], vl.typical["eff"]) == (0.374, 0.706)
    own = ("request_latency_ms", "eff", "ridge_sharpness")
    assert {k: v for k, v in sg.typical.items() if k not in own} == \
        {k: v for k, v in vl.typical.items() if k not in own}
    assert sg.step_error == vl.step_error
    base = PlanInputs(model="qwen3.5-9b-awq", workload=Workload(daily_active_users=10),
                      gpus=("rtx-4090",))
    assert with_typical(base, sg).request_latency_ms == pytest.approx(13.23)
    assert with_typical(base, vl).request_latency_ms == pytest.approx(7.84)
    assert "sglang" in engines()


def test_latency_points_and_their_held_out_median_by_hand() -> None:
    def row(group: str, c: float, measured: float, after: float, *, added: str = "",
            metric: str = "ttft", prompt: float = 0.0) -> vt.TypicalRow:
        return vt.TypicalRow(group=group, metric=metric, concurrency=c, measured=measured,
                             before=after, after=after, saturated=False, knobs=(), added=added,
                             prompt_tokens=prompt)

    points = {"A": 10.0, "B": 30.0, "C": 20.0}
    assert tl.held_out_latency(points, "A", 99.0) == 25.0       # median of 30 and 20
    assert tl.held_out_latency(points, "D", 99.0) == 20.0       # all three
    assert tl.held_out_latency({"A": 10.0}, "A", 99.0) == 99.0  # none other: the engine's
    assert tl.held_out_latency({"A": -5.0, "B": -3.0}, "C", 99.0) == 0.0  # never below 0
    assert not math.isnan(tl.held_out_latency(points, "B", 0.0))
    # an SGLang group: its lowest level's TTFT rows, measured - predicted, their median;
    # higher levels, decode rows and other engines' groups do not count
    groups = vt.groups_of()
    sg = "qwen3-8b-fp8 on h100-sxm (SGLang)"
    other = "qwen3-8b-bf16 on h100-sxm (vLLM)"
    assert tl.is_sglang(groups[sg]) and not tl.is_sglang(groups[other])
    rows = [row(sg, 4, 50.0, 30.0), row(sg, 4, 48.0, 30.0), row(sg, 16, 400.0, 100.0),
            row(sg, 2, 9.0, 9.0, metric="step"), row(other, 4, 80.0, 10.0)]
    assert tl.latency_points(rows, groups) == {sg: 19.0}
    # one rule for both engines (until 2026-12-06, night, SGLang's left out the rows added later):
    # a row added later counts, and one level lower it is the lowest
    assert tl.latency_points([*rows, row(sg, 2, 90.0, 10.0, added="2026-12-02")],
                             groups) == {sg: 80.0}
    # two prompt lengths at the lowest level: the shortest prompts' rows alone, where the
    # GPU's share is least (a 4K prompt's -100 ms is the prefill's error, not a latency)
    mixed = [row(sg, 1, 40.0, 20.0, prompt=600.0), row(sg, 1, 44.0, 20.0, prompt=600.0),
             row(sg, 1, 300.0, 400.0, prompt=4000.0), row(sg, 1, 310.0, 400.0, prompt=4000.0)]
    assert tl.latency_points(mixed, groups) == {sg: 22.0}       # median of 20 and 24
    assert tl.latency_points(mixed[2:], groups) == {sg: -95.0}  # one length: it counts
    # a group on CUDA graphs whose lowest TTFT level has 8 clients or fewer, rows of every
    # date (vLLM's C = 1 rows were added later); the eager AWQ group does not count
    vl = "qwen3-8b-bf16 on h100-sxm (vLLM)"
    eager = "qwen3-14b-awq on a100-80gb-sxm (vLLM)"
    assert all(x.cuda_graphs for x in groups[vl]) and not all(x.cuda_graphs for x in groups[eager])
    rows = [row(vl, 4, 64.0, 20.0), row(vl, 1, 60.0, 18.0, added="2026-12-04"),
            row(vl, 1, 62.0, 18.0, added="2026-12-04"), row(eager, 1, 3400.0, 2800.0),
            row(sg, 4, 50.0, 30.0)]
    assert tl.latency_points(rows, groups, "vLLM") == {vl: 43.0}   # median of 42 and 44
    # measured at 16 clients at the least: no point
    assert tl.latency_points([row(vl, 16, 90.0, 20.0)], groups, "vLLM") == {}
    # the engines the points predict: SGLang's own, every other engine vLLM's
    assert tl.latency_family(groups[sg]) == "SGLang" and tl.latency_family(groups[eager]) == "vLLM"
    assert tl.latency_family(groups["llama-3.1-70b-fp8 on 2x h100-sxm (NIM)"]) == "vLLM"
    # every group's latency: its own engine's points without its own, the file's value when
    # none is left (an engine with no source group)
    some = {k: groups[k] for k in (sg, vl, eager)}
    pts = {"SGLang": {sg: 30.0, "other SGLang": 10.0}, "vLLM": {vl: 40.0, "x": 6.0, "y": 12.0}}
    assert tl.group_latency(some, pts, {"SGLang": 99.0, "vLLM": 99.0}) == {
        sg: 10.0, vl: 9.0, eager: 12.0}
    assert tl.group_latency(some, {}, {"SGLang": 20.0, "vLLM": 11.0}) == {
        sg: 20.0, vl: 11.0, eager: 11.0}


@pytest.mark.slow
def test_the_shipped_latency_is_the_scorecards() -> None:
    """data/engines.toml's [sglang.request_latency_ms] and [vllm.request_latency_ms] are the
    medians of the scorecard's latency points (each engine's groups on CUDA graphs at 8 clients
    or fewer), their ranges the extremes, never below 0; every group is predicted
    with the other groups' points of its engine alone (the NIM and TensorRT-LLM groups, on
    `typical:vllm`, with every vLLM point)."""
    card = shipped("typical")
    by_family = {"SGLang": dict(card.latency_points), "vLLM": dict(card.vllm_latency_points)}
    assert len(by_family["SGLang"]) >= 5 and len(by_family["vLLM"]) >= 4
    for fam, engine in (("SGLang", "sglang"), ("vLLM", "vllm")):
        pts = by_family[fam]
        typ = typical_efficiency(engine)
        assert typ.typical["request_latency_ms"] == pytest.approx(
            float(np.median(list(pts.values()))), abs=0.01)
        assert (typ.low["request_latency_ms"], typ.high["request_latency_ms"]) == pytest.approx(
            (max(0.0, min(pts.values())), max(pts.values())), abs=0.01)
    groups = vt.groups_of()
    held = dict(card.latency_ms)
    assert set(held) == set(groups)
    for group, x in held.items():
        pts = by_family[tl.latency_family(groups[group])]
        others = [v for k, v in pts.items() if k != group]
        assert x == pytest.approx(max(0.0, float(np.median(others))))
    # the eager AWQ group and the MI300X measured at 32 clients lend no point
    assert not any("awq" in k or "mi300x" in k for k in by_family["vLLM"])


def test_a_scenario_on_the_sglang_basis_carries_it(catalog: Catalog) -> None:
    s = scenario_with_basis(_scenario(catalog), "typical:sglang")
    assert s.request_latency_ms == pytest.approx(13.23)
    assert scenario_with_basis(_scenario(catalog), "spec").request_latency_ms == 0.0
    assert scenario_with_basis(_scenario(catalog), "").request_latency_ms == 0.0
    assert scenario_with_basis(_scenario(catalog), "typical:vllm").request_latency_ms == \
        pytest.approx(7.84)
