"""docs/bench.md documents every stored column, every failure type and every bench flag (a missing
one fails); docs/cli.md lists the flags too, but bench.md says what they mean for a measurement."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from capacity.bench.metrics import ERROR_TYPES, REQUEST_COLUMNS, SUMMARY_COLUMNS
from capacity.cli.main import build_parser

DOC = (Path(__file__).resolve().parents[1] / "docs" / "bench.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("column", sorted(set(REQUEST_COLUMNS) | set(SUMMARY_COLUMNS)))
def test_column_documented(column: str) -> None:
    # percentile families are documented once, as `tpot_*` and the like
    family = re.sub(r"_(mean|p\d+|max)_ms$", "_*", column)
    assert f"`{column}`" in DOC or (family != column and f"`{family}`" in DOC), column


@pytest.mark.parametrize("error_type", ERROR_TYPES)
def test_error_type_documented(error_type: str) -> None:
    assert f"`{error_type}`" in DOC


def test_bench_flags_documented() -> None:
    action = next(a for a in build_parser("bench")._actions
                  if isinstance(a, argparse._SubParsersAction))
    sub = action.choices["bench"]
    flags = {o for a in sub._actions for o in a.option_strings if o.startswith("--")} - {"--help"}
    assert "--base-url" in flags
    missing = [f for f in sorted(flags) if f"`{f}" not in DOC and f"/ {f}" not in DOC]
    assert not missing, missing
