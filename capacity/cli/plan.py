"""`capacity plan`: the chapter's `capacity.py`, printing the four constraints for one setup.

With no flags it is the chapter's example: Qwen3.5-9B AWQ on one RTX 4090, util 0.9,
overhead 1.5 GB, 8K context, concurrency 1, 50, 100, fp16 KV, eff 1.0, MFU 0.3, CNY 2 per hour.
With --engine NAME (vllm, vllmv0, sglang, llamacpp, chapter; data/engines.toml) it adds the load each
concurrency sees under that engine's scheduling: slots, and TTFT and TPOT p50/p90 from the
discrete-event model (closed loop, --prompt-tokens in, --output-tokens out); under an engine
that admits KV by the tokens held (vllm, vllmv0, sglang) each request's memory is the pages of its
prompt and output, not the whole context, as the Explorer and `capacity size` count it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from capacity.catalog.engines import DEFAULT_ENGINE, engine_profile
from capacity.catalog.loader import (
    BOUNDS,
    MAX_CONTEXT_TOKENS,
    MAX_PRICE_PER_HOUR,
    MIN_PRICE_PER_HOUR,
    ModelVariant,
    default_catalog,
)
from capacity.cli import disagg_plan  # --prefill-pool/--decode-pool: one disaggregated layout
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import (
    CNY_PER_USD,
    EFFICIENCY,
    FRACTION_OPEN,
    HEADROOM,
    MAX_BLOCK_SIZE,
    MAX_CONCURRENCY,
    MAX_GPUS_PER_DEPLOYMENT,
    context_tokens,
    dumps,
    nonempty,
    number,
    print_catalog_warnings,
    whole,
)
from capacity.cli.plan_load import (
    SchedulerKnobs,
    add_load_flags,
    knobs_json,
    load_text,
    open_loop_stages,
    open_loop_text,
    scheduler_knobs,
)
from capacity.cli.wide_ep import add_plan_flags, check_plan_args, plan_run
from capacity.errors import InputError
from capacity.model.basis import kind_of_knobs, knobs_of
from capacity.model.cost import DEFAULT_CNY_PER_USD
from capacity.model.fixes import suggest_fixes
from capacity.model.kv import DEFAULT_BLOCK_SIZE
from capacity.model.memory import (
    DEFAULT_HEADROOM,
    DEFAULT_OVERHEAD_GB,
    DEFAULT_UTIL,
    MemoryVerdict,
)
from capacity.model.roofline import DEFAULT_STEP_METHOD, DecodeStep, StepMethod
from capacity.model.scenario import (
    DEFAULT_CONCURRENCY,
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_EFF,
    DEFAULT_GPU,
    DEFAULT_MFU,
    DEFAULT_MODEL,
    SEED_TABLE_ROWS,
    Evaluation,
    Scenario,
    TableRow,
    capacity_table,
    evaluate,
    make_scenario,
    with_admission,
)
from capacity.model.speculative import DRAFT_NAMES, MAX_DEPTH, Draft, make_draft, parse_draft
from capacity.model.workload import Workload
from capacity.report.math_steps import prompt_mfu_text
from capacity.report.tables import render
from capacity.types import FloatArray
from capacity.units import GB, KIB

if TYPE_CHECKING:  # only --draft needs the speculative-decoding gain (docs/benchmarks.md)
    from capacity.model.draft_gain import DraftGain

VERDICT_TEXT: dict[MemoryVerdict, str] = {MemoryVerdict.FITS: "fits", MemoryVerdict.TIGHT: "tight",
                                          MemoryVerdict.DOES_NOT_FIT: "does not fit"}


def parse_int_list(text: str, maximum: int = MAX_CONCURRENCY) -> list[int]:
    """'1,50,100' -> [1, 50, 100], each 1..maximum; raises InputError on anything else."""
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise InputError(f"cannot read '{text}' as a comma list of whole numbers "
                         "(e.g. 1,50,100)") from None
    if not values or any(v < 1 for v in values):
        raise InputError(f"'{text}': give one or more whole numbers >= 1, e.g. 1,50,100")
    if any(v > maximum for v in values):
        raise InputError(f"'{text[:40]}': each number must be at most {maximum:,}")
    return values


def add_scenario_flags(p: argparse.ArgumentParser, *, step_method_help: str | None = None
                       ) -> None:
    """Flags that describe one deployment; shared by commands that predict. `step_method_help`
    replaces --step-method's help where its default differs (`capacity calibrate`)."""
    g = p.add_argument_group("model and hardware")
    g.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"catalog model key, optionally with a format suffix (default {DEFAULT_MODEL})")
    g.add_argument("--weights", default=None, metavar="FORMAT",
                   help="weight format: bf16, fp8, int8, awq, gptq, nvfp4, gguf-q4_k_m "
                        "(default: the key's suffix or the model's default)")
    g.add_argument("--gpu", default=DEFAULT_GPU, help=f"catalog GPU key (default {DEFAULT_GPU})")
    g.add_argument("--gpus", type=whole(min=1, max=MAX_GPUS_PER_DEPLOYMENT),
                   default=1, help="number of GPUs in all (default 1)")
    g.add_argument("--tp", type=whole(min=1, max=MAX_GPUS_PER_DEPLOYMENT), default=1,
                   help="tensor-parallel size; replicas = GPUs / TP (default 1)")
    g.add_argument("--pp", type=whole(min=1, max=MAX_GPUS_PER_DEPLOYMENT), default=1,
                   help="pipeline-parallel stages of one copy of the model, each a TP group "
                        "(F13: a copy is TP x PP GPUs, its stages chained over the nodes' "
                        "network; replicas = GPUs / (TP x PP); default 1)")
    g.add_argument("--vram", type=number(min=0, max=BOUNDS["memory_gb"][1], min_open=True),
                   default=None, metavar="GB",
                   help="override memory per GPU, decimal GB (default: the catalog's)")
    # floors: below 1 MB/s or 1 GFLOP/s no device exists, and a denormal value (5e-324) would
    # overflow the step's divisions (the hostile fuzz found it)
    g.add_argument("--bandwidth", type=number(min=1e-3, max=BOUNDS["bandwidth_gb_s"][1]),
                   default=None, metavar="GB_S",
                   help="override memory bandwidth per GPU, GB/s (default: the catalog's; >= 0.001)")
    g.add_argument("--tflops", type=number(min=1e-3, max=BOUNDS["bf16_tflops"][1]), default=None,
                   help="override dense TFLOP/s per GPU (default: the catalog's for the format; "
                        ">= 0.001)")
    g.add_argument("--weights-gb", type=number(min=0, max=BOUNDS["weights_gb"][1], min_open=True),
                   default=None, metavar="GB",
                   help="override the weight size, decimal GB (default: stated or params x bits)")
    g.add_argument("--overhead-gb", type=number(min=0, max=BOUNDS["memory_gb"][1]),
                   default=DEFAULT_OVERHEAD_GB, metavar="GB",
                   help=f"runtime memory per GPU (activations, CUDA graphs), GB "
                        f"(default {DEFAULT_OVERHEAD_GB})")
    g.add_argument("--util", type=FRACTION_OPEN, default=DEFAULT_UTIL,
                   help=f"fraction of device memory the engine may use, as vLLM's "
                        f"--gpu-memory-utilization: the KV pool is util x VRAM - weights - "
                        f"overhead (default {DEFAULT_UTIL})")
    g.add_argument("--gpu-memory-utilization", dest="util", type=FRACTION_OPEN,
                   default=argparse.SUPPRESS, metavar="UTIL", help="the same as --util (vLLM's name)")
    w = p.add_argument_group("workload")
    w.add_argument("--ctx", type=whole(min=1, max=MAX_CONTEXT_TOKENS),
                   default=None, metavar="TOKENS",
                   help=f"context length per request, tokens (default {DEFAULT_CONTEXT_TOKENS}, "
                        "or the model's limit when that is shorter)")
    w.add_argument("--prompt-tokens", type=whole(min=1, max=MAX_CONTEXT_TOKENS),
                   default=None, metavar="TOKENS",
                   help="prompt length for TTFT, tokens (default = --ctx)")
    w.add_argument("--allow-long-context", action="store_true",
                   help="compute a context beyond the model's limit (with a warning)")
    w.add_argument("--kv-dtype", default="fp16",
                   help="KV cache precision: fp16, bf16, fp8, int8, int4 (default fp16)")
    w.add_argument("--block-size", type=whole(min=1, max=MAX_BLOCK_SIZE),
                   default=None, metavar="TOKENS",
                   help=f"paged KV block size, tokens (default {DEFAULT_BLOCK_SIZE}; under "
                        "--engine or --rate the engine's page, vLLM's --block-size, default "
                        "the profile's)")
    w.add_argument("--eff", type=EFFICIENCY, default=DEFAULT_EFF,
                   help=f"decode compute efficiency, fraction of peak (default {DEFAULT_EFF})")
    w.add_argument("--mfu", type=EFFICIENCY, default=DEFAULT_MFU,
                   help=f"prefill model FLOPs utilization (default {DEFAULT_MFU})")
    w.add_argument("--step-method", choices=[m.value for m in StepMethod], default=None,
                   help=step_method_help or (
                       "decode step: 'chapter' (F4: max of memory and arithmetic), "
                       "'operator' (F4b: weight GEMMs, then attention, each on its own "
                       "roofline) or 'bound' (the spec sheet's: all at peak, fully overlapped); "
                       "docs/method.md. Default: the basis' method (a saved calibration's own, "
                       "by --calibration or --basis NAME; 'bound' with --basis spec), else "
                       f"{DEFAULT_STEP_METHOD.value}"))
    c = p.add_argument_group("cost")
    c.add_argument("--gpu-price", type=number(min=MIN_PRICE_PER_HOUR, max=MAX_PRICE_PER_HOUR),
                   default=None, metavar="PER_HOUR",
                   help="price per GPU-hour in --currency (default: the catalog's)")
    c.add_argument("--currency", choices=("CNY", "USD"), default=None,
                   help="currency of prices and costs (default: the GPU price's)")
    c.add_argument("--cny-per-usd", type=CNY_PER_USD, default=DEFAULT_CNY_PER_USD,
                   help=f"exchange rate for conversions (default {DEFAULT_CNY_PER_USD})")
    c.add_argument("--headroom", type=HEADROOM, default=DEFAULT_HEADROOM,
                   help=f"memory headroom for the 'fits' verdict, fraction (default "
                        f"{DEFAULT_HEADROOM})")


