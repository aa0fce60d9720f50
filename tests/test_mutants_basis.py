"""Tests written to kill mutmut survivors in capacity/model/basis.py (issue 28): which basis a
set of knobs is (exact values, the 1e-12 tolerance on floats, None where a float is expected)
and the one-string form of each basis. The expected kinds follow the module's rules by hand."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from capacity.model.basis import (
    CHAPTER_KNOBS,
    KNOB_FIELDS,
    SPEC_KNOBS,
    BasisKind,
    basis_string,
    kind_of_knobs,
    knobs_of,
)


def _chapter(**over: Any) -> dict[str, Any]:
    return {**CHAPTER_KNOBS, **over}


def test_knobs_of_reads_exactly_the_basis_fields() -> None:
    obj = SimpleNamespace(**CHAPTER_KNOBS, model="qwen", replicas=3)
    got = knobs_of(obj)
    assert got == dict(CHAPTER_KNOBS)
    assert list(got) == list(KNOB_FIELDS)
    assert kind_of_knobs(got) is BasisKind.CHAPTER


def test_exact_knobs_are_the_constant_bases() -> None:
    assert kind_of_knobs(CHAPTER_KNOBS) is BasisKind.CHAPTER
    assert kind_of_knobs(SPEC_KNOBS) is BasisKind.SPEC_SHEET
    assert kind_of_knobs(CHAPTER_KNOBS, calibration=None) is BasisKind.CHAPTER
    assert kind_of_knobs(SPEC_KNOBS, calibration="", typical="") is BasisKind.SPEC_SHEET


def test_a_named_calibration_or_engine_wins() -> None:
    assert kind_of_knobs(CHAPTER_KNOBS, calibration="my-cal") is BasisKind.CALIBRATED
    assert kind_of_knobs(SPEC_KNOBS, typical="vllm") is BasisKind.TYPICAL
    # both named: the calibration first
    assert kind_of_knobs(CHAPTER_KNOBS, calibration="my-cal",
                         typical="vllm") is BasisKind.CALIBRATED


def test_float_knobs_within_1e_12_still_match() -> None:
    # |1.0000000000005 - 1.0| = 5e-13 <= 1e-12: still the chapter
    assert kind_of_knobs(_chapter(eff=1.0 + 5e-13)) is BasisKind.CHAPTER
    # |1e-12 - 0.0| = 1e-12 exactly: the bound is inclusive
    assert kind_of_knobs(_chapter(step_overhead_ms=1e-12)) is BasisKind.CHAPTER
    # an int equal to the float matches too (1 == 1.0)
    assert kind_of_knobs(_chapter(eff=1)) is BasisKind.CHAPTER


@pytest.mark.parametrize("over", [
    {"eff": 1.0 + 1e-9},            # 1e-9 off: beyond the tolerance
    {"eff": 0.5},
    {"eff": 1.5},
    {"mfu": 0.30001},
    {"step_overhead_ms": 2e-12},
    {"mfu": None},                  # None where the chapter has a float
    {"eta_kv": 0.5},                # a float where the chapter has None
    {"attn_mfu": 0.4},
    {"step_method": "operator"},
])
def test_other_knobs_are_entered(over: dict[str, Any]) -> None:
    assert kind_of_knobs(_chapter(**over)) is BasisKind.ENTERED


def test_spec_sheet_off_by_one_knob_is_entered() -> None:
    assert kind_of_knobs({**SPEC_KNOBS, "mfu": 0.999}) is BasisKind.ENTERED
    assert kind_of_knobs({**SPEC_KNOBS, "step_method": "chapter"}) is BasisKind.ENTERED


def test_basis_strings() -> None:
    assert basis_string(BasisKind.SPEC_SHEET) == "spec"
    assert basis_string(BasisKind.SPEC_SHEET, "ignored") == "spec"
    assert basis_string(BasisKind.TYPICAL, "vllm") == "typical:vllm"
    assert basis_string(BasisKind.TYPICAL) == "typical:"
    assert basis_string(BasisKind.CALIBRATED, "my-cal") == "my-cal"
    assert basis_string(BasisKind.CALIBRATED) == ""
    assert basis_string(BasisKind.CHAPTER) == ""
    assert basis_string(BasisKind.CHAPTER, "x") == ""
    assert basis_string(BasisKind.ENTERED, "x") == ""
