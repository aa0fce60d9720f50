"""The simulated endpoint with speculative decoding (F12): engine steps, seeded acceptances,
several tokens per SSE chunk, and vLLM's draft counters on /metrics."""

from __future__ import annotations

import dataclasses
import json

import httpx
import numpy as np
import pytest

from capacity.bench.engine_info import parse_prometheus, probe_engine, spec_acceptance
from capacity.catalog.loader import default_catalog
from capacity.cli.main import build_parser
from capacity.cli.plan import scenario_from_args
from capacity.errors import InputError
from capacity.model.roofline import mixed_step_time_ms
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.model.speculative import Draft, acceptance_length_from_rate, make_draft
from capacity.plan.events import service_from_scenario, simulate
from capacity.sim.drafts import Acceptance
from capacity.sim.scheduler import SimConfig, SimPhysics
from capacity.sim.server import create_app, serve_in_thread
from capacity.sim.virtual import Workload, run_virtual

TAU = 2.8
VARIANT = default_catalog().variant("llama-3.1-8b")
DRAFT = make_draft(VARIANT, "eagle", 3, acceptance_length=TAU)


def drafted(prompt_tokens: int | None = None) -> Scenario:
    return make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=2048, eff=0.3, draft=DRAFT,
                         prompt_tokens=prompt_tokens)


def test_acceptances_have_the_drafts_mean_and_law() -> None:
    acc = Acceptance(DRAFT, seed=3)
    draws = np.array([acc.draw() for _ in range(100_000)])
    assert draws.min() == 1 and draws.max() == 4
    assert draws.mean() == pytest.approx(TAU, rel=0.01)
    # accepted in order until the first rejection: P(kept >= 1 + j) = alpha^j
    for j in (1, 2, 3):
        assert np.mean(draws >= 1 + j) == pytest.approx(acc.rate ** j, abs=0.01)
    # vLLM's counters: 1 + accepted / drafts is the mean length
    assert acc.drafts == 100_000 and acc.draft_tokens == 300_000
    assert acc.mean_acceptance_length == pytest.approx(draws.mean())
    # seeded: the same draws again; another seed, others
    again = Acceptance(DRAFT, seed=3)
    assert [again.draw() for _ in range(50)] == list(draws[:50])
    other = Acceptance(DRAFT, seed=4)
    assert [other.draw() for _ in range(50)] != list(draws[:50])
    assert Acceptance(make_draft(VARIANT, "eagle", 3, acceptance_length=4.0)).draw() == 4
    assert Acceptance(make_draft(VARIANT, "ngram", 5, acceptance_length=1.0)).draw() == 1


def test_a_step_is_the_engine_step_of_the_model() -> None:
    s = drafted()
    p = SimPhysics(s, max_num_seqs=256)
    dec = evaluate(s, [8], [512.0]).decode
    # one engine step: verify over k + 1 tokens + the draft's passes (DecodeStep.engine_step_ms)
    assert p.step_s(8, 512) * 1e3 == pytest.approx(float(dec.engine_step_ms[0]), rel=1e-12)
    assert p.step_s(8, 512) * 1e3 == pytest.approx(float(dec.step_ms[0]) * TAU, rel=1e-12)
    assert p.verify_tokens == 4
    # a verify pass with prompt chunks: the same one-pass formula, on the engine step's terms
    assert p.mixed_step_s(8, 512, []) == p.step_s(8, 512)
    plain = SimPhysics(s.with_(draft=None), max_num_seqs=256)
    engine = evaluate(s.with_(draft=dataclasses.replace(DRAFT, acceptance_length=1.0)),
                      [8], [512.0]).decode
    chunk_ms = plain.chunk_s(0, 256) * 1e3
    expected = mixed_step_time_ms(
        bandwidth_ms=float(engine.bandwidth_ms[0]), compute_ms=float(engine.compute_ms[0]),
        comm_ms=float(engine.comm_ms[0]), overhead_ms=engine.overhead_ms,
        serial_ms=float(engine.serial_ms[0]), prefill_ms=chunk_ms)
    assert p.mixed_step_s(8, 512, [(0, 256)]) * 1e3 == pytest.approx(expected, rel=1e-12)
    assert p.mixed_step_s(8, 512, [(0, 256)]) >= p.step_s(8, 512)
    # the draft's weights and KV take memory: fewer slots at the same context
    assert SimPhysics(s).c_vram < plain.c_vram


