"""`python3 dev.py realtest`: a real serving engine in the loop, llama.cpp on this CPU, end to end
(docs/accuracy.md, "Real engine: llama.cpp on this CPU").

1. find or build `llama-server` (`capacity.bench.llamacpp`: $CAPACITY_LLAMA_SERVER, else the
   cached build, else a build into the cache, 5 to 25 minutes on a 2-core machine; `--build-only`
   stops here);
2. write the GGUF test models (`capacity.bench.gguf_model`: ~156 M Llama-shaped in f32 and
   f16, and a second shape in f32: 4 wider layers, a tied output head) beside the binary, once;
3. in a workspace of its own (`<cache>/realtest/home`, `home-long` for `--long`; never the
   checkout's data/): probe the CPU with the server's thread count (`capacity probe --threads`,
   the `-t` of step 4), add the models (`capacity catalog add-model`);
4. start the server on the f32 model (`--parallel 8`, `--metrics`) and measure concurrency 1
   to 8 at two prompt lengths (~100 and ~400 tokens), 64 output tokens, with `capacity bench`,
   every closed-loop run in two passes, forward then backward (`--passes 2`), so the
   machine's drift biases no level; each run measures 16 requests a level, or 3 x its highest
   concurrency when that is more (`requests_for`: the bench's rule, so no level is one burst);
5. `capacity calibrate --levels 1,2,4,8` on the 8-point sweep among them: two lengths at
   concurrency 1 pin MFU and the prefill overhead, four batch sizes pin eta_bw, eff and the
   step overhead (on one model only their sum with eta_bw: the report says so);
5b. another size (`BIG_SHAPE`: 6 layers instead of 8, 1.63x the weight reads per step) at
   concurrency 1, 2, 4, 8 and both prompt lengths: predicted by step 5's calibration (issue
   31's transfer), and fitted together with the f32 sweep (`calibrate --also`), each model
   then held out whole;
6. check held-out points: concurrency 3, 5, 6 and 7 of the same runs (measured in the same
   passes as the sweep), another prompt length (~200 tokens), a Poisson load
   (`--request-rate`), the second shape (same kernels, another model), and the f16 model (the
   same shape, other kernels); a drift control (the f32 model at concurrency 1, short prompts,
   `CONTROL_REQUESTS`) runs right after the sweep and again right before every held-out run
   outside the sweep's passes, on the f32 server kept up beside the others
   (`engine_check.Drift`);
7. print measured vs predicted (TTFT p50/p90, ITL p50 and mean, output tok/s) per level as Markdown,
   issue 31's figures (`size_report`: the other size, a whole level left out, both sizes each
   held out), the same again with each case's predictions scaled by its drift control
   (`drift_report`), and write it with the calibration report to a file.

`--long` runs only the long-prompt check instead (`long_context`): a prefill calibration at
512-4K tokens predicts TTFT at 8K, 16K and 32K.

Run as `python -m capacity.cli.realtest [--quick] [--out FILE] [--build-only]` (`python3 dev.py
realtest ...`); not a `capacity` subcommand (it needs a compiler and minutes of CPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pandas as pd

from capacity import workspace
from capacity.bench import llamacpp
from capacity.bench.client import BURST_FACTOR
from capacity.bench.gguf_model import (
    BIG_SHAPE,
    LONG_SHAPE,
    TEST_SHAPE,
    WIDE_SHAPE,
    write_llama_gguf,
)
from capacity.bench.store import RunStore
from capacity.catalog.loader import Catalog, load_catalog
from capacity.fit import calibration_store
from capacity.fit.engine_check import (
    CheckRow,
    bound_counts,
    check_run,
    markdown_table,
)
from capacity.fit.realtest_record import (
    CASE_BIG,
    CASE_BIG_LONG,
    CASE_CONC,
    CASE_CONC_LONG,
    CASE_LEN,
    GPU_KEY,
    MODELS,
    PASSES,
    SHORT_CHARS,
    Case,
    Record,
    render,
    step_weight_params,
    write_record,
)

FILES = {"f32": (TEST_SHAPE, "f32", "capacity-test-156m-f32.gguf"),
         "f16": (TEST_SHAPE, "f16", "capacity-test-156m-f16.gguf"),
         "wide": (WIDE_SHAPE, "f32", "capacity-test-wide-f32.gguf"),
         "long": (LONG_SHAPE, "f32", "capacity-test-long-f32.gguf"),
         "big": (BIG_SHAPE, "f32", "capacity-test-big-f32.gguf")}
"""Each test model's shape, dtype and file name."""
LONG_CHARS, MID_CHARS = 1800, 900
"""Prompt lengths, characters, beside `SHORT_CHARS` (the bench's English filler: ~4.5
characters per token)."""
GRID_LEVELS, CAL_LEVELS = "1,2,3,4,5,6,7,8", "1,2,4,8"
"""The f32 runs' levels at both prompt lengths, and those the calibration fits (`calibrate
--levels`): the 8-point sweep; 3, 5, 6 and 7 are held out, measured in the same passes."""
BIG_LEVELS = CAL_LEVELS
"""The big model's levels, at both prompt lengths: the same sweep as the f32 fit's."""
MAX_TOKENS = 64
PARALLEL = 8
CTX_TOKENS = PARALLEL * 1024
"""llama-server's `-c`: 1,024 tokens for each of the 8 slots."""
LONG_CHARS_PER_TOKEN = 5.2
"""The bench's filler in the test models' vocabulary, long prompts (measured: 18,227 characters,
3,498 tokens; a short prompt has fewer per token, its hex nonce being a larger share)."""
LONG_CAL_TOKENS = (512, 1024, 2048, 4096)
"""`--long`: the prompt lengths the prefill calibration sees (at most 4K, issue 10's target)."""
LONG_HELD_TOKENS = (8192, 16384, 32768)
"""`--long`: the prompt lengths it must predict."""
LONG_OUTPUT_TOKENS = 4
LONG_HELD_REQUESTS = 2
REQUESTS, QUICK_REQUESTS = 16, 8
"""Measured requests per level, all passes together, at least: a full run, `--quick`."""
CONTROL_REQUESTS, QUICK_CONTROL_REQUESTS = 6, 3
"""Requests of one drift control (`control`): the f32 model at concurrency 1, short prompts,
about 20 s; a `--quick` run's."""


