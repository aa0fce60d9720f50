"""Wide expert parallelism on the Planner page and in the quote (issue 27): the verdict of
`compare_ep` in the page's languages (every branch, word for word in English), the deployment
as a buyer reads it, the rejections in Chinese, the link's `wide_ep`, the quote's section, and
one set of figures on every surface (`capacity size --wide-ep --json`, the Planner page through
its URL, the quote) for DeepSeek-R1 where wide EP wins and Qwen3-30B-A3B where aggregated
does."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.plan.ep_search import (
    REJECTION_CODES,
    EpComparison,
    EpPlanOption,
    compare_ep,
    ep_rejection,
    ep_search,
)
from capacity.plan.search import plan
from capacity.report.document import render_markdown
from capacity.report.i18n import note_text
from capacity.report.money import fmt_money, fmt_ms
from capacity.report.planner_url import (
    PlannerState,
    planner_decode,
    planner_encode,
    planner_state,
)
from capacity.report.quote import quote_markdown
from capacity.report.quote_disagg import disagg_section
from capacity.report.quote_ep import (
    deployment_text,
    ep_blocks,
    ep_label,
    ep_section,
    reason_text,
    rejection_text,
)

CAT = default_catalog()


def _state(model: str, dau: int, gpus: str, **kw: object) -> PlannerState:
    """2K prompts (the Planner's prompt is the context), 500 output tokens, FP8 KV, USD."""
    base: dict[str, object] = {"model": model, "dau": dau, "rpu": 20, "ctx": 2048, "out": 500,
                               "ttft": 2000, "tpot": 50, "cur": "USD", "gpus": gpus,
                               "kv": "fp8", "wide_ep": 1}
    return PlannerState(**(base | kw))  # type: ignore[arg-type]


R1 = _state("deepseek-r1-fp8", 20_000, "h200-sxm,gb200")
"""20,000 users x 20 requests, 30 % in 2 h, +20 %: 20 req/s, in FP8 weights (the key's suffix;
the format of the published H100/H800/H200 deployments). 8 GPUs of a GB200 NVL72 rack as EP8
(USD 37,960 a month) against 16 GB200 as 2 replicas of TP 8 (USD 75,920): wide EP wins. (Two
nodes of 8 H200 as EP8, USD 42,048, until the EP search took 8-GPU slices of an NVL72 rack,
2026-12-07; searched in every format, 8 GB200 as 2 NVFP4 replicas of TP 4 are as cheap as
NVFP4 EP8 on 8 GB200, `R1_ANY`; in AWQ, before the catalog had NVFP4, 12 GB200 at USD 56,940;
one node and 8 GB200 until F10's small-message all-reduce, 2026-12-03, slowed the TP
attention's and the replicas' all-reduces.)"""
R1_ANY = replace(R1, model="deepseek-r1")
"""The same load in any format: NVFP4 on Blackwell makes aggregated replicas the cheaper."""
QWEN = _state("qwen3-30b-a3b", 500, "h100-sxm", ctx=4096, out=200)
"""0.5 req/s: one H100 serves it; one EP deployment is 8 GPUs: aggregated wins."""

CASES: dict[str, PlannerState] = {
    "wide EP, aggregated costlier": R1,
    "wide EP, no aggregated": _state("deepseek-v3", 20_000, "h200-sxm"),
    "aggregated, EP too big": QWEN,
    "aggregated, as cheap": _state("deepseek-v3-fp8", 4_000, "h200-sxm"),
    "aggregated, no EP": replace(QWEN, gpus="rtx-4090", maxg=4),
    "none": _state("deepseek-v3", 2_000, "h200-sxm", tpot=1),
}
"""One workload per branch of `compare_ep`'s reason (each a search of one or two GPU types)."""


@pytest.fixture(scope="module")
def cases() -> dict[str, EpComparison]:
    return {k: compare_ep(s.inputs(CAT)) for k, s in CASES.items()}


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_every_branch_of_the_verdict_in_english_is_the_librarys(
        cases: dict[str, EpComparison]) -> None:
    assert [c.winner for c in cases.values()] == [
        "wide-ep", "wide-ep", "aggregated", "aggregated", "aggregated", "none"]
    for name, c in cases.items():
        assert reason_text(c, "en") == c.reason, name
        for o in c.ep.options:
            assert ep_label(o, "en") == o.label, name
    got = {k: c.reason for k, c in cases.items()}
    assert "aggregated needs 16 x GB200" in got["wide EP, aggregated costlier"]
    assert "no aggregated configuration meets the SLOs within 16 GPUs" in got[
        "wide EP, no aggregated"]
    assert got["aggregated, EP too big"].endswith("one EP deployment is 8 GPUs, more than the "
                                                 "load needs")
    assert re.search(r"costs USD 21,024/month for 8 GPUs \(\d[\d,]* output tok/s per GPU\)$",
                     got["aggregated, as cheap"])
    assert got["aggregated, no EP"].endswith("no wide-EP deployment meets the SLOs within 4 GPUs")
    assert got["none"].startswith("neither an aggregated nor a wide-EP deployment")


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_the_verdict_in_chinese_has_the_same_figures(cases: dict[str, EpComparison]) -> None:
    c = cases["wide EP, aggregated costlier"]
    ep, agg = c.ep.best, c.aggregated.best
    assert ep is not None and agg is not None
    zh = reason_text(c, "zh")
    assert zh.startswith("大规模专家并行：1 台 8 卡 GB200 (NVL72) 节点：EP8，")
    assert f"USD {ep.cost_per_month:,.0f}/月" in zh and f"USD {agg.cost_per_month:,.0f}/月" in zh
    assert f"每 token 延迟 p90 {ep.tpot_ms:.1f} ms" in zh
    assert f"每卡输出 {ep.output_tok_s_per_gpu:,.0f} token/s" in zh
    assert f"最多解码 {agg.slots_per_replica} 个序列" in zh
    for k, cmp in cases.items():  # no English word of the sentences is left in Chinese
        assert not re.search(r"\b(?:aggregated|deployment|sequences|month|GPUs|attention|"
                             r"overlap|neither)\b", reason_text(cmp, "zh")), k


def _option(c: EpComparison, **kw: object) -> EpPlanOption:
    best = c.ep.best
    assert best is not None
    return replace(best, **kw)  # type: ignore[arg-type]


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_the_deployment_as_a_buyer_reads_it(cases: dict[str, EpComparison]) -> None:
    c = cases["wide EP, no aggregated"]
    # 16 H100 over two HGX nodes, all-to-all over their 400 Gb/s InfiniBand NICs, 3 of them
    ib = _option(c, gpu_name="H100 SXM", ep=16, nodes=2, gpus_per_node=8, attention_tp=1,
                 redundant_experts=32, overlap="two-batch", scale_up=False, link="infiniband",
                 scale_out_gbit_s=400.0, replicas=3, spare_gpus=0)
    assert deployment_text(ib, "en") == (
        "2 nodes x 8 H100 SXM: EP16, DP attention, 32 redundant experts, all-to-all over "
        "InfiniBand 400 Gb/s; 3 such deployments")
    assert deployment_text(ib, "zh") == (
        "2 台 8 卡 H100 SXM 节点：EP16，数据并行注意力，32 个冗余专家，all-to-all 经 "
        "InfiniBand 400 Gb/s；共 3 个这样的部署")
    spare = replace(ib, spare_gpus=16)
    assert deployment_text(spare, "en").endswith("; 3 such deployments, plus 1 spare "
                                                 "deployment (16 GPUs)")
    assert ep_label(spare, "en") == spare.label == (
        "3 x (2 nodes x 8 H100 SXM: EP16, DP attention, 32 redundant experts, two-batch "
        "overlap, fp8, fp8 KV, all-to-all over InfiniBand 400 Gb/s) + 1 spare deployment")
    # one node, its NVLink: no count, TP attention, no redundant experts
    one = _option(c, ep=8, nodes=1, gpus_per_node=8, attention_tp=4, redundant_experts=0,
                  scale_up=True, link="nvlink", replicas=1, spare_gpus=0)
    assert deployment_text(one, "en") == ("1 node x 8 H200 SXM: EP8, TP4 attention, "
                                          "all-to-all over NVLink")
    assert ep_label(one, "zh") == ("1 台 8 卡 H200 SXM 节点：EP8，TP4 张量并行注意力，"
                                   f"{_overlap_zh(one)}，fp8，fp8 KV，all-to-all 经 NVLink")


def _overlap_zh(o: EpPlanOption) -> str:
    return {"two-batch": "双批次重叠", "sum": "无重叠"}[o.overlap]


# every reason of `ep_search`'s rejections (`ep_rejection`), its figures, English and Chinese
DETAILS = {
    ("ep_rej_no_nodes", ()):
        ("no node data (data/nodes.toml): its NVLink domain and NIC are unknown",
         "没有节点数据（data/nodes.toml）：不知道它的 NVLink 域和网卡"),
    ("ep_rej_node_over", (("n", 72), ("limit", 16))):
        ("one node of 72 is over the limit of 16 GPUs", "一个节点 72 卡，超过 16 卡的上限"),
    ("ep_rej_no_size", (("n", 8), ("limit", 16))):
        ("no EP size of 8-GPU nodes fits within 16 GPUs", "8 卡节点的任何专家并行规模都超出 16 卡"),
    ("ep_rej_bound", (("ep", 16), ("cap", 9.8512), ("k", 3), ("rate", 20.0), ("limit", 16))):
        ("EP16 cannot serve more than 9.85 req/s per deployment even with every KV slot "
         "decoding and no prefill, before the SLOs: 3 deployments for 20.00 req/s would exceed "
         "16 GPUs",
         "EP16 每个部署至多承载 9.85 req/s（这是上限：KV 槽位全部在解码、不计预填充，尚未检查 "
         "SLO）：20.00 req/s 需要 3 个部署，将超过 16 卡"),
    ("ep_rej_count", (("ep", 16), ("cap", 1.9549), ("k", 11), ("g", 176), ("rate", 20.0),
                      ("limit", 16))):
        ("EP16 serves 1.95 req/s per deployment within the SLOs: 11 deployments (176 GPUs) for "
         "20.00 req/s exceed 16 GPUs",
         "EP16 每个部署在 SLO 内承载 1.95 req/s：20.00 req/s 需要 11 个部署（176 卡），超过 16 卡"),
    ("ep_rej_weights", (("ep", 16), ("w", 57.46), ("short", 17.93))):
        ("the weights do not fit on 16 GPUs (57.5 GB of weights per GPU, 17.9 GB short)",
         "16 卡放不下权重（每卡 57.5 GB 权重，差 17.9 GB）"),
    ("ep_rej_kv", (("held", 2048), ("ep", 8))):
        ("no sequence of 2048 tokens fits beside the weights on 8 GPUs",
         "在 8 卡上放下权重后，连一个 2048 token 的序列也放不下"),
    ("ep_rej_slo", (("ep", 16), ("tpot", 11.62), ("pre", 16.8))):
        ("EP16 misses the SLOs even at one request (TPOT 11.6 ms at one sequence, prefill 17 ms)",
         "EP16 即使只有一个请求也不满足 SLO（单序列每 token 延迟 11.6 ms，预填充 17 ms）"),
}


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_the_rejections_in_both_languages(cases: dict[str, EpComparison]) -> None:
    """Issue 27: a rejection is a coded note (`ep_rejection`): its English is the library's
    text, the same as data/i18n's message, and the Chinese is said from its code and figures,
    no sentence read back."""
    assert {code for code, _ in DETAILS} == set(REJECTION_CODES)
    for (code, params), (en, zh) in DETAILS.items():
        note = ep_rejection(code, **dict(params))
        assert (str(note), note.code, note.params) == (en, code, dict(params))
        assert rejection_text(note, "en") == en == note_text(note, "en")
        assert rejection_text(note, "zh") == zh
    assert rejection_text("something new", "zh") == "something new"  # a plain string stays
    with pytest.raises(InputError, match="unknown wide-EP rejection"):
        ep_rejection("ep_rej_nonsense")
    # the reasons the searches above gave are coded ones, said in Chinese
    seen = [r.detail for c in cases.values() for r in c.ep.rejected]
    assert seen and all(d.code in REJECTION_CODES and rejection_text(d, "zh") != d
                        for d in seen)
    wide = ep_search(replace(R1, gpus="h200-sxm,a100-80gb-sxm,l40s,a100-80gb-pcie").inputs(CAT))
    by_gpu = {r.gpu: r.detail for r in wide.rejected}
    assert {g: d.code for g, d in by_gpu.items()} == {
        "a100-80gb-sxm": "ep_rej_count", "l40s": "ep_rej_weights",
        "a100-80gb-pcie": "ep_rej_bound"}
    # the A100s side by side: the SXM's figure is its capacity within the SLOs, the PCIe's an
    # upper bound before them, and each says which (the list no longer reads as if the PCIe
    # card served five times the SXM's load)
    assert "within the SLOs" in by_gpu["a100-80gb-sxm"]
    assert "before the SLOs" in by_gpu["a100-80gb-pcie"]
    assert "at most" not in " ".join(by_gpu.values())
    assert all(rejection_text(d, "zh") != d for d in by_gpu.values())



def test_the_link_carries_the_toggle() -> None:
    assert planner_encode(R1)["wide_ep"] == "1"
    assert "wide_ep" not in planner_encode(replace(R1, wide_ep=0))
    back, notices = planner_decode(planner_encode(R1), CAT)
    assert back == R1 and notices == []
    bad, notices = planner_decode({**planner_encode(R1), "wide_ep": "2"}, CAT)
    assert bad.wide_ep == 0 and len(notices) == 1 and "wide_ep=2" in str(notices[0])
    # a dense model has no experts to spread: off, with a notice in the page's language
    dense, notices = planner_decode({**planner_encode(R1), "model": "qwen3-8b"}, CAT)
    assert dense.wide_ep == 0 and dense.model == "qwen3-8b" and len(notices) == 1
    assert str(notices[0]) == ("'wide_ep=1' ignored (qwen3-8b is not a mixture-of-experts "
                               "model); using 0")
    assert note_text(notices[0], "zh") == "已忽略`wide_ep=1`（qwen3-8b 不是混合专家模型）；改用 0"
    assert planner_state(R1.inputs(CAT), CAT, wide_ep=True).wide_ep == 1
    assert planner_state(R1.inputs(CAT), CAT).wide_ep == 0


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_the_quote_section_in_both_languages(cases: dict[str, EpComparison]) -> None:
    c = cases["wide EP, aggregated costlier"]
    o = c.ep.best
    assert o is not None
    en = render_markdown(ep_blocks(c, "en"))
    assert en.startswith("# Wide expert parallelism\n")  # alone, its heading is the title
    assert f"**Wide EP wins**: {c.reason}" in en
    assert "Cheapest wide-EP deployment: 1 node x 8 GB200 (NVL72): EP8, " in en
    assert f"| Cost per month | {fmt_money(o.cost_per_month, 'USD')} |" in en
    assert f"| per M tok, design load | {fmt_money(o.cost_per_mtok_design, 'USD')} |" in en
    assert f"| TPOT p90, design load | {fmt_ms(o.tpot_ms)} |" in en
    # a GPU without an option: its row, in both languages
    no_ep = cases["aggregated, no EP"]
    assert "| RTX 4090 | one node of 8 is over the limit of 4 GPUs |" in render_markdown(
        ep_blocks(no_ep, "en"))
    assert "| RTX 4090 | 一个节点 8 卡，超过 4 卡的上限 |" in render_markdown(ep_blocks(no_ep, "zh"))
    zh = render_markdown(ep_blocks(c, "zh"))
    assert zh.startswith("# 大规模专家并行") and "**大规模专家并行胜出**：" in zh
    assert f"| 每月成本 | {fmt_money(o.cost_per_month, 'USD')} |" in zh
    none = render_markdown(ep_blocks(cases["none"], "en"))
    assert "No wide-EP deployment meets the SLOs within 16 GPUs." in none
    # in the whole quote: after the ranked options and the disaggregated section, before the
    # assumptions; absent without it
    from capacity.plan.disagg import compare

    inp = R1.inputs(CAT)
    p = plan(inp)
    md = quote_markdown(p, sections=(disagg_section(compare(inp, aggregated=p)),
                                     ep_section(c)))
    assert md.index("## Disaggregated") < md.index("## Wide expert parallelism") < md.index(
        "## Assumptions")
    assert "## Wide expert parallelism" not in quote_markdown(p)


def _cli_args(s: PlannerState, quote: Path) -> list[str]:
    """`capacity size` with the same inputs as the Planner state `s`."""
    return ["size", "--model", s.model, "--dau", str(s.dau), "--requests-per-user", f"{s.rpu:g}",
            "--peak-share", f"{s.share:g}", "--peak-hours", f"{s.hours:g}", "--ctx", str(s.ctx),
            "--output-tokens", str(s.out), "--headroom", f"{s.headroom:g}",
            "--slo-ttft-ms", f"{s.ttft:g}", "--slo-tpot-ms", f"{s.tpot:g}",
            "--slo-percentile", str(s.pct), "--gpus", s.gpus, "--max-gpus", str(s.maxg),
            "--kv-dtypes", s.kv, "--currency", s.cur, "--wide-ep", "--format", "json",
            "--top", "10", "--quote", str(quote)]


def _section(md: str) -> str:
    """The quote's wide-EP section, its heading to the next."""
    section = md[md.index("## Wide expert parallelism"):]
    return section[:section.index("\n## ", 5)]


def _quote_rows(md: str) -> dict[str, list[str]]:
    """The section's tables: the chosen one's (quantity -> value), the others' by '#'."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in _section(md).splitlines()
            if line.startswith("| ") and not line.startswith("|---")]
    return {r[0]: r[1:] for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize(("state", "winner"), [(R1, "wide-ep"), (QWEN, "aggregated")],
                         ids=["deepseek-r1", "qwen3-30b-a3b"])
def test_one_set_of_figures_on_every_surface(state: PlannerState, winner: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The wide-EP figures (cost per month and per M tokens, TTFT, TPOT, GPUs, sequences and
    output tok/s per GPU) of `capacity size --wide-ep --json`, the Planner page's table and
    the quote are the same numbers."""
    from streamlit.testing.v1 import AppTest

    from capacity.cli.main import build_parser, main
    from capacity.cli.size import inputs_from_args

    quote = tmp_path / "quote.md"
    args = _cli_args(state, quote)
    inp = state.inputs(CAT)
    assert inputs_from_args(build_parser("size").parse_args(args)) == inp
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)["wide_ep"]
    assert data["winner"] == winner
    cli = data["options"]
    assert cli
    for o in cli:  # by hand: price per GPU-hour x GPUs paid x 730 h; F7 at the design load
        assert o["cost_per_month"] == pytest.approx(o["price_per_hour"] * o["paid_gpus"] * 730)
        assert o["cost_per_mtok_design"] == pytest.approx(
            o["price_per_hour"] * o["paid_gpus"] / (data["design_rate_per_s"] * state.out
                                                    * 3600) * 1e6)

    app = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "streamlit_app.py"),
                            default_timeout=240).switch_page("pages/planner.py")
    for k, v in planner_encode(state).items():
        app.query_params[k] = v
    app.run()
    assert not app.exception
    assert app.checkbox(key="planner_wide_ep").value is True
    assert not app.checkbox(key="planner_wide_ep").disabled
    verdict = "**" + {"wide-ep": "Wide EP wins", "aggregated": "Aggregated wins"}[winner] + \
        "**: " + data["reason"]
    assert verdict in [b.value for b in (*app.success, *app.info)]
    page = next(d.value for d in app.dataframe if "All-to-all over" in d.value.columns)
    assert len(page) == len(cli)
    for (_, row), o in zip(page.iterrows(), cli, strict=True):
        assert row["GPU"] == o["gpu_name"] and row["Deployments"] == o["replicas"]
        assert row["All-to-all over"] == o["network"]
        assert row["Nodes x GPUs each"] == f"{o['nodes']} x {min(o['ep'], o['gpus_per_node'])}"
        assert row["GPUs paid"] == o["paid_gpus"]
        assert row["Sequences per GPU"] == o["batch_per_gpu"]
        assert row["TTFT p90, design load"] == o["ttft_ms"]
        assert row["TPOT p90, design load"] == o["tpot_ms"]
        assert row["Output tok/s per GPU"] == o["output_tok_s_per_gpu"]
        assert row["per month"] == o["cost_per_month"]
        assert row["per M tok, SLO capacity"] == o["cost_per_mtok"]
        assert row["per M tok, design load"] == o["cost_per_mtok_design"]
    rejected = [e for e in app.expander if e.label.startswith("GPUs without a wide-EP")]
    assert len(rejected) == (1 if data["rejected"] else 0)
    # one reason, one text: the CLI's JSON, the page's list and the quote's table
    shown = "\n".join(m.value for e in rejected for m in e.markdown)
    md = quote.read_text(encoding="utf-8")
    for r in data["rejected"]:
        assert r["code"] in REJECTION_CODES
        assert r["detail"] == ep_rejection(r["code"], **r["params"])
        assert r["detail"] in shown and r["detail"] in md
    assert verdict in md and "wide_ep=1" in md  # the link reopens the page with the box on
    rows = _quote_rows(md)
    best = cli[0]
    assert rows["Cost per month"] == [fmt_money(best["cost_per_month"], "USD")]
    assert rows["per M tok, SLO capacity"] == [fmt_money(best["cost_per_mtok"], "USD")]
    assert rows["per M tok, design load"] == [fmt_money(best["cost_per_mtok_design"], "USD")]
    assert rows["TTFT p90, design load"] == [fmt_ms(best["ttft_ms"])]
    assert rows["TPOT p90, design load"] == [fmt_ms(best["tpot_ms"])]
    assert rows["GPUs paid"] == [str(best["paid_gpus"])]
    assert rows["Sequences per GPU"] == [f"{best['batch_per_gpu']:.1f}"]
    assert rows["Output tok/s per GPU"] == [f"{best['output_tok_s_per_gpu']:,.0f}"]
    for i, o in enumerate(cli[1:5], 2):
        assert rows[str(i)][1:] == [str(o["paid_gpus"]), fmt_money(o["cost_per_month"], "USD"),
                                    fmt_money(o["cost_per_mtok"], "USD"), fmt_ms(o["ttft_ms"]),
                                    fmt_ms(o["tpot_ms"]), f"{o['output_tok_s_per_gpu']:,.0f}"]
    # the page's quote (`app.cache.quotes`) makes its section with the same function
    lib = compare_ep(inp, aggregated=plan(inp))
    assert _section(quote_markdown(plan(inp), sections=(ep_section(lib),))) == _section(md)


