"""Every translated string of capacity, read from one data file per language: `data/i18n/<code>.toml`.

The files live in the bundled data (`capacity.workspace.i18n_dir()`: the checkout's
`data/i18n/`, or `capacity/_data/i18n/` in the wheel). Each has a `[meta]` table (`code`, the
language's `name` in itself, its `plural` rule, one of `PLURAL_RULES`) and a `[messages]` table
of flat keys. `en.toml` is the source: every key is there, and a key another language lacks is
said in English. A new language is a new file; nothing in the code lists the languages
(docs/app-internals.md, Translations).

- `t(key, lang, **values)`: one message, formatted with `values` (`str.format`).
- `tn(key, n, lang, **values)`: a plural message, a table of forms (`{ one = "...", other = "..." }`
  in English, `{ other = "..." }` in Chinese): the form the language's rule picks for the count
  `n`; `{n}` is the count.
- `LANGS` (English first), `LANG_NAMES`, and `MESSAGES` (key -> texts in `LANGS` order; a plural
  message's `other` form), for the app and the tests.
- `load_catalogs(folder)`: the same over another folder (a test's third language).

The app (streamlit_app.py, pages/, app/), the Planner page and the library's quote document
(`capacity.report.quote`, Markdown and PDF) all read these files, so a string is changed in
one place. A language's file is read the first time one of its messages is asked for, once per
process, from a JSON copy of its parsed TOML (`read_toml_cached`: 0.4 ms instead of the 14-35 ms
tomllib takes over a 95 KB file, which a CLI command saying one message paid at start-up).
tests/test_app_i18n.py checks the files: every key in every language with the same
placeholders, plural forms complete, the keys the library and the pages use present, and the
Chinese style.

Pure: no Streamlit, so the library's quote can use it.
"""

from __future__ import annotations

import string
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from capacity import workspace

SOURCE_LANG: Final = "en"
"""The source language: its file has every key; the others fall back to it."""


# ---------------------------------------------------------------------------------------------
# plural rules (CLDR's cardinal rules, for the languages they name)

@dataclass(frozen=True)
class PluralRule:
    """A language's plural forms (`categories`, CLDR's names, `other` last) and the one a count
    takes (`select`)."""

    categories: tuple[str, ...]
    select: Callable[[float], str]


def _one(n: float) -> str:
    return "one" if n == 1 else "other"


def _one_0_1(n: float) -> str:
    return "one" if 0 <= n < 2 else "other"


def _one_few_many(n: float) -> str:
    if n != int(n):
        return "other"
    i = abs(int(n))
    if i % 10 == 1 and i % 100 != 11:
        return "one"
    if 2 <= i % 10 <= 4 and not 12 <= i % 100 <= 14:
        return "few"
    return "many"


PLURAL_RULES: Final[dict[str, PluralRule]] = {
    "other": PluralRule(("other",), lambda n: "other"),  # Chinese, Japanese, Korean: one form
    "one": PluralRule(("one", "other"), _one),  # English, German, Dutch, Spanish: one for 1
    "one-0-1": PluralRule(("one", "other"), _one_0_1),  # French: one for 0 and 1 (and 1.5)
    "one-few-many": PluralRule(("one", "few", "many", "other"), _one_few_many),  # Russian
}
"""The plural rules a language file may name in `[meta] plural`."""


# ---------------------------------------------------------------------------------------------
# the files

Message = str | dict[str, str]
"""A message: its text, or a plural message's forms (category -> text)."""


@dataclass(frozen=True)
class Catalog:
    """One language's file: its code, its name in itself, its plural rule and its messages."""

    code: str
    name: str
    plural: PluralRule
    messages: dict[str, Message]


