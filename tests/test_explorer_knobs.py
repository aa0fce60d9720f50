"""The Explorer's engine knobs (issue 32): max_num_seqs, the token budget, the KV page and the
CPU offload in the load view, carried in the link (`capacity.report.urlstate`), checked as the
engine checks them, and the same keyword arguments `capacity plan` gives the event model.
Expected values are computed by hand in each test."""

from __future__ import annotations

import argparse

import pytest

from capacity.catalog.loader import BOUNDS, Catalog, default_catalog
from capacity.cli.common import MAX_BLOCK_SIZE
from capacity.cli.plan_load import MAX_BATCHED_TOKENS, MAX_NUM_SEQS, MAX_TURNS, scheduler_knobs
from capacity.errors import InputError
from capacity.plan.service_build import service_from_scenario
from capacity.report.i18n import note_text
from capacity.report.urlstate import (
    DEFAULT_STATE,
    KNOBS,
    MAX_KV_PAGE,
    MAX_OFFLOAD_GIB,
    ExplorerState,
    decode,
    encode,
    encode_pin,
)
from capacity.report.urlstate import MAX_BATCHED_TOKENS as URL_MAX_BATCHED
from capacity.report.urlstate import MAX_NUM_SEQS as URL_MAX_SEQS
from capacity.report.urlstate import MAX_TURNS as URL_MAX_TURNS


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog()


def test_knobs_are_written_only_when_set_and_read_back(catalog: Catalog) -> None:
    assert not set(KNOBS) & set(encode(DEFAULT_STATE))  # blank knobs: a short link
    state = ExplorerState(engine="vllm", seqs=32, budget=1024, kvblk=32, offload=0.25)
    q = encode(state)
    assert {k: q[k] for k in KNOBS} == {"seqs": "32", "budget": "1024", "kvblk": "32",
                                        "offload": "0.25"}
    back, notices = decode(q, catalog)
    assert (back, notices) == (state, [])
    assert encode_pin(state, DEFAULT_STATE) == "engine:vllm,seqs:32,budget:1024,kvblk:32,offload:0.25"


def test_the_bounds_are_the_command_lines(catalog: Catalog) -> None:
    """A link takes what `capacity plan` takes: the same upper bounds, 0 for the default."""
    assert (URL_MAX_SEQS, URL_MAX_BATCHED, MAX_KV_PAGE, MAX_OFFLOAD_GIB, URL_MAX_TURNS) == (
        MAX_NUM_SEQS, MAX_BATCHED_TOKENS, MAX_BLOCK_SIZE, BOUNDS["memory_gb"][1], MAX_TURNS)
    ok, notices = decode({"engine": "sglang", "seqs": "65536", "budget": "1048576",
                          "kvblk": "4096"}, catalog)
    assert notices == [] and (ok.seqs, ok.budget, ok.kvblk) == (65_536, 1_048_576, 4096)


@pytest.mark.parametrize(("params", "name", "why"), [
    ({"seqs": "lots"}, "seqs", "not a number"),
    ({"seqs": "0.5"}, "seqs", "not a whole number"),
    ({"seqs": "65537"}, "seqs", "outside 0..65536"),
    ({"budget": "-1"}, "budget", "outside 0..1.04858e+06"),
    ({"kvblk": "4097"}, "kvblk", "outside 0..4096"),
    ({"offload": "nan"}, "offload", "not a finite number"),
    # vLLM on the RTX 4090 decodes up to 256 sequences (data/engines.toml): 256 tokens a step
    # leave no room for a prompt chunk beside them (vLLM refuses a budget below it)
    ({"budget": "256"}, "budget", "a token budget of 256 must exceed max_num_seqs (256)"),
    # the chapter's profile prefills whole prompts: no budget to set
    ({"engine": "chapter", "budget": "4096"}, "budget",
     "the chapter profile prefills whole prompts"),
    # Qwen3.5-9B AWQ holds 5.7 GB of weights on one GPU: 5.7e9 / 2^30 = 5.31 GiB to offload
    ({"offload": "5.4"}, "offload", "a CPU offload of 5.4 GiB exceeds the 5.31 GiB"),
    # llama.cpp has no eager mode here (data/engines.toml: no eager_layer_ms)
    ({"engine": "llamacpp", "eager": "1"}, "eager",
     "the llamacpp profile has no eager mode here"),
])
def test_a_bad_knob_in_a_link_falls_back_to_the_engines_default(
        catalog: Catalog, params: dict[str, str], name: str, why: str) -> None:
    state, notices = decode({"engine": "vllm", "c": "70", **params}, catalog)
    assert getattr(state, name) == 0 and state.c == 70  # the rest of the link is kept
    assert len(notices) == 1
    assert notices[0].startswith(f"'{name}={params[name]}' ignored (")
    assert why in notices[0] and notices[0].endswith("using the engine's default")
    assert "引擎默认值" in note_text(notices[0], "zh")


