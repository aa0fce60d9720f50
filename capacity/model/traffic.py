"""Workloads as customers have them: length distributions, arrival processes, shared prefixes.

F9 (`capacity.model.workload`) sizes for one prompt length, one output length and smooth Poisson
arrivals. A `Traffic` says what real traffic has instead (docs/method.md, "Workloads"):

- prompt and output lengths drawn from a distribution: fixed; lognormal from its mean and p90 (or
  its median and log-spread); empirical (resampled from observed lengths, e.g. a log's);
- arrivals: Poisson, or bursty with gamma inter-arrival times of a chosen coefficient of
  variation (CV 1 is Poisson; BurstGPT fits gamma inter-arrivals to its trace), at a rate, with
  an optional daily profile (24 hourly shares) whose busiest hour sets the peak rate;
- a shared prefix: a system prompt of `prefix_tokens` that a `prefix_share` of requests reuse
  (a prefix cache holds its KV once and skips its prefill), and multi-turn conversations whose
  earlier turns stay cached.

`Traffic.sample(n, seed)` draws `n` requests (arrival time, prompt, output and cached tokens),
seeded and deterministic: the event model (`capacity.plan.traffic_queue.simulate_traffic`) and the
simulated engine (`capacity.sim.virtual.run_virtual`) run the same draw, so tail latencies come
from sampling, not from means. Named presets live in `data/workloads.toml`, each with its source.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from capacity import workspace
from capacity.errors import InputError
from capacity.stats import normal_quantile
from capacity.types import FloatArray, IntArray
from capacity.untrusted import loads_toml

LENGTH_KINDS = ("fixed", "lognormal", "empirical")
ARRIVAL_KINDS = ("poisson", "gamma")
Z90 = normal_quantile(0.9)
"""The standard normal's 0.9 quantile, 1.2816 (lognormal p90 = exp(mu + Z90 sigma))."""
MAX_LENGTH_TOKENS = 2_000_000


def lognormal_from_mean_p90(mean_tokens: float, p90_tokens: float) -> tuple[float, float]:
    """(mu, sigma) of the lognormal with this mean and p90 (both tokens).

    mean = exp(mu + sigma^2 / 2) and p90 = exp(mu + z sigma), z = 1.2816, so
    sigma^2 / 2 - z sigma + ln(p90 / mean) = 0: sigma = z - sqrt(z^2 - 2 ln(p90 / mean)) (the
    smaller root, the one a p90 above the mean gives), mu = ln(mean) - sigma^2 / 2.
    A lognormal needs mean < p90 <= mean x exp(z^2 / 2) = 2.27 x mean.
    Source: docs/method.md, "Workloads". Mean 1000, p90 2000 -> sigma 0.7755, mu 6.6070.
    """
    if not (math.isfinite(mean_tokens) and mean_tokens > 0 and math.isfinite(p90_tokens)):
        raise InputError(f"lognormal length: mean must be > 0 tokens, got {mean_tokens}")
    ratio = p90_tokens / mean_tokens
    limit = math.exp(Z90 * Z90 / 2.0)
    if not 1.0 < ratio <= limit:
        raise InputError(f"lognormal length: p90 ({p90_tokens:g}) must lie above the mean "
                         f"({mean_tokens:g}) and at most {limit:.2f} x the mean; give an "
                         "empirical distribution for heavier tails")
    sigma = Z90 - math.sqrt(Z90 * Z90 - 2.0 * math.log(ratio))
    return math.log(mean_tokens) - sigma * sigma / 2.0, sigma


