"""The `capacity` command line: `capacity <subcommand> ...` (also `python -m capacity`).

Each subcommand lives in `capacity/commands/<name>.py` with two functions:
`add_parser(subparsers) -> argparse.ArgumentParser` and `run(args) -> int`.
Library errors (CapacityError) become one-line messages and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from capacity.errors import CapacityError

SUBCOMMANDS: tuple[str, ...] = ("plan", "size", "calibrate", "bench", "sim-server", "runs")
"""Modules under capacity/commands/, in the order `--help` lists them."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """Bad flags: one line and exit code 2 (argparse's own behaviour, kept short)."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="capacity", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"capacity.commands.{name.replace('-', '_')}")
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 a check failed, 2 bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help (0) or a bad flag (2): argparse already printed why
        return exc.code if isinstance(exc.code, int) else 2
    try:
        code: int = args._run(args)
    except CapacityError as exc:
        print(f"capacity {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"capacity {args.command}: interrupted", file=sys.stderr)
        return 130
    return code
