"""The built wheel works on its own: installed into a throwaway venv outside the checkout, run
from an empty folder with a fresh workspace, it plans the chapter's example from its bundled
catalog, lists the bundled sample run and serves the app.

The wheel is built with uv (on PATH, or in `.tools/` where `dev.py` installs it), offline: the
build backend is in uv's cache once `dev.py` has synced the environment. The throwaway venv sees
this environment's third-party packages through a `.pth` line (so nothing is downloaded), but
not the checkout: the test asserts that `capacity` is imported from the throwaway venv.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _uv() -> str | None:
    """`uv run` names itself in $UV; else uv on PATH, else the one dev.py put in .tools/."""
    if os.environ.get("UV") and Path(os.environ["UV"]).exists():
        return os.environ["UV"]
    found = shutil.which("uv")
    if found:
        return found
    local = ROOT / ".tools" / ("Scripts" if os.name == "nt" else "bin") / "uv"
    return str(local) if local.exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    uv = _uv()
    if uv is None:
        pytest.skip("needs uv (on PATH or in .tools/, as dev.py installs it) to build the wheel")
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    subprocess.run([uv, "build", "--wheel", "--offline", "--quiet", "-o", str(dist), str(ROOT)],
                   check=True, timeout=120, cwd=base)
    wheel = next(dist.glob("capacity-*.whl"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    subprocess.run([uv, "pip", "install", "--quiet", "--offline", "--no-deps", "--python",
                    str(python), str(wheel)], check=True, timeout=120, cwd=base)
    # this environment's dependencies (streamlit, duckdb...) without the checkout: a plain path
    # line does not process the site folder's own .pth files (the editable install's)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path"
                                "('purelib'))"], check=True, capture_output=True, text=True,
                               timeout=60).stdout.strip())
    (site / "_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    home, work = base / "home", base / "work"
    work.mkdir()
    return {"bin": bindir, "python": python, "venv": venv, "home": home, "work": work}


def _env(paths: dict[str, Path]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CAPACITY_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["CAPACITY_HOME"] = str(paths["home"])
    return env


def _capacity(paths: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    exe = paths["bin"] / ("capacity.exe" if os.name == "nt" else "capacity")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120,
                          cwd=paths["work"], env=_env(paths))


def test_the_installed_package_is_imported(installed: dict[str, Path]) -> None:
    out = subprocess.run([str(installed["python"]), "-c",
                          "import capacity, capacity.workspace as w; "
                          "print(capacity.__file__); print(w.checkout_root()); "
                          "print(w.bundled_data_dir())"],
                         capture_output=True, text=True, check=True, timeout=60,
                         cwd=installed["work"], env=_env(installed)).stdout.splitlines()
    venv = installed["venv"].resolve()
    assert Path(out[0]).resolve().is_relative_to(venv), out
    assert out[1] == "None"
    assert Path(out[2]).resolve().is_relative_to(venv) and out[2].endswith("_data")


def test_plan_from_the_bundled_catalog(installed: dict[str, Path]) -> None:
    proc = _capacity(installed, "plan")
    assert proc.returncode == 0, proc.stderr
    assert "C_vram = floor(14.40 GB / 0.268 GB) = 53" in proc.stdout
    assert "18.97" in proc.stdout
    proc = _capacity(installed, "plan", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["max_concurrency_vram"] == 53


def test_runs_lists_the_bundled_sample(installed: dict[str, Path]) -> None:
    proc = _capacity(installed, "runs")
    assert proc.returncode == 0, proc.stderr
    assert "sample-rtx-4090-sim" in proc.stdout
    assert (installed["home"] / "bench" / "sample-rtx-4090-sim").is_dir()


def test_app_serves(installed: dict[str, Path]) -> None:
    port = _free_port()
    exe = installed["bin"] / ("capacity.exe" if os.name == "nt" else "capacity")
    log = installed["work"].parent / "app.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(exe), "app", "--server.headless", "true", "--server.port", str(port),
             "--server.address", "127.0.0.1"],
            cwd=installed["work"], env=_env(installed), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        deadline = time.monotonic() + 45
        body = ""
        while time.monotonic() < deadline and proc.poll() is None and body != "ok":
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).text
            except httpx.HTTPError:
                time.sleep(0.3)
        assert body == "ok", log.read_text(errors="replace")
        proc.terminate()  # `capacity app` passes SIGTERM on to streamlit and waits for it
        proc.wait(timeout=20)
        with socket.socket() as s:  # so the server is gone with the launcher
            assert s.connect_ex(("127.0.0.1", port)) != 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        finally:
            if os.name != "nt":
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # anything of this test left behind
                except ProcessLookupError:
                    pass


APP_CHECK = """
from streamlit.testing.v1 import AppTest
from capacity import workspace
at = AppTest.from_file(str(workspace.app_dir() / "streamlit_app.py"), default_timeout=90)
at.run()
assert not at.exception, at.exception
assert [m.label for m in at.metric][:2] == ["TPOT", "TTFT"], at.metric
at.switch_page("pages/results.py").run()
assert not at.exception, at.exception
print(at.multiselect(key="r_f_label").options)
"""


def test_installed_app_pages_run(installed: dict[str, Path]) -> None:
    """The app's pages import and draw from the installed copy (`capacity/_app`); the Results
    page reads the workspace's runs, which start with the bundled sample."""
    proc = subprocess.run([str(installed["python"]), "-c", APP_CHECK], capture_output=True,
                          text=True, timeout=180, cwd=installed["work"], env=_env(installed))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sample-rtx-4090-sim" in proc.stdout
