"""The event model's paged KV pool (issue 32): vLLM's and SGLang's profiles admit a request when
its prompt's pages fit, grow pages as tokens come, and preempt the newest request when the pool
runs out (recompute). Expected values are computed by hand in each test."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from capacity.fit.planning import scenario_with_basis
from capacity.model.scenario import Scenario, make_scenario
from capacity.plan.events import arrival_times_ms, service_from_scenario, simulate
from capacity.plan.service import PagedKv, ServiceModel


def _tiny(pool_bytes: float) -> ServiceModel:
    """8-token prompts, 5-token answers, 2 ms a prompt token, a 10 ms weight read every step
    (no compute), a 100-token budget; 1 B a token in 4-token pages (a request holding t tokens
    takes 4 ceil(t / 4) B); today's slots 1 (a whole 13-token request is 16 B), the paged
    maximum 3 (floor(pool / 8 B of prompt pages))."""
    t = np.arange(0, 8 + 5 + 4 + 1)
    paged = PagedKv(pool_bytes=pool_bytes, held_bytes=4.0 * np.ceil(t / 4.0), shared_bytes=0.0,
                    block_tokens=4, reserve_output_share=0.0, max_batch=3,
                    bandwidth_ms=np.full(4, 10.0), compute_ms=np.zeros(4), comm_ms=np.zeros(4),
                    serial_ms=np.zeros(4),
                    prefill_cum_ms=2.0 * np.arange(8 + 5 + 1, dtype=np.float64))
    return ServiceModel(slots=1, bandwidth_ms=np.full(2, 10.0), compute_ms=np.zeros(2),
                        comm_ms=np.zeros(2), overhead_ms=0.0, prefill_ms=16.0, prompt_tokens=8,
                        output_tokens=5, chunk_tokens=100,
                        prefill_cum_ms=2.0 * np.arange(9, dtype=np.float64), paged=paged)


# three requests at once, then seven alone (each: a 16 ms prefill, four 10 ms steps: E2E 56)
ARRIVALS = [0.0, 0.0, 0.0, *(1000.0 * k for k in range(1, 8))]


def test_admission_by_prompt_pages() -> None:
    """A request is admitted when its prompt's pages and one block fit: two held prompts take
    8 + 8 B, the third needs 8 + 4 B more: 28 B. A 27-B pool runs two (first step: 16 prompt
    tokens, 32 ms), they decode 4 steps to 72 ms, then the third is admitted (queued 72 ms),
    prefilled by 88 (its TTFT: 88, from its arrival at 0) and done at 128: mean TTFT
    (32 + 32 + 88 + 7 x 16) / 10 = 26.4 ms."""
    q = simulate(_tiny(27.0), arrivals_ms=ARRIVALS, warmup_fraction=0.0)
    assert q.max_running == 2
    assert q.preemptions == 0
    assert q.mean_ttft_ms == pytest.approx(26.4)
    assert q.mean_queue_ms == pytest.approx(7.2)
    assert q.mean_e2e_ms == pytest.approx((72 + 72 + 128 + 7 * 56) / 10)
    roomy = simulate(_tiny(28.0), arrivals_ms=ARRIVALS, warmup_fraction=0.0)
    assert roomy.max_running == 3


def test_preemption_and_recompute_with_a_tiny_pool() -> None:
    """A 30-B pool admits all three (8 + 8 + 8 + 4 = 28 B): one step prefills 24 tokens (48 ms),
    each gets its first token at 48. Their next token needs 9 tokens each, 3 pages = 12 B, 36 B
    > 30: the newest (the third) is preempted; the other two decode 4 steps (12 tokens, 12 B
    each, fit) to 88 and finish. The third is recomputed over its prompt and the 1 token it had
    generated: 9 tokens, 18 ms, 88..106 (its next token), then 3 steps to 136. Its TTFT stays
    48; its gap across the preemption is 106 - 48 = 58 ms. Mean TTFT (3 x 48 + 7 x 16) / 10 =
    25.6, mean E2E (88 + 88 + 136 + 7 x 56) / 10 = 70.4 (a recompute of the prompt alone would
    give 70.2), mean ITL (8 x 10 + 58 + 3 x 10 + 28 x 10) / 40 = 11.2 ms."""
    svc = _tiny(30.0)
    q = simulate(svc, arrivals_ms=ARRIVALS, warmup_fraction=0.0, itl=True)
    assert q.preemptions == 1
    assert q.max_running == 3 > svc.slots == 1
    assert q.mean_ttft_ms == pytest.approx(25.6)
    assert q.mean_e2e_ms == pytest.approx(70.4)
    assert q.itl_mean_ms == pytest.approx(11.2)
    assert q.mean_queue_ms == pytest.approx(0.0)   # its queue time is its first admission's


def _qwen(util: float, prompt: int) -> Scenario:
    """Qwen3-8B BF16 on an H100 SXM (80 GB, 16 GB of weights, 2 GB runtime), 256-token
    answers, vLLM's typical basis (tests/test_events_knobs.py's)."""
    s = make_scenario("qwen3-8b", "h100-sxm", vram_gb=80.0, util=util, weights_gb=16.0,
                      overhead_gb=2.0, prompt_tokens=prompt, context_tokens=prompt + 256)
    return scenario_with_basis(s, "typical:vllm")


def test_paged_maximum_and_step_arrays() -> None:
    """147,456 B of KV a token in 16-token pages: a 1,000-token prompt holds 1,008 tokens =
    148,635,648 B. Util 0.9 (54e9 B of pool): floor(54e9 / 148,635,648) = 363 at once (under
    max_num_seqs 1,024, the budget 8,192 - 1), while today's slots are floor(54e9 / pages of
    1,264 tokens, 186,384,384 B) = 289; util 0.5 (22e9 B): 148 against 118. The step arrays
    reach the paged maximum and equal today's up to the slots; slots keep their meaning."""
    for util, slots, most in ((0.9, 289, 363), (0.5, 118, 148)):
        svc = service_from_scenario(_qwen(util, 1000), output_tokens=256, engine="vllm",
                                    max_num_seqs=1024, chunk_tokens=8192)
        assert svc.slots == slots == math.floor((54e9 if util == 0.9 else 22e9) / 186_384_384)
        assert svc.max_batch == most == math.floor((54e9 if util == 0.9 else 22e9)
                                                   / (1008 * 147_456))
        assert svc.paged is not None
        assert len(svc.paged.bandwidth_ms) == len(svc.batch_step_ms) == most + 1
        np.testing.assert_array_equal(svc.batch_step_ms[: slots + 1], svc.step_ms)
        assert len(svc.paged.prefill_cum_ms) == 1000 + 256 + 1
        np.testing.assert_array_equal(svc.paged.prefill_cum_ms[:1001], svc.prefill_cum_ms)