@pytest.mark.slow
def test_a_dense_model_has_no_box_to_tick() -> None:
    """A link with `wide_ep=1` for a dense model: the box is off and disabled, the notice says
    why, and no section is drawn."""
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "streamlit_app.py"),
                            default_timeout=240).switch_page("pages/planner.py")
    for k, v in {"model": "qwen3-8b", "gpus": "h100-sxm", "wide_ep": "1"}.items():
        app.query_params[k] = v
    app.run()
    assert not app.exception
    box = app.checkbox(key="planner_wide_ep")
    assert box.value is False and box.disabled
    assert any("qwen3-8b is not a mixture-of-experts model" in w.value for w in app.warning)
    assert "Wide expert parallelism" not in [s.value for s in app.subheader]


def test_on_blackwell_wide_ep_runs_nvfp4_as_the_published_gb200_deployments() -> None:
    """The EP search tries NVFP4 beside the model's FP8 where the GPU multiplies FP4 (B200),
    not on a Hopper; a key's own suffix keeps its one format. In any format the aggregated
    NVFP4 replicas on GB200 are the cheaper for R1's load."""
    b200 = ep_search(replace(R1_ANY, gpus="b200").inputs(CAT))
    assert b200.options and b200.options[0].weights == "nvfp4"
    h200 = ep_search(replace(R1_ANY, gpus="h200-sxm").inputs(CAT))
    assert {o.weights for o in h200.options} == {"fp8"}
    fp8 = ep_search(replace(R1, gpus="b200").inputs(CAT))
    assert {o.weights for o in fp8.options} == {"fp8"}
    c = compare_ep(R1_ANY.inputs(CAT))
    assert c.winner == "aggregated" and c.aggregated.best is not None
    assert (c.aggregated.best.gpu, c.aggregated.best.weights) == ("gb200", "nvfp4")


def test_a_gpu_below_its_smallest_ep_size_says_that_size() -> None:
    """Under 8 GPUs a GB200 has no EP deployment: the reason names its smallest one, 8 GPUs of
    a rack, not the 72-GPU rack (`ep_sizes`)."""
    got = ep_search(replace(R1, gpus="gb200", maxg=4).inputs(CAT)).rejected
    assert [(r.gpu, str(r.detail)) for r in got] == [
        ("gb200", "one node of 8 is over the limit of 4 GPUs")]
