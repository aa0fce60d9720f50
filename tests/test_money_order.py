"""Money written one way on every page, in both languages: the currency first ('CNY 0.207',
'CNY 1,460'), as `capacity.report.money.fmt_money` writes it for the quote and the Planner.
Until 2026-12-07 the Explorer wrote its own amounts number-first ('0.207 CNY per M tokens',
'Cost binds: 3.289 CNY ... over the 1 CNY target', '1,460 CNY' in the Compare table). A column
heading that names the currency ('CNY per M tokens') is not an amount and stays as it is."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from app.explorer_view import (
    binding_text,
    detail_text,
    key_metrics,
    key_numbers,
    prefix_panel,
    relief_text,
)
from capacity.catalog.loader import default_catalog
from capacity.model.prefix import prefix_effect
from capacity.model.scenario import make_scenario
from capacity.report.explain import Targets, explain
from capacity.report.i18n import bundled
from capacity.report.urlstate import DEFAULT_STATE

NUMBER_THEN_CURRENCY = re.compile(r"\d\s*(CNY|USD)\b")
CURRENCY_THEN_NUMBER = re.compile(r"\b(CNY|USD) -?\d")
# a placeholder (an amount) followed by the currency, typed in a message
PLACEHOLDER_THEN_CURRENCY = re.compile(r"\{[^{}]*\}\s*(\{(cur|currency)\}|CNY|USD)")
EXCHANGE_RATES = {"quote_fx"}   # '7.2 CNY per USD' is a rate, not an amount


def texts(lang: str) -> list[tuple[str, str]]:
    out = []
    for key, msg in bundled().catalog(lang).messages.items():
        out += [(key, text) for text in ([msg] if isinstance(msg, str) else msg.values())]
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_message_writes_an_amount_before_its_currency(lang: str) -> None:
    """'{cost:.3f} {cur} per M tokens' (b_cost, b_ok_cost, b_load_cost, r_memory_result, r_price,
    d_cost, prefix_caption): the amount comes formatted, its currency first."""
    bad = [(k, m[0]) for k, text in texts(lang) if k not in EXCHANGE_RATES
           for m in [PLACEHOLDER_THEN_CURRENCY.search(text)] if m]
    assert bad == []


def shown(lang: str) -> list[str]:
    """The Explorer's texts that carry money: the binding sentence, the relief buttons, the
    Compare column, the verdict details, the cost metric's help and the prefix panel, for a
    what-if whose cost fails (1 request) and one whose memory fails (500)."""
    cat = default_catalog()
    s = make_scenario(catalog=cat)
    out = []
    for c in (1, 500):
        ex = explain(s, c, Targets(ttft_ms=2000, tpot_ms=50, cost_per_mtok=1.0))
        state = replace(DEFAULT_STATE, slo_cost=1.0, c=c)
        out += [binding_text(ex, state, lang), *key_numbers(ex, state, lang),
                *(relief_text(r, state, cat, lang) for r in ex.reliefs),
                *(detail_text(v, lang) for v in ex.verdicts),
                *(m.help or "" for m in key_metrics(ex, state, 1, lang))]
    near = explain(make_scenario(context_tokens=2048), 10,
                   Targets(ttft_ms=20_000, tpot_ms=500, cost_per_mtok=0.9))
    out.append(binding_text(near, replace(DEFAULT_STATE, slo_cost=0.9), lang))   # b_ok_cost
    state = replace(DEFAULT_STATE, prefix=1024, prompt=2048)
    pe = prefix_effect(make_scenario(context_tokens=8192, prompt_tokens=2048, catalog=cat),
                       prefix_tokens=1024, share=0.5)
    out.append(prefix_panel(pe, state, lang).caption)
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_explorers_texts_write_the_currency_first(lang: str) -> None:
    """'Cost binds: 3.289 CNY per M tokens is over the 1 CNY target', '→ 0.207 CNY', '1,460
    CNY': now 'CNY 3.289', 'CNY 1', 'CNY 0.207', 'CNY 1,460', the same numbers."""
    out = shown(lang)
    assert [x for x in out if NUMBER_THEN_CURRENCY.search(x)] == []
    money = " | ".join(x for x in out if CURRENCY_THEN_NUMBER.search(x))
    for amount in ("CNY 3.289", "CNY 1 ", "CNY 0.207", "CNY 1,460", "CNY 0.61", "CNY 0.351",
                   "CNY 0.9"):
        assert amount in money, (amount, money)


def rendered(lang: str) -> list[str]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "streamlit_app.py"),
                           default_timeout=60)
    for k, v in {"lang": lang, "c": "1", "slo_cost": "1", "slo_ttft_ms": "2000"}.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/explorer.py").run()
    assert not at.exception
    out = [m.value for m in at.markdown] + [c.value for c in at.caption]
    out += [b.label for b in at.button] + [m.help or "" for m in at.metric]
    out += [str(m.value) for m in at.metric]
    for frame in at.dataframe:
        out += [str(v) for v in frame.value.astype(str).to_numpy().ravel()]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_rendered_explorer_writes_the_currency_first(custom: object, lang: str) -> None:
    out = rendered(lang)
    assert [x for x in out if NUMBER_THEN_CURRENCY.search(x)] == []
    assert any(CURRENCY_THEN_NUMBER.search(x) for x in out)
