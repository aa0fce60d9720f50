"""`capacity plan`'s load sections: the engine's scheduling under a closed loop (--engine) or an
open loop (--rate, --stages), with every engine knob (--max-num-seqs, --max-num-batched-tokens,
--block-size, --gpu-memory-utilization, --cpu-offload-gb, a prefix cache, multi-turn
conversations), run by the
discrete-event model (`capacity.plan.events`; docs/method.md, queueing and "Engine profiles").
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

from capacity.catalog.engines import engine_profile, profiles
from capacity.catalog.loader import BOUNDS, MAX_CONTEXT_TOKENS
from capacity.cli.common import nonempty, number, whole
from capacity.errors import InputError
from capacity.model.workload import MAX_TURNS, Workload
from capacity.report.tables import render

if TYPE_CHECKING:  # the event model imports scipy: only `--engine` and `--rate` pay for it
    from capacity.plan.closed_loop import LoadPoint
    from capacity.plan.events import OpenLoopPoint, ServiceModel


def parse_float_list(text: str, flag: str, maximum: float = 1e6) -> list[float]:
    """'2,4.5,8' -> [2.0, 4.5, 8.0], each > 0 and finite, at most `maximum`; InputError
    naming `flag` otherwise."""
    try:
        values = [float(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise InputError(f"{flag} '{text[:40]}': give a comma list of numbers, e.g. 2,4,8"
                         ) from None
    if not values or not all(math.isfinite(v) and 0 < v <= maximum for v in values):
        raise InputError(f"{flag} '{text[:40]}': each number must be > 0 and at most "
                         f"{maximum:g}")
    return values


def add_load_flags(p: argparse.ArgumentParser) -> None:
    """The load sections' flags: the engine, its knobs and the open loop's rates."""
    p.add_argument("--engine", default=None, metavar="NAME", type=nonempty,
                   help="add TTFT/TPOT under load with this engine's scheduling: chapter, vllm, vllmv0, "
                        "sglang, llamacpp (data/engines.toml; default: no load section)")
    p.add_argument("--max-num-seqs", type=whole(min=1, max=MAX_NUM_SEQS), default=None,
                   metavar="N", help="sequences a replica decodes at once under --engine or "
                                     "--rate (vLLM's max_num_seqs, SGLang's "
                                     "max_running_requests, llama.cpp's --parallel; default: "
                                     "the engine profile's)")
    p.add_argument("--max-num-batched-tokens", type=whole(min=1, max=MAX_BATCHED_TOKENS),
                   default=None, metavar="N",
                   help="tokens one step may carry under --engine or --rate (vLLM's "
                        "max_num_batched_tokens, SGLang's chunked_prefill_size, llama.cpp's "
                        "n_batch; default: the engine profile's); a chunked profile only")
    p.add_argument("--cpu-offload-gb", type=number(min=0, max=BOUNDS["memory_gb"][1]),
                   default=0.0, metavar="GIB",
                   help="under --engine or --rate: GiB of each GPU's weights kept in host memory "
                        "(vLLM's --cpu-offload-gb): the KV pool gains them and every forward "
                        "pass streams them over the host link (data/host_links.toml; default 0)")
    add_prefix_flags(p, "under --engine or --rate: a shared prefix (system prompt) the prefix "
                        "cache holds once; --prefix-share of requests skip the part of it the "
                        "engine's cache serves (vLLM: whole KV blocks, on a hybrid model only "
                        "the block ends its prefill chunks stop at; SGLang and llama.cpp: "
                        "every token, none of a hybrid model's) (default 0: none)")
    p.add_argument("--prefix-caching", action="store_true",
                   help="under --engine vllm or --rate on a hybrid model (Qwen3.5): vLLM's "
                        "--enable-prefix-caching, whose mamba 'align' mode ends prefill chunks "
                        "at the hybrid attention block (528 tokens for Qwen3.5-9B at bf16 KV), "
                        "so a prompt past a block takes one more step (default: off, vLLM's "
                        "default for hybrid models; --prefix-tokens or --turns turn it on, and a "
                        "hit then resumes only at a block end its chunks stopped at); no effect "
                        "on other models and engines")
    p.add_argument("--enforce-eager", action="store_true",
                   help="under --engine vllm or sglang, or --rate: the engine runs without CUDA "
                        "graphs (vLLM's --enforce-eager, SGLang's --disable-cuda-graph): every "
                        "forward pass pays the profile's per-layer eager cost (vLLM 0.339 ms, "
                        "SGLang 0.0275 ms a layer, and 0.38 ms more on SGLang's passes that "
                        "carry prompt tokens, as SGLang before 0.5.10 ran its prefill; "
                        "data/engines.toml) and no graph padding (default: off, CUDA graphs)")
    add_async_flag(p, "under --engine vllm or sglang, or --rate")
    add_turn_flags(p, "under --engine or --rate with a chunked profile: conversations of N "
                      "turns, turn k + 1's prompt the whole history (earlier prompts and "
                      "answers) plus --turn-tokens new ones; the prefix cache holds the "
                      "history, so only the new tokens are prefilled, while its KV stays in "
                      "the pool and in attention (vLLM V1 automatic prefix caching; "
                      "default 1: single requests of --prompt-tokens)")
    p.add_argument("--output-tokens", type=whole(min=1, max=MAX_CONTEXT_TOKENS), default=256,
                   metavar="N", help="output tokens per request for --engine, --rate and "
                                     "--stages (default 256)")
    p.add_argument("--rate", default=None, metavar="LIST",
                   help="an open loop: requests per second for the whole deployment, a comma "
                        "list (2,4,8); each runs for --duration seconds under --engine's "
                        "scheduling (default chapter): TTFT, ITL, TPOT and E2E, mean and "
                        "p50/p90/p99")
    p.add_argument("--stages", default=None, metavar="RATE:SECONDS,...",
                   help="an open loop in stages, one after the other (2:60,8:60,2:60): one "
                        "load whose statistics cover every stage")
    p.add_argument("--duration", type=number(min=1, max=86_400), default=120.0,
                   metavar="SECONDS", help="how long each --rate runs (default 120 s)")
    p.add_argument("--arrivals", choices=("poisson", "constant"), default="poisson",
                   help="how --rate and --stages requests arrive: Poisson (seeded, default) or "
                        "evenly spaced")


def add_async_flag(p: Any, where: str) -> None:
    """--no-async-scheduling, or SGLang's --disable-overlap-schedule, on `p` (`capacity plan`'s
    load sections, `capacity sim-server`): the scenario's `schedule_ahead` off
    (`scenario_from_args`)."""
    p.add_argument("--no-async-scheduling", "--disable-overlap-schedule",
                   dest="no_async_scheduling", action="store_true",
                   help=f"{where}: vLLM's --no-async-scheduling or SGLang's "
                        "--disable-overlap-schedule, as vLLM's releases before 0.14.0 and "
                        "SGLang's before 0.4.0 ran: each step is scheduled when the last one "
                        "ends, so a request that arrives during a step joins the next one "
                        "(default: scheduled one step ahead, both engines' default since: it "
                        "joins the step after the next; docs/method.md, \"Scheduled one step "
                        "ahead\")")


def ahead_off_text(engine: str) -> str:
    """How `engine`'s profile names scheduling ahead turned off: 'async scheduling off
    (--no-async-scheduling)' under vLLM's, 'overlap scheduler off (--disable-overlap-schedule)'
    under SGLang's."""
    prof = engine_profile(engine)
    return f"{prof.schedules_ahead_name} off ({prof.schedules_ahead_off})"


