"""Start-up (issue 30, docs/benchmarks.md): what `capacity plan` and `capacity size` load before
their first output, and the language files' parsed copy that spares every command a TOML parse.

Wall times are measured by benchmarks/bench_startup.py, never here: these tests pin the causes
(a module a command does not need, a file parsed again) so a regression names itself.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from capacity.report.i18n import read_catalog, read_toml_cached

ROOT = Path(__file__).resolve().parents[1]

NOT_AT_START = {
    "capacity.cli.size": ["capacity.plan.disagg", "capacity.report.planner_url",
                          "capacity.report.quote_disagg", "scipy", "pandas", "duckdb"],
    "capacity.cli.plan": ["capacity.model.draft_gain", "capacity.plan.events", "scipy", "pandas",
                          "duckdb"],
}
"""A command's module -> what importing it must not load (only --disaggregated, --quote,
--draft, --engine or another command need them)."""


@pytest.mark.slow  # a fresh interpreter importing numpy and half the package: ~0.6 s idle
def test_plan_and_size_load_no_module_their_default_run_does_not_use() -> None:
    code = ("import json, sys\n"
            f"found = {{}}\nfor mod, banned in {NOT_AT_START!r}.items():\n"
            "    __import__(mod)\n"
            "    found[mod] = [b for b in banned if b in sys.modules]\n"
            "print(json.dumps(found))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == '{"capacity.cli.size": [], "capacity.cli.plan": []}'


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def test_the_parsed_copy_is_the_toml_and_is_read_instead_of_it(tmp_path: Path) -> None:
    f = tmp_path / "xx.toml"
    _write(f, '[meta]\ncode = "xx"\n\n[messages]\nhi = "Hello, {who}"\nn = { one = "a", other = "b" }\n')
    first = read_toml_cached(f)
    assert first == {"meta": {"code": "xx"},
                     "messages": {"hi": "Hello, {who}", "n": {"one": "a", "other": "b"}}}
    copy = tmp_path / "__pycache__" / "xx.toml.json"
    assert copy.is_file()
    # the copy, not the TOML, answers the second read: a copy edited by hand (same stamp) shows
    copy.write_text(copy.read_text(encoding="utf-8").replace("Hello", "Howdy"), encoding="utf-8")
    assert read_toml_cached(f)["messages"] == {"hi": "Howdy, {who}",
                                               "n": {"one": "a", "other": "b"}}


def test_a_changed_file_is_parsed_again_even_at_the_same_size(tmp_path: Path) -> None:
    f = tmp_path / "xx.toml"
    _write(f, 'a = "one"\n')
    assert read_toml_cached(f) == {"a": "one"}
    _write(f, 'a = "two"\n')  # 10 bytes both times: the stamp's CRC-32 tells them apart
    assert read_toml_cached(f) == {"a": "two"}
    assert read_toml_cached(f) == {"a": "two"}


def test_a_folder_that_cannot_hold_the_copy_still_reads_the_file(tmp_path: Path) -> None:
    f = tmp_path / "xx.toml"
    _write(f, 'a = 1\nb = [1, 2]\n')
    (tmp_path / "__pycache__").write_text("a file where the folder would be", encoding="utf-8")
    assert read_toml_cached(f) == {"a": 1, "b": [1, 2]}


def test_bad_toml_is_refused_as_before_and_leaves_no_copy(tmp_path: Path) -> None:
    f = tmp_path / "xx.toml"
    _write(f, "a = \n")
    with pytest.raises(tomllib.TOMLDecodeError):
        read_toml_cached(f)
    assert not (tmp_path / "__pycache__" / "xx.toml.json").exists()


def test_a_bundled_language_read_through_its_copy_is_the_toml(tmp_path: Path) -> None:
    src = ROOT / "data" / "i18n" / "zh.toml"
    f = tmp_path / "zh.toml"
    f.write_bytes(src.read_bytes())
    with f.open("rb") as fh:
        parsed = tomllib.load(fh)
    read_catalog(f)  # writes the copy
    cat = read_catalog(f)  # reads it
    assert (tmp_path / "__pycache__" / "zh.toml.json").is_file()
    assert cat.code == "zh" and cat.messages == parsed["messages"]
