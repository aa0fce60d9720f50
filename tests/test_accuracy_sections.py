"""docs/accuracy.md says what `capacity validate --out docs/accuracy.md` writes, section by section.

The published rows' table, the speculative-decoding section and the real-engine result have
their own checks (tests/test_validate.py, test_validate_drafts.py, test_realtest_record.py);
these are the other five. Until 2026-12-04 none of them was checked, and the typical basis'
paragraph had kept 'least squares' for knobs solved by least absolute deviations a day
earlier.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from capacity.fit import (
    validate_disagg,
    validate_ep,
    validate_gpu_probe,
    validate_open_loop,
    validate_typical,
)
from capacity.fit.validate_report import between_markers

ACCURACY = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"

SECTIONS: list[tuple[ModuleType, Callable[[], Any]]] = [
    (validate_typical, validate_typical.typical_scorecard),
    (validate_open_loop, validate_open_loop.open_loop_scorecard),
    (validate_disagg, validate_disagg.disagg_scorecard),
    (validate_ep, validate_ep.ep_scorecard),
    (validate_gpu_probe, validate_gpu_probe.gpu_probe_scorecard),
]


@pytest.mark.slow  # each section's whole scorecard: 0.1-3.5 s
@pytest.mark.parametrize(("module", "card"), SECTIONS, ids=lambda x: getattr(x, "__name__", ""))
def test_committed_section_is_current(module: ModuleType, card: Callable[[], Any]) -> None:
    committed = between_markers(ACCURACY.read_text(encoding="utf-8"), module.BEGIN, module.END)
    assert committed, f"docs/accuracy.md has no {module.BEGIN} part"
    assert committed == module.markdown(card()).rstrip("\n"), (
        f"docs/accuracy.md's {module.BEGIN} section is not current: run "
        "`capacity validate --out docs/accuracy.md`")
