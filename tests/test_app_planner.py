"""The Planner page, driven through Streamlit's AppTest (no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
PAGE = "pages/planner.py"  # entered through the app's navigation (docs/app-internals.md)


@pytest.fixture
def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.run()
    assert not at.exception
    return at


@pytest.mark.slow
def test_default_inputs_give_a_ranked_explained_answer(app: AppTest) -> None:
    # the defaults (the prompt follows the 8K context, 256 output tokens) are not a request
    # an engine refuses: no warning against the page's own inputs
    assert not any("refuses such requests" in w.value for w in app.warning)
    labels = [m.label for m in app.metric]
    assert labels[0] == "GPUs paid for (all serving)"
    assert labels[1].startswith("Price per GPU-hour (catalog price, as of ")
    assert labels[2] == "Cost per month"
    assert labels[3].startswith("Cost per M output tokens at the design load (")
    assert labels[4].startswith("Cost per M output tokens at the SLO-feasible capacity (")
    assert labels[5:] == ["TTFT p90 at the design load (peak + headroom)",
                          "TPOT p90 at the design load (peak + headroom)", "binding"]
    assert str(app.metric[0].value).isdigit() and str(app.metric[2].value).startswith("CNY ")
    best = app.markdown[0].value
    assert best.startswith("### ") and " x " in best and " KV" in best
    assert any(s.value.startswith("Ranked options") for s in app.subheader)
    table = next(d.value for d in app.dataframe if "Explorer" in d.value.columns)
    assert table["#"].tolist()[:3] == [1, 2, 3]
    assert table["Explorer"].str.startswith("/explorer?").all()
    # what a buyer compares in the table; the other figures under it, row for row by number
    assert list(table.columns) == ["#", "option", "GPUs", "per month", "per M tok", "TTFT p90",
                                   "TPOT p90", "binding", "Explorer"]
    assert table["binding"].str.fullmatch(r"(TTFT|TPOT|throughput|memory|slots|cost) \(\d+%\)").all()
    details = next(d.value for d in app.dataframe if "memory" in d.value.columns)
    assert details["#"].tolist() == table["#"].tolist()
    assert {"per GPU-hour", "per M tok, SLO capacity", "max req/s within the SLO",
            "nodes (GPUs each)", "equivalent variants"} <= set(details.columns)
    charts = [s.value for s in app.subheader]
    assert "Cost vs SLO-feasible goodput (Pareto front marked)" in charts
    assert "TTFT percentiles vs arrival rate (discrete-event model)" in charts
    assert any("Event model at the design load" in c.value for c in app.caption)
    # folded twins are named as such, never read as the option's own weights/KV
    twins = [c.value for c in app.caption if " KV" in c.value and "weights" in c.value]
    assert twins and all("Equivalent variants (same GPUs, same cost): " in c for c in twins)


@pytest.mark.slow
def test_100_x_8k_on_4090s_names_the_fixes(app: AppTest) -> None:
    app.radio(key="planner_mode").set_value("conc").run()
    app.number_input(key="planner_conc").set_value(100)
    app.slider(key="planner_headroom").set_value(0.0)
    app.number_input(key="planner_ttft").set_value(1e7)
    app.number_input(key="planner_tpot").set_value(1e5)
    app.multiselect(key="planner_gpus").set_value(["rtx-4090"])
    app.slider(key="planner_maxg").set_value(2).run()
    assert not app.exception
    assert app.markdown[0].value == "### 1 x RTX 4090, awq, fp8 KV"
    near = "\n".join(m.value for m in app.markdown)
    assert "2 GPUs (2 replicas); FP8 KV cache; 4K context" in near


@pytest.mark.slow
def test_impossible_slo_shows_why_not_a_traceback(app: AppTest) -> None:
    app.multiselect(key="planner_gpus").set_value(["rtx-4090"])
    app.checkbox(key="planner_tp").uncheck()
    app.number_input(key="planner_ttft").set_value(1000.0).run()
    assert not app.exception
    assert any("No configuration meets every constraint" in w.value for w in app.warning)
    text = "\n".join(m.value for m in app.markdown)
    assert "**RTX 4090**: TTFT" in text and "3.06 s" in text


@pytest.mark.slow
def test_chinese_labels() -> None:
    app = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    app.query_params["lang"] = "zh"
    app.run()
    assert not app.exception
    assert app.title[0].value == "规划：选什么卡、几张、多少钱"
    assert app.metric[0].label == "计费卡数（全部服务）" and app.metric[2].label == "每月成本"


@pytest.mark.slow
def test_engine_choice_follows_the_link_and_the_url() -> None:
    """The engine profile is a Planner input: a link's `engine=` selects it, and it stays in the URL."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    at.query_params["engine"] = "vllm"
    at.run()
    assert not at.exception
    box = at.selectbox(key="planner_engine")
    assert box.value == "vllm" and box.options[0].startswith("chapter")
    box.set_value("llamacpp").run()
    assert not at.exception and at.query_params["engine"] in ("llamacpp", ["llamacpp"])
