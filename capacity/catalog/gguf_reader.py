"""A GGUF header reader that trusts nothing in the file (`capacity catalog add-model`, the
Catalog page's upload).

GGUF (llama.cpp's model file, versions 2 and 3; docs/gguf.md in ggml's repository): the magic
`GGUF`, a uint32 version, uint64 tensor and metadata counts, the metadata as (string key, uint32
type, value), then per tensor its name, dimension count, dimensions, ggml type and data offset,
all little-endian. Only the header is read, never the tensor data, so a file's first megabytes
suffice.

Every count and length read from the file is checked against the bytes left before anything is
allocated or looped over, arrays nest at most `MAX_ARRAY_DEPTH` deep, and a long array (the
vocabulary) is skipped and kept as its length: a 49-byte file claiming 2^40 elements is refused at
once. Every fault is a `CatalogError` naming the file and the byte offset.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from capacity.errors import CatalogError
from capacity.types import Note

GGUF_MAGIC: Final = b"GGUF"
SUPPORTED_VERSIONS: Final = (2, 3)
MAX_ARRAY_DEPTH: Final = 2
"""Arrays of arrays are allowed (GGUF permits them); deeper nesting is refused."""
KEEP_ARRAY: Final = 4096
"""Arrays longer than this are skipped and kept as their length (the vocabulary: only its size
is needed)."""
MAX_STRING_BYTES: Final = 1 << 20
"""A key, a tensor name or a metadata string longer than 1 MiB is refused."""
MAX_DIMS: Final = 8
MAX_SKIPPED_STRINGS: Final = 1 << 22
"""A skipped array of strings is walked string by string: more than 4M (vocabularies hold up to
about 260k) is refused rather than walked."""

GGML_BLOCKS: Final[Mapping[int, tuple[str, int, int]]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4),
    27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}
"""ggml type id -> (name, elements per block, bytes per block): ggml's `ggml_type_traits`, as the
`gguf` package 0.19's GGML_QUANT_SIZES lists them (tests/test_gguf_reader.py compares)."""

_SCALARS: Final[Mapping[int, str]] = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}
_STRING: Final = 8
_ARRAY: Final = 9


@dataclass(frozen=True, kw_only=True)
class GgufTensor:
    """One tensor of a GGUF file's table: its name, elements, bytes and ggml type name."""

    name: str
    elements: int
    n_bytes: int
    type_name: str


@dataclass(frozen=True, kw_only=True)
class GgufHeader:
    """A GGUF file's metadata (scalars, strings, arrays up to `KEEP_ARRAY` long, longer ones as
    their length) and tensor table."""

    metadata: Mapping[str, Any]
    tensors: tuple[GgufTensor, ...]


class _Reader:
    def __init__(self, fh: BinaryIO, size: int, name: str) -> None:
        self.fh, self.size, self.name = fh, size, name
        self.pos = 0

    def fail(self, what: str) -> CatalogError:
        return CatalogError(Note(
            f"{self.name}: not a readable GGUF header ({what} at byte {self.pos})",
            code="mf_gguf_unreadable", file=self.name, what=what, pos=f"{self.pos:,}"))

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.size - self.pos:
            raise self.fail(f"{what} claims {n:,} bytes, the file has {self.size - self.pos:,} left")

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        data = self.fh.read(n)
        if len(data) != n:
            raise self.fail(f"{what}: the file ends early")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.fh.seek(n, 1)
        self.pos += n

    def scalar(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def u32(self, what: str) -> int:
        return int(self.scalar("<I", what))

    def u64(self, what: str) -> int:
        return int(self.scalar("<Q", what))

    def string(self, what: str) -> str:
        n = self.u64(f"{what} length")
        if n > MAX_STRING_BYTES:
            raise self.fail(f"{what} of {n:,} bytes")
        raw = self.take(n, what)
        return raw.decode("utf-8", errors="replace")

    def value(self, kind: int, what: str, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind], what)
        if kind == _STRING:
            return self.string(what)
        if kind != _ARRAY:
            raise self.fail(f"{what}: unknown value type {kind}")
        if depth >= MAX_ARRAY_DEPTH:
            raise self.fail(f"{what}: arrays nested more than {MAX_ARRAY_DEPTH} deep")
        inner = self.u32(f"{what} element type")
        count = self.u64(f"{what} length")
        if inner in _SCALARS:
            width = struct.calcsize(_SCALARS[inner])
            self.need(count * width, f"{what} ({count:,} elements)")
            if count > KEEP_ARRAY:
                self.skip(count * width, what)
                return count
            fmt = "<" + _SCALARS[inner][1] * count
            return list(struct.unpack(fmt, self.take(count * width, what)))
        # strings and arrays take at least 8 bytes each (their length)
        self.need(count * 8, f"{what} ({count:,} elements)")
        if count > KEEP_ARRAY:
            if count > MAX_SKIPPED_STRINGS:
                raise self.fail(f"{what}: {count:,} strings or arrays")
            for _ in range(count):
                if inner == _STRING:
                    self.skip(self.u64(f"{what} element length"), what)
                else:
                    self.value(inner, what, depth + 1)
            return count
        return [self.value(inner, what, depth + 1) for _ in range(count)]


def read_gguf_header(path: Path, name: str | None = None) -> GgufHeader:
    """The metadata and the tensor table of a GGUF file (only the header is read); messages
    name the file `name` (an upload's own name; None: the path's)."""
    name = name or path.name
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            return _read(_Reader(fh, size, name))
    except OSError as exc:
        why = str(exc.strerror or exc)
        raise CatalogError(Note(f"{name}: cannot read ({why})", code="mf_cannot_read",
                                file=name, why=why)) from None


def _read(r: _Reader) -> GgufHeader:
    if r.take(4, "magic") != GGUF_MAGIC:
        raise r.fail("no GGUF magic")
    version = r.u32("version")
    if version not in SUPPORTED_VERSIONS:
        raise r.fail(f"version {version} (read: {', '.join(map(str, SUPPORTED_VERSIONS))})")
    n_tensors = r.u64("tensor count")
    n_meta = r.u64("metadata count")
    # a metadata entry takes at least 8 + 4 + 1 bytes, a tensor entry 8 + 4 + 4 + 8
    r.need(n_meta * 13 + n_tensors * 24, f"{n_meta:,} metadata entries and {n_tensors:,} tensors")
    meta: dict[str, Any] = {}
    for _ in range(n_meta):
        key = r.string("metadata key")
        kind = r.u32(f"type of {key}")
        meta[key] = r.value(kind, key)
    tensors = []
    for _ in range(n_tensors):
        name = r.string("tensor name")
        n_dims = r.u32(f"dimensions of {name}")
        if not 0 < n_dims <= MAX_DIMS:
            raise r.fail(f"tensor {name} with {n_dims} dimensions")
        elements = 1
        for _ in range(n_dims):
            elements *= r.u64(f"a dimension of {name}")
        type_id = r.u32(f"type of {name}")
        if type_id not in GGML_BLOCKS:
            raise r.fail(f"tensor {name}: unknown ggml type {type_id}")
        r.u64(f"offset of {name}")
        type_name, block, block_bytes = GGML_BLOCKS[type_id]
        if elements % block:
            raise r.fail(f"tensor {name}: {elements:,} elements is not a whole number of "
                         f"{type_name} blocks of {block}")
        tensors.append(GgufTensor(name=name, elements=elements,
                                  n_bytes=elements // block * block_bytes, type_name=type_name))
    return GgufHeader(metadata=meta, tensors=tuple(tensors))
