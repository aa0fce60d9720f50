"""Published measurements shipped as data (`data/reference/published.csv`, bundled read-only:
`capacity.workspace.reference_dir`), as measured points.

The CSV is long-form, one metric per row, each with its `source` (a URL or a repository path at
a commit), its `date` (when the source published the figures, YYYY-MM-DD or YYYY-MM; where the
source states none, the day it was recorded here, and the notes say so), its `stat` (`mean` or
`median`, the statistic the source reports) and `notes`. Rows of one source, GPU, model, weight
format, engine, prompt/output length and concurrency become one `MeasuredPoint`: `ttft_ms`;
`tpot_ms` (or `itl_ms`, the inter-token latency, which equals TPOT when every chunk holds one
token; a median is preferred to a mean, since the median step is what the decode step model
predicts); `agg_output_tps` as `output_tok_s`; `e2e_ms` (a request's end-to-end latency) gives
a TPOT when nothing else does (`tpot_from_e2e`). Each sweep also keeps its rows as stated
(`ReferenceSweep.stated`), which `capacity validate` compares one by one. Where a source gives
no TPOT it is derived from throughput and TTFT
(`tpot_from_throughput`) and the point's source says so. `data/reference/keys.toml` maps the
names in the CSV to catalog keys; unmapped names stay as they are (overlay only).

An optional `added` column (YYYY-MM-DD) marks rows added after the typical knobs
(data/engines.toml) were derived: such a sweep is held out (`ReferenceSweep.added`), and the
scorecard reports it apart (issue 25). Blank or absent: a row the knobs may rest on.

An optional `run_prompts` column gives the number of requests of a closed-loop run whose every
request had the sweep's prompt and output lengths (a random dataset of fixed lengths, run to
the end: the stated token totals are exactly the count x the lengths). `capacity validate`
then predicts each level as that run (`ReferenceSweep.run_prompts`). Blank or absent: the
run is not stated; the steady closed loop.

An optional `level_prompts` column, on a throughput row (`agg_output_tps`) only, gives the
number of requests the level ran (the bench's `--num-prompts`): a bench's throughput is its
run's output tokens over the run's duration, so `capacity validate` predicts that row as the
run, from one burst on an idle server, the drain included
(`capacity.plan.closed_loop.as_run_tok_s`), and the level's other rows from the steady
closed loop. Blank or absent: the steady closed loop's throughput.

Optional `prompt_cap` and `output_cap` columns give the longest prompt and output of a run whose
lengths varied about the stated means (a random dataset that draws each length on 1..L, as
`sglang.bench_serving --dataset-name random` does; ShareGPT as vLLM's bench samples it, prompts
up to 1,024 tokens and prompt + reply up to 2,048): the event model then gives each request its
own lengths, the maximum-entropy lengths on 1..cap with the stated mean (`RunShape.lengths`;
uniform on 1..L where the mean is (L + 1) / 2). Blank or absent: every request at the mean.
"""

from __future__ import annotations

import csv
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from capacity import workspace
from capacity.errors import CatalogError
from capacity.fit.measured import MeasuredPoint, tpot_from_throughput
from capacity.model.output_lengths import maxent_run
from capacity.untrusted import loads_toml

REFERENCE_CSV = workspace.reference_dir() / "published.csv"
REFERENCE_KEYS = workspace.reference_dir() / "keys.toml"
COLUMNS = ("source", "date", "gpu", "model", "params_b", "weight_format", "engine",
           "prompt_tokens", "output_tokens", "concurrency", "metric", "stat", "value", "unit",
           "notes")
METRICS = {"ttft_ms": "ms", "itl_ms": "ms", "tpot_ms": "ms", "agg_output_tps": "tokens/s",
           "e2e_ms": "ms"}
STATS = ("mean", "median")
_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
_ADDED = re.compile(r"^\d{4}-\d{2}-\d{2}$")
RUN_PROMPTS = (10, 100_000)
"""The `run_prompts` a row may give (the event model's run needs at least 10 requests)."""


@dataclass(frozen=True, kw_only=True)
class RunShape:
    """How a source's closed-loop levels ran, where it says (published.csv's optional
    columns): `run_prompts` requests a level from one burst (None: the steady closed loop),
    prompts and outputs that varied on 1..`prompt_cap` and 1..`output_cap` tokens about the
    stated means (None: every request at the mean)."""

    run_prompts: int | None = None
    prompt_cap: int | None = None
    output_cap: int | None = None
    level_prompts: tuple[tuple[float, int], ...] = ()
    """(concurrency, requests) of the levels whose throughput is stated for a run of that
    many requests (the CSV's `level_prompts`): predicted as that run."""

    def requests_at(self, concurrency: float) -> int | None:
        """The requests the level at `concurrency` ran, where its throughput row says."""
        return dict(self.level_prompts).get(float(concurrency))

    def lengths(self, prompt_tokens: float, output_tokens: float, n: int
                ) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        """Each of `n` requests' prompt and output (tokens) where they varied: the
        maximum-entropy lengths on 1..cap with the stated mean (`maxent_run`, seeded 0 for
        prompts, 1 for outputs), or None where they did not. Example: mean 495.85 on 1..1,000
        (SGLang's random dataset at --random-input-len 1000), 200 requests: from 3 to 998
        tokens, mean 495.8."""
        return (None if self.prompt_cap is None
                else maxent_run(float(prompt_tokens), self.prompt_cap, n, 0),
                None if self.output_cap is None
                else maxent_run(float(output_tokens), self.output_cap, n, 1))


