"""The accuracy scorecard (`capacity validate`): metric conversions, the pinned thresholds over
the shipped published rows, the Results page's rows for one's own runs, and docs/accuracy.md
being current."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from capacity.cli import validate as cli_validate
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.fit import calibration as calib
from capacity.fit import overlay, validate, validate_added
from capacity.fit.measured import MeasuredPoint, c_vram
from capacity.fit.reference import (
    REFERENCE_CSV,
    ReferenceSweep,
    RunShape,
    load_reference,
    tpot_from_e2e,
)
from capacity.fit.run_accuracy import run_checks, summarize
from capacity.fit.validate import (
    Metric,
    Scorecard,
    closed_loop_tok_s,
    e2e_ms,
    engine_family,
    optimism,
    relative_error,
    run_scenario,
    saturated_levels,
    scorecard,
    spec_sheet,
    step_methods,
    with_step_method,
)
from capacity.fit.validate_formulas import flat_levels
from capacity.fit.validate_report import BEGIN, END, between_markers, markdown, to_json, write_between_markers
from capacity.model.scenario import Scenario
from capacity.plan import events
from capacity.plan.closed_loop import as_run_tok_s
from capacity.plan.service import ServiceModel
from tests.shipped import share_sections, shipped

ROOT = Path(__file__).resolve().parents[1]
ACCURACY = ROOT / "docs" / "accuracy.md"

LOGO_STEP_MEDIAN_MAX = 0.21
"""Calibrated leave-one-group-out decode-step error below saturation, median: measured 19.1%
over 12 rows on 2026-12-02 against the event model's TPOT (14.1% against F4's bare step before
issue 25 scored the step like the benchmarks measure it; at saturation 68.6% -> 18.8%), pinned
with a small margin."""
LOGO_THROUGHPUT_MEDIAN_MAX = 0.15
"""The same for throughput rows, through the event model: measured 13.0% over 17 rows on
2026-12-01 (16.2% with the unqueued closed-loop formula)."""
BAND_COVERAGE_BELOW_MIN = 0.70
"""The share of decode-step rows below saturation whose measurement lies in the band shown
without calibration: 9 of 12 (75%) on 2026-12-01; issue 25's target for an 80% band: 75-85%."""
LOGO_E2E_MEDIAN_MAX = 0.35
"""End-to-end latency rows below saturation, through the event model: 31.8% over 8 rows on
2026-12-01 (35.8% unqueued); issue 25's target is 15%."""


WITHIN_STEP_MEDIAN_MAX = 0.05
WITHIN_STEP_WORST_MAX = 0.20
"""Issue 10's target for a calibration on a small sweep of one model, GPU and engine: the
decode step at the levels it did not see within 5% median and 20% worst. The operator method
on the shipped GPU sweeps (NIM Llama-3.3-70B TP2 on H100, vLLM Mistral-7B on an RTX 4090):
1.8% and 5.0% over 10 levels on 2026-12-01, each whole level held out (2.1% and 16.0% when a
level's twin at another prompt length stayed in the fit; docs/accuracy.md)."""


@pytest.fixture(scope="module")
def card() -> Scorecard:
    return shipped("card")


# -- one unit test per metric conversion -------------------------------------------------------

def test_closed_loop_throughput_is_clients_times_tokens_over_request_time() -> None:
    assert closed_loop_tok_s(4, 128, 20.0, 10.0) == pytest.approx(4 * 128 / 1.29)
    assert closed_loop_tok_s(2, 1, 20.0, 10.0) == pytest.approx(200.0)  # one token: steps only


def test_end_to_end_latency_is_prefill_then_n_minus_one_steps() -> None:
    assert e2e_ms(128, 20.0, 6.0) == pytest.approx(782.0)
    assert e2e_ms(1, 20.0, 6.0) == 20.0


def test_tpot_from_end_to_end_latency() -> None:
    assert tpot_from_e2e(e2e_ms=833.4, output_tokens=128, ttft_ms=None) == pytest.approx(
        833.4 / 127)
    assert tpot_from_e2e(e2e_ms=782.0, output_tokens=128, ttft_ms=20.0) == pytest.approx(6.0)
    assert tpot_from_e2e(e2e_ms=10.0, output_tokens=1, ttft_ms=None) is None
    assert tpot_from_e2e(e2e_ms=10.0, output_tokens=8, ttft_ms=20.0) is None


def test_optimism_is_speed_over_speed_for_times_and_throughputs() -> None:
    assert optimism(Metric.STEP, measured=20.0, predicted=8.0) == pytest.approx(2.5)
    assert optimism(Metric.TTFT, measured=100.0, predicted=200.0) == pytest.approx(0.5)
    assert optimism(Metric.E2E, measured=900.0, predicted=450.0) == pytest.approx(2.0)
    assert optimism(Metric.THROUGHPUT, measured=500.0, predicted=1000.0) == pytest.approx(2.0)
    assert relative_error(11.0, 10.0) == pytest.approx(0.1)


def test_saturation_is_a_flat_throughput_or_a_batch_beyond_c_vram() -> None:
    assert saturated_levels([50, 100, 150], [814.0, 917.0, 921.0], 1000) == [False, False, True]
    assert saturated_levels([1, 8, 64], [None, None, None], 32) == [False, False, True]
    assert saturated_levels([8, 4], [100.0, 99.0], 1000) == [True, False]  # any order


