"""The typical section's decode step: rows scored on the event model's TPOT, and eta_bw with
F11's per-layer overhead solved from two source points and held out for their source groups
(capacity.fit.validate_typical, data/engines.toml's header).

Expected values are worked by hand in the comments.
"""

from __future__ import annotations

import math
import statistics

import pytest

from capacity.catalog.loader import default_catalog
from capacity.fit import validate as v
from capacity.fit import validate_typical as vt
from capacity.fit.typical import typical_efficiency
from capacity.model.basis import CHAPTER_KNOBS
from capacity.model.scenario import make_scenario
from tests.shipped import shipped


def test_held_out_eta_bw_hand_values() -> None:
    pts = {"a": (0.78, 0.70), "b": (0.60,)}
    # b left out: 0.65 x median(0.78, 0.70) / median(0.78, 0.70, 0.60) = 0.65 x 0.74 / 0.70
    assert vt.held_out_eta_bw(pts, "b", 0.65) == pytest.approx(0.65 * 0.74 / 0.70)
    # a left out: 0.65 x 0.60 / 0.70
    assert vt.held_out_eta_bw(pts, "a", 0.65) == pytest.approx(0.65 * 0.60 / 0.70)
    # a group that is no source, or nothing left: the file's value
    assert vt.held_out_eta_bw(pts, "c", 0.65) == 0.65
    assert vt.held_out_eta_bw({"a": (0.7,)}, "a", 0.65) == 0.65


def test_eta_bw_rederived_from_its_source_points() -> None:
    groups = vt.groups_of()
    cat = default_catalog()
    # the sweeps the knobs were derived on (the scorecard's; the rows added later held out)
    h100 = vt.eta_bw_points([s for s in groups["qwen3-8b-bf16 on h100-sxm (vLLM)"]
                             if not s.is_added], cat)
    # Qwen3-8B BF16 on one H100 SXM at C = 4, 454-token context: weights 8.19e9 x 2 B less
    # the untied embedding lookup 151936 x 4096 x 2 B = 15.14 GB, KV 36 x 8 x 128 x 2 x 2 B
    # x 454 x 4 = 0.268 GB; 15.41 GB / 3350 GB/s = 4.60 ms; measured TPOT 7.38 ms -> 0.623
    assert h100 == pytest.approx((4.60 / 7.38,), rel=0.01)
    rtx = vt.eta_bw_points(groups["mistral-7b-v0.3-bf16 on rtx-4090 (vLLM)"], cat)
    # Mistral-7B BF16 on an RTX 4090 at C = 4, 384-token context: 7.25e9 x 2 B less the
    # embedding lookup 32768 x 4096 x 2 B = 14.23 GB, KV 32 x 8 x 128 x 2 x 2 B x 384 x 4
    # = 0.201 GB; 14.43 GB / 1008 GB/s = 14.32 ms; TPOT from throughput 18.70 ms -> 0.766
    assert len(rtx) == 5 and rtx[0] == pytest.approx(14.32 / 18.70, rel=0.01)
    # the 'before' basis' 0.65 is the rule's median (0.62 today, data/engines.toml's header)
    # within 5%
    every = statistics.median(h100 + rtx)
    assert vt.BEFORE_ETA_BW == pytest.approx(every, rel=0.05)


def test_step_knobs_solved_from_two_points_by_hand() -> None:
    # 14.551 / e + 32 t = 18.70 and 4.95 / e + 36 t = 7.38, in x = 1 / e:
    # t = (7.38 x 14.551 - 18.70 x 4.95) / (36 x 14.551 - 32 x 4.95)
    #   = (107.386 - 92.565) / (523.836 - 158.4) = 14.821 / 365.436 = 0.040557 ms
    # x = (18.70 - 32 x 0.040557) / 14.551 = 17.4022 / 14.551 = 1.19594 -> e = 0.83617
    a = vt.StepPoint(bandwidth_ms=14.551, tpot_ms=18.70, layers=32)
    b = vt.StepPoint(bandwidth_ms=4.95, tpot_ms=7.38, layers=36)
    eta, layer = vt.solve_step_knobs([a, b])
    assert layer == pytest.approx(0.040557, rel=1e-4)
    assert eta == pytest.approx(0.83617, rel=1e-4)
    # one point: no per-layer cost, eta_bw = t_bw / TPOT = 4.95 / 7.38 = 0.67073
    assert vt.solve_step_knobs([b]) == (pytest.approx(0.67073, rel=1e-4), 0.0)
    # a negative per-layer cost is outside physics: the pair's exact fit (t = -1/30) is not a
    # vertex; with x >= 1 (eta_bw at most the copy ceiling) and t >= 0 the vertices are (1, 0):
    # |12 - 10| + |11 - 10| = 3; (1.2, 0), c exact: |11 - 12| = 1.0; (1.1, 0), d exact: |12 -
    # 11| = 1.0; (1, 0.2), c exact: |11 - 10 - 8| = 7; (1, 0.025), d exact: |12 - 10 - 0.25|
    # = 1.75; two tie at 1.0: the segment between them, its mean x = 1.15
    c = vt.StepPoint(bandwidth_ms=10.0, tpot_ms=12.0, layers=10)
    d = vt.StepPoint(bandwidth_ms=10.0, tpot_ms=11.0, layers=40)
    assert vt.solve_step_knobs([c, d]) == (pytest.approx(1 / 1.15), 0.0)
    with pytest.raises(ValueError):
        vt.solve_step_knobs([])


