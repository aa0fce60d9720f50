"""F9: peak concurrency is not daily users. From daily traffic to a peak arrival rate, and from
the arrival rate to concurrency with Little's law.

`peak rate = DAU x requests per user per day x peak share / (peak hours x 3600)` (requests/s);
`peak concurrency = peak rate x request duration` (Little's law), where the request duration is
`TTFT + output tokens x TPOT` and TPOT itself depends on the concurrency (F4), so the two are
iterated to a fixed point. Headroom (default 20 %, the chapter advises 20-30 %) goes on top.
A user may also enter peak concurrency directly; then the arrival rate is what sustains it.
Source: F9 (docs/method.md) and the chapter's section "峰值并发不是日活".
Worked number: 500 users x 20 requests x 0.3 in 2 hours -> 3000 requests / 7200 s = 0.417 req/s;
at 10 s per request that is 4.2 requests in flight, 5.0 with 20 % headroom.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.memory import DEFAULT_HEADROOM
from capacity.types import BoolArray, FloatArray, Note

SECONDS_PER_HOUR = 3600.0
MAX_TURNS = 1000
"""The most turns a conversation takes (`Workload.turns`; `capacity plan --turns`' bound)."""
FIXED_POINT_MAX_ITER = 200
FIXED_POINT_REL_TOL = 1e-5


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What the customer says: daily traffic and its peak, or peak concurrency directly.

    Exactly one of `daily_active_users` (with `requests_per_user_per_day`, `peak_share`,
    `peak_hours`), `peak_concurrency` or `rate_per_s` (a peak rate given directly) is set.
    Token counts are means per request.
    """

    daily_active_users: float | None = None
    requests_per_user_per_day: float = 20.0
    peak_share: float = 0.3
    peak_hours: float = 2.0
    peak_concurrency: float | None = None
    rate_per_s: float | None = None
    """A peak arrival rate given directly (requests/s), instead of daily users: the Explorer's
    design load of a deployment opened from the Planner (`load`)."""
    context_tokens: int = 8192
    prompt_tokens: int | None = None
    output_tokens: int = 256
    headroom: float = DEFAULT_HEADROOM
    turns: int = 1
    """Turns per conversation (multi-turn chat): each request is one turn; turn k + 1's prompt
    is turn k's prompt and answer plus `turn_tokens` new ones, the history in the engine's
    prefix cache (`capacity.plan.service.ServiceModel.request_prompts`). 1: single requests.
    `prompt_tokens` is the first turn's prompt; the rates and concurrencies count turns."""
    turn_tokens: int = 0
    """The new message of every turn after the first, tokens (>= 1 with `turns` > 1)."""

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.daily_active_users, self.peak_concurrency,
                                         self.rate_per_s)]
        if sum(given) != 1:
            raise InputError("give either daily active users (--dau) or peak concurrency "
                             "(--peak-concurrency), not both and not neither")
        if self.rate_per_s is not None:
            _finite_positive("arrival rate", self.rate_per_s)
        if self.daily_active_users is not None:
            _finite_positive("daily active users", self.daily_active_users)
            _finite_positive("requests per user per day", self.requests_per_user_per_day)
            _finite_positive("peak hours", self.peak_hours)
            if not 0 < self.peak_share <= 1:
                raise InputError(f"peak share is the fraction of daily requests in the peak "
                                 f"window: give a value in (0, 1], got {self.peak_share}")
            if self.peak_hours > 24:
                raise InputError(f"peak window must be at most 24 hours, got {self.peak_hours}")
        if self.peak_concurrency is not None:
            _finite_positive("peak concurrency", self.peak_concurrency)
        for name, tokens in (("context", self.context_tokens), ("output", self.output_tokens)):
            if not (isinstance(tokens, int) and tokens >= 1):
                raise InputError(f"{name} length must be a whole number >= 1 token, got {tokens}")
        if self.prompt_tokens is not None:
            if not (isinstance(self.prompt_tokens, int) and self.prompt_tokens >= 1):
                raise InputError(f"prompt length must be >= 1 token, got {self.prompt_tokens}")
            if self.prompt_tokens > self.context_tokens:
                raise InputError(f"prompt of {self.prompt_tokens} tokens exceeds the context "
                                 f"of {self.context_tokens} tokens")
        if not (math.isfinite(self.headroom) and 0 <= self.headroom <= 2):
            raise InputError(f"headroom is a fraction (0.2 = 20 %): give 0..2, "
                             f"got {self.headroom}")
        if not (isinstance(self.turns, int) and 1 <= self.turns <= MAX_TURNS):
            raise InputError(f"turns per conversation must be a whole number 1..{MAX_TURNS:,}, "
                             f"got {self.turns}")
        if self.turns > 1:
            if not (isinstance(self.turn_tokens, int) and self.turn_tokens >= 1):
                raise InputError(Note("conversations need a new message of at least 1 token "
                                      f"a turn (--turn-tokens), got {self.turn_tokens}",
                                      code="knob_turns_tokens", name="turns"))
            last = self.last_context_tokens
            if last > self.context_tokens:
                raise InputError(Note(
                    f"the last of {self.turns} turns needs {last:,} tokens of context; the "
                    f"context is {self.context_tokens:,} (raise it, or take fewer turns)",
                    code="knob_turns_ctx", name="turns", n=self.turns, last=f"{last:,}",
                    ctx=f"{self.context_tokens:,}"))

    @property
    def prompt(self) -> int:
        """Prompt tokens per request (defaults to the context length, as the chapter does)."""
        return self.prompt_tokens if self.prompt_tokens is not None else self.context_tokens

    @property
    def tokens_over_context(self) -> int:
        """Prompt + output tokens when a prompt given apart and the output exceed the context (0
        when they fit): a serving engine refuses such a request (vLLM: prompt + max_tokens >
        max_model_len). 0 when no prompt was given: the prompt then follows the context, the
        chapter's reading of TTFT for a prompt as long as the context (a bound, not a request
        the user described), and the defaults (8,192-token context, 256 output tokens) warned
        against themselves on every page and command. A conversation's last turn fits (checked
        when it is made): 0."""
        if self.prompt_tokens is None:
            return 0
        total = self.prompt + self.output_tokens
        return total if total > self.context_tokens else 0

    @property
    def last_context_tokens(self) -> int:
        """The last turn's prompt and answer, tokens: P + (turns - 1) x (output + new
        message) + output. One turn: prompt + output. 1,000 + 2 x (256 + 100) + 256 = 1,968."""
        step = (self.output_tokens + self.turn_tokens) if self.turns > 1 else 0
        return self.prompt + (self.turns - 1) * step + self.output_tokens

    @property
    def mean_prompt_tokens(self) -> float:
        """The turns' mean prompt, tokens: P + (turns - 1) x (output + new message) / 2, the
        history included (what a request's KV holds at its prefill); the prompt with one turn.
        1,000-token first prompts, 3 turns of 100 new tokens, 256 out: 1,356."""
        return mean_prompt_tokens(self.prompt, self.output_tokens, self.turns, self.turn_tokens)

    @property
    def held_tokens(self) -> int:
        """Tokens whose KV one request holds at its end under an engine that admits by the
        tokens held (vLLM's blocks, SGLang's token pool; `EngineProfile.kv_admission` "tokens"):
        the turns' mean prompt, the history included, and the output, at most the context.
        What the planner's slots and the Explorer's memory count such an engine's request at
        (`Scenario.held_tokens`); an engine that reserves the context holds the context (F3).
        4,000-token prompts of an 8K context, 256 out: 4,256. Unit: tokens. Source:
        docs/method.md, "Engine profiles"."""
        return held_tokens(self.mean_prompt_tokens, self.output_tokens, self.context_tokens)

    @property
    def mean_new_tokens(self) -> float:
        """Prompt tokens a turn prefills on average, tokens: the first turn's whole prompt and
        each later turn's new message, the history cached: (P + (turns - 1) x new) / turns.
        1,000 and 2 x 100 over 3 turns: 400."""
        return (self.prompt + (self.turns - 1) * self.turn_tokens) / self.turns

    @property
    def peak_rate_per_s(self) -> float | None:
        """Peak arrival rate in requests/s, or None when concurrency was entered directly."""
        if self.rate_per_s is not None:
            return self.rate_per_s
        if self.daily_active_users is None:
            return None
        return peak_arrival_rate_per_s(daily_active_users=self.daily_active_users,
                                       requests_per_user_per_day=self.requests_per_user_per_day,
                                       peak_share=self.peak_share, peak_hours=self.peak_hours)

    @property
    def requests_per_day(self) -> float | None:
        """Requests per day (DAU x requests per user), or None with direct concurrency."""
        if self.daily_active_users is None:
            return None
        return self.daily_active_users * self.requests_per_user_per_day


