"""Wide expert parallelism on disaggregated pools (capacity/plan/ep_pools.py, `capacity size
--wide-ep --disaggregated`): the KV hand-over and the pools' sizing by hand, one computation
with the wide-EP planner for each phase, the verdict's branches, the JSON and text against the
library, and the refusals."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.catalog.nodes import node_shape
from capacity.cli.disagg_plan import parse_ep_pool
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.model.expert_parallel import ep_layout, ep_setup, ep_step, prefill_tok_s_per_gpu
from capacity.model.moe_imbalance import imbalance_factor
from capacity.model.workload import Workload
from capacity.plan.disagg_handover import handover_bytes
from capacity.plan.ep_pools import (
    POOL_REJECTION_CODES,
    DecodeShape,
    EpPoolsOption,
    PrefillShape,
    decode_shape,
    handover_link,
    pool_rejection,
    pools_at,
    prefill_shape,
    size_pools,
)
from capacity.plan.ep_pools_search import (
    PoolsComparison,
    compare_pools,
    ep_pools_search,
    evaluate_pools,
)
from capacity.plan.ep_search import basis_of, compare_ep, ep_search, prefill_ms_per_prompt
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.document import render_markdown
from capacity.report.i18n import note_text
from capacity.report.money import fmt_money, fmt_ms
from capacity.report.planner_url import PlannerState, planner_encode
from capacity.report.quote import quote_markdown
from capacity.report.quote_ep import ep_section
from capacity.report.quote_ep_pools import (
    decode_text,
    handover_text,
    pools_blocks,
    pools_label,
    pools_reason_text,
    pools_section,
    prefill_text,
)
from capacity.types import Note

CAT = default_catalog()
H200_PRICE = 20.0
"""CNY per GPU-hour entered for H200 in these tests (catalog prices move; this does not)."""


def _inputs(dau: float, *, prompt: int = 2000, out: int = 500, ctx: int = 2500,
            **kw: object) -> PlanInputs:
    wl = Workload(daily_active_users=dau, context_tokens=ctx, prompt_tokens=prompt,
                  output_tokens=out)
    base: dict[str, object] = {"model": "deepseek-v3", "workload": wl, "gpus": ("h200-sxm",),
                               "max_gpus": 64, "kv_dtypes": ("fp8",),
                               "price_overrides": (("h200-sxm", H200_PRICE),)}
    return PlanInputs(**(base | kw))  # type: ignore[arg-type]


# -- the hand-over -------------------------------------------------------------------------------

def test_the_kv_of_one_prompt_by_hand() -> None:
    # MLA: 61 layers x (512 latent + 64 rope) x 1 byte (fp8) a token, whole on one DP rank
    m = CAT.variant("deepseek-v3").model
    assert handover_bytes(m, "fp8", 2000, 1) == pytest.approx(61 * 576 * 2000)
    # TP attention: the latent does not split, every rank of the group holds (sends) a copy
    assert handover_bytes(m, "fp8", 2000, 4) == pytest.approx(61 * 576 * 2000)


def test_the_link_between_the_pools() -> None:
    g = CAT.gpu("h200-sxm")
    sh = node_shape("h200-sxm")
    nic = handover_link(g, sh, 16)
    assert nic.kind == sh.scale_out_kind and nic.send_gb_s == pytest.approx(400 / 8)
    up = handover_link(g, sh, 8)   # both pools inside one HGX board: NVLink
    assert up.kind == "nvlink" and up.send_gb_s == pytest.approx(g.interconnect_gb_s)


# -- one pair of pools by hand ---------------------------------------------------------------------

def _p50(inp: PlanInputs) -> PlanInputs:
    """`inp` with the SLOs at p50, TTFT 2 s and TPOT 50 ms."""
    return replace(inp, slo=Slo(ttft_ms=2000, tpot_ms=50, quantile=0.5))


def _prefill(inp: PlanInputs) -> PrefillShape:
    pre = prefill_shape(inp, CAT.gpu("h200-sxm"), 8, "fp8", "fp8", basis_of(inp), CAT)
    assert isinstance(pre, PrefillShape)
    return pre


def _flat_decode(inp: PlanInputs, step_ms: float, slots: int) -> DecodeShape:
    """The decode shape of EP8 with its grid replaced by a flat step (the sizing by hand)."""
    dec = decode_shape(inp, CAT.gpu("h200-sxm"), 8, "fp8", "fp8", basis_of(inp), CAT)
    assert isinstance(dec, DecodeShape)
    grid = np.full(slots + 1, step_ms)
    return replace(dec, slots=slots, grid=grid, capacity_per_s=(slots - 1) / (
        inp.workload.output_tokens * step_ms / 1e3))


def test_sizing_two_pools_by_hand() -> None:
    """20 req/s, 2,000-token prompts, 100 outputs, p50. Decode: a flat 20 ms step and 100 slots
    take (100 - 1) / (100 x 0.02 s) = 49.5 req/s each: 1 deployment. Prefill: 10 ms a prompt on
    EP8, rho 0.2 (< 0.5: the p50 prompt does not queue), 1 deployment. Both pools are 16 GPUs,
    over the NIC: 70,272,000 B at 50 GB/s x 0.85 = 1.6534 ms, 61 x 125 blocks x 3.75 us =
    28.594 ms of descriptors, 1 ms latency, one 20 ms admission step; the p50 rank waits
    nothing. TTFT p50 = 10 + 1 + 1.6534 + 28.594 + 20 + the first step 20 = 81.247 ms."""
    inp = _p50(_inputs(2_000, out=100))
    g, sh = CAT.gpu("h200-sxm"), node_shape("h200-sxm")
    dec = _flat_decode(inp, 20.0, 100)
    pre = replace(_prefill(inp), prefill_ms=10.0)
    m = CAT.variant("deepseek-v3").model
    o = size_pools(inp, g, sh, m, "fp8", "fp8", pre, dec, 20.0, 64)
    assert isinstance(o, EpPoolsOption)
    assert (o.prefill_replicas, o.decode_replicas) == (1, 1)
    assert o.decode_capacity_per_s == pytest.approx(49.5)
    assert o.handover_bytes == pytest.approx(70_272_000)
    busy = 70_272_000 / (50 * 0.85 * 1e6) + 61 * 125 * 3.75 / 1e3
    assert o.transfer_ms == pytest.approx(1.0 + busy + 20.0)
    assert o.transfer_wait_ms == pytest.approx(0.0)
    assert o.ttft_ms == pytest.approx(10.0 + 1.0 + busy + 20.0 + 20.0, rel=1e-6)
    assert o.ttft_ms == pytest.approx(81.247, abs=1e-3)
    assert o.prefill_utilization == pytest.approx(0.2)
    assert o.tpot_ms == pytest.approx(20.0)
    # Little: B - 1 = 20 req/s x 100 steps x 20 ms = 40 others
    assert o.decode_batch == pytest.approx(41.0)
    # the GPUs paid and the price: 16 x CNY 20 x 730 h
    assert o.paid_gpus == o.n_gpus == 16
    assert o.cost_per_month == pytest.approx(16 * H200_PRICE * 730)
    assert o.input_tok_s_per_prefill_gpu == pytest.approx(20 * 2000 / 8)
    assert o.output_tok_s_per_decode_gpu == pytest.approx(20 * 100 / 8)
    # a rate the decode pool needs two deployments for: 60 req/s -> ceil(60 / 49.5) = 2
    o2 = size_pools(inp, g, sh, m, "fp8", "fp8", pre, dec, 60.0, 64)
    assert isinstance(o2, EpPoolsOption)
    assert o2.decode_replicas == 2
    # prompts of 10 ms at 60 req/s: rho 0.6 on one prefill deployment, its p50 waits; TTFT
    # 2000 ms holds it, so still one
    assert o2.prefill_replicas == 1 and o2.prefill_utilization == pytest.approx(0.6)


def test_too_few_gpus_is_said_with_its_figures() -> None:
    inp = _p50(_inputs(2_000, out=100))
    g, sh = CAT.gpu("h200-sxm"), node_shape("h200-sxm")
    dec = _flat_decode(inp, 20.0, 100)
    m = CAT.variant("deepseek-v3").model
    why = size_pools(inp, g, sh, m, "fp8", "fp8", _prefill(inp), dec, 200.0, 16)
    assert isinstance(why, Note) and why.code == "epp_rej_count"
    assert "5 of them (40 GPUs) for 200.00 req/s" in str(why)


# -- one computation with the wide-EP planner ------------------------------------------------------

def test_each_phase_is_the_wide_ep_models() -> None:
    """The prefill deployment's time per prompt is `prefill_ms_per_prompt` at
    `prefill_tok_s_per_gpu`, and the decode step at the design load's batch is `ep_step`:
    the functions the EP scorecard holds against SGLang's and DeepSeek's published rows."""
    inp = _inputs(20_000)
    s = ep_pools_search(inp)
    o = s.best
    assert o is not None
    b = basis_of(inp)
    lay = ep_layout("h200-sxm", o.prefill_ep, attention_tp=o.prefill_attention_tp,
                    redundant_experts=o.prefill_redundant_experts)
    setup = ep_setup("deepseek-v3", "h200-sxm", lay, context_tokens=2000, kv_dtype="fp8")
    gamma = imbalance_factor(experts=setup.experts, active=setup.active,
                             exponent=setup.exponent, gpus=lay.ep,
                             redundant=lay.redundant_experts, batch_tokens=2000.0)
    tok = prefill_tok_s_per_gpu(setup, 2000, mfu=b.mfu, imbalance=gamma, knobs=b.knobs)
    assert o.prefill_tok_s_per_gpu == pytest.approx(tok)
    assert o.prefill_ms == pytest.approx(prefill_ms_per_prompt(
        2000, lay.ep, tok, inp.fixed_prefill_ms(setup.variant.model)))
    lay_d = ep_layout("h200-sxm", o.decode_ep, attention_tp=o.decode_attention_tp,
                      redundant_experts=o.decode_redundant_experts)
    sd = ep_setup("deepseek-v3", "h200-sxm", lay_d, context_tokens=2500, kv_dtype="fp8")
    step = ep_step(sd, o.decode_batch, eta_bw=b.eta_bw, eff=b.eff, overhead_ms=b.overhead_ms,
                   overlap=o.decode_overlap, knobs=b.knobs).step_ms
    assert o.decode_step_ms == pytest.approx(step, rel=0.02)  # the grid is linear in between


# -- the verdict ---------------------------------------------------------------------------------

def test_long_prompts_and_a_tight_tpot_favour_the_pools() -> None:
    """8K prompts, 300 outputs, TPOT 40 ms at 60 req/s: a wide-EP deployment that also prefills
    stretches its decode steps past the target, the pools do not."""
    inp = replace(_inputs(60_000, prompt=8000, out=300, ctx=9000),
                  gpus=("h100-sxm", "h200-sxm"), price_overrides=(),
                  slo=Slo(ttft_ms=3000.0, tpot_ms=40.0, quantile=0.9))
    ep = ep_search(inp, max_gpus=128)
    pools = ep_pools_search(inp, max_gpus=128)
    c = compare_pools(ep, pools)
    assert c.winner == "pools", c.reason
    best = pools.best
    assert best is not None and best.tpot_ms <= 40.0 and best.ttft_ms <= 3000.0
    assert c.reason.startswith(f"EP pools: {best.ratio} ({best.paid_gpus} GPUs")
    assert "pure decode steps" in c.reason


def test_a_light_load_keeps_one_kind_of_deployment() -> None:
    """2K prompts, 500 outputs, TPOT 50 ms at 20 req/s: one wide-EP deployment doing both
    phases costs no more than two pools of whole EP deployments."""
    inp = _inputs(20_000)
    c = compare_pools(ep_search(inp), ep_pools_search(inp))
    assert c.winner == "wide-ep", c.reason
    one, two = c.ep.best, c.pools.best
    assert one is not None and two is not None
    assert one.cost_per_month <= two.cost_per_month
    assert c.reason.startswith(f"wide EP with both phases on the same GPUs: {one.label}")


def test_neither_meets_an_impossible_target() -> None:
    inp = replace(_inputs(2_000), slo=Slo(ttft_ms=2000, tpot_ms=1.0, quantile=0.9))
    c = compare_pools(ep_search(inp), ep_pools_search(inp))
    assert c.winner == "none" and c.reason.startswith("neither wide EP serving both phases")
    assert c.pools.rejected and c.pools.rejected[0].detail.code == "epp_rej_tpot"
    assert str(c.pools.rejected[0].detail).startswith("an EP8 decode deployment misses TPOT 1 ms")


def test_refusals() -> None:
    with pytest.raises(InputError, match="not a mixture-of-experts"):
        ep_pools_search(_inputs(2_000, model="llama-3.1-8b"))
    with pytest.raises(InputError, match="arrival rate"):
        ep_pools_search(replace(_inputs(2_000), workload=Workload(
            peak_concurrency=50, context_tokens=2500, prompt_tokens=2000, output_tokens=500)))
    with pytest.raises(InputError, match="unknown EP-pools rejection"):
        pool_rejection("nope")


def test_every_rejection_has_its_message_in_both_languages() -> None:
    figures = {"epp_rej_count": {"ep": 16, "cap": 12.5, "k": 4, "g": 64, "rate": 50.0,
                                 "limit": 32},
               "epp_rej_ttft": {"ttft": 2000, "limit": 32, "pre": 512.0, "ep": 8},
               "epp_rej_tpot": {"ep": 8, "slo": 20.0, "tpot": 31.4}}
    assert set(figures) == set(POOL_REJECTION_CODES)
    for code, p in figures.items():
        note = pool_rejection(code, **p)
        assert note_text(note, "en") == str(note)   # data/i18n/en.toml says the library's words
        zh = note_text(note, "zh")
        assert zh != str(note) and f"EP{p['ep']}" in zh


# -- the command line ------------------------------------------------------------------------------

ARGS = ["size", "--model", "deepseek-v3", "--dau", "60000", "--ctx", "9000",
        "--prompt-tokens", "8000", "--output-tokens", "300", "--slo-ttft-ms", "3000",
        "--slo-tpot-ms", "40", "--gpus", "h100-sxm", "--wide-ep", "--disaggregated",
        "--wide-ep-max-gpus", "128", "--top", "3"]


def test_json_and_text_are_the_librarys(capsys: pytest.CaptureFixture[str]) -> None:
    main([*ARGS, "--format", "json"])
    data = json.loads(capsys.readouterr().out)["wide_ep_pools"]
    main(ARGS)
    text = capsys.readouterr().out
    assert data["winner"] == "pools"
    first = data["options"][0]
    assert f"winner: {data['reason']}" in text
    assert f"1. {first['label']}: {first['paid_gpus']} GPUs" in text
    assert f"TTFT p90 {first['ttft_ms']:,.0f} ms" in text
    assert f"TPOT p90 {first['tpot_ms']:.1f} ms" in text
    assert first["gpus"] == (first["prefill_replicas"] * first["prefill_ep"]
                             + first["decode_replicas"] * first["decode_ep"])
    assert math.isclose(first["cost_per_month"], first["paid_gpus"] * first["price_per_hour"]
                        * 730, rel_tol=1e-9)
    # without --disaggregated there is no such section
    main([a for a in ARGS if a != "--disaggregated"])
    assert "Wide EP on disaggregated pools" not in capsys.readouterr().out


# -- in words: the page's and the quote's language ----------------------------------------------

def _long(max_gpus: int) -> PlanInputs:
    return replace(_inputs(60_000, prompt=8000, out=300, ctx=9000),
                   gpus=("h100-sxm", "h200-sxm"), price_overrides=(),
                   slo=Slo(ttft_ms=3000.0, tpot_ms=40.0, quantile=0.9))


@pytest.fixture(scope="module")
def branches() -> dict[str, PoolsComparison]:
    """One comparison per branch of `compare_pools`' reason."""
    def cmp(inp: PlanInputs, limit: int | None = None) -> PoolsComparison:
        return compare_pools(ep_search(inp, max_gpus=limit), ep_pools_search(inp, max_gpus=limit))
    light = _inputs(20_000)
    return {
        "pools, one costlier": cmp(_long(128), 128),
        "pools, no one": cmp(_long(120), 120),
        "one, pools the same": cmp(light),
        "one, pools costlier": cmp(replace(_inputs(1_500), max_gpus=16)),
        "one, no pools": cmp(replace(_inputs(1_500), max_gpus=8)),
        "none": cmp(replace(_inputs(2_000), slo=Slo(ttft_ms=2000, tpot_ms=1.0))),
    }


