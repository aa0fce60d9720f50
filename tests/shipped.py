"""The accuracy scorecard's sections over the shipped files, each computed once per test process.

Every section is a pure function of data/ and the catalog (`capacity validate` relies on that
to run them in worker processes and print the same bytes), so the tests that read a section as
shipped share one computation instead of each paying its seconds again (the typical basis' was
computed by six tests, the whole scorecard by three CLI tests). A test that patches an input
computes its own section instead; nothing may change what this returns (frozen records)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from capacity.cli import validate as cli_validate

_section = cli_validate.section   # the real one, whatever a test patches into the module


@functools.cache
def shipped(name: str) -> Any:
    """`capacity validate`'s section `name` (cli/validate.py's SECTIONS), as shipped."""
    return _section(name)


def share_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `capacity validate` run in this process (`--jobs 1`) read the shared sections: the
    command's wiring is under test, each section's content has tests of its own."""
    def section(name: str, method: str | None = None) -> Any:
        return shipped(name) if method is None else _section(name, method)

    monkeypatch.setattr(cli_validate, "section", section)
