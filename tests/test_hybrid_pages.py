"""A hybrid model's requests in a paged engine's pool (`capacity.model.kv.held_request_bytes`):
the hand-computed bytes, and every surface that counts requests in such a pool agreeing on the
slots (docs/method.md, "A hybrid model's pages")."""

from __future__ import annotations

import pytest

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import default_catalog
from capacity.model.kv import held_request_bytes, kv_request_bytes
from capacity.model.scenario import evaluate, make_scenario
from capacity.model.workload import Workload
from capacity.plan.disagg import replica_shapes
from capacity.plan.events import service_from_scenario
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan
from capacity.sim.scheduler import SimPhysics

QWEN35 = default_catalog().models["qwen3.5-9b"]
STATE_PAGE = 528 * 4096          # one linear layer's state in vLLM: a 528-token attention page
BLOCK_BYTES = 8 * 4096 * 528     # one 528-token block of the 8 attention layers, bf16


def test_vllm_pages_the_state_in_the_grown_block() -> None:
    # 1,000 tokens: two 528-token blocks of attention, 24 state pages
    assert held_request_bytes(QWEN35, 1000.0, "bf16", 1, 16) == 2 * BLOCK_BYTES + 24 * STATE_PAGE
    assert 2 * BLOCK_BYTES + 24 * STATE_PAGE == 86_507_520
    # one token holds one block; 528 still one, 529 two
    for tokens, blocks in ((1, 1), (528, 1), (529, 2)):
        assert held_request_bytes(QWEN35, float(tokens), "bf16", 1, 16) == (
            blocks * BLOCK_BYTES + 24 * STATE_PAGE)
    # an fp8 KV halves a token: the block doubles to 1,056 tokens, the page stays the state's
    page8 = 1056 * 2048
    assert held_request_bytes(QWEN35, 1000.0, "fp8", 1, 16) == 8 * page8 + 24 * page8
    # TP 2: each rank holds half the heads and half the state; the block stays 528
    assert held_request_bytes(QWEN35, 1000.0, "bf16", 2, 16) == (
        2 * 8 * 2048 * 528 + 24 * 528 * 2048)
    # the chapter's F2 (state 0, 16-token blocks) is what the step reads, unchanged
    assert float(kv_request_bytes(QWEN35, 1000.0, "bf16", 1, 16).paged_bytes) == (
        8 * 4096 * 1008)


def test_sglang_holds_the_state_itself_beside_its_tokens() -> None:
    assert held_request_bytes(QWEN35, 1000.0, "bf16", 1, 1) == 8 * 4096 * 1000 + 24 * 2_146_304
    assert held_request_bytes(QWEN35, 1000.0, "bf16", 1, 1) == 84_279_296


def test_a_model_without_linear_layers_keeps_f2s_pages() -> None:
    llama = default_catalog().models["llama-3.1-8b"]
    for block in (1, 16):
        assert float(held_request_bytes(llama, 1000.0, "bf16", 1, block)) == float(
            kv_request_bytes(llama, 1000.0, "bf16", 1, block).paged_bytes)