@pytest.mark.slow  # six searches, some over 128 GPUs of two types (about 10 s)
def test_every_branch_in_english_is_the_librarys(branches: dict[str, PoolsComparison]) -> None:
    assert [c.winner for c in branches.values()] == [
        "pools", "pools", "wide-ep", "wide-ep", "wide-ep", "none"]
    for name, c in branches.items():
        assert pools_reason_text(c, "en") == c.reason, name
        for o in c.pools.options:
            assert pools_label(o, "en") == o.label, name
            assert prefill_text(o, "en") == o.prefill_label
            assert decode_text(o, "en") == o.decode_label
            assert handover_text(o, "en") == o.handover_text
    got = {k: c.reason for k, c in branches.items()}
    assert "wide EP with both phases on the same GPUs needs 128 GPUs" in got["pools, one costlier"]
    assert got["pools, no one"].endswith("no wide-EP deployment serving both phases meets the "
                                         "SLOs within 120 GPUs")
    assert "EP pools cost the same (1P+1D, 16 GPUs)" in got["one, pools the same"]
    assert "two pools of whole EP deployments are more GPUs" in got["one, pools costlier"]
    assert got["one, no pools"].endswith("no EP-pools option meets the SLOs within 8 GPUs")


@pytest.mark.slow  # the fixture's six searches
def test_the_verdict_in_chinese_has_the_same_figures(
        branches: dict[str, PoolsComparison]) -> None:
    c = branches["pools, one costlier"]
    two = c.pools.best
    assert two is not None
    zh = pools_reason_text(c, "zh")
    assert zh.startswith(f"专家并行分离部署：{two.ratio}（{two.paid_gpus} 卡，")
    assert f"每 token 延迟 p90 {two.tpot_ms:.1f} ms" in zh
    assert f"KV 传递 {two.transfer_ms:.1f} ms" in zh
    for k, cmp in branches.items():  # no English word of the sentences is left in Chinese
        assert not re.search(r"\b(?:pools?|deployments?|prefill|decode|month|GPUs|attention|"
                             r"overlap|neither|hand-over|phases)\b", pools_reason_text(cmp, "zh")), k
        for o in cmp.pools.options:
            assert not re.search(r"\b(?:prefill|decode|attention|overlap|nodes?)\b",
                                 pools_label(o, "zh")), k


