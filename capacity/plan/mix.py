"""Mixes: several models or workloads on one fleet, each with its own SLO (docs/method.md, the
planner's section 6).

Each workload is planned on its own (`capacity.plan.search.plan`: its model, its traffic, its
SLO); a fleet is one GPU type that serves every workload, and its cost is the sum of each
workload's cheapest feasible deployment on that GPU. Replicas are not shared between models:
each workload gets its own replicas (and, with a per-node offer, its own whole nodes; with N+1,
its own spare), so a fleet's GPUs are the sum of the workloads' GPUs. Fleets are ranked by cost
per month; each workload's share is its deployment's cost per month over the fleet's.

A mix file (`capacity size --mix FILE`) lists the workloads; everything else (GPUs searched,
prices, currency, efficiency basis, spare) comes from the command line and is shared:

    [[workload]]
    name = "chat"                 # shown in the tables and the quote
    model = "qwen3.5-9b"
    dau = 2000                    # daily users (or peak_concurrency = 50)
    requests_per_user = 30
    peak_share = 0.25
    peak_hours = 2
    ctx = 8192
    output_tokens = 512
    slo_ttft_ms = 1500
    slo_tpot_ms = 40
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError, InputError
from capacity.model.workload import Workload
from capacity.plan.options import Option, Plan, PlanInputs, Slo
from capacity.plan.search import plan
from capacity.untrusted import loads_toml, read_utf8

MAX_WORKLOADS = 8
"""Most workloads in one mix."""

MIX_KEYS: dict[str, str] = {
    "name": "shown in the tables and the quote",
    "model": "model key (a format suffix fixes the weight format)",
    "dau": "daily active users",
    "requests_per_user": "requests per user per day",
    "peak_share": "share of daily requests in the peak window",
    "peak_hours": "length of the peak window, hours",
    "peak_concurrency": "requests in flight at the peak (instead of dau)",
    "ctx": "context per request, tokens",
    "prompt_tokens": "prompt tokens per request (default = ctx)",
    "output_tokens": "output tokens per request",
    "headroom": "headroom on the peak load",
    "slo_ttft_ms": "time to first token target, ms",
    "slo_tpot_ms": "time per output token target, ms",
    "slo_percentile": "percentile the SLOs hold for (default 90)",
}
"""The keys of one [[workload]] table and what they mean."""


@dataclass(frozen=True, kw_only=True)
class MixWorkload:
    """One workload of a mix: a name and its full planner inputs."""

    name: str
    inputs: PlanInputs


@dataclass(frozen=True, kw_only=True)
class MixPart:
    """One workload's deployment in a fleet."""

    name: str
    plan: Plan
    """The workload's plan, its options narrowed to the fleet's GPU (best first)."""
    option: Option
    """The workload's cheapest feasible deployment on the fleet's GPU."""


@dataclass(frozen=True, kw_only=True)
class Fleet:
    """One GPU type serving every workload of a mix, each on its own replicas."""

    gpu: str
    gpu_name: str
    parts: tuple[MixPart, ...]

    @property
    def n_gpus(self) -> int:
        """GPUs serving, summed over the workloads."""
        return sum(p.option.n_gpus for p in self.parts)

    @property
    def paid_gpus(self) -> int:
        """GPUs paid for (spares and whole nodes included), summed over the workloads."""
        return sum(p.option.paid_gpus for p in self.parts)

    @property
    def cost_per_month(self) -> float:
        """Sum of the workloads' costs per month, in the plan's currency."""
        return sum(p.option.cost_per_month for p in self.parts)

    def share(self, part: MixPart) -> float:
        """A workload's share of the fleet's cost per month (0..1)."""
        total = self.cost_per_month
        return part.option.cost_per_month / total if total > 0 else 0.0


@dataclass(frozen=True, kw_only=True)
class MixPlan:
    """The ranked fleets of a mix, and the GPUs that cannot serve every workload."""

    workloads: tuple[MixWorkload, ...]
    plans: tuple[Plan, ...]
    """Each workload's own plan (every GPU searched), in the order of `workloads`."""
    fleets: tuple[Fleet, ...]
    short: tuple[tuple[str, tuple[str, ...]], ...]
    """(GPU key, names of the workloads it has no feasible option for)."""

    @property
    def best(self) -> Fleet | None:
        return self.fleets[0] if self.fleets else None


