"""The library's layout is its architecture: imports only go down the layers.

    errors, units, types, stats, workspace, netstamp  (base: no capacity import but each other)
    catalog                            data files -> typed entries
    model                              the formulas over catalog entries
    plan, bench, sim                   load and search; measuring; the simulated endpoint
    fit                                measurements against predictions
    report                             what a person reads (text, charts, tables, quote, URL)
    cli                                the command line

A module may import from its own subpackage and from any lower layer, never from a higher one
or from a sibling at the same layer (plan, bench and sim know nothing of each other).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import capacity

PACKAGE = Path(capacity.__file__).resolve().parent
LAYERS: dict[str, int] = {
    "errors": 0, "units": 0, "types": 0, "workspace": 0, "netstamp": 0, "stats": 0, "untrusted": 0,
    "access": 0,
    "catalog": 1,
    "model": 2,
    "plan": 3, "bench": 3, "sim": 3,
    "fit": 4,
    "report": 5,
    "cli": 6,
}


def _unit(module: str) -> str:
    """'capacity.model.kv' -> 'model'; 'capacity.errors' -> 'errors'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        out.append((name, path))
    return out


def _imports(path: Path, name: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: -node.level + (1 if path.name == "__init__.py" else 0) or None]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.append(mod)
            found += [f"{mod}.{a.name}" for a in node.names]
    return [m for m in found if m == "capacity" or m.startswith("capacity.")]


def test_every_unit_has_a_layer() -> None:
    units = {_unit(n) for n, _ in _modules()} - {"", "__main__"}
    assert units <= set(LAYERS), f"place these in LAYERS: {sorted(units - set(LAYERS))}"


@pytest.mark.parametrize(("name", "path"), _modules(), ids=[n for n, _ in _modules()])
def test_imports_only_go_down(name: str, path: Path) -> None:
    own = _unit(name)
    if own in ("", "__main__"):
        return  # the package's face and `python -m capacity` may re-export anything
    bad = []
    for target in _imports(path, name):
        unit = _unit(target)
        if unit not in LAYERS or unit == own or LAYERS[unit] == LAYERS[own] == 0:
            continue  # its own subpackage; the base modules use each other
        if LAYERS[unit] >= LAYERS[own]:
            bad.append(target)
    assert not bad, f"{name} (layer {LAYERS[own]}) imports upward or sideways: {sorted(set(bad))}"
