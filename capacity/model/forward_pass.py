"""One forward pass of a continuous-batching engine (vLLM V1, SGLang, llama.cpp): what the
event model (`capacity.plan.events`) and the simulated endpoint (`capacity.sim.scheduler`)
both add to a step's prompt work and to every pass (docs/method.md, "Engine profiles").

- Efficiency per pass (F6c): a pass's prompt GEMMs run at `step_mfu(m)` with m the tokens the
  pass carries (decode tokens and prompt chunks; a prefill batch's prompt tokens), not at each
  prompt's own length. A prompt's prefill times are kept at the plateau MFU and the pass adds
  `mfu_part x (1 / step_mfu(m, mfu=1) - 1)` = `mfu_part x m_half / m`, `mfu_part` the time
  its MFU-bound FLOPs (the GEMMs; the attention too when attn_mfu is unset) take at the plateau.
- CPU offload (vLLM `--cpu-offload-gb X`, GiB per GPU): X GiB of weights live in host memory,
  streamed to the GPU over the host link on every forward pass: each pass adds
  X GiB / host-link GB/s, and the KV pool gains the X GiB the weights no longer hold.
"""

from __future__ import annotations

import math

from capacity.catalog.host_links import host_link
from capacity.errors import InputError
from capacity.model.prefill import step_mfu
from capacity.model.scenario import Scenario
from capacity.units import GB, GIB


def pass_slowdown(step_tokens: float, half_tokens: float) -> float:
    """How much longer a pass's MFU-bound prompt work takes than at the plateau MFU, as a
    share of its plateau time (dimensionless): 1 / step_mfu(m, mfu=1) - 1 = m_half / m.

    0 when `half_tokens` is 0 (a constant MFU) or the pass carries no tokens. Example: a pass
    of 512 tokens at m_half 256 runs its prompt GEMMs at 2/3 of the plateau: slowdown 0.5.
    Source: F6c (docs/method.md, "Engine profiles").
    """
    if half_tokens <= 0 or step_tokens <= 0:
        return 0.0
    return 1.0 / float(step_mfu(step_tokens, mfu=1.0, half_tokens=half_tokens)) - 1.0


def offload_ms(offload_gib: float, link_gb_s: float) -> float:
    """Time (ms) one forward pass spends streaming `offload_gib` GiB of offloaded weights over a
    host link of `link_gb_s` decimal GB/s: X x 2^30 / (B x 1e9) x 1e3.

    Example: 4 GiB over PCIe 5.0 x16 (63 GB/s) = 4 x 1.073741824 / 63 s = 68.2 ms.
    Source: vLLM `--cpu-offload-gb` (vllm/model_executor/models/utils.py, maybe_offload_to_cpu:
    the offloaded parameters are read from pinned host memory on every forward pass).
    """
    if not (math.isfinite(offload_gib) and offload_gib >= 0):
        raise InputError(f"CPU offload must be >= 0 GiB, got {offload_gib}")
    if not (math.isfinite(link_gb_s) and link_gb_s > 0):
        raise InputError(f"host-link bandwidth must be > 0 GB/s, got {link_gb_s}")
    return offload_gib * GIB / (link_gb_s * GB) * 1e3


def scenario_offload_ms(s: Scenario, offload_gib: float) -> float:
    """`offload_ms` over the scenario's GPU's host link (data/host_links.toml); InputError when
    the offload exceeds the weights one GPU holds (vLLM offloads weights only)."""
    if offload_gib * GIB > s.weights_per_gpu_gb * GB:
        raise InputError(f"--cpu-offload-gb {offload_gib:g} GiB exceeds the "
                         f"{s.weights_per_gpu_gb * GB / GIB:.2f} GiB of weights one GPU holds")
    return offload_ms(offload_gib, host_link(s.gpu.key).gb_s)
