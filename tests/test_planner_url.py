"""The Planner's inputs in the URL (PlannerState): round trip, fall-backs, the page and the
quote's link that reproduces a plan."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from capacity.catalog.loader import Catalog, default_catalog
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.planner_url import (
    DEFAULT_PLANNER,
    PlannerState,
    planner_decode,
    planner_encode,
    planner_state,
    planner_url,
)
from capacity.report.quote import headline_rows, quote_markdown

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "streamlit_app.py")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog()


def scenario() -> PlanInputs:
    wl = Workload(daily_active_users=2000, requests_per_user_per_day=30, peak_share=0.25,
                  peak_hours=2, context_tokens=8192, output_tokens=512)
    return PlanInputs(model="qwen3.5-9b", workload=wl,
                      slo=Slo(ttft_ms=1500, tpot_ms=40, cost_per_mtok=5.0),
                      gpus=("rtx-4090", "mi300x", "h100-sxm"), kv_dtypes=("fp8",),
                      currency="USD", mfu=0.35)


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def test_defaults_write_nothing() -> None:
    assert planner_encode(DEFAULT_PLANNER) == {}
    assert planner_url(DEFAULT_PLANNER) == "/planner"


def test_round_trip_reproduces_the_plan(catalog: Catalog) -> None:
    inp = scenario()
    state = planner_state(inp, catalog, lang="zh")
    url = planner_url(state, base="http://127.0.0.1:8501/planner")
    assert url.startswith("http://127.0.0.1:8501/planner?")
    q = _query(url)
    assert q["dau"] == "2000" and q["share"] == "0.25" and q["cost"] == "5" and q["cur"] == "USD"
    assert q["gpus"] == "rtx-4090,mi300x,h100-sxm" and q["kv"] == "fp8" and q["lang"] == "zh"
    back, notices = planner_decode(q, catalog)
    assert notices == [] and back == state
    again = back.inputs(catalog)
    assert again == inp
    a, b = plan(inp, catalog), plan(again, catalog)
    assert a.best == b.best and a.options == b.options


def test_concurrency_mode_round_trips(catalog: Catalog) -> None:
    wl = Workload(peak_concurrency=80, context_tokens=4096, output_tokens=300)
    inp = PlanInputs(model="llama-3.1-70b", workload=wl, allow_tp=True, max_gpus=8)
    state = planner_state(inp, catalog)
    back, notices = planner_decode(planner_encode(state), catalog)
    assert notices == [] and back.mode == "conc" and back.conc == 80
    assert back.inputs(catalog).workload == wl


@pytest.mark.parametrize(("param", "value", "why"), [
    ("dau", "-5", "outside"), ("dau", "1.5", "whole number"), ("share", "nan", "finite"),
    ("pct", "42", "percentile"), ("model", "no-such-model", "not a model"),
    ("gpus", "rtx-4090,warp-drive", "unknown GPU warp-drive"), ("kv", "int4", "KV precision"),
    ("mode", "weekly", "dau or conc"), ("cur", "EUR", "CNY or USD"), ("tp", "2", "outside"),
    ("lang", "fr", "language"), ("prefix", "-1", "outside"), ("prefix_share", "1.5", "outside"),
])
def test_bad_values_fall_back_with_a_notice(catalog: Catalog, param: str, value: str,
                                            why: str) -> None:
    state, notices = planner_decode({param: value, "dau": "900"} if param != "dau"
                                    else {param: value}, catalog)
    assert getattr(state, param) == getattr(DEFAULT_PLANNER, param)
    assert len(notices) == 1 and f"'{param}={value}'" in notices[0] and why in notices[0]
    if param != "dau":
        assert state.dau == 900  # the good parameters are kept


def test_a_link_without_a_context_opens_at_a_shorter_models_limit(catalog: Catalog) -> None:
    """Llama-2-70B holds 4,096 tokens, the Planner's default context is 8,192: a link that
    names the model and no context plans it at 4,096 (as choosing the model on the page
    does), not at the defaults; a stated context past the limit is moved to the limit too,
    with a notice."""
    state, notices = planner_decode({"model": "llama-2-70b-fp8", "dau": "900"}, catalog)
    assert (state.model, state.ctx, state.dau, notices) == ("llama-2-70b-fp8", 4096, 900, [])
    state, notices = planner_decode({"model": "llama-2-70b-fp8", "ctx": "8192"}, catalog)
    assert (state.model, state.ctx) == ("llama-2-70b-fp8", 4096)
    assert notices == ["'ctx=8192' ignored (context 8192 tokens exceeds Llama-2-70B's limit "
                       "of 4096 tokens); using 4096"]


def test_a_context_past_the_models_limit_loses_nothing_else(catalog: Catalog) -> None:
    """/planner?model=gpt-oss-120b&ctx=200000&dau=20000&cur=USD opened the Planner on
    Qwen3.5-9B AWQ, 500 daily users and CNY (every default) for one bad value; the Explorer
    keeps such a link and offers the limit. The Planner takes the limit (131,072 tokens),
    as choosing the model on the page does, and keeps the rest."""
    state, notices = planner_decode({"model": "gpt-oss-120b", "ctx": "200000", "dau": "20000",
                                     "cur": "USD", "lang": "zh"}, catalog)
    assert state == PlannerState(lang="zh", model="gpt-oss-120b", ctx=131072, dau=20000,
                                 cur="USD")
    assert len(notices) == 1 and "'ctx=200000' ignored" in notices[0]


def test_inconsistent_values_fall_back_to_the_defaults(catalog: Catalog) -> None:
    # a prompt longer than the context cannot be planned
    state, notices = planner_decode({"model": "mistral-7b-v0.3", "ctx": "4096",
                                     "prompt": "8000", "lang": "zh"}, catalog)
    assert state == PlannerState(lang="zh")
    assert notices and "cannot be planned" in notices[-1]


def test_the_quote_carries_the_link(catalog: Catalog) -> None:
    inp = scenario()
    link = planner_url(planner_state(inp, catalog), base="http://127.0.0.1:8501/planner")
    p = plan(inp, catalog)
    md = quote_markdown(p, catalog=catalog, link=link)
    assert f"Reproduce this plan in the Planner: {link}" in md
    assert f"在规划页复现本方案：{link}" in quote_markdown(p, lang="zh", catalog=catalog,
                                                       link=link)


@pytest.mark.slow
def test_the_page_opens_on_a_link_and_writes_it_back(catalog: Catalog) -> None:
    inp = scenario()
    link = planner_url(planner_state(inp, catalog))
    at = AppTest.from_file(APP, default_timeout=120).switch_page("pages/planner.py")
    for k, v in _query(link).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    assert not [w.value for w in at.warning if w.value.startswith("Some link parameters")]
    p = plan(inp, catalog)
    assert p.best is not None
    assert [(m.label, str(m.value)) for m in at.metric][:7] == headline_rows(p, p.best, "en")
    assert at.number_input(key="planner_cost_target").value == 5.0
    assert at.multiselect(key="planner_gpus").value == ["rtx-4090", "mi300x", "h100-sxm"]
    assert {k: at.query_params[k] for k in _query(link)} == _query(link)
    # an edit goes into the URL
    at.number_input(key="planner_dau").set_value(3000).run()
    assert not at.exception
    assert at.query_params["dau"] == "3000"


@pytest.mark.slow
def test_bad_link_shows_the_notice() -> None:
    at = AppTest.from_file(APP, default_timeout=120).switch_page("pages/planner.py")
    at.query_params["gpus"] = "warp-drive"
    at.run()
    assert not at.exception
    assert any("`gpus=warp-drive` ignored" in w.value for w in at.warning)


@pytest.mark.slow
def test_from_the_explorer_the_planner_starts_clean() -> None:
    """The address still holds the Explorer's parameters (gpus=7 is a count there): the
    Planner does not read them as its own."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["gpus"] = "7"
    at.query_params["kv"] = "fp8"
    at.run()
    assert not at.exception
    at.switch_page("pages/planner.py").run()
    assert not at.exception
    assert not [w.value for w in at.warning if w.value.startswith("Some link parameters")]
    assert at.multiselect(key="planner_gpus").value == sorted(default_catalog().gpus)


