"""The open-loop section's prompts that vary and prefix caching (issue 32's knob check):
each run whose dataset varies the lengths draws its prompts about the run's mean, and the
hybrid-model pair with prefix caching on moves. Expected values are computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capacity.catalog.loader import default_catalog
from capacity.fit.open_loop_rows import load_rows
from capacity.fit.validate_open_loop import predict, prompt_lengths_of


# -- the open-loop section -----------------------------------------------------------------------
def test_the_open_loop_runs_draw_their_prompts() -> None:
    """A ShareGPT run of mean 342 tokens and no stated cap: one prompt per simulated request,
    mean 342 to rounding, within the model's context; the SGLang random runs' cap of 1,024
    with mean about 510 is nearly uniform on 1..1,024; fixed lengths and the V0 profile (whole
    prompts) keep the mean."""
    cat = default_catalog()
    runs = {r.run: r for r in load_rows()}
    g = runs["gpustack-h100-q35-9b-sharegpt-r8"]
    got = prompt_lengths_of(g, cat)
    assert got is not None and len(got) == 1000
    assert abs(float(np.mean(got)) - 342) < 1.0 and min(got) >= 1
    assert max(got) <= cat.models["qwen3.5-9b"].max_context_tokens
    # the geometric tail: the share at or above one 528-token block, e^(-528/342) = 0.21
    assert float(np.mean(np.asarray(got) >= 528)) == pytest.approx(math.exp(-528 / 342), abs=0.01)
    rnd = prompt_lengths_of(runs["sglang-h200x4-l70-random-r4"], cat)
    assert rnd is not None and max(rnd) <= 1024 and abs(float(np.mean(rnd)) - 513) < 1.0
    assert float(np.mean(np.asarray(rnd) <= 512)) == pytest.approx(0.5, abs=0.02)
    assert prompt_lengths_of(runs["llmd-h200x16-gptoss120b-5k-r45"], cat) is None
    assert prompt_lengths_of(runs["vllm041-3090-l8-sharegpt-q1"], cat) is None


def test_prefix_caching_moves_the_hybrid_runs_ttft() -> None:
    """GPUStack's Qwen3.5-9B at 8 req/s with and without --enable-prefix-caching (measured
    mean TTFT 41.12 -> 46.19 ms, +12 %): on the typical basis the prediction moves up by more
    than 1 % (a fifth of the ShareGPT prompts reach a 528-token block and prefill in two
    steps), and the E2E moves by less than the TTFT does."""
    runs = {r.run: r for r in load_rows()}
    a = predict(runs["gpustack-h100-q35-9b-sharegpt-r8"], "typical")
    b = predict(runs["gpustack-h100-q35-9b-sharegpt-r8-prefix"], "typical")
    ttft = b.mean_ms["ttft_ms"] / a.mean_ms["ttft_ms"] - 1
    e2e = b.mean_ms["e2e_ms"] / a.mean_ms["e2e_ms"] - 1
    assert 0.01 < ttft < 0.123
    assert abs(e2e) < ttft
