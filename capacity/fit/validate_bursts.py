"""The scorecard's section of whole runs sent at once (`capacity validate`, docs/accuracy.md,
"Whole runs sent at once"): published benchmark runs whose client sent every request at the
start (`vllm bench serve` at its default request rate, `inf`, with no concurrency cap) against
the event model on the spec sheet and the engine's typical basis, with nothing fitted to them
(issue 25: engine priors from many published sweeps, vendor and lab performance pages).

A run sent at once is the deepest saturation a server sees: every request queues from the first
millisecond, the engine admits what its KV pool holds (a 32B model on one 80 GB card holds a
few 4K-token requests), and the rest wait for a slot. Its output tokens over its duration are
the deployment's throughput at the engine's own batch (a buyer's "how many tokens per second
does this card make"), its mean TTFT mostly the queue. The open-loop and closed-loop sections
stop below saturation; MLPerf's and TensorRT-LLM's Offline figures are a tuned engine's
steady capacity; these are the engines' defaults, run to the end, the drain included.

Each row of data/reference/bursts.csv (open_loop.csv's schema, `open_loop_rows.load_rows(
bursts=True)`: arrivals `burst`, the rate blank, the optional `output_cap`) is one figure of
one run: its output throughput (`output_tok_s`, the run's total), or a TTFT, TPOT, ITL or E2E
mean or median. The run is predicted as it ran (`predict`): the row's deployment
(`validate_open_loop.scenario_for`: its weights, KV, GPUs and TP, gpu_memory_utilization, its
release's scheduling), every request of a replica (ceil(requests / replicas)) from one burst on
an idle replica (`events.simulate` with every request at t = 0, all counted, the drain in the
duration), each request's own lengths where the run's varied (maximum-entropy lengths on 1..cap
with the run's mean, `prompt_lengths_of` and `OpenLoopRow.output_cap`).

The spec sheet is an upper bound where its throughput is at or above the measured figure and its
latencies at or below.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import CapacityError
from capacity.fit.open_loop_rows import BURST_METRICS, OpenLoopRow, load_rows
from capacity.fit.typical import typical_efficiency
from capacity.fit.validate import ErrorsByMetric, SpecTypicalCheck
from capacity.fit.validate_mlperf import TRTLLM_END
from capacity.fit.validate_open_loop import (
    Skipped,
    basis_text,
    prompt_lengths_of,
    scenario_for,
)
from capacity.fit.validate_open_loop import skip_reason as open_loop_skip_reason
from capacity.fit.validate_report import (
    between_markers,
    jsonable,
    not_scored_lines,
    spec_typical_error_lines,
    write_between_markers,
)
from capacity.fit.validate_report import fmt_or_dash as _f
from capacity.model.basis import TYPICAL_PREFIX
from capacity.model.output_lengths import maxent_run
from capacity.plan.events import simulate
from capacity.plan.service import ServiceModel
from capacity.plan.service_build import service_from_scenario

BEGIN: Final = "<!-- validate-bursts:begin -->"
END: Final = "<!-- validate-bursts:end -->"
"""Markers of this section's generated part of docs/accuracy.md (after TensorRT-LLM's)."""
BASES: Final = ("spec", "typical")
UNITS: Final = {"output_tok_s": "tokens/s", "ttft_ms": "ms", "tpot_ms": "ms", "itl_ms": "ms",
                "e2e_ms": "ms"}
CAPACITY_METRICS: Final = ("output_tok_s",)
"""The metrics where faster is larger (the spec sheet bounds them from above)."""


@dataclass(frozen=True, kw_only=True)
class BurstPrediction:
    """One run on one basis: each (metric, stat) the event model gives (tokens/s or ms), the
    requests a replica ran and the most it held at once."""

    basis: str
    values: dict[tuple[str, str], float]
    requests: int
    max_running: int

    def value(self, metric: str, stat: str) -> float:
        return self.values[(metric, stat)]


def output_lengths_of(r: OpenLoopRow, requests: int) -> tuple[int, ...] | None:
    """Each simulated request's output (tokens) where the run's outputs varied (a row's
    `output_cap`): the maximum-entropy lengths on 1..cap with the run's mean
    (`output_lengths.maxent_run`); None: every output at the mean."""
    if r.output_cap is None:
        return None
    return maxent_run(r.output_tokens, r.output_cap, requests)


def replica_requests(r: OpenLoopRow) -> int:
    """The requests one replica of row `r`'s run serves: ceil(requests / replicas)."""
    return math.ceil(r.requests / r.replicas)