def check_async_flag(args: argparse.Namespace) -> None:
    """InputError for --no-async-scheduling under an engine that does not schedule ahead here
    (vLLM's and SGLang's profiles do)."""
    engine = args.engine or "chapter"
    if getattr(args, "no_async_scheduling", False) and not engine_profile(engine).schedules_ahead():
        ahead = ", ".join(f"{p.key} since {p.schedules_ahead_since}"
                          for p in profiles().values() if p.schedules_ahead_since)
        raise InputError(f"--no-async-scheduling: the '{engine}' profile does not schedule one "
                         f"step ahead here (only: {ahead}; choose one with --engine)")


def add_prefix_flags(p: Any, prefix_help: str) -> None:
    """--prefix-tokens and --prefix-share on `p` (a parser or group): `capacity plan`'s load
    sections, `capacity size`'s search and `capacity frontier`'s chart read the same two
    (`PlanInputs.prefix_tokens`, `prefix_share`)."""
    p.add_argument("--prefix-tokens", type=whole(min=0, max=MAX_CONTEXT_TOKENS), default=0,
                   metavar="TOKENS", help=prefix_help)
    p.add_argument("--prefix-share", type=number(min=0, max=1), default=0.9, metavar="SHARE",
                   help="share of requests that reuse --prefix-tokens, finding it cached "
                        "(default 0.9)")


