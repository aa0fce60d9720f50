"""Issue 15, items 8 (storage), 11, 12, 13, 14: no bad number is stored or ranked; a bad input
is one line and exit code 2, never a traceback (docs/reliability.md).

Every test is bounded in time: an alarm ends any test that runs past its limit, and the
commands that could start a server run in a subprocess with a timeout.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_files import one_line_exit_2, write_custom_gpu
from streamlit.testing.v1 import AppTest

from capacity.bench.metrics import RequestRecord, summarize
from capacity.bench.storage import RunWriter
from capacity.bench.store import RunStore, compact_all
from capacity.catalog.loader import DATA_DIR, load_catalog
from capacity.cli.main import main
from capacity.errors import CatalogError, InputError
from capacity.fit.imports import read_measured
from capacity.sim.scheduler import SimConfig

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
APP = str(ROOT / "streamlit_app.py")
LIMIT_S = 90



# -- item 11: the catalog --------------------------------------------------------------------

@pytest.mark.parametrize(("field", "value"), [
    ("price_per_hour", "nan"), ("price_per_hour", "inf"), ("memory_gb", "1e300"),
    ("bandwidth_gb_s", "-inf"), ("bf16_tflops", "1e9"), ("memory_gb", "true")])
def test_a_bad_custom_gpu_is_skipped_with_a_warning_naming_file_and_field(
        custom: Path, field: str, value: str) -> None:
    write_custom_gpu(custom, "mi300x-bad", **{field: value})
    write_custom_gpu(custom, "mi300x-good")
    from capacity.catalog.loader import default_catalog
    cat = default_catalog()
    assert "mi300x-bad" not in cat.gpus and "mi300x-good" in cat.gpus
    assert len(cat.warnings) == 1
    assert "mi300x-bad.toml" in cat.warnings[0] and f"field '{field}'" in cat.warnings[0]


def test_a_bad_custom_model_layer_count_is_skipped(custom: Path) -> None:
    text = (DATA_DIR / "models" / "llama-3.1-8b.toml").read_text(encoding="utf-8")
    text = text.replace('key = "llama-3.1-8b"', 'key = "huge-layers"')
    text = text.replace("num_layers = 32", "num_layers = 100000")
    (custom / "models").mkdir(parents=True)
    (custom / "models" / "huge-layers.toml").write_text(text, encoding="utf-8")
    from capacity.catalog.loader import default_catalog
    cat = default_catalog()
    assert "huge-layers" not in cat.models
    assert any("huge-layers.toml" in w and "num_layers" in w for w in cat.warnings)


def test_a_non_utf8_custom_file_is_a_warning_not_a_traceback(custom: Path) -> None:
    path = write_custom_gpu(custom, "latin")
    path.write_bytes(path.read_bytes().replace(b'"MI300X"', b'"MI300X \xe9\xe8"'))
    from capacity.catalog.loader import default_catalog
    cat = default_catalog()
    assert "latin" not in cat.gpus
    assert any("latin.toml" in w and "UTF-8" in w for w in cat.warnings)


def test_plan_runs_with_a_bad_custom_file_and_prints_the_warning(
        custom: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_custom_gpu(custom, "mi300x-nan", price_per_hour="nan")
    assert main(["plan"]) == 0
    captured = capsys.readouterr()
    assert "C_vram" in captured.out
    assert "warning: skipped custom GPU" in captured.err and "mi300x-nan.toml" in captured.err


def test_size_never_ranks_a_nan_price(custom: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_custom_gpu(custom, "mi300x-nan", price_per_hour="nan")
    code = main(["size", "--peak-concurrency", "50", "--model", "qwen3.5-9b", "--format", "json"])
    out = capsys.readouterr().out
    assert code in (0, 1)
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert all(o["gpu"] != "mi300x-nan" for o in data["options"])
    assert all(o["cost_per_month"] is None or math.isfinite(o["cost_per_month"])
               for o in data["options"])
    # asked for by name, it is not there: the stderr says why (before: ranked first at NaN)
    code = main(["size", "--dau", "20000", "--model", "qwen3.5-9b", "--gpus",
                 "mi300x-nan,mi300x", "--format", "json"])
    captured = capsys.readouterr()
    assert code == 2 and "unknown GPU 'mi300x-nan'" in captured.err
    assert "mi300x-nan.toml" in captured.err and "price_per_hour" in captured.err


def test_a_bad_bundled_file_stays_an_error(tmp_path: Path) -> None:
    import shutil
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR / "gpus", data / "gpus")
    shutil.copytree(DATA_DIR / "models", data / "models")
    shutil.copy(DATA_DIR / "weight_formats.toml", data / "weight_formats.toml")
    write_custom_gpu(data, "broken", memory_gb="nan")
    with pytest.raises(CatalogError, match="broken.toml.*memory_gb"):
        load_catalog(data)


@pytest.mark.parametrize("page", ["pages/catalog.py", "pages/explorer.py"])
def test_the_catalog_and_explorer_pages_show_the_warning(custom: Path, page: str) -> None:
    write_custom_gpu(custom, "mi300x-nan", price_per_hour="nan")
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page).run()
    assert not at.exception
    assert any("mi300x-nan.toml" in w.value and "price_per_hour" in w.value
               for w in at.warning)


# -- item 12: numeric flags and strict JSON ---------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["size", "--peak-concurrency", "10", "--cny-per-usd", "nan"],
    ["size", "--peak-concurrency", "10", "--eff", "nan"],
    ["size", "--peak-concurrency", "10", "--eff", "5"],
    ["size", "--peak-concurrency", "10", "--eff", "inf"],
    ["size", "--peak-concurrency", "10", "--overhead-gb", "nan"],
    ["size", "--dau", "1e400"],
    ["plan", "--vram", "1e308"],
    ["plan", "--bandwidth", "inf"],
    ["plan", "--gpu-price", "nan"],
    ["plan", "--ctx", "10000000000000", "--allow-long-context"],
    ["calibrate", "--reference", "--concurrency", "nan"],
], ids=lambda a: " ".join(a[-2:]))
def test_a_bad_numeric_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                   argv: list[str]) -> None:
    err = one_line_exit_2(capsys, *argv)
    assert f"argument {argv[-2] if argv[-1] != '--allow-long-context' else argv[-3]}" in err


def test_a_concurrency_list_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_exit_2(capsys, "plan", "--concurrency", "1,100000000000000000000000")
    assert "at most 10,000,000" in err


def test_json_output_is_strict() -> None:
    from capacity.cli.common import dumps
    text = dumps({"a": float("nan"), "b": [float("inf"), 1.5], "c": (float("-inf"),)})
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": [None]}


def test_plan_json_has_no_nan_at_the_largest_accepted_numbers(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--vram", "10000", "--bandwidth", "100000", "--tflops", "100000",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out,
                      parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert data["max_concurrency_vram"] > 0


# -- item 13: one line and exit 2, never a traceback ------------------------------------------

def test_calibrate_with_a_128_kib_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    f = tmp_path / "big.csv"
    f.write_text("concurrency,context_tokens,tpot_ms\n1,1024," + "9" * 140_000 + "\n")
    assert "big.csv" in one_line_exit_2(capsys, "calibrate", "--measured", str(f))


def test_calibrate_save_to_an_unwritable_path(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_exit_2(capsys, "calibrate", "--model", "llama-3.1-8b-bf16", "--gpu",
                          "rtx-4090", "--measured", str(FIX / "vllm_bench_serve_sweep.jsonl"),
                          "--save", "/proc/x.toml")
    assert "/proc/x.toml" in err


def test_calibrate_refuses_a_context_of_10_13_tokens(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "long.csv"
    f.write_text("concurrency,context_tokens,tpot_ms\n1,10000000000000,20\n4,8192,25\n")
    assert "context" in one_line_exit_2(capsys, "calibrate", "--measured", str(f))
    one_line_exit_2(capsys, "calibrate", "--reference", "--max-concurrency", "5@10000000000000")


@pytest.mark.parametrize("text", ["knobs = 3\n", 'model = "m"\ngpu = "g"\npoints = [1]\n',
                                  "not toml ["])
def test_plan_with_a_malformed_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           text: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    assert "bad.toml" in one_line_exit_2(capsys, "plan", "--calibration", str(f))


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999/v1",
                                 "http://127.0.0.1:0/v1", "http:///v1"])
def test_bench_with_a_bad_base_url(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   url: str) -> None:
    assert "--base-url" in one_line_exit_2(capsys, "bench", "--base-url", url, "--out",
                                           str(tmp_path))


@pytest.mark.parametrize("argv", [["--port", "-1"], ["--port", "70000"],
                                  ["--chars-per-token", "nan"], ["--stall-s", "-1"],
                                  ["--eos-after", "-1"], ["--speedup", "inf"]],
                         ids=lambda a: " ".join(a))
def test_sim_server_refuses_bad_numbers_before_it_starts(argv: list[str]) -> None:
    """In a subprocess: before the fix `--chars-per-token nan` started a server that answered
    500 to everything (and the test would have waited for it)."""
    proc = subprocess.run([sys.executable, "-m", "capacity", "sim-server", "--port", "0",
                           *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert f"argument {argv[0]}" in proc.stderr


def test_sim_config_refuses_nan_and_negative() -> None:
    for bad in ({"chars_per_token": math.nan}, {"stall_s": -1.0}, {"stall_s": math.inf},
                {"eos_after_tokens": -1}):
        with pytest.raises(InputError):
            SimConfig(**bad)  # type: ignore[arg-type]


def test_runs_with_an_unknown_run_id_or_a_file_as_out(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert "nosuch" in one_line_exit_2(capsys, "runs", "--out", str(tmp_path),
                                       "--run-id", "nosuch")
    f = tmp_path / "file"
    f.write_text("x")
    assert "not a folder" in one_line_exit_2(capsys, "runs", "--out", str(f))


# -- item 8 (storage): no row lost silently --------------------------------------------------

def _record(i: int, run_id: str) -> RequestRecord:
    return RequestRecord(
        run_id=run_id, label="h", concurrency=2, request_rate_rps=None, request_index=i,
        response_id=f"r{i}", start_unix_s=1_800_000_000.0 + i, queue_ms=0.0, ttft_ms=100.0,
        first_chunk_ms=1.0, e2e_ms=300.0, tpot_ms=10.0, itl_mean_ms=10.0, itl_max_ms=12.0,
        prompt_chars=400, prompt_tokens=100, output_tokens=20, output_tokens_source="usage",
        token_events=20, max_tokens=20, output_length_mismatch=False, finish_reason="length",
        success=True, error_type=None, error_message=None, http_status=200, endpoint="chat",
        model="m", itl_ms="10.0")


def _write_run(root: Path, n: int = 4) -> Path:
    with RunWriter(root, "h") as w:
        w.write_meta({"run_id": w.run_id, "label": "h", "status": "finished",
                      "started_at": "2026-11-29T10:00:00+00:00", "model": "m",
                      "args": {"base_url": "http://127.0.0.1:1/v1", "concurrency": [2]}})
        recs = [_record(i, w.run_id) for i in range(n)]
        for r in recs:
            w.write_request(r)
        w.write_summary(summarize(recs, run_id=w.run_id, label="h", concurrency=2,
                                  request_rate_rps=None, endpoint="chat", model="m"))
        return Path(w.dir)


def _poison(csv_path: Path, column: str, values: dict[int, str]) -> None:
    rows = list(csv.reader(io.StringIO(csv_path.read_text(encoding="utf-8"))))
    col = rows[0].index(column)
    for row_index, value in values.items():
        rows[row_index][col] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    csv_path.write_text(buf.getvalue(), encoding="utf-8")


def test_true_or_10_30_in_an_integer_column_is_named_and_never_lost_silently(
        tmp_path: Path) -> None:
    run_dir = _write_run(tmp_path)
    _poison(run_dir / "requests.csv", "prompt_tokens", {2: "true", 3: "1" + "0" * 30})
    problems: list[str] = []
    assert compact_all(tmp_path, warnings=problems) == []  # no Parquet copy that loses rows
    assert problems and "line 3" in problems[0]
    with RunStore(tmp_path) as store:
        every = int(store.query("SELECT count(*) AS n FROM requests")["n"].iloc[0])
        reading = int(store.query("SELECT count(prompt_tokens) AS n FROM requests")["n"].iloc[0])
        assert every == 4 and reading == 2  # no row lost, whichever columns a query reads
        text = "\n".join(store.warnings)
    assert "requests.csv" in text and "2 row(s)" in text
    assert "line 3 (prompt_tokens = 'true' is not BIGINT, read as empty)" in text
    assert "line 4" in text


def test_a_garbage_summary_row_is_named(tmp_path: Path) -> None:
    run_dir = _write_run(tmp_path)
    with (run_dir / "summary.csv").open("a", encoding="utf-8") as fh:
        fh.write("garbage,row\n")
    with RunStore(tmp_path) as store:
        assert len(store.query("SELECT * FROM summaries")) == 1
        assert any("summary.csv" in w and "line 3" in w for w in store.warnings)


# -- item 14: a large import is aggregated first ----------------------------------------------

def test_calibrate_import_of_200k_rows_is_aggregated_in_seconds(tmp_path: Path) -> None:
    f = tmp_path / "many.csv"
    levels = [(c, ctx) for c in (1, 2, 4, 8, 16, 32) for ctx in (1024, 4096)]
    with f.open("w", encoding="utf-8") as fh:
        fh.write("concurrency,context_tokens,tpot_ms,ttft_ms\n")
        for i in range(200_000):
            c, ctx = levels[i % len(levels)]
            fh.write(f"{c},{ctx},{20 + c * 0.1 + ctx / 4096 + (i % 7) * 0.01:.3f},"
                     f"{100 + ctx / 40:.1f}\n")
    t0 = time.perf_counter()
    points = read_measured(f, model="llama-3.1-8b-bf16", gpu="rtx-4090")
    assert time.perf_counter() - t0 < 20
    assert len(points) == len(levels)
    assert {p.stat for p in points} == {f"median of {200_000 // len(levels)} rows",
                                        f"median of {200_000 // len(levels) + 1} rows"}
