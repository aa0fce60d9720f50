"""Wide expert parallelism's planner (capacity/model/expert_parallel.py `plan_ep`): the cases
that mutation testing found unchecked.

`python3 dev.py mutate capacity/model/expert_parallel.py` (docs/testing.md) left these mutants
of `plan_ep` alive: the TP sizes it tries (2, 4, 8 within a node, dividing the GPUs and the
heads), the redundancy options skipped when their copies do not divide over the GPUs (and the
ones after them still tried), the context it holds KV for (prompt + output), a batch that does
not fit or is empty, the spec-sheet defaults of its engine knobs, each knob passed through,
the batch per GPU, the imbalance exponent and the order of the options. DeepSeek-V3 (256
routed experts, 128 heads) on H100 nodes of 8; the expected sets and counts by hand below.
"""

from __future__ import annotations

import math

import pytest

from capacity.errors import InputError
from capacity.model.expert_parallel import (
    EpLayout,
    EpOption,
    EpSetup,
    all_to_all_ms,
    attention_tp_comm_ms,
    ep_layout,
    ep_memory,
    ep_setup,
    ep_step,
    plan_ep,
)
from capacity.model.moe_imbalance import model_exponent

MODEL, GPU = "deepseek-v3", "h100-sxm"


def plan(n_gpus: int, **kw: object) -> list[EpOption]:
    args: dict[str, object] = {"prompt_tokens": 2000, "output_tokens": 500} | kw
    return plan_ep(MODEL, GPU, n_gpus, **args)  # type: ignore[arg-type]


def layouts(opts: list[EpOption]) -> set[tuple[int, int]]:
    return {(o.layout.attention_tp, o.layout.redundant_experts) for o in opts}


def test_tp_sizes_and_redundancy_on_two_nodes() -> None:
    # 16 GPUs: TP 1, 2, 4, 8 (each <= 8 a node, divides 16 and 128 heads); 256 + 32 = 288
    # copies divide over 16 -> both redundancy options; 2 overlaps each: 4 x 2 x 2 = 16
    opts = plan(16)
    assert layouts(opts) == {(t, r) for t in (1, 2, 4, 8) for r in (0, 32)}
    assert len(opts) == 16
    assert {o.overlap for o in opts} == {"two-batch", "sum"}


def test_options_after_a_skipped_redundancy_are_still_tried() -> None:
    # 20 GPUs: TP 8 does not divide 20 -> TP 1, 2, 4; 288 % 20 = 8: no 32 copies, but the
    # 0 listed after it is still tried: 3 x 1 x 2 = 6 options
    opts = plan(20, redundant_options=(32, 0))
    assert layouts(opts) == {(1, 0), (2, 0), (4, 0)}
    assert len(opts) == 6


def test_redundant_copies_are_added_to_the_experts() -> None:
    # 36 GPUs: 288 % 36 = 0 -> 32 copies fit (256 - 32 = 224 would not divide by 36)
    assert (1, 32) in layouts(plan(36))


def test_a_dense_model_has_no_ep_layout() -> None:
    assert plan_ep("llama-3.1-8b", GPU, 16, prompt_tokens=2000, output_tokens=500) == []


def test_best_throughput_first_and_the_exponent() -> None:
    opts = plan(16)
    tok = [o.tok_s_per_gpu for o in opts]
    assert tok == sorted(tok, reverse=True) and tok[0] > tok[-1]
    assert all(o.exponent == pytest.approx(model_exponent(MODEL)) for o in opts)


def test_kv_is_held_for_prompt_plus_output() -> None:
    # 2000 + 1500 tokens of KV hold fewer requests than 2000 + 500
    short = {(o.layout.attention_tp, o.layout.redundant_experts): o.memory.max_batch
             for o in plan(16)}
    long = {(o.layout.attention_tp, o.layout.redundant_experts): o.memory.max_batch
            for o in plan(16, output_tokens=1500)}
    assert all(long[k] < short[k] for k in short)


