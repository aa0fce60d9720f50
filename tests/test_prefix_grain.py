"""What an engine's prefix cache serves of a shared prefix (`capacity.model.prefix.PrefixGrain`):
vLLM whole KV blocks, and on a hybrid model only the block ends its prefill chunks stop at (the
mamba 'align' mode); a token pool (SGLang) and the chapter every token, but SGLang and
llama.cpp nothing of a hybrid model's shared prefix (states kept only where a prompt ended).
One definition, used by
the event model (`capacity plan --engine`, the Explorer's load view), the Planner's search, the
quote and the simulated endpoint. Expected values are computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.model.prefix import (
    TOKEN_GRAIN,
    PrefixGrain,
    align_checkpoints,
    prefix_effect,
    prefix_grain,
)
from capacity.model.scenario import Scenario, make_scenario
from capacity.plan.events import service_from_scenario


# -- the rule -----------------------------------------------------------------------------------
def test_align_checkpoints_are_the_whole_block_ends_of_a_prompts_chunks() -> None:
    """B = 528. 2,200 tokens at a 2,048-token budget: the first chunk stops at 3 x 528 = 1,584
    (it cannot reach the last whole block, 2,112), the second at 2,112, the last 88 tokens end
    off the grid; at 8,192 one chunk reaches 2,112 at once; at 600, every block; a prompt with
    no whole block leaves none."""
    assert align_checkpoints(2200, 528, 2048) == (1584, 2112)
    assert align_checkpoints(2200, 528, 8192) == (2112,)
    assert align_checkpoints(2200, 528, 600) == (528, 1056, 1584, 2112)
    assert align_checkpoints(500, 528, 2048) == ()
    assert align_checkpoints(1056, 528, 8192) == (1056,)   # a whole number of blocks
    assert align_checkpoints(1200, 528, 100) == (528, 1056)   # under one block: one block
    with pytest.raises(InputError):
        align_checkpoints(100, 0, 2048)


def test_a_hit_resumes_at_the_last_checkpoint_inside_the_shared_prefix() -> None:
    """vLLM issue 45238's two workloads (Qwen3.5, block 528, ~2,200-token prompts): a
    1,600-token shared prefix hits at 1,584; a 1,500-token one at nothing (both checkpoints,
    1,584 and 2,112, lie in the unique part). Without the align mode: whole 16-token blocks,
    1,000 -> 992; a token pool serves the prefix capped below the prompt."""
    align = PrefixGrain(block_tokens=528, align_budget_tokens=2048)
    assert align.shared(1600, 2200) == 1584
    assert align.shared(1500, 2200) == 0
    assert PrefixGrain(block_tokens=528, align_budget_tokens=8192).shared(2000, 2200) == 0
    assert PrefixGrain(block_tokens=16).shared(1000, 2000) == 992
    assert PrefixGrain(block_tokens=16).shared(1000, 1000) == 992   # capped at 999 first
    assert TOKEN_GRAIN.shared(2000, 2200) == 2000
    assert TOKEN_GRAIN.shared(3000, 2200) == 2199
    assert TOKEN_GRAIN.shared(0, 2200) == 0
    assert PrefixGrain(leaf_only=True).shared(2000, 2200) == 0
    kinds = [g.kind for g in (align, PrefixGrain(block_tokens=16), TOKEN_GRAIN,
                              PrefixGrain(leaf_only=True))]
    assert kinds == ["align", "pages", "token", "leaf"]


def test_each_profile_has_its_grain() -> None:
    """vLLM on a dense model: 16-token blocks; on Qwen3.5-9B: the align mode at the hybrid
    block (528 at bf16 KV, 1,056 at fp8, 1,024 with --block-size 1024) and the budget; SGLang's
    token pool, llama.cpp's slots and the chapter: every token of a dense model; SGLang and
    llama.cpp keep a hybrid model's states only at a prompt's end: leaf-only; the chapter's
    arithmetic every token."""
    cat = default_catalog()
    hybrid, dense = cat.models["qwen3.5-9b"], cat.models["qwen3-8b"]
    vllm = engine_profile("vllm")
    assert prefix_grain(dense, "fp16", 1, vllm, 2048) == PrefixGrain(block_tokens=16)
    assert prefix_grain(hybrid, "fp16", 1, vllm, 2048) == PrefixGrain(528, 2048)
    assert prefix_grain(hybrid, "fp8", 1, vllm, 8192) == PrefixGrain(1056, 8192)
    assert prefix_grain(hybrid, "fp16", 1, vllm, 2048, block_size=1024) == PrefixGrain(1024, 2048)
    for key in ("sglang", "llamacpp", "chapter"):
        assert prefix_grain(dense, "fp16", 1, engine_profile(key), 2048) == TOKEN_GRAIN
    for key in ("sglang", "llamacpp"):
        assert prefix_grain(hybrid, "fp16", 1, engine_profile(key), 2048).leaf_only
    assert prefix_grain(hybrid, "fp16", 1, engine_profile("chapter"), 2048) == TOKEN_GRAIN


# -- the event model and the command line -------------------------------------------------------
def _hybrid(prompt: int) -> Scenario:
    return make_scenario("qwen3.5-9b", "rtx-4090", weights="awq", context_tokens=4096,
                         prompt_tokens=prompt, kv_dtype="bf16")


def test_the_event_model_caches_what_the_engine_serves() -> None:
    """Qwen3.5-9B AWQ on an RTX 4090 under vLLM (budget 2,048): a 2,000-token prefix of
    2,200-token prompts serves 1,584 and turns the align mode on; a 400-token prefix of
    800-token prompts serves nothing (no whole block in it), so no request hits; SGLang serves
    nothing of the hybrid model's prefix, all 2,000 of Qwen3-8B's; Qwen3-8B under vLLM 992 of
    1,000."""
    s = _hybrid(2200)
    svc = service_from_scenario(s, output_tokens=100, engine="vllm", prefix_tokens=2000,
                                prefix_share=0.9)
    assert (svc.cached_tokens, svc.prefix_tokens, svc.prefix_share) == (1584, 2000, 0.9)
    assert svc.align_block_tokens == 528 and svc.prefix_cut
    short = service_from_scenario(_hybrid(800), output_tokens=100, engine="vllm",
                                  prefix_tokens=400, prefix_share=0.9)
    assert (short.cached_tokens, short.prefix_share, short.align_block_tokens) == (0, 0.0, 528)
    assert short.new_prompt_tokens == 800 and short.prefix_cut
    sg = service_from_scenario(s, output_tokens=100, engine="sglang", prefix_tokens=2000,
                               prefix_share=0.9)
    assert (sg.cached_tokens, sg.prefix_kind, sg.align_block_tokens) == (0, "leaf", 0)
    dense = make_scenario("qwen3-8b", "h100-sxm", context_tokens=4096, prompt_tokens=2000)
    sgd = service_from_scenario(dense, output_tokens=100, engine="sglang", prefix_tokens=1000,
                                prefix_share=0.5)
    assert sgd.cached_tokens == 1000 and not sgd.prefix_cut
    d = service_from_scenario(dense, output_tokens=100, engine="vllm", prefix_tokens=1000,
                              prefix_share=0.5)
    assert d.cached_tokens == 992 and d.align_block_tokens == 0


def test_plan_says_what_the_cache_serves(capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity plan --engine vllm --prefix-tokens 2000` on the default model: the JSON holds
    the asked 2,000 and the served 1,584, the text says why."""
    from capacity.cli.main import main

    argv = ["plan", "--engine", "vllm", "--prefix-tokens", "2000", "--prompt-tokens", "2200",
            "--output-tokens", "100", "--ctx", "4096", "--concurrency", "4"]
    assert main([*argv, "--format", "json"]) == 0
    text = capsys.readouterr().out
    assert '"shared_prefix_tokens": 2000' in text and '"cached_prefix_tokens": 1584' in text
    json.loads(text)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "the engine's cache serves 1,584 of the 2,000 shared tokens (a hybrid model's" in text