@pytest.mark.slow
def test_entered_prices_follow_a_currency_switch() -> None:
    at = AppTest.from_file(APP, default_timeout=120).switch_page("pages/planner.py")
    at.query_params["prices"] = "rtx-4090:7.1"
    at.query_params["gpus"] = "rtx-4090"
    at.run()
    assert not at.exception
    at.radio(key="planner_currency").set_value("USD").run()
    assert not at.exception
    assert at.query_params["prices"] == "rtx-4090:1" and at.query_params["cur"] == "USD"


def test_the_shared_prefix_round_trips_and_reaches_the_explorer(catalog: Catalog) -> None:
    """The Planner's prefix inputs: in the URL, back into PlanInputs, and on the option's
    'Open in Explorer' link (the Explorer's own `prefix`/`prefix_share`)."""
    from dataclasses import replace

    from capacity.report.urlstate import encode, explorer_state

    inp = replace(scenario(), prefix_tokens=2000, prefix_share=0.8)
    state = planner_state(inp, catalog)
    q = _query(planner_url(state))
    assert q["prefix"] == "2000" and q["prefix_share"] == "0.8"
    back, notices = planner_decode(q, catalog)
    assert notices == [] and back == state and back.inputs(catalog) == inp
    p = plan(inp, catalog)
    assert p.best is not None
    link = encode(explorer_state(inp, p.best, catalog))
    assert link["prefix"] == "2000" and link["prefix_share"] == "0.8"
    # no prefix: nothing in either link, and a share alone plans no cache
    plain = planner_state(scenario(), catalog)
    assert "prefix" not in planner_encode(plain) and "prefix_share" not in planner_encode(plain)
    assert replace(plain, prefix_share=0.5).inputs(catalog).prefix_share == 0.0


@pytest.mark.slow
def test_the_page_takes_the_prefix_from_a_link_and_carries_it() -> None:
    at = AppTest.from_file(APP, default_timeout=120).switch_page("pages/planner.py")
    at.query_params["prefix"] = "2000"
    at.query_params["prefix_share"] = "0.8"
    at.run()
    assert not at.exception
    assert at.number_input(key="planner_prefix").value == 2000
    assert at.slider(key="planner_prefix_share").value == pytest.approx(0.8)
    table = next(d.value for d in at.dataframe if "Explorer" in d.value.columns)
    assert table["Explorer"].str.contains("prefix=2000").all()
    assert table["Explorer"].str.contains("prefix_share=0.8").all()
    at.number_input(key="planner_prefix").set_value(1024).run()
    assert not at.exception and at.query_params["prefix"] in ("1024", ["1024"])
    at.number_input(key="planner_prefix").set_value(0).run()
    assert not at.exception and "prefix" not in at.query_params