def plan_mix(workloads: Sequence[MixWorkload], catalog: Catalog | None = None) -> MixPlan:
    """Plan each workload, then rank the GPU types that serve all of them by the summed cost
    per month (each workload on its cheapest feasible deployment of that GPU)."""
    if not workloads:
        raise InputError("a mix needs at least one workload")
    if len(workloads) > MAX_WORKLOADS:
        raise InputError(f"a mix holds at most {MAX_WORKLOADS} workloads, got {len(workloads)}")
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        raise InputError(f"workload names must differ: {', '.join(names)}")
    cat = catalog or default_catalog()
    plans_l: list[Plan] = []
    for w in workloads:
        try:
            plans_l.append(plan(w.inputs, cat))
        except CapacityError as exc:
            raise InputError(f"workload '{w.name}': {exc}") from None
    plans = tuple(plans_l)
    gpus = list(dict.fromkeys(
        k for w in workloads
        for k in (w.inputs.gpus if w.inputs.gpus is not None else sorted(cat.gpus))))
    fleets: list[Fleet] = []
    short: list[tuple[str, tuple[str, ...]]] = []
    for g in gpus:
        parts: list[MixPart] = []
        missing: list[str] = []
        for w, p in zip(workloads, plans, strict=True):
            mine = tuple(o for o in p.options if o.gpu == g)
            if not mine:
                missing.append(w.name)
                continue
            parts.append(MixPart(name=w.name, plan=replace(p, options=mine), option=mine[0]))
        if missing:
            short.append((g, tuple(missing)))
        else:
            fleets.append(Fleet(gpu=g, gpu_name=parts[0].option.gpu_name, parts=tuple(parts)))
    fleets.sort(key=lambda f: (round(f.cost_per_month, 6), f.paid_gpus, f.gpu))
    return MixPlan(workloads=tuple(workloads), plans=plans, fleets=tuple(fleets),
                   short=tuple(short))


def _num(raw: Mapping[str, Any], key: str, where: str, default: float | None) -> float | None:
    if key not in raw:
        return default
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            float(value)):
        raise InputError(f"{where}: {key} must be a finite number, got {value!r}")
    return float(value)


def _f(raw: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = _num(raw, key, where, default)
    assert value is not None
    return value


def _whole(raw: Mapping[str, Any], key: str, where: str, default: int | None) -> int | None:
    value = _num(raw, key, where, None if default is None else float(default))
    if value is None:
        return None
    if value != int(value) or not 1 <= value <= 10_000_000:
        raise InputError(f"{where}: {key} must be a whole number >= 1, got {value:g}")
    return int(value)


def mix_workload(raw: Mapping[str, Any], base: PlanInputs, where: str) -> MixWorkload:
    """One [[workload]] table on top of the shared inputs `base` (`MIX_KEYS`)."""
    unknown = sorted(set(raw) - set(MIX_KEYS))
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (known: "
                         f"{', '.join(MIX_KEYS)})")
    name = str(raw.get("name", "")).strip()
    model = str(raw.get("model", "")).strip().lower()
    if not name or not model:
        raise InputError(f"{where}: needs a name and a model")
    dau = _num(raw, "dau", where, None)
    conc = _num(raw, "peak_concurrency", where, None)
    if (dau is None) == (conc is None):
        raise InputError(f"{where}: give dau or peak_concurrency (one of them)")
    dflt = Workload(peak_concurrency=1.0)  # the defaults of the fields not given
    try:
        wl = Workload(
            daily_active_users=dau, peak_concurrency=conc,
            requests_per_user_per_day=_f(raw, "requests_per_user", where,
                                         dflt.requests_per_user_per_day),
            peak_share=_f(raw, "peak_share", where, dflt.peak_share),
            peak_hours=_f(raw, "peak_hours", where, dflt.peak_hours),
            context_tokens=_whole(raw, "ctx", where, dflt.context_tokens) or 1,
            prompt_tokens=_whole(raw, "prompt_tokens", where, None),
            output_tokens=_whole(raw, "output_tokens", where, dflt.output_tokens) or 1,
            headroom=_f(raw, "headroom", where, base.workload.headroom))
        pct = _f(raw, "slo_percentile", where, base.slo.quantile * 100)
        slo = Slo(ttft_ms=_f(raw, "slo_ttft_ms", where, base.slo.ttft_ms),
                  tpot_ms=_f(raw, "slo_tpot_ms", where, base.slo.tpot_ms),
                  quantile=pct / 100.0, cost_per_mtok=base.slo.cost_per_mtok)
    except CapacityError as exc:
        raise InputError(f"{where}: {exc}") from None
    return MixWorkload(name=name, inputs=replace(base, model=model, workload=wl, slo=slo,
                                                 formats=None))


def parse_mix(text: str, base: PlanInputs, where: str = "mix") -> tuple[MixWorkload, ...]:
    """The [[workload]] tables of a mix file, each on top of the shared inputs `base`."""
    try:
        data = loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: {exc}") from None
    raw = data.get("workload")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}: no [[workload]] tables")
    if len(raw) > MAX_WORKLOADS:
        raise InputError(f"{where}: at most {MAX_WORKLOADS} workloads, got {len(raw)}")
    return tuple(mix_workload(r, base, f"{where}, workload {i + 1}") for i, r in enumerate(raw))