def add_draft_flags(p: argparse.ArgumentParser) -> None:
    """Speculative decoding's flags (F12): --draft KIND:K and its acceptance, entered as a
    length or a rate (default: the published figure, data/speculative.toml)."""
    g = p.add_argument_group("speculative decoding (F12)")
    g.add_argument("--draft", default=None, metavar="KIND:K",
                   help="a draft proposing K tokens per step: mtp:K (the model's own MTP "
                        "head), eagle:K (an EAGLE-3 draft) or ngram:K (prompt lookup on the "
                        "CPU), K 1.." f"{MAX_DEPTH}; none for no draft (default none)")
    one = g.add_mutually_exclusive_group()
    one.add_argument("--acceptance-length", type=number(min=1, max=MAX_DEPTH + 1),
                     default=None, metavar="TAU",
                     help="tau: tokens a sequence keeps per step, the bonus token included "
                          "(1..K+1; default: the published figure for the model, kind and "
                          "depth)")
    one.add_argument("--acceptance-rate", type=number(min=0, max=1), default=None,
                     metavar="ALPHA",
                     help="per-token acceptance rate alpha in [0, 1]: tau = (1 - alpha^(K+1)) "
                          "/ (1 - alpha)")


def draft_from_args(args: argparse.Namespace, variant: ModelVariant) -> Draft | None:
    """The draft --draft and --acceptance-length/--acceptance-rate describe for `variant`
    (None without --draft or with --draft none); InputError on a bad one, or an acceptance
    without a draft. Commands without the flags (`add_draft_flags`) get None."""
    text = getattr(args, "draft", None)
    tau = getattr(args, "acceptance_length", None)
    rate = getattr(args, "acceptance_rate", None)
    kind, depth = parse_draft(text or "none")
    if kind == "none":
        if tau is not None or rate is not None:
            raise InputError("--acceptance-length and --acceptance-rate need --draft KIND:K")
        return None
    from capacity.catalog.drafts import depths_for  # the published data: only with --draft

    if tau is None and rate is None and not depths_for(variant.model.key, kind):
        raise InputError(f"no published acceptance for {DRAFT_NAMES[kind]} on "
                         f"{variant.model.name} (data/speculative.toml): give "
                         "--acceptance-length TAU or --acceptance-rate ALPHA")
    return make_draft(variant, kind, depth, acceptance_length=tau, acceptance_rate=rate)


