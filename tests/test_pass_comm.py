"""One forward pass, one all-reduce per layer: a mixed pass (decode tokens and prompt chunks)
and a batch of whole prompts all-reduce their tokens in one message (F10 at the pass's
tokens), on every surface that computes a pass: the event model (`ServiceModel`), the
simulated endpoint (`SimPhysics`), the closed forms (`queueing`, `frontier_loop`).
Hand computations on Llama-3.1-70B's F10 line on 8 H100s (`parallel.CommLine`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from capacity.catalog.engines import engine_profile
from capacity.catalog.loader import Catalog
from capacity.fit.frontier_loop import closed_loop, service_terms
from capacity.fit.planning import scenario_with_basis
from capacity.model.parallel import CommLine, tp_comm_line
from capacity.model.scenario import Scenario, make_scenario
from capacity.model.step_combine import mixed_step_time_ms
from capacity.plan.queueing import mixed_step_extra_ms
from capacity.plan.service import ServiceModel
from capacity.plan.service_build import service_from_scenario
from capacity.sim.physics import SimPhysics

LINE = CommLine(fixed_ms=1.5328, per_token_ms=0.0905, knee_tokens=64.0, above_ms=0.0102)


def test_a_chunks_share_of_the_prompts_all_reduces_by_hand() -> None:
    # the first chunk carries the fixed part: 1.5328 + 64 x 0.0905 + 36 x 0.0102
    assert LINE.chunk_ms(0, 100) == pytest.approx(1.5328 + 64 * 0.0905 + 36 * 0.0102)
    assert LINE.chunk_ms(100, 100) == pytest.approx(100 * 0.0102)
    assert LINE.chunk_ms(30, 50) == pytest.approx(34 * 0.0905 + 16 * 0.0102)
    # a prompt's chunks add up to F10 at the prompt, what F6 counts
    parts = [LINE.chunk_ms(d, n) for d, n in ((0, 40), (40, 100), (140, 60))]
    assert sum(parts) == pytest.approx(float(LINE.at(200)))
    assert CommLine().chunk_ms(0, 100) == 0.0


def test_one_token_count_prices_as_the_array_does() -> None:
    # at_ms is at() of one count in plain floats: the same arithmetic, bit for bit, below,
    # at and above the knee (1.5328 + 64 x 0.0905 + 36 x 0.0102 at 100 tokens)
    counts = [0, 1, 63, 64, 65, 100, 4096, 1e6]
    assert [LINE.at_ms(n) for n in counts] == [float(x) for x in LINE.at(np.array(counts))]
    assert LINE.at_ms(100) == pytest.approx(1.5328 + 64 * 0.0905 + 36 * 0.0102)
    line = tp_comm_line(make_scenario("llama-3.1-70b", "h100-sxm", n_gpus=8, tp=8).model,
                        make_scenario("llama-3.1-70b", "h100-sxm", n_gpus=8, tp=8).gpu, 8)
    assert [line.at_ms(n) for n in counts] == [float(x) for x in line.at(np.array(counts))]
    assert CommLine().at_ms(500) == 0.0


def test_the_pass_formula_by_hand() -> None:
    # bandwidth 10, compute 2, a 20 ms chunk holding 3 ms of all-reduces, the batch's
    # all-reduce 2 ms and the pass's 3.5 ms: max(10, 2 + 17) + 3.5
    one = mixed_step_time_ms(bandwidth_ms=10.0, compute_ms=2.0, comm_ms=2.0, overhead_ms=0.0,
                             serial_ms=0.0, prefill_ms=20.0, prefill_comm_ms=3.0,
                             pass_comm_ms=3.5)
    assert one == pytest.approx(22.5)
    apart = mixed_step_time_ms(bandwidth_ms=10.0, compute_ms=2.0, comm_ms=2.0, overhead_ms=0.0,
                               serial_ms=0.0, prefill_ms=20.0, prefill_comm_ms=3.0)
    assert apart == pytest.approx(24.0)
    # no TP: the chapter's mixed step, unchanged (the chunk's arithmetic under the max)
    assert mixed_step_time_ms(bandwidth_ms=10.0, compute_ms=2.0, comm_ms=0.0, overhead_ms=1.0,
                              serial_ms=0.5, prefill_ms=5.0) == pytest.approx(11.5)
    # the closed form's extra is the same formula less the plain step
    extra = mixed_step_extra_ms(10.0, 2.0, 20.0, 3.0, 1.5)
    assert float(extra) == pytest.approx(one - (10.0 + 2.0))


@pytest.fixture(scope="module")
def tp8(catalog: Catalog) -> Scenario:
    s = make_scenario("llama-3.1-70b", "h100-sxm", catalog=catalog, n_gpus=8, tp=8,
                      context_tokens=4096, prompt_tokens=1000)
    return scenario_with_basis(s, "typical:vllm")   # F6c's stretch, vLLM's overheads


@pytest.fixture(scope="module")
def svc(tp8: Scenario) -> ServiceModel:
    return service_from_scenario(tp8, output_tokens=200, engine="vllm")


def test_the_service_model_carries_f10s_line(tp8: Scenario, svc: ServiceModel) -> None:
    line = tp_comm_line(tp8.model, tp8.gpu, tp8.tp)
    assert svc.comm_line == line
    # the decode batch's all-reduce is the same line at its tokens
    assert np.allclose(svc.comm_ms, line.at(np.arange(svc.slots + 1)))


@pytest.mark.parametrize(("batch", "chunks"), [(0, [(0, 300)]), (40, [(0, 300)]),
                                                (100, [(200, 500), (0, 100)])])
def test_a_mixed_pass_all_reduces_once(svc: ServiceModel, batch: int,
                                       chunks: list[tuple[int, int]]) -> None:
    """The pass's time is the chunks' arithmetic (their F6 time less the all-reduces F6 counts
    for them) against the weight read, plus F10 once at decode + chunk tokens."""
    line = svc.comm_line
    tokens = sum(n for _, n in chunks)
    assert svc.mfu_half_tokens > 0
    # F6c at the pass's tokens, dense: (1 + (m_half / m)^2.5)^0.4 - 1
    stretch = (1 + (svc.mfu_half_tokens / (batch + tokens)) ** 2.5) ** 0.4 - 1
    work = sum(svc.chunk_ms(d, n) - line.chunk_ms(d, n) + stretch * svc.chunk_mfu_ms(d, n)
               for d, n in chunks)
    # typical:vllm combines the batch's read and arithmetic at F4c's ridge: its extra
    # (`serial_ms`) rides along
    serial = 0.0 if svc.serial_ms is None else float(svc.serial_ms[batch])
    hand = (svc.overhead_ms + max(float(svc.bandwidth_ms[batch]),
                                  float(svc.compute_ms[batch]) + work)
            + float(line.at(batch + tokens)) + serial)
    assert svc.mixed_step_ms(batch, chunks) == pytest.approx(hand, rel=1e-12)
    # each all-reduced apart (the count before): slower by at least the fixed part that the
    # batch's all-reduce repeats (exactly that at batch 0, where the step is the chunk's)
    apart = replace(svc, comm_line=CommLine())
    saved = apart.mixed_step_ms(batch, chunks) - svc.mixed_step_ms(batch, chunks)
    assert saved >= line.fixed_ms - 1e-9


def test_without_tp_nothing_changes(catalog: Catalog) -> None:
    s = make_scenario("qwen3-8b", "h100-sxm", catalog=catalog, context_tokens=4096,
                      prompt_tokens=1000)
    svc = service_from_scenario(s, output_tokens=200, engine="vllm")
    assert svc.comm_line == CommLine()
    bare = replace(svc, comm_line=CommLine(fixed_ms=0.0))
    assert svc.mixed_step_ms(30, [(0, 500)]) == bare.mixed_step_ms(30, [(0, 500)])
    assert svc.mixed_saturation_rate_per_s == bare.mixed_saturation_rate_per_s


def test_whole_prompts_in_one_pass_all_reduce_once(tp8: Scenario) -> None:
    svc = service_from_scenario(tp8.with_(mfu_half_tokens=0.0), output_tokens=200,
                                engine="chapter")
    line = svc.comm_line
    p = svc.prompt_tokens
    assert svc.prompt_pass_ms([False]) == pytest.approx(svc.prefill_ms)
    # two prompts: each alone less its own all-reduce, then F10 at 2P once
    two = 2 * (svc.prefill_ms - float(line.at(p))) + float(line.at(2 * p))
    assert svc.prompt_pass_ms([False, False]) == pytest.approx(two, rel=1e-12)


def test_the_saturation_rate_counts_the_pass_once(svc: ServiceModel) -> None:
    apart = replace(svc, comm_line=CommLine())
    assert svc.mean_prompt_comm_ms == pytest.approx(float(svc.comm_line.at(svc.prompt_tokens)))
    assert svc.mixed_saturation_rate_per_s > apart.mixed_saturation_rate_per_s


def test_the_simulated_endpoint_runs_the_same_pass(tp8: Scenario, svc: ServiceModel) -> None:
    """`SimPhysics` (the simulated endpoint) and the event model price one pass alike."""
    phys = SimPhysics(tp8, profile=engine_profile("vllm"))
    assert phys.comm_line == svc.comm_line
    chunks = [(0, 300)]
    # at batch 0 both read the weights alone: the same pass to rounding of the context bucket
    assert phys.mixed_step_s(0, 0.0, chunks) * 1e3 == pytest.approx(
        svc.mixed_step_ms(0, chunks), rel=1e-6)
    chapter = SimPhysics(tp8.with_(mfu_half_tokens=0.0), profile=engine_profile("chapter"))
    whole = service_from_scenario(tp8.with_(mfu_half_tokens=0.0), output_tokens=200,
                                  engine="chapter")
    p = tp8.prompt
    assert chapter.prefill_batch_s([(0, p), (0, p)]) * 1e3 == pytest.approx(
        whole.prompt_pass_ms([False, False]), rel=1e-6)


def test_the_closed_form_counts_the_pass_once(svc: ServiceModel) -> None:
    """The Planner's closed loop (`frontier_loop.closed_loop`) with F10's line is faster than
    with each all-reduced apart, and agrees with the event model's own closed loop."""
    c = np.array([8.0, 32.0])
    common = {"concurrency": c, "terms": service_terms(svc), "prefill_ms": svc.prefill_ms,
              "prompt_tokens": svc.prompt_tokens, "output_tokens": svc.output_tokens,
              "budget_tokens": svc.chunk_tokens, "mixed": True}
    once = closed_loop(**common, comm_at=svc.comm_line.at)
    apart = closed_loop(**common)
    assert np.all(once.ttft_ms < apart.ttft_ms)
    assert np.all(once.cycle_ms < apart.cycle_ms)


