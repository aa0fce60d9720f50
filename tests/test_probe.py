"""`capacity probe` (capacity.catalog.probe): measures this machine in a few seconds at a small
size, writes a valid custom GPU entry into a temp workspace, and the entry plans."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from capacity.catalog import custom as cc
from capacity.catalog.loader import default_catalog
from capacity.catalog.probe import ProbeResult, gpu_table, probe_cpu, read_bandwidth
from capacity.cli.main import main


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAPACITY_HOME", str(tmp_path))
    monkeypatch.delenv(cc.ENV_VAR, raising=False)
    cc.clear_caches()
    yield tmp_path
    cc.clear_caches()


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_quick_probe_writes_an_entry_that_loads_and_plans(
        workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--quick", "--device", "cpu", "--key", "my-cpu",
                 "--price-per-hour", "0.5", "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["read_bytes_per_s"] > 1e8 and out["gemm_flops_per_s"]["f32"] > 1e7
    saved = workspace / "custom" / "gpus" / "my-cpu.toml"
    assert out["saved"] == str(saved) and saved.is_file()
    gpu = default_catalog().gpu("my-cpu")
    assert gpu.bandwidth_gb_s == pytest.approx(out["read_bytes_per_s"] / 1e9, rel=1e-3)
    assert "measured on this machine" in gpu.source and gpu.as_of in gpu.source
    assert gpu.price_per_hour == 0.5
    assert main(["plan", "--model", "llama-3.1-8b", "--gpu", "my-cpu", "--ctx", "4096"]) == 0
    assert "(probed)" in capsys.readouterr().out
    # a second probe with the same key needs --replace
    assert main(["probe", "--quick", "--device", "cpu", "--key", "my-cpu"]) == 2
    assert "already exists" in capsys.readouterr().err


def test_entry_states_best_rate_and_method() -> None:
    result = ProbeResult(device="cpu", name="Test CPU", memory_bytes=64e9,
                         read_bytes_per_s=40e9, gemm_flops_per_s={"f32": 2e12, "f16": 1e11},
                         call_overhead_s=1e-6, threads=8, method="m", date="2026-11-30")
    table = gpu_table(result, key="t", price_per_hour=1.0, currency="USD", price_source="p")
    cc.validate_gpu(table)
    assert table["bf16_tflops"] == 2.0 and table["bandwidth_gb_s"] == 40.0
    assert table["memory_gb"] == 64.0 and "2026-11-30: m" in table["source"]
    assert "f16 0.1 TFLOP/s" in table["notes"] and "1.0 us" in table["notes"]


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_probe_measures_something_physical() -> None:
    r = probe_cpu(quick=True, date="2026-11-30")
    assert r.device == "cpu" and r.threads >= 1 and r.memory_bytes > 0
    assert 1e8 < r.read_bytes_per_s < 1e13  # between 0.1 GB/s and 10 TB/s
    assert 0 < r.call_overhead_s < 0.01
    assert read_bandwidth(1 << 20, repeats=2) > 1e8


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_threads_sets_the_blas_threads_and_the_output_states_them(
        workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31: the realtest's engine runs with `-t 1`, so its probe must measure with 1
    thread, and say how many it used (here numpy is loaded: OpenBLAS is told directly, and its
    own count is given back afterwards)."""
    from capacity.cli import probe

    before = probe.blas_threads()
    assert main(["probe", "--quick", "--device", "cpu", "--threads", "1", "--no-save",
                 "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["threads"] == 1 and out["entry"]["notes"].startswith("cpu, 1 thread")
    assert probe.blas_threads() == before
    assert main(["probe", "--device", "cuda", "--threads", "1", "--no-save"]) == 2
    err = capsys.readouterr().err
    assert "--threads is for --device cpu" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_probe_process_measures_and_states_the_threads_it_was_given() -> None:
    """In a `capacity probe` process the thread count is set before the probe loads numpy
    where it can be (the variables OpenBLAS, MKL and BLIS read when they load), else on the
    loaded OpenBLAS; either way the count printed is the one the BLAS reports."""
    root = Path(__file__).resolve().parents[1]
    code = ("from capacity.cli import probe; undo = probe.limit_blas_threads(1); "
            "import numpy; print(probe.blas_threads()); undo()")
    check = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=root, timeout=60)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["1"]
    proc = subprocess.run([sys.executable, "-m", "capacity", "probe", "--quick", "--device",
                           "cpu", "--threads", "1", "--no-save"], capture_output=True,
                          text=True, cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].endswith("(cpu, 1 thread: --threads 1)")
