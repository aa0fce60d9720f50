"""Verdicts per constraint, the binding constraint, what would relieve it, and "show the math".

Language-neutral on purpose: a verdict carries a status, the number behind it, the limit and a
message key with its parameters; the app turns keys into English or Chinese (capacity/i18n.py).
"Show the math" returns each formula with the current numbers substituted, as plain strings of
symbols and numbers that read the same in every language; only the titles are keys.

Status of one constraint, as a ratio r = value / limit (the same rule as the F8 memory verdict):
pass when r x (1 + headroom) <= 1, tight when r <= 1, fail otherwise. Source: docs/method.md, sections 2,
3 (F8) and 9; the chapter's table (section 4) is the worked example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

import numpy as np

from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.model.cost import HOURS_PER_MONTH
from capacity.model.draft_gain import DraftGain, draft_gain
from capacity.model.fixes import by_cost, suggest_fixes
from capacity.model.memory import VERDICTS, MemoryVerdict, headroom_level
from capacity.model.parallel import DEFAULT_NCCL_GB, check_tp
from capacity.model.roofline import Bound, StepMethod, counts_as_engines
from capacity.model.scenario import Evaluation, Scenario, capacity_table, evaluate
from capacity.report.explain_draft import draft_steps, per_token_text
from capacity.report.math_steps import MathStep, prompt_mfu_text
from capacity.report.math_steps import formula_number as _n
from capacity.types import Note
from capacity.units import GB, KIB, TERA, bytes_per_element


class Status(StrEnum):
    """How one constraint stands, by r = value / limit (F8's rule, applied to every constraint)."""

    PASS = "pass"
    """Within the limit with the headroom: r x (1 + headroom) <= 1."""
    TIGHT = "tight"
    """Within the limit but not with the headroom: r <= 1."""
    FAIL = "fail"
    """Over the limit: r > 1."""


class Constraint(StrEnum):
    """The four constraints the Explorer judges a deployment on."""

    MEMORY = "memory"
    """VRAM subtotal per GPU against VRAM x util (F3/F8)."""
    BANDWIDTH = "bandwidth"
    """The memory term of the decode step against the TPOT SLO (F4)."""
    COMPUTE = "compute"
    """TTFT against its SLO (F6) or the arithmetic term of the decode step against TPOT (F4)."""
    SLO = "slo"
    """The worst of TTFT, TPOT and cost per M tokens against their targets."""


class Detail(StrEnum):
    """Which figure a verdict (or the binding constraint) is about; a message key ('d_...')."""

    SUBTOTAL = "subtotal"
    """The VRAM subtotal per GPU, GB."""
    BANDWIDTH_TERM = "bandwidth_term"
    """The memory term of the decode step, ms."""
    COMPUTE_TERM = "compute_term"
    """The arithmetic term of the decode step, ms."""
    TTFT = "ttft"
    """Time to first token, ms."""
    TPOT = "tpot"
    """Time per output token (the whole decode step), ms."""
    COST = "cost"
    """Cost per million output tokens, in the scenario's currency."""


class ReliefKind(StrEnum):
    """What a relief changes (`Relief.kind`); the memory ones are `FixKind`'s values."""

    GPUS = "gpus"
    """More GPUs in all (more replicas, or a larger TP group)."""
    WEIGHTS = "weights"
    """A smaller weight format of the same model."""
    KV_DTYPE = "kv_dtype"
    """A smaller KV-cache precision."""
    CONTEXT = "context"
    """A shorter context per request."""
    CONCURRENCY = "concurrency"
    """Fewer (or, for cost, more) requests at once."""
    PROMPT = "prompt"
    """A shorter prompt (the longest one whose TTFT meets the SLO)."""
    TP = "tp"
    """A larger tensor-parallel size (weights split across GPUs; prefill split too)."""
    PRICE = "price"
    """A lower GPU price per hour."""
    MFU = "mfu"
    """A higher prefill MFU (a faster kernel or engine)."""


CONSTRAINTS: Final[tuple[Constraint, ...]] = tuple(Constraint)
STATUS_RANK: Final[dict[Status, int]] = {Status.PASS: 0, Status.TIGHT: 1, Status.FAIL: 2}


@dataclass(frozen=True, kw_only=True)
class Targets:
    """The service-level objectives a deployment is judged against (0 disables cost)."""

    ttft_ms: float = 2000.0
    tpot_ms: float = 50.0
    cost_per_mtok: float = 1.0


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One constraint's verdict: status, the number behind it (`value` against `limit`, in
    `unit`), and `detail` naming which figure it is (a message key, e.g. 'ttft')."""

    constraint: Constraint
    status: Status
    value: float
    limit: float
    unit: str
    detail: Detail

    @property
    def ratio(self) -> float:
        """value / limit (inf when the limit is 0 and the value is not)."""
        if self.limit == 0:
            return 0.0 if self.value == 0 else math.inf
        return self.value / self.limit


@dataclass(frozen=True, kw_only=True)
class Relief:
    """One change that would relieve the binding constraint, with the result it gives.

    `value` is the new setting; `result` is the figure it gives (a memory verdict for memory
    fixes, ms/s/cost for the others). `n_gpus` and `tp` are the deployment the relief gives
    (they change with the GPU and TP reliefs); memory reliefs also carry the VRAM subtotal and
    usable GB per GPU (F8) and the cost per M tokens (F7) they give.
    """

    kind: ReliefKind
    value: float | str
    result: float | MemoryVerdict
    n_gpus: int
    tp: int
    subtotal_gb: float | None = None
    usable_gb: float | None = None
    cost_per_mtok: float | None = None
    detail: Detail = Detail.SUBTOTAL
    """The failed check this relieves (memory, TTFT, the decode step's terms, cost)."""
    pp: int = 1
    """The pipeline stages of the deployment the relief gives (F13; 1: none)."""


@dataclass(frozen=True, kw_only=True)
class Explanation:
    """Verdicts of the four constraints at one concurrency, which binds, and what relieves it."""

    concurrency: int
    verdicts: tuple[Verdict, ...]
    binding: Constraint
    binding_detail: Detail
    reliefs: tuple[Relief, ...]
    figures: dict[str, float] = field(default_factory=dict)
    draft: DraftGain | None = None
    """Speculative decoding at this concurrency against no draft (F12); None without one."""

    def verdict(self, constraint: Constraint) -> Verdict:
        """The verdict of one constraint."""
        return next(v for v in self.verdicts if v.constraint == constraint)

    @property
    def overall(self) -> Status:
        """The worst status over all four constraints."""
        return max((v.status for v in self.verdicts), key=STATUS_RANK.__getitem__)


STATUSES: Final[tuple[Status, ...]] = (Status.PASS, Status.TIGHT, Status.FAIL)
"""Statuses in order of F8's `headroom_level` (0, 1, 2)."""
MEMORY_STATUS: Final[dict[str, Status]] = dict(zip(VERDICTS, STATUSES, strict=True))
"""F8's memory verdict ('fits', 'tight', 'does_not_fit') as a status."""


def status_of(ratio: float, headroom: float) -> Status:
    """pass if ratio x (1 + headroom) <= 1, tight if ratio <= 1, else fail (F8's rule,
    `memory.headroom_level` with the limit as 1)."""
    return STATUSES[int(headroom_level(ratio, 1.0, headroom))]


def _verdict(constraint: Constraint, value: float, limit: float, unit: str, detail: Detail,
             headroom: float) -> Verdict:
    ratio = 0.0 if limit == 0 and value == 0 else (math.inf if limit == 0 else value / limit)
    return Verdict(constraint=constraint, status=status_of(ratio, headroom), value=value,
                   limit=limit, unit=unit, detail=detail)


def _worst(*candidates: tuple[float, float, str, Detail]) -> tuple[float, float, str, Detail]:
    """The (value, limit, unit, detail) with the largest value / limit."""
    def r(c: tuple[float, float, str, Detail]) -> float:
        return math.inf if c[1] == 0 else c[0] / c[1]
    return max(candidates, key=r)


def verdicts(ev: Evaluation, targets: Targets, index: int = 0) -> tuple[Verdict, ...]:
    """The four verdicts at point `index` of a one-context evaluation.

    memory: VRAM subtotal per GPU against VRAM x util (F8);
    bandwidth: the memory term of the decode step against the TPOT SLO (F4);
    compute: the worse of TTFT against its SLO (prefill, F6) and the compute term of the decode
    step against the TPOT SLO (F4);
    slo: the worst of TTFT, TPOT and cost per M tokens against their targets.
    """
    s = ev.scenario
    h = s.headroom
    i = index
    # memory: F8's verdict as `evaluate` gave it (the Explorer's table and the planner agree)
    mem = Verdict(constraint=Constraint.MEMORY, status=MEMORY_STATUS[str(ev.verdict.flat[i])],
                  value=float(ev.vram_subtotal_bytes.flat[i]) / GB,
                  limit=ev.vram.usable_bytes / GB, unit="GB", detail=Detail.SUBTOTAL)
    bw = _verdict(Constraint.BANDWIDTH, float(ev.decode.bandwidth_ms.flat[i]), targets.tpot_ms,
                  "ms", Detail.BANDWIDTH_TERM, h)
    ttft_ms = float(ev.ttft_s.flat[min(i, ev.ttft_s.size - 1)]) * 1e3
    cp = _worst((ttft_ms, targets.ttft_ms, "ms", Detail.TTFT),
                (float(ev.decode.compute_ms.flat[i]), targets.tpot_ms, "ms", Detail.COMPUTE_TERM))
    comp = _verdict(Constraint.COMPUTE, *cp, h)
    tpot = float(ev.decode.step_ms.flat[i])
    cost = float(ev.cost_per_mtok.flat[i])
    slo_candidates = [(ttft_ms, targets.ttft_ms, "ms", Detail.TTFT),
                      (tpot, targets.tpot_ms, "ms", Detail.TPOT)]
    if targets.cost_per_mtok > 0:
        slo_candidates.append((cost, targets.cost_per_mtok, s.currency, Detail.COST))
    slo = _verdict(Constraint.SLO, *_worst(*slo_candidates), h)
    return (mem, bw, comp, slo)


def _binding(vs: tuple[Verdict, ...], bound: Bound) -> tuple[Constraint, Detail]:
    by = {v.constraint: v for v in vs}
    if by[Constraint.MEMORY].status == Status.FAIL:
        return Constraint.MEMORY, Detail.SUBTOTAL
    slo = by[Constraint.SLO]
    if slo.status == Status.FAIL:
        if slo.detail == Detail.TTFT:
            return Constraint.COMPUTE, Detail.TTFT
        if slo.detail == Detail.TPOT:
            return (Constraint.COMPUTE, Detail.COMPUTE_TERM) if bound == Bound.COMPUTE else \
                (Constraint.BANDWIDTH, Detail.BANDWIDTH_TERM)
        return Constraint.SLO, Detail.COST
    # everything passes: the check closest to its limit, the cost target's among them where it
    # is the SLO card's worst (TTFT and TPOT are the compute and bandwidth cards' already);
    # until 2026-12-07 a cost at 34% of its target lost to a TTFT at 25% (a browser audit)
    ranked = sorted((by[Constraint.MEMORY], by[Constraint.BANDWIDTH], by[Constraint.COMPUTE],
                     *((slo,) if slo.detail == Detail.COST else ())),
                    key=lambda v: (STATUS_RANK[v.status], v.ratio), reverse=True)
    return ranked[0].constraint, ranked[0].detail


def failed_details(ev: Evaluation, targets: Targets) -> list[Detail]:
    """The checks that fail at the first point of `ev`, each once: memory (F8's 'does not
    fit'), TTFT, the decode step against TPOT (by the term that binds it), the cost target."""
    out: list[Detail] = []
    if str(ev.verdict.flat[0]) == MemoryVerdict.DOES_NOT_FIT:
        out.append(Detail.SUBTOTAL)
    if float(ev.ttft_s.flat[0]) * 1e3 > targets.ttft_ms:
        out.append(Detail.TTFT)
    if float(ev.decode.step_ms.flat[0]) > targets.tpot_ms:
        out.append(Detail.COMPUTE_TERM if str(ev.decode.bound.flat[0]) == Bound.COMPUTE
                   else Detail.BANDWIDTH_TERM)
    if targets.cost_per_mtok > 0 and float(ev.cost_per_mtok.flat[0]) > targets.cost_per_mtok:
        out.append(Detail.COST)
    return out


def _reliefs(s: Scenario, ev: Evaluation, c: int, targets: Targets,
             catalog: Catalog | None) -> list[Relief]:
    """What relieves each failing check (none when nothing fails): memory first (until the
    weights and KV fit, speed fixes are moot), else TTFT, TPOT and cost, each with its own
    fixes (`Relief.detail` names the check)."""
    failed = failed_details(ev, targets)
    if Detail.SUBTOTAL in failed:
        # every fix that works, cheapest first (F7's monthly cost, then cost per M tokens)
        return [Relief(kind=ReliefKind(f.kind), value=f.value, result=f.verdict,
                       n_gpus=f.n_gpus, tp=f.tp, pp=f.pp, subtotal_gb=f.subtotal_gb,
                       usable_gb=f.usable_gb, cost_per_mtok=f.cost_per_mtok,
                       detail=Detail.SUBTOTAL)
                for f in by_cost(suggest_fixes(s, c, catalog))]
    out: list[Relief] = []
    for detail in failed:
        out += [replace(r, detail=detail)
                for r in _reliefs_for(s, ev, c, detail, targets)]
    return out


def _reliefs_for(s: Scenario, ev: Evaluation, c: int, detail: Detail, targets: Targets
                 ) -> list[Relief]:
    """The fixes of one failing speed check (TTFT, a decode-step term, cost)."""
    out: list[Relief] = []
    if detail == Detail.TTFT:
        # a shorter prompt: TTFT grows with L, so the longest prompt under the SLO
        grid = np.unique(np.linspace(1, s.prompt, 512).round())
        e = evaluate(s.with_(prompt_tokens=None, context_tokens=s.context_tokens), [1], grid)
        ok = np.flatnonzero(e.ttft_s * 1e3 <= targets.ttft_ms)
        if ok.size:
            out.append(Relief(kind=ReliefKind.PROMPT, value=int(grid[ok[-1]]),
                              result=float(e.ttft_s[ok[-1]]) * 1e3, n_gpus=s.n_gpus, tp=s.tp,
                              pp=s.pp))
        for tp in (2, 4, 8):
            t = s.with_(tp=tp, n_gpus=max(s.copies, 1) * tp * s.pp,
                        nccl_gb=s.nccl_gb or DEFAULT_NCCL_GB)
            try:
                check_tp(t.model, t.n_gpus, t.tp)
            except InputError:
                continue
            ttft = float(evaluate(t, [c]).ttft_s) * 1e3
            if ttft <= targets.ttft_ms:
                out.append(Relief(kind=ReliefKind.TP, value=tp, result=ttft, n_gpus=t.n_gpus,
                                  tp=tp, pp=s.pp))
                break
        room_ms = targets.ttft_ms - s.request_latency_ms   # the latency outside stays
        need_mfu = (s.mfu * float(ev.prefill_s.flat[0]) * 1e3 / room_ms if room_ms > 0
                    else math.inf)
        if s.mfu < need_mfu <= 0.6:
            out.append(Relief(kind=ReliefKind.MFU, value=round(need_mfu, 2),
                              result=targets.ttft_ms, n_gpus=s.n_gpus, tp=s.tp, pp=s.pp))
        return out
    if detail in (Detail.TPOT, Detail.BANDWIDTH_TERM, Detail.COMPUTE_TERM):
        grid = np.arange(1, max(c, 1) + 1, dtype=np.float64)
        e = evaluate(s, grid)
        ok = np.flatnonzero(e.decode.step_ms <= targets.tpot_ms)
        if ok.size and ok[-1] + 1 < c:
            out.append(Relief(kind=ReliefKind.CONCURRENCY, value=int(grid[ok[-1]]),
                              result=float(e.decode.step_ms[ok[-1]]), n_gpus=s.n_gpus, tp=s.tp,
                              pp=s.pp))
        copy = s.tp * s.pp   # more copies of the model, each TP x PP GPUs
        for n in range(s.n_gpus + copy, 16 * copy + 1, copy):
            step = float(evaluate(s.with_(n_gpus=n), [c]).decode.step_ms[0])
            if step <= targets.tpot_ms:
                out.append(Relief(kind=ReliefKind.GPUS, value=n, result=step, n_gpus=n,
                                  tp=s.tp, pp=s.pp))
                break
        if bytes_per_element(s.kv_dtype) > 1:
            step = float(evaluate(s.with_(kv_dtype="fp8"), [c]).decode.step_ms[0])
            if step <= targets.tpot_ms:
                out.append(Relief(kind=ReliefKind.KV_DTYPE, value="fp8", result=step,
                                  n_gpus=s.n_gpus, tp=s.tp, pp=s.pp))
        return out
    if detail == Detail.COST and targets.cost_per_mtok > 0:
        c_max = int(ev.max_concurrency_vram.flat[0])
        if c_max > c:
            cost = float(evaluate(s, [c_max]).cost_per_mtok[0])
            if cost <= targets.cost_per_mtok:
                out.append(Relief(kind=ReliefKind.CONCURRENCY, value=c_max, result=cost,
                                  n_gpus=s.n_gpus, tp=s.tp, pp=s.pp))
        agg = float(ev.aggregate_tok_s.flat[0])
        if agg > 0:
            price = targets.cost_per_mtok * agg * 3600.0 / 1e6 / s.paid_gpus
            out.append(Relief(kind=ReliefKind.PRICE, value=price, result=targets.cost_per_mtok,
                              n_gpus=s.n_gpus, tp=s.tp, pp=s.pp))
        return out
    return out


def explain(s: Scenario, concurrency: int, targets: Targets, catalog: Catalog | None = None
            ) -> Explanation:
    """Verdicts at `concurrency` (total), the binding constraint and what would relieve it.

    Binding: memory when it does not fit; else the cause of a failed SLO (TTFT -> compute,
    TPOT -> whichever term binds the decode step, cost -> slo); else the constraint closest to
    its limit. `catalog` lists the model's weight formats for the memory fixes (default:
    `default_catalog`). Seed: 50 x 8K on one RTX 4090 is tight on memory (20.6 of 21.6 GB) with TPOT
    18.97 ms; 100 x 8K does not fit and is relieved by 2 GPUs, FP8 KV or a 4K context.
    """
    c = int(concurrency)
    ev = evaluate(s, [c])
    vs = verdicts(ev, targets)
    binding, detail = _binding(vs, Bound(str(ev.decode.bound[0])))
    reliefs = _reliefs(s, ev, c, targets, catalog)
    figures = {
        "c_vram": float(ev.max_concurrency_vram.flat[0]),
        "subtotal_gb": float(ev.vram_subtotal_bytes[0]) / GB,
        "usable_gb": ev.vram.usable_bytes / GB,
        "shortfall_gb": max(0.0, float(ev.vram_subtotal_bytes[0]) - ev.vram.usable_bytes) / GB,
        "weights_shortfall_gb": ev.vram.shortfall_bytes / GB,
        "step_ms": float(ev.decode.step_ms[0]),
        "bandwidth_ms": float(ev.decode.bandwidth_ms[0]),
        "compute_ms": float(ev.decode.compute_ms[0]),
        "ttft_s": float(ev.ttft_s.flat[0]),
        "ttft_linear_s": float(ev.ttft_linear_s.flat[0]),
        "tok_s_per_request": float(ev.decode.tok_s_per_request[0]),
        "aggregate_tok_s": float(ev.aggregate_tok_s[0]),
        "cost_per_mtok": float(ev.cost_per_mtok[0]),
        "monthly_cost": s.price_per_hour * s.paid_gpus * HOURS_PER_MONTH,
    }
    return Explanation(concurrency=c, verdicts=vs, binding=binding, binding_detail=detail,
                       reliefs=tuple(reliefs), figures=figures,
                       draft=None if s.draft is None else draft_gain(s, [c]))


# ---------------------------------------------------------------------------------------------
# Show the math


def _kv_request_step(s: Scenario, ev: Evaluation, kv_req: float) -> MathStep:
    """F2 with this scenario's numbers: K x the context (F3's reservation), or under an engine
    that admits by tokens (`Scenario.held_tokens`) K x the prompt and output in whole pages."""
    kv_tok = ev.kv_token.bytes_per_token
    sliding = any(g.kind == "sliding" for g in s.model.layer_groups)
    state = ev.kv_token.state_bytes_per_request
    held = s.held_tokens is not None
    tokens = min(s.held_tokens, s.context_tokens) if s.held_tokens is not None else \
        s.context_tokens
    pages = -(-tokens // s.block_size) * s.block_size if held else tokens
    formula = ("KV_request = K x L" if not held else
               f"KV_request = K x (prompt + output), in {s.block_size}-token pages") + \
        (" (sliding layers hold min(L, w))" if sliding else "") + (" + states" if state else "")
    plain = not sliding and not (held and state)   # a hybrid's pages: `held_request_bytes`
    # F13: a GPU of a pipeline holds its stage's layers, ceil(layers / PP) of them
    stage = (f" x {-(-s.model.layers // s.pp)}/{s.model.layers}" if s.pp > 1 else "")
    return MathStep(key="kv_request", formula=formula + (" x stage share (F13)" if stage else ""),
                    substituted=f"{_n(kv_tok / KIB)} KiB x {pages:,}"
                    + (f" + {_n(state / GB)} GB" if state else "") + stage
                    + f" = {kv_req:,.0f} B = {_n(kv_req / GB)} GB"
                    if plain else f"= {kv_req:,.0f} B = {_n(kv_req / GB)} GB",
                    value=kv_req / GB, unit="GB")


def show_math(s: Scenario, concurrency: int) -> tuple[MathStep, ...]:
    """The chapter's formulas F1-F7 with this scenario's numbers substituted, in order.

    Every `value` is the figure `evaluate` computes, so the page and the math agree.
    Seed: 32 KiB/token, 0.268 GB/request, 14.4 GB budget, C_vram 53, 18.97 ms, 5.45 ms, 2.975 s.
    """
    c = int(concurrency)
    ev = evaluate(s, [c])
    m = s.model
    b = bytes_per_element(s.kv_dtype)
    steps: list[MathStep] = []
    dg = None if s.draft is None else draft_gain(s, [c])  # F12: the draft's weights, KV, step
    wd = f" - {_n(s.draft_weights_per_gpu_gb)}" if dg else ""
    kvf = f" x {_n(s.kv_factor)}" if dg else ""
    tau = f" / {_n(dg.draft.acceptance_length)}" if dg else ""
    # F1: KV per token, per layer group
    terms, subs = [], []
    for g in m.layer_groups:
        if g.kind in ("full", "sliding"):
            heads = max(g.kv_heads / s.tp, 1.0)
            terms.append("layers x 2 x kv_heads x head_dim x bytes")
            subs.append(f"{g.count} x 2 x {_n(heads)} x {g.head_dim} x {_n(b)}")
        elif g.kind == "mla":
            terms.append("layers x (kv_lora_rank + rope_dim) x bytes")
            subs.append(f"{g.count} x ({g.kv_lora_rank} + {g.qk_rope_head_dim}) x {_n(b)}")
    kv_tok = ev.kv_token.bytes_per_token
    steps.append(MathStep(key="kv_token", formula="K = " + " + ".join(dict.fromkeys(terms)),
                          substituted=" + ".join(subs) + f" = {kv_tok:,.0f} B "
                          f"= {_n(kv_tok / KIB)} KiB", value=kv_tok / KIB, unit="KiB"))
    # F2: KV per request
    kv_req = float(np.asarray(ev.kv_held_bytes).flat[0])
    steps.append(_kv_request_step(s, ev, kv_req))
    # F3: budget and C_vram
    v = ev.vram
    nccl = f" - {_n(s.nccl_gb)}" if s.nccl_gb else ""
    steps.append(MathStep(
        key="budget", formula="KV_budget = VRAM x util - W" + (" - W_draft" if dg else "")
        + " - overhead" + (" - NCCL" if nccl else ""),
        substituted=f"{_n(s.budget_vram_gb)} x {_n(s.util)} - {_n(s.weights_per_gpu_gb)}{wd} - "
                    f"{_n(s.overhead_gb)}{nccl} = {_n(v.kv_budget_bytes / GB)} GB",
        value=v.kv_budget_bytes / GB, unit="GB"))
    c_vram = int(ev.max_concurrency_vram.flat[0])
    rep = f" x {s.replicas} replicas" if s.replicas > 1 else ""
    slots = f"floor({_n(max(v.kv_budget_bytes, 0) / GB)} / ({_n(kv_req / GB)}{kvf}))"
    steps.append(MathStep(
        key="c_vram", formula="C_vram = floor(KV_budget / (KV_request" + (
            " x (1 + draft KV share)" if dg else "") + "))" + (" x replicas" if rep else "")
        if s.pp == 1 else "C_vram = floor(floor(KV_budget / KV_request) / PP) x decode streams "
        "(F13: a copy's slots over its PP micro-batches)",
        substituted=(f"{slots}{rep}" if s.pp == 1 else
                     f"floor({slots} / {s.pp}) x {s.replicas}") + f" = {c_vram}",
        value=float(c_vram), unit="requests"))
    c_rep = float(ev.per_replica_concurrency[0])
    kv_full = kv_req / s.stage_share   # F13: a stream's step reads every stage's KV in turn
    subtotal = float(ev.vram_subtotal_bytes[0])
    steps.append(MathStep(
        key="subtotal", formula="subtotal = W" + (" + W_draft" if dg else "") + " + overhead + "
        "C x KV_request" + (" x (1 + draft KV share)" if dg else "") + "  (<= VRAM x util)",
        substituted=f"{_n(s.weights_per_gpu_gb)}{wd.replace('-', '+')} + {_n(s.overhead_gb)}"
                    f"{nccl.replace('-', '+')} + {_n(c_rep * s.pp)} x {_n(kv_req / GB)}{kvf} = "
                    f"{_n(subtotal / GB)} GB vs "
                    f"{_n(s.budget_vram_gb)} x {_n(s.util)} = {_n(v.usable_bytes / GB)} GB",
        value=subtotal / GB, unit="GB"))
    # F4: the decode step; an untied input embedding table looked up, as engines do, where the
    # basis counts it so (a typical basis, `TYPICAL_COUNTS`, or an engines' step method)
    lookup = (m.lookup_params_b if s.embedding_lookup or counts_as_engines(s.step_method)
              else 0.0)
    w_read = float(ev.decode.weight_read_bytes.flat[0])
    bw_ms = float(ev.decode.bandwidth_ms[0])
    steps.append(MathStep(
        key="bandwidth_term", formula="t_bw = (W" + (" - lookup table" if lookup else "")
        + " + C x KV_request) / BW" + (" / tau" if dg else "")
        + (" (MoE: W read grows with C)" if m.moe else ""),
        substituted=f"({_n(w_read / GB)} + {_n(c_rep)} x {_n(kv_full / GB)}) GB / "
                    f"{_n(s.bandwidth_gb_s * s.eta_bw)} GB/s{tau} = {_n(bw_ms)} ms",
        value=bw_ms, unit="ms"))
    cp_ms = float(ev.decode.compute_ms[0])
    f_tot = s.tflops_per_replica
    steps.append(MathStep(
        key="compute_term", formula="t_compute = 2 x " + ("(P - lookup)" if lookup else "P")
        + " x C" + (" x (k + 1)" if dg else "") + " / (F x eff)" + (" / tau" if dg else ""),
        substituted=f"2 x {_n((m.params_active_b - lookup) * 1e9)} x {_n(c_rep)}"
                    + (f" x {dg.draft.verify_tokens}" if dg else "")
                    + f" / ({_n(f_tot * TERA)} x {_n(s.eff)}){tau} = {_n(cp_ms)} ms",
        value=cp_ms, unit="ms"))
    step = float(ev.decode.step_ms[0])
    comm = float(ev.decode.comm_ms[0])
    t0 = s.fixed_step_ms  # F11: per step + per layer x layers
    steps.append(MathStep(
        key="step", formula=("t_step = (t_verify + t_draft) / tau (F12)" if dg else
                             ("t_step = t0 + " if t0 else "t_step = ") + "max(t_bw, t_compute)"
                             + (" + comm" if comm else ""))
        + "; tok/s per request = 1000 / t_step; aggregate = C x 1000 / t_step",
        substituted=(per_token_text(float(dg.verify_ms[0]), float(dg.draft_ms[0]),
                                    dg.draft.acceptance_length) if dg else
                     (f"{_n(t0)} + " if t0 else "") + f"max({_n(bw_ms)}, {_n(cp_ms)})"
                     + (f" + {_n(comm)}" if comm else ""))
        + f" = {_n(step)} ms -> {_n(1e3 / step)} tok/s per request, "
          f"{_n(float(ev.aggregate_tok_s[0]))} tok/s aggregate",
        value=step, unit="ms"))
    if dg:
        steps += draft_steps(s, ev, dg)
    # F4b: the operator step, beside the chapter's, and why they differ
    op_s = s if s.step_method == StepMethod.OPERATOR else s.with_(
        step_method=StepMethod.OPERATOR.value)
    d = evaluate(op_s, [c]).decode
    op = float(d.step_ms[0])
    og = None if dg is None else dg if op_s is s else draft_gain(op_s, [c])
    per_tok = 1.0 if og is None else og.draft.acceptance_length  # F12: the verify pass's parts
    steps.append(MathStep(
        key="operator_step",
        formula="t_step = t0 + max(W / (BW eta_w), 2 P C / (F eff)) + max(C KV / (BW eta_kv), "
                "C A / F, KV b_sat / (BW eta_kv)) + comm + t_seq C   (A = 4 layers heads "
                "head_dim L)" + ("; with the draft: (t_step + t_draft) / tau" if og else ""),
        substituted=f"{_n(t0)} + {_n(float(d.gemm_ms[0]) * per_tok)} + "
                    f"{_n(float(d.attention_ms[0]) * per_tok)}" + (f" + {_n(comm)}" if comm else "")
                    + (f" + {_n(s.seq_overhead_ms * c_rep)}" if s.seq_overhead_ms else "")
                    + (f" + {_n(s.batched_overhead_ms)} (t_b, two or more sequences)"
                       if s.batched_overhead_ms and c_rep > 1 else "")
                    + ("" if og is None else f" = {_n(float(og.verify_ms[0]))}; " + per_token_text(
                        float(og.verify_ms[0]), float(og.draft_ms[0]), per_tok))
                    + f" = {_n(op)} ms ({s.step_method} method in use: {_n(step)} ms)",
        value=op, unit="ms", note=method_note(s, c) or ""))
    # F6: prefill
    lin = float(ev.ttft_linear_s.flat[0])
    ttft = float(ev.ttft_s.flat[0])
    pre = float(ev.prefill_s.flat[0])
    attn = float(ev.prefill.attention_flops.flat[0])
    # a request latency outside the GPU (`Scenario.request_latency_ms`) comes on top
    outside = (f"; + {_n(s.request_latency_ms)} ms outside the GPU (request latency) -> "
               f"{_n(ttft)} s" if s.request_latency_ms > 0 else "")
    mfu_text = prompt_mfu_text(s)
    if counts_as_engines(s.step_method):
        # F6b: the embedding lookup is free and the output head runs at the last position only
        body = m.params_active_b - m.lookup_params_b - m.head_params_b
        steps.append(MathStep(
            key="ttft", formula="TTFT = (2 x (P - lookup - head) x L + 2 x head) / (F x MFU)  "
                                "(+ attention ~ 2 x layers x q_heads x head_dim x L^2; F6b)",
            substituted=f"(2 x {_n(body * 1e9)} x {s.prompt:,} + 2 x "
                        f"{_n(m.head_params_b * 1e9)}) / ({_n(f_tot * TERA)} x {mfu_text}) = "
                        f"{_n(lin)} s; + {_n(attn)} FLOP attention -> {_n(pre)} s{outside}",
            value=ttft, unit="s", note=prefill_method_note(s)))
    else:
        steps.append(MathStep(
            key="ttft", formula="TTFT = 2 x P x L / (F x MFU)  (+ attention ~ 2 x layers x "
                                "q_heads x head_dim x L^2)",
            substituted=f"2 x {_n(m.params_active_b * 1e9)} x {s.prompt:,} / "
                        f"({_n(f_tot * TERA)} x {mfu_text}) = {_n(lin)} s; + {_n(attn)} FLOP "
                        f"attention -> {_n(pre)} s{outside}", value=ttft, unit="s"))
    # F7: cost
    agg = float(ev.aggregate_tok_s[0])
    cost = float(ev.cost_per_mtok[0])
    steps.append(MathStep(
        key="cost", formula="cost per M tokens = price x GPUs paid / (aggregate tok/s x 3600) x 1e6",
        substituted=f"{_n(s.price_per_hour)} x {s.paid_gpus} / ({_n(agg)} x 3600) x 1e6 = "
                    f"{s.currency} {_n(cost)}", value=cost, unit=s.currency))
    # F5: crossover
    cross = ev.crossover_concurrency
    steps.append(MathStep(
        key="crossover", formula="C* = (W / BW) / (2P / (F x eff) - KV_request / BW)",
        substituted="denominator <= 0: bandwidth binds at every C" if cross is None
        else f"C* = {_n(cross)}", value=math.nan if cross is None else cross,
        unit="requests"))
    return tuple(steps)


def method_note(s: Scenario, concurrency: int) -> Note | None:
    """Why the chapter's step (F4) and the operator step (F4b) differ at this concurrency, or
    None where they agree (within 0.5 %): the weight GEMMs turn compute-bound while attention
    still reads KV (the kernels run one after the other, so the step is their sum, not the
    max), or the operator-only knobs (attention floor, per-sequence overhead, eta_kv).
    The chapter's table at 100 x 8K: GEMMs 10.9 ms (compute) + attention 26.6 ms (KV) =
    37.5 ms against max(32.3, 10.9) = 32.3 ms."""
    c = float(concurrency)
    chapter = evaluate(s.with_(step_method=StepMethod.CHAPTER.value), [c]).decode
    operator = evaluate(s.with_(step_method=StepMethod.OPERATOR.value), [c]).decode
    ch, op = float(chapter.step_ms[0]), float(operator.step_ms[0])
    if abs(op - ch) <= 0.005 * ch:
        return None
    if op < ch:  # only the untied embedding table can make the operator step shorter
        table_gb = s.lookup_gb_per_gpu  # bytes, as the step
        return Note(f"the operator step does not read the input embedding table ({table_gb:.3g} "
                    f"GB of the weights, separate from the output head): engines look up one "
                    f"row per sequence ({op:.3g} ms against {ch:.3g} ms)",
                    code="method_embedding", gb=round(table_gb, 3), op=round(op, 3),
                    ch=round(ch, 3))
    gemm, attn = float(operator.gemm_ms[0]), float(operator.attention_ms[0])
    w_ms = float(operator.weight_read_bytes[0]) / (s.bandwidth_gb_s * GB * s.eta_bw) * 1e3
    if gemm > w_ms * (1 + 1e-9):
        return Note(f"the weight GEMMs are compute-bound here ({gemm:.3g} ms) while attention "
                    f"reads the KV cache ({attn:.3g} ms): the kernels run one after the other, "
                    f"so the operator step is their sum ({op:.3g} ms), not the chapter's max of "
                    f"all bytes and all FLOPs ({ch:.3g} ms)", code="method_gemm_compute",
                    gemm=round(gemm, 3), attn=round(attn, 3), op=round(op, 3), ch=round(ch, 3))
    return Note(f"the operator step adds what the chapter's leaves out: the small-batch "
                f"attention floor, per-sequence overhead and KV-read efficiency ({op:.3g} ms "
                f"against {ch:.3g} ms)", code="method_knobs", op=round(op, 3), ch=round(ch, 3))


def prefill_method_note(s: Scenario) -> Note | str:
    """Why the operator prefill (F6b) is shorter than the chapter's F6 for this model: the
    embedding lookup computes nothing and the output head runs at the last prompt position
    only, so per prompt token (lookup + head) fewer parameters are multiplied. '' for no
    difference (an entry whose embeddings do not fit its parameters)."""
    m = s.model
    saved = m.lookup_params_b + m.head_params_b
    if saved <= 0:
        return ""
    share = saved / m.params_active_b
    return Note(f"F6b multiplies {m.params_active_b - saved:.3g} B of the {m.params_active_b:.3g} "
                f"B parameters per prompt token: the input embedding is a lookup and the output "
                f"head ({m.head_params_b:.3g} B) turns only the last position into logits "
                f"({share:.0%} fewer FLOPs than the chapter's 2 x P x L)",
                code="method_prefill", body=round(m.params_active_b - saved, 3),
                p=round(m.params_active_b, 3), head=round(m.head_params_b, 3),
                share=round(share * 100))


TABLE_COLUMNS: Final = ("concurrency", "context_tokens", "kv_total_gb", "subtotal_gb",
                        "usable_gb", "verdict", "ttft_s", "tpot_ms", "tok_s_per_request",
                        "aggregate_tok_s", "cost_per_mtok", "slo")
"""Columns of `table_records`, in order (units in the names; `verdict` is F8's, `slo` is
'pass' when TTFT, TPOT and cost all meet their targets, else 'fail')."""


def table_records(s: Scenario, rows: Sequence[tuple[int, int]], targets: Targets
                  ) -> list[dict[str, Any]]:
    """The capacity table (F8) for concurrency x context rows, with the SLO check beside the
    memory verdict. The chapter's rows 10/50/100 x 8K: fits / tight / does_not_fit."""
    out: list[dict[str, Any]] = []
    for r in capacity_table(s, rows):
        ok = (r.ttft_s * 1e3 <= targets.ttft_ms and r.tpot_ms <= targets.tpot_ms
              and (targets.cost_per_mtok <= 0 or r.cost_per_mtok <= targets.cost_per_mtok))
        out.append({
            "concurrency": r.concurrency, "context_tokens": r.context_tokens,
            "kv_total_gb": r.kv_total_bytes / GB, "subtotal_gb": r.vram_subtotal_bytes / GB,
            "usable_gb": r.usable_bytes / GB, "verdict": r.verdict.value, "ttft_s": r.ttft_s,
            "tpot_ms": r.tpot_ms, "tok_s_per_request": r.tok_s_per_request,
            "aggregate_tok_s": r.aggregate_tok_s, "cost_per_mtok": r.cost_per_mtok,
            "slo": Status.PASS.value if ok else Status.FAIL.value,
        })
    return out
