"""`capacity sim-server`: an OpenAI-compatible endpoint that behaves like a model on a GPU.

  capacity sim-server --model qwen3.5-9b-awq --gpu rtx-4090 --port 8000
Continuous batching scheduled as --engine says (data/engines.toml): `chapter` (default: whole
prompts prefilled while decoding waits, KV reserved at --ctx, min(C_vram, --max-num-seqs) slots),
`vllm` (chunked prefill in mixed steps, paged KV admitted by the tokens held, preemption), `sglang`
(prefill batches of its chunk size, token pool) or `llamacpp` (fixed --parallel slots, n_batch
steps); decode steps from F4 for the current batch, prefill from F6, tokens streamed per step.
The engine's knobs are the event model's (`capacity plan --rate`): --max-num-seqs,
--max-num-batched-tokens, --block-size (the KV page), --gpu-memory-utilization (the KV pool)
and --cpu-offload-gb. A chat's leading system message is a prefix the cache holds.
--typical ENGINE, --basis or --calibration NAME runs it on that basis' knobs, as `capacity plan`
predicts with them (without one, the chapter's knobs: weights read at the spec sheet's bandwidth,
faster than a real card copies memory, so a calibration of such a run meets its copy-ceiling
bound). --speedup X divides every delay. Its ground truth per request is at GET /sim/truth, in simulated
time (a busy machine delays the delivery of tokens, not the truth); its physics at GET /sim/info.
--draft KIND:K decodes speculatively (F12): each engine step verifies k + 1 tokens per sequence
and runs the draft, and each sequence keeps 1..k+1 of them (mean tau, seeded draws, one SSE
chunk per step); GET /metrics counts them under vLLM's names. See docs/bench.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from capacity.catalog.engines import DEFAULT_ENGINE
from capacity.catalog.loader import BOUNDS, MAX_CONTEXT_TOKENS
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import MAX_NUM_SEQS, SHARE, number, whole
from capacity.cli.plan import (
    add_basis_flags,
    add_draft_flags,
    add_scenario_flags,
    scenario_basis_name,
    scenario_from_args,
    with_basis,
)
from capacity.cli.plan_load import (
    MAX_BATCHED_TOKENS,
    add_async_flag,
    ahead_off_text,
    check_async_flag,
)
from capacity.model.forward_pass import eager_pass_ms
from capacity.sim.scheduler import SimConfig
from capacity.sim.server import bind_socket, create_app, uvicorn_config


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "sim-server", help=SUMMARIES["sim-server"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_scenario_flags(p)
    add_basis_flags(p, "run")
    s = p.add_argument_group("server")
    s.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    s.add_argument("--port", type=whole(min=0, max=65535), default=8000, help="listen port (default 8000)")
    s.add_argument("--speedup", type=number(min=0, max=1e6, min_open=True), default=1.0,
                   help="divide every delay by this factor (default 1: real time)")
    s.add_argument("--engine", default=DEFAULT_ENGINE, metavar="NAME",
                   help="scheduling profile: chapter (default), vllm, vllmv0, sglang, llamacpp "
                        "(data/engines.toml)")
    s.add_argument("--max-num-seqs", type=whole(min=1, max=MAX_NUM_SEQS), default=None,
                   help="engine batch limit, as vLLM's --max-num-seqs or llama.cpp's --parallel "
                        "(default: the engine's; 256 for chapter)")
    s.add_argument("--max-num-batched-tokens", type=whole(min=1, max=MAX_BATCHED_TOKENS),
                   default=None, metavar="N",
                   help="tokens one step may carry (vLLM's max_num_batched_tokens, SGLang's "
                        "chunked_prefill_size, llama.cpp's n_batch; default: the engine's); a "
                        "chunked profile only")
    s.add_argument("--cpu-offload-gb", type=number(min=0, max=BOUNDS["memory_gb"][1]),
                   default=0.0, metavar="GIB",
                   help="GiB of each GPU's weights kept in host memory (vLLM's "
                        "--cpu-offload-gb): the KV pool gains them and every forward pass "
                        "streams them over the host link (data/host_links.toml; default 0)")
    s.add_argument("--enforce-eager", action="store_true",
                   help="run without CUDA graphs (vLLM's --enforce-eager, SGLang's "
                        "--disable-cuda-graph): every forward pass pays the profile's per-layer "
                        "eager cost, as `capacity plan --enforce-eager` (default: off)")
    add_async_flag(s, "under --engine vllm or sglang")
    s.add_argument("--chars-per-token", type=number(min=0, max=1000, min_open=True), default=4.0,
                   help="prompt characters per token (default 4)")
    s.add_argument("--eos-after", type=whole(min=0, max=MAX_CONTEXT_TOKENS), default=0, metavar="TOKENS",
                   help="without ignore_eos, stop after this many tokens (default 0: never)")
    s.add_argument("--served-model-name", default=None,
                   help="model id in /v1/models (default: the catalog key)")
    s.add_argument("--api-key", default=None,
                   help="require this bearer token (default: none)")
    s.add_argument("--http-stack", choices=("auto", "plain"), default="auto",
                   help="auto: the httptools parser where installed (fast); plain: h11 "
                        "(default auto)")
    s.add_argument("--reject-stream-options", action="store_true",
                   help="answer 400 to stream_options (to test clients' fallback)")
    add_draft_flags(p)  # the engine decodes speculatively with it (scenario_from_args)
    f = p.add_argument_group("fault injection (shares of requests, 0-1)")
    f.add_argument("--fail-http", type=SHARE, default=0.0, help="HTTP 500 before streaming")
    f.add_argument("--fail-disconnect", type=SHARE, default=0.0,
                   help="connection dropped half-way through the stream")
    f.add_argument("--fail-error-event", type=SHARE, default=0.0,
                   help='a data: {"error": ...} event inside the 200 stream, then silence')
    f.add_argument("--fail-stall", type=SHARE, default=0.0,
                   help="the stream stops half-way and hangs for --stall-s")
    f.add_argument("--stall-s", type=number(min=0, max=86_400), default=3600.0,
                   help="how long a stalled stream hangs, seconds before speedup (default 3600)")
    f.add_argument("--fault-seed", type=whole(min=0, max=2**32 - 1),
                   default=0, help="seed of the fault draws and of a draft's acceptances (default 0)")
    return p


def config_from_args(args: argparse.Namespace) -> SimConfig:
    return SimConfig(
        speedup=args.speedup, engine=args.engine, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, block_tokens=args.block_size,
        offload_gib=args.cpu_offload_gb, enforce_eager=args.enforce_eager,
        chars_per_token=args.chars_per_token, eos_after_tokens=args.eos_after,
        fail_http=args.fail_http, fail_disconnect=args.fail_disconnect,
        fail_error_event=args.fail_error_event, fail_stall=args.fail_stall,
        stall_s=args.stall_s, reject_stream_options=args.reject_stream_options,
        seed=args.fault_seed, served_model_name=args.served_model_name, api_key=args.api_key)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    check_async_flag(args)
    # with its draft, --draft's; --no-async-scheduling; on the basis --basis, --typical or
    # --calibration names (the chapter's knobs without one: a step at the spec sheet's bandwidth)
    scenario, basis = with_basis(args, scenario_from_args(args))
    draft = scenario.draft
    app = create_app(scenario, config_from_args(args))
    sim = app.state.sim
    sock = bind_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
    prof = sim.profile
    engine = "" if prof.key == DEFAULT_ENGINE else (
        f", engine {prof.key} (token budget {prof.token_budget_tokens}, KV by "
        f"{'tokens held' if prof.kv_admission == 'tokens' else 'context'})")
    print(f"capacity sim-server: {sim.model_name} on {scenario.n_gpus} x {scenario.gpu.name}, "
          f"{scenario_basis_name(scenario, basis)}, "
          f"{sim.physics.slots} slots (C_vram {sim.physics.c_vram} at {scenario.context_tokens} "
          f"tokens){engine}" + (f", draft {draft.label}" if draft is not None else "")
          + (f", CPU offload {args.cpu_offload_gb:g} GiB (+{sim.physics.offload_s * 1e3:.2f} ms "
             "a pass)" if args.cpu_offload_gb else "")
          + (f", no CUDA graphs (+{eager_pass_ms(scenario.model, prof):.2f} ms a pass)"
             if args.enforce_eager else "")
          + (f", {ahead_off_text(prof.key)}" if args.no_async_scheduling else "")
          + f", speedup {args.speedup:g}; http://{host}:{port}/v1", file=sys.stderr,
          flush=True)
    uvicorn.Server(uvicorn_config(app, log_level="warning", stack=args.http_stack)
                   ).run(sockets=[sock])
    return 0
