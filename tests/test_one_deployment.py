"""One deployment, one answer (issue 24): the number a sales engineer quotes is the number every
surface shows.

30 seeded Planner inputs (daily users or peak concurrency, SLOs and their percentile, offers,
spares, KV and weight-format mixes, bases, engines) are planned; for the recommended option the
GPUs paid for (spares included), the price per GPU-hour, the cost per month, the cost per M
output tokens (at the design load and at the SLO-feasible capacity), TTFT and TPOT are read off
every surface and compared within display rounding:

- `capacity size --format json` (the CLI's stable interface),
- the Planner page's options table (AppTest, opened through the Planner's own link),
- the Markdown quote in English and in Chinese,
- the Explorer opened through the option's "Open in Explorer" link (AppTest): its deployment
  box.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from capacity.catalog.loader import default_catalog
from capacity.catalog.offers import OFFER_KINDS
from capacity.cli.main import main
from capacity.errors import CapacityError
from capacity.plan.detail import simulate_option
from capacity.plan.options import Plan
from capacity.plan.search import plan
from capacity.report.check import check_caption, check_record, miss_text
from capacity.report.i18n import t
from capacity.report.money import fmt_money, fmt_ms, fmt_price
from capacity.report.planner_url import PLANNER_PCTS, PlannerState, planner_url
from capacity.report.quote import figure_rows, quote_markdown
from capacity.report.urlstate import explorer_state, explorer_url

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
CASES = 30
MODELS = ("qwen3.5-9b-awq", "qwen3.5-9b", "llama-3.1-8b", "mistral-7b-v0.3-fp8", "qwen3-14b",
          "qwen3-8b-awq", "gpt-oss-20b-mxfp4")
"""Dense and MoE (gpt-oss-20b: F6c's expert weight ratio on the typical basis)."""


def draw(seed: int) -> tuple[PlannerState, Plan]:
    """The `seed`-th Planner input that has a recommendation (drawn again until one has)."""
    rng = random.Random(seed)
    cat = default_catalog()
    while True:
        conc = rng.random() < 0.25
        state = PlannerState(
            model=rng.choice(MODELS), mode="conc" if conc else "dau",
            dau=int(10 ** rng.uniform(2, 4.3)), rpu=float(rng.choice((5, 10, 20, 30))),
            share=rng.choice((0.1, 0.2, 0.3, 0.5)), hours=float(rng.choice((1, 2, 4))),
            conc=rng.choice((5, 20, 60)), ctx=rng.choice((2048, 4096, 8192, 16384)),
            out=rng.choice((128, 256, 512)), ttft=float(rng.choice((1000, 2000, 3000, 6000))),
            tpot=float(rng.choice((30, 50, 80))), pct=rng.choice(PLANNER_PCTS[2:]),
            offer=rng.choice(("", *OFFER_KINDS)), spare=rng.choice((0, 1)),
            kv=rng.choice(("fp16,fp8", "fp16", "fp8")),
            cal=rng.choice(("", "", "spec", "typical:vllm")),
            engine=rng.choice(("chapter", "chapter", "vllm")))
        try:
            p = plan(state.inputs(cat), cat)
        except CapacityError:
            continue
        if p.best is not None:
            return state, p


def cli_size(state: PlannerState, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`capacity size --simulate --format json` for these inputs: the ranked options and the
    event model's check of the recommended one."""
    argv = ["size", "--simulate", "--model", state.model, "--ctx", str(state.ctx), "--output-tokens",
            str(state.out), "--slo-ttft-ms", f"{state.ttft:g}", "--slo-tpot-ms",
            f"{state.tpot:g}", "--slo-percentile", str(state.pct), "--kv-dtypes", state.kv,
            "--engine", state.engine, "--format", "json"]
    if state.mode == "dau":
        argv += ["--dau", str(state.dau), "--requests-per-user", f"{state.rpu:g}",
                 "--peak-share", f"{state.share:g}", "--peak-hours", f"{state.hours:g}"]
    else:
        argv += ["--peak-concurrency", str(state.conc)]
    argv += ["--offer-kind", state.offer] if state.offer else []
    argv += ["--gpus", state.gpus] if state.gpus else []
    argv += ["--max-gpus", str(state.maxg)] if state.maxg != PlannerState().maxg else []
    argv += ["--spare"] if state.spare else []
    argv += ["--basis", state.cal] if state.cal else []
    argv += ["--prompt-tokens", str(state.prompt)] if state.prompt else []
    argv += (["--prefix-tokens", str(state.prefix), "--prefix-share", f"{state.prefix_share:g}"]
             if state.prefix else [])
    argv += (["--turns", str(state.turns), "--turn-tokens", str(state.turn_tokens)]
             if state.turns > 1 else [])
    capsys.readouterr()
    assert main(argv) == 0
    return dict(json.loads(capsys.readouterr().out))


def _close(a: float, b: float, tol: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=tol)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(CASES))
def test_every_surface_shows_the_same_deployment(seed: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    state, p = draw(seed)
    every_surface_shows(state, p, capsys)


CACHED = {
    "vllm-prefix": PlannerState(model="qwen3-8b", engine="vllm", dau=3000, ctx=8192, prompt=4000,
                                out=256, prefix=3000, prefix_share=0.9),
    "chapter-prefix": PlannerState(model="qwen3.5-9b-awq", dau=2000, ctx=4096, prompt=3000,
                                   out=200, prefix=2000, prefix_share=0.8, kv="fp8"),
    "sglang-conversation-prefix": PlannerState(model="llama-3.1-8b", engine="sglang", dau=1500,
                                               ctx=8192, prompt=1500, out=256, turns=3,
                                               turn_tokens=120, prefix=1000, prefix_share=0.9)}
"""Requests that find something cached: a shared prefix (each engine's cache and admission),
and a conversation's turns with one."""

PIPELINED = {
    "chapter": PlannerState(model="deepseek-r1-fp8", gpus="h100-sxm", dau=2000, ctx=4096, out=500,
                            kv="fp8"),
    "typical-vllm-spare": PlannerState(model="deepseek-r1-fp8", gpus="h100-sxm", dau=1000,
                                       ctx=4096, out=500, kv="fp8", cal="typical:vllm",
                                       engine="vllm", spare=1, maxg=32)}
"""A model no node holds (FP8 DeepSeek-R1 on H100s): the recommendation is a node's TP group
over two nodes as pipeline stages (F13), on the chapter's basis and on vLLM's typical one with
its spare copy."""


@pytest.mark.slow
@pytest.mark.parametrize("case", list(PIPELINED))
def test_a_pipelined_deployment_is_one_answer(case: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    state = PIPELINED[case]
    p = planned(state)
    assert p.best is not None and p.best.pp == 2, p.best
    every_surface_shows(state, p, capsys)


NVFP4 = {"typical-vllm-b200": PlannerState(model="llama-3.1-70b", gpus="b200", dau=3000,
                                           ctx=8192, out=512, kv="fp8", cal="typical:vllm",
                                           engine="vllm")}
"""NVFP4 on Blackwell on vLLM's typical basis, whose FP4 GEMMs serve at the FP8 rate
(`matmul.FP4_AT_FP8_RATE`): the option's knobs, its Explorer link and its quote agree (the
seeded draws reach NVFP4 on the chapter's basis only)."""


@pytest.mark.slow
@pytest.mark.parametrize("case", list(NVFP4))
def test_an_nvfp4_deployment_is_one_answer(case: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    state = NVFP4[case]
    p = planned(state)
    assert p.best is not None and p.best.weights == "nvfp4", p.best
    every_surface_shows(state, p, capsys)


CALIBRATED = {"bundled-4090": PlannerState(model="qwen3.5-9b-awq", gpus="rtx-4090", dau=1000,
                                           ctx=8192, out=256, cal="rtx-4090-vllm-published",
                                           engine="vllm")}
"""A saved calibration (the bundled one, fitted to a published vLLM sweep on an RTX 4090):
its knobs, and the memory counted as the engine it measured counted it (the driver's,
`capacity.model.basis.MEASURED_COUNTS`), the same on every surface."""


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CALIBRATED))
def test_a_calibrated_deployment_is_one_answer(case: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    state = CALIBRATED[case]
    p = planned(state)
    assert p.best is not None and p.inputs.runtime_memory, p.inputs
    every_surface_shows(state, p, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CACHED))
def test_a_cached_deployment_is_one_answer(case: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    state = CACHED[case]
    p = planned(state)
    assert p.best is not None
    every_surface_shows(state, p, capsys)


def planned(state: PlannerState) -> Plan:
    """The Planner's search for `state` on the bundled catalog (the named cases above)."""
    return plan(state.inputs(default_catalog()), default_catalog())


def every_surface_shows(state: PlannerState, p: Plan,
                        capsys: pytest.CaptureFixture[str]) -> None:
    """The recommended option's figures, the same on the CLI's JSON, the quote in English and
    in Chinese, the Planner page opened through its link and the Explorer's deployment box
    opened through the option's link."""
    cat = default_catalog()
    best = p.best
    assert best is not None
    inp = p.inputs
    cur = inp.currency

    # 1. the CLI's JSON: the same option and numbers as the library's plan, and the same event
    # check (`simulate_option` with its `CHECK_REQUESTS`)
    out = cli_size(state, capsys)
    js = out["options"][0]
    sim = simulate_option(inp, best, cat)
    assert out["simulation"] == json.loads(json.dumps(check_record(sim, inp.slo)))
    assert (js["gpu"], js["gpus"], js["tp"], js["weights"], js["kv_dtype"]) == (
        best.gpu, best.n_gpus, best.tp, best.weights, best.kv_dtype)
    want = {"paid_gpus": js["paid_gpus"], "price": js["price_per_gpu_hour"],
            "month": js["cost_per_month"], "mtok": js["cost_per_mtok"],
            "mtok_design": js["cost_per_mtok_design"], "ttft": js["ttft_ms"],
            "tpot": js["tpot_ms"]}
    dep = js["deployment"]
    assert dep["paid_gpus"] == want["paid_gpus"] == best.paid_gpus
    assert dep["spare_gpus"] == best.spare_gpus and dep["figures"]["cost_per_month"] == want["month"]
    shown = {  # every figure as a surface shows it (display rounding)
        "paid_gpus": str(want["paid_gpus"]), "price": fmt_price(want["price"], cur),
        "month": fmt_money(want["month"], cur), "mtok": fmt_money(want["mtok"], cur),
        "mtok_design": fmt_money(want["mtok_design"], cur), "ttft": fmt_ms(want["ttft"]),
        "tpot": fmt_ms(want["tpot"])}
    order = ("paid_gpus", "price", "month", "mtok_design", "mtok", "ttft", "tpot")

    # 2. the Markdown quote, in English and in Chinese: its recommendation table
    for lang in ("en", "zh"):
        md = quote_markdown(p, lang=lang, catalog=cat)
        rec = md.split("## " + t("quote_rec", lang), 1)[1].split("\n## ", 1)[0]
        for (label, _), name in zip(figure_rows(inp, best, lang, cat), order, strict=True):
            assert f"| {label} | {shown[name]} |" in rec, (lang, name, shown[name])

    # 3. the Planner page, opened through its own link: headline and the options table
    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    for k, v in parse_qsl(urlsplit(planner_url(state)).query):
        at.query_params[k] = v
    at.run()
    assert not at.exception
    metrics = [str(m.value) for m in at.get("metric")]
    assert metrics[:7] == [shown[n] for n in order]
    # its event check of the recommended option (the option chosen below it by default) is the
    # CLI's, figure for figure
    assert check_caption(sim, "en") in [c.value for c in at.caption]
    said = miss_text(sim, inp.slo, "en")   # and says so, as the CLI does, where it misses
    warned = [w.value for w in at.warning if w.value.startswith("The event model's check")]
    assert warned == ([said] if said else [])
    table = next(d.value for d in at.dataframe if "Explorer" in d.value.columns)
    row = table.iloc[0]
    # the price and the cost at the SLO capacity: in the details under the table, same number
    details = next(d.value for d in at.dataframe if t("fig_col_price", "en") in d.value.columns)
    more = details.iloc[0]
    assert more["#"] == row["#"] == 1
    assert int(row[t("fig_col_gpus", "en")]) == want["paid_gpus"]
    assert _close(float(more[t("fig_col_price", "en")]), want["price"], 1e-9)
    assert _close(float(row[t("pl_col_month", "en")]), want["month"], 1e-6)
    assert _close(float(row[t("pl_col_mtok", "en")]), want["mtok_design"], 1e-9)
    assert _close(float(more[t("fig_col_mtok", "en")]), want["mtok"], 1e-9)
    q = state.pct
    assert row[t("pl_col_ttft", "en", q=q)] == shown["ttft"]
    assert row[t("pl_col_tpot", "en", q=q)] == shown["tpot"]
    link = str(row[t("pl_col_link", "en")])
    assert link == explorer_url(explorer_state(inp, best, cat))

    # 4. the Explorer opened through that link: the deployment box shows the same figures
    ex = AppTest.from_file(APP, default_timeout=180)
    for k, v in parse_qsl(urlsplit(link).query):
        ex.query_params[k] = v
    ex.run()
    assert not ex.exception
    assert not [w.value for w in ex.warning if "ignored" in w.value]  # the link was read whole
    box = ex.get_by_key("deployment_numbers")
    values = [str(m.value) for m in box.get("metric")]
    assert values == [shown[n] for n in order]
    labels = [m.label for m in box.get("metric")]
    assert labels == [lbl for lbl, _ in figure_rows(inp, best, "en", cat)]
    # the what-if above it holds requests as the option's engine does (the whole context, or
    # the pages of prompt + output; a shared prefix once): the option's C_vram
    if inp.prefix_tokens and inp.prefix_share:
        at_c = ex.get_by_key("prefix_effect"), t("prefix_cvram", "en")
    else:
        at_c = ex.get_by_key("key_numbers"), t("metric_cvram", "en")
    c_vram = {m.label: str(m.value) for m in at_c[0].get("metric")}[at_c[1]]
    assert c_vram == f"{best.c_vram_per_replica * best.replicas:,}", (c_vram, inp.engine)


@pytest.mark.slow
def test_the_draws_cover_what_the_issue_names() -> None:
    """The 30 inputs vary what the issue asks: offers, spares, peak concurrency and daily
    users, several SLO percentiles, bases and KV mixes (a check on the draw, quick)."""
    states = [draw(s)[0] for s in range(CASES)]
    assert {s.offer for s in states} >= {"", "on-demand", "spot"}
    assert {s.spare for s in states} == {0, 1} and {s.mode for s in states} == {"dau", "conc"}
    assert len({s.pct for s in states}) >= 2 and len({s.cal for s in states}) >= 3
    assert len({s.kv for s in states}) >= 2 and len({s.model for s in states}) >= 4


@pytest.mark.slow
def test_the_buyers_chart_reads_the_same_on_the_cli_and_the_explorer(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The Explorer's buyer's chart on its default inputs (Qwen3.5-9B AWQ, fp16 KV, 8,192-token
    prompts and context, 256 output tokens, the chapter's engine on an RTX 4090 against the
    data-centre GPUs) and `capacity frontier` run with the same model, request, GPUs and engine
    and no --basis: the same basis (the chapter's, which the page's caption and the JSON name),
    the same front points and the same read-off at the page's target, 20 tok/s per user (its
    TPOT SLO's 50 ms). Until 2026-12-08 the command drew on each engine's typical efficiency
    unless told: the RTX 4090 read 155.8 tok/s per GPU there and 74.3 on the page."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    ex = AppTest.from_file(APP, default_timeout=180)
    ex.run()
    assert not ex.exception
    ex.session_state["frv_ex"] = True  # open the chart's section
    ex.run()
    assert not ex.exception
    others = list(ex.session_state["frv_ex_gpus"])
    assert ex.number_input(key="frv_ex_target").value == 20.0
    chart = ex.get("vega_lite_chart")[-1]
    frames = [convert_arrow_bytes_to_pandas_df(d.data.data) for d in chart.proto.datasets]
    (fronts,) = [df for df in frames if "series" in df and "style" not in df]
    page = sorted(zip(fronts["gpu"], fronts["tp"], fronts["concurrency"],
                      fronts["interactivity_tok_s_per_user"],
                      fronts["throughput_tok_s_per_gpu"], strict=True))

    assert main(["frontier", "--model", "qwen3.5-9b", "--weights", "awq", "--kv-dtypes", "fp16",
                 "--prompt", "8192", "--output", "256", "--context", "8192", "--engines",
                 "chapter", "--gpus", ",".join(["rtx-4090", *others]), "--interactivity", "20",
                 "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["basis"] == "" and all(g["basis"] == "" for g in cli["groups"])
    caption = next(c.value for c in ex.caption if "fronts; basis: " in c.value)
    assert f"fronts; basis: {cli['basis_text']}." in caption
    assert cli["basis_text"].startswith("the chapter's assumptions")
    lib = sorted((p["gpu"], p["tp"], p["concurrency"], p["interactivity_tok_s_per_user"],
                  p["throughput_tok_s_per_gpu"]) for g in cli["groups"] for p in g["front"])
    assert [x[:3] for x in page] == [x[:3] for x in lib]
    for i in (3, 4):
        assert [x[i] for x in page] == pytest.approx([x[i] for x in lib], rel=1e-12)
    # the read-off: the RTX 4090's 74.3 tok/s per GPU, and the page's cheapest catalog-priced
    # front is the command's
    catalog_rows = [r for r in cli["cost_at_interactivity"]
                    if r["kind"] == "catalog" and r["output_per_mtok"] is not None]
    rtx = next(r for r in catalog_rows if r["gpu"] == "rtx-4090")
    assert f"{rtx['throughput_tok_s_per_gpu']:.1f}" == "74.3"
    best = min(catalog_rows, key=lambda r: r["output_per_mtok"])
    costs = ex.dataframe[-1].value
    assert costs[t("fr_y", "en")][0] == pytest.approx(best["throughput_tok_s_per_gpu"],
                                                      rel=1e-12)
    assert costs[t("frv_col_out", "en")][0] == pytest.approx(best["output_per_mtok"], rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_calibrated_basis_counts_memory_alike_on_the_explorer_and_the_quote(lang: str) -> None:
    """A saved calibration counts the memory as the engine it measured counts it (the
    driver's total, `MEASURED_COUNTS`): the quote's efficiency line says so among the
    calibration's knobs (`knobs_text`), and the Explorer opened through the recommendation's
    link says it in the same words in its prediction caption, in English and in Chinese
    (before 2026-12-08 the caption named four of the knobs and not the memory)."""
    state = CALIBRATED["bundled-4090"]
    p = planned(state)
    best = p.best
    assert best is not None and p.inputs.runtime_memory
    cat = default_catalog()
    name = p.inputs.calibration
    ex = AppTest.from_file(APP, default_timeout=180)
    for k, v in parse_qsl(urlsplit(explorer_url(explorer_state(p.inputs, best, cat))).query):
        ex.query_params[k] = v
    ex.query_params["lang"] = lang
    ex.run()
    assert not ex.exception
    before, after = t("pred_basis_cal", lang, name=name, knobs="\0").split("\0")
    caption = next(c.value for c in ex.caption if c.value.startswith(before))
    assert caption.endswith(after)
    knobs = caption[len(before):len(caption) - len(after)]
    assert t("basis_knobs_driver_memory", lang) in knobs
    # the quote's efficiency line, word for word with the Explorer's knobs
    md = quote_markdown(p, lang=lang, catalog=cat)
    line = t("quote_eff", lang, basis=t("basis_cal", lang, name=name), knobs=knobs)
    assert line in md.splitlines(), (line, md)
