#!/usr/bin/env python3
"""One entry point for a fresh machine: bootstrap the pinned environment, then run something.

    python3 dev.py app     start the Streamlit app on the bundled catalogs and sample data
    python3 dev.py test    lint (ruff), type-check (mypy, strict on capacity/), run the test suite
                           (on one worker per CPU, then the wall-clock `timing` tests alone);
                           extra arguments go to one pytest run instead: `python3 dev.py test -m
                           "not slow and not browser" -n 2` is the quick loop
    python3 dev.py bench   run every script in benchmarks/ at full size, writing benchmarks/results/
                           (then `dev.py docs` regenerates docs/benchmarks.md's table); `--tiny`
                           runs each at its smallest sizes and leaves the results alone; names
                           (`grid duckdb`) run only those
    python3 dev.py realtest  llama.cpp on this CPU, end to end: build (once, 5 to 25 minutes on
                           a 2-core machine, cached outside the checkout) and start llama-server,
                           probe, bench, calibrate, predict held-out points (docs/accuracy.md);
                           `--quick` for a smoke run, `--build-only` to build (or find) the server
                           and stop
    python3 dev.py docs    regenerate docs/cli.md from the command line's own definitions, and
                           docs/benchmarks.md's table from benchmarks/results/*.json
    python3 dev.py newest  the core tests (formulas, golden example, queueing, the bench client
                           with its kernel stamps, the CLI) on the newest CPython that
                           `requires-python` allows and this machine has (3.13), in .venv-newest/
    python3 dev.py mutate [module ...]  mutation testing with mutmut (not part of `test`): mutate
                           capacity/model/ and capacity/plan/queueing.py (or the modules named:
                           `capacity/model/kv.py`, `capacity.model.kv` or a folder), run the fast
                           unit tests that reach each mutant ([tool.mutmut] in pyproject.toml),
                           print the score per module and the surviving mutants (`--diff` shows
                           each survivor's diff; `--report` only summarises the last run). Hours
                           for the whole default set on 2 cores; docs/testing.md
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
    # bytecode compiled at install: a shell with PYTHONDONTWRITEBYTECODE set (CI images, some
    # containers) would otherwise recompile pandas, altair and streamlit in every process, several
    # seconds per start (docs/benchmarks.md, "Start-up"); later syncs compile only what changed
    subprocess.run([exe, "sync", "--locked", "--quiet", "--compile-bytecode"], cwd=ROOT, check=True)
    subprocess.run([str(_bin(ROOT / ".venv", "python")), "-m", "compileall", "-q", "capacity", "app",
                    "pages", "streamlit_app.py"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return exe


NEWEST = (3, 13)
"""The newest CPython `requires-python` allows (pyproject.toml): `dev.py newest` tests on it."""
NEWEST_TESTS = ("tests/test_seed_golden.py", "tests/test_formulas.py", "tests/test_stats.py",
                "tests/test_queueing.py", "tests/test_netstamp.py", "tests/test_bench_client.py",
                "tests/test_cli_plan.py", "tests/test_size_cli.py", "tests/test_layers.py")


def newest_python() -> str | None:
    """A working CPython NEWEST interpreter: a pyenv install, else `python3.13` on PATH."""
    name = "python{}.{}".format(*NEWEST)
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = [str(c / "bin" / "python3") for c in sorted(pyenv.glob("{}.{}.*".format(*NEWEST)),
                                                       reverse=True)]
    found += [p for p in [shutil.which(name)] if p]
    for exe in found:
        try:  # a pyenv shim with no such version installed exits non-zero
            subprocess.run([exe, "-c", "pass"], check=True, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        return exe
    return None


def newest(exe: str, argv: list[str]) -> int:
    """Install the project (from PyPI's wheels for that Python) into .venv-newest and run the core
    tests there; returns 1 when no such interpreter exists and `--require` was given."""
    python = newest_python()
    version = "{}.{}".format(*NEWEST)
    if python is None:
        print(f"dev.py newest: no CPython {version} on this machine (python{version} on PATH or "
              "under ~/.pyenv/versions); not tested on it", file=sys.stderr)
        return 1 if "--require" in argv else 0
    env = ROOT / ".venv-newest"
    subprocess.run([exe, "venv", "--quiet", "--allow-existing", "--python", python, str(env)],
                   cwd=ROOT, check=True)
    py = str(_bin(env, "python"))
    subprocess.run([exe, "pip", "install", "--quiet", "--python", py, ".", "pytest", "hypothesis",
                    "pytest-xdist"], cwd=ROOT, check=True)
    print(f"== pytest on {subprocess.check_output([py, '--version'], text=True).strip()}", flush=True)
    args = [a for a in argv if a != "--require"]
    return subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NEWEST_TESTS, *args],
                          cwd=ROOT).returncode


def run(exe: str, *cmd: str) -> int:
    # Python may cache what it compiles (the checkout's own __pycache__, git-ignored) even where
    # the shell says PYTHONDONTWRITEBYTECODE: collecting the tests takes 4 s instead of 13
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run([exe, "run", "--locked", "--no-sync", *cmd], cwd=ROOT, env=env).returncode


def bench(exe: str, argv: list[str]) -> int:
    """Run the benchmark scripts (all, or those named), each writing its results JSON; with
    `--tiny`, at their smallest sizes into a temporary folder. A script without the shared flags
    (benchmarks/record.py) runs as it is, at full size only."""
    tiny = "--tiny" in argv
    names = [a.removeprefix("bench_").removesuffix(".py") for a in argv if a != "--tiny"]
    rc = 0
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        if names and script.stem.removeprefix("bench_") not in names:
            continue
        shared = "add_arguments(" in script.read_text(encoding="utf-8")
        if tiny and not shared:
            print(f"== {script.name}: no --tiny mode, skipped", flush=True)
            continue
        flags = (["--tiny"] if tiny else []) + (["--json"] if shared else [])
        print(f"== {script.name} {' '.join(flags)}", flush=True)
        rc |= run(exe, "python", str(script.relative_to(ROOT)), *flags)
    return rc


MUTATE_DEFAULT = ("capacity/model", "capacity/plan/queueing.py")
"""What `dev.py mutate` mutates when no module is named (the issue's target: >= 90% killed)."""
MUTANT_STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
                 34: "skipped", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout",
                 255: "timeout", 37: "caught by type check"}
"""mutmut 3's exit codes per mutant (mutmut/stats.py); anything else is 'suspicious'."""


def mutant_files(targets: list[str]) -> list[Path]:
    """The module files a `dev.py mutate` argument names: a path, a dotted module or a folder."""
    files: list[Path] = []
    for t in targets:
        p = ROOT / (t if t.endswith(".py") or "/" in t else t.replace(".", "/"))
        if p.is_dir():
            files += sorted(q for q in p.glob("*.py") if q.name != "__init__.py")
        else:
            files.append(p if p.suffix == ".py" else p.with_suffix(".py"))
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"dev.py mutate: no such module: {', '.join(missing)}")
    return files


