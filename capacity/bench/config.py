"""What a benchmark run is asked to do: `BenchConfig`, the size limits it is held to
(`BenchLimits`) and the requests of a workload (`RequestSpec`, `ArrivalMode`).

Every numeric field of `BenchConfig` declares the values it takes in its metadata
(`field(..., metadata=ranged(1))`, a `Range`); `validate` checks the declared ranges, then the
rules between fields, then the limits. Its errors (`ConfigError`) name the fields: a caller that
sets them under other names says the same with its own (`ConfigError.named`; the CLI writes its
flags, `capacity.cli.bench.FLAGS`).
"""

from __future__ import annotations

import math
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Literal

from capacity.bench.metrics import pass_bounds
from capacity.bench.s3 import is_s3, parse_url
from capacity.bench.storage import MAX_SHARDS, check_label, check_run_id
from capacity.errors import InputError

Endpoint = Literal["chat", "completions"]
EventLoop = Literal["auto", "asyncio", "uvloop"]
EVENT_LOOPS: tuple[str, ...] = ("auto", "asyncio", "uvloop")
"""`BenchConfig.event_loop`'s values (`capacity.bench.workers.loop_for`)."""

SEED_MAX = 2**32 - 1
MAX_WORKERS = 256
"""Most client worker processes of one run (`--workers`)."""
MAX_PASSES = 16
"""Most passes through a run's levels (`BenchConfig.passes`)."""
MAX_START_AHEAD_S = 86_400.0
"""Latest `start_at_unix_s` a run accepts, seconds from now (24 h): shards are started
together for a time set a little ahead; a date further out (`--start-at 9999-12-31`) is a
typo that would leave the run waiting for ever, so it is refused before anything starts."""
DEADLINE_S_PER_TOKEN = 1.0
"""Default deadline allowance per requested output token, s (1 token/s: far below any server)."""


class ConfigError(InputError):
    """An impossible or out-of-limit value of a run's configuration, naming its fields.

    `template` writes each field it names as a `{field}` placeholder and every other value as
    a placeholder filled from `values`: `str()` calls each field by its own name, `named(label)`
    by `label(field)` (the CLI: the flag that sets it), so both say the same thing."""

    def __init__(self, template: str, **values: object) -> None:
        self.template = template
        self.values = values
        super().__init__(self.named(str))

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields the message names, in order (the first is the one at fault)."""
        names = (name for _, name, _, _ in string.Formatter().parse(self.template) if name)
        return tuple(dict.fromkeys(n for n in names if n not in self.values))

    def named(self, label: Callable[[str], str]) -> str:
        """The message with each field called `label(field)`."""
        return self.template.format(**{f: label(f) for f in self.fields}, **self.values)

    def __reduce__(self) -> tuple[type[InputError], tuple[str]]:
        return InputError, (str(self),)  # crosses a process boundary as its text


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


RANGE = "range"
"""The metadata key of a field's declared `Range`."""


@dataclass(frozen=True)
class Range:
    """The values a numeric field takes (each value of a tuple field; a field that is None
    is not set and passes): finite, at least `low` (above it with `above`), at most `high`."""

    low: float
    high: float | None = None
    above: bool = False
    unit: str = ""
    """Written after the bounds in the message (' requests/s')."""

    def check(self, name: str, value: float) -> None:
        """ConfigError naming the field `name` when `value` is outside the range."""
        finite = not isinstance(value, float) or math.isfinite(value)  # ints of any size
        if finite and (value > self.low if self.above else value >= self.low) \
                and (self.high is None or value <= self.high):
            return
        if self.high is not None:
            raise ConfigError(f"{{{name}}} must be between {{low}} and {{high}}{self.unit}, "
                              "got {got}", low=self.low, high=self.high, got=value)
        raise ConfigError(f"{{{name}}} must be {'>' if self.above else '>='} {{low}}{self.unit}, "
                          "got {got}", low=self.low, got=value)


def ranged(low: float, high: float | None = None, *, above: bool = False, unit: str = ""
           ) -> dict[str, Range]:
    """A field's metadata declaring its range (`Range`)."""
    return {RANGE: Range(low, high, above, unit)}