@pytest.mark.parametrize("engine", ["vllm", "sglang", "chapter"])
def test_the_virtual_engine_decodes_tau_tokens_per_step(engine: str) -> None:
    """Short prompts, long outputs: the mean TPOT is the per-token step of F12 (the event
    model's), the output lengths exact, the counters' acceptance tau."""
    s = drafted(prompt_tokens=32)
    cfg = SimConfig(engine=engine, seed=1)
    for c in (1, 8):
        truth = run_virtual(s, Workload(prompt_tokens=32, output_tokens=256, requests=4 * c,
                                        clients=c), cfg)
        assert {t["output_tokens"] for t in truth} == {256}
        tpot = float(np.mean([t["tpot_ms"] for t in truth]))
        per_token = float(evaluate(s, [c], [32 + 128.0]).decode.step_ms[0])
        assert tpot == pytest.approx(per_token, rel=0.08), (c, tpot, per_token)
        if engine == "vllm":
            svc = service_from_scenario(s, output_tokens=256, engine=engine)
            q = simulate(svc, concurrency=c, n_requests=max(10, 4 * c), warmup_fraction=0.0)
            assert tpot == pytest.approx(q.tpot_ms[0.5], rel=0.08)
    again = run_virtual(s, Workload(prompt_tokens=32, output_tokens=256, requests=32,
                                    clients=8), cfg)
    assert again == truth  # seeded: the same run twice


def test_the_endpoint_streams_a_steps_tokens_together_and_counts_them() -> None:
    s = drafted()
    app = create_app(s, SimConfig(speedup=20, seed=5))
    with serve_in_thread(app) as url, httpx.Client(timeout=30) as c:
        root = url.removesuffix("/v1")
        before = parse_prometheus(c.get(root + "/metrics").text)
        assert before["vllm:spec_decode_num_drafts_total"] == 0
        body = {"model": "llama-3.1-8b-bf16", "prompt": "x" * 40, "max_tokens": 200,
                "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
        for _ in range(3):
            with c.stream("POST", url + "/completions", json=body) as resp:
                events = [ln.removeprefix("data: ") for ln in resp.iter_lines()
                          if ln.startswith("data: ")]
            chunks = [json.loads(e) for e in events if e != "[DONE]"]
            texts = [ch["choices"][0]["text"] for ch in chunks if ch["choices"]]
            usage = chunks[-1]["usage"]
            assert usage["completion_tokens"] == 200
            # one chunk per step: fewer token-bearing chunks than tokens, about 200 / tau
            token_chunks = [t for t in texts if t]
            assert 200 / 4 <= len(token_chunks) < 200 / 1.5
        metrics = c.get(root + "/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        after = parse_prometheus(metrics.text)
        info = c.get(root + "/sim/info").json()["speculative"]
    assert info["draft"] == "eagle:3" and info["acceptance_length"] == TAU
    assert after["vllm:spec_decode_num_draft_tokens_total"] == \
        3 * after["vllm:spec_decode_num_drafts_total"]
    tau = spec_acceptance(before, after)
    assert tau is not None and tau == pytest.approx(TAU, rel=0.08)
    assert "capacity_sim:num_requests_running" in after


def test_without_a_draft_metrics_name_no_draft_and_the_engine_is_the_sim() -> None:
    app = create_app(make_scenario(), SimConfig(speedup=50))
    with serve_in_thread(app) as url:
        info = probe_engine(url, timeout_s=5.0)
        assert httpx.get(url.removesuffix("/v1") + "/sim/info").json()["speculative"] is None
    assert info["engine"] == "capacity sim-server"
    assert not any(k.startswith("vllm:") for k in info["metrics"])


def test_sim_server_flags_build_the_draft() -> None:
    p = build_parser("sim-server")

    def draft(*flags: str) -> Draft | None:
        return scenario_from_args(p.parse_args(["sim-server", "--model", "llama-3.1-8b",
                                                *flags])).draft

    d = draft("--draft", "eagle:3", "--acceptance-rate", "0.8")
    assert d is not None and d.acceptance_length == pytest.approx(
        acceptance_length_from_rate(0.8, 3))
    d = draft("--draft", "mtp:2", "--acceptance-length", "2.5")
    assert d is not None and (d.kind, d.depth, d.acceptance_length) == ("mtp", 2, 2.5)
    assert draft() is None
    with pytest.raises(InputError, match="--draft"):
        draft("--acceptance-length", "2.0")
    with pytest.raises(InputError, match=r"\[1, 3\]"):
        draft("--draft", "eagle:2", "--acceptance-length", "3.5")
    with pytest.raises(SystemExit):  # a length and a rate: one of them
        p.parse_args(["sim-server", "--draft", "eagle:3", "--acceptance-length", "2",
                      "--acceptance-rate", "0.5"])