def test_profiles_without_preemption_keep_reserving() -> None:
    """The chapter's and llama.cpp's profiles reserve at admission (`paged` None, max_batch =
    slots); vLLM and SGLang grow pages and preempt."""
    s = _qwen(0.9, 1000)
    for engine, paged in (("chapter", False), ("llamacpp", False), ("vllm", True),
                          ("sglang", True)):
        svc = service_from_scenario(s, output_tokens=256, engine=engine)
        assert (svc.paged is not None) is paged
        if not paged:
            assert svc.max_batch == svc.slots


def test_a_pool_that_never_binds_changes_nothing() -> None:
    """Qwen3-8B on an H100 at 4 req/s for 60 s (about 16 requests at once, 289 slots): every
    statistic of the paged run equals the reserving run's (the same service without its paged
    pool), to the last bit, and nothing is preempted."""
    svc = service_from_scenario(_qwen(0.9, 1000), output_tokens=256, engine="vllm")
    arr = arrival_times_ms([(4.0, 60.0)], seed=0).tolist()
    paged = simulate(svc, arrivals_ms=arr, itl=True)
    before = simulate(dataclasses.replace(svc, paged=None), arrivals_ms=arr, itl=True)
    assert paged.preemptions == 0
    assert paged.max_running < svc.slots
    assert dataclasses.asdict(paged) == dataclasses.asdict(before)


def test_a_binding_pool_runs_more_requests_than_slots() -> None:
    """Util 0.5 at 18 req/s (more requests would run at once than the 118 slots, 118 x 14.5 ms
    a step at full slots = 1.7 s of decode each): the paged pool runs more than 118 at once,
    at most its 148, and preempts. (At 16 req/s the run peaks at 125 at once, which the pages
    of requests still short of their 256 tokens hold without preempting.)"""
    svc = service_from_scenario(_qwen(0.5, 1000), output_tokens=256, engine="vllm",
                                max_num_seqs=256, chunk_tokens=2048)
    q = simulate(svc, arrivals_ms=arrival_times_ms([(18.0, 60.0)], seed=0).tolist())
    assert svc.slots == 118
    assert 118 < q.max_running <= svc.max_batch == 148
    assert q.preemptions > 0


