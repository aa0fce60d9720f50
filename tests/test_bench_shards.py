"""One run over several client machines (`--shard i/N --run-id ID --start-at TIME`), and runs
in S3-compatible object storage (a moto server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from capacity.bench.client import run_bench
from capacity.bench.config import BenchConfig
from capacity.bench.store import RunStore, compact_all, merge_shards
from capacity.cli.bench import parse_shard, parse_start_at
from capacity.errors import InputError
from capacity.model.scenario import make_scenario
from capacity.sim.server import SimConfig, create_app, serve_in_thread


def test_shard_and_start_at_flags() -> None:
    assert parse_shard("2/4") == (1, 4)
    assert parse_shard(" 1 / 1 ") == (0, 1)
    for bad in ("0/4", "5/4", "2", "a/b", "-1/2", "1/9999999"):
        with pytest.raises(InputError, match="--shard"):
            parse_shard(bad)
    assert parse_start_at("2026-11-30T10:00:00Z") == parse_start_at("2026-11-30T10:00:00")
    assert parse_start_at("2026-11-30T11:00:00+01:00") == parse_start_at("2026-11-30T10:00:00Z")
    assert parse_start_at("1795000000") == 1795000000.0
    with pytest.raises(InputError, match="--start-at 'tomorrow' is not a time"):
        parse_start_at("tomorrow")


def test_a_shard_needs_a_run_id() -> None:
    with pytest.raises(InputError, match="shard_count above 1 needs run_id"):
        BenchConfig(base_url="http://127.0.0.1:1/v1", shard_index=1, shard_count=2).validate()
    with pytest.raises(InputError, match="shard_index must be below shard_count"):
        BenchConfig(base_url="http://127.0.0.1:1/v1", shard_index=2, shard_count=2,
                    run_id="r").validate()
    with pytest.raises(InputError, match="run id"):
        BenchConfig(base_url="http://127.0.0.1:1/v1", run_id="../x").validate()


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with serve_in_thread(create_app(make_scenario(), SimConfig(speedup=200))) as url:
        yield url


def _shard(url: str, out: str, i: int, n: int, start: float | None = None) -> None:
    cfg = BenchConfig(base_url=url, concurrency=(3, 4), requests=10, max_tokens=4,
                      prompt_chars=100, out_dir=out, warmup=0, shard_index=i, shard_count=n,
                      run_id="team-run-1", label="shared", start_at_unix_s=start)
    asyncio.run(run_bench(cfg, emit=lambda m: None))


@pytest.mark.slow
def test_shards_make_one_run_complete_when_all_are(sim_url: str, tmp_path: Path) -> None:
    out = str(tmp_path)
    _shard(sim_url, out, 0, 2, start=time.time() + 0.2)
    run_dir = tmp_path / "shared" / "team-run-1"
    assert merge_shards(run_dir) is None  # shard 2 has not run: not complete, nothing written
    with RunStore(out) as st:
        runs = st.list_runs()
        assert len(runs) == 1 and runs.iloc[0]["status"] == "interrupted"
        assert runs.iloc[0]["shards"] == "1/2 finished"
        assert st.summary("team-run-1").empty  # a shard's own summary is not the run's
    _shard(sim_url, out, 1, 2)
    merged = merge_shards(run_dir)
    assert merged == run_dir / "summary.csv"
    assert (run_dir / "shard-1of2" / "requests.parquet").exists()  # written as levels end
    with RunStore(out) as st:
        runs = st.list_runs()
        assert runs.iloc[0]["status"] == "finished" and runs.iloc[0]["shards"] == "2/2 finished"
        reqs = st.requests("team-run-1")
        summary = st.summary("team-run-1")
    for level in (3, 4):  # every request of the level once, split between the shards
        mine = reqs[reqs["concurrency"] == level]
        assert sorted(mine["request_index"]) == list(range(10))
    assert list(summary["concurrency"]) == [3, 4]
    assert list(summary["requests_total"]) == [10, 10]
    assert summary["client_cpu_s"].notna().all()
    (run_dir / "summary.csv").unlink()
    assert compact_all(out, warnings=[]) and (run_dir / "summary.csv").exists()


@pytest.mark.slow  # a moto server process (~3 s to start on a loaded machine)
def test_runs_in_a_bucket_are_written_and_read_in_place(sim_url: str, bucket: str,
                                                        tmp_path: Path) -> None:
    import boto3

    out = f"s3://{bucket}/team"
    _shard(sim_url, out, 0, 2)
    _shard(sim_url, out, 1, 2)
    keys = sorted(o["Key"] for o in boto3.client("s3").list_objects_v2(
        Bucket=bucket)["Contents"])
    assert "team/shared/team-run-1/shard-2of2/requests.parquet" in keys
    assert "team/shared/team-run-1/shard-1of2/meta.json" in keys
    mirror = tmp_path / "home" / "cache" / "s3"
    for p in mirror.rglob("*"):  # the mirror is emptied: the store must read the bucket
        if p.is_file():
            p.unlink()
    with RunStore(out) as st:
        assert st.source == out
        runs = st.list_runs()
        assert runs.iloc[0]["shards"] == "2/2 finished"
        assert len(st.requests("team-run-1")) == 20
        n = st.query("SELECT count(*) AS n FROM requests")["n"].iloc[0]
    assert n == 20
    secret = "testing-secret-NEVER-WRITTEN"
    for p in [*mirror.rglob("*"), *(tmp_path / "home").rglob("*")]:
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p


@pytest.mark.slow
def test_a_missing_bucket_is_one_line(s3_server: str, monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path) -> None:
    from capacity.errors import StoreError

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("CAPACITY_HOME", str(tmp_path))
    with pytest.raises(StoreError, match=r"cannot read s3://no-such-bucket: NoSuchBucket"):
        RunStore("s3://no-such-bucket/x")
    with pytest.raises(InputError, match="not an s3://bucket/prefix"):
        RunStore("s3://UPPER/x")


def test_meta_json_of_a_shard_names_it(sim_url: str, tmp_path: Path) -> None:
    _shard(sim_url, str(tmp_path), 1, 3)
    meta = json.loads((tmp_path / "shared" / "team-run-1" / "shard-2of3" / "meta.json")
                      .read_text())
    assert (meta["shard_index"], meta["shard_count"], meta["run_id"]) == (2, 3, "team-run-1")