@dataclass(frozen=True, kw_only=True)
class LengthDist:
    """A token-length distribution (prompt or output), clipped to [min_tokens, max_tokens].

    `kind` "fixed": always `tokens`; "lognormal": exp(N(mu, sigma^2)) rounded (build it with
    `lognormal` from mean and p90, or from a median and sigma); "empirical": resampled from
    `values_tokens`.
    """

    kind: str = "fixed"
    tokens: int = 0
    mu: float = 0.0
    sigma: float = 0.0
    values_tokens: tuple[int, ...] = ()
    min_tokens: int = 1
    max_tokens: int = MAX_LENGTH_TOKENS

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise InputError(f"length distribution '{self.kind}': use one of "
                             f"{', '.join(LENGTH_KINDS)}")
        if not 1 <= self.min_tokens <= self.max_tokens:
            raise InputError(f"length bounds must satisfy 1 <= min <= max, got "
                             f"{self.min_tokens}..{self.max_tokens}")
        if self.kind == "fixed" and not (isinstance(self.tokens, int) and self.tokens >= 1):
            raise InputError(f"a fixed length must be a whole number >= 1 token, got {self.tokens}")
        if self.kind == "lognormal" and not (math.isfinite(self.mu) and math.isfinite(self.sigma)
                                             and self.sigma >= 0):
            raise InputError(f"lognormal length needs finite mu and sigma >= 0, got "
                             f"{self.mu}, {self.sigma}")
        if self.kind == "empirical" and (not self.values_tokens
                                         or min(self.values_tokens) < 1):
            raise InputError("an empirical length distribution needs at least one length, "
                             "each >= 1 token")

    @classmethod
    def fixed(cls, tokens: int) -> LengthDist:
        return cls(kind="fixed", tokens=int(tokens))

    @classmethod
    def lognormal(cls, *, mean_tokens: float | None = None, p90_tokens: float | None = None,
                  median_tokens: float | None = None, sigma: float | None = None,
                  max_tokens: int = MAX_LENGTH_TOKENS) -> LengthDist:
        """From (mean, p90), (median, sigma) or (mean, sigma): median = exp(mu),
        mean = exp(mu + sigma^2 / 2)."""
        if mean_tokens is not None and p90_tokens is not None:
            mu, s = lognormal_from_mean_p90(mean_tokens, p90_tokens)
        elif mean_tokens is not None and sigma is not None:
            if not (math.isfinite(mean_tokens) and mean_tokens > 0):
                raise InputError(f"lognormal mean must be > 0 tokens, got {mean_tokens}")
            mu, s = math.log(mean_tokens) - float(sigma) ** 2 / 2.0, float(sigma)
        elif median_tokens is not None and sigma is not None:
            if not (math.isfinite(median_tokens) and median_tokens > 0):
                raise InputError(f"lognormal median must be > 0 tokens, got {median_tokens}")
            mu, s = math.log(median_tokens), float(sigma)
        else:
            raise InputError("a lognormal length needs its mean and p90, or a median or mean and sigma")
        return cls(kind="lognormal", mu=mu, sigma=s, max_tokens=max_tokens)

    @classmethod
    def empirical(cls, values_tokens: npt.ArrayLike) -> LengthDist:
        v = np.asarray(values_tokens, dtype=np.int64).reshape(-1)
        return cls(kind="empirical", values_tokens=tuple(int(x) for x in v))

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        """`n` lengths (tokens), drawn from `rng`."""
        if self.kind == "fixed":
            x = np.full(n, self.tokens, dtype=np.float64)
        elif self.kind == "lognormal":
            x = np.rint(rng.lognormal(self.mu, self.sigma, size=n))
        else:
            x = rng.choice(np.asarray(self.values_tokens, dtype=np.float64), size=n)
        return np.clip(x, self.min_tokens, self.max_tokens).astype(np.int64)

    @property
    def mean_tokens(self) -> float:
        """The mean length (tokens; the lognormal's exp(mu + sigma^2 / 2), before clipping)."""
        if self.kind == "fixed":
            return float(self.tokens)
        if self.kind == "lognormal":
            return math.exp(self.mu + self.sigma ** 2 / 2.0)
        return float(np.mean(self.values_tokens))

    def quantile_tokens(self, q: float) -> float:
        """The q-quantile of the length (tokens)."""
        if self.kind == "fixed":
            return float(self.tokens)
        if self.kind == "lognormal":
            return math.exp(self.mu + normal_quantile(q) * self.sigma)
        return float(np.quantile(self.values_tokens, q))


