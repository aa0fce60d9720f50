"""The house rules a maintainer trips over when they slip (docs/architecture.md):

- no import circle anywhere in `capacity/` (imports inside functions count: they hide a circle,
  they do not remove it);
- no private name (`_x`) imported from another module, in `capacity/`, `app/` or `pages/`;
- no module in `capacity/` over about 700 lines unless its docstring says why (a line starting
  "Long module:");
- no page over about 300 lines: pages draw, `app/` holds their state and formatting, `capacity/`
  computes.
"""

from __future__ import annotations

import ast
import functools
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "capacity"
MODULE_LINES = 700
PAGE_LINES = 300
LONG_REASON = "Long module:"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "_app" not in p.parts}


@functools.cache  # each file parsed once per worker: the circle check and the per-file tests share it
def _imported(path: Path, name: str) -> list[tuple[str, list[str]]]:
    """(module, names) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = package[: len(package) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.append((mod, [a.name for a in node.names]))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for mod, names in _imported(path, name):
            targets = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in modules] or [mod]
            for target in targets:
                # `import capacity.x.y` also runs capacity.x's __init__, but an __init__ that only
                # re-exports is not a circle of the code: count the module named, not its parents
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_faces(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ re-exporting its modules is not a circle: drop edges into an
    __init__ from inside its own package."""
    packages = {m for m, p in _modules().items() if p.name == "__init__.py"}
    return {
        m: {t for t in targets if not (t in packages and m.startswith(t + "."))}
        for m, targets in graph.items()
    }


def test_no_import_circle() -> None:
    cycles = _cycles(_package_faces(_graph()))
    assert not cycles, "import circles (break them by moving the shared part down):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _sources() -> list[Path]:
    return [
        *(p for p in sorted(PACKAGE.rglob("*.py")) if "_app" not in p.parts),
        *sorted((ROOT / "app").glob("*.py")),
        *sorted((ROOT / "pages").glob("*.py")),
        ROOT / "streamlit_app.py",
    ]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_crosses_modules(path: Path) -> None:
    name = _module_name(path)
    bad = [
        f"{mod}.{n}"
        for mod, names in _imported(path, name)
        for n in names
        if n.startswith("_") and not n.startswith("__") and mod != name
    ]
    assert not bad, f"{name} imports private names: {bad} (make them public or move them)"


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


@pytest.mark.parametrize(
    "path", [p for p in sorted(PACKAGE.rglob("*.py")) if "_app" not in p.parts],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_modules_stay_short_or_say_why(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines <= MODULE_LINES:
        return
    assert LONG_REASON in _docstring(path), (
        f"{path.relative_to(ROOT)} has {lines} lines: split it by job, or say why it is one "
        f"module in a docstring line starting {LONG_REASON!r}"
    )


@pytest.mark.parametrize("path", sorted((ROOT / "pages").glob("*.py")), ids=lambda p: p.name)
def test_pages_are_thin(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= PAGE_LINES, (
        f"pages/{path.name} has {lines} lines: move state and formatting to app/, computation "
        "to capacity/"
    )


def test_ci_fails_where_the_browser_tests_would_skip(tmp_path: Path) -> None:
    # issue 28: .ci/run checks for the browser before the suite, so no green run skips them
    guard = ROOT / ".ci" / "require-browser"
    run_ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert run_ci.index(".ci/require-browser") < run_ci.index("python3 dev.py test")
    missing = subprocess.run([str(guard), str(tmp_path / "no-chromium")], capture_output=True,
                             text=True, check=False)
    assert missing.returncode == 1 and "browser tests would be skipped" in missing.stderr
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\n", encoding="utf-8")
    fake.chmod(0o755)
    assert subprocess.run([str(guard), str(fake)], check=False).returncode == 0
