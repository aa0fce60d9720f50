"""The scorecard's disaggregated prefill/decode section (`capacity validate`, docs/accuracy.md,
"Disaggregated prefill/decode"): published P/D deployments, and the aggregated baselines their
sources ran beside them, against the project's models (docs/disaggregation.md).

Each row of data/reference/disagg.csv (`load_rows`) is one measured figure of one deployment:
a disaggregated one (prefill pool TP_p x X, decode pool TP_d x Y, a link) or an aggregated one
(TP x replicas, both phases on every replica), at a closed-loop concurrency or an arrival rate.
The row is predicted by

- disaggregated: the two-pool event model (`capacity.plan.events_disagg`: `two_pools`,
  `simulate_two_pools`) with one prefill and one decode scenario of the row's model, weights,
  KV precision and GPU, the hand-over of `capacity.plan.disagg_handover` (`handover_bytes` at
  each pool's TP, `transfer_ms` over the row's link: the scale-up fabric by `link_for`, or the
  stated scale-out NIC per GPU; the decode rank's descriptors, and the admission steps at the
  decode step of the row's load);
- aggregated: the one-pool event model (`capacity.plan.events.simulate`) per replica, the
  load split evenly (closed loop: ceil(C / replicas) clients each; open: rate / replicas);

on two bases: the spec sheet (`scenario_with_basis(s, 'spec')`: every efficiency at peak, no
overheads, `Link.spec`: the link at line rate with no latency, descriptor cost or admission
delay) and the typical basis of the row's engine (`planning.typical_basis_for`: 'typical:sglang'
for SGLang's rows, with its request latency outside the GPU, else 'typical:vllm'; the
planner's typical knobs from data/engines.toml; the link at the planner's defaults of
`capacity.plan.disagg_handover`).
The engine's scheduling is the row's profile (data/engines.toml `[profile.*]`). Error =
predicted / measured - 1. The spec
sheet must be an upper bound: throughput at or above, latency at or below the measured (a
closed loop's latency: or a request rate at or above the measured, `DisaggCheck.rate_bounded`). A
throughput measured at a set arrival rate is the rate, not a speed: such rows are not scored
(their latency rows are).

Where a source runs both kinds on the same GPUs and names a winner on one metric, the group is
also checked two ways: the models' own winner on that metric (typical basis), and
`capacity.plan.disagg.compare`'s winner for the source's workload at a load and SLOs the
source's winner met: the winner's measured request rate, its mean TTFT and TPOT as p50 SLOs,
the source's GPU and GPU count (the loser missed one of those SLOs on the same GPUs).
Nothing here is fitted to these rows.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final

import numpy as np

from capacity import workspace
from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError, InputError
from capacity.fit.planning import scenario_with_basis, typical_basis_for, with_basis
from capacity.fit.validate import ErrorsByMetric, Spread, relative_error
from capacity.fit.validate_ep import END as EP_END
from capacity.fit.validate_report import (
    between_markers,
    csv_number,
    error_cells,
    jsonable,
    not_scored_lines,
    write_between_markers,
)
from capacity.fit.validate_report import fmt_or_dash as _f
from capacity.model.forward_pass import as_released, scheduled_as_released
from capacity.model.output_lengths import maxent_lengths
from capacity.model.scenario import Scenario, make_scenario
from capacity.model.workload import Workload
from capacity.plan.disagg import (
    Link,
    compare,
    decode_load,
    handover_bytes,
    link_for,
    transfer_ms,
)
from capacity.plan.disagg_handover import descriptors_per_rank
from capacity.plan.events import service_from_scenario, simulate
from capacity.plan.events_disagg import simulate_two_pools, two_pools
from capacity.plan.options import PlanInputs, Slo

ROWS_FILE: Final = "disagg.csv"
TARGET_ERROR: Final = 0.25
"""Issue 27's target: the typical basis within 25 % median of the rows' throughput per GPU."""
TYPICAL_BASIS: Final = "typical:vllm"
"""The typical basis of the rows whose engine has none of its own (`typical_basis_for`):
the basis the planner plans with when no calibration exists (data/engines.toml [vllm])."""
BASES: Final = ("spec", "typical")
BEGIN: Final = "<!-- validate-disagg:begin -->"
END: Final = "<!-- validate-disagg:end -->"
"""Markers of this section's generated part of docs/accuracy.md."""
MODES: Final = ("disaggregated", "aggregated")
THROUGHPUT: Final = "output_tok_s_per_gpu"
METRICS: Final = {THROUGHPUT: "tok/s per GPU", "ttft_mean_ms": "ms", "tpot_mean_ms": "ms",
                  "itl_mean_ms": "ms", "e2e_mean_ms": "ms"}
