"""The MoE expert GEMM share (docs/method.md, "MoE expert GEMMs"): the factor by hand, the
typical basis resolving its knobs with it on every surface, the spec sheet untouched, and the
share data/engines.toml records re-derived from the saturated runs it was solved on."""

from __future__ import annotations

import pytest

from capacity.catalog.loader import Catalog
from capacity.errors import CatalogError, InputError
from capacity.fit import expert_share as es
from capacity.fit.open_loop_rows import load_rows
from capacity.fit.planning import (
    EXPERT_SHARE,
    engine_knobs,
    on_typical,
    scenario_with_basis,
    typical_band_scenarios,
    with_basis,
)
from capacity.fit.typical import parse_engines, typical_efficiency
from capacity.fit.validate_bursts import held_out_share
from capacity.model.moe import Routing, expert_flop_share, expert_gemm_factor
from capacity.model.prefill import step_mfu
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs


def test_the_expert_share_of_the_arithmetic_by_hand(catalog: Catalog) -> None:
    m = catalog.variant("gpt-oss-120b").model
    # routed experts X = (P - A) / (1 - k/E); active ones X k / E over the active parameters A
    x = (m.params_total_b - m.params_active_b) / (1 - 4 / 128)
    assert expert_flop_share(m) == pytest.approx(x * 4 / 128 / m.params_active_b)
    assert expert_flop_share(m) == pytest.approx(0.707, abs=1e-3)
    assert expert_flop_share(catalog.variant("qwen3-235b-a22b").model) == pytest.approx(
        0.643, abs=1e-3)
    assert expert_flop_share(catalog.variant("llama-3.1-8b").model) == 0.0


def test_the_factor_by_hand(catalog: Catalog) -> None:
    m = catalog.variant("gpt-oss-120b").model
    g = expert_flop_share(m)
    assert expert_gemm_factor(m, 0.5) == pytest.approx((1 - g) + g / 0.5)
    assert expert_gemm_factor(m, 0.5) == pytest.approx(1.707, abs=1e-3)
    assert expert_gemm_factor(m, 1.0) == 1.0
    assert expert_gemm_factor(catalog.variant("llama-3.1-8b").model, 0.3) == 1.0
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(InputError, match="expert GEMM share"):
            expert_gemm_factor(m, bad)


def test_the_typical_basis_resolves_the_plateau_and_m_half_with_it(catalog: Catalog) -> None:
    """MFU and m_half over F, eff, eta_bw and the rest as before; a dense model untouched."""
    base = make_scenario("gpt-oss-120b", "h100-sxm", catalog=catalog, weights="mxfp4")
    typ = typical_efficiency("vllm")
    at_one = on_typical(base, {**typ.typical, EXPERT_SHARE: 1.0})
    s = scenario_with_basis(base, "typical:vllm")
    f = expert_gemm_factor(base.model, typ.expert_gemm_share)
    assert typ.expert_gemm_share < 1
    assert s.expert_gemm_share == typ.expert_gemm_share
    assert s.mfu == pytest.approx(at_one.mfu / f)
    assert s.mfu_half_tokens == pytest.approx(at_one.mfu_half_tokens / f)
    assert s.eff == pytest.approx(at_one.eff / f)   # the decode GEMMs' arithmetic too
    assert (s.eta_bw, s.layer_overhead_ms) == (at_one.eta_bw, at_one.layer_overhead_ms)
    dense = make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog)
    d = scenario_with_basis(dense, "typical:vllm")
    assert (d.mfu, d.mfu_half_tokens) == (on_typical(dense, typ.typical).mfu,
                                          typ.typical["mfu_half_tokens"])
    # the spec sheet and the chapter keep every GEMM at their own efficiency: the bound holds
    for text in ("spec", "chapter"):
        t = scenario_with_basis(base, text)
        assert t.expert_gemm_share == 1.0 and t.mfu in (1.0, 0.3)


def test_the_weight_read_side_of_the_curve_does_not_move(catalog: Catalog) -> None:
    """The experts' arithmetic is slower, their read is not: a pass far below the ridge runs
    as before, one far above it 1 / F as fast (step_mfu at plateau P / F, m_half / F)."""
    m = catalog.variant("gpt-oss-120b").model
    r = Routing(expert_fraction=0.0)   # the curve alone
    f = expert_gemm_factor(m, 0.3)
    before = step_mfu([1.0, 1e7], mfu=0.6, half_tokens=262.0, routing=r)
    after = step_mfu([1.0, 1e7], mfu=0.6 / f, half_tokens=262.0 / f, routing=r)
    assert after[0] / before[0] == pytest.approx(1.0, rel=1e-4)
    assert after[1] / before[1] == pytest.approx(1 / f, rel=1e-6)


