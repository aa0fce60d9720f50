"""`capacity probe`: measure this machine and save it as a custom GPU entry.

    capacity probe                         # CPU (numpy), ~30 s; saved as custom GPU cpu-probe
    capacity probe --quick --key my-cpu    # a few seconds, smaller arrays (noisier)
    capacity probe --threads 1             # the BLAS on 1 thread, as an engine run with -t 1
    capacity probe --device cuda           # GPU 0 with torch, when torch sees CUDA
    capacity plan --gpu cpu-probe ...      # then plan with the measured figures

Measures memory read bandwidth (large-array streaming), the dense GEMM rate at f32/f16 (bf16/f16
on CUDA) and the per-call overhead; the entry's source names the method and the date. Its
bf16_tflops is the best GEMM rate at any dtype and its bandwidth the best read, so predictions
from it are an upper bound on this machine (docs/accuracy.md). On a CPU the BLAS runs on every
core unless --threads says otherwise; an engine given fewer threads (llama-server -t) reaches
less, so probe with the engine's count. The output and the entry's notes state the count used.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from capacity import workspace
from capacity.catalog.loader import MAX_PRICE_PER_HOUR, MIN_PRICE_PER_HOUR
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import dumps, number, whole
from capacity.errors import InputError

MAX_THREADS: Final = 1024
"""Most BLAS threads --threads accepts."""
BLAS_THREAD_VARS: Final = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                           "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
"""The variables the BLAS libraries numpy links (OpenBLAS, MKL, BLIS, Accelerate) read for
their thread count when they load."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "probe", help=SUMMARIES["probe"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="what to measure: auto = CUDA GPU 0 when torch sees one, else the CPU")
    p.add_argument("--quick", action="store_true",
                   help="small arrays: a few seconds, noisier (64 MiB, 512x512)")
    p.add_argument("--threads", type=whole(min=1, max=MAX_THREADS), default=None, metavar="N",
                   help="CPU: threads the BLAS measures with (default: the library's own, one "
                        "per core; with --device auto it means the CPU); give the engine's "
                        "count (llama-server -t) to probe what it can reach")
    p.add_argument("--key", default=None,
                   help="catalog key of the entry (default cpu-probe or cuda-probe)")
    p.add_argument("--price-per-hour", type=number(min=MIN_PRICE_PER_HOUR,
                                                   max=MAX_PRICE_PER_HOUR),
                   default=1.0, metavar="PRICE",
                   help="what an hour of this machine costs you (default 1.0; not a quote)")
    p.add_argument("--currency", choices=("CNY", "USD"), default="CNY",
                   help="currency of --price-per-hour (default CNY)")
    p.add_argument("--replace", action="store_true",
                   help="replace a custom entry with the same key")
    p.add_argument("--no-save", action="store_true", help="measure and print, save nothing")
    p.add_argument("--output", choices=("text", "json"), default="text",
                   help="output format (default text)")
    return p


BlasThreads = tuple[Callable[[], int], Callable[[int], None]]
"""OpenBLAS's get and set of its thread count."""


