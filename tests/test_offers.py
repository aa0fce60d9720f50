"""Prices as data: offers per GPU (kind, provider, date, per GPU or per node), entered prices,
and where they reach: the plan, capacity size, the Planner page's URL and the quote."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.offers import Offer, catalog_offer, choose, load_offers, parse_offers
from capacity.cli.main import main
from capacity.errors import CatalogError
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.pricing import chosen_gpu_price
from capacity.plan.search import plan
from capacity.report.planner_url import planner_decode, planner_state, planner_url
from capacity.report.quote import quote_markdown
from capacity.report.urlstate import DEFAULT_STATE, decode, decode_pin, encode, encode_pin

PRICES = """
[[offer]]
gpu = "rtx-4090"
kind = "on-demand"
provider = "Example Rental"
price = 2.6
currency = "CNY"
as_of = "2026-11"
source = "price list 2026-11-01"

[[offer]]
gpu = "rtx-4090"
kind = "reserved-1y"
provider = "Example Rental"
price = 12.0
currency = "CNY"
per = "node"
gpus_per_node = 8
as_of = "2026-11"
source = "contract quote"

[[offer]]
gpu = "h100-sxm"
kind = "spot"
provider = "Example Cloud"
price = 1.1
currency = "USD"
"""


def _inputs(**kw: object) -> PlanInputs:
    wl = Workload(daily_active_users=2000, requests_per_user_per_day=30, peak_share=0.25,
                  peak_hours=2, context_tokens=8192, output_tokens=512)
    return PlanInputs(model="qwen3.5-9b", workload=wl, slo=Slo(ttft_ms=1500, tpot_ms=40),
                      gpus=("rtx-4090", "h100-sxm"), **kw)  # type: ignore[arg-type]


def test_offers_parse_and_choose(catalog: Catalog) -> None:
    offers = parse_offers(PRICES, catalog)
    assert len(offers) == 3
    reserved = choose(offers, "reserved-1y")["rtx-4090"]
    assert reserved.price_per_gpu_hour == pytest.approx(1.5)
    assert "per 8-GPU node-hour" in reserved.description and "contract quote" in reserved.description
    assert choose(offers, "spot") == {"h100-sxm": offers[2]}
    assert catalog_offer(catalog, "rtx-4090").price == catalog.gpus["rtx-4090"].price_per_hour


@pytest.mark.parametrize(("text", "why"), [
    ('[[offer]]\ngpu = "warp"\nprice = 1\ncurrency = "CNY"', "not in the catalog"),
    ('[[offer]]\ngpu = "l4"\nprice = -1\ncurrency = "CNY"', "price must be > 0"),
    ('[[offer]]\ngpu = "l4"\nprice = 1\ncurrency = "EUR"', "CNY or USD"),
    ('[[offer]]\ngpu = "l4"\nprice = 1\ncurrency = "CNY"\nkind = "weekly"', "kind"),
    ('[[offer]]\ngpu = "l4"\nprice = 1\ncurrency = "CNY"\nper = "rack"', "per must be"),
    ("x = 1", r"no \[\[offer\]\]"),
])
def test_bad_offers_are_named(catalog: Catalog, text: str, why: str) -> None:
    with pytest.raises(CatalogError, match=why):
        parse_offers(text, catalog, "mine.toml")


@pytest.mark.slow
def test_offers_and_entered_prices_reach_the_plan(catalog: Catalog) -> None:
    base = plan(_inputs(), catalog)
    spot = plan(_inputs(offers=tuple(choose(parse_offers(PRICES, catalog), "spot").values())),
                catalog)
    h100 = next(o for o in spot.options if o.gpu == "h100-sxm")
    assert h100.price_per_hour == pytest.approx(1.1 * 7.1)
    entered = plan(_inputs(price_overrides=(("rtx-4090", 4.0),), cny_per_usd=7.2), catalog)
    r = next(o for o in entered.options if o.gpu == "rtx-4090")
    assert r.price_per_hour == 4.0
    assert r.cost_per_month == pytest.approx(4.0 * r.n_gpus * 730)
    b = next(o for o in base.options if o.gpu == "rtx-4090")
    assert b.price_per_hour == 2.0
    only_h100 = plan(replace(spot.inputs, gpus=("h100-sxm",)), catalog)
    md = quote_markdown(only_h100, catalog=catalog)
    assert "CNY 7.81 per GPU-hour, from the offer: Example Cloud, spot, USD 1.1 per GPU-hour" in md
    md = quote_markdown(entered, catalog=catalog)
    assert "CNY 4.00 per GPU-hour (entered for this quote)" in md
    assert "Exchange rate: 7.2 CNY per USD" in md


def test_a_chosen_gpu_brings_its_offer_or_its_catalog_price(catalog: Catalog) -> None:
    h100 = catalog.gpus["h100-sxm"]
    # the bundled on-demand offer (CoreWeave, 2.23 USD per GPU-hour), in CNY at 7.1
    assert chosen_gpu_price(catalog, h100, currency="CNY", cny_per_usd=7.1,
                            offer_kind="on-demand") == (pytest.approx(2.23 * 7.1), "on-demand")
    # no offer kind: the catalog's 2.7 USD; a kind the GPU has no offer of: the same, kind ''
    assert chosen_gpu_price(catalog, h100, currency="USD", cny_per_usd=7.1) == (2.7, "")
    b200 = catalog.gpus["b200"]
    assert chosen_gpu_price(catalog, b200, currency="CNY", cny_per_usd=7.1,
                            offer_kind="reserved-1y") == (pytest.approx(5.5 * 7.1), "")


def test_an_explorer_link_prices_the_gpu_it_names(catalog: Catalog) -> None:
    # a hand-typed link that names a GPU and no price: that GPU's price, as choosing it in the
    # sidebar gives (a B200 at 5.5 USD x 7.1 = 39.05 CNY), never the default RTX 4090's 2.0
    state, notices = decode({"gpu": "b200"}, catalog)
    assert notices == [] and (state.price, state.offer) == (pytest.approx(39.05), "")
    assert decode({"gpu": "b200", "price": "3"}, catalog)[0].price == 3.0  # a price given wins
    # an offer kind brings the GPU's offer of it
    state, _ = decode({"gpu": "h100-sxm", "offer": "on-demand"}, catalog)
    assert (state.price, state.offer) == (pytest.approx(2.23 * 7.1), "on-demand")
    # another currency alone converts the price and the cost SLO, as the sidebar's switch does
    state, _ = decode({"currency": "USD"}, catalog)
    assert (state.price, state.slo_cost) == (round(2.0 / 7.1, 4), round(1.0 / 7.1, 4))
    assert decode({"currency": "USD", "slo_cost": "0.5"}, catalog)[0].slo_cost == 0.5
    # an unknown GPU falls back to the default with its own price
    state, notices = decode({"gpu": "no-such-gpu"}, catalog)
    assert (state.gpu, state.price) == (DEFAULT_STATE.gpu, DEFAULT_STATE.price) and notices
    # links the Explorer writes carry the money inputs with the GPU, so they read back exactly,
    # an entered price equal to the default one included
    for s in (replace(DEFAULT_STATE, gpu="l4", price=2.0),
              replace(DEFAULT_STATE, gpu="h100-sxm", currency="USD", price=2.0, slo_cost=1.0)):
        assert "price" in encode(s) and decode(encode(s), catalog) == (s, [])
    # and so do pins: an L4 at an entered 5.0 pinned beside a B200 at 5.0
    pinned = replace(DEFAULT_STATE, gpu="l4", price=5.0)
    current = replace(DEFAULT_STATE, gpu="b200", price=5.0)
    raw = encode_pin(pinned, current)
    assert raw == "gpu:l4,price:5" and decode_pin(raw, current, catalog) == (pinned, [])


def test_prices_travel_in_the_planner_link(catalog: Catalog) -> None:
    inp = _inputs(price_overrides=(("rtx-4090", 4.0),), cny_per_usd=7.2,
                  offers=(Offer(gpu="h100-sxm", price=1.0, currency="USD"),))
    url = planner_url(planner_state(inp, catalog))
    q = dict(parse_qsl(urlsplit(url).query))
    assert q["fx"] == "7.2" and q["prices"] == "h100-sxm:7.2,rtx-4090:4"
    state, notices = planner_decode(q, catalog)
    assert notices == []
    again = state.inputs(catalog)
    assert plan(again, catalog).options == plan(inp, catalog).options
    bad, notices = planner_decode({"prices": "rtx-4090:free"}, catalog)
    assert bad.prices == "" and "'prices=rtx-4090:free' ignored" in notices[0]


def test_size_cli_takes_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "prices.toml"
    f.write_text(PRICES, encoding="utf-8")
    args = ["size", "--dau", "2000", "--requests-per-user", "30", "--peak-share", "0.25",
            "--ctx", "8192", "--output-tokens", "512", "--slo-ttft-ms", "1500",
            "--slo-tpot-ms", "40", "--model", "qwen3.5-9b", "--gpus", "rtx-4090",
            "--format", "json"]
    import json

    assert main([*args, "--prices", str(f), "--offer-kind", "reserved-1y"]) == 0
    best = json.loads(capsys.readouterr().out)["options"][0]
    assert best["cost_per_month"] == pytest.approx(1.5 * best["gpus"] * 730)
    assert main([*args, "--price", "rtx-4090=3"]) == 0
    best = json.loads(capsys.readouterr().out)["options"][0]
    assert best["cost_per_month"] == pytest.approx(3 * best["gpus"] * 730)
    assert main([*args, "--prices", str(tmp_path / "none.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert load_offers(f, default_catalog())[0].provider == "Example Rental"


@pytest.mark.slow
def test_planner_page_prices_from_a_link(catalog: Catalog) -> None:
    from streamlit.testing.v1 import AppTest

    from capacity.report.quote import headline_rows

    inp = _inputs(price_overrides=(("rtx-4090", 4.0),), cny_per_usd=7.2)
    link = planner_url(planner_state(inp, catalog))
    app = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
    at = AppTest.from_file(app, default_timeout=120).switch_page("pages/planner.py")
    for k, v in parse_qsl(urlsplit(link).query):
        at.query_params[k] = v
    at.run()
    assert not at.exception
    p = plan(inp, catalog)
    assert p.best is not None
    assert [(m.label, str(m.value)) for m in at.metric][:7] == headline_rows(p, p.best, "en")
    assert at.number_input(key="planner_fx").value == 7.2
    assert at.query_params["prices"] == "rtx-4090:4"


# ---- the bundled published offers (data/offers.toml) ----------------------------------------

def test_the_bundled_offers_parse_with_a_source_and_a_date(catalog: Catalog) -> None:
    from capacity.catalog.offers import OFFER_KINDS, bundled_offers, offers_path

    offers = bundled_offers(catalog)
    assert len(offers) >= 20
    header = offers_path().read_text(encoding="utf-8")
    keys = [(o.gpu, o.kind, o.provider) for o in offers]
    assert len(keys) == len(set(keys))  # one row per (GPU, kind, provider)
    for o in offers:
        assert o.kind in OFFER_KINDS and o.provider
        assert o.source.startswith("https://") and o.source in header, o
        assert o.as_of[:4] == "2026", o
    assert {o.kind for o in offers} == set(OFFER_KINDS)


def _one_option(kind: str, catalog: Catalog, gpu: str = "rtx-4090") -> tuple[PlanInputs, float]:
    from capacity.catalog.offers import bundled_offers

    inp = replace(_inputs(), gpus=(gpu,), kv_dtypes=("fp16",),
                  offers=tuple(choose(bundled_offers(catalog), kind).values()), offer_kind=kind)
    o = choose(bundled_offers(catalog), kind)[gpu]
    return inp, o.price_per_gpu_hour


def test_spot_changes_the_cost_per_mtok_by_the_price_ratio(catalog: Catalog) -> None:
    on_inp, on_price = _one_option("on-demand", catalog)
    spot_inp, spot_price = _one_option("spot", catalog)
    on, spot = plan(on_inp, catalog), plan(spot_inp, catalog)
    assert on.best is not None and spot.best is not None
    assert spot_price < on_price
    a = {(o.n_gpus, o.tp, o.weights, o.kv_dtype): o for o in on.options}
    b = {(o.n_gpus, o.tp, o.weights, o.kv_dtype): o for o in spot.options}
    shared = set(a) & set(b)
    assert shared
    for k in shared:
        assert b[k].cost_per_mtok / a[k].cost_per_mtok == pytest.approx(spot_price / on_price,
                                                                         rel=1e-12)
        assert b[k].cost_per_month / a[k].cost_per_month == pytest.approx(
            spot_price / on_price, rel=1e-12)
    md = quote_markdown(spot, catalog=catalog)
    assert "from the offer: RunPod, spot, USD 0.34 per GPU-hour, as of 2026-03" in md
    assert "https://deploybase.ai/articles/runpod-gpu-pricing" in md


def test_a_gpu_without_a_spot_offer_says_so(catalog: Catalog,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from capacity.catalog.offers import bundled_offers, without_offer

    spot = choose(bundled_offers(catalog), "spot")
    assert without_offer(spot, ("a100-40gb-sxm", "rtx-4090")) == ("a100-40gb-sxm",)
    inp = replace(_inputs(), gpus=("a100-40gb-sxm",), offers=tuple(spot.values()),
                  offer_kind="spot")
    p = plan(inp, catalog)
    assert p.best is not None
    assert p.best.price_per_hour == pytest.approx(1.3 * 7.1)  # the catalog's USD 1.3
    for lang, text in (("en", "no spot offer for this GPU, so the catalog's price"),
                       ("zh", "该 GPU 没有竞价（可中断）报价")):
        assert text in quote_markdown(p, catalog=catalog, lang=lang)
    args = ["size", "--dau", "2000", "--requests-per-user", "30", "--peak-share", "0.25",
            "--ctx", "8192", "--output-tokens", "512", "--slo-ttft-ms", "1500",
            "--slo-tpot-ms", "40", "--model", "qwen3.5-9b", "--gpus", "a100-40gb-sxm,rtx-4090",
            "--offer-kind", "spot", "--format", "json"]
    import json

    assert main(args) == 0
    out = capsys.readouterr()
    assert "note: no spot offer for A100 40GB SXM" in out.err
    data = json.loads(out.out)
    assert data["offer_kind"] == "spot" and set(data["offers"]) == {"rtx-4090"}
    r = next(o for o in data["options"] if o["gpu"] == "rtx-4090")
    assert r["cost_per_month"] == pytest.approx(0.34 * 7.1 * r["gpus"] * 730)


def test_the_offer_kind_travels_in_the_planner_link(catalog: Catalog) -> None:
    inp, _ = _one_option("reserved-1y", catalog, gpu="h100-sxm")
    state = planner_state(inp, catalog)
    assert state.offer == "reserved-1y" and state.prices == ""
    q = dict(parse_qsl(urlsplit(planner_url(state)).query))
    assert q["offer"] == "reserved-1y"
    back, notices = planner_decode(q, catalog)
    assert notices == [] and back == state
    again = back.inputs(catalog)
    assert again.offer_kind == "reserved-1y" and set(again.offers) == set(inp.offers)
    assert plan(again, catalog).options == plan(inp, catalog).options
    bad, notices = planner_decode({"offer": "weekly"}, catalog)
    assert bad.offer == "" and "'offer=weekly' ignored" in notices[0]


@pytest.mark.slow
def test_planner_page_prices_with_spot_offers(catalog: Catalog) -> None:
    from streamlit.testing.v1 import AppTest

    from capacity.report.quote import headline_rows

    inp = replace(_inputs(), gpus=("rtx-4090", "a100-40gb-sxm"))
    state = replace(planner_state(inp, catalog), offer="spot")
    app = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
    at = AppTest.from_file(app, default_timeout=120).switch_page("pages/planner.py")
    for k, v in parse_qsl(urlsplit(planner_url(state)).query):
        at.query_params[k] = v
    at.run()
    assert not at.exception
    assert at.selectbox(key="planner_offer").value == "spot"
    assert any("No spot offer for A100 40GB SXM" in i.value for i in at.info)
    p = plan(state.inputs(catalog), catalog)
    assert p.best is not None and p.inputs.offer_kind == "spot"
    assert [(m.label, str(m.value)) for m in at.metric][:7] == headline_rows(p, p.best, "en")
    assert at.query_params["offer"] == "spot"
