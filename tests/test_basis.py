"""Prediction bases (capacity.model.basis, docs/method.md "Bases"): the spec sheet is the upper
bound on speed of every basis, on every catalog GPU and model, and the planner never sizes a
smaller or cheaper fleet under a slower basis."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.fit.calibration_store import check_name, saved_calibrations
from capacity.fit.planning import check_basis, scenario_with_basis, with_basis, with_spec_sheet
from capacity.fit.typical import engines
from capacity.model.basis import CHAPTER_KNOBS, SPEC_KNOBS, BasisKind, kind_of_knobs, knobs_of
from capacity.model.roofline import StepMethod
from capacity.model.scenario import evaluate, make_scenario, valid_tp_sizes
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.units import GB

BATCHES = np.array([1.0, 2.0, 7.0, 32.0, 128.0, 512.0])
CONTEXTS = (512, 8192, 32768)


def _slower_bases() -> list[str]:
    """Every basis that is not the spec sheet: the chapter's, each engine's typical knobs, and
    each saved calibration."""
    return ["", *(f"typical:{k}" for k in engines()), *saved_calibrations()]


def _edges() -> list[dict[str, float]]:
    """Each engine's typical knobs at both ends of its ranges (the uncertainty band's edges)."""
    out = []
    for typ in engines().values():
        for end in (typ.low, typ.high):
            out.append({**CHAPTER_KNOBS, **end})
    return out


def test_the_two_constant_bases_are_what_their_names_say() -> None:
    assert SPEC_KNOBS["mfu"] == 1.0 and SPEC_KNOBS["eff"] == 1.0 and SPEC_KNOBS["eta_bw"] == 1.0
    assert SPEC_KNOBS["step_method"] == StepMethod.BOUND
    assert CHAPTER_KNOBS["mfu"] == 0.3 and CHAPTER_KNOBS["step_method"] == StepMethod.CHAPTER
    s = make_scenario()
    assert kind_of_knobs(knobs_of(s)) == BasisKind.CHAPTER  # the worked example's basis
    assert kind_of_knobs(knobs_of(s.with_(mfu=0.5))) == BasisKind.ENTERED
    assert kind_of_knobs(knobs_of(scenario_with_basis(s, "spec"))) == BasisKind.SPEC_SHEET


def _other_knobs() -> list[dict[str, object]]:
    """The knobs of every slower basis (resolved once), the typical ranges' edges, and the
    chapter's and the operator method at peak (a calibration may use either)."""
    s = make_scenario()
    out = [knobs_of(scenario_with_basis(s, b)) for b in _slower_bases()]
    out += _edges()
    out += [{**SPEC_KNOBS, "step_method": m} for m in ("operator", "chapter")]
    return out


@pytest.mark.slow
def test_no_basis_predicts_a_faster_step_or_prefill_than_the_spec_sheet() -> None:
    """Every catalog GPU x model x weight format, TP 1 and 8, contexts 512-32K, batches 1-512:
    the decode step and the prefill (TTFT of a prompt as long as the context) on the spec
    sheet are never slower than on any other basis."""
    cat = default_catalog()
    others = _other_knobs()
    checked = 0
    for gpu in sorted(cat.gpus):
        for key, model in sorted(cat.models.items()):
            ctx = np.array([c for c in CONTEXTS if c <= model.max_context_tokens], dtype=float)
            for fmt in cat.formats_for(model):
                for tp in [t for t in valid_tp_sizes(model, 8) if t in (1, 8)]:
                    # the scenario's default 8K context, or the model's own if shorter
                    base = make_scenario(key, gpu, catalog=cat, weights=fmt.key, n_gpus=tp,
                                         tp=tp,
                                         context_tokens=min(8192, model.max_context_tokens))
                    grid = (BATCHES[:, None] * base.replicas, ctx[None, :])
                    spec = evaluate(base.with_(**SPEC_KNOBS), *grid)
                    for knobs in others:
                        ev = evaluate(base.with_(**knobs), *grid)
                        where = (key, fmt.key, gpu, tp, knobs["step_method"], knobs["mfu"])
                        assert np.all(spec.decode.step_ms <= ev.decode.step_ms * (1 + 1e-12)), where
                        assert np.all(spec.ttft_s <= ev.ttft_s * (1 + 1e-12)), where
                    checked += 1
    assert checked > 300


