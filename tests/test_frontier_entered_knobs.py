"""Efficiencies entered by hand (no named basis: `capacity size --mfu 0.15`, the Explorer's
sliders) reach the buyer's chart: the quote's frontier section and the pages' charts were drawn
on the chapter's knobs (eff 1, MFU 0.3) whatever was entered, so the quote's 'Assumptions' said
MFU 0.15 while its frontier tables used 0.3, and the Explorer's red cross (on the entered
knobs) lay off the fronts it is drawn against."""

from __future__ import annotations

from dataclasses import replace

import pytest

from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.fit.frontier import FrontierInputs, frontier
from capacity.model.basis import BasisKind
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs
from capacity.report.quote_frontier import plan_frontier_inputs


def _ttft_at_c1(inp: FrontierInputs, catalog: Catalog) -> float:
    pts = frontier(inp, catalog).points
    return min(float(pts.ttft_ms[i]) for i in range(len(pts)) if pts.concurrency[i] == 1)


def test_entered_knobs_reach_the_frontier(catalog: Catalog) -> None:
    base = PlanInputs(model="qwen3.5-9b-awq", gpus=("rtx-4090",), kv_dtypes=("fp16",),
                      workload=Workload(rate_per_s=0.5, context_tokens=8192,
                                        output_tokens=256))
    entered = replace(base, mfu=0.15)
    assert base.basis == BasisKind.CHAPTER and entered.basis == BasisKind.ENTERED
    chapter_inp, entered_inp = plan_frontier_inputs(base, catalog), plan_frontier_inputs(
        entered, catalog)
    assert chapter_inp.knobs == ()
    assert dict(entered_inp.knobs)["mfu"] == pytest.approx(0.15)
    # half the prefill MFU: the prefill takes longer (up to twice; the first step is decode)
    ratio = _ttft_at_c1(entered_inp, catalog) / _ttft_at_c1(chapter_inp, catalog)
    assert 1.3 < ratio <= 2.0 + 1e-9   # the chapter's knobs whatever was entered: 1.0


def test_knobs_over_a_named_basis_are_refused() -> None:
    with pytest.raises(InputError, match="knobs"):
        FrontierInputs(model="qwen3.5-9b", basis="spec", knobs=(("mfu", 0.2),))
    with pytest.raises(InputError, match="knobs"):
        FrontierInputs(model="qwen3.5-9b", basis="", knobs=(("colour", 1.0),))
