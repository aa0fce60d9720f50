"""KV as the engine admits it (`Scenario.held_tokens`, `with_admission`): under vLLM and SGLang a
request holds the pages of its prompt and output, under the chapter's profile the whole context
(F3). The Explorer, an option's scenario and `capacity plan --engine` count requests as the
planner's slots do, so one deployment shows one C_vram.

Hand computations: Qwen3-8B keeps 36 full-attention layers x 2 x 8 KV heads x 128 dims, 73,728
bytes a token in FP8; int8 weights of 9,434,659,712 B on an RTX 4090 leave 24 x 0.9 - 9.4347 -
1.5 = 10,665,340,288 B for KV.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.errors import InputError
from capacity.model.kv import held_request_bytes
from capacity.model.memory import MemoryVerdict
from capacity.model.scenario import Scenario, evaluate, make_scenario, with_admission
from capacity.model.workload import Workload
from capacity.plan.detail import option_scenario
from capacity.plan.options import PlanInputs
from capacity.plan.search import plan
from capacity.report.explain import show_math
from capacity.report.quote import capacity_rows
from capacity.report.urlstate import ExplorerState

K_FP8 = 73_728
"""Qwen3-8B's KV bytes per token in FP8: 36 x 2 x 8 x 128 x 1."""
BUDGET = 10_665_340_288
"""The KV budget of Qwen3-8B int8 on one RTX 4090 (util 0.9, 1.5 GB overhead), bytes."""


@pytest.fixture(scope="module")
def qwen3() -> Scenario:
    return make_scenario("qwen3-8b", "rtx-4090", weights="int8", kv_dtype="fp8",
                         prompt_tokens=4000)


def test_the_chapter_reserves_the_context(qwen3: Scenario) -> None:
    s = with_admission(qwen3, engine_profile("chapter"), 4256)
    assert s.held_tokens is None and s == qwen3
    ev = evaluate(s, [1])
    assert float(ev.kv_held_bytes) == float(ev.kv_read_bytes) == K_FP8 * 8192
    assert float(ev.vram.kv_budget_bytes) == BUDGET
    assert int(ev.max_concurrency_vram) == BUDGET // (K_FP8 * 8192) == 17


def test_vllm_holds_the_pages_of_prompt_and_output(qwen3: Scenario) -> None:
    s = with_admission(qwen3, engine_profile("vllm"), 4256)
    assert (s.held_tokens, s.block_size) == (4256, 16)
    ev = evaluate(s, [10])
    assert float(ev.kv_held_bytes) == K_FP8 * 4256 == 313_786_368
    assert int(ev.max_concurrency_vram) == BUDGET // 313_786_368 == 33
    assert float(ev.kv_total_bytes[0]) == 10 * 313_786_368
    # the step reads those pages: the chapter's step at a 4,256-token context
    assert float(ev.decode.step_ms[0]) == pytest.approx(
        float(evaluate(qwen3.with_(context_tokens=4256), [10]).decode.step_ms[0]), rel=1e-12)
    # a partial page is held whole under vLLM, not in SGLang's token pool
    assert float(evaluate(with_admission(qwen3, engine_profile("vllm"), 4250), [1])
                 .kv_held_bytes) == K_FP8 * 4256
    assert float(evaluate(with_admission(qwen3, engine_profile("sglang"), 4250), [1])
                 .kv_held_bytes) == K_FP8 * 4250
    # vLLM's --block-size
    assert float(evaluate(with_admission(qwen3, engine_profile("vllm"), 4250, 128), [1])
                 .kv_held_bytes) == K_FP8 * 4352


def test_held_tokens_stop_at_the_context(qwen3: Scenario) -> None:
    s = with_admission(qwen3, engine_profile("vllm"), 6000)
    ev = evaluate(s, [1], [2048.0, 4096.0, 8192.0])   # the heatmap's context axis
    assert np.asarray(ev.kv_held_bytes).tolist() == [K_FP8 * 2048, K_FP8 * 4096, K_FP8 * 6000]


def test_a_hybrid_model_holds_its_linear_layers_pages() -> None:
    """Qwen3.5-9B, bf16 KV, 1,000 tokens: vLLM's 528-token block gives 86,507,520 B, SGLang's
    pool 84,279,296 B (`held_request_bytes`' worked example); the step reads F2's pages."""
    base = make_scenario("qwen3.5-9b", "h100-sxm", kv_dtype="bf16", prompt_tokens=744)
    vllm = evaluate(with_admission(base, engine_profile("vllm"), 1000), [1])
    sglang = evaluate(with_admission(base, engine_profile("sglang"), 1000), [1])
    assert float(vllm.kv_held_bytes) == 86_507_520
    assert float(sglang.kv_held_bytes) == 84_279_296
    assert float(vllm.kv_read_bytes) == 8 * 4096 * 1008   # F2's 16-token pages
    assert float(held_request_bytes(base.model, 1000.0, "bf16", 1, 16)) == 86_507_520


def test_a_request_holds_at_least_one_token(qwen3: Scenario) -> None:
    with pytest.raises(InputError, match="tokens a request holds"):
        with_admission(qwen3, engine_profile("vllm"), 0)
    with pytest.raises(InputError, match="block size"):
        with_admission(qwen3, engine_profile("vllm"), 100, 0)


