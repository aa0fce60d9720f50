"""Planning with an engine's typical efficiency when there is no calibration (issue 13):
data/engines.toml's figures follow from the measurements the project ships, they reach the
plan, `capacity size --typical`, the Planner link and the quote, which says which basis each
figure uses."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.catalog.matmul import UNMEASURED_CEILING
from capacity.cli.main import main
from capacity.errors import CatalogError, InputError
from capacity.fit.calibration import fit
from capacity.fit.calibration_store import load
from capacity.fit.measured import run_scenario
from capacity.fit.planning import (
    FIXED_STEP_KNOBS,
    band_edges,
    gpu_band,
    scenario_with_basis,
    typical_band_scenarios,
    with_calibration,
    with_spec_sheet,
    with_typical,
)
from capacity.fit.reference import load_reference
from capacity.fit.typical import TYPICAL_KNOBS, parse_engines, typical_efficiency
from capacity.fit.uncertainty import band
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.plan.units import replica_units
from capacity.report.planner_url import planner_decode, planner_state, planner_url
from capacity.report.quote import quote_markdown


def _inputs(**kw: object) -> PlanInputs:
    wl = Workload(daily_active_users=2000, requests_per_user_per_day=30, peak_share=0.25,
                  peak_hours=2, context_tokens=8192, output_tokens=512)
    return PlanInputs(model="qwen3.5-9b", workload=wl, slo=Slo(ttft_ms=1500, tpot_ms=40),
                      gpus=("rtx-4090", "h100-sxm"), **kw)  # type: ignore[arg-type]


def test_eta_bw_follows_from_the_shipped_measurements(catalog: Catalog) -> None:
    """Spec-sheet step time / measured TPOT of the vLLM points named in the file's header;
    eff's low edge, MFU and the prefill overhead are the chapter method's fit of the RTX 4090
    points (`capacity calibrate --reference --step-method chapter`), recomputed here."""
    sweep = next(x for x in load_reference() if x.gpu_key == "rtx-4090")
    chapter = fit(list(sweep.points), run_scenario(
        sweep.model_key or "", "rtx-4090", prompt_tokens=sweep.prompt_tokens,
        output_tokens=sweep.output_tokens, catalog=catalog).with_(step_method="chapter"),
        today="-")
    ratios = []
    s = make_scenario("mistral-7b-v0.3", "rtx-4090", catalog=catalog, weights="bf16",
                      context_tokens=320, prompt_tokens=256)
    tpot = [p for p in sweep.points if p.tpot_ms is not None]
    ev = evaluate(s, [p.concurrency for p in tpot])
    ratios += [float(sp) / (p.tpot_ms or 1.0)
               for sp, p in zip(ev.decode.step_ms, tpot, strict=True)]
    h100 = make_scenario("qwen3-8b", "h100-sxm", catalog=catalog, context_tokens=453,
                         prompt_tokens=233)
    ratios.append(float(evaluate(h100, [4]).decode.step_ms[0]) / 7.38)  # published.csv, vLLM
    vllm = typical_efficiency("vllm")
    assert len(ratios) == 6
    # eta_bw and the per-layer overhead (F11): the least absolute deviations of TPOT = t_bw /
    # eta_bw + layers x t over eighteen groups' lowest-concurrency points
    # (tests/test_typical_step.py recomputes it): eta_bw at its bound 0.9 and the per-layer
    # cost through Llama-3.1-70B on 4 H200s since 2026-12-06, night; the RTX 4090 Mistral
    # point (32 layers, a1 = step at eta_bw 1, y1 = 18.70 ms), which the line ran through
    # before, lies within 1.5% of it (18.48 ms)
    a1, y1 = float(ev.decode.step_ms[0]), float(tpot[0].tpot_ms or 0.0)
    # eta_bw is a share of each GPU's copy ceiling since 2026-12-07: the RTX 4090's 921.85 of
    # 1,008 GB/s
    copy = 921.85 / 1008
    assert vllm.typical["eta_bw"] == 1.0
    assert a1 / copy + 32 * vllm.typical["layer_overhead_ms"] == pytest.approx(y1, rel=0.03)
    # the band: the slowest single point's eta_bw (before the split; a share of the spec
    # sheet, over the RTX 4090's ceiling) to the ceiling itself
    assert vllm.low["eta_bw"] == pytest.approx(min(ratios) / copy, abs=0.01)
    assert vllm.high["eta_bw"] == 1.0
    assert vllm.high["layer_overhead_ms"] == pytest.approx(
        2 * vllm.typical["layer_overhead_ms"], rel=0.01)
    # the prefill plateau: the median of the published groups' unqueued plateaus (F6c)
    from capacity.fit import validate_typical as vt
    original = {k: kept for k, g in vt.groups_of().items()  # rows added later: held out
                if (kept := [s for s in g if not s.is_added])}
    evidence = vt.plateau_evidence(original, vllm.typical["mfu_half_tokens"], catalog)
    plateaus = [statistics.median(e.plateaus) for e in evidence.values() if e.plateaus]
    assert len(plateaus) == 2
    assert vllm.typical["mfu"] == pytest.approx(statistics.median(plateaus), abs=0.001)
    # each group's plateau as a share of its GPU's measured matmul ceiling (the NIM FP8 group on
    # H100s 0.975 of 0.709, the AWQ group on an A100 0.629 of 0.869); the range spans the two
    assert (vllm.low["mfu"], vllm.high["mfu"]) == (pytest.approx(min(plateaus), abs=0.001),
                                                   pytest.approx(max(plateaus), abs=0.001))
    assert vllm.typical["prefill_overhead_ms"] == pytest.approx(chapter.prefill_overhead_ms,
                                                               abs=0.05)
    # the chapter method's own eff on these points (0.135 of the spec sheet) is SGLang's
    # range's low edge, in the file's unit, a share of the matmul ceiling (an H100's 0.803,
    # `UNMEASURED_CEILING`); vLLM's eff is the prefill plateau (tests/test_typical_step.py)
    assert typical_efficiency("sglang").low["eff"] * UNMEASURED_CEILING == pytest.approx(
        chapter.eff, abs=0.005)


def test_bad_engine_files_and_names_are_refused() -> None:
    with pytest.raises(CatalogError, match="low <= typical <= high"):
        parse_engines('[x]\nname = "X"\nsource = "s"\nas_of = "2026"\n'
                      + "".join(f"[x.{k}]\ntypical = 0.5\nlow = 0.6\nhigh = 0.7\n"
                                for k in ("eta_bw", "eff", "mfu", "step_overhead_ms",
                                          "prefill_overhead_ms")))
    with pytest.raises(InputError, match="known: sglang, vllm"):
        typical_efficiency("nope")


@pytest.mark.slow
def test_typical_plans_slower_than_the_spec_sheet(catalog: Catalog) -> None:
    chapter = _inputs()
    spec = with_spec_sheet(chapter)
    typ = with_typical(chapter, typical_efficiency("vllm"))
    assert (chapter.basis, spec.basis, typ.basis) == ("chapter", "spec", "typical")
    assert typ.eta_bw == 1.0 and typ.mfu == 0.706 and typ.typical == "vllm"
    assert typ.request_latency_ms == 7.84
    assert typ.layer_overhead_ms == 0.0773
    assert typ.mfu_half_tokens == 262.0
    a, b = plan(spec, catalog).best, plan(typ, catalog).best
    assert a is not None and b is not None
    same = next(o for o in plan(typ, catalog, keep_all=True).all_options
                if (o.gpu, o.n_gpus, o.tp, o.weights, o.kv_dtype)
                == (a.gpu, a.n_gpus, a.tp, a.weights, a.kv_dtype))
    # decode reads at the GPU's copy ceiling and pays 77.3 us a layer (F11), an
    # 8,192-token prefill 0.706 x 0.803 = 56.7 % of the peak (F6c's curve is 1.000 that far
    # above the ridge): every step and every prefill is slower (prefill by 1 / 0.567 =
    # 1.76x, and more with its overhead), and the fleet is never cheaper
    assert same.tpot_ms > a.tpot_ms * 1.2
    assert same.prefill_ms > a.prefill_ms * 1.74
    assert b.cost_per_month >= a.cost_per_month
    # the chapter's MFU 0.3 is an assumption, not a peak: typical vLLM prefills faster than it
    c = next(o for o in plan(chapter, catalog, keep_all=True).all_options
             if (o.gpu, o.n_gpus, o.tp, o.weights, o.kv_dtype)
             == (a.gpu, a.n_gpus, a.tp, a.weights, a.kv_dtype))
    assert same.prefill_ms < c.prefill_ms
    band = gpu_band(typ, b, None, catalog)
    assert band.basis == "typical"
    assert band.low is not None and band.low <= b.n_gpus
    assert band.high is None or band.high >= b.n_gpus
    # a calibration wins over the typical figures
    cal = with_calibration(typ, load("rtx-4090-vllm-published"))
    assert cal.basis == "calibrated" and cal.typical == ""


def test_the_quote_says_the_basis_of_each_figure(catalog: Catalog) -> None:
    p = plan(with_typical(_inputs(), typical_efficiency("vllm")), catalog)
    en = quote_markdown(p, catalog=catalog)
    assert ("TTFT, TPOT, capacity and cost per M tokens: typical vLLM efficiency (no "
            "calibration); memory: each card's memory as its driver reports it; cost per month: "
            "the prices below") in en
    assert ("Efficiency, typical vLLM efficiency (no calibration): decode compute eff 0.71 "
            "of each GPU's measured matmul ceiling, prefill MFU 0.71 of it / (1 + (262 / m)^2.5)^(1/2.5) "
            "at m tokens a pass, bandwidth efficiency 1.00 of its measured copy ceiling, "
            "0.0 ms per step, 3.5 ms per prefill, 77.3 us per layer per decode step, ridge sharpness "
            "2.5 (memory and compute combined smoothly near the ridge), an untied input "
            "embedding table looked up one row per sequence, as engines do, not read whole, "
            "the card's memory as its driver reports it (an H100's 80 GiB, 85.52 GB, not 80 x "
            "10^9 bytes), 0.2 ms per linear-attention layer per prefill, 7.84 ms per request "
            "outside the GPU") in en
    zh = quote_markdown(p, catalog=catalog, lang="zh")
    assert "vLLM 典型效率（未校准）" in zh and "带宽效率为各 GPU 实测拷贝上限的 1.00" in zh
    assert "每层每个解码步 77.3 μs" in zh
    spec = quote_markdown(plan(with_spec_sheet(_inputs()), catalog), catalog=catalog)
    assert ("cost per M tokens: the spec sheet (every efficiency at its peak: an upper bound "
            "on speed)") in spec


def test_typical_travels_in_the_planner_link(catalog: Catalog) -> None:
    inp = with_typical(_inputs(), typical_efficiency("vllm"))
    q = dict(parse_qsl(urlsplit(planner_url(planner_state(inp, catalog))).query))
    assert q["cal"] == "typical:vllm"
    state, notices = planner_decode(q, catalog)
    assert notices == []
    again = state.inputs(catalog)
    assert again.basis == "typical" and again.eta_bw == inp.eta_bw
    assert plan(again, catalog).options == plan(inp, catalog).options
    bad, notices = planner_decode({"cal": "typical:nope"}, catalog)
    assert bad.cal == "" and "no typical efficiency for engine 'nope'" in notices[0]


def test_size_cli_plans_with_the_typical_efficiency(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    base = ["size", "--dau", "2000", "--requests-per-user", "30", "--peak-share", "0.25",
            "--ctx", "8192", "--output-tokens", "512", "--slo-ttft-ms", "1500",
            "--slo-tpot-ms", "40", "--model", "qwen3.5-9b", "--gpus", "rtx-4090",
            "--format", "json"]
    assert main([*base, "--typical", "vllm", "--quote", str(tmp_path / "q.md")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["basis"] == "typical"
    assert "typical vLLM efficiency" in (tmp_path / "q.md").read_text(encoding="utf-8")
    assert main([*base, "--typical", "nope"]) == 2
    assert "known: sglang, vllm" in capsys.readouterr().err
    assert main([*base, "--typical", "vllm", "--calibration", "rtx-4090-vllm-published"]) == 2
    assert "give one of --basis, --calibration, --typical" in capsys.readouterr().err


def test_the_explorer_and_the_planner_band_one_typical_prediction_alike(
        catalog: Catalog) -> None:
    # The same deployment on the typical vLLM basis: the Planner's band (band_edges, for its
    # GPU counts) and the Explorer's (uncertainty.band with typical_band_scenarios) put every
    # typical knob at the same two edges: data/engines.toml's step_error band for the step's
    # knobs, its ttft_error band for the prefill's and the request latency, its ranges for
    # the others. Before, the
    # Explorer used the generic ranges (MFU 0.2, 5 ms per step at the slow edge): a TTFT band
    # up to 3.5x the prediction beside a Planner band of 1.8x
    typ = with_typical(_inputs(), typical_efficiency("vllm"))
    slow_in, fast_in = band_edges(typ, None)
    s = scenario_with_basis(make_scenario("qwen3.5-9b", "rtx-4090", catalog=catalog,
                                          context_tokens=8192), "typical:vllm")
    fast_s, slow_s = typical_band_scenarios(s, "vllm")
    dtype = s.variant.format.compute_dtype
    for k in TYPICAL_KNOBS:
        if k == "mfu":  # the planner's inputs hold it per GPU (`PlanInputs.mfu_on`)
            assert slow_s.mfu == pytest.approx(slow_in.mfu_on(s.gpu, dtype))
            assert fast_s.mfu == pytest.approx(fast_in.mfu_on(s.gpu, dtype))
            continue
        if k == "eff":  # and the decode GEMMs' share the same way (`PlanInputs.eff_on`)
            assert slow_s.eff == pytest.approx(slow_in.eff_on(s.gpu, dtype))
            assert fast_s.eff == pytest.approx(fast_in.eff_on(s.gpu, dtype))
            continue
        if k == "eta_bw":  # and the read's share of the copy ceiling (`PlanInputs.eta_bw_on`)
            assert slow_s.eta_bw == pytest.approx(slow_in.eta_bw_on(s.gpu))
            assert fast_s.eta_bw == pytest.approx(fast_in.eta_bw_on(s.gpu))
            continue
        assert getattr(slow_s, k) == pytest.approx(getattr(slow_in, k)), k
        if k in FIXED_STEP_KNOBS:   # the fast edge's: solved on a deployment (below)
            continue
        assert getattr(fast_s, k) == pytest.approx(getattr(fast_in, k)), k
    # the step's knobs at the basis' error band (step_error -0.265 / +0.152), the prefill's
    # at its TTFT band (ttft_error -0.695 / +1.248); a fraction stops at 1 (eta_bw 1 x 1.152:
    # the RTX 4090's copy ceiling, 921.85 of 1,008 GB/s; the plateau 0.706 x 2.248 = 1.59:
    # the GPU's matmul ceiling), so the fast edge's fixed costs carry the rest
    # (`fast_fixed_costs`): here none at all, for a one-sequence step of Qwen3.5-9B at 8K on
    # an RTX 4090 read at its copy ceiling is slower than the prediction / 1.152 even without
    # them (the fastest the band can claim)
    copy = 921.85 / 1008
    assert s.eta_bw == pytest.approx(copy)
    assert (slow_s.eta_bw, slow_s.layer_overhead_ms) == pytest.approx((copy * 0.735,
                                                                       0.0773 / 0.735))
    assert fast_s.eta_bw == pytest.approx(copy)
    assert (fast_s.step_overhead_ms, fast_s.layer_overhead_ms) == (0.0, 0.0)
    assert float(evaluate(fast_s, [1.0]).decode.step_ms[0]) > float(
        evaluate(s, [1.0]).decode.step_ms[0]) / 1.152
    # the Planner solves them the same way on the option it bands (`gpu_band`)
    o = next(x for x in plan(typ, catalog, keep_all=True).all_options
             if (x.gpu, x.n_gpus, x.tp, x.weights, x.kv_dtype) == ("rtx-4090", 1, 1, "bf16",
                                                                   "fp16") and not x.draft)
    _, fast_o = band_edges(typ, None, o, catalog)
    for k in FIXED_STEP_KNOBS:
        assert getattr(fast_o, k) == pytest.approx(getattr(fast_s, k), rel=1e-9), k
    # the typical basis counts the weights as engines read them (an untied input embedding
    # table a lookup), the middle and both edges, on both surfaces
    assert all(x.embedding_lookup for x in (s, fast_s, slow_s, typ, fast_in, slow_in))
    # the RTX 4090's bf16 GEMMs reach its spec sheet (its matmul ceiling 1: 0.706 of it, 0.706
    # of the spec sheet); 3.5 ms a prefill and 7.84 ms outside the GPU, each over 1 + low and
    # 1 + high
    assert (slow_s.mfu, slow_s.prefill_overhead_ms, slow_s.request_latency_ms) == pytest.approx(
        (0.706 * 0.305, 3.5 / 0.305, 7.84 / 0.305))
    assert (fast_s.mfu, fast_s.prefill_overhead_ms, fast_s.request_latency_ms) == pytest.approx(
        (1.0, 3.5 / 2.248, 7.84 / 2.248))
    b = band(s, [16.0], None, edges=(fast_s, slow_s))
    lo, mid, hi = (float(x[0]) for x in b.step_ms)
    assert lo < mid < hi
    assert hi == pytest.approx(float(evaluate(slow_s, [16.0]).decode.step_ms[0]))
    assert b.ttft_s[2] == pytest.approx(float(evaluate(slow_s, [16.0]).ttft_s))
    # unqueued and on one GPU, the slow edge's TTFT is the prediction's / (1 - 0.695)
    assert b.ttft_s[2] == pytest.approx(b.ttft_s[1] / 0.305, rel=1e-6)
    # the generic ranges (MFU 0.2 .. 0.6, 5 .. 50 ms a prefill) are another band (their slow
    # edges meet here within 0.3%, their fast edges do not)
    generic = band(s, [16.0]).ttft_s
    assert generic[0] != pytest.approx(b.ttft_s[0], rel=0.05)


def _ttft_bound(ttft_ms: float) -> PlanInputs:
    """Llama-3.1-8B on H100s at 8 requests of 8,192 tokens, typical vLLM: TTFT p90 is about
    0.36 s at the prediction, and the TTFT band's slow edge is 1 / (1 - 0.667) = 3.0x that
    unqueued (data/engines.toml's [vllm.ttft_error]), about 0.9 s."""
    wl = Workload(peak_concurrency=8, context_tokens=8192, output_tokens=256)
    return with_typical(PlanInputs(model="llama-3.1-8b", workload=wl,
                                   slo=Slo(ttft_ms=ttft_ms, tpot_ms=100), gpus=("h100-sxm",)),
                        typical_efficiency("vllm"))


def test_the_band_says_what_the_slow_edge_fails(catalog: Catalog) -> None:
    """Where the band's slow edge needs more GPUs than the prediction, the band names the
    checks the recommended count fails there, on every surface that shows the band (the
    Planner's caption and the quote share `band_text`); where it needs none more, nothing."""
    from capacity.plan.options import Reason
    from capacity.report.bases import band_text

    tight = _ttft_bound(600.0)
    p = plan(tight, catalog)
    assert p.best is not None and p.best.n_gpus == 1 and p.best.ttft_ms < 600.0
    b = gpu_band(tight, p.best, None, catalog)
    # 0.36 s x 2.7 is over 0.6 s: one H100 fails on TTFT at the slow edge, and nothing else
    assert b.high is None or b.high > 1
    assert b.slow_misses == (Reason.TTFT,)
    hi = f"1-{b.high}" if b.high is not None else "1 to more than 16"
    text = f"1 GPU, {hi} within the band; at its slow edge, 1 GPU fails on TTFT"
    assert band_text(p.best, b, 16, "en") == text
    assert band_text(p.best, b, 16, "zh").endswith("；在区间慢端，1 张卡未通过：首字延迟")
    assert f"| GPUs within the uncertainty band | {text} |" in quote_markdown(
        p, catalog=catalog, band=b)
    # 2.8 x 0.36 s is well within 5 s: the slow edge needs no more GPUs, and says nothing
    loose = _ttft_bound(5000.0)
    q = plan(loose, catalog)
    assert q.best is not None
    c = gpu_band(loose, q.best, None, catalog)
    assert (q.best.n_gpus, c.high, c.slow_misses) == (1, 1, ())
    assert band_text(q.best, c, 16, "en") == "1 GPU at both edges of the band"
    assert band_text(q.best, c, 16, "zh") == "1 张卡，区间两端相同"


@pytest.mark.slow  # the Planner page through AppTest
def test_the_band_reads_the_same_on_the_cli_the_quote_and_the_planner(
        catalog: Catalog, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One typical plan, three surfaces: `capacity size --format json`'s gpu_band, the quote
    it writes and the Planner opened on the plan's link show the same band, the slow edge's
    misses included (one computation, `gpu_band`, one text, `band_text`)."""
    from streamlit.testing.v1 import AppTest

    argv = ["size", "--model", "llama-3.1-8b", "--peak-concurrency", "8", "--ctx", "8192",
            "--output-tokens", "256", "--slo-ttft-ms", "600", "--slo-tpot-ms", "100",
            "--gpus", "h100-sxm", "--typical", "vllm", "--format", "json"]
    assert main([*argv, "--quote", str(tmp_path / "q.md")]) == 0
    band = json.loads(capsys.readouterr().out)["gpu_band"]
    b = gpu_band(_ttft_bound(600.0), plan(_ttft_bound(600.0), catalog).options[0], None,
                 catalog)
    assert (band["n_gpus"], band["low"], band["high"], band["slow_misses"]) == (
        b.n_gpus, b.low, b.high, ["ttft"])
    text = band["text"]
    assert text.endswith("; at its slow edge, 1 GPU fails on TTFT")
    quote = (tmp_path / "q.md").read_text(encoding="utf-8")
    assert f"| GPUs within the uncertainty band | {text} |" in quote
    link = next(line for line in quote.splitlines() if "/planner?" in line)
    query = dict(parse_qsl(urlsplit(link.split(": ", 1)[1]).query))
    assert query["cal"] == "typical:vllm" and query["gpus"] == "h100-sxm"
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "streamlit_app.py"),
                           default_timeout=120).switch_page("pages/planner.py")
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    assert f"GPUs within the uncertainty band: {text}" in [c.value for c in at.caption]


def test_the_planner_and_the_explorer_read_the_fast_edge_alike(catalog: Catalog) -> None:
    # Qwen2.5-7B BF16 on one RTX 4090, typical vLLM: its input embedding table is apart from
    # its output head (152,064 x 3,584 x 2 bytes = 1.090 GB, 7.2% of W). The Planner's fast
    # edge (band_edges -> plan_step, the step its GPU counts rest on) and the Explorer's
    # (typical_band_scenarios -> evaluate) both leave it unread: one step, two surfaces
    wl = Workload(peak_concurrency=16, context_tokens=1024, output_tokens=256)
    inp = with_typical(PlanInputs(model="qwen2.5-7b", formats=("bf16",), workload=wl,
                                  gpus=("rtx-4090",), max_gpus=1, kv_dtypes=("fp16",)),
                       typical_efficiency("vllm"))
    _, fast_in = band_edges(inp, None, plan(inp, catalog).options[0], catalog)
    _, _, u = replica_units(fast_in, catalog)
    s = scenario_with_basis(make_scenario("qwen2.5-7b", "rtx-4090", catalog=catalog,
                                          weights="bf16", context_tokens=1024), "typical:vllm")
    fast_s, _ = typical_band_scenarios(s, "vllm")
    explorer = float(evaluate(fast_s, [16.0]).decode.step_ms[0])
    assert u.formats == ["bf16"] and int(u.tp[0]) == 1
    planner = u.step.select(np.asarray([0], dtype=np.int64)).step_ms(np.asarray([16.0]))
    assert float(np.ravel(planner)[0]) == pytest.approx(explorer, rel=1e-9)
    # by hand, on the roofs' max (F4c's smooth corner off): 16 sequences are bandwidth-bound,
    # so the edge's step is shorter by the table's read at the RTX 4090's copy ceiling (921.85
    # GB/s: eta_bw's fast edge)
    at_max = fast_s.with_(ridge_sharpness=0.0)
    lookup, whole = (float(evaluate(at_max.with_(embedding_lookup=e), [16.0]).decode.step_ms[0])
                     for e in (True, False))
    assert whole - lookup == pytest.approx(152_064 * 3_584 * 2 / 921.85e9 * 1e3, rel=1e-9)
    # still no faster than the spec-sheet bound (which leaves the table unread at every peak)
    # and faster than the prediction, which reads it as the chapter does
    bound = float(evaluate(scenario_with_basis(s, "spec"), [16.0]).decode.step_ms[0])
    assert bound < explorer < float(evaluate(s, [16.0]).decode.step_ms[0])


def test_the_planner_and_the_explorer_solve_the_fast_edges_fixed_costs_alike(
        catalog: Catalog) -> None:
    # Qwen3-8B BF16 on one H100 at 2K, typical vLLM: its reads at the H100's copy ceiling leave
    # the fast edge's fixed costs a share k strictly between 0 and 1 / (1 + high)
    # (`fast_fixed_costs`). The Planner solves k on the option it bands (`band_edges` from
    # `gpu_band`), the Explorer on its scenario (`typical_band_scenarios`): the same costs, and
    # the same one-sequence step, the planned one / (1 + high)
    wl = Workload(peak_concurrency=8, context_tokens=2048, output_tokens=256)
    inp = with_typical(PlanInputs(model="qwen3-8b", formats=("bf16",), workload=wl,
                                  gpus=("h100-sxm",), max_gpus=1, kv_dtypes=("fp16",)),
                       typical_efficiency("vllm"))
    o = plan(inp, catalog).options[0]
    _, fast_in = band_edges(inp, None, o, catalog)
    s = scenario_with_basis(make_scenario("qwen3-8b", "h100-sxm", catalog=catalog,
                                          weights="bf16", context_tokens=2048), "typical:vllm")
    fast_s, _ = typical_band_scenarios(s, "vllm")
    high = (typical_efficiency("vllm").step_error or (0.0, 0.0))[1]
    k = fast_s.layer_overhead_ms / s.layer_overhead_ms
    assert 0.0 < k < 1.0 / (1.0 + high) - 0.05
    for name in FIXED_STEP_KNOBS:
        assert getattr(fast_in, name) == pytest.approx(getattr(fast_s, name), rel=1e-9), name
    one = float(evaluate(s, [1.0]).decode.step_ms[0])
    assert float(evaluate(fast_s, [1.0]).decode.step_ms[0]) == pytest.approx(
        one / (1.0 + high), rel=1e-9)
    # without the option the Planner's edge keeps the knobs' own scaling: the planned costs
    # over 1 + high, the band the fast edge did not reach (what the scorecard used to score)
    _, unsolved = band_edges(inp, None)
    assert unsolved.layer_overhead_ms == pytest.approx(s.layer_overhead_ms / (1.0 + high))
