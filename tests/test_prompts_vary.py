"""Prompts that vary about a run's mean, and vLLM's mamba 'align' mode (prefix caching on a
hybrid model), in the chunked-prefill event model (issue 32's knob check): vLLM's attention
block on a hybrid model, the chunk split at it, per-request prompts, and `capacity plan
--prefix-caching`. Expected values are computed by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from capacity.catalog.loader import LayerGroup, default_catalog
from capacity.errors import InputError
from capacity.model.kv import hybrid_block_tokens
from capacity.model.prefix import align_chunk_tokens
from capacity.model.scenario import make_scenario
from capacity.plan.events import ServiceModel, run_trace, service_from_scenario


def _svc(**kw: object) -> ServiceModel:
    """A 10 ms weight read at every batch, no compute, 0.1 ms a prompt token (linear, no
    attention), 1,000-token prompts, one-token answers, an 8,192-token budget."""
    base: dict[str, object] = dict(
        slots=4, bandwidth_ms=np.full(5, 10.0), compute_ms=np.zeros(5), comm_ms=np.zeros(5),
        overhead_ms=0.0, prefill_ms=100.0, prompt_tokens=1000, output_tokens=1,
        chunk_tokens=8192)
    base.update(kw)
    lengths = base.get("prompt_lengths") or (base["prompt_tokens"],)
    longest = max(int(x) for x in lengths)  # type: ignore[union-attr]
    base.setdefault("prefill_cum_ms", 0.1 * np.arange(max(longest, 1) + 1, dtype=np.float64))
    return ServiceModel(**base)  # type: ignore[arg-type]


# -- vLLM's attention block on a hybrid model ---------------------------------------------------
def test_the_hybrid_block_holds_one_linear_layers_state() -> None:
    """Qwen3.5-9B: a Gated DeltaNet layer's paged state is 32 x 128 x 128 x 4 B (float32) +
    (2 x 16 x 128 + 32 x 128) x 3 x 2 B = 2,097,152 + 49,152 = 2,146,304 B; a full layer's KV
    token is 2 x 4 x 256 x 2 B = 4,096 B at bf16, 2,048 B at fp8; so 2,146,304 / (16 x 4,096)
    = 32.75 -> 33 x 16 = 528 tokens, and at fp8 65.5 -> 66 x 16 = 1,056. At TP 2 both halve:
    528 again. A dense model has none."""
    cat = default_catalog()
    m = cat.models["qwen3.5-9b"]
    linear = [g for g in m.layer_groups if g.kind == "linear"]
    assert [g.page_state_bytes for g in linear] == [32 * 128 * 128 * 4 + 8192 * 3 * 2]
    assert [g.state_bytes for g in linear] == [0]   # the chapter's memory arithmetic: unchanged
    assert hybrid_block_tokens(m, "bf16") == 528
    assert hybrid_block_tokens(m, "fp8") == 1056
    assert hybrid_block_tokens(m, "bf16", tp=2) == 528
    assert hybrid_block_tokens(cat.models["qwen3-8b"], "bf16") == 0
    # a state that fits one 16-token page exactly, and one byte more
    exact = replace(m, layer_groups=(LayerGroup(kind="full", count=1, kv_heads=1, head_dim=64,
                                                q_heads=1),
                                     LayerGroup(kind="linear", count=3,
                                                page_state_bytes=16 * 256.0)))
    assert hybrid_block_tokens(exact, "bf16") == 16
    more = replace(exact, layer_groups=(exact.layer_groups[0],
                                        replace(exact.layer_groups[1],
                                                page_state_bytes=16 * 256.0 + 1)))
    assert hybrid_block_tokens(more, "bf16") == 32


def test_an_aligned_chunk_ends_at_the_last_whole_block() -> None:
    """vLLM's _mamba_block_aligned_split at B = 528: a 1,000-token prompt's last whole block
    ends at 528, so a step prefills 528 and the next 472; a 342-token prompt (no whole block)
    goes at once; a 2,000-token prompt with 600 tokens of budget takes one block (528), then
    at 528 with 2,000 tokens of budget runs to 1,584 (3 blocks), then the last 416; a budget
    under one block takes nothing."""
    def take(prompt: int, done: int, budget: int, block: int = 528) -> int:
        return align_chunk_tokens(prompt, done, budget, block)

    assert take(1000, 0, 1000) == 528
    assert take(1000, 528, 472) == 472
    assert take(342, 0, 342) == 342
    assert take(2000, 0, 600) == 528
    assert take(2000, 528, 1472) == 1584 - 528
    assert take(2000, 1584, 416) == 416
    assert take(2000, 0, 500) == 0
    assert take(1056, 0, 1056) == 1056   # whole blocks: one chunk
    assert take(1000, 0, 1000, block=0) == 1000   # off


def test_an_aligned_prompt_takes_one_more_step() -> None:
    """One 1,000-token request on an idle replica: without the align mode one pass of
    max(10, 1,000 x 0.1) = 100 ms; with B = 528 two passes, max(10, 52.8) + max(10, 47.2) =
    100 ms as well (linear prefill), and a prompt whose tail is shorter than the weight read
    pays it again: 540 tokens = 528 + 12 -> 52.8 + max(10, 1.2) = 62.8 ms against 54 ms."""
    def ttft(svc: ServiceModel) -> float:
        tr = run_trace(svc, np.array([0.0]), None, 1)
        return float(tr.first_ms[0] - tr.arrival_ms[0])

    assert ttft(_svc()) == pytest.approx(100.0)
    assert ttft(_svc(align_block_tokens=528)) == pytest.approx(100.0)
    assert ttft(_svc(prompt_tokens=540)) == pytest.approx(54.0)
    assert ttft(_svc(prompt_tokens=540, align_block_tokens=528)) == pytest.approx(62.8)
    assert ttft(_svc(prompt_tokens=342, align_block_tokens=528)) == pytest.approx(34.2)


# -- prompts that vary --------------------------------------------------------------------------
def test_each_request_prefills_its_own_prompt() -> None:
    """Prompts 200, 1,000 and 540 tokens, cycled, sent 1 s apart to an idle replica: each
    TTFT is its own pass, max(10, 0.1 x P): 20, 100, 54, 20 ms; with the align mode at 528
    the 540-token one takes 52.8 + 10 = 62.8 ms and the 1,000-token one 52.8 + 47.2."""
    svc = _svc(prompt_lengths=(200, 1000, 540))
    prompt, cached, extra, hit = svc.request_prompts(4)
    assert prompt.tolist() == [200, 1000, 540, 200]
    assert not cached.any() and not extra.any() and not hit.any()
    assert svc.longest_prompt_tokens == 1000
    tr = run_trace(svc, np.arange(4) * 1000.0, None, 4)
    assert (tr.first_ms - tr.arrival_ms).tolist() == pytest.approx([20.0, 100.0, 54.0, 20.0])
    al = run_trace(replace(svc, align_block_tokens=528), np.arange(4) * 1000.0, None, 4)
    assert (al.first_ms - al.arrival_ms).tolist() == pytest.approx([20.0, 100.0, 62.8, 20.0])


def test_prompt_lengths_are_refused_where_the_model_cannot_run_them() -> None:
    with pytest.raises(InputError, match="per-request prompt lengths"):
        _svc(prompt_lengths=(200, 0))
    with pytest.raises(InputError, match="per-request prompt lengths"):
        _svc(prompt_lengths=(200,), chunk_tokens=None)
    with pytest.raises(InputError, match="aligned prefill block"):
        _svc(align_block_tokens=528, chunk_tokens=None)
    s = make_scenario("qwen3.5-9b", "h100-sxm", context_tokens=1100, prompt_tokens=342)
    with pytest.raises(InputError, match="chunked-prefill profile"):
        service_from_scenario(s, output_tokens=50, engine="chapter", prompt_lengths=[300, 384])
    with pytest.raises(InputError, match="longest prompt"):
        service_from_scenario(s, output_tokens=200, engine="vllm", prompt_lengths=[100, 1000])


def test_the_align_mode_runs_on_a_hybrid_model_under_vllm_with_prefix_caching() -> None:
    """The block is Qwen3.5-9B's 528 under the vLLM profile with prefix caching on, and 0 with
    it off, under SGLang's profile (its own hybrid cache), or on a dense model."""
    s = make_scenario("qwen3.5-9b", "h100-sxm", context_tokens=1300, prompt_tokens=342,
                      kv_dtype="bf16")
    on = service_from_scenario(s, output_tokens=100, engine="vllm", prefix_caching=True,
                               prompt_lengths=[100, 342, 584, 1000])
    assert on.align_block_tokens == 528 and on.longest_prompt_tokens == 1000
    # the prefill arrays reach the longest prompt (and, paged, its recompute with the output)
    assert on.prefill_cum_ms is not None and len(on.prefill_cum_ms) == 1000 + 1
    assert on.paged is not None and len(on.paged.prefill_cum_ms) == 1000 + 100 + 1
    assert service_from_scenario(s, output_tokens=100, engine="vllm").align_block_tokens == 0
    # a larger --block-size is the block vLLM runs, and so the one its chunks end at
    for block, align in ((256, 528), (1024, 1024)):
        assert service_from_scenario(s, output_tokens=100, engine="vllm", prefix_caching=True,
                                     block_tokens=block).align_block_tokens == align
    assert service_from_scenario(s, output_tokens=100, engine="sglang",
                                 prefix_caching=True).align_block_tokens == 0
    dense = make_scenario("qwen3-8b", "h100-sxm", context_tokens=1300, prompt_tokens=342)
    assert service_from_scenario(dense, output_tokens=100, engine="vllm",
                                 prefix_caching=True).align_block_tokens == 0