def test_what_a_chunk_adds_to_a_pass_by_hand() -> None:
    # 100 decode tokens above the knee: a 100-token chunk adds 100 x 0.0102
    assert LINE.added_ms(100, 100) == pytest.approx(100 * 0.0102)
    # 30 decode tokens: 34 tokens below the knee, 66 above
    assert LINE.added_ms(30, 100) == pytest.approx(34 * 0.0905 + 66 * 0.0102)
    assert LINE.added_ms(30, 0) == 0.0


def _pass_by_parts(svc: ServiceModel, batch: int, chunks: list[tuple[int, int]],
                   extra_ms: float = 0.0) -> float:
    """`mixed_step_ms` from the service's own per-chunk methods and numpy arrays, element by
    element: what the event loop's tables (Python lists, a memo of the stretch, no all-reduce
    arithmetic without TP) must reproduce to the bit."""
    from capacity.model.forward_pass import pass_slowdown

    m = batch + sum(n for _, n in chunks)
    stretch = pass_slowdown(m, svc.mfu_half_tokens, svc.routing)
    prefill = (sum(svc.chunk_ms(d, n) for d, n in chunks) + extra_ms
               + stretch * sum(svc.chunk_mfu_ms(d, n) for d, n in chunks))
    if chunks:
        prefill += svc.pass_prefill_ms
    t = svc if svc.paged is None else svc.paged
    comm = float(t.comm_ms[batch])
    return mixed_step_time_ms(
        bandwidth_ms=float(t.bandwidth_ms[batch]), compute_ms=float(t.compute_ms[batch]),
        comm_ms=comm, overhead_ms=svc.overhead_ms + svc.offload_ms,
        serial_ms=0.0 if t.serial_ms is None else float(t.serial_ms[batch]),
        prefill_ms=prefill, prefill_comm_ms=sum(svc.comm_line.chunk_ms(d, n) for d, n in chunks),
        pass_comm_ms=comm + svc.pass_comm_added_ms(batch, m - batch))


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 1), ("llama-3.1-70b", 8)])
def test_the_event_loops_pass_is_the_formula_to_the_bit(catalog: Catalog, model: str,
                                                        tp: int) -> None:
    """The event loop prices tens of thousands of passes a scorecard through
    `ServiceModel.mixed_step_ms`'s tables; they hold the arrays' own values, so every pass
    (decode alone, one chunk, several, a prefix hit's first chunk, each twice: the stretch is
    remembered) is the per-element computation exactly, with TP and without."""
    s = scenario_with_basis(make_scenario(model, "h100-sxm", catalog=catalog,
                                          n_gpus=tp, tp=tp, context_tokens=4096,
                                          prompt_tokens=1000, weights="fp8"),
                            "typical:vllm")
    svc = service_from_scenario(s, output_tokens=200, engine="vllm")
    assert (svc.comm_line == CommLine()) == (tp == 1)
    passes = [(0, []), (7, []), (0, [(0, 300)]), (40, [(0, 300)]), (40, [(300, 700)]),
              (100, [(200, 500), (0, 100)]), (3, [(0, 1), (999, 1), (10, 90)])]
    for _ in range(2):
        for batch, chunks in passes:
            assert svc.mixed_step_ms(batch, chunks) == _pass_by_parts(svc, batch, chunks)
            assert (svc.mixed_step_ms(batch, chunks, 2.5)
                    == _pass_by_parts(svc, batch, chunks, 2.5))