def test_the_planner_and_the_explorer_resolve_the_same_knobs(catalog: Catalog) -> None:
    """One computation: the Planner's option knobs equal the Explorer's Scenario's on an MoE."""
    inp = with_basis(PlanInputs(model="gpt-oss-120b", workload=Workload(daily_active_users=500)),
                     "typical:vllm")
    assert inp.expert_gemm_share == typical_efficiency("vllm").expert_gemm_share
    s = scenario_with_basis(make_scenario("gpt-oss-120b", "h100-sxm", catalog=catalog,
                                          weights="mxfp4"), "typical:vllm")
    assert inp.option_mfu(catalog, "h100-sxm", "mxfp4") == pytest.approx(s.mfu)
    assert inp.option_eff(catalog, "h100-sxm", "mxfp4") == pytest.approx(s.eff)
    assert inp.option_mfu_half(catalog) == pytest.approx(s.mfu_half_tokens)
    chapter = with_basis(inp, "chapter")
    assert chapter.expert_gemm_share == 1.0
    assert chapter.option_mfu(catalog, "h100-sxm", "mxfp4") == chapter.mfu


def test_the_basis_line_names_the_share(catalog: Catalog) -> None:
    """The Explorer's basis line (a Scenario: with its factor), the quote's (planner inputs of
    an MoE model), and nothing for a dense model."""
    from capacity.report.bases import knobs_text

    s = scenario_with_basis(make_scenario("gpt-oss-120b", "h100-sxm", catalog=catalog,
                                          weights="mxfp4"), "typical:vllm")
    share = typical_efficiency("vllm").expert_gemm_share
    f = expert_gemm_factor(s.model, share)
    assert (f", its routed-expert GEMMs at {share:.3g} of the dense GEMMs' efficiency (the "
            f"prefill plateau, its ridge and the decode compute efficiency / {f:.3g} for this "
            "model)") in knobs_text(s, "en")
    assert "路由专家的矩阵乘" in knobs_text(s, "zh")
    inp = with_basis(PlanInputs(model="gpt-oss-120b", workload=Workload(daily_active_users=500)),
                     "typical:vllm")
    assert f"an MoE's routed-expert GEMMs at {share:.3g}" in knobs_text(inp, "en", moe=True)
    dense = scenario_with_basis(make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog),
                                "typical:vllm")
    assert "routed-expert" not in knobs_text(dense, "en")
    assert "routed-expert" not in knobs_text(inp, "en", moe=False)


def test_the_band_edges_keep_the_factor(catalog: Catalog) -> None:
    """The Explorer's band is taken in the file's units and put back with the same factor: the
    planned plateau lies between its edges."""
    s = scenario_with_basis(make_scenario("gpt-oss-120b", "h100-sxm", catalog=catalog,
                                          weights="mxfp4"), "typical:vllm")
    fast, slow = typical_band_scenarios(s, "vllm")
    assert slow.mfu <= s.mfu <= fast.mfu
    assert fast.mfu < 0.5   # not the dense plateau (0.567 on an H100 in bf16)


def test_the_engines_file_checks_the_share() -> None:
    ok = '''[e]
name = "E"
source = "s"
as_of = "2026-12"
'''
    knobs = "".join(f"[e.{k}]\ntypical = 0.5\nlow = 0.5\nhigh = 0.5\n"
                    for k in ("eta_bw", "eff", "mfu", "step_overhead_ms", "prefill_overhead_ms",
                              "draft_overhead_ms", "verify_overhead_ms"))
    got = parse_engines(ok + knobs)["e"]
    assert (got.expert_gemm_share, got.expert_gemm_held_out) == (1.0, {})
    got = parse_engines(ok + knobs + '[e.expert_gemm_share]\ntypical = 0.3\n'
                        'held_out = { "m" = 0.4 }\n')["e"]
    assert got.expert_share_for("m") == 0.4 and got.expert_share_for("x") == 0.3
    assert engine_knobs(got, "m")[EXPERT_SHARE] == 0.4
    for bad in ("typical = 0.0", "typical = 1.5", 'typical = 0.3\nheld_out = { "m" = 2 }'):
        with pytest.raises(CatalogError, match="expert_gemm_share"):
            parse_engines(ok + knobs + f"[e.expert_gemm_share]\n{bad}\n")


