"""The `capacity` command line: `main` dispatches to one module per subcommand."""

from capacity.cli.main import main

__all__ = ["main"]
