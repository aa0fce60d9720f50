"""The device's ceilings: the fastest dense GEMM measured on each GPU
(data/matmul_ceilings.toml), as a share of its spec-sheet TFLOP/s, and, where measured, its
fastest device copy, as a share of its spec-sheet bandwidth (`bandwidth_ceiling`).

A data-centre GPU's peak TFLOP/s is not reached by any real GEMM: a brute-force search of
shapes finds the maximum achievable matmul TFLOP/s (MAMF), 51-87 % of the peak on those the
file lists (the GeForce RTX 4090 and 3090 reach theirs, their cards boosting above the
reference clock: the file holds the spec sheet, 1). A fitted share of peak TFLOP/s (eff, MFU,
attention MFU) above MAMF / spec is not physics but a trade against another knob, so
`capacity.fit.calibration` keeps those knobs at or below it (issue 25's "knobs are not
physical"; docs/calibration.md). A GPU the file does not
list has no ceiling but the spec sheet (1). The same holds for bandwidth: a decode step reads
its weights and KV no faster than the device copies memory, so a fitted `eta_bw` or `eta_kv`
stays at or below the measured copy over the spec sheet where the file has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Final

from capacity import workspace
from capacity.catalog.custom import is_custom
from capacity.catalog.loader import Gpu
from capacity.errors import CatalogError
from capacity.untrusted import loads_data_toml, read_utf8

MATMUL_FILE = "matmul_ceilings.toml"


@dataclass(frozen=True, kw_only=True)
class MatmulCeiling:
    """One GPU's measured MAMF (dense TFLOP/s) with bf16 inputs and, where measured, fp8, and
    its fastest device-to-device copy (GB/s, bytes read + written) where measured."""

    gpu: str
    bf16_tflops: float
    fp8_tflops: float | None
    source: str
    copy_gb_s: float | None = None


def parse_matmul_ceilings(text: str, where: str = MATMUL_FILE) -> dict[str, MatmulCeiling]:
    """Every table of a matmul-ceilings file by GPU key; CatalogError naming the bad table."""
    data = loads_data_toml(text, where)
    out: dict[str, MatmulCeiling] = {}
    for key, raw in data.items():
        try:
            extra = set(raw) - {"bf16_tflops", "fp8_tflops", "copy_gb_s", "source"}
            if extra:
                raise ValueError(f"unknown field {sorted(extra)[0]!r}")
            fp8, copy = raw.get("fp8_tflops"), raw.get("copy_gb_s")
            row = MatmulCeiling(gpu=key, bf16_tflops=float(raw["bf16_tflops"]),
                                fp8_tflops=None if fp8 is None else float(fp8),
                                source=str(raw["source"]),
                                copy_gb_s=None if copy is None else float(copy))
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"{where} [{key}]: {exc!r} (needs bf16_tflops, source; "
                               "fp8_tflops, copy_gb_s optional)") from None
        for v in (row.bf16_tflops, row.fp8_tflops, row.copy_gb_s):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise CatalogError(f"{where} [{key}]: TFLOP/s and GB/s must be finite and > 0")
        if not row.source.strip():
            raise CatalogError(f"{where} [{key}]: a measured ceiling needs its source")
        out[key] = row
    return out


@cache
def _ceilings(path: Path) -> dict[str, MatmulCeiling]:
    return parse_matmul_ceilings(read_utf8(path), str(path))


def measured_matmul(gpu_key: str) -> MatmulCeiling | None:
    """The GPU's measured MAMF (the catalog folder's file when it has one, else the bundled
    one); None for a GPU the file does not list."""
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / MATMUL_FILE
        if path.is_file():
            return _ceilings(path).get(gpu_key)
    return None


def matmul_ceiling(gpu: Gpu, compute_dtype: str) -> float | None:
    """The share of `gpu.tflops_for(compute_dtype)` the GPU's fastest measured GEMM reaches
    (dimensionless, 0-1]: MAMF / spec sheet for the precision the GEMMs run in (fp8 where the
    GPU has fp8, else bf16). None where nothing is measured for that precision (int8, a GPU the
    file lacks, fp8 without an fp8 figure), for a custom GPU entry (its figures are its
    author's, not the card the file measured, even under a bundled key) and where the file's
    figure is above the entry's spec sheet (a measurement of another card: no bound rather
    than a wrong one; the bundled file's consistency is tested). Example: H100 SXM bf16
    794.5 / 989 = 0.803; fp8 1402.6 / 1979 = 0.709. An fp4 GEMM on a GPU with FP4 tensor
    cores is not measured (None); without them it runs in bf16 (W4A16) and takes that share."""
    if (compute_dtype == "int8" and gpu.int8_tops) or (compute_dtype == "fp4" and gpu.fp4_tflops):
        return None
    fp8 = compute_dtype == "fp8" and bool(gpu.fp8_tflops)
    return _share(gpu.key, gpu.path, fp8, gpu.tflops_for("fp8" if fp8 else "bf16"),
                  str(workspace.catalog_dir()))


@lru_cache(maxsize=1024)
def _share(key: str, path: str, fp8: bool, peak: float, folder: str) -> float | None:
    """`matmul_ceiling` of one GPU entry and precision, kept per catalog folder (`folder`):
    the planner asks for every GPU, TP and weight format it searches, and `is_custom`
    resolves paths on the disk (about 0.1 ms a call)."""
    row = measured_matmul(key)
    if row is None or is_custom(path):
        return None
    measured = row.fp8_tflops if fp8 else row.bf16_tflops
    if measured is None or measured > peak:
        return None
    return measured / peak


def bandwidth_ceiling(gpu: Gpu) -> float | None:
    """The share of `gpu.bandwidth_gb_s` its fastest measured device copy reaches
    (dimensionless, 0-1]: copy_gb_s / spec sheet. None where the file has no copy figure for
    the GPU, for a custom GPU entry, and where the figure is above the entry's spec sheet (as
    `matmul_ceiling`). Example: H200 SXM 4266.0 / 4800 = 0.889."""
    return _copy_share(gpu.key, gpu.path, gpu.bandwidth_gb_s, str(workspace.catalog_dir()))


@lru_cache(maxsize=256)
def _copy_share(key: str, path: str, spec_gb_s: float, folder: str) -> float | None:
    """`bandwidth_ceiling` of one GPU entry, kept per catalog folder (`folder`), as `_share`."""
    row = measured_matmul(key)
    if row is None or row.copy_gb_s is None or is_custom(path) or row.copy_gb_s > spec_gb_s:
        return None
    return row.copy_gb_s / spec_gb_s


UNMEASURED_CEILING: Final = 0.803
"""The matmul ceiling the typical basis assumes for a GPU or precision the file does not measure
(dimensionless share of the spec sheet): the median of the bundled file's bf16 shares below the
spec sheet, the data-centre GPUs' (A100 SXM 0.869 twice, A100 PCIe 0.811, H100 and H200 SXM
0.803, B200 0.776, GB200 0.729, MI300X 0.511: 0.803; the GeForce RTX 4090 and 3090, at their
spec sheets because their cards boost above the reference clock, left out); a test recomputes
it from the file and the catalog."""


def typical_ceiling(gpu: Gpu, compute_dtype: str) -> float:
    """The matmul ceiling a typical basis' prefill plateau and decode eff are shares of
    (dimensionless): `matmul_ceiling` where the GPU's fastest GEMM is measured for that
    precision; for fp8 measured only in bf16, the GPU's bf16 share up to `UNMEASURED_CEILING`
    (`FP8_TRACKS_BF16`); for fp4 on FP4 tensor cores, the FP8 GEMM's TFLOP/s over the FP4 peak
    (`FP4_AT_FP8_RATE`); else `UNMEASURED_CEILING` (and fp4 without FP4 tensor cores runs in
    bf16). Examples: H100 SXM bf16 0.803, fp8 0.709; MI300X bf16 0.511, fp8 (not measured)
    0.511; an RTX 4090 bf16 1 (its GEMMs reach the spec sheet), fp8 (not measured) 0.803; B200
    fp4 0.763 x 4,500 / 9,000 = 0.381."""
    got = matmul_ceiling(gpu, compute_dtype)
    if got is not None:
        return got
    if compute_dtype == "fp4" and gpu.fp4_tflops:   # `FP4_AT_FP8_RATE`
        return typical_ceiling(gpu, "fp8") * gpu.tflops_for("fp8") / gpu.fp4_tflops
    if compute_dtype in ("fp8", "fp4"):
        bf16 = matmul_ceiling(gpu, "bf16")
        if bf16 is not None:
            return min(bf16, UNMEASURED_CEILING)
    return UNMEASURED_CEILING


FP8_TRACKS_BF16: Final = (
    "an fp8 GEMM reaches about the share of its spec sheet that the same device's bf16 GEMM "
    "does: fp8 share / bf16 share on the seven accelerators the ml-engineering MAMF table "
    "measures in both (stas00/ml-engineering compute/accelerator/README.md, read 2026-12-06): "
    "H100 SXM 0.709 / 0.803 = 0.88, H200 0.734 / 0.803 = 0.91, GH200 0.776 / 0.838 = 0.93, "
    "B200 0.763 / 0.776 = 0.98, GB200 0.723 / 0.729 = 0.99, Gaudi 2 0.955 / 0.969 = 0.99, "
    "Gaudi 3 0.769 / 0.741 = 1.04 (median 0.98). So a GPU measured in bf16 alone takes its bf16 "
    "share for fp8, at most the median of the file's bf16 shares: a share above it comes from "
    "a consumer card boosting past its reference clock (the RTX 4090 and 3090), which says "
    "nothing of its fp8 path. Found by MLPerf's MI300X Llama-2-70B runs in fp8 "
    "(docs/accuracy.md, \"MLPerf Inference: audited capacity\"): at the median 0.803 the "
    "typical basis read their Offline capacity 44% too fast, at the MI300X's own 0.511 +2%.")
"""Why `typical_ceiling` gives an fp8 GEMM the GPU's bf16 share where only that is measured."""

