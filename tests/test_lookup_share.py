"""The untied input embedding table's share of the weights, by bytes (`ModelVariant.lookup_bytes`
and `lookup_weight_share`): one definition that the operator step, the spec-sheet bound, the
planner's grid, the disaggregated pools, expert parallelism and the Explorer's note all read.

Llama-3.1-8B (untied): vocab 128,256 x hidden 4,096 = 525,336,576 lookup parameters
(0.525336576 B) of 8.03 B. The FP8 weights are computed as (8.03 - 2 x 0.525336576) x 1 B +
2 x 0.525336576 x 2 B = 6.979326848 + 2.101346304 = 9.080673152 GB (embedding and head in
BF16), so its table is 0.525336576 x 2 = 1.050673152 GB: a share of 1.050673152 / 9.080673152
= 0.1157043, not the parameter count's 0.525336576 / 8.03 = 0.0654217 (0.594 GB)."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.catalog.loader import Catalog, ModelVariant
from capacity.model.expert_parallel import ep_layout, ep_setup
from capacity.model.scenario import Scenario, decode_model, evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.disagg import replica_shapes
from capacity.plan.options import PlanInputs
from capacity.plan.units import replica_units
from capacity.report.explain import method_note, show_math

LOOKUP_B = 128256 * 4096 / 1e9          # 0.525336576 B parameters
FP8_GB = (8.03 - 2 * LOOKUP_B) * 1.0 + 2 * LOOKUP_B * 2.0  # 9.080673152 GB
TABLE_GB = LOOKUP_B * 2.0               # 1.050673152 GB at 16 bits
FP8_SHARE = 1.050673152 / 9.080673152   # 0.11570432...
BF16_SHARE = 0.525336576 / 8.03         # 0.06542174... (16.06 GB, 2 B per parameter)
BATCHES = np.array([0.0, 1.0, 4.0, 32.0, 200.0])


def _llama(catalog: Catalog, fmt: str, method: str, **kw: object) -> Scenario:
    return make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog, weights=fmt,
                         context_tokens=2048, step_method=method, **kw)  # type: ignore[arg-type]


def test_property_by_hand(catalog: Catalog) -> None:
    fp8 = catalog.variant("llama-3.1-8b", "fp8")
    assert FP8_GB == pytest.approx(9.080673152, rel=1e-12)
    assert fp8.weights_gb == pytest.approx(9.080673152, rel=1e-12)
    assert fp8.lookup_bytes == pytest.approx(1.050673152e9, rel=1e-12)
    assert fp8.lookup_weight_share == pytest.approx(0.1157043244, rel=1e-9)
    bf16 = catalog.variant("llama-3.1-8b", "bf16")  # both rules: 2 bytes per parameter
    assert bf16.weights_gb == pytest.approx(16.06, rel=1e-12)
    assert bf16.lookup_bytes == pytest.approx(1.050673152e9, rel=1e-12)
    assert bf16.lookup_weight_share == pytest.approx(0.0654217405, rel=1e-9)
    # a tied table (Gemma 3: the head reuses it) is read as the head: no lookup share
    gemma = catalog.variant("gemma-3-27b", "bf16")
    assert gemma.lookup_bytes == 0.0 and gemma.lookup_weight_share == 0.0


def test_stated_sizes_use_the_average_bytes(catalog: Catalog) -> None:
    # gpt-oss-20b MXFP4, stated 14.46 GB of 20.9 B parameters; table 201,088 x 2,880 =
    # 0.57913344 B parameters x 14.46 / 20.9 = 0.4006827 GB, a share of 0.57913344 / 20.9
    gpt = catalog.variant("gpt-oss-20b", "mxfp4")
    assert gpt.weights_stated
    assert gpt.lookup_bytes == pytest.approx(0.57913344 * 14.46 / 20.9 * 1e9, rel=1e-12)
    assert gpt.lookup_weight_share == pytest.approx(0.57913344 / 20.9, rel=1e-12)  # 0.02771
    # a stated FP8 size wins over the format's embedding bits: 0.525336576 x 9.0 / 8.03 GB
    fp8 = catalog.variant("llama-3.1-8b", "fp8")
    stated = ModelVariant(model=fp8.model, format=fp8.format, weights_gb=9.0,
                          weights_stated=True, weights_source="a published size")
    assert stated.lookup_bytes == pytest.approx(0.5887959e9, rel=1e-6)
    assert stated.lookup_weight_share == pytest.approx(BF16_SHARE, rel=1e-12)


@pytest.mark.parametrize("method", ["operator", "bound"])
def test_operator_step_reads_weights_less_the_table(catalog: Catalog, method: str) -> None:
    # 9.080673152 - 1.050673152 = 8.03 GB read per step (the old count share read
    # 9.080673152 x (1 - 0.0654217) = 8.4866 GB, 0.459 GB more)
    s = _llama(catalog, "fp8", method)
    step = decode_model(s, 0.0)
    assert float(step.unread_weight_share) == pytest.approx(FP8_SHARE, rel=1e-12)
    assert float(step.weight_read_bytes(np.asarray(4.0))) == pytest.approx(8.03e9, rel=1e-12)
    bf16 = decode_model(_llama(catalog, "bf16", method), 0.0)  # 16.06 - 1.050673152 = 15.0093
    assert float(bf16.weight_read_bytes(np.asarray(4.0))) == pytest.approx(15.009326848e9,
                                                                           rel=1e-12)
    # the chapter's method reads all of W
    chapter = decode_model(_llama(catalog, "fp8", "chapter"), 0.0)
    assert float(chapter.unread_weight_share) == 0.0
    assert float(chapter.weight_read_bytes(np.asarray(4.0))) == pytest.approx(9.080673152e9,
                                                                              rel=1e-12)


def test_tp_splits_the_table_with_the_weights(catalog: Catalog) -> None:
    # TP 2: 9.080673152 / 2 = 4.540336576 GB per GPU, of which the table 0.525336576 GB:
    # 4.015 GB read per GPU
    s = make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog, weights="fp8", n_gpus=2,
                      tp=2, context_tokens=2048, step_method="operator")
    step = decode_model(s, 0.0)
    assert float(step.weight_read_bytes(np.asarray(1.0))) == pytest.approx(4.015e9, rel=1e-12)


def test_explorer_note_and_math_use_bytes(catalog: Catalog) -> None:
    s = _llama(catalog, "fp8", "chapter")
    note = method_note(s, 1)  # one sequence: weights bind, the operator step is shorter
    assert note is not None and note.code == "method_embedding"
    assert "1.05 GB" in note
    op = s.with_(step_method="operator")
    bw = next(m for m in show_math(op, 1) if m.key == "bandwidth_term")
    assert bw.substituted.startswith("(8.03 + ")  # W read: 9.0807 - 1.0507 GB


@pytest.mark.parametrize("method", ["operator", "bound"])
def test_planner_grid_mixing_formats_matches_evaluate(catalog: Catalog, method: str) -> None:
    """The planner's grid holds bf16 and fp8 rows: each row's share is its own format's, and
    its step is the Explorer's (`evaluate`) for that format, bit for bit."""
    wl = Workload(peak_concurrency=10, context_tokens=2048, output_tokens=256)
    inp = PlanInputs(model="llama-3.1-8b", formats=("bf16", "fp8"), workload=wl,
                     gpus=("h100-sxm",), max_gpus=1, kv_dtypes=("fp16",), step_method=method)
    _, _, u = replica_units(inp, catalog)
    assert sorted(u.formats) == ["bf16", "fp8"]
    share = np.asarray(u.step.unread_weight_share)
    for j, fmt in enumerate(u.formats):
        assert float(share[j]) == pytest.approx(FP8_SHARE if fmt == "fp8" else BF16_SHARE,
                                                rel=1e-12)
        row = u.step.select(np.asarray([j], dtype=np.int64))
        want = evaluate(_llama(catalog, fmt, method), BATCHES).decode.step_ms
        np.testing.assert_array_equal(row.step_ms(BATCHES), want)