@dataclass(frozen=True, kw_only=True)
class Arrivals:
    """Arrival process at `rate_per_s`: Poisson, or gamma inter-arrivals with CV `cv` (shape
    1 / cv^2; CV 1 is Poisson, CV > 1 is bursty)."""

    kind: str = "poisson"
    rate_per_s: float = 1.0
    cv: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise InputError(f"arrival process '{self.kind}': use one of {', '.join(ARRIVAL_KINDS)}")
        if not (math.isfinite(self.rate_per_s) and self.rate_per_s > 0):
            raise InputError(f"arrival rate must be > 0 requests/s, got {self.rate_per_s}")
        if not (math.isfinite(self.cv) and 0 < self.cv <= 20):
            raise InputError(f"burstiness CV must be in (0, 20], got {self.cv}")

    def gaps_ms(self, n: int, rng: np.random.Generator) -> FloatArray:
        """`n` inter-arrival gaps (ms): exponential, or gamma with mean 1/rate and this CV."""
        mean_ms = 1e3 / self.rate_per_s
        if self.kind == "poisson":
            return np.asarray(rng.exponential(mean_ms, size=n), dtype=np.float64)
        shape = 1.0 / (self.cv * self.cv)
        return np.asarray(rng.gamma(shape, mean_ms / shape, size=n), dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class DailyProfile:
    """Share of a day's requests in each hour 0..23 (sums to 1)."""

    hourly_shares: tuple[float, ...]

    def __post_init__(self) -> None:
        s = self.hourly_shares
        if len(s) != 24 or any(not (math.isfinite(x) and x >= 0) for x in s) or sum(s) <= 0:
            raise InputError("a daily profile needs 24 hourly shares >= 0 with a positive sum")

    @property
    def busiest_hour(self) -> int:
        return int(np.argmax(self.hourly_shares))

    @property
    def peak_share(self) -> float:
        """Share of the day's requests in the busiest hour."""
        return max(self.hourly_shares) / sum(self.hourly_shares)

    def peak_rate_per_s(self, requests_per_day: float) -> float:
        """Arrival rate in the busiest hour (req/s): requests per day x peak share / 3600 s.
        Source: F9 with a one-hour peak window (docs/method.md)."""
        return requests_per_day * self.peak_share / 3600.0


@dataclass(frozen=True, kw_only=True)
class TrafficSample:
    """Requests drawn from a Traffic, in arrival order (arrays of one length)."""

    arrival_ms: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    cached_tokens: IntArray
    """Leading prompt tokens whose KV a prefix cache already holds (0 = none)."""
    prefix_ids: IntArray
    """Which cached prefix a request reuses: -1 none, 0 the shared system prompt, 1 + k the
    history of conversation k (a cache keyed by it decides hits on its own)."""
    conversation_ids: IntArray
    """1 + k for every turn of conversation k (its context is the next turn's prefix), else -1."""

    @property
    def size(self) -> int:
        return int(self.arrival_ms.size)


@dataclass(frozen=True, kw_only=True)
class Traffic:
    """A workload description (see the module docstring).

    Prompt tokens of a request = `prefix_tokens` (the system prompt, when set) + the sampled
    prompt; `prefix_share` of requests reuse the one shared system prompt (cached after the first
    of them), the others carry a prefix of their own. With `turns` > 1 requests come in
    conversations of that many turns; turn k's prompt also holds every earlier turn (prompt and
    answer): the sample's `cached_tokens` is that history, which a cache holds only once the
    previous turn has finished (turn k arrives right after turn k-1, so under load it often has
    not): the event model (`simulate_traffic`) and the simulated engine's prefix cache check
    that at admission; the analytic path's moments take the sample as cached (optimistic).
    """

    prompt: LengthDist
    output: LengthDist
    arrivals: Arrivals = field(default_factory=Arrivals)
    prefix_tokens: int = 0
    prefix_share: float = 0.0
    turns: int = 1
    daily: DailyProfile | None = None
    name: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.prefix_tokens, int) and self.prefix_tokens >= 0):
            raise InputError(f"shared prefix must be >= 0 tokens, got {self.prefix_tokens}")
        if not (math.isfinite(self.prefix_share) and 0 <= self.prefix_share <= 1):
            raise InputError(f"prefix share is a fraction of requests in [0, 1], got "
                             f"{self.prefix_share}")
        if not (isinstance(self.turns, int) and 1 <= self.turns <= 1000):
            raise InputError(f"turns per conversation must be 1..1000, got {self.turns}")

    def with_rate(self, rate_per_s: float) -> Traffic:
        """The same traffic at another arrival rate."""
        return _replace(self, arrivals=Arrivals(kind=self.arrivals.kind, rate_per_s=rate_per_s,
                                                cv=self.arrivals.cv))

    def sample(self, n: int, seed: int = 0) -> TrafficSample:
        """Draw `n` requests (seeded): arrival times, then lengths, then conversations."""
        if not 1 <= n <= 10_000_000:
            raise InputError(f"sample 1..10,000,000 requests, got {n}")
        rng = np.random.default_rng(seed)
        arrival = np.cumsum(self.arrivals.gaps_ms(n, rng))
        new = self.prompt.sample(n, rng)
        out = self.output.sample(n, rng)
        shared = rng.random(n) < self.prefix_share if self.prefix_tokens else np.zeros(n, bool)
        prompt = new + self.prefix_tokens
        cached = np.where(shared, self.prefix_tokens, 0).astype(np.int64)
        ids = np.where(shared, 0, -1).astype(np.int64)
        conv = np.full(n, -1, dtype=np.int64)
        if self.turns > 1:
            # request i is turn i mod T of its conversation: it carries the earlier turns
            turn = np.arange(n) % self.turns
            history = np.zeros(n, dtype=np.int64)
            for i in range(n):
                if turn[i] > 0:
                    history[i] = prompt[i - 1] + out[i - 1]
                    prompt[i] = history[i] + new[i]
            cached = np.where(turn > 0, history, cached)
            conv = 1 + np.arange(n, dtype=np.int64) // self.turns
            ids = np.where(turn > 0, conv, ids)
        return TrafficSample(arrival_ms=np.asarray(arrival, dtype=np.float64),
                             prompt_tokens=prompt.astype(np.int64),
                             output_tokens=out.astype(np.int64),
                             cached_tokens=cached.astype(np.int64),
                             prefix_ids=ids.astype(np.int64), conversation_ids=conv)

    @property
    def mean_prompt_tokens(self) -> float:
        """Mean prompt tokens with the system prompt (single-turn; `sample` for conversations)."""
        return self.prompt.mean_tokens + self.prefix_tokens

    @property
    def mean_cached_tokens(self) -> float:
        """Mean cached prompt tokens per request from the shared system prompt."""
        return self.prefix_tokens * self.prefix_share