def read_toml_cached(path: Path) -> dict[str, Any]:
    """`path`'s TOML, read through a JSON copy of the parsed data in `__pycache__/` beside it,
    stamped with the file's size and CRC-32 (a changed file is parsed again and its copy
    rewritten; a folder that cannot be written, an installed package, only loses the copy).
    The copy holds the same strings and tables, and `read_catalog` checks it as it checks the
    TOML."""
    import json
    import os
    import tomllib  # here: importing this module reads no file and needs no parser
    import zlib

    raw = path.read_bytes()
    stamp = [len(raw), zlib.crc32(raw)]
    copy = path.parent / "__pycache__" / f"{path.name}.json"
    try:
        cached = json.loads(copy.read_text(encoding="utf-8"))
        if isinstance(cached, dict) and cached.get("source") == stamp \
                and isinstance(cached.get("data"), dict):
            return cached["data"]  # type: ignore[no-any-return]
    except (OSError, ValueError):
        pass
    data = tomllib.loads(raw.decode())  # what tomllib.load does with the file
    try:
        text = json.dumps({"source": stamp, "data": data}, ensure_ascii=False)
        copy.parent.mkdir(exist_ok=True)
        tmp = copy.with_name(f"{copy.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, copy)  # whole or not at all: another process may read it meanwhile
    except (OSError, TypeError, ValueError):  # read-only, or a value JSON cannot hold
        pass
    return data


def read_catalog(path: Path) -> Catalog:
    """Parse and check one language file (`<code>.toml`)."""
    data = read_toml_cached(path)
    meta, messages = data.get("meta"), data.get("messages")
    if not isinstance(meta, dict) or not isinstance(messages, dict):
        raise ValueError(f"{path}: needs a [meta] and a [messages] table")
    code, name, rule = meta.get("code"), meta.get("name"), meta.get("plural")
    if code != path.stem or not isinstance(name, str) or not name:
        raise ValueError(f"{path}: [meta] needs code = {path.stem!r} and the language's name")
    if rule not in PLURAL_RULES:
        raise ValueError(f"{path}: [meta] plural must be one of {', '.join(PLURAL_RULES)}, "
                         f"got {rule!r}")
    for key, msg in messages.items():
        if not (isinstance(msg, str) or isinstance(msg, dict)
                and all(isinstance(v, str) for v in msg.values())):
            raise ValueError(f"{path}: {key} must be a text or a table of plural forms")
    return Catalog(code=code, name=name, plural=PLURAL_RULES[rule], messages=messages)


class Catalogs:
    """The language files of one folder: `langs` (the source language first, then by code),
    each file read when first used."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        codes = sorted(p.stem for p in folder.glob("*.toml"))
        if SOURCE_LANG not in codes:
            raise FileNotFoundError(f"{folder}: no {SOURCE_LANG}.toml, the source language")
        self.langs: tuple[str, ...] = (SOURCE_LANG, *(c for c in codes if c != SOURCE_LANG))
        self._read: dict[str, Catalog] = {}
        self._lock = threading.Lock()

    def catalog(self, lang: str) -> Catalog:
        """`lang`'s file (an unknown language: the source language's)."""
        if lang not in self.langs:
            lang = SOURCE_LANG
        found = self._read.get(lang)
        if found is None:
            with self._lock:
                found = self._read.get(lang)
                if found is None:
                    found = self._read[lang] = read_catalog(self.folder / f"{lang}.toml")
        return found

    def names(self) -> dict[str, str]:
        """Each language's name in itself, in `langs` order."""
        return {lang: self.catalog(lang).name for lang in self.langs}

    def _find(self, key: str, lang: str) -> tuple[Message, PluralRule]:
        """The message `key` in `lang`, else in the source language, with the rule of the
        language it is in. An unknown key is a bug: KeyError."""
        cat = self.catalog(lang)
        msg = cat.messages.get(key)
        if msg is None:
            cat = self.catalog(SOURCE_LANG)
            msg = cat.messages[key]
        return msg, cat.plural

    def t(self, key: str, lang: str = SOURCE_LANG, /, **values: object) -> str:
        """The message `key` in `lang`, formatted with `values` (a plural message: its `other`
        form; use `tn`)."""
        msg, _ = self._find(key, lang)
        text = msg if isinstance(msg, str) else msg["other"]
        return text.format(**values) if values else text

    def tn(self, key: str, n: float, lang: str = SOURCE_LANG, /, **values: object) -> str:
        """The plural message `key` in `lang`, in the form `lang`'s rule picks for the count
        `n`, formatted with `values` and `n` (a value named `n` replaces the count's own text,
        e.g. a formatted one)."""
        msg, rule = self._find(key, lang)
        if isinstance(msg, str):
            text = msg
        else:
            text = msg.get(rule.select(n)) or msg["other"]
        return text.format(**{"n": n, **values})

    def is_plural(self, key: str) -> bool:
        """Whether `key` is a plural message (in the source language)."""
        return isinstance(self.catalog(SOURCE_LANG).messages[key], dict)

    def problems(self) -> list[str]:
        """What a translator must fix, one line each (empty: every file is complete): a key
        missing or unknown, an empty text, placeholders that differ from English, a plural
        message whose forms are not its language's rule's categories."""
        src = self.catalog(SOURCE_LANG)
        out: list[str] = []
        for lang in self.langs:
            cat = self.catalog(lang)
            out += [f"{lang}: {k}: not in {SOURCE_LANG}.toml"
                    for k in cat.messages if k not in src.messages]
            for key, ref in src.messages.items():
                msg = cat.messages.get(key)
                if msg is None:
                    out.append(f"{lang}: {key}: missing")
                    continue
                if isinstance(ref, str) != isinstance(msg, str):
                    out.append(f"{lang}: {key}: plural in one language only")
                    continue
                want = placeholders(ref if isinstance(ref, str) else ref.get("other", ""))
                forms = {"": msg} if isinstance(msg, str) else msg
                if not isinstance(msg, str) and tuple(sorted(msg)) != tuple(
                        sorted(cat.plural.categories)):
                    out.append(f"{lang}: {key}: plural forms {', '.join(sorted(msg))}; its "
                               f"rule has {', '.join(cat.plural.categories)}")
                for form, text in forms.items():
                    where = f"{lang}: {key}{'.' + form if form else ''}"
                    got = placeholders(text)  # a form other than `other` may leave a value out
                    if not text.strip():
                        out.append(f"{where}: empty")
                    elif not (got == want if form in ("", "other") else got <= want | {"n"}):
                        out.append(f"{where}: placeholders {sorted(got)}, English has "
                                   f"{sorted(want)}")
        return out

    def table(self) -> dict[str, tuple[str, ...]]:
        """Every key -> its text in each language, in `langs` order (a plural message: its
        `other` form; a missing translation: the source language's text)."""
        cats = [self.catalog(lang) for lang in self.langs]
        out: dict[str, tuple[str, ...]] = {}
        for key, src in cats[0].messages.items():
            texts = []
            for cat in cats:
                msg = cat.messages.get(key, src)
                texts.append(msg if isinstance(msg, str) else msg["other"])
            out[key] = tuple(texts)
        return out


