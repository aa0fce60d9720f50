"""The hostile suite (docs/reliability.md): servers, subprocesses, AppTests and hypothesis
fuzzing, seconds each. Every test here is `slow`: outside the quick loop, inside CI's run."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slow)