def add_turn_flags(p: Any, turns_help: str) -> None:
    """--turns and --turn-tokens on `p` (a parser or group): `capacity plan`'s load sections
    and `capacity size`'s search read the same two (`Workload.turns`, `turn_tokens`)."""
    p.add_argument("--turns", type=whole(min=1, max=MAX_TURNS), default=1, metavar="N",
                   help=turns_help)
    p.add_argument("--turn-tokens", type=whole(min=1, max=MAX_CONTEXT_TOKENS), default=None,
                   metavar="TOKENS", help="the new message of every turn after the first, "
                                          "tokens (needed with --turns > 1)")


MAX_NUM_SEQS = 65_536
"""The most sequences --max-num-seqs accepts (engines default to 4-4,096)."""
MAX_BATCHED_TOKENS = 1_048_576
"""The most tokens a step --max-num-batched-tokens accepts (engines default to 2,048-16,384)."""


@dataclass(frozen=True)
class SchedulerKnobs:
    """The engine knobs of the command line, as the event model's keyword arguments
    (`events.service_from_scenario`; None: the profile's own)."""

    max_num_seqs: int | None
    chunk_tokens: int | None
    block_tokens: int | None = None
    offload_gib: float = 0.0
    prefix_tokens: int = 0
    prefix_share: float = 0.0
    turns: int = 1
    turn_tokens: int = 0
    prefix_caching: bool = False
    enforce_eager: bool = False

    def kwargs(self) -> dict[str, Any]:
        """The knobs as keyword arguments of `closed_loop_load` and `open_loop_load` (the
        multi-turn pair only with --turns > 1, prefix caching only when on: the event model's
        defaults otherwise)."""
        out = asdict(self)
        if self.turns == 1:
            del out["turns"], out["turn_tokens"]
        if not self.prefix_caching:
            del out["prefix_caching"]
        if not self.enforce_eager:
            del out["enforce_eager"]
        return out


def scheduler_knobs(args: argparse.Namespace) -> SchedulerKnobs:
    """--max-num-seqs and --max-num-batched-tokens as the event model's overrides. The token
    budget needs a profile that chunks prompts (InputError for `chapter`, which prefills whole
    prompts: it has no budget to change)."""
    budget = args.max_num_batched_tokens
    offload = float(getattr(args, "cpu_offload_gb", 0.0) or 0.0)
    prefix = int(getattr(args, "prefix_tokens", 0) or 0)
    caching = bool(getattr(args, "prefix_caching", False))
    eager = bool(getattr(args, "enforce_eager", False))
    sync = bool(getattr(args, "no_async_scheduling", False))
    if (budget is not None or args.max_num_seqs is not None or offload or prefix
            or caching or eager or sync) and not (args.engine or args.rate or args.stages):
        raise InputError("--max-num-seqs, --max-num-batched-tokens, --cpu-offload-gb, "
                         "--prefix-tokens, --prefix-caching, --enforce-eager and "
                         "--no-async-scheduling shape the load sections: add --engine NAME or "
                         "--rate LIST")
    check_async_flag(args)
    if budget is not None and not engine_profile(args.engine or "chapter").chunked:
        raise InputError(f"--max-num-batched-tokens: the '{args.engine or 'chapter'}' profile "
                         "prefills whole prompts (no token budget); use --engine vllm, sglang "
                         "or llamacpp")
    share = float(getattr(args, "prefix_share", 0.0)) if prefix else 0.0
    turns = int(getattr(args, "turns", 1) or 1)
    turn_tokens = getattr(args, "turn_tokens", None)
    if turns > 1 and not (args.engine or args.rate or args.stages):
        raise InputError("--turns shapes the load sections: add --engine NAME or --rate LIST")
    if turns > 1 and turn_tokens is None:
        raise InputError("--turns N needs --turn-tokens: the new message of each later turn")
    if turns > 1 and not engine_profile(args.engine or "chapter").chunked:
        raise InputError(f"--turns: the '{args.engine or 'chapter'}' profile prefills whole "
                         "prompts; multi-turn caching runs in the chunked path (use --engine "
                         "vllm, sglang or llamacpp)")
    return SchedulerKnobs(max_num_seqs=args.max_num_seqs, chunk_tokens=budget,
                          block_tokens=args.block_size, offload_gib=offload,
                          prefix_tokens=prefix, prefix_share=share, turns=turns,
                          turn_tokens=int(turn_tokens or 0) if turns > 1 else 0,
                          prefix_caching=caching, enforce_eager=eager)


