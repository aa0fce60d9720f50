"""Measured vs predicted for held-out runs (capacity.fit.engine_check): the realtest's table,
checked on the bundled sample run (no server needed)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from capacity import workspace
from capacity.catalog.loader import Catalog
from capacity.fit.calibration import fit
from capacity.fit.engine_check import check_run, markdown_table, median_abs_errors
from capacity.fit.measured import run_scenario
from capacity.fit.overlay import points_from_summary


def sample_summary() -> pd.DataFrame:
    (path,) = (workspace.bundled_bench_dir() / "sample-rtx-4090-sim").glob("*/summary.csv")
    return pd.read_csv(path)


def test_held_out_table_compares_every_level(catalog: Catalog) -> None:
    summary = sample_summary()
    model, gpu = "qwen3.5-9b-awq", "rtx-4090"
    pts = points_from_summary(summary, model=model, gpu=gpu)
    base = run_scenario(model, gpu, prompt_tokens=pts[0].prompt_tokens or 1,
                        output_tokens=pts[0].output_tokens or 1, catalog=catalog)
    cal = fit(pts, base, name="t")
    rows = check_run(summary, case="sample", model=model, gpu=gpu, calibration=cal,
                     catalog=catalog)
    assert [r.concurrency for r in rows] == summary["concurrency"].tolist()
    one = rows[0]
    assert one.measured["itl_p50_ms"] == pytest.approx(summary["itl_p50_ms"].iloc[0])
    for key in ("ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "output_tok_s"):
        assert one.predicted[key] > 0
    assert one.predicted["ttft_p90_ms"] >= one.predicted["ttft_p50_ms"]
    # the calibration was fitted on these very points: the decode step agrees closely
    assert abs(one.error("itl_p50_ms")) < 0.1
    errs = median_abs_errors(rows)
    assert set(errs) == {"ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "output_tok_s"}
    assert all(math.isfinite(v) for v in errs.values())
    table = markdown_table(rows)
    assert table.count("\n") == 2 + len(rows)
    assert table.splitlines()[2].startswith("| sample | 1 | - |")


def test_the_event_model_schedules_as_the_engine_profile_says(catalog: Catalog) -> None:
    """llama.cpp with 4 slots (`--parallel 4`): at 64 clients most wait for a slot, so TTFT under
    load is longer than with the chapter's batch of up to C_vram sequences (19.5 s vs 14.1 s
    here); at 1 client the two agree (nothing waits)."""
    summary = sample_summary()
    model, gpu = "qwen3.5-9b-awq", "rtx-4090"
    pts = points_from_summary(summary, model=model, gpu=gpu)
    base = run_scenario(model, gpu, prompt_tokens=pts[0].prompt_tokens or 1,
                        output_tokens=pts[0].output_tokens or 1, catalog=catalog)
    cal = fit(pts, base, name="t")
    chapter = check_run(summary, case="s", model=model, gpu=gpu, calibration=cal, catalog=catalog)
    llama = check_run(summary, case="s", model=model, gpu=gpu, calibration=cal, catalog=catalog,
                      engine="llamacpp", max_num_seqs=4)
    assert llama[0].predicted["ttft_p50_ms"] == pytest.approx(chapter[0].predicted["ttft_p50_ms"],
                                                              rel=0.05)
    assert llama[-1].concurrency >= 32
    assert llama[-1].predicted["ttft_p50_ms"] > 1.2 * chapter[-1].predicted["ttft_p50_ms"]


def test_the_realtest_leaves_the_client_a_core() -> None:
    """llama-server gets every core but one (its spinning threads slow whole steps when the
    load generator takes one of their cores), at least 1 and at most 8."""
    from capacity.cli.realtest import engine_threads

    assert [engine_threads(n) for n in (1, 2, 4, 16)] == [1, 1, 3, 8]
