"""The device's measured matmul ceiling (MAMF, data/matmul_ceilings.toml): what it is, and
that a fit's GEMM knobs stay at or below it (issue 25: "Knobs are not physical")."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from capacity.catalog import matmul
from capacity.catalog.loader import default_catalog
from capacity.catalog.matmul import (
    UNMEASURED_BANDWIDTH,
    bandwidth_ceiling,
    matmul_ceiling,
    measured_matmul,
    parse_matmul_ceilings,
    typical_bandwidth_ceiling,
    typical_eta_bw,
)
from capacity.errors import CatalogError
from capacity.fit.calibration import fit, predict_ms
from capacity.fit.calibration_problem import (
    BOUNDS,
    DECODE_PROBLEM,
    PREFILL_PROBLEM,
    knob_bounds,
    with_ceiling,
)
from capacity.fit.ceilings import scenario_ceiling
from capacity.fit.measured import MeasuredPoint
from capacity.model.scenario import make_scenario


def test_ceiling_is_the_measured_matmul_over_the_spec_sheet() -> None:
    """By hand from data/matmul_ceilings.toml and data/gpus: H100 SXM bf16 794.5 / 989, fp8
    1402.6 / 1979; MI300X bf16 668.4 / 1307.4 and no fp8 measurement; int8 has none; a GPU
    the file lacks has none (an L40S); fp8 on a GPU without fp8 runs its GEMMs in bf16 (A100:
    271.2 / 312); an RTX 4090's bf16 GEMMs reach its spec sheet (the file holds 165.2: 1),
    its fp8 is not measured."""
    gpus = default_catalog().gpus
    assert matmul_ceiling(gpus["h100-sxm"], "bf16") == pytest.approx(794.5 / 989)
    assert matmul_ceiling(gpus["h100-sxm"], "fp8") == pytest.approx(1402.6 / 1979)
    assert matmul_ceiling(gpus["h100-sxm"], "int8") is None
    assert matmul_ceiling(gpus["mi300x"], "bf16") == pytest.approx(668.4 / 1307.4)
    assert matmul_ceiling(gpus["mi300x"], "fp8") is None
    assert matmul_ceiling(gpus["a100-80gb-sxm"], "fp8") == pytest.approx(271.2 / 312)
    assert matmul_ceiling(gpus["l40s"], "bf16") is None
    assert matmul_ceiling(gpus["rtx-4090"], "bf16") == 1.0
    assert matmul_ceiling(gpus["rtx-4090"], "fp8") is None
    # every row of the bundled file is sourced, of a known GPU, and below that GPU's peak: a
    # typo above the peak would give no bound (None) and fail here
    path = matmul.workspace.bundled_data_dir() / matmul.MATMUL_FILE
    rows = parse_matmul_ceilings(path.read_text(encoding="utf-8"))
    assert set(rows) <= set(gpus) and all(r.source for r in rows.values())
    for key, row in rows.items():
        bf16 = matmul_ceiling(gpus[key], "bf16")
        assert bf16 is not None and 0.5 < bf16 <= 1, key
        if row.fp8_tflops is not None:
            fp8 = matmul_ceiling(gpus[key], "fp8")
            assert fp8 is not None and 0.5 < fp8 <= 1, key


def test_scenario_ceiling_follows_the_weights_precision_and_not_a_hand_peak() -> None:
    s = make_scenario("llama-3.1-70b", "h100-sxm", weights="fp8", n_gpus=2)
    assert scenario_ceiling(s) == pytest.approx(1402.6 / 1979)
    assert scenario_ceiling(make_scenario("llama-3.1-8b", "h200-sxm")) == pytest.approx(
        794.5 / 989)
    # a peak set by hand is not the one measured: no ceiling
    assert scenario_ceiling(make_scenario("llama-3.1-8b", "h200-sxm", tflops=700)) is None


def test_a_bad_ceilings_file_is_refused_with_its_table_named(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    with pytest.raises(CatalogError, match=r"\[h100-sxm\].*needs its source"):
        parse_matmul_ceilings('[h100-sxm]\nbf16_tflops = 800.0\nsource = " "\n')
    with pytest.raises(CatalogError, match=r"\[h100-sxm\].*bf16_tflops"):
        parse_matmul_ceilings('[h100-sxm]\nsource = "x"\n')
    with pytest.raises(CatalogError, match=r"\[h100-sxm\].*unknown field 'tflops'"):
        parse_matmul_ceilings('[h100-sxm]\nbf16_tflops = 1.0\ntflops = 2\nsource = "x"\n')
    with pytest.raises(CatalogError, match="finite and > 0"):
        parse_matmul_ceilings('[h100-sxm]\nbf16_tflops = nan\nsource = "x"\n')
    # a figure above the entry's spec sheet measured another card: no bound, not a wrong one
    (tmp_path / "matmul_ceilings.toml").write_text(
        '[h100-sxm]\nbf16_tflops = 1000.0\nsource = "another card"\n', encoding="utf-8")
    h100 = default_catalog().gpus["h100-sxm"]
    monkeypatch.setattr(matmul.workspace, "catalog_dir", lambda: tmp_path)
    assert matmul_ceiling(h100, "bf16") is None


def test_a_custom_gpu_under_a_bundled_key_takes_no_bundled_measurement(
        custom: Path) -> None:
    """A user's own H100 SXM entry (a lower peak, from `capacity probe` say) is not the card
    the file measured: no ceiling, and no error although 794.5 > its 700 TFLOP/s; the
    bundled entry keeps its 0.803."""
    from dataclasses import replace
    bundled = default_catalog().gpus["h100-sxm"]
    mine = replace(bundled, bf16_tflops=700.0, path=str(custom / "gpus" / "h100-sxm.toml"))
    assert matmul_ceiling(mine, "bf16") is None
    assert matmul_ceiling(bundled, "bf16") == pytest.approx(794.5 / 989)


def test_bounds_cap_only_the_gemm_knobs() -> None:
    """eff (decode) and MFU, attention MFU (prefill) are shares of peak TFLOP/s; eta_bw and
    the overheads are not. By hand: eff's high bound 0.803, eta_bw's stays 1."""
    p = with_ceiling(DECODE_PROBLEM, 0.803)
    lo, hi = p.bounds()
    assert dict(zip(p.names, hi, strict=True)) == {"eta_bw": 1.0, "step_overhead_ms": 1000.0,
                                                   "eff": 0.803}
    assert list(lo) == [BOUNDS[n][0] for n in p.names]
    assert dict(with_ceiling(PREFILL_PROBLEM, 0.7).upper) == {"mfu": 0.7, "attn_mfu": 0.7}
    assert with_ceiling(PREFILL_PROBLEM, None) is PREFILL_PROBLEM
    # a ceiling below a knob's low bound cannot invert the interval
    assert knob_bounds(("mfu",), {"mfu": 0.0})[1][0] == BOUNDS["mfu"][0]


def test_fit_stops_at_the_device_ceiling_and_says_so() -> None:
    """The issue's finding: prefill points that ask for MFU 0.93 on an H200, whose fastest
    measured bf16 GEMM is 0.803 of the spec sheet. The fit stays at 0.803, a note says why,
    and the prefill overhead takes the rest; with the peak set by hand (no ceiling) the same
    points give the unphysical 0.93."""
    base = make_scenario("llama-3.1-8b", "h200-sxm")
    truth = base.with_(mfu=0.93, prefill_overhead_ms=0.0)
    shape = [MeasuredPoint(concurrency=1, context_tokens=p + 64, prompt_tokens=p,
                           output_tokens=64) for p in (1024, 2048, 4096, 8192)]
    _, ttft = predict_ms(truth, shape)
    pts = [MeasuredPoint(concurrency=1, context_tokens=s.context_tokens,
                         prompt_tokens=s.prompt_tokens, output_tokens=64, ttft_ms=float(t))
           for s, t in zip(shape, ttft, strict=True)]
    cal = fit(pts, base, held_out=False)
    ceiling = 794.5 / 989
    assert cal.mfu is not None and cal.mfu <= ceiling + 1e-9
    assert cal.mfu == pytest.approx(ceiling, rel=1e-4)
    assert any("matmul ceiling" in n for n in cal.notes)
    # the same peak given by hand (a hair off the catalog's): no measured ceiling applies
    free = fit(pts, base.with_(tflops=989.0 - 1e-9), held_out=False)
    assert free.mfu == pytest.approx(0.93, rel=0.02)
    assert not any("matmul ceiling" in n for n in free.notes)
    # the knobs below the ceiling are untouched: a truth of 0.6 is recovered
    honest = base.with_(mfu=0.6, prefill_overhead_ms=5.0)
    _, ttft = predict_ms(honest, shape)
    pts = [MeasuredPoint(concurrency=1, context_tokens=s.context_tokens,
                         prompt_tokens=s.prompt_tokens, output_tokens=64, ttft_ms=float(t))
           for s, t in zip(shape, np.asarray(ttft), strict=True)]
    again = fit(pts, base, held_out=False)
    assert again.mfu == pytest.approx(0.6, rel=0.02)
    assert not any("matmul ceiling" in n for n in again.notes)


def test_the_catalog_page_shows_each_gpus_measured_matmul_beside_its_spec() -> None:
    """The Catalog page's GPU table (`catalog_tables.gpu_rows`) carries the file's figures:
    H200 SXM 794.5 (BF16) and 1453.4 (FP8) beside 989 and 1979; none for an L40S."""
    from capacity.report.catalog_tables import gpu_rows
    rows = {r["key"]: r for r in gpu_rows(default_catalog())}
    h200 = rows["h200-sxm"]
    assert (h200["bf16_tflops"], h200["mamf_bf16_tflops"]) == (989, 794.5)
    assert (h200["fp8_tflops"], h200["mamf_fp8_tflops"]) == (1979, 1453.4)
    assert rows["mi300x"]["mamf_fp8_tflops"] is None
    assert rows["l40s"]["mamf_bf16_tflops"] is None


def test_bandwidth_ceiling_is_the_measured_copy_over_the_spec_sheet() -> None:
    """By hand from data/matmul_ceilings.toml (our own H200 measurement, 4266.0 GB/s) and
    data/gpus (4800 GB/s): 0.889; an H100 SXM's BabelStream Copy of 2.90 TB/s x 4266 / 4010
    (the same tool's H200 figure: its ratio, our level) = 3085.1 of 3350; an RTX 4090's copy
    kernel 921.85 of 1008; a GPU without a copy figure (B200, its row has TFLOP/s only) or
    without a row (L40S) has none; a bandwidth set by hand has none; the Catalog page's row
    carries the figure."""
    from capacity.catalog.matmul import bandwidth_ceiling
    from capacity.fit.ceilings import scenario_bandwidth_ceiling
    from capacity.report.catalog_tables import gpu_rows
    gpus = default_catalog().gpus
    assert bandwidth_ceiling(gpus["h200-sxm"]) == pytest.approx(4266.0 / 4800)
    assert 2900 * 4266 / 4010 == pytest.approx(3085.1, abs=0.05)
    assert bandwidth_ceiling(gpus["h100-sxm"]) == pytest.approx(3085.1 / 3350)
    assert bandwidth_ceiling(gpus["rtx-4090"]) == pytest.approx(921.85 / 1008)
    assert bandwidth_ceiling(gpus["b200"]) is None
    assert bandwidth_ceiling(gpus["l40s"]) is None
    assert scenario_bandwidth_ceiling(make_scenario("llama-3.1-8b", "h200-sxm")) == (
        pytest.approx(0.88875))
    assert scenario_bandwidth_ceiling(make_scenario("llama-3.1-8b", "h200-sxm",
                                                    bandwidth_gb_s=4000)) is None
    rows = {r["key"]: r for r in gpu_rows(default_catalog())}
    assert (rows["h200-sxm"]["copy_gb_s"], rows["b200"]["copy_gb_s"]) == (4266.0, None)
    with pytest.raises(CatalogError, match="finite and > 0"):
        parse_matmul_ceilings('[h200-sxm]\nbf16_tflops = 1.0\ncopy_gb_s = -1\nsource = "x"\n')


def test_the_babelstream_figures_keep_that_tools_ratios_at_our_h200_level() -> None:
    """The three GPUs measured only by BabelStream's Copy in Azure's AI-benchmarking-guide
    (H100 SXM 2.90, A100 80GB SXM 1.61, MI300X 4.11 TB/s; its H200: 4.01) are scaled by our
    own H200 copy over that tool's (4266 / 4010): each keeps the tool's ratio to the H200, so
    the H200's bound stays the copy measured on it. The MI300X reaches less of its spec sheet
    than the Hopper cards (0.825 against 0.921 and 0.889): another tool agrees (gpu-benches'
    scale kernel, 4,058 of 5,300 GB/s, 0.77)."""
    gpus = default_catalog().gpus
    scale = 4266.0 / 4010
    for key, tb_s in (("h100-sxm", 2.90), ("a100-80gb-sxm", 1.61), ("mi300x", 4.11)):
        row = measured_matmul(key)
        assert row is not None and row.copy_gb_s == pytest.approx(tb_s * 1e3 * scale, abs=0.06)
        assert "BabelStream" in row.source and "1.0638" in row.source
    h200 = bandwidth_ceiling(gpus["h200-sxm"]) or 0.0
    mi300x = bandwidth_ceiling(gpus["mi300x"]) or 0.0
    assert mi300x / h200 == pytest.approx((4.11 / 5.3) / (4.01 / 4.8), rel=1e-3)
    assert mi300x < h200 < (bandwidth_ceiling(gpus["h100-sxm"]) or 0.0)


def test_a_typical_basis_reads_at_its_share_of_each_gpus_copy_ceiling() -> None:
    """data/engines.toml states eta_bw as a share of the GPU's copy ceiling (as mfu and eff of
    its matmul ceiling): 1.0 on an H100 SXM is 3085.1 / 3350 = 0.921 of the spec sheet, on an
    MI300X 4372.4 / 5300 = 0.825; a GPU not measured (B200) takes the median of the measured
    shares, recomputed here from the file and the catalog; a share over 1 stops at the spec
    sheet."""
    gpus = default_catalog().gpus
    assert typical_eta_bw(1.0, gpus["h100-sxm"]) == pytest.approx(3085.1 / 3350)
    assert typical_eta_bw(1.0, gpus["mi300x"]) == pytest.approx(4372.4 / 5300)
    assert typical_eta_bw(0.5, gpus["rtx-4090"]) == pytest.approx(0.5 * 921.85 / 1008)
    shares = [s for g in gpus.values() if (s := bandwidth_ceiling(g)) is not None]
    assert len(shares) == 6
    assert UNMEASURED_BANDWIDTH == pytest.approx(statistics.median(shares), abs=5e-4)
    assert typical_bandwidth_ceiling(gpus["b200"]) == UNMEASURED_BANDWIDTH
    assert typical_eta_bw(1.0, gpus["b200"]) == pytest.approx(0.888)
    assert typical_eta_bw(2.0, gpus["h100-sxm"]) == 1.0


def test_bounds_cap_the_bandwidth_knobs_at_the_copy() -> None:
    """eta_bw (and the operator step's eta_kv) are shares of the spec bandwidth: capped at the
    copy's share, the GEMM knobs at the matmul's, each by its own ceiling."""
    from capacity.fit.calibration_problem import OPERATOR_PROBLEM
    p = with_ceiling(DECODE_PROBLEM, 0.803, 0.889)
    assert dict(p.upper) == {"eta_bw": 0.889, "eff": 0.803}
    op = dict(with_ceiling(OPERATOR_PROBLEM, None, 0.889).upper)
    assert op == {n: 0.889 for n in OPERATOR_PROBLEM.names if n in ("eta_bw", "eta_kv")}
    assert "eta_kv" in op


def test_fit_stops_at_the_measured_copy_and_says_so() -> None:
    """Decode steps generated with eta_bw 1 and no fixed cost on an H200 (faster than its
    measured copy, 0.889 of the spec), at two contexts so the KV term separates the two: the
    fit stops at 0.889 with a note naming the copy, and the step overhead takes the rest;
    with the bandwidth given by hand the same points fit above it; a truth below the copy
    (0.8) gets no note."""
    base = make_scenario("llama-3.1-8b", "h200-sxm", context_tokens=8192)
    shape = [MeasuredPoint(concurrency=c, context_tokens=ctx, prompt_tokens=ctx - 64,
                           output_tokens=64) for c in (1, 4, 16, 32) for ctx in (1088, 8192)]

    def points(truth: object) -> list[MeasuredPoint]:
        tpot, _ = predict_ms(truth, shape)  # type: ignore[arg-type]
        return [MeasuredPoint(concurrency=p.concurrency, context_tokens=p.context_tokens,
                              prompt_tokens=p.prompt_tokens, output_tokens=64,
                              tpot_ms=float(t))
                for p, t in zip(shape, np.asarray(tpot), strict=True)]

    fast = points(base.with_(eta_bw=1.0, step_overhead_ms=0.0))
    cal = fit(fast, base, held_out=False)
    assert cal.eta_bw == pytest.approx(4266.0 / 4800, rel=1e-4)
    assert any("measured copy bandwidth" in n for n in cal.notes)
    free = fit(fast, base.with_(bandwidth_gb_s=4800.0 - 1e-9), held_out=False)
    assert free.eta_bw is not None and free.eta_bw > 0.9
    assert not any("copy bandwidth" in n for n in free.notes)
    honest = fit(points(base.with_(eta_bw=0.8, step_overhead_ms=2.0)), base, held_out=False)
    assert honest.eta_bw is not None and honest.eta_bw < 0.87
    assert not any("copy bandwidth" in n for n in honest.notes)


def test_the_h200_copy_figure_is_the_committed_measurements_fastest() -> None:
    """data/matmul_ceilings.toml's H200 copy_gb_s is recomputed from the committed probe
    (data/reference/gpu_probe/, JSON lines of benchmarks/gpu_step_probe.py): the fastest
    device-to-device copy of its runs, bytes read + written over the median time."""
    import json
    folder = matmul.workspace.bundled_data_dir() / "reference" / "gpu_probe"
    rows = [json.loads(line) for f in sorted(folder.glob("h200-sxm-*.jsonl"))
            for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    copies = [r for r in rows if r["kind"] == "copy" and r["op"] == "copy"]
    assert len(copies) == 2 and all("H200" in r["device"] for r in rows if r["kind"] == "env")
    fastest = max(r["bytes"] / r["ms"] / 1e6 for r in copies)
    row = matmul.measured_matmul("h200-sxm")
    assert row is not None and row.copy_gb_s == pytest.approx(fastest, abs=0.05)