"""Metric -> unit. Only the throughput is better higher."""
MIN_REQUESTS: Final = 400
"""Requests each simulation runs at least (20 x the clients when more); 10 % warm-up."""
COLUMNS: Final = ("id", "group", "mode", "model", "weights", "kv_dtype", "gpu",
                  "gpu_source_name", "prefill_tp", "prefill_replicas", "decode_tp",
                  "decode_replicas", "link_kind", "link_gbit_s", "prompt_tokens",
                  "output_tokens", "concurrency", "rate_per_s", "metric", "value",
                  "source_winner", "winner_metric", "engine", "profile", "source", "as_of",
                  "notes")
OPTIONAL_COLUMNS: Final = ("num_prompts", "output_cap")
"""Columns a file may leave out (`DisaggRow.num_prompts`, `DisaggRow.output_cap`)."""


@dataclass(frozen=True, kw_only=True)
class DisaggRow:
    """One published measurement of data/reference/disagg.csv. Aggregated rows give their
    replicas in `decode_tp` x `decode_replicas` (no prefill pool)."""

    id: str
    group: str
    mode: str
    model: str
    weights: str
    kv_dtype: str
    gpu: str
    gpu_source_name: str
    prefill_tp: int | None
    prefill_replicas: int | None
    decode_tp: int
    decode_replicas: int
    link_kind: str
    link_gbit_s: float | None
    """Scale-out line rate per GPU, Gb/s (None: data/nodes.toml's, or the scale-up fabric)."""
    prompt_tokens: int
    output_tokens: int
    concurrency: int | None
    rate_per_s: float | None
    num_prompts: int | None = None
    """A closed loop's whole run of this many requests, every one counted (a benchmark run's
    drain included); None: a steady state (`MIN_REQUESTS`, 10 % warm-up)."""
    output_cap: int | None = None
    """The requests' max tokens when they stop at end-of-sequence (`output_tokens` is then
    their stated mean; `capacity.model.output_lengths.maxent_lengths`); None: every request
    generates `output_tokens`."""
    metric: str
    value: float
    source_winner: str
    winner_metric: str
    engine: str
    profile: str
    source: str
    as_of: str
    notes: str

    @property
    def gpus(self) -> int:
        """GPUs of the deployment (both pools)."""
        return (self.prefill_tp or 0) * (self.prefill_replicas or 0) \
            + self.decode_tp * self.decode_replicas

    @property
    def layout(self) -> str:
        """'4P(TP1)+1D(TP4)' or '2 x TP4'."""
        if self.mode == "aggregated":
            return f"{self.decode_replicas} x TP{self.decode_tp}"
        return (f"{self.prefill_replicas}P(TP{self.prefill_tp})+"
                f"{self.decode_replicas}D(TP{self.decode_tp})")

    @property
    def load(self) -> str:
        """'C=16' or '45 req/s'."""
        return f"C={self.concurrency}" if self.concurrency is not None \
            else f"{self.rate_per_s:g} req/s"


