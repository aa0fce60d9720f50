"""`capacity probe`: measure this machine and save it as a custom GPU entry.

    capacity probe                         # CPU (numpy), ~30 s; saved as custom GPU cpu-probe
    capacity probe --quick --key my-cpu    # a few seconds, smaller arrays (noisier)
    capacity probe --device cuda           # GPU 0 with torch, when torch sees CUDA
    capacity plan --gpu cpu-probe ...      # then plan with the measured figures

Measures memory read bandwidth (large-array streaming), the dense GEMM rate at f32/f16 (bf16/f16
on CUDA) and the per-call overhead; the entry's source names the method and the date. Its
bf16_tflops is the best GEMM rate at any dtype and its bandwidth the best read, so predictions
from it are an upper bound on this machine (docs/accuracy.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from capacity.catalog.custom import custom_dir, save_gpu, validate_gpu
from capacity.catalog.loader import BOUNDS
from capacity.catalog.probe import cuda_available, gpu_table, probe_cpu, probe_cuda
from capacity.cli.commands import SUMMARIES
from capacity.cli.common import dumps, number
from capacity.errors import InputError


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "probe", help=SUMMARIES["probe"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="what to measure: auto = CUDA GPU 0 when torch sees one, else the CPU")
    p.add_argument("--quick", action="store_true",
                   help="small arrays: a few seconds, noisier (64 MiB, 512x512)")
    p.add_argument("--key", default=None,
                   help="catalog key of the entry (default cpu-probe or cuda-probe)")
    p.add_argument("--price-per-hour", type=number(min=0, max=BOUNDS["price_per_hour"][1],
                                                   min_open=True),
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


def run(args: argparse.Namespace) -> int:
    device = args.device
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise InputError("--device cuda: torch is not installed or sees no CUDA device")
    key = args.key or f"{device}-probe"
    existing = custom_dir() / "gpus" / f"{key}.toml"
    if not args.no_save and not args.replace and existing.exists():  # before minutes of work
        raise InputError(f"a custom entry '{key}' already exists ({existing}); pass --replace "
                         "or another --key")
    today = dt.date.today().isoformat()
    result = (probe_cuda if device == "cuda" else probe_cpu)(quick=args.quick, date=today)
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
                     "read_bytes_per_s": result.read_bytes_per_s,
                     "call_overhead_s": result.call_overhead_s}, indent=2))
        return 0
    print(f"{result.name} ({result.device}, {result.threads} "
          f"{'threads' if device == 'cpu' else 'SMs'})")
    print(f"  memory read bandwidth  {result.read_bytes_per_s / 1e9:10.2f} GB/s")
    for dtype, rate in result.gemm_flops_per_s.items():
        print(f"  GEMM {dtype:<5}            {rate / 1e12:10.4f} TFLOP/s")
    print(f"  per-call overhead      {result.call_overhead_s * 1e6:10.2f} us")
    print(f"  memory                 {result.memory_bytes / 1e9:10.2f} GB")
    if path:
        print(f"saved custom GPU '{key}' to {path}; use it with `capacity plan --gpu {key}`")
    return 0
