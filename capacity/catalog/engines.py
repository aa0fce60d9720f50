"""Engine profiles: how vLLM, SGLang and llama.cpp schedule, as data (data/engines.toml).

One profile says how many sequences decode together (`max_seqs`), how many tokens a step may
carry (`token_budget`, 0 = whole prompts), whether decode tokens and prompt chunks share a step
(`mixed`), how KV is admitted (`kv_admission`: the whole context reserved per request, or the
tokens a request holds in pages of `kv_block_tokens`, with `reserve_output_share` of its
remaining output reserved ahead) and whether a request is preempted and recomputed when the
pages run out (`preempt`). Defaults that depend on the GPU's memory are `tier`s. The simulated
endpoint (`capacity.sim.scheduler`), the event model (`capacity.plan.queueing`) and the planner
follow the same profile; docs/method.md ("Engine profiles") has what each models and its
sources. The `[profile.*]` tables sit beside the typical-efficiency tables of the same file
(`capacity.fit.planning`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

from capacity import workspace
from capacity.errors import CatalogError, InputError
from capacity.untrusted import loads_data_toml, read_utf8

ENGINES_FILE = "engines.toml"
PROFILE_TABLE = "profile"
"""The top-level table of data/engines.toml that holds the profiles."""
DEFAULT_ENGINE = "chapter"
"""The profile used unless one is named: the chapter's scheduling (every existing number)."""
KV_ADMISSIONS = ("context", "tokens")

KvAdmission = Literal["context", "tokens"]
KV_ATTENTIONS = ("sequence", "unified")
KvAttention = Literal["sequence", "unified"]


@dataclass(frozen=True, kw_only=True)
class EngineTier:
    """Other defaults on GPUs with at least `min_memory_gb` (decimal GB) whose key contains
    none of `exclude`."""

    min_memory_gb: float
    exclude: tuple[str, ...]
    max_seqs: int
    token_budget_tokens: int