def test_one_rule_marks_the_tables_saturation_and_the_overlays_plateau() -> None:
    """The accuracy table's saturated column and the Results page's saturation note are one
    rule (`flat_levels`): a level at most 5% above a lower one. The note's rule before this
    (growth under a tenth of the concurrency's) put a plateau after 8 at 100, 400, 430 tok/s
    where the table saw none (a browser audit of /results)."""
    assert flat_levels([50, 100, 150], [814.0, 917.0, 921.0]) == [False, False, True]
    assert flat_levels([1, 8, 32], [100.0, 400.0, 430.0]) == [False, False, False]
    assert flat_levels([1, 8, 32], [100.0, None, 101.0]) == [False, False, True]
    for c, tok in (([1.0, 8.0, 32.0], [100.0, 400.0, 430.0]),
                   ([1.0, 8.0, 32.0, 64.0], [100.0, 400.0, 410.0, 600.0]),
                   ([1.0, 4.0, 16.0], [100.0, 390.0, 400.0])):
        table = saturated_levels(c, tok, math.inf)
        sat = overlay.saturation(pd.DataFrame({"concurrency": c, "aggregate_tok_s": tok}), 1000)
        first = next((i for i, s in enumerate(table) if s), None)
        assert sat.concurrency == (None if first is None else c[first - 1]), (c, tok)


def test_run_checks_saturate_above_the_deployments_c_vram() -> None:
    """`c_vram` counts every replica: the table multiplied it by the replicas again, so with
    two GPUs a level up to twice the C_vram the saturation note names read unsaturated."""
    s = run_scenario("mistral-7b-v0.3-bf16", "rtx-4090", prompt_tokens=256, output_tokens=128,
                     n_gpus=2)
    cv = c_vram(spec_sheet(s))
    assert s.replicas == 2 and cv > 2
    levels = (cv / 2, cv * 1.5)  # throughput still growing: only C_vram marks the second
    pts = [MeasuredPoint(concurrency=c, context_tokens=384, prompt_tokens=256,
                         output_tokens=128, tpot_ms=20.0, output_tok_s=10.0 * c)
           for c in levels]
    sat = {c.concurrency: c.saturated for c in run_checks(pts, s)}
    assert sat == {levels[0]: False, levels[1]: True}


def test_engine_family_drops_versions() -> None:
    assert [engine_family(e) for e in ("SGLang v0.5.3.post3", "NVIDIA NIM 1.8.0", "vLLM 0.9.1",
                                       "TensorRT-LLM v1.2.0rc1", "llama-server b4000", "")] == [
        "SGLang", "NIM", "vLLM", "TensorRT-LLM", "llama.cpp", "?"]


def test_the_scenario_of_a_sweep_is_the_results_pages_and_needs_no_pandas() -> None:
    """One `run_scenario` (fit/measured.py) serves the Results page and the scorecard; it lives
    where pandas is not imported, so `capacity validate` starts without it (2.8 s)."""
    from capacity.fit import measured, validate

    assert validate.run_scenario is measured.run_scenario and overlay.c_vram is measured.c_vram
    code = "import sys, capacity.fit.validate; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_spec_sheet_puts_every_knob_at_peak() -> None:
    s = run_scenario("qwen3-8b-bf16", "h100-sxm", prompt_tokens=100, output_tokens=100)
    tuned = s.with_(eta_bw=0.5, eff=0.2, mfu=0.3, step_overhead_ms=4.0, prefill_overhead_ms=9.0)
    peak = spec_sheet(tuned)
    assert (peak.eta_bw, peak.eff, peak.mfu, peak.step_overhead_ms, peak.prefill_overhead_ms) == (
        1.0, 1.0, 1.0, 0.0, 0.0)


# -- the pinned thresholds over the shipped rows ----------------------------------------------

