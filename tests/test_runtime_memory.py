"""F3's memory as the driver reports it (`Gpu.memory_for`, `Scenario.runtime_memory`): the spec
sheet and a typical basis budget the card's memory as its driver reports it, the chapter's basis
the spec sheet's figure in decimal GB (its worked example), a stated VRAM as stated."""

from __future__ import annotations

from dataclasses import replace

import pytest

from capacity.catalog.loader import Catalog
from capacity.fit.planning import scenario_with_basis
from capacity.model.basis import CHAPTER_KNOBS, SPEC_KNOBS, TYPICAL_COUNTS
from capacity.model.expert_parallel import ep_layout, ep_memory, ep_setup
from capacity.model.scenario import evaluate, make_scenario
from capacity.units import GB, GIB


def test_the_driver_reports_the_cards_binary_memory(catalog: Catalog) -> None:
    """nvidia-smi's 81559 MiB on an H100 SXM: 79.65 GiB, 85.52 GB, where its spec sheet's 80
    GB counts 80 x 10^9 bytes; a GPU with no sourced figure keeps the spec sheet's."""
    h100 = catalog.gpu("h100-sxm")
    assert h100.memory_for(False) == 80.0
    assert h100.memory_for(True) == pytest.approx(79.65 * GIB / GB) == pytest.approx(85.5235,
                                                                                     abs=1e-4)
    custom = replace(h100, memory_driver_gib=None)
    assert custom.memory_for(True) == 80.0
    # every catalog GPU has its driver's figure, a few % above its spec sheet's GB at most
    for g in catalog.gpus.values():
        assert g.memory_driver_gib is not None
        assert 0.99 < g.memory_for(True) / g.memory_gb < 1.08, g.key


def test_f3_on_each_basis_by_hand(catalog: Catalog) -> None:
    """Qwen3-32B in BF16 (65.6 GB of weights) on one H100 SXM at 8K, 1.5 GB of overhead:
    the chapter's 80 x 0.9 - 65.6 - 1.5 = 4.9 GB of KV, two 8K requests of 2.147 GB; the
    typical basis' 85.52 x 0.9 - 65.6 - 1.5 = 9.87 GB, four; the spec sheet's the same four."""
    s = make_scenario("qwen3-32b-bf16", "h100-sxm", catalog=catalog, context_tokens=8192)
    w = s.weights_per_gpu_gb
    for basis, vram, slots in (("chapter", 80.0, 2), ("typical:vllm", 79.65 * GIB / GB, 4),
                               ("spec", 79.65 * GIB / GB, 4)):
        b = scenario_with_basis(s, basis)
        assert b.budget_vram_gb == pytest.approx(vram)
        ev = evaluate(b, [1])
        assert ev.vram.kv_budget_bytes / GB == pytest.approx(vram * 0.9 - w - 1.5, rel=1e-12)
        assert int(ev.max_concurrency_vram) == slots
    assert CHAPTER_KNOBS["runtime_memory"] is False
    assert SPEC_KNOBS["runtime_memory"] is True and TYPICAL_COUNTS["runtime_memory"] is True


def test_a_stated_vram_is_taken_as_stated(catalog: Catalog) -> None:
    s = make_scenario("qwen3-32b-bf16", "h100-sxm", catalog=catalog, vram_gb=70.0)
    assert s.vram_stated
    for basis in ("chapter", "typical:vllm", "spec"):
        assert scenario_with_basis(s, basis).budget_vram_gb == 70.0


def test_expert_parallelism_budgets_the_memory_it_is_given(catalog: Catalog) -> None:
    """`ep_memory` takes the basis' memory per GPU: 8 H200s holding DeepSeek-V3 in FP8 gain
    (150.75 - 141) x 0.9 GB of KV a GPU in the memory their driver reports."""
    lay = ep_layout("h200-sxm", 8)
    s = ep_setup("deepseek-v3", "h200-sxm", lay, context_tokens=4096, catalog=catalog)
    nominal = ep_memory(s)
    driver = ep_memory(s, memory_gb=catalog.gpu("h200-sxm").memory_for(True))
    assert driver.kv_budget_gb - nominal.kv_budget_gb == pytest.approx(
        (140.4 * GIB / GB - 141.0) * 0.9, rel=1e-9)
    assert driver.max_batch > nominal.max_batch