def test_knobs_the_engine_takes_pass(catalog: Catalog) -> None:
    """The edges: a budget one above max_num_seqs, an offload of the whole 5.31 GiB, a budget
    below max_num_seqs where prefill batches pause decoding (SGLang)."""
    for params in ({"engine": "vllm", "seqs": "64", "budget": "65"},
                   {"engine": "vllm", "offload": "5.3"},
                   {"engine": "sglang", "budget": "64"}):
        state, notices = decode(params, catalog)
        assert notices == [], params
        assert all(str(getattr(state, k)) == v for k, v in params.items() if k != "engine")


def test_a_knob_set_on_the_page_that_the_engine_refuses_says_why(catalog: Catalog) -> None:
    state = ExplorerState(engine="llamacpp", budget=4)  # llama.cpp: 4 slots on a 4090
    with pytest.raises(InputError) as err:
        state.load_knobs(state.scenario(catalog))
    assert str(err.value) == ("a token budget of 4 must exceed max_num_seqs (4): the decode "
                              "tokens share the step")
    assert note_text(err.value.args[0], "zh") == (
        "token 预算 4 必须大于 max_num_seqs（4）：解码 token 也占用这一步")


def _cli_args(argv: list[str]) -> argparse.Namespace:
    from capacity.cli.main import build_parser

    return build_parser("plan").parse_args(["plan", *argv])


@pytest.mark.parametrize(("params", "argv"), [  # `plan`'s parser alone: 0.01 s each
    ({}, ["--engine", "vllm"]),
    ({"seqs": "32", "budget": "1024", "kvblk": "32", "offload": "0.25", "prefix": "300",
      "prefix_share": "0.5"},
     ["--engine", "vllm", "--max-num-seqs", "32", "--max-num-batched-tokens", "1024",
      "--block-size", "32", "--cpu-offload-gb", "0.25", "--prefix-tokens", "300",
      "--prefix-share", "0.5"]),
    ({"prefix": "0", "prefix_share": "0.5"}, ["--engine", "vllm", "--prefix-share", "0.5"]),
    ({"pcache": "1"}, ["--engine", "vllm", "--prefix-caching"]),
    ({"eager": "1"}, ["--engine", "vllm", "--enforce-eager"]),
])
def test_the_knobs_are_the_command_lines_keyword_arguments(
        catalog: Catalog, params: dict[str, str], argv: list[str]) -> None:
    """One mapping: the event model gets from the Explorer's link exactly what it gets from
    `capacity plan`'s flags (`SchedulerKnobs.kwargs()`)."""
    state, notices = decode({"engine": "vllm", **params}, catalog)
    assert notices == []
    assert state.load_knobs(state.scenario(catalog)) == scheduler_knobs(_cli_args(argv)).kwargs()


def test_max_num_seqs_reaches_the_deployment_and_comes_back_from_the_planner(
        catalog: Catalog) -> None:
    """`seqs` is the Planner's max_num_seqs: 20 requests in flight on one replica that decodes
    at most 8 fail on slots (20 > 8), at most 48 do not; an option's link carries it back."""
    from capacity.plan.deployment import assess
    from capacity.plan.options import Reason
    from capacity.report.urlstate import explorer_state

    assert ExplorerState(engine="vllm").plan_inputs(catalog).max_num_seqs is None
    for seqs, short in ((8, True), (48, False)):
        d = ExplorerState(engine="vllm", seqs=seqs, c=20, ctx=4096).deployment(catalog)
        assert d.inputs.max_num_seqs == seqs
        o = assess(d, catalog)
        assert (Reason.SLOTS in o.failures) is short
        assert explorer_state(d.inputs, o, catalog).seqs == seqs


def test_the_blank_knobs_mean_the_profile_on_this_gpu(catalog: Catalog) -> None:
    """vLLM's tier for an 80 GB GPU (data/engines.toml): 1,024 sequences, 8,192 tokens a step;
    on the 24 GB RTX 4090 its base, 256 and 2,048; a set `seqs` replaces the tier's."""
    big = ExplorerState(engine="vllm", gpu="h100-sxm", model="llama-3.1-8b", weights="bf16")
    prof = big.engine_of(big.scenario(catalog))
    assert (prof.max_seqs, prof.token_budget_tokens, prof.kv_block_tokens) == (1024, 8192, 16)
    small = ExplorerState(engine="vllm")
    prof = small.engine_of(small.scenario(catalog))
    assert (prof.max_seqs, prof.token_budget_tokens) == (256, 2048)
    assert ExplorerState(engine="vllm", seqs=8).engine_of(small.scenario(catalog)).max_seqs == 8


