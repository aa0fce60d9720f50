"""Chinese wording and layout: one unit convention (the symbols ms, s, μs and req/s, as most
messages already write them, never 毫秒 / 秒 / 请求/秒 beside them), full-width parentheses and colons around
Chinese text, no 'TTFT' / 'TPOT' on the Explorer's Chinese relief buttons, and the quote
writing an amount of money one way ('CNY 10.02': the currency first) in both languages."""

from __future__ import annotations

import re

import pytest

from app.explorer_view import relief_text
from app.planner_view import headline_metrics
from capacity.catalog.loader import default_catalog
from capacity.model.scenario import make_scenario
from capacity.model.workload import Workload
from capacity.plan.options import Plan, PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.explain import Targets, explain
from capacity.report.i18n import bundled
from capacity.report.quote_frontier import frontier_blocks
from capacity.report.urlstate import DEFAULT_STATE

ZH = bundled().catalog("zh").messages
CJK = re.compile(r"[\u4e00-\u9fff]")


def zh_texts() -> list[tuple[str, str]]:
    out = []
    for key, msg in ZH.items():
        for text in [msg] if isinstance(msg, str) else msg.values():
            out.append((key, re.sub(r"`[^`]*`", "", text)))  # code is code
    return out


def test_chinese_messages_write_time_units_as_symbols() -> None:
    """'仅预填充就需 2.04 秒' stood beside '1.70 s', '首字延迟（毫秒）' above figures in ms, and
    '{rate} 请求/秒' beside '设计负载（0.5 req/s）'."""
    words = [(k, m[0]) for k, text in zh_texts()
             for m in [re.search(r"毫秒|微秒|\}\s*秒|请求/秒|次/秒", text)] if m]
    assert words == []


def test_chinese_labels_use_full_width_parentheses() -> None:
    """'首字 SLO(ms)', '每卡 KV(GB)': half-width parentheses in Chinese labels."""
    half = [(k, m[0]) for k, text in zh_texts() if CJK.search(text)
            for m in re.finditer(r".?\(([^()]*)\)", text)
            if CJK.search(m[0]) or re.fullmatch(r"ms|s|GB|GiB|%|\{[^}]*\}%?", m[1])]
    assert half == []


def test_the_planners_binding_figure_is_bracketed_in_chinese() -> None:
    wl = Workload(daily_active_users=500, context_tokens=8192, output_tokens=256)
    result = plan(PlanInputs(model="qwen3.5-9b-awq", workload=wl,
                             slo=Slo(ttft_ms=2000, tpot_ms=50)))
    assert result.best is not None
    binding = headline_metrics(result, result.best, "zh")[-1].value
    assert re.fullmatch(r"\S+（\d+%）", binding), binding  # '首字（85%）', not '首字 (85%)'
    assert re.fullmatch(r".+ \(\d+%\)", headline_metrics(result, result.best, "en")[-1].value)


@pytest.mark.parametrize(("ttft_ms", "tpot_ms"), [(200.0, 50.0), (2000.0, 5.0)])
def test_chinese_relief_buttons_say_the_latency_in_chinese(ttft_ms: float,
                                                           tpot_ms: float) -> None:
    cat = default_catalog()
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=cat)
    reliefs = explain(s, 4, Targets(ttft_ms=ttft_ms, tpot_ms=tpot_ms, cost_per_mtok=0)).reliefs
    zh = [relief_text(r, DEFAULT_STATE, cat, "zh") for r in reliefs]
    en = [relief_text(r, DEFAULT_STATE, cat, "en") for r in reliefs]
    assert zh and not [x for x in zh if re.search(r"TTFT|TPOT", x)], zh
    assert any(re.search(r"→ (首字延迟 [\d.]+ s|每 token 延迟 [\d.]+ ms)$", x) for x in zh), zh
    assert any(re.search(r"→ (TTFT [\d.]+ s|TPOT [\d.]+ ms)$", x) for x in en), en


@pytest.fixture(scope="module")
def headline() -> Plan:
    wl = Workload(daily_active_users=500, context_tokens=8192, output_tokens=256)
    return plan(PlanInputs(model="qwen3.5-9b-awq", workload=wl,
                           slo=Slo(ttft_ms=2000, tpot_ms=50)))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_quotes_frontier_writes_money_as_the_rest_of_the_quote(headline: Plan,
                                                                    lang: str) -> None:
    """'CNY 30.38' in the figures, '10.018 CNY' in the buyer's-chart tables."""
    cur = headline.inputs.currency
    cells = [c for b in frontier_blocks(headline, lang=lang) if hasattr(b, "rows")
             for row in b.rows for c in row]
    money = [c for c in cells if cur in c]
    assert money and all(re.fullmatch(rf"{cur} [\d,]+(\.\d\d)?", c) for c in money), money


@pytest.mark.slow
def test_the_explorers_relief_heading_ends_with_a_chinese_colon(custom: object) -> None:
    """'缓解办法（每项单独即可；点击即应用）:' ended with an ASCII colon."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "streamlit_app.py"),
                           default_timeout=60)
    for k, v in {"lang": "zh", "c": "4", "slo_ttft_ms": "100"}.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/explorer.py").run()
    assert not at.exception
    heading = [m.value for m in at.markdown if m.value.startswith("缓解办法")]
    assert heading and all(h.endswith("）：") for h in heading), heading
