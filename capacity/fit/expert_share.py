"""The MoE expert GEMM share of the typical basis, derived from runs sent at once.

What it is: the share of the dense GEMMs' plateau that an MoE model's routed-expert GEMMs reach
(`capacity.model.moe.expert_gemm_factor`; docs/method.md, "MoE expert GEMMs"). Fused MoE
kernels route, permute and un-permute the tokens and run one GEMM per expert on about
m k / E rows each; their arithmetic runs below a dense GEMM's of the same FLOPs.

Where it comes from: data/reference/bursts.csv's saturated runs (every request sent at once,
`capacity.fit.validate_bursts`), the only published figures at the engines' own batch, where
the prefill and the large decode batches are arithmetic-bound and the share shows. The share
is the one at which the median of log(predicted / measured output throughput) over the MoE
runs is 0, found by Brent's method on [0.05, 1] (`derive`): 1 where even the dense plateau predicts
the median run slower than measured, so the share never makes an MoE faster than a dense model.

Held out by model: `derive_all` gives the share over every MoE run and, for each MoE model of
the file, the share over the other models' runs, which the scorecards predict that model's rows
with (`TypicalEfficiency.expert_share_for`: the saturated runs and the typical basis' published
groups, some of which are the same source's closed-loop pages). data/engines.toml records both
(`[ENGINE.expert_gemm_share]`); `python -m capacity.fit.expert_share` prints the table, and a
test checks the file against it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from scipy.optimize import brentq

from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.fit.open_loop_rows import OpenLoopRow, load_rows
from capacity.fit.validate_bursts import predict

METRIC: Final = ("output_tok_s", "total")
"""The figure the share is solved on: a run's output throughput (one per run)."""
LOW: Final = 0.05
"""The smallest share Brent's method tries (dimensionless)."""
XTOL: Final = 2e-4
"""How close Brent's method brings the share (dimensionless), below the file's three
decimals."""


@dataclass(frozen=True, kw_only=True)
class ShareFit:
    """The share over every MoE run and the one without each model's runs."""

    share: float
    runs: int
    held_out: dict[str, float]


def moe_runs(rows: Sequence[OpenLoopRow] | None = None,
             catalog: Catalog | None = None) -> list[OpenLoopRow]:
    """The output-throughput row of every saturated run of an MoE model (bursts.csv)."""
    cat = catalog or default_catalog()
    got = load_rows(bursts=True) if rows is None else rows
    return [r for r in got if (r.metric, r.stat) == METRIC
            and cat.variant(r.model).model.moe is not None]


def log_errors(runs: Sequence[OpenLoopRow], share: float,
               catalog: Catalog | None = None) -> list[float]:
    """log(predicted / measured) of each run's output throughput on its typical basis with
    MoE expert GEMM share `share` (a run the model cannot hold is left out)."""
    cat = catalog or default_catalog()
    out: list[float] = []
    for r in runs:
        try:
            got = predict(r, "typical", cat, expert_share=share).value(*METRIC)
        except CapacityError:
            continue
        out.append(math.log(got / r.value))
    return out


def derive(runs: Sequence[OpenLoopRow], catalog: Catalog | None = None) -> float:
    """The share at which the median log error of `runs` is 0 (module docstring), to three
    decimals; 1 where the median at share 1 is already <= 0, `LOW` where it is still > 0
    there. Raises ValueError without runs."""
    if not runs:
        raise ValueError("no MoE runs to derive the expert GEMM share from")
    cat = catalog or default_catalog()

    def median_at(share: float) -> float:
        return float(statistics.median(log_errors(runs, share, cat)))

    if median_at(1.0) <= 0:
        return 1.0
    if median_at(LOW) >= 0:
        return LOW
    return round(float(brentq(median_at, LOW, 1.0, xtol=XTOL)), 3)


def derive_all(rows: Sequence[OpenLoopRow] | None = None,
               catalog: Catalog | None = None) -> ShareFit:
    """The share over every MoE run, and for each MoE model the share over the others'."""
    cat = catalog or default_catalog()
    runs = moe_runs(rows, cat)
    models = sorted({r.model for r in runs})
    return ShareFit(share=derive(runs, cat), runs=len(runs),
                    held_out={m: derive([r for r in runs if r.model != m], cat)
                              for m in models})


def toml_table(fit: ShareFit, engine: str = "vllm") -> str:
    """`fit` as data/engines.toml's [ENGINE.expert_gemm_share] table."""
    held = ", ".join(f'"{m}" = {v}' for m, v in sorted(fit.held_out.items()))
    return (f"[{engine}.expert_gemm_share]\ntypical = {fit.share}\n"
            f"held_out = {{ {held} }}\n")


if __name__ == "__main__":   # pragma: no cover - prints the table the file records
    print(toml_table(derive_all()))
