"""A GPU family with no feasible configuration: its "closest" configuration is the one that
fails the fewest checks and misses them by the least (`Option.miss_ratio`: the largest of its
failed checks' figures over their limits), not the cheapest one. Ruled out on throughput alone
(the load saturates every count of it), that is the one that comes nearest to carrying the load
(the highest SLO-feasible capacity over the design rate); on TTFT and throughput, the one
whose prefill and share of the load together come nearest. The CLI (text, JSON), the quote
(en, zh) and the Planner page name the same one (they all read `Plan.rejected`)."""

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
    # what ranks them: the design load over the load carried within the SLOs
    assert r.closest.miss_ratio == pytest.approx(1 / _share(r.closest))


def test_equal_shares_of_the_load_go_to_the_cheaper_option() -> None:
    inp = _inputs()
    lean = search.plan(inp)
    (r,) = lean.rejected
    assert r.closest is not None
    dearer = search._amended(r.closest, cost_per_month=r.closest.cost_per_month * 2)
    cheaper = search._amended(r.closest, cost_per_month=r.closest.cost_per_month / 2, n_gpus=15)
    worse = search._amended(r.closest, capacity_rate_per_s=r.closest.capacity_rate_per_s / 2,
                            cost_per_month=1.0)
    worse = search._amended(worse, miss_ratio=r.closest.miss_ratio * 2)
    (pick,) = search._rejections([dearer, worse, cheaper], [], ["b200"], inp.slo)
    assert pick.closest is cheaper
    # fewer failed checks come first, whatever their figures: an SLO's before throughput
    ttft = search._amended(worse, failures=(Reason.TTFT,), binding=Reason.TTFT,
                           miss_ratio=100.0)
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


# gpt-oss-120b NVFP4 weights, FP8 KV, at 131K context for 4,000 daily users (4 req/s at the
# design load) on at most 4 x B200, TTFT SLO 250 ms: every configuration fails on TTFT (its
# prefill alone is over 250 ms) and on throughput
SLOW_ARGV = ["size", "--model", "gpt-oss-120b-nvfp4", "--kv-dtypes", "fp8",
             "--ctx", "131072", "--dau", "4000", "--gpus", "b200", "--max-gpus", "4",
             "--slo-ttft-ms", "250"]
SLOW_NEAREST = "4 x B200 (TP=4), nvfp4, fp8 KV"


def _slow_inputs(ttft_ms: float = 250.0) -> PlanInputs:
    wl = Workload(daily_active_users=4000, context_tokens=131072, output_tokens=256)
    return PlanInputs(model="gpt-oss-120b-nvfp4", workload=wl,
                      slo=Slo(ttft_ms=ttft_ms, tpot_ms=50), gpus=("b200",), kv_dtypes=("fp8",),
                      max_gpus=4)


def test_a_family_over_ttft_and_throughput_names_the_option_nearest_both() -> None:
    """By hand, each configuration's TTFT miss (its prefill over 250 ms) and throughput miss
    (the 4 req/s design load over what it carries within the other SLOs, TTFT left out, read
    off a plan whose TTFT SLO is 10^9 ms), and the larger of the two:

    | configuration | prefill | x SLO | carries | x load | miss |
    |---|---|---|---|---|---|
    | 1 x B200 | 1,435 ms | 5.74 | 0.42 req/s | 9.45 | 9.45 |
    | 2 x B200 (2 replicas) | 1,435 ms | 5.74 | 0.85 | 4.72 | 5.74 |
    | 2 x B200 (TP=2) | 780 ms | 3.12 | 0.87 | 4.58 | 4.58 |
    | 3 x B200 (3 replicas) | 1,435 ms | 5.74 | 1.27 | 3.15 | 5.74 |
    | 4 x B200 (4 replicas) | 1,435 ms | 5.74 | 1.69 | 2.36 | 5.74 |
    | 4 x B200 (2 replicas x TP=2) | 780 ms | 3.12 | 1.75 | 2.29 | 3.12 |
    | 4 x B200 (TP=4) | 452 ms | 1.81 | 1.65 | 2.43 | 2.43 |

    The closest is 4 x B200 at TP=4 (its prefill 1.8x the SLO, 41 % of the load); before
    2026-12-08 it was the cheapest, 1 x B200, whose prefill is 5.7x the SLO and which carries
    11 % of the load."""
    inp = _slow_inputs()
    every = search.plan(inp, keep_all=True).all_options
    assert len(every) == 7
    assert all(o.failures == (Reason.TTFT, Reason.THROUGHPUT) for o in every)
    relaxed = {o.label: o.capacity_rate_per_s
               for o in search.plan(_slow_inputs(1e9), keep_all=True).all_options}
    by_hand = {o.label: max(o.prefill_ms / 250.0, o.design_rate_per_s / relaxed[o.label])
               for o in every}
    for o in every:
        assert o.miss_ratio == pytest.approx(by_hand[o.label], rel=1e-9), o.label
    assert min(by_hand, key=by_hand.__getitem__) == SLOW_NEAREST
    assert by_hand[SLOW_NEAREST] == pytest.approx(2.43, abs=0.005)
    (r,) = search.plan(inp).rejected
    assert r.closest is not None and r.closest.label == SLOW_NEAREST
    assert r.closest.miss_ratio == pytest.approx(by_hand[SLOW_NEAREST], rel=1e-9)
    assert r.detail == (f"closest: {SLOW_NEAREST} fails on TTFT over the SLO, throughput (the "
                        "load saturates the GPU); prefill alone takes 0.45 s (SLO 0.25 s)")


