"""Measure the device this runs on and describe it as a catalog GPU entry: a spec sheet that is
true for this machine (`capacity probe`; docs/accuracy.md, "Real engine").

- memory read bandwidth, bytes/s: the best of several passes of a matrix-vector product over a
  float32 matrix much larger than the caches (BLAS, every core: one read of the matrix per pass,
  as a decode step reads the weights) and of a single-threaded `sum`; on a CUDA GPU (torch
  installed), a device-to-device copy (read + write);
- dense GEMM rate, FLOP/s: n x n @ n x n at float32 and float16 (numpy; float16 has no BLAS
  kernel in numpy, so it is usually far slower) or bf16/fp16 on CUDA (torch): 2 n^3 / time;
- per-call overhead, s: the median time of a 1 x 1 product (numpy's dispatch on CPU, a kernel
  launch plus synchronize on CUDA).

The entry's `bf16_tflops` is the best GEMM rate measured at any dtype and `bandwidth_gb_s` the
best read bandwidth, so a prediction from it is an upper bound on what an engine reaches on
this machine; the source names the method and the date.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from capacity.units import GB

QUICK_BYTES = 64 * 2**20
"""Matrix streamed by a quick probe, bytes (64 MiB: beyond most last-level caches)."""
FULL_BYTES = 1024 * 2**20
QUICK_GEMM_N = 512
FULL_GEMM_N = 2048


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """What one probe measured, SI units in the names."""

    device: str
    """`cpu` or `cuda`."""
    name: str
    memory_bytes: float
    read_bytes_per_s: float
    gemm_flops_per_s: dict[str, float] = field(default_factory=dict)
    """Dense GEMM rate by dtype (`f32`, `f16`, `bf16`)."""
    call_overhead_s: float
    threads: int
    method: str
    date: str

    @property
    def best_flops_per_s(self) -> float:
        """The best GEMM rate over the dtypes measured, FLOP/s."""
        return max(self.gemm_flops_per_s.values())


def _best_time(fn: Callable[[], Any], repeats: int, sync: Callable[[], None] | None = None
               ) -> float:
    """Shortest wall time of `repeats` calls (after one warm-up call), s."""
    fn()
    if sync:
        sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        best = min(best, time.perf_counter() - t0)
    return best


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def cpu_memory_bytes() -> float:
    """Physical memory, bytes (sysconf; 0 where unknown)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0


def read_bandwidth(n_bytes: int, repeats: int = 5) -> float:
    """Memory read bandwidth, bytes/s: best of a BLAS matrix-vector product over an n_bytes
    float32 matrix (reads it once) and a single-threaded sum of it."""
    cols = 4096
    rows = max(1, n_bytes // (4 * cols))
    a = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    x = np.ones(cols, dtype=np.float32)
    size = float(a.nbytes)
    gemv = size / _best_time(lambda: a @ x, repeats)
    summed = size / _best_time(lambda: a.sum(), repeats)
    return max(gemv, summed)


def gemm_rate(n: int, dtype: Any, repeats: int = 3) -> float:
    """Dense n x n @ n x n rate at `dtype`, FLOP/s (2 n^3 per product)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    return 2.0 * n**3 / _best_time(lambda: a @ b, repeats)


def probe_cpu(*, quick: bool = False, date: str) -> ProbeResult:
    """Measure this machine's CPU with numpy (a few seconds when `quick`)."""
    n_bytes = QUICK_BYTES if quick else FULL_BYTES
    n = QUICK_GEMM_N if quick else FULL_GEMM_N
    rates = {"f32": gemm_rate(n, np.float32),
             "f16": gemm_rate(min(n, 256), np.float16, repeats=1 if quick else 2)}
    one = np.ones((1, 1), dtype=np.float32)
    overhead = _median_time(lambda: one @ one, 200)
    return ProbeResult(
        device="cpu", name=cpu_name(), memory_bytes=cpu_memory_bytes(),
        read_bytes_per_s=read_bandwidth(n_bytes), gemm_flops_per_s=rates,
        call_overhead_s=overhead, threads=os.cpu_count() or 1,
        method=(f"capacity probe (numpy {np.__version__}): read = best of BLAS GEMV and sum over "
                f"a {n_bytes / 2**20:.0f} MiB float32 matrix; GEMM = {n}x{n} f32 and "
                f"{min(n, 256)}x{min(n, 256)} f16 matmul, best of repeats"),
        date=date)


def cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def probe_cuda(*, quick: bool = False, date: str) -> ProbeResult:  # pragma: no cover - GPU
    """Measure GPU 0 with torch: device copy bandwidth, bf16/fp16 GEMM, launch overhead."""
    import torch

    dev = torch.device("cuda:0")
    props = torch.cuda.get_device_properties(dev)
    sync = torch.cuda.synchronize
    n_bytes = (256 if quick else 2048) * 2**20
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    copy = 2.0 * n_bytes / _best_time(lambda: dst.copy_(src), 10, sync)
    n = 4096 if quick else 8192
    rates: dict[str, float] = {}
    for label, dt in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        a = torch.randn((n, n), device=dev, dtype=dt)
        b = torch.randn((n, n), device=dev, dtype=dt)
        rates[label] = 2.0 * n**3 / _best_time(lambda: a @ b, 5, sync)  # noqa: B023
    tiny = torch.ones(1, device=dev)

    def launch() -> None:
        tiny.add_(0)
        sync()

    return ProbeResult(
        device="cuda", name=props.name, memory_bytes=float(props.total_memory),
        read_bytes_per_s=copy, gemm_flops_per_s=rates,
        call_overhead_s=_median_time(launch, 200), threads=props.multi_processor_count,
        method=(f"capacity probe (torch {torch.__version__}): bandwidth = device copy of "
                f"{n_bytes / 2**20:.0f} MiB (read + write); GEMM = {n}x{n} bf16/fp16"),
        date=date)


def gpu_table(result: ProbeResult, *, key: str, price_per_hour: float, currency: str,
              price_source: str) -> dict[str, Any]:
    """The custom GPU entry (the loader's format, data/gpus/*.toml) of a probe result."""
    rates = ", ".join(f"{k} {v / 1e12:.3g} TFLOP/s" for k, v in result.gemm_flops_per_s.items())
    return {
        "key": key, "name": f"{result.name} (probed)",
        "memory_gb": round(max(result.memory_bytes, GB) / GB, 2),
        "memory_type": "system RAM" if result.device == "cpu" else "device memory",
        "bandwidth_gb_s": round(result.read_bytes_per_s / GB, 3),
        "bf16_tflops": float(f"{result.best_flops_per_s / 1e12:.4g}"),
        "interconnect": "none (one device, probed alone)", "interconnect_kind": "pcie",
        "interconnect_gb_s": 1.0,
        "price_per_hour": price_per_hour, "currency": currency, "price_source": price_source,
        "price_as_of": result.date,
        "source": f"measured on this machine, {result.date}: {result.method}",
        "as_of": result.date,
        "notes": (f"{result.device}, {result.threads} {'threads' if result.device == 'cpu' else 'SMs'};"
                  f" GEMM {rates}; per-call overhead {result.call_overhead_s * 1e6:.1f} us; "
                  "bf16_tflops holds the best GEMM rate measured at any dtype, bandwidth the "
                  "best read: a prediction from this entry is an upper bound"),
    }
