"""One deployment, one answer (docs/method.md, "One deployment").

A `Deployment` is one value: the planner's inputs (model, workload and design load, SLOs,
basis, engine, prices, spares) and the one configuration chosen from them (GPU, weight format,
KV precision, TP, replicas). The planner ranks deployments, the quote prints them, the CLI's
JSON carries them (`record`), the URL encodes them (`capacity.report.urlstate`), and "Open in
Explorer" opens exactly one of them. Its figures (GPUs paid for, price per GPU-hour with its
source, cost per month, cost per million output tokens at the design load and at the
SLO-feasible capacity, TTFT and TPOT at the design load) have one computation: `assess` runs
the planner's own search on exactly this configuration, so every surface that shows a
deployment shows the planner's numbers for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from capacity.catalog.loader import Catalog, default_catalog
from capacity.errors import InputError
from capacity.model.basis import knobs_of
from capacity.plan.options import Option, PlanInputs
from capacity.plan.pricing import Price
from capacity.plan.search import node_layout, plan


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """The planner's inputs and one configuration of them."""

    inputs: PlanInputs
    gpu: str
    weights: str
    kv_dtype: str
    tp: int
    replicas: int
    """Copies of the model (each TP x PP GPUs)."""
    draft: str = ""
    """The speculative-decoding draft it runs ('eagle:3', `Option.draft`); '' = none."""
    pp: int = 1
    """Pipeline stages of each copy (F13; 1: none)."""

    def __post_init__(self) -> None:
        if self.tp < 1 or self.replicas < 1 or self.pp < 1:
            raise InputError(f"a deployment needs TP >= 1, PP >= 1 and replicas >= 1, got "
                             f"TP={self.tp}, PP={self.pp}, {self.replicas} replicas")

    @classmethod
    def of(cls, inputs: PlanInputs, o: Option) -> Deployment:
        """The deployment a planner option is."""
        return cls(inputs=inputs, gpu=o.gpu, weights=o.weights, kv_dtype=o.kv_dtype, tp=o.tp,
                   replicas=o.copies, draft=o.draft, pp=o.pp)

    @property
    def n_gpus(self) -> int:
        """Serving GPUs: replicas x TP x PP."""
        return self.replicas * self.tp * self.pp

    @property
    def spare_gpus(self) -> int:
        """GPUs of the N+1 spare replica (TP x PP GPUs with `PlanInputs.spare`, else 0)."""
        return self.tp * self.pp if self.inputs.spare else 0

    def price(self, catalog: Catalog | None = None) -> Price:
        """The price of one GPU-hour, with its source (`PlanInputs.price_of`)."""
        return self.inputs.price_of((catalog or default_catalog()).gpu(self.gpu))

    def narrowed(self) -> PlanInputs:
        """The planner's inputs searching this configuration's GPU, format, KV precision and
        draft up to its GPU count (the search `assess` runs)."""
        plain: dict[str, Any] = ({} if self.draft else
                                 {"acceptance_length": None, "acceptance_rate": None})
        return replace(self.inputs, gpus=(self.gpu,), formats=(self.weights,),
                       kv_dtypes=(self.kv_dtype,), max_gpus=max(self.n_gpus, 1),
                       drafts=(self.draft,) if self.draft else (), **plain)


