"""Issue 28 without a browser: the calibration preset's runs (`per_sweep`) measure exactly the
plan's cells within the page's limits, and the job registry lists running and recent runs to
every tab within a user's scope."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from capacity.access import AccessDenied
from capacity.bench.form import PAGE_LIMITS, MeasureForm, per_prompt, per_sweep
from capacity.bench.job import JobRegistry
from capacity.errors import InputError
from capacity.fit.sweep import LEVELS


def test_the_page_runs_every_level_a_calibration_plan_asks_for() -> None:
    # the plan's grid reaches 512 (capacity.fit.sweep.LEVELS); the page refused it at 256
    assert max(LEVELS) == 512 == PAGE_LIMITS.concurrency
    MeasureForm(base_url="http://127.0.0.1:8000/v1", concurrency=(1, 32, 64, 512),
                requests=1536, prompt_chars=1024).validate()
    with pytest.raises(InputError, match="concurrency 513 is above the limit of 512"):
        MeasureForm(base_url="http://127.0.0.1:8000/v1", concurrency=(513,)).validate()


def test_per_sweep_gives_each_prompt_length_its_own_levels() -> None:
    base = MeasureForm(base_url="http://127.0.0.1:8000/v1", concurrency=(1, 8, 32, 64, 512),
                       label="calibration")
    forms = per_sweep(base, [(1024, (1, 32, 64, 512)), (4096, (1,)), (131072, (1, 8))])
    assert [(f.label, f.prompt_chars, f.concurrency) for f in forms] == [
        ("calibration-p1024", 1024, (1, 32, 64, 512)),
        ("calibration-p4096", 4096, (1,)),
        ("calibration-p131072", 131072, (1, 8))]
    assert sum(len(f.concurrency) for f in forms) == 7  # 4 + 1 + 2 cells, not 3 x 5 = 15
    # one sweep keeps the label as typed, as one prompt length does (`per_prompt`)
    (one,) = per_sweep(base, [(2000, (1, 4))])
    assert (one.label, one.prompt_chars, one.concurrency) == ("calibration", 2000, (1, 4))
    assert per_prompt(base, [2000])[0].label == "calibration"
    with pytest.raises(InputError, match="at least one prompt length"):
        per_sweep(base, [])
    with pytest.raises(InputError, match="9 prompt lengths is more than the limit of 8"):
        per_sweep(base, [(1000 + i, (1,)) for i in range(9)])


def test_running_and_recent_jobs_are_listed_to_every_tab_within_scope(
        fake_jobs: tuple[list[Any], Callable[[], Any]]) -> None:
    reg = JobRegistry(max_running=4, keep_ended=2)
    start = fake_jobs[1]
    a1, b1, a2 = reg.start("ann", start), reg.start("ben", start), reg.start("ann", start)
    # running: oldest first, each user sees their own, an admin (scope None) everyone's
    assert [o.job for o in reg.visible("ann")] == [a1, a2]
    assert [o.job for o in reg.visible(None)] == [a1, b1, a2]
    assert all(o.ended_unix_s is None for o in reg.visible(None))
    a1.running = False  # ended: still listed, after the running ones, with when it ended
    assert [o.job for o in reg.visible("ann")] == [a2, a1]
    (ended,) = [o for o in reg.visible("ann") if o.job is a1]
    assert ended.ended_unix_s is not None
    assert [o.job for o in reg.running("ann")] == [a2]  # not running, so not counted
    assert [o.job for o in reg.visible("ben")] == [b1]  # ann's never shows to ben
    (ben,) = reg.visible("ben")
    with pytest.raises(AccessDenied):
        reg.stop(ben.number, scope="ann")
    reg.stop(ben.number, scope="ben")
    # ended ones newest first, at most keep_ended (2) kept: a1 ended first, so it goes
    a2.running = False
    assert [o.job for o in reg.visible(None)] == [a2, b1]
    reg.stop(ended.number, scope="ann")  # an ended (forgotten) job: nothing to stop
