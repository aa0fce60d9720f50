"""Whole-node pricing (issue 13): an offer priced per node buys the deployment in whole nodes;
the option says how many of the paid GPUs it uses, and its costs count every paid GPU."""

from __future__ import annotations

import pytest

from capacity.catalog.loader import Catalog, default_catalog
from capacity.catalog.offers import Offer
from capacity.model.cost import HOURS_PER_MONTH
from capacity.model.workload import Workload
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.report.quote import option_label, quote_markdown

NODE = Offer(gpu="rtx-4090", price=16.0, currency="CNY", kind="on-demand", per="node",
             gpus_per_node=8, provider="Example Rental")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog()


def _inputs(**kw: object) -> PlanInputs:
    wl = Workload(daily_active_users=2000, requests_per_user_per_day=30, peak_share=0.25,
                  peak_hours=2, context_tokens=8192, output_tokens=512)
    return PlanInputs(model="qwen3.5-9b", workload=wl, slo=Slo(ttft_ms=1500, tpot_ms=40),
                      gpus=("rtx-4090",), **kw)  # type: ignore[arg-type]


def test_per_gpu_offer_bills_only_the_gpus_used(catalog: Catalog) -> None:
    p = plan(_inputs(max_gpus=7, offers=(Offer(gpu="rtx-4090", price=2.0, currency="CNY"),)),
             catalog)
    best = p.best
    assert best is not None and best.node_gpus == 0
    assert best.paid_gpus == best.n_gpus and best.idle_gpus == 0
    assert best.cost_per_month == pytest.approx(2.0 * best.n_gpus * HOURS_PER_MONTH)
    assert "node" not in best.label


def test_per_node_offer_rounds_up_to_whole_nodes(catalog: Catalog) -> None:
    # at most 7 GPUs serve, the offer sells nodes of 8: one node is paid, 7 of its GPUs used
    p = plan(_inputs(max_gpus=7, offers=(NODE,)), catalog)
    best = p.best
    assert best is not None
    assert best.node_gpus == 8 and best.paid_gpus == 8 and best.nodes == (8,)
    assert best.idle_gpus == 8 - best.n_gpus > 0
    assert best.cost_per_month == pytest.approx(16.0 * HOURS_PER_MONTH)  # one node-month
    assert best.price_per_hour == pytest.approx(2.0)  # per GPU-hour of the node
    assert f", 1 node of 8 ({best.n_gpus} used)" in best.label
    assert f"1 个 8 卡节点（用 {best.n_gpus} 张）" in option_label(best, "zh")
    # the cost per M tokens counts the whole node: against the same GPUs priced per GPU
    per_gpu = plan(_inputs(max_gpus=7, offers=(Offer(gpu="rtx-4090", price=2.0,
                                                      currency="CNY"),)), catalog)
    same = next(o for o in per_gpu.configurations
                if (o.n_gpus, o.tp, o.weights, o.kv_dtype)
                == (best.n_gpus, best.tp, best.weights, best.kv_dtype))
    assert best.cost_per_mtok == pytest.approx(same.cost_per_mtok * 8 / best.n_gpus)
    md = quote_markdown(p, lang="en")
    assert f"1 node of 8 ({best.n_gpus} used)" in md


def test_the_full_node_outranks_the_same_node_partly_used(catalog: Catalog) -> None:
    p = plan(_inputs(max_gpus=16, offers=(NODE,)), catalog)
    # one row per paid deployment: 7 of 8 used folds into 8 of 8 (same cost, more capacity)
    paid = [(o.gpu, o.paid_gpus, o.tp) for o in p.options]
    assert len(paid) == len(set(paid))
    assert all(o.paid_gpus % 8 == 0 and 8 % o.tp == 0 for o in p.options)
    one_node = [o for o in p.options if o.paid_gpus == 8 and o.tp == 1]
    assert one_node and one_node[0].n_gpus == 8 and one_node[0].idle_gpus == 0


def test_spare_counts_inside_the_node(catalog: Catalog) -> None:
    p = plan(_inputs(max_gpus=7, spare=True, offers=(NODE,)), catalog)
    best = p.best
    assert best is not None and best.spare_gpus == best.tp
    assert best.paid_gpus == 8 * -(-(best.n_gpus + best.spare_gpus) // 8)
    assert best.cost_per_month == pytest.approx(16.0 * best.paid_gpus / 8 * HOURS_PER_MONTH)


def test_an_entered_price_is_per_gpu_and_overrides_the_node_offer(catalog: Catalog) -> None:
    p = plan(_inputs(max_gpus=7, offers=(NODE,), price_overrides=(("rtx-4090", 3.0),)), catalog)
    assert p.best is not None and p.best.node_gpus == 0 and p.best.idle_gpus == 0
