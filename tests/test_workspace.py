"""capacity.workspace: every environment variable is defined there, documented in
docs/configuration.md and read nowhere else; the folders follow the variables at call time."""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from capacity import workspace
from capacity.catalog import custom as cc
from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.fit import calibration_store as cal_store

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "capacity" / "workspace.py"
DOC = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"^(?:[A-Z][A-Z0-9]*_)+[A-Z0-9]+$|^APPDATA$")


def _names_in_source() -> set[str]:
    """The string constants in workspace.py that name environment variables."""
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and NAME.match(n.value)}


def test_every_variable_is_registered_and_documented() -> None:
    names = _names_in_source()
    registered = {v.name for v in workspace.VARIABLES}
    assert registered <= names and {"CAPACITY_HOME", "OPENAI_API_KEY"} <= registered
    assert names == registered, f"defined but not in VARIABLES: {sorted(names - registered)}"
    doc = DOC.read_text(encoding="utf-8")
    missing = [n for n in sorted(names) if f"`{n}`" not in doc]
    assert not missing, f"add to docs/configuration.md: {missing}"


def test_an_unlisted_variable_cannot_be_read() -> None:
    with pytest.raises(ValueError, match="CAPACITY_NOPE"):
        workspace.get("CAPACITY_NOPE")
    assert workspace.get("CAPACITY_MEASURE", {"CAPACITY_MEASURE": " off "}) == "off"