def test_the_bound_step_by_hand() -> None:
    """Llama-3.1-8B bf16 on one H100 SXM, one sequence at 1,024 tokens: the untied input
    embedding (128,256 x 4,096 = 0.525 B of 8.03 B parameters) is a lookup, so the bound reads
    W x (1 - 0.525 / 8.03) + KV at 3,350 GB/s."""
    cat = default_catalog()
    s = scenario_with_basis(make_scenario("llama-3.1-8b", "h100-sxm", catalog=cat,
                                          weights="bf16", context_tokens=1024), "spec")
    m = s.model
    share = m.vocab * m.hidden / 1e9 / m.params_total_b
    kv = float(evaluate(s, [1]).kv_request.exact_bytes)
    want_ms = (s.weights_gb * GB * (1 - share) + kv) / (s.bandwidth_gb_s * GB) * 1e3
    assert float(evaluate(s, [1]).decode.step_ms[0]) == pytest.approx(want_ms, rel=1e-12)
    chapter = evaluate(s.with_(**CHAPTER_KNOBS), [1]).decode.step_ms[0]
    assert float(chapter) == pytest.approx((s.weights_gb * GB + kv) / (s.bandwidth_gb_s * GB)
                                           * 1e3, rel=1e-12)


def _inputs(**kw: object) -> PlanInputs:
    base: dict[str, object] = {
        "model": "qwen3.5-9b", "workload": Workload(daily_active_users=2000, context_tokens=8192,
                                                   output_tokens=256),
        "slo": Slo(ttft_ms=2000, tpot_ms=50)}
    base.update(kw)
    return PlanInputs(**base)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("wl", [
    Workload(daily_active_users=2000, context_tokens=8192, output_tokens=256),
    Workload(peak_concurrency=50, context_tokens=4096, prompt_tokens=1024, output_tokens=512),
    Workload(daily_active_users=300, context_tokens=32768, prompt_tokens=16000,
             output_tokens=1024),
])
@pytest.mark.parametrize("engine", ["chapter", "vllm"])
def test_the_planner_never_sizes_a_cheaper_fleet_under_a_slower_basis(wl: Workload,
                                                                      engine: str) -> None:
    inp = _inputs(workload=wl, engine=engine, slo=Slo(ttft_ms=3000, tpot_ms=60))
    spec = plan(with_spec_sheet(inp)).best
    assert spec is not None
    for b in ("", *(f"typical:{k}" for k in engines())):
        other = plan(with_basis(inp, b)).best
        if other is None:
            continue  # nothing feasible on the slower basis: no cheaper fleet either
        assert other.cost_per_month >= spec.cost_per_month - 1e-6, (b, other.label, spec.label)
        assert other.capacity_rate_per_s / other.paid_gpus <= (
            spec.capacity_rate_per_s / spec.paid_gpus * (1 + 1e-9)) or (
            other.gpu != spec.gpu or other.tp != spec.tp), (b, other.label)


def test_basis_strings() -> None:
    assert check_basis("") == "" and check_basis("Chapter") == "" and check_basis("SPEC") == "spec"
    assert check_basis("typical:vllm") == "typical:vllm"
    with pytest.raises(InputError, match="typical"):
        check_basis("typical:nope")
    with pytest.raises(InputError, match="basis"):
        check_basis("../etc/passwd")
    for reserved in ("spec", "chapter", "Spec"):
        with pytest.raises(InputError, match="prediction basis"):
            check_name(reserved)
    assert with_basis(_inputs(mfu=0.5), "").basis == BasisKind.CHAPTER
    assert with_basis(_inputs(), "spec").basis == BasisKind.SPEC_SHEET
    assert with_basis(_inputs(), "spec").basis_string == "spec"
    assert with_basis(_inputs(), "typical:vllm").basis_string == "typical:vllm"