def open_loop_stages(args: argparse.Namespace) -> list[list[tuple[float, float]]]:
    """The open-loop loads --rate and --stages ask for: each a list of (rate, seconds)."""
    loads: list[list[tuple[float, float]]] = []
    if args.rate:
        loads += [[(r, float(args.duration))] for r in parse_float_list(args.rate, "--rate")]
    if args.stages:
        stage: list[tuple[float, float]] = []
        for item in (x.strip() for x in args.stages.split(",") if x.strip()):
            rate, sep, dur = item.partition(":")
            try:
                stage.append((float(rate), float(dur)))
            except ValueError:
                raise InputError(f"--stages item '{item[:40]}': give RATE:SECONDS, e.g. "
                                 "8:60") from None
            if not sep:
                raise InputError(f"--stages item '{item[:40]}': give RATE:SECONDS, e.g. 8:60")
        loads.append(stage)
    return loads


def knobs_json(svc: ServiceModel) -> dict[str, Any]:
    """What the engine's knobs made of the replica, for the load sections' JSON: the offload's
    time per forward pass (ms), the cached prefix (tokens) and its share of requests, the
    turns per conversation, each later turn's new tokens and the mean prompt tokens a request
    prefills (tokens), and whether the engine schedules one step ahead."""
    return {"offload_ms_per_pass": svc.offload_ms, "cached_prefix_tokens": svc.cached_tokens,
            "shared_prefix_tokens": svc.prefix_tokens, "prefix_share": svc.prefix_share, "turns": svc.turns,
            "turn_tokens": svc.turn_tokens, "prefilled_tokens_mean": svc.new_prompt_tokens,
            "aligned_block_tokens": svc.align_block_tokens, "eager_ms_per_pass": svc.eager_ms,
            "prefill_launch_ms_per_pass": svc.pass_prefill_ms,
            "scheduled_ahead": svc.schedule_ahead}


PREFIX_WHY: Final = {
    "align": "a hybrid model's states are kept only at the block ends its prefill chunks stop at",
    "leaf": "a hybrid model's states are kept only where a cached prompt ended",
    "pages": "whole KV pages only", "token": ""}
"""Why an engine's cache serves less of a shared prefix, by `PrefixGrain.kind`."""


def knobs_text(svc: ServiceModel) -> str:
    """The knobs' line of the load sections ('' when none is set)."""
    parts = []
    if svc.offload_ms:
        parts.append(f"CPU offload adds {svc.offload_ms:.2f} ms to every forward pass")
    if svc.eager_ms:
        parts.append(f"no CUDA graphs (eager) adds {svc.eager_ms:.2f} ms to every forward pass")
    if svc.pass_prefill_ms:
        parts.append(f"the prefill without CUDA graphs adds {svc.pass_prefill_ms:.2f} ms to every "
                     "pass that carries prompt tokens")
    if not svc.schedule_ahead and engine_profile(svc.engine).schedules_ahead():
        parts.append(f"{ahead_off_text(svc.engine)}: a request that arrives during a step "
                     "joins the next one")
    if svc.cached_tokens and svc.prefix_share:
        parts.append(f"{svc.prefix_share:.0%} of requests find a {svc.cached_tokens:,}-token "
                     "prefix cached")
    if svc.prefix_cut:
        parts.append(f"the engine's cache serves {svc.cached_tokens:,} of the "
                     f"{svc.prefix_tokens:,} shared tokens ({PREFIX_WHY[svc.prefix_kind]})")
    if svc.align_block_tokens:
        parts.append(f"prefix caching on a hybrid model: prefill chunks end at "
                     f"{svc.align_block_tokens:,}-token blocks (vLLM's align mode)")
    if svc.turns > 1:
        parts.append(f"conversations of {svc.turns} turns of {svc.turn_tokens:,} new tokens "
                     f"(last prompt {svc.longest_prompt_tokens:,} tokens, history cached): "
                     f"{svc.new_prompt_tokens:,.0f} tokens prefilled per request on average")
    return "; ".join(parts) + "\n" if parts else ""


