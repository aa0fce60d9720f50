"""The README is tested like code: its commands are the real ones and its output is current."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from capacity.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_quick_start_has_exactly_two_commands() -> None:
    section = README.split("## Quick start", 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["python3 dev.py app", "python3 dev.py test"]


def test_ci_runs_the_readme_test_command() -> None:
    assert "python3 dev.py test" in (ROOT / ".ci" / "run").read_text()


def test_cli_example_output_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    block = re.search(r"```console\n\$ capacity (plan[^\n]*)\n(.*?)```", README, re.S)
    assert block is not None
    argv, expected = shlex.split(block.group(1)), block.group(2)
    assert main(argv) == 0
    assert capsys.readouterr().out.rstrip() == expected.rstrip()


def test_every_plan_flag_is_documented() -> None:
    sub = build_parser()._subparsers._group_actions[0].choices["plan"]  # type: ignore[union-attr]
    flags = {o for a in sub._actions for o in a.option_strings if o.startswith("--")}
    flags -= {"--help", "--cny-per-usd", "--allow-long-context"}
    missing = [f for f in sorted(flags) if f"`{f}" not in README]
    assert missing == []
