"""`capacity sim-server --typical ENGINE | --basis | --calibration`: the simulated endpoint runs
on a basis' knobs, as `capacity plan` predicts with them (since 2026-12-07). Without one it runs
the chapter's knobs, whose weights are read at the spec sheet's bandwidth: faster than a real
card copies memory, which a calibration bounded by the copy ceiling cannot fit (the bundled
sample run was re-recorded on `--typical vllm` for that reason)."""

from __future__ import annotations

import argparse

import pytest

from capacity.cli.main import build_parser
from capacity.cli.plan import scenario_from_args, with_basis
from capacity.errors import InputError
from capacity.fit.planning import scenario_with_basis
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.sim.scheduler import SimConfig, Simulator


def _sim_scenario(*argv: str) -> tuple[Scenario, str]:
    args = build_parser().parse_args(["sim-server", *argv])
    return with_basis(args, scenario_from_args(args))


def test_typical_basis_runs_the_plans_knobs() -> None:
    s, basis = _sim_scenario("--typical", "vllm")
    assert basis == "typical:vllm"
    want = scenario_with_basis(make_scenario(), "typical:vllm")
    assert (s.eta_bw, s.eff, s.layer_overhead_ms, s.request_latency_ms) == (
        want.eta_bw, want.eff, want.layer_overhead_ms, want.request_latency_ms)
    assert s.eta_bw < 1.0 and s.layer_overhead_ms > 0.0
    # the endpoint's one-sequence step is the event model's on that basis, slower than the
    # chapter's knobs by the typical basis' read efficiency and per-layer time
    sim = Simulator(s, SimConfig(), clock="virtual")
    chapter = Simulator(make_scenario(), SimConfig(), clock="virtual")
    planned = float(evaluate(s, [1], context_tokens=[500]).decode.step_ms[0])
    assert sim.physics.step_s(1, 500) * 1e3 == pytest.approx(planned, rel=1e-3)
    assert sim.physics.step_s(1, 500) > 1.3 * chapter.physics.step_s(1, 500)


def test_no_basis_is_the_chapter_and_two_are_refused() -> None:
    s, basis = _sim_scenario()
    assert basis == "" and (s.eta_bw, s.eff) == (1.0, 1.0)
    with pytest.raises(InputError, match="give one of --basis, --calibration, --typical"):
        _sim_scenario("--typical", "vllm", "--basis", "spec")
    cal, name = _sim_scenario("--calibration", "rtx-4090-vllm-published",
                              "--model", "mistral-7b-v0.3-bf16")
    assert name == "rtx-4090-vllm-published" and cal.calibration == "rtx-4090-vllm-published"


@pytest.mark.parametrize("argv", [(), ("--typical", "vllm"), ("--basis", "spec"),
                                  ("--calibration", "rtx-4090-vllm-published"),
                                  ("--basis", "rtx-4090-vllm-published"),
                                  ("--basis", "spec", "--step-method", "operator")],
                         ids=["none", "typical", "spec", "calibration", "basis-name", "said"])
def test_step_method_default_is_what_its_help_says(argv: tuple[str, ...]) -> None:
    """--step-method's help (shared by plan and sim-server, docs/cli.md): "Default: the basis'
    method (a saved calibration's own, by --calibration or --basis NAME; 'bound' with --basis
    spec), else chapter"; said on the command line, it wins."""
    from capacity.fit.calibration_store import load

    help_text = next(a.help for a in _subparser("sim-server")._actions
                     if "--step-method" in a.option_strings)
    assert help_text is not None and "Default: the basis' method" in help_text
    s, _ = _sim_scenario("--model", "mistral-7b-v0.3-bf16", *argv)
    want = {(): "chapter", ("--typical", "vllm"): "chapter", ("--basis", "spec"): "bound",
            ("--basis", "spec", "--step-method", "operator"): "operator"}.get(
        argv, load("rtx-4090-vllm-published").step_method or "chapter")
    assert s.step_method == want


def _subparser(name: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]