def test_the_file_holds_the_solved_step_knobs() -> None:
    groups = vt.groups_of()
    cat = default_catalog()
    pts = vt.step_points(groups, cat)
    # every group measured at 8 clients or fewer with CUDA graphs: eighteen on five GPUs (the
    # eighteenth, DeepSeek-R1 on 8 B200s at one client, added 2026-12-07: 61 layers at 117 us
    # over its reads, it leaves the least-absolute-deviations vertex where it was); not the
    # --enforce-eager A100 group, nor MI300X (32 clients) or gpt-oss on two and four H100s (64)
    assert len(pts) == 18
    assert not any("qwen3-14b-awq" in k or "mi300x" in k for k in pts)
    assert len({p.gpu for p in pts.values()}) == 5
    eta, layer = vt.solve_step_knobs(list(pts.values()))
    # each point's reads at its GPU's copy ceiling (eta_bw's unit since 2026-12-07), the
    # weights counted as engines read them (the typical basis' count since that day, later):
    # the H200's 4,266 of 4,800 GB/s; Llama-3.1-70B's step at the chapter's count was 9.521 ms
    # / 0.889 = 10.71 ms, less its 128,256 x 8,192 x 2-byte table over 4 GPUs 10.59 ms
    h200 = pts["llama-3.1-70b-bf16 on 4x h200-sxm (vLLM)"]
    table_ms = 128_256 * 8_192 * 2 / 4 / 4266e9 * 1e3
    assert h200.bandwidth_ms == pytest.approx(9.521 / (4266.0 / 4800) - table_ms, abs=3e-3)
    # least absolute deviations: eta_bw at its bound (the copy ceiling itself) and the line
    # through Qwen3-235B-A22B on 8 B200s (94 layers); on the chapter's count, through
    # Llama-3.1-70B on 4 H200s at 70.58 us. Without Qwen2.5-7B on an RTX 4090 (vLLM 0.25.1,
    # whose BF16 point reads about as fast as the card copies) the free solve is 0.966 of the
    # ceilings (0.958 before the DeepSeek-R1 point). As shares of the spec sheet (until
    # 2026-12-07) the bound was 0.9, 72.25 us
    p = pts["qwen3-235b-a22b-bf16 on 8x b200 (SGLang)"]
    assert eta == pytest.approx(vt.ETA_BW_MAX) and vt.ETA_BW_MAX == 1.0
    assert p.bandwidth_ms / eta + p.layers * layer == pytest.approx(p.tpot_ms)
    assert layer == pytest.approx(0.077346, abs=1e-5)
    without = [q for k, q in pts.items() if "qwen2.5-7b" not in k]
    assert vt.solve_step_knobs(without)[0] == pytest.approx(0.9662, abs=1e-4)   # 0.9581 before DeepSeek-R1
    typ = typical_efficiency("vllm").typical
    assert typ["eta_bw"] == pytest.approx(eta, abs=0.001)
    assert typ["layer_overhead_ms"] == pytest.approx(layer, abs=0.0001)
    assert typical_efficiency("sglang").typical["layer_overhead_ms"] == typ["layer_overhead_ms"]