@pytest.mark.parametrize(("reserve", "shared"), [(0.0, 0.0), (0.5, 0.0), (0.5, 3.0)])
def test_a_claim_by_hand_one_request_or_many(reserve: float, shared: float) -> None:
    # the pool's claim of requests holding t tokens (4-token pages of 1 B: 4 ceil(t / 4) B,
    # capped at the table's end), with `extra` tokens each, a share of their remaining output
    # reserved (SGLang) and a shared prefix's bytes counted once (less per hit)
    from capacity.plan.event_pages import PagedPool

    svc = _tiny(1000.0)
    svc = dataclasses.replace(svc, paged=dataclasses.replace(
        svc.paged, reserve_output_share=reserve, shared_bytes=shared))
    pages = PagedPool(svc, 3, np.array([True, False, True]))
    pages.held[:] = [8, 10, 3]
    pages.emitted[:] = [1, 3, 0]

    def by_hand_at(i: int, held: int, extra: int) -> float:
        t = held + extra + math.ceil(reserve * max(5 - pages.emitted[i] - extra, 0))
        return 4.0 * math.ceil(min(t, 17) / 4.0) - (shared if i != 1 else 0.0)

    def by_hand(i: int, extra: int) -> float:
        return by_hand_at(i, int(pages.held[i]), extra)

    for extra in (0, 1, 2):
        one = [pages.claim([i], extra) for i in range(3)]
        assert one == pytest.approx([by_hand(i, extra) for i in range(3)])
        assert pages.claim([0, 1, 2], extra) == pytest.approx(sum(one))
        # the claim a request would have holding 4 tokens more, nothing written down
        assert [pages.claim_at(i, int(pages.held[i]) + 4, extra) for i in range(3)] == (
            pytest.approx([by_hand_at(i, int(pages.held[i]) + 4, extra) for i in range(3)]))
    assert pages.claim([]) == 0.0
    # admitting request 1 asks its prompt's pages and one block, 8 + 4 tokens (12 B; with
    # half its 2 tokens left reserved, 13 tokens: 16 B)
    assert pages.admit_claim(1, 8) == pytest.approx(12.0 if reserve == 0 else 16.0)
    assert pages.admit_claim(1, 8) == by_hand_at(1, 8 + 4, 0)
    assert list(pages.held) == [8, 10, 3]   # nothing written


@pytest.mark.parametrize("clients", [3, 24])
def test_every_request_leaves_the_pool_with_its_tokens(monkeypatch: pytest.MonkeyPatch,
                                                       clients: int) -> None:
    """The event loop keeps a running request's held and emitted tokens less the tick (it
    gains one a step, and no step touches every running request) and writes them back when
    it stops: at the end every request has emitted its output and holds its prompt and all
    but its last token, preempted ones too (the tiny pool preempts at 3 and 24 clients)."""
    from capacity.plan.event_pages import PagedPool

    pools: list[PagedPool] = []
    made = PagedPool.__init__

    def keep(self: PagedPool, *args: object) -> None:
        made(self, *args)  # type: ignore[arg-type]
        pools.append(self)

    monkeypatch.setattr(PagedPool, "__init__", keep)
    q = simulate(_tiny(30.0), concurrency=clients, n_requests=6 * clients, phased=False,
                 warmup_fraction=0.0)
    assert q.preemptions > 0
    (pages,) = pools
    assert list(pages.emitted) == [5] * 6 * clients
    assert list(pages.held) == [8 + 5 - 1] * 6 * clients


@pytest.mark.parametrize(("gpu", "clients"), [("h100-sxm", 64), ("rtx-4090", 48)])
def test_the_pools_bound_changes_no_decision(monkeypatch: pytest.MonkeyPatch, gpu: str,
                                             clients: int) -> None:
    """The event loop sums the pool's claim only when every request at its largest claim
    (`PagedPool.most`) would not fit: the same admissions and preemptions as summing every
    time (a bound of infinity), to the bit, on a roomy pool (an H100) and a tight one (an RTX
    4090 at 48 clients of 4,000-token prompts, which preempts)."""
    from capacity.plan.event_pages import PagedPool

    s = scenario_with_basis(make_scenario("qwen3-8b", gpu, prompt_tokens=4000,
                                          context_tokens=4512, kv_dtype="fp8"), "typical:vllm")
    svc = service_from_scenario(s, output_tokens=512, engine="vllm")
    fast = simulate(svc, concurrency=clients, n_requests=400, phased=True)
    made = PagedPool.__init__

    def exact(self: PagedPool, *args: object) -> None:
        made(self, *args)  # type: ignore[arg-type]
        self.most = math.inf

    monkeypatch.setattr(PagedPool, "__init__", exact)
    slow = simulate(svc, concurrency=clients, n_requests=400, phased=True)
    assert (fast.ttft_ms, fast.tpot_ms, fast.e2e_ms, fast.preemptions, fast.max_running) == (
        slow.ttft_ms, slow.tpot_ms, slow.e2e_ms, slow.preemptions, slow.max_running)
    if gpu == "rtx-4090":
        assert fast.preemptions > 0