# -- every surface the same ---------------------------------------------------------------------
def test_planner_quote_event_model_and_simulated_engine_agree(tmp_path: Path) -> None:
    """One deployment (Qwen3.5-9B AWQ, one RTX 4090, vLLM, 2,200-token prompts, a 2,000-token
    prefix for 90% of requests): the Planner's hit, the quote's prefix line and capacity table,
    the event model's cached tokens and the simulated engine's prefix cache all take 1,584; the
    Planner's prefill is F6 of 2,200 - 0.9 x 1,584 tokens, not of 2,200 - 0.9 x 2,000."""
    from capacity.model.workload import Workload
    from capacity.plan.detail import option_scenario, prefix_served
    from capacity.plan.options import PlanInputs, Slo
    from capacity.plan.search import plan
    from capacity.report.quote import write_quote
    from capacity.sim.scheduler import SimConfig, Simulator

    wl = Workload(daily_active_users=500, context_tokens=4096, prompt_tokens=2200,
                  output_tokens=100)
    kw = dict(model="qwen3.5-9b-awq", workload=wl, gpus=("rtx-4090",), engine="vllm",
              kv_dtypes=("fp16",), max_gpus=1)
    cached = plan(PlanInputs(**kw, prefix_tokens=2000, prefix_share=0.9))  # type: ignore[arg-type]
    assert cached.best is not None
    o, inp = cached.best, cached.inputs
    s = option_scenario(inp, o)
    assert inp.prefix_hit_tokens(s.model, s.gpu, o.kv_dtype, o.tp) == 1584
    assert prefix_served(inp, o) == (1584, 2000, "align")
    # the Planner's prefill: the same as with a 1,584-token prefix, which the cache serves whole
    whole = plan(PlanInputs(**kw, prefix_tokens=1584, prefix_share=0.9))  # type: ignore[arg-type]
    assert whole.best is not None and o.prefill_ms == pytest.approx(whole.best.prefill_ms)
    # SGLang serves none of the hybrid model's prefix: its plan is the one without a prefix
    loose = Slo(ttft_ms=60_000.0, tpot_ms=1_000.0)   # the uncached prefill passes too
    sg = [plan(PlanInputs(**{**kw, "engine": "sglang", "slo": loose}, **extra))  # type: ignore[arg-type]
          for extra in ({"prefix_tokens": 2000, "prefix_share": 0.9}, {})]
    assert sg[0].best is not None and sg[1].best is not None
    assert sg[0].best.prefill_ms == pytest.approx(sg[1].best.prefill_ms)
    assert sg[0].best.prefill_ms > o.prefill_ms
    assert prefix_served(sg[0].inputs, sg[0].best) == (0, 2000, "leaf")
    text = write_quote(tmp_path / "q.md", cached).read_text()
    assert ("Prefix caching | 1,584 (what the engine's cache serves) of the 2,000 shared tokens "
            "reused by 90% of requests") in text
    sg_text = write_quote(tmp_path / "s.md", sg[0]).read_text()
    assert "Prefix caching | 0 (what the engine's cache serves) of the 2,000 shared" in sg_text
    pe = prefix_effect(s, 2000, 0.9, inp.prefix_grain_on(s.model, s.gpu, o.kv_dtype, o.tp))
    assert pe.prefix_tokens == 1584
    svc = service_from_scenario(s, output_tokens=100, engine="vllm", prefix_tokens=2000,
                                prefix_share=0.9)
    assert svc.cached_tokens == 1584
    sim = Simulator(s, SimConfig(engine="vllm"), clock="virtual")
    first, second = (sim.submit(prompt_tokens=2200, max_tokens=4, ignore_eos=True, fault=None,
                                arrival_s=0.0, prefix_key=7, prefix_tokens=2000)
                     for _ in range(2))
    assert sim.prefix_cache.admit(first) == 0 and sim.prefix_cache.admit(second) == 1584


def test_size_says_what_the_best_options_cache_serves(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """`capacity size` with a shared prefix under vLLM on RTX 4090s (4,096-token prompts, as
    its header says: align checkpoints at 1,584, 3,168 and 3,696): the best option's cache serves 1,584
    of the 2,000 tokens, and the header says so; under the chapter's profile it serves all and
    the header has no such line."""
    from capacity.cli.main import main

    argv = ["size", "--dau", "500", "--prefix-tokens", "2000", "--gpus", "rtx-4090", "--ctx",
            "4096"]
    assert main([*argv, "--engine", "vllm"]) == 0
    assert ("shared prefix: the best option's engine cache serves 1,584 of its 2,000 tokens"
            in capsys.readouterr().out)
    assert main(argv) == 0
    assert "shared prefix:" not in capsys.readouterr().out
