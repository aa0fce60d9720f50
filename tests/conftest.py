"""Shared fixtures."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from capacity.catalog import custom as catalog_custom
from capacity.catalog.loader import Catalog, default_catalog
from capacity.model.scenario import Scenario, make_scenario


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return default_catalog()


@pytest.fixture()
def seed(catalog: Catalog) -> Scenario:
    """The chapter's worked example (docs/method.md)."""
    return make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog)


@pytest.fixture()
def custom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty folder of custom catalog entries (the machine's own stay out of the test), its
    caches cleared before and after; yields the folder."""
    folder = tmp_path / "custom"
    monkeypatch.setenv(catalog_custom.ENV_VAR, str(folder))
    catalog_custom.clear_caches()
    yield folder
    catalog_custom.clear_caches()


class FakeJob:
    """What `capacity.bench.job.JobRegistry` reads of a BenchJob: whether it runs, and stop
    (tests/test_access.py, tests/test_measure_preset.py)."""

    def __init__(self) -> None:
        self.running = True

    def stop(self, grace_s: float = 5.0) -> int:
        self.running = False
        return 0


@pytest.fixture()
def fake_jobs() -> tuple[list[FakeJob], Callable[[], FakeJob]]:
    """A registry's `start` callable that makes a running `FakeJob`, and the list of the jobs
    it made (a refused start makes none)."""
    jobs: list[FakeJob] = []

    def start() -> FakeJob:
        jobs.append(FakeJob())
        return jobs[-1]

    return jobs, start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    """moto's S3-compatible server in its own process, on 127.0.0.1 (one per test module:
    tests/test_bench_shards.py, tests/hostile/test_store_round3.py)."""
    pytest.importorskip("moto")
    pytest.importorskip("boto3")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("moto server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def bucket(s3_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A fresh bucket on that server, credentials in the environment (the secret must never
    reach a file: tests/test_bench_shards.py looks for it), CAPACITY_HOME in tmp_path."""
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-NEVER-WRITTEN")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("CAPACITY_HOME", str(tmp_path / "home"))
    name = f"runs-{time.time_ns()}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name
