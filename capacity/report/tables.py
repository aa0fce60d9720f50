"""Plain-text, Markdown and CSV rendering of small tables (for the CLI and exports).

CSV text cells (the headers and every value given as text: names, labels, a server's model
id) go through `capacity.untrusted.spreadsheet_text`, so none of them opens as a formula in a
spreadsheet; numbers stay numbers (docs/reliability.md)."""

from __future__ import annotations

import csv
import io
import numbers
from collections.abc import Sequence

from capacity.untrusted import spreadsheet_text, terminal_text


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], fmt: str = "text") -> str:
    """Render a table as aligned `text`, GitHub `markdown` or `csv`."""
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([spreadsheet_text(str(h)) for h in headers])
        w.writerows([_csv_cell(v) for v in row] for row in rows)
        return buf.getvalue()
    cells = [[terminal_text(_cell(v)) for v in row] for row in rows]   # text a server wrote
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


def _csv_cell(v: object) -> str:
    """A CSV cell: a number (or none) as `_cell` writes it, anything else as neutralised text
    whose line breaks are `\n` (quoted by the writer: one cell; a bare `\r` would end the row,
    and the next would start with the rest of the text)."""
    if v is None or isinstance(v, numbers.Number):
        return _cell(v)
    return spreadsheet_text(_cell(v)).replace("\r\n", "\n").replace("\r", "\n")


def _cell(v: object) -> str:
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return "-"
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return "-" if v is None else str(v)
