"""Calibration files: save, load and list fitted calibrations as TOML (F11, docs/calibration.md).

A calibration is saved as `<folder>/NAME.toml` (`to_toml`; written to a temporary file, then
renamed). Pages and URLs name a calibration only by a *name* (`check_name`, `named_path`,
`save_named`, `load_named`: never a path, docs/reliability.md); the command line also takes
a path (`calibration_path`, `save`, `load`). Names are looked up in the workspace's folder,
then the bundled one (`calibration_dirs`, docs/configuration.md). `load` checks every knob
against its bounds and says which file is wrong.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import tomli_w

from capacity import workspace
from capacity.errors import InputError
from capacity.fit.calibration import KNOBS, Calibration, FitPoint, PointKind
from capacity.fit.calibration_problem import BOUNDS
from capacity.model.basis import RESERVED_NAMES
from capacity.model.roofline import step_method
from capacity.model.speculative import parse_draft
from capacity.untrusted import loads_toml, read_utf8


def calibration_dirs() -> list[Path]:
    """Where calibrations are looked up by name, first match wins: the workspace's folder
    ($CAPACITY_CALIBRATIONS_DIR or `<workspace>/calibrations`), then the bundled, read-only
    one (docs/configuration.md). From a checkout both are `data/calibrations`."""
    mine, bundled = workspace.calibrations_dir(), workspace.bundled_calibrations_dir()
    return [mine] if mine.resolve() == bundled.resolve() else [mine, bundled]


NAME_MAX_CHARS = 100
"""Longest calibration name (a file name inside the calibrations folder)."""
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_name(name: str) -> str:
    """`name` if it is a calibration *name*, else InputError saying what a name is.

    A name is 1-100 of `[A-Za-z0-9._-]` (ASCII), not starting with '.' (so never '.' or '..'
    nor a hidden file) and not ending in '.toml': it can only ever name `<folder>/NAME.toml`.
    Everything that comes from a page or a URL is checked with this (docs/reliability.md)."""
    if name.lower() in RESERVED_NAMES:
        raise InputError(f"'{name}' names a prediction basis (the spec sheet, the chapter's "
                         "assumptions); give the calibration another name, e.g. rtx-4090-vllm")
    if (not name or len(name) > NAME_MAX_CHARS or not set(name) <= _NAME_CHARS
            or name.startswith(".") or name.lower().endswith(".toml")):
        shown = name if len(name) <= 60 else name[:60] + "..."
        raise InputError(f"calibration name '{shown}' must be 1-{NAME_MAX_CHARS} letters, "
                         "digits, '-', '_' or '.', not starting with '.' nor ending in .toml "
                         "(it names a file in the calibrations folder), e.g. rtx-4090-vllm")
    return name


def named_path(name: str, directory: Path | None = None, *, for_writing: bool = False) -> Path:
    """`<folder>/NAME.toml` for a calibration *name* (`check_name`; never a path).

    The folder is `directory` when given; else, to write, the workspace's calibrations folder
    ($CAPACITY_CALIBRATIONS_DIR); to read, the first of `calibration_dirs()` that holds
    NAME.toml (the workspace's when none does, so the error names where a save would go)."""
    check_name(name)
    if directory is not None:
        return directory / f"{name}.toml"
    folders = calibration_dirs()
    if not for_writing:
        for folder in folders:
            if (folder / f"{name}.toml").is_file():
                return folder / f"{name}.toml"
    return folders[0] / f"{name}.toml"


def calibration_path(name_or_path: str | Path, directory: Path | None = None, *,
                     for_writing: bool = False) -> Path:
    """For the command line (a user's own shell): `NAME` -> `named_path(NAME)`; anything with
    a slash or ending in `.toml` is a path. Pages and URLs use `named_path`, never this."""
    text = str(name_or_path)
    if "/" in text or "\\" in text or text.endswith(".toml"):
        if for_writing and not text.endswith(".toml"):   # as the help says: a .toml path
            raise InputError(f"--save '{text[:60]}': a path must end in .toml (or give a "
                             "name: letters, digits, '-', '_' and '.')")
        return Path(text)
    try:
        return named_path(text, directory, for_writing=for_writing)
    except InputError:
        raise InputError(f"calibration name '{text[:60]}' may hold only letters, digits, '-', "
                         "'_' and '.' (or give a path ending in .toml)") from None


def saved_calibrations(directory: Path | None = None) -> list[str]:
    """Names of the calibrations saved under `directory` (default: every folder of
    `calibration_dirs()`, the workspace's and the bundled ones); a file whose stem is not a
    name (`check_name`, e.g. `x.toml.toml`) is not listed, since no page could load it."""
    folders = [directory] if directory is not None else calibration_dirs()
    return sorted({p.stem for d in folders if d.is_dir() for p in d.glob("*.toml")
                   if _is_name(p.stem)})


def _is_name(text: str) -> bool:
    try:
        check_name(text)
    except InputError:
        return False
    return True


def to_toml(cal: Calibration) -> str:
    """The calibration as TOML text (None values are left out)."""
    doc: dict[str, Any] = {
        "name": cal.name, "model": cal.model, "gpu": cal.gpu, "engine": cal.engine,
        **({"models": list(cal.models)} if cal.models else {}),
        **({"split_ridge_ms": cal.split_ridge_ms} if cal.split_ridge_ms is not None else {}),
        **({"step_method": cal.step_method} if cal.step_method else {}),
        "created": cal.created, "inputs": cal.inputs, "holdout_method": cal.holdout_method,
        "notes": [str(n) for n in cal.notes],
        "knobs": {n: getattr(cal, n) for n in (*KNOBS, "overhead_gb")
                  if getattr(cal, n) is not None},
        "std": dict(cal.std), "identifiability": dict(cal.identifiability),
        "settings": dict(cal.settings),
        "points": [{k: v for k, v in p.__dict__.items() if v is not None} for p in cal.points],
    }
    if cal.draft:  # speculative decoding: the draft and its acceptance length (tokens per step)
        doc["draft"] = {k: v for k, v in (
            ("key", cal.draft), ("acceptance_length", cal.acceptance_length),
            ("fitted", cal.acceptance_fitted), ("std", cal.acceptance_std),
            ("measured", cal.acceptance_measured)) if v is not None}
    return tomli_w.dumps(doc)


def _draft_fields(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """A file's [draft] table as Calibration fields ({} without one); InputError naming the
    file when its key is not KIND:K or an acceptance length is outside 1..K+1 tokens."""
    d = doc.get("draft")
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise InputError(f"{path}: [draft] must be a table")
    kind, depth = parse_draft(str(d.get("key", "")))
    if kind == "none":
        raise InputError(f"{path}: [draft] needs a key KIND:K, e.g. eagle:3")
    out: dict[str, Any] = {"draft": f"{kind}:{depth}"}
    for name, field in (("acceptance_length", "acceptance_length"), ("fitted", "acceptance_fitted"),
                        ("measured", "acceptance_measured")):
        v = d.get(name)
        if v is not None:
            if not (isinstance(v, int | float) and 1.0 <= v <= depth + 1):
                raise InputError(f"{path}: [draft] {name} = {v!r} is outside [1, {depth + 1}]")
            out[field] = float(v)
    sd = d.get("std")
    if sd is not None:
        if not (isinstance(sd, int | float) and 0.0 <= sd <= depth + 1):
            raise InputError(f"{path}: [draft] std = {sd!r} is outside [0, {depth + 1}]")
        out["acceptance_std"] = float(sd)
    return out


def _write(cal: Calibration, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(to_toml(cal), encoding="utf-8")
    tmp.replace(path)
    return path


def save(cal: Calibration, name_or_path: str | Path | None = None,
         directory: Path | None = None) -> Path:
    """Write the calibration as TOML to a name or a path (the command line's --save); returns
    the path. Never overwrites a file with a half-written one (temporary file, then rename).
    Pages use `save_named`."""
    return _write(cal, calibration_path(name_or_path or cal.name, directory, for_writing=True))


def save_named(cal: Calibration, name: str, directory: Path | None = None) -> Path:
    """Write the calibration as `<folder>/NAME.toml`, NAME a name (`check_name`), the folder
    `directory` or the workspace's calibrations folder: nothing is written anywhere else."""
    folder = directory if directory is not None else workspace.calibrations_dir()
    path = named_path(name, folder, for_writing=True)
    if path.resolve().parent != folder.resolve():  # belt and braces: a name is one file name
        raise InputError(f"calibration name '{name}' does not name a file in {folder}")
    return _write(cal, path)


def _shown_name(name: object, path: Path) -> str:
    """The name a loaded calibration goes by: its file's `name` where that is a name
    (`check_name`), else the file's own (its stem). A file is text anyone with the folder can
    edit, and every page shows a calibration's name in its captions: a `name` such as
    `![x](http://host/)` made each browser that opened it fetch that image."""
    return name if isinstance(name, str) and _is_name(name) else path.stem


def load_named(name: str, directory: Path | None = None) -> Calibration:
    """Read a saved calibration by name only (`check_name`): what pages and URLs use."""
    return load(named_path(name, directory), directory)


def load(name_or_path: str | Path, directory: Path | None = None) -> Calibration:
    """Read a calibration saved by `save` (a name or a path, the command line's
    --calibration); InputError naming the file on anything wrong."""
    path = calibration_path(name_or_path, directory)
    try:
        doc = loads_toml(read_utf8(path))
    except FileNotFoundError:
        by_name = directory is None and path.parent in calibration_dirs()
        known = saved_calibrations(None if by_name else path.parent)
        raise InputError(f"no calibration at {path}" + (f" (saved: {', '.join(known)})"
                         if known else "; fit one with `capacity calibrate ... --save NAME`")
                         ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path}: not a readable calibration file ({e})") from None
    try:
        knobs = doc.get("knobs", {})
        if not isinstance(knobs, dict):
            raise InputError(f"{path}: [knobs] must be a table, got {knobs!r:.40}")
        for n, v in knobs.items():
            if n not in (*KNOBS, "overhead_gb"):
                raise InputError(f"{path}: unknown knob '{n}'")
            lo, hi = BOUNDS.get(n, (0.0, math.inf))
            if not (isinstance(v, int | float) and lo <= v <= hi):
                raise InputError(f"{path}: knob {n} = {v!r} is outside [{lo:g}, {hi:g}]")
        pts = tuple(FitPoint(**{**p, "kind": PointKind(p["kind"])}) for p in doc.get("points", []))
        cal = Calibration(
            name=_shown_name(doc.get("name"), path), model=str(doc["model"]), gpu=str(doc["gpu"]),
            engine=str(doc.get("engine", "")), std=tuple(doc.get("std", {}).items()),
            step_method=(step_method(str(doc["step_method"])).value if "step_method" in doc
                         else ""),
            identifiability=tuple((str(k), float(v))
                                  for k, v in doc.get("identifiability", {}).items()),
            points=pts, holdout_method=str(doc.get("holdout_method", "")),
            created=str(doc.get("created", "")), inputs=str(doc.get("inputs", "")),
            settings=tuple((str(k), str(v)) for k, v in doc.get("settings", {}).items()),
            notes=tuple(str(n) for n in doc.get("notes", [])))
        models = doc.get("models", [])
        if not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
            raise InputError(f"{path}: models must be a list of model keys")
        ridge = doc.get("split_ridge_ms")
        if ridge is not None and not (isinstance(ridge, int | float) and ridge > 0):
            raise InputError(f"{path}: split_ridge_ms = {ridge!r} must be a positive number (ms)")
        values: dict[str, Any] = {n: float(v) for n, v in knobs.items()}
        values["models"] = tuple(models)
        values["split_ridge_ms"] = None if ridge is None else float(ridge)
        return replace(cal, **values, **_draft_fields(doc, path))
    except InputError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: not a calibration file (missing or bad field {e})") from None