def load_catalogs(folder: Path) -> Catalogs:
    """The language files in `folder` (the bundled ones: `bundled()`)."""
    return Catalogs(folder)


@cache
def bundled() -> Catalogs:
    """The bundled language files (`capacity.workspace.i18n_dir()`), once per process."""
    return load_catalogs(workspace.i18n_dir())


LANGS: Final[tuple[str, ...]] = bundled().langs
"""The languages: one per file in data/i18n/, English first."""

if TYPE_CHECKING:
    LANG_NAMES: dict[str, str]
    """Each language's name in itself (the app's language switch)."""
    MESSAGES: dict[str, tuple[str, ...]]
    """Key -> its text in each language, in `LANGS` order (`Catalogs.table`)."""


@cache
def _lazy(name: str) -> object:
    if name == "LANG_NAMES":
        return bundled().names()
    return bundled().table()


def __getattr__(name: str) -> object:
    """`LANG_NAMES` and `MESSAGES`, built on first use (they read every language's file)."""
    if name in ("LANG_NAMES", "MESSAGES"):
        return _lazy(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def t(key: str, lang: str = SOURCE_LANG, /, **values: object) -> str:
    """The message `key` in `lang` (any language without a file, or a key its file lacks:
    English), formatted with `values`. A plural message gives its `other` form: use `tn`.

    An unknown key is a bug: it raises KeyError (a test checks every key the pages use).
    """
    return bundled().t(key, lang, **values)


def tn(key: str, n: float, lang: str = SOURCE_LANG, /, **values: object) -> str:
    """The plural message `key` in `lang`, in the form `lang`'s plural rule picks for the count
    `n` (English: `one` for 1, else `other`), formatted with `values` and `{n}`."""
    return bundled().tn(key, n, lang, **values)


def placeholders(text: str) -> set[str]:
    """The names of the {placeholders} in a message's text."""
    return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(text) if f}


def error_text(exc: BaseException, lang: str = "en") -> str:
    """A library error's message in `lang`: its `Note` (`note_text`) when it was raised with
    one, else its English text."""
    arg = exc.args[0] if exc.args else ""
    if lang == "en" or not isinstance(arg, str):
        return str(exc)  # the library's own English, every detail kept
    return note_text(arg, lang)


def note_text(note: str, lang: str = "en") -> str:
    """A library message (`capacity.types.Note`: a scenario's warning, a calibration's note) in
    `lang`; a plain string (a note read back from a saved calibration) stays as it is. A plural
    message takes its count from the note's parameter `n`."""
    code = getattr(note, "code", None)
    key = f"note_{code}"
    if code is None or key not in bundled().catalog(SOURCE_LANG).messages:
        return str(note)
    raw: Mapping[str, object] = getattr(note, "params", {})
    params = {k: note_text(v, lang) if isinstance(v, str) and getattr(v, "code", None) else v
              for k, v in raw.items()}  # a reason that is a note too
    count = params.get("n")
    if bundled().is_plural(key) and isinstance(count, int | float):
        return tn(key, count, lang, **params)
    return t(key, lang, **params)


def engine_label(engine: str, lang: str = "en") -> str:
    """An engine profile's display name in `lang` (a profile without a translation: its own name
    from data/engines.toml)."""
    key = "engine_name_" + engine
    if key in bundled().catalog(SOURCE_LANG).messages:
        return t(key, lang)
    from capacity.catalog.engines import engine_profile  # only for profiles without a message
    return engine_profile(engine).name


def engine_short(engine: str, lang: str = "en") -> str:
    """An engine profile's short name in `lang`, for a chart's legend or a table's cell (the
    `frv_engine_*` messages: the chapter's in words, 'vLLM'); a profile without one: its key."""
    key = "frv_engine_" + engine
    return t(key, lang) if key in bundled().catalog(SOURCE_LANG).messages else engine
