"""`capacity size`'s quick path (issue 30): a configuration's failed checks travel as one code
per row, and the CSV output builds only what it prints (tests/test_size_cli.py checks the
outputs themselves)."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.cli.main import main
from capacity.model.workload import Workload
from capacity.plan import search
from capacity.plan.options import PlanInputs, Reason, Slo


def test_failure_codes_by_hand() -> None:
    # rows: (memory, ttft) fail; ttft alone; none; every check
    memory = np.array([True, False, False, True])
    slots = np.array([False, False, False, True])
    ttft = np.array([True, True, False, True])
    tpot = np.array([False, False, False, True])
    thr = np.array([False, False, False, True])
    cost = np.array([False, False, False, True])
    codes = search.failure_codes(memory, slots, ttft, tpot, thr, cost)
    # bit k = check k: 1 + 4 = 5, 4, 0, 2^6 - 1 = 63
    assert codes.tolist() == [5, 4, 0, 63]
    assert search.failures_of(5) == (Reason.MEMORY, Reason.TTFT)
    assert search.failures_of(4) == (Reason.TTFT,)
    assert search.failures_of(0) == ()
    assert search.failures_of(63) == (Reason.MEMORY, Reason.SLOTS, Reason.TTFT, Reason.TPOT,
                                      Reason.THROUGHPUT, Reason.COST)


def test_every_option_lists_its_failures_in_check_order() -> None:
    """The plan's failures per option are the checks in `CHECKS` order, the binding check of a
    rejected option its first; at 4K context and a 1 s TTFT target on two GPU types, some rows
    fail several checks at once."""
    wl = Workload(daily_active_users=2000, context_tokens=4096, output_tokens=256)
    inp = PlanInputs(model="qwen3.5-9b-awq", workload=wl, slo=Slo(ttft_ms=1000, tpot_ms=30),
                     gpus=("rtx-4090", "h100-sxm"), max_gpus=4)
    p = search.plan(inp, keep_all=True)
    order = {r: k for k, r in enumerate(search.CHECKS)}
    multi = 0
    for o in p.all_options:
        assert list(o.failures) == sorted(o.failures, key=order.__getitem__)
        assert len(set(o.failures)) == len(o.failures)
        multi += len(o.failures) > 1
    assert multi > 0
    lean = search.plan(inp)  # rejected rows without their figures: the same failures
    assert [o.label for o in lean.configurations] == [o.label for o in p.configurations]
    assert all(o.failures == () for o in lean.configurations)
    assert lean.rejected
    for r in lean.rejected:
        assert r.closest is not None
        twin = next(o for o in p.all_options if o.label == r.closest.label)
        assert r.closest.failures == twin.failures
        assert r.closest.binding == r.closest.failures[0]


def test_csv_builds_neither_the_alternatives_nor_the_draft_note(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from capacity.cli import size

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("CSV does not print it")

    monkeypatch.setattr(size, "alternatives", refuse)
    monkeypatch.setattr(size, "draft_note", refuse)
    # 500 daily users at 8K: the RTX 3090 family is ruled out (the text lists its alternatives)
    assert main(["size", "--dau", "500", "--format", "csv", "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("rank,option,gpu") and len(out) == 4
