"""Mixes (issue 13): several models or workloads on one fleet, each with its own SLO; each is
sized on its own replicas of the fleet's GPU, the fleet is their sum, the quote lists each
workload's share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.offers import Offer
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.model.workload import Workload
from capacity.plan.mix import MixWorkload, parse_mix, plan_mix
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.document import render_markdown
from capacity.report.money import fmt_money
from capacity.report.quote import mix_quote_blocks, write_mix_quote

MIX = """
[[workload]]
name = "chat"
model = "qwen3.5-9b"
dau = 2000
requests_per_user = 30
peak_share = 0.25
peak_hours = 2
ctx = 8192
output_tokens = 512
slo_ttft_ms = 1500
slo_tpot_ms = 40

[[workload]]
name = "assistant"
model = "llama-3.1-70b"
dau = 300
requests_per_user = 10
peak_share = 0.25
ctx = 4096
output_tokens = 256
slo_ttft_ms = 3000
slo_tpot_ms = 60
"""

GPUS = ("rtx-4090", "h100-sxm", "l4")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog()


def _base(**kw: object) -> PlanInputs:
    kw.setdefault("gpus", GPUS)
    return PlanInputs(model="qwen3.5-9b", workload=Workload(peak_concurrency=1.0),
                      **kw)  # type: ignore[arg-type]


@pytest.mark.slow
def test_each_workload_keeps_its_own_slo_and_the_fleet_is_the_sum(catalog: Catalog) -> None:
    ws = parse_mix(MIX, _base())
    assert [w.name for w in ws] == ["chat", "assistant"]
    chat, assistant = ws
    assert (chat.inputs.slo.tpot_ms, assistant.inputs.slo.tpot_ms) == (40, 60)
    assert assistant.inputs.workload.peak_hours == 2.0  # the default
    assert assistant.inputs.gpus == GPUS  # shared settings come from the base
    m = plan_mix(ws, catalog)
    assert m.fleets and m.best is not None
    for f in m.fleets:
        assert [p.name for p in f.parts] == ["chat", "assistant"]
        assert f.cost_per_month == pytest.approx(sum(p.option.cost_per_month for p in f.parts))
        assert f.paid_gpus == sum(p.option.paid_gpus for p in f.parts)
        assert sum(f.share(p) for p in f.parts) == pytest.approx(1.0)
        for w, p in zip(ws, f.parts, strict=True):
            # the workload's cheapest deployment on this GPU, as its own plan ranks it
            alone = plan(w.inputs, catalog)
            assert p.option == next(o for o in alone.options if o.gpu == f.gpu)
            assert p.option.ttft_ms <= w.inputs.slo.ttft_ms
            assert p.option.tpot_ms <= w.inputs.slo.tpot_ms
    costs = [f.cost_per_month for f in m.fleets]
    assert costs == sorted(costs)
    # the L4 cannot serve the 8K chat within 16 GPUs: it is named, not ranked
    assert "l4" not in {f.gpu for f in m.fleets}
    assert any(g == "l4" and "chat" in names for g, names in m.short)


def test_whole_nodes_and_spares_are_per_workload(catalog: Catalog) -> None:
    node = Offer(gpu="rtx-4090", price=16.0, currency="CNY", per="node", gpus_per_node=8)
    m = plan_mix(parse_mix(MIX, _base(gpus=("rtx-4090",), offers=(node,), spare=True)),
                 catalog)
    f = m.best
    assert f is not None
    for p in f.parts:  # replicas are not shared between models: each pays its own nodes
        assert p.option.paid_gpus % 8 == 0 and p.option.spare_gpus == p.option.tp
    assert f.paid_gpus % 8 == 0


def test_bad_mixes_are_refused() -> None:
    with pytest.raises(InputError, match="no \\[\\[workload\\]\\] tables"):
        parse_mix("", _base())
    with pytest.raises(InputError, match="unknown key\\(s\\) colour"):
        parse_mix('[[workload]]\nname = "a"\nmodel = "qwen3.5-9b"\ndau = 1\ncolour = 1\n',
                  _base())
    with pytest.raises(InputError, match="give dau or peak_concurrency"):
        parse_mix('[[workload]]\nname = "a"\nmodel = "qwen3.5-9b"\n', _base())
    with pytest.raises(InputError, match="workload 1: ctx must be a finite number"):
        parse_mix('[[workload]]\nname = "a"\nmodel = "qwen3.5-9b"\ndau = 1\nctx = "8k"\n',
                  _base())
    with pytest.raises(InputError, match="names must differ"):
        w = MixWorkload(name="a", inputs=_base())
        plan_mix([w, w])
    with pytest.raises(InputError, match="workload 'a'"):
        plan_mix(parse_mix('[[workload]]\nname = "a"\nmodel = "nope"\ndau = 1\n', _base()))


@pytest.mark.slow
def test_the_mix_quote_lists_each_share(catalog: Catalog, tmp_path: Path) -> None:
    m = plan_mix(parse_mix(MIX, _base()), catalog)
    f = m.best
    assert f is not None
    md = render_markdown(mix_quote_blocks(m, catalog=catalog))
    assert f"## Recommended fleet: {f.paid_gpus} x {f.gpu_name}, " \
           f"{fmt_money(f.cost_per_month, 'CNY')} per month" in md
    for p in f.parts:
        assert (f"| {p.name} | {p.plan.model_name} | {p.option.label} | {p.option.paid_gpus} | "
                f"{fmt_money(p.option.cost_per_month, 'CNY')} | {f.share(p):.0%} |") in md
        assert f"## Workload: {p.name}" in md
    assert "L4: no option meets the SLOs of chat." in md
    zh = render_markdown(mix_quote_blocks(m, catalog=catalog, lang="zh"))
    assert "容量报价：2 个工作负载共用一个集群" in zh and "| 占比 |" in zh
    pdf = write_mix_quote(tmp_path / "mix.pdf", m, catalog=catalog)
    assert pdf.read_bytes().startswith(b"%PDF")


def test_size_cli_mix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(MIX, encoding="utf-8")
    args = ["size", "--mix", str(path), "--gpus", ",".join(GPUS)]
    assert main([*args, "--format", "json", "--quote", str(tmp_path / "q.md")]) == 0
    data = json.loads(capsys.readouterr().out)
    best = data["fleets"][0]
    assert [p["workload"] for p in best["parts"]] == ["chat", "assistant"]
    assert best["cost_per_month"] == pytest.approx(sum(p["cost_per_month"]
                                                       for p in best["parts"]))
    assert "## Workload: assistant" in (tmp_path / "q.md").read_text(encoding="utf-8")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Best fleet:" in out and "share" in out
    assert main([*args, "--dau", "5"]) == 2
    assert "drop --dau" in capsys.readouterr().err


@pytest.mark.slow
def test_planner_page_adds_a_workload(catalog: Catalog) -> None:
    """The Planner's mix section: the page's inputs are the first workload, an added one has
    its own model, traffic and SLO; the fleet table shows each workload's share, as plan_mix."""
    from dataclasses import replace

    from streamlit.testing.v1 import AppTest

    from capacity.report.planner_url import planner_encode, planner_state

    wl = Workload(daily_active_users=2000, requests_per_user_per_day=30, peak_share=0.25,
                  peak_hours=2, context_tokens=8192, output_tokens=512)
    inp = PlanInputs(model="qwen3.5-9b", workload=wl, slo=Slo(ttft_ms=1500, tpot_ms=40),
                     gpus=("rtx-4090", "h100-sxm"))
    app = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
    at = AppTest.from_file(app, default_timeout=180).switch_page("pages/planner.py")
    for k, v in planner_encode(planner_state(inp, catalog)).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    at.number_input(key="planner_mix_n").set_value(1).run()
    at.text_input(key="planner_mix_0_name").set_value("assistant")
    at.selectbox(key="planner_mix_0_model").set_value("llama-3.1-70b")
    at.number_input(key="planner_mix_0_dau").set_value(300)
    at.number_input(key="planner_mix_0_rpu").set_value(10.0)
    at.selectbox(key="planner_mix_0_ctx").set_value(4096)
    at.number_input(key="planner_mix_0_ttft").set_value(3000.0)
    at.number_input(key="planner_mix_0_tpot").set_value(60.0).run()
    assert not at.exception and not at.error
    other = replace(inp, model="llama-3.1-70b", formats=None,
                    workload=replace(wl, daily_active_users=300.0,
                                     requests_per_user_per_day=10.0, context_tokens=4096,
                                     output_tokens=256),
                    slo=replace(inp.slo, ttft_ms=3000.0, tpot_ms=60.0))
    m = plan_mix([MixWorkload(name="main", inputs=inp),
                  MixWorkload(name="assistant", inputs=other)], catalog)
    f = m.best
    assert f is not None
    assert any(x.value == f"#### Recommended fleet: {f.paid_gpus} x {f.gpu_name}, "
               f"{fmt_money(f.cost_per_month, 'CNY')} per month" for x in at.markdown)
    table = at.dataframe[-1].value
    assert list(table["Workload"]) == ["main", "assistant"]
    assert list(table["Share"]) == [f"{f.share(p):.0%}" for p in f.parts]
    assert {b.label for b in at.get("download_button")} >= {"Mix quote (Markdown)",
                                                            "Mix quote (PDF)"}