def assess(d: Deployment, catalog: Catalog | None = None, *, checks_only: bool = False
           ) -> Option:
    """The planner's figures for exactly this deployment: `plan` over its one configuration
    (every check, feasible or not), so they are the planner's own for it (each configuration's
    numbers are computed alone, whatever is searched beside it). `checks_only`: `plan`'s."""
    p = plan(d.narrowed(), catalog, keep_all=True, checks_only=checks_only,
             only=(d.n_gpus, d.tp, d.pp))
    for o in p.all_options:
        if o.n_gpus == d.n_gpus and o.tp == d.tp and o.pp == d.pp and o.draft == d.draft:
            return replace(o, nodes=node_layout(o))
    at = f"TP={d.tp}" + (f" x PP={d.pp}" if d.pp > 1 else "")
    raise InputError(f"{d.n_gpus} x {d.gpu} at {at} is not a configuration the planner can "
                     "build (a TP group must fit one node and divide the model's heads; "
                     "pipeline stages chain whole nodes' TP groups, without a draft)")


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def run_knobs(d: Deployment, catalog: Catalog | None = None) -> dict[str, Any]:
    """The basis' knobs as the deployment runs them (`knobs_of`): the decode GEMMs' eff, the
    prefill plateau and the decode read efficiency on its GPU and weight format
    (`PlanInputs.eff_on`, `mfu_on`, `eta_bw_on`: on a typical basis the engines file's shares
    of the matmul and copy ceilings, resolved), as the Explorer's Scenario of it holds them."""
    inp, cat = d.inputs, catalog or default_catalog()
    return {**knobs_of(inp), "eff": inp.option_eff(cat, d.gpu, d.weights),
            "mfu": inp.option_mfu(cat, d.gpu, d.weights),
            "mfu_half_tokens": inp.option_mfu_half(cat),
            "eta_bw": inp.option_eta_bw(cat, d.gpu)}


def record(d: Deployment, o: Option, catalog: Catalog | None = None) -> dict[str, Any]:
    """The deployment and its figures as one JSON-ready record (`capacity size --format json`
    carries one per option): what it is, what it costs and where the price comes from, the
    basis and its knobs, the workload and design load, and the planner's figures."""
    inp = d.inputs
    wl = inp.workload
    pr = d.price(catalog)
    offer = pr.offer
    return {
        "model": inp.model, "gpu": d.gpu, "weights": d.weights, "kv_dtype": d.kv_dtype,
        "tp": d.tp, "pp": d.pp, "replicas": d.replicas, "gpus": d.n_gpus,
        "spare_gpus": d.spare_gpus,
        "paid_gpus": o.paid_gpus,
        "price_per_gpu_hour": pr.per_gpu_hour, "currency": pr.currency,
        "price_source": {"kind": pr.kind.value, "offer_kind": offer.kind if offer else None,
                         "provider": offer.provider if offer else None,
                         "as_of": offer.as_of if offer else None,
                         "missing_offer_kind": pr.missing_kind or None,
                         "node_gpus": pr.node_gpus or None},
        "basis": {"kind": inp.basis.value, "name": inp.basis_string,
                  "knobs": run_knobs(d, catalog)},
        "engine": inp.engine,
        "workload": {"context_tokens": wl.context_tokens, "prompt_tokens": wl.prompt,
                     "output_tokens": wl.output_tokens, "prefix_tokens": inp.prefix_tokens,
                     "prefix_share": inp.prefix_share, "turns": wl.turns,
                     "turn_tokens": wl.turn_tokens},
        "design_load": {"rate_per_s": _num(o.design_rate_per_s),
                        "concurrency": _num(o.design_concurrency),
                        "headroom": wl.headroom},
        "slo": {"ttft_ms": inp.slo.ttft_ms, "tpot_ms": inp.slo.tpot_ms,
                "quantile": inp.slo.quantile, "cost_per_mtok": inp.slo.cost_per_mtok},
        "draft": ({"key": o.draft, "acceptance_length": o.draft_acceptance_length,
                   "source": o.draft_source} if o.draft else None),
        "figures": {"cost_per_month": o.cost_per_month,
                    "cost_per_mtok_design": _num(o.cost_per_mtok_design),
                    "cost_per_mtok_capacity": _num(o.cost_per_mtok),
                    "ttft_ms": _num(o.ttft_ms), "tpot_ms": _num(o.tpot_ms),
                    "capacity_rate_per_s": _num(o.capacity_rate_per_s),
                    "binding": o.binding.value, "feasible": o.feasible},
    }
