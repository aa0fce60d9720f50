"""Errors raised by the capacity library.

The tree is small on purpose; every message says what was wrong and how to fix it::

    CapacityError                 base of everything the library raises on purpose
    ├── InputError (ValueError)   an impossible input: util > 1, a negative size, a bad list
    ├── CatalogError              a catalog file or entry is missing, corrupt or inconsistent
    │   └── UnknownKeyError (KeyError-like)  a model, GPU or format key that is not in the catalog
    ├── BenchError                the benchmark cannot start (bad URL, no model, bad arguments)
    └── StoreError                stored runs cannot be read

Callers (the CLI and the app) turn these into one-line messages; anything else is a bug.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches


class CapacityError(Exception):
    """Base class of every error the capacity library raises on purpose."""


class InputError(CapacityError, ValueError):
    """An input value that cannot describe a real deployment (util > 1, zero layers, ...)."""


class CatalogError(CapacityError):
    """A catalog file or entry is corrupt; the message names the file, the entry and the field."""


class UnknownKeyError(CatalogError):
    """A key (model, GPU, weight format) that the catalog does not hold; suggests close keys."""

    def __init__(self, kind: str, key: str, known: Iterable[str]) -> None:
        known_list = sorted(known)
        close = get_close_matches(key.lower(), known_list, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        shown = ", ".join(known_list[:12]) + (", ..." if len(known_list) > 12 else "")
        super().__init__(f"unknown {kind} '{key}'{hint} (known: {shown})")
        self.kind = kind
        self.key = key
        self.suggestions = close


class BenchError(CapacityError):
    """The benchmark cannot start or continue as configured."""


class StoreError(CapacityError):
    """Stored benchmark runs cannot be read or queried."""