def test_the_open_loop_panel_rounds_as_the_page_says_and_flags_saturation() -> None:
    """TTFT and E2E in s to 2 decimals, ITL in ms to 1 (1,234 ms: 1.23 s; 50.76 ms: 50.8 ms),
    a saturated load says so first, and the knobs it ran with are named (in either language)."""
    from app.cache import LoadView
    from app.explorer_view import load_panel
    from capacity.plan.closed_loop import LoadPoint
    from capacity.plan.events import OpenLoopPoint

    pct = {0.5: 900.0, 0.9: 1_500.0, 0.99: 2_090.0}
    op = OpenLoopPoint(rate_per_s=2.0, stages=((2.0, 200.0),), arrivals="poisson", requests=327,
                       ttft_mean_ms=1_234.0, ttft_ms=pct, itl_mean_ms=50.76,
                       itl_ms={0.5: 40.0, 0.9: 312.04, 0.99: 377.66}, tpot_ms=pct,
                       e2e_mean_ms=7_214.0, e2e_ms={0.5: 7e3, 0.9: 11_049.0, 0.99: 13_570.0},
                       output_tok_s=250.0, saturated=True)
    view = LoadView(engine="vllm", slots=32, prompt_tokens=1000, output_tokens=128,
                    point=LoadPoint(concurrency=50, ttft_ms=pct, tpot_ms=pct), rate_per_s=2.0,
                    open_point=op, seconds=200.0, chunk_tokens=1024, offload_ms=8.5218,
                    max_seqs=32, kv_page_tokens=32)
    panel = load_panel(view, ExplorerState(engine="vllm", load=2.0), "en")
    assert [(m.label, m.value) for m in panel.metrics] == [
        ("Mean TTFT under load", "1.23 s"), ("TTFT p90 under load", "1.50 s"),
        ("TTFT p99 under load", "2.09 s"), ("Mean ITL under load", "50.8 ms"),
        ("ITL p90 under load", "312.0 ms"), ("ITL p99 under load", "377.7 ms"),
        ("Mean E2E under load", "7.21 s"), ("E2E p90 under load", "11.05 s"),
        ("E2E p99 under load", "13.57 s")]
    lines = panel.caption.split("  \n")
    assert lines[0].startswith(":orange[The load outruns the replica")
    assert lines[2].startswith("327 requests counted") and "--rate 2 --duration 200" in lines[2]
    assert lines[3] == ("Engine knobs: max sequences 32, token budget 1,024, KV page 32 tokens. "
                        "CPU offload adds 8.52 ms to every forward pass.")
    zh = load_panel(view, ExplorerState(engine="vllm", load=2.0), "zh")
    assert zh.metrics[0].label == "负载下平均首字延迟"
    assert zh.caption.endswith("CPU 卸载使每次前向增加 8.52 ms。")


def test_conversations_are_capacity_plans_turns(catalog: Catalog) -> None:
    """`turns` and `turn_tokens` travel in the link and reach the event model as `capacity plan
    --turns --turn-tokens` does; a link the engine cannot run falls back to single requests
    with a notice naming why: no new message, a profile that prefills whole prompts, a last
    turn past the context (1,000 + 2 x (256 + 100) + 256 = 1,968 tokens > 1,500)."""
    state, notices = decode({"engine": "vllm", "turns": "3", "turn_tokens": "100",
                             "prompt": "1000", "ctx": "4096"}, catalog)
    assert notices == [] and (state.turns, state.turn_tokens) == (3, 100)
    s = state.scenario(catalog)
    knobs = state.load_knobs(s)
    assert (knobs["turns"], knobs["turn_tokens"]) == (3, 100)
    svc = service_from_scenario(s, engine="vllm", output_tokens=state.out, **knobs)
    assert svc.longest_prompt_tokens == 1000 + 2 * (256 + 100)
    assert svc.new_prompt_tokens == pytest.approx((1000 + 2 * 100) / 3)
    for params, code in (({"turns": "3"}, "knob_turns_tokens"),
                         ({"turns": "3", "turn_tokens": "100", "engine": "chapter"},
                          "knob_turns_whole"),
                         ({"turns": "3", "turn_tokens": "100", "ctx": "1500"},
                          "knob_turns_ctx")):
        back, notes = decode({"engine": "vllm", "prompt": "1000", "ctx": "4096", **params},
                             catalog)
        assert back.turns == 1 and len(notes) == 1
        assert notes[0].params["why"].code == code  # type: ignore[attr-defined]