@pytest.mark.slow
def test_every_stated_row_is_checked(card: Scorecard) -> None:
    stated = sum(len(s.stated) for s in load_reference() if s.gpu_key and s.model_key)
    assert len(card.checks) == stated and not card.skipped


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_spec_sheet_is_an_upper_bound_on_every_row(card: Scorecard) -> None:
    assert card.upper_bound_rate == 1.0, [
        (v.check.group, v.check.concurrency, str(v.check.metric), v.reason)
        for v in card.violations]
    assert all(c.optimism >= 1.0 for c in card.checks)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_calibrated_leave_one_group_out_error_is_pinned(card: Scorecard) -> None:
    # the original rows (published.csv's rows without an `added` date); added ones: below
    orig = validate_added.row_set(card, validate_added.ORIGINAL)
    step = orig.logo(Metric.STEP, saturated=False)
    assert step.n >= 10 and step.median < LOGO_STEP_MEDIAN_MAX
    sat = orig.logo(Metric.STEP, saturated=True)
    # 21.4%: the queue's stalls, not F4 at C_vram (18.8% before the FP8 weights counted their
    # embedding and head in 16 bits: 2 GB more per GPU on the NIM 2 x H100 group, less KV)
    assert sat.n >= 5 and sat.median < 0.22
    tput = orig.logo(Metric.THROUGHPUT, saturated=False)
    assert tput.n >= 10 and tput.median < LOGO_THROUGHPUT_MEDIAN_MAX
    e2e = orig.logo(Metric.E2E, saturated=False)
    assert e2e.n >= 5 and e2e.median < LOGO_E2E_MEDIAN_MAX


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_rows_added_later_are_held_out_and_scored_apart(card: Scorecard) -> None:
    # issue 25: the rows added 2026-12-02 (A100 x8 Llama-3.1-70B and B200 x8 gpt-oss-120b,
    # SGLang) lend no knobs to other groups; their figures are reported apart. Pinned at
    # today's level (a regression guard, not issue 25's targets, which they miss)
    sets = validate_added.row_sets(card)
    assert [s.added for s in sets] == ["", "2026-12-02", "2026-12-03", "2026-12-04",
                                       "2026-12-06", "2026-12-07"]
    new = sets[1]
    assert new.rows == 56 and new.upper_bound == new.rows
    # the step against the event model's TPOT (prefill stalls included): 17.2% (41.6% against
    # F4's bare step); 21.5% since F10's small-message all-reduce (2026-12-03): the donors'
    # calibrations, fitted at TP 1, already predicted these TP 8 steps slow, and the larger
    # all-reduce adds to them
    assert new.logo(Metric.STEP, saturated=False).median < 0.23
    assert new.logo(Metric.THROUGHPUT, saturated=False).median < 0.25
    assert new.logo(Metric.E2E, saturated=False).median < 0.35
    # 2026-12-06: Qwen3-235B-A22B on 8 B200s (SGLang 0.5.6), 63 rows; it borrows the knobs of
    # gpt-oss-120b on the same GPUs and engine (MXFP4 experts where its are BF16): step 26.6%,
    # TTFT 62.3%, throughput 37.5%, E2E 23.7%. That night Qwen2.5-7B on an RTX 4090 (vLLM
    # 0.25.1, BF16 and FP8), 75 rows: the day's 138 rows read step 42.6%, TTFT 45.8%,
    # throughput 39.6% (the RTX 4090 groups calibrated on other groups' fits), E2E 23.7% (only
    # the Qwen3-235B runs state E2E)
    day = sets[4]
    assert day.rows == 63 + 75 and day.upper_bound == day.rows
    assert set(day.groups) == {"qwen3-235b-a22b-bf16 on 8x b200 (SGLang)",
                               "qwen2.5-7b-bf16 on rtx-4090 (vLLM)",
                               "qwen2.5-7b-fp8 on rtx-4090 (vLLM)"}
    assert day.logo(Metric.STEP, saturated=False).median < 0.45
    assert day.logo(Metric.E2E, saturated=False).median < 0.25
    assert "### Rows added later, held out" in markdown(card)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_calibrated_ttft_e2e_and_throughput_come_from_the_event_model(card: Scorecard) -> None:
    # the steady closed loop (`closed_loop.closed_loop`, clients out of step) spaces NIM's
    # 5,000-token prompts so that none waits for another: its held-out TTFT stays one
    # prefill from 1 to 25 clients (it never falls), where the measured grows 1.7x (407 to
    # 689 ms: real lengths and arrivals jitter; the clients-together edge is the bound above)
    nim = sorted((c.concurrency, c.calibrated) for c in card.checks
                 if c.metric == Metric.TTFT and c.prompt_tokens == 5000 and not c.saturated)
    assert len(nim) >= 3
    assert nim[-1][1] == pytest.approx(nim[0][1], rel=0.05)
    assert all(b[1] >= a[1] * (1 - 1e-6) for a, b in zip(nim, nim[1:], strict=False))
    # throughput and E2E do come from the loop: 25 clients share the weight read
    tok = sorted((c.concurrency, c.calibrated) for c in card.checks
                 if c.metric == Metric.THROUGHPUT and c.prompt_tokens == 5000
                 and not c.saturated)
    assert len(tok) >= 2 and tok[-1][1] > 5 * tok[0][1]


def test_queued_levels_pick_the_rows_statistic() -> None:
    s = run_scenario("qwen3-8b-bf16", "h100-sxm", prompt_tokens=1024, output_tokens=256)
    q = validate.queued_levels(s, [1, 16], 256, "vllm")
    assert q is not None and len(q) == 2
    one, many = q
    # one client never waits: its TTFT is one chunked prefill, mean = median
    assert one.time_ms(Metric.TTFT, "median") == pytest.approx(one.ttft_mean_ms)
    assert one.time_ms(Metric.E2E, "mean") == one.e2e_mean_ms
    assert many.time_ms(Metric.TTFT, "median") == many.ttft_median_ms
    assert many.tok_s > 8 * one.tok_s  # 16 clients share the weight read
    # the event model needs a known engine profile; an unknown engine has none
    assert validate.scheduler_of("vLLM 0.11") == "vllm"
    assert validate.scheduler_of("NVIDIA NIM 1.8.0") == "vllm"
    assert validate.scheduler_of("SGLang v0.5.3") == "sglang"
    assert validate.scheduler_of("mystery-engine") is None


def test_a_stated_run_of_identical_requests_is_predicted_as_it_ran() -> None:
    # published.csv's run_prompts: 10 requests of 1,024 in / 256 out kept 5 at a time. The
    # run starts as one burst and its identical requests stay in lock step: the second five
    # arrive together when the first five finish, so every request's TTFT is the opening
    # burst's (five prompts in one chunk of the vllm profile's 8,192-token budget) and the
    # run lasts two rounds; the steady state (clients out of step) waits far less.
    s = run_scenario("qwen3-8b-bf16", "h100-sxm", prompt_tokens=1024, output_tokens=256)
    svc = events.service_from_scenario(s, output_tokens=256, engine="vllm")
    burst = events.run_trace(svc, None, 5, 5)
    ttft = burst.first_ms - burst.arrival_ms
    assert svc.chunk_tokens >= 5 * 1024 and np.ptp(ttft) == pytest.approx(0.0, abs=1e-9)
    q = validate.queued_levels(s, [5], 256, "vllm", RunShape(run_prompts=10))
    steady = validate.queued_levels(s, [5], 256, "vllm")
    assert q is not None and steady is not None
    (run,), (out_of_step,) = q, steady
    assert run.ttft_mean_ms == pytest.approx(ttft[0]) == pytest.approx(run.ttft_median_ms)
    assert run.e2e_mean_ms == pytest.approx(float(burst.finish_ms[0]))
    assert run.tok_s == pytest.approx(10 * 256 / (2 * float(burst.finish_ms[0])) * 1e3)
    assert out_of_step.ttft_mean_ms < run.ttft_mean_ms / 3
    # the shipped MI300X run (100 requests, each 1,024 / 1,024) is the one scored this way
    ran = [sw for sw in load_reference() if sw.run_prompts is not None]
    assert [(sw.gpu_key, sw.run_prompts) for sw in ran] == [("mi300x", 100)]


