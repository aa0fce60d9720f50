"""What every benchmark script writes: one JSON file of measures, with the machine's state.

Each `benchmarks/bench_*.py` takes `--tiny` (the same code paths at the smallest sizes, in
seconds: what tests/test_benchmarks_tiny.py runs in the quick suite, so a schema change breaks a
test, not the docs), `--json` (write `benchmarks/results/<name>.json`) and `--json-out PATH`
(write there instead). A tiny run never writes into benchmarks/results/: with `--json` alone it
writes to a temporary folder and prints the path. `python3 dev.py docs` turns the committed
results into docs/benchmarks.md's table (benchmarks/report.py).

The file (`SCHEMA`): `script`, `name`, `tiny`, `source` ("measured", or "docs, <date>" for a
figure carried over from the docs and not re-measured), `date` (UTC, ISO 8601), `load_before`
and `load_after` (the 1-, 5- and 15-minute load averages), `cpu_count`, `commit` (the checkout's
HEAD, `dirty` when the tree had uncommitted changes), `python`, `argv`, `notes`, and `measures`:
each with `name`, `what`, `value`, `unit`, `target` (`{"op": "<" | ">=" ..., "value", "text"}`
or null: one target per measure) and `target_met` (null where there is no target, and in a tiny
run, whose sizes are not the target's).
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
"""Where full-size results are committed (one `<name>.json` per script)."""

SCHEMA = 1
OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
TOP_KEYS = ("schema", "script", "name", "tiny", "source", "date", "load_before", "load_after",
            "cpu_count", "commit", "python", "argv", "notes", "measures")
MEASURE_KEYS = ("name", "what", "value", "unit", "target", "target_met")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The three flags every script shares."""
    ap.add_argument("--tiny", action="store_true",
                    help="the same code paths at the smallest sizes, in seconds (the quick "
                         "suite's check that the script still runs); targets are not judged")
    ap.add_argument("--json", action="store_true",
                    help="write the results to benchmarks/results/<name>.json (with --tiny: to a "
                         "temporary folder, never over the committed results)")
    ap.add_argument("--json-out", type=Path, default=None, metavar="PATH",
                    help="write the results to PATH instead")


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 2 decimals."""
    return [round(x, 2) for x in os.getloadavg()]


def git_commit() -> str:
    """HEAD's short hash, with `-dirty` when the work tree has uncommitted changes; `unknown`
    outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               text=True, capture_output=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if dirty.strip() else "")


@dataclass
class Recorder:
    """Collects one script's measures; `write` puts them where the flags say."""

    name: str
    """The results file's stem: `benchmarks/results/<name>.json`."""
    args: argparse.Namespace
    notes: str = ""
    measures: list[dict[str, Any]] = field(default_factory=list)
    load_before: list[float] = field(default_factory=load_average)
    started: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def tiny(self) -> bool:
        return bool(getattr(self.args, "tiny", False))

    def add(self, name: str, value: float, unit: str, *, what: str,
            target: tuple[str, float, str] | None = None) -> None:
        """One measure. `target` is (operator, value in `unit`, the target as the docs say it),
        e.g. ("<", 1000, "under 1 s"); whether it is met is judged here, except in a tiny run."""
        if any(m["name"] == name for m in self.measures):
            raise ValueError(f"measure {name!r} recorded twice")
        met: bool | None = None
        tgt = None
        if target is not None:
            op, limit, text = target
            tgt = {"op": op, "value": limit, "text": text}
            met = None if self.tiny else bool(OPS[op](float(value), float(limit)))
        self.measures.append({"name": name, "what": what, "value": _round(value), "unit": unit,
                              "target": tgt, "target_met": met})

    def result(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "script": f"bench_{self.name}.py", "name": self.name,
            "tiny": self.tiny, "source": "measured",
            "date": self.started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load_before": self.load_before, "load_after": load_average(),
            "cpu_count": os.cpu_count(), "commit": git_commit(),
            "python": platform.python_version(), "argv": sys.argv[1:], "notes": self.notes,
            "measures": self.measures,
        }

    def write(self) -> Path | None:
        """Write the JSON where `--json` / `--json-out` say (None when neither was given) and
        print its path; a tiny run never writes into benchmarks/results/."""
        out: Path | None = getattr(self.args, "json_out", None)
        if out is None and getattr(self.args, "json", False):
            out = (Path(tempfile.mkdtemp(prefix="bench-tiny-")) / f"{self.name}.json"
                   if self.tiny else RESULTS / f"{self.name}.json")
        if out is None:
            return None
        if self.tiny and out.resolve().parent == RESULTS.resolve():
            raise SystemExit(f"a tiny run does not write into {RESULTS}: pass --json-out")
        data = self.result()
        problems = check(data)
        if problems:
            raise ValueError(f"malformed results for {self.name}: {problems}")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"results: {out}")
        return out


def _round(x: float) -> float:
    """Four significant digits: what the docs quote, without float noise in the file."""
    return float(f"{float(x):.4g}")


def check(data: Mapping[str, Any]) -> list[str]:
    """What is wrong with one results file (an empty list when it is well formed)."""
    problems = [f"missing key {k!r}" for k in TOP_KEYS if k not in data]
    if problems:
        return problems
    if data["schema"] != SCHEMA:
        problems.append(f"schema {data['schema']} is not {SCHEMA}")
    if not (isinstance(data["script"], str) and data["script"] == f"bench_{data['name']}.py"):
        problems.append(f"script {data['script']!r} does not match name {data['name']!r}")
    src = data["source"]
    if not (src == "measured" or (isinstance(src, str) and src.startswith("docs, "))):
        problems.append(f"source {src!r} is neither 'measured' nor 'docs, <date>'")
    try:
        datetime.strptime(str(data["date"]), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        problems.append(f"date {data['date']!r} is not YYYY-MM-DDTHH:MM:SSZ")
    for key in ("load_before", "load_after"):
        val = data[key]
        if val is not None and not (isinstance(val, list) and len(val) == 3
                                    and all(isinstance(x, int | float) and x >= 0 for x in val)):
            problems.append(f"{key} is not three load averages: {val!r}")
    if not isinstance(data["measures"], list) or not data["measures"]:
        return [*problems, "no measures"]
    names = [m.get("name") for m in data["measures"]]
    if len(set(names)) != len(names):
        problems.append(f"measure names repeat: {names}")
    for m in data["measures"]:
        problems += [f"measure {m.get('name')!r}: missing {k!r}" for k in MEASURE_KEYS
                     if k not in m]
        if any(k not in m for k in MEASURE_KEYS):
            continue
        label = f"measure {m['name']!r}"
        if not (isinstance(m["value"], int | float) and m["value"] == m["value"]):
            problems.append(f"{label}: value {m['value']!r} is not a number")
        if not (isinstance(m["unit"], str) and m["unit"] and isinstance(m["what"], str)
                and m["what"]):
            problems.append(f"{label}: empty unit or description")
        t = m["target"]
        if t is None:
            if m["target_met"] is not None:
                problems.append(f"{label}: target_met without a target")
            continue
        if not (isinstance(t, dict) and t.get("op") in OPS and isinstance(t.get("value"),
                                                                          int | float)
                and isinstance(t.get("text"), str) and t["text"]):
            problems.append(f"{label}: target {t!r} is not {{op, value, text}}")
            continue
        expect = (None if data["tiny"] or not isinstance(m["value"], int | float)
                  else OPS[t["op"]](float(m["value"]), float(t["value"])))
        if m["target_met"] != expect:
            problems.append(f"{label}: target_met {m['target_met']!r}, the value says {expect!r}")
    return problems