FP4_AT_FP8_RATE: Final = (
    "in a serving stack an NVFP4 model's GEMMs run at about the FP8 GEMMs' TFLOP/s, not at "
    "twice them: TensorRT-LLM's performance overview (v1.0 docs; docs/accuracy.md, section "
    "\"TensorRT-LLM's performance overview\") measures Llama-3.3-70B in FP4 on one B200 and one "
    "GB200 and in FP8 on one H200 and two H100s, at the same ten lengths; the typical basis "
    "reads the FP8 Hopper tables at a median of -0% and -4%, the FP4 Blackwell ones at +55% and "
    "+38% with the FP4 peak at the FP8 GEMM's share of the spec sheet, and at +10% and -0% with "
    "the FP8 GEMM's TFLOP/s. InferenceX's FP4-over-FP8 ratio for the same model on B200 is "
    "1.13-1.35x at equal interactivity (the weights' bytes halve as well), and SGLang's "
    "cookbook serves Qwen3.6-27B slower in NVFP4 than in FP8 on a B200. The kernels themselves "
    "are faster (SGLang's GB200 post: NVFP4 GEMMs 'up to 1.9x' FP8's): the activations' "
    "quantization and the kernels around the GEMMs take the gain back. The spec sheet keeps "
    "the FP4 peak, so it stays an upper bound; the weights stay at 4.5 bits a weight.")
