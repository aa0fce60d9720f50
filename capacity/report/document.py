"""A document as a list of blocks (heading, paragraph, table), rendered to GitHub Markdown or
to PDF (fpdf2): the quote's and the mix quote's one layout.

Chinese needs a CJK font (Debian `fonts-noto-cjk`): it is looked up in `CAPACITY_CJK_FONT`, then
in the usual font folders (`find_cjk_font`). Without one, a Chinese PDF falls back to English
and says so. Headings stay with the table or paragraph that follows them, and table columns
are sized to their content.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from capacity import workspace
from capacity.report.i18n import t

CJK_FONT_CANDIDATES: tuple[tuple[str, int], ...] = (
    ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2),
    ("/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc", 2),
    ("/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc", 2),
    ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", 0),
    ("/usr/share/fonts/truetype/arphic/uming.ttc", 0),
    ("/System/Library/Fonts/PingFang.ttc", 0),
    ("C:/Windows/Fonts/msyh.ttc", 0),
)
"""(path, index in the collection) tried in order; index 2 of Noto Sans CJK is Simplified
Chinese."""


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


Block = Heading | Para | Table


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    """Blocks as GitHub Markdown."""
    out: list[str] = []
    first = True
    for blk in blocks:
        if isinstance(blk, Heading):
            out.append(("# " if first else "## ") + blk.text)
            first = False
        elif isinstance(blk, Para):
            out.append(blk.text)
        else:
            out.append("| " + " | ".join(_md_cell(h) for h in blk.headers) + " |")
            out.append("|" + "|".join("---" for _ in blk.headers) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in blk.rows]
        out.append("")
    return "\n".join(out)


def find_cjk_font() -> tuple[Path, int] | None:
    """A font file with Chinese glyphs and its index in the collection, or None.

    `CAPACITY_CJK_FONT` (a path, optionally `path#index`) wins; then the usual folders.
    """
    env = workspace.cjk_font()
    if env:
        name, _, number = env.partition("#")
        if Path(name).is_file():
            return Path(name), int(number) if number.isdigit() else 0
    for path, index in CJK_FONT_CANDIDATES:
        if Path(path).is_file():
            return Path(path), index
    return None


def blocks_pdf(make: Callable[[str], list[Block]], *, lang: str = "en",
               cjk_font: tuple[Path, int] | None | bool = True) -> bytes:
    """PDF bytes of the blocks `make(lang)` returns (the language after the font fallback:
    see `quote_pdf`)."""
    from fpdf import FPDF
    from fpdf.enums import XPos, YPos

    font = find_cjk_font() if cjk_font is True else (cjk_font or None)
    note = None
    if lang == "zh" and font is None:
        lang, note = "en", t("quote_no_cjk", "en")
    if lang == "en":
        font = None  # the core font is enough for English and keeps the file small
    blocks = make(lang)
    pdf = FPDF(orientation="P", unit="mm", format="A4")
    pdf.set_auto_page_break(auto=True, margin=15)
    pdf.set_margins(15, 15, 15)
    pdf.add_page()
    family = "Helvetica"
    if font is not None:
        pdf.add_font("cjk", "", str(font[0]), collection_font_number=font[1])
        pdf.add_font("cjk", "B", str(font[0]), collection_font_number=font[1])
        family = "cjk"

    def text(s: str) -> str:
        s = s.replace("**", "").replace("`", "")
        if family == "Helvetica":
            s = s.replace("≤", "<=").replace("—", "-").replace("×", "x")
            return s.encode("latin-1", "replace").decode("latin-1")
        return s

    width = pdf.w - pdf.l_margin - pdf.r_margin
    if note:
        pdf.set_font(family, size=9)
        pdf.multi_cell(width, 5, text(note), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        pdf.ln(2)
    def widths(tbl: Table) -> tuple[float, ...]:
        """Column widths (mm) from the cells' natural widths: a column of short numbers stays
        narrow, a column of labels gets the room (each at least 8 mm)."""
        pdf.set_font(family, size=8)
        natural = [max(pdf.get_string_width(text(c)) for c in col) + 3
                   for col in zip(tbl.headers, *tbl.rows, strict=True)]
        capped = [min(max(n, 8.0), width * 0.55) for n in natural]
        total = sum(capped)
        if total <= width:  # room to spare: widen in proportion
            return tuple(c * width / total for c in capped)
        fixed = [c for c in capped if c <= width / len(capped)]
        rest = width - sum(fixed)
        wide = sum(c for c in capped if c > width / len(capped))
        return tuple(c if c <= width / len(capped) else c * rest / wide for c in capped)

    def table_height(tbl: Table, cols: tuple[float, ...]) -> float:
        """The rendered height of `tbl` (mm): each row as tall as its cell of most lines."""
        pdf.set_font(family, size=8)
        out = 0.0
        for row in (tbl.headers, *tbl.rows):
            lines = max(len(cast(list[str], pdf.multi_cell(
                w - 2, 4.5, text(c) or " ", dry_run=True, output="LINES")))
                for c, w in zip(row, cols, strict=True))
            out += lines * 4.5 + 2
        return out

    body = pdf.h - pdf.t_margin - pdf.b_margin
    first = True
    for i, blk in enumerate(blocks):
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        if isinstance(nxt, Table) and isinstance(blk, Heading) and not first:
            # keep a heading with its table, and a table whole when it fits a page: a row
            # left alone on the next page reads as part of nothing
            need = 10 + table_height(nxt, widths(nxt))
            if pdf.get_y() + need > pdf.h - pdf.b_margin and need <= body:
                pdf.add_page()
        if isinstance(blk, Heading):
            pdf.set_font(family, size=16 if first else 12)
            if not first:
                pdf.ln(3)
            pdf.multi_cell(width, 8 if first else 7, text(blk.text), new_x=XPos.LMARGIN,
                           new_y=YPos.NEXT)
            first = False
        elif isinstance(blk, Para):
            pdf.set_font(family, size=9)
            # left-aligned: justifying a line before a long link spreads its words apart
            pdf.multi_cell(width, 5, text(blk.text), align="L", new_x=XPos.LMARGIN,
                           new_y=YPos.NEXT)
            pdf.ln(1)
        else:
            cols = widths(blk)
            if pdf.get_y() + table_height(blk, cols) > pdf.h - pdf.b_margin and \
                    table_height(blk, cols) <= body and not isinstance(blocks[i - 1], Heading):
                pdf.add_page()
            pdf.set_font(family, size=8)
            with pdf.table(width=width, line_height=4.5, text_align="LEFT",
                           first_row_as_headings=True, col_widths=cols) as tbl:
                for row in (blk.headers, *blk.rows):
                    r = tbl.row()
                    for cell in row:
                        r.cell(text(cell))
            pdf.ln(2)
    return bytes(pdf.output())