def load_mix(path: str | Path, base: PlanInputs) -> tuple[MixWorkload, ...]:
    """Read a mix file."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"mix file '{p}' does not exist")
    return parse_mix(read_utf8(p), base, str(p))


# ---------------------------------------------------------------------------------------------
# An added workload as the Planner page holds it (and its URL carries it): a name, a model, its
# daily users, requests per user, context, output tokens and TTFT / TPOT targets; the rest (peak
# window, headroom, GPUs, prices, efficiency basis, percentile) is the page's first workload's.

MIX_NAME_CHARS = 40
"""Longest name of an added workload (a label, never a path)."""


@dataclass(frozen=True, kw_only=True)
class MixEntry:
    """One added workload of the Planner's mix section (`capacity.report.urlstate` writes it
    into the link as `name|model|dau|rpu|ctx|out|ttft|tpot`)."""

    name: str
    model: str
    dau: int = 500
    rpu: float = 20.0
    ctx: int = 8192
    out: int = 256
    ttft: float = 2000.0
    tpot: float = 50.0

    def workload(self, base: PlanInputs) -> MixWorkload:
        """This workload on the first one's inputs `base` (its peak window, headroom, GPUs,
        prices, efficiency basis and percentile); InputError when its numbers are invalid."""
        wl = replace(base.workload, daily_active_users=float(self.dau), peak_concurrency=None,
                     requests_per_user_per_day=float(self.rpu), context_tokens=int(self.ctx),
                     prompt_tokens=None, output_tokens=int(self.out), turns=1, turn_tokens=0)
        return MixWorkload(name=self.name, inputs=replace(
            base, model=self.model, workload=wl, formats=None,
            slo=replace(base.slo, ttft_ms=float(self.ttft), tpot_ms=float(self.tpot))))

    @staticmethod
    def of(w: MixWorkload, base: PlanInputs) -> MixEntry | None:
        """The entry that rebuilds `w` on `base`, or None when `w` differs from `base` in
        something an entry does not hold (its own peak window, headroom, prompt, GPUs...)."""
        wl = w.inputs.workload
        if wl.daily_active_users is None or wl.daily_active_users != int(wl.daily_active_users):
            return None
        entry = MixEntry(name=w.name, model=w.inputs.model, dau=int(wl.daily_active_users),
                         rpu=wl.requests_per_user_per_day, ctx=wl.context_tokens,
                         out=wl.output_tokens, ttft=w.inputs.slo.ttft_ms,
                         tpot=w.inputs.slo.tpot_ms)
        try:
            same = entry.workload(base) == w
        except CapacityError:
            return None
        return entry if same else None
