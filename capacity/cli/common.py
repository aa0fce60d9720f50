"""What every subcommand shares: the one argparse type for numeric flags, and strict JSON.

Every numeric flag of every subcommand is declared with `number(...)` or `whole(...)`: the value
must be finite and inside the flag's documented range, else argparse prints one line
(`capacity plan: error: argument --eff: ...`) and the command exits with code 2. The range is
shown in `--help` by the flag's own text and listed in docs/reliability.md.

`dumps` writes JSON that any strict parser reads: NaN and infinities become null (a value that
does not exist), never the `NaN`/`Infinity` tokens Python's json module writes by default.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from capacity.errors import InputError

MAX_BLOCK_SIZE = 4096
"""Largest paged-KV block a flag accepts, tokens (vLLM uses 16 to 128)."""
MAX_CONCURRENCY = 10_000_000
"""Most requests in flight a flag accepts (a concurrency list, a measured maximum)."""
MAX_GPUS_PER_DEPLOYMENT = 1024
"""Most GPUs (and the largest TP) one `plan` scenario may use."""


def _fmt(x: float) -> str:
    return f"{int(x):,}" if x == int(x) and abs(x) < 1e16 else f"{x:g}"


@dataclass(frozen=True, kw_only=True)
class Number:
    """An argparse `type=`: a finite number (float, or int when `integer`) within
    [min, max]; `min_open`/`max_open` exclude the bound itself. Raises
    argparse.ArgumentTypeError (one line, exit code 2) on anything else."""

    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    integer: bool = False

    @property
    def range_text(self) -> str:
        """The accepted range in interval notation, e.g. `(0, 1]` or `>= 1`."""
        lo, hi = self.min, self.max
        if lo is not None and hi is not None:
            return (f"{'(' if self.min_open else '['}{_fmt(lo)}, {_fmt(hi)}"
                    f"{')' if self.max_open else ']'}")
        if lo is not None:
            return f"{'>' if self.min_open else '>='} {_fmt(lo)}"
        if hi is not None:
            return f"{'<' if self.max_open else '<='} {_fmt(hi)}"
        return "any finite number"

    def _bad(self, text: str) -> argparse.ArgumentTypeError:
        kind = "a whole number" if self.integer else "a finite number"
        where = self.range_text
        where = "" if self.min is None and self.max is None else \
            f" in {where}" if self.min is not None and self.max is not None else f" {where}"
        return argparse.ArgumentTypeError(f"{text[:40]!r} is not {kind}{where}")

    def __call__(self, text: str) -> float:
        value: float
        try:
            if self.integer:
                value = int(text.strip().replace("_", ""), 10)
            else:
                value = float(text)
        except (ValueError, OverflowError):
            raise self._bad(text) from None
        if not math.isfinite(value):
            raise self._bad(text)
        lo, hi = self.min, self.max
        if lo is not None and (value < lo or (self.min_open and value == lo)):
            raise self._bad(text)
        if hi is not None and (value > hi or (self.max_open and value == hi)):
            raise self._bad(text)
        return value

    @property
    def __name__(self) -> str:  # argparse names the type in some messages
        return "whole number" if self.integer else "number"


def number(*, min: float | None = None, max: float | None = None, min_open: bool = False,
           max_open: bool = False) -> Number:
    """A finite float flag within [min, max] (`min_open`/`max_open`: bound excluded)."""
    return Number(min=min, max=max, min_open=min_open, max_open=max_open)


def whole(*, min: int | None = None, max: int | None = None) -> Number:
    """A whole-number flag within [min, max]."""
    return Number(min=min, max=max, integer=True)


def nonempty(text: str) -> str:
    """A name flag that must say something: `--calibration ''` was taken as no flag at all
    (argparse's error names the flag: 'argument --calibration: invalid nonempty value')."""
    if not text.strip():
        raise ValueError("empty")
    return text


FRACTION_OPEN = number(min=0.0, max=1.0, min_open=True)
"""(0, 1]: shares of a whole (util, peak share)."""
EFFICIENCY = number(min=0.001, max=1.0)
"""[0.001, 1]: efficiencies of peak (eff, MFU). Below 0.1 % of peak no real engine runs, and the
queueing model's step times would overflow (a fuzzed --eff of 5.7e-192 did)."""
SHARE = number(min=0.0, max=1.0)
"""[0, 1]: shares of requests (fault injection)."""
MS = number(min=0.001, max=1e7)
"""[0.001, 10^7] ms: a latency objective typed on the command line (10^7 ms is close to three
hours). Below a microsecond no request is served, and a denormal objective (a fuzzed 1e-320)
overflowed the planner's latency / target ratios."""
MAX_NUM_SEQS = 100_000
"""Largest engine batch (vLLM --max-num-seqs) a flag accepts."""
HEADROOM = number(min=0.0, max=2.0)
"""[0, 2]: a headroom fraction (0.2 = 20 % more than the load or the memory subtotal)."""
CNY_PER_USD = number(min=0.0, max=1000.0, min_open=True)
"""(0, 1000]: an exchange rate, CNY per USD."""


def comma_list(text: str | None, what: str = "keys, e.g. rtx-4090,h100-sxm"
               ) -> tuple[str, ...] | None:
    """A comma list flag as lower-case items (None: not given); InputError naming `what` when
    it holds none."""
    if text is None:
        return None
    items = tuple(x.strip().lower() for x in text.split(",") if x.strip())
    if not items:
        raise InputError(f"'{text}': give a comma list of {what}")
    return items


def finite_or_none(obj: Any) -> Any:
    """`obj` with every NaN or infinite float (in dicts, lists and tuples) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_or_none(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """Strict JSON: non-finite floats become null; `allow_nan=False` guarantees none slips
    through (a ValueError there is a bug in this function, not in the input)."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kwargs)


def print_catalog_warnings() -> None:
    """Print the catalog's warnings (custom files it skipped) on stderr, one per line."""
    from capacity.catalog.loader import default_catalog

    for w in default_catalog().warnings:
        print(f"warning: {w}", file=sys.stderr)


def context_tokens(ctx: int | None, model_key: str) -> int:
    """--ctx, else the chapter's 8,192 tokens or the model's limit when that is shorter
    (`scenario.default_context_tokens`: a Llama-2-70B of 4,096 tokens works without --ctx); an
    unknown model keeps 8,192 and is named by the command that resolves it."""
    from capacity.catalog.loader import default_catalog
    from capacity.errors import CapacityError
    from capacity.model.scenario import DEFAULT_CONTEXT_TOKENS, default_context_tokens

    if ctx is not None:
        return int(ctx)
    try:
        return default_context_tokens(default_catalog().variant(model_key).model)
    except CapacityError:
        return DEFAULT_CONTEXT_TOKENS


def check_base_url(url: str) -> None:
    """InputError unless `url` is an http(s) URL with a host and a port in 0-65535 (a bad one
    made the HTTP client raise InvalidURL or OverflowError deep inside the first request)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InputError(f"--base-url '{url}' is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--base-url '{url}' must be http:// or https:// with a host, e.g. "
                         "http://127.0.0.1:8000/v1")
    if port is not None and not 0 < port <= 65535:
        raise InputError(f"--base-url '{url}': port {port} is not in 1-65535")
    if parts.query or parts.fragment:   # /models and /chat/completions would land in it
        raise InputError("--base-url takes no query or fragment (the part from '?' or '#'): "
                         "the client appends /chat/completions and /models to it; give a key "
                         "with --api-key or OPENAI_API_KEY")
