"""`capacity bench --passes`: levels measured in passes, forward then backward, pooled."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest

from capacity.bench.client import is_one_burst, pass_plan, run_bench
from capacity.bench.config import MAX_PASSES, BenchConfig
from capacity.bench.form import MeasureForm
from capacity.bench.metrics import parse_itl, pass_bounds
from capacity.bench.store import RunStore
from capacity.cli.bench import config_from_args
from capacity.cli.main import build_parser
from capacity.errors import InputError

MODELS = {"object": "list", "data": [{"id": "m1", "object": "model"}]}
TOKENS = 4


def test_pass_plan_alternates_and_splits_the_requests() -> None:
    plan = pass_plan((1, 2, 4, 8), 2, 16)
    assert [lv for _, lv, _ in plan] == [1, 2, 4, 8, 8, 4, 2, 1]
    assert [p for p, _, _ in plan] == [0] * 4 + [1] * 4
    assert {(lv, tuple(r)) for p, lv, r in plan if lv == 4} == {
        (4, tuple(range(8))), (4, tuple(range(8, 16)))}
    # three passes of 10 requests: 3, 3, 4, every index once
    assert pass_bounds(10, 3) == [0, 3, 6, 10]
    plan3 = pass_plan((1, 2), 3, 10)
    assert [lv for _, lv, _ in plan3] == [1, 2, 2, 1, 1, 2]
    assert sorted(i for _, lv, r in plan3 if lv == 2 for i in r) == list(range(10))
    assert pass_plan((5,), 1, 7) == [(0, 5, range(7))]


def test_pass_of_matches_the_plan() -> None:
    cfg = BenchConfig(base_url="http://127.0.0.1:1/v1", requests=10, passes=3)
    plan = pass_plan((1,), 3, 10)
    for p, _, share in plan:
        assert {cfg.pass_of(i) for i in share} == {p + 1}
    one = BenchConfig(base_url="http://127.0.0.1:1/v1", requests=10)
    assert {one.pass_of(i) for i in range(40)} == {1}  # a find-max probe may send more


@pytest.mark.parametrize(("kw", "message"), [
    ({"passes": 0}, "passes must be between 1 and"),
    ({"passes": MAX_PASSES + 1}, "passes must be between 1 and"),
    ({"passes": 3, "requests": 2}, "passes 3 needs at least 3 requests"),
    ({"passes": 2, "concurrency": (1, 4, 1)}, "give each concurrency once"),
])
def test_bad_passes_are_refused(kw: dict[str, Any], message: str) -> None:
    cfg = BenchConfig(**({"base_url": "http://127.0.0.1:1/v1", "requests": 8} | kw))
    with pytest.raises(InputError, match=message):
        cfg.validate()


def test_cli_and_measure_form_carry_passes(tmp_path: Path) -> None:
    args = build_parser().parse_args(["bench", "--base-url", "http://127.0.0.1:9/v1",
                                      "--passes", "2", "--out", str(tmp_path)])
    assert config_from_args(args).passes == 2
    form = MeasureForm(base_url="http://127.0.0.1:9/v1", requests=8, passes=2)
    form.validate()
    argv = form.argv("python")
    assert argv[argv.index("--passes") + 1] == "2"
    with pytest.raises(InputError, match="passes must be between 1 and 8"):
        MeasureForm(base_url="http://127.0.0.1:9/v1", requests=8, passes=9).validate()


class DriftingServer:
    """A mock endpoint whose every answer streams TOKENS tokens, each `gap_s(k)` apart, where
    k counts the requests it has answered: a machine that slows down as the run goes on,
    whatever the level."""

    def __init__(self, first_s: float, last_s: float, total: int) -> None:
        self.first_s, self.last_s, self.total = first_s, last_s, total
        self.served = 0
        self.order: list[int] = []

    def gap_s(self, k: int) -> float:
        return self.first_s + (self.last_s - self.first_s) * min(k, self.total - 1) / (
            self.total - 1)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=MODELS)
        body = json.loads(request.content)
        gap = self.gap_s(self.served)
        self.served += 1
        self.order.append(int(body.get("max_tokens", 0)))

        async def stream() -> AsyncIterator[bytes]:
            for t in range(TOKENS):
                await asyncio.sleep(gap)
                delta = {"id": "r", "object": "text_completion",
                         "choices": [{"index": 0, "text": "x", "finish_reason":
                                      "length" if t == TOKENS - 1 else None}]}
                yield f"data: {json.dumps(delta)}\n\n".encode()
            use = {"id": "r", "choices": [], "usage": {"prompt_tokens": 10,
                                                        "completion_tokens": TOKENS,
                                                        "total_tokens": 10 + TOKENS}}
            yield f"data: {json.dumps(use)}\n\ndata: [DONE]\n\n".encode()
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=stream())


def drifting_run(tmp_path: Path, passes: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Levels 1 and 2, 8 requests each, on a server whose token gap grows from 10 to 40 ms
    over the run's 16 requests: (summary, request rows)."""
    server = DriftingServer(0.010, 0.040, 16)
    cfg = BenchConfig(base_url="http://test/v1", concurrency=(1, 2), requests=8, warmup=0,
                      prompt_chars=50, max_tokens=TOKENS, endpoint="completions",
                      out_dir=str(tmp_path), label="drift", passes=passes)
    result = asyncio.run(run_bench(cfg, transport=httpx.MockTransport(server),
                                   emit=lambda m: None))
    assert [s.concurrency for s in result.summaries] == [1, 2]  # as given, not as finished
    with RunStore(tmp_path) as store:
        return store.summary(result.run_id), store.requests(result.run_id)