@dataclass(frozen=True, kw_only=True)
class BenchLimits:
    """The largest sizes a run accepts (docs/reliability.md). Beyond them a run
    would exhaust the client's memory or never end, so they are refused before it starts:
    `capacity bench` with one line and exit 2 (`CLI_LIMITS`), the Measure page with its own,
    lower limits (`capacity.bench.form.PAGE_LIMITS`)."""

    concurrency: int = 10_000
    """Concurrent requests of one level."""
    levels: int = 64
    """Concurrency levels in one run."""
    requests: int = 1_000_000
    """Measured requests per level."""
    prompt_chars: int = 4_000_000
    """Prompt length in characters (about a million tokens)."""
    max_tokens: int = 1_000_000
    """Output tokens requested per request."""
    warmup: int = 1_000
    """Warm-up requests per level."""
    gpus: int = 65_536
    """GPUs behind the endpoint (for cost per token)."""
    timeout_s: float = 86_400.0
    """Stall limit per stream, seconds."""
    request_rate_rps: float = 100_000.0
    """Open-loop arrival rate, requests/s."""
    schedule_s: float = 86_400.0
    """Longest open-loop schedule of one level (requests / rate), seconds."""
    prompt_chars_in_flight: int = 1_000_000_000
    """Prompt characters the client holds at once (prompt chars x concurrent requests)."""

    def check(self, *, concurrency: Sequence[int], requests: int, prompt_chars: int,
              max_tokens: int, warmup: int, gpus: int, timeout_s: float,
              request_rate: float | None = None) -> None:
        """ConfigError naming the field of the first value beyond a limit (the arguments are
        `BenchConfig`'s fields of the same names)."""
        def over(name: str, value: float, limit: float, unit: str = "") -> ConfigError:
            return ConfigError(f"{{{name}}} {{value}}{unit} is above the limit of {{limit}}{unit} "
                               "(docs/reliability.md)", value=_num(value), limit=_num(limit))

        if len(concurrency) > self.levels:
            raise ConfigError("{concurrency}: {n} levels is more than the limit of {limit} "
                              "(docs/reliability.md)", n=len(concurrency), limit=self.levels)
        for name, v, lim in (("concurrency", max(concurrency, default=1), self.concurrency),
                             ("requests", requests, self.requests),
                             ("prompt_chars", prompt_chars, self.prompt_chars),
                             ("max_tokens", max_tokens, self.max_tokens),
                             ("warmup", warmup, self.warmup), ("gpus", gpus, self.gpus)):
            if v > lim:
                raise over(name, v, lim)
        if timeout_s > self.timeout_s:
            raise over("timeout_s", timeout_s, self.timeout_s, " s")
        if request_rate is not None:
            if request_rate > self.request_rate_rps:
                raise over("request_rate", request_rate, self.request_rate_rps, " requests/s")
            if requests / request_rate > self.schedule_s:
                raise ConfigError(
                    "{request_rate} {rate:g} requests/s spreads {count} requests over {span:,.0f} s, "
                    "more than the limit of {limit:g} s per level: raise the rate or lower "
                    "{requests} (docs/reliability.md)", rate=request_rate, count=requests,
                    span=requests / request_rate, limit=self.schedule_s)
        in_flight = prompt_chars * min(max(concurrency, default=1), max(requests, warmup, 1))
        if in_flight > self.prompt_chars_in_flight:
            raise ConfigError(
                "{prompt_chars} x concurrent requests = {chars:,} characters held at once, above "
                "the limit of {limit:,}: lower {prompt_chars} or {concurrency} "
                "(docs/reliability.md)", chars=in_flight, limit=self.prompt_chars_in_flight)


CLI_LIMITS = BenchLimits()
"""`capacity bench`'s limits."""


@dataclass(frozen=True, kw_only=True)
class RequestSpec:
    """What one request of a workload carries (`--workload`, `--replay`, `--prompt-tokens`):
    request i of every level is `specs[i mod len(specs)]`."""

    prompt_tokens: int
    """Prompt tokens, the shared prefix included (sent as x `chars_per_token` characters)."""
    output_tokens: int
    """Output tokens asked for (`max_tokens`)."""
    prefix_id: int = -1
    """-1: no shared prefix (a unique nonce first); 0: the workload's system prompt; 1 + k:
    the history of conversation k. The prefix is the same text every time, so prefix caches
    hit (`capacity.bench.runner.Runner.prefix_text`)."""
    prefix_tokens: int = 0
    """Leading prompt tokens that are that shared prefix."""
    at_s: float | None = None
    """Arrival time: seconds from the start (`ArrivalMode.REPLAY`) or at 1 request/s, scaled
    by the level's rate (`ArrivalMode.SHAPE`); None: Poisson arrivals or a closed loop."""


