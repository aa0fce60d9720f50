#!/usr/bin/env python3
"""One entry point for a fresh machine: bootstrap the pinned environment, then run something.

    python3 dev.py app     start the Streamlit app on the bundled catalogs and sample data
    python3 dev.py test    lint (ruff), type-check (mypy, strict on capacity/), run the test suite;
                           extra arguments go to pytest: `python3 dev.py test -m "not slow and
                           not browser"` is the quick loop
    python3 dev.py bench   run every script in benchmarks/
    python3 dev.py realtest  llama.cpp on this CPU, end to end: build (once, ~15 min, cached
                           outside the checkout) and start llama-server, probe, bench, calibrate,
                           predict held-out points (docs/accuracy.md); `--quick` for a smoke run
    python3 dev.py docs    regenerate docs/cli.md from the command line's own definitions
    python3 dev.py run ... run a command in the environment (`python3 dev.py run capacity plan`)

Only Python 3.11+ and access to the package registries are needed: uv is installed into
`.tools/` when it is not already on PATH, and `uv sync --locked` builds `.venv/` from `uv.lock`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TOOLS = ROOT / ".tools"
UV_VERSION = "0.13.8"


def _bin(env: Path, name: str) -> Path:
    sub = "Scripts" if os.name == "nt" else "bin"
    return env / sub / name


def uv() -> str:
    """Path of a uv executable: the one on PATH, or one installed into .tools/ on first use."""
    found = shutil.which("uv")
    if found:
        return found
    local = _bin(TOOLS, "uv")
    if not local.exists():
        print(f"dev.py: installing uv {UV_VERSION} into {TOOLS} (first run only)", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(TOOLS)
        subprocess.run(
            [str(_bin(TOOLS, "python")), "-m", "pip", "install", "-q", f"uv=={UV_VERSION}"],
            check=True,
        )
    return str(local)


def sync() -> str:
    # trust the platform's certificate store (where a site's own CA lives), not only uv's
    # bundled roots; an explicit UV_SYSTEM_CERTS in the environment still wins
    os.environ.setdefault("UV_SYSTEM_CERTS", "1")
    exe = uv()
    subprocess.run([exe, "sync", "--locked", "--quiet"], cwd=ROOT, check=True)
    return exe


def run(exe: str, *cmd: str) -> int:
    return subprocess.run([exe, "run", "--locked", "--no-sync", *cmd], cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    task = argv[0] if argv else "help"
    if task not in {"app", "test", "bench", "docs", "run", "realtest"}:
        print(__doc__)
        return 0 if task in {"help", "-h", "--help"} else 2
    exe = sync()
    if task == "app":
        return run(exe, "streamlit", "run", "streamlit_app.py", *argv[1:])
    if task == "run":
        return run(exe, *argv[1:])
    if task == "realtest":
        return run(exe, "python", "-m", "capacity.cli.realtest", *argv[1:])
    if task == "docs":
        return run(exe, "python", "-m", "capacity.cli.reference", *argv[1:])
    if task == "bench":
        rc = 0
        for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
            print(f"== {script.name}", flush=True)
            rc |= run(exe, "python", str(script.relative_to(ROOT)))
        return rc
    for step in (
        ("ruff", "check", "."),
        ("mypy",),
        ("pytest", "-q", *argv[1:]),
    ):
        print("== " + " ".join(step), flush=True)
        rc = run(exe, *step)
        if rc != 0:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