def test_the_saturated_runs_are_scored_with_the_share_held_out_of_their_model() -> None:
    typ = typical_efficiency("vllm")
    rows = [r for r in load_rows(bursts=True) if r.model == "gpt-oss-20b"]
    assert held_out_share(rows[0], "typical") == typ.expert_gemm_held_out["gpt-oss-20b"]
    assert held_out_share(rows[0], "spec") is None


def test_derive_finds_where_the_median_error_is_zero(catalog: Catalog) -> None:
    """On three runs: the share puts their median log error at 0 (within the solver's step),
    and a lower share predicts them slower."""
    runs = [r for r in es.moe_runs(catalog=catalog) if r.model == "qwen3-235b-a22b"][:3]
    share = es.derive(runs, catalog)
    assert 0.05 < share < 1
    import statistics

    at = statistics.median(es.log_errors(runs, share, catalog))
    assert abs(at) < 0.01
    assert statistics.median(es.log_errors(runs, share / 2, catalog)) < at
    with pytest.raises(ValueError, match="no MoE runs"):
        es.derive([], catalog)


@pytest.mark.slow
def test_the_engines_file_records_the_derived_share(catalog: Catalog) -> None:
    """data/engines.toml's share is the one solved on every MoE run of bursts.csv, and its held
    out share of DeepSeek-R1 the one solved without that model's runs (the others are derived
    the same way: `python -m capacity.fit.expert_share`)."""
    typ = typical_efficiency("vllm")
    runs = es.moe_runs(catalog=catalog)
    assert len(runs) == 83
    assert es.derive(runs, catalog) == pytest.approx(typ.expert_gemm_share, abs=0.002)
    held = es.derive([r for r in runs if r.model != "deepseek-r1"], catalog)
    assert held == pytest.approx(typ.expert_gemm_held_out["deepseek-r1"], abs=0.002)
    assert typical_efficiency("sglang").expert_gemm_share == typ.expert_gemm_share
    assert set(typ.expert_gemm_held_out) == {r.model for r in runs}


def test_the_planners_moe_option_is_the_explorers_scenario(catalog: Catalog) -> None:
    """One surface, one number: an MoE option the Planner prices on the typical basis runs the
    Explorer's scenario of it (the same resolved plateau, eff and m_half), and its prefill is
    that scenario's."""
    from capacity.plan.detail import option_scenario
    from capacity.plan.search import plan

    wl = Workload(peak_concurrency=4.0, context_tokens=4096, prompt_tokens=2000,
                  output_tokens=200, headroom=0.0)
    inp = with_basis(PlanInputs(model="gpt-oss-120b", workload=wl, gpus=("h100-sxm",),
                                formats=("mxfp4",), allow_tp=False, max_gpus=1), "typical:vllm")
    o = next(x for x in plan(inp, catalog, keep_all=True).all_options if x.weights == "mxfp4")
    s = option_scenario(inp, o, catalog)
    explorer = scenario_with_basis(make_scenario("gpt-oss-120b", "h100-sxm", catalog=catalog,
                                                 weights="mxfp4"), "typical:vllm")
    assert (s.mfu, s.eff, s.mfu_half_tokens, s.expert_gemm_share) == pytest.approx(
        (explorer.mfu, explorer.eff, explorer.mfu_half_tokens, explorer.expert_gemm_share))
    assert s.expert_gemm_share < 1
    pre = float(evaluate(s, [1]).prefill_s) * 1e3
    assert o.prefill_ms == pytest.approx(pre, rel=1e-6)


def test_a_calibrations_eff_prior_is_the_typical_basis_eff(catalog: Catalog) -> None:
    """Where a fit's points do not pin eff, it settles at what the typical basis predicts
    with: for an MoE model, over its expert GEMM factor too."""
    from capacity.fit.ceilings import typical_eff

    base = make_scenario("gpt-oss-120b", "h100-sxm", catalog=catalog, weights="mxfp4")
    assert typical_eff(base) == pytest.approx(scenario_with_basis(base, "typical:vllm").eff)
    dense = make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog)
    assert typical_eff(dense) == pytest.approx(scenario_with_basis(dense, "typical:vllm").eff)