def default_context(args: argparse.Namespace) -> int:
    """--ctx, else the chapter's 8,192 tokens or the model's limit when that is shorter (a
    small GGUF model of 4,096 tokens works without --ctx; issue 31): `common.context_tokens`."""
    return context_tokens(args.ctx, args.model)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """Build the Scenario the scenario flags describe (with the draft of `add_draft_flags`'
    flags where the command has them)."""
    s = make_scenario(
        args.model, args.gpu, catalog=default_catalog(), weights=args.weights,
        n_gpus=args.gpus, tp=args.tp, pp=getattr(args, "pp", 1), vram_gb=args.vram,
        bandwidth_gb_s=args.bandwidth,
        tflops=args.tflops, weights_gb=args.weights_gb, util=args.util,
        overhead_gb=args.overhead_gb, context_tokens=default_context(args),
        prompt_tokens=args.prompt_tokens,
        kv_dtype=args.kv_dtype, block_size=args.block_size or DEFAULT_BLOCK_SIZE, eff=args.eff,
        mfu=args.mfu,
        price_per_hour=args.gpu_price, currency=args.currency, cny_per_usd=args.cny_per_usd,
        headroom=args.headroom, allow_long_context=args.allow_long_context,
        step_method=getattr(args, "step_method", None) or DEFAULT_STEP_METHOD.value,
    )
    if getattr(args, "no_async_scheduling", False):   # or SGLang's --disable-overlap-schedule
        s = s.with_(schedule_ahead=False)
    draft = draft_from_args(args, s.variant)
    return s if draft is None else s.with_(draft=draft)


