"""docs/benchmarks.md's table of targets and latest figures, generated from benchmarks/results/.

One row per measure of every committed results file (benchmarks/record.py): the measure, its
one target, the latest figure, whether it is met, and when, at what machine load and on which
commit it was taken (or, for a figure carried over from the docs, that it was not re-measured).
`python3 dev.py docs` rewrites the part between the markers; tests/test_docs.py fails while it
is not current with the JSON.

    .venv/bin/python benchmarks/report.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import RESULTS, check  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- bench-results:begin -->"
END = "<!-- bench-results:end -->"
REGENERATE = "python3 dev.py docs"


def load_results(folder: Path = RESULTS) -> list[dict[str, Any]]:
    """Every committed results file, by script name; raises on a malformed or tiny one."""
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        problems = check(data)
        if problems:
            raise ValueError(f"{path}: {problems}")
        if data["tiny"]:
            raise ValueError(f"{path}: a tiny run is not a result")
        out.append(data)
    return sorted(out, key=lambda d: (d["script"], d["name"]))


def _number(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _value(m: Mapping[str, Any]) -> str:
    unit = m["unit"]
    if unit == "flag":
        return "yes" if m["value"] else "no"
    sep = "" if unit in {"%", "x"} else " "
    return f"{_number(float(m['value']))}{sep}{unit}"


def _met(m: Mapping[str, Any]) -> str:
    if m["target"] is None:
        return "(reported)"
    return "met" if m["target_met"] else "**not met**"


def _load(d: Mapping[str, Any]) -> str:
    if d["load_before"] is None or d["load_after"] is None:
        return "(see the note)"
    b, a = d["load_before"], d["load_after"]
    return f"{b[0]:.1f} / {b[1]:.1f} / {b[2]:.1f} -> {a[0]:.1f}"


def _when(d: Mapping[str, Any]) -> str:
    date = str(d["date"]).replace("T", " ")[:16]
    if d["source"] != "measured":
        return f"{date}, not re-measured ({d['source']})"
    return date


def render(results: Iterable[Mapping[str, Any]]) -> str:
    """The generated part: a note, then one table row per measure."""
    results = list(results)
    lines = [
        BEGIN,
        f"<!-- generated from benchmarks/results/*.json by `{REGENERATE}`; do not edit -->",
        "",
        "| script | measure | target | latest | | date (UTC) | load 1 / 5 / 15 min -> after "
        "| commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in results:
        for m in d["measures"]:
            target = "" if m["target"] is None else m["target"]["text"]
            what = str(m["what"]).replace("|", "\\|")
            lines.append(f"| `{d['script']}` | {what} | {target} | {_value(m)} | {_met(m)} | "
                         f"{_when(d)} | {_load(d)} | `{d['commit']}` |")
    notes = [(d["script"], d["notes"]) for d in results if d["notes"]]
    if notes:
        lines.append("")
        lines += [f"- `{script}`: {note}" for script, note in notes]
    lines.append(END)
    return "\n".join(lines)


def update(text: str, results: Iterable[Mapping[str, Any]]) -> str:
    """`text` with the part between the markers replaced by `render(results)`."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOC.name} has no {BEGIN} ... {END} part")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return head + render(results) + tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the table is not current")
    args = ap.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    new = update(text, load_results())
    if args.check:
        return 0 if new == text else 1
    if new != text:
        DOC.write_text(new, encoding="utf-8")
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