def parse_row(r: dict[str, str], where: str) -> DisaggRow:
    """One raw CSV row checked into a DisaggRow (InputError naming `where` and the column)."""
    missing = [c for c in COLUMNS if c not in r]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}")
    mode, metric = r["mode"].strip(), r["metric"].strip()
    if mode not in MODES:
        raise InputError(f"{where}: mode must be one of {', '.join(MODES)}, got '{mode}'")
    if metric not in METRICS:
        raise InputError(f"{where}: metric must be one of {', '.join(METRICS)}, got '{metric}'")
    dis = mode == "disaggregated"
    p_tp = csv_number(r, "prefill_tp", where, required=dis)
    p_rep = csv_number(r, "prefill_replicas", where, required=dis)
    if not dis and (p_tp is not None or p_rep is not None):
        raise InputError(f"{where}: an aggregated row has no prefill pool (give its replicas "
                         "in decode_tp x decode_replicas)")
    conc = csv_number(r, "concurrency", where, required=False)
    rate = csv_number(r, "rate_per_s", where, whole=False, required=False)
    if (conc is None) == (rate is None):
        raise InputError(f"{where}: give exactly one of concurrency and rate_per_s")
    prompts = csv_number(r, "num_prompts", where, required=False) if "num_prompts" in r else None
    cap = csv_number(r, "output_cap", where, required=False) if "output_cap" in r else None
    if (prompts is None) != (cap is None):
        raise InputError(f"{where}: give both num_prompts and output_cap (a run whose requests "
                         "stop at end-of-sequence) or neither")
    if cap is not None and prompts is not None:
        if not dis or conc is None:
            raise InputError(f"{where}: num_prompts and output_cap are modelled for a "
                             "disaggregated closed loop only")
        if not 10 <= prompts <= 100_000:
            raise InputError(f"{where}: num_prompts must be 10..100,000, got {prompts}")
        out = csv_number(r, "output_tokens", where)
        if not 1 <= out <= cap:
            raise InputError(f"{where}: output_tokens (the mean, {out}) must be 1..output_cap "
                             f"({cap})")
    winner = r["source_winner"].strip()
    if winner and (winner not in MODES or r["winner_metric"].strip() not in METRICS):
        raise InputError(f"{where}: source_winner must be one of {', '.join(MODES)} with a "
                         f"winner_metric of {', '.join(METRICS)}")
    return DisaggRow(
        id=r["id"].strip(), group=r["group"].strip(), mode=mode, model=r["model"].strip(),
        weights=r["weights"].strip(), kv_dtype=r["kv_dtype"].strip(), gpu=r["gpu"].strip(),
        gpu_source_name=r["gpu_source_name"], prefill_tp=p_tp, prefill_replicas=p_rep,
        decode_tp=csv_number(r, "decode_tp", where), decode_replicas=csv_number(r, "decode_replicas", where),
        link_kind=r["link_kind"].strip(),
        link_gbit_s=csv_number(r, "link_gbit_s", where, whole=False, required=False),
        prompt_tokens=csv_number(r, "prompt_tokens", where),
        output_tokens=csv_number(r, "output_tokens", where), concurrency=conc, rate_per_s=rate,
        num_prompts=prompts, output_cap=cap, metric=metric,
        value=csv_number(r, "value", where, whole=False), source_winner=winner,
        winner_metric=r["winner_metric"].strip(), engine=r["engine"],
        profile=r["profile"].strip() or "vllm", source=r["source"], as_of=r["as_of"],
        notes=r["notes"])


def load_rows(path: Path | None = None) -> list[DisaggRow]:
    """Every row of the published P/D measurements (data/reference/disagg.csv), checked:
    InputError naming the file, line and column of the first bad row."""
    p = path or workspace.bundled_data_dir() / "reference" / ROWS_FILE
    with p.open(encoding="utf-8", newline="") as fh:
        return [parse_row(r, f"{p.name} line {i}")
                for i, r in enumerate(csv.DictReader(fh), start=2)]


# -- the predictions ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Predicted:
    """One deployment at the row's load on one basis (event model, means over the counted
    requests): every metric of METRICS, and the hand-over (ms, 0 aggregated)."""

    output_tok_s_per_gpu: float
    ttft_mean_ms: float
    tpot_mean_ms: float
    itl_mean_ms: float
    e2e_mean_ms: float
    request_rate_per_s: float
    transfer_ms: float
    link: str

    def metric(self, name: str) -> float:
        return float(getattr(self, name))


def _scenario(r: DisaggRow, tp: int, basis: str, catalog: Catalog) -> Scenario:
    """One replica (TP GPUs) of the row's model on its GPU, KV held at prompt + output."""
    s = make_scenario(r.model, r.gpu, catalog=catalog, weights=r.weights, n_gpus=tp, tp=tp,
                      context_tokens=r.prompt_tokens + r.output_tokens,
                      prompt_tokens=r.prompt_tokens, kv_dtype=r.kv_dtype)
    if basis == "spec":   # the release's scheduling, no speed knob
        return scheduled_as_released(scenario_with_basis(s, "spec"), engine_profile(r.profile),
                                     version=r.engine, date=r.as_of)
    # as the row's release ran it (`as_released`: SGLang's prefill passes before 0.5.10, its
    # version or its run's date), the spec sheet staying the bound
    return as_released(scenario_with_basis(s, typical_basis_for(r.profile)),
                       engine_profile(r.profile), version=r.engine, date=r.as_of)