def add_basis_flags(p: argparse.ArgumentParser, what: str = "predict") -> None:
    """--basis, --typical and --calibration: what the speed figures rest on (`with_basis`)."""
    p.add_argument("--basis", default=None, metavar="BASIS",
                   help="what the speed figures rest on (docs/method.md, Bases): 'chapter' (the "
                        "default: eff and MFU as given, 1 and 0.3), 'spec' (the spec sheet, "
                        "every efficiency at its peak: the upper bound on speed), "
                        "'typical:ENGINE' (an engine's typical knobs, data/engines.toml) or a "
                        "saved calibration's name")
    p.add_argument("--typical", default=None, metavar="ENGINE",
                   help="an engine's typical efficiency: the same as --basis typical:ENGINE")
    p.add_argument("--calibration", metavar="NAME|PATH", default=None, type=nonempty,
                   help=f"{what} with a saved calibration (data/calibrations/NAME.toml or a "
                        "path) instead of the chapter's efficiencies; see `capacity calibrate`")


def with_basis(args: argparse.Namespace, s: Scenario) -> tuple[Scenario, str]:
    """`s` on the basis `add_basis_flags`' flags name (at most one of them), and that name ('':
    none, the chapter's knobs as the scenario flags give them). A --step-method said on the
    command line wins over the basis' or the calibration's."""
    named = [x for x in (args.basis, args.calibration,
                         None if args.typical is None else "typical:" + args.typical)
             if x is not None]
    if len(named) > 1:
        raise InputError("give one of --basis, --calibration, --typical")
    if named and not args.calibration:
        from capacity.fit.planning import scenario_with_basis

        s = scenario_with_basis(s, named[0])
    if args.calibration:
        from capacity.fit.calibration import apply
        from capacity.fit.calibration_store import load
        s = apply(load(args.calibration), s)
    if named and args.step_method:  # said on the command line: wins over the basis'
        s = s.with_(step_method=args.step_method)
    return s, named[0] if named else ""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "plan", help=SUMMARIES["plan"],
        description=__doc__)
    add_scenario_flags(p)
    add_draft_flags(p)
    p.add_argument("--concurrency", default=",".join(map(str, DEFAULT_CONCURRENCY)),
                   metavar="LIST", help="concurrent requests, a comma list (default 1,50,100)")
    p.add_argument("--format", choices=("text", "json", "markdown", "csv"), default="text",
                   help="output format (default text)")
    add_basis_flags(p)
    add_load_flags(p)
    add_plan_flags(p)
    disagg_plan.add_flags(p)
    return p