def requests_for(levels: str, *, quick: bool = False) -> int:
    """The requests per level of one bench run at `levels` ('1,2,4,8'): `REQUESTS`, raised to
    `BURST_FACTOR` x the highest level where that is more (24 at 8), the bench's rule, so that
    no level of the realtest is one burst and its own output carries no warning. A `--quick`
    smoke run keeps `QUICK_REQUESTS` (8: its levels from 3 up are one burst, and the bench
    says so)."""
    top = max(int(c) for c in levels.split(","))
    return QUICK_REQUESTS if quick else max(REQUESTS, BURST_FACTOR * top)


def two_size_argv(engine: str, path: Path) -> list[str]:
    """`capacity calibrate`'s arguments for the fit of both sizes: the f32 model's sweep
    (`CAL_LEVELS` of run rt-cal) with the big model's (run rt-big), `--batch1`, saved at
    `path`."""
    return ["--model", MODELS["f32"], "--gpu", GPU_KEY, "--ctx", "2048", "--label", "rt-cal",
            "--levels", CAL_LEVELS, "--also", f"{MODELS['big']}=rt-big", "--engine", engine,
            "--batch1", "--save", str(path)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load() -> str:
    """The 1-minute load average, or '?' where the platform has none."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (OSError, AttributeError):
        return "?"


def _say(text: str) -> None:
    print(f"realtest [{time.strftime('%H:%M:%S')}] {text}", flush=True)


class Steps:
    """Runs `capacity` subcommands in the realtest's own workspace."""

    def __init__(self, home: Path) -> None:
        self.home = home
        env = dict(os.environ)
        for name in (workspace.CAPACITY_CUSTOM_DIR, workspace.CAPACITY_BENCH_DIR,
                     workspace.CAPACITY_CALIBRATIONS_DIR, workspace.CAPACITY_DATA_DIR):
            env.pop(name, None)
        env[workspace.CAPACITY_HOME] = str(home)
        self.env = env

    def probe(self, threads: int) -> None:
        """`capacity probe` of this CPU into the GPU entry `GPU_KEY`, its BLAS on `threads`
        threads: the engine's `-t` (with every core, the probe would read the peak of threads
        the engine never has)."""
        self.capacity("probe", "--device", "cpu", "--key", GPU_KEY, "--replace",
                      "--threads", str(threads))

    def capacity(self, *argv: str, capture: bool = False) -> str:
        cmd = [sys.executable, "-m", "capacity", *argv]
        proc = subprocess.run(cmd, env=self.env, text=True,
                              stdout=subprocess.PIPE if capture else None)
        if proc.returncode != 0:
            raise SystemExit(f"realtest: `capacity {' '.join(argv)}` failed "
                             f"(exit {proc.returncode})")
        return proc.stdout or ""

    def bench(self, base_url: str, label: str, *, concurrency: str, prompt_chars: int,
              requests: int, model_key: str, rate: float | None = None,
              max_tokens: int = MAX_TOKENS, warmup: int = 1, timeout_s: int = 120,
              passes: int = 1) -> pd.DataFrame:
        argv = ["bench", "--base-url", base_url, "--endpoint", "completions",
                "--concurrency", concurrency, "--requests", str(requests),
                "--passes", str(passes),
                "--prompt-chars", str(prompt_chars), "--max-tokens", str(max_tokens),
                "--label", label, "--gpu", GPU_KEY, "--predict-model", model_key,
                "--timeout", str(timeout_s), "--warmup", str(warmup)]
        if rate is not None:
            argv += ["--request-rate", f"{rate:.3g}"]
        self.capacity(*argv)
        return self.summary(label)

    def last_run_id(self, label: str) -> str:
        """The id of the latest run with this label."""
        with RunStore(self.home / "bench") as store:
            return store.latest_run_id(label)

    def summary(self, label: str) -> pd.DataFrame:
        """The summary of the latest run with this label."""
        with RunStore(self.home / "bench") as store:
            return store.summary(store.latest_run_id(label))


def write_models(folder: Path) -> dict[str, Path]:
    """The test models (`FILES`), written once into `folder`."""
    paths: dict[str, Path] = {}
    for name, (shape, dtype, file) in FILES.items():
        path = folder / file
        if not path.is_file():
            _say(f"writing {path.name} ({shape.params / 1e6:.0f} M parameters)")
            write_llama_gguf(path, llamacpp.vocab_file(), shape=shape,
                             dtype="f16" if dtype == "f16" else "f32")
        paths[name] = path
    return paths


def engine_threads(cores: int | None = None) -> int:
    """llama-server's threads: every core but one, which the load generator keeps (at least 1,
    at most 8). Its threads spin at the barriers between kernels, so a client process that
    takes one of their cores slows a whole step: with `-t 2` on 2 cores the same level
    measured 20 ms per token in one run and 34 ms in the next (concurrency 2, 200-token
    prompts); with `-t 1` two runs agreed within 1% at concurrency 1, 2 and 4."""
    n = (os.cpu_count() or 1) if cores is None else cores
    return max(1, min(8, n - 1))


def long_context(binary: Path, model_path: Path, steps: Steps, *, catalog: Catalog,
                 threads: int, requests: int, engine: str) -> tuple[list[CheckRow], str]:
    """Issue 10's long-prompt check on a real engine: one slot of llama-server on the narrow
    long-context model (`LONG_SHAPE`), a prefill calibration from prompts of at most 4K tokens
    (`LONG_CAL_TOKENS`, concurrency 1, a few output tokens), then TTFT at 8K, 16K and 32K
    (`LONG_HELD_TOKENS`) measured against its prediction. Returns the rows and the fitted
    prefill knobs as text."""
    cal_path = steps.home / "calibrations" / "realtest-llamacpp-long.toml"
    cfg = llamacpp.ServerConfig(model_path=model_path, port=_free_port(), parallel=1,
                                ctx_tokens=LONG_SHAPE.context_tokens, threads=threads)
    rows: list[CheckRow] = []
    model_key = MODELS["long"]
    with llamacpp.LlamaServer(binary, cfg, log_path=steps.home / "llama-server-long.log") as srv:
        for tokens in LONG_CAL_TOKENS:
            _say(f"long prompts: calibration at ~{tokens} tokens, concurrency 1")
            steps.bench(srv.base_url, "rt-long-cal", concurrency="1", requests=requests,
                        prompt_chars=int(tokens * LONG_CHARS_PER_TOKEN), model_key=model_key,
                        max_tokens=LONG_OUTPUT_TOKENS, timeout_s=900)
        steps.capacity("calibrate", "--model", model_key, "--gpu", GPU_KEY,
                       "--ctx", str(LONG_SHAPE.context_tokens), "--label", "rt-long-cal",
                       "--engine", engine, "--save", str(cal_path))
        cal = calibration_store.load(cal_path)
        for tokens in LONG_HELD_TOKENS:
            _say(f"long prompts: held out at ~{tokens} tokens")
            summary = steps.bench(srv.base_url, f"rt-long-{tokens}", concurrency="1",
                                  requests=LONG_HELD_REQUESTS, warmup=0,
                                  prompt_chars=int(tokens * LONG_CHARS_PER_TOKEN),
                                  model_key=model_key, max_tokens=LONG_OUTPUT_TOKENS,
                                  timeout_s=900)
            rows += check_run(summary, case=f"long prompt ~{tokens // 1024}K", model=model_key,
                              gpu=GPU_KEY, calibration=cal, catalog=catalog,
                              engine="llamacpp", max_num_seqs=1)
    knobs = ", ".join(f"{k} {getattr(cal, k):.3g}" for k in ("mfu", "attn_mfu",
                                                             "prefill_overhead_ms")
                      if getattr(cal, k) is not None)
    return rows, knobs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 dev.py realtest", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer requests per level (a smoke run: noisier numbers)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="Markdown report (default <cache>/realtest/realtest-<date>.md)")
    p.add_argument("--threads", type=int, default=engine_threads(),
                   help="llama-server threads (default: the cores less one for the client, "
                        "at least 1, at most 8)")
    p.add_argument("--build-only", action="store_true",
                   help="find or build llama-server (5 to 25 minutes on a 2-core machine, "
                        "once), say where it is, and stop")
    p.add_argument("--long", action="store_true",
                   help="only the long-prompt check: a prefill calibration at 512-4K tokens "
                        "predicts TTFT at 8K, 16K and 32K (a narrow model, one slot; ~10 min)")
    args = p.parse_args(argv)
    started = time.monotonic()
    load_before = _load()
    log = sys.stdout
    binary = llamacpp.locate_or_build(log=log)
    _say(f"llama-server: {binary} (ready after {time.monotonic() - started:.0f} s)")
    if args.build_only:
        vocab = llamacpp.vocab_file()
        _say(f"--build-only: done; the test models' vocabulary {vocab} is "
             + ("there" if vocab.is_file() else "missing (CAPACITY_LLAMA_SERVER skips the "
                "source: the test models need it)"))
        return 0
    models = write_models(llamacpp.version_dir() / "models")
    # each check in a workspace of its own: a rerun of one keeps the other's runs
    home = workspace.cache_dir() / "realtest" / ("home-long" if args.long else "home")
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    steps = Steps(home)
    steps.probe(args.threads)
    for name, path in models.items():
        steps.capacity("catalog", "add-model", str(path), "--key", MODELS[name], "--replace")
    catalog = load_catalog(workspace.catalog_dir(), extra_dirs=[home / "custom"])
    quick = bool(args.quick)
    engine = f"llama.cpp (llama-cpp-python {llamacpp.SDIST_VERSION} sdist)"
    gpu = catalog.gpu(GPU_KEY)
    machine = (f"Machine: {gpu.name}, {platform.machine()}, {os.cpu_count()} cores; probed "
               f"{gpu.bandwidth_gb_s:g} GB/s, {gpu.bf16_tflops:g} TFLOP/s (best GEMM) on "
               f"{args.threads} thread{'' if args.threads == 1 else 's'}, the server's -t.")
    if args.long:
        long_rows, knobs = long_context(binary, models["long"], steps, catalog=catalog,
                                   threads=args.threads, requests=2 if args.quick else 3,
                                   engine=engine)
        text = "\n".join([
            f"## llama.cpp long-prompt check, {dt.date.today().isoformat()}", "", machine,
            f"Engine: llama-server from {engine}, --parallel 1, -c {LONG_SHAPE.context_tokens}, "
            f"-t {args.threads}; model: {LONG_SHAPE.layers} layers, {LONG_SHAPE.q_heads} query "
            f"heads x {LONG_SHAPE.head_dim}, {LONG_SHAPE.kv_heads} KV heads, f32 "
            f"({LONG_SHAPE.params / 1e6:.1f} M parameters).",
            f"Prefill calibrated at concurrency 1 on prompts of "
            f"{', '.join(str(t) for t in LONG_CAL_TOKENS)} tokens: {knobs}.",
            f"Run time {(time.monotonic() - started) / 60:.1f} min; 1-minute load average "
            f"{load_before} at the start, {_load()} at the end.", "",
            markdown_table(long_rows), "Held-out TTFT p50 error by prompt length: " + ", ".join(
                f"{r.prompt_tokens:,.0f} tokens {r.error('ttft_p50_ms'):+.1%}"
                for r in long_rows)
            + ".", "", "Spec-sheet upper bound: measured no faster on " + ", ".join(
                f"{k} {n} of {m} levels" for k, (n, m) in bound_counts(long_rows).items())
            + ".", ""])
        _report(text, args.out, "realtest-long")
        return 0
    cal_path = home / "calibrations" / "realtest-llamacpp.toml"
    two_path = home / "calibrations" / "realtest-llamacpp-two-sizes.toml"
    stamp = dt.datetime.now(dt.UTC)
    cases: list[Case] = []
    info: dict[str, Any] = {}
    fitted = tuple(int(c) for c in CAL_LEVELS.split(","))

    def server(dtype: str) -> llamacpp.LlamaServer:
        cfg = llamacpp.ServerConfig(model_path=models[dtype], port=_free_port(),
                                    parallel=PARALLEL, ctx_tokens=CTX_TOKENS,
                                    threads=args.threads)
        return llamacpp.LlamaServer(binary, cfg, log_path=home / f"llama-server-{dtype}.log")

    def case(name: str, model: str, label: str, control: str, **kw: Any) -> None:
        """The held-out run just measured under `label`, as a case of the record, with the
        drift control measured right before it (`control`, '' for none)."""
        cases.append(Case(name=name, model=model, run=f"{label}/{steps.last_run_id(label)}",
                          control=control, **kw))

    with ExitStack() as stack:
        f32 = stack.enter_context(server("f32"))
        _say(f"llama-server up on {f32.base_url} (f32 model)")
        info = llamacpp.server_info(f32.root_url)
        n_controls = 0

        def control() -> str:
            """One drift control on the f32 server (it idles, loaded, beside the case's own):
            concurrency 1, short prompts (`engine_check.Drift`); its run, `<label>/<run id>`."""
            nonlocal n_controls
            n_controls += 1
            label = f"rt-control-{n_controls}"
            _say(f"drift control {n_controls}: f32 model, concurrency 1")
            steps.bench(f32.base_url, label, concurrency="1", prompt_chars=SHORT_CHARS,
                        model_key=MODELS["f32"],
                        requests=QUICK_CONTROL_REQUESTS if quick else CONTROL_REQUESTS)
            return f"{label}/{steps.last_run_id(label)}"

        # the 8-point sweep (CAL_LEVELS at two prompt lengths) and the concurrencies held out
        # of it are measured in one run per prompt length, every closed-loop run in PASSES
        # passes (forward, then backward: `bench --passes`): the held-out points then share
        # the sweep's minutes, and the VM's drift shifts no level against another
        grids = []
        for name, chars in ((CASE_CONC, SHORT_CHARS), (CASE_CONC_LONG, LONG_CHARS)):
            _say(f"grid: prompt {chars} chars, concurrency {GRID_LEVELS} (fit "
                 f"{CAL_LEVELS}, the rest held out)")
            grids.append(steps.bench(f32.base_url, "rt-cal", concurrency=GRID_LEVELS,
                                     prompt_chars=chars,
                                     requests=requests_for(GRID_LEVELS, quick=quick),
                                     model_key=MODELS["f32"], passes=PASSES))
            case(name, MODELS["f32"], "rt-cal", "", skip_levels=fitted)  # in its own passes
        baseline = control()
        # --batch1: llama.cpp's CPU backend decodes one sequence with matrix-vector code and
        # two or more with its GEMM kernels (`roofline.combine_step`)
        steps.capacity("calibrate", "--model", MODELS["f32"], "--gpu", GPU_KEY,
                       "--ctx", "2048", "--label", "rt-cal", "--levels", CAL_LEVELS,
                       "--engine", engine, "--batch1", "--save", str(cal_path))
        _say(f"held out: prompt {MID_CHARS} chars")
        ctl = control()
        steps.bench(f32.base_url, "rt-held-len", concurrency="1,2,4", prompt_chars=MID_CHARS,
                    requests=requests_for("1,2,4", quick=quick), model_key=MODELS["f32"],
                    passes=PASSES)
        case(CASE_LEN, MODELS["f32"], "rt-held-len", ctl)
        conc = grids[0]
        rate = 0.6 * float(conc.loc[conc["concurrency"] == 6, "request_throughput_rps"].iloc[0])
        _say(f"held out: Poisson load at {rate:.2f} req/s (at most 8 in flight)")
        ctl = control()
        steps.bench(f32.base_url, "rt-held-poisson", concurrency="8", prompt_chars=SHORT_CHARS,
                    requests=requests_for("8", quick=quick), model_key=MODELS["f32"], rate=rate)
        # the Poisson level replays its own send times: its 24 arrivals are one draw's bursts
        case("f32 Poisson", MODELS["f32"], "rt-held-poisson", ctl, replay=True)
        with server("big") as srv:
            _say(f"another size: {BIG_SHAPE.layers} layers of {BIG_SHAPE.hidden}, "
                 f"{step_weight_params(BIG_SHAPE) / step_weight_params(TEST_SHAPE):.2f}x the "
                 f"weight reads, concurrency {BIG_LEVELS} at two prompt lengths")
            for name, chars in ((CASE_BIG, SHORT_CHARS), (CASE_BIG_LONG, LONG_CHARS)):
                ctl = control()
                steps.bench(srv.base_url, "rt-big", concurrency=BIG_LEVELS, prompt_chars=chars,
                            requests=requests_for(BIG_LEVELS, quick=quick),
                            model_key=MODELS["big"], passes=PASSES)
                case(name, MODELS["big"], "rt-big", ctl)
        # both sizes at once: shared knobs, each model also held out whole (`calibrate --also`)
        steps.capacity("calibrate", *two_size_argv(engine, two_path))
        for name, dtype, label, what in (
                ("f32 other shape", "wide", "rt-held-shape",
                 "another shape (4 wider layers, tied head, f32)"),
                ("f16 model", "f16", "rt-held-f16", "the f16 model (a second shape)")):
            with server(dtype) as srv:
                _say(f"held out: {what}, concurrency 1,2,4,8")
                ctl = control()
                steps.bench(srv.base_url, label, concurrency="1,2,4,8", prompt_chars=SHORT_CHARS,
                            requests=requests_for("1,2,4,8", quick=quick), model_key=MODELS[dtype],
                            passes=PASSES)
                case(name, MODELS[dtype], label, ctl)
    record = Record(
        date=stamp.isoformat(timespec="seconds"), machine=machine, engine=engine,
        threads=args.threads, parallel=PARALLEL, ctx_tokens=CTX_TOKENS,
        total_slots=str((info.get("/props") or {}).get("total_slots", "?")),
        minutes=round((time.monotonic() - started) / 60, 1), load_before=load_before,
        load_after=_load(), max_tokens=MAX_TOKENS,
        requests_text=(f"{QUICK_REQUESTS} (--quick)" if quick else
                       f"{requests_for('1')}, {requests_for(GRID_LEVELS)} in the runs that reach "
                       f"concurrency {PARALLEL}"),
        calibration=cal_path.name, two_sizes=two_path.name, baseline=baseline,
        cases=tuple(cases))
    folder = write_record(workspace.cache_dir() / "realtest" / "records"
                          / stamp.strftime("%Y%m%dT%H%MZ"), record, home)
    _say(f"record written to {folder} (commit it under data/reference/realtest/ and run "
         "`capacity validate --out docs/accuracy.md` to put its report there)")
    _report(render(folder), args.out, "realtest")
    return 0


def _report(text: str, out_arg: str | None, stem: str, trailer: str = "") -> None:
    """Print the report and write it to `out_arg` (default <cache>/realtest/STEM-DATE.md)."""
    out = Path(out_arg) if out_arg else (workspace.cache_dir() / "realtest" /
                                         f"{stem}-{dt.date.today().isoformat()}.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n" + trailer)
    print(text)
    _say(f"written to {out}")


if __name__ == "__main__":
    sys.exit(main())
