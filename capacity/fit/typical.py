"""Engines' typical efficiency knobs as data (data/engines.toml's [ENGINE] tables: the
typical basis, `capacity size --typical ENGINE`, the Planner's and the Explorer's "typical"
prediction): the parsed file and its checks. What the knobs mean and how they were derived is
in that file's header and docs/method.md ("Bases"); how a prediction uses them is
`capacity.fit.planning`. Apart from planning, which imports the fit, so that a calibration's
priors can read them too (`capacity.fit.ceilings.typical_eff`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Final

from capacity import workspace
from capacity.errors import CatalogError, InputError
from capacity.model.step_combine import check_ridge_sharpness
from capacity.untrusted import loads_data_toml

ENGINES_FILE = "engines.toml"
TYPICAL_KNOBS: tuple[str, ...] = ("eta_bw", "eff", "mfu", "step_overhead_ms",
                                  "prefill_overhead_ms", "draft_overhead_ms",
                                  "verify_overhead_ms", "mfu_half_tokens", "ridge_sharpness",
                                  "cuda_graph_max_tokens", "gemm_tile_tokens",
                                  "layer_overhead_ms", "request_latency_ms",
                                  "linear_prefill_ms", "prefill_layer_ms", "pp_handoff_ms")
"""The knobs an engine's typical efficiency sets (fractions, then overheads in ms, then F6c's
m_half, F4c's ridge sharpness and F4d's padding in tokens, then F11's per-layer overhead,
the request latency outside the GPU and F6's per-linear-attention-layer and per-layer
prefill overheads in ms: for all but the fractions and the sharpness the slow edge is `high`;
for the sharpness, `ridge_edges`)."""
CEILING_SHARES: Final = ("eff", "mfu")
"""The knobs data/engines.toml states as shares of the GPU's measured matmul ceiling
(`typical_knobs_on`): the decode GEMMs' `eff` and the prefill plateau `mfu`, one GEMM curve
(F6c) on every GPU."""
BANDWIDTH_SHARES: Final = ("eta_bw",)
"""The knob data/engines.toml states as a share of the GPU's measured copy ceiling
(`capacity.catalog.matmul.typical_eta_bw`, `typical_knobs_on`): the decode step's read
efficiency `eta_bw` (since 2026-12-07; a share of the spec sheet before)."""
OPTIONAL_KNOBS: Final = frozenset({"mfu_half_tokens", "ridge_sharpness",
                                   "cuda_graph_max_tokens", "gemm_tile_tokens",
                                   "layer_overhead_ms", "request_latency_ms",
                                   "linear_prefill_ms", "prefill_layer_ms",
                                   "pp_handoff_ms"})
"""Knobs an engines file may leave out (0: a constant prefill MFU, as before F6c; the max of
the two roofs, F4c; no GEMM padding, F4d; no per-layer step overhead, F11; no request
latency outside the GPU; no per-layer prefill overhead: CUDA graphs for the prefill, F6)."""


@dataclass(frozen=True, kw_only=True)
class TypicalEfficiency:
    """An engine's typical efficiency knobs and their ranges (data/engines.toml)."""

    engine: str
    name: str
    typical: dict[str, float]
    """Knob -> the value planned with (eta_bw, eff, mfu: fractions; overheads: ms)."""
    low: dict[str, float]
    high: dict[str, float]
    """Knob -> the smallest and largest value seen (for overheads the slow edge is `high`)."""
    source: str
    as_of: str
    step_error: tuple[float, float] | None = None
    """(low, high) signed errors predicted / measured - 1 of the decode step on this basis,
    the 15th and 85th percentile over the published groups (`[ENGINE.step_error]`,
    `capacity.fit.typical_bands.step_error_band`): the band's step knobs span
    step / (1 + high) .. step / (1 + low) (`typical_knob_edges`); None: the knobs' ranges."""
    ttft_error: tuple[float, float] | None = None
    """(low, high) signed errors predicted / measured - 1 of TTFT on this basis over the
    published groups (`[ENGINE.ttft_error]`, `capacity.fit.typical_bands.error_band`): the
    band's prefill and latency knobs (`TTFT_BAND_KNOBS`) span an unqueued TTFT of
    TTFT / (1 + high) .. TTFT / (1 + low) (`typical_knob_edges`); None: the knobs' ranges."""
    expert_gemm_share: float = 1.0
    """The share of the dense GEMMs' plateau an MoE model's routed-expert GEMMs reach
    (`[ENGINE.expert_gemm_share]` `typical`, dimensionless, (0, 1]; 1: as dense GEMMs, the
    basis before 2026-12-07): `capacity.model.moe.expert_gemm_factor`, applied where the
    knobs are put on a GPU and model (`capacity.fit.planning.typical_knobs_on`)."""
    expert_gemm_held_out: dict[str, float] = field(default_factory=dict)
    """Model key -> the share derived without that model's runs (`[ENGINE.expert_gemm_share]`
    `held_out`): what the scorecard predicts that model's rows with
    (`capacity.fit.expert_share`)."""

    def expert_share_for(self, model_key: str) -> float:
        """The expert GEMM share a scored row of `model_key` is predicted with: the one derived
        without that model's runs where there is one, else `expert_gemm_share`."""
        return self.expert_gemm_held_out.get(model_key, self.expert_gemm_share)