def to_json(s: Scenario, ev: Evaluation, rows: list[TableRow], basis: str = "") -> dict[str, Any]:
    """The stable JSON interface (bytes, ms, s, tok/s)."""
    def num(x: float) -> float | None:
        return None if not math.isfinite(x) else x
    doc: dict[str, Any] = {
        "model": s.variant.key, "gpu": s.gpu.key, "gpus": s.n_gpus, "tp": s.tp, "pp": s.pp,
        "replicas": s.copies, "context_tokens": s.context_tokens,
        "prompt_tokens": s.prompt, "kv_dtype": s.kv_dtype, "currency": s.currency,
        "price_per_hour": s.price_per_hour, "weights_bytes": s.weights_gb * GB,
        "kv_bytes_per_token": ev.kv_token.bytes_per_token,
        "kv_bytes_per_token_by_kind": ev.kv_token.by_kind_bytes,
        "kv_request_bytes": float(ev.kv_request.exact_bytes),
        "kv_request_paged_bytes": float(ev.kv_request.paged_bytes),
        "usable_bytes": ev.vram.usable_bytes,
        "kv_budget_bytes": ev.vram.kv_budget_bytes,
        "weights_fit": ev.vram.weights_fit,
        "shortfall_bytes": ev.vram.shortfall_bytes,
        "max_concurrency_vram": int(ev.max_concurrency_vram),
        "max_concurrency_vram_paged": int(ev.max_concurrency_vram_paged),
        "crossover_concurrency": ev.crossover_concurrency,
        "ttft_linear_s": float(ev.ttft_linear_s), "ttft_s": float(ev.ttft_s),
        "calibration": s.calibration, "basis": kind_of_knobs(
            knobs_of(s), calibration=s.calibration or "",
            typical=basis.removeprefix("typical:") if basis.startswith("typical:") else ""
        ).value, "basis_text": scenario_basis_name(s, basis),
        "knobs": knobs_of(s),  # the basis' knobs, as `capacity size`'s deployment states them
        "warnings": list(s.warnings),
        "points": [
            {"concurrency": int(ev.concurrency[i]),
             "bandwidth_ms": float(ev.decode.bandwidth_ms[i]),
             "compute_ms": float(ev.decode.compute_ms[i]),
             "comm_ms": float(ev.decode.comm_ms[i]),
             "step_ms": float(ev.decode.step_ms[i]), "bound": str(ev.decode.bound[i]),
             "tok_s_per_request": float(ev.decode.tok_s_per_request[i]),
             "aggregate_tok_s": float(ev.aggregate_tok_s[i]),
             "cost_per_mtok": num(float(ev.cost_per_mtok[i])),
             "kv_total_bytes": float(ev.kv_total_bytes[i]),
             "vram_subtotal_bytes": float(ev.vram_subtotal_bytes[i]),
             "verdict": str(ev.verdict[i])}
            for i in range(ev.concurrency.size)
        ],
        "table": [r.__dict__ for r in rows],
    }
    if s.held_tokens is not None:  # only under --engine vllm or sglang: a request's pages
        doc["held_tokens"] = int(np.asarray(ev.kv_request.context_tokens).flat[0])
        doc["kv_held_bytes"] = float(ev.kv_held_bytes)
    if s.draft is not None:  # only with --draft: the keys above never change
        from capacity.model.draft_gain import draft_gain

        g = draft_gain(s, ev.concurrency)
        d = s.draft
        doc["draft"] = {"kind": d.kind, "depth": d.depth, "acceptance_length": d.acceptance_length,
                        "source": d.source, "params_b": d.params_b, "weights_gb": d.weights_gb,
                        "kv_share": d.kv_share}
        doc["draft_breakeven_concurrency"] = g.breakeven_concurrency
        for i, point in enumerate(doc["points"]):
            point.update({"engine_step_ms": float(g.engine_step_ms[i]),
                          "verify_ms": float(g.verify_ms[i]), "draft_ms": float(g.draft_ms[i]),
                          "no_draft_step_ms": float(g.plain_tpot_ms[i]),
                          "draft_speedup": float(g.speedup[i])})
    return doc  # the keys never change (tests/test_vocab.py): the method is in the text output


def draft_text(g: DraftGain, c_vram: int, fmt: str) -> str:
    """The "Speculative decoding" section: tau and its source, the step and the speed-up at
    each concurrency, and where the draft stops paying (beside what the memory holds)."""
    d = g.draft
    size = ("no GPU time, no weights (a lookup in the prompt)" if d.kind == "ngram" else
            f"draft {d.weights_gb:.2f} GB of weights, {d.params_b:.3g} B parameters per "
            f"proposed token, KV +{d.kv_share:.1%}")
    head = (f"{DRAFT_NAMES[d.kind]}, k = {d.depth}: tau = {d.acceptance_length:.3g} tokens per "
            f"step (source: {d.source}); {size}\n")
    b = g.breakeven_concurrency
    end = (f"the draft stops paying at {b:,} concurrent requests "
           f"({g.breakeven_per_replica:,} per replica)" if b is not None and g.replicas > 1
           else f"the draft stops paying at {b:,} concurrent requests" if b is not None
           else "the draft pays at every batch up to 4,096 per replica")
    return head + render(
        ["concurrency", "verify ms", "draft ms", "engine step ms", "TPOT ms",
         "TPOT no draft ms", "speed-up"],
        [[int(g.concurrency[i]), float(g.verify_ms[i]), float(g.draft_ms[i]),
          float(g.engine_step_ms[i]), float(g.tpot_ms[i]), float(g.plain_tpot_ms[i]),
          f"{float(g.speedup[i]):.2f}x"] for i in range(g.concurrency.size)], fmt) + end + \
        f" (the memory holds {c_vram:,} concurrent requests)\n"


def _gb(b: float) -> str:
    return f"{b / GB:.2f} GB"


def scenario_basis_name(s: Scenario, basis: str = "") -> str:
    """The basis of a scenario's speed figures in words (`capacity.model.basis`); `basis` the
    basis string it was built on ('typical:vllm' names the engine)."""
    from capacity.report.bases import basis_name

    typical = basis.removeprefix("typical:") if basis.startswith("typical:") else ""
    kind = kind_of_knobs(knobs_of(s), calibration=s.calibration or "", typical=typical)
    return basis_name(kind, s.calibration or typical, "en")


