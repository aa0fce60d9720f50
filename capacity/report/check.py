"""The event model's check of a chosen option, as every surface words it: the Planner's caption
and its warning, the quote's line and `capacity size --simulate` (text and JSON). The check is
`capacity.plan.detail.simulate_option`; where it misses an SLO at the plan's percentile
(`check_misses`), each surface says so in the same sentence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from capacity.plan.detail import check_misses
from capacity.plan.options import Slo
from capacity.report.i18n import t

if TYPE_CHECKING:
    from capacity.plan.events import QueueResult


def check_caption(sim: QueueResult, lang: str) -> str:
    """The check's TTFT and TPOT p50/p90/p99 (ms) and the share meeting both SLOs."""
    return t("pl_sim", lang, a=sim.ttft_ms[0.5], b=sim.ttft_ms[0.9], c=sim.ttft_ms[0.99],
             d=sim.tpot_ms[0.5], e=sim.tpot_ms[0.9], f=sim.tpot_ms[0.99], ok=sim.slo_met_share)


def miss_text(sim: QueueResult, slo: Slo, lang: str) -> str | None:
    """Where the check misses an SLO at `slo.quantile`: which, how many of its requests are
    within each target, and that the headline's closed form runs optimistic there (None: it
    meets both). Example (p90, 86 % within 2,000 ms): "The event model's check misses the p90
    target at the design load: TTFT within 2,000 ms for 86% of requests. ..."."""
    misses = check_misses(sim, slo)
    if not misses:
        return None
    parts = t("list_sep", lang).join(
        t(f"check_miss_{m.metric}", lang, ms=m.target_ms, share=m.within_share) for m in misses)
    return t("check_miss", lang, q=slo.quantile * 100, parts=parts)


def check_record(sim: QueueResult, slo: Slo) -> dict[str, Any]:
    """The check as `capacity size --format json --simulate` gives it: percentiles (ms), the
    shares within each SLO and meeting both, and the SLOs it misses at the plan's percentile."""
    return {"ttft_ms": sim.ttft_ms, "tpot_ms": sim.tpot_ms, "slo_met_share": sim.slo_met_share,
            "ttft_met_share": sim.ttft_met_share, "tpot_met_share": sim.tpot_met_share,
            "misses": [m.metric for m in check_misses(sim, slo)]}
