"""`capacity validate`: the accuracy scorecard over every published measurement the project ships.

    capacity validate                          (Markdown on stdout)
    capacity validate --format json
    capacity validate --out docs/accuracy.md   (rewrites the part between the markers)

Each row of data/reference/published.csv beside its spec-sheet prediction (every knob at peak)
and its calibrated leave-one-group-out prediction (knobs fitted on other GPU + engine + model
groups only); the share of rows where the spec sheet is an upper bound on speed (target 100%),
with every exception and its reason; optimism (spec-sheet speed / measured) by GPU and by engine;
the held-out error below and at saturation; and, for each group with three or more decode
levels, each level's step predicted by a fit of the group's other levels, under each step
method. Exit code 1 when a row breaks the upper bound
without a listed reason. With --out, also the real engine's result: every realtest record
committed under data/reference/realtest/ (`python3 dev.py realtest` writes one), each case
predicted again from the record's own files. Method: docs/accuracy.md.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Final

from capacity.cli.commands import SUMMARIES
from capacity.cli.common import whole
from capacity.errors import InputError
from capacity.fit import realtest_record as realtest
from capacity.fit import validate_bursts as bursts
from capacity.fit import validate_disagg as disagg
from capacity.fit import validate_drafts as drafts
from capacity.fit import validate_ep as expert_parallel
from capacity.fit import validate_gpu_probe as gpu_probe
from capacity.fit import validate_mlperf as mlperf
from capacity.fit import validate_open_loop as open_loop
from capacity.fit import validate_typical as typical
from capacity.fit.validate import scorecard, step_methods, with_step_method
from capacity.fit.validate_report import COMMAND, markdown, to_json, write_between_markers


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "validate", help=SUMMARIES["validate"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", choices=("md", "json"), default="md",
                   help="what to print (default md)")
    p.add_argument("--out", metavar="FILE.md", default=None,
                   help="write the Markdown between the <!-- validate:begin/end --> markers "
                        "of FILE.md (text outside them is kept; the file is created if "
                        "missing), e.g. docs/accuracy.md")
    p.add_argument("--jobs", type=whole(min=1), default=None, metavar="N",
                   help="processes the scorecard's sections run in at once (default: one per "
                        "CPU, at most one per section; 1 = all in this process); the output "
                        "is the same")
    if step_methods():  # only when the step model offers more than one method
        p.add_argument("--step-method", choices=step_methods(), default=None,
                       help="decode-step method to score (default: the scenario's own)")
    return p


SECTIONS: Final = ("typical", "card", "bursts", "realtest", "open_loop", "disagg", "trtllm",
                   "mlperf", "drafts", "gpu_probe", "ep")
"""The scorecard's independent sections, the longest first, so that two workers finish together
(each alone on this machine, 2026-12-07: the typical basis 7.6 s, the published rows 6.6, the
runs sent at once 6.1, the open-loop runs 4.3, disaggregation 2.1, TensorRT-LLM's overview 1.3,
MLPerf 1.1, the rest under a second): the typical basis, the published rows, the published
runs sent at once (data/reference/bursts.csv, saturated), the real engine's committed records
(Markdown, for --out only), runs at a set request rate, disaggregated prefill/decode,
TensorRT-LLM's performance overview (data/reference/trtllm_offline.csv, offline runs scored as
MLPerf's), MLPerf Inference's audited results (data/reference/mlperf.csv), speculative
decoding (speed-ups of a draft against batch), this project's own GPU measurements (PyTorch
kernels on an H200, data/reference/gpu_probe/) and wide expert parallelism (MoE). The order
they print in is `run`'s."""


def section(name: str, method: str | None = None) -> Any:
    """One section of the scorecard, computed in this process (a worker's whole job)."""
    if name == "card":
        return scorecard(configure=with_step_method(method), step_method=method)
    make: dict[str, Callable[[], Any]] = {
        "realtest": realtest.markdown,
        "open_loop": open_loop.open_loop_scorecard, "typical": typical.typical_scorecard,
        "disagg": disagg.disagg_scorecard, "mlperf": mlperf.mlperf_scorecard,
        "trtllm": mlperf.trtllm_scorecard, "bursts": bursts.burst_scorecard,
        "drafts": drafts.draft_scorecard,
        "ep": expert_parallel.ep_scorecard, "gpu_probe": gpu_probe.gpu_probe_scorecard}
    return make[name]()