def test_every_surface_counts_the_same_requests_in_the_pool() -> None:
    # the chapter's RTX 4090 with Qwen3.5-9B AWQ, 800 + 200 tokens under vLLM: a pool of
    # 14.4e9 B over 86,507,520 B a request -> 166 (the profile's max_num_seqs is 256)
    s = make_scenario(prompt_tokens=800)
    pool = float(evaluate(s, [1]).vram.kv_budget_bytes)
    assert pool == pytest.approx(14.4e9)
    expected = int(pool // 86_507_520)
    assert expected == 166
    # the event model (`capacity plan --engine vllm`, the Explorer's load view)
    assert service_from_scenario(s, output_tokens=200, engine="vllm").slots == expected
    # the Planner's search
    wl = Workload(peak_concurrency=100, context_tokens=8192, prompt_tokens=800,
                  output_tokens=200)
    inp = PlanInputs(model="qwen3.5-9b-awq", workload=wl, slo=Slo(ttft_ms=1e7, tpot_ms=1e5),
                     gpus=("rtx-4090",), engine="vllm", kv_dtypes=("fp16",))
    one = next(o for o in plan(inp, keep_all=True).all_options
               if o.n_gpus == 1 and o.weights == "awq" and o.kv_dtype == "fp16" and not o.draft)
    assert (one.c_vram_per_replica, one.slots_per_replica) == (expected, expected)
    # the disaggregated search's replica shapes
    _, shapes, _ = replica_shapes(inp)
    unit = next(u for u in shapes if u.tp == 1 and u.weights == "awq" and u.kv == "fp16")
    assert unit.slots == expected
    # the simulated endpoint: a request of 1,000 tokens takes the same bytes of the same pool
    sim = SimPhysics(s, profile=engine_profile("vllm"))
    assert sim.kv_bytes(1000) == 86_507_520 and sim.kv_budget_bytes == pool


def test_a_model_of_linear_layers_alone_holds_its_states() -> None:
    # no attention page to pad to: each of the 24 layers holds its state, in any page size
    from dataclasses import replace

    linear_only = replace(QWEN35, layer_groups=tuple(
        g for g in QWEN35.layer_groups if g.kind == "linear"))
    for block in (1, 16):
        assert held_request_bytes(linear_only, 1000.0, "bf16", 1, block) == 24 * 2_146_304


def test_the_states_part_is_what_every_request_holds_whatever_its_length() -> None:
    from capacity.model.kv import held_state_bytes

    assert held_state_bytes(QWEN35, "bf16", 1, 16) == 24 * STATE_PAGE == 51_904_512
    assert held_state_bytes(QWEN35, "bf16", 1, 1) == 24 * 2_146_304 == 51_511_296
    for tokens in (1.0, 1000.0, 8192.0):
        attention = held_request_bytes(QWEN35, tokens, "bf16", 1, 16) - 24 * STATE_PAGE
        assert attention == 8 * 4096 * 528 * -(-tokens // 528)


def test_the_engine_block_grows_on_a_hybrid_model_in_pages_only() -> None:
    from capacity.model.kv import engine_block_tokens

    llama = default_catalog().models["llama-3.1-8b"]
    assert [engine_block_tokens(QWEN35, "bf16", 1, b) for b in (1, 16, 528, 1024)] == [
        1, 528, 528, 1024]
    assert engine_block_tokens(QWEN35, "fp8", 1, 16) == 1056
    assert [engine_block_tokens(llama, "bf16", 1, b) for b in (1, 16)] == [1, 16]


def test_a_disaggregated_hand_over_sends_the_states_too() -> None:
    # the decode side needs each linear layer's state after the prompt to go on decoding
    from capacity.plan.disagg_handover import handover_bytes

    assert handover_bytes(QWEN35, "bf16", 1000.0, 1) == 8 * 4096 * 1000 + 24 * 2_146_304
    assert handover_bytes(QWEN35, "bf16", 1000.0, 2) == 8 * 2048 * 1000 + 24 * 1_073_152
    llama = default_catalog().models["llama-3.1-70b"]
    assert handover_bytes(llama, "fp16", 8192.0, 1) == 2_684_354_560


def test_the_align_block_and_the_states_beyond_f2() -> None:
    from capacity.model.kv import align_block_tokens, extra_state_bytes

    dense = default_catalog().models["qwen3-8b"]
    assert [align_block_tokens(QWEN35, "bf16", 1, b) for b in (16, 256, 1024)] == [528, 528, 1024]
    assert align_block_tokens(dense, "bf16", 1, 16) == 0
    assert extra_state_bytes(QWEN35, "bf16", 1, 16) == 24 * STATE_PAGE
    assert extra_state_bytes(QWEN35, "bf16", 1, 1) == 24 * 2_146_304
    assert extra_state_bytes(dense, "bf16", 1, 16) == 0.0