def test_batch_per_gpu_and_a_batch_that_does_not_fit() -> None:
    # 4 a GPU x 16 GPUs = 64 sequences in every option
    assert {o.batch for o in plan(16, batch_per_gpu=4)} == {64}
    # 100,000 a GPU does not fit anywhere: no step, no throughput, infinite TPOT
    big = plan(16, batch_per_gpu=100_000)
    assert all(not o.fits and o.tok_s_per_gpu == 0.0 and math.isinf(o.tpot_ms) for o in big)
    # an empty batch has no step either
    assert all(o.step is None for o in plan(16, batch_per_gpu=0))


def test_knob_defaults_are_the_spec_sheet() -> None:
    plain = [o.tpot_ms for o in plan(16, batch_per_gpu=4)]
    spec = [o.tpot_ms for o in plan(16, batch_per_gpu=4, eta_bw=1.0, eff=1.0, overhead_ms=0.0)]
    assert plain == spec


@pytest.mark.parametrize("knob", [{"eta_bw": 0.5}, {"overhead_ms": 5.0}, {"eff": 0.01}])
def test_each_knob_slows_every_step(knob: dict[str, float]) -> None:
    # the same 512 sequences (32 a GPU) where they fit: a lower bandwidth share, a fixed time
    # a step, or 1 % of the GEMM peak (the arithmetic then outgrows the memory time)
    # lengthens every option's step
    base = {(o.layout.attention_tp, o.layout.redundant_experts, o.overlap): o.tpot_ms
            for o in plan(16, batch_per_gpu=32)}
    slow = {(o.layout.attention_tp, o.layout.redundant_experts, o.overlap): o.tpot_ms
            for o in plan(16, batch_per_gpu=32, **knob)}
    fits = [k for k in base if math.isfinite(base[k])]
    assert len(fits) >= 4
    assert all(slow[k] > base[k] for k in fits)


# -- ep_setup, ep_memory, ep_step (DeepSeek-V3 on H200s: 141 GB, 90 % usable = 126.9 GB) -----

def setup(ep: int, **kw: object) -> EpSetup:
    tp = int(kw.pop("attention_tp", 1))  # type: ignore[call-overload]
    red = int(kw.pop("redundant_experts", 0))  # type: ignore[call-overload]
    lay = ep_layout("h200-sxm", ep, attention_tp=tp, redundant_experts=red)
    return ep_setup(MODEL, "h200-sxm", lay, context_tokens=2500, **kw)  # type: ignore[arg-type]


def test_a_dense_model_or_too_wide_an_ep_is_refused() -> None:
    with pytest.raises(InputError, match=r"^llama-3\.1-8b is not a mixture-of-experts model: "
                                         r"expert parallelism needs routed experts$"):
        ep_setup("llama-3.1-8b", "h200-sxm", ep_layout("h200-sxm", 8), context_tokens=2500)
    with pytest.raises(InputError, match=r"^EP 264 exceeds the 256 experts \(\+0 redundant\) "
                                         r"of deepseek-v3$"):
        setup(264)
    # 256 GPUs hold one expert each; with 32 redundant copies 288 slots: both allowed
    assert setup(256).layout.ep == 256
    assert setup(256, redundant_experts=32).layout.redundant_experts == 32


def test_setup_carries_what_it_is_given() -> None:
    s = setup(8, exponent=0.7, weights="bf16")
    assert s.exponent == 0.7
    assert s.bytes_per_param == 2.0
    assert s.family == "deepseek-v3"


