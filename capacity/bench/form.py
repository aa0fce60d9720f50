"""The Measure page's form: its arguments for `capacity bench` (`MeasureForm`), checked against the
page's own limits (`PAGE_LIMITS`) and turned into a `python -m capacity bench` command line
(`MeasureForm.argv`). The API key is never part of it (`capacity.bench.job.BenchJob.start`
passes it to the child through its environment only).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from capacity import workspace
from capacity.bench.config import MAX_PASSES, BenchLimits
from capacity.bench.guard import url_host
from capacity.bench.storage import check_label
from capacity.errors import InputError

PAGE_LIMITS = BenchLimits(concurrency=512, levels=16, requests=10_000, prompt_chars=1_000_000,
                          max_tokens=100_000, warmup=100, gpus=1_024, timeout_s=3_600.0,
                          prompt_chars_in_flight=64_000_000)
"""The Measure page's limits, lower than `capacity bench`'s (a shared deployment runs what its
users ask for): docs/reliability.md. Its concurrency, 512, is the largest level a calibration
plan asks for (`capacity.fit.sweep.LEVELS`; a test keeps the two together), so the page's
"Calibration sweep" preset runs every cell of the plan it fills in (issue 28)."""


@dataclass(frozen=True, kw_only=True)
class MeasureForm:
    """The Measure page's arguments for `capacity bench` (no API key: it is never stored)."""

    base_url: str
    model: str | None = None
    concurrency: tuple[int, ...] = (1, 4, 16)
    requests: int = 32
    prompt_chars: int = 1000
    max_tokens: int = 128
    label: str = "measure"
    endpoint: str = "chat"
    warmup: int = 1
    passes: int = 1
    """Passes through the levels, forward then backward (`capacity bench --passes`)."""
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    gpu: str | None = None
    gpus: int = 1
    gpu_price: float | None = None
    currency: str | None = None
    predict_model: str | None = None
    request_rate: float | None = None
    """Open loop: Poisson arrivals at this rate, requests/s, capped by each level's
    concurrency (`capacity bench --request-rate`); None: a closed loop of C clients."""
    timeout_s: float = 600.0
    workload: str | None = None
    """A preset of data/workloads.toml whose lengths, shared prefix and (open loop) bursts
    each request draws (`capacity bench --workload`); None: every prompt has `prompt_chars`."""
    out_dir: str = field(default_factory=lambda: str(workspace.bench_dir()))
    """Where the run is stored (default: the workspace's bench folder, docs/configuration.md)."""

    def validate(self) -> None:
        """InputError naming the first bad field."""
        url_host(self.base_url)
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise InputError("concurrency levels must be whole numbers >= 1, e.g. 1,4,16")
        for name, v in (("requests", self.requests), ("prompt chars", self.prompt_chars),
                        ("max tokens", self.max_tokens), ("GPUs", self.gpus)):
            if v < 1:
                raise InputError(f"{name} must be >= 1, got {v}")
        if self.warmup < 0:
            raise InputError(f"warm-up must be >= 0, got {self.warmup}")
        if not 1 <= self.passes <= min(MAX_PASSES, self.requests):
            raise InputError(f"passes must be between 1 and {min(MAX_PASSES, self.requests)} "
                             f"(at most {MAX_PASSES}, and no more than the requests), got "
                             f"{self.passes}")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise InputError(f"timeout must be > 0 s, got {self.timeout_s}")
        if self.request_rate is not None and not (math.isfinite(self.request_rate)
                                                  and self.request_rate > 0):
            raise InputError(f"request rate must be > 0 requests/s, got {self.request_rate}")
        PAGE_LIMITS.check(concurrency=self.concurrency, requests=self.requests,
                          prompt_chars=self.prompt_chars, max_tokens=self.max_tokens,
                          warmup=self.warmup, gpus=self.gpus, timeout_s=self.timeout_s,
                          request_rate=self.request_rate)
        check_label(self.label)
        if self.workload is not None:
            from capacity.model.traffic import preset

            preset(self.workload)  # InputError listing the presets

    def argv(self, python: str = sys.executable) -> list[str]:
        """The child's command line: neither the API key nor the base URL (which may carry a
        password) is part of it, both go through the child's environment
        (`capacity.bench.job`: $OPENAI_API_KEY and $CAPACITY_BENCH_BASE_URL), out of the
        process list every local user can read."""
        a = [python, "-m", "capacity", "bench",
             "--concurrency", ",".join(str(c) for c in self.concurrency),
             "--requests", str(self.requests), "--prompt-chars", str(self.prompt_chars),
             "--max-tokens", str(self.max_tokens), "--label", self.label,
             "--endpoint", self.endpoint, "--warmup", str(self.warmup),
             "--passes", str(self.passes),
             # one client process: the page's levels (512 streams at most) fit in one, and a
             # shared app server does not spawn a worker per CPU for each run (docs/bench.md)
             "--workers", "1",
             "--timeout", f"{self.timeout_s:g}", "--out", self.out_dir, "--gpus", str(self.gpus)]
        for flag, v in (("--model", self.model), ("--gpu", self.gpu),
                        ("--predict-model", self.predict_model), ("--currency", self.currency),
                        ("--workload", self.workload)):
            if v:
                a += [flag, v]
        for flag, x in (("--slo-ttft-ms", self.slo_ttft_ms), ("--slo-tpot-ms", self.slo_tpot_ms),
                        ("--gpu-price", self.gpu_price), ("--request-rate", self.request_rate)):
            if x is not None:
                a += [flag, f"{x:g}"]
        return a