@pytest.mark.slow
def test_a_mix_workload_on_a_short_context_model_is_clamped_to_its_limit() -> None:
    """An added workload switched to a model with 4,096 tokens of context (Llama-2-70B) while
    its context reads the default 8K: the selector offers nothing past the limit and the
    same run plans at the limit, with no "exceeds its limit" error."""
    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
    at = AppTest.from_file(app, default_timeout=180).switch_page("pages/planner.py")
    at.run()
    at.number_input(key="planner_mix_n").set_value(1).run()
    assert at.selectbox(key="planner_mix_0_ctx").value == 8192
    at.selectbox(key="planner_mix_0_model").set_value("llama-2-70b-fp8").run()
    ctx = at.selectbox(key="planner_mix_0_ctx")
    assert ctx.value == 4096
    assert max(int(o) for o in ctx.options) == 4096
    assert not at.exception and not at.error
    assert at.dataframe[-1].value["Workload"].iloc[-1] == "Workload 2"


# ---- the mix in the Planner's URL -----------------------------------------------------------

def _scenario_state(catalog: Catalog):  # noqa: ANN202
    from capacity.plan.mix import MixEntry
    from capacity.report.planner_url import encode_mix, planner_state

    wl = Workload(daily_active_users=2000, requests_per_user_per_day=30, peak_share=0.25,
                  peak_hours=2, context_tokens=8192, output_tokens=512)
    inp = PlanInputs(model="qwen3.5-9b", workload=wl, slo=Slo(ttft_ms=1500, tpot_ms=40),
                     gpus=("rtx-4090", "h100-sxm"))
    extra = (MixEntry(name="assistant, long answers", model="llama-3.1-70b", dau=300, rpu=10.0,
                      ctx=4096, out=256, ttft=3000.0, tpot=60.0),)
    from dataclasses import replace

    return replace(planner_state(inp, catalog), mix=encode_mix(extra)), inp


