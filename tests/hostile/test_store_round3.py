"""Stored runs, round 3 (issue 29, items 2 and 5), reproduced and held:

2. every text cell of requests.csv and summary.csv is bounded before it is written, so a row
   never passes DuckDB's 2 MiB line limit and `capacity runs` agrees with summary.csv;
5. the S3 store: a prefix cannot leave the local mirror (`..` deleted an unrelated folder's
   files), concurrent readers share a mirror, a second writer of a run id and shard is
   refused, and one bad key or one corrupt Parquet file is skipped with a warning, not the
   end of the whole store.

S3 is moto's S3-compatible server in its own process on 127.0.0.1 (as tests/test_bench_shards.py
does). Limits: docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from servers_server import DONE, HostileServer, Request, head, models_or, token

from capacity.bench import s3
from capacity.bench.client import run_bench
from capacity.bench.config import BenchConfig
from capacity.bench.metrics import RequestRecord, summarize
from capacity.bench.storage import (
    MAX_ITL_CELL_CHARS,
    MAX_TEXT_CELL_CHARS,
    RunWriter,
    process_owner,
)
from capacity.bench.store import RunStore, compact_run
from capacity.cli.main import main
from capacity.errors import InputError

LIMIT_S = 120


def record(i: int, *, run_id: str, label: str, ok: bool = True, **kw: Any) -> RequestRecord:
    fields: dict[str, Any] = dict(
        run_id=run_id, label=label, concurrency=1, request_rate_rps=None,
        request_index=i, response_id=f"r{i}", start_unix_s=1_800_000_000.0 + i,
        queue_ms=0.01, ttft_ms=100.0 if ok else None, first_chunk_ms=1.0 if ok else None,
        e2e_ms=300.0 if ok else None, tpot_ms=10.0 if ok else None,
        itl_mean_ms=10.0 if ok else None, itl_max_ms=12.0 if ok else None, prompt_chars=400,
        prompt_tokens=100 if ok else None, output_tokens=20 if ok else 0,
        output_tokens_source="usage" if ok else "chunks", token_events=20 if ok else 0,
        max_tokens=20, output_length_mismatch=False, finish_reason="length" if ok else None,
        success=ok, error_type=None if ok else "http_error",
        error_message=None if ok else "HTTP 500", http_status=200 if ok else 500,
        endpoint="chat", model="m1", itl_ms="10.000 9.500" if ok else "")
    return RequestRecord(**(fields | kw))


def write_run(root: Path, label: str, records: Callable[[str], list[RequestRecord]],
              model: str = "m1") -> str:
    with RunWriter(root, label) as w:
        w.write_meta({"run_id": w.run_id, "label": label, "status": "finished",
                      "started_at": "2026-11-29T10:00:00+00:00", "model": model[:100],
                      "args": {"concurrency": [1]}})
        recs = records(w.run_id)
        for r in recs:
            w.write_request(r)
        w.write_summary(summarize(recs, run_id=w.run_id, label=label, concurrency=1,
                                  request_rate_rps=None, endpoint="chat", model=model))
        return w.run_id


# -- item 2: text cells are bounded --------------------------------------------------------

def test_huge_text_cells_are_cut_and_every_row_is_read(tmp_path: Path) -> None:
    """A server's text of 3 MB in every text column (error message, id, finish reason,
    model) and 400,000 gaps in itl_ms: each row was over DuckDB's 2 MiB line limit and left
    out, so the store said 0 ok where summary.csv said 3."""
    huge = "é" + "x" * 3_000_000
    gaps = " ".join(["12.345"] * 400_000)

    def recs(run_id: str) -> list[RequestRecord]:
        return [record(0, run_id=run_id, label="big", response_id=huge, finish_reason=huge,
                       model=huge, itl_ms=gaps),
                record(1, run_id=run_id, label="big", model=huge, itl_ms=gaps),
                record(2, run_id=run_id, label="big", model=huge, itl_ms=gaps),
                record(3, run_id=run_id, label="big", ok=False, error_message=huge,
                       model=huge)]

    run_id = write_run(tmp_path, "big", recs, model=huge)
    run_dir = tmp_path / "big" / run_id
    with RunStore(tmp_path) as st:
        runs = st.list_runs()
        summary = st.summary(run_id)
        rows = st.requests(run_id)
        assert runs["requests_ok"].tolist() == summary["requests_ok"].tolist() == [3]
        assert st.warnings == []
    with (run_dir / "requests.csv").open("rb") as fh:
        assert max(len(line) for line in fh) < 2 << 20
    assert runs["requests_failed"].tolist() == [1]
    assert len(rows) == 4
    for column in ("response_id", "finish_reason", "model"):
        cell = rows[column].iloc[0]
        assert len(cell) == MAX_TEXT_CELL_CHARS and cell.endswith("...")
    assert len(rows["error_message"].iloc[3]) == MAX_TEXT_CELL_CHARS
    itl = rows["itl_ms"].iloc[0]
    assert len(itl) <= MAX_ITL_CELL_CHARS
    assert {float(g) for g in itl.split()} == {12.345}  # whole gaps, still numbers
    assert len(summary["model"].iloc[0]) == MAX_TEXT_CELL_CHARS
    assert compact_run(run_dir) is not None  # the Parquet copy keeps every row too
    with RunStore(tmp_path) as st:
        assert st.list_runs()["requests_ok"].tolist() == [3]


# -- item 5: a corrupt Parquet file is skipped, its CSV read -----------------------------------

def test_a_corrupt_parquet_copy_is_skipped_and_its_csv_read(tmp_path: Path) -> None:
    good = write_run(tmp_path, "good", lambda r: [record(i, run_id=r, label="good")
                                                  for i in range(3)])
    bad = write_run(tmp_path, "bad", lambda r: [record(i, run_id=r, label="bad")
                                                for i in range(5)])
    for label, run_id in (("good", good), ("bad", bad)):
        compact_run(tmp_path / label / run_id)
    pq = tmp_path / "bad" / bad / "requests.parquet"
    pq.write_bytes(b"PAR1" + b"\x00garbage" * 1000)  # newer than its CSV: would be read
    with RunStore(tmp_path) as st:
        runs = st.list_runs()
        counts = dict(zip(runs["label"], runs["requests_ok"], strict=True))
        assert any(str(pq) in w and "not a readable Parquet file" in w for w in st.warnings)
    assert counts == {"good": 3, "bad": 5}


# -- item 5: S3 ------------------------------------------------------------------------------

def upload_run(bucket: str, prefix: str, local_root: Path, label: str, run_id: str,
               names: tuple[str, ...] = ("requests.csv", "summary.csv", "meta.json")) -> None:
    import boto3

    client = boto3.client("s3")
    for name in names:
        client.upload_file(str(local_root / label / run_id / name), bucket,
                           f"{prefix}/{label}/{run_id}/{name}")
        time.sleep(0.01)  # in this order: LastModified keeps a Parquet copy newest


@pytest.mark.parametrize("url", [
    "s3://bucket-a/../../../../x", "s3://bucket-a/team/../../x", "s3://bucket-a/./x",
    "s3://bucket-a/a//b", "s3://bucket-a//x", "s3:///bucket-a/x", "s3://bucket-a/a\\..\\b",
    "s3://bucket-a/" + "p" * 300, "s3://bucket-a/a\x00b", "s3://bucket..a/x",
])
def test_a_prefix_that_could_leave_the_mirror_is_refused(url: str) -> None:
    with pytest.raises(InputError):
        s3.parse_url(url)


@pytest.mark.parametrize("url, prefix", [("s3://bucket-a", ""), ("s3://bucket-a/", ""),
                                         ("s3://bucket-a/team", "team"),
                                         ("s3://bucket-a/team/runs/", "team/runs"),
                                         ("s3:/bucket-a/team", "team")])
def test_plain_prefixes_still_parse(url: str, prefix: str) -> None:
    assert s3.parse_url(url) == ("bucket-a", prefix)


@pytest.mark.slow
def test_dot_dot_in_the_url_deletes_nothing_outside_the_mirror(
        bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity runs --out s3://bucket/../../../../x` mirrored into <home>/cache/s3/bucket/
    ../../../../x = <tmp>/x and removed the run files there that the bucket lacked."""
    unrelated = tmp_path / "x" / "lab" / "20260101T000000Z-abcdef"
    unrelated.mkdir(parents=True)
    for name in ("meta.json", "requests.csv", "summary.csv"):
        (unrelated / name).write_text("precious\n")
    (tmp_path / "home" / "cache" / "s3" / bucket).mkdir(parents=True)  # read before
    url = f"s3://{bucket}/../../../../x"
    with contextlib.suppress(InputError):
        RunStore(url).close()
    assert sorted(p.name for p in unrelated.iterdir()) == ["meta.json", "requests.csv",
                                                           "summary.csv"]
    assert main(["runs", "--out", url]) == 2
    assert "'..'" in capsys.readouterr().err
    with pytest.raises(InputError, match="'..'"):
        RunStore(url)