def _openblas() -> BlasThreads | None:
    """The thread count functions of the OpenBLAS numpy has loaded (its wheels bundle
    `scipy_openblas`, distributions link `libopenblas`), found as threadpoolctl finds them;
    None before numpy is imported or where its BLAS is another library."""
    numpy = sys.modules.get("numpy")
    if numpy is None or numpy.__file__ is None:
        return None
    paths: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            paths += [line.split(None, 5)[-1].strip() for line in fh
                      if "openblas" in line.lower() and len(line.split(None, 5)) == 6]
    except OSError:  # not Linux: numpy's own copy of the library
        pass
    root = Path(numpy.__file__).parent
    paths += [str(p) for d in (root.parent / "numpy.libs", root / ".dylibs")
              for p in sorted(d.glob("*openblas*"))]
    for path in dict.fromkeys(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for stem in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{stem}get_num_threads{suffix}", None)
                put = getattr(lib, f"{stem}set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    return _threads_of(get, put)
    return None


def _threads_of(get: Any, put: Any) -> BlasThreads:
    """A library's thread count functions (ctypes) as typed callables."""
    return (lambda: int(get())), (lambda n: put(int(n)))


def blas_threads() -> int:
    """The threads numpy's BLAS runs with: OpenBLAS's own count where it can be asked, else
    the first of `BLAS_THREAD_VARS` set, else one per core (the libraries' default)."""
    found = _openblas()
    if found is not None:
        return found[0]()
    for value in workspace.env_snapshot(BLAS_THREAD_VARS).values():
        value = (value or "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1


def limit_blas_threads(n: int) -> Callable[[], None]:
    """Have numpy's BLAS run on `n` threads; returns what undoes it. Before numpy is imported
    (a `capacity probe` process) the libraries' variables are set, which they read when they
    load; once it is (a test, a notebook) OpenBLAS is told directly. InputError where neither
    can work: numpy loaded with a BLAS other than OpenBLAS."""
    if "numpy" not in sys.modules:
        before = workspace.env_snapshot(BLAS_THREAD_VARS)
        workspace.set_env({name: str(n) for name in BLAS_THREAD_VARS})
        return lambda: workspace.set_env(before)
    found = _openblas()
    if found is None:
        raise InputError(f"--threads: numpy is loaded already and its BLAS is not OpenBLAS; "
                         f"set {BLAS_THREAD_VARS[0]}={n} (or OMP_NUM_THREADS) before starting")
    get, put = found
    was = get()
    put(n)
    return lambda: put(was)


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device (imports numpy: after any --threads is set)."""
    from capacity.catalog.probe import cuda_available

    return cuda_available()


def run(args: argparse.Namespace) -> int:
    device = args.device
    if device == "cuda" and args.threads is not None:
        raise InputError("--threads is for --device cpu (a GPU is measured with all its SMs)")
    if device == "auto":  # --threads asks for the CPU
        device = "cpu" if args.threads is not None or not _cuda_available() else "cuda"
    if device == "cuda" and not _cuda_available():
        raise InputError("--device cuda: torch is not installed or sees no CUDA device")
    undo = limit_blas_threads(args.threads) if args.threads is not None else None
    try:
        # imported here, after the thread count is set: numpy's BLAS reads it when it loads
        from capacity.catalog.custom import custom_dir, save_gpu, validate_gpu
        from capacity.catalog.probe import gpu_table, probe_cpu, probe_cuda

        key = args.key or f"{device}-probe"
        existing = custom_dir() / "gpus" / f"{key}.toml"
        if not args.no_save and not args.replace and existing.exists():  # before the work
            raise InputError(f"a custom entry '{key}' already exists ({existing}); pass "
                             "--replace or another --key")
        today = dt.date.today().isoformat()
        result = (probe_cuda if device == "cuda" else probe_cpu)(quick=args.quick, date=today)
        if device == "cpu":  # the threads the BLAS ran on, not the cores there are
            result = replace(result, threads=blas_threads())
    finally:
        if undo is not None:
            undo()
    price_source = ("given with --price-per-hour" if args.price_per_hour != 1.0 else
                    "capacity probe's default 1.0 per hour (not a quote: pass --price-per-hour)")
    table = gpu_table(result, key=key, price_per_hour=args.price_per_hour,
                      currency=args.currency, price_source=price_source)
    validate_gpu(table, key)
    path = None
    if not args.no_save:
        _, path = save_gpu(table, overwrite=args.replace)
    if args.output == "json":
        print(dumps({"entry": table, "saved": str(path) if path else None,
                     "gemm_flops_per_s": result.gemm_flops_per_s,
                     "threads" if device == "cpu" else "sms": result.threads,
                     "read_bytes_per_s": result.read_bytes_per_s,
                     "call_overhead_s": result.call_overhead_s}, indent=2))
        return 0
    if device == "cpu":
        why = f"--threads {args.threads}" if args.threads is not None else "the BLAS default"
        used = f"{result.threads} thread{'' if result.threads == 1 else 's'}: {why}"
    else:
        used = f"{result.threads} SMs"
    print(f"{result.name} ({result.device}, {used})")
    print(f"  memory read bandwidth  {result.read_bytes_per_s / 1e9:10.2f} GB/s")
    for dtype, rate in result.gemm_flops_per_s.items():
        print(f"  GEMM {dtype:<5}            {rate / 1e12:10.4f} TFLOP/s")
    print(f"  per-call overhead      {result.call_overhead_s * 1e6:10.2f} us")
    print(f"  memory                 {result.memory_bytes / 1e9:10.2f} GB")
    if path:
        print(f"saved custom GPU '{key}' to {path}; use it with `capacity plan --gpu {key}`")
    return 0