def test_the_mix_round_trips_through_the_planner_url(catalog: Catalog) -> None:
    from urllib.parse import parse_qsl, urlsplit

    from capacity.report.planner_url import planner_decode, planner_url

    state, inp = _scenario_state(catalog)
    url = planner_url(state)
    q = dict(parse_qsl(urlsplit(url).query))
    assert q["mix"] == "assistant, long answers|llama-3.1-70b|300|10|4096|256|3000|60"
    back, notices = planner_decode(q, catalog)
    assert notices == [] and back == state
    mix = back.mix_workloads(catalog)
    assert [w.name for w in mix] == ["main", "assistant, long answers"]
    assert mix[0].inputs == inp
    assert mix[1].inputs.workload.daily_active_users == 300
    assert mix[1].inputs.workload.peak_share == 0.25  # shared with the first workload
    assert (mix[1].inputs.slo.ttft_ms, mix[1].inputs.slo.tpot_ms) == (3000, 60)


@pytest.mark.parametrize(("raw", "why"), [
    (";".join(f"w{i}|qwen3.5-9b|1|1|1024|1|100|10" for i in range(8)), "at most 7"),
    ("a|warp-9|1|1|1024|1|100|10", "not a model"),
    ("a|qwen3.5-9b|0|1|1024|1|100|10", "dau outside"),
    ("a|qwen3.5-9b|1|1|1024|1|100|nan", "tpot not a finite number"),
    ("a|qwen3.5-9b|1.5|1|1024|1|100|10", "dau not a whole number"),
    ("a|qwen3.5-9b|1|1|1024|1", "give name|model"),
    ("\x07bell|qwen3.5-9b|1|1|1024|1|100|10", "printable"),
    ("x" * 41 + "|qwen3.5-9b|1|1|1024|1|100|10", "1..40"),
    ("a|qwen3.5-9b|1|1|1024|1|100|10;a|qwen3.5-9b|1|1|1024|1|100|10", "must differ"),
    ("a|qwen3.5-9b|1|1|99999999|1|100|10", "ctx"),
])
def test_a_bad_mix_in_the_url_falls_back_with_a_notice(catalog: Catalog, raw: str,
                                                       why: str) -> None:
    from capacity.report.planner_url import planner_decode

    state, notices = planner_decode({"mix": raw, "dau": "700"}, catalog)
    assert state.mix == "" and state.dau == 700  # the rest of the link still holds
    assert len(notices) == 1 and "mix" in notices[0] and why in notices[0], notices


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_the_mix_quote_carries_the_link_that_reproduces_it(tmp_path: Path,
                                                           catalog: Catalog) -> None:
    from urllib.parse import parse_qsl, urlsplit

    from capacity.report.planner_url import planner_decode

    path = tmp_path / "mix.toml"
    path.write_text(MIX, encoding="utf-8")
    out = tmp_path / "q.md"
    assert main(["size", "--mix", str(path), "--gpus", ",".join(GPUS), "--quote", str(out),
                 "--app-url", "http://host:8501"]) == 0
    md = out.read_text(encoding="utf-8")
    link = next(w.strip("<>()") for w in md.split() if w.startswith(("http://host:8501",
                                                                     "<http://host:8501")))
    assert link.startswith("http://host:8501/planner?")
    state, notices = planner_decode(dict(parse_qsl(urlsplit(link).query)), catalog)
    assert notices == []
    again = state.mix_workloads(catalog, first_name="chat")
    original = parse_mix(MIX, _base())
    assert [w.inputs for w in again] == [w.inputs for w in original]
    assert plan_mix(again, catalog).best == plan_mix(original, catalog).best