@pytest.mark.slow
@pytest.mark.timing  # real 10-40 ms gaps compared within 4 ms: a busy machine can disturb it
def test_passes_cancel_a_drift_that_one_pass_blames_on_a_level(tmp_path: Path) -> None:
    one_sum, one_req = drifting_run(tmp_path / "one", passes=1)
    two_sum, two_req = drifting_run(tmp_path / "two", passes=2)

    def itl(summary: pd.DataFrame, level: int) -> float:
        return float(summary.set_index("concurrency").loc[level, "itl_p50_ms"])

    # one pass: level 2 ran after level 1 on a slower machine (10-25 ms against 25-40 ms)
    assert itl(one_sum, 2) - itl(one_sum, 1) > 10.0
    # two passes (1, 2, 2, 1): both levels span the run alike
    assert abs(itl(two_sum, 2) - itl(two_sum, 1)) < 4.0
    # one row per level, its 8 requests pooled, each index once, the passes stored
    assert list(two_sum["concurrency"]) == [1, 2]
    assert list(two_sum["requests_total"]) == [8, 8]
    for level in (1, 2):
        rows = two_req[two_req["concurrency"] == level]
        assert sorted(rows["request_index"]) == list(range(8))
        assert dict(rows.groupby("pass_index")["request_index"].apply(sorted)) == {
            1: [0, 1, 2, 3], 2: [4, 5, 6, 7]}
        gaps = np.concatenate([parse_itl(s) for s in rows["itl_ms"]])
        assert gaps.size == 8 * (TOKENS - 1)
    # the order sent: level 1's first half, level 2's two halves, level 1's second half
    by_start = two_req.sort_values("start_unix_s")
    assert list(by_start["concurrency"].iloc[[0, 3, 4, 11, 12, 15]]) == [1, 1, 2, 2, 1, 1]
    # the level ran for its two passes, not from its first send to its last answer
    lvl1 = two_req[two_req["concurrency"] == 1]
    spans = [g["start_unix_s"].add(g["e2e_ms"] / 1e3).max() - g["start_unix_s"].min()
             for _, g in lvl1.groupby("pass_index")]
    whole = lvl1["start_unix_s"].add(lvl1["e2e_ms"] / 1e3).max() - lvl1["start_unix_s"].min()
    duration = float(two_sum.set_index("concurrency").loc[1, "duration_s"])
    assert duration == pytest.approx(sum(spans), rel=1e-6)
    assert duration < 0.8 * whole
    assert float(two_sum.set_index("concurrency").loc[1, "output_tok_s"]) == pytest.approx(
        8 * TOKENS / sum(spans), rel=1e-6)
    # `capacity runs --levels` recomputes the same throughput from the request rows
    with RunStore(tmp_path / "two") as store:
        stats = store.level_stats().set_index("concurrency")
    assert float(stats.loc[1, "output_tok_s"]) == pytest.approx(8 * TOKENS / sum(spans),
                                                                rel=1e-3)
    assert int(stats.loc[1, "requests"]) == 8


@pytest.mark.slow
def test_open_loop_passes_keep_the_schedule(tmp_path: Path) -> None:
    """An open loop in two passes sends each level's requests once, half in each pass."""
    server = DriftingServer(0.002, 0.002, 2)
    cfg = BenchConfig(base_url="http://test/v1", concurrency=(2, 4), requests=6, warmup=0,
                      prompt_chars=50, max_tokens=TOKENS, endpoint="completions",
                      out_dir=str(tmp_path), label="open", passes=2, request_rate=50.0)
    result = asyncio.run(run_bench(cfg, transport=httpx.MockTransport(server),
                                   emit=lambda m: None))
    with RunStore(tmp_path) as store:
        req = store.requests(result.run_id)
        summary = store.summary(result.run_id)
    assert list(summary["requests_ok"]) == [6, 6]
    for _level, rows in req.groupby("concurrency"):
        assert sorted(rows["request_index"]) == list(range(6))
        assert dict(rows["pass_index"].value_counts()) == {1: 3, 2: 3}
    assert server.served == 12