@pytest.mark.slow  # the fixture's six searches
def test_the_quote_section(branches: dict[str, PoolsComparison]) -> None:
    c = branches["pools, one costlier"]
    md = render_markdown(pools_blocks(c, "en"))
    assert md.startswith("# Wide EP on disaggregated pools")
    assert f"**EP pools win**: {c.reason}" in md
    o = c.pools.best
    assert o is not None
    assert f"Cheapest EP pools: {o.label}" in md
    assert f"| TTFT p90, design load | {fmt_ms(o.ttft_ms)} |" in md
    assert f"| Cost per month | {fmt_money(o.cost_per_month, o.currency)} |" in md
    zh = render_markdown(pools_blocks(c, "zh"))
    assert zh.startswith("# 大规模专家并行的预填充/解码分离")
    none = render_markdown(pools_blocks(branches["one, no pools"], "en"))
    assert "No EP-pools option meets the SLOs within 8 GPUs." in none
    # in the whole quote: after the wide-EP section, before the assumptions
    inp = _inputs(20_000)
    p = plan(inp)
    md = quote_markdown(p, sections=(ep_section(compare_ep(inp, aggregated=p)),
                                     pools_section(branches["one, pools the same"])))
    assert md.index("## Wide expert parallelism") < md.index(
        "## Wide EP on disaggregated pools") < md.index("## Assumptions")