@pytest.mark.slow
def test_planner_page_opens_a_mix_from_its_link(catalog: Catalog) -> None:
    from streamlit.testing.v1 import AppTest

    from capacity.report.planner_url import planner_encode

    state, _ = _scenario_state(catalog)
    app = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
    at = AppTest.from_file(app, default_timeout=180).switch_page("pages/planner.py")
    for k, v in planner_encode(state).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception and not at.error
    assert at.number_input(key="planner_mix_n").value == 1
    assert at.text_input(key="planner_mix_0_name").value == "assistant, long answers"
    assert at.selectbox(key="planner_mix_0_model").value == "llama-3.1-70b"
    assert at.number_input(key="planner_mix_0_dau").value == 300
    assert at.selectbox(key="planner_mix_0_ctx").value == 4096
    assert at.number_input(key="planner_mix_0_tpot").value == 60.0
    m = plan_mix(state.mix_workloads(catalog), catalog)
    f = m.best
    assert f is not None
    assert any(x.value == f"#### Recommended fleet: {f.paid_gpus} x {f.gpu_name}, "
               f"{fmt_money(f.cost_per_month, 'CNY')} per month" for x in at.markdown)
    assert list(at.dataframe[-1].value["Workload"]) == ["main", "assistant, long answers"]
    assert at.query_params["mix"] == state.mix
