"""The command-line reference, docs/cli.md, generated from the argparse definitions.

`render_reference(build_parser())` walks every subcommand the parser holds and writes its usage,
its description (as `--help` prints it) and one table per argument group: flag, default, help.
Nothing is typed twice: a flag added to a subcommand appears in docs/cli.md the next time it is
generated (`python3 dev.py docs`), and tests/test_docs.py fails while the file is not current.

The usage line is composed here rather than by argparse's HelpFormatter, whose wrapping depends
on the terminal width and on the Python version; the output depends only on the parser.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from capacity.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (defaults that are paths inside it are shown relative to it)."""

CLI_DOC = ROOT / "docs" / "cli.md"
"""Where `python3 dev.py docs` writes the reference."""

REGENERATE = "python3 dev.py docs"
"""The command that rewrites docs/cli.md (quoted in the file and by the test that checks it)."""

USAGE_WIDTH = 96
"""Characters per usage line before it wraps (at a flag boundary, never inside one)."""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of every subcommand, in the order `--help` lists them."""
    found: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest.upper()


def _invocation(action: argparse.Action) -> str:
    """How one argument is written: `--ctx TOKENS`, `--simulate`, `--ignore-eos | --no-ignore-eos`."""
    if not action.option_strings:
        return _metavar(action)
    if action.nargs == 0:
        return " | ".join(action.option_strings)
    name = max(action.option_strings, key=len)
    meta = _metavar(action)
    if action.nargs == "?":
        return f"{name} [{meta}]"
    if action.nargs == "*":
        return f"{name} [{meta} ...]"
    if action.nargs == "+":
        return f"{name} {meta} [{meta} ...]"
    if isinstance(action.nargs, int) and action.nargs > 1:
        return f"{name} " + " ".join([meta] * action.nargs)
    return f"{name} {meta}"


def _visible(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)


def usage(parser: argparse.ArgumentParser) -> str:
    """`usage: capacity NAME ...`, wrapped at USAGE_WIDTH: optional flags in brackets, a required
    choice between flags as `(--a A | --b B)`, an optional one as `[--a A | --b B]`."""
    items: list[str] = []
    grouped: dict[int, argparse._MutuallyExclusiveGroup] = {}
    for exclusive in parser._mutually_exclusive_groups:
        for action in exclusive._group_actions:
            grouped[id(action)] = exclusive
    done: set[int] = set()
    for action in parser._actions:
        if not _visible(action) or id(action) in done:
            continue
        group = grouped.get(id(action))
        if group is not None:
            members = [a for a in group._group_actions if _visible(a)]
            done.update(id(a) for a in members)
            inner = " | ".join(_invocation(a) for a in members)
            items.append(f"({inner})" if group.required else f"[{inner}]")
        elif action.required or not action.option_strings:
            items.append(_invocation(action))
        else:
            items.append(f"[{_invocation(action)}]")
    lines: list[str] = []
    line = "usage: " + parser.prog
    indent = " " * (len(line) + 1)
    for item in items:
        if len(line) + 1 + len(item) > USAGE_WIDTH and line.strip():
            lines.append(line)
            line = indent + item
        else:
            line = f"{line} {item}"
    lines.append(line)
    return "\n".join(lines)


def _help_text(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:  # argparse's own substitutions: %(default)s, %(prog)s, ...
        text = text % {**vars(action), "prog": prog}
    return text


def _default(action: argparse.Action) -> str:
    """The default as a user would type it; empty where there is none to show."""
    value = action.default
    if isinstance(action, argparse.BooleanOptionalAction):
        return "on" if value else "off"
    if action.nargs == 0 or value is None or value == "" or value == argparse.SUPPRESS:
        return ""
    if isinstance(value, (str, Path)) and Path(value).is_absolute():
        value = _portable(Path(value))
    return f"`{value}`"


def _portable(path: Path) -> str:
    """A path default as it reads on any machine: relative to the repository, or under `~`."""
    for base, shown in ((ROOT, ""), (Path.home(), "~/")):
        try:
            return shown + path.relative_to(base).as_posix()
        except ValueError:
            continue
    return path.as_posix()


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell (a pipe would end the cell)."""
    return " ".join(text.split()).replace("|", "\\|")


def _code_cell(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def render_subcommand(name: str, summary: str, parser: argparse.ArgumentParser) -> str:
    """One subcommand's section: heading, summary, usage, description and a table per group."""
    out = [f"## `{parser.prog}`", ""]
    if summary:
        out += [summary[0].upper() + summary[1:] + ".", ""]
    out += ["```text", usage(parser), "```", ""]
    if parser.description:
        out += ["```text", parser.description.strip("\n"), "```", ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if _visible(a)]
        if not actions:
            continue
        out += [f"**{group.title}**", "", "| flag | default | meaning |", "|---|---|---|"]
        for action in actions:
            out.append(f"| {_code_cell(_invocation(action))} | {_default(action)} | "
                       f"{_cell(_help_text(action, parser.prog))} |")
        out.append("")
    return "\n".join(out)


def render_reference(parser: argparse.ArgumentParser) -> str:
    """docs/cli.md: every subcommand of `parser`, in order, as Markdown (ends with a newline)."""
    subs = _subcommands(parser)
    head = [
        f"# `{parser.prog}` command-line reference",
        "",
        f"<!-- Generated from the argparse definitions by capacity/cli/reference.py; "
        f"do not edit by hand: run `{REGENERATE}`. -->",
        "",
        (parser.description or "").strip(),
        "",
        "Every subcommand also takes `-h`/`--help`, which prints the same text. Exit codes: "
        "0 done, 1 a check failed (for example `capacity size` found no option that meets "
        "every constraint), 2 bad input (one line on stderr, never a traceback). What the "
        "numbers mean: [method.md](method.md); measuring: [bench.md](bench.md); fitting: "
        "[calibration.md](calibration.md).",
        "",
        "| command | what |",
        "|---|---|",
    ]
    for _name, summary, sub in subs:
        anchor = sub.prog.replace(" ", "-").lower()
        head.append(f"| [`{sub.prog}`](#{anchor}) | {_cell(summary)} |")
    sections = [render_subcommand(name, summary, sub) for name, summary, sub in subs]
    text = "\n".join(head) + "\n\n" + "\n".join(sections)
    return text.rstrip("\n") + "\n"


def write_reference(path: Path = CLI_DOC) -> bool:
    """Regenerate docs/cli.md from `build_parser()`; True when the file changed."""
    text = render_reference(build_parser())
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


if __name__ == "__main__":
    changed = write_reference()
    print(f"{CLI_DOC.relative_to(ROOT)}: {'rewritten' if changed else 'already current'}")