def service(r: OpenLoopRow, basis: str, catalog: Catalog,
            expert_share: float | None = None) -> ServiceModel:
    """One replica of row `r`'s deployment on `basis` ('spec' or 'typical') as the event model
    serves it: `scenario_for` under the row's engine profile and stated knobs (scheduled one
    step ahead where the server ran --async-scheduling), each request's own prompt and output
    where the run's varied; `expert_share` as `scenario_for` takes it. CapacityError where it
    holds no request."""
    outs = output_lengths_of(r, replica_requests(r))
    s = scenario_for(r, basis, catalog, expert_share)
    if r.async_scheduling:   # vLLM's --async-scheduling, whatever the release's default
        s = s.with_(schedule_ahead=True)
    return service_from_scenario(s, output_tokens=r.output_tokens,
                                 engine=r.profile, max_num_seqs=r.max_num_seqs,
                                 chunk_tokens=r.token_budget,
                                 prompt_lengths=prompt_lengths_of(r, catalog),
                                 output_lengths=outs, prefix_caching=r.prefix_caching == "on")


def predict(r: OpenLoopRow, basis: str, catalog: Catalog | None = None,
            expert_share: float | None = None) -> BurstPrediction:
    """Row `r`'s run on `basis` ('spec' or 'typical') as it ran (module docstring): every
    request of a replica at t = 0 on an idle replica (a closed loop of as many clients as
    requests), all counted, the drain in the duration. Output throughput = the run's output
    tokens / its span x replicas; mean TPOT = each request's (E2E - TTFT) / (output - 1),
    averaged (vLLM's bench; for fixed lengths (mean E2E - mean TTFT) / (output - 1)).
    CapacityError where a replica cannot hold one request. `expert_share`: on the typical
    basis, the MoE expert GEMM share (`scenario_for`; None: the engines file's)."""
    cat = catalog or default_catalog()
    svc = service(r, basis, cat, expert_share)
    n = replica_requests(r)
    q = simulate(svc, concurrency=n, n_requests=n, warmup_fraction=0.0, itl=True)
    assert q.itl_ms is not None and q.itl_mean_ms is not None
    tpot_mean = (q.mean_tpot_ms if svc.output_lengths is not None
                 else (q.mean_e2e_ms - q.mean_ttft_ms) / max(r.output_tokens - 1, 1))
    return BurstPrediction(basis=basis_text(r, basis), requests=q.requests,
                           max_running=q.max_running, values={
        ("output_tok_s", "total"): q.output_tok_s * r.replicas,
        ("ttft_ms", "mean"): q.mean_ttft_ms, ("ttft_ms", "median"): q.ttft_ms[0.5],
        ("tpot_ms", "mean"): tpot_mean, ("tpot_ms", "median"): q.tpot_ms[0.5],
        ("itl_ms", "mean"): q.itl_mean_ms, ("itl_ms", "median"): q.itl_ms[0.5],
        ("e2e_ms", "mean"): q.mean_e2e_ms, ("e2e_ms", "median"): q.e2e_ms[0.5]})


@dataclass(frozen=True, kw_only=True)
class BurstCheck(SpecTypicalCheck):
    """One scored figure: measured and predicted on each basis (in the metric's unit)."""

    CAPACITY_METRICS: ClassVar[tuple[str, ...]] = CAPACITY_METRICS

    id: str
    run: str
    engine: str
    engine_version: str
    model: str
    weights: str
    gpu: str
    gpus: int
    tp: int
    dataset: str
    requests: int
    metric: str
    stat: str
    measured: float
    spec: float
    typical: float
    typical_basis: str
    held_at_once: int
    """The most requests a replica held at once on the typical basis (the engine's batch in
    the run: slots or the KV pool's)."""
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class BurstScorecard(ErrorsByMetric):
    checks: tuple[BurstCheck, ...]
    skipped: tuple[Skipped, ...]


def held_out_share(r: OpenLoopRow, basis: str) -> float | None:
    """The MoE expert GEMM share run `r` is scored with on `basis`: on the typical basis the
    one derived without its model's runs (`TypicalEfficiency.expert_share_for`, the share
    being solved on these runs, `capacity.fit.expert_share`); None (none) on the spec sheet."""
    text = basis_text(r, basis)
    if not text.startswith(TYPICAL_PREFIX):
        return None
    return typical_efficiency(text.removeprefix(TYPICAL_PREFIX)).expert_share_for(r.model)