def test_held_out_step_knobs_leave_out_the_model_on_the_gpu() -> None:
    # three points; the group of model m on GPU g is solved without every point of m on g,
    # whatever its engine or GPU count
    a = vt.StepPoint(bandwidth_ms=14.551, tpot_ms=18.70, layers=32, model="m", gpu="g")
    b = vt.StepPoint(bandwidth_ms=4.95, tpot_ms=7.38, layers=36, model="n", gpu="h")
    c = vt.StepPoint(bandwidth_ms=5.0, tpot_ms=30.0, layers=36, model="m", gpu="g")
    pts = {"m on g (vLLM)": a, "n on h (vLLM)": b, "m on 2x g (SGLang)": c}
    # m on g: b alone -> eta_bw = 4.95 / 7.38 = 0.67073, t = 0
    assert vt.held_out_step_knobs(pts, "m", "g", {}) == {
        "eta_bw": pytest.approx(0.67073, rel=1e-4), "layer_overhead_ms": 0.0}
    # n on h: a and c (c, 30 ms on 5 ms of reads, is 36 layers' worth of fixed time)
    got = vt.held_out_step_knobs(pts, "n", "h", {})
    assert got == dict(zip(("eta_bw", "layer_overhead_ms"), vt.solve_step_knobs([a, c]),
                           strict=True))
    # nothing left: the file's
    engine = {"eta_bw": 0.9, "layer_overhead_ms": 0.0727}
    assert vt.held_out_step_knobs({"x": a}, "m", "g", engine) == engine


def test_the_solve_stays_inside_physics_by_hand() -> None:
    # TPOT = 10 / e + 10 t for (10, 10, 10) and (5, 6, 10)... free solve: two equations
    # 10 x + 10 t = 10, 5 x + 10 t = 6 -> x = 0.8, t = 0.2: eta_bw 1.25 of the copy ceiling, a
    # read faster than the device copies, so eta_bw = 1; the residuals per layer at it:
    # (10 - 10) / 10 = 0 and (6 - 5) / 10 = 0.1; either t leaves |0.1 x 10| = 1.0 in all, as
    # does every t between: the mean of the two
    a = vt.StepPoint(bandwidth_ms=10.0, tpot_ms=10.0, layers=10)
    b = vt.StepPoint(bandwidth_ms=5.0, tpot_ms=6.0, layers=10)
    eta, layer = vt.solve_step_knobs([a, b])
    assert eta == pytest.approx(1.0)
    assert layer == pytest.approx((0.0 + 0.1) / 2, rel=1e-4)


def test_a_point_the_model_cannot_explain_moves_the_knobs_as_a_median_would() -> None:
    # three points on eta_bw 0.9 and t = 0.07 ms exactly (t_bw / 0.9 + L x 0.07), and a
    # fourth whose step is 10 ms slower than they say: least absolute deviations fit the three
    # (residuals 0, 0, 0, 10: 10 in all; any line off them leaves more than it gains on the
    # fourth), least squares would move t by 10 x 36 / (32^2 + 80^2 + 24^2 + 36^2) = 0.039 ms
    def pt(bw: float, layers: int, extra: float = 0.0) -> vt.StepPoint:
        return vt.StepPoint(bandwidth_ms=bw, tpot_ms=bw / 0.9 + layers * 0.07 + extra,
                            layers=layers)
    pts = [pt(14.0, 32), pt(10.0, 80), pt(2.0, 24), pt(2.7, 36, extra=10.0)]
    eta, layer = vt.solve_step_knobs(pts)
    assert (eta, layer) == (pytest.approx(0.9), pytest.approx(0.07))


def test_event_model_tpot_is_the_step_alone_at_one_client_and_more_under_load() -> None:
    typ = typical_efficiency("vllm").typical
    s = make_scenario("llama-3.1-8b-bf16", "h100-sxm", context_tokens=2048,
                      prompt_tokens=1024).with_(calibration=None, **{**CHAPTER_KNOBS, **typ})
    p = v.predict(s, [1, 32], 1024, 128, "vllm")
    assert p.queued is not None
    one, many = p.queued
    # one client: nothing else is prefilled between its tokens, TPOT = F4's step
    assert one.tpot_mean_ms == pytest.approx(p.step_ms[0], rel=0.01)
    assert one.tpot_median_ms == pytest.approx(p.step_ms[0], rel=0.01)
    # 32 clients with 1024-token prompts: other prompts' chunks share the steps
    assert many.tpot_mean_ms > p.step_ms[1]
    # the mean is (E2E - TTFT) / (n - 1) of the same requests
    assert many.tpot_mean_ms == pytest.approx(
        (many.e2e_mean_ms - many.ttft_mean_ms) / 127, rel=1e-9)


