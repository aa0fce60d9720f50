"""When a speculative-decoding draft stops paying for the recommended option (F12,
docs/method.md, "The planner's search").

The planner searches each draft of `PlanInputs.drafts` beside none (`capacity.plan.search`) and
ranks them with everything else. `draft_note` then says, for the recommended option, what the
draft did:

- the option runs a draft: the batch (sequences per replica) above which it no longer pays
  (`roofline.breakeven_batch`: its TPOT per emitted token reaches the plain step's) and
  whether the design load's batch is below it or past it;
- the option runs none although drafts were searched: the most promising draft on the same
  deployment (the lowest TPOT at the design batch) and why it lost: slower at the design
  batch (the verify pass of k + 1 tokens compute-bound, or the draft's own passes costing more
  than tau saves), its weights and KV leaving too few slots, or, faster at the design batch, a
  lower SLO-feasible capacity or a failed check (the planner's own figures for the drafted
  deployment, `deployment.assess`).

The bare steps come from the Explorer's path (`option_scenario` -> `evaluate`, `decode_model`),
so the note's TPOTs are the Explorer's for the same deployment. `capacity.report.quote.
draft_note_text` words it for `capacity size`, the Planner page and the quote.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.model.roofline import Bound, breakeven_batch
from capacity.model.scenario import decode_model, evaluate
from capacity.model.speculative import DRAFT_NAMES, parse_draft
from capacity.plan.deployment import Deployment, assess
from capacity.plan.detail import design_concurrency_total, option_scenario
from capacity.plan.options import Option, Plan, Reason

MAX_BREAKEVEN_BATCH = 4096
"""The largest batch (sequences per replica) the break-even search looks at."""


class DraftOutcome(StrEnum):
    """What the draft did for the recommended option (`DraftNote.outcome`)."""

    PAYS = "pays"
    """The option runs the draft, and the design batch is below its break-even."""
    PAST = "past"
    """The option runs the draft, yet the design batch is past its break-even."""
    SLOWER = "slower"
    """No draft chosen: the draft would be slower at the design batch."""
    MEMORY = "memory"
    """No draft chosen: with the draft's weights and KV the design load does not fit."""
    CAPACITY = "capacity"
    """No draft chosen: faster at the design batch, but a lower SLO-feasible capacity."""
    FAILS = "fails"
    """No draft chosen: faster at the design batch, but the drafted deployment fails a check."""


@dataclass(frozen=True, kw_only=True)
class DraftNote:
    """The recommended option and one draft: where it stops paying and what that meant."""

    draft: str
    """The draft's key ('eagle:3')."""
    kind_name: str
    """'EAGLE', 'MTP', 'n-gram'."""
    depth: int
    """k, tokens proposed per step."""
    acceptance_length: float
    """tau, tokens per verify pass."""
    source: str
    """Where tau comes from (a published row's source, or 'entered')."""
    outcome: DraftOutcome
    design_batch: int
    """Sequences per replica at the design load (peak x (1 + headroom))."""
    breakeven_batch: int | None
    """The smallest batch per replica at which the draft no longer pays; None: it pays up to
    `MAX_BREAKEVEN_BATCH`."""
    plain_tpot_ms: float
    """The bare decode step per token at the design batch without the draft, ms."""
    draft_tpot_ms: float
    """The bare decode step per emitted token at the design batch with the draft, ms."""
    verify_bound: Bound
    """What binds the drafted step at the design batch (compute: the verify pass's k + 1
    tokens per sequence are arithmetic-bound)."""
    slots_per_replica: int = 0
    """With the draft: requests one replica's memory holds (MEMORY)."""
    capacity_rate_per_s: float = math.nan
    """With the draft: the deployment's SLO-feasible capacity, req/s (CAPACITY)."""
    plain_capacity_rate_per_s: float = math.nan
    """Without it (the recommended option's), req/s (CAPACITY)."""
    failures: tuple[Reason, ...] = ()
    """The checks the drafted deployment fails (FAILS)."""

    @property
    def label(self) -> str:
        """'EAGLE k=3'."""
        return f"{self.kind_name} k={self.depth}"


def _bare(p: Plan, o: Option, key: str, catalog: Catalog
          ) -> tuple[float, float, int | None, Bound, int, int]:
    """(plain TPOT, drafted TPOT at the design batch (ms), break-even batch, what binds the
    drafted step, design batch per replica, requests per replica that fit with the draft)."""
    inp = p.inputs
    plain = option_scenario(inp, replace(o, draft=""), catalog)
    drafted = option_scenario(inp, replace(o, draft=key), catalog)
    total = design_concurrency_total(inp, o)
    ev0, ev1 = evaluate(plain, [total]), evaluate(drafted, [total])
    kv = ev0.kv_read_bytes
    even = breakeven_batch(decode_model(plain, kv), decode_model(drafted, kv),
                           MAX_BREAKEVEN_BATCH)
    return (float(ev0.decode.step_ms[0]), float(ev1.decode.step_ms[0]), even,
            Bound(str(ev1.decode.bound[0])), int(ev0.per_replica_concurrency[0]),
            int(ev1.max_concurrency_vram) // o.replicas)


def draft_note(p: Plan, catalog: Catalog | None = None) -> DraftNote | None:
    """What the searched drafts did for the recommended option (module docstring); None when
    no draft was searched or nothing is recommended."""
    best = p.best
    inp = p.inputs
    if best is None or not inp.drafts:
        return None
    cat = catalog or default_catalog()
    keys = (best.draft,) if best.draft else inp.draft_keys(cat.variant(inp.model).model.key)
    if not keys:
        return None
    bare = {k: _bare(p, best, k, cat) for k in keys}
    key = min(keys, key=lambda k: (bare[k][1], k))  # the chosen draft, else the fastest
    plain_ms, draft_ms, even, bound, batch, fits = bare[key]
    kind, depth = parse_draft(key)
    d = inp.draft_for(cat.variant(inp.model, best.weights), key)
    assert d is not None
    note = DraftNote(draft=key, kind_name=DRAFT_NAMES[kind], depth=depth,
                     acceptance_length=d.acceptance_length, source=d.source,
                     outcome=DraftOutcome.PAYS, design_batch=batch, breakeven_batch=even,
                     plain_tpot_ms=plain_ms, draft_tpot_ms=draft_ms, verify_bound=bound,
                     slots_per_replica=fits)
    past = even is not None and batch >= even
    if best.draft:
        return replace(note, outcome=DraftOutcome.PAST if past else DraftOutcome.PAYS)
    if past or draft_ms >= plain_ms:
        return replace(note, outcome=DraftOutcome.SLOWER)
    if fits < batch:
        return replace(note, outcome=DraftOutcome.MEMORY)
    try:
        twin = assess(replace(Deployment.of(inp, best), draft=key), cat)
    except CapacityError:
        return replace(note, outcome=DraftOutcome.FAILS)
    if twin.failures:
        return replace(note, outcome=DraftOutcome.FAILS, failures=twin.failures)
    return replace(note, outcome=DraftOutcome.CAPACITY,
                   capacity_rate_per_s=twin.capacity_rate_per_s,
                   plain_capacity_rate_per_s=best.capacity_rate_per_s)