@dataclass(frozen=True, kw_only=True)
class EngineProfile:
    """How one engine schedules (see the module docstring)."""

    key: str
    name: str
    max_seqs: int
    """Sequences decoded together at most (max_num_seqs, max_running_requests, --parallel)."""
    token_budget_tokens: int
    """Tokens one step may carry (decode tokens included when `mixed`); 0 = whole prompts."""
    mixed: bool
    kv_admission: KvAdmission
    kv_block_tokens: int
    reserve_output_share: float
    preempt: bool
    source: str
    as_of: str
    tiers: tuple[EngineTier, ...] = ()
    kv_attention: KvAttention = "sequence"
    """How a pass's attention spans the KV cache: each sequence over its own cells
    ("sequence": vLLM's and SGLang's paged attention), or every token over every cell in use,
    masked ("unified": llama.cpp's one KV buffer, `forward_pass.unified_kv_extra_pairs`)."""
    ubatch_tokens: int = 512
    """With "unified": the tokens one attention ubatch carries (llama.cpp's n_ubatch)."""
    kv_pad_tokens: int = 256
    """With "unified": the cells attended round up to a multiple of this (llama.cpp: 256)."""
    eager_layer_ms: float = 0.0
    """ms every forward pass pays per layer when the engine runs without CUDA graphs (vLLM's
    --enforce-eager, SGLang's --disable-cuda-graph: a launch per kernel from Python, and vLLM's
    unfused kernels); 0: the engine has no such mode here (docs/method.md, "Eager mode")."""
    prefill_eager_layer_ms: float = 0.0
    """ms a forward pass that carries prompt tokens pays per layer, once, when the engine
    launches its prefill kernels without CUDA graphs (SGLang before `prefill_graphs_since`, or
    with --disable-cuda-graph; `forward_pass.prefill_eager_scenario`); 0: none here."""
    prefill_graphs_since: str = ""
    """The first release that captures CUDA graphs for prefill passes by default (SGLang:
    piecewise CUDA graphs, "0.5.10"): an earlier version pays `prefill_eager_layer_ms`
    (`prefill_runs_eager`); "": no such release here."""
    prefill_graphs_merged: str = ""
    """The day (YYYY-MM-DD) that default was merged (SGLang: "2026-03-02"): a run dated before
    it ran an earlier release, whatever its version (`prefill_runs_eager`)."""
    schedules_ahead_since: str = ""
    """The first release that schedules one step ahead by default (vLLM's async scheduling,
    "0.14.0"; SGLang's overlap scheduler, "0.4.0"): step n + 1's batch is fixed when step n
    starts, so a request that arrives while a step runs joins the step after the next one
    (`schedules_ahead`; the event model's and the simulated engine's admission, the closed
    loop's closed form, the Planner's analytic path); "": the engine waits for each step before
    it schedules the next (docs/method.md, "Scheduled one step ahead")."""
    schedules_ahead_released: str = ""
    """The day (YYYY-MM-DD) that release came out (vLLM 0.14.0: "2026-01-17"; SGLang 0.4.0:
    "2024-12-04"): a run dated before it, its version not stated, ran an earlier release
    (`schedules_ahead`)."""
    schedules_ahead_name: str = ""
    """What the engine calls scheduling ahead ("async scheduling", "overlap scheduler"), for
    the messages that say it is off."""
    schedules_ahead_off: str = ""
    """The engine's own flag that turns it off ("--no-async-scheduling",
    "--disable-overlap-schedule"; `capacity plan` and `capacity sim-server` take both)."""

    def __post_init__(self) -> None:
        if self.max_seqs < 1:
            raise CatalogError(f"engine profile {self.key}: max_seqs must be >= 1")
        if self.token_budget_tokens < 0:
            raise CatalogError(f"engine profile {self.key}: token_budget must be >= 0")
        if self.mixed and self.token_budget_tokens <= 0:
            raise CatalogError(f"engine profile {self.key}: a mixed step needs a token budget")
        if self.kv_admission not in KV_ADMISSIONS:
            raise CatalogError(f"engine profile {self.key}: kv_admission must be one of "
                               f"{', '.join(KV_ADMISSIONS)}, got {self.kv_admission!r}")
        if self.kv_block_tokens < 1:
            raise CatalogError(f"engine profile {self.key}: kv_block_tokens must be >= 1")
        if not (math.isfinite(self.reserve_output_share) and 0 <= self.reserve_output_share <= 1):
            raise CatalogError(f"engine profile {self.key}: reserve_output_share must be in [0, 1]")
        if self.kv_attention not in KV_ATTENTIONS:
            raise CatalogError(f"engine profile {self.key}: kv_attention must be one of "
                               f"{', '.join(KV_ATTENTIONS)}, got {self.kv_attention!r}")
        if self.ubatch_tokens < 1 or self.kv_pad_tokens < 1:
            raise CatalogError(f"engine profile {self.key}: ubatch_tokens and kv_pad_tokens "
                               "must be >= 1")
        for name, ms in (("eager_layer_ms", self.eager_layer_ms),
                         ("prefill_eager_layer_ms", self.prefill_eager_layer_ms)):
            if not (math.isfinite(ms) and ms >= 0):
                raise CatalogError(f"engine profile {self.key}: {name} must be >= 0")
        if self.prefill_graphs_since and version_tuple(self.prefill_graphs_since) is None:
            raise CatalogError(f"engine profile {self.key}: prefill_graphs_since must be a "
                               f"version such as 0.5.10, got {self.prefill_graphs_since!r}")
        for name, day in (("prefill_graphs_merged", self.prefill_graphs_merged),
                          ("schedules_ahead_released", self.schedules_ahead_released)):
            if day and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
                raise CatalogError(f"engine profile {self.key}: {name} must be a day such as "
                                   f"2026-03-02, got {day!r}")
        if self.schedules_ahead_since and not (self.schedules_ahead_name
                                               and self.schedules_ahead_off.startswith("--")):
            raise CatalogError(f"engine profile {self.key}: schedules_ahead_since needs "
                               "schedules_ahead_name and the engine's flag that turns it off, "
                               "schedules_ahead_off ('--...')")
        if self.schedules_ahead_since and version_tuple(self.schedules_ahead_since) is None:
            raise CatalogError(f"engine profile {self.key}: schedules_ahead_since must be a "
                               f"version such as 0.14.0, got {self.schedules_ahead_since!r}")
        if self.preempt and self.kv_admission != "tokens":
            raise CatalogError(f"engine profile {self.key}: preemption needs kv_admission "
                               "'tokens' (a reserved context never runs out)")

    def prefill_runs_eager(self, version: str, date: str = "") -> bool:
        """Whether a run of the engine's release `version` ('v0.5.3.post3', '0.5.6'), or, its
        version not stated, a run dated `date` ('2025-09-14 (run date)': YYYY-MM-DD first)
        launched its prefill kernels without CUDA graphs by default: a release before
        `prefill_graphs_since`, or a day before `prefill_graphs_merged` (no release had them
        then). False when neither is known (not assumed). Example (SGLang): '0.5.6' True,
        '0.5.10' False, ('lmsysorg/sglang:latest', '2025-09-14') True, ('not stated',
        'undated') False."""
        if self.prefill_eager_layer_ms <= 0:
            return False
        since = released_since(version, date, self.prefill_graphs_since,
                               self.prefill_graphs_merged)
        return since is False

    def schedules_ahead(self, version: str = "", date: str = "") -> bool:
        """Whether a run of the engine's release `version` ('vLLM 0.25.1', 'v0.11.0'), or, its
        version not stated, a run dated `date` (YYYY-MM-DD first), scheduled one step ahead
        by default (`schedules_ahead_since`): a release at or after it, or a day on or after
        `schedules_ahead_released`; neither known: the current release's default (True where
        the profile has such a release). Example (vLLM, 0.14.0 of 2026-01-17): '0.25.1' True,
        'v0.11.0' False, ('', '2025-10-15') False, ('not stated', 'undated') True; llama.cpp
        False."""
        if not self.schedules_ahead_since:
            return False
        since = released_since(version, date, self.schedules_ahead_since,
                               self.schedules_ahead_released)
        return since is not False

    @property
    def chunked(self) -> bool:
        """Prompts are cut into chunks of at most the token budget."""
        return self.token_budget_tokens > 0

    def for_gpu(self, gpu_key: str, memory_gb: float) -> EngineProfile:
        """The profile with the defaults of the largest tier this GPU reaches (no tiers left)."""
        chosen: EngineTier | None = None
        for tier in self.tiers:
            if memory_gb >= tier.min_memory_gb and not any(x in gpu_key.lower()
                                                           for x in tier.exclude):
                if chosen is None or tier.min_memory_gb >= chosen.min_memory_gb:
                    chosen = tier
        if chosen is None:
            return replace(self, tiers=())
        return replace(self, max_seqs=chosen.max_seqs,
                       token_budget_tokens=chosen.token_budget_tokens, tiers=())

    def with_max_seqs(self, max_seqs: int | None) -> EngineProfile:
        """The profile with an explicit max_seqs (None keeps the engine's default)."""
        if max_seqs is None:
            return self
        if max_seqs < 1:
            raise InputError(f"max-num-seqs must be >= 1, got {max_seqs}")
        return replace(self, max_seqs=max_seqs)