@pytest.mark.slow
def test_size_from_an_uploaded_log(app: AppTest) -> None:
    """Issue 12: upload a log -> counts with the bad rows' reasons, the two summary charts,
    then ranked options for its busiest hour with the SLO-feasible capacity column."""
    rows = "".join(f"2026-01-05 10:{m:02d}:{s:02d},{800 + m},{100 + s}\n"
                   for m in range(60) for s in range(0, 60, 10))
    log = ("timestamp,prompt_tokens,output_tokens\n" + rows + "not a time,100,10\n"
           + "2026-01-05 11:00:00,0,10\n").encode()
    app.file_uploader(key="planner_log").set_value(("traffic.csv", log, "text/csv"))
    app.run()
    assert not app.exception
    texts = [m.value for m in app.markdown]
    assert "362 rows, 360 used, 2 left out" in texts
    warn = " ".join(w.value for w in app.warning)
    assert "1 missing or unreadable timestamp" in warn and "1 prompt tokens" in warn
    assert any("Busiest hour 10:00 (UTC): 360 requests = 0.100 req/s" in c.value
               for c in app.caption)
    table = app.dataframe[-1].value
    assert len(table) >= 1 and "max req/s within the SLO" in table.columns
    assert (table["max req/s within the SLO"] >= 0.1).all()


@pytest.mark.slow
def test_a_vllm_result_without_send_times_shows_its_lengths_only(app: AppTest) -> None:
    """A vLLM result saved without start_times: the lengths, a warning that it has no rate,
    and no options sized from it (nothing made up)."""
    import json

    raw = json.loads((Path(__file__).resolve().parent / "fixtures"
                      / "vllm_bench_serve_detailed.json").read_text())
    del raw["start_times"]
    app.file_uploader(key="planner_log").set_value(
        ("vllm_result.json", json.dumps(raw).encode(), "application/json"))
    app.run()
    assert not app.exception
    assert "12 rows, 11 used, 1 left out" in [m.value for m in app.markdown]
    assert any("no arrival times" in w.value for w in app.warning)
    assert not any(c.value.startswith("Busiest hour") for c in app.caption)


@pytest.mark.slow
def test_the_chosen_option_says_how_much_of_the_shared_prefix_the_cache_serves() -> None:
    """A 2,000-token shared prefix on the default hybrid model at a 4K context (3,840-token
    prompts) under vLLM on RTX 4090s: the chosen option's caption says the cache serves 1,584
    of the 2,000 tokens (the align mode's checkpoint, as `capacity plan` and the quote say);
    under SGLang, which keeps the hybrid model's states only where a prompt ended, none."""
    def caption(engine: str) -> str:
        at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
        for k, v in {"engine": engine, "prefix": "2000", "gpus": "rtx-4090",
                     "ctx": "4096"}.items():
            at.query_params[k] = v
        at.run()
        assert not at.exception
        return " ".join(c.value for c in at.caption)

    assert "the engine's prefix cache serves 1,584 of the 2,000 shared tokens" in caption("vllm")
    assert "serves 0 of the 2,000 shared tokens (this engine keeps" in caption("sglang")


def test_a_long_option_name_wraps_instead_of_widening_the_table() -> None:
    """The options table keeps Streamlit's one-line rows while every name fits `OPTION_PX`
    (the default plan's widest, '4 x A100 40GB SXM (2 replicas x TP=2), awq, fp8 KV', 291 px
    in the browser, and its Chinese name, 312 px); a name with a spare and a draft makes the
    column that wide and the rows two lines tall (tests/test_browser.py measures the table)."""
    from app.planner_view import OPTION_PX, WRAP_ROW_PX, options_layout, text_px

    assert abs(text_px("4 x A100 40GB SXM (2 replicas x TP=2), awq, fp8 KV") - 291) < 5
    assert abs(text_px("4 x A100 40GB SXM（2 个副本 x TP=2），awq，fp8 KV") - 312) < 8
    assert options_layout(["4 x A100 40GB SXM（2 个副本 x TP=2），awq，fp8 KV"]) == (None, None)
    assert options_layout(["4 x RTX 3090（2 个副本 x TP=2）+ 2 张备用，int8，fp8 KV，"
                           "单层草稿模型，深度 5"]) == (WRAP_ROW_PX, OPTION_PX)
    assert options_layout([]) == (None, None)


@pytest.mark.slow
def test_auto_drafts_with_nothing_published_say_so_in_chinese() -> None:
    """`draft=auto` on a model with no published acceptance cannot be planned (the CLI says
    so too); the Chinese page said it in English until 2026-12-08 (a coded note now)."""
    at = AppTest.from_file(APP, default_timeout=120).switch_page(PAGE)
    for k, v in {"lang": "zh", "model": "mistral-7b-v0.3", "weights": "bf16",
                 "draft": "auto"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    shown = " ".join(str(e.value) for e in [*at.error, *at.warning, *at.info])
    assert "mistral-7b-v0.3 的草稿模型没有公开的接受长度" in shown, shown
    assert "no published acceptance" not in shown
