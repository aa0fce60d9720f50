"""`capacity bench --find-max`: the highest load at which a percentile of TTFT and TPOT meets
the SLO, searched on a live endpoint (docs/bench.md "The highest load within the SLO").

Each probe is one level of a normal run: an open loop at a request rate (`by="rate"`, Poisson
or the workload's own arrival process, capped at the run's concurrency) or a closed loop at a
concurrency (`by="concurrency"`), of the run's `--requests`. A probe passes when at most
`max_failed_share` of its requests failed and the `pct` percentile (linear interpolation, as
every percentile of the bench) of TTFT and of TPOT over its successful requests is within the
targets; a failed request counts against the SLO, so a probe of failures never passes.

The search: bracketing from `start` (doubling while probes pass, halving while they fail)
until one load passes and a higher one fails, then bisection of that bracket until it is
within `tolerance` (hi / lo - 1; concurrencies: adjacent whole numbers). It stops early when
the next probe would pass `max_seconds` (judged by the longest probe so far) or
`max_requests`, and says why. The answer is the highest load that passed (0 when none did)
with its bracket [highest passing, lowest failing].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from capacity.bench.metrics import RequestRecord
from capacity.errors import InputError

FindMaxBy = Literal["rate", "concurrency"]
MIN_RATE_RPS = 0.001
"""The lowest rate probed, requests/s: below it the search says nothing passed."""
MIN_PROBE_REQUESTS = 30
"""Fewest requests of a rate probe."""
MAX_PROBES = 64
"""Most probes of one search (the bracket halves each time, so 64 is never reached)."""


@dataclass(frozen=True, kw_only=True)
class FindMaxConfig:
    """What `--find-max` searches and the bounds of its search."""

    by: FindMaxBy = "rate"
    slo_ttft_ms: float
    """TTFT target at the percentile, ms."""
    slo_tpot_ms: float
    """TPOT target at the percentile, ms."""
    pct: float = 90.0
    """The percentile of TTFT and TPOT that must meet the targets, 1..100."""
    start: float = 1.0
    """First load probed: requests/s (`rate`) or requests in flight (`concurrency`)."""
    tolerance: float = 0.05
    """Bisection stops when the bracket's hi / lo - 1 is within it."""
    max_seconds: float = 600.0
    """Wall-time bound of the search, s."""
    max_requests: int = 20_000
    """Bound on the requests sent by every probe together."""
    max_failed_share: float = 0.01
    """Largest share of failed requests a passing probe may have."""
    probe_seconds: float = 10.0
    """A rate probe sends rate x this many requests (at least `MIN_PROBE_REQUESTS`, at most
    the run's `--requests`), so probes at a low rate do not take minutes."""

    def validate(self) -> None:
        for name, v in (("--slo-ttft-ms", self.slo_ttft_ms), ("--slo-tpot-ms", self.slo_tpot_ms),
                        ("--find-max-start", self.start), ("--max-seconds", self.max_seconds)):
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"--find-max needs {name} > 0, got {v}")
        if not 1 <= self.pct <= 100:
            raise InputError(f"--slo-pct must be in 1..100, got {self.pct}")
        if not 0.001 <= self.tolerance <= 1:
            raise InputError(f"--find-max-tolerance must be in 0.001..1, got {self.tolerance}")
        if self.by == "concurrency" and self.start != math.floor(self.start):
            raise InputError(f"--find-max-start must be a whole number of requests with "
                             f"--find-max-by concurrency, got {self.start:g}")
        if not (math.isfinite(self.probe_seconds) and self.probe_seconds > 0):
            raise InputError(f"--probe-seconds must be > 0, got {self.probe_seconds}")
        if self.max_requests < 1:
            raise InputError(f"--max-requests must be >= 1, got {self.max_requests}")


def probe_requests(fm: FindMaxConfig, load: float, requests: int) -> int:
    """Requests of a probe at `load`: the run's `requests` for a concurrency, and for a rate
    `load` x `probe_seconds` within [MIN_PROBE_REQUESTS, requests]."""
    if fm.by == "concurrency":
        return requests
    return max(min(requests, MIN_PROBE_REQUESTS), min(requests, math.ceil(load * fm.probe_seconds)))


@dataclass(frozen=True, kw_only=True)
class Probe:
    """One probe: its load and what its requests measured."""

    load: float
    """Requests/s or requests in flight."""
    requests: int
    failed: int
    ttft_pct_ms: float | None
    """TTFT at the percentile over the successful requests, ms (None: none succeeded)."""
    tpot_pct_ms: float | None
    passed: bool
    duration_s: float
    """Wall time the probe took, s."""


def judge(records: Sequence[RequestRecord], fm: FindMaxConfig, *, load: float,
          duration_s: float) -> Probe:
    """A probe's verdict from its requests (see the module docstring)."""
    ok = [r for r in records if r.success]
    failed = len(records) - len(ok)

    def q(xs: list[float]) -> float | None:
        return float(np.percentile(xs, fm.pct)) if xs else None

    ttft = q([r.ttft_ms for r in ok if r.ttft_ms is not None])
    tpot = q([r.tpot_ms for r in ok if r.tpot_ms is not None])
    passed = (bool(records) and failed <= fm.max_failed_share * len(records)
              and ttft is not None and ttft <= fm.slo_ttft_ms
              and (tpot is None or tpot <= fm.slo_tpot_ms))
    return Probe(load=load, requests=len(records), failed=failed, ttft_pct_ms=ttft,
                 tpot_pct_ms=tpot, passed=passed, duration_s=duration_s)


