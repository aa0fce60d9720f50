"""The README and docs/ are tested like code: their commands are the real ones, their output is
current, the CLI reference is generated from the parser, and every link leads somewhere."""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import fields
from pathlib import Path

import pytest

from capacity.cli.main import build_parser, main
from capacity.cli.reference import CLI_DOC, REGENERATE, render_reference, usage
from capacity.report.urlstate import ExplorerState

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
PENDING = ("configuration.md", "app-internals.md")
"""Docs written by parallel changes: linked already, checked like the others once they are here."""


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_quick_start_has_exactly_two_commands() -> None:
    section = read(README).split("## Quick start", 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["python3 dev.py app", "python3 dev.py test"]


def test_ci_runs_the_readme_test_command() -> None:
    assert "python3 dev.py test" in (ROOT / ".ci" / "run").read_text()


def test_readme_is_a_front_door() -> None:
    lines = read(README).splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move detail into docs/"


def test_readme_links_every_doc() -> None:
    text = read(README)
    missing = [p.name for p in DOCS if f"(docs/{p.name}" not in text]
    missing += [name for name in PENDING if f"(docs/{name})" not in text]
    assert missing == []


def test_cli_example_output_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    block = re.search(r"```console\n\$ capacity (plan[^\n]*)\n(.*?)```", read(ROOT / "docs" / "method.md"),
                      re.S)
    assert block is not None
    argv, expected = shlex.split(block.group(1)), block.group(2)
    assert main(argv) == 0
    assert capsys.readouterr().out.rstrip() == expected.rstrip()


def test_cli_reference_is_current() -> None:
    expected = render_reference(build_parser())
    current = CLI_DOC.read_text(encoding="utf-8") if CLI_DOC.exists() else ""
    assert current == expected, (
        f"docs/cli.md is not what the parser says: run `{REGENERATE}` and commit the result")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_reference_documents_every_flag_of_every_subcommand() -> None:
    text = render_reference(build_parser())
    subs = _subparsers()
    assert subs, "no subcommands found"
    for name, sub in subs.items():
        section = text.split(f"## `capacity {name}`", 1)[1].split("\n## `", 1)[0]
        flags = {o for a in sub._actions if a.help != argparse.SUPPRESS
                 for o in a.option_strings if o.startswith("--") and o != "--help"}
        missing = sorted(f for f in flags if f"`{f}" not in section and f"| {f}" not in section)
        assert missing == [], (name, missing)
        assert "--bench-dir" not in section  # hidden flags stay hidden


def test_reference_renders_argparse_features() -> None:
    outer = argparse.ArgumentParser(prog="capacity")
    p = outer.add_subparsers().add_parser(
        "demo", help="try it", description="Demo.\n\n  indented example",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    one = p.add_mutually_exclusive_group(required=True)
    one.add_argument("--file", metavar="FILE", help="a file")
    one.add_argument("--ref", action="store_true", help="the reference")
    p.add_argument("--fmt", choices=("a", "b"), default="a", help="format (default %(default)s)")
    p.add_argument("--eos", action=argparse.BooleanOptionalAction, default=True, help="eos | stop")
    p.add_argument("--secret", default="x", help=argparse.SUPPRESS)
    p.add_argument("--many", nargs="+", type=int, help="numbers")
    p.add_argument("--runs", default=str(ROOT / "data" / "bench"), help="runs")
    p.add_argument("--home", default=Path.home() / ".capacity", help="home")
    assert usage(p) == ("usage: capacity demo (--file FILE | --ref) [--fmt {a,b}] [--eos | --no-eos]\n"
                        + " " * 21 + "[--many MANY [MANY ...]] [--runs RUNS] [--home HOME]")
    # (wrapped between flags, never inside one)
    text = render_reference(outer)
    assert "| [`capacity demo`](#capacity-demo) | try it |" in text
    assert "| `--fmt {a,b}` | `a` | format (default a) |" in text
    assert "| `--eos \\| --no-eos` | on | eos \\| stop |" in text
    assert "--secret" not in text
    assert "| `--runs RUNS` | `data/bench` | runs |" in text  # the same on every machine
    assert "| `--home HOME` | `~/.capacity` | home |" in text
    assert "  indented example" in text


def test_every_url_parameter_is_documented() -> None:
    table = read(ROOT / "docs" / "app.md").split("## Links", 1)[1].split("\n## ", 1)[0]
    missing = [f.name for f in fields(ExplorerState) if f"`{f.name}`" not in table]
    assert missing == []


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose, re.M):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    prose = re.sub(r"^```.*?^```", "", read(page), flags=re.S | re.M)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here (tests talk to 127.0.0.1 only)
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() and file in {ROOT / "docs" / name for name in PENDING}:
            continue
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(read(file)):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_docs_cite_nothing_outside_the_repository(page: Path) -> None:
    text = read(page)
    found = [w for w in (r"\bSPEC\b", r"\bANCHORS\b", r"\bshared/", r"\bthe seed\b", r"\bseed's\b")
             if re.search(w, text)]
    assert found == [], "say 'the chapter' and cite docs/method.md instead"