def test_plan_takes_prefix_caching_on_the_command_line(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """`capacity plan --prefix-caching` on Qwen3.5-9B under vLLM: a 1,000-token prompt's
    chunks end at its 528-token block (two steps, 528 and 472 tokens), so at 2 req/s the
    steps carry other prompts' chunks differently and the mean TTFT moves (it rose before
    vLLM's one-step-ahead scheduling was modelled; with it, it falls, 72.2 -> 71.4 ms: a
    prompt that arrives during another's first chunk no longer lengthens its second,
    2026-12-06); the JSON names the block. On a dense model the flag changes nothing."""
    import json

    from capacity.cli.main import main

    base = ["plan", "--model", "qwen3.5-9b", "--gpu", "h100-sxm", "--engine", "vllm",
            "--rate", "2", "--duration", "20", "--prompt-tokens", "1000", "--output-tokens",
            "32", "--ctx", "2048", "--format", "json"]

    def load(argv: list[str]) -> dict[str, object]:
        assert main(argv) == 0
        out = json.loads(capsys.readouterr().out)
        got = out["open_loop"] if "open_loop" in out else out
        assert isinstance(got, dict)
        return got

    off, on = load(base), load([*base, "--prefix-caching"])
    assert '"aligned_block_tokens": 0' in json.dumps(off)
    assert '"aligned_block_tokens": 528' in json.dumps(on)
    ttft = [float(x["points"][0]["ttft_mean_ms"]) for x in (off, on)]  # type: ignore[index]
    assert ttft[1] != pytest.approx(ttft[0], rel=1e-3)
    dense = [a if a != "qwen3.5-9b" else "qwen3-8b" for a in base]
    assert load(dense) == load([*dense, "--prefix-caching"])
    assert main(["plan", "--model", "qwen3.5-9b", "--prefix-caching"]) != 0
    assert "--prefix-caching" in capsys.readouterr().err