@pytest.mark.slow
def test_concurrent_readers_share_one_mirror(bucket: str, tmp_path: Path) -> None:
    """Three readers pulling the same fresh mirror at once: each downloaded to the same
    `<file>.part` and two of the three failed."""
    import boto3

    local = tmp_path / "local"
    runs = [write_run(local, "lab", lambda r: [record(i, run_id=r, label="lab")
                                               for i in range(4)]) for _ in range(3)]
    for run_id in runs:
        upload_run(bucket, "team", local, "lab", run_id)
    start = threading.Barrier(3)

    class InStep:
        """A client whose first download waits for the others: the three readers fetch the
        same object at the same moment."""

        def __init__(self) -> None:
            self.inner = boto3.session.Session().client("s3")
            self.first = True

        def get_paginator(self, name: str) -> Any:
            return self.inner.get_paginator(name)

        def download_file(self, b: str, key: str, path: str) -> None:
            if self.first:
                self.first = False
                start.wait(timeout=30)
            self.inner.download_file(b, key, path)

    errors: list[BaseException] = []

    def read() -> None:
        try:
            s3.pull(f"s3://{bucket}/team", client=InStep())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with RunStore(f"s3://{bucket}/team") as st:
        assert st.list_runs()["requests_ok"].tolist() == [4, 4, 4]
        assert st.warnings == []
    mirror = s3.cache_dir(f"s3://{bucket}/team")
    assert not [p for p in mirror.rglob("*.part")]