def parse_levels(text: str) -> tuple[int, ...]:
    """'1, 4,16' -> (1, 4, 16); InputError naming the bad item."""
    out: list[int] = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        try:
            v = int(item)
        except ValueError:
            raise InputError(f"concurrency '{item}' is not a whole number: write e.g. 1,4,16"
                             ) from None
        if v < 1:
            raise InputError(f"concurrency {v} must be >= 1")
        out.append(v)
    if not out:
        raise InputError("give at least one concurrency level, e.g. 1,4,16")
    return tuple(out)


MAX_PROMPT_LENGTHS = 8
"""Prompt lengths one Measure job runs at most (one `capacity bench` run each)."""


def parse_prompt_chars(text: str) -> tuple[int, ...]:
    """'1000, 8000' -> (1000, 8000), each once in the order given; InputError naming the bad
    item, or when there are none or more than MAX_PROMPT_LENGTHS."""
    out: list[int] = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        try:
            v = int(item)
        except ValueError:
            raise InputError(f"prompt length '{item[:40]}' is not a whole number of characters: "
                             "write e.g. 1000,8000") from None
        if v < 1:
            raise InputError(f"prompt length {v} must be >= 1 character")
        out.append(v)
    out = list(dict.fromkeys(out))
    if not out:
        raise InputError("give at least one prompt length in characters, e.g. 1000,8000")
    if len(out) > MAX_PROMPT_LENGTHS:
        raise InputError(f"{len(out)} prompt lengths is more than the limit of "
                         f"{MAX_PROMPT_LENGTHS} per job (docs/reliability.md)")
    return tuple(out)


def per_sweep(form: MeasureForm, sweeps: Sequence[tuple[int, Sequence[int]]]
              ) -> tuple[MeasureForm, ...]:
    """One form per (prompt characters, its own concurrency levels), run one after the other
    and labelled as `per_prompt` labels them: a calibration plan's sweeps
    (`capacity.fit.sweep.MeasurementPlan.sweeps`), where each prompt length has its own levels,
    so the job measures exactly the plan's cells, not every level at every length."""
    if not sweeps:
        raise InputError("nothing to measure: give at least one prompt length")
    if len(sweeps) > MAX_PROMPT_LENGTHS:
        raise InputError(f"{len(sweeps)} prompt lengths is more than the limit of "
                         f"{MAX_PROMPT_LENGTHS} per job (docs/reliability.md)")
    return tuple(replace(f, concurrency=tuple(levels))
                 for f, (_, levels) in zip(per_prompt(form, [c for c, _ in sweeps]), sweeps,
                                           strict=True))


def per_prompt(form: MeasureForm, prompt_chars: Sequence[int]) -> tuple[MeasureForm, ...]:
    """One form per prompt length, run one after the other: with one length the form as it is
    (its label unchanged), with several each labelled '<label>-p<chars>' so that every length
    is its own run (Results can show and fit them together)."""
    if len(prompt_chars) == 1:
        return (replace(form, prompt_chars=prompt_chars[0]),)
    return tuple(replace(form, prompt_chars=c, label=f"{form.label}-p{c}") for c in prompt_chars)