@dataclass(frozen=True, kw_only=True)
class StatedValue:
    """One row of the CSV as its source states it: a metric (a key of METRICS), the statistic
    (`mean` or `median`) and the value in the metric's unit, at one concurrency."""

    concurrency: float
    metric: str
    stat: str
    value: float


@dataclass(frozen=True, kw_only=True)
class ReferenceSweep:
    """One published sweep: a model on a GPU and engine at one prompt/output length."""

    source: str
    gpu_name: str
    model_name: str
    weight_format: str
    engine: str
    gpu_key: str | None
    model_key: str | None
    gpus: int
    tp: int
    prompt_tokens: float
    output_tokens: float
    points: tuple[MeasuredPoint, ...]
    date: str = ""
    stated: tuple[StatedValue, ...] = ()
    engine_text: str = ""
    """The engine column as the CSV spells it, settings included ('vLLM 0.9.1
    (--enforce-eager)'); `engine` drops the parenthesis."""
    added: str = ""
    """The day the sweep's rows were added (the CSV's optional `added` column), '' for the rows
    the typical knobs were derived on; an added sweep is held out of them (`is_added`)."""
    run_prompts: int | None = None
    """Requests per level of a run whose requests all had the sweep's lengths (the CSV's
    optional `run_prompts` column): each level is predicted as that run, from one burst, every
    request counted (`capacity.fit.validate.queued_levels`); None: the steady closed loop."""
    prompt_cap: int | None = None
    """The longest prompt of a run whose prompts varied about `prompt_tokens` (the CSV's
    optional `prompt_cap`, tokens); None: every prompt at the mean."""
    output_cap: int | None = None
    """The longest output of a run whose outputs varied about `output_tokens` (`output_cap`,
    tokens); None: every output at the mean."""
    level_prompts: tuple[tuple[float, int], ...] = ()
    """(concurrency, requests) where a throughput row states its level's request count (the
    CSV's `level_prompts`): that throughput is predicted as the run."""

    @property
    def run(self) -> RunShape:
        """How the source ran its levels (`RunShape`)."""
        return RunShape(run_prompts=self.run_prompts, prompt_cap=self.prompt_cap,
                        output_cap=self.output_cap, level_prompts=self.level_prompts)

    @property
    def is_added(self) -> bool:
        """True for a sweep added after the typical knobs were derived (held out of them)."""
        return bool(self.added)

    @property
    def cuda_graphs(self) -> bool:
        """False where the row states `--enforce-eager` (vLLM without CUDA graphs)."""
        return "enforce-eager" not in self.engine_text.lower()

    @property
    def label(self) -> str:
        """A short name for menus and legends."""
        return (f"{self.model_name} ({self.weight_format.split(' ')[0]}) on {self.gpu_name}, "
                f"{self.engine}, {self.prompt_tokens:g} in / {self.output_tokens:g} out")


FROM_THROUGHPUT = " (TPOT derived from aggregate tok/s and TTFT)"
FROM_E2E = " (TPOT derived from end-to-end latency)"
"""Appended to a point's `source` when its TPOT is derived, not stated."""


def tpot_from_e2e(*, e2e_ms: float, output_tokens: float, ttft_ms: float | None) -> float | None:
    """TPOT in ms from a request's end-to-end latency: E2E = TTFT + (n - 1) x TPOT, so
    (E2E - TTFT) / (n - 1); without a TTFT, E2E / (n - 1) (a slight overestimate: the prefill
    counts as decode). None when n <= 1 or the result is not positive. Example: 833.4 ms for
    128 tokens, no TTFT -> 6.56 ms."""
    if output_tokens <= 1:
        return None
    tpot = (e2e_ms - (ttft_ms or 0.0)) / (output_tokens - 1)
    return tpot if tpot > 0 else None


def _engine(text: str) -> str:
    """'NVIDIA NIM 1.8.0 (TensorRT-LLM/vLLM backend per profile)' -> 'NVIDIA NIM 1.8.0'."""
    return text.split(" (")[0].strip()


