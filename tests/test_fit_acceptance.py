"""Calibration of a run with speculative decoding: tau from TPOT (F12 inverted), the server's
measured tau beside it, saved with the calibration and given back to the Scenario."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from capacity.cli.main import main
from capacity.errors import InputError
from capacity.fit.acceptance import (
    MAX_META_BYTES,
    drafted_calibration,
    fit_acceptance,
    label_acceptance,
    measured_acceptance,
    pooled_acceptance,
)
from capacity.fit.calibration import Calibration, apply
from capacity.fit.calibration_store import load, save
from capacity.fit.measured import MeasuredPoint
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.speculative import make_draft
from capacity.sim.scheduler import SimConfig
from capacity.sim.virtual import Workload, run_virtual

TAU = 2.8
BASE = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=2048, eff=0.3)
DRAFT = make_draft(BASE.variant, "eagle", 3, acceptance_length=TAU)


def test_pooled_acceptance_by_hand() -> None:
    # steps 10 and 20 ms, TPOT 4 and 8 ms: 2.5 tokens per step at both, no spread
    tau, sd = pooled_acceptance([10.0, 20.0], [4.0, 8.0])
    assert tau == pytest.approx(2.5) and sd == pytest.approx(0.0, abs=1e-12)
    # one level: e / m, no uncertainty
    tau, sd = pooled_acceptance([9.0], [3.0])
    assert tau == pytest.approx(3.0) and math.isnan(sd)
    # a = 2 and 3: u = 5 / 13, tau = 13 / 5 = 2.6; residuals u a - 1 = -3/13, 2/13
    tau, sd = pooled_acceptance([2.0, 3.0], [1.0, 1.0])
    assert tau == pytest.approx(2.6)
    sd_u = math.sqrt(((3 / 13) ** 2 + (2 / 13) ** 2) / 1 / 13)
    assert sd == pytest.approx(2.6 ** 2 * sd_u)
    with pytest.raises(InputError):
        pooled_acceptance([], [])
    with pytest.raises(InputError):
        pooled_acceptance([1.0], [0.0])


def _points(levels: tuple[int, ...] = (1, 4, 16)) -> list[MeasuredPoint]:
    """A drafted sweep on the simulated engine (virtual clock: deterministic): each level's
    median TPOT, as a bench summary gives it."""
    scenario = BASE.with_(draft=DRAFT)
    out = []
    for c in levels:
        truth = run_virtual(scenario, Workload(prompt_tokens=32, output_tokens=256,
                                               requests=4 * c, clients=c),
                            SimConfig(engine="vllm", seed=2))
        out.append(MeasuredPoint(concurrency=c, context_tokens=288, prompt_tokens=32,
                                 output_tokens=256,
                                 tpot_ms=float(np.median([t["tpot_ms"] for t in truth])),
                                 source=f"c{c}"))
    return out


def test_tau_is_recovered_from_the_simulators_tpot() -> None:
    pts = _points()
    fit = fit_acceptance(pts, BASE, "eagle", 3)
    assert fit.fitted == pytest.approx(TAU, rel=0.03)
    assert 0 < fit.fitted_std < 0.1 and not fit.clipped
    assert all(h is not None and h == pytest.approx(TAU, rel=0.05) for h in fit.held_out)
    # the engine step is evaluate's, with the draft, at each point's decode context
    ev = evaluate(BASE.with_(draft=DRAFT), [4.0], [32 + 128.0]).decode
    assert fit.engine_step_ms[1] == pytest.approx(float(ev.engine_step_ms[0]))
    assert fit.measured is None and fit.acceptance_length == fit.fitted
    # the wrong knobs show: at 80% of the bandwidth the (bandwidth-bound) steps are longer
    off = fit_acceptance(pts, BASE.with_(eta_bw=0.8), "eagle", 3)
    assert off.fitted > 1.1 * TAU
    # impossible: clipped to 1..k+1
    slow = [MeasuredPoint(concurrency=1, context_tokens=288, prompt_tokens=32,
                          output_tokens=256, tpot_ms=1e4)]
    clipped = fit_acceptance(slow, BASE, "eagle", 3)
    assert clipped.clipped and clipped.fitted == 1.0


def test_a_calibration_with_a_draft_is_saved_and_gives_the_scenario_its_tau(
        tmp_path: Path) -> None:
    pts = _points(levels=(1, 8))
    cal, fit = drafted_calibration(pts, BASE, "eagle", 3, measured=2.75, name="spec",
                                   today="2026-12-01")
    assert cal.draft == "eagle:3" and cal.acceptance_length == 2.75  # the server's wins
    assert cal.acceptance_fitted == pytest.approx(fit.fitted)
    assert cal.acceptance_measured == 2.75 and cal.acceptance_std is not None
    assert cal.eta_bw is None  # no knob fitted from a drafted run
    assert [p.fitted_ms for p in cal.points] == pytest.approx(
        [e / 2.75 for e in fit.engine_step_ms])
    path = save(cal, tmp_path / "spec.toml")
    assert "[draft]" in path.read_text()
    back = load(path)
    assert (back.draft, back.acceptance_length, back.acceptance_measured) == \
        ("eagle:3", 2.75, 2.75)
    assert back.acceptance_fitted == pytest.approx(fit.fitted)
    s = apply(back, BASE)
    assert s.draft is not None and s.draft.key == "eagle:3"
    assert s.draft.acceptance_length == 2.75
    # a scenario with the same draft gets the calibrated tau; another draft keeps its own
    pub = BASE.with_(draft=make_draft(BASE.variant, "eagle", 3))
    assert apply(back, pub).draft.acceptance_length == 2.75  # type: ignore[union-attr]
    other = BASE.with_(draft=make_draft(BASE.variant, "ngram", 4, acceptance_length=1.5))
    kept = apply(back, other)
    assert kept.draft is not None and kept.draft.key == "ngram:4"
    assert any("keeps its own" in w for w in kept.warnings)
    # another model: not applied
    qwen = apply(back, make_scenario("qwen3.5-9b-awq", "h100-sxm"))
    assert qwen.draft is None and any("not applied" in w for w in qwen.warnings)
    # a hand-edited file with an impossible tau is refused, naming the file
    bad = path.read_text().replace("acceptance_length = 2.75", "acceptance_length = 9.0")
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(InputError, match=r"bad.toml.*outside"):
        load(tmp_path / "bad.toml")


def test_the_measured_acceptance_comes_from_meta_json_and_is_not_trusted_blindly(
        tmp_path: Path) -> None:
    assert measured_acceptance({"server_metrics": {"spec_acceptance_length": 2.9}}) == 2.9
    bad: dict[str, Any]
    for bad in ({}, {"server_metrics": []}, {"server_metrics": {"spec_acceptance_length": "3"}},
                {"server_metrics": {"spec_acceptance_length": 0.5}},
                {"server_metrics": {"spec_acceptance_length": 1e9}},
                {"server_metrics": {"spec_acceptance_length": True}}):
        assert measured_acceptance(bad) is None, bad
    runs = tmp_path / "spec"
    for i, text in enumerate([json.dumps({"server_metrics": {"spec_acceptance_length": 2.8}}),
                              json.dumps({"server_metrics": {"spec_acceptance_length": 3.0}}),
                              "{not json", json.dumps([1, 2]),
                              " " * (MAX_META_BYTES + 1)]):
        (runs / f"r{i}").mkdir(parents=True)
        (runs / f"r{i}" / "meta.json").write_text(text)
    assert label_acceptance("spec", tmp_path) == pytest.approx(2.9)
    assert label_acceptance("none", tmp_path) is None


def test_calibrate_cli_fits_tau_with_its_uncertainty(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    pts = _points(levels=(1, 8))
    csv = tmp_path / "drafted.csv"
    csv.write_text("concurrency,context_tokens,prompt_tokens,output_tokens,tpot_ms\n" + "".join(
        f"{p.concurrency:g},{p.context_tokens},32,256,{p.tpot_ms}\n" for p in pts))
    args = ["calibrate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--ctx", "2048",
            "--eff", "0.3", "--step-method", "chapter", "--measured", str(csv),
            "--draft", "eagle:3"]
    assert main([*args, "--save", str(tmp_path / "d.toml")]) == 0
    out = capsys.readouterr().out
    assert "draft eagle:3: acceptance length fitted from TPOT" in out and "+/-" in out
    assert "measured by the server (/metrics): unknown" in out
    cal = load(tmp_path / "d.toml")
    assert cal.acceptance_length == pytest.approx(TAU, rel=0.03)
    assert main([*args, "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["acceptance"]["fitted"] == pytest.approx(TAU, rel=0.03)
    assert doc["draft"]["key"] == "eagle:3"
    # --calibration gives the knobs of the same setup without the draft
    knobs = tmp_path / "knobs.toml"
    save(apply_knobs_calibration(), knobs)
    assert main([*args, "--calibration", str(knobs)]) == 0
    assert "calibration 'plain''s" in capsys.readouterr().out
    assert main(["calibrate", "--measured", str(csv), "--calibration", str(knobs)]) != 0
    assert "add --draft KIND:K" in capsys.readouterr().err


def apply_knobs_calibration() -> Calibration:
    """A calibration of the setup without the draft: the chapter's step at eff 0.3."""
    return Calibration(name="plain", model="llama-3.1-8b-bf16", gpu="h100-sxm", eff=0.3,
                       eta_bw=1.0, step_overhead_ms=0.0, step_method="chapter")
