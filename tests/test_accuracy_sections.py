"""docs/accuracy.md says what `capacity validate --out docs/accuracy.md` writes, section by section.

The published rows' table, the speculative-decoding section and the real-engine result have
their own checks (tests/test_validate.py, test_validate_drafts.py, test_realtest_record.py);
these are the other six. Until 2026-12-04 none of them was checked, and the typical basis'
paragraph had kept 'least squares' for knobs solved by least absolute deviations a day
earlier.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from capacity.fit import (
    validate_bursts,
    validate_disagg,
    validate_ep,
    validate_gpu_probe,
    validate_mlperf,
    validate_open_loop,
    validate_typical,
)
from capacity.fit.validate_report import between_markers
from tests.shipped import shipped

ACCURACY = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"

SECTIONS: list[tuple[ModuleType, str]] = [
    (validate_typical, "typical"),
    (validate_open_loop, "open_loop"),
    (validate_disagg, "disagg"),
    (validate_ep, "ep"),
    (validate_gpu_probe, "gpu_probe"),
    (validate_mlperf, "mlperf"),
    (validate_bursts, "bursts"),
]
"""Each module and its section's name in `capacity validate` (cli/validate.py's SECTIONS)."""


@pytest.mark.slow  # each section's whole scorecard, once per test process: 0.1-10 s
@pytest.mark.parametrize(("module", "name"), SECTIONS,
                         ids=[m.__name__.rsplit(".", 1)[-1] for m, _ in SECTIONS])
def test_committed_section_is_current(module: ModuleType, name: str) -> None:
    committed = between_markers(ACCURACY.read_text(encoding="utf-8"), module.BEGIN, module.END)
    assert committed, f"docs/accuracy.md has no {module.BEGIN} part"
    # the disaggregated section also states issue 27's target over the wide-EP rows with it
    extra = (shipped("ep").errors("held_out"),) if name == "disagg" else ()
    assert committed == module.markdown(shipped(name), *extra).rstrip("\n"), (
        f"docs/accuracy.md's {module.BEGIN} section is not current: run "
        "`capacity validate --out docs/accuracy.md`")


@pytest.mark.slow
def test_committed_trtllm_section_is_current() -> None:
    """TensorRT-LLM's performance overview: its own markers, after the MLPerf section."""
    text = ACCURACY.read_text(encoding="utf-8")
    committed = validate_mlperf.trtllm_section_of(text)
    assert committed and text.index(validate_mlperf.END) < text.index(validate_mlperf.TRTLLM_BEGIN)
    assert committed == validate_mlperf.trtllm_markdown(shipped("trtllm")).rstrip("\n"), (
        "docs/accuracy.md's TensorRT-LLM section is not current: run "
        "`capacity validate --out docs/accuracy.md`")
