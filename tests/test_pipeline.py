"""F13: pipeline parallelism across nodes (capacity/model/pipeline.py, docs/method.md "F13"),
each figure against a hand computation, and every surface that shows a pipelined deployment
against the one computation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.explorer_view import LOAD_SECTION
from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.fit.typical import typical_efficiency
from capacity.model.fixes import FixKind, suggest_fixes
from capacity.model.kv import kv_request_bytes
from capacity.model.pipeline import (
    copy_layout,
    forward_comm_line,
    handoffs,
    pp_comm_line,
    stage_share,
    stream_slots,
)
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.deployment import Deployment, assess
from capacity.plan.detail import option_scenario
from capacity.plan.options import PlanInputs, parallel_layout
from capacity.plan.search import plan
from capacity.units import GB

CAT = default_catalog()
DS = CAT.variant("deepseek-r1", "fp8").model
H100 = CAT.gpu("h100-sxm")


def _r1(pp: int = 2, n: int = 16, **kw: object) -> object:
    return make_scenario("deepseek-r1", "h100-sxm", weights="fp8", n_gpus=n, tp=8, pp=pp,
                         kv_dtype="fp8", context_tokens=4096, **kw)


def test_stage_share_is_the_largest_stage_of_layers() -> None:
    assert stage_share(DS, 1) == 1.0
    assert stage_share(DS, 2) == pytest.approx(31 / 61)      # 61 layers: 31 + 30
    llama = CAT.variant("llama-3.1-70b").model                # 80 layers
    assert stage_share(llama, 3) == pytest.approx(27 / 80)   # 27 + 27 + 26
    assert stage_share(llama, 4) == pytest.approx(20 / 80)


def test_handoffs_inside_and_across_nodes() -> None:
    assert handoffs(H100, 8, 2) == (0, 1)    # two 8-GPU nodes, one stage each
    assert handoffs(H100, 4, 4) == (2, 1)    # two stages a node: 0-1 in, 1-2 across, 2-3 in
    assert handoffs(H100, 2, 2) == (1, 0)    # both stages in one node
    assert handoffs(H100, 8, 3) == (0, 2)


def test_hand_off_line_by_hand() -> None:
    """DeepSeek (hidden 7,168) on H100 TP 8 x PP 2 over 400 Gb/s: 50 us, then 2 x 7,168 x 2 =
    28,672 B a token at 8 x 50 GB/s = 0.07168 us a token; the engine's time adds per hand-off."""
    line = pp_comm_line(DS, H100, 8, 2)
    assert line.fixed_ms == pytest.approx(0.05)
    assert line.per_token_ms == pytest.approx(28_672 / (8 * 50e9) * 1e3)
    assert float(line.at(64)) == pytest.approx(0.05 + 64 * 7.168e-5)
    assert float(line.at(8192)) == pytest.approx(0.6372, abs=1e-4)
    assert pp_comm_line(DS, H100, 8, 3, handoff_ms=4.73).fixed_ms == pytest.approx(2 * 4.78)
    inside = pp_comm_line(DS, H100, 4, 2)        # NVLink, 450 GB/s a GPU, 8 us
    assert inside.fixed_ms == pytest.approx(0.008)
    assert inside.per_token_ms == pytest.approx(28_672 / (4 * 450e9) * 1e3)
    assert pp_comm_line(DS, H100, 8, 1).fixed_ms == 0.0
    both = forward_comm_line(DS, H100, 8, 2)      # TP's all-reduces and the hand-off, added
    tp_only = forward_comm_line(DS, H100, 8, 1)
    assert both.fixed_ms == pytest.approx(tp_only.fixed_ms + 0.05)
    assert both.above_ms == pytest.approx(tp_only.above_ms + line.per_token_ms)