def quick(req: Request, conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(head() + token("a") + token("b", finish="stop") + DONE)


def run_to(out: str, url: str, run_id: str, shard: tuple[int, int] = (0, 1)) -> None:
    cfg = BenchConfig(base_url=url, concurrency=(1,), requests=2, warmup=0, max_tokens=2,
                      prompt_chars=50, out_dir=out, label="lab", run_id=run_id,
                      shard_index=shard[0], shard_count=shard[1])
    asyncio.run(asyncio.wait_for(run_bench(cfg, emit=lambda m: None), timeout=60))


@pytest.mark.slow
@pytest.mark.parametrize("shard", [(0, 1), (1, 2)], ids=["whole-run", "shard-2of2"])
def test_a_second_writer_of_a_run_id_and_shard_is_refused(
        bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        shard: tuple[int, int]) -> None:
    """Two clients (two machines: two workspaces) writing --run-id r1 (and the same shard) to
    one bucket: the second silently overwrote the first's files."""
    import boto3

    server = HostileServer(models_or(quick))
    try:
        out = f"s3://{bucket}/team"
        run_to(out, server.base_url, "r1", shard)
        client = boto3.client("s3")
        before = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
        assert any(k.endswith("/meta.json") for k in before)
        monkeypatch.setenv("CAPACITY_HOME", str(tmp_path / "other-machine"))
        with pytest.raises(InputError, match="already in s3://.*pick another --run-id"):
            run_to(out, server.base_url, "r1", shard)
        after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
        assert after == before  # nothing was overwritten
        local = s3.cache_dir(out) / "lab" / "r1"
        assert not (local / (f"shard-{shard[0] + 1}of{shard[1]}" if shard[1] > 1 else "")
                    / "requests.csv").exists()  # its own new folder is removed
        run_to(out, server.base_url, "r2", shard)  # another id is fine
        if shard[1] > 1:
            run_to(out, server.base_url, "r1", (0, 2))  # and the other shard of r1
    finally:
        server.close()


@pytest.mark.slow
def test_a_second_writer_racing_the_first_is_refused(bucket: str) -> None:
    """The claim is S3's conditional write: of two claims of one folder, one wins."""
    results: list[str] = []
    start = threading.Barrier(2)

    def claim() -> None:
        import boto3

        client = boto3.session.Session().client("s3")
        start.wait(timeout=30)
        try:
            s3.claim_run(f"s3://{bucket}/team", "lab/r9", client=client)
            results.append("ok")
        except InputError:
            results.append("refused")

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == ["ok", "refused"]


@pytest.mark.slow
def test_one_bad_key_or_corrupt_parquet_does_not_sink_the_store(bucket: str,
                                                                tmp_path: Path) -> None:
    """An over-long key (ENAMETOOLONG in the mirror) or a corrupt requests.parquet made
    RunStore raise for the whole bucket; now each is skipped with a warning naming it."""
    import boto3

    local = tmp_path / "local"
    good = write_run(local, "lab", lambda r: [record(i, run_id=r, label="lab") for i in range(3)])
    other = write_run(local, "lab", lambda r: [record(i, run_id=r, label="lab")
                                               for i in range(5)])
    upload_run(bucket, "team", local, "lab", good)
    upload_run(bucket, "team", local, "lab", other)
    client = boto3.client("s3")
    long_label = "l" * 300
    client.put_object(Bucket=bucket, Key=f"team/{long_label}/r1/meta.json", Body=b"{}")
    client.put_object(Bucket=bucket, Key="team/lab/" + "r" * 400 + "/requests.csv", Body=b"x")
    client.put_object(Bucket=bucket, Key=f"team/lab/{other}/requests.parquet",
                      Body=b"PAR1 this is not parquet")
    with RunStore(f"s3://{bucket}/team") as st:
        runs = st.list_runs()
        counts = dict(zip(runs["run_id"], runs["requests_ok"], strict=True))
        warnings = list(st.warnings)
    assert counts == {good: 3, other: 5}
    assert any(long_label[:50] in w and "label" in w for w in warnings), warnings
    assert any("r" * 50 in w and "run id" in w for w in warnings), warnings
    assert any(f"{other}/requests.parquet" in w and "not a readable Parquet" in w
               for w in warnings), warnings
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["runs", "--out", f"s3://{bucket}/team"]) == 0
    assert "not a readable Parquet" in err.getvalue()


@pytest.mark.slow
def test_a_reader_leaves_a_live_local_run_alone(bucket: str, tmp_path: Path) -> None:
    """`capacity bench --out s3://...` writes into the mirror and uploads as levels end; a
    reader of the same mirror removed (or replaced) the running run's files that the bucket
    did not have yet."""
    mirror = s3.cache_dir(f"s3://{bucket}/team")
    run = mirror / "lab" / "20260101T000000Z-live00"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({
        "run_id": run.name, "label": "lab", "status": "running", "args": {},
        "owner": process_owner()}))
    (run / "requests.csv").write_text("run_id,label,concurrency,success,ttft_ms\n")
    with RunStore(f"s3://{bucket}/team") as st:
        assert st.list_runs()["status"].tolist() == ["running"]
    assert (run / "requests.csv").exists() and (run / "meta.json").exists()
    gone = mirror / "lab" / "20260101T000000Z-dead00"  # a file of no live run: still mirrored
    gone.mkdir(parents=True)
    (gone / "requests.csv").write_text("x\n")
    RunStore(f"s3://{bucket}/team").close()
    assert not (gone / "requests.csv").exists()
