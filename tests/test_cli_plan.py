"""`capacity plan` through its real entry point, `main(argv)`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from capacity.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_default_is_the_chapters_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan")
    assert code == 0
    assert "24 GB x 0.9 - 5.7 GB weights - 1.5 GB overhead = 14.40 GB for KV" in out
    assert "= 53 concurrent requests" in out
    assert "none: bandwidth binds" in out
    assert "2.975 s linear" in out
    assert "2 GPUs (2 replicas) (tight), FP8 KV cache (tight), 4K context (tight)" in out


def test_chapters_own_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--model", "qwen3.5-9b-awq", "--vram", "24", "--ctx",
                       "8192", "--concurrency", "50", "--gpu-price", "1.92", "--format", "json")
    assert code == 0
    data = json.loads(out)
    p = {pt["concurrency"]: pt for pt in data["points"]}[50]
    assert p["bound"] == "bandwidth" and p["verdict"] == "tight"
    assert p["bandwidth_ms"] == pytest.approx(18.97, abs=0.01)
    assert p["cost_per_mtok"] == pytest.approx(1.92 / (p["aggregate_tok_s"] * 3600) * 1e6)


def test_json_keys_and_units(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "plan", "--format", "json")
    data = json.loads(out)
    for key in ("kv_bytes_per_token", "kv_request_bytes", "kv_budget_bytes",
                "max_concurrency_vram", "crossover_concurrency", "ttft_linear_s", "ttft_s",
                "points"):
        assert key in data
    assert data["kv_bytes_per_token"] == 32768
    assert data["kv_request_bytes"] == 268435456
    assert data["kv_budget_bytes"] == pytest.approx(14.4e9)
    assert data["max_concurrency_vram"] == 53
    assert data["crossover_concurrency"] is None
    assert [p["concurrency"] for p in data["points"]] == [1, 50, 100]
    point_keys = {"concurrency", "bandwidth_ms", "compute_ms", "step_ms", "bound",
                  "tok_s_per_request", "aggregate_tok_s", "cost_per_mtok", "kv_total_bytes",
                  "vram_subtotal_bytes", "verdict"}
    assert point_keys <= set(data["points"][0])
    assert [p["verdict"] for p in data["points"]] == ["fits", "tight", "does_not_fit"]


@pytest.mark.parametrize("fmt", ["markdown", "csv", "text"])
def test_other_formats(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, _ = run(capsys, "plan", "--format", fmt)
    assert code == 0 and "tight" in out


def test_crossover_and_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "plan", "--ctx", "2048", "--format", "json")
    assert json.loads(out)["crossover_concurrency"] == pytest.approx(133.4, abs=0.1)
    _, out, _ = run(capsys, "plan", "--gpu", "h100-sxm", "--kv-dtype", "fp8", "--format", "json")
    data = json.loads(out)
    assert data["gpu"] == "h100-sxm" and data["kv_bytes_per_token"] == 16384


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--model", "qwen3.5-9b-awk"], "did you mean qwen3.5-9b-awq", id="model"),
        pytest.param(["--gpu", "rtx4090"], "did you mean rtx-4090", id="gpu"),
        pytest.param(["--util", "1.2"], "argument --util: '1.2' is not a finite number in (0, 1]",
                     id="util-high"),
        pytest.param(["--util", "0"], "argument --util: '0' is not a finite number in (0, 1]",
                     id="util-zero"),
        pytest.param(["--vram", "-24"], "argument --vram: '-24' is not a finite number in (0, 10,000]",
                     id="vram"),
        pytest.param(["--weights-gb", "0"], "argument --weights-gb: '0' is not a finite number in (0,",
                     id="weights"),
        pytest.param(["--ctx", "0"], "argument --ctx: '0' is not a whole number in [1, 10,000,000]",
                     id="ctx-zero"),
        pytest.param(["--ctx", "9999999"], "--allow-long-context", id="ctx-limit"),
        pytest.param(["--concurrency", "10,fifty"], "comma list", id="conc-parse"),
        pytest.param(["--concurrency", "0,5"], "whole numbers >= 1", id="conc-zero"),
        pytest.param(["--kv-dtype", "fp3"], "unknown precision", id="kv"),
        pytest.param(["--tp", "3", "--gpus", "3"], "does not divide", id="tp"),
        pytest.param(["--ctx", "abc"], "argument --ctx: 'abc' is not a whole number", id="argparse"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(capsys: pytest.CaptureFixture[str],
                                           argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "plan", *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_long_context_allowed_with_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--model", "mistral-7b-v0.3", "--ctx", "65536",
                       "--allow-long-context")
    assert code == 0 and "warning: context 65536 tokens exceeds" in out


def test_corrupt_catalog_is_one_line(tmp_path: Path) -> None:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(ROOT / "data" / "models", data / "models")
    shutil.copytree(ROOT / "data" / "gpus", data / "gpus")
    shutil.copy(ROOT / "data" / "weight_formats.toml", data / "weight_formats.toml")
    (data / "gpus" / "rtx-4090.toml").write_text("key = [unterminated\n")
    env = {**os.environ, "CAPACITY_DATA_DIR": str(data)}
    proc = subprocess.run([sys.executable, "-m", "capacity", "plan"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, env=env)
    assert proc.returncode == 2
    assert "rtx-4090.toml: not valid TOML" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_python_dash_m_runs(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "capacity", "plan", "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["max_concurrency_vram"] == 53


def test_help_says_units_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--help"]) == 0
    out = capsys.readouterr().out
    for text in ("--vram GB", "--bandwidth GB_S", "--overhead-gb GB", "(default 0.9)",
                 "(default 8192, or",
                 "(default 1,50,100)"):
        assert text in out


def test_a_subcommand_imports_only_its_own_module() -> None:
    """`capacity plan` must not pay for scipy, httpx or DuckDB (the other commands' imports)."""
    code = ("import sys; from capacity.cli.main import main; main(['plan', '--format', 'json']); "
            "print(sorted(m for m in ('scipy', 'duckdb', 'uvicorn', 'capacity.cli.bench') "
            "if m in sys.modules), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_an_open_loop_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: `capacity plan --rate R` predicts an open loop under the engine's scheduling:
    at a trickle (1 request every 20 s) nobody waits, so TTFT is one prefill and every gap
    between tokens one decode step of one sequence; past the replica's saturation rate the
    load is marked saturated."""
    from capacity.model.scenario import evaluate, make_scenario

    argv = ["plan", "--ctx", "4096", "--prompt-tokens", "1000", "--concurrency", "1",
            "--engine", "vllm", "--output-tokens", "64", "--format", "json"]
    assert main([*argv, "--rate", "0.05", "--duration", "4000"]) == 0
    data = json.loads(capsys.readouterr().out)
    (pt,) = data["open_loop"]["points"]
    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=4096, prompt_tokens=1000)
    ev = evaluate(s, [1])
    assert pt["ttft_ms"]["0.5"] == pytest.approx(float(ev.ttft_s) * 1e3, rel=0.02)
    assert pt["itl_ms"]["0.5"] == pytest.approx(float(ev.decode.step_ms[0]), rel=0.05)
    assert pt["saturated"] is False and pt["arrivals"] == "poisson"
    assert main([*argv, "--rate", "50", "--duration", "10", "--arrivals", "constant"]) == 0
    (hot,) = json.loads(capsys.readouterr().out)["open_loop"]["points"]
    assert hot["saturated"] is True and hot["ttft_mean_ms"] > 10 * pt["ttft_mean_ms"]
    # stages: one load over every stage, its mean rate the time-weighted one
    assert main([*argv, "--stages", "0.5:60,2:30"]) == 0
    (st,) = json.loads(capsys.readouterr().out)["open_loop"]["points"]
    assert st["stages"] == [[0.5, 60.0], [2.0, 30.0]] and st["rate_per_s"] == pytest.approx(1.0)


@pytest.mark.parametrize(("flags", "message"), [
    (["--rate", "0"], "--rate '0': each number must be > 0"),
    (["--rate", "a,b"], "give a comma list of numbers"),
    (["--stages", "2-60"], "give RATE:SECONDS"),
    (["--stages", "2:0"], "a stage needs a rate > 0 req/s and a duration > 0 s"),
    (["--rate", "100000", "--duration", "86400"], "at most"),
])
def test_a_bad_open_loop_is_one_line(flags: list[str], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_model_with_a_short_context_needs_no_ctx(custom: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31: a model whose limit is under the chapter's 8K (a small GGUF model of 4,096
    tokens) is planned, simulated or calibrated at its limit without --ctx; a --ctx beyond the
    limit is still refused."""
    from capacity.catalog import custom as catalog_custom
    from capacity.catalog.loader import default_catalog

    text = (Path(__file__).resolve().parent.parent / "data" / "models" /
            "llama-3.1-8b.toml").read_text(encoding="utf-8")
    text = text.replace('key = "llama-3.1-8b"', 'key = "short-ctx"')
    text = re.sub(r"max_context_tokens = \d+", "max_context_tokens = 4096", text)
    catalog_custom.save_toml(text, default_catalog())
    catalog_custom.clear_caches()
    assert main(["plan", "--model", "short-ctx", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["context_tokens"] == 4096
    assert main(["plan", "--model", "short-ctx", "--ctx", "8192"]) == 2
    assert "limit of 4096 tokens" in capsys.readouterr().err


def _open_loop(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code, out, err = run(capsys, "plan", "--model", "qwen3-8b-bf16", "--gpu", "h100-sxm",
                         "--ctx", "4096", "--prompt-tokens", "2048", "--engine", "vllm",
                         "--rate", "4", "--duration", "60", "--format", "json", *extra)
    assert code == 0, err
    return dict(json.loads(out))


def test_scheduler_knobs_change_the_load_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    # issue 32: a chunk size and a sequence cap the engine has must move what it predicts
    small = _open_loop(capsys, "--max-num-batched-tokens", "256")["open_loop"]["points"][0]
    large = _open_loop(capsys, "--max-num-batched-tokens", "4096")["open_loop"]["points"][0]
    # small chunks ride in bandwidth-bound decode steps: shorter stalls between tokens
    assert small["itl_mean_ms"] < 0.9 * large["itl_mean_ms"]
    capped = _open_loop(capsys, "--max-num-seqs", "3")
    assert capped["open_loop"]["slots_per_replica"] == 3
    assert capped["open_loop"]["points"][0]["ttft_mean_ms"] > small["ttft_mean_ms"]
    code, out, _ = run(capsys, "plan", "--engine", "vllm", "--concurrency", "8",
                       "--max-num-seqs", "4", "--max-num-batched-tokens", "1024",
                       "--format", "json")
    load = json.loads(out)["load"]
    assert code == 0 and load["slots_per_replica"] == 4 and load["token_budget"] == 1024


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-num-batched-tokens", "512"], "add --engine NAME or --rate LIST"),
    (["--engine", "chapter", "--max-num-batched-tokens", "512"], "prefills whole prompts"),
    (["--engine", "vllm", "--max-num-batched-tokens", "0"], "whole number in [1,"),
    (["--engine", "vllm", "--max-num-seqs", "-3"], "whole number in [1,"),
])
def test_scheduler_knobs_are_checked(capsys: pytest.CaptureFixture[str], argv: list[str],
                                     message: str) -> None:
    code, _, err = run(capsys, "plan", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("basis", ["chapter", "spec", "typical:vllm"])
def test_json_states_the_knobs_size_states(capsys: pytest.CaptureFixture[str], basis: str) -> None:
    """One basis, one set of knobs: `plan`'s JSON carries the same knobs block as the deployment
    `size` recommends on that basis (the numbers behind both rest on it), for the same GPU and
    weight format (on a typical basis the prefill plateau is a share of that GPU's measured
    matmul ceiling for the format's GEMM precision)."""
    _, out, _ = run(capsys, "size", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--dau", "500",
                    "--basis", basis, "--format", "json")
    deployment = json.loads(out)["options"][0]["deployment"]
    size = deployment["basis"]["knobs"]
    _, out, _ = run(capsys, "plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--basis", basis,
                    "--weights", deployment["weights"], "--format", "json")
    plan = json.loads(out)["knobs"]
    assert plan == size
    if basis == "typical:vllm":  # data/engines.toml's [vllm]: eta_bw 1 of the GPU's copy
        # ceiling (an H100 SXM copies 3,085.1 of 3,350 GB/s), 77.3 us per layer
        assert plan["eta_bw"] == pytest.approx(3085.1 / 3350)
        assert plan["layer_overhead_ms"] == 0.0773
    if basis == "spec":
        assert plan["eff"] == 1.0 and plan["mfu"] == 1.0 and plan["layer_overhead_ms"] == 0.0


def test_the_decode_table_shows_what_the_step_adds_to_its_roofline(
        capsys: pytest.CaptureFixture[str]) -> None:
    """At TP 8 on the typical basis the step is more than its bandwidth term: the table shows
    the fixed time (F11: 80 layers x 77.3 us = 6.184 ms), F10's all-reduces (160 of them,
    9.58 us each plus 16,384 B a sequence at 50.7 GB/s up to 64 sequences) and what F4c's
    ridge adds to the max of the read and the arithmetic, and where the bandwidth binds the
    columns add up to the step. The chapter's one-GPU example keeps its columns."""
    assert main(["plan", "--model", "llama-3.1-70b", "--weights", "fp8", "--gpu", "h100-sxm",
                 "--gpus", "8", "--tp", "8", "--typical", "vllm", "--concurrency", "1,64"]) == 0
    text = capsys.readouterr().out
    head = next(ln for ln in text.splitlines() if ln.startswith("concurrency  bandwidth ms"))
    assert head.split()[:9] == ["concurrency", "bandwidth", "ms", "compute", "ms", "fixed",
                                "ms", "all-reduce", "ms"]
    assert head.split()[9:12] == ["beyond", "max", "ms"]
    rows = {int(ln.split()[0]): [float(x) for x in ln.split()[1:7]]
            for ln in text.split("Decode step (F4)")[1].split("Crossover")[0].splitlines()
            if ln[:1].isdigit()}
    for c, (bw, comp, fixed, comm, ridge, step) in rows.items():
        assert fixed == pytest.approx(6.184, abs=1e-3)
        # F4c at k = 2.5: (bw^2.5 + comp^2.5)^(1/2.5) - bw
        assert ridge == pytest.approx((bw ** 2.5 + comp ** 2.5) ** 0.4 - bw, abs=2e-3), c
        assert bw + fixed + comm + ridge == pytest.approx(step, abs=0.01), c
    one = 160 * (9.58e-3 + 1.75 * 16384 / 50.7e9 * 1e3)
    assert rows[1][3] == pytest.approx(one, abs=1e-3)
    assert rows[64][3] == pytest.approx(160 * 9.58e-3 + 64 * (one - 160 * 9.58e-3), abs=1e-3)
    assert main(["plan"]) == 0
    assert "concurrency  bandwidth ms  compute ms  step ms" in capsys.readouterr().out