def row_link(r: DisaggRow, basis: str, catalog: Catalog) -> Link:
    """The hand-over's link: `link_for` (the scale-up fabric when both pools fit one NVLink
    domain, else data/nodes.toml's NIC), or the row's stated scale-out NIC (Gb/s per GPU / 8 =
    GB/s). Typical: the planner's defaults (`capacity.plan.disagg_handover`: efficiency,
    latency, descriptor cost, admission steps); spec sheet: `Link.spec` (line rate, none of
    the overheads)."""
    g = catalog.gpu(r.gpu)
    if r.link_gbit_s is not None:
        bw = r.link_gbit_s / 8
        link = Link(kind=r.link_kind or "scale-out", send_gb_s=bw, recv_gb_s=bw)
    else:
        link = link_for(g, g, pool_gpus=r.gpus)
    return link.spec() if basis == "spec" else link


def _requests(clients: int) -> int:
    return max(MIN_REQUESTS, 20 * clients)


def predict(r: DisaggRow, basis: str, catalog: Catalog | None = None) -> Predicted:
    """Row `r`'s deployment at its load on `basis` ('spec' or 'typical'), by the event models
    (module docstring). Throughput per GPU = output tok/s of the deployment / its GPUs; mean
    E2E = mean TTFT + mean TPOT x (output - 1) (exact for means); a disaggregated ITL is its
    TPOT (no prompt runs between a decode pool's steps)."""
    cat = catalog or default_catalog()
    n_out = r.output_tokens
    if r.mode == "disaggregated":
        assert r.prefill_tp is not None and r.prefill_replicas is not None
        sp = _scenario(r, r.prefill_tp, basis, cat)
        sd = _scenario(r, r.decode_tp, basis, cat)
        link = row_link(r, basis, cat)
        pools = two_pools(sp, sd, output_tokens=n_out, transfer_ms=0.0,
                          prefill_replicas=r.prefill_replicas, decode_replicas=r.decode_replicas,
                          engine=r.profile)
        # the admission steps at the decode step of the row's load: a closed loop's clients
        # spread over the decode replicas (at most its slots), an open load's mean batch
        # by Little's law (decode_load)
        steps = np.asarray(pools.decode.step_ms, dtype=np.float64)
        if r.concurrency is not None:
            step = float(steps[min(math.ceil(r.concurrency / r.decode_replicas),
                                   steps.size - 1)])
        else:
            assert r.rate_per_s is not None
            step = decode_load(steps, r.rate_per_s / r.decode_replicas, n_out, 0.5).tpot_ms
            step = step if math.isfinite(step) else float(steps[-1])
        sent = handover_bytes(sp.model, r.kv_dtype, r.prompt_tokens, r.prefill_tp)
        got = handover_bytes(sd.model, r.kv_dtype, r.prompt_tokens, r.decode_tp)
        desc = descriptors_per_rank(sd.model, r.prompt_tokens)
        t = float(transfer_ms(send_bytes_per_gpu=sent, recv_bytes_per_gpu=got, link=link,
                              descriptors=desc, decode_step_ms=step))
        busy = float(link.busy_ms(sent, got, desc))
        pools = replace(pools, transfer_ms=t, transfer_latency_ms=t - busy)
        if r.output_cap is not None and r.num_prompts is not None:
            # the source's whole run: its requests, lengths that stop at end-of-sequence with
            # the stated mean, every request counted and the drain in its duration
            d = simulate_two_pools(pools, concurrency=r.concurrency, n_requests=r.num_prompts,
                                   warmup_fraction=0.0, output_lengths=maxent_lengths(
                                       r.output_tokens, r.output_cap, r.num_prompts))
        else:
            d = simulate_two_pools(pools, concurrency=r.concurrency, rate_per_s=r.rate_per_s,
                                   n_requests=_requests(r.concurrency or 0))
        return Predicted(output_tok_s_per_gpu=d.output_tok_s / r.gpus,
                         ttft_mean_ms=d.mean_ttft_ms, tpot_mean_ms=d.mean_tpot_ms,
                         itl_mean_ms=d.mean_tpot_ms, e2e_mean_ms=d.mean_e2e_ms,
                         request_rate_per_s=d.throughput_req_s, transfer_ms=t, link=link.kind)
    s = _scenario(r, r.decode_tp, basis, cat)
    svc = service_from_scenario(s, output_tokens=n_out, engine=r.profile)
    n = r.decode_replicas
    per = None if r.concurrency is None else math.ceil(r.concurrency / n)
    q = simulate(svc, concurrency=per, rate_per_s=None if r.rate_per_s is None
                 else r.rate_per_s / n, n_requests=_requests(per or 0), itl=True)
    tpot = (q.mean_e2e_ms - q.mean_ttft_ms) / max(n_out - 1, 1)
    return Predicted(output_tok_s_per_gpu=q.output_tok_s / r.decode_tp,
                     ttft_mean_ms=q.mean_ttft_ms, tpot_mean_ms=tpot,
                     itl_mean_ms=float(q.itl_mean_ms if q.itl_mean_ms is not None else tpot),
                     e2e_mean_ms=q.mean_e2e_ms, request_rate_per_s=q.throughput_req_s * n,
                     transfer_ms=0.0, link="-")


