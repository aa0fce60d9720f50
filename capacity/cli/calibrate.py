"""`capacity calibrate`: fit the efficiency knobs (F11 (docs/method.md)) from measured points and save them.

    capacity calibrate --model M --gpu G --measured FILE [--format-in csv|vllm|aiperf] --save NAME
    capacity calibrate --model M --gpu G --label LABEL --save NAME      (a stored bench run)
    capacity calibrate --model A --gpu G --label RUN_A --also B=RUN_B --save NAME  (two sizes)
    capacity calibrate --model M --gpu G --reference --save NAME        (published.csv sweeps)
    capacity calibrate --model M --gpu G --plan [--format json]          (what to measure)
    capacity calibrate --model M --gpu G --label RUN --draft eagle:3 [--calibration BASE] --save NAME

It fits the operator step's six decode knobs (F4b: eta_bw, eta_kv, eff, attn_sat_batch, step
and per-sequence overhead; with --step-method chapter the chapter's three instead); prefill
fits MFU, attention MFU and overhead (F6b). The decode step is the median inter-token latency
where a bench run recorded it. `--plan` prints the smallest sweep (prompt length x concurrency)
that pins the knobs, and names any that no sweep of its grid pins, instead of fitting.

Prints the fitted knobs beside the chapter's ones (the knobs before the fit), whether the data
pinned each down, each point's measured, chapter's, fitted and held-out prediction, and the
median errors. With --also (other models on the same GPU and engine) one set of knobs is fitted
to every model, and each model is also held out whole and predicted from the others' fit; on one
model a note says when the per-step overhead and bandwidth efficiency are not split by the data.
The closed-loop TTFT of every level above 1 is shown between one prompt's prefill and a stated
bound for an engine that admits a burst in pieces (llama.cpp).
With --draft (a run measured with speculative decoding) the knobs are not fitted:
they come from --calibration (the same setup without the draft) or the scenario, and the fit is
the draft's acceptance length tau (TPOT = engine step / tau, least squares over the levels), shown
beside the one the server counted (/metrics, recorded by `capacity bench`), which is used where
there is one; saves NAME.toml in the workspace's calibrations folder (data/calibrations in a checkout;
docs/configuration.md) or a path ending in .toml. `capacity plan ... --calibration NAME` then
predicts with it.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from capacity import workspace
from capacity.catalog.loader import MAX_CONTEXT_TOKENS
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import MAX_CONCURRENCY, dumps, number, whole
from capacity.cli.plan import add_scenario_flags, parse_int_list, scenario_from_args
from capacity.errors import InputError
from capacity.fit.acceptance import (
    acceptance_json,
    acceptance_text,
    drafted_calibration,
    label_acceptance,
)
from capacity.fit.calibration import KNOBS, Calibration, PointKind, apply, fit
from capacity.fit.calibration_problem import PINNED_RATIO, spec_value
from capacity.fit.calibration_store import calibration_path, load, save
from capacity.fit.calibration_ttft import LLAMACPP_BATCH_TOKENS, ClosedLoopRow, closed_loop_rows
from capacity.fit.imports import FORMATS, read_bench_label, read_measured
from capacity.fit.measured import MeasuredPoint
from capacity.fit.reference import reference_points
from capacity.fit.sweep import (
    CALIBRATION_PASSES,
    CHARS_PER_TOKEN,
    OUTPUT_TOKENS,
    MeasurementPlan,
    measurement_plan,
)
from capacity.model.roofline import StepMethod
from capacity.model.scenario import Scenario
from capacity.model.speculative import parse_draft
from capacity.report.tables import render


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "calibrate", help=SUMMARIES["calibrate"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_scenario_flags(p, step_method_help=(  # the fit's default differs from a prediction's
        "decode step to fit: 'operator' (F4b, the default: weight GEMMs, then attention, each "
        "on its own roofline, and a per-sequence cost) or 'chapter' (F4: max of memory and "
        "arithmetic, three knobs)"))
    src = p.add_argument_group("measurements (one of)")
    one = src.add_mutually_exclusive_group(required=True)
    one.add_argument("--measured", metavar="FILE",
                     help="a CSV (concurrency, context_tokens, tpot_ms, ...), a `vllm bench "
                          "serve` result JSON or an AIPerf profile_export_aiperf.json/.csv")
    one.add_argument("--label", help="a stored `capacity bench` run: "
                                     "data/bench/LABEL/*/summary.csv")
    one.add_argument("--reference", action="store_true",
                     help="the published sweeps in data/reference/published.csv for this "
                          "--model and --gpu")
    one.add_argument("--plan", action="store_true",
                     help="fit nothing: print the smallest sweep (prompt length x "
                          "concurrency) that pins the knobs of the operator step and of "
                          "prefill on this --model and --gpu, and any no sweep of its grid "
                          "pins (docs/calibration.md)")
    src.add_argument("--format-in", choices=FORMATS, default=None,
                     help="format of --measured (default: guessed from the content)")
    src.add_argument("--concurrency", type=number(min=0, max=MAX_CONCURRENCY, min_open=True),
                     default=None, metavar="N",
                     help="concurrency of an AIPerf CSV export (it does not record it)")
    src.add_argument("--levels", default=None, metavar="LIST",
                     help="fit only these concurrency levels, e.g. 1,2,4,8 (the others are "
                          "left out, to check the fit against: measure a wide sweep, fit a "
                          "few levels of it; default every level)")
    src.add_argument("--also", action="append", default=[], metavar="MODEL=RUN",
                     help="points of another model on the same GPU and engine, fitted together "
                          "with --model's (repeat for more): a stored bench run's label or a "
                          "--measured file; models of other sizes separate the per-step "
                          "overhead from bandwidth efficiency, and each model is also held out "
                          "whole and predicted from the others (docs/calibration.md)")
    src.add_argument("--engine", default="", help="engine and version, e.g. 'vLLM 0.11.0' "
                                                  "(recorded in the calibration)")
    src.add_argument("--bench-dir", default=None, help=argparse.SUPPRESS)
    f = p.add_argument_group("fit")
    f.add_argument("--max-concurrency", metavar="C@TOKENS", default=None,
                   help="a measured maximum concurrency (or the last C before an OOM) at a "
                        "context, e.g. 53@8192: fits the runtime memory overhead")
    f.add_argument("--batch1", action="store_true",
                   help="also fit batch1_factor, the decode step of one sequence over the "
                        "formula's, and batched_overhead_ms, the fixed time only steps of two or "
                        "more sequences pay, for an engine that runs one sequence through other "
                        "kernels (llama.cpp on CPU: matrix-vector code at 1, GEMM from 2); "
                        "default 1 and 0")
    f.add_argument("--prefill-batch-tokens", type=whole(min=1, max=1_048_576),
                   default=LLAMACPP_BATCH_TOKENS,
                   metavar="N",
                   help="prompt tokens the engine takes in one step (llama.cpp's n_batch, "
                        "default 2048): the closed-loop TTFT bound of the report counts the "
                        "steps a burst's prompts can be spread over with it")
    f.add_argument("--ttft-all-levels", action="store_true",
                   help="fit prefill on TTFT at every concurrency (default: the lowest level "
                        "of each prompt length; TTFT under load includes queueing)")
    d = p.add_argument_group("speculative decoding")
    d.add_argument("--draft", metavar="KIND:K", default=None,
                   help="the run was measured with this speculative-decoding draft (mtp, eagle "
                        "or ngram, K tokens per step, e.g. eagle:3): fit its acceptance length "
                        "from TPOT instead of the knobs")
    d.add_argument("--calibration", metavar="NAME|PATH", default=None,
                   help="with --draft: the step knobs, a saved calibration of the same setup "
                        "without the draft (default: the scenario's knobs)")
    p.add_argument("--save", metavar="NAME", default=None,
                   help="save as data/calibrations/NAME.toml (or a path ending in .toml)")
    p.add_argument("--output", "--format", dest="output",
                   choices=("text", "json", "markdown"), default="text",
                   help="report (or --plan) format (default text)")
    return p


def _max_concurrency(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        c, ctx = text.split("@")
        c_n, ctx_n = int(c), int(ctx)
    except ValueError:
        raise InputError(f"--max-concurrency '{text}': write C@TOKENS, e.g. 53@8192") from None
    if not (1 <= c_n <= MAX_CONCURRENCY and 1 <= ctx_n <= MAX_CONTEXT_TOKENS):
        raise InputError(f"--max-concurrency '{text}': C must be 1..{MAX_CONCURRENCY:,} and "
                         f"TOKENS 1..{MAX_CONTEXT_TOKENS:,}")
    return c_n, ctx_n


def load_points(args: argparse.Namespace, s: Scenario) -> tuple[list[MeasuredPoint], str]:
    """The measured points the flags name, and a description of where they came from."""
    labels = {"model": s.variant.key, "gpu": s.gpu.key, "engine": args.engine}
    if args.measured:
        return (read_measured(args.measured, args.format_in, concurrency=args.concurrency,
                              **labels), str(args.measured))
    if args.label:
        runs = Path(args.bench_dir) if args.bench_dir else workspace.prepare_bench_dir()
        return (read_bench_label(args.label, runs, **labels),
                f"bench run '{args.label}'")
    pts = reference_points(gpu=s.gpu.key, model=s.variant.key,
                           engine=args.engine or None)
    pts = [p for p in pts if p.tp == s.tp and p.gpus == s.n_gpus]
    if not pts:
        raise InputError(f"data/reference/published.csv has no sweep of {s.variant.key} on "
                         f"{s.n_gpus} x {s.gpu.key} (TP={s.tp})"
                         + (f" with engine '{args.engine}'" if args.engine else ""))
    engines = sorted({p.engine for p in pts})
    if len(engines) > 1:
        raise InputError("the published points mix engines (" + ", ".join(engines)
                         + "): pick one with --engine")
    return pts, "data/reference/published.csv"


def other_models(args: argparse.Namespace, base: Scenario
                 ) -> list[tuple[Scenario, list[MeasuredPoint], str]]:
    """--also MODEL=RUN: each other model's scenario (the same flags and step method as
    `base`, that model), its points (a stored run's label, or a file) and where they came from."""
    out = []
    for text in args.also:
        key, sep, source = text.partition("=")
        if not sep or not key.strip() or not source.strip():
            raise InputError(f"--also '{text}': write MODEL=RUN (a bench label or a file), "
                             "e.g. --also rt-llama-big-w32=rt-big")
        s = scenario_from_args(argparse.Namespace(**{**vars(args), "model": key.strip(),
                                                     "draft": None}))
        s = s.with_(step_method=base.step_method)
        labels = {"model": s.variant.key, "gpu": s.gpu.key, "engine": args.engine}
        if Path(source).is_file():
            pts = read_measured(source, args.format_in, concurrency=args.concurrency, **labels)
            where = source
        else:
            runs = Path(args.bench_dir) if args.bench_dir else workspace.prepare_bench_dir()
            pts, where = read_bench_label(source, runs, **labels), f"bench run '{source}'"
        if args.levels:
            pts = only_levels(pts, args.levels)
        out.append((s, pts, f"{s.variant.key}: {where}"))
    return out


def only_levels(points: list[MeasuredPoint], text: str) -> list[MeasuredPoint]:
    """The points at the concurrency levels of `text` ('1,2,4,8'); InputError naming the
    levels there are when none matches."""
    wanted = set(parse_int_list(text, maximum=MAX_CONCURRENCY))
    kept = [p for p in points if p.concurrency in wanted]
    if not kept:
        have = ", ".join(f"{c:g}" for c in sorted({p.concurrency for p in points}))
        raise InputError(f"--levels {text}: none of the measured levels ({have}) is among them")
    return kept


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _pinned(cal: Calibration, name: str) -> str:
    """'yes', 'no: stays near its prior', or '-' (an old file, or not fitted)."""
    p = cal.pinned(name)
    return "-" if p is None else ("yes" if p else "no: stays near its prior")


def _std(std: float, value: float) -> str:
    """A knob's standard error as +/- percent, or why there is none."""
    if math.isnan(std):
        return "- (too few points)"
    if value == 0 or std > abs(value):
        return f"+/- {std:.3g} (more than the value)"  # whether pinned: its own column
    return f"+/- {std / abs(value):.0%}"


def report(cal: Calibration, base: Scenario, fmt: str = "text") -> str:
    """The fit as text: knobs, per-point residuals and errors (held-out error always shown)."""
    md = fmt == "markdown"
    out = [("## " if md else "") + f"Calibration '{cal.name}': "
           f"{' + '.join(cal.models) if cal.models else cal.model} on {cal.gpu}"
           + (f" ({cal.engine})" if cal.engine else "") + f", from {cal.inputs}", ""]
    rows = [[n, spec_value(base, n), getattr(cal, n), _std(cal.knob_std(n), getattr(cal, n)),
             _pinned(cal, n)]
            for n in KNOBS if getattr(cal, n) is not None]
    if cal.overhead_gb is not None:
        rows.append(["overhead_gb", base.overhead_gb, cal.overhead_gb, "-", "-"])
    out.append(f"decode step: {cal.step_method or 'chapter'} method")
    out.append(render(["knob", "chapter's", "fitted", "std error", "pinned by the data"], rows,
                      "markdown" if md else "text"))
    for kind, title in ((PointKind.TPOT, "TPOT (decode step)"), (PointKind.TTFT, "TTFT (prefill)")):
        pts = [p for p in cal.points if p.kind == kind]
        if not pts:
            continue
        out.append(f"\n{title}, ms\n")
        multi = bool(cal.models)
        out.append(render(
            [*(["model"] if multi else []), "concurrency", "context", "measured", "chapter's",
             "err", "fitted", "err", "held out", "err",
             *(["model held out", "err"] if multi else [])],
            [[*([p.model] if multi else []), p.concurrency, p.context_tokens, p.measured_ms,
              p.spec_ms, _pct(p.spec_error), p.fitted_ms, _pct(p.fitted_error), p.held_out_ms,
              _pct(p.held_out_error),
              *([p.model_out_ms, _pct(p.model_out_error)] if multi else [])]
             for p in pts], "markdown" if md else "text"))
        med = {w: cal.median_abs_error(kind, w)
               for w in ("spec", "fitted", "held_out", "model_out")}
        held = ("none (too few points to hold any out)" if med["held_out"] is None
                else f"{med['held_out']:.1%}")
        other = ("" if med["model_out"] is None else
                 f", each model held out whole (predicted from the other models' fit) "
                 f"{med['model_out']:.1%}")
        out.append(f"median |error|: chapter's {med['spec']:.1%}, fitted {med['fitted']:.1%}, "
                   f"held out {held}{other}\n")
    out.append(f"held-out method: {cal.holdout_method}")
    out += [f"note: {n}" for n in cal.notes]
    return "\n".join(out) + "\n"


def to_json(cal: Calibration) -> dict[str, Any]:
    """The calibration and its errors as JSON."""
    draft = {"draft": {"key": cal.draft, "acceptance_length": cal.acceptance_length,
                       "fitted": cal.acceptance_fitted, "std": cal.acceptance_std,
                       "measured": cal.acceptance_measured}} if cal.draft else {}
    return {**draft,
        "name": cal.name, "model": cal.model, "models": list(cal.models) or [cal.model],
        "gpu": cal.gpu, "engine": cal.engine,
        "inputs": cal.inputs, "created": cal.created, "split_ridge_ms": cal.split_ridge_ms,
        "step_method": cal.step_method or "chapter",
        "knobs": {n: getattr(cal, n) for n in (*KNOBS, "overhead_gb")},
        "std": dict(cal.std), "identifiability": dict(cal.identifiability),
        "pinned": {n: cal.pinned(n) for n, _ in cal.identifiability},
        "holdout_method": cal.holdout_method,
        "median_abs_error": {k: {w: cal.median_abs_error(k, w)
                                 for w in ("spec", "fitted", "held_out", "model_out")}
                             for k in PointKind},
        "points": [p.__dict__ for p in cal.points], "notes": list(cal.notes),
    }


def plan_text(plan: MeasurementPlan, fmt: str = "text") -> str:
    """The measurement plan as a table of cells (one bench run per prompt length) and each
    knob's width ratio."""
    out = [f"Measurement plan for {plan.model} on {plan.gpu}: {len(plan.cells)} cells, "
           f"{OUTPUT_TOKENS} output tokens each (decode step from the median inter-token "
           "latency, prefill from TTFT at concurrency 1)", ""]
    out.append(render(["prompt tokens", "concurrency", "pins"],
                      [[c.prompt_tokens, c.concurrency, c.pins] for c in plan.cells], fmt))
    out.append(f"\nOne bench run per prompt length ({CHARS_PER_TOKEN} characters per token; "
               "set the engine's max_num_seqs at least to the largest level):")
    out += [f"  capacity bench ... --prompt-chars {p * CHARS_PER_TOKEN} --concurrency "
            f"{','.join(map(str, levels))} --max-tokens {OUTPUT_TOKENS} "
            f"--passes {CALIBRATION_PASSES} --label calib-p{p}"
            for p, levels in plan.sweeps()]
    out.append("")
    out.append(render(["knob", "posterior / prior width", "pinned"],
                      [[n, r, "yes" if r < PINNED_RATIO else "no: stays near its prior"]
                       for n, r in plan.ratios], fmt))
    if plan.not_pinned:
        out.append(f"not pinned by any sweep of this grid: {', '.join(plan.not_pinned)} (its "
                   "term never dominates on this model and GPU, or trades off against another "
                   "knob's, e.g. eta_bw against the fixed overhead: a second model of another "
                   "size on the same GPU separates them); it stays near its prior")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    kind, depth = parse_draft(args.draft or "none")
    drafted = None if kind == "none" else (kind, depth)
    # the scenario without the run's draft: its tau is fitted here, not looked up
    plain = argparse.Namespace(**{**vars(args), "draft": None})
    if args.save:
        calibration_path(args.save)  # a bad name fails before any work is done
    if args.pp > 1:   # the fit's terms (F11) are a TP group's: measure one stage's group
        raise InputError("calibrating a pipelined deployment (--pp > 1) is not supported: "
                         "measure one TP group (--pp 1) and plan the pipeline with its knobs")
    if args.plan:
        if args.save:
            raise InputError("--plan fits nothing: drop --save")
        plan = measurement_plan(scenario_from_args(plain))
        if not plan.cells:
            raise InputError(f"{args.model} leaves no room for KV cache on {args.gpu}: no "
                             "sweep can be measured (pick a bigger GPU or a smaller format)")
        if args.output == "json":
            print(dumps(plan.to_json(), indent=2))
        else:
            print(plan_text(plan, args.output), end="")
        return 0
    base = scenario_from_args(plain)
    if not args.step_method:  # calibration learns the engine: the operator step (F4b)
        base = base.with_(step_method=StepMethod.OPERATOR.value)
    if args.batch1 and base.step_method != StepMethod.OPERATOR:
        raise InputError("--batch1 fits the operator step's batch-1 factor; drop "
                         f"--step-method {base.step_method} or --batch1")
    if args.calibration and drafted is None:
        raise InputError("--calibration gives the step knobs of a run with --draft: add "
                         "--draft KIND:K, or drop --calibration to fit the knobs")
    points, inputs = load_points(args, base)
    if args.levels:
        points, inputs = only_levels(points, args.levels), f"{inputs}, levels {args.levels}"
    name = args.save if args.save and "/" not in args.save and not args.save.endswith(".toml") \
        else (Path(args.save).stem if args.save else "unsaved")
    if drafted is not None:
        if args.also:
            raise InputError("--draft fits one model's acceptance length: drop --also")
        return _run_drafted(args, base, points, drafted, name, inputs)
    others = other_models(args, base)
    if others:
        inputs = "; ".join([f"{base.variant.key}: {inputs}", *(w for _, _, w in others)])
    cal = fit(points, base, name=name, engine=args.engine, inputs=inputs,
              max_concurrency=_max_concurrency(args.max_concurrency),
              ttft_all_levels=args.ttft_all_levels, batch1=args.batch1,
              others=[(s, p) for s, p, _ in others])
    loops = closed_loop_rows(cal, [(base, points), *((s, p) for s, p, _ in others)],
                             args.prefill_batch_tokens)
    if args.output == "json":
        print(dumps({**to_json(cal), "closed_loop_ttft": [
            {**r.__dict__, "holds": r.holds} for r in loops]}, indent=2))
    else:
        print(report(cal, base, args.output), end="")
        print(closed_loop_text(loops, args.prefill_batch_tokens, args.output), end="")
    return _save(args, cal)


def closed_loop_text(rows: list[ClosedLoopRow], batch_tokens: int, fmt: str = "text") -> str:
    """The closed-loop TTFT section of the report: each measured level between one prompt's
    prefill and the burst bound (`calibration_ttft.burst_ttft_bound_ms`)."""
    rows = [r for r in rows if r.concurrency > 1]
    if not rows:
        return ""
    held = sum(r.holds for r in rows)
    out = ["\nClosed-loop TTFT, ms: a burst admitted in pieces (llama.cpp's batch split) is "
           "not predicted, it is bounded: TTFT <= C x one prompt's prefill work + n_b x prefill "
           f"overhead + (n_b + 1) x decode step at C, n_b = C + floor(C x prompt / "
           f"{batch_tokens}) (docs/calibration.md)\n",
           render(["model", "concurrency", "prompt", "measured p50", "p90", "one prefill",
                   "bound", "holds"],
                  [[r.model, r.concurrency, r.prompt_tokens, r.measured_p50_ms,
                    r.measured_p90_ms, r.one_prefill_ms, r.bound_ms, "yes" if r.holds else "NO"]
                   for r in rows], "markdown" if fmt == "markdown" else "text"),
           f"the bound holds at {held} of {len(rows)} levels (p90 where measured, else p50)\n"]
    return "\n".join(out)


def _run_drafted(args: argparse.Namespace, base: Scenario, points: list[MeasuredPoint],
                 drafted: tuple[str, int], name: str, inputs: str) -> int:
    """--draft: the acceptance length of the run's draft under the knobs of --calibration
    (or the scenario's), the server's measured one beside it (a --label run's meta.json)."""
    knobs = load(args.calibration) if args.calibration else None
    scenario = apply(knobs, base) if knobs is not None else base
    measured = None
    if args.label:
        runs = Path(args.bench_dir) if args.bench_dir else workspace.prepare_bench_dir()
        measured = label_acceptance(args.label, runs)
    cal, acc = drafted_calibration(points, scenario, *drafted, measured=measured, knobs=knobs,
                                   name=name, engine=args.engine, inputs=inputs)
    if args.output == "json":
        print(dumps({**to_json(cal), "acceptance": acceptance_json(acc)}, indent=2))
    else:
        print(acceptance_text(acc), end="")
        print(report(cal, scenario, args.output), end="")
    return _save(args, cal)


def _save(args: argparse.Namespace, cal: Calibration) -> int:
    """--save: write the calibration (a name or a path)."""
    if args.save:
        try:
            path = save(cal, args.save)
        except OSError as exc:
            raise InputError(f"cannot save the calibration to {args.save}: "
                             f"{exc.strerror or exc}") from None
        if args.output != "json":
            print(f"saved {path}")
    return 0
