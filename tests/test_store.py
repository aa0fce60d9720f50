"""Stored runs in DuckDB: views over the CSVs in place, read-only SQL, bad files skipped."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from capacity.bench.metrics import RequestRecord, summarize
from capacity.bench.storage import RunWriter
from capacity.bench.store import (
    RunStore,
    compact_all,
    compact_run,
    list_runs,
    load_requests,
    load_summary,
)
from capacity.cli.main import main
from capacity.errors import StoreError


def record(i: int, *, run_id: str, label: str, concurrency: int, ok: bool = True
           ) -> RequestRecord:
    return RequestRecord(
        run_id=run_id, label=label, concurrency=concurrency, request_rate_rps=None,
        request_index=i, response_id=f"r{i}", start_unix_s=1_800_000_000.0 + i * 0.1,
        queue_ms=0.01, ttft_ms=100.0 + i if ok else None, first_chunk_ms=1.0 if ok else None,
        e2e_ms=300.0 + i if ok else None, tpot_ms=10.0 + i / 10 if ok else None,
        itl_mean_ms=10.0 if ok else None, itl_max_ms=12.0 if ok else None, prompt_chars=400,
        prompt_tokens=100 if ok else None, output_tokens=20 if ok else 0,
        output_tokens_source="usage" if ok else "chunks", token_events=20 if ok else 0,
        max_tokens=20, output_length_mismatch=False, finish_reason="length" if ok else None,
        success=ok, error_type=None if ok else "http_error",
        error_message=None if ok else 'HTTP 500: "boom", with, commas\nand a newline',
        http_status=200 if ok else 500, endpoint="chat", model="m1",
        itl_ms="10.000 9.500" if ok else "")


def write_run(root: Path, label: str, levels: tuple[int, ...] = (1, 4), n: int = 10,
              model: str = "m1", started: str = "2026-11-29T10:00:00+00:00") -> str:
    with RunWriter(root, label) as w:
        w.write_meta({"run_id": w.run_id, "label": label, "status": "finished",
                      "started_at": started, "model": model,
                      "args": {"base_url": "http://127.0.0.1:8000/v1", "endpoint": "chat",
                               "concurrency": list(levels), "api_key": "sk-LEAK"}})
        for c in levels:
            recs = [record(i, run_id=w.run_id, label=label, concurrency=c, ok=i % 5 != 4)
                    for i in range(n)]
            recs = [replace(r, model=model) for r in recs]
            for r in recs:
                w.write_request(r)
            w.write_summary(summarize(recs, run_id=w.run_id, label=label, concurrency=c,
                                      request_rate_rps=None, endpoint="chat", model=model))
        return w.run_id


@pytest.mark.slow
def test_views_and_api(tmp_path: Path) -> None:
    a = write_run(tmp_path, "alpha", started="2026-11-01T00:00:00+00:00")
    b = write_run(tmp_path, "beta", model="m2", started="2026-11-20T00:00:00+00:00")
    with RunStore(tmp_path) as s:
        assert s.warnings == []
        runs = s.list_runs()
        assert list(runs["run_id"]) == [b, a]  # newest first
        assert list(runs["requests_ok"]) == [16, 16] and list(runs["requests_failed"]) == [4, 4]
        assert list(s.list_runs(label="alpha")["run_id"]) == [a]
        assert list(s.list_runs(model="m2")["run_id"]) == [b]
        assert list(s.list_runs(since="2026-11-10")["run_id"]) == [b]
        assert list(s.list_runs(until="2026-11-10")["run_id"]) == [a]
        assert s.list_runs(base_url="http://elsewhere/v1").empty
        summ = s.summary(a)
        assert list(summ["concurrency"]) == [1, 4]
        reqs = s.requests(a, concurrency=4)
        assert len(reqs) == 10 and reqs["ttft_ms"].dtype == np.float64
        assert reqs["error_message"].dropna().iloc[0].startswith('HTTP 500: "boom", with')
        assert s.latest_run_id("beta") == b
        with pytest.raises(StoreError, match="labels: alpha, beta"):
            s.latest_run_id("gamma")
    assert len(list_runs(tmp_path)) == 2
    assert len(load_summary(tmp_path, a)) == 2 and len(load_requests(tmp_path, b)) == 20
    meta = (tmp_path / "alpha" / a / "meta.json").read_text()
    assert "sk-LEAK" not in meta and "api_key" not in meta


def test_percentiles_agree_with_numpy(tmp_path: Path) -> None:
    run = write_run(tmp_path, "p", levels=(8,), n=37)
    with RunStore(tmp_path) as s:
        q = s.query("SELECT quantile_cont(ttft_ms, 0.9) AS p90, quantile_cont(tpot_ms, 0.99) "
                    "AS p99 FROM requests WHERE success AND run_id = $r", {"r": run})
        summ = s.summary(run).iloc[0]
        ttft = s.requests(run).query("success")["ttft_ms"].to_numpy()
    assert q["p90"].iloc[0] == pytest.approx(np.percentile(ttft, 90))
    assert summ["ttft_p90_ms"] == pytest.approx(q["p90"].iloc[0])
    assert summ["tpot_p99_ms"] == pytest.approx(q["p99"].iloc[0])


def test_level_stats_recompute_each_level_from_its_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`RunStore.level_stats` (`capacity runs --levels`): every level of every run from its
    request rows, equal to numpy's percentiles and to the summary the bench wrote."""
    a = write_run(tmp_path, "alpha", levels=(1, 8), n=37)
    b = write_run(tmp_path, "beta", levels=(2,), n=11)
    with RunStore(tmp_path) as s:
        stats = s.level_stats()
        assert list(zip(stats["run_id"], stats["concurrency"], strict=True)) == sorted(
            [(a, 1), (a, 8), (b, 2)])
        one = s.level_stats(a)
        assert list(one["concurrency"]) == [1, 8]
        ok = s.requests(a, concurrency=8).query("success")
        row = one.iloc[1]
        summ = s.summary(a).iloc[1]
    assert (row["requests"], row["ok"]) == (37, len(ok))
    for col, q in (("ttft", 50), ("ttft", 99), ("tpot", 50), ("tpot", 99)):
        assert row[f"{col}_p{q}_ms"] == pytest.approx(np.percentile(ok[f"{col}_ms"], q))
        assert row[f"{col}_p{q}_ms"] == pytest.approx(summ[f"{col}_p{q}_ms"])
    assert main(["runs", "--out", str(tmp_path), "--levels", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 3 and out[0]["run_id"] == min(a, b)


@pytest.mark.parametrize("sql", [
    pytest.param("DROP VIEW requests", id="drop"),
    pytest.param("COPY (SELECT 1) TO 'x.csv'", id="copy"),
    pytest.param("SELECT 1; SELECT 2", id="two-statements"),
    pytest.param("INSERT INTO t VALUES (1)", id="insert"),
    pytest.param("ATTACH 'x.db'", id="attach"),
    pytest.param("SELEC 1", id="syntax"),
])
def test_only_one_select(tmp_path: Path, sql: str) -> None:
    write_run(tmp_path, "a")
    with RunStore(tmp_path) as s, pytest.raises(StoreError):
        s.query(sql)


def test_files_outside_the_root_are_out_of_reach(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_run(root, "a")
    secret = tmp_path / "secret.csv"
    secret.write_text("x\n1\n")
    with RunStore(root) as s, pytest.raises(StoreError, match="query failed"):
        s.query("SELECT * FROM read_csv($p)", {"p": str(secret)})


def test_killed_foreign_and_empty_files(tmp_path: Path) -> None:
    run = write_run(tmp_path, "k", levels=(2,), n=6)
    path = tmp_path / "k" / run / "requests.csv"
    text = path.read_text()
    last = text.splitlines()[-1]
    path.write_text(text + last[: len(last) // 2])  # killed while writing a row
    foreign = tmp_path / "other" / "x"
    foreign.mkdir(parents=True)
    (foreign / "requests.csv").write_text("a,b\n1,2\n")
    (foreign / "summary.csv").write_text("")  # killed before its header
    (foreign / "meta.json").write_text("{not json")
    with RunStore(tmp_path) as s:
        warnings = "\n".join(s.warnings)
        assert "half-written" in warnings and "not a capacity requests.csv" in warnings
        assert "no complete header" in warnings and "meta.json" in warnings
        assert len(s.requests(run)) == 6
        assert list(s.list_runs()["run_id"]) == [run]


def test_union_by_name_across_versions(tmp_path: Path) -> None:
    """A run written by a version with an extra column still loads beside a current one."""
    a = write_run(tmp_path, "old", levels=(1,), n=3)
    path = tmp_path / "old" / a / "requests.csv"
    lines = path.read_text().splitlines()
    lines = [lines[0] + ",gpu_temp_c"] + [ln + ",71.5" for ln in lines[1:]]
    path.write_text("\n".join(lines) + "\n")
    b = write_run(tmp_path, "new", levels=(1,), n=3)
    with RunStore(tmp_path) as s:
        df = s.query("SELECT run_id, gpu_temp_c FROM requests ORDER BY run_id")
    assert set(df["run_id"]) == {a, b}
    assert df.set_index("run_id")["gpu_temp_c"].isna().to_dict() == {a: False, b: True}


def test_empty_root(tmp_path: Path) -> None:
    with RunStore(tmp_path / "nothing") as s:
        assert s.list_runs().empty
        assert s.query("SELECT count(*) AS n FROM requests")["n"].iloc[0] == 0


@pytest.mark.slow
def test_runs_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "capacity-8k")
    assert main(["runs", "--out", str(tmp_path)]) == 0
    assert a in capsys.readouterr().out
    assert main(["runs", "--out", str(tmp_path), "--label", "capacity-8k"]) == 0
    out = capsys.readouterr().out
    assert "ttft_p50_ms" in out and "tpot_p99_ms" in out
    assert main(["runs", "--out", str(tmp_path), "--sql",
                 "SELECT concurrency, count(*) AS n FROM requests GROUP BY 1 ORDER BY 1",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"concurrency": 1, "n": 10},
                                                   {"concurrency": 4, "n": 10}]
    assert main(["runs", "--out", str(tmp_path), "--sql", "SELECT 1 AS one",
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out == "one\n1\n"
    assert main(["runs", "--out", str(tmp_path), "--sql", "DELETE FROM requests"]) == 2
    assert "only SELECT" in capsys.readouterr().err
    assert main(["runs", "--out", str(tmp_path), "--label", "nope"]) == 2


def test_parquet_copy_reads_the_same_rows(tmp_path: Path) -> None:
    a = write_run(tmp_path, "alpha")
    b = write_run(tmp_path, "beta")
    with RunStore(tmp_path) as s:
        before = s.query("SELECT * FROM requests ORDER BY run_id, concurrency, request_index")
    done = compact_all(tmp_path)
    assert len(done) == 2 and all(p.name == "requests.parquet" for p in done)
    assert compact_all(tmp_path) == []  # nothing stale left
    with RunStore(tmp_path) as s:
        assert s.warnings == []
        after = s.query("SELECT * FROM requests ORDER BY run_id, concurrency, request_index")
        assert set(s.list_runs()["run_id"]) == {a, b}
    assert after[list(before.columns)].equals(before)


def test_a_stale_parquet_copy_is_ignored(tmp_path: Path) -> None:
    import os

    run_id = write_run(tmp_path, "alpha", levels=(1,), n=4)
    run_dir = tmp_path / "alpha" / run_id
    pq = compact_run(run_dir)
    assert pq is not None
    csv_path = run_dir / "requests.csv"
    last_row = csv_path.read_text().splitlines()[-1]
    with csv_path.open("a") as fh:  # the CSV changes after the copy was made
        fh.write(last_row + "\n")
    old = pq.stat().st_mtime - 10
    os.utime(pq, (old, old))
    with RunStore(tmp_path) as s:
        assert len(s.requests(run_id)) == 5  # the CSV, newer than its copy, wins


def test_compact_skips_a_foreign_csv(tmp_path: Path) -> None:
    d = tmp_path / "x" / "y"
    d.mkdir(parents=True)
    (d / "requests.csv").write_text("a,b\n1,2\n")
    assert compact_run(d) is None


def test_runs_compact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, "alpha")
    assert main(["runs", "--out", str(tmp_path), "--compact"]) == 0
    assert "compacted 1 run(s)" in capsys.readouterr().out


def test_numpy_scalars_round_trip_with_every_row_kept(tmp_path: Path) -> None:
    """A record holding numpy scalars (as metrics computed with numpy produce) is written as
    plain decimals, never `np.float64(...)`, so the store keeps every row (it used to drop
    them silently); NaN and infinity become empty (NULL)."""
    values = [np.float64(123.456), np.float32(0.1), np.float64(1e-7), np.float64(2.5e9)]
    with RunWriter(tmp_path, "numpy") as w:
        run_id = w.run_id
        recs = []
        for i, v in enumerate(values):
            r = record(i, run_id=run_id, label="numpy", concurrency=2)
            recs.append(replace(
                r, ttft_ms=v, tpot_ms=np.float64("nan") if i == 0 else np.float64(10.5),
                first_chunk_ms=np.float64("inf") if i == 1 else np.float64(1.25),
                e2e_ms=np.float64(400.25),
                prompt_tokens=np.int64(100 + i), output_tokens=np.int32(20),
                concurrency=np.int64(2), success=np.bool_(True), queue_ms=np.float16(0.5)))
        for r in recs:
            w.write_request(r)
        row = summarize(recs, run_id=run_id, label="numpy", concurrency=2,
                        request_rate_rps=None, endpoint="chat", model="m1")
        w.write_summary({k: np.float64(v) if isinstance(v, float) else v
                         for k, v in row.to_row().items()})
    text = w.requests_path.read_text()
    assert "np." not in text and "nan" not in text.lower() and "inf" not in text.lower()
    with RunStore(tmp_path) as s:
        assert s.warnings == []
        got = s.requests(run_id)
        summ = s.summary(run_id)
    assert len(got) == len(values) and len(summ) == 1
    assert list(got["ttft_ms"]) == [float(np.float64(123.456)), pytest.approx(0.1),
                                    1e-7, 2.5e9]
    assert list(got["prompt_tokens"]) == [100, 101, 102, 103]
    assert got["tpot_ms"].isna().tolist() == [True, False, False, False]
    assert got["first_chunk_ms"].isna().tolist() == [False, True, False, False]
    assert (got["e2e_ms"] == 400.25).all()
    assert got["success"].all() and (got["queue_ms"] == 0.5).all()
    assert summ["requests_ok"].iloc[0] == len(values)