SINGLE_REQUESTS: dict[str, str] = {
    "disagg": "the disaggregated prefill/decode comparison",
    "ep": "the wide expert-parallel comparison"}
"""What plans single requests only (`single_requests`), by the code of its notice."""


def mean_prompt_tokens(prompt: float, output_tokens: int, turns: int = 1,
                       turn_tokens: int = 0) -> float:
    """The turns' mean prompt, tokens: P + (turns - 1) x (output + new message) / 2, the
    history included; P with one turn (`Workload.mean_prompt_tokens`, the event model's
    `service_from_scenario`). 1,000, 256 out, 3 turns of 100 new: 1,356."""
    step = (output_tokens + turn_tokens) if turns > 1 else 0
    return prompt + (turns - 1) * step / 2


def held_tokens(mean_prompt: float, output_tokens: int, context_tokens: int) -> int:
    """Tokens whose KV one request holds at its end under an engine that admits by the tokens
    held: round(mean prompt) + output, at most the context (`Workload.held_tokens`, the event
    model's slots, `service_from_scenario`). 4,000 + 256 of 8,192: 4,256. Unit: tokens."""
    return min(context_tokens, round(mean_prompt) + output_tokens)


def single_requests(wl: Workload, what: str, *, prefix_tokens: int = 0,
                    prefix_share: float = 0.0) -> None:
    """InputError (a `Note`) where `wl` is a conversation (code `turns_<what>`) or its requests
    share a prefix held in the prefix cache (`prefix_tokens` reused by `prefix_share` of them,
    code `prefix_<what>`): the `SINGLE_REQUESTS[what]` plans single requests with nothing
    cached (its hand-over or dispatch of a cached history or prefix is not modelled), so it
    does not answer for them."""
    if wl.turns > 1:
        raise InputError(Note(
            f"{SINGLE_REQUESTS[what]} plans single requests, not conversations of "
            f"{wl.turns} turns with their history cached; set turns to 1 to see it",
            code=f"turns_{what}", n=wl.turns))
    if prefix_tokens > 0 and prefix_share > 0:
        raise InputError(Note(
            f"{SINGLE_REQUESTS[what]} plans requests with nothing cached, not a shared prefix "
            f"of {prefix_tokens:,} tokens reused by {prefix_share:.0%} of them; set the shared "
            "prefix to 0 to see it",
            code=f"prefix_{what}", p=f"{prefix_tokens:,}", share=f"{prefix_share:.0%}"))


