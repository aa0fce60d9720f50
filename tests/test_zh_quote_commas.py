"""The quote in Chinese: the buyer's-chart tables write a configuration with the Chinese comma
('RTX 4090，awq，fp8 KV', as the rest of the zh quote), and a mix's fleet table whose
workloads have different percentiles heads its latency columns in Chinese, not 'TTFT' /
'TPOT', and writes each row's percentile in full-width brackets ('1.20 s（p99）'): the comma
and headers stayed English until 2026-12-07, the brackets ('1.20 s (p99)') until 2026-12-08."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from capacity.catalog.loader import default_catalog
from capacity.model.workload import Workload
from capacity.plan.mix import MixWorkload, plan_mix
from capacity.plan.options import Plan, PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.document import render_markdown
from capacity.report.quote import mix_quote_blocks
from capacity.report.quote_frontier import frontier_blocks


@pytest.fixture(scope="module")
def headline() -> Plan:
    wl = Workload(daily_active_users=500, context_tokens=8192, output_tokens=256)
    return plan(PlanInputs(model="qwen3.5-9b-awq", workload=wl,
                           slo=Slo(ttft_ms=2000, tpot_ms=50)))


def test_the_buyers_chart_writes_configurations_with_the_chinese_comma(headline: Plan) -> None:
    zh = render_markdown(frontier_blocks(headline, lang="zh"))
    en = render_markdown(frontier_blocks(headline, lang="en"))
    assert " KV" in zh and "，" in zh
    assert [line for line in zh.splitlines() if " KV" in line and ", " in line] == []
    assert any(" KV" in line and ", " in line for line in en.splitlines())


def test_a_mix_of_percentiles_heads_its_latencies_in_chinese() -> None:
    wl = Workload(daily_active_users=500, context_tokens=4096, output_tokens=256)
    inp = PlanInputs(model="qwen3.5-9b", workload=wl, gpus=("rtx-4090", "h100-sxm"),
                     slo=Slo(ttft_ms=2000, tpot_ms=50, quantile=0.9))
    m = plan_mix([MixWorkload(name="a", inputs=inp),
                  MixWorkload(name="b", inputs=replace(inp, slo=replace(inp.slo,
                                                                         quantile=0.99)))],
                 default_catalog())
    assert m.best is not None
    zh = render_markdown(mix_quote_blocks(m, lang="zh"))
    en = render_markdown(mix_quote_blocks(m, lang="en"))
    assert "| 首字延迟 | 每 token 延迟 |" in zh, zh
    assert "| TTFT | TPOT |" in en
    # each row's percentile in full-width brackets in Chinese ('1.2 s (p99)' until 2026-12-08)
    for q in ("90", "99"):
        assert re.search(rf"\| [\d.]+ m?s（p{q}） \| [\d.]+ m?s（p{q}） \|", zh), zh
        assert re.search(rf"\| [\d.]+ m?s \(p{q}\) \| [\d.]+ m?s \(p{q}\) \|", en), en
    assert " (p9" not in zh
