"""Type aliases shared by the library: one definition each, imported everywhere.

Numeric results are numpy arrays so that one call evaluates a whole sweep (concurrency 1..N,
every GPU option); these aliases name the element type once. Base layer: imports nothing from
capacity.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.float64]
"""An array of float64 values (bytes, milliseconds, tokens per second...: the name says which)."""
IntArray: TypeAlias = npt.NDArray[np.int64]
"""An array of int64 counts (requests, GPUs, tensor-parallel sizes)."""
BoolArray: TypeAlias = npt.NDArray[np.bool_]
"""An array of booleans (a mask: saturated, converged, meets the SLO)."""
StrArray: TypeAlias = npt.NDArray[np.str_]
"""An array of strings, each a member's value of a vocabulary (memory verdicts, bounds)."""
ArrayLike: TypeAlias = float | int | npt.ArrayLike
"""A scalar or anything numpy turns into an array (a formula's sweepable input)."""


class Note(str):
    """A message the library leaves for its caller (a scenario's warning, a calibration's note):
    English text, as the CLI prints it, that also carries a `code` and its `params`, so a page
    can say it in another language (`capacity.report.i18n.note_text`, key `note_<code>`)."""

    code: str
    params: dict[str, str | int | float]

    def __new__(cls, text: str, *, code: str, **params: str | int | float) -> Note:
        note = super().__new__(cls, text)
        note.code = code
        note.params = dict(params)
        return note

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, str | int | float]]:
        """Pickled and copied with its code (Streamlit keeps results in its caches)."""
        return (str(self),), {"code": self.code, **self.params}