def test_a_throughput_row_with_its_runs_count_is_predicted_as_the_run() -> None:
    # published.csv's level_prompts: a bench's throughput is its run's output tokens over the
    # run's duration, drain included. Ten identical requests kept 5 at a time start as one
    # burst and stay in lock step: two rounds, 10 x 256 tokens over twice one request's E2E;
    # the level's TTFT and TPOT stay the steady loop's (clients out of step).
    s = run_scenario("qwen3-8b-bf16", "h100-sxm", prompt_tokens=1024, output_tokens=256)
    svc = events.service_from_scenario(s, output_tokens=256, engine="vllm")
    burst = events.run_trace(svc, None, 5, 5)
    ran = validate.queued_levels(s, [5], 256, "vllm", RunShape(level_prompts=((5.0, 10),)))
    steady = validate.queued_levels(s, [5], 256, "vllm")
    assert ran is not None and steady is not None
    assert ran[0].tok_s == pytest.approx(10 * 256 / (2 * float(burst.finish_ms[0])) * 1e3)
    assert ran[0].tok_s < steady[0].tok_s
    assert ran[0].ttft_mean_ms == steady[0].ttft_mean_ms
    assert ran[0].tpot_mean_ms == steady[0].tpot_mean_ms
    # a level the row does not count keeps the steady loop's throughput
    other = validate.queued_levels(s, [5], 256, "vllm", RunShape(level_prompts=((8.0, 10),)))
    assert other is not None and other[0].tok_s == steady[0].tok_s
    # a caller that reads no throughput (the step band) skips the run: the steady loop's
    bare = validate.queued_levels(s, [5], 256, "vllm", RunShape(level_prompts=((5.0, 10),)),
                                  as_run_tok_s=False)
    assert bare is not None and bare[0] == steady[0]


def test_a_bench_runs_throughput_counts_its_drain() -> None:
    # one client, outputs of 2 and 5 tokens in turn (50 ms prefill, then 10 ms a token: 60
    # and 90 ms requests), ten requests back to back: 35 tokens in 750 ms (`as_run_tok_s`'
    # example)
    svc = ServiceModel(slots=2, bandwidth_ms=np.full(5, 10.0), compute_ms=np.zeros(5),
                       comm_ms=np.zeros(5), overhead_ms=0.0, prefill_ms=50.0,
                       prompt_tokens=100, output_tokens=3, chunk_tokens=200,
                       prefill_cum_ms=0.5 * np.arange(101, dtype=np.float64),
                       output_lengths=(2, 5))
    assert as_run_tok_s(svc, concurrency=1, requests=10) == pytest.approx(35 / 0.75)
    with pytest.raises(InputError, match="a bench run needs"):
        as_run_tok_s(svc, concurrency=1, requests=0)


def test_a_run_whose_lengths_varied_is_predicted_with_each_requests_own() -> None:
    # SGLang's random dataset draws each prompt and output on 1..1,000 (published.csv's
    # prompt_cap and output_cap): each simulated request gets its own, the maximum-entropy
    # lengths with the stated means (`RunShape.lengths`); the context holds the longest of each.
    # Same means, same clients: the throughput stays near the fixed run's, and the mean TPOT
    # is the mean of each request's own, as the bench computes it.
    s = run_scenario("llama-3.1-70b-bf16", "a100-80gb-sxm", prompt_tokens=496,
                     output_tokens=510, n_gpus=8, tp=8)
    shape = RunShape(prompt_cap=1000, output_cap=1000)
    prompts, outs = shape.lengths(496, 510, 200)
    assert prompts is not None and outs is not None
    assert max(prompts) <= 1000 and max(outs) <= 1000 and min(outs) >= 1
    assert sum(prompts) / 200 == pytest.approx(496, abs=1) and sum(outs) / 200 == pytest.approx(
        510, abs=1)
    varied = validate.queued_levels(s, [16], 510, "sglang", shape)
    fixed = validate.queued_levels(s, [16], 510, "sglang")
    assert varied is not None and fixed is not None
    (v,), (f,) = varied, fixed
    assert v != f
    assert v.tok_s == pytest.approx(f.tok_s, rel=0.15)
    # with varying lengths the mean TPOT is no longer (mean E2E - mean TTFT) / (n - 1)
    assert v.tpot_mean_ms != pytest.approx((v.e2e_mean_ms - v.ttft_mean_ms) / 509, rel=1e-6)
    # the rows that carry caps: the SGLang cookbook's random-dataset Llama-3.1-70B,
    # Qwen3-235B-A22B and DeepSeek-R1 (added 2026-12-07) sweeps and every ShareGPT run (the
    # bench's sampler: prompts up to 1,024, prompt + reply up to 2,048), the RTX 4090
    # Qwen2.5-7B runs (added 2026-12-06, night) among them
    sweeps = load_reference()
    capped = {(sw.model_key, sw.prompt_cap, sw.output_cap) for sw in sweeps
              if sw.prompt_cap is not None or sw.output_cap is not None}
    assert capped == {("llama-3.1-70b-bf16", 1000, 1000), ("llama-3.1-70b-bf16", 8000, 1000),
                      ("qwen3-8b-bf16", 1024, 2044), ("qwen3-8b-fp8", 1024, 2044),
                      ("gpt-oss-120b-mxfp4", 1024, 2044),
                      ("qwen3-235b-a22b-bf16", 1000, 1000), ("qwen3-235b-a22b-bf16", 1000, 8000),
                      ("qwen3-235b-a22b-bf16", 8000, 1000),
                      ("deepseek-r1-fp8", 1000, 1000), ("deepseek-r1-fp8", 1000, 8000),
                      ("deepseek-r1-fp8", 8000, 1000),
                      ("qwen2.5-7b-bf16", 1024, 2044), ("qwen2.5-7b-fp8", 1024, 2044)}
    with REFERENCE_CSV.open(encoding="utf-8") as f:
        sharegpt = [r for r in csv.DictReader(f) if "sharegpt" in r["notes"].lower()]
    assert len(sharegpt) == 51 + 75  # the RTX 4090 Qwen2.5-7B runs: 75 rows
    assert {(r["prompt_cap"], r["output_cap"]) for r in sharegpt} == {("1024", "2044")}


