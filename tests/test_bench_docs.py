"""The README documents every stored column and every bench flag (a missing one fails)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from capacity.bench.metrics import ERROR_TYPES, REQUEST_COLUMNS, SUMMARY_COLUMNS
from capacity.cli.main import build_parser

DOC = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("column", sorted(set(REQUEST_COLUMNS) | set(SUMMARY_COLUMNS)))
def test_column_documented(column: str) -> None:
    # percentile families are documented once, as `tpot_*` and the like
    family = re.sub(r"_(mean|p\d+|max)_ms$", "_*", column)
    assert f"`{column}`" in DOC or (family != column and f"`{family}`" in DOC), column


@pytest.mark.parametrize("error_type", ERROR_TYPES)
def test_error_type_documented(error_type: str) -> None:
    assert f"`{error_type}`" in DOC


def test_bench_flags_documented() -> None:
    sub = build_parser()._subparsers._group_actions[0].choices["bench"]  # type: ignore[union-attr]
    flags = {o for a in sub._actions for o in a.option_strings if o.startswith("--")} - {"--help"}
    missing = [f for f in sorted(flags) if f"`{f}" not in DOC and f"/ {f}" not in DOC]
    assert not missing, missing