def test_find_max_takes_no_passes(tmp_path: Path) -> None:
    from capacity.bench.findmax import FindMaxConfig

    cfg = BenchConfig(base_url="http://test/v1", requests=8, passes=2, out_dir=str(tmp_path),
                      slo_ttft_ms=100.0)
    with pytest.raises(InputError, match="passes goes through fixed levels"):
        asyncio.run(run_bench(cfg, transport=httpx.MockTransport(DriftingServer(0, 0, 2)),
                              emit=lambda m: None,
                              find_max=FindMaxConfig(slo_ttft_ms=100.0, slo_tpot_ms=20.0)))


class Stop(Exception):
    """Raised by the progress callback to stop a run part-way."""


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_a_run_stopped_between_passes_keeps_a_row_for_each_level_it_began(tmp_path: Path
                                                                         ) -> None:
    """Levels 1 and 2 in two passes (1, 2, 2, 1), stopped once level 1's second pass has
    answered a request: level 2 has its whole row, level 1 a row pooled from its first pass,
    and meta.json says which."""
    server = DriftingServer(0.002, 0.002, 2)
    cfg = BenchConfig(base_url="http://test/v1", concurrency=(1, 2), requests=8, warmup=0,
                      prompt_chars=50, max_tokens=TOKENS, endpoint="completions",
                      out_dir=str(tmp_path), label="stop", passes=2)
    said: list[str] = []

    def emit(message: str) -> None:
        said.append(message)
        if message.startswith("  concurrency 1, pass 2/2:"):
            raise Stop

    with pytest.raises(Stop):
        asyncio.run(run_bench(cfg, transport=httpx.MockTransport(server), emit=emit))
    with RunStore(tmp_path) as store:
        runs = store.list_runs()
        run_id = str(runs.iloc[0]["run_id"])
        summary = store.summary(run_id).set_index("concurrency")
        req = store.requests(run_id)
    assert runs.iloc[0]["status"] == "interrupted"
    assert sorted(summary.index) == [1, 2]
    assert int(summary.loc[2, "requests_total"]) == 8
    assert int(summary.loc[1, "requests_total"]) == 4  # the first pass only
    # the stopped pass's answered requests are stored as rows, outside the summary
    assert set(req.loc[req["concurrency"] == 1, "pass_index"]) == {1, 2}
    meta = json.loads(next(tmp_path.glob("*/*/meta.json")).read_text())
    assert any("level 1: the run stopped after 1 of 2 passes" in w for w in meta["warnings"])
    assert not any("level 2: the run stopped" in w for w in meta["warnings"])
    assert any("level 1: the run stopped after 1 of 2 passes" in m for m in said)


def test_the_burst_warning_counts_a_level_s_requests_over_its_passes(tmp_path: Path) -> None:
    """Issue 31: one rule for the request count, the documented one (3-5x the concurrency per
    level): 6 requests at concurrency 2 in two passes (3 a pass) is not one burst; 4 is."""
    def warned(requests: int) -> list[str]:
        server = DriftingServer(0.001, 0.001, 2)
        cfg = BenchConfig(base_url="http://test/v1", concurrency=(2,), requests=requests,
                          warmup=0, prompt_chars=50, max_tokens=TOKENS, endpoint="completions",
                          out_dir=str(tmp_path / str(requests)), label="b", passes=2)
        result = asyncio.run(run_bench(cfg, transport=httpx.MockTransport(server),
                                       emit=lambda m: None))
        return [w for w in result.warnings if "3 x concurrency" in w]

    assert warned(6) == []
    assert warned(4) == ["level 2: 4 requests < 3 x concurrency: one burst, so ramp-up and "
                         "tail dominate; use --requests 6 or more"]


def test_the_burst_rule_spares_concurrency_1_and_counts_every_pass(tmp_path: Path) -> None:
    """Issue 31: `--passes 2 --requests 24` at concurrency 8 is 3 x 8 requests over the
    passes, no burst (16 is); at concurrency 1 the requests run one after another, so even 2
    of them are no burst and warn nothing."""
    assert not is_one_burst(8, 24) and is_one_burst(8, 16) and not is_one_burst(1, 1)
    server = DriftingServer(0.001, 0.001, 2)
    cfg = BenchConfig(base_url="http://test/v1", concurrency=(1, 2), requests=2, warmup=0,
                      prompt_chars=50, max_tokens=TOKENS, endpoint="completions",
                      out_dir=str(tmp_path), label="b", passes=2)
    result = asyncio.run(run_bench(cfg, transport=httpx.MockTransport(server),
                                   emit=lambda m: None))
    assert [w for w in result.warnings if "3 x concurrency" in w] == [
        "level 2: 2 requests < 3 x concurrency: one burst, so ramp-up and tail dominate; use "
        "--requests 6 or more"]
