"""`capacity app`: start the Streamlit app (Explorer, Planner, Measure, Results, Catalog).

    capacity app                          http://localhost:8501
    capacity app --server.port 8600       any other argument goes to `streamlit run`

Runs `streamlit run streamlit_app.py` with the app's folder as the working directory (so its
`.streamlit/config.toml` applies and its `app` package imports): the checkout's root when
running from a checkout, else the copy installed with the package (`capacity/_app`). The data
and the user's state are found as everywhere else (docs/configuration.md, docs/app.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from typing import Any

from capacity import workspace
from capacity.cli.commands import SUMMARIES
from capacity.errors import InputError

PASSES_UNKNOWN_ARGS = True
"""`capacity.cli.main` hands every argument it does not know to `run` as `args.extra`."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "app", help=SUMMARIES["app"],
        usage="capacity app [-h] [STREAMLIT_RUN_ARGUMENTS ...]",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    return p


def command(extra: list[str]) -> tuple[list[str], str]:
    """The `streamlit run` command line and its working directory."""
    folder = workspace.app_dir()
    entry = folder / "streamlit_app.py"
    if not entry.is_file():
        raise InputError(f"{entry}: the app is not installed with this package")
    return [sys.executable, "-m", "streamlit", "run", str(entry), *extra], str(folder)


def run(args: argparse.Namespace) -> int:
    cmd, cwd = command(list(getattr(args, "extra", [])))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (cwd, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env)
    if hasattr(signal, "SIGTERM"):  # stopping the launcher stops the server
        signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        return proc.wait()
    except KeyboardInterrupt:  # Ctrl+C reached Streamlit too: let it shut down on its own
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.terminate()
            return proc.wait()
