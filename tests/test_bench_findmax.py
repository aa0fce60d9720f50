"""Issue 12 items 4 and 5: the bench sends a workload (lengths, prefixes, replayed logs,
several prompt lengths) and `--find-max` searches the highest load within the SLO."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pandas as pd
import pytest

from capacity.bench.findmax import (
    FindMaxConfig,
    Probe,
    Search,
    describe,
    judge,
    probe_requests,
)
from capacity.bench.metrics import RequestRecord, TokenSource
from capacity.bench.store import RunStore
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.fit.findmax import find_max_overlay, slo_max_rate
from capacity.model.scenario import make_scenario
from capacity.sim.server import SimConfig, create_app, serve_in_thread, shared_prefix

FM = FindMaxConfig(slo_ttft_ms=100.0, slo_tpot_ms=10.0)


def _search(fm: FindMaxConfig, limit: float, per_probe: int = 10) -> Search:
    """A search against a fake endpoint that meets the SLO up to `limit` exactly."""
    s = Search(fm, requests_for=lambda x: per_probe)
    while (x := s.next_load(0.0)) is not None:
        s.add(Probe(load=x, requests=per_probe, failed=0, ttft_pct_ms=1.0, tpot_pct_ms=1.0,
                    passed=x <= limit, duration_s=1.0))
    return s


def test_search_brackets_then_bisects_to_the_tolerance() -> None:
    s = _search(FM, 13.7)
    r = s.result(1.0)
    assert r.converged and r.stopped == "converged"
    lo, hi = r.bracket
    assert hi is not None and lo <= 13.7 < hi and hi / lo - 1 <= FM.tolerance
    assert r.max_load == lo
    # doubling first: 1, 2, 4, 8, 16 (fails), then bisection inside [8, 16]
    assert [p.load for p in r.probes[:5]] == [1, 2, 4, 8, 16]
    assert all(8 <= p.load <= 16 for p in r.probes[5:])
    assert "13" in describe(r, FM) and "bracket" in describe(r, FM)


def test_search_halves_when_the_first_probe_fails_and_gives_0_when_nothing_passes() -> None:
    r = _search(FM, 0.3).result(1.0)
    assert r.bracket[0] <= 0.3 < (r.bracket[1] or 0) and r.probes[1].load == 0.5
    none = _search(FM, 0.0).result(1.0)
    assert none.max_load == 0.0 and not none.converged
    assert none.stopped.startswith("no load passed")


def test_concurrency_search_probes_whole_numbers() -> None:
    fm = FindMaxConfig(by="concurrency", slo_ttft_ms=100, slo_tpot_ms=10, start=1)
    r = _search(fm, 37).result(1.0)
    assert all(p.load == int(p.load) for p in r.probes)
    assert r.bracket == (37, 38) and r.converged


def test_search_stops_at_its_bounds() -> None:
    by_requests = _search(FindMaxConfig(slo_ttft_ms=1, slo_tpot_ms=1, max_requests=35),
                          1000.0).result(1.0)
    assert len(by_requests.probes) == 3 and "--max-requests" in by_requests.stopped
    s = Search(FindMaxConfig(slo_ttft_ms=1, slo_tpot_ms=1, max_seconds=10),
               requests_for=lambda x: 1)
    s.add(Probe(load=1, requests=1, failed=0, ttft_pct_ms=1, tpot_pct_ms=1, passed=True,
                duration_s=4.0))
    assert s.next_load(5.0) == 2 and s.next_load(7.0) is None and "--max-seconds" in s.stopped


def _rec(ttft: float, tpot: float, ok: bool = True) -> RequestRecord:
    return RequestRecord(
        run_id="r", label="l", concurrency=1, request_rate_rps=1.0, request_index=0,
        response_id=None, start_unix_s=0.0, queue_ms=0.0, ttft_ms=ttft, first_chunk_ms=ttft,
        e2e_ms=ttft + 10 * tpot, tpot_ms=tpot, itl_mean_ms=tpot, itl_max_ms=tpot,
        prompt_chars=10, prompt_tokens=3, output_tokens=11, output_tokens_source=TokenSource.USAGE,
        token_events=11, max_tokens=11, output_length_mismatch=False, finish_reason="length",
        success=ok, error_type=None, error_message=None, http_status=200, endpoint="chat",
        model="m", itl_ms="")


def test_judge_takes_the_percentile_and_counts_failures() -> None:
    fm = FindMaxConfig(slo_ttft_ms=50, slo_tpot_ms=5, pct=90)
    recs = [_rec(float(t), 1.0) for t in range(1, 101)]   # p90 of 1..100 = 90.1
    assert not judge(recs, fm, load=1, duration_s=1).passed
    p = judge(recs, FindMaxConfig(slo_ttft_ms=91, slo_tpot_ms=5, pct=90), load=1, duration_s=1)
    assert p.passed and p.ttft_pct_ms == pytest.approx(90.1)
    assert not judge(recs, FindMaxConfig(slo_ttft_ms=91, slo_tpot_ms=0.5), load=1,
                     duration_s=1).passed
    failing = [*recs[:97], *[_rec(1.0, 1.0, ok=False)] * 3]   # 3% failed > 1%
    assert not judge(failing, FindMaxConfig(slo_ttft_ms=500, slo_tpot_ms=5), load=1,
                     duration_s=1).passed


def test_probe_requests_scale_with_the_rate() -> None:
    assert probe_requests(FM, 1.0, 300) == 30
    assert probe_requests(FM, 12.0, 300) == 120
    assert probe_requests(FM, 100.0, 300) == 300
    assert probe_requests(FindMaxConfig(by="concurrency", slo_ttft_ms=1, slo_tpot_ms=1), 4, 77) == 77
    with pytest.raises(InputError, match="slo-pct"):
        FindMaxConfig(slo_ttft_ms=1, slo_tpot_ms=1, pct=0).validate()


def test_shared_prefix_is_the_leading_system_text() -> None:
    body = {"messages": [{"role": "system", "content": "abc" * 100},
                         {"role": "user", "content": "hi"}]}
    key, chars = shared_prefix(body, chat=True)
    assert chars == 300 and key >= 0
    assert shared_prefix(json.loads(json.dumps(body)), chat=True)[0] == key
    other = {"messages": [{"role": "system", "content": "abd" * 100}]}
    assert shared_prefix(other, chat=True)[0] != key
    assert shared_prefix({"messages": [{"role": "user", "content": "x"}]}, chat=True) == (-1, 0)
    assert shared_prefix({"prompt": "abc"}, chat=False) == (-1, 0)


# -- predicted maximum --------------------------------------------------------------------


@pytest.mark.slow
def test_slo_max_rate_follows_the_targets_and_the_speedup() -> None:
    s = make_scenario()
    kw = {"prompt_tokens": 1000, "output_tokens": 128, "requests": 200}
    base = slo_max_rate(s, slo_ttft_ms=1000, slo_tpot_ms=50, **kw)
    tight = slo_max_rate(s, slo_ttft_ms=400, slo_tpot_ms=50, **kw)
    assert 0 < tight < base
    # the simulated endpoint at speedup 20: 20 x the rate for 20 x tighter targets
    fast = slo_max_rate(s, slo_ttft_ms=50, slo_tpot_ms=2.5, speedup=20, **kw)
    assert fast == pytest.approx(20 * base)
    engine = slo_max_rate(s, slo_ttft_ms=1000, slo_tpot_ms=50, model="engine", **kw)
    assert engine == pytest.approx(base, rel=0.1)   # the event model follows the engine
    assert slo_max_rate(s, slo_ttft_ms=1, slo_tpot_ms=50, **kw) == 0.0


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_find_max_overlay_reads_the_meta_entry() -> None:
    entry = {"by": "rate", "max_load": 19.5, "bracket": [19.5, 20.0], "pct": 90,
             "slo_ttft_ms": 50, "slo_tpot_ms": 2.5, "probes": [{"load": 1, "passed": True}]}
    ov = find_max_overlay(entry, make_scenario(prompt_tokens=1000), prompt_tokens=1000,
                          output_tokens=128, speedup=20)
    assert ov.predicted_rate_per_s is not None and ov.predicted_rate_per_s > 0
    assert ov.ratio == pytest.approx(19.5 / ov.predicted_rate_per_s)
    conc = find_max_overlay({**entry, "by": "concurrency"}, make_scenario(), prompt_tokens=1000,
                            output_tokens=128)
    assert conc.predicted_rate_per_s is None and conc.ratio is None
    with pytest.raises(InputError, match="malformed"):
        find_max_overlay({"by": "rate"}, make_scenario(), prompt_tokens=1, output_tokens=1)


# -- end to end against the simulated endpoint ---------------------------------------------


WORKLOAD = """
[workload.small]
name = "small chat with a system prompt"
prompt = { kind = "lognormal", median_tokens = 60, sigma = 0.5 }
output = { kind = "lognormal", median_tokens = 6, sigma = 0.4 }
arrivals = { kind = "gamma", rate_per_s = 1.0, cv = 2.0 }
prefix_tokens = 200
prefix_share = 0.9
sources = ["a test workload"]
"""


def _bench(url: str, out: Path, *flags: str) -> pd.DataFrame:
    assert main(["bench", "--base-url", url, "--out", str(out), "--workers", "1",
                 "--warmup", "0", *flags]) == 0
    with RunStore(out) as s:
        run = s.list_runs().iloc[0]
        return s.requests(str(run["run_id"]))


@pytest.mark.slow
def test_workload_lengths_and_shared_prefix_reach_the_endpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = create_app(make_scenario(), SimConfig(speedup=200))
    (tmp_path / "w.toml").write_text(WORKLOAD, encoding="utf-8")
    with serve_in_thread(app) as url:
        reqs = _bench(url, tmp_path / "runs", "--workload", str(tmp_path / "w.toml"),
                      "--requests", "40", "--concurrency", "4", "--seed", "3")
        info = httpx.get(url.removesuffix("/v1") + "/sim/info").json()
    # the endpoint says how much of each prompt its cache served (usage.prompt_tokens_details),
    # the client stores it and warns that TTFT at that level is not a cold prefill's
    assert (reqs["prompt_cached_tokens"] == [truth["cached_tokens"] for truth in (
        {r["id"]: r for r in app.state.sim.truth.values()}[i] for i in reqs["response_id"])]).all()
    assert "of the prompt tokens from its prefix cache" in capsys.readouterr().out
    assert len(reqs) == 40 and reqs["success"].all()
    # each request's drawn lengths were sent: the endpoint counts ceil(chars / 4) tokens
    assert (reqs["prompt_tokens"] == reqs["prompt_tokens_target"]).all()
    assert (reqs["output_tokens"] == reqs["output_tokens_target"]).all()
    assert reqs["prompt_tokens_target"].nunique() > 10
    shared = (reqs["prefix_id"] == 0).fillna(False).astype(bool)
    assert 0.7 < shared.mean() < 1.0 and (reqs.loc[shared, "prefix_tokens_target"] == 200).all()
    # the identical system prompt hits the endpoint's prefix cache after its first use
    assert info["prefix_hits"] >= shared.sum() - 4 and info["prefix_misses"] >= 1
    truth = {r["id"]: r for r in app.state.sim.truth.values()}
    hit = [truth[i]["cached_tokens"] for i in reqs.loc[shared, "response_id"]]
    assert sum(1 for c in hit if c == 200) >= len(hit) - 4 and hit[0] == 0
    # DuckDB groups by them
    with RunStore(tmp_path / "runs") as s:
        g = s.query("SELECT prefix_id IS NULL AS own, count(*) AS n FROM requests GROUP BY 1")
    assert g["n"].sum() == 40


@pytest.mark.slow
def test_prompt_tokens_list_and_replay(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    pd.DataFrame({"timestamp": [100.0 + 0.01 * i for i in range(12)],
                  "prompt_tokens": [50 + 10 * i for i in range(12)],
                  "output_tokens": [3 + i % 3 for i in range(12)]}).to_csv(log, index=False)
    with serve_in_thread(create_app(make_scenario(), SimConfig(speedup=200))) as url:
        reqs = _bench(url, tmp_path / "a", "--prompt-tokens", "64,256", "--requests", "6",
                      "--max-tokens", "4")
        replayed = _bench(url, tmp_path / "b", "--replay", str(log), "--concurrency", "20")
    assert sorted(reqs["prompt_tokens_target"]) == [64] * 3 + [256] * 3
    assert (reqs["prompt_tokens"] == reqs["prompt_tokens_target"]).all()
    assert len(replayed) == 12 and replayed["success"].all()
    assert sorted(replayed["prompt_tokens"]) == [50 + 10 * i for i in range(12)]
    assert replayed["request_rate_rps"].iloc[0] == pytest.approx(11 / 0.11)
    span = replayed["start_unix_s"].max() - replayed["start_unix_s"].min()
    assert 0.08 < span < 1.0   # sent on the log's own times (0.11 s), not at once


@pytest.mark.slow
def test_find_max_on_the_simulated_endpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    with serve_in_thread(create_app(make_scenario(), SimConfig(speedup=200))) as url:
        reqs = _bench(url, tmp_path, "--find-max", "--find-max-by", "concurrency",
                      "--slo-ttft-ms", "40", "--slo-tpot-ms", "5", "--requests", "12",
                      "--prompt-chars", "2000", "--max-tokens", "8", "--find-max-start", "2",
                      "--max-seconds", "60", "--max-requests", "48")
    out = capsys.readouterr().out
    assert "highest load within the SLO" in out
    with RunStore(tmp_path) as s:
        run = s.list_runs().iloc[0]
        meta = json.loads((Path(str(run["dir"])) / "meta.json").read_text())
        levels = s.summary(str(run["run_id"]))
    fm = meta["find_max"]
    assert fm["by"] == "concurrency" and fm["max_load"] >= 1 and 2 <= len(fm["probes"]) <= 4
    assert len(levels) == len(fm["probes"]) and len(reqs) == 12 * len(fm["probes"])
    passed = [p["load"] for p in fm["probes"] if p["passed"]]
    assert fm["max_load"] == max(passed, default=0)
    assert fm["bracket"][1] is None or fm["bracket"][1] > fm["max_load"]
    assert math.isfinite(fm["elapsed_s"]) and meta["args"]["specs"] == 0


def test_find_max_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flags, msg in ((["--find-max"], "--slo-ttft-ms"),
                       (["--find-max", "--slo-ttft-ms", "5", "--slo-tpot-ms", "1",
                         "--request-rate", "2"], "drop --request-rate"),
                       (["--workload", "chat", "--prompt-tokens", "5"], "give one of"),
                       (["--find-max", "--slo-ttft-ms", "5", "--slo-tpot-ms", "1", "--shard",
                         "1/2", "--run-id", "x"], "one machine"),
                       (["--workload", "nope"], "unknown workload preset"),
                       (["--replay", "x.csv", "--request-rate", "3"], "drop --request-rate")):
        assert main(["bench", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path),
                     *flags]) == 2
        assert msg in capsys.readouterr().err


def test_old_runs_lack_the_workload_columns(tmp_path: Path) -> None:
    run = tmp_path / "old" / "20260101T000000Z-aaaaaa"
    run.mkdir(parents=True)
    (run / "requests.csv").write_text(
        "run_id,label,concurrency,success,ttft_ms,row_complete\n"
        "20260101T000000Z-aaaaaa,old,1,true,5.0,1\n", encoding="utf-8")
    with RunStore(tmp_path) as s:
        got = s.query("SELECT count(*) AS n, count(prompt_tokens_target) AS t FROM requests")
    assert got["n"].iloc[0] == 1 and got["t"].iloc[0] == 0


def test_a_concurrency_search_is_a_line_on_the_overlay() -> None:
    from capacity.fit.findmax import max_concurrency_within_slo
    from capacity.fit.measured import MeasuredPoint, run_scenario
    from capacity.fit.overlay import build_overlay
    from capacity.report.overlay_charts import find_max_chart, overlay_chart

    entry = {"by": "concurrency", "max_load": 8, "bracket": [8, 9], "pct": 90,
             "slo_ttft_ms": 500, "slo_tpot_ms": 50,
             "probes": [{"load": 8, "ttft_pct_ms": 300.0, "passed": True},
                        {"load": 9, "ttft_pct_ms": 600.0, "passed": False}]}
    assert max_concurrency_within_slo(entry) == 8
    assert max_concurrency_within_slo({**entry, "by": "rate"}) is None
    assert max_concurrency_within_slo({**entry, "max_load": "x"}) is None
    assert max_concurrency_within_slo(None) is None
    s = run_scenario("qwen3.5-9b-awq", "rtx-4090", prompt_tokens=1000, output_tokens=128)
    pts = [MeasuredPoint(concurrency=c, context_tokens=1128, prompt_tokens=1000, output_tokens=128,
                         tpot_ms=20.0 + c, ttft_ms=100.0 * c) for c in (1, 4, 16)]
    ov = build_overlay(pts, s, series="run")
    spec = json.dumps(overlay_chart(ov, "ttft_ms", find_max_concurrency=8).to_dict())
    assert "highest within the SLO (measured)" in spec
    assert "highest within the SLO" not in json.dumps(overlay_chart(ov, "ttft_ms").to_dict())
    labels = {k: k for k in ("load", "ttft", "verdict", "passed", "failed", "measured",
                             "predicted", "target")}
    fov = find_max_overlay(entry, s, prompt_tokens=1000, output_tokens=128)
    chart = json.dumps(find_max_chart(fov, labels).to_dict())
    assert '"measured"' in chart and '"predicted"' not in chart and "500" in chart