def _keys(path: Path) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], str]]:
    try:
        data = loads_toml(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CatalogError(f"{path}: cannot read the reference key map ({e})") from None
    gpus = {str(g["name"]): g for g in data.get("gpu", [])}
    models = {(str(m["name"]), str(m["weight_format"])): str(m["key"])
              for m in data.get("model", [])}
    return gpus, models


def _float(path: Path, line: int, name: str, raw: str) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise CatalogError(f"{path}: line {line}: {name} = {raw!r} is not a number") from None
    if not v > 0:
        raise CatalogError(f"{path}: line {line}: {name} = {raw!r} must be > 0")
    return v


def load_reference(path: Path | str = REFERENCE_CSV,
                   keys_path: Path | str = REFERENCE_KEYS) -> list[ReferenceSweep]:
    """Every published sweep in the CSV, its points sorted by concurrency."""
    return list(_load(Path(path), Path(keys_path)))


@cache
def _load(path: Path, keys_path: Path) -> tuple[ReferenceSweep, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogError(f"{path}: cannot read the published measurements ({e})") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise CatalogError(f"{path}: missing column(s) {', '.join(missing)}")
    gpu_map, model_map = _keys(keys_path)
    groups: dict[str, dict[str, Any]] = {}
    for line, row in enumerate(reader, start=2):
        metric = row["metric"]
        if metric not in METRICS:
            raise CatalogError(f"{path}: line {line}: unknown metric '{metric}' "
                               f"(known: {', '.join(METRICS)})")
        if row["unit"] != METRICS[metric]:
            raise CatalogError(f"{path}: line {line}: {metric} must be in {METRICS[metric]}, "
                               f"got '{row['unit']}'")
        if not row["source"].strip():
            raise CatalogError(f"{path}: line {line}: every row needs a source")
        if not _DATE.match(row["date"].strip()):
            raise CatalogError(f"{path}: line {line}: date = {row['date']!r} must be "
                               "YYYY-MM-DD or YYYY-MM (when the source published the figures)")
        stat = row["stat"].strip() or "mean"
        if stat not in STATS:
            raise CatalogError(f"{path}: line {line}: stat = {stat!r} must be one of "
                               f"{', '.join(STATS)}")
        added = (row.get("added") or "").strip()
        if added and not _ADDED.match(added):
            raise CatalogError(f"{path}: line {line}: added = {added!r} must be YYYY-MM-DD "
                               "(the day the row was added) or blank")
        run = _run_prompts(path, line, (row.get("run_prompts") or "").strip())
        level_run = _run_prompts(path, line, (row.get("level_prompts") or "").strip(),
                                 "level_prompts")
        if level_run is not None and metric != "agg_output_tps":
            raise CatalogError(f"{path}: line {line}: level_prompts is the request count of a "
                               f"run whose throughput the row states: give it on an "
                               f"agg_output_tps row, not {metric}")
        caps = tuple(_cap(path, line, c, (row.get(c) or "").strip(),
                          _float(path, line, m, row[m]))
                     for c, m in (("prompt_cap", "prompt_tokens"), ("output_cap", "output_tokens")))
        engine = _engine(row["engine"])
        sweep_key = (row["source"], row["gpu"], row["model"], row["weight_format"], engine,
                     row["prompt_tokens"], row["output_tokens"])
        g = groups.setdefault("\x1f".join(sweep_key), {"key": sweep_key, "levels": {},
                                                        "date": row["date"].strip(),
                                                        "engine_text": row["engine"].strip(),
                                                        "stated": [], "added": added,
                                                        "run_prompts": run, "caps": caps,
                                                        "level_prompts": {}})
        if g["added"] != added:
            raise CatalogError(f"{path}: line {line}: added = {added!r}, but this sweep's "
                               f"other rows say {g['added']!r} (a sweep is added whole)")
        if g["run_prompts"] != run:
            said = ["blank" if x is None else str(x) for x in (run, g["run_prompts"])]
            raise CatalogError(f"{path}: line {line}: run_prompts = {said[0]}, but this "
                               f"sweep's other rows say {said[1]} (one run per sweep)")
        if g["caps"] != caps:
            raise CatalogError(f"{path}: line {line}: prompt_cap and output_cap must be the "
                               "same on every row of a sweep (one run per sweep)")
        conc = _float(path, line, "concurrency", row["concurrency"])
        value = _float(path, line, "value", row["value"])
        if level_run is not None:
            if level_run != g["level_prompts"].setdefault(conc, level_run):
                raise CatalogError(f"{path}: line {line}: level_prompts = {level_run}, but "
                                   f"this level's other throughput row says "
                                   f"{g['level_prompts'][conc]} (one run per level)")
        level = g["levels"].setdefault(conc, {})
        if stat == "median" or metric not in level:  # a median wins over a mean
            level[metric] = value
            level[metric + ":stat"] = stat
        g["stated"].append(StatedValue(concurrency=conc, metric=metric, stat=stat, value=value))
    sweeps = []
    for g in groups.values():
        source, gpu_name, model_name, wf, engine, p_raw, o_raw = g["key"]
        prompt, out = float(p_raw), float(o_raw)
        gm = gpu_map.get(gpu_name)
        mkey = model_map.get((model_name, wf))
        points = []
        for conc in sorted(g["levels"]):
            m = g["levels"][conc]
            tpot_metric = next((k for k in ("tpot_ms", "itl_ms")
                                if k in m and m[k + ":stat"] == "median"),
                               "tpot_ms" if "tpot_ms" in m else "itl_ms")
            tpot = m.get(tpot_metric)
            stat = m[tpot_metric + ":stat"] if tpot is not None else "mean"
            note = source
            if tpot is None and "agg_output_tps" in m:
                tpot = tpot_from_throughput(concurrency=conc, output_tokens=out,
                                            output_tok_s=m["agg_output_tps"],
                                            ttft_ms=m.get("ttft_ms"))
                note = source + FROM_THROUGHPUT
            elif tpot is None and "e2e_ms" in m:
                tpot = tpot_from_e2e(e2e_ms=m["e2e_ms"], output_tokens=out,
                                     ttft_ms=m.get("ttft_ms"))
                stat = m["e2e_ms:stat"]
                note = source + FROM_E2E
            points.append(MeasuredPoint(
                model=mkey or model_name, gpu=str(gm["key"]) if gm else gpu_name,
                engine=engine, gpus=int(gm["gpus"]) if gm else 1,
                tp=int(gm["tp"]) if gm else 1, concurrency=conc,
                context_tokens=int(round(prompt + out)), prompt_tokens=prompt,
                output_tokens=out, tpot_ms=tpot, ttft_ms=m.get("ttft_ms"),
                output_tok_s=m.get("agg_output_tps"), stat=stat, source=note))
        sweeps.append(ReferenceSweep(
            source=source, gpu_name=gpu_name, model_name=model_name, weight_format=wf,
            engine=engine, gpu_key=str(gm["key"]) if gm else None, model_key=mkey,
            gpus=int(gm["gpus"]) if gm else 1, tp=int(gm["tp"]) if gm else 1,
            prompt_tokens=prompt, output_tokens=out, points=tuple(points), date=g["date"],
            engine_text=g["engine_text"], added=g["added"], run_prompts=g["run_prompts"],
            prompt_cap=g["caps"][0], output_cap=g["caps"][1],
            level_prompts=tuple(sorted(g["level_prompts"].items())),
            stated=tuple(sorted(g["stated"], key=lambda v: (v.concurrency, v.metric, v.stat)))))
    return tuple(sweeps)


def _run_prompts(path: Path, line: int, text: str, column: str = "run_prompts") -> int | None:
    """The optional `run_prompts` (or `level_prompts`) cell: blank, or a whole number in
    `RUN_PROMPTS`."""
    if not text:
        return None
    lo, hi = RUN_PROMPTS
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise CatalogError(f"{path}: line {line}: {column} = {text!r} must be a whole "
                           f"number of requests, {lo:,}..{hi:,}, or blank")
    return int(text)


def _cap(path: Path, line: int, column: str, text: str, mean: float) -> int | None:
    """An optional `prompt_cap` or `output_cap` cell: blank, or a whole number of tokens at
    least the stated mean it caps (`mean`, the row's `prompt_tokens` or `output_tokens`)."""
    if not text:
        return None
    if not text.isdigit() or int(text) < mean:
        raise CatalogError(f"{path}: line {line}: {column} = {text!r} must be a whole number "
                           f"of tokens, at least the stated mean ({mean:g}), or blank")
    return int(text)


def _matches(value: str | None, names: Iterable[str | None]) -> bool:
    if value is None:
        return True
    v = value.lower()
    return any(n is not None and v in n.lower() for n in names)


def select(sweeps: Iterable[ReferenceSweep], *, gpu: str | None = None,
           model: str | None = None, engine: str | None = None) -> list[ReferenceSweep]:
    """Sweeps whose GPU, model and engine contain the given text (catalog key or published
    name, case-insensitive); None matches everything."""
    return [s for s in sweeps
            if _matches(gpu, (s.gpu_key, s.gpu_name))
            and _matches(model, (s.model_key, s.model_name))
            and _matches(engine, (s.engine,))]


def reference_points(*, gpu: str | None = None, model: str | None = None,
                     engine: str | None = None) -> list[MeasuredPoint]:
    """The points of every selected published sweep."""
    return [p for s in select(load_reference(), gpu=gpu, model=model, engine=engine)
            for p in s.points]