def _finite_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be > 0, got {value}")


def peak_arrival_rate_per_s(*, daily_active_users: float, requests_per_user_per_day: float,
                            peak_share: float, peak_hours: float) -> float:
    """Peak arrival rate in requests/s: DAU x requests/user/day x peak share / (hours x 3600).

    The requests of the peak window arrive evenly inside it (Poisson around that mean).
    Source: F9 (docs/method.md). 500 x 20 x 0.3 / 7200 s = 0.4167 req/s.
    """
    return daily_active_users * requests_per_user_per_day * peak_share / (
        peak_hours * SECONDS_PER_HOUR)


def request_duration_s(ttft_s: npt.ArrayLike, output_tokens: float, tpot_ms: npt.ArrayLike
                       ) -> FloatArray:
    """Predicted time a request spends in the server, in s: TTFT + output tokens x TPOT.

    Source: F9 (docs/method.md) (the duration that Little's law multiplies). 3 s + 256 x 20 ms = 8.12 s.
    """
    return np.asarray(np.asarray(ttft_s, dtype=np.float64)
                      + output_tokens * np.asarray(tpot_ms, dtype=np.float64) / 1e3,
                      dtype=np.float64)


def littles_law_concurrency(rate_per_s: npt.ArrayLike, duration_s: npt.ArrayLike) -> FloatArray:
    """Mean requests in flight: L = lambda x W (Little's law). Unit: requests.

    0.4167 req/s x 10 s = 4.17 requests.
    """
    return np.asarray(np.asarray(rate_per_s, dtype=np.float64)
                      * np.asarray(duration_s, dtype=np.float64), dtype=np.float64)


