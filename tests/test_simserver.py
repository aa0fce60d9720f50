"""The simulated endpoint: its physics (F3/F4/F6), the OpenAI surface, faults, ground truth."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from capacity.errors import InputError
from capacity.model.scenario import evaluate, make_scenario
from capacity.sim.scheduler import SimConfig, SimPhysics, Simulator
from capacity.sim.server import create_app, serve_in_thread
from capacity.sim.virtual import Workload, run_virtual

SEED = make_scenario()  # Qwen3.5-9B AWQ on one RTX 4090 at 8K


def test_physics_is_the_library() -> None:
    p = SimPhysics(SEED, max_num_seqs=256)
    assert p.c_vram == 53 and p.slots == 53  # the chapter: C_vram = 53
    assert SimPhysics(SEED, max_num_seqs=16).slots == 16
    ev = evaluate(SEED, [50], [8192.0])
    assert p.step_s(50, 8192) * 1e3 == pytest.approx(float(ev.decode.step_ms[0]))
    assert p.step_s(50, 8192) > p.step_s(10, 8192) > p.step_s(10, 1024)
    assert p.prefill_s(8192) == pytest.approx(float(evaluate(SEED, [1]).ttft_s))


def test_bad_config() -> None:
    with pytest.raises(InputError, match="sum to at most 1"):
        SimConfig(fail_http=0.6, fail_stall=0.6)
    with pytest.raises(InputError, match="speedup"):
        SimConfig(speedup=0)
    with pytest.raises(InputError, match="no room"):
        SimPhysics(make_scenario("qwen3-32b", "rtx-4090", weights="bf16"), 256)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = create_app(SEED, SimConfig(speedup=50, eos_after_tokens=3, api_key="k"))
    with serve_in_thread(app) as base:
        yield base


H = {"Authorization": "Bearer k"}


def lines(resp: httpx.Response) -> list[str]:
    return [ln.removeprefix("data: ") for ln in resp.text.split("\n\n") if ln]


def test_models_and_auth(url: str) -> None:
    assert httpx.get(url + "/models").status_code == 401
    data = httpx.get(url + "/models", headers=H).json()["data"]
    assert data[0]["id"] == "qwen3.5-9b-awq"


def test_stream_chat_with_usage(url: str) -> None:
    body = {"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 5,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    r = httpx.post(url + "/chat/completions", json=body, headers=H)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = lines(r)
    assert events[-1] == "[DONE]"
    first = json.loads(events[0])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = [json.loads(e) for e in events[1:-1]]
    assert sum(1 for c in content if c["choices"] and c["choices"][0]["delta"].get("content")) == 5
    assert content[-2]["choices"][0]["finish_reason"] == "length"
    assert content[-1]["choices"] == []
    assert content[-1]["usage"] == {"prompt_tokens": 100, "completion_tokens": 5,
                                    "total_tokens": 105,
                                    "prompt_tokens_details": {"cached_tokens": 0}}


def test_eos_without_ignore_eos_and_non_streaming(url: str) -> None:
    body = {"prompt": "hello world", "max_tokens": 10}
    r = httpx.post(url + "/completions", json=body, headers=H).json()
    assert r["usage"]["completion_tokens"] == 3 and r["choices"][0]["finish_reason"] == "stop"
    r = httpx.post(url + "/completions", json=body | {"ignore_eos": True}, headers=H).json()
    assert r["usage"]["completion_tokens"] == 10


@pytest.mark.parametrize("body, status", [
    pytest.param({"messages": []}, 400, id="no-messages"),
    pytest.param({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 400,
                 id="zero-max-tokens"),
    pytest.param({"messages": [{"role": "user", "content": "x"}], "model": "nope"}, 404,
                 id="unknown-model"),
    pytest.param({"messages": [{"role": "user", "content": "x" * 2_000_000}]}, 400,
                 id="beyond-context"),
])
def test_bad_requests(url: str, body: dict[str, object], status: int) -> None:
    r = httpx.post(url + "/chat/completions", json=body, headers=H)
    assert r.status_code == status and "error" in r.json()


def test_truth_matches_the_formulas_and_the_virtual_clock() -> None:
    """The truth is simulated time: a request alone on the server gets TTFT = prefill (F6) and
    TPOT = one decode step (F4), exactly, however late the machine delivered its tokens; and
    the HTTP server's real-time clock gives the numbers `run_virtual` gives."""
    body = {"messages": [{"role": "user", "content": "x" * 8000}], "max_tokens": 20,
            "stream": True, "ignore_eos": True}
    with serve_in_thread(create_app(SEED, SimConfig(speedup=10))) as url, httpx.Client() as c:
        ids = [c.post(url + "/chat/completions", json=body).headers["x-sim-request-id"]
               for _ in range(3)]
        got = {t["id"]: t for t in c.get(url[:-3] + "/sim/truth").json()["requests"]}
    truth = [got[i] for i in ids]
    assert {t["clock"] for t in truth} == {"real"}
    assert {t["output_tokens"] for t in truth} == {20} and truth[0]["prompt_tokens"] == 2000
    # alone on the server: TTFT = prefill of 2000 tokens, TPOT = one decode step at batch 1
    # (the context grows from 2001 to 2019 tokens: 16-token buckets 2000 and 2016)
    prefill_ms = float(evaluate(SEED, [1], [2000.0]).ttft_s[0]) * 1e3 / 10
    step_ms = float(evaluate(SEED, [1], [2010.0]).decode.step_ms[0]) / 10
    virtual = run_virtual(SEED, Workload(prompt_tokens=2000, output_tokens=20, requests=3,
                                         clients=1), SimConfig(speedup=10))
    for t, v in zip(truth, virtual, strict=True):
        assert t["ttft_ms"] == pytest.approx(prefill_ms, rel=1e-6)
        assert t["queue_ms"] == pytest.approx(0.0, abs=1e-6)
        assert t["tpot_ms"] == pytest.approx(step_ms, rel=0.01)
        for key in ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"):
            assert t[key] == pytest.approx(v[key], rel=1e-6, abs=1e-6), key