def mutation_score(files: list[Path]) -> tuple[list[tuple[str, dict[str, int]]], list[str]]:
    """Per module, mutants by status from mutmut's results (mutants/<path>.meta), and the names of
    the surviving ones. Score = (killed + timeout) / (all - skipped), as mutmut's own badge,
    over the mutants checked so far (an interrupted run's others are counted as 'not checked')."""
    import json

    rows, survivors = [], []
    for f in files:
        rel = f.relative_to(ROOT)
        meta = ROOT / "mutants" / (str(rel) + ".meta")
        codes = (json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
                 if meta.exists() else {})
        counts: dict[str, int] = {}
        for name, code in codes.items():
            status = MUTANT_STATUS.get(code, "not checked" if code is None else "suspicious")
            counts[status] = counts.get(status, 0) + 1
            if status in {"survived", "no tests", "suspicious"}:
                survivors.append(f"{name}: {status}")
        rows.append((str(rel), counts))
    return rows, sorted(survivors)


def _score(counts: dict[str, int]) -> str:
    tested = sum(counts.values()) - counts.get("skipped", 0) - counts.get("not checked", 0)
    if tested == 0:
        return "no mutants checked"
    done = counts.get("killed", 0) + counts.get("timeout", 0)
    return f"{100 * done / tested:.1f}% ({done} of {tested} killed)"


def mutate(exe: str, argv: list[str]) -> int:
    """Run mutmut over the modules named (default MUTATE_DEFAULT) and summarise the results."""
    targets = [a for a in argv if not a.startswith("--")] or list(MUTATE_DEFAULT)
    files = mutant_files(targets)
    rc = 0
    if "--report" not in argv:
        patterns = [".".join(f.relative_to(ROOT).with_suffix("").parts) + ".*" for f in files]
        # one mutant at a time per core: other jobs share this machine
        children = str(max(1, min(2, os.cpu_count() or 1)))
        rc = run(exe, "mutmut", "run", "--max-children", children, *patterns)
    rows, survivors = mutation_score(files)
    total: dict[str, int] = {}
    print("\n== mutation score (killed or timed out / mutants checked)")
    for rel, counts in rows:
        print(f"{rel:45s} {_score(counts)}" + "".join(
            f", {v} {k}" for k, v in sorted(counts.items()) if k not in {"killed", "timeout"}))
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    print(f"{'all':45s} {_score(total)}")
    print(f"\n== surviving mutants ({len(survivors)}; `dev.py run mutmut show NAME` for the diff)")
    for line in survivors:
        print(line)
        if "--diff" in argv:
            run(exe, "mutmut", "show", line.split(":")[0])
    return rc


def pytest_steps(args: list[str]) -> list[tuple[str, ...]]:
    """The pytest runs of `dev.py test`: with no arguments (the README's command, CI's) every
    test on one worker process per CPU (pytest-xdist), then the `timing` tests alone, each
    comparing wall-clock times that a second worker's load would disturb (on 2 cores: 10 minutes
    in all, against 17 on one process); with arguments, one run of pytest with them as given."""
    if args:
        return [("pytest", "-q", *args)]
    return [("pytest", "-q", "-n", "auto", "-m", "not timing"), ("pytest", "-q", "-m", "timing")]


def main(argv: list[str]) -> int:
    task = argv[0] if argv else "help"
    if task not in {"app", "test", "bench", "docs", "run", "realtest", "newest", "mutate"}:
        print(__doc__)
        return 0 if task in {"help", "-h", "--help"} else 2
    exe = sync()
    if task == "app":
        return run(exe, "streamlit", "run", "streamlit_app.py", *argv[1:])
    if task == "run":
        return run(exe, *argv[1:])
    if task == "newest":
        return newest(exe, argv[1:])
    if task == "realtest":
        return run(exe, "python", "-m", "capacity.cli.realtest", *argv[1:])
    if task == "docs":
        rc = run(exe, "python", "-m", "capacity.cli.reference", *argv[1:])
        return rc or run(exe, "python", "benchmarks/report.py")
    if task == "bench":
        return bench(exe, argv[1:])
    if task == "mutate":
        return mutate(exe, argv[1:])
    for step in (("ruff", "check", "."), ("mypy",), *pytest_steps(argv[1:])):
        print("== " + " ".join(step), flush=True)
        rc = run(exe, *step)
        if rc != 0:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