@dataclass(frozen=True, kw_only=True)
class FindMaxResult:
    """The answer of a search, as stored in meta.json's `find_max`."""

    by: FindMaxBy
    max_load: float
    """The highest load that met the SLO (0: none did), requests/s or requests in flight."""
    bracket: tuple[float, float | None]
    """(highest passing load, lowest failing load; None when none failed)."""
    converged: bool
    """True when the bracket is within the tolerance; else `stopped` says why it ended."""
    stopped: str
    probes: tuple[Probe, ...]
    elapsed_s: float

    def meta(self, fm: FindMaxConfig) -> dict[str, Any]:
        """meta.json's `find_max` entry."""
        return {"by": self.by, "max_load": self.max_load, "unit": _unit(self.by),
                "bracket": list(self.bracket), "converged": self.converged,
                "stopped": self.stopped, "elapsed_s": self.elapsed_s, "pct": fm.pct,
                "slo_ttft_ms": fm.slo_ttft_ms, "slo_tpot_ms": fm.slo_tpot_ms,
                "tolerance": fm.tolerance, "max_seconds": fm.max_seconds,
                "max_requests": fm.max_requests, "probe_seconds": fm.probe_seconds,
                "probes": [{"load": p.load, "requests": p.requests, "failed": p.failed,
                            "ttft_pct_ms": p.ttft_pct_ms, "tpot_pct_ms": p.tpot_pct_ms,
                            "passed": p.passed, "duration_s": p.duration_s}
                           for p in self.probes]}


def _unit(by: FindMaxBy) -> str:
    return "requests/s" if by == "rate" else "requests in flight"


class Search:
    """The bracketing-then-bisection state: `next_load()` says what to probe (None: done),
    `add(probe)` records its verdict."""

    def __init__(self, fm: FindMaxConfig, *, requests_for: Callable[[float], int]) -> None:
        self.fm = fm
        self.requests_for = requests_for
        self.probes: list[Probe] = []
        self.lo: float | None = None
        self.hi: float | None = None
        self.stopped = ""

    def _converged(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        if self.fm.by == "concurrency" and self.hi - self.lo <= 1:
            return True
        return self.hi / self.lo - 1.0 <= self.fm.tolerance

    def _candidate(self) -> float | None:
        fm = self.fm
        if not self.probes:
            return fm.start
        if self._converged():
            return None
        if self.lo is None:
            assert self.hi is not None
            x = self.hi / 2
            if fm.by == "concurrency":
                x = math.floor(x)
                return x if x >= 1 else None
            return x if x >= MIN_RATE_RPS else None
        if self.hi is None:
            return self.lo * 2
        mid = (self.lo + self.hi) / 2
        return float(math.floor(mid)) if fm.by == "concurrency" else mid

    def next_load(self, elapsed_s: float) -> float | None:
        """The next load to probe, or None (then `stopped` says why)."""
        x = self._candidate()
        if x is None:
            self.stopped = self.stopped or ("converged" if self._converged() else
                                            "no load passed down to the lowest probed")
            return None
        if len(self.probes) >= MAX_PROBES:
            self.stopped = f"{MAX_PROBES} probes"
            return None
        sent = sum(p.requests for p in self.probes)
        if sent + self.requests_for(x) > self.fm.max_requests:
            self.stopped = f"--max-requests {self.fm.max_requests} reached"
            return None
        longest = max((p.duration_s for p in self.probes), default=0.0)
        if self.probes and elapsed_s + longest > self.fm.max_seconds:
            self.stopped = f"--max-seconds {self.fm.max_seconds:g} reached"
            return None
        return x

    def add(self, probe: Probe) -> None:
        self.probes.append(probe)
        if probe.passed:
            self.lo = probe.load if self.lo is None else max(self.lo, probe.load)
        else:
            self.hi = probe.load if self.hi is None else min(self.hi, probe.load)

    def result(self, elapsed_s: float) -> FindMaxResult:
        return FindMaxResult(by=self.fm.by, max_load=self.lo or 0.0,
                             bracket=(self.lo or 0.0, self.hi), converged=self._converged(),
                             stopped=self.stopped or "stopped", probes=tuple(self.probes),
                             elapsed_s=elapsed_s)


def describe(res: FindMaxResult, fm: FindMaxConfig) -> str:
    """The answer in one line, for the CLI."""
    unit = _unit(res.by)
    hi = f"{res.bracket[1]:.4g}" if res.bracket[1] is not None else "none failed"
    return (f"highest load within the SLO (p{fm.pct:g} TTFT <= {fm.slo_ttft_ms:g} ms, TPOT <= "
            f"{fm.slo_tpot_ms:g} ms): {res.max_load:.4g} {unit}, bracket [{res.bracket[0]:.4g}, "
            f"{hi}], {len(res.probes)} probes in {res.elapsed_s:.1f} s ({res.stopped})")