def test_a_stalled_process_delays_delivery_not_the_truth() -> None:
    """The event loop blocked for 0.3 s after the first token: the remaining tokens reach the
    stream late (behind_max_ms says by how much) but their simulated times do not move."""
    async def go() -> Simulator:
        sim = Simulator(SEED, SimConfig(speedup=10))
        await sim.start()
        try:
            seq = sim.submit(prompt_tokens=2000, max_tokens=20, ignore_eos=True, fault=None,
                             arrival_s=time.perf_counter())
            assert await seq.out.get() == 1
            time.sleep(0.3)  # the whole process stalls: nothing runs, not even the scheduler
            while await seq.out.get() is not None:
                pass
        finally:
            await sim.stop()
        return sim

    sim = asyncio.run(go())
    [truth] = sim.truth.values()
    [virtual] = run_virtual(SEED, Workload(prompt_tokens=2000, output_tokens=20, requests=1,
                                           clients=1), SimConfig(speedup=10))
    assert sim.behind_max_ms > 250
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert truth[key] == pytest.approx(virtual[key], rel=1e-6), key
    assert truth["e2e_ms"] < 100  # 0.3 s of stall are nowhere in it


@pytest.mark.slow
def test_faults_and_stream_options_rejection() -> None:
    cfg = SimConfig(speedup=100, fail_http=0.25, fail_disconnect=0.25, fail_error_event=0.25,
                    fail_stall=0.25, stall_s=100, reject_stream_options=True, seed=1)
    app = create_app(SEED, cfg)
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True}
    outcomes: list[str] = []
    with serve_in_thread(app) as url, httpx.Client(timeout=0.3) as client:
        r = client.post(url + "/chat/completions", json=body | {"stream_options": {}})
        assert r.status_code == 400
        for _ in range(12):
            try:
                r = client.post(url + "/chat/completions", json=body)
            except httpx.RemoteProtocolError:
                outcomes.append("disconnect")
                continue
            except httpx.ReadTimeout:
                outcomes.append("stall")
                continue
            if r.status_code == 500:
                outcomes.append("http_error")
            elif '"error"' in r.text:
                outcomes.append("error_event")
            else:
                outcomes.append("ok")
        counts = app.state.sim.fault_counts
    assert "ok" not in outcomes
    assert {k: outcomes.count(k) for k in counts} == counts


@pytest.mark.parametrize("stack", ["auto", "plain"])
def test_both_http_stacks_serve_the_same_truth(stack: str) -> None:
    import importlib.util

    from capacity.sim.server import http_stack

    want = (("asyncio", "httptools" if importlib.util.find_spec("httptools") else "h11")
            if stack == "auto" else ("asyncio", "h11"))
    assert http_stack(stack) == want  # type: ignore[arg-type]
    app = create_app(SEED, SimConfig(speedup=50))
    with serve_in_thread(app, stack=stack) as url, httpx.Client() as c:  # type: ignore[arg-type]
        r = c.post(url + "/chat/completions", json={
            "model": app.state.sim.model_name, "max_tokens": 3, "stream": True,
            "messages": [{"role": "user", "content": "x" * 40}]})
        assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n")
        root = url.removesuffix("/v1")
        assert c.get(root + "/sim/info").json()["http_stack"] == "+".join(want)
        (truth,) = c.get(root + "/sim/truth").json()["requests"]
        assert truth["output_tokens"] == 3


def test_a_gguf_model_of_4096_tokens_is_simulated_at_its_own_context(
        custom: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31: `capacity sim-server` refused a GGUF model of 4,096 tokens' context unless
    --ctx was given; without --ctx it now runs at the model's own limit (the 8K default being
    the cap), and a --ctx beyond the limit is still refused."""
    gguf = pytest.importorskip("gguf")
    from capacity.bench.gguf_model import LlamaShape, write_llama_gguf
    from capacity.cli.main import build_parser, main
    from capacity.cli.plan import scenario_from_args
    from capacity.cli.sim_server import config_from_args

    vocab = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(vocab, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(50)])
    w.add_token_scores([0.0] * 50)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shape = LlamaShape(layers=2, q_heads=4, kv_heads=2, head_dim=8, ffn=48, vocab=50,
                       context_tokens=4096)
    model = write_llama_gguf(tmp_path / "small.gguf", vocab, shape=shape, dtype="f32")
    assert main(["catalog", "add-model", str(model), "--key", "small-gguf"]) == 0
    capsys.readouterr()
    args = build_parser("sim-server").parse_args(["sim-server", "--model", "small-gguf"])
    scenario = scenario_from_args(args)
    assert scenario.context_tokens == 4096
    app = create_app(scenario, config_from_args(args))
    assert app.state.sim.physics.slots >= 1
    too_long = build_parser("sim-server").parse_args(
        ["sim-server", "--model", "small-gguf", "--ctx", "8192"])
    with pytest.raises(InputError, match="limit of 4096 tokens"):
        scenario_from_args(too_long)