class ArrivalMode(StrEnum):
    """Where an open loop's arrival times come from."""

    POISSON = "poisson"
    """Seeded Poisson arrivals at the level's rate (`capacity.bench.client.arrival_schedule`)."""
    SHAPE = "shape"
    """The specs' `at_s`, drawn at 1 request/s from the workload's arrival process (bursts
    included), divided by the level's rate."""
    REPLAY = "replay"
    """The specs' `at_s` as they are: a log's own send times."""


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """Everything a run needs except the API key (which is passed on its own, never stored).
    Numeric fields declare their ranges (`ranged`); the upper size limits are `BenchLimits`'."""

    base_url: str
    concurrency: tuple[int, ...] = field(default=(10,), metadata=ranged(1))
    requests: int = field(default=100, metadata=ranged(1))
    prompt_chars: int = field(default=1000, metadata=ranged(1))
    max_tokens: int = field(default=128, metadata=ranged(1))
    label: str = "bench"
    model: str | None = None
    endpoint: Endpoint = "chat"
    warmup: int = field(default=1, metadata=ranged(0))
    passes: int = field(default=1, metadata=ranged(1, MAX_PASSES))
    """Times the run goes through its levels, each pass with its share of a level's
    `requests`, in alternating order (`capacity.bench.client.pass_plan`): a machine that
    speeds up or slows down during the run then biases no level. Each level's summary pools
    its passes."""
    request_rate: float | None = field(default=None,
                                       metadata=ranged(0, above=True, unit=" requests/s"))
    seed: int = field(default=0, metadata=ranged(0, SEED_MAX))
    ignore_eos: bool = True
    stream_usage: bool = True
    slo_ttft_ms: float | None = field(default=None, metadata=ranged(0, above=True))
    slo_tpot_ms: float | None = field(default=None, metadata=ranged(0, above=True))
    timeout_s: float = field(default=600.0, metadata=ranged(0, above=True))
    request_deadline_s: float | None = field(default=None,
                                             metadata=ranged(0, above=True, unit=" s"))
    """Per-request deadline, s; None: `timeout_s` + 1 s per max token (`deadline_s`)."""
    connect_timeout_s: float = 10.0
    out_dir: str = "data/bench"
    gpu: str | None = None
    gpus: int = field(default=1, metadata=ranged(1))
    gpu_price: float | None = field(default=None, metadata=ranged(0))
    currency: str | None = None
    predict_model: str | None = None
    workers: int = field(default=1, metadata=ranged(1, MAX_WORKERS))
    """Client processes, each with its own event loop (`capacity.bench.workers`); 1: this
    process alone."""
    event_loop: EventLoop = "auto"
    """The worker processes' event loop (`capacity.bench.workers.loop_for`): `auto` takes
    asyncio's where the kernel's receive times can be read (Linux: every token time is then a
    kernel stamp), else uvloop where installed; `uvloop` costs a worker less CPU per stream but
    its sockets cannot be read with their stamps, so its token times are taken in the loop."""
    shard_index: int = field(default=0, metadata=ranged(0))
    """This client's shard of the run, 0-based (`--shard i/N` is 1-based)."""
    shard_count: int = field(default=1, metadata=ranged(1, MAX_SHARDS))
    """Clients (machines) that run the benchmark together, each a shard."""
    run_id: str | None = None
    """The run's id, shared by its shards; None: a new one."""
    start_at_unix_s: float | None = None
    """When the first level starts (wall clock, so shards start together), at most
    `MAX_START_AHEAD_S` from now; None: at once."""
    specs: tuple[RequestSpec, ...] = ()
    """Per-request prompt and output lengths and prefixes (a workload); empty: every request
    has `prompt_chars` characters and `max_tokens`."""
    arrivals: ArrivalMode = ArrivalMode.POISSON
    chars_per_token: float = field(default=4.0, metadata=ranged(0.5, 64))
    """Characters sent per prompt token of a spec (the simulated endpoint's default)."""
    workload: str | None = None
    """What the specs came from (a preset, a file, a log, prompt lengths), for meta.json."""

    def pass_of(self, index: int) -> int:
        """The pass (from 1) that measures request `index` of a level (`pass_bounds`)."""
        bounds = pass_bounds(self.requests, self.passes)
        return next((p for p in range(self.passes, 0, -1) if index >= bounds[p - 1]), 1)

    def spec(self, index: int) -> RequestSpec | None:
        """The spec of request `index` of a level, or None without a workload."""
        return self.specs[index % len(self.specs)] if self.specs else None

    def largest_prompt_chars(self) -> int:
        """Characters of the longest prompt a request of this run sends."""
        if not self.specs:
            return self.prompt_chars
        return max(self.spec_chars(s)[0] for s in self.specs)

    def largest_output_tokens(self) -> int:
        """`max_tokens` of the request asking for the most."""
        return max((s.output_tokens for s in self.specs), default=self.max_tokens)

    def spec_chars(self, spec: RequestSpec) -> tuple[int, int]:
        """(prompt characters, of which the shared prefix's) of a spec's request."""
        total = max(1, math.ceil(spec.prompt_tokens * self.chars_per_token))
        prefix = (min(total - 1, math.ceil(spec.prefix_tokens * self.chars_per_token))
                  if spec.prefix_id >= 0 and spec.prefix_tokens > 0 else 0)
        return total, max(0, prefix)

    def validate(self, limits: BenchLimits = CLI_LIMITS) -> None:
        """ConfigError (InputError) naming the field of the first impossible or out-of-limit
        value: the declared ranges in field order, then the rules between fields, then
        `limits`; the run id, the out folder and the label as `capacity.bench.storage` and
        `capacity.bench.s3` check them."""
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError("{base_url} must start with http:// or https://, got '{url}' "
                              "(e.g. http://127.0.0.1:8000/v1)", url=self.base_url)
        if not self.concurrency:
            raise ConfigError("{concurrency} needs at least one level, e.g. 10,50,100")
        for f in fields(self):
            declared: Range | None = f.metadata.get(RANGE)
            value = getattr(self, f.name)
            if declared is not None and value is not None:
                for v in value if isinstance(value, tuple) else (value,):
                    declared.check(f.name, v)
        if self.start_at_unix_s is not None:
            ahead_s = self.start_at_unix_s - time.time()
            limit = f"{MAX_START_AHEAD_S / 3600:g}"
            if not math.isfinite(ahead_s):
                raise ConfigError("{start_at_unix_s} must be a time, got {got}",
                                  got=self.start_at_unix_s)
            if ahead_s > MAX_START_AHEAD_S:
                raise ConfigError("{start_at_unix_s} is {ahead} h from now: a run waits at "
                                  "most {limit} h for its start; give a time within the next "
                                  "{limit} h", ahead=f"{ahead_s / 3600:,.0f}", limit=limit)
        if self.event_loop not in EVENT_LOOPS:
            raise ConfigError("{event_loop} must be one of {choices}, got '{got}'",
                              choices=", ".join(EVENT_LOOPS), got=self.event_loop)
        if self.passes > self.requests:
            raise ConfigError("{passes} {n} needs at least {n} {requests} (each pass measures "
                              "its share of a level's requests), got {got}",
                              n=self.passes, got=self.requests)
        if self.passes > 1 and len(set(self.concurrency)) < len(self.concurrency):
            raise ConfigError("{passes} measures each level in every pass: give each "
                              "{concurrency} once")
        if self.shard_index >= self.shard_count:
            raise ConfigError("{shard_index} must be below {shard_count}, got {index} and "
                              "{count}", index=self.shard_index, count=self.shard_count)
        if self.shard_count > 1 and self.run_id is None:
            raise ConfigError("{shard_count} above 1 needs {run_id}, the same on every shard")
        for sp in self.specs:
            if sp.prompt_tokens < 1 or sp.output_tokens < 1 or sp.prefix_tokens < 0 \
                    or sp.prefix_tokens > sp.prompt_tokens:
                raise ConfigError("every request of {specs} needs >= 1 prompt and output tokens "
                                  "and a prefix within its prompt, got {prompt} prompt, {output} "
                                  "output, {prefix} prefix tokens", prompt=sp.prompt_tokens,
                                  output=sp.output_tokens, prefix=sp.prefix_tokens)
        if self.arrivals != ArrivalMode.POISSON and (
                len(self.specs) < self.requests or any(sp.at_s is None for sp in self.specs)):
            raise ConfigError("{arrivals} '{mode}' takes the arrival times from {specs}: it "
                              "needs one with a time (at_s) for each of the {n} {requests}",
                              mode=self.arrivals.value, n=self.requests)
        if self.run_id is not None:
            check_run_id(self.run_id)
        if is_s3(self.out_dir):
            parse_url(self.out_dir)
        limits.check(concurrency=self.concurrency, requests=self.requests,
                     prompt_chars=self.largest_prompt_chars(),
                     max_tokens=self.largest_output_tokens(),
                     warmup=self.warmup, gpus=self.gpus, timeout_s=self.timeout_s,
                     request_rate=self.request_rate)
        check_label(self.label)

    def deadline_s(self) -> float:
        """Per-request deadline, s: `request_deadline_s`, else the stall limit (time allowed
        before the first byte) plus DEADLINE_S_PER_TOKEN per requested output token."""
        if self.request_deadline_s is not None:
            return self.request_deadline_s
        return self.timeout_s + DEADLINE_S_PER_TOKEN * self.largest_output_tokens()
