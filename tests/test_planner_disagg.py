"""Disaggregated prefill/decode on the Planner page and in the quote (issue 27): F7 for a
disaggregated deployment by hand, the verdict in the page's languages, the deployment as a buyer
reads it, the link's `disagg`, and one set of figures on every surface (`capacity size
--disaggregated --json`, the Planner page, the quote)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from capacity.catalog.loader import default_catalog
from capacity.model.workload import Workload
from capacity.plan.disagg import Comparison, DisaggOption, Link, compare
from capacity.plan.options import PlanInputs, Slo
from capacity.report.document import render_markdown
from capacity.report.money import fmt_money, fmt_ms
from capacity.report.planner_url import (
    PlannerState,
    planner_decode,
    planner_encode,
    planner_state,
)
from capacity.report.quote import quote_markdown
from capacity.report.quote_disagg import (
    deployment_text,
    disagg_blocks,
    disagg_section,
    reason_text,
)

CAT = default_catalog()
DC = "h100-sxm,h200-sxm,b200,a100-80gb-sxm,mi300x"
LONG = PlannerState(model="llama-3.1-70b", dau=4800, rpu=10, ctx=8192, out=256, ttft=2000,
                    tpot=20, cur="USD", gpus=DC, disagg=1)
"""8K prompts, TPOT 20 ms at 2 req/s peak (2.4 with headroom): disaggregated wins."""
SHORT = PlannerState(model="llama-3.1-70b", dau=4800, rpu=10, ctx=1024, out=200, ttft=1000,
                     tpot=50, cur="USD", gpus=DC, disagg=1)
"""1K prompts, TPOT 50 ms, the same rate: aggregated wins (half the cost)."""


def _h200(rate: float, max_gpus: int, prompt: int = 8192, tpot: float = 20) -> PlanInputs:
    wl = Workload(rate_per_s=rate, context_tokens=16384, prompt_tokens=prompt, output_tokens=256)
    return PlanInputs(model="llama-3.1-70b", workload=wl, slo=Slo(ttft_ms=2500, tpot_ms=tpot),
                      gpus=("h200-sxm",), currency="USD", max_gpus=max_gpus)


@pytest.fixture(scope="module")
def h200() -> Comparison:
    return compare(_h200(2.0, 32))


def test_cost_per_million_tokens_by_hand(h200: Comparison) -> None:
    # 7,300 a month is 10 an hour (730 h); 2 prefill replicas of 1.5 req/s and 1 decode
    # replica of 2.5 req/s serve 2.5 req/s (the smaller pool); 200 output tokens a request
    d = replace(h200.disaggregated[0], cost_per_month=7300.0, prefill_replicas=2,
                prefill_capacity_per_s=1.5, decode_replicas=1, decode_capacity_per_s=2.5,
                design_rate_per_s=2.0)
    assert d.capacity_rate_per_s == pytest.approx(2.5)
    # 10 / (2.5 x 200 x 3600 tokens an hour) x 1e6 = 5.5556; at the design load (2 req/s) 6.9444
    assert d.cost_per_mtok(200) == pytest.approx(10 / 1.8e6 * 1e6)
    assert d.cost_per_mtok(200) == pytest.approx(5.5556, abs=1e-4)
    assert d.cost_per_mtok_design(200) == pytest.approx(6.9444, abs=1e-4)
    # the prefill pool binds when it is the smaller: 1 x 1.5 < 1 x 2.5
    assert replace(d, prefill_replicas=1).capacity_rate_per_s == pytest.approx(1.5)


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_the_verdict_in_english_is_the_librarys_word_for_word(h200: Comparison) -> None:
    """Every branch of `Comparison.reason`: `reason_text` builds it from the translations."""
    cases = {
        "fewer GPUs": h200,
        "no aggregated": compare(_h200(2.0, 15)),   # 14 GPUs disaggregated, 16 aggregated
        "none": compare(_h200(2.0, 4)),
        "aggregated, cheaper": compare(_h200(2.0, 8, prompt=3000, tpot=50)),
        "aggregated, other GPUs": compare(SHORT.inputs(CAT)),
        "disaggregated, other GPUs": compare(LONG.inputs(CAT)),
    }
    assert [c.winner for c in cases.values()] == [
        "disaggregated", "disaggregated", "none", "aggregated", "aggregated", "disaggregated"]
    for name, c in cases.items():
        assert reason_text(c, "en") == c.reason, name
    assert "no aggregated configuration meets the SLOs within 15 GPUs" in cases["no aggregated"].reason
    assert "prompts stretch the decode steps" in h200.reason


def test_the_verdict_in_chinese_has_the_same_figures(h200: Comparison) -> None:
    d, a = h200.best_disaggregated, h200.best_aggregated
    assert d is not None and a is not None
    zh = reason_text(h200, "zh")
    assert zh.startswith(f"分离部署：{d.ratio}（每个预填充副本 {d.prefill_tp} × H200 SXM")
    assert f"每 token 延迟 p90 {d.tpot_ms:.1f} ms" in zh and f"{a.n_gpus} × H200 SXM" in zh
    assert f"USD {d.cost_per_month:,.0f}/月" in zh and "InfiniBand" in zh
    assert not re.search(r"\b(?:disaggregated|aggregated|prefill|decode|TPOT|month)\b", zh)
    short = reason_text(compare(SHORT.inputs(CAT)), "zh")
    assert short.startswith("聚合部署：") and "解码步几乎不受影响" in short


def _option(h200: Comparison, **kw: object) -> DisaggOption:
    return replace(h200.disaggregated[0], **kw)  # type: ignore[arg-type]


def test_the_deployment_as_a_buyer_reads_it(h200: Comparison) -> None:
    nv = Link(kind="nvlink", send_gb_s=450.0, recv_gb_s=450.0)
    one_node = _option(h200, prefill_replicas=2, prefill_tp=2, decode_replicas=2, decode_tp=2,
                       link=nv, spare_gpus=0)
    # 2 x 2 + 2 x 2 = 8 GPUs: one HGX H200 node of 8, the KV over its NVLink
    assert deployment_text(one_node, "en") == (
        "1 node x 8 H200 SXM: prefill pool of 2 replicas x 2 GPUs, decode pool of 2 replicas x "
        "2 GPUs, KV over NVLink (450 GB/s per GPU)")
    # 6 GPUs: the smallest H200 node that holds them is 8 (nodes of 1, 2, 4, 8)
    six = _option(h200, prefill_replicas=1, prefill_tp=4, decode_replicas=2, decode_tp=1,
                  link=nv, spare_gpus=0)
    assert deployment_text(six, "en").startswith("1 node x 8 H200 SXM (6 used): prefill pool "
                                                 "of 1 replica x 4 GPUs, decode pool of 2 "
                                                 "replicas x 1 GPU,")
    ib = Link(kind="infiniband", send_gb_s=50.0, recv_gb_s=50.0)
    apart = _option(h200, prefill_replicas=3, prefill_tp=4, decode_replicas=1, decode_tp=2,
                    link=ib, spare_gpus=0)
    # 12 prefill GPUs in TP groups of 4: a node of 8 (two groups) and one of 4
    assert deployment_text(apart, "en") == (
        "prefill pool of 3 replicas x 4 GPUs on 2 nodes of 8 + 4 H200 SXM; decode pool of "
        "1 replica x 2 GPUs on 1 node x 2 H200 SXM; KV over InfiniBand (50 GB/s per GPU)")
    assert deployment_text(apart, "zh") == (
        "预填充池 3 个副本 x 4 卡，部署在 2 台 H200 SXM 节点（8 + 4 卡）；解码池 1 个副本 x 2 卡，"
        "部署在 1 台 2 卡 H200 SXM 节点；KV 经 InfiniBand 传输（每卡 50 GB/s）")


def test_the_link_carries_the_toggle() -> None:
    assert planner_encode(LONG)["disagg"] == "1"
    assert "disagg" not in planner_encode(replace(LONG, disagg=0))
    back, notices = planner_decode(planner_encode(LONG), CAT)
    assert back == LONG and notices == []
    bad, notices = planner_decode({**planner_encode(LONG), "disagg": "2"}, CAT)
    assert bad.disagg == 0 and len(notices) == 1 and "disagg=2" in str(notices[0])
    assert planner_state(LONG.inputs(CAT), CAT, disagg=True).disagg == 1
    assert planner_state(LONG.inputs(CAT), CAT).disagg == 0


def test_the_quote_section_in_both_languages(h200: Comparison) -> None:
    d = h200.best_disaggregated
    assert d is not None
    en = render_markdown(disagg_blocks(h200, "en"))
    assert en.startswith("# Disaggregated prefill/decode\n")  # alone, its heading is the title
    assert f"**Disaggregated wins**: {h200.reason}" in en
    assert "Cheapest disaggregated deployment: " + deployment_text(d, "en") in en
    assert f"| Cost per month | {fmt_money(d.cost_per_month, 'USD')} |" in en
    assert f"| per M tok, SLO capacity | {fmt_money(d.cost_per_mtok(256), 'USD')} |" in en
    zh = render_markdown(disagg_blocks(h200, "zh"))
    assert zh.startswith("# 预填充/解码分离部署") and "**分离部署胜出**：" in zh
    assert f"| 每月成本 | {fmt_money(d.cost_per_month, 'USD')} |" in zh
    # in the whole quote, after the ranked options and before the assumptions
    from capacity.plan.search import plan

    md = quote_markdown(h200.aggregated, sections=(disagg_section(h200),))
    assert md.index("## Other options") < md.index("## Disaggregated") < md.index(
        "## Assumptions")
    assert "## Disaggregated" not in quote_markdown(plan(_h200(2.0, 32)))


def _cli_args(s: PlannerState, quote: Path) -> list[str]:
    """`capacity size` with the same inputs as the Planner state `s`."""
    return ["size", "--model", s.model, "--dau", str(s.dau), "--requests-per-user", f"{s.rpu:g}",
            "--peak-share", f"{s.share:g}", "--peak-hours", f"{s.hours:g}", "--ctx", str(s.ctx),
            "--output-tokens", str(s.out), "--headroom", f"{s.headroom:g}",
            "--slo-ttft-ms", f"{s.ttft:g}", "--slo-tpot-ms", f"{s.tpot:g}",
            "--slo-percentile", str(s.pct), "--gpus", s.gpus, "--max-gpus", str(s.maxg),
            "--currency", s.cur, "--disaggregated", "--format", "json", "--top", "10",
            "--quote", str(quote)]


def _quote_rows(md: str) -> dict[str, list[str]]:
    """The quote section's tables: 'chosen' (quantity -> value) and the others by '#'."""
    section = md[md.index("## Disaggregated prefill/decode"):]
    section = section[:section.index("\n## ", 5)]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]
    return {r[0]: r[1:] for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize(("state", "winner"), [(LONG, "disaggregated"), (SHORT, "aggregated")],
                         ids=["long-prompt", "short-chat"])
def test_one_set_of_figures_on_every_surface(state: PlannerState, winner: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The disaggregated figures (cost per month, TTFT, TPOT, GPUs) of `capacity size
    --disaggregated --json`, the Planner page's table and the quote are the same numbers."""
    from streamlit.testing.v1 import AppTest

    from capacity.cli.main import build_parser, main
    from capacity.cli.size import inputs_from_args

    quote = tmp_path / "quote.md"
    args = _cli_args(state, quote)
    assert inputs_from_args(build_parser("size").parse_args(args)) == state.inputs(CAT)
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)["disaggregated"]
    assert data["winner"] == winner
    cli = data["options"]
    assert len(cli) >= 5

    app = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "streamlit_app.py"),
                            default_timeout=180).switch_page("pages/planner.py")
    for k, v in planner_encode(state).items():
        app.query_params[k] = v
    app.run()
    assert not app.exception
    assert app.checkbox(key="planner_disagg").value is True
    boxes = [b.value for b in (*app.success, *app.info)]
    verdict = "**" + {"disaggregated": "Disaggregated wins", "aggregated": "Aggregated wins"}[
        winner] + "**: " + data["reason"]
    assert verdict in boxes
    page = next(d.value for d in app.dataframe if "Pools (P+D)" in d.value.columns)
    assert len(page) == len(cli)
    for (_, row), o in zip(page.iterrows(), cli, strict=True):
        assert row["Pools (P+D)"] == o["ratio"]
        assert row["per month"] == o["cost_per_month"]
        assert row["TTFT p90, design load"] == o["ttft_ms"]
        assert row["TPOT p90, design load"] == o["tpot_ms"]
        assert row["GPUs"] == o["gpus"] == o["prefill_replicas"] * o["prefill_tp"] + o[
            "decode_replicas"] * o["decode_tp"]
        assert row["per M tok, SLO capacity"] == o["cost_per_mtok"]
        assert row["per M tok, design load"] == o["cost_per_mtok_design"]

    md = quote.read_text(encoding="utf-8")
    assert verdict in md and "disagg=1" in md  # the link reopens the page with the toggle on
    rows = _quote_rows(md)
    best = cli[0]
    assert rows["Cost per month"] == [fmt_money(best["cost_per_month"], "USD")]
    assert rows["TTFT p90, design load"] == [fmt_ms(best["ttft_ms"])]
    assert rows["TPOT p90, design load"] == [fmt_ms(best["tpot_ms"])]
    assert rows["GPUs"] == [str(best["gpus"])]
    assert rows["per M tok, SLO capacity"] == [fmt_money(best["cost_per_mtok"], "USD")]
    for i, o in enumerate(cli[1:5], 2):
        cells = rows[str(i)]
        assert cells[0] == o["ratio"]
        assert cells[5:10] == [fmt_ms(o["ttft_ms"]), fmt_ms(o["tpot_ms"]), str(o["gpus"]),
                               fmt_money(o["cost_per_month"], "USD"),
                               fmt_money(o["cost_per_mtok"], "USD")]