"""Why `typical_ceiling` gives an fp4 GEMM on FP4 tensor cores the FP8 GEMM's TFLOP/s."""


def typical_mfu(plateau_share: float, gpu: Gpu, compute_dtype: str) -> float:
    """A typical basis' prefill MFU plateau on `gpu` (share of its spec-sheet TFLOP/s, at most
    1): the basis' plateau as a share of the measured matmul ceiling (data/engines.toml's
    `mfu`) x `typical_ceiling`; the decode GEMMs' `eff` resolves the same way (the file
    states both as shares of the ceiling, `capacity.fit.typical.CEILING_SHARES`). Example:
    0.706 on an H100 bf16: 0.706 x 0.803 = 0.567; on an MI300X: 0.706 x 0.511 = 0.361."""
    return min(1.0, plateau_share * typical_ceiling(gpu, compute_dtype))


UNMEASURED_BANDWIDTH: Final = 0.888
"""The copy ceiling the typical basis assumes for a GPU the file does not measure
(dimensionless share of the spec-sheet bandwidth): the median of the bundled file's copy shares
(A100 40GB SXM 0.887, A100 80GB SXM 0.840, H100 SXM 0.921, H200 SXM 0.889, MI300X 0.825,
RTX 4090 0.915: 0.888); a test recomputes it from the file and the catalog."""


def typical_bandwidth_ceiling(gpu: Gpu) -> float:
    """The copy ceiling a typical basis' `eta_bw` is a share of (dimensionless):
    `bandwidth_ceiling` where the GPU's fastest copy is measured, else `UNMEASURED_BANDWIDTH`.
    Examples: H200 SXM 4266.0 / 4800 = 0.889; MI300X 0.825; B200 (not measured) 0.888."""
    got = bandwidth_ceiling(gpu)
    return UNMEASURED_BANDWIDTH if got is None else got


def typical_eta_bw(copy_share: float, gpu: Gpu) -> float:
    """A typical basis' decode read efficiency on `gpu` (share of its spec-sheet bandwidth, at
    most 1): the basis' `eta_bw` as a share of the GPU's copy ceiling (data/engines.toml states
    it so, as it states `mfu` and `eff` as shares of the matmul ceiling) x
    `typical_bandwidth_ceiling`. A decode step reads its weights and KV no faster than the GPU
    copies memory, and the GPUs' memory systems reach different shares of their spec sheets
    (an MI300X 0.825, an H100 0.921). Example: 1.0 on an H100 SXM: 3085.1 / 3350 = 0.921; on
    an MI300X: 0.825."""
    return min(1.0, copy_share * typical_bandwidth_ceiling(gpu))