def to_text(s: Scenario, ev: Evaluation, rows: list[TableRow], fmt: str = "text",
            basis: str = "") -> str:
    """The chapter's tables, in order: KV, VRAM, step time, crossover, TTFT, cost, capacity."""
    m = s.model
    md = fmt == "markdown"

    def h(title: str) -> str:
        return f"\n## {title}\n\n" if md else f"\n{title}\n"
    kv = ev.kv_token
    out = [("# " if md else "") + f"{s.variant.key} on {s.n_gpus} x {s.gpu.name}"
           + ((f" (TP={s.tp}, {s.replicas} replicas)" if s.pp == 1 else
               f" (TP={s.tp} x PP={s.pp}, {s.copies} replica{'s' if s.copies > 1 else ''})")
              if s.n_gpus > 1 else "")
           + f", {s.context_tokens} tokens, KV {s.kv_dtype}"
           + (f", calibration '{s.calibration}'" if s.calibration else "")]
    out.append(f"basis: {scenario_basis_name(s, basis)}")
    out += [f"warning: {w}" for w in s.warnings]
    out.append(h("KV cache (F1-F2)"))
    kinds = [(k, v) for k, v in kv.by_kind_bytes.items() if v]
    out.append(render(["layers", "count", "KiB/token"],
                      [[k, m.layers_of(k), v / KIB] for k, v in kinds]
                      + [["total", m.layers, kv.bytes_per_token / KIB]], fmt))
    if s.held_tokens is None:
        out.append(f"KV per request at {s.context_tokens} tokens: "
                   f"{_gb(float(ev.kv_request.exact_bytes))} "
                   f"({float(ev.kv_request.exact_bytes):,.0f} bytes); paged (block "
                   f"{s.block_size}): {float(ev.kv_request.paged_bytes):,.0f} bytes\n")
    else:   # the engine admits by the tokens held: the pages of prompt + output
        held = int(np.asarray(ev.kv_request.context_tokens).flat[0])
        out.append(f"KV per request as the engine admits it, the pages of the {held} tokens "
                   f"it holds (prompt + output, block {s.block_size}), not the "
                   f"{s.context_tokens}-token context: {_gb(float(ev.kv_held_bytes))} "
                   f"({float(ev.kv_held_bytes):,.0f} bytes)\n")
    v = ev.vram
    out.append(h("VRAM budget per GPU (F3)"))
    out.append(f"{s.budget_vram_gb:.4g} GB x {s.util:g} - {s.weights_per_gpu_gb:g} GB weights - "
               + (f"{s.draft_weights_per_gpu_gb:.2f} GB draft - " if s.draft_weights_per_gpu_gb
                  else "")
               + f"{s.overhead_gb:g} GB overhead" + (f" - {s.nccl_gb:.2f} GB NCCL" if s.nccl_gb else "")
               + f" = {v.kv_budget_bytes / GB:.2f} GB for KV\n")
    if not v.weights_fit:
        out.append(f"the weights do not fit: {v.shortfall_bytes / GB:.2f} GB short before any KV\n")
    out.append(f"C_vram = floor({v.kv_budget_bytes / GB:.2f} GB / "
               f"{float(ev.kv_held_bytes) / GB:.3f} GB"
               + (f" x {s.kv_factor:.4g} with the draft's KV" if s.kv_factor != 1 else "")
               + f") = {int(ev.max_concurrency_vram)}"
               f" concurrent requests (paged: {int(ev.max_concurrency_vram_paged)})\n")
    d = ev.decode
    # what the step adds to its roofline terms: the fixed time (F11's overheads) and, with TP,
    # F10's all-reduces, so the columns add up to the step where the terms are summed
    extra_heads, extra = _step_extras(d, s.tp, ev.concurrency.size,
                                      beyond=s.step_method != StepMethod.OPERATOR)
    if s.step_method == StepMethod.OPERATOR:
        out.append(h("Decode step (F4b, operator method: GEMMs + attention + overheads)"))
        out.append(render(
            ["concurrency", "GEMM ms", "attention ms", *extra_heads, "step ms", "bound",
             "tok/s per request", "aggregate tok/s"],
            [[int(ev.concurrency[i]), float(d.gemm_ms[i]), float(d.attention_ms[i]), *extra[i],
              float(d.step_ms[i]), str(d.bound[i]), float(d.tok_s_per_request[i]),
              float(ev.aggregate_tok_s[i])] for i in range(ev.concurrency.size)], fmt))
    else:
        out.append(h("Decode step (F4)"))
        out.append(render(
            ["concurrency", "bandwidth ms", "compute ms", *extra_heads, "step ms", "bound",
             "tok/s per request", "aggregate tok/s"],
            [[int(ev.concurrency[i]), float(d.bandwidth_ms[i]), float(d.compute_ms[i]),
              *extra[i], float(d.step_ms[i]), str(d.bound[i]), float(d.tok_s_per_request[i]),
              float(ev.aggregate_tok_s[i])] for i in range(ev.concurrency.size)], fmt))
    if s.draft is not None:
        from capacity.model.draft_gain import draft_gain

        out.append(h("Speculative decoding (F12): step ms above are per emitted token"))
        out.append(draft_text(draft_gain(s, ev.concurrency), int(ev.max_concurrency_vram), fmt))
    cross = ev.crossover_concurrency
    out.append(h("Crossover (F5)"))
    out.append("none: bandwidth binds at every concurrency at this context\n" if cross is None
               else f"compute overtakes bandwidth at about {cross:.0f} concurrent requests\n")
    out.append(h("Prefill (F6)"))
    # the MFU its GEMMs run at: the plateau, or F6c's MFU(L) (show-math's substitution)
    # beyond the attention term: the prefill's fixed costs, TP/PP communication and the
    # request latency, where the basis and layout have them (the label said 'with attention'
    # for 0.27 s of all-reduces at TP 4: an audit, 2026-12-07)
    more = s.tp > 1 or s.pp > 1 or s.fixed_prefill_ms > 0 or s.request_latency_ms > 0
    out.append(f"TTFT for a {s.prompt}-token prompt at MFU {prompt_mfu_text(s)}: "
               f"{float(ev.ttft_linear_s):.3f} s linear, {float(ev.ttft_s):.3f} s "
               + ("in all (attention, fixed prefill costs, all-reduces, request latency)"
                  if more else "with attention") + " (no queueing)\n")
    out.append(h(f"Cost (F7), {s.currency} {s.price_per_hour:g} per GPU-hour x {s.n_gpus}"))
    out.append(render(["concurrency", "aggregate tok/s", f"{s.currency} per M tokens"],
                      [[int(ev.concurrency[i]), float(ev.aggregate_tok_s[i]),
                        float(ev.cost_per_mtok[i])] for i in range(ev.concurrency.size)], fmt))
    out.append(h(f"Capacity table (F8), budget {v.usable_bytes / GB:.1f} GB per GPU, "
                 f"headroom {s.headroom:.0%}"))
    out.append(render(
        ["concurrency", "context", "KV GB per GPU", "subtotal GB", "verdict", "TTFT s",
         "TPOT ms", "tok/s per request", "aggregate tok/s", f"{s.currency}/M tok"],
        [[r.concurrency, r.context_tokens, r.kv_total_bytes / GB, r.vram_subtotal_bytes / GB,
          VERDICT_TEXT[r.verdict], r.ttft_s, r.tpot_ms, r.tok_s_per_request, r.aggregate_tok_s,
          r.cost_per_mtok] for r in rows], fmt))
    for r in rows:
        if r.verdict == MemoryVerdict.DOES_NOT_FIT:
            row_s = s.with_(context_tokens=r.context_tokens)
            fixes = suggest_fixes(row_s, r.concurrency)
            if fixes:
                out.append(f"{r.concurrency} x {r.context_tokens}: does not fit; fixes: "
                           + ", ".join(f"{f.description} ({VERDICT_TEXT[f.verdict]})"
                                       for f in fixes) + "\n")
    return "".join(x if x.endswith("\n") else x + "\n" for x in out)


