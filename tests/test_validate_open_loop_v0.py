"""vLLM V0 runs scored as V0 (issue 32): a vLLM release before 0.8.0 ran the V0 engine, whose
default scheduler prefills the waiting prompts whole, first, in a step without decoding; the
open-loop section schedules its rows with data/engines.toml's `vllmv0` profile."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.catalog.engines import engine_profile, version_tuple
from capacity.errors import InputError
from capacity.fit.open_loop_rows import load_rows, profile_for
from capacity.model.scenario import make_scenario
from capacity.plan.events import ServiceModel, service_from_scenario, simulate


def test_versions_pick_the_profile() -> None:
    assert version_tuple("0.4.1") == (0, 4, 1)
    assert version_tuple("v0.11.0") == (0, 11, 0)
    assert version_tuple("0.6.6.post1") == (0, 6, 6)
    assert version_tuple("not stated") is None
    assert profile_for("vllm", "0.4.1") == "vllmv0"
    assert profile_for("vllm", "0.5.2") == "vllmv0"
    assert profile_for("vllm", "0.8.0") == "vllm"
    assert profile_for("vllm", "v0.11.0") == "vllm"
    assert profile_for("vllm", "not stated") == "vllm"
    assert profile_for("sglang", "0.4.1") == "sglang"
    assert profile_for("vllmv0", "0.6.3") == "vllmv0"   # a row that names V0 itself
    with pytest.raises(InputError, match="state the profile"):
        profile_for("vllm", "0.6.3", "open_loop.csv line 9")


def test_the_published_v0_rows_are_scheduled_as_v0() -> None:
    rows = load_rows()
    v0 = [r for r in rows if r.engine_version == "0.4.1"]
    assert v0 and all(r.profile == "vllmv0" for r in v0)
    assert all(r.profile == "vllm" for r in rows
               if r.engine.startswith("vLLM") and r.engine_version == "not stated")
    prof = engine_profile("vllmv0")
    assert (prof.max_seqs, prof.kv_block_tokens, prof.token_budget_tokens) == (256, 16, 0)
    assert not prof.chunked and not prof.mixed and prof.kv_admission == "tokens"


def _svc(profile: str) -> ServiceModel:
    """A replica of 2 slots: a 10 ms decode step at any batch (weights read), no arithmetic,
    100-token prompts of 50 ms, 4 output tokens; scheduled as `profile` schedules."""
    prof = engine_profile(profile)
    return ServiceModel(slots=2, bandwidth_ms=np.full(3, 10.0), compute_ms=np.zeros(3),
                        comm_ms=np.zeros(3), overhead_ms=0.0, prefill_ms=50.0,
                        prompt_tokens=100, output_tokens=4,
                        chunk_tokens=prof.token_budget_tokens or None,
                        mixed=prof.mixed or not prof.chunked, engine=prof.key)


# A arrives at 0, B at 65 ms while A decodes, then 8 requests alone, 1 s apart.
ARRIVALS = [0.0, 65.0, *(1000.0 * k for k in range(1, 9))]


def test_a_v0_row_prefills_first_and_decoding_waits() -> None:
    """By hand, V0 (whole prompts first): A's prompt 0-50 ms (first token at 50); A decodes at
    60 and 70; B (arrived at 65) is prefilled alone 70-120 while A waits; then both decode: A's
    last token at 130 (E2E 130, gaps 10, 10, 60), B's at 130, 140, 150 (TTFT 55, E2E 85). Each
    later request alone: TTFT 50, E2E 80, gaps 10. Means over the 10: TTFT (50 + 55 + 8 x 50)
    / 10 = 50.5 ms; E2E (130 + 85 + 8 x 80) / 10 = 85.5 ms; ITL 350 ms / 30 gaps = 11.667 ms."""
    q = simulate(_svc(profile_for("vllm", "0.4.1")), arrivals_ms=ARRIVALS,
                 warmup_fraction=0.0, itl=True)
    assert q.mean_ttft_ms == pytest.approx(50.5)
    assert q.mean_e2e_ms == pytest.approx(85.5)
    assert q.itl_mean_ms == pytest.approx(350.0 / 30.0)
    assert q.itl_ms is not None and q.itl_ms[0.99] == pytest.approx(60.0)


def test_v1_carries_the_prompt_in_a_mixed_step_instead() -> None:
    """The same arrivals under V1 (mixed steps, budget 2048): at 70 ms B's 100 prompt tokens
    ride with A's decode token in one pass of max(10, 0 + 50) = 50 ms: A's last token at 120
    (E2E 120, last gap 50), B's first at 120 and last at 150. E2E mean (120 + 85 + 640) / 10 =
    84.5 ms; ITL 340 / 30."""
    q = simulate(_svc(profile_for("vllm", "0.8.0")), arrivals_ms=ARRIVALS,
                 warmup_fraction=0.0, itl=True)
    assert q.mean_ttft_ms == pytest.approx(50.5)
    assert q.mean_e2e_ms == pytest.approx(84.5)
    assert q.itl_mean_ms == pytest.approx(340.0 / 30.0)


def test_the_v0_service_prefills_whole_prompts_and_admits_by_pages() -> None:
    """`service_from_scenario` under the V0 profile: no token budget (whole prompts), slots by
    the pages of prompt + output (not the chapter's full context), no paged pool (the event model
    grows pages and preempts only with a budget)."""
    s = make_scenario("llama-3.1-8b", "rtx-3090", context_tokens=8192, prompt_tokens=214)
    v0 = service_from_scenario(s, output_tokens=200, engine="vllmv0")
    chapter = service_from_scenario(s, output_tokens=200, engine="chapter")
    assert v0.chunk_tokens is None and v0.paged is None and v0.engine == "vllmv0"
    assert v0.slots > chapter.slots
    assert v0.saturation_rate_per_s == pytest.approx(
        1e3 / (v0.mean_prefill_ms + 199 * float(v0.step_ms[v0.slots]) / v0.slots))