def _error_band(raw: object, name: str) -> tuple[float, float] | None:
    """An engine's [step_error] or [ttft_error] table (`name`) as (low, high), None without
    one."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{name}: a table with low and high")
    lo, hi = float(raw["low"]), float(raw["high"])
    if not (math.isfinite(lo) and math.isfinite(hi) and -1.0 < lo <= hi):
        raise ValueError(f"{name}: needs -1 < low <= high")
    return lo, hi


def _expert_share(raw: object) -> tuple[float, dict[str, float]]:
    """An engine's [expert_gemm_share] table as (typical, {model: held out}); (1, {}) without
    one. Every share in (0, 1]."""
    if raw is None:
        return 1.0, {}
    if not isinstance(raw, dict):
        raise ValueError("expert_gemm_share: a table with typical and held_out")
    held_raw = raw.get("held_out", {})
    if not isinstance(held_raw, dict):
        raise ValueError("expert_gemm_share.held_out: a table of model = share")
    share = float(raw["typical"])
    held = {str(k): float(v) for k, v in held_raw.items()}
    for name, v in {"typical": share, **held}.items():
        if not (math.isfinite(v) and 0 < v <= 1):
            raise ValueError(f"expert_gemm_share {name}: a fraction in (0, 1], got {v}")
    return share, held


def parse_engines(text: str, where: str = ENGINES_FILE) -> dict[str, TypicalEfficiency]:
    """Every [engine] table of an engines file."""
    data = loads_data_toml(text, where)
    out: dict[str, TypicalEfficiency] = {}
    for key, raw in data.items():
        if key == "profile":  # engine profiles (capacity.catalog.engines), not efficiency knobs
            continue
        typ: dict[str, float] = {}
        lo: dict[str, float] = {}
        hi: dict[str, float] = {}
        try:
            for knob in TYPICAL_KNOBS:
                if knob in OPTIONAL_KNOBS and knob not in raw:
                    typ[knob] = lo[knob] = hi[knob] = 0.0
                    continue
                t, a, b = (float(raw[knob][x]) for x in ("typical", "low", "high"))
                if not (math.isfinite(a) and math.isfinite(b) and 0 <= a <= t <= b):
                    raise ValueError(f"{knob}: needs 0 <= low <= typical <= high")
                if knob in ("eta_bw", "eff", "mfu") and not (0 < a and b <= 1):
                    raise ValueError(f"{knob}: a fraction in (0, 1]")
                problems = [check_ridge_sharpness(v) for v in (t, a, b)
                            if knob == "ridge_sharpness"]
                if any(problems):
                    raise ValueError(f"{knob}: {next(p for p in problems if p)}")
                typ[knob], lo[knob], hi[knob] = t, a, b
            share, held = _expert_share(raw.get("expert_gemm_share"))
            out[key] = TypicalEfficiency(engine=key, name=str(raw["name"]), typical=typ,
                                         low=lo, high=hi, source=str(raw["source"]),
                                         as_of=str(raw["as_of"]),
                                         step_error=_error_band(raw.get("step_error"),
                                                                "step_error"),
                                         ttft_error=_error_band(raw.get("ttft_error"),
                                                                "ttft_error"),
                                         expert_gemm_share=share, expert_gemm_held_out=held)
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"{where} [{key}]: {exc} (needs name, source, as_of and "
                               f"typical/low/high for {', '.join(TYPICAL_KNOBS)})") from None
    return out


@cache
def _engines(path: Path) -> dict[str, TypicalEfficiency]:
    return parse_engines(path.read_text(encoding="utf-8"), str(path))


def engines() -> dict[str, TypicalEfficiency]:
    """The engines with a typical efficiency: the catalog folder's engines.toml, else the
    bundled one."""
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / ENGINES_FILE
        if path.is_file():
            return _engines(path)
    raise CatalogError(f"no {ENGINES_FILE} in {workspace.catalog_dir()}")


def typical_efficiency(engine: str) -> TypicalEfficiency:
    """One engine's typical efficiency (InputError naming the known engines)."""
    known = engines()
    key = engine.strip().lower()
    if key not in known:
        raise InputError(f"no typical efficiency for engine '{engine}' (known: "
                         f"{', '.join(sorted(known))})")
    return known[key]