def turns_text(wl: Workload) -> str:
    """`capacity size`'s line on a conversation (`Workload.turns` > 1): its turns, the new
    tokens of each later one, the last turn's context and the tokens a request prefills on
    average (`Workload.mean_new_tokens`)."""
    return (f"conversations of {wl.turns} turns of {wl.turn_tokens:,} new tokens (the last "
            f"turn {wl.last_context_tokens:,} tokens of context, the history cached): "
            f"{wl.mean_new_tokens:,.0f} tokens prefilled per request on average; requests and "
            "concurrency count turns")


def open_loop_text(svc: ServiceModel, points: list[OpenLoopPoint], fmt: str) -> str:
    """The --rate/--stages section: the open loop's percentiles per load."""
    prof = engine_profile(svc.engine)
    head = (f"\n{'## ' if fmt == 'markdown' else ''}Open loop: {prof.name}\n\n"
            f"{svc.slots} slots per replica; {points[0].arrivals} arrivals; the first 10% of "
            "requests left out as warm-up; ITL is token-weighted, as the bench measures it\n"
            + knobs_text(svc))
    rows = [[p.rate_per_s if len(p.stages) == 1 else
             ",".join(f"{r:g}:{d:g}" for r, d in p.stages), p.requests,
             p.ttft_mean_ms, p.ttft_ms[0.5], p.ttft_ms[0.9], p.ttft_ms[0.99], p.itl_mean_ms,
             p.itl_ms[0.5], p.itl_ms[0.9], p.itl_ms[0.99], p.e2e_mean_ms, p.e2e_ms[0.9],
             p.e2e_ms[0.99], p.output_tok_s, "yes" if p.saturated else "no"] for p in points]
    return head + render(
        ["req/s", "requests", "TTFT mean ms", "p50", "p90", "p99", "ITL mean ms", "p50", "p90",
         "p99", "E2E mean ms", "p90", "p99", "output tok/s", "saturated"], rows, fmt)


def load_text(svc: ServiceModel, rows: list[LoadPoint], fmt: str) -> str:
    """The --engine section: the profile's scheduling and the load table."""
    prof = engine_profile(svc.engine)
    budget = (f"token budget {svc.chunk_tokens} per step"
              + (" shared with the decode tokens" if svc.mixed else ", decoding waits")
              if svc.chunk_tokens else "whole prompts, decoding waits")
    head = (f"\n{'## ' if fmt == 'markdown' else ''}Under load: {prof.name}\n\n"
            f"{svc.slots} slots per replica; {budget}; KV "
            + ("reserved at the context" if prof.kv_admission == "context"
               else "admitted by the tokens held") + "\n" + knobs_text(svc))
    note = ("TTFT: the clients out of step, as a long benchmark's drift apart; \"together\": "
            "every\nclient's first request at once to an idle replica (a bench level's opening "
            "burst), the upper edge\n")
    return head + note + ("\n" if fmt == "markdown" else "") + render(
        ["concurrency", "TTFT p50 ms", "TTFT p90 ms", "TTFT p50 ms, together", "TPOT p50 ms",
         "TPOT p90 ms"],
        [[r.concurrency, r.ttft_ms[0.5], r.ttft_ms[0.9],
          r.ttft_together_ms[0.5] if r.ttft_together_ms else math.nan, r.tpot_ms[0.5],
          r.tpot_ms[0.9]] for r in rows], fmt)