def burst_scorecard(catalog: Catalog | None = None,
                    rows: list[OpenLoopRow] | None = None) -> BurstScorecard:
    """Every figure of data/reference/bursts.csv against its run's predictions (module
    docstring); a run whose replica holds no request of its lengths is not scored, and says
    why."""
    cat = catalog or default_catalog()
    checks: list[BurstCheck] = []
    skipped: list[Skipped] = []
    memo: dict[tuple[str, str], BurstPrediction | str] = {}
    for r in rows if rows is not None else load_rows(bursts=True):
        reason = open_loop_skip_reason(r, cat)   # not in the catalog
        got: dict[str, BurstPrediction] = {}
        for basis in BASES:
            if reason:
                break
            if (r.run, basis) not in memo:
                try:
                    memo[(r.run, basis)] = predict(r, basis, cat, held_out_share(r, basis))
                except CapacityError as exc:
                    memo[(r.run, basis)] = f"the model runs no request of it ({exc})"
            p = memo[(r.run, basis)]
            if isinstance(p, str):
                reason = p
            else:
                got[basis] = p
        if reason:
            skipped.append(Skipped(id=r.id, reason=reason))
            continue
        checks.append(BurstCheck(
            id=r.id, run=r.run, engine=r.engine, engine_version=r.engine_version,
            model=r.model, weights=r.weights, gpu=r.gpu, gpus=r.gpus, tp=r.tp,
            dataset=r.dataset, requests=r.requests, metric=r.metric, stat=r.stat,
            measured=r.value, spec=got["spec"].value(r.metric, r.stat),
            typical=got["typical"].value(r.metric, r.stat),
            typical_basis=got["typical"].basis, held_at_once=got["typical"].max_running,
            source=r.source))
    return BurstScorecard(checks=tuple(checks), skipped=tuple(skipped))


def _v(v: float) -> str:
    return _f(v, ",.1f" if abs(v) < 100 else ",.0f")


def _shares() -> str:
    """'0.315 over every MoE run; without deepseek-r1's 0.349, ...': vLLM's shares
    (data/engines.toml; SGLang's are the same)."""
    typ = typical_efficiency("vllm")
    held = ", ".join(f"{m}'s {v:g}" for m, v in sorted(typ.expert_gemm_held_out.items()))
    return f"{typ.expert_gemm_share:g} over every MoE run; without {held}"


def markdown(card: BurstScorecard) -> str:
    """The section as Markdown: the error by basis and metric, the spec sheet's bound, every
    figure, the rows not scored."""
    runs = sorted({c.run for c in card.checks})
    lines = [
        "### Whole runs sent at once (saturated)", "",
        f"{len(card.checks)} figures of {len(runs)} published benchmark runs whose client sent "
        "every request at the start (data/reference/bursts.csv: `vllm bench serve` at its "
        "default request rate, no concurrency cap; the engines' defaults) against the event "
        "model run as each run ran (`capacity.fit.validate_bursts`): every request of a "
        "replica at t = 0 on an idle replica, all counted, the drain in the duration, the "
        "engine admitting what its KV pool holds; each request's own lengths where the run's "
        "varied. Typical: the row's engine's basis (data/engines.toml), as its release ran. "
        f"One knob is solved on these rows, the typical basis' MoE expert GEMM share "
        f"(`capacity.fit.expert_share`, {_shares()}); each run is predicted with the share "
        "solved without its model's runs. Nothing else is fitted to them. The deepest "
        "saturation a server sees: the output "
        "throughput is the deployment's capacity at the engine's own batch, the mean TTFT "
        "mostly the queue behind the KV pool. No issue target rests on them (issue 25's are "
        "below saturation).", "",
        *spec_typical_error_lines(card, BASES, BURST_METRICS, larger="throughput")]
    lines += ["", "| figure | model | GPUs | engine | dataset | requests | held at once (typical) "
              "| metric | measured | spec | error | typical | error |",
              "|---|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for c in card.checks:
        layout = f"{c.gpus} x {c.gpu}" + (f" (TP {c.tp})" if c.tp > 1 else "")
        lines.append(
            f"| {c.id} | {c.model} {c.weights} | {layout} | {c.engine} {c.engine_version} | "
            f"{c.dataset} | {c.requests:,} | {c.held_at_once} | {c.stat} "
            f"{BURST_METRICS[c.metric]} ({UNITS[c.metric]}) | {_v(c.measured)} | "
            f"{_v(c.spec)} | {_f(c.error('spec'), '+.1%')} | {_v(c.typical)} | "
            f"{_f(c.error('typical'), '+.1%')} |")
    lines += not_scored_lines([(s.id, s.reason) for s in card.skipped])
    return "\n".join(lines) + "\n"


def to_dict(card: BurstScorecard) -> dict[str, Any]:
    """The section as JSON-ready data (NaN as None)."""
    bound, total = card.spec_bound
    return dict(jsonable({
        "figures": len(card.checks), "runs": len({c.run for c in card.checks}),
        "spec_bound": {"bounded": bound, "figures": total},
        "error": card.error_json(BASES, BURST_METRICS),
        "checks": [{**asdict(c), "error": {b: c.error(b) for b in BASES},
                    "spec_bounds": c.spec_bounds} for c in card.checks],
        "skipped": [asdict(s) for s in card.skipped]}))


def write_section(path: Path, generated: str) -> Path:
    """Put `generated` between this section's markers in `path`, keeping the rest; without the
    markers, right after TensorRT-LLM's section, else at the end."""
    return write_between_markers(path, generated, BEGIN, END, after=TRTLLM_END)


def section_of(text: str) -> str:
    """This section's generated part of a document ('' when it has none)."""
    return between_markers(text, BEGIN, END)
