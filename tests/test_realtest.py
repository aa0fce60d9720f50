"""`python3 dev.py realtest` (capacity.cli.realtest) without the engine: what it asks of the
other commands (issue 31). The run itself needs a llama-server build (tests/test_llamacpp.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capacity.bench import llamacpp
from capacity.bench.client import is_one_burst
from capacity.cli import realtest


class Stop(Exception):
    """Ends a realtest at the point a test has seen what it wanted."""


def _no_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A located binary instead of a build, and the cache in `tmp_path`."""
    binary = tmp_path / "llama-server"
    monkeypatch.setenv("CAPACITY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(llamacpp, "locate_or_build", lambda **kw: binary)
    return binary


def test_build_only_stops_after_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    binary = _no_build(monkeypatch, tmp_path)

    def no_models(folder: Path) -> dict[str, Path]:
        raise AssertionError("--build-only writes no model")

    monkeypatch.setattr(realtest, "write_models", no_models)
    assert realtest.main(["--build-only"]) == 0
    out = capsys.readouterr().out
    assert f"llama-server: {binary}" in out and "--build-only: done" in out
    assert "vocabulary" in out and "missing" in out  # no source unpacked in this cache


def test_the_probe_runs_with_the_server_s_threads(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The realtest's server runs with `-t N`: its probe measures with N BLAS threads."""
    _no_build(monkeypatch, tmp_path)
    monkeypatch.setattr(realtest, "write_models", lambda folder: {})
    calls: list[tuple[str, ...]] = []

    def capacity(self: realtest.Steps, *argv: str, capture: bool = False) -> str:
        calls.append(argv)
        return ""

    def stop(*args: object, **kwargs: object) -> None:
        raise Stop

    monkeypatch.setattr(realtest.Steps, "capacity", capacity)
    monkeypatch.setattr(realtest, "load_catalog", stop)
    with pytest.raises(Stop):
        realtest.main(["--threads", "3"])
    (probe,) = [c for c in calls if c[0] == "probe"]
    assert probe[probe.index("--threads") + 1] == "3"
    assert probe[probe.index("--device") + 1] == "cpu"


@pytest.mark.parametrize("levels", [realtest.GRID_LEVELS, "1,2,4", "8", "1,2,4,8"])
def test_no_level_of_a_full_run_is_one_burst(levels: str) -> None:
    """The bench's rule (3 x the concurrency, all passes together) holds for every run the
    realtest makes, so its own output carries no burst warning; --quick keeps 8 requests."""
    n = realtest.requests_for(levels)
    assert n >= realtest.REQUESTS
    assert not any(is_one_burst(int(c), n) for c in levels.split(","))
    assert realtest.requests_for(levels, quick=True) == realtest.QUICK_REQUESTS
    # the long-prompt check runs at concurrency 1 only: 2 or 3 requests are no burst
    assert not is_one_burst(1, realtest.LONG_HELD_REQUESTS)


def test_requests_grow_only_where_the_rule_asks() -> None:
    assert realtest.requests_for(realtest.GRID_LEVELS) == 24
    assert realtest.requests_for("1,2,4") == 16