def _cal(name: str, mfu: float, ttft_concurrency: float | None) -> calib.Calibration:
    pts = () if ttft_concurrency is None else (calib.FitPoint(
        kind=calib.PointKind.TTFT, concurrency=ttft_concurrency, context_tokens=1000.0,
        measured_ms=50.0, spec_ms=20.0, fitted_ms=50.0),)
    return dataclasses.replace(calib.Calibration(name=name, model="m", gpu="g"), mfu=mfu,
                               prefill_overhead_ms=0.0, eta_bw=0.7, points=pts)


def test_prefill_knobs_are_borrowed_only_from_unqueued_ttft() -> None:
    clean = _cal("c1", 0.5, 1.0)
    queued = _cal("c4", 0.2, 4.0)
    assert validate.unqueued_prefill(clean) and not validate.unqueued_prefill(queued)
    assert not validate.unqueued_prefill(_cal("none", 0.4, None))
    both = validate._median_knobs([clean, queued, _cal("c8", 0.1, 8.0)])
    assert both.mfu == 0.5                  # the queued fits' MFU soaked up their queues
    assert both.eta_bw == pytest.approx(0.7)  # decode knobs from every fit
    # with no unqueued fit, every fit's prefill knobs (nothing better to borrow)
    assert validate._median_knobs([queued, _cal("c8", 0.1, 8.0)]).mfu == pytest.approx(0.15)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_the_rows_cover_gpus_engines_tp_and_contexts(card: Scorecard) -> None:
    assert len({c.gpu for c in card.checks}) >= 5
    assert {"vLLM", "SGLang", "TensorRT-LLM", "NIM"} <= {engine_family(c.engine)
                                                         for c in card.checks}
    assert {c.tp for c in card.checks} >= {1, 2, 4}
    assert max(c.prompt_tokens for c in card.checks) >= 16000
    assert {str(c.metric) for c in card.checks} == {m.value for m in Metric}
    assert {c.stat for c in card.checks} == {"mean", "median"}
    assert all(re.match(r"^\d{4}-\d{2}", c.date) for c in card.checks)


@pytest.mark.slow
def test_held_out_groups_never_use_their_own_knobs(card: Scorecard) -> None:
    for c in card.checks:  # every group borrows from others, and says from where
        assert c.calibrated is not None and c.calibrated_from
    # two groups: doubling one group's measured times changes the other's calibrated
    # predictions, never its own
    sweeps = [s for s in load_reference() if (s.gpu_key == "rtx-4090" and not s.is_added)
              or (s.gpu_key == "h100-sxm" and s.engine.startswith("SGLang")
                  and s.model_key == "qwen3-8b-bf16")]
    assert len(sweeps) == 2

    def slower(s: ReferenceSweep) -> ReferenceSweep:
        return dataclasses.replace(s, points=tuple(dataclasses.replace(
            p, tpot_ms=p.tpot_ms and 2 * p.tpot_ms, ttft_ms=p.ttft_ms and 2 * p.ttft_ms,
            output_tok_s=p.output_tok_s and p.output_tok_s / 2) for p in s.points))

    before = scorecard(sweeps)
    after = scorecard([slower(sweeps[0]), sweeps[1]])

    def cal(card: Scorecard, gpu: str) -> list[float | None]:
        return [c.calibrated for c in card.checks if c.gpu == gpu]

    changed, other = sweeps[0].gpu_key or "", sweeps[1].gpu_key or ""
    assert cal(after, changed) == pytest.approx(cal(before, changed))
    assert cal(after, other) != pytest.approx(cal(before, other))


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_within_group_the_operator_step_meets_the_small_sweep_target(card: Scorecard
                                                                     ) -> None:
    assert card.within_methods == step_methods() == ("chapter", "operator")
    groups = {w.group for w in card.within}
    assert len(groups) >= 2 and any("rtx-4090" in g for g in groups)
    within = dict(validate_added.row_set(card, validate_added.ORIGINAL).within)  # original rows
    op = within["operator"]
    assert op.n >= 10
    assert op.median < WITHIN_STEP_MEDIAN_MAX and op.high < WITHIN_STEP_WORST_MAX
    # the chapter's single max() cannot follow the step's growth with the batch
    chapter = within["chapter"]
    assert chapter.n == op.n and chapter.median > 2 * op.median
    assert all(len(w.held_out_ms) == 2 and None not in w.held_out_ms for w in card.within)
    assert {w.derived for w in card.within if "mistral-7b-v0.3-bf16 on rtx-4090" in w.group} == {
        "TPOT derived from aggregate tok/s and TTFT"}
    assert {w.derived for w in card.within if "qwen2.5-7b" in w.group} == {""}  # TPOT stated
    assert {w.derived for w in card.within if "NIM" in w.group} == {""}


