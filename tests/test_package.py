"""The package's public face: a sorted `__all__` that exports what it says, and a pure library."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import capacity

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_sorted_and_exported() -> None:
    assert capacity.__all__ == sorted(capacity.__all__)
    for name in capacity.__all__:
        assert hasattr(capacity, name), name


def test_docstring_example_runs() -> None:
    result = doctest.testmod(capacity, verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_library_never_imports_streamlit() -> None:
    pattern = re.compile(r"^\s*(import|from)\s+streamlit", re.MULTILINE)
    offenders = [p for p in (ROOT / "capacity").rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def test_wheel_layout_matches_the_workspace() -> None:
    """The wheel maps data/ to capacity/_data and the app to capacity/_app, which is where
    `capacity.workspace` looks when it runs from an install; every mapped path exists."""
    import tomllib

    from capacity import workspace

    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"]["wheel"]
    missing = [p for p in [*wheel["only-include"], *wheel["force-include"]]
               if not (ROOT / p).exists()]
    assert not missing, missing
    assert wheel["sources"]["data/"] == "capacity/_data/"
    assert {wheel["sources"]["pages/"], wheel["sources"]["app/"]} == {
        "capacity/_app/pages/", "capacity/_app/app/"}
    assert wheel["force-include"]["streamlit_app.py"] == "capacity/_app/streamlit_app.py"
    shipped = {p for p in wheel["only-include"] if p.startswith("data/bench/")}
    assert shipped == {f"data/bench/{label}" for label in workspace.SAMPLE_RUNS}
    # nothing of the user's state travels: custom entries, user runs
    assert not any(p in ("data", "data/custom", "data/bench") for p in wheel["only-include"])


def test_every_bundled_data_file_ships_in_the_wheel() -> None:
    """Each file directly under data/ (a catalog, the engines, offers, acceptance and imbalance
    data...) is in the wheel: code that reads `workspace.bundled_data_dir() / NAME` finds it
    when installed too."""
    import tomllib

    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"]["wheel"]
    files = {f"data/{p.name}" for p in (ROOT / "data").glob("*.toml")
             if not p.name.endswith(".local.toml")}
    assert files - set(wheel["only-include"]) == set()