def _replace(t: Traffic, **changes: object) -> Traffic:
    return replace(t, **changes)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Presets (data/workloads.toml)


@dataclass(frozen=True, kw_only=True)
class Preset:
    """A named workload with its sources; `assumed` names the fields no source states."""

    key: str
    name: str
    traffic: Traffic
    sources: tuple[str, ...]
    assumed: tuple[str, ...]
    notes: str


def _length(d: dict[str, object], where: str) -> LengthDist:
    kind = str(d.get("kind", "fixed"))
    try:
        if kind == "fixed":
            return LengthDist.fixed(int(d["tokens"]))  # type: ignore[call-overload]
        if kind == "lognormal":
            return LengthDist.lognormal(
                mean_tokens=_opt(d, "mean_tokens"), p90_tokens=_opt(d, "p90_tokens"),
                median_tokens=_opt(d, "median_tokens"), sigma=_opt(d, "sigma"))
    except KeyError as exc:
        raise InputError(f"{where}: missing {exc}") from None
    raise InputError(f"{where}: length kind '{kind}' (presets use fixed or lognormal)")


def _opt(d: dict[str, object], key: str) -> float | None:
    v = d.get(key)
    return None if v is None else float(v)  # type: ignore[arg-type]


def load_presets(path: Path | None = None) -> dict[str, Preset]:
    """The named workloads of `data/workloads.toml` (or `path`)."""
    p = path or workspace.bundled_data_dir() / "workloads.toml"
    try:
        data = loads_toml(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot read workload presets {p}: {exc}") from None
    out: dict[str, Preset] = {}
    for key, d in data.get("workload", {}).items():
        where = f"{p.name} [workload.{key}]"
        arr = d.get("arrivals", {})
        traffic = Traffic(
            prompt=_length(d.get("prompt", {}), where + ".prompt"),
            output=_length(d.get("output", {}), where + ".output"),
            arrivals=Arrivals(kind=str(arr.get("kind", "poisson")),
                              rate_per_s=float(arr.get("rate_per_s", 1.0)),
                              cv=float(arr.get("cv", 1.0))),
            prefix_tokens=int(d.get("prefix_tokens", 0)),
            prefix_share=float(d.get("prefix_share", 0.0)), turns=int(d.get("turns", 1)),
            name=str(d.get("name", key)), source="; ".join(d.get("sources", [])))
        sources = tuple(str(s) for s in d.get("sources", []))
        if not sources:
            raise InputError(f"{where}: every preset names its sources")
        out[key] = Preset(key=key, name=str(d.get("name", key)), traffic=traffic,
                          sources=sources, assumed=tuple(str(a) for a in d.get("assumed", [])),
                          notes=str(d.get("notes", "")))
    return out


def preset(key: str) -> Preset:
    """One preset by key (InputError listing the keys when unknown)."""
    presets = load_presets()
    if key not in presets:
        raise InputError(f"unknown workload preset '{key}'; known: {', '.join(sorted(presets))}")
    return presets[key]