def _environ_reads(path: Path) -> list[str]:
    """Lines that read the process environment other than copying it whole for a child
    (`dict(os.environ)`) or that name a CAPACITY_ variable for an environment lookup."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    copies = {id(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name) and n.func.id == "dict" and len(n.args) == 1}
    bad = []
    for node in ast.walk(tree):
        is_environ = (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
                      or isinstance(node, ast.Name) and node.id in ("environ", "getenv"))
        if is_environ and id(node) not in copies:
            bad.append(f"{path.name}:{node.lineno}")
    for m in re.finditer(r"(?:getenv|environ(?:\.get)?)\s*[(\[]\s*[\"']CAPACITY_", text):
        bad.append(f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}")
    return bad


@pytest.mark.slow
def test_only_workspace_reads_the_environment() -> None:
    files = [p for d in ("capacity", "app", "pages") for p in (ROOT / d).rglob("*.py")]
    files.append(ROOT / "streamlit_app.py")
    bad = [hit for p in files if p != SOURCE for hit in _environ_reads(p)]
    assert not bad, f"read the environment through capacity.workspace: {bad}"


def test_the_check_catches_a_direct_read(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('import os\nX = os.environ.get("CAPACITY_BENCH_DIR")\n')
    assert _environ_reads(probe) == ["probe.py:2"] * 2
    probe.write_text('from os import getenv\nX = getenv("HOME")\n')
    assert _environ_reads(probe) == ["probe.py:2"]
    probe.write_text("import os\nENV = dict(os.environ)\n")
    assert _environ_reads(probe) == []


def test_folders_follow_the_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for v in ("CAPACITY_CUSTOM_DIR", "CAPACITY_BENCH_DIR", "CAPACITY_CALIBRATIONS_DIR"):
        monkeypatch.delenv(v, raising=False)
    assert workspace.checkout_root() == ROOT
    assert workspace.bundled_data_dir() == ROOT / "data"
    monkeypatch.delenv("CAPACITY_HOME", raising=False)
    assert workspace.home_dir() == ROOT / "data"  # a checkout keeps its state in data/
    monkeypatch.setenv("CAPACITY_HOME", str(tmp_path / "home"))
    assert workspace.home_dir() == tmp_path / "home"
    assert workspace.custom_dir() == tmp_path / "home" / "custom"
    assert workspace.bench_dir() == tmp_path / "home" / "bench"
    assert workspace.calibrations_dir() == tmp_path / "home" / "calibrations"
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "runs"))
    assert workspace.bench_dir() == tmp_path / "runs"


def test_per_user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace.sys, "platform", "linux")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert workspace.user_data_dir() == tmp_path / "xdg" / "capacity"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert workspace.user_data_dir() == Path.home() / ".local" / "share" / "capacity"
    monkeypatch.setattr(workspace.sys, "platform", "win32")
    monkeypatch.setenv("APPDATA", str(tmp_path / "roaming"))
    assert workspace.user_data_dir() == tmp_path / "roaming" / "capacity"
    monkeypatch.setattr(workspace.sys, "platform", "darwin")
    assert workspace.user_data_dir() == (Path.home() / "Library" / "Application Support"
                                         / "capacity")


def test_a_fresh_bench_folder_starts_with_the_sample(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAPACITY_BENCH_DIR", raising=False)
    monkeypatch.setenv("CAPACITY_HOME", str(tmp_path / "home"))
    bench = workspace.prepare_bench_dir()
    sample = bench / "sample-rtx-4090-sim"
    assert sorted(p.name for p in sample.glob("*/*")) == sorted(
        p.name for p in (ROOT / "data" / "bench" / "sample-rtx-4090-sim").glob("*/*"))
    shutil.rmtree(sample)  # deleted by the user: stays deleted
    assert not (workspace.prepare_bench_dir() / "sample-rtx-4090-sim").exists()
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "mine"))
    assert workspace.prepare_bench_dir() == tmp_path / "mine"
    assert not (tmp_path / "mine").exists()  # a folder the user named is left alone


def test_calibrations_read_from_both_saved_to_the_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    assert "rtx-4090-vllm-published" in cal_store.saved_calibrations()
    bundled = cal_store.load("rtx-4090-vllm-published")
    assert cal_store.calibration_path("rtx-4090-vllm-published").parent == ROOT / "data" / "calibrations"
    path = cal_store.save(bundled, "mine")
    assert path == tmp_path / "cal" / "mine.toml"
    assert {"mine", "rtx-4090-vllm-published"} <= set(cal_store.saved_calibrations())
    assert cal_store.load("mine").gpu == bundled.gpu


def test_one_catalog_includes_custom_entries(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_CUSTOM_DIR", str(tmp_path))
    cc.clear_caches()
    try:
        assert "my-gpu" not in default_catalog().gpus
        text = (ROOT / "data" / "gpus" / "l4.toml").read_text().replace(
            'key = "l4"', 'key = "my-gpu"')
        cc.save_toml(text, default_catalog())
        assert default_catalog().gpu("my-gpu").bandwidth_gb_s == default_catalog().gpu(
            "l4").bandwidth_gb_s
        monkeypatch.setenv("CAPACITY_CUSTOM_DIR", str(tmp_path / "other"))
        assert "my-gpu" not in default_catalog().gpus  # the folder is looked up on each call
    finally:
        cc.clear_caches()


@pytest.fixture
def custom_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A GPU saved into a temporary custom folder, as the Catalog page saves one."""
    monkeypatch.setenv("CAPACITY_CUSTOM_DIR", str(tmp_path / "custom"))
    cc.clear_caches()
    text = (ROOT / "data" / "gpus" / "rtx-4090.toml").read_text().replace(
        'key = "rtx-4090"', 'key = "my-4090"').replace('name = "RTX 4090"', 'name = "My 4090"')
    cc.save_toml(text, default_catalog())
    yield "my-4090"
    cc.clear_caches()


def test_plan_accepts_a_custom_gpu(custom_gpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", custom_gpu, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_concurrency_vram"] == 53  # a copy of the RTX 4090: the chapter's numbers


def test_size_searches_a_custom_gpu(custom_gpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "--peak-concurrency", "8", "--gpus", custom_gpu, "--slo-ttft-ms", "1e7",
                 "--slo-tpot-ms", "1e5", "--format", "json", "--top", "1"]) == 0
    assert custom_gpu in json.dumps(json.loads(capsys.readouterr().out)["options"])


@pytest.mark.slow
def test_planner_offers_a_custom_gpu(custom_gpu: str) -> None:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=120)
    at.switch_page("pages/planner.py").run()
    assert not at.exception
    assert "My 4090" in at.multiselect(key="planner_gpus").options  # shown by name


def test_app_command_runs_the_checkouts_app_with_extra_args() -> None:
    from capacity.cli import app as app_cli

    cmd, cwd = app_cli.command(["--server.port", "8600"])
    assert cwd == str(ROOT) and cmd[-3:] == [str(ROOT / "streamlit_app.py"), "--server.port",
                                             "8600"]
    assert cmd[1:4] == ["-m", "streamlit", "run"]
    assert main(["plan", "--server.port", "8600"]) == 2  # only `app` passes unknown flags on
