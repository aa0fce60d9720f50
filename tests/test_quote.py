"""The quote: Markdown and PDF, English and Chinese, and the fallback without a CJK font."""

from __future__ import annotations

import datetime as dt
import io
import re

import pypdfium2 as pdfium
import pytest

from capacity.model.workload import Workload
from capacity.plan.detail import simulate_option
from capacity.plan.options import Plan, PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.document import find_cjk_font
from capacity.report.quote import quote_markdown, quote_pdf
from tests.test_chinese_pages import ascii_punctuation

TODAY = dt.date(2026, 11, 30)


@pytest.fixture(scope="module")
def headline() -> Plan:
    wl = Workload(daily_active_users=500, context_tokens=8192, output_tokens=256)
    return plan(PlanInputs(model="qwen3.5-9b-awq", workload=wl,
                           slo=Slo(ttft_ms=2000, tpot_ms=50)))


def test_markdown_has_every_section(headline: Plan) -> None:
    best = headline.best
    assert best is not None
    md = quote_markdown(headline, today=TODAY)
    for needle in ("# Capacity quote: Qwen3.5-9B", "Customer inputs",
                   "| Daily active users | 500 |", "Recommendation", best.label,
                   "Runner-up", "Capacity table",
                   "Cost per month", "Cost per M output tokens", "Assumptions",
                   "per GPU-hour", "as of 2026-11", "Headroom: 20%",
                   "confirmed by measurement", "2026-11-30"):
        assert needle in md, needle


def test_markdown_in_chinese(headline: Plan) -> None:
    md = quote_markdown(headline, lang="zh", today=TODAY)
    assert md.startswith("# 容量报价")
    assert "推荐配置" in md and "备选配置" in md and "不是承诺" in md
    # Chinese punctuation throughout ('| 最紧约束 | 首字延迟 (85%) |' until 2026-12-08)
    cells = [c for line in md.splitlines() for c in line.split("|")]
    assert [c for c in cells if ascii_punctuation(c)] == []
    assert re.search(r"\| 最紧约束 \| \S+（\d+%） \|", md)


def test_simulation_is_reported(headline: Plan) -> None:
    assert headline.best is not None
    sim = simulate_option(headline.inputs, headline.best, n_requests=300)
    md = quote_markdown(headline, simulation=sim, today=TODAY)
    assert "discrete-event model" in md and "meet both SLOs" in md


def _first_page_ink(pdf: bytes) -> float:
    doc = pdfium.PdfDocument(io.BytesIO(pdf))
    try:
        image = doc[0].render(scale=0.5).to_pil().convert("L")
        hist = image.histogram()
        return 1.0 - hist[255] / sum(hist)  # share of pixels that are not white
    finally:
        doc.close()


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_english_pdf_opens_and_is_not_blank(headline: Plan) -> None:
    pdf = quote_pdf(headline, today=TODAY)
    assert pdf.startswith(b"%PDF")
    assert _first_page_ink(pdf) > 0.02


def test_chinese_pdf_without_a_cjk_font_falls_back_to_english(headline: Plan) -> None:
    pdf = quote_pdf(headline, lang="zh", today=TODAY, cjk_font=None)
    assert _first_page_ink(pdf) > 0.02
    text = pdfium.PdfDocument(io.BytesIO(pdf))[0].get_textpage().get_text_range()
    assert "no Chinese font" in text


@pytest.mark.slow
@pytest.mark.skipif(find_cjk_font() is None, reason="no CJK font (apt install fonts-noto-cjk)")
def test_chinese_pdf_with_a_cjk_font(headline: Plan) -> None:
    pdf = quote_pdf(headline, lang="zh", today=TODAY)
    assert _first_page_ink(pdf) > 0.02
    text = pdfium.PdfDocument(io.BytesIO(pdf))[0].get_textpage().get_text_range()
    assert "容量报价" in text


def test_the_rank_column_of_the_pdf_is_narrow(headline: Plan) -> None:
    """Issue 14 item 13: the other options' '#' column took a seventh of the page."""
    assert len(headline.options) > 2  # the table of other options is there
    doc = pdfium.PdfDocument(io.BytesIO(quote_pdf(headline, today=TODAY)))
    try:
        for page in doc:
            text = page.get_textpage()
            found = text.search("#", match_case=True)
            hit = found.get_next()
            while hit is not None:
                start, _ = hit
                box = text.get_charbox(start)
                line = text.get_text_bounded(left=box[0], bottom=box[1] - 1,
                                             right=page.get_width(), top=box[3] + 1)
                if line.lstrip().startswith("#") and "Configuration" in line:
                    on_line = text.search("Configuration", match_case=True)
                    config = on_line.get_next()
                    while config is not None and abs(text.get_charbox(config[0])[1] - box[1]) > 2:
                        config = on_line.get_next()
                    assert config is not None
                    gap = text.get_charbox(config[0])[0] - box[0]
                    assert 0 < gap < 0.07 * page.get_width(), gap
                    return
                hit = found.get_next()
        raise AssertionError("no '#' header found")
    finally:
        doc.close()


def test_variants_are_joined_in_each_languages_punctuation() -> None:
    """The twins folded into an option, listed: '; ' in English, the full-width '；' in
    Chinese (no ASCII punctuation in a Chinese sentence)."""
    from types import SimpleNamespace

    from capacity.report.quote import variants_text

    o = SimpleNamespace(variants=(("int8", "fp16"), ("fp8", "fp8")))
    en, zh = variants_text(o, "en"), variants_text(o, "zh")  # type: ignore[arg-type]
    assert en.count("; ") == 1 and ";" not in zh and zh.count("；") == 1


def test_one_node_of_one_gpu_is_singular() -> None:
    """The deployment's node line counts its GPUs in the language's plural: 'one node of 1
    GPU', 'one node of 2 GPUs', '2 nodes of 2 + 1 GPUs'."""
    from types import SimpleNamespace

    from capacity.catalog.loader import default_catalog
    from capacity.report.quote import nodes_text

    gpu = default_catalog().gpus["rtx-4090"]
    texts = [nodes_text(SimpleNamespace(nodes=n, gpu=gpu), "en")  # type: ignore[arg-type]
             for n in ((1,), (2,), (2, 1))]
    assert [x.split(" (")[0] for x in texts] == [
        "one node of 1 GPU", "one node of 2 GPUs", "2 nodes of 2 + 1 GPUs"]