def test_every_surface_names_the_option_nearest_ttft_and_throughput(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SLOW_ARGV) == 1
    text = capsys.readouterr().out
    assert (f"- B200: TTFT over the SLO, throughput (the load saturates the GPU); closest: "
            f"{SLOW_NEAREST} fails on") in text
    assert main([*SLOW_ARGV, "--format", "json"]) == 1
    (rej,) = json.loads(capsys.readouterr().out)["rejected"]
    assert rej["reasons"] == ["ttft", "throughput"]
    assert rej["detail"].startswith(f"closest: {SLOW_NEAREST} fails on TTFT")
    for lang, label, prefill in (
            ("en", SLOW_NEAREST, "prefill alone takes 0.45 s (SLO 0.25 s)"),
            ("zh", "4 x B200（TP=4），nvfp4，fp8 KV", "仅预填充就需 0.45 s（SLO 0.25 s）")):
        target = tmp_path / f"quote-{lang}.md"
        main([*SLOW_ARGV, "--quote", str(target), "--lang", lang])
        row = next(x for x in target.read_text(encoding="utf-8").splitlines()
                   if x.startswith("| B200 |"))
        assert label in row and prefill in row, row
        assert "| 1 x B200" not in row and "：1 x B200" not in row


@pytest.mark.slow
def test_the_planner_page_names_the_option_nearest_ttft_and_throughput() -> None:
    at = AppTest.from_file(APP, default_timeout=180).switch_page("pages/planner.py")
    for k, v in {"model": "gpt-oss-120b-nvfp4", "ctx": "131072", "dau": "4000", "gpus": "b200",
                 "ttft": "250", "kv": "fp8", "maxg": "4"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    rejected = next(m.value for m in at.markdown if "B200" in m.value and "closest" in m.value)
    assert (f"closest: {SLOW_NEAREST} fails on TTFT over the SLO, throughput (the load "
            "saturates the GPU); prefill alone takes 0.45 s (SLO 0.25 s)") in rejected


def test_the_time_outside_the_gpu_reads_alike_in_both_languages() -> None:
    """A closest configuration whose prefill (452 ms) is under the TTFT SLO (460 ms) but not
    with a request's 25 ms outside the GPU: both languages say so (the Chinese text said the
    request waited behind other prompts at the peak)."""
    from capacity.report.quote import rejection_text

    (r,) = search.plan(_slow_inputs()).rejected
    assert r.closest is not None
    slo = Slo(ttft_ms=460, tpot_ms=50)
    (pick,) = search._rejections([r.closest], [], ["b200"], slo, latency_ms=25.0)
    assert pick.detail.endswith("; prefill takes 0.45 s and the request 25 ms outside the GPU "
                                "(SLO 0.46 s)")
    assert rejection_text(pick, slo, "en") == pick.detail
    assert rejection_text(pick, slo, "zh").endswith(
        "；预填充需 0.45 s，加上请求在 GPU 之外的 25 ms（SLO 0.46 s）")