@pytest.mark.slow
def test_a_within_group_level_is_predicted_by_a_fit_that_never_saw_it(card: Scorecard) -> None:
    """Recomputed by hand: fit the RTX 4090 sweep without its C = 16 level, predict C = 16."""
    sweep = next(s for s in load_reference() if s.gpu_key == "rtx-4090")
    level = next(w for w in card.within if "rtx-4090" in w.group and w.concurrency == 16)
    base = run_scenario(sweep.model_key or "", "rtx-4090", prompt_tokens=sweep.prompt_tokens,
                        output_tokens=sweep.output_tokens).with_(step_method="operator")
    others = [p for p in sweep.points if p.concurrency != 16]
    cal = calib.fit(others, base, today="-")
    held = next(p for p in sweep.points if p.concurrency == 16)
    step, _ = calib.predict_ms(calib.apply(cal, base), [held])
    assert level.held_out_ms[1] == pytest.approx(float(step[0]), rel=1e-3)
    assert level.measured_ms == pytest.approx(held.tpot_ms)
    # and the full fit, which saw it, predicts it differently
    full = calib.fit(list(sweep.points), base, today="-")
    seen, _ = calib.predict_ms(calib.apply(full, base), [held])
    assert float(seen[0]) != pytest.approx(float(step[0]), rel=1e-3)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_json_is_strict_and_complete(card: Scorecard) -> None:
    doc = json.loads(to_json(card))
    assert doc["upper_bound_rate"] == 1.0 and len(doc["checks"]) == len(card.checks)
    assert {"optimism", "upper_bound", "calibrated_error"} <= set(doc["checks"][0])
    within = doc["within_group"]
    assert within["methods"] == ["chapter", "operator"]
    assert len(within["levels"]) == len(card.within)
    assert set(within["levels"][0]["held_out_ms"]) == {"chapter", "operator"}
    assert within["error"]["operator"]["n"] == len(card.within)


# -- the step method is one parameter ---------------------------------------------------------

def test_step_method_is_offered_only_when_the_scenario_has_one() -> None:
    names = {f.name for f in dataclasses.fields(Scenario)}
    assert bool(step_methods()) == bool({"step_method", "method"} & names)
    s = run_scenario("qwen3-8b-bf16", "h100-sxm", prompt_tokens=100, output_tokens=100)
    assert with_step_method(None)(s) is s
    with pytest.raises(InputError, match="step method 'nope' is not offered"):
        with_step_method("nope")


@pytest.mark.slow
def test_configure_reaches_every_prediction() -> None:
    sweeps = [s for s in load_reference() if s.gpu_key == "rtx-4090"]
    base = scorecard(sweeps)
    slower = scorecard(sweeps, configure=lambda s: s.with_(bandwidth_gb_s=s.bandwidth_gb_s / 2))
    pairs = [(a.spec, b.spec) for a, b in zip(base.checks, slower.checks, strict=True)
             if a.metric == Metric.THROUGHPUT]
    assert pairs and all(b < a for a, b in pairs)


# -- one's own runs (the Results page) --------------------------------------------------------

def test_run_checks_with_and_without_a_calibration() -> None:
    s = run_scenario("mistral-7b-v0.3-bf16", "rtx-4090", prompt_tokens=256, output_tokens=128)
    pts = [MeasuredPoint(concurrency=c, context_tokens=384, prompt_tokens=256, output_tokens=128,
                         tpot_ms=t, ttft_ms=60.0, output_tok_s=r, engine="vLLM")
           for c, t, r in ((4, 17.0, 210.0), (16, 21.0, 644.0))]
    plain = run_checks(pts, s)
    assert [(c.concurrency, str(c.metric)) for c in plain] == [
        (4, "step"), (4, "ttft"), (4, "throughput"), (16, "step"), (16, "ttft"),
        (16, "throughput")]
    assert all(c.calibrated is None and c.upper_bound for c in plain)
    cal = calib.fit(pts, s, name="mine", today="2026-11-30")
    fitted = run_checks(pts, s, cal)
    assert [c.spec for c in fitted] == [c.spec for c in plain]
    step = [c.calibrated for c in fitted if c.metric == Metric.STEP]
    assert step == pytest.approx([p.fitted_ms for p in cal.points if p.kind == "tpot"])
    assert {c.calibrated_from for c in fitted} == {"mine"}
    plain_sum, fitted_sum = summarize(plain), summarize(fitted)
    assert (plain_sum.rows, plain_sum.upper_bound_rate) == (6, 1.0)
    errors = sorted(abs(c.spec_error) for c in plain)
    assert plain_sum.spec_median_error == pytest.approx((errors[2] + errors[3]) / 2)
    assert math.isnan(plain_sum.calibrated_median_error)
    assert fitted_sum.calibrated_median_error < plain_sum.spec_median_error


# -- docs/accuracy.md -------------------------------------------------------------------------

