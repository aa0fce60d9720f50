"""The hostile suite (docs/reliability.md): servers, subprocesses, AppTests and hypothesis
fuzzing, seconds each. Every test here is `slow`: outside the quick loop, inside CI's run."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from servers_server import HostileServer, Route

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def bounded(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail (not hang) a test that runs past its module's LIMIT_S seconds (default 90)."""
    limit_s = int(getattr(request.module, "LIMIT_S", 90))

    def stop(*_: Any) -> None:
        raise TimeoutError(f"hostile test ran past {limit_s} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(limit_s)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture()
def serve() -> Iterator[Callable[[Route], HostileServer]]:
    """Start hostile servers on 127.0.0.1 (`servers_server.HostileServer`); all closed after."""
    servers: list[HostileServer] = []

    def start(route: Route) -> HostileServer:
        s = HostileServer(route)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()
