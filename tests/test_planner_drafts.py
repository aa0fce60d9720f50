"""Issue 26: the planner searches speculative-decoding drafts (none always included) and says
when a draft stops paying (capacity.plan.drafting)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.model.cost import cost_per_mtok
from capacity.model.roofline import Bound
from capacity.model.scenario import evaluate
from capacity.model.workload import Workload
from capacity.plan.deployment import Deployment, assess, record
from capacity.plan.detail import check_option, design_concurrency_total, option_scenario
from capacity.plan.drafting import DraftOutcome, draft_note
from capacity.plan.options import Plan, PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.planner_url import planner_decode, planner_state, planner_url
from capacity.report.quote import draft_note_text, option_label, quote_markdown

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
MODEL = "llama-3.1-70b-fp8"
"""Published EAGLE-3 chain acceptance (data/speculative.toml, depth 7, carried to 1..6)."""


def long_context(**kw: object) -> PlanInputs:
    """Few users, long prompts, a tight TPOT: the bandwidth-bound case a draft wins."""
    wl = Workload(peak_concurrency=4, context_tokens=16384, prompt_tokens=4096,
                  output_tokens=1024, headroom=0.0)
    return PlanInputs(model=MODEL, workload=wl, slo=Slo(ttft_ms=60_000, tpot_ms=15),
                      gpus=("h100-sxm",), **kw)  # type: ignore[arg-type]


def high_load(**kw: object) -> PlanInputs:
    """Short prompts, thousands in flight, a loose TPOT: batches past the ridge."""
    wl = Workload(peak_concurrency=2000, context_tokens=1024, prompt_tokens=512,
                  output_tokens=256)
    return PlanInputs(model=MODEL, workload=wl, slo=Slo(ttft_ms=5000, tpot_ms=200),
                      gpus=("h100-sxm",), max_num_seqs=1024, **kw)  # type: ignore[arg-type]


def _key(p: Plan) -> tuple[float, float]:
    assert p.best is not None
    return round(p.best.cost_per_month, 6), p.best.cost_per_mtok


def test_drafted_options_are_the_explorers_figures() -> None:
    """A drafted option's memory, step and cost come from the Scenario path's definitions."""
    inp = long_context(drafts=("eagle:3",), max_gpus=4)
    p = plan(inp, keep_all=True)
    checked = 0
    for o in p.all_options:
        if not o.draft or not o.feasible:
            continue
        assert (o.draft, o.draft_source) == ("eagle:3", "https://huggingface.co/nebius/"
                                             "EAGLE3-Llama-3.3-70B-Instruct (depth 7)")
        s = option_scenario(inp, o)
        assert s.draft is not None and s.draft.key == "eagle:3"
        assert s.draft.acceptance_length == o.draft_acceptance_length
        c = design_concurrency_total(inp, o)
        ev = evaluate(s, [c])
        # memory: slots with the draft's weights and KV, and the verdict at the design load
        assert o.c_vram_per_replica == int(ev.max_concurrency_vram) // o.replicas
        assert o.memory_verdict == ev.verdict[0]
        # TPOT: never below the bare drafted step at the design batch
        assert o.tpot_mean_ms >= float(ev.decode.step_ms[0]) * 0.999
        # cost per M output tokens at the design load: F7 on the scenario's price and GPUs
        want = float(cost_per_mtok(s.price_per_hour, s.paid_gpus,
                                   o.design_rate_per_s * inp.workload.output_tokens))
        assert o.cost_per_mtok_design == pytest.approx(want, rel=1e-12)
        assert check_option(inp, o) == []
        # one deployment, one answer: the planner's own figures when assessed alone
        again = assess(Deployment.of(inp, o))
        assert (again.draft, again.tpot_ms, again.cost_per_mtok) == (o.draft, o.tpot_ms,
                                                                     o.cost_per_mtok)
        checked += 1
    assert checked >= 3


def test_the_searchs_drafted_step_is_evaluates() -> None:
    """Every configuration's step in the search's arrays, drafted or not, is `evaluate`'s
    (with F12's engine knobs: a plain row gets no verify overhead)."""
    from capacity.model.scenario import make_scenario
    from capacity.plan.units import replica_units

    cat = default_catalog()
    inp = long_context(drafts=("eagle:3", "eagle:7"), max_gpus=4, verify_overhead_ms=0.01,
                       draft_overhead_ms=0.2)
    _, _, u = replica_units(inp, cat)
    batch = np.array([1.0, 7.0, 40.0, 300.0])
    drafted = 0
    for i in range(len(u.gpus)):
        d = u.drafts[i]
        s = make_scenario("llama-3.1-70b", u.gpus[i].key, weights=u.formats[i],
                          n_gpus=int(u.tp[i]), tp=int(u.tp[i]), context_tokens=16384,
                          kv_dtype=u.kv[i], draft=d, draft_overhead_ms=0.2,
                          verify_overhead_ms=0.01, catalog=cat)
        want = evaluate(s, batch).decode.step_ms
        got = [float(u.step.step_ms(np.full(len(u.gpus), b))[i]) for b in batch]
        np.testing.assert_allclose(got, want, rtol=1e-9)
        drafted += d is not None
    assert drafted >= 4


@pytest.mark.parametrize("inputs", [long_context, high_load])
@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_drafts_never_make_the_best_option_worse(inputs: object) -> None:
    """The search with drafts is a superset: the plain configurations keep their figures to
    the bit, and the best option is at least as good."""
    assert callable(inputs)
    plain = plan(inputs(), keep_all=True)
    drafted = plan(inputs(drafts=("auto",)))
    # none + EAGLE k = 1..7, but a pipeline across nodes (F13) runs no draft
    piped = sum(o.pp > 1 for o in plain.all_options)
    assert drafted.evaluated == 8 * (plain.evaluated - piped) + piped
    assert _key(drafted) <= _key(plain)
    again = {(o.label, o.tpot_ms, o.cost_per_mtok) for o in drafted.configurations
             if not o.draft}
    assert {(o.label, o.tpot_ms, o.cost_per_mtok) for o in plain.configurations} <= again


def test_a_draft_wins_at_long_context_and_low_concurrency() -> None:
    plain = plan(long_context())
    p = plan(long_context(drafts=("auto",)))
    assert plain.best is not None and p.best is not None
    assert p.best.draft.startswith("eagle:") and p.best.n_gpus < plain.best.n_gpus
    assert ", EAGLE k=" in p.best.label and "，单层草稿模型，深度 " in option_label(p.best, "zh")
    note = draft_note(p)
    assert note is not None and note.outcome == DraftOutcome.PAYS
    assert note.draft == p.best.draft and note.draft_tpot_ms < note.plain_tpot_ms
    text = draft_note_text(note, "en")
    assert text.startswith(f"EAGLE k={note.depth}, tau ") and "pays" in text
    assert "每 token 延迟" in draft_note_text(note, "zh")


def test_no_draft_at_short_context_and_high_load_says_why() -> None:
    p = plan(high_load(drafts=("eagle:7",)))
    assert p.best is not None and p.best.draft == ""
    note = draft_note(p)
    assert note is not None and note.outcome == DraftOutcome.SLOWER
    assert note.verify_bound == Bound.COMPUTE
    assert note.breakeven_batch is not None and note.design_batch >= note.breakeven_batch
    text = draft_note_text(note, "en")
    assert (f"EAGLE k=7, tau 3.62 from https://huggingface.co/nebius/EAGLE3-Llama-3.3-70B-"
            f"Instruct would be slower at the design load's batch of {note.design_batch} per "
            "replica") in text
    assert "the verify pass of 8 tokens per sequence is compute-bound" in text
    # the quote says it too, and names no draft for the recommendation
    md = quote_markdown(p, lang="en")
    assert "Speculative decoding: EAGLE k=7" in md


def test_entered_acceptance_and_bad_inputs() -> None:
    p = plan(long_context(drafts=("eagle:3",), acceptance_length=3.5))
    assert p.best is not None and p.best.draft == "eagle:3"
    assert (p.best.draft_acceptance_length, p.best.draft_source) == (3.5, "entered")
    rate = plan(long_context(drafts=("eagle:3",), acceptance_rate=0.9))
    assert rate.best is not None and rate.best.draft_acceptance_length == pytest.approx(3.439)
    for bad, says in ((dict(drafts=("eagle",)), "KIND:DEPTH"),
                      (dict(drafts=("eagle:3",), acceptance_length=5.0), "[1, 4]"),
                      (dict(acceptance_rate=0.5), "applies to a draft"),
                      (dict(drafts=("auto",), acceptance_length=2.0), "with auto"),
                      (dict(drafts=("eagle:3",), acceptance_rate=1.5), "[0, 1]"),
                      (dict(drafts=("eagle:3",), acceptance_length=2.0,
                            acceptance_rate=0.5), "not both")):
        with pytest.raises(InputError, match=None) as exc:
            long_context(**bad)
        assert says in str(exc.value)
    with pytest.raises(InputError, match="no published acceptance"):
        plan(PlanInputs(model="qwen3.5-9b-awq", workload=Workload(peak_concurrency=5),
                        gpus=("rtx-4090",), drafts=("auto",)))


def test_json_record_carries_the_draft() -> None:
    inp = long_context(drafts=("auto",))
    p = plan(inp)
    assert p.best is not None
    rec = record(Deployment.of(inp, p.best), p.best)
    assert rec["draft"] == {"key": p.best.draft,
                            "acceptance_length": p.best.draft_acceptance_length,
                            "source": p.best.draft_source}


def _size(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["size", "--model", MODEL, "--gpus", "h100-sxm", "--peak-concurrency", "4",
                 "--ctx", "16384", "--prompt-tokens", "4096", "--output-tokens", "1024",
                 "--headroom", "0", "--slo-ttft-ms", "60000", "--slo-tpot-ms", "15", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_size_cli_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _size(capsys, "--draft", "auto", "--top", "2")
    assert code == 0 and ", EAGLE k=" in out
    assert "\nSpeculative decoding\nEAGLE k=" in out and "pays" in out
    code, out, _ = _size(capsys, "--draft", "eagle:3,eagle:5", "--draft", "mtp:1",
                         "--acceptance-rate", "0.8", "--format", "json")
    data = json.loads(out)
    assert code == 0
    best = data["options"][0]
    assert best["draft"] in ("eagle:3", "eagle:5", "mtp:1") and best["draft_source"] == "entered"
    assert best["deployment"]["draft"]["key"] == best["draft"]
    assert data["draft_note"]["outcome"] == "pays" and data["draft_note"]["text"]
    code, out, _ = _size(capsys, "--format", "json")
    assert json.loads(out)["draft_note"] is None and json.loads(out)["options"][0]["draft"] is None
    for bad in (["--draft", "eagle"], ["--draft", "eagle:0"], ["--draft", "eagle:3,"],
                ["--acceptance-rate", "0.5"], ["--draft", "eagle:3", "--acceptance-rate", "2"],
                ["--draft", "eagle:3", "--acceptance-length", "2", "--acceptance-rate", "0.5"]):
        code, out, err = _size(capsys, *bad)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, bad


def test_planner_link_carries_the_drafts() -> None:
    cat = default_catalog()
    for kw in (dict(drafts=("auto",), acceptance_rate=0.7),
               dict(drafts=("eagle:3", "mtp:1"), acceptance_length=1.8), dict()):
        inp = long_context(**kw)
        state = planner_state(inp, cat)
        url = planner_url(state)
        params = dict(x.split("=", 1) for x in url.partition("?")[2].split("&") if x)
        from urllib.parse import unquote

        back, notes = planner_decode({k: unquote(v) for k, v in params.items()}, cat)
        assert notes == [] and back == state
        again = back.inputs(cat)
        assert (again.drafts, again.acceptance_length, again.acceptance_rate) == (
            inp.drafts, inp.acceptance_length, inp.acceptance_rate)
    bad, notes = planner_decode({"draft": "eagle:x"}, cat)
    assert bad.draft == "" and "draft" in str(notes[0])


@pytest.mark.slow
def test_planner_page_searches_drafts() -> None:
    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    at.run()
    at.multiselect(key="planner_gpus").set_value(["h100-sxm"]).run()
    at.selectbox(key="planner_model").set_value(MODEL)
    at.radio(key="planner_mode").set_value("conc").run()
    at.number_input(key="planner_conc").set_value(4)
    at.selectbox(key="planner_ctx").set_value(16384)
    at.number_input(key="planner_out").set_value(1024)
    at.slider(key="planner_headroom").set_value(0.0)
    at.number_input(key="planner_ttft").set_value(60_000.0)
    at.number_input(key="planner_tpot").set_value(20.0)
    at.radio(key="planner_draft_mode").set_value("auto").run()
    assert not at.exception
    assert ", EAGLE k=" in at.markdown[0].value
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Speculative decoding: EAGLE k=") and "tau" in c for c in captions)
    assert any("pays" in c for c in captions)
    # the ranked options name their draft (since 2026-12-08 the table fits a 1400 px window:
    # no draft column, the acceptance length tau among the figures under it)
    table = next(d.value for d in at.dataframe if "option" in d.value.columns)
    assert table["option"].str.contains(", EAGLE k=").any()
    more = next(d.value for d in at.dataframe if "draft τ" in d.value.columns)
    assert more["draft τ"].notna().any()
    assert at.query_params["draft"] == ["auto"] or at.query_params["draft"] == "auto"
    # an entered acceptance rate travels too; picking no draft hides the note
    at.radio(key="planner_acc_kind").set_value("rate").run()
    at.number_input(key="planner_acc_value").set_value(0.6).run()
    assert not at.exception
    assert "0.6" in str(at.query_params["alpha"])
    at.radio(key="planner_draft_mode").set_value("none").run()
    assert not at.exception and ", EAGLE" not in at.markdown[0].value
    assert not any(c.value.startswith("Speculative decoding") for c in at.caption)


@pytest.mark.slow
def test_planner_page_in_chinese_names_the_draft_in_chinese() -> None:
    from tests.test_chinese_pages import ALLOWED, english, names

    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    for k, v in {"lang": "zh", "model": MODEL, "gpus": "h100-sxm", "mode": "conc", "conc": "4",
                 "ctx": "16384", "out": "1024", "headroom": "0", "ttft": "60000",
                 "tpot": "20", "draft": "auto"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    assert "，单层草稿模型，深度 " in at.markdown[0].value
    assert any(c.value.startswith("投机解码：单层草稿模型，深度 ") and "τ = " in c.value
               for c in at.caption)
    assert english(at, ALLOWED | names()) == []


def test_open_in_explorer_carries_the_options_draft() -> None:
    """The Planner's "Open in Explorer" link of a drafted option opens the same draft at the
    same tau, so the Explorer shows the option's TPOT."""
    from capacity.catalog.loader import default_catalog
    from capacity.plan.options import Option
    from capacity.report.urlstate import explorer_state

    inp = PlanInputs(model="llama-3.1-8b-bf16", workload=Workload(peak_concurrency=4,
                                                                  context_tokens=4096),
                     gpus=("h100-sxm",), drafts=("eagle:3",))
    o = next(x for x in plan(inp, keep_all=True).all_options if x.draft)
    st = explorer_state(inp, o, default_catalog())
    assert (st.draft, st.draft_k, st.draft_accept) == ("eagle", 3, "length")
    assert st.draft_tau == o.draft_acceptance_length
    plain = next(x for x in plan(inp, keep_all=True).all_options if not x.draft)
    assert explorer_state(inp, plain, default_catalog()).draft == ""
    assert isinstance(o, Option)