def sections(method: str | None, jobs: int | None = None, *, realtest_md: bool = False
             ) -> dict[str, Any]:
    """Every section by name (the real engine's only with `realtest_md`): in `jobs` worker
    processes (None: one per CPU, at most one per section), or all in this process when that
    is 1, or where no worker process can be started (or one dies): the result does not depend
    on `jobs`, each section being a pure function of the shipped files; on two CPUs the
    command takes about half as long (benchmarks/bench_validate.py)."""
    names = [k for k in SECTIONS if realtest_md or k != "realtest"]
    n = min(len(names), os.cpu_count() or 1) if jobs is None else jobs
    if n < 1:
        raise InputError(f"--jobs must be >= 1, got {n}")
    n = min(n, len(names))   # a worker a section at most (--jobs 100000 started eleven)
    futures = {}
    pool: ProcessPoolExecutor | None = None
    try:   # the pool's queues and the workers (started by the first submit) may be refused
        if n > 1:
            pool = ProcessPoolExecutor(max_workers=n)
            futures = {name: pool.submit(section, name, method) for name in names}
    except (OSError, NotImplementedError):   # no worker processes here (a sandbox): below
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        pool = None
    if pool is not None:
        with pool:
            try:   # a section's own error comes back from result() as it would in-process
                return {name: f.result() for name, f in futures.items()}
            except BrokenProcessPool:
                pass   # a worker died (killed, out of memory): the sections again, here
    return {name: section(name, method) for name in names}


def run(args: argparse.Namespace) -> int:
    method = getattr(args, "step_method", None)
    got = sections(method, args.jobs, realtest_md=bool(args.out))
    card, spec_dec, ep, pd, ty, ol, probe, mlp, trt = (got[k] for k in (
        "card", "drafts", "ep", "disagg", "typical", "open_loop", "gpu_probe", "mlperf",
        "trtllm"))
    if args.out:
        command = COMMAND if method is None else f"{COMMAND} --step-method {method}"
        path = write_between_markers(Path(args.out), markdown(card, command=command))
        drafts.write_section(path, drafts.markdown(spec_dec))
        expert_parallel.write_section(path, expert_parallel.markdown(ep))
        disagg.write_section(path, disagg.markdown(pd, ep.errors("held_out")))
        typical.write_section(path, typical.markdown(ty))
        open_loop.write_section(path, open_loop.markdown(ol))
        mlperf.write_section(path, mlperf.markdown(mlp))
        mlperf.write_trtllm_section(path, mlperf.trtllm_markdown(trt))
        bursts.write_section(path, bursts.markdown(got["bursts"]))
        gpu_probe.write_section(path, gpu_probe.markdown(probe))
        # the real engine: every committed realtest record, predicted again from its files
        realtest.write_section(path, got["realtest"])
        print(f"wrote {path}")
    elif args.format == "json":
        doc = {**json.loads(to_json(card)), "speculative_decoding": drafts.to_dict(spec_dec),
               "expert_parallel": expert_parallel.to_dict(ep),
               "disaggregated": disagg.to_dict(pd, ep.errors("held_out")),
               "typical_basis": typical.to_dict(ty),
               "open_loop": open_loop.to_dict(ol), "mlperf": mlperf.to_dict(mlp),
               "trtllm_offline": mlperf.to_dict(trt), "bursts": bursts.to_dict(got["bursts"]),
               "gpu_probe": gpu_probe.to_dict(probe)}
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print(markdown(card) + "\n" + drafts.markdown(spec_dec) + "\n"
              + expert_parallel.markdown(ep) + "\n" + disagg.markdown(pd, ep.errors("held_out"))
              + "\n"
              + typical.markdown(ty) + "\n" + open_loop.markdown(ol) + "\n"
              + mlperf.markdown(mlp) + "\n" + mlperf.trtllm_markdown(trt) + "\n"
              + bursts.markdown(got["bursts"]) + "\n"
              + gpu_probe.markdown(probe), end="")
    unexplained = [v for v in card.violations if v.reason == "not explained"]
    return 1 if unexplained else 0