# -- one set of figures on every surface -----------------------------------------------------------

R1 = PlannerState(model="deepseek-r1", dau=20_000, rpu=20, ctx=2048, out=500, ttft=2000,
                  tpot=50, cur="USD", gpus="h200-sxm,gb200", kv="fp8", wide_ep=1, disagg=1)
"""The Planner with both boxes on: 20 req/s of 2K prompts on H200 within 16 GPUs; one wide-EP
kind wins on the tie with 1P+1D of EP8."""


def _section(md: str) -> str:
    """The quote's EP-pools section, its heading to the next."""
    section = md[md.index("## Wide EP on disaggregated pools"):]
    return section[:section.index("\n## ", 5)]


@pytest.mark.slow  # the app in AppTest and two searches (about 30 s)
def test_one_set_of_figures_on_every_surface(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity size --wide-ep --disaggregated --format json`, the Planner page's EP-pools
    table (through its URL, Streamlit's AppTest) and the quote show the same numbers."""
    from streamlit.testing.v1 import AppTest

    from capacity.cli.main import build_parser
    from capacity.cli.size import inputs_from_args

    s = R1
    quote = tmp_path / "quote.md"
    args = ["size", "--model", s.model, "--dau", str(s.dau), "--requests-per-user", f"{s.rpu:g}",
            "--peak-share", f"{s.share:g}", "--peak-hours", f"{s.hours:g}", "--ctx", str(s.ctx),
            "--output-tokens", str(s.out), "--headroom", f"{s.headroom:g}",
            "--slo-ttft-ms", f"{s.ttft:g}", "--slo-tpot-ms", f"{s.tpot:g}",
            "--slo-percentile", str(s.pct), "--gpus", s.gpus, "--max-gpus", str(s.maxg),
            "--kv-dtypes", s.kv, "--currency", s.cur, "--wide-ep", "--disaggregated",
            "--format", "json", "--top", "10", "--quote", str(quote)]
    assert inputs_from_args(build_parser("size").parse_args(args)) == s.inputs(CAT)
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)["wide_ep_pools"]
    cli = data["options"]
    assert data["winner"] == "wide-ep" and cli

    app = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "streamlit_app.py"),
                            default_timeout=240).switch_page("pages/planner.py")
    for k, v in planner_encode(s).items():
        app.query_params[k] = v
    app.run()
    assert not app.exception
    verdict = "**Wide EP serving both phases wins**: " + data["reason"]
    assert verdict in [b.value for b in (*app.success, *app.info)]
    page = next(d.value for d in app.dataframe if "Decode deployments" in d.value.columns)
    assert len(page) == len(cli)
    for (_, row), o in zip(page.iterrows(), cli, strict=True):
        assert row["GPU"] == o["gpu_name"]
        assert row["Prefill deployments"] == f"{o['prefill_replicas']} x ({o['prefill_label']})"
        assert row["Decode deployments"] == f"{o['decode_replicas']} x ({o['decode_label']})"
        assert row["All-to-all over"] == o["handover"]
        assert row["GPUs paid"] == o["paid_gpus"]
        assert row["TTFT p90, design load"] == o["ttft_ms"]
        assert row["TPOT p90, design load"] == o["tpot_ms"]
        assert row["KV hand-over"] == o["transfer_ms"]
        assert row["Input tok/s per prefill GPU"] == o["input_tok_s_per_prefill_gpu"]
        assert row["Output tok/s per decode GPU"] == o["output_tok_s_per_decode_gpu"]
        assert row["per month"] == o["cost_per_month"]
        assert row["per M tok, SLO capacity"] == o["cost_per_mtok"]
        assert row["per M tok, design load"] == o["cost_per_mtok_design"]
    md = quote.read_text(encoding="utf-8")
    assert verdict in md and "wide_ep=1" in md and "disagg=1" in md  # the link reopens both
    best = cli[0]
    section = _section(md)
    assert f"Cheapest EP pools: {best['label']}" in section
    assert f"| Cost per month | {fmt_money(best['cost_per_month'], 'USD')} |" in section
    assert f"| TTFT p90, design load | {fmt_ms(best['ttft_ms'])} |" in section
    assert f"| TPOT p90, design load | {fmt_ms(best['tpot_ms'])} |" in section
    assert f"| GPUs paid | {best['paid_gpus']} |" in section
    # the page's quote (`app.cache.quotes`) makes its section with the same function
    inp = s.inputs(CAT)
    lib = compare_pools(ep_search(inp), ep_pools_search(inp))
    p = plan(inp)
    assert _section(quote_markdown(p, sections=(pools_section(lib),))) == section


# -- one layout a person chose: capacity plan --prefill-pool XxEPn --decode-pool YxEPm ----------

def test_pool_flags_parse() -> None:
    assert parse_ep_pool("1xEP32", "--prefill-pool") == (1, 32)
    assert parse_ep_pool(" 0 x ep 72 ", "--decode-pool") == (0, 72)
    assert parse_ep_pool("2x4", "--prefill-pool") is None   # a TP pool
    with pytest.raises(InputError, match="DEPLOYMENTSxEPn"):
        parse_ep_pool("1xEPx", "--prefill-pool")
    with pytest.raises(InputError, match="EP 1..1024"):
        parse_ep_pool("1xEP0", "--decode-pool")


def test_one_layout_is_the_searchs_computation() -> None:
    """SGLang's 96-H100 layout (prefill EP32, decode EP72) at 20 req/s: the figures are
    `pools_at` of the layouts the search picks for those sizes; counts of 0 take the
    rate-matched ones, which `size_pools` finds."""
    inp = replace(_inputs(1), gpus=("h100-sxm",), price_overrides=(), workload=Workload(
        rate_per_s=20.0, headroom=0.0, context_tokens=2500, prompt_tokens=2000,
        output_tokens=500))
    r = evaluate_pools(inp, "h100-sxm", prefill=(1, 32), decode=(1, 72))
    g, sh, b = CAT.gpu("h100-sxm"), node_shape("h100-sxm"), basis_of(inp)
    pre = prefill_shape(inp, g, 32, "fp8", "fp8", b, CAT)
    dec = decode_shape(inp, g, 72, "fp8", "fp8", b, CAT)
    assert isinstance(pre, PrefillShape) and isinstance(dec, DecodeShape)
    m = CAT.variant("deepseek-v3").model
    assert r.option == pools_at(inp, g, sh, m, "fp8", "fp8", pre, dec, 20.0, 1, 1)
    assert r.option.ttft_ms == pytest.approx(r.option.prefill_part_ms + r.option.transfer_ms
                                             + r.option.transfer_wait_ms
                                             + r.option.first_step_ms)
    found = size_pools(inp, g, sh, m, "fp8", "fp8", pre, dec, 20.0, 1024)
    assert isinstance(found, EpPoolsOption)
    assert r.matched == (found.prefill_replicas, found.decode_replicas) == (1, 1)
    auto = evaluate_pools(inp, "h100-sxm", prefill=(0, 32), decode=(0, 72))
    assert auto.option == found
    # past the decode pool's slots everything downstream is infinite, said, not raised
    over = evaluate_pools(replace(inp, workload=replace(inp.workload, rate_per_s=2e4)),
                          "h100-sxm", prefill=(1, 32), decode=(1, 72))
    assert math.isinf(over.option.tpot_ms) and math.isinf(over.option.ttft_ms)
    with pytest.raises(InputError, match="not a mixture-of-experts"):
        evaluate_pools(_inputs(2_000, model="llama-3.1-8b"), "h100-sxm", prefill=(1, 8),
                       decode=(1, 8))
    with pytest.raises(InputError, match="EP1000: give an EP size of 1..256"):
        evaluate_pools(inp, "h100-sxm", prefill=(1, 1000), decode=(1, 8))


PLAN = ["plan", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--kv-dtype", "fp8",
        "--prefill-pool", "1xEP32", "--decode-pool", "1xEP72", "--pool-rate", "20",
        "--prompt-tokens", "2000", "--ctx", "2500", "--output-tokens", "500",
        "--slo-ttft-ms", "2000", "--slo-tpot-ms", "100"]


def test_plan_text_json_and_csv_agree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(PLAN) == 0
    text = capsys.readouterr().out
    assert main([*PLAN, "--format", "csv"]) == 0
    csv = capsys.readouterr().out.strip().splitlines()
    assert (data["prefill_ep"], data["decode_ep"]) == (32, 72)
    assert data["matched"] == {"prefill_replicas": 1, "decode_replicas": 1}
    assert text.startswith(f"{data['label']}: {data['gpus']} GPUs, deepseek-v3")
    assert "TTFT p90 in its parts" in text and f"TPOT p90 {data['tpot_ms']:,.1f} ms" in text
    cost = f"{data['currency']} {data['cost_per_month']:,.0f}/month"
    assert f"cost: {data['paid_gpus']} GPUs, {cost}" in text
    assert csv[0] == "part,ms" and csv[-1].startswith("TTFT,")
    assert float(csv[-1].split(",")[1]) == pytest.approx(data["ttft_ms"], abs=0.01)
    assert sum(float(line.rsplit(",", 1)[1]) for line in csv[1:-1]) == pytest.approx(
        data["ttft_ms"], abs=0.05)
    # one GPU type, both pools EP or both TP
    for extra, msg in ((["--decode-gpu", "h200-sxm"], "one GPU type"),):
        assert main([*PLAN, *extra]) == 2
        assert msg in capsys.readouterr().err
    mixed = [a if a != "1xEP72" else "2x8" for a in PLAN]
    assert main(mixed) == 2
    assert "give both pools as DEPLOYMENTSxEPn" in capsys.readouterr().err


def test_a_decode_deployment_larger_than_half_the_limit_is_searched() -> None:
    """Within 24 GPUs of 8-GPU nodes: a decode deployment of 16 with a prefill one of 8 fits
    (16 + 8), so EP16 decode pools are searched (a rule of EP x 2 within the limit left them
    out)."""
    inp = _inputs(20_000, max_gpus=24)
    s = ep_pools_search(inp)
    assert any(o.decode_ep == 16 and o.prefill_ep == 8 for o in s.options)
    assert all(o.paid_gpus <= 24 for o in s.options)
