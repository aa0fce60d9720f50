"""How the pages write numbers: one function per way, shared by every page.

Pure formatting (no Streamlit); the money and millisecond formats of the quote are
`capacity.report.money.fmt_money` and `fmt_ms`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Protocol

from capacity.report.i18n import error_text, note_text
from capacity.types import Note


def tokens_label(n: int) -> str:
    """A token count: '8K' for a multiple of 1024, else with thousands separated."""
    return f"{n // 1024}K" if n % 1024 == 0 and n >= 1024 else f"{n:,}"


def short_num(x: float) -> str:
    """A number in the Explorer's How-sure tables: thousands separated from 100 on, 3
    significant figures below, '—' when not finite."""
    if not math.isfinite(x):
        return "—"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def num(v: float | None) -> str:
    """A number for a table cell: 4 significant digits, '-' when there is none."""
    if v is None or not math.isfinite(v):
        return "-"
    return "0" if abs(v) < 1e-6 else f"{v:.4g}"


def knob(v: float | None) -> str:
    """A knob's value: 3 significant digits, '0' below 0.0005 (a fitted overhead of 1e-6 ms is
    none), '-' when there is none."""
    if v is None or not math.isfinite(v):
        return "-"
    return "0" if abs(v) < 5e-4 else f"{v:.3g}"


def sig(v: float | None) -> float | None:
    """A number for a numeric table cell: 4 significant digits, None when there is none."""
    return None if v is None or not math.isfinite(v) else float(f"{v:.4g}")


def pct(v: float | None) -> str:
    """A share as a percentage with one decimal, '-' when there is none."""
    return "-" if v is None or not math.isfinite(v) else f"{v:.1%}"


_MARKDOWN_ACTIVE = re.compile(r"([\\`\[\]<>$:@])")
_AUTOLINK = re.compile(r"(?i)(://|\bwww(?=\.)|@)")
WORD_JOINER = "\u2060"
"""An invisible character that joins its neighbours: put after `://`, `www` and `@`, it keeps
the text as it reads but no longer a URL or an e-mail address to the renderer's autolinker."""


def markdown_plain(text: str) -> str:
    """`text` for a Streamlit element that renders Markdown (st.error, st.warning, st.caption...)
    shown as the plain text it is: every character that starts Markdown, HTML or Streamlit's
    own syntax that can fetch or link is backslash-escaped (links and images `[..](..)`,
    `<html>` and `<autolinks>`, code, `$math$`, `:icons:` and the `:` of `http://`, e-mail
    `@`) and `www.` is broken (emphasis is left alone: it fetches nothing, and file names keep
    their underscores readable), so nothing an uploaded or stored file says (a name such as
    `![x](http://evil/)` echoed in an error) makes the browser fetch an image or shows a
    link. For messages that carry text from outside: a catalog warning, a refused upload.

    The autolinks are broken by a word joiner (`WORD_JOINER`, invisible) after `://`, `www` and
    `@`: Streamlit (1.67) links bare URLs, `www.` names and e-mail addresses in the text once
    the escapes are read, so `http\\://host/` and `www\\.host` were still shown as links
    (checked in Chromium, 2026-12-08)."""
    return _MARKDOWN_ACTIVE.sub(r"\\\1", _AUTOLINK.sub(r"\1" + WORD_JOINER, text))


def plain_error(exc: BaseException, lang: str) -> str:
    """A library error's message in `lang` (`error_text`) as plain text (`markdown_plain`): the
    Measure and Results pages' errors quote what a server answered or a stored file holds."""
    return markdown_plain(error_text(exc, lang))


GRAVE_LOOKALIKE = "\u02cb"
"""MODIFIER LETTER GRAVE ACCENT: shown in place of a backtick that a link carried, so the
value stays inside the notice's code span."""


def defused(text: str) -> str:
    """`text` with nothing in it that Markdown can turn into a fetch or a link, whether it lands
    inside a message's code span or outside one, and no backslash that a code span would show:
    a backtick becomes a look-alike (`GRAVE_LOOKALIKE`: it cannot close the span), `](` is
    split by a word joiner (no link or image), `<` and `>` become the angle quotes ‹ ›, `$` the
    full-width ＄ (no math), and `://`, `www.` and `@` are joined as `markdown_plain` does (no
    autolink). A value such as 'qwen3.5-9b' or 'typical:vllm' is left as it is."""
    out = (text.replace("`", GRAVE_LOOKALIKE).replace("](", "]" + WORD_JOINER + "(")
           .replace("<", "\u2039").replace(">", "\u203a").replace("$", "\uff04"))
    return _AUTOLINK.sub(r"\1" + WORD_JOINER, out)


def _inert(note: Note) -> Note:
    """`note` with every text parameter `defused`, notes among its parameters (a reason)
    too."""
    params: dict[str, str | int | float] = {
        k: _inert(v) if isinstance(v, Note) else defused(v) if isinstance(v, str) else v
        for k, v in note.params.items()}
    return Note(defused(str(note)), code=note.code, **params)


def link_notices_text(title: str, notices: list[str], lang: str) -> str:
    """The Markdown of a shared link's notices (the Explorer's and the Planner's): `title`,
    then one item a notice in `lang`. A notice quotes what the link held, and whoever made the
    link chose it: `model=a`![x](http://host/)`` closed the message's code span and drew an
    image, which the reader's browser fetched (2026-12-08). Every text a notice carries is
    `defused`; the message's own Markdown (its code spans) stays."""
    def one(n: str) -> str:
        return note_text(_inert(n), lang) if isinstance(n, Note) else markdown_plain(n)
    return title + "\n\n" + "\n".join(f"- {one(n)}" for n in notices)


def distinct_names(names: Mapping[str, str]) -> dict[str, str]:
    """Each key's shown name in a picker: its name, or 'name (key)' where two keys share it
    (a custom entry saved under a bundled entry's name). Streamlit's pickers (1.67) hold a
    choice by its shown text, so of two options shown alike only the first could be picked:
    choosing the custom 'RTX 3090' gave the bundled one."""
    count = Counter(names.values())
    return {k: v if count[v] == 1 else f"{v} ({k})" for k, v in names.items()}


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def entry_names(entries: Mapping[str, _Named]) -> dict[str, str]:
    """`distinct_names` of catalog entries (models, formats, GPUs) by key: the one way a page
    names them in a picker or a headline."""
    return distinct_names({k: e.name for k, e in entries.items()})