def test_the_pools_decode_step_is_the_scenarios_past_the_all_reduce_knee() -> None:
    """The disaggregated search's decode grid (`replica_shapes`, one StepModel over every shape)
    carries F10's CommLine: at every batch, below and past its knee (1 MiB / (8,192 x 2 B) =
    64 sequences for Llama-3.1-70B), each TP shape's step is `evaluate`'s for that replica."""
    import numpy as np

    from capacity.model.scenario import evaluate, make_scenario
    from capacity.plan.disagg import replica_shapes

    wl = Workload(peak_concurrency=64, context_tokens=4096, prompt_tokens=2048,
                  output_tokens=256)
    inp = PlanInputs(model="llama-3.1-70b", workload=wl, gpus=("h100-sxm",), formats=("fp8",),
                     kv_dtypes=("fp8",), max_gpus=8)
    _, shapes, grid = replica_shapes(inp, default_catalog())
    batch = [1, 40, 64, 65, 200]
    checked = 0
    for i, u in enumerate(shapes):
        if u.tp < 2 or u.slots < max(batch):
            continue
        s = make_scenario("llama-3.1-70b", u.gpu.key, weights=u.weights, n_gpus=u.tp, tp=u.tp,
                          context_tokens=4096, kv_dtype=u.kv)
        want = evaluate(s, np.array(batch, dtype=float)).decode.step_ms
        np.testing.assert_allclose(grid[i, batch], want, rtol=1e-9)
        checked += 1
    assert checked >= 2