def test_memory_in_fp8_and_in_bf16() -> None:
    # FP8 (1 B a parameter; the two untied 129,280 x 7,168 tables stay at 2 B):
    # 16.548 + 2 x 129,280 x 7,168 / 1e9 = 18.402 GB shared + 32 slots x 2.5565 GB = 81.806
    # GB of experts; budget 126.9 - 18.402 - 81.806 - 1.5 - 2.147 (EP buffers, 2^31 B) =
    # 23.044 GB; KV 175.68 MB a sequence: floor(23.044e9 / 1.7568e8) = 131 a GPU, x 8 = 1,048
    fp8 = ep_memory(setup(8))
    assert fp8.shared_gb == pytest.approx(16.548 + 2 * 129_280 * 7_168 / 1e9, abs=1e-3)
    assert fp8.experts_gb == pytest.approx(81.806, abs=1e-3)
    assert fp8.buffers_gb == pytest.approx(2 ** 31 / 1e9)
    assert fp8.kv_budget_gb == pytest.approx(23.044, abs=1e-3)
    assert (fp8.max_sequences_per_group, fp8.max_batch) == (131, 1048)
    # BF16 (2 B): 33.097 + 163.613 GB: the budget is 126.9 - 33.097 - 163.613 - 3.647 < 0
    bf16 = ep_memory(setup(8, weights="bf16"))
    assert bf16.shared_gb == pytest.approx(33.097, abs=1e-3)
    assert bf16.experts_gb == pytest.approx(163.613, abs=1e-3)
    assert bf16.kv_budget_gb == pytest.approx(-73.457, abs=1e-3)
    assert (bf16.max_sequences_per_group, bf16.max_batch) == (0, 0)


def test_memory_buffers_and_a_budget_under_one_sequence() -> None:
    s = setup(8)
    # buffers given (replacing the 2^31 B default): without any the budget is 126.9 - 18.402 -
    # 81.806 - 1.5 = 25.192 GB; 24.692 GB of buffers leave 0.5 GB -> floor(0.5e9 / 1.7568e8)
    # = 2 a GPU
    half = ep_memory(s, buffers_gb=24.692)
    assert half.kv_budget_gb == pytest.approx(0.5, abs=1e-3)
    assert half.max_sequences_per_group == 2
    # 25.092 GB of buffers leave 0.1 GB: not one sequence
    tiny = ep_memory(s, buffers_gb=25.092)
    assert tiny.kv_budget_gb == pytest.approx(0.1, abs=1e-3)
    assert (tiny.max_sequences_per_group, tiny.max_batch) == (0, 0)
    assert ep_memory(s, buffers_gb=0.0).buffers_gb == 0.0
    # no EP buffers on one GPU; 2 GiB from EP 2
    assert ep_memory(setup(1)).buffers_gb == 0.0
    assert ep_memory(setup(2)).buffers_gb == pytest.approx(2 ** 31 / 1e9)


def test_no_all_to_all_on_one_gpu_and_no_tp_comm_without_tp() -> None:
    assert all_to_all_ms(setup(1), 64) == 0.0
    assert all_to_all_ms(setup(2), 64) > 0.0
    assert attention_tp_comm_ms(setup(8), 64) == 0.0
    assert attention_tp_comm_ms(setup(8, attention_tp=2), 64) > 0.0


def test_step_refuses_an_empty_batch_and_names_its_overlap() -> None:
    with pytest.raises(InputError, match=r"^batch must be > 0 sequences$"):
        ep_step(setup(8), 0)
    assert ep_step(setup(8), 64, overlap="sum").overlap == "sum"


def test_layout_checks_and_description() -> None:
    with pytest.raises(InputError, match=r"^redundant experts must be >= 0$"):
        EpLayout(ep=8, redundant_experts=-1)
    with pytest.raises(InputError, match=r"^attention TP 1 must divide EP 0$"):
        EpLayout(ep=0)
    with pytest.raises(InputError, match=r"^attention TP 0 must divide EP 8$"):
        EpLayout(ep=8, attention_tp=0)
    # 8 GPUs in one NVLink domain, DP attention, no redundancy
    assert EpLayout(ep=8).describe() == "EP8, DP attention (NVLink)"
    # 32 GPUs: 4 nodes of 8 over the NIC, TP 4 attention, 32 redundant copies
    assert EpLayout(ep=32, attention_tp=4, redundant_experts=32).describe() == (
        "EP32, TP4 attention, 32 redundant experts (4 nodes over the NIC)")
