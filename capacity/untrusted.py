"""Parsing text nobody vouched for: one JSON and one TOML loader for every file and reply
(docs/reliability.md, "Files and replies are parsed with bounds").

Both raise their format's own decode error (`json.JSONDecodeError`, `tomllib.TOMLDecodeError`,
both ValueErrors), never a RecursionError or a bare ValueError, so a caller that already turns
a decode error into a one-line message covers every hostile input:

- nesting deeper than `MAX_DEPTH` levels of arrays/objects (tables): the standard parsers
  recurse and a 10 KB file of `[` exhausts the stack;
- integers of more than 4,300 digits (CPython's conversion limit raises a ValueError that is
  not a decode error);
- for TOML, text longer than `MAX_TOML_CHARS` (a catalog entry is a few KB).

`read_utf8(path)` reads a file a user named as text: bytes that are not UTF-8 are an
`InputError` naming the file and the byte, not a UnicodeDecodeError traceback. It, and the
readers of a measurements file, a model's config.json and `validate --out`, go through
`read_capped`, which refuses what is no regular file (`/dev/zero`, a FIFO) or is larger than
the reader's limit before reading a byte (a 3 GB file given as a calibration was read whole,
6 GB of memory, then refused).

The other way out: `spreadsheet_text(text)` is the one function every CSV writer passes its text
cells through, so a server's or a user's text that starts like a formula (`=`, `+`, `-`, `@`,
a tab or a carriage return) is text in a spreadsheet, never a formula.
"""

from __future__ import annotations

import json
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Final

from capacity.errors import CatalogError, InputError

MAX_DEPTH: Final = 64
"""Deepest nesting of arrays and objects (tables) accepted (an OpenAI chunk: 5; a catalog
entry: 3)."""
MAX_TOML_CHARS: Final = 4 << 20
"""Longest TOML text parsed, characters (4 Mi; the largest bundled file is under 100 K)."""
FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet (Excel, LibreOffice, Google Sheets) read a CSV cell
as a formula (OWASP, "CSV injection")."""
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_PLAIN_NUMBERS = re.compile(rf"{_NUMBER}(?: {_NUMBER})*")
"""A plain decimal number, or a list of them separated by spaces (requests.csv's `itl_ms`)."""


def _depth_over(obj: Any, limit: int) -> bool:
    """True when `obj` nests lists/dicts deeper than `limit` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if d > limit:
            return True
        stack.extend((c, d + 1) for c in children if isinstance(c, dict | list))
    return False


def loads_json(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` for untrusted text: a `json.JSONDecodeError` for invalid JSON, nesting
    deeper than `max_depth` and integers too long to convert, never a RecursionError.

    The depth walk only runs when the text holds more than `max_depth` brackets, so a normal
    document costs two `str.count` calls on top of the parse.
    """
    try:
        obj = json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("JSON nested too deeply to parse", text, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise json.JSONDecodeError(f"a value cannot be read ({exc})", text, 0) from None
    if text.count("[") + text.count("{") > max_depth and _depth_over(obj, max_depth):
        raise json.JSONDecodeError(f"JSON nested deeper than {max_depth} levels", text, 0)
    return obj


def loads_toml(text: str, *, max_depth: int = MAX_DEPTH,
               max_chars: int = MAX_TOML_CHARS) -> dict[str, Any]:
    """`tomllib.loads` for untrusted text: a `tomllib.TOMLDecodeError` for invalid TOML, text
    over `max_chars`, nesting deeper than `max_depth` and integers too long to convert."""
    if len(text) > max_chars:
        raise tomllib.TOMLDecodeError(f"{len(text):,} characters, over the limit of {max_chars:,}")
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError("nested too deeply to parse") from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as exc:
        raise tomllib.TOMLDecodeError(f"a value cannot be read ({exc})") from None
    if text.count("[") + text.count("{") > max_depth and _depth_over(data, max_depth):
        raise tomllib.TOMLDecodeError(f"nested deeper than {max_depth} levels")
    return data


def loads_data_toml(text: str, where: str) -> dict[str, Any]:
    """`loads_toml` for one of the data files (engines, nodes, host links, prices, ...):
    CatalogError "`where`: why" for text that is not valid TOML."""
    try:
        return loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{where}: {exc}") from None


MAX_TEXT_FILE_BYTES: Final = 16 << 20
"""The largest catalog, calibration, mix, offers or config file read (bytes, 16 MiB: the TOML
parser's own limit, `MAX_TOML_CHARS`, at up to four bytes a character; such files are KBs)."""


def read_capped(path: str | Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most `max_bytes`: InputError, before anything is read, for
    a device, a FIFO or a folder (`/dev/zero` has no end) and for a larger file (checked again
    on the bytes read, should it grow). FileNotFoundError as `Path.read_bytes` raises it."""
    p = Path(path)
    st = p.stat()
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p}: not a regular file")
    if st.st_size > max_bytes:
        raise InputError(f"{p.name}: {st.st_size:,} bytes, over the limit of {max_bytes:,}")
    with p.open("rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{p.name}: over the limit of {max_bytes:,} bytes")
    return data


def read_utf8(path: str | Path, max_bytes: int = MAX_TEXT_FILE_BYTES) -> str:
    """A file's text (UTF-8, a leading byte-order mark dropped), at most `max_bytes`
    (`read_capped`); InputError naming the file and the first bad byte when it is not UTF-8."""
    p = Path(path)
    data = read_capped(p, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p.name}: not UTF-8 text (byte {exc.start:,} is 0x{data[exc.start]:02x});"
                         " save the file as UTF-8") from None


_TERMINAL_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """`text` safe to print on a terminal or in a table: every control character (C0, DEL, C1:
    the escape sequences that clear a screen, set a window's title or move the cursor, and the
    line breaks that would split a table's row) and every bidirectional override (text that
    reads in another order than it runs) as `?`. For text a server or a shared store wrote (a
    model id, an error body, a run's label). Example: '\\x1b[2Jm1' -> '?[2Jm1'."""
    return _TERMINAL_UNSAFE.sub("?", text)


def spreadsheet_text(text: str) -> str:
    """A text cell of a CSV file, safe to open in a spreadsheet: text that starts with one of
    `FORMULA_STARTS` gets a `'` in front (the spreadsheets' own mark for "this is text"), so
    `=HYPERLINK(...)` or `@SUM(...)` from a server's reply shows as written and never runs.
    A plain decimal number written as text (`-1.5`, `+2`, `1e-3`), or a list of them
    separated by spaces (`itl_ms`), is numbers, kept as is (no function can be called from
    digits and spaces); `-inf` or `-2+3` are not numbers and get the mark. Only text cells
    go through this: numbers are written as numbers by their writers."""
    if text.startswith(FORMULA_STARTS) and not _PLAIN_NUMBERS.fullmatch(text):
        return "'" + text
    return text