@pytest.mark.slow
def test_step_rows_are_scored_on_the_benchmarks_tpot() -> None:
    card = shipped("typical")
    steps = [r for r in card.rows if r.metric == "step"]
    assert steps and all(math.isfinite(r.step_ms) and math.isfinite(r.spec_ms) for r in steps)
    # NIM at C = 25, 5000-token prompts: the TPOT includes the prefills of the others
    nim = next(r for r in steps if "(NIM)" in r.group and r.concurrency == 25)
    assert nim.after > nim.step_ms
    # the typical basis is never faster than the spec sheet on any step row
    assert all(r.after >= r.spec_ms and r.step_ms >= r.spec_ms for r in steps)
    # the eager group says so in the table
    eager = [r for r in steps if "enforce-eager" in r.engine]
    assert eager and "--enforce-eager" in vt.markdown(card)
    # each group with the points of other models or other GPUs: Qwen3-8B BF16 on an H100
    # without its vLLM, SGLang and TensorRT-LLM points (the FP8 checkpoint is another model)
    knobs = {r.group: dict(r.knobs) for r in steps}
    groups = vt.groups_of()
    pts = vt.step_points(groups, default_catalog())
    rest = [p for k, p in pts.items() if not k.startswith("qwen3-8b-bf16 on h100-sxm")]
    assert len(rest) == len(pts) - 3
    eta, layer = vt.solve_step_knobs(rest)
    for engine in ("vLLM", "SGLang", "TensorRT-LLM"):
        k = knobs[f"qwen3-8b-bf16 on h100-sxm ({engine})"]
        assert (k["eta_bw"], k["layer_overhead_ms"]) == pytest.approx((eta, layer), abs=1e-3)
    assert card.step_sources == tuple(sorted(pts))
    # each group on its engine's knobs (the engines file's unit, a share of the GPU's measured
    # matmul ceiling): SGLang's decode arithmetic at 0.374 (0.3 of an H100's spec sheet),
    # every other engine's (vLLM, NIM, TensorRT-LLM) at vLLM's 0.706 (0.567)
    assert {knobs[f"qwen3-8b-bf16 on h100-sxm ({e})"]["eff"]
            for e in ("vLLM", "TensorRT-LLM")} == {0.706}
    assert knobs["qwen3-8b-bf16 on h100-sxm (SGLang)"]["eff"] == 0.374


def test_vllm_decode_arithmetic_runs_at_the_prefill_plateau() -> None:
    """data/engines.toml's [vllm] eff is the prefill plateau itself (mfu), both shares of the
    GPU's measured matmul ceiling (`capacity.fit.typical.CEILING_SHARES`), its range the plateau's; a
    scenario resolves both on its own GPU, so an H100 (ceiling 0.803) runs its decode GEMMs at
    0.706 x 0.803 = 0.567 of its spec sheet and an A100 (0.869) at 0.706 x 0.869 = 0.614, each
    the same share as its prefill plateau. SGLang's eff is 0.3 of an H100's spec sheet in the
    same unit, 0.3 / 0.803 = 0.374 (its own large-batch rows read it, the header says). vLLM's
    decode combines its weight read and arithmetic at F6c's sharpness, 2.5 (F4c's ridge), the
    curve the same GEMMs follow in a prefill pass."""
    from capacity.catalog.matmul import UNMEASURED_CEILING
    from capacity.fit.planning import scenario_with_basis
    from capacity.fit.typical import CEILING_SHARES
    from capacity.model.prefill import MFU_CURVE_SHARPNESS
    from capacity.model.scenario import make_scenario

    vl, sg = typical_efficiency("vllm"), typical_efficiency("sglang")
    assert CEILING_SHARES == ("eff", "mfu")
    assert (vl.typical["eff"], vl.low["eff"], vl.high["eff"]) == (
        vl.typical["mfu"], pytest.approx(vl.low["mfu"], abs=5e-4),
        pytest.approx(vl.high["mfu"], abs=5e-4))
    assert sg.typical["eff"] == round(0.3 / UNMEASURED_CEILING, 3) == 0.374
    assert vl.typical["ridge_sharpness"] == MFU_CURVE_SHARPNESS == 2.5
    cat = default_catalog()
    for gpu, ceiling, want in (("h100-sxm", 0.803, 0.567), ("a100-80gb-sxm", 271.2 / 312, 0.614)):
        s = scenario_with_basis(make_scenario("llama-3.1-8b", gpu, catalog=cat), "typical:vllm")
        assert s.eff == s.mfu == pytest.approx(0.706 * ceiling, abs=5e-4)
        assert s.eff == pytest.approx(want, abs=5e-4)
        assert s.ridge_sharpness == 2.5
    h100 = scenario_with_basis(make_scenario("llama-3.1-8b", "h100-sxm", catalog=cat),
                               "typical:sglang")
    assert h100.eff == pytest.approx(0.3, abs=5e-4) and h100.ridge_sharpness == 0.0
