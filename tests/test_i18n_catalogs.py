"""Translations as data: a language is a file in data/i18n/, found by listing the folder, with its
own plural rule; a key a language lacks is said in English (`capacity.report.i18n`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from capacity import workspace
from capacity.report.i18n import (
    LANGS,
    PLURAL_RULES,
    SOURCE_LANG,
    load_catalogs,
    placeholders,
    read_catalog,
)

BUNDLED = workspace.i18n_dir()

FRENCH = """\
[meta]
code = "fr"
name = "Français"
plural = "one-0-1"

[messages]
app_title = "Planificateur de capacité"
r_imported.one = "{n} point lu dans {name}."
r_imported.other = "{n} points lus dans {name}."
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The bundled files plus a third language, in a folder of their own."""
    for path in BUNDLED.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "fr.toml").write_text(FRENCH, encoding="utf-8")
    return tmp_path


def test_a_third_language_needs_only_its_file(folder: Path) -> None:
    cats = load_catalogs(folder)
    assert cats.langs == ("en", "fr", "zh")  # English first, then by code
    assert cats.names() == {"en": "English", "fr": "Français", "zh": "中文"}
    assert cats.t("app_title", "fr") == "Planificateur de capacité"
    assert cats.tn("r_imported", 0, "fr", name="a.csv") == "0 point lu dans a.csv."  # French: 0 is one
    assert cats.tn("r_imported", 1, "fr", name="a.csv") == "1 point lu dans a.csv."
    assert cats.tn("r_imported", 2, "fr", name="a.csv") == "2 points lus dans a.csv."
    # a key the file lacks: English, with English's plural rule
    assert cats.t("nav_planner", "fr") == "Planner"
    assert cats.tn("pl_log_read", 1, "fr", rows="1", kept="1", left="0") == (
        "1 row, 1 used, 0 left out")
    assert cats.tn("pl_log_read", 0, "fr", rows="0", kept="0", left="0") == (
        "0 rows, 0 used, 0 left out")
    table = cats.table()
    assert table["app_title"] == ("Capacity planner", "Planificateur de capacité", "容量规划")
    assert table["nav_planner"][1] == "Planner"
    # the bundled files are untouched: the app's languages are still the shipped ones
    assert "fr" not in LANGS and load_catalogs(BUNDLED).langs == LANGS
    # the parity check names what the translator has left to do, and only that
    problems = cats.problems()
    assert problems and all(p.startswith("fr: ") and p.endswith(": missing") for p in problems)
    assert len(problems) == len(table) - 2


def test_an_unknown_language_and_an_unknown_key() -> None:
    cats = load_catalogs(BUNDLED)
    assert cats.t("st_fail", "xx") == cats.t("st_fail", "en") == "fail"
    assert cats.tn("r_imported", 1, "xx", name="f") == "Read 1 point from f."
    with pytest.raises(KeyError):
        cats.t("no_such_key", "zh")


def test_the_parity_check_finds_each_kind_of_mistake(folder: Path) -> None:
    (folder / "fr.toml").write_text(FRENCH.replace(
        'app_title = "Planificateur de capacité"', 'app_title = ""\nextra = "x"').replace(
        '{n} points lus dans {name}.', '{n} points lus.').replace(
        'r_imported.one = "{n} point lu dans {name}."\n', ""), encoding="utf-8")
    problems = load_catalogs(folder).problems()
    assert "fr: extra: not in en.toml" in problems
    assert "fr: app_title: empty" in problems
    assert "fr: r_imported: plural forms other; its rule has one, other" in problems
    assert "fr: r_imported.other: placeholders ['n'], English has ['n', 'name']" in problems
    (folder / "fr.toml").write_text(FRENCH.replace(
        'r_imported.one = "{n} point lu dans {name}."\nr_imported.other',
        "r_imported"), encoding="utf-8")
    assert "fr: r_imported: plural in one language only" in load_catalogs(folder).problems()


@pytest.mark.parametrize(("rule", "counts"), [
    ("one", {0: "other", 1: "one", 2: "other", 1.5: "other", 21: "other"}),
    ("other", {0: "other", 1: "other", 2: "other"}),
    ("one-0-1", {0: "one", 1: "one", 1.5: "one", 2: "other", 11: "other"}),
    ("one-few-many", {1: "one", 21: "one", 11: "many", 2: "few", 24: "few", 12: "many",
                      5: "many", 0: "many", 1.5: "other"}),
])
def test_plural_rules(rule: str, counts: dict[float, str]) -> None:
    r = PLURAL_RULES[rule]
    assert {n: r.select(n) for n in counts} == counts
    assert set(counts.values()) <= set(r.categories) and r.categories[-1] == "other"


def test_a_bad_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "fr.toml"
    for text, match in [
        ("[messages]\na = 'b'\n", "needs a \\[meta\\] and a \\[messages\\] table"),
        (FRENCH.replace('code = "fr"', 'code = "de"'), "code = 'fr'"),
        (FRENCH.replace('plural = "one-0-1"', 'plural = "french"'), "plural must be one of"),
        (FRENCH + "n = 3\n", "n must be a text or a table of plural forms"),
    ]:
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            read_catalog(bad)
    with pytest.raises(FileNotFoundError, match="en.toml"):
        load_catalogs(tmp_path)


def test_the_bundled_files() -> None:
    assert BUNDLED == workspace.bundled_data_dir() / "i18n"
    assert LANGS[0] == SOURCE_LANG
    for lang in LANGS:
        cat = read_catalog(BUNDLED / f"{lang}.toml")
        assert cat.code == lang and cat.plural in PLURAL_RULES.values()
    assert placeholders("{a} {b:.1f} {c!r} {{d}}") == {"a", "b", "c"}


def test_a_plural_note_takes_its_count_from_n(tmp_path: Path) -> None:
    """A library note whose message is plural carries its count as `n`; English and Chinese say
    it without "(s)"."""
    from capacity.errors import InputError
    from capacity.fit.imports import read_measured
    from capacity.report.i18n import error_text, note_text
    from capacity.types import Note

    assert note_text(Note("-", code="over_memory", n=1), "en").startswith("1 level held")
    assert note_text(Note("-", code="over_memory", n=3), "en").startswith("3 levels held")
    assert note_text(Note("-", code="over_memory", n=1), "zh").startswith("1 个并发档")
    for header, english in (("concurrency,context_tokens\n1,2\n", "missing column tpot_ms;"),
                            ("concurrency,context\n1,2\n", "missing columns context_tokens,")):
        (tmp_path / "a.csv").write_text(header, encoding="utf-8")
        with pytest.raises(InputError) as caught:
            read_measured(tmp_path / "a.csv")
        assert english in error_text(caught.value, "en") and "(s)" not in str(caught.value)
        assert error_text(caught.value, "zh").startswith("a.csv：缺少列 `")


def test_every_calibration_knob_has_a_label_in_every_language() -> None:
    """The Results page labels each knob of a saved calibration with `r_knob_<name>`: a knob added
    to `calibration.KNOBS` without its label made the page raise KeyError."""
    from capacity.fit.calibration import KNOBS
    from capacity.report.i18n import t

    for lang in LANGS:  # the parity test holds every language to the source's keys
        for knob in KNOBS:
            assert t("r_knob_" + knob, lang).strip(), (lang, knob)
