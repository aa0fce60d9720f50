"""The `capacity` command line: `capacity <subcommand> ...` (also `python -m capacity`).

Each subcommand lives in `capacity/cli/<name>.py` with two functions:
`add_parser(subparsers) -> argparse.ArgumentParser` and `run(args) -> int`.
A module that sets `PASSES_UNKNOWN_ARGS = True` (`app`) gets the arguments it does not define
as `args.extra`. Library errors (CapacityError) and what the system refuses (OSError: a folder that cannot be
written, a port in use) become one-line messages and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from capacity.cli.commands import SUMMARIES
from capacity.errors import CapacityError

SUBCOMMANDS: tuple[str, ...] = tuple(SUMMARIES)
"""Modules under capacity/cli/, in the order `--help` lists them."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """Bad flags: one line and exit code 2 (argparse's own behaviour, kept short)."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand, or with `only` one of them (a subcommand's module
    imports what it runs with: scipy, httpx, uvicorn..., so a command loads only its own)."""
    parser = _Parser(prog="capacity", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in SUBCOMMANDS if only is None else (only,):
        module = importlib.import_module(f"capacity.cli.{name.replace('-', '_')}")
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run,
                       _passes_unknown=getattr(module, "PASSES_UNKNOWN_ARGS", False))
    return parser


def summary_parser() -> argparse.ArgumentParser:
    """`capacity --help` (or a mistyped command): the commands and their summaries, without
    importing any of their modules."""
    parser = _Parser(prog="capacity", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, text in SUMMARIES.items():
        sub.add_parser(name, help=text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 a check failed, 2 bad input)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = args_list[0] if args_list else None
    parser = build_parser(first) if first in SUBCOMMANDS else summary_parser()
    try:
        args, extra = parser.parse_known_args(args_list)
        if extra and not args._passes_unknown:
            parser.parse_args(args_list)  # argparse's own message for unknown arguments
        args.extra = extra
    except SystemExit as exc:  # --help (0) or a bad flag (2): argparse already printed why
        return exc.code if isinstance(exc.code, int) else 2
    try:
        code: int = args._run(args)
    except CapacityError as exc:
        print(f"capacity {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the system refused what the arguments ask: a folder that cannot
        # be written, an address in use or that does not resolve; not a bug of ours
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"capacity {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"capacity {args.command}: interrupted", file=sys.stderr)
        return 130
    return code
