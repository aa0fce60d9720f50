"""A GPU family ruled out on throughput alone (the load saturates every count of it): its
"closest" configuration is the one that comes nearest to carrying the load (the highest
SLO-feasible capacity over the design rate), not the cheapest one, and the CLI (text, JSON),
the quote and the Planner page name the same one (they all read `Plan.rejected`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from capacity.cli.main import main
from capacity.model.workload import Workload
from capacity.plan import search
from capacity.plan.options import PlanInputs, Reason, Slo

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
# gpt-oss-120b at 131K context for 20,000 daily users: every count of B200 saturates
ARGV = ["size", "--model", "gpt-oss-120b", "--ctx", "131072", "--dau", "20000",
        "--gpus", "b200"]
NEAREST = "16 x B200 (4 replicas x TP=4), nvfp4, fp8 KV"


def _inputs() -> PlanInputs:
    wl = Workload(daily_active_users=20000, context_tokens=131072, output_tokens=256)
    return PlanInputs(model="gpt-oss-120b", workload=wl, slo=Slo(ttft_ms=2000, tpot_ms=50),
                      gpus=("b200",))


def _share(o: search.Option) -> float:
    return o.capacity_rate_per_s / o.design_rate_per_s


def test_a_family_saturated_everywhere_names_the_option_nearest_the_load() -> None:
    """Before: "closest: 1 x B200, nvfp4, fp16 KV", the cheapest of 480 configurations that
    all fail on throughput (some on memory too), carrying 0.6% of the design load; 16 x B200
    at TP=4 carries 28%."""
    inp = _inputs()
    every = search.plan(inp, keep_all=True).all_options
    assert every and all(Reason.THROUGHPUT in o.failures for o in every)
    alone = [o for o in every if o.failures == (Reason.THROUGHPUT,)]
    (r,) = search.plan(inp).rejected
    assert r.closest is not None and r.closest.label == NEAREST
    assert r.detail.startswith(f"closest: {NEAREST} fails on throughput")
    assert _share(r.closest) == pytest.approx(max(_share(o) for o in alone))
    assert 0.25 < _share(r.closest) < 0.3   # 5.55 of 20 requests a second


def test_equal_shares_of_the_load_go_to_the_cheaper_option() -> None:
    inp = _inputs()
    lean = search.plan(inp)
    (r,) = lean.rejected
    assert r.closest is not None
    dearer = search._amended(r.closest, cost_per_month=r.closest.cost_per_month * 2)
    cheaper = search._amended(r.closest, cost_per_month=r.closest.cost_per_month / 2, n_gpus=15)
    worse = search._amended(r.closest, capacity_rate_per_s=r.closest.capacity_rate_per_s / 2,
                            cost_per_month=1.0)
    (pick,) = search._rejections([dearer, worse, cheaper], [], ["b200"], inp.slo)
    assert pick.closest is cheaper
    # another failure beside throughput: the chapter's order (fewest failures, then cost)
    # stays, whatever its figures
    ttft = search._amended(worse, failures=(Reason.TTFT,), binding=Reason.TTFT)
    (pick,) = search._rejections([dearer, ttft], [], ["b200"], inp.slo)
    assert pick.closest is ttft


def test_cli_text_json_and_quote_name_the_same_closest_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(ARGV) == 1
    text = capsys.readouterr().out
    assert f"- B200: throughput (the load saturates the GPU); closest: {NEAREST} fails" in text
    assert main([*ARGV, "--format", "json"]) == 1
    (rej,) = json.loads(capsys.readouterr().out)["rejected"]
    assert rej["detail"].startswith(f"closest: {NEAREST} fails on throughput")
    for lang, label in (("en", NEAREST), ("zh", "16 x B200（4 个副本 x TP=4），nvfp4，fp8 KV")):
        target = tmp_path / f"quote-{lang}.md"
        main([*ARGV, "--quote", str(target), "--lang", lang])
        quote = target.read_text(encoding="utf-8")
        assert f"| B200 | {'吞吐' if lang == 'zh' else 'throughput'} | " in quote
        assert label in quote and "| 1 x B200" not in quote and "：1 x B200" not in quote


@pytest.mark.slow
def test_the_planner_page_names_the_same_closest_option() -> None:
    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    for k, v in {"model": "gpt-oss-120b", "ctx": "131072", "dau": "20000",
                 "gpus": "b200"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    rejected = next(m.value for m in at.markdown if "B200" in m.value and "closest" in m.value)
    assert f"closest: {NEAREST} fails on throughput" in rejected
