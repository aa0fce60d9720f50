"""Issue 26: speculative decoding (F12) in `capacity plan` and in the Explorer.

The CLI's JSON and text with --draft, its one-line errors; the Explorer (AppTest) with a draft
from its link: the headline TPOT is `evaluate`'s, the published tau and its source are shown,
an entered tau or rate is used, a model without published data says so; the link round-trips;
"show the math" carries F12's numbers, the same as `evaluate` and `draft_gain`.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app.explorer_view import MATH_SECTION
from capacity.catalog.loader import default_catalog
from capacity.cli.main import build_parser, main
from capacity.cli.plan import scenario_from_args
from capacity.model.draft_gain import draft_gain
from capacity.model.roofline import breakeven_batch
from capacity.model.scenario import Scenario, decode_model, evaluate, make_scenario
from capacity.model.speculative import acceptance_length_from_rate, make_draft
from capacity.report.explain import Targets, explain, show_math
from capacity.report.urlstate import DEFAULT_STATE, ExplorerState, decode, encode
from capacity.units import GB
from tests.test_app_explorer import metrics, start

LLAMA = {"model": "llama-3.1-8b", "weights": "bf16", "gpu": "h100-sxm"}


def _scenario(**kw: object) -> Scenario:
    cat = default_catalog()
    draft = make_draft(cat.variant("llama-3.1-8b", "bf16"), "eagle", 3)
    return make_scenario("llama-3.1-8b", "h100-sxm", catalog=cat, weights="bf16", draft=draft,
                         **kw)  # type: ignore[arg-type]


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- the CLI --------------------------------------------------------------------------------

def test_plan_json_carries_the_draft_and_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(capsys, "--model", "llama-3.1-8b", "--weights", "bf16", "--gpu",
                        "h100-sxm", "--draft", "eagle:3", "--concurrency", "1,50",
                        "--format", "json")
    assert code == 0
    data = json.loads(out)
    s = _scenario()
    d = s.draft
    assert d is not None
    assert data["draft"] == {"kind": "eagle", "depth": 3, "acceptance_length": d.acceptance_length,
                             "source": d.source, "params_b": d.params_b,
                             "weights_gb": d.weights_gb, "kv_share": d.kv_share}
    ev = evaluate(s, [1, 50])
    plain = evaluate(s.with_(draft=None), [1, 50])
    for i, p in enumerate(data["points"]):
        assert p["step_ms"] == pytest.approx(float(ev.tpot_ms[i]))  # the headline TPOT
        assert p["engine_step_ms"] == pytest.approx(p["step_ms"] * d.acceptance_length)
        assert p["verify_ms"] + p["draft_ms"] == pytest.approx(p["engine_step_ms"])
        assert p["no_draft_step_ms"] == pytest.approx(float(plain.tpot_ms[i]))
        assert p["draft_speedup"] == pytest.approx(p["no_draft_step_ms"] / p["step_ms"])
    kv = float(ev.kv_request.exact_bytes)
    assert data["draft_breakeven_concurrency"] == breakeven_batch(
        decode_model(s.with_(draft=None), kv), decode_model(s, kv))


def test_plan_json_where_the_draft_stops_paying(capsys: pytest.CaptureFixture[str]) -> None:
    # short contexts and a low efficiency: the verify pass turns compute-bound (F12)
    _, out, _ = plan(capsys, "--model", "llama-3.1-8b", "--weights", "bf16", "--gpu",
                     "h100-sxm", "--gpus", "2", "--ctx", "256", "--eff", "0.3", "--draft",
                     "eagle:3", "--acceptance-length", "2.5", "--format", "json")
    data = json.loads(out)
    s = make_scenario("llama-3.1-8b", "h100-sxm", weights="bf16", n_gpus=2, context_tokens=256,
                      eff=0.3, draft=make_draft(default_catalog().variant("llama-3.1-8b", "bf16"),
                                                "eagle", 3, acceptance_length=2.5))
    kv = float(evaluate(s, [1]).kv_request.exact_bytes)
    per_replica = breakeven_batch(decode_model(s.with_(draft=None), kv), decode_model(s, kv))
    assert per_replica is not None and 1 < per_replica < 4096
    # two replicas: C requests put ceil(C / 2) on a replica
    assert data["draft_breakeven_concurrency"] == (per_replica - 1) * 2 + 1
    assert data["draft"]["source"] == "entered" and data["draft"]["acceptance_length"] == 2.5


def test_plan_text_has_a_speculative_section(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(capsys, "--model", "llama-3.1-8b", "--weights", "bf16", "--gpu",
                        "h100-sxm", "--ctx", "256", "--eff", "0.3", "--draft", "eagle:3",
                        "--acceptance-rate", "0.8", "--concurrency", "1,1024")
    assert code == 0
    section = out.split("Speculative decoding (F12)")[1].split("Crossover (F5)")[0]
    assert f"tau = {acceptance_length_from_rate(0.8, 3):.3g}" in section  # 2.95
    assert "(source: entered)" in section and "speed-up" in section
    assert "the draft stops paying at" in section
    assert "GB draft" in out  # the draft's weights leave the KV budget (F3)


def test_plan_without_a_draft_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = plan(capsys, "--format", "json")
    data = json.loads(out)  # the knobs block names F12's overheads (0): no draft section
    assert not [k for k in data if k.startswith("draft")]
    assert not [k for p in data["points"] for k in p if "draft" in k or "speculative" in k]
    assert data["knobs"]["draft_overhead_ms"] == 0.0
    _, text, _ = plan(capsys)
    assert "Speculative" not in text and "draft" not in text


@pytest.mark.parametrize(("argv", "says"), [
    (["--draft", "eagle:3"], "--acceptance-length TAU or --acceptance-rate ALPHA"),
    (["--draft", "medusa:3"], "KIND:DEPTH"),
    (["--draft", "eagle:3", "--acceptance-length", "5"], "[1, 4]"),
    (["--acceptance-rate", "0.5"], "need --draft"),
    (["--draft", "eagle:3", "--acceptance-rate", "1.5"], "--acceptance-rate"),
    (["--draft", "eagle:99", "--acceptance-length", "2"], "depth"),
])
def test_bad_draft_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                 argv: list[str], says: str) -> None:
    code, _, err = plan(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and says in err


@pytest.mark.parametrize("command", ["sim-server", "calibrate"])
def test_other_users_of_the_scenario_flags_still_work(command: str) -> None:
    argv = [command] + (["--plan"] if command == "calibrate" else [])
    args = build_parser(command).parse_args(argv)
    assert scenario_from_args(args).draft is None
    if command == "sim-server":  # it takes the draft flags too (`add_draft_flags`)
        args = build_parser(command).parse_args(
            [command, "--draft", "eagle:3", "--acceptance-length", "2.5"])
        draft = scenario_from_args(args).draft
        assert draft is not None and draft.key == "eagle:3" and draft.acceptance_length == 2.5


# ---- the Explorer's link and its explanation -------------------------------------------------

def test_the_link_round_trips_the_draft() -> None:
    cat = default_catalog()
    state = ExplorerState(model="llama-3.1-8b", weights="bf16", gpu="h100-sxm", draft="eagle",
                          draft_k=5, draft_accept="rate", draft_alpha=0.65, draft_tau=3.5)
    params = encode(state)
    assert {k: params[k] for k in ("draft", "draft_k", "draft_accept", "draft_alpha")} == {
        "draft": "eagle", "draft_k": "5", "draft_accept": "rate", "draft_alpha": "0.65"}
    back, notices = decode(params, cat)
    assert back == state and notices == []
    assert encode(DEFAULT_STATE) == {}  # no draft: nothing in the link
    s = back.scenario(cat)
    assert s.draft is not None
    assert s.draft.acceptance_length == pytest.approx(acceptance_length_from_rate(0.65, 5))


def test_a_bad_draft_in_a_link_falls_back_with_a_notice() -> None:
    cat = default_catalog()
    state, notices = decode({"draft": "medusa", "draft_accept": "sometimes"}, cat)
    assert state.draft == "" and state.draft_accept == "published"
    assert len(notices) == 2 and "'draft=medusa' ignored" in notices[0]
    state, notices = decode({**LLAMA, "draft": "eagle", "draft_k": "3",
                             "draft_accept": "length", "draft_tau": "7"}, cat)
    assert state.draft_tau == DEFAULT_STATE.draft_tau and "'draft_tau=7' ignored" in notices[0]
    # no published figure: the state keeps the draft, the what-if is computed without it
    state, notices = decode({"draft": "eagle"}, cat)
    assert state.draft == "eagle" and notices == [] and state.scenario(cat).draft is None


def test_the_explanation_and_the_math_agree_with_evaluate() -> None:
    s = _scenario(n_gpus=2, tp=2, eff=0.5)
    c = 64
    ev = evaluate(s, [c])
    g = draft_gain(s, [c])
    ex = explain(s, c, Targets())
    assert ex.draft is not None and ex.figures["step_ms"] == pytest.approx(float(ev.tpot_ms[0]))
    assert float(ex.draft.speedup[0]) == pytest.approx(float(g.speedup[0]))
    steps = {m.key: m for m in show_math(s, c)}
    assert steps["draft_tau"].value == s.draft.acceptance_length  # type: ignore[union-attr]
    assert steps["draft_verify"].value == pytest.approx(float(g.verify_ms[0]))
    assert steps["draft_time"].value == pytest.approx(float(g.draft_ms[0]))
    assert steps["draft_tpot"].value == pytest.approx(float(ev.tpot_ms[0]))
    assert steps["step"].value == pytest.approx(float(ev.tpot_ms[0]))
    assert (steps["draft_verify"].value + steps["draft_time"].value) / \
        s.draft.acceptance_length == pytest.approx(float(ev.tpot_ms[0]))  # type: ignore[union-attr]
    # F3 takes the draft's weights, C_vram its KV: the substituted numbers add up
    assert "W_draft" in steps["budget"].formula
    assert steps["budget"].value == pytest.approx(
        s.vram_gb * s.util - s.weights_per_gpu_gb - s.draft_weights_per_gpu_gb - s.overhead_gb
        - (s.nccl_gb or 0.0), abs=1e-9)
    kv = float(ev.kv_request.exact_bytes) / GB
    assert steps["c_vram"].value == math.floor(steps["budget"].value / (kv * s.kv_factor)) \
        * s.replicas == int(ev.max_concurrency_vram)
    assert f"{float(g.speedup[0]):.2f}x" in steps["draft_tpot"].substituted
    # the chapter's seed without a draft has no F12 lines
    plain = {m.key for m in show_math(s.with_(draft=None), c)}
    assert not any(k.startswith("draft_") for k in plain)
    assert np.isclose(float(g.engine_step_ms[0]), float(ev.decode.engine_step_ms[0]))


# ---- the Explorer page ----------------------------------------------------------------------

def texts(at: AppTest) -> str:
    return " | ".join([c.value for c in at.caption] + [w.value for w in at.warning])


@pytest.mark.usefixtures("custom")
def test_explorer_shows_the_drafted_step_the_published_tau_and_its_source() -> None:
    at = start(MATH_SECTION, **LLAMA, draft="eagle", c="20")
    s = _scenario()
    ev = evaluate(s, [20])
    g = draft_gain(s, [20])
    m = metrics(at)
    assert m["TPOT"] == f"{float(ev.tpot_ms[0]):.1f} ms" == m["TPOT with the draft"]
    assert m["TPOT without it"] == f"{float(g.plain_tpot_ms[0]):.1f} ms"
    assert m["Speed-up at C = 20"] == f"{float(g.speedup[0]):.2f}×"
    assert m["C_vram (memory)"] == f"{int(ev.max_concurrency_vram):,}"
    shown = texts(at)
    d = s.draft
    assert d is not None
    assert f"τ = {d.acceptance_length:.3g} tokens per step" in shown
    assert "published at depth 7" in shown and d.source.split(" (depth")[0] in shown
    # the deployment box is the Planner's figures for the same drafted deployment (one answer)
    assert any(m.value.startswith("**The deployment") and m.value.endswith("EAGLE k=3**")
               for m in at.markdown)
    assert "Planner does not plan" not in shown
    # "show the math": F12's lines, with the numbers of `draft_gain`
    math_lines = {c.value.splitlines()[0]: c.value.splitlines()[1] for c in at.code}
    tpot_line = math_lines["TPOT = (t_verify + t_draft) / tau; speed-up = TPOT without the "
                           "draft / TPOT"]
    assert f"{float(g.speedup[0]):.2f}x" in tpot_line
    assert "**TPOT and speed-up with the draft (F12)**" in [x.value for x in at.markdown]
    assert at.query_params["draft"] == "eagle"


@pytest.mark.slow
@pytest.mark.usefixtures("custom")
def test_explorer_without_published_data_asks_for_a_value_then_uses_it() -> None:
    at = start(draft="eagle")  # Qwen3.5-9B: no published EAGLE acceptance
    assert any("No published acceptance for EAGLE-3 draft model on Qwen3.5-9B" in w.value
               for w in at.warning)
    assert metrics(at)["TPOT"] == "19.0 ms"  # computed without a draft meanwhile
    at.radio(key="ex_draft_accept").set_value("length").run()
    at.number_input(key="ex_draft_tau").set_value(2.5).run()
    assert not at.exception
    assert not any("No published acceptance" in w.value for w in at.warning)
    cat = default_catalog()
    draft = make_draft(cat.variant("qwen3.5-9b", "awq"), "eagle", 3, acceptance_length=2.5)
    s = DEFAULT_STATE.scenario(cat).with_(draft=draft)
    assert metrics(at)["TPOT"] == f"{float(evaluate(s, [50]).tpot_ms[0]):.1f} ms"
    assert "τ = 2.5 tokens per step, entered" in texts(at)
    assert at.query_params["draft_accept"] == "length"
    assert at.query_params["draft_tau"] == "2.5"
    # the same link opens the same what-if
    again = start(**{k: at.query_params[k] for k in at.query_params})
    assert metrics(again)["TPOT"] == metrics(at)["TPOT"]


@pytest.mark.usefixtures("custom")
def test_explorer_takes_a_rate_and_says_so_in_chinese() -> None:
    at = start(**LLAMA, draft="eagle", draft_accept="rate", draft_alpha="0.8", lang="zh")
    tau = acceptance_length_from_rate(0.8, 3)
    shown = texts(at)
    assert f"τ = {tau:.3g}（每步 token 数），由深度 3 时的接受率 α = 0.8 算出" in shown
    assert any(b.value.startswith("**投机解码：单层草稿模型，深度 3") for b in at.markdown)
    s = make_scenario("llama-3.1-8b", "h100-sxm", weights="bf16", draft=make_draft(
        default_catalog().variant("llama-3.1-8b", "bf16"), "eagle", 3, acceptance_rate=0.8))
    assert metrics(at)["每 token 延迟"] == f"{float(evaluate(s, [50]).tpot_ms[0]):.1f} ms"