def test_memory_of_a_pipelined_copy_by_hand() -> None:
    """16 H100s, TP 8 x PP 2, FP8 DeepSeek-R1 (672.853 GB), 4K context, FP8 KV: a GPU holds
    31/61 of W / 8 = 42.743 GB; budget 80 x 0.9 - 42.743 - 1.5 - 2.147 = 25.610 GB; a request's
    KV on a GPU is 31/61 of TP 8's 143,917,056 B = 73,138,176 B; 350 requests, 175 a stream."""
    s = _r1()
    assert s.weights_per_gpu_gb == pytest.approx(672.85335808 * 31 / 61 / 8)
    assert s.step_weights_gb == pytest.approx(672.85335808 / 8)
    assert (s.replicas, s.copies) == (2, 1)
    ev = evaluate(s, [64])
    full = kv_request_bytes(DS, 4096, "fp8", 8, s.block_size).exact_bytes
    assert float(ev.kv_held_bytes) == pytest.approx(full * 31 / 61)
    budget = (80 * 0.9 - 672.85335808 * 31 / 61 / 8 - 1.5 - 2.147483648) * GB
    assert ev.vram.kv_budget_bytes == pytest.approx(budget)
    slots = math.floor(budget / (full * 31 / 61))
    assert slots == 350
    assert int(ev.max_concurrency_vram) == (slots // 2) * 2
    assert int(stream_slots(351, 2)) == 175
    # 64 requests: 32 a stream, both streams' KV on every GPU
    assert float(ev.kv_total_bytes[0]) == pytest.approx(32 * 2 * full * 31 / 61)
    assert str(ev.verdict[0]) == "fits"
    alone = evaluate(_r1(pp=1, n=8), [64])   # TP 8 on one node: the weights alone overflow
    assert str(alone.verdict[0]) == "does_not_fit"


def test_a_stream_steps_as_the_tp_group_plus_its_hand_off() -> None:
    """The step of C requests on TP 8 x PP 2 is TP 8's step of the whole model at C / 2 plus
    one hand-off of C / 2 tokens; the prefill is TP 8's plus one hand-off of the prompt."""
    pp, tp8 = _r1(), _r1(pp=1, n=8)
    for c in (2, 16, 64, 256):
        a = float(evaluate(pp, [c]).decode.step_ms[0])
        b = float(evaluate(tp8, [c // 2]).decode.step_ms[0])
        assert a - b == pytest.approx(float(pp_comm_line(DS, H100, 8, 2).at(c // 2)), rel=1e-9)
    ttft_pp, ttft_tp = float(evaluate(pp, [1]).prefill_s), float(evaluate(tp8, [1]).prefill_s)
    assert (ttft_pp - ttft_tp) * 1e3 == pytest.approx(float(pp_comm_line(DS, H100, 8, 2).at(4096)))
    # the engine's hand-off time on the typical basis goes into both
    knob = pp.with_(pp_handoff_ms=4.73)
    assert (float(evaluate(knob, [16]).decode.step_ms[0])
            - float(evaluate(pp, [16]).decode.step_ms[0])) == pytest.approx(4.73)


def test_the_typical_hand_off_is_the_published_pair() -> None:
    """data/engines.toml's 4.73 ms: vLLM 0.17 on H100 nodes, 512 tokens of Qwen2.5-72B in 5.14 s
    (TP 8, TTFT 19 ms) and 7.59 s (TP 8 x PP 2, TTFT 25.8 ms): the step difference less the
    wire of one token (50 us and 2 x 8,192 x 2 B at 8 x 50 GB/s)."""
    step = (7.59 - 0.0258) / 511 * 1e3 - (5.14 - 0.019) / 511 * 1e3
    wire = 0.05 + 2 * 8192 * 2 / (8 * 50e9) * 1e3
    for engine in ("vllm", "sglang"):
        te = typical_efficiency(engine)
        assert te.typical["pp_handoff_ms"] == pytest.approx(step - wire, abs=0.005)
        assert te.high["pp_handoff_ms"] == pytest.approx(25.8 - 19 - 0.05, abs=0.005)


def test_pipeline_inputs_are_checked() -> None:
    with pytest.raises(InputError, match="does not divide"):
        _r1(pp=2, n=8)
    with pytest.raises(InputError, match="exceeds the 61 layers"):
        make_scenario("deepseek-r1", "h100-sxm", weights="fp8", n_gpus=64, tp=1, pp=64)
    with pytest.raises(InputError, match="PP"):
        _r1(pp=0)
    assert copy_layout(8, 2) == "TP=8 x PP=2" and copy_layout(1, 3) == "PP=3"
    assert parallel_layout(32, 8, 2) == "2 replicas x TP=8 x PP=2"
    assert parallel_layout(16, 8, 2) == "TP=8 x PP=2" and parallel_layout(1, 1) == ""


def _inputs(*, ctx: int = 4096, prompt: int = 4096, rate: float = 2.0,
            **kw: object) -> PlanInputs:
    wl = Workload(rate_per_s=rate, context_tokens=ctx, prompt_tokens=prompt, output_tokens=500)
    base: dict[str, object] = {"model": "deepseek-r1", "workload": wl, "gpus": ("h100-sxm",),
                               "formats": ("fp8",), "kv_dtypes": ("fp8",), "max_gpus": 16}
    return PlanInputs(**(base | kw))  # type: ignore[arg-type]


def test_the_planner_chains_two_nodes_when_one_cannot_hold_the_model() -> None:
    """FP8 DeepSeek-R1 on H100s: no TP group of one node holds it, so the only options are a
    node's TP 8 over two nodes; the deployment's figures are the option's (`assess`), and the
    option's scenario (the Explorer's) holds as many requests as the planner counts."""
    p = plan(_inputs())
    assert p.options, p.rejected
    best = p.options[0]
    assert (best.n_gpus, best.tp, best.pp, best.copies, best.replicas) == (16, 8, 2, 1, 2)
    assert best.label.startswith("16 x H100 SXM (TP=8 x PP=2), fp8")
    assert all(o.pp == 2 for o in p.options)
    again = assess(Deployment.of(p.inputs, best))
    for f in ("ttft_ms", "tpot_ms", "cost_per_month", "cost_per_mtok", "capacity_rate_per_s",
              "c_vram_per_replica"):
        assert getattr(again, f) == pytest.approx(getattr(best, f)), f
    s = option_scenario(p.inputs, best)
    assert (s.tp, s.pp, s.n_gpus) == (8, 2, 16)
    ev = evaluate(s, [1])
    assert int(ev.max_concurrency_vram) == best.c_vram_per_replica * best.replicas
    assert float(ev.prefill_s) * 1e3 == pytest.approx(best.prefill_ms, rel=1e-9)
    d = Deployment.of(p.inputs, best)
    assert (d.replicas, d.pp, d.n_gpus) == (1, 2, 16)
    # the quote says whose slots its figure counts: one decode stream's, two a replica
    from capacity.report.quote import quote_markdown
    assert (f"| Memory verdict / slots per decode stream (2 a replica) | fits / "
            f"{best.slots_per_replica} |") in quote_markdown(p, lang="en")
    assert "每条解码流槽位（每个副本 2 条）" in quote_markdown(p, lang="zh")


def test_only_a_model_no_node_holds_is_pipelined() -> None:
    """Pipelines are searched where a node's TP group cannot hold the model and one request,
    as the engines advise (Qwen3-8B on H100s: none; FP8 DeepSeek-R1: TP 8 x PP 2); the spare
    of a pipelined option is a whole copy (TP x PP GPUs)."""
    small = plan(_inputs(model="qwen3-8b", formats=("bf16",), kv_dtypes=("fp16",), ctx=8192,
                         prompt=2048, rate=1.0), keep_all=True)
    assert small.options and not [o for o in small.all_options if o.pp > 1]
    big = plan(_inputs(spare=True, max_gpus=32), keep_all=True)
    piped = [o for o in big.all_options if o.pp > 1]
    assert {(o.tp, o.pp) for o in piped} == {(8, 2), (8, 3), (8, 4)}
    assert all(o.spare_gpus == o.tp * o.pp for o in piped)
    assert {o.n_gpus for o in piped if o.pp == 2} == {16, 32}   # one copy or two
    # "replicas only" (no tensor parallelism) is no model parallelism: no pipeline either
    flat = plan(_inputs(allow_tp=False), keep_all=True)
    assert not flat.options and {o.pp for o in flat.all_options} == {1}


def test_a_memory_fix_never_stretches_tp_across_nodes() -> None:
    """Nine H100s cannot hold FP8 DeepSeek-R1: the fewest GPUs that do are two nodes as
    pipeline stages, not TP 16 across them."""
    s = make_scenario("deepseek-r1", "h100-sxm", weights="fp8", n_gpus=9, tp=1,
                      kv_dtype="fp8", context_tokens=4096)
    gpus = next(f for f in suggest_fixes(s, 4) if f.kind == FixKind.GPUS)
    assert (gpus.n_gpus, gpus.tp, gpus.pp) == (16, 8, 2)
    assert gpus.description == "16 GPUs at TP=8 x PP=2"


def test_plan_command_takes_pp_and_says_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "deepseek-r1", "--weights", "fp8", "--gpu", "h100-sxm",
            "--gpus", "16", "--tp", "8", "--pp", "2", "--kv-dtype", "fp8", "--ctx", "4096",
            "--concurrency", "1,64"]
    assert main([*args, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["tp"], d["pp"], d["replicas"], d["gpus"]) == (8, 2, 1, 16)
    assert d["max_concurrency_vram"] == 350
    assert d["points"][1]["step_ms"] == pytest.approx(
        float(evaluate(_r1(), [64]).decode.step_ms[0]))
    assert main(args) == 0
    assert "(TP=8 x PP=2, 1 replica)" in capsys.readouterr().out
    assert main([*args[:-2], "--pp", "3"]) == 2
    assert "does not divide" in capsys.readouterr().err
    # a calibration's terms are one TP group's: it refuses a pipeline rather than fit it wrong
    assert main(["calibrate", "--gpus", "2", "--pp", "2", "--plan"]) == 2
    assert "pipelined deployment" in capsys.readouterr().err


APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")


def _explorer(*sections: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    for k, v in params.items():
        at.query_params[k] = v
    for name in sections:   # a section runs only while open
        at.session_state[name] = True
    at.run()
    assert not at.exception
    return at


@pytest.mark.usefixtures("custom")
def test_the_explorer_takes_pp_from_a_link_and_offers_what_the_gpus_allow() -> None:
    """The Explorer's PP input: a link's pp is restored; only divisors of GPUs / TP are
    offered; a pp the GPUs do not allow falls back to 1 with a notice; the memory card reads
    the pipelined copy's memory (each GPU half the layers)."""
    link = {"model": "deepseek-r1", "weights": "fp8", "gpu": "h100-sxm", "gpus": "16",
            "tp": "8", "kv": "fp8", "ctx": "4096", "c": "16"}
    at = _explorer(LOAD_SECTION, **link, pp="2", engine="vllm")
    pp = at.selectbox(key="ex_pp")
    # the load view simulates one decode stream and says so
    assert any("slots per decode stream (2 streams a replica" in c.value for c in at.caption)
    assert pp.value == 2 and list(pp.options) == ["1", "2"]
    # 42.74 GB of weights, 1.5 + 2.15 GB overhead and NCCL, 16 requests' KV: 8 a stream, both
    # streams on every GPU, 73.1 MB each (test_memory_of_a_pipelined_copy_by_hand): 47.6 GB
    memory = " | ".join(m.value for m in at.get_by_key("verdict_memory").markdown)
    assert "[fits]" in memory and "47.6 GB needed of 72.0 GB usable" in memory
    flat = _explorer(**link)       # PP 1: TP 8 on 16 GPUs is two copies, each too large
    assert "[does not fit]" in " | ".join(
        m.value for m in flat.get_by_key("verdict_memory").markdown)
    bad = _explorer(**link, pp="3")
    assert bad.selectbox(key="ex_pp").value == 1
    assert any("pp=3" in w.value for w in bad.warning)


def test_the_prediction_names_the_hand_off_where_a_pipeline_pays_it() -> None:
    """The basis' words (the Explorer's prediction line, the quote's assumptions) name the
    engine's hand-off on the typical basis where the figures rest on a pipeline, in both
    languages, and nowhere else."""
    from capacity.fit.planning import scenario_with_basis
    from capacity.report.bases import knobs_text

    piped = scenario_with_basis(_r1(), "typical:vllm")
    assert piped.pp_handoff_ms == pytest.approx(4.73)
    assert "4.73 ms of the engine's per pipeline hand-off" in knobs_text(piped, "en")
    assert "流水线交接" in knobs_text(piped, "zh")
    assert "hand-off" not in knobs_text(piped.with_(pp=1, n_gpus=8), "en")
    assert "hand-off" not in knobs_text(scenario_with_basis(_r1(), ""), "en")   # the chapter: 0


def test_show_the_math_of_a_pipeline_adds_up_to_the_figures() -> None:
    """"Show the math" on TP 8 x PP 2: F2 with the stage's 31/61 of the layers, C_vram over
    the two micro-batches, the subtotal with both streams' requests on every GPU, and the
    bandwidth term reading every stage's KV: each value the one `evaluate` computes."""
    from capacity.report.explain import show_math

    s = _r1()
    ev = evaluate(s, [16])
    math_of = {m.key: m for m in show_math(s, 16)}
    assert math_of["kv_request"].substituted.startswith("34.31 KiB x 4,096 x 31/61 = 73,138,176 B")
    assert math_of["c_vram"].substituted == "floor(floor(25.61 / (0.07314)) / 2) x 2 = 350"
    assert math_of["c_vram"].value == float(ev.max_concurrency_vram) == 350
    assert math_of["subtotal"].value == pytest.approx(float(ev.vram_subtotal_bytes[0]) / GB)
    assert "16 x 0.07314" in math_of["subtotal"].substituted   # 8 a stream, 2 streams
    assert "8 x 0.1439" in math_of["bandwidth_term"].substituted
    assert math_of["bandwidth_term"].value == pytest.approx(float(ev.decode.bandwidth_ms[0]))


def test_the_buyers_chart_draws_a_pipelined_copy_as_one_point() -> None:
    """The frontier's aggregated points of a model no node holds are whole pipelined copies
    (TP 8 x PP 2, 16 GPUs, the users of both streams), whose planner option is the same
    deployment and whose event-model check agrees with the closed loop within 5%."""
    from capacity.fit.frontier import event_check, frontier, planner_option
    from capacity.fit.frontier_space import FrontierInputs

    fr = frontier(FrontierInputs(model="deepseek-r1", prompt_tokens=4096, output_tokens=500,
                                 gpus=("h100-sxm",), engines=("vllm",), basis="typical:vllm",
                                 formats=("fp8",), kv_dtypes=("fp8",)))
    pts = fr.points
    assert {(int(pts.tp[i]), int(pts.n_gpus[i])) for i in range(len(pts))} == {(8, 16)}
    assert all(int(c) % 2 == 0 for c in pts.concurrency)      # both streams' users
    p = fr.groups[0].front[len(fr.groups[0].front) // 2]
    assert p.pp == 2 and "(TP=8 x PP=2)" in p.label
    o = planner_option(fr, p)
    assert (o.n_gpus, o.tp, o.pp) == (16, 8, 2)
    e = event_check(fr, p)
    assert e.event_tpot_ms == pytest.approx(p.tpot_ms, rel=0.05)
    assert e.event_throughput_tok_s_per_gpu == pytest.approx(p.throughput_tok_s_per_gpu, rel=0.05)


def _sglang_pp4_run_tok_s(basis: str) -> float:
    """SGLang's own TP 8 x PP 4 run (github:sgl-project/sglang pull 7979, 2025-07-12; 4 nodes of
    8 H200s per the author's pull 8346): Qwen3-235B-A22B, `bench_serving --dataset-name
    random-ids --num-prompts 128 --random-input-len 1000 --random-output-len 1000
    --random-range-ratio 0.9`, every prompt at once (121,127 input and 121,703 output tokens):
    each of the 4 decode streams takes 32 prompts of 900..1,000 tokens, output tok/s of the run."""
    import numpy as np

    from capacity.catalog.engines import engine_profile
    from capacity.fit.planning import scenario_with_basis
    from capacity.model.scenario import with_admission
    from capacity.plan.closed_loop import as_run_tok_s
    from capacity.plan.service_build import service_from_scenario

    s = scenario_with_basis(make_scenario(
        "qwen3-235b-a22b", "h200-sxm", weights="bf16", n_gpus=32, tp=8, pp=4,
        context_tokens=2000, prompt_tokens=946), basis)
    s = with_admission(s, engine_profile("sglang"), 946 + 951)
    lengths = [int(x) for x in np.linspace(900, 1000, 32).round()]
    svc = service_from_scenario(s, output_tokens=951, engine="sglang", output_lengths=lengths,
                                prompt_lengths=lengths)
    return as_run_tok_s(svc, concurrency=32, requests=32) * s.replicas


@pytest.mark.slow   # two event-model runs
def test_sglangs_own_pp4_run_against_the_typical_basis() -> None:
    """docs/method.md F13's check: the typical SGLang basis predicts 3,174 output tok/s for the
    run (38.3 s; 3,210 before the MoE expert GEMM share, 2026-12-07) against 2,582 measured on
    SGLang's main branch then (47.13 s) and 3,142 with the pull's overlapped send and receive
    (38.74 s); the spec sheet (8,250) stays above both."""
    typical = _sglang_pp4_run_tok_s("typical:sglang")
    assert typical == pytest.approx(3174, rel=0.01)
    assert _sglang_pp4_run_tok_s("spec") > 121_703 / 38.74 > 121_703 / 47.13


def test_a_pipelined_option_stays_itself_when_its_prompt_is_relaxed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The "cheaper if" search (`alternatives._longest_prompt`) assesses the same pipelined
    deployment (one copy of TP 8 x PP 2, 16 GPUs), not two copies of it."""
    from capacity.plan import alternatives

    p = plan(_inputs())
    best = p.options[0]
    assert (best.n_gpus, best.pp) == (16, 2)
    seen: list[tuple[int, int]] = []

    def spy(d: Deployment, catalog: object = None, **kw: object) -> object:
        seen.append((d.n_gpus, d.pp))
        return assess(d, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(alternatives, "assess", spy)
    assert (alternatives._longest_prompt(p, best, None) or 0) >= 4000   # the bisection's grain
    assert seen and set(seen) == {(16, 2)}


def test_every_memory_fix_reads_the_same_in_chinese() -> None:
    """The quote's and the Planner's near misses in Chinese say each fix as the English does:
    the pipeline layout, a larger TP and a smaller weight format (before, the last two fell
    through to "at most N concurrent requests")."""
    from capacity.report.quote import fix_text

    s = make_scenario("deepseek-r1", "h100-sxm", weights="fp8", n_gpus=9, tp=1,
                      kv_dtype="fp8", context_tokens=4096)
    fixes = {f.kind: f for f in suggest_fixes(s, 4)}
    assert fix_text(fixes[FixKind.GPUS], 1, "zh") == "16 张卡，TP=8 x PP=2"
    llama = make_scenario("llama-3.1-70b", "h100-sxm", weights="bf16", n_gpus=4, tp=1,
                          context_tokens=8192)
    more = {f.kind: f for f in suggest_fixes(llama, 16)}
    assert more[FixKind.TP].description == "TP=4 on 4 GPUs"
    assert fix_text(more[FixKind.TP], 1, "zh") == "TP=4，共 4 张卡"
    assert more[FixKind.WEIGHTS].description == "GGUF Q4_K_M (llama.cpp) weights"
    assert fix_text(more[FixKind.WEIGHTS], 1, "zh") == "GGUF Q4_K_M (llama.cpp) 权重"


@pytest.mark.parametrize(("gpus", "tp", "pp"), [(16, 8, 2), (8, 4, 2), (16, 4, 4)])
def test_a_pipeline_the_explorer_offers_is_assessed_as_asked(gpus: int, tp: int, pp: int) -> None:
    """The search pipelines only a model no node's TP group holds, and only that whole TP group
    (what to recommend); a pipeline asked for by both sizes is built as asked (what the
    Explorer's PP choice and `capacity plan --tp --pp` compute). Until 2026-12-07 the Explorer
    offered PP 2 for Llama-3.1-70B on 16 H100s at TP 8, drew its headline, and its deployment
    box said the planner could not build it (a browser audit)."""
    from capacity.report.urlstate import decode

    state, notes = decode({"model": "llama-3.1-70b", "weights": "bf16", "gpu": "h100-sxm",
                           "gpus": str(gpus), "tp": str(tp), "pp": str(pp)}, CAT)
    assert (state.tp, state.pp) == (tp, pp) and not notes
    o = assess(state.deployment(CAT), CAT)
    assert (o.n_gpus, o.tp, o.pp) == (gpus, tp, pp)
    assert o.spare_gpus == 0 and math.isfinite(o.cost_per_month)
    # the headline's scenario and the deployment's agree on the copy: its stage's weights
    s = state.scenario(CAT)
    assert s.pp == pp and option_scenario(state.deployment(CAT).inputs, o, CAT).pp == pp
    # the search still recommends no pipeline for a model one node holds
    searched = plan(state.deployment(CAT).inputs, CAT, keep_all=True)
    assert not [x for x in searched.all_options if x.pp > 1]


def test_the_plan_says_what_its_ttft_holds_beyond_attention(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity plan`'s prefill line: 'with attention' where that is all TTFT holds (the
    chapter's example), 'in all (...)' where fixed costs, all-reduces or a request latency are
    in it too (TP 4 adds 0.27 s of all-reduces the old label called attention)."""
    assert main(["plan", "--concurrency", "1"]) == 0
    assert "2.975 s linear, 3.064 s with attention (no queueing)" in capsys.readouterr().out
    assert main(["plan", "--gpus", "4", "--tp", "4", "--concurrency", "1"]) == 0
    assert " s in all (attention, fixed prefill costs, all-reduces, request latency)" in \
        capsys.readouterr().out