def engine_admission(s: Scenario, args: argparse.Namespace, knobs: SchedulerKnobs) -> Scenario:
    """`s` as the load sections' engine admits KV (`with_admission`; --engine, else the
    chapter's profile, which reserves the context): under vLLM or SGLang a request holds the
    pages of its prompt and --output-tokens (its turns' mean prompt with --turns), as the
    Explorer and `capacity size` count it."""
    wl = Workload(peak_concurrency=1.0, context_tokens=s.context_tokens,
                  prompt_tokens=s.prompt_tokens, output_tokens=args.output_tokens,
                  turns=knobs.turns, turn_tokens=knobs.turn_tokens)
    return with_admission(s, engine_profile(args.engine or DEFAULT_ENGINE), wl.held_tokens,
                          args.block_size)


def run(args: argparse.Namespace) -> int:
    print_catalog_warnings()
    check_plan_args(args)  # --ep's own checks (and --gpus defaulting to --ep)
    disagg_plan.check_args(args)  # the two pools' own checks
    concurrency = parse_int_list(args.concurrency)
    s, basis = with_basis(args, scenario_from_args(args))
    if args.ep is not None:  # one wide expert-parallel deployment (capacity/cli/wide_ep.py)
        return plan_run(args, s, basis, scenario_basis_name(s, basis),
                        ",".join(map(str, DEFAULT_CONCURRENCY)))
    if disagg_plan.wants_pools(args):  # one disaggregated layout (capacity/cli/disagg_plan.py)
        return disagg_plan.run(args, s, basis, scenario_basis_name(s, basis))
    knobs = scheduler_knobs(args)
    s = engine_admission(s, args, knobs)
    ev = evaluate(s, concurrency)
    table_c = sorted({*concurrency, *(c for c, _ in SEED_TABLE_ROWS)})
    rows = capacity_table(s, [(c, s.context_tokens) for c in table_c])
    under_load = None
    if args.engine:
        from capacity.plan.closed_loop import closed_loop_load

        under_load = closed_loop_load(s, engine=args.engine, output_tokens=args.output_tokens,
                                      concurrency=concurrency, **knobs.kwargs())
    open_loop = None
    loads = open_loop_stages(args)
    if loads:
        from capacity.plan.events import open_loop_load

        open_loop = open_loop_load(s, engine=args.engine or "chapter",
                                   output_tokens=args.output_tokens, stages=loads,
                                   kind=args.arrivals, **knobs.kwargs())
    if args.format == "json":
        data = to_json(s, ev, rows, basis)
        if under_load is not None:
            svc, lrows = under_load
            data["load"] = {"engine": svc.engine, "slots_per_replica": svc.slots,
                            "token_budget": svc.chunk_tokens, "mixed": svc.mixed,
                            "output_tokens": args.output_tokens, **knobs_json(svc),
                            "points": [r.__dict__ for r in lrows]}
        if open_loop is not None:
            svc, opts = open_loop
            data["open_loop"] = {"engine": svc.engine, "slots_per_replica": svc.slots,
                                 "output_tokens": args.output_tokens, "arrivals": args.arrivals,
                                 "token_budget": svc.chunk_tokens, **knobs_json(svc),
                                 "points": [asdict(p) for p in opts]}
        print(dumps(data, indent=2))
    elif args.format == "csv":
        ev = evaluate(s, table_c)
        print(render(["concurrency", "context_tokens", "kv_total_bytes", "vram_subtotal_bytes",
                      "verdict", "bandwidth_ms", "compute_ms", "step_ms", "bound",
                      "tok_s_per_request", "aggregate_tok_s", "ttft_s", "cost_per_mtok"],
                     [[r.concurrency, r.context_tokens, r.kv_total_bytes, r.vram_subtotal_bytes,
                       r.verdict, float(ev.decode.bandwidth_ms[i]),
                       float(ev.decode.compute_ms[i]), r.tpot_ms, r.bound, r.tok_s_per_request,
                       r.aggregate_tok_s, r.ttft_s, r.cost_per_mtok]
                      for i, r in enumerate(rows)], "csv"), end="")
    else:
        print(to_text(s, ev, rows, args.format, basis), end="")
        if under_load is not None:
            print(load_text(under_load[0], under_load[1], args.format), end="")
        if open_loop is not None:
            print(open_loop_text(open_loop[0], open_loop[1], args.format), end="")
    return 0