def test_disaggregated_pools_match_evaluate(catalog: Catalog) -> None:
    wl = Workload(peak_concurrency=10, context_tokens=2048, output_tokens=256)
    inp = PlanInputs(model="llama-3.1-8b", formats=("bf16", "fp8"), workload=wl,
                     gpus=("h100-sxm",), max_gpus=1, kv_dtypes=("fp16",), step_method="operator")
    _, shapes, grid = replica_shapes(inp, catalog)
    assert {sh.weights for sh in shapes} == {"bf16", "fp8"}
    for j, sh in enumerate(shapes):  # the pools try TP 1, 2, 4, 8
        want = evaluate(_llama(catalog, sh.weights, "operator", n_gpus=sh.tp, tp=sh.tp),
                        [1.0, 4.0]).decode.step_ms
        np.testing.assert_allclose(grid[j, [1, 4]], want, rtol=1e-12)


def test_expert_parallel_reads_the_same_table(catalog: Catalog) -> None:
    # DeepSeek-V3 FP8 (computed): 129,280 x 7,168 = 0.92667904 B x 2 B = 1.85335808 GB
    s = ep_setup("deepseek-v3", "h200-sxm", ep_layout("h200-sxm", 8), context_tokens=1000,
                 catalog=catalog)
    assert s.lookup_bytes == s.variant.lookup_bytes
    assert s.lookup_bytes == pytest.approx(1.85335808e9, rel=1e-12)


def test_the_math_on_a_typical_basis_counts_the_table_as_the_step_does(catalog: Catalog) -> None:
    # Qwen2.5-7B BF16 on an RTX 4090 on the typical vLLM basis, which looks its untied
    # 152,064 x 3,584 input table up (`TYPICAL_COUNTS`): "show the math" prints the terms the
    # step computes, W less the table's 1.090 GB and P less its 0.545e9 parameters, and each
    # line's arithmetic gives its value; on the chapter's basis both are whole
    from capacity.fit.planning import scenario_with_basis
    from capacity.report.math_steps import formula_number

    base = make_scenario("qwen2.5-7b", "rtx-4090", catalog=catalog, weights="bf16",
                         context_tokens=1024)
    s = scenario_with_basis(base, "typical:vllm")
    assert s.embedding_lookup
    table = 152_064 * 3_584
    for scen, less in ((s, True), (scenario_with_basis(base, "chapter"), False)):
        got = {m.key: m for m in show_math(scen, 16)}
        bw, cp = got["bandwidth_term"], got["compute_term"]
        assert ("lookup" in bw.formula) is less and ("(P - lookup)" in cp.formula) is less
        p = scen.model.params_active_b * 1e9 - (table if less else 0)
        w = scen.weights_per_gpu_gb - (table * 2 / 1e9 if less else 0.0)
        assert cp.substituted.startswith(f"2 x {formula_number(p)} x 16 ")
        assert bw.substituted.startswith(f"({formula_number(w)} + ")
        by_hand = 2 * p * 16 / (scen.tflops_per_replica * 1e12 * scen.eff) * 1e3
        assert cp.value == pytest.approx(by_hand, rel=1e-9)