# -- the checks --------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class DisaggCheck:
    """One scored row: measured and predicted on each basis (the row's metric and unit)."""

    id: str
    group: str
    mode: str
    layout: str
    gpu: str
    load: str
    prompt_tokens: int
    output_tokens: int
    metric: str
    measured: float
    spec: float
    typical: float
    transfer_ms: float
    link: str
    source: str
    run: bool = False
    """Predicted as the source's whole run (`DisaggRow.num_prompts`, `output_cap`)."""
    spec_rate_per_s: float = math.nan
    typical_rate_per_s: float = math.nan
    """The spec sheet's and the typical basis' request rates at the row's load, requests/s."""
    measured_rate_per_s: float = math.nan
    """A closed loop's measured request rate, from its group's throughput row at the same
    mode and load (throughput per GPU x GPUs / output tokens); NaN for an open loop or
    where the source states no throughput."""

    def error(self, basis: str) -> float:
        """predicted / measured - 1 on 'spec' or 'typical'."""
        return relative_error(self.spec if basis == "spec" else self.typical, self.measured)

    @property
    def bounded(self) -> bool:
        """The spec sheet is the fast side: throughput at or above, latency at or below; or,
        for a latency of a closed loop, a request rate at or above the measured one
        (`rate_bounded`)."""
        if self.metric == THROUGHPUT:
            return self.spec >= self.measured
        return self.spec <= self.measured or self.rate_bounded

    @property
    def rate_bounded(self) -> bool:
        """A closed loop's latency above the measured one while the spec sheet serves at
        least the measured request rate: in a closed loop a phase's latency is not monotone
        in speed (clients a faster decode sends back sooner wait longer at a saturated
        prefill stage), only the rate is; the bound on a latency holds at equal load."""
        return (self.metric != THROUGHPUT and math.isfinite(self.measured_rate_per_s)
                and self.spec > self.measured
                and self.spec_rate_per_s >= self.measured_rate_per_s)


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A row not scored, and why."""

    id: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One source's aggregated-against-disaggregated comparison and the project's answers."""

    group: str
    metric: str
    source_winner: str
    measured: dict[str, float]
    """Mode -> the source's figure on `metric`."""
    typical: dict[str, float]
    """Mode -> the typical basis's prediction on `metric`."""
    model_winner: str
    compare_winner: str
    compare_reason: str

    @property
    def model_agrees(self) -> bool:
        return self.model_winner == self.source_winner

    @property
    def compare_agrees(self) -> bool:
        return self.compare_winner == self.source_winner


@dataclass(frozen=True, kw_only=True)
class DisaggScorecard(ErrorsByMetric):
    checks: tuple[DisaggCheck, ...]
    skipped: tuple[Skipped, ...]
    verdicts: tuple[Verdict, ...]

    @property
    def bounded(self) -> int:
        return sum(c.bounded for c in self.checks)

    @property
    def rate_bounded(self) -> int:
        return sum(c.rate_bounded for c in self.checks)

    @property
    def throughput_rows(self) -> int:
        return sum(c.metric == THROUGHPUT for c in self.checks)

    @property
    def target_met(self) -> bool:
        """The typical basis's median |error| on throughput per GPU is within TARGET_ERROR."""
        m = self.error("typical", THROUGHPUT).median
        return math.isfinite(m) and m <= TARGET_ERROR