def _step_extras(d: DecodeStep, tp: int, n: int, *, beyond: bool = True
                 ) -> tuple[list[str], list[list[float]]]:
    """The decode table's optional columns (headers, one row of values per point): "fixed ms"
    (F11's per-step and per-layer overheads) where the step has any, "all-reduce ms" (F10)
    at TP > 1, and "beyond max ms" (`DecodeStep.serial_ms`: what the step adds to the max of
    its read and its arithmetic, F4c's ridge among it) where any point has it and `beyond`
    (the operator method's table shows its summed terms instead), so the columns add up to
    the step. None on the chapter's worked example (one GPU, no overheads)."""
    fixed = np.broadcast_to(np.asarray(d.overhead_ms, dtype=np.float64), (n,))
    comm = np.broadcast_to(np.asarray(d.comm_ms, dtype=np.float64), (n,))
    serial = np.broadcast_to(np.asarray(d.serial_ms, dtype=np.float64), (n,))
    heads: list[str] = []
    cols: list[FloatArray] = []
    if np.any(fixed > 0):
        heads.append("fixed ms")
        cols.append(fixed)
    if tp > 1:
        heads.append("all-reduce ms")
        cols.append(comm)
    if beyond and np.any(serial > 5e-4):
        heads.append("beyond max ms")
        cols.append(serial)
    return heads, [[float(c[i]) for c in cols] for i in range(n)]