def released_since(version: str, date: str, since: str, day: str) -> bool | None:
    """Whether a run of release `version` (its first release number, `version_tuple`), or, its
    version not stated, a run dated `date` (YYYY-MM-DD first), came at or after release
    `since`, released on `day` (YYYY-MM-DD; '' not known): by the version where it has one,
    else by the date; None where neither tells. Example (since '0.14.0' of '2026-01-17'):
    'vLLM 0.25.1' True, 'v0.11.0' False, ('', '2025-10-15') False, ('latest', 'undated')
    None."""
    got, first = version_tuple(version), version_tuple(since)
    if got is not None and first is not None:
        return got >= first
    on = re.match(r"\d{4}-\d{2}-\d{2}", date.strip())
    if on and day:
        return on[0] >= day
    return None


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """The first release number in `text` as (major, minor, patch), a missing patch 0:
    'SGLang v0.5.3.post3' -> (0, 5, 3), '0.5.10' -> (0, 5, 10), 'v0.11.0' -> (0, 11, 0),
    '0.4' -> (0, 4, 0); None without one ('not stated', 'latest')."""
    m = re.search(r"(?<![\w.])v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip().lower())
    return None if m is None else (int(m[1]), int(m[2]), int(m[3] or 0))


def _tier(raw: Mapping[str, Any]) -> EngineTier:
    return EngineTier(min_memory_gb=float(raw["min_memory_gb"]),
                      exclude=tuple(str(x).lower() for x in raw.get("exclude", ())),
                      max_seqs=int(raw["max_seqs"]),
                      token_budget_tokens=int(raw["token_budget"]))


def parse_profiles(text: str, where: str = ENGINES_FILE) -> dict[str, EngineProfile]:
    """Every `[profile.KEY]` table of an engines file (CatalogError naming the bad one)."""
    data = loads_data_toml(text, where)
    out: dict[str, EngineProfile] = {}
    for key, raw in dict(data.get(PROFILE_TABLE, {})).items():
        try:
            admission = str(raw["kv_admission"])
            out[key] = EngineProfile(
                key=key, name=str(raw["name"]), max_seqs=int(raw["max_seqs"]),
                token_budget_tokens=int(raw["token_budget"]), mixed=bool(raw["mixed"]),
                kv_admission=admission,  # type: ignore[arg-type]  # checked in __post_init__
                kv_block_tokens=int(raw["kv_block_tokens"]),
                reserve_output_share=float(raw["reserve_output_share"]),
                preempt=bool(raw["preempt"]), source=str(raw["source"]),
                as_of=str(raw["as_of"]), tiers=tuple(_tier(t) for t in raw.get("tier", ())),
                kv_attention=str(raw.get("kv_attention", "sequence")),  # type: ignore[arg-type]
                ubatch_tokens=int(raw.get("ubatch_tokens", 512)),
                kv_pad_tokens=int(raw.get("kv_pad_tokens", 256)),
                eager_layer_ms=float(raw.get("eager_layer_ms", 0.0)),
                prefill_eager_layer_ms=float(raw.get("prefill_eager_layer_ms", 0.0)),
                prefill_graphs_since=str(raw.get("prefill_graphs_since", "")),
                prefill_graphs_merged=str(raw.get("prefill_graphs_merged", "")),
                schedules_ahead_since=str(raw.get("schedules_ahead_since", "")),
                schedules_ahead_released=str(raw.get("schedules_ahead_released", "")),
                schedules_ahead_name=str(raw.get("schedules_ahead_name", "")),
                schedules_ahead_off=str(raw.get("schedules_ahead_off", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"{where} [{PROFILE_TABLE}.{key}]: {exc!r} (needs name, "
                               "max_seqs, token_budget, mixed, kv_admission, kv_block_tokens, "
                               "reserve_output_share, preempt, source, as_of)") from None
    return out


@cache
def _profiles(path: Path) -> dict[str, EngineProfile]:
    return parse_profiles(read_utf8(path), str(path))


def profiles() -> dict[str, EngineProfile]:
    """The engine profiles: the catalog folder's engines.toml when it has any, else the
    bundled ones."""
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / ENGINES_FILE
        if path.is_file():
            found = _profiles(path)
            if found:
                return found
    raise CatalogError(f"no [{PROFILE_TABLE}.*] tables in {ENGINES_FILE}")


def engine_names() -> tuple[str, ...]:
    """Keys of the known profiles, the default first."""
    keys = sorted(profiles())
    return tuple([DEFAULT_ENGINE] * (DEFAULT_ENGINE in keys) + [k for k in keys if k != DEFAULT_ENGINE])


def engine_profile(engine: str = DEFAULT_ENGINE) -> EngineProfile:
    """One profile by key (InputError naming the known ones)."""
    known = profiles()
    key = engine.strip().lower().replace(".", "").replace("-", "")
    key = {"llamacppserver": "llamacpp", "vllmv1": "vllm"}.get(key, key)
    if key not in known:
        raise InputError(f"unknown engine '{engine}' (known: {', '.join(engine_names())})")
    return known[key]
