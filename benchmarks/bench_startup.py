"""Benchmark: how long a command takes from the shell, start-up included (docs/benchmarks.md).

Runs each command `--repeat` times as a user would (the `capacity` script of this environment,
a new process each time) and reports the median wall time, with the machine's load average
before and after (a busy machine doubles these). Targets (issue 30): `capacity size --dau 500`
under 0.5 s and `capacity plan` under 0.3 s on an idle machine. Also lists the five slowest
imports of `capacity size` (`python -X importtime`), so a regression names its cause.

The commands run as an installed package runs: Python may write its bytecode (a shell with
PYTHONDONTWRITEBYTECODE set would recompile every module edited since the last cached copy, at
every run), and the warm-up run also leaves the language files' parsed copy
(`capacity.report.i18n.read_toml_cached`) in place.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 5] [--instructions] [--tiny]
        [--json | --json-out PATH]

`--tiny`: each command once, no warm-up run. `--instructions`: also count the instructions each
command executes, once, under valgrind's callgrind (about 50 times slower than the command; a
count the machine's load does not move, to compare two versions on a busy machine; run-to-run
spread about 1 %).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import Recorder, add_arguments  # noqa: E402

COMMANDS: dict[str, tuple[str, list[str], float]] = {
    "capacity size --dau 500": ("size_s", ["size", "--dau", "500"], 0.5),
    "capacity plan": ("plan_s", ["plan"], 0.3),
    "capacity --help": ("help_s", ["--help"], 0.3),
}
"""label: (the measure's name, the arguments, the target in s)."""


def _env() -> dict[str, str]:
    """This environment, but letting Python cache bytecode as a user's install does."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("capacity")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "capacity"]


def _slowest_imports(args: list[str], n: int = 5) -> list[tuple[str, float]]:
    code = ("import sys; from capacity.cli import main; sys.argv = ['capacity', *sys.argv[1:]]; "
            "main()")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args],
                         capture_output=True, text=True, cwd=ROOT, env=_env())
    rows = []
    for line in out.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].removeprefix(" ")
        if not name.startswith(" "):  # a top-level import (nested ones are indented)
            rows.append((name, int(parts[1]) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def _instructions(cmd: list[str]) -> int | None:
    """Instructions one run of `capacity CMD` executes (callgrind's "I refs"); None without
    valgrind."""
    import re
    import shutil
    import tempfile

    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["valgrind", "--tool=callgrind",
                              f"--callgrind-out-file={tmp}/cg.out", *_script(), *cmd],
                             capture_output=True, text=True, cwd=ROOT, env=_env())
    m = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    return int(m.group(1).replace(",", "")) if m else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--instructions", action="store_true",
                    help="also count each command's instructions under callgrind (slow)")
    add_arguments(ap)
    args = ap.parse_args(argv)
    rec = Recorder("startup", args)
    repeat = 1 if args.tiny else args.repeat
    load_before = os.getloadavg()[0]
    script = _script()
    for label, (name, cmd, target_s) in COMMANDS.items():
        if not args.tiny:
            # warm the page cache, write the bytecode and the language files' parsed copy
            subprocess.run([*script, *cmd], capture_output=True, cwd=ROOT, env=_env())
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run([*script, *cmd], capture_output=True, cwd=ROOT, check=True, env=_env())
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        rec.add(name, med, "s", target=("<", target_s, f"under {target_s:g} s"),
                what=f"`{label}` from the shell, start-up included (median of {repeat}, min "
                     f"{min(times):.2f} s, max {max(times):.2f} s)")
        print(f"{label:28s} median {med:.2f} s (min {min(times):.2f}, max {max(times):.2f}) over "
              f"{repeat}; target < {target_s} s: {'met' if med < target_s else 'NOT met'}")
        count = _instructions(cmd) if args.instructions else None
        if count is not None:
            rec.add(name.removesuffix("_s") + "_instructions", count / 1e6, "M",
                    what=f"instructions one `{label}` executes (valgrind callgrind, start-up "
                         "included; not moved by the machine's load)")
            print(f"{label:28s} {count / 1e6:,.0f} M instructions")
    load_after = os.getloadavg()[0]
    top = _slowest_imports(COMMANDS["capacity size --dau 500"][1])
    print("slowest top-level imports of `capacity size`: "
          + ", ".join(f"{name} {s * 1e3:.0f} ms" for name, s in top))
    print(f"load average (1 min) {load_before:.2f} before, {load_after:.2f} after; "
          f"{os.cpu_count()} cores")
    rec.notes = "slowest top-level imports of `capacity size`: " + ", ".join(
        f"{name} {s * 1e3:.0f} ms" for name, s in top)
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
