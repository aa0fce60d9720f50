"""Multi-turn prefix caching in the chunked-prefill event model (issue 32): turn k + 1's prompt
is the history (earlier prompts and answers) plus a new message; the cache serves the history,
so only the new tokens are prefilled, while the history's KV stays in the pool and in
attention. Expected values are computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capacity.cli.main import main
from capacity.errors import InputError
from capacity.model.scenario import make_scenario
from capacity.plan.events import ServiceModel, service_from_scenario, simulate


def _svc(turns: int = 3, **kw: object) -> ServiceModel:
    """A 10 ms weight read at every batch, no compute, 0.5 ms a prompt token (linear, no
    attention), 100-token first prompts, one-token answers, 20 new tokens a later turn:
    prompts 100, 121, 142 tokens; a 200-token budget."""
    longest = 100 + (turns - 1) * 21
    base: dict[str, object] = dict(
        slots=2, bandwidth_ms=np.full(3, 10.0), compute_ms=np.zeros(3), comm_ms=np.zeros(3),
        overhead_ms=0.0, prefill_ms=50.0, prompt_tokens=100, output_tokens=1,
        chunk_tokens=200, prefill_cum_ms=0.5 * np.arange(longest + 1, dtype=np.float64),
        turns=turns, turn_tokens=20 if turns > 1 else 0,
        turn_first_ms=np.zeros(turns - 1) if turns > 1 else None)
    base.update(kw)
    return ServiceModel(**base)  # type: ignore[arg-type]


def test_a_conversation_prefills_the_new_messages_not_the_whole_prompts() -> None:
    """Three turns: prompts 100, 100 + 1 + 20 = 121, 121 + 1 + 20 = 142; the history cached
    for turns 2 and 3 is 101 and 122 tokens, so a conversation prefills 100 + 20 + 20 = 140
    tokens, not 100 + 121 + 142 = 363."""
    svc = _svc()
    prompt, cached, extra, shares = svc.request_prompts(6)
    assert prompt.tolist() == [100, 121, 142] * 2
    assert cached.tolist() == [0, 101, 122] * 2
    assert (prompt - cached)[:3].sum() == 140
    assert svc.longest_prompt_tokens == 142
    assert svc.new_prompt_tokens == pytest.approx(140 / 3)
    assert extra.tolist() == [0.0] * 6 and not shares.any()
    # one request at a time: turn 1 a 50 ms pass (100 x 0.5 ms over the 10 ms weight read),
    # turns 2 and 3 a 10 ms pass each (20 x 0.5 ms = 10 ms, the weight read)
    q = simulate(svc, concurrency=1, n_requests=12, warmup_fraction=0.0)
    assert q.mean_ttft_ms == pytest.approx((50 + 10 + 10) / 3)
    assert q.ttft_ms[0.5] == pytest.approx(10.0)
    # a request's mean prefill work: (50 + 10 + 10) / 3 ms
    assert svc.mean_prefill_ms == pytest.approx(70 / 3)
    one = _svc(turns=1)
    assert one.request_prompts(3)[0].tolist() == [100] * 3
    assert simulate(one, concurrency=1, n_requests=12,
                    warmup_fraction=0.0).mean_ttft_ms == pytest.approx(50.0)


def test_a_system_prompt_hit_starts_the_conversation() -> None:
    """A 60-token shared prefix every conversation after the first finds cached: turn 1 of
    conversation 0 prefills 100 tokens, of conversation 1 40 (first chunk + 2 ms); turns 2
    and 3 their 20 new tokens, holding the shared prefix's pages once."""
    svc = _svc(cached_tokens=60, prefix_share=1.0, hit_first_ms=2.0,
               turn_first_ms=np.array([1.0, 1.5]))
    prompt, cached, extra, shares = svc.request_prompts(6)
    assert cached.tolist() == [0, 101, 122, 60, 101, 122]
    assert extra.tolist() == [0.0, 1.0, 1.5, 2.0, 1.0, 1.5]
    assert shares.tolist() == [False] * 3 + [True] * 3


def test_multi_turn_needs_the_chunked_path_and_a_context_for_the_last_turn() -> None:
    s = make_scenario(context_tokens=2048, prompt_tokens=500)
    with pytest.raises(InputError, match="chunked-prefill path"):
        service_from_scenario(s, output_tokens=64, turns=3, turn_tokens=100)
    with pytest.raises(InputError, match="raise --ctx"):   # 500 + 10 x 164 + 64 > 2,048
        service_from_scenario(s, output_tokens=64, engine="vllm", turns=11, turn_tokens=100)
    with pytest.raises(InputError, match="new token"):
        service_from_scenario(s, output_tokens=64, engine="vllm", turns=3, turn_tokens=0)


def test_the_history_stays_in_attention_and_in_the_kv_pool() -> None:
    """Four turns of 100 new tokens after a 500-token prompt and 64-token answers: prompts 500,
    664, 828, 992. Turn k's new tokens attend to its history, so their chunk costs more than the
    first 100 tokens of a prompt; the decode step is F4 at the turns' mean context, longer than
    at one turn's; a request holds its whole history's pages (turn 4: 992 + 64 tokens)."""
    s = make_scenario(context_tokens=2048, prompt_tokens=500)
    one = service_from_scenario(s, output_tokens=64, engine="vllm")
    four = service_from_scenario(s, output_tokens=64, engine="vllm", turns=4, turn_tokens=100)
    assert [four.turn_prompt_tokens(k) for k in range(4)] == [500, 664, 828, 992]
    assert four.chunk_ms(892, 100) > four.chunk_ms(400, 100) > four.chunk_ms(0, 100)
    b = 8
    assert four.batch_step_ms[b] > one.batch_step_ms[b]
    assert four.paged is not None and one.paged is not None
    assert len(four.paged.held_bytes) - 1 == 992 + 64 + four.paged.block_tokens
    # the pool counts the whole history: Qwen3.5-9B (hybrid) in vLLM's 528-token blocks of
    # 8 x 4,096 B a token, beside 24 state pages of 528 x 4,096 B = 51,904,512 B a request:
    # 1,056 tokens take 2 blocks (+34,603,008 B), 500 tokens 1 (+17,301,504 B)
    assert four.paged.held_bytes[992 + 64] == 51_904_512 + 34_603_008
    assert one.paged.held_bytes[500] == 51_904_512 + 17_301_504
    assert four.paged.held_bytes[1057] == 51_904_512 + 3 * 17_301_504
    # prefill per request: the mean of 500 and three 100-token turns, (500 + 300) / 4 = 200
    assert four.new_prompt_tokens == pytest.approx(200.0)
    assert four.mean_prefill_ms < one.mean_prefill_ms
    assert four.saturation_rate_per_s > 0


def test_plan_takes_turns_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--engine", "vllm", "--rate", "2", "--duration", "20", "--prompt-tokens",
            "500", "--output-tokens", "64", "--ctx", "2048", "--format", "json"]
    assert main([*base, "--turns", "4", "--turn-tokens", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    load = out["open_loop"] if "open_loop" in out else out
    text = json.dumps(load)
    assert '"turns": 4' in text and '"turn_tokens": 100' in text
    assert '"prefilled_tokens_mean": 200.0' in text
    assert main([*base, "--turns", "4"]) != 0
    assert "--turn-tokens" in capsys.readouterr().err
    assert main(["plan", "--engine", "vllmv0", "--rate", "2", "--turns", "2",
                 "--turn-tokens", "10"]) != 0
    assert "chunked" in capsys.readouterr().err