def with_headroom(concurrency: npt.ArrayLike, headroom: float = DEFAULT_HEADROOM) -> FloatArray:
    """Concurrency to provision: C x (1 + headroom). The chapter advises 20-30 %."""
    if headroom < 0:
        raise InputError(f"headroom must be >= 0, got {headroom}")
    return np.asarray(np.asarray(concurrency, dtype=np.float64) * (1.0 + headroom),
                      dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class FixedPoint:
    """Concurrency C = rate x duration(C), solved per configuration (arrays)."""

    concurrency: FloatArray
    duration_s: FloatArray
    converged: BoolArray
    iterations: int


def concurrency_fixed_point(rate_per_s: npt.ArrayLike,
                            duration_s: Callable[[FloatArray], FloatArray],
                            *, limit: npt.ArrayLike = np.inf,
                            max_iter: int = FIXED_POINT_MAX_ITER,
                            rel_tol: float = FIXED_POINT_REL_TOL,
                            narrow: Callable[[npt.NDArray[np.int64]],
                                             Callable[[FloatArray], FloatArray]] | None = None,
                            accelerate: bool = False) -> FixedPoint:
    """Solve C = rate x duration(C) by iteration from C = 0, elementwise over configurations.

    `duration_s(C)` must not fall as C rises (a decode step never gets faster with a bigger
    batch, F4), so the iterates rise monotonically to the smallest fixed point. Where none
    exists (the load outruns the hardware: rate x d duration / dC >= 1) or the iterate passes
    `limit`, the entry is marked not converged and holds the last iterate (capped at `limit`).
    `narrow(rows)` (optional): `duration_s` of those entries alone, where each entry's
    duration is its own (a 1-D array of configurations): once fewer than half the entries it
    last ran are still moving, the iteration runs only those (the same iterates: a frozen
    entry keeps its value). The planner's capacity search probes rates past some
    configurations' capacity, whose iterates creep towards `limit` for all `max_iter` steps.
    `accelerate`: where an entry's iterates close in slowly and steadily (the ratio r of two
    successive steps alike, within `AITKEN_RATIO_AGREE`, and in [`AITKEN_MIN_RATIO`, 1)), it
    jumps to Aitken's extrapolation `next + step x r / (1 - r)` (the geometric sum of the steps
    left), or to `limit` where that lies beyond it; the iteration goes on from there, upward or
    downward, so an entry still converges only where C = rate x duration(C) holds to `rel_tol`,
    and one whose duration at `limit` still asks for more passes it as before. Near
    capacity (r 0.97: a 3-turn conversation's configurations at the rates the capacity search
    probes) plain iteration needs some 400 steps, past `max_iter`; the jumps need a few dozen.
    Unit: requests in flight. Source: F9 (docs/method.md) (Little's law with a configuration-dependent W).
    """
    rate = np.asarray(rate_per_s, dtype=np.float64)
    lim = np.asarray(limit, dtype=np.float64)
    if np.any(rate < 0):
        raise InputError("arrival rate must be >= 0 requests/s")
    c = np.zeros(np.broadcast(rate, lim).shape)
    done = np.zeros(c.shape, dtype=bool)
    over = np.zeros(c.shape, dtype=bool)
    iterations = 0
    d = np.asarray(duration_s(c), dtype=np.float64)
    rows = np.arange(c.size) if narrow is not None and c.ndim == 1 else None
    run = duration_s   # the duration of `rows` (all entries until they narrow)
    last = np.zeros(c.shape)       # each entry's previous plain step
    ratio = np.full(c.shape, np.nan)   # and the ratio of its last two
    for step in range(1, max_iter + 1):
        iterations = step
        with np.errstate(invalid="ignore"):
            nxt = np.where(rate > 0, rate * d, 0.0)
        nxt = np.where(np.isnan(nxt), np.inf, nxt)
        # an entry that has converged (or passed the limit) keeps its value: each entry's
        # answer is its own iteration's, whatever else is solved beside it
        frozen = done | over
        over = over | (~frozen & (nxt > lim))
        nxt = np.minimum(nxt, lim)
        done = frozen | (np.abs(nxt - c) <= rel_tol * np.maximum(nxt, 1e-12))
        if accelerate:
            nxt, last, ratio = _aitken(c, nxt, last, ratio, lim, done | over)
        c = np.where(frozen, c, nxt)
        if rows is None or narrow is None:
            d = duration_s(c)
        else:   # only the entries that moved this step change their duration
            moved = np.flatnonzero(~frozen)
            if moved.size < rows.size // 2:
                rows, run = moved, narrow(moved)
            d = d.copy()
            d[rows] = run(c[rows])
        if np.all(done | over):
            break
    return FixedPoint(concurrency=c, duration_s=np.asarray(d, dtype=np.float64),
                      converged=np.asarray(done & ~over), iterations=iterations)


AITKEN_MIN_RATIO = 0.5
"""The slowest-closing entries alone jump (`concurrency_fixed_point(accelerate=True)`): a
step ratio under this converges in a few dozen plain steps anyway, and its iterates stay
exactly the plain iteration's."""
AITKEN_RATIO_AGREE = 0.05
"""Two successive step ratios r within this share of 1 - r of each other: the iterates close
in geometrically, as Aitken's extrapolation assumes, and the steps left, r / (1 - r) of the
last, are known to about this share (at r 0.97 the ratios must agree to 0.0015)."""


def _aitken(c: FloatArray, nxt: FloatArray, last: FloatArray, ratio: FloatArray,
            lim: FloatArray, stop: BoolArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """One step of `concurrency_fixed_point`'s acceleration: (the next iterates, each entry's
    step, its step ratio). An entry whose last two ratios agree (and not `stop`ped) jumps to
    Aitken's limit `nxt + step x r / (1 - r)`, at most `lim`, and starts its ratios afresh.
    Example: d = 2 + 0.099 C at rate 10 (r = 0.99 a step, fixed point 20 / 0.01 = 2000): from
    iterates 20, 39.8, 59.402 (steps 19.8, 19.602, r 0.99 twice) the jump lands on
    59.402 + 19.602 x 0.99 / 0.01 = 2000 at once."""
    inc = nxt - c
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(last != 0, inc / last, np.nan)
    steady = (~stop & (r >= AITKEN_MIN_RATIO) & (r < 1.0)
              & (np.abs(r - ratio) <= AITKEN_RATIO_AGREE * (1.0 - r)))
    with np.errstate(divide="ignore", invalid="ignore"):
        jump = np.clip(nxt + inc * r / (1.0 - r), 0.0, lim)
    return (np.where(steady, jump, nxt), np.where(steady, 0.0, inc),
            np.where(steady, np.nan, r))
