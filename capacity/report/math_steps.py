"""One line of "show the math" (`MathStep`) and how its numbers are written (`formula_number`).

Shared by the chapter's formulas (`capacity.report.explain.show_math`) and speculative
decoding's (`capacity.report.explain_draft`), so both read the same on the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from capacity.model.moe import expert_gemm_factor
from capacity.model.prefill import MFU_CURVE_SHARPNESS, step_mfu

if TYPE_CHECKING:
    from capacity.model.scenario import Scenario


@dataclass(frozen=True, kw_only=True)
class MathStep:
    """One formula with the current numbers substituted: `key` names it (a message key),
    `formula` is symbolic, `substituted` carries the numbers, `value` the result in `unit`."""

    key: str
    formula: str
    substituted: str
    value: float
    unit: str
    note: str = ""
    """Why this step's figure differs from another method's (a `Note`, '' when none)."""


def formula_number(x: float, digits: int = 4) -> str:
    """A number for a formula line: up to `digits` significant figures, thousands separated."""
    if not math.isfinite(x):
        return "inf"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def prompt_mfu_text(s: Scenario) -> str:
    """The MFU a whole prompt's GEMMs run at, as show-math substitutes it: the plateau, or with
    F6c's curve MFU(L) = MFU / (1 + (m_half x R / L)^k)^(1/k) and its value (R:
    `Routing.half_ratio`, the MoE weight ratio times the device's and format's scale, shown
    when not 1; k `MFU_CURVE_SHARPNESS`), so the line's numbers give its result."""
    if s.mfu_half_tokens <= 0:
        return formula_number(s.mfu)
    r = float(s.routing.half_ratio(s.prompt))
    eff = float(step_mfu(s.prompt, mfu=s.mfu, half_tokens=s.mfu_half_tokens, routing=s.routing))
    ratio = f" x {formula_number(r)}" if r != 1.0 else ""
    k = formula_number(MFU_CURVE_SHARPNESS)
    return (f"{formula_number(eff)} [MFU(L) = {formula_number(s.mfu)} / (1 + ("
            f"{formula_number(s.mfu_half_tokens)}{ratio} / {s.prompt:,})^{k})^(1/{k}), F6c"
            f"{expert_share_text(s)}]")


def expert_share_text(s: Scenario) -> str:
    """'; MFU and m_half / 2.494: the routed experts' GEMMs at 0.315 of the dense plateau' for
    an MoE scenario whose typical knobs were resolved with an expert GEMM share below 1
    (`capacity.model.moe.expert_gemm_factor`), else ''."""
    if s.expert_gemm_share >= 1.0 or s.model.moe is None:
        return ""
    factor = expert_gemm_factor(s.model, s.expert_gemm_share)
    return (f"; MFU and m_half / {formula_number(factor)}: the routed experts' GEMMs at "
            f"{formula_number(s.expert_gemm_share)} of the dense plateau")
