"""`capacity calibrate` end to end, and `capacity plan --calibration` (JSON keys unchanged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity.cli.main import main
from capacity.fit.calibration import Calibration
from capacity.fit.calibration_store import load
from capacity.model.scenario import Scenario

FIX = Path(__file__).parent / "fixtures"


@pytest.mark.slow
def test_calibrate_from_a_vllm_sweep_saves_and_plan_uses_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "llama-4090.toml"
    rc = main(["calibrate", "--model", "llama-3.1-8b-bf16", "--gpu", "rtx-4090",
               "--measured", str(FIX / "vllm_bench_serve_sweep.jsonl"),
               "--engine", "vLLM 0.11.0", "--save", str(out_file)])
    text = capsys.readouterr().out
    assert rc == 0 and out_file.exists()
    assert "knob" in text and "eta_bw" in text and "held out" in text
    assert "median |error|: chapter's" in text and f"saved {out_file}" in text
    cal = load(str(out_file))
    assert cal.model == "llama-3.1-8b-bf16" and cal.gpu == "rtx-4090"
    assert cal.engine == "vLLM 0.11.0" and len(cal.points) == 5  # 4 TPOT + 1 TTFT (lowest C)
    assert cal.inputs.endswith("vllm_bench_serve_sweep.jsonl")

    plan = ["plan", "--model", "llama-3.1-8b-bf16", "--ctx", "1152", "--format", "json"]
    assert main(plan) == 0
    spec = json.loads(capsys.readouterr().out)
    assert main([*plan, "--calibration", str(out_file)]) == 0
    calibrated = json.loads(capsys.readouterr().out)
    assert calibrated.keys() == spec.keys()
    assert spec["calibration"] is None and calibrated["calibration"] == "llama-4090"
    # the calibrated step at C=1 is close to the measured 22.48 ms; the spec sheet is not
    step1 = calibrated["points"][0]["step_ms"]
    assert step1 == pytest.approx(22.48, rel=0.05)
    assert spec["points"][0]["step_ms"] < 0.8 * 22.48


def test_plan_text_says_which_calibration(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.toml"
    assert main(["calibrate", "--measured", str(FIX / "measured_minimal.csv"),
                 "--save", str(f)]) == 0
    capsys.readouterr()
    assert main(["plan", "--calibration", str(f)]) == 0
    assert "calibration 'c'" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.slow
def test_calibrate_against_the_published_reference(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["calibrate", "--model", "mistral-7b-v0.3-bf16", "--gpu", "rtx-4090",
               "--reference", "--output", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    err = doc["median_abs_error"]["tpot"]
    assert err["fitted"] < err["spec"] and err["held_out"] < err["spec"]
    assert doc["median_abs_error"]["ttft"]["held_out"] is None  # one TTFT point: said, not hidden


def test_aiperf_csv_takes_concurrency_and_label_reads_the_bench_store(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--model", "llama-3.1-8b-bf16", "--measured",
                 str(FIX / "profile_export_aiperf.csv"), "--concurrency", "8"]) == 0
    assert "TTFT (prefill)" in capsys.readouterr().out
    d = tmp_path / "run1" / "c4"
    d.mkdir(parents=True)
    (d / "summary.csv").write_text("concurrency,tpot_p50_ms,ttft_p50_ms,prompt_tokens_mean,"
                                   "output_tokens_mean\n4,7.5,300,3000,128\n")
    assert main(["calibrate", "--label", "run1", "--bench-dir", str(tmp_path)]) == 0
    assert "TPOT (decode step)" in capsys.readouterr().out


@pytest.mark.parametrize("args,match", [
    pytest.param(["--measured", "/nonexistent.csv"], "no such file", id="missing-file"),
    pytest.param(["--measured", str(FIX / "profile_export_aiperf.csv")],
                 "does not record the concurrency", id="aiperf-csv"),
    pytest.param(["--reference", "--gpu", "mi300x"], "has no sweep", id="no-reference"),
    pytest.param(["--measured", str(FIX / "measured_minimal.csv"), "--max-concurrency", "53"],
                 "write C@TOKENS", id="bad-max-concurrency"),
    pytest.param(["--measured", str(FIX / "measured_minimal.csv"), "--save", "bad name!"],
                 "may hold only", id="bad-name"),
    pytest.param(["--measured", str(FIX / "measured_minimal.csv"), "--levels", "999"],
                 "none of the measured levels", id="levels-not-measured"),
    pytest.param(["--measured", str(FIX / "measured_minimal.csv"), "--levels", "1,x"],
                 "comma list of whole numbers", id="levels-not-numbers"),
    # issue 31: --batch1 fits the operator step's factor; with the chapter's step it was
    # silently ignored
    pytest.param(["--measured", str(FIX / "measured_minimal.csv"), "--batch1",
                  "--step-method", "chapter"], "drop --step-method chapter or --batch1",
                 id="batch1-with-the-chapter-step"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], match: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", *args]) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_plan_with_an_unknown_calibration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--calibration", "/nonexistent/cal.toml"]) == 2
    assert "no calibration at" in capsys.readouterr().err


@pytest.mark.slow
def test_batch1_flag_fits_and_saves_the_factor(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    args = ["calibrate", "--model", "llama-3.1-8b-bf16", "--gpu", "rtx-4090",
            "--measured", str(FIX / "vllm_bench_serve_sweep.jsonl"), "--output", "json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["knobs"]["batch1_factor"] is None
    out_file = tmp_path / "b1.toml"
    assert main([*args, "--batch1", "--save", str(out_file)]) == 0
    fitted = json.loads(capsys.readouterr().out)["knobs"]["batch1_factor"]
    assert 0.2 <= fitted <= 2.0
    assert load(str(out_file)).batch1_factor == pytest.approx(fitted)


def test_levels_fit_a_subset_of_a_run(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`--levels 1,4`: the other levels of the run stay out of the fit (to check it against)."""
    d = tmp_path / "grid" / "r1"
    d.mkdir(parents=True)
    (d / "summary.csv").write_text(
        "concurrency,tpot_p50_ms,ttft_p50_ms,prompt_tokens_mean,output_tokens_mean\n"
        + "".join(f"{c},{7 + 0.2 * c},{300 * c},3000,128\n" for c in (1, 2, 4, 8)))
    assert main(["calibrate", "--model", "llama-3.1-8b-bf16", "--label", "grid", "--bench-dir",
                 str(tmp_path), "--levels", "1,4", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted({p["concurrency"] for p in doc["points"]}) == [1, 4]
    assert doc["inputs"].endswith("levels 1,4")
    assert main(["calibrate", "--model", "llama-3.1-8b-bf16", "--label", "grid", "--bench-dir",
                 str(tmp_path), "--output", "json"]) == 0
    assert sorted({p["concurrency"] for p in json.loads(capsys.readouterr().out)["points"]}
                  ) == [1, 2, 4, 8]


def test_pinned_means_one_thing_in_the_report(seed: Scenario) -> None:
    """Issue 31: the report said 'pinned by the data: yes' beside '+/- 12.1 (not pinned down
    by the data)'. 'Pinned' is the column's alone (`Calibration.pinned`: the data cut the
    knob's prior width tenfold); a standard error larger than its knob says only that."""
    from capacity.cli.calibrate import report

    def row(text: str, knob: str) -> str:
        return next(line for line in text.splitlines() if line.lstrip().startswith(knob))

    cal = Calibration(name="c", model=seed.variant.key, gpu=seed.gpu.key,
                      step_method="operator", eta_bw=0.5, step_overhead_ms=5.0,
                      std=(("eta_bw", 0.01), ("step_overhead_ms", 12.1)),
                      identifiability=(("eta_bw", 0.5), ("step_overhead_ms", 0.05)))
    text = report(cal, seed)
    assert "+/- 12.1 (more than the value)" in row(text, "step_overhead_ms")
    assert row(text, "step_overhead_ms").rstrip(" |").endswith("yes")
    assert cal.pinned("step_overhead_ms") is True
    assert row(text, "eta_bw").rstrip(" |").endswith("no: stays near its prior")
    assert "+/- 2%" in row(text, "eta_bw") and "not pinned" not in text