def skip_reason(r: DisaggRow, catalog: Catalog) -> str:
    """Why row `r` cannot be scored ('' when it can)."""
    try:
        catalog.gpu(r.gpu)
        catalog.variant(r.model, r.weights)
    except CapacityError as exc:
        return f"not in the catalog ({exc})"
    if r.metric == THROUGHPUT and r.rate_per_s is not None:
        return ("throughput at a set arrival rate is the rate, not a speed (its latency rows "
                "are scored)")
    return ""


def _measured_rate(r: DisaggRow, rows: Sequence[DisaggRow]) -> float:
    """A closed-loop row's measured request rate, requests/s: its group's throughput row at
    the same mode and load, per GPU x GPUs / output tokens (NaN: open loop, or none stated).
    Example: 351 tok/s per GPU x 8 GPUs / 62 output tokens = 45.3 requests/s."""
    if r.concurrency is None:
        return math.nan
    for o in rows:
        if (o.group, o.mode, o.concurrency, o.metric) == (r.group, r.mode, r.concurrency,
                                                          THROUGHPUT):
            return o.value * o.gpus / o.output_tokens
    return math.nan


def _winner(metric: str, by_mode: dict[str, float]) -> str:
    """The better mode on `metric`: higher throughput, lower latency."""
    a, d = by_mode["aggregated"], by_mode["disaggregated"]
    better_d = d > a if metric == THROUGHPUT else d < a
    return "disaggregated" if better_d else "aggregated"


def _slo_metric(rows: list[DisaggRow]) -> str:
    return next((m for m in ("tpot_mean_ms", "itl_mean_ms") if any(r.metric == m for r in rows)),
                "")


def compare_inputs(rows: list[DisaggRow]) -> PlanInputs:
    """`compare`'s inputs for one source group (typical basis): its model, GPU, weights and KV
    precision, at most its GPU count, the prompt and output lengths, at the source winner's
    measured request rate (closed loop: throughput x GPUs / output tokens; open: the stated
    rate), with the winner's measured mean TTFT and TPOT (or ITL) as p50 SLOs."""
    win = [r for r in rows if r.mode == r.source_winner]
    r0 = win[0]
    got = {r.metric: r.value for r in win}
    tpot = got.get("tpot_mean_ms", got.get("itl_mean_ms"))
    if "ttft_mean_ms" not in got or tpot is None:
        raise InputError(f"{r0.group}: the winner's rows need a mean TTFT and a mean TPOT or ITL")
    if r0.rate_per_s is not None:
        rate = r0.rate_per_s
    elif THROUGHPUT in got:
        rate = got[THROUGHPUT] * r0.gpus / r0.output_tokens
    else:
        raise InputError(f"{r0.group}: a closed-loop winner needs its throughput row")
    inp = PlanInputs(
        model=r0.model, workload=Workload(
            rate_per_s=rate, prompt_tokens=r0.prompt_tokens, output_tokens=r0.output_tokens,
            context_tokens=r0.prompt_tokens + r0.output_tokens, headroom=0.0),
        slo=Slo(ttft_ms=got["ttft_mean_ms"], tpot_ms=tpot, quantile=0.5), gpus=(r0.gpu,),
        formats=(r0.weights,), kv_dtypes=(r0.kv_dtype,), max_gpus=max(r.gpus for r in rows),
        engine=r0.profile, currency="USD")
    return with_basis(inp, typical_basis_for(r0.profile))


def verdicts(rows: list[DisaggRow], checks: Iterable[DisaggCheck],
             catalog: Catalog) -> list[Verdict]:
    """Every group with a source_winner and both modes on its winner_metric."""
    by_id = {c.id: c for c in checks}
    out: list[Verdict] = []
    for group in dict.fromkeys(r.group for r in rows if r.source_winner):
        rs = [r for r in rows if r.group == group]
        metric = rs[0].winner_metric
        on = {r.mode: r for r in rs if r.metric == metric and r.id in by_id}
        if set(on) != set(MODES):
            continue
        c = compare(compare_inputs(rs), catalog)
        out.append(Verdict(
            group=group, metric=metric, source_winner=rs[0].source_winner,
            measured={m: on[m].value for m in MODES},
            typical={m: by_id[on[m].id].typical for m in MODES},
            model_winner=_winner(metric, {m: by_id[on[m].id].typical for m in MODES}),
            compare_winner=c.winner, compare_reason=c.reason))
    return out


