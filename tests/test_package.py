"""The package's public face: a sorted `__all__` that exports what it says, and a pure library."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import capacity

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_sorted_and_exported() -> None:
    assert capacity.__all__ == sorted(capacity.__all__)
    for name in capacity.__all__:
        assert hasattr(capacity, name), name


def test_docstring_example_runs() -> None:
    result = doctest.testmod(capacity, verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_library_never_imports_streamlit() -> None:
    pattern = re.compile(r"^\s*(import|from)\s+streamlit", re.MULTILINE)
    offenders = [p for p in (ROOT / "capacity").rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