def test_markers_keep_the_text_around_them(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text(f"# Title\n\nbefore\n\n{BEGIN}\nold\n{END}\n\nafter\n", encoding="utf-8")
    write_between_markers(f, "new table\n")
    assert f.read_text(encoding="utf-8") == (
        f"# Title\n\nbefore\n\n{BEGIN}\nnew table\n{END}\n\nafter\n")
    assert between_markers(f.read_text(encoding="utf-8")) == "new table"
    g = tmp_path / "sub" / "b.md"
    write_between_markers(g, "x")
    assert between_markers(g.read_text(encoding="utf-8")) == "x"


def _without_date(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("Generated "))


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_committed_scorecard_is_current(card: Scorecard) -> None:
    committed = between_markers(ACCURACY.read_text(encoding="utf-8"))
    assert committed, "docs/accuracy.md has no <!-- validate:begin/end --> part"
    assert _without_date(committed) == _without_date(markdown(card).rstrip("\n")), (
        "docs/accuracy.md is not current: run `capacity validate --out docs/accuracy.md`")


@pytest.mark.slow
def test_cli_writes_markdown_around_what_the_file_had(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # its JSON: `test_the_sections_in_worker_processes_give_the_same_output`
    share_sections(monkeypatch)
    out = tmp_path / "acc.md"
    out.write_text("# Mine\n\nkept\n", encoding="utf-8")
    assert main(["validate", "--out", str(out), "--jobs", "1"]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Mine\n\nkept\n") and "Every row" in between_markers(text)


@pytest.mark.slow  # the whole scorecard in two worker processes (about 20 s on two CPUs)
def test_the_sections_in_worker_processes_give_the_same_output(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # `capacity validate` runs its sections in one process per CPU by default; every section
    # is a pure function of the shipped files, so the JSON is the same byte for byte (the
    # sections in this process: the ones the other tests of this process share)
    share_sections(monkeypatch)
    assert main(["validate", "--format", "json", "--jobs", "1"]) == 0
    alone = capsys.readouterr().out
    monkeypatch.undo()   # the workers compute their own
    assert main(["validate", "--format", "json", "--jobs", "2"]) == 0
    assert capsys.readouterr().out == alone and json.loads(alone)["typical_basis"]
    assert json.loads(alone)["upper_bound_rate"] == 1.0


def test_validate_runs_in_this_process_where_no_worker_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a sandbox that cannot start processes (or a worker that dies): the sections run here
    def no_pool(*_: object, **__: object) -> None:
        raise OSError("no semaphores here")

    monkeypatch.setattr(cli_validate, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(cli_validate, "section", lambda name, method=None: (name, method))
    got = cli_validate.sections("operator", 2)
    assert got == {n: (n, "operator") for n in cli_validate.SECTIONS if n != "realtest"}


def test_validate_starts_a_worker_a_section_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--jobs 100000` asked for a pool of 100,000 workers and started one a section, eleven
    # `capacity validate` processes (an audit, 2026-12-07): the pool is sized to the sections
    sized: list[int] = []

    def no_pool(*_: object, max_workers: int, **__: object) -> None:
        sized.append(max_workers)
        raise OSError("no semaphores here")   # then every section runs here

    monkeypatch.setattr(cli_validate, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(cli_validate, "section", lambda name, method=None: name)
    assert len(cli_validate.sections(None, 100_000)) == len(cli_validate.SECTIONS) - 1
    assert sized == [len(cli_validate.SECTIONS) - 1]


def test_validate_refuses_no_workers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--jobs", "0"]) == 2
    assert "argument --jobs: '0' is not a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(InputError, match="--jobs must be >= 1, got 0"):
        cli_validate.sections(None, 0)


def test_a_row_faster_than_the_spec_sheet_is_listed_with_its_reason(tmp_path: Path) -> None:
    header = ("source,date,gpu,model,params_b,weight_format,engine,prompt_tokens,output_tokens,"
              "concurrency,metric,stat,value,unit,notes\n")
    row = "{src},2025-01,RTX 4090 24GB,Mistral,7.25,BF16,vLLM,256,128,{c},itl_ms,mean,{v},ms,\n"
    csv_path = tmp_path / "published.csv"
    csv_path.write_text(header + row.format(src="spec-dec", c=1, v=1.0)  # speculative decoding
                        + row.format(src="typo", c=2, v=0.5) + row.format(src="ok", c=4, v=99.0),
                        encoding="utf-8")
    keys = tmp_path / "keys.toml"
    keys.write_text(
        '[[gpu]]\nname = "RTX 4090 24GB"\nkey = "rtx-4090"\ngpus = 1\ntp = 1\n\n'
        '[[model]]\nname = "Mistral"\nweight_format = "BF16"\nkey = "mistral-7b-v0.3-bf16"\n\n'
        '[[upper_bound_exception]]\nsource = "spec-dec"\nmetric = "step"\nconcurrency = 1\n'
        'reason = "speculative decoding emits several tokens per step"\n', encoding="utf-8")
    card = scorecard(load_reference(csv_path, keys), keys_path=keys)
    assert card.upper_bound_rate == pytest.approx(1 / 3)
    assert {v.check.source: v.reason for v in card.violations} == {
        "spec-dec": "speculative decoding emits several tokens per step",
        "typo": "not explained"}
    assert "| not explained |" in markdown(card)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_a_derived_step_is_flagged_on_its_own_row(card: Scorecard) -> None:
    # issue 25: the scorecard says on each row whether its step is stated or derived, and how
    # many levels and groups the within-group figure rests on
    md = markdown(card)
    rows = [line for line in md.splitlines() if line.startswith("| ") and " | 320 | " in line]
    assert rows and all("TPOT derived from aggregate tok/s and TTFT" in r for r in rows)
    nim = [line for line in md.splitlines() if "(NIM) | 1 | 1500 |" in line]
    assert nim and "| stated |" in nim[0]
    groups = len({w.group for w in card.within})
    assert f"{len(card.within)} levels in {groups} groups" in md
    assert "Steps not stated by their source" not in md


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_band_coverage_counts_rows_in_the_typical_band(card: Scorecard) -> None:
    # issue 25: how often the band shown without measurements holds the measured step
    base = dict(group="g", gpu="x", engine="vLLM", model="m", source="s", date="2026-12",
                tp=1, concurrency=4.0, prompt_tokens=100.0, output_tokens=100.0,
                metric=Metric.STEP, stat="mean", spec=5.0)
    inside = validate.Check(**base, measured=8.0, saturated=False, band_ms=(5.0, 10.0))
    edge = validate.Check(**base, measured=10.0, saturated=False, band_ms=(5.0, 10.0))
    out = validate.Check(**base, measured=12.0, saturated=False, band_ms=(5.0, 10.0))
    none = validate.Check(**base, measured=12.0, saturated=False)
    assert (inside.in_band, edge.in_band, out.in_band, none.in_band) == (True, True, False, None)
    assert validate.band_coverage([inside, edge, out, none], saturated=False) == (2, 3)
    assert validate.band_coverage([inside, edge, out, none], saturated=True) == (0, 0)
    # over the shipped rows: every decode-step row has a band, its low edge the chapter's
    steps = [c for c in card.checks if c.metric == Metric.STEP]
    assert steps and all(c.band_ms is not None and c.band_ms[0] < c.band_ms[1] for c in steps)
    inside_n, rows = validate.band_coverage([c for c in card.checks if not c.added], False)
    assert rows >= 10 and inside_n / rows >= BAND_COVERAGE_BELOW_MIN  # the original rows


def test_the_tpot_band_carries_the_stalls_at_its_slow_edge() -> None:
    # issue 25: a benchmark's TPOT holds the other requests' prefills; the band a user without
    # measurements gets for it is the decode step's, its slow edge stretched to the event
    # model's TPOT at the slow edge's knobs. Llama-3.1-70B on 8 A100s under SGLang's profile:
    # one client has no stall (the step's band stands); 64 clients of 4K prompts stall every
    # decode (SGLang's cookbook measured 75-83 ms there, data/reference/published.csv)
    from capacity.fit import uncertainty
    from capacity.fit.measured import run_scenario
    s = run_scenario("llama-3.1-70b-bf16", "a100-80gb-sxm", prompt_tokens=3981.0,
                     output_tokens=531.0, n_gpus=8, tp=8)
    plain = validate.typical_step_bands(s, [1, 64], 300, 3981.0, 531.0)
    loaded = validate.typical_step_bands(s, [1, 64], 300, 3981.0, 531.0, "sglang")
    slow = validate.queued_levels(uncertainty.typical_edges(s)[1], [1, 64], 531.0, "sglang")
    assert slow is not None
    assert [lo for lo, _ in loaded] == [lo for lo, _ in plain]        # the fast edge stays
    assert loaded[0][1] == pytest.approx(max(plain[0][1], slow[0].tpot_mean_ms,
                                             slow[0].tpot_median_ms))
    assert loaded[1][1] == max(slow[1].tpot_mean_ms, slow[1].tpot_median_ms) > 1.5 * plain[1][1]
    assert loaded[1][1] > 83.0 > plain[1][1]


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_a_fit_of_the_lower_levels_predicts_up_to_twice_its_largest(card: Scorecard) -> None:
    # issue 25's target: fit on a sweep, predict up to 2x its largest batch within 5% median,
    # 15% worst (operator step; the shipped sweeps give 6 such levels). Missed from the RTX 4090
    # Qwen2.5-7B runs (2026-12-06, night) until a fit's eff, where compute binds at none of its
    # points, sat at a prior of 0.5 of the spec sheet: BF16 at 128 clients, fitted on 8-64, was
    # predicted 42.85 ms against a median ITL of 34.69 (+23.5%). Its prior is the typical
    # basis' GEMM plateau on the GPU since (0.706 of the RTX 4090's, `typical_eff`): 36.45 ms,
    # +5.1%, and the six levels 1.7% median; since the fit's eta_bw stops at the RTX 4090's
    # measured copy (921.85 of 1,008 GB/s, 2026-12-07), 34.48 ms, -0.6%
    assert card.extrapolated
    for w in card.extrapolated:
        fitted = [x.concurrency for x in card.within if x.group == w.group]
        top = max(fitted)
        assert max(c for c in fitted if c <= top / 2) < w.concurrency <= top
    op = card.extrapolated_error("operator")
    assert op.n >= 2 and op.median <= 0.05 and op.high <= 0.15
    worst = next(w for w in card.extrapolated if w.group.startswith("qwen2.5-7b-bf16"))
    assert worst.concurrency == 128.0
    assert worst.held_out_ms[1] == pytest.approx(34.48, rel=0.01)
    assert "### Fitted on the lower levels, predicted up to twice the largest" in markdown(card)


def test_the_sections_share_their_summary_cells_and_their_skipped_rows_line() -> None:
    # validate_report's helpers, as every published section's Markdown uses them
    from capacity.fit.validate_report import error_cells, fmt_or_dash, not_scored_lines
    assert error_cells([0.1, -0.3, 0.2]) == "3 | 20.0% | -30.0% | +10.0%"
    assert error_cells([]) == "0 | - | - | -"
    assert fmt_or_dash(math.nan, ".1%") == "-" and fmt_or_dash(0.25, ".0%") == "25%"
    assert not_scored_lines([]) == []
    assert not_scored_lines([("a", "no TTFT"), ("b", "a rate")]) == [
        "", "Not scored: a: no TTFT; b: a rate."]


def test_run_checks_read_the_decode_step_the_fit_reads() -> None:
    """One measured decode step on the Results page: the accuracy table's is the fit's
    (`decode_measured_ms`: the median inter-token gap, stalls left out), not the mean TPOT
    with other prompts' prefills in it (41.05 ms beside the fit's 11.2 on a vLLM level, an
    audit); TPOT where the run has no gaps, or where its gaps are chunks of several tokens."""
    s = run_scenario("mistral-7b-v0.3-bf16", "rtx-4090", prompt_tokens=256, output_tokens=128)
    kw = {"context_tokens": 384, "prompt_tokens": 256, "output_tokens": 128, "ttft_ms": 60.0}
    pts = [MeasuredPoint(concurrency=32, tpot_ms=41.05, itl_p50_ms=11.2, **kw),
           MeasuredPoint(concurrency=8, tpot_ms=17.0, **kw),
           MeasuredPoint(concurrency=4, tpot_ms=10.0, itl_p50_ms=30.0, **kw)]
    step = {c.concurrency: c.measured for c in run_checks(pts, s) if c.metric == Metric.STEP}
    assert step == {32: 11.2, 8: 17.0, 4: 10.0}
    assert step == {p.concurrency: calib.decode_measured_ms(p) for p in pts}