def disagg_scorecard(rows: Iterable[DisaggRow] | None = None,
                     catalog: Catalog | None = None) -> DisaggScorecard:
    """Score every row (default: data/reference/disagg.csv); rows of one deployment and load
    share one simulation per basis."""
    cat = catalog or default_catalog()
    rows = list(load_rows() if rows is None else rows)
    checks: list[DisaggCheck] = []
    skipped: list[Skipped] = []
    runs: dict[tuple[Any, ...], Predicted] = {}
    for r in rows:
        why = skip_reason(r, cat)
        if not why:
            try:
                pred = {}
                for b in BASES:
                    key = (b, r.mode, r.model, r.weights, r.kv_dtype, r.gpu, r.prefill_tp,
                           r.prefill_replicas, r.decode_tp, r.decode_replicas, r.link_kind,
                           r.link_gbit_s, r.prompt_tokens, r.output_tokens, r.concurrency,
                           r.rate_per_s, r.profile)
                    if key not in runs:
                        runs[key] = predict(r, b, cat)
                    pred[b] = runs[key]
                checks.append(DisaggCheck(
                    id=r.id, group=r.group, mode=r.mode, layout=r.layout, gpu=r.gpu,
                    load=r.load, prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens,
                    metric=r.metric, measured=r.value, spec=pred["spec"].metric(r.metric),
                    typical=pred["typical"].metric(r.metric),
                    transfer_ms=pred["typical"].transfer_ms, link=pred["typical"].link,
                    source=r.source, run=r.output_cap is not None,
                    spec_rate_per_s=pred["spec"].request_rate_per_s,
                    typical_rate_per_s=pred["typical"].request_rate_per_s,
                    measured_rate_per_s=_measured_rate(r, rows)))
            except CapacityError as exc:
                why = str(exc)
        if why:
            skipped.append(Skipped(id=r.id, reason=why))
    return DisaggScorecard(checks=tuple(checks), skipped=tuple(skipped),
                           verdicts=tuple(verdicts(rows, checks, cat)))


# -- written out: Markdown (docs/accuracy.md), JSON -------------------------------------------
def _v(v: float) -> str:
    return _f(v, ",.1f" if abs(v) < 100 else ",.0f")


def issue_rows(card: DisaggScorecard, ep_held_out: Sequence[float]) -> Spread:
    """Issue 27's target over every new published row it names: these rows' throughput per
    GPU on the typical basis and the wide-EP section's throughput per GPU, each EP row held
    out of the two knobs fitted to the others (`validate_ep`), |predicted / measured - 1|."""
    return Spread.of([*(abs(c.error("typical")) for c in card.checks if c.metric == THROUGHPUT),
                      *(abs(e) for e in ep_held_out)])