def test_held_tokens_follow_the_workload() -> None:
    one = Workload(peak_concurrency=1.0, context_tokens=8192, prompt_tokens=4000,
                   output_tokens=256)
    assert one.held_tokens == 4256
    # a conversation's mean prompt (1,000 + 2 x 356 / 2 = 1,356) and its answer
    talk = Workload(peak_concurrency=1.0, context_tokens=8192, prompt_tokens=1000,
                    output_tokens=256, turns=3, turn_tokens=100)
    assert talk.held_tokens == 1356 + 256
    # no prompt given: the prompt is the context, which caps what a request holds
    assert Workload(peak_concurrency=1.0, context_tokens=8192, output_tokens=256
                    ).held_tokens == 8192


def test_the_explorer_counts_requests_as_its_engine_admits_them() -> None:
    cat = default_catalog()
    state = ExplorerState(model="qwen3-8b", weights="int8", kv="fp8", prompt=4000, out=256,
                          c=20)
    chapter = state.scenario(cat)
    vllm = ExplorerState(**{**state.__dict__, "engine": "vllm"}).scenario(cat)
    assert chapter.held_tokens is None and vllm.held_tokens == 4256
    assert int(evaluate(chapter, [20]).max_concurrency_vram) == 17
    ev = evaluate(vllm, [20])
    assert int(ev.max_concurrency_vram) == 33 and str(ev.verdict[0]) != "does_not_fit"
    # its formulas say so: F2 over 4,256 tokens in 16-token pages
    f2 = next(m for m in show_math(vllm, 20) if m.key == "kv_request")
    assert "prompt + output" in f2.formula and "4,256" in f2.substituted
    assert f2.value == pytest.approx(313_786_368 / 1e9)


def test_plan_engine_json_is_the_explorers(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "qwen3-8b", "--weights", "int8", "--kv-dtype", "fp8",
            "--prompt-tokens", "4000", "--output-tokens", "256", "--concurrency", "20",
            "--format", "json"]
    assert main(argv) == 0
    chapter = json.loads(capsys.readouterr().out)
    assert "held_tokens" not in chapter and chapter["max_concurrency_vram"] == 17
    assert main([*argv, "--engine", "vllm"]) == 0
    vllm = json.loads(capsys.readouterr().out)
    assert (vllm["held_tokens"], vllm["kv_held_bytes"]) == (4256, 313_786_368)
    assert vllm["max_concurrency_vram"] == 33 == vllm["load"]["slots_per_replica"]
    explorer = ExplorerState(model="qwen3-8b", weights="int8", kv="fp8", prompt=4000, out=256,
                             c=20, engine="vllm").scenario(default_catalog())
    ev = evaluate(explorer, [20])
    assert vllm["points"][0]["step_ms"] == pytest.approx(float(ev.decode.step_ms[0]))
    assert vllm["points"][0]["verdict"] == str(ev.verdict[0])


def test_the_explorer_has_one_kv_page(capsys: pytest.CaptureFixture[str]) -> None:
    """The load view's KV page (`kvblk`, vLLM --block-size) is the memory figures' page too:
    under vLLM 4,256 tokens in 1,024-token pages hold 5,120 x 73,728 B = 377,487,360 B, C_vram
    floor(10,665,340,288 / 377,487,360) = 28, as `capacity plan --engine vllm --block-size
    1024` gives; under the chapter its paged C_vram is the CLI's. A link's old `block`
    parameter (a memory-only page no figure showed) is ignored."""
    from capacity.report.urlstate import decode

    cat = default_catalog()
    state = ExplorerState(model="qwen3-8b", weights="int8", kv="fp8", prompt=4000, out=256,
                          c=20, engine="vllm", kvblk=1024)
    ev = evaluate(state.scenario(cat), [20])
    assert (float(ev.kv_held_bytes), int(ev.max_concurrency_vram)) == (377_487_360, 28)
    argv = ["plan", "--model", "qwen3-8b", "--weights", "int8", "--kv-dtype", "fp8",
            "--prompt-tokens", "4000", "--output-tokens", "256", "--concurrency", "20",
            "--block-size", "1024", "--format", "json"]
    assert main([*argv, "--engine", "vllm"]) == 0
    assert json.loads(capsys.readouterr().out)["max_concurrency_vram"] == 28
    assert main(argv) == 0
    chapter = ExplorerState(**{**state.__dict__, "engine": "chapter"}).scenario(cat)
    assert (int(evaluate(chapter, [20]).max_concurrency_vram_paged)
            == json.loads(capsys.readouterr().out)["max_concurrency_vram_paged"])
    linked, notices = decode({"model": "qwen3-8b", "block": "1024"}, cat)
    assert not notices and linked.scenario(cat).block_size == 16


def test_the_quotes_capacity_table_holds_the_option_at_its_slots() -> None:
    """The quote's table (the option's scenario, `capacity_rows`) fits the slots the plan gives
    the vLLM option: the pages of 4,256 tokens a request, not the 8K context."""
    cat = default_catalog()
    wl = Workload(peak_concurrency=30.0, context_tokens=8192, prompt_tokens=4000,
                  output_tokens=256)
    p = plan(PlanInputs(model="qwen3-8b", workload=wl, gpus=("rtx-4090",), formats=("int8",),
                        kv_dtypes=("fp8",), engine="vllm"), cat)
    best = p.best
    assert best is not None and best.c_vram_per_replica == 33
    rows = capacity_rows(p, best, cat)
    top = rows[-1]
    assert top.concurrency == best.slots_per_replica * best.replicas
    assert top.verdict != MemoryVerdict.DOES_NOT_FIT
    assert top.kv_request_bytes == K_FP8 * 4256
    assert option_scenario(p.inputs, best, cat).held_tokens == 4256
