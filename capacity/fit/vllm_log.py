"""Read a pasted vLLM startup log and reconcile it, term by term, with the prediction
(a feature no peer tool has, docs/method.md).

vLLM logs how it split the GPU's memory at startup; the phrasing changed across versions:
- v0.6 (V0 engine): `Loading model weights took 14.9888 GB` (GiB in fact), then
  `Memory profiling results: total_gpu_memory=23.58GiB ... peak_torch_memory=17.06GiB
  non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90`,
  `# GPU blocks: 1952, # CPU blocks: 2048`,
  `Maximum concurrency for 20000 tokens per request: 1.56x`;
- v0.7 (V0): `the current vLLM instance can use total_gpu_memory (23.65GiB) x
  gpu_memory_utilization (0.90) = 21.28GiB` / `model weights take 14.99GiB; non_torch_memory
  takes 0.12GiB; PyTorch activation peak memory takes 1.20GiB; the rest of the memory reserved
  for KV Cache is 4.97GiB.`;
- v0.8 to v0.10 (V1 engine): `Model loading took 14.99 GiB and 5.3 seconds`,
  `Available KV cache memory: 4.97 GiB`, `GPU KV cache size: 40,720 tokens`,
  `Maximum concurrency for 8,192 tokens per request: 4.97x`;
- v0.11 and later: `Model loading took 15.27 GiB memory and 25.3 seconds`, the same KV lines,
  prefixed with `(EngineCore_DP0 pid=...)`.
Every size vLLM logs is GiB (2^30 bytes), even where it prints "GB"; the planner's are GB
(1e9), so the reconciliation converts. Sources: vLLM issues #8031, #10517, PR #12569 (log
excerpts), vLLM `gpu_model_runner.py` (the "Model loading took" line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from capacity.errors import InputError
from capacity.model.kv import held_request_bytes
from capacity.model.scenario import Scenario, evaluate
from capacity.types import Note
from capacity.units import GB, GIB

_NUM = r"([0-9][0-9,]*\.?[0-9]*)"


@dataclass(frozen=True, kw_only=True)
class VllmStartup:
    """What a vLLM startup log says about memory (GiB as logged; None when absent)."""

    version: str | None = None
    total_gpu_gib: float | None = None
    gpu_memory_utilization: float | None = None
    weights_gib: float | None = None
    activation_peak_gib: float | None = None
    non_torch_gib: float | None = None
    peak_torch_gib: float | None = None
    cuda_graph_gib: float | None = None
    kv_cache_gib: float | None = None
    gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    block_size: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    found: tuple[str, ...] = ()

    @property
    def kv_tokens(self) -> int | None:
        """KV cache capacity in tokens: logged, or blocks x block size (16 by default)."""
        if self.kv_cache_tokens is not None:
            return self.kv_cache_tokens
        if self.gpu_blocks is not None:
            return self.gpu_blocks * (self.block_size or 16)
        return None

    @property
    def activation_gib(self) -> float | None:
        """Activation peak (GiB): logged (v0.7), or peak torch memory - weights (v0.6)."""
        if self.activation_peak_gib is not None:
            return self.activation_peak_gib
        if self.peak_torch_gib is not None and self.weights_gib is not None:
            return max(0.0, self.peak_torch_gib - self.weights_gib)
        return None

    @property
    def runtime_overhead_gib(self) -> float | None:
        """Activation peak + non-torch memory where the V0 engine logs them (GiB). CUDA graphs
        are captured after the KV cache is sized, so they are not part of it."""
        parts = [v for v in (self.activation_gib, self.non_torch_gib) if v is not None]
        return sum(parts) if parts else None


def _f(text: str) -> float:
    return float(text.replace(",", ""))


_PATTERNS: tuple[tuple[str, str], ...] = (
    ("version", r"vLLM API server version ([0-9][\w.+-]*)"),
    ("version", r"\bversion ([0-9]+\.[0-9]+\.[0-9][\w.+-]*)"),
    ("weights_gib", r"Loading model weights took " + _NUM + r" ?GB"),
    ("weights_gib", r"Model loading took " + _NUM + r" ?GiB"),
    ("weights_gib", r"model weights take " + _NUM + r" ?GiB"),
    ("total_gpu_gib", r"total_gpu_memory[=( ]+" + _NUM + r" ?GiB"),
    ("gpu_memory_utilization", r"gpu_memory_utilization[=( ]+" + _NUM),
    ("gpu_memory_utilization", r"gpu_memory_utilization['\"]?: ?" + _NUM),
    ("activation_peak_gib", r"PyTorch activation peak memory takes " + _NUM + r" ?GiB"),
    ("peak_torch_gib", r"peak_torch_memory=" + _NUM + r" ?GiB"),
    ("non_torch_gib", r"non_torch_memory(?:=| takes )" + _NUM + r" ?GiB"),
    ("cuda_graph_gib", r"Graph capturing finished in [0-9.]+ secs?, took " + _NUM + r" ?GiB"),
    ("kv_cache_gib", r"Available KV cache memory: " + _NUM + r" ?GiB"),
    ("kv_cache_gib", r"kv_cache_size=" + _NUM + r" ?GiB"),
    ("kv_cache_gib", r"the rest of the memory reserved for KV Cache is " + _NUM + r" ?GiB"),
    ("gpu_blocks", r"# (?:GPU|cuda|CUDA) blocks: " + _NUM),
    ("gpu_blocks", r"num_gpu_blocks=" + _NUM),
    ("kv_cache_tokens", r"GPU KV cache size: " + _NUM + r" tokens"),
    ("block_size", r"[Bb]lock size (?:is set to )?" + _NUM),
    ("block_size", r"block_size['\"]?[=:] ?" + _NUM),
    ("max_concurrency", r"Maximum concurrency for " + _NUM + r" tokens per request: "
     + _NUM + r"x"),
)


def parse_vllm_log(text: str) -> VllmStartup:
    """Every memory figure the log states (the last occurrence wins: a restarted engine logs
    again). InputError when none is found."""
    values: dict[str, float | int | str] = {}
    found: list[str] = []
    for field_name, pattern in _PATTERNS:
        if field_name in values and field_name != "max_concurrency":
            continue
        matches = list(re.finditer(pattern, text))
        if not matches:
            continue
        m = matches[-1]
        if field_name == "version":
            values["version"] = m.group(1)
        elif field_name == "max_concurrency":
            values["max_concurrency_tokens"] = int(_f(m.group(1)))
            values["max_concurrency"] = _f(m.group(2))
        elif field_name in ("gpu_blocks", "kv_cache_tokens", "block_size"):
            values[field_name] = int(_f(m.group(1)))
        else:
            values[field_name] = _f(m.group(1))
        found.append(field_name)
    if not (set(values) - {"version"}):
        raise InputError("no vLLM memory lines found in the pasted log; paste the startup "
                         "log up to 'Maximum concurrency for N tokens per request' (lines "
                         "such as 'Model loading took', 'Available KV cache memory', "
                         "'GPU KV cache size')")
    return VllmStartup(found=tuple(dict.fromkeys(found)), **values)  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class Term:
    """One reconciled term: logged vs predicted, the difference and its likely cause."""

    name: str
    unit: str
    logged: float
    predicted: float
    cause: str

    @property
    def difference(self) -> float:
        """predicted - logged, in `unit`."""
        return self.predicted - self.logged

    @property
    def ratio(self) -> float:
        """predicted / logged (1.0 = agreement)."""
        return self.predicted / self.logged if self.logged else float("inf")


TOLERANCE = 0.05
"""Terms within 5% are called consistent."""


def _cause(ok: bool, text: str) -> str:
    return Note("consistent (within 5%)", code="vllm_consistent") if ok else text


def _n(text: str, code: str, **params: str | int | float) -> Note:
    """A term's name or cause: English, with a code for the page's language (`Note`)."""
    return Note(text, code="vllm_" + code, **params)


def reconcile(log: VllmStartup, scenario: Scenario) -> tuple[Scenario, list[Term]]:
    """Compare each logged term with the prediction for the same settings: the log's
    gpu_memory_utilization and its 'tokens per request' as the context. Returns the scenario
    actually compared (so a page can show its settings) and the terms, in GB (1e9 bytes)."""
    changes: dict[str, object] = {}
    if log.gpu_memory_utilization is not None:
        changes["util"] = log.gpu_memory_utilization
    if log.max_concurrency_tokens is not None:
        changes["context_tokens"] = log.max_concurrency_tokens
        changes["prompt_tokens"] = None
    if log.block_size is not None:
        changes["block_size"] = log.block_size
    s = scenario.with_(**changes)
    ev = evaluate(s, [1])
    v = ev.vram
    terms: list[Term] = []

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= TOLERANCE * max(abs(a), abs(b), 1e-12)

    if log.total_gpu_gib is not None:
        logged = log.total_gpu_gib * GIB / GB
        terms.append(Term(name=_n("GPU memory", "gpu_memory"), unit="GB", logged=logged, predicted=s.vram_gb,
                          cause=_cause(close(logged, s.vram_gb),
                                       _n("the driver's figure differs from the catalog's "
                                          "(marketed 'GB' are often GiB; some is reserved): "
                                          "set --vram to the logged figure",
                                          "cause_gpu_memory"))))
    if log.weights_gib is not None:
        logged = log.weights_gib * GIB / GB
        terms.append(Term(
            name=_n("weights per GPU", "weights"), unit="GB", logged=logged, predicted=s.weights_per_gpu_gb,
            cause=_cause(close(logged, s.weights_per_gpu_gb),
                         _n("the served checkpoint differs from the catalog variant (another "
                            "weight format, quantization scales, tied or untied embeddings, a "
                            "vision tower): set --weights-gb to the logged figure",
                            "cause_weights"))))
    if log.runtime_overhead_gib is not None:
        logged = log.runtime_overhead_gib * GIB / GB
        terms.append(Term(
            name=_n("runtime overhead (activation peak, non-torch)", "overhead"), unit="GB",
            logged=logged, predicted=s.overhead_gb + s.nccl_gb,
            cause=_cause(close(logged, s.overhead_gb + s.nccl_gb),
                         _n("runtime memory differs by engine version, max_num_batched_tokens "
                            "and CUDA graphs: set --overhead-gb to the logged figure",
                            "cause_overhead"))))
    elif log.weights_gib is not None and log.kv_cache_gib is not None:
        logged = (implied_overhead_gb(log, s) or 0.0)
        terms.append(Term(
            name=_n("runtime overhead (implied: VRAM x util - weights - KV)",
                    "overhead_implied"), unit="GB",
            logged=logged, predicted=s.overhead_gb + s.nccl_gb,
            cause=_cause(close(logged, s.overhead_gb + s.nccl_gb),
                         _n("runtime memory (activations at max_num_batched_tokens, non-torch "
                            "allocations) differs by engine version: set --overhead-gb to the "
                            "implied figure", "cause_overhead_implied"))))
    if log.kv_cache_gib is not None:
        logged = log.kv_cache_gib * GIB / GB
        predicted = max(0.0, v.kv_budget_bytes / GB)
        terms.append(Term(
            name=_n("KV cache memory", "kv_memory"), unit="GB", logged=logged, predicted=predicted,
            cause=_cause(close(logged, predicted),
                         _n("follows from the terms above: VRAM x util - weights - overhead; "
                            "check the one that disagrees", "cause_kv_memory"))))
    kv_tok = ev.kv_token.bytes_per_token
    if log.kv_tokens is not None and kv_tok > 0:
        predicted = float(max(0.0, v.kv_budget_bytes) // kv_tok)  # whole tokens, as vLLM
        logged_t = float(log.kv_tokens)
        cause: str = _n("KV bytes per token differ from the model: check --kv-dtype (fp8 "
                        "halves it)", "cause_kv_tokens")
        if log.kv_cache_gib is not None:
            implied = log.kv_cache_gib * GIB / logged_t
            if close(implied, kv_tok):
                cause = _n(f"KV bytes per token agree ({kv_tok / 1024:.1f} KiB); the difference "
                           "follows from the KV cache memory above", "cause_kv_agree",
                           kib=kv_tok / 1024)
            else:
                cause = _n(f"{cause}; the log implies {implied / 1024:.1f} KiB per token, the "
                           f"model {kv_tok / 1024:.1f} KiB (hybrid and sliding-window layers "
                           "are sized per layer group by vLLM)", "cause_kv_implied",
                           implied=implied / 1024, model=kv_tok / 1024)
        terms.append(Term(name=_n("KV cache size", "kv_tokens"), unit="tokens", logged=logged_t,
                          predicted=predicted, cause=_cause(close(logged_t, predicted), cause)))
    if log.max_concurrency is not None:
        # in vLLM's pages: a hybrid model's states included (`held_request_bytes`)
        predicted = max(0.0, v.kv_budget_bytes) / float(np.asarray(held_request_bytes(
            s.model, ev.kv_request.context_tokens, s.kv_dtype, s.tp, s.block_size)).ravel()[0])
        terms.append(Term(
            name=_n(f"maximum concurrency at {log.max_concurrency_tokens} tokens", "max_conc",
                    tokens=log.max_concurrency_tokens or 0), unit="requests",
            logged=log.max_concurrency, predicted=predicted,
            cause=_cause(close(log.max_concurrency, predicted),
                         _n("follows from the KV cache size and KV per request; vLLM counts "
                            "requests of the full max_model_len, real ones are often shorter",
                            "cause_max_conc"))))
    if log.gpu_memory_utilization is not None and log.gpu_memory_utilization != scenario.util:
        terms.append(Term(name=_n("gpu_memory_utilization", "util"), unit="fraction",
                          logged=log.gpu_memory_utilization, predicted=scenario.util,
                          cause=_n("the server ran with another util; the terms above use "
                                   "the logged one", "cause_util")))
    return s, terms


def implied_overhead_gb(log: VllmStartup, scenario: Scenario) -> float | None:
    """Runtime overhead (GB) the log implies when it states no overhead line of its own:
    total x util - weights - KV cache, else None. The total is the logged one, else the
    catalog's driver-reported memory, else the scenario's VRAM."""
    if log.runtime_overhead_gib is not None:
        return log.runtime_overhead_gib * GIB / GB
    if None in (log.weights_gib, log.kv_cache_gib):
        return None
    if log.total_gpu_gib is not None:
        total = log.total_gpu_gib * GIB / GB
    elif scenario.gpu.memory_driver_gib is not None:
        total = scenario.gpu.memory_driver_gib * GIB / GB
    else:
        total = scenario.vram_gb
    util = log.gpu_memory_utilization or scenario.util
    assert log.weights_gib is not None and log.kv_cache_gib is not None
    return total * util - (log.weights_gib + log.kv_cache_gib) * GIB / GB