def markdown(card: DisaggScorecard, ep_held_out: Sequence[float] = ()) -> str:
    """The section as Markdown: the result, the error by basis and metric, every row, the
    comparisons, the rows not scored; with the wide-EP section's held-out throughput errors
    (`ep_held_out`), issue 27's target over both sections' rows (`issue_rows`)."""
    typ, spec = card.error("typical", THROUGHPUT), card.error("spec", THROUGHPUT)
    n_t = card.throughput_rows
    both = issue_rows(card, ep_held_out)
    together = (
        f" Over every new published row together, these {n_t} and the wide-EP section's "
        f"{len(ep_held_out)} (each held out of its knobs), {both.n} rows: median |error| "
        f"{_f(both.median, '.1%')} (target within {TARGET_ERROR:.0%}: "
        f"{'met' if both.median <= TARGET_ERROR else 'not met'})." if ep_held_out else "")
    lines = [
        "### Disaggregated prefill/decode", "",
        f"{len(card.checks)} rows of data/reference/disagg.csv (published P/D deployments and "
        "the aggregated baselines their sources ran on the same GPUs: NVIDIA Dynamo with vLLM on "
        "B200; llm-d on H200, on GKE and CoreWeave; SGLang with NIXL on H200, dstack's "
        "prefill/decode ratio sweep; Mooncake's vLLM and SGLang connectors) against the "
        "two-pool event model (capacity/plan/events_disagg.py, "
        "the hand-over of capacity/plan/disagg_handover.py) and, for aggregated rows, the one-pool event "
        "model; a row with `num_prompts` and `output_cap` as the whole run it was (its "
        f"requests, {sum(1 for c in card.checks if c.run)} rows: lengths that stop at "
        "end-of-sequence with the stated mean, every request counted, the drain in the "
        "duration; docs/disaggregation.md, \"A benchmark run's drain\"). Typical basis: the "
        "row's engine's (`typical:sglang` for SGLang's rows, else "
        f"`{TYPICAL_BASIS}`; data/engines.toml), as the row's release ran it (SGLang's runs "
        "before 0.5.10, by version or run date, with their prefill passes' per-layer "
        "launches; docs/method.md, \"Prefill without CUDA graphs\"). Throughput per GPU, "
        f"{n_t} rows: typical median |error| {_f(typ.median, '.1%')} (target: within "
        f"{TARGET_ERROR:.0%}: {'met' if card.target_met else 'not met'}), spec sheet median "
        f"{_f(spec.median, '.1%')} above.{together} The spec sheet is on the fast side of the measured "
        f"figure (throughput at or above, latency at or below) on {card.bounded} of "
        f"{len(card.checks)} rows" + (
            f" ({card.rate_bounded} of them closed-loop latencies above the measured while "
            "the spec sheet serves at least the measured request rate: in a closed loop a "
            "phase's latency is not monotone in speed, clients a faster decode sends back "
            "sooner wait longer at a saturated prefill stage; the bound holds at equal load)"
            if card.rate_bounded else "") + ". Nothing is fitted to these rows.", "",
        "| basis | metric | rows | median abs error | worst | median signed |",
        "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {basis} | {metric or 'all'} | {error_cells(errs)} |"
              for basis, metric, errs in card.error_table(BASES, METRICS)]
    lines += ["", "| row | layout | GPU | in / out | load | metric | measured | spec | error | "
              "typical | error | hand-over ms (link) |",
              "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for c in card.checks:
        hand = "-" if c.mode == "aggregated" else f"{c.transfer_ms:.1f} ({c.link})"
        lines.append(
            f"| {c.id} | {c.layout} | {c.gpu} | {c.prompt_tokens} / {c.output_tokens} | "
            f"{c.load} | {c.metric} | {_v(c.measured)} | {_v(c.spec)} | "
            f"{c.error('spec'):+.1%} | {_v(c.typical)} | {c.error('typical'):+.1%} | {hand} |")
    if card.verdicts:
        agree_m = sum(v.model_agrees for v in card.verdicts)
        agree_c = sum(v.compare_agrees for v in card.verdicts)
        lines += ["", f"Aggregated against disaggregated, {len(card.verdicts)} source "
                  f"comparisons on the same GPUs: the typical basis picks the source's winner on "
                  f"{agree_m}, `compare()` on {agree_c} (its inputs: the source winner's request "
                  "rate, mean TTFT and TPOT as p50 SLOs, the source's GPU and GPU count).", "",
                  "| group | metric | source's winner | measured agg / disagg | typical agg / "
                  "disagg | models' winner | compare() |", "|---|---|---|---|---|---|---|"]
        for v in card.verdicts:
            lines.append(
                f"| {v.group} | {v.metric} | {v.source_winner} | "
                f"{_v(v.measured['aggregated'])} / {_v(v.measured['disaggregated'])} | "
                f"{_v(v.typical['aggregated'])} / {_v(v.typical['disaggregated'])} | "
                f"{v.model_winner} | {v.compare_winner} |")
    lines += not_scored_lines([(s.id, s.reason) for s in card.skipped])
    return "\n".join(lines) + "\n"


def to_dict(card: DisaggScorecard, ep_held_out: Sequence[float] = ()) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None); with `ep_held_out`, `with_ep`: issue 27's
    target over both sections' throughput rows (`issue_rows`)."""
    both = issue_rows(card, ep_held_out)
    return dict(jsonable({
        "rows": len(card.checks), "throughput_rows": card.throughput_rows,
        "target": TARGET_ERROR, "target_met": card.target_met, "bounded": card.bounded,
        **({"with_ep": {"rows": both.n, "median": both.median,
                        "target_met": both.median <= TARGET_ERROR}} if ep_held_out else {}),
        "error": card.error_json(BASES, METRICS),
        "checks": [{**asdict(c), "error": {b: c.error(b) for b in BASES},
                    "bounded": c.bounded} for c in card.checks],
        "verdicts": [{**asdict(v), "model_agrees": v.model_agrees,
                      "compare_agrees": v.compare_agrees} for v in card.verdicts],
        "skipped": [asdict(s) for s in card.skipped]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after the wide expert-parallel section, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=EP_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
