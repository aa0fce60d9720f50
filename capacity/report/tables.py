"""Plain-text, Markdown and CSV rendering of small tables (for the CLI and exports)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], fmt: str = "text") -> str:
    """Render a table as aligned `text`, GitHub `markdown` or `csv`."""
    cells = [[_cell(v) for v in row] for row in rows]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(headers)
        w.writerows(cells)
        return buf.getvalue()
    if fmt == "markdown":
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in cells]
        return "\n".join(lines) + "\n"
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    def line(r: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                         enumerate(zip(r, widths, strict=True))).rstrip()
    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out) + "\n"


def _cell(v: object) -> str:
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return "-"
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return "-" if v is None else str(v)
