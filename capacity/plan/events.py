"""The discrete-event model of one replica (docs/method.md, queueing): the assumptions are
`capacity.plan.queueing`'s (slots, admission at scheduling points, batched or chunked prefill by
the engine profile, F4 decode steps); this module runs them request by request, seeded.

It jumps from event to event (arrival, completion, prefill batch or chunk), not from step to
step, so thousands of requests take milliseconds (`run_trace`). Open loops (`open_loop_load`,
`arrival_times_ms`: a rate per stage, Poisson or constant gaps), rate sweeps (`sweep`) and
the closed loops of `capacity.plan.closed_loop` (C clients, each sending again when answered)
all run it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.errors import InputError
from capacity.model.prefix import align_chunk_tokens
from capacity.model.roofline import StepModel as StepModel  # re-exported: the one F4 step
from capacity.model.scenario import Scenario
from capacity.plan.event_pages import PagedPool
from capacity.plan.event_stats import Gaps
from capacity.plan.event_stats import quantiles as quantiles  # re-exported
from capacity.plan.event_stats import weighted_mean as weighted_mean  # re-exported
from capacity.plan.event_stats import weighted_quantiles as weighted_quantiles  # re-exported
from capacity.plan.service import ServiceModel as ServiceModel  # re-exported: one replica
from capacity.plan.service_build import service_from_scenario as service_from_scenario  # re-exported
from capacity.stats import gamma_quantile as gamma_quantile  # re-exported: the F-queue quantile
from capacity.types import FloatArray

# ---------------------------------------------------------------------------------------------
# Discrete-event model (one configuration)


MAX_LOAD_REQUESTS = 4000
"""Requests one `closed_loop` simulates at most, below 3 C clients (it runs at page speed)."""


ARRIVALS: tuple[str, ...] = ("poisson", "constant")
"""How open-loop requests arrive: Poisson (exponential gaps, seeded) or evenly spaced."""


def arrival_times_ms(stages: Sequence[tuple[float, float]], *, kind: str = "poisson",
                     seed: int = 0, max_requests: int = MAX_LOAD_REQUESTS * 25) -> FloatArray:
    """Arrival times (ms from 0) of an open-loop load in stages of (rate req/s, duration s),
    one after the other: Poisson arrivals at each stage's rate (seeded), or evenly spaced
    ('constant'). InputError for a rate or duration <= 0, an unknown kind, or more than
    `max_requests` requests in all."""
    if kind not in ARRIVALS:
        raise InputError(f"arrivals must be one of {', '.join(ARRIVALS)}, got '{kind}'")
    if not stages:
        raise InputError("give at least one stage of rate:duration")
    for rate, dur in stages:
        if not (math.isfinite(rate) and rate > 0 and math.isfinite(dur) and dur > 0):
            raise InputError(f"a stage needs a rate > 0 req/s and a duration > 0 s, got "
                             f"{rate:g} req/s for {dur:g} s")
    total = sum(r * d for r, d in stages)
    if total > max_requests:
        raise InputError(f"the stages send {total:,.0f} requests; at most {max_requests:,}")
    rng = np.random.default_rng(seed)
    out: list[FloatArray] = []
    start = 0.0
    for rate, dur in stages:
        end = start + dur * 1e3
        if kind == "constant":
            t = start + np.arange(0.0, dur * rate) * (1e3 / rate)
        else:
            gaps = rng.exponential(1e3 / rate, size=int(rate * dur * 1.5 + 50))
            t = start + np.cumsum(gaps)
        out.append(t[t < end])
        start = end
    arr = np.concatenate(out) if out else np.zeros(0)
    if arr.size < 10:
        raise InputError(f"the stages send {arr.size} requests; give at least 10 (a higher "
                         "rate or a longer duration)")
    return np.asarray(arr, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class OpenLoopPoint:
    """The event model of one open-loop load (the deployment's total rate): TTFT, the gaps
    between tokens (ITL, token-weighted as the bench measures them), TPOT and E2E, each as a
    mean and its p50/p90/p99, in ms; the output rate and whether the load outruns the
    replica."""

    rate_per_s: float
    stages: tuple[tuple[float, float], ...]
    arrivals: str
    requests: int
    ttft_mean_ms: float
    ttft_ms: dict[float, float]
    itl_mean_ms: float
    itl_ms: dict[float, float]
    tpot_ms: dict[float, float]
    e2e_mean_ms: float
    e2e_ms: dict[float, float]
    output_tok_s: float
    saturated: bool


def open_loop_load(s: Scenario, *, engine: str, output_tokens: int,
                   stages: Sequence[Sequence[tuple[float, float]]], kind: str = "poisson",
                   seed: int = 0, max_num_seqs: int | None = None,
                   chunk_tokens: int | None = None, block_tokens: int | None = None,
                   offload_gib: float = 0.0, prefix_tokens: int = 0,
                   prefix_share: float = 0.0, turns: int = 1, turn_tokens: int = 0,
                   prompt_lengths: Sequence[int] | None = None, prefix_caching: bool = False,
                   enforce_eager: bool = False) -> tuple[ServiceModel, list[OpenLoopPoint]]:
    """TTFT, ITL, TPOT and E2E under an open-loop load at the engine's scheduling: for each
    load (stages of total rate and duration), one replica of `s` fed 1/replicas of the rate
    (`service_from_scenario`, `arrival_times_ms`), the first 10 % of requests left out as
    warm-up. A load at or past the replica's saturation rate is marked saturated (its queue
    grows for as long as it lasts). `max_num_seqs` and `chunk_tokens` override the engine's
    (vLLM's max_num_seqs and max_num_batched_tokens); the other knobs (multi-turn, prompts
    that vary and an engine's prefix caching too) are `service_from_scenario`'s."""
    svc = service_from_scenario(s, output_tokens=output_tokens, engine=engine,
                                max_num_seqs=max_num_seqs, chunk_tokens=chunk_tokens,
                                block_tokens=block_tokens, offload_gib=offload_gib,
                                prefix_tokens=prefix_tokens, prefix_share=prefix_share,
                                turns=turns, turn_tokens=turn_tokens,
                                prompt_lengths=prompt_lengths, prefix_caching=prefix_caching,
                                enforce_eager=enforce_eager)
    out = []
    for load in stages:
        per = [(r / s.replicas, d) for r, d in load]
        arr = arrival_times_ms(per, kind=kind, seed=seed)
        q = simulate(svc, arrivals_ms=arr.tolist(), itl=True)
        mean_rate = sum(r * d for r, d in load) / sum(d for _, d in load)
        assert q.itl_ms is not None and q.itl_mean_ms is not None
        out.append(OpenLoopPoint(
            rate_per_s=mean_rate, stages=tuple((float(r), float(d)) for r, d in load),
            arrivals=kind, requests=q.requests, ttft_mean_ms=q.mean_ttft_ms,
            ttft_ms=q.ttft_ms, itl_mean_ms=q.itl_mean_ms, itl_ms=q.itl_ms, tpot_ms=q.tpot_ms,
            e2e_mean_ms=q.mean_e2e_ms, e2e_ms=q.e2e_ms, output_tok_s=q.output_tok_s * s.replicas,
            saturated=max(r for r, _ in per) >= svc.saturation_rate_per_s))
    return svc, out


@dataclass(frozen=True, kw_only=True)
class QueueResult:
    """What the discrete-event model measured over the counted requests (after warm-up)."""

    requests: int
    rate_per_s: float | None
    concurrency: int | None
    ttft_ms: dict[float, float]
    tpot_ms: dict[float, float]
    queue_ms: dict[float, float]
    e2e_ms: dict[float, float]
    mean_queue_ms: float
    mean_ttft_ms: float
    throughput_req_s: float
    output_tok_s: float
    goodput_req_s: float
    slo_met_share: float
    mean_running: float
    saturation_rate_per_s: float
    saturated: bool
    slots: int
    itl_ms: dict[float, float] | None = None
    """Quantiles of the gaps between a request's tokens, token-weighted (the bench's ITL: a
    decode step, or a longer gap where prompts were processed in between); None unless
    `simulate(itl=True)`."""
    itl_mean_ms: float | None = None
    """The mean of those gaps, ms (the bench's `itl_mean_ms`); None unless `itl=True`."""
    mean_e2e_ms: float = math.nan
    """The mean end-to-end time of the counted requests, ms."""
    preemptions: int = 0
    """Times a request was preempted (its pages freed, recomputed) over the whole run (a paged
    pool, `ServiceModel.paged`; 0 otherwise)."""
    max_running: int = 0
    """The most requests admitted at once over the whole run (at most `slots`, or a paged
    pool's `max_batch`)."""
    ttft_met_share: float = math.nan
    """The share of counted requests whose TTFT is within `simulate`'s TTFT SLO (1 without
    one)."""
    tpot_met_share: float = math.nan
    """The share whose TPOT ((end - first token) / (output - 1)) is within the TPOT SLO."""
    mean_tpot_ms: float = math.nan
    """The mean of the counted requests' TPOT, ms (where outputs vary, over those of two or
    more tokens, as vLLM's bench)."""


@dataclass(frozen=True, kw_only=True)
class Trace:
    """Per-request event times of one run (ms): arrival, admission to a slot, first token, end."""

    arrival_ms: FloatArray
    admit_ms: FloatArray
    first_ms: FloatArray
    finish_ms: FloatArray
    gaps: Gaps | None = None
    preemptions: int = 0
    max_running: int = 0


def run_trace(svc: ServiceModel, arrivals: FloatArray | None, clients: int | None,
         n_requests: int, record_gaps: bool = False, phased: bool = False) -> Trace:
    """The event loop. Open loop: `arrivals` (ms, sorted). Closed loop: `clients` users that
    send the next request as soon as the previous one finishes (no think time), all at 0 ms:
    as one burst, or with `phased` from the out-of-step steady state (client k's first
    request part-decoded, see `simulate`).
    `record_gaps`: also keep every inter-token gap (memory grows with the tokens).
    A paged pool (`svc.paged`, vLLM's and SGLang's profiles) admits a request when its prompt's
    pages and one block fit beside the running requests' (and fewer than `max_batch` run),
    grows pages as tokens come, and when the decoding requests' next tokens would overflow it
    preempts the newest admitted request back to the front of the queue (recompute: its next
    prefill covers its prompt and the tokens it had generated; its first token was sent).
    Prompts, cached tokens and first-chunk times per request: `ServiceModel.request_prompts`
    (a shared prefix, multi-turn). An engine that schedules one step ahead
    (`ServiceModel.schedule_ahead`: vLLM since 0.14.0, SGLang since 0.4.0) admits at a step's
    end only the requests that reached it before that step began: one that arrives during a
    step waits for the step after the next (one more step in its TTFT); an idle engine admits
    at once."""
    n = n_requests
    gaps = Gaps(n) if record_gaps else None
    arrival = np.full(n, np.nan) if arrivals is None else arrivals.copy()
    timed = n if arrivals is not None else 0   # arrivals known ahead: arrival[:timed], sorted
    admit = np.full(n, np.nan)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    outs = svc.request_outputs(n)   # each request's output tokens
    out = svc.longest_output_tokens
    chunk = svc.chunk_tokens
    prompt, cached, first_extra, shares = svc.request_prompts(n)
    steps = svc.step_ms
    waiting: deque[int] = deque()
    prefill_q: deque[int] = deque()      # admitted, prompt not done (FCFS)
    prompt_left: dict[int, int] = {}
    running: list[int] = []              # decoding: request ids
    ends: list[int] = []                 # per running request: the tick of its last token
    tick = 0                             # decode tokens every running request has had so far
    now = 0.0
    next_arrival = 0                     # index of the next open-loop arrival
    issued = 0
    lat = svc.request_latency_ms         # a request reaches the engine lat after it is sent
    if clients is not None:
        issued = timed = min(clients, n)
        arrival[:issued] = -lat if phased else 0.0
    cap = svc.max_batch
    longest = svc.longest_prompt_tokens
    per_step = (svc.chunk_tokens or svc.prompt_tokens) - (cap if svc.mixed else 0)
    guard = 20 * n * (2 + longest // max(1, per_step))
    pages = PagedPool(svc, n, shares) if svc.paged is not None else None
    if pages is not None:
        steps = svc.batch_step_ms
        guard += 4 * n * (out + 2 + (longest + out) // max(1, per_step))
        pool = pages.kv.pool_bytes
    target: dict[int, int] = {}          # paged: where a request's prefill ends (recompute)
    pass_ms: dict[tuple[int, tuple[tuple[int, int], ...], float], float] = {}
    max_running = 0

    running_arr: npt.NDArray[np.int64] | None = None   # `running` as an array, or None

    def running_ids() -> npt.NDArray[np.int64]:
        """The running requests as an array, made again only after `running` changed (every
        change to it sets `running_arr` to None)."""
        nonlocal running_arr
        if running_arr is None:
            running_arr = np.fromiter(running, dtype=np.int64, count=len(running))
        return running_arr

    def claim_running(extra: int) -> float:
        """`PagedPool.claim` of the running requests with `extra` more tokens each. A running
        request's held and emitted tokens are kept less `tick` (`live`), so the same claim
        with `tick` more tokens each is theirs: the pool's arithmetic, in integers, exactly."""
        assert pages is not None
        if len(running) < 8:
            return pages.claim(running, extra + tick)
        return pages.claim_array(running_ids(), extra + tick)

    def live(i: int) -> None:
        """Request i starts decoding: from now on it gains a token a tick, and the pool keeps
        its held and emitted tokens less `tick` (no per-step update of every running one)."""
        if pages is not None:
            pages.held[i] -= tick
            pages.emitted[i] -= tick

    def unlive(i: int) -> None:
        """Request i stops decoding (finished, preempted): its held and emitted tokens as
        they are now."""
        if pages is not None:
            pages.held[i] += tick
            pages.emitted[i] += tick

    def first_tokens(ids: list[int]) -> None:
        """These prompts get their first token now; they decode on, or end at one token."""
        nonlocal running_arr
        for i in ids:
            first[i] = now
            if gaps is not None:
                gaps.last_ms[i] = now
            if pages is not None:
                pages.emitted[i] = 1
            if outs[i] > 1:
                running.append(i)
                ends.append(tick + int(outs[i]) - 1)
                running_arr = None
                live(i)
            else:
                finished_now.append(i)

    def resumed(ids: list[int]) -> None:
        """Preempted requests whose recompute ended: each gets its next token now."""
        nonlocal running_arr
        assert pages is not None
        for i in ids:
            pages.emitted[i] += 1
            if gaps is not None:
                gaps.tokens([i], now)
            if pages.emitted[i] >= outs[i]:
                finished_now.append(i)
            else:
                running.append(i)
                ends.append(tick + int(outs[i]) - int(pages.emitted[i]))
                running_arr = None
                live(i)

    def preempt_newest() -> None:
        """Free the pages of the newest admitted request; it waits at the queue's front."""
        nonlocal running_arr
        assert pages is not None
        i = max([*running, *prefill_q], key=lambda j: int(pages.order[j]))
        if i in prefill_q:
            prefill_q.remove(i)
            del prompt_left[i]
        else:
            j = running.index(i)
            del running[j], ends[j]
            running_arr = None
            unlive(i)
        pages.held[i] = 0
        pages.redo[i] = True
        pages.less[i] = 0.0   # a recompute holds (and prefills) its whole context
        pages.preemptions += 1
        waiting.appendleft(i)

    def make_room() -> tuple[bool, float | None]:
        """Preempt until the decoding requests' next token fits (never the last request):
        whether any was preempted, and the pool's claim with that token (the running
        requests' and the queued prefills'; None when it was not computed: also when every
        request at its largest claim would fit, so nothing can be preempted)."""
        assert pages is not None
        gone = False
        while running and len(running) + len(prefill_q) > 1:
            if (len(running) + len(prefill_q)) * pages.most <= pool:
                return gone, None
            used = claim_running(1) + pages.claim(prefill_q)
            if used <= pool:
                return gone, used
            preempt_newest()
            gone = True
        return gone, None

    def room_for(room: float | None, need: float) -> bool:
        """Whether `need` more bytes fit beside the decoding requests with their next token:
        `room`, their claim where computed, else their bound or, if that is short, the sum."""
        assert pages is not None
        if room is None:
            bound = len(running) * pages.most
            room = bound if bound + need <= pool else claim_running(1)
        return room + need <= pool

    if clients is not None and phased and out > 1:
        # out of step (`simulate(phased=True)`): client k's first request has its first token
        # and ceil((n - 1)(k + 1) / C) tokens left; those that do not fit queue at 0
        used = 0.0
        for k in range(issued):
            o = int(outs[k])
            left = math.ceil((o - 1) * (k + 1) / issued)
            if left < 1:   # a one-token request starts afresh
                waiting.append(k)
                continue
            if pages is None:
                fits = len(running) < svc.slots
            else:
                pages.held[k] = int(prompt[k]) + (o - 1 - left)
                pages.emitted[k] = o - left
                fits = len(running) < cap and used + pages.claim([k]) <= pool
                if not fits:
                    pages.held[k] = pages.emitted[k] = 0
            if not fits:
                waiting.append(k)
                continue
            admit[k] = first[k] = 0.0
            if pages is not None:
                used += pages.claim([k])
                pages.order[k] = pages.admitted
                pages.admitted += 1
            if gaps is not None:
                gaps.last_ms[k] = 0.0
            running.append(k)
            ends.append(tick + left)
            live(k)
        running_arr = None
        next_arrival = issued

    ahead = svc.schedule_ahead
    started: float | None = None   # scheduled ahead: when the step that just ended began
    for _ in range(guard):
        # an engine that schedules one step ahead fixed the batch of the step it starts now
        # when the step that just ended began: a request that reached it since then waits for
        # the step after; an idle engine (started None) schedules at once
        cutoff = now if started is None else started
        while next_arrival < timed and arrival[next_arrival] + lat <= cutoff:
            waiting.append(next_arrival)
            next_arrival += 1
        busy = len(running) + len(prefill_q)
        if pages is None:
            while waiting and busy < svc.slots:
                i = waiting.popleft()
                admit[i] = now
                prefill_q.append(i)
                prompt_left[i] = int(prompt[i]) - int(cached[i])
                busy += 1
        else:
            # vLLM schedules the running requests first (preempting for their next token),
            # then admits from the queue while the pool holds a prompt's pages and a block
            gone, claimed = make_room() if svc.mixed else (False, None)
            room = claimed   # the pool with the next token, valid until a request is admitted
            busy = len(running) + len(prefill_q)
            # the pool's claim, summed only when a bound on it (every request at its largest)
            # would not leave room: the same admissions, fewer sums
            in_pool = claimed
            bound = busy * pages.most if claimed is None else claimed
            while waiting and busy < cap and not gone:
                i = waiting[0]
                need = pages.admit_claim(i, int(prompt[i]))
                if busy and in_pool is None and bound + need > pool:
                    in_pool = claim_running(1 if svc.mixed else 0) + pages.claim(prefill_q)
                if busy and (bound if in_pool is None else in_pool) + need > pool:
                    break
                waiting.popleft()
                if math.isnan(admit[i]):
                    admit[i] = now
                target[i] = pages.target(i, int(prompt[i]))
                pages.held[i] = target[i]
                pages.order[i] = pages.admitted
                pages.admitted += 1
                prefill_q.append(i)
                prompt_left[i] = target[i] - (0 if pages.redo[i] else int(cached[i]))
                got = pages.claim_at(i, target[i])
                bound += got
                if in_pool is not None:
                    in_pool += got
                room = None
                busy += 1
        max_running = max(max_running, busy)
        if not running and not prefill_q:
            if next_arrival >= timed:
                break
            now = max(now, float(arrival[next_arrival]) + lat)
            started = None
            continue
        finished_now: list[int] = []
        if prefill_q and svc.chunk_tokens is None:
            # one forward pass over every prompt admitted at this scheduling point: each of
            # them gets its first token when the whole batch's prefill ends
            batch_ids = list(prefill_q)
            prefill_q.clear()
            for i in batch_ids:
                del prompt_left[i]
            started = now if ahead else None
            now += svc.prompt_pass_ms([bool(cached[i]) for i in batch_ids])
            first_tokens(batch_ids)
        elif prefill_q and chunk is not None:
            # mixed: the decoding requests' tokens and prompt chunks share the budget; not
            # mixed (SGLang): a prefill batch of at most the budget, decoding waits
            b = len(running) if svc.mixed else 0
            budget = chunk - b
            used = 0
            done_prompts: list[int] = []
            pieces: list[tuple[int, int]] = []
            extra = 0.0
            j = 0   # one chunk per request a step, in admission order
            while j < len(prefill_q) and used < budget:
                i = prefill_q[j]
                end = target.get(i, int(prompt[i]))
                done = end - prompt_left[i]
                take = min(budget - used, prompt_left[i])
                if svc.align_block_tokens:
                    take = align_chunk_tokens(end, done, take, svc.align_block_tokens)
                    if take == 0:   # the budget left is below one block: next step
                        break
                if cached[i] and done == cached[i] and (pages is None or not pages.redo[i]):
                    extra += float(first_extra[i])   # a prefix hit's (a turn's) first chunk
                pieces.append((done, take))
                prompt_left[i] -= take
                used += take
                if prompt_left[i] == 0:
                    del prefill_q[j]
                    del prompt_left[i]
                    done_prompts.append(i)   # first token at the end of this step
                else:   # the budget ran out, or an aligned chunk ended short of the prompt
                    j += 1
            key = (b, tuple(pieces), extra)
            step = pass_ms.get(key)
            if step is None:   # a pure function of the pass: steady loops repeat passes
                step = pass_ms[key] = svc.mixed_step_ms(b, pieces, extra)
            started = now if ahead else None
            now += step
            if b:
                tick += 1   # every running request's token (`live`: the pool's counts follow)
                if gaps is not None:
                    gaps.tokens(running_ids(), now)
            if pages is None:
                first_tokens(done_prompts)
            else:
                for i in done_prompts:
                    del target[i]
                again = [i for i in done_prompts if pages.emitted[i]]
                first_tokens([i for i in done_prompts if not pages.emitted[i]])
                resumed(again)
        else:
            if pages is not None and room is None:
                # (a make_room that found the pool holding the next token, with nothing
                # admitted since, would find the same: it is not run again)
                gone, room = make_room()
                if gone:
                    busy = len(running)
            b = len(running)
            k = min(ends) - tick
            if next_arrival < timed and busy < cap:
                gap = float(arrival[next_arrival]) + lat - now
                k = max(1, min(k, math.ceil(gap / steps[b]) if gap > 0 else 1))
            elif waiting and busy < cap and (
                    pages is None or room_for(room, pages.admit_claim(waiting[0],
                                                                      int(prompt[waiting[0]])))):
                k = 1
            if (pages is not None and k > 1 and len(running) * pages.most > pool
                    and claim_running(k) > pool):
                lo, hi = 1, k   # the most steps before the pool overflows
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if claim_running(mid) <= pool else (lo, mid)
                k = lo
            now += k * float(steps[b])
            started = now - float(steps[b]) if ahead else None
            tick += k
            if gaps is not None:
                gaps.tokens(running_ids(), now, float(steps[b]), k)
        # someone had its last token: split them off (every end is at or after `tick`: a
        # step advances it to the nearest end at most, and a new end lies ahead of it)
        done_here = ends.count(tick) if ends else 0
        if done_here:
            if done_here == 1:
                j = ends.index(tick)
                finished_now.append(running[j])
                del running[j], ends[j]
                unlive(finished_now[-1])
            else:
                over = [j for j, e in enumerate(ends) if e == tick]
                finished_now.extend(running[j] for j in over)
                for j in reversed(over):
                    unlive(running[j])
                    del running[j], ends[j]
            running_arr = None
        for i in finished_now:
            finish[i] = now
            if clients is not None and issued < n:
                arrival[issued] = now
                if lat > 0 or ahead:   # it reaches the engine lat from now, in order
                    timed = issued + 1
                else:
                    waiting.append(issued)
                issued += 1
        if (arrivals is None and issued >= n and next_arrival >= timed and not waiting
                and not running and not prefill_q):
            break
    else:  # pragma: no cover - the guard is generous; reaching it is a bug
        raise RuntimeError("queueing model did not finish within its step guard")
    return Trace(arrival_ms=arrival, admit_ms=admit, first_ms=first, finish_ms=finish,
                 gaps=gaps, preemptions=0 if pages is None else pages.preemptions,
                 max_running=max_running)


def steady_span_s(e2e_ms: FloatArray, concurrency: int) -> float:
    """The time (s) a steady closed loop of `concurrency` clients with no think time takes to
    complete requests with end-to-end times `e2e_ms` (ms): each client is always waiting on
    one request, so by the renewal-reward theorem (Little's law with C in the system) the
    loop completes C requests per mean end-to-end time and span = sum(e2e) / C.
    The counted requests' first arrival to last finish is no such span: it ends with the
    slowest counted request while later, uncounted ones run beside it, which reads C / (N + C)
    of N requests' throughput low with equal outputs (10% at 12 requests a client) and, where
    outputs vary, by as much as the longest outlasts the mean (28% at 64 clients of ShareGPT
    replies up to 2,044 tokens). Example: e2e 2,000 and 4,000 ms at C = 2: 3 s, 2 requests
    in 3 s = 0.667 req/s = 2 / 3 s mean."""
    return max(float(np.sum(e2e_ms)) / 1e3 / concurrency, 1e-9)


def simulate(svc: ServiceModel, *, rate_per_s: float | None = None,
             concurrency: int | None = None, arrivals_ms: Sequence[float] | None = None,
             n_requests: int = 2000, seed: int = 0,
             slo_ttft_ms: float = math.inf, slo_tpot_ms: float = math.inf,
             warmup_fraction: float = 0.1, itl: bool = False,
             phased: bool = False) -> QueueResult:
    """Run the discrete-event model of one replica and summarize it.

    Give `rate_per_s` (Poisson arrivals, seeded), `concurrency` (closed loop, zero think
    time) or `arrivals_ms` (replay these arrival times, ms from any origin, in order; then
    `n_requests` is their count and `rate_per_s` in the result is their mean rate).
    The first `warmup_fraction` of requests (by arrival) are left out of the statistics.
    `itl`: also the quantiles of the inter-token gaps (`QueueResult.itl_ms`).
    `phased` (closed loop): start out of step, not as one burst (`closed_loop` says why):
    client k's first request has its first token and ceil((n - 1)(k + 1) / C) of its n - 1
    decode tokens left (as many as fit the slots and the pool; the rest wait). Those C are
    the warm-up's (leave them out); the last C, which finish as the loop drains, are left out.
    Goodput = counted requests that meet both SLOs / the span from the first counted arrival to
    the last counted finish; in a phased closed loop, the steady state's span of the counted
    requests (`steady_span_s`: every client busy all the time, so C requests complete per mean
    end-to-end time). Deterministic for a given seed.
    """
    if sum(x is not None for x in (rate_per_s, concurrency, arrivals_ms)) != 1:
        raise InputError("give one of: an arrival rate, a closed-loop concurrency, or a list "
                         "of arrival times")
    if arrivals_ms is not None:
        n_requests = len(arrivals_ms)
    if not 10 <= n_requests <= 1_000_000:
        raise InputError(f"simulate 10..1,000,000 requests, got {n_requests}")
    if not 0 <= warmup_fraction < 0.9:
        raise InputError("warm-up fraction must be in [0, 0.9)")
    arrivals = None
    if arrivals_ms is not None:
        arrivals = np.asarray(arrivals_ms, dtype=np.float64)
        if not np.all(np.isfinite(arrivals)) or np.any(np.diff(arrivals) < 0):
            raise InputError("arrival times must be finite and in increasing order")
        arrivals = arrivals - arrivals[0]
        span = float(arrivals[-1])
        rate_per_s = (n_requests - 1) / span * 1e3 if span > 0 else math.inf
    elif rate_per_s is not None:
        if not (math.isfinite(rate_per_s) and rate_per_s > 0):
            raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
        rng = np.random.default_rng(seed)
        arrivals = np.cumsum(rng.exponential(1e3 / rate_per_s, size=n_requests))
    elif concurrency is not None and concurrency < 1:
        raise InputError(f"closed-loop concurrency must be >= 1, got {concurrency}")
    tr = run_trace(svc, arrivals, concurrency, n_requests, record_gaps=itl, phased=phased)
    skip = int(n_requests * warmup_fraction)
    # phased: the last C requests run as the loop drains (fewer clients behind them)
    end = n_requests - concurrency if phased and concurrency is not None else n_requests
    if end <= skip:
        raise InputError(f"a phased closed loop of {concurrency} clients counts no request "
                         f"of {n_requests} (the warm-up and the last C are left out)")
    sl = slice(skip, end)
    arr, adm, fst, fin = tr.arrival_ms[sl], tr.admit_ms[sl], tr.first_ms[sl], tr.finish_ms[sl]
    ttft = fst - arr
    tokens = float(arr.size * svc.output_tokens)
    per_tpot = tpot = (fin - fst) / max(svc.output_tokens - 1, 1)
    if svc.output_lengths is not None:
        # each request's own (end - first) / (n - 1); the statistics over those of two or
        # more tokens, as vLLM's bench computes TPOT
        n_i = svc.request_outputs(n_requests)[sl]
        per_tpot = (fin - fst) / np.maximum(n_i - 1, 1)
        tpot = per_tpot[n_i > 1] if np.any(n_i > 1) else per_tpot
        tokens = float(np.sum(n_i))
    queue = adm - arr - svc.request_latency_ms   # the wait at the engine, not the way there
    e2e = fin - arr
    span_s = (steady_span_s(e2e, concurrency) if phased and concurrency is not None
              else max((float(np.max(fin)) - float(np.min(arr))) / 1e3, 1e-9))
    ok = (ttft <= slo_ttft_ms) & (per_tpot <= slo_tpot_ms)
    sat_rate = svc.saturation_rate_per_s
    return QueueResult(
        requests=int(arr.size), rate_per_s=rate_per_s, concurrency=concurrency,
        ttft_ms=quantiles(ttft), tpot_ms=quantiles(tpot), queue_ms=quantiles(queue),
        e2e_ms=quantiles(e2e), mean_queue_ms=float(np.mean(queue)),
        mean_e2e_ms=float(np.mean(e2e)),
        mean_ttft_ms=float(np.mean(ttft)), throughput_req_s=arr.size / span_s,
        output_tok_s=tokens / span_s, mean_tpot_ms=float(np.mean(tpot)),
        goodput_req_s=float(np.sum(ok)) / span_s, slo_met_share=float(np.mean(ok)),
        mean_running=float(np.sum(e2e)) / 1e3 / span_s, saturation_rate_per_s=sat_rate,
        saturated=rate_per_s is not None and rate_per_s >= sat_rate, slots=svc.slots,
        itl_ms=tr.gaps.quantiles(skip, end) if tr.gaps is not None else None,
        itl_mean_ms=tr.gaps.mean(skip, end) if tr.gaps is not None else None,
        preemptions=tr.preemptions, max_running=tr.max_running,
        ttft_met_share=float(np.mean(ttft <= slo_ttft_ms)),
        tpot_met_share=float(np.mean(per_tpot <= slo_tpot_ms)),
    )


def sweep(svc: ServiceModel, rates_per_s: Sequence[float], *, n_requests: int = 600,
          seed: int = 0, slo_ttft_ms: float = math.inf, slo_tpot_ms: float = math.inf
          ) -> list[QueueResult]:
    """`simulate` at each arrival rate (same seed), for TTFT-vs-load curves."""
    return [simulate(svc, rate_per_s=r, n_requests=n_requests, seed=seed,
                     slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms) for r in rates_per_s]
