"""Model, GPU and weight-format catalogs, read from TOML files under the bundled data
(`capacity.workspace.catalog_dir()`: the checkout's `data/`, or the copy in the wheel).

Every entry carries a `source` and an `as_of` date. The loader rejects unknown or missing fields,
non-positive, non-finite or physically impossible numbers (`BOUNDS`) and inconsistent layouts
with a message naming the file, the entry and the field (docs/method.md). A bad bundled entry
is an error; a bad custom entry is skipped with a warning (`Catalog.warnings`,
docs/reliability.md). Keys are lower-case with hyphens (`rtx-4090`, `llama-3.1-8b`); a model key
may carry a weight-format suffix (`llama-3.1-8b-fp8`, `qwen3.5-9b-awq`).

Long module: the three catalogs' dataclasses, their one shared entry reader (`_Entry`: bounds,
names, unknown fields) and a parser per kind; split, each parser would import the reader's
private checks back.
"""

from __future__ import annotations

import math
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, cast

from capacity import workspace
from capacity.errors import CatalogError, UnknownKeyError
from capacity.types import Note
from capacity.units import GB, GIB
from capacity.untrusted import loads_toml

DATA_DIR = workspace.bundled_data_dir()
"""The bundled data folder (catalogs, reference measurements, the sample run), read-only."""

LayerKind = Literal["full", "sliding", "mla", "linear"]
ComputeDtype = Literal["bf16", "fp8", "int8", "fp4"]
"""The GEMM precision a weight format runs at (`WeightFormat.compute_dtype`)."""
COMPUTE_DTYPES: tuple[ComputeDtype, ...] = ("bf16", "fp8", "int8", "fp4")
LAYER_KINDS: tuple[LayerKind, ...] = ("full", "sliding", "mla", "linear")
KEY_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}\Z")
"""A catalog key, 1-100 characters: it names a file (`<key>.toml`). The end is matched by
backslash-Z, never `$`, which also matches before a final line break (a key 'a10' plus a
line feed would name a file with a line feed in it)."""

MAX_CONTEXT_TOKENS = 10_000_000
"""Longest context a model (or a flag, or a measured point) may have, tokens: the longest
published context window is 10 M tokens (Llama 4 Scout)."""
DEFAULT_MAX = 1e15
"""Upper bound of a catalog number without its own entry in BOUNDS."""
MIN_PRICE_PER_HOUR = 0.001
"""Lowest price of one GPU-hour (CNY or USD) a catalog entry, a price file or a flag accepts:
a tenth of a cent. Below it a price is a typo or a denormal (1e-320), and a plan priced at
it would rank first at a cost of nothing."""
MAX_PRICE_PER_HOUR = 10_000.0
"""Highest price of one GPU-hour (CNY or USD) accepted: list prices are a few units, and
above this a price (1e308) would make every cost infinite."""
BOUNDS: dict[str, tuple[float, float]] = {
    # GPUs: (lowest, highest) accepted, both included; see the docstring below
    "memory_gb": (0.5, 10_000.0),
    "memory_driver_gib": (0.5, 10_000.0),
    "bandwidth_gb_s": (1.0, 100_000.0),
    "bf16_tflops": (0.001, 100_000.0),
    "fp8_tflops": (0.001, 100_000.0),
    "int8_tops": (0.001, 100_000.0),
    "fp4_tflops": (0.001, 100_000.0),
    "interconnect_gb_s": (0.1, 100_000.0),
    "price_per_hour": (MIN_PRICE_PER_HOUR, MAX_PRICE_PER_HOUR),
    # models
    "params_total_b": (0.0, 100_000.0),
    "params_active_b": (0.0, 100_000.0),
    "weights_gb": (0.0, 1_000_000.0),
    "bits_per_weight": (0.0, 64.0),
    "embedding_bits": (1.0, 32.0),
    "num_layers": (1.0, 1_000.0),
    "count": (1.0, 1_000.0),
    "kv_heads": (1.0, 10_000.0),
    "q_heads": (1.0, 10_000.0),
    "head_dim": (1.0, 100_000.0),
    "kv_lora_rank": (1.0, 1_000_000.0),
    "qk_rope_head_dim": (1.0, 100_000.0),
    "hidden": (1.0, 10_000_000.0),
    "vocab": (1.0, 100_000_000.0),
    "max_context_tokens": (1.0, float(MAX_CONTEXT_TOKENS)),
    "window_tokens": (1.0, float(MAX_CONTEXT_TOKENS)),
    "state_bytes": (0.0, 1e12), "page_state_bytes": (0.0, 1e12),
    "experts": (1.0, 100_000.0),
    "active": (1.0, 100_000.0),
}
"""Physical bounds of every catalog number, by field name: (lowest, highest), both
included. Numbers must also be finite (TOML's `nan` and `inf` are refused), normal (no
denormal such as 1e-320) and > 0 unless the field allows 0 (a linear layer's `state_bytes`);
a bound of 0 means "> 0". Values beyond these bounds describe no real hardware or model and
would overflow the formulas: a `memory_gb` of 1e300 made C_vram a negative integer, a
`bandwidth_gb_s` or TFLOP/s of 1e-300 printed a TTFT of "inf s". The GPUs' lower bounds sit
far below any accelerator (a Raspberry Pi 4 has 4 GB at about 4 GB/s and 0.01 TFLOP/s, PCIe
1.0 x1 0.25 GB/s); TFLOP/s go down to 0.001, since `capacity probe` measures a CPU core's
GEMM at 0.005-0.04 TFLOP/s on a busy 2-core machine."""
_BOUND_HINTS = {"memory_gb": " GB (the largest accelerators hold a few hundred)",
                "memory_driver_gib": " GiB", "bandwidth_gb_s": " GB/s",
                "interconnect_gb_s": " GB/s", "bf16_tflops": " TFLOP/s",
                "fp8_tflops": " TFLOP/s", "int8_tops": " TOP/s", "fp4_tflops": " TFLOP/s",
                "price_per_hour": " per GPU-hour",
                "num_layers": " layers", "count": " layers",
                "max_context_tokens": " tokens"}
_BOUND_HINT_CODES = {"memory_gb": "bound_unit_memory", "price_per_hour": "bound_unit_price",
                     "num_layers": "bound_unit_layers", "count": "bound_unit_layers",
                     "max_context_tokens": "bound_unit_tokens"}
MAX_NAME_CHARS = 100
"""Longest `name` of a catalog entry, characters."""
NAME_PUNCTUATION = frozenset("-_.,+()/&'%")
"""The only ASCII punctuation a `name` may hold. A name is shown by the pages, which render
Markdown, and in quotes: brackets, angle brackets, the backtick, the dollar sign, the
backslash, the bar, the colon, the at sign and the rest (links, images, HTML, code, math,
Streamlit's colon icons, tables, e-mail links) are refused, so a name such as
"![x](http://evil/)" cannot make a browser fetch an image or plant a link."""
_URL_IN_TEXT = re.compile(r"(?i)\bwww\.")


def name_problem(name: str) -> Note | None:
    """Why `name` cannot be the name of a catalog entry, or None when it can: 1 to
    `MAX_NAME_CHARS` characters that are letters or digits of any script, spaces and
    `NAME_PUNCTUATION`, with no `www.` (which Markdown makes a link). The value itself is not
    repeated in the message: a page shows the message as Markdown."""
    if not name.strip() or len(name) > MAX_NAME_CHARS:
        return Note(f"must be plain text of 1 to {MAX_NAME_CHARS} characters",
                    code="field_name_length", max=MAX_NAME_CHARS)
    bad = sorted({c for c in name if not (c.isalnum() or c == " " or c in NAME_PUNCTUATION)
                  and (c.isascii() or not c.isprintable() or c.isspace())})
    if bad or _URL_IN_TEXT.search(name):
        shown = ", ".join(repr(c) for c in bad[:5]) if bad else "'www.'"
        punct = "".join(sorted(NAME_PUNCTUATION))
        return Note(f"must be plain text: letters, digits, spaces and {punct} only (no Markdown, "
                    f"HTML or link; found {shown})", code="field_name_chars", punct=punct,
                    found=shown)
    return None


def bound_problem(field_name: str, value: float) -> Note | None:
    """Why `value` is outside the physical bounds of `field_name` (`BOUNDS`, else > 0 and at
    most `DEFAULT_MAX`), or None when it is inside. For a value already known finite; a
    denormal (1e-320) is outside every bound. The one check of a catalog number, used by the
    catalog's files and by price files (`capacity.catalog.offers`)."""
    low, high = BOUNDS.get(field_name, (0.0, DEFAULT_MAX))
    hint = _BOUND_HINTS.get(field_name, "")
    code = _BOUND_HINT_CODES.get(field_name)   # a hint in words: in the page's language
    unit = Note(hint, code=code) if code else hint
    if value > high:
        return Note(f"{value!r} is beyond the physical bound {high:,g}{unit}",
                    code="field_above_bound", value=repr(value), bound=f"{high:,g}", unit=unit)
    if value != 0 and abs(value) < sys.float_info.min:
        return Note(f"{value!r} is a denormal number, below every physical bound",
                    code="field_denormal", value=repr(value))
    if low > 0 and value < low:
        return Note(f"{value!r} is below the physical bound {low:,g}{unit}",
                    code="field_below_bound", value=repr(value), bound=f"{low:,g}", unit=unit)
    return None


@dataclass(frozen=True, kw_only=True)
class LayerGroup:
    """A run of layers of one kind that hold KV (or state) the same way.

    kind: `full` (MHA/GQA/MQA), `sliding` (window of `window_tokens`), `mla` (one latent of
    `kv_lora_rank + qk_rope_head_dim` per token), `linear` (fixed `state_bytes` per request;
    `page_state_bytes` as vLLM pages it, `kv.hybrid_block_tokens`). `q_heads` and `head_dim`
    also size the attention FLOPs of prefill (F6)."""

    kind: LayerKind
    count: int
    kv_heads: int = 0
    head_dim: int = 0
    q_heads: int = 0
    window_tokens: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    state_bytes: float = 0.0
    page_state_bytes: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Moe:
    """Mixture of experts: `experts` routed experts per layer, `active` chosen per token."""

    experts: int
    active: int


@dataclass(frozen=True, kw_only=True)
class WeightFormat:
    """A weight storage format: bits per weight (scales included) and the GEMM precision."""

    key: str
    name: str
    bits_per_weight: float
    compute_dtype: ComputeDtype
    generic: bool
    source: str
    notes: str = ""
    embedding_bits: float | None = None
    """Bits per parameter of the input embedding table and the output head, which the
    quantizers leave in 16 bits (they quantize the decoder layers' Linear modules); None: the
    format's `bits_per_weight` for every parameter."""


@dataclass(frozen=True, kw_only=True)
class StatedVariant:
    """A real, published size of one model in one format; it wins over params x bits."""

    format: str
    weights_gb: float
    source: str


@dataclass(frozen=True, kw_only=True)
class Model:
    """A model architecture: parameters, layers by kind, and optional MoE routing."""

    key: str
    name: str
    hf_repo: str
    params_total_b: float
    params_active_b: float
    hidden: int
    vocab: int
    max_context_tokens: int
    layer_groups: tuple[LayerGroup, ...]
    moe: Moe | None
    default_format: str
    stated_variants: tuple[StatedVariant, ...]
    source: str
    as_of: str
    notes: str = ""
    path: str = ""
    tied_embeddings: bool | None = None
    """True when the output head reuses the input embedding table (config.json's
    `tie_word_embeddings`; a GGUF without `output.weight`); None when the entry does not say."""

    @property
    def layers(self) -> int:
        """Total number of layers."""
        return sum(g.count for g in self.layer_groups)

    @property
    def head_params_b(self) -> float:
        """Parameters of the output head (billions): vocab x hidden, the GEMM that turns a hidden
        state into logits. 0 when the entry's embeddings would not fit in its active parameters
        (an entry whose vocab or hidden is not the model's)."""
        return self._embedding_params_b()[1]

    @property
    def lookup_params_b(self) -> float:
        """Parameters (billions) that are looked up, never multiplied: the input embedding table
        when it is separate from the output head (`tied_embeddings` false), vocab x hidden;
        0 when tied, and 0 when unknown (counted as tied: more FLOPs and bytes, the
        conservative side). Engines gather one row of it per token: no FLOPs, ~no bytes."""
        return self._embedding_params_b()[0]

    def _embedding_params_b(self) -> tuple[float, float]:
        vh = self.vocab * self.hidden / 1e9
        lookup = vh if self.tied_embeddings is False else 0.0
        if lookup + vh >= self.params_active_b:
            return 0.0, 0.0
        return lookup, vh

    def layers_of(self, kind: LayerKind) -> int:
        """Number of layers of one kind."""
        return sum(g.count for g in self.layer_groups if g.kind == kind)

    @property
    def expert_params_b(self) -> float:
        """Parameters (billions) that sit in routed experts; 0 for dense models.

        Derived from total P, active A, experts E and active experts k: the shared part S and
        the expert part X satisfy S + X = P and S + X k/E = A, so X = (P - A) / (1 - k/E).
        Check: Qwen3-30B-A3B (30.5, 3.3, 128, 8) gives 29.0 B = 48 x 128 x 3 x 2048 x 768.
        """
        if self.moe is None:
            return 0.0
        share = self.moe.active / self.moe.experts
        return (self.params_total_b - self.params_active_b) / (1.0 - share)


@dataclass(frozen=True, kw_only=True)
class Gpu:
    """One GPU's spec-sheet facts (dense figures) and a default hourly price."""

    key: str
    name: str
    memory_gb: float
    memory_type: str
    bandwidth_gb_s: float
    bf16_tflops: float
    fp8_tflops: float | None
    int8_tops: float | None
    interconnect: str
    interconnect_kind: Literal["pcie", "nvlink", "infinity-fabric"]
    interconnect_gb_s: float
    price_per_hour: float
    currency: Literal["CNY", "USD"]
    price_source: str
    price_as_of: str
    source: str
    as_of: str
    memory_driver_gib: float | None = None
    """The device memory its driver reports (GiB, nvidia-smi's total / 1,024; None: not
    sourced): what an engine's gpu_memory_utilization is a share of (`memory_for`)."""
    fp4_tflops: float | None = None
    """Dense FP4 tensor TFLOP/s (Blackwell's NVFP4/MXFP4 GEMMs, W4A4); None where the GPU has
    no FP4 tensor cores: a 4-bit float format then runs weight-only at the bf16 rate."""
    notes: str = ""
    path: str = ""

    def memory_for(self, runtime: bool) -> float:
        """The memory F3 budgets, decimal GB: the spec sheet's figure as the chapter counts it
        (`memory_gb`: an 80 GB card is 80 x 10^9 bytes), or with `runtime` the memory the
        driver reports, where sourced (`memory_driver_gib` x 2^30 / 10^9: the H100 SXM's 79.65
        GiB, 85.52 GB; the card's memory is binary, 80 GiB), which is what an engine's
        gpu_memory_utilization takes its share of. Without a sourced figure, the spec sheet's.
        Source: F3 (docs/method.md, "Device memory as the driver reports it")."""
        if runtime and self.memory_driver_gib is not None:
            return self.memory_driver_gib * GIB / GB
        return self.memory_gb

    def tflops_for(self, compute_dtype: str) -> float:
        """Dense tensor TFLOP/s for a GEMM precision; falls back to bf16 where the GPU lacks it
        (fp8 on an A100, fp4 on a Hopper: the weights are dequantized and the GEMM runs in
        bf16, W8A16 / W4A16)."""
        if compute_dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops
        if compute_dtype == "int8" and self.int8_tops:
            return self.int8_tops
        if compute_dtype == "fp4" and self.fp4_tflops:
            return self.fp4_tflops
        return self.bf16_tflops


@dataclass(frozen=True, kw_only=True)
class ModelVariant:
    """A model in one weight format, with its resolved weight size."""

    model: Model
    format: WeightFormat
    weights_gb: float
    weights_stated: bool
    weights_source: str

    @property
    def key(self) -> str:
        """Catalog key of the variant, e.g. `llama-3.1-8b-fp8`."""
        return f"{self.model.key}-{self.format.key}"

    @property
    def weights_bytes(self) -> float:
        """Weight bytes (decimal GB x 1e9)."""
        return self.weights_gb * GB

    @property
    def lookup_bytes(self) -> float:
        """Bytes of the untied input embedding table as stored (B; 0 when tied), which engines
        look up one row per sequence, never read whole (`Model.lookup_params_b`): its parameters
        x the format's `embedding_bits` / 8 where the weights are computed (`computed_weights_gb`
        stores it so), else x the weights' average bytes per parameter. Llama-3.1-8B FP8:
        0.5253 B x 16 / 8 = 1.051 GB of 9.081 GB; BF16: 0.5253 B x 2 = 1.051 GB of 16.06 GB (both
        rules: 2 B per parameter). The one definition (decode step, expert parallelism, notes)."""
        m, bits = self.model, self.format.embedding_bits
        per = (bits / 8.0 if bits is not None and not self.weights_stated
               else self.weights_bytes / (m.params_total_b * GB))
        return m.lookup_params_b * GB * per

    @property
    def lookup_weight_share(self) -> float:
        """Share of the weight bytes in the input embedding table (0-1): `lookup_bytes` /
        `weights_bytes`, what an engine's decode step leaves unread (`StepModel.for_model`).
        Llama-3.1-8B FP8: 1.051 / 9.081 = 0.1157 (by parameter count it would be 0.5253 /
        8.03 = 0.0654, 0.59 GB); BF16: 1.051 / 16.06 = 0.0654; a tied table: 0."""
        return self.lookup_bytes / self.weights_bytes if self.weights_bytes > 0 else 0.0


def computed_weights_gb(model: Model, fmt: WeightFormat) -> tuple[float, str]:
    """A model's weights in a format without a stated size, GB, and how they were computed:
    `(P - E) x bits / 8 + E x embedding_bits / 8`, E the embedding table and output head
    (vocab x hidden each; once when tied), which quantizers keep in 16 bits. Example:
    Qwen2.5-7B in GPTQ (7.62 B parameters, E = 2 x 152064 x 3584 = 1.09 B untied):
    6.53 x 4.25 / 8 + 1.09 x 16 / 8 = 3.47 + 2.18 = 5.65 GB (its published files: 5.58 GB);
    without the embedding rule 7.62 x 4.25 / 8 = 4.05 GB."""
    p, bits = model.params_total_b, fmt.bits_per_weight
    emb = model.lookup_params_b + model.head_params_b
    if fmt.embedding_bits is None or emb <= 0 or fmt.embedding_bits == bits:
        return p * bits / 8.0, f"{p} B params x {bits} bits / 8"
    gb = (p - emb) * bits / 8.0 + emb * fmt.embedding_bits / 8.0
    return gb, (f"{p - emb:.3g} B params x {bits} bits / 8 + {emb:.3g} B of embedding and "
                f"output head x {fmt.embedding_bits:g} bits / 8")


@dataclass(frozen=True)
class Catalog:
    """All catalog entries, keyed by their lower-case keys."""

    models: Mapping[str, Model]
    gpus: Mapping[str, Gpu]
    formats: Mapping[str, WeightFormat]
    warnings: tuple[str, ...] = field(default=())
    """The custom files skipped, one line each (`Note`s, code `catalog_skipped_model` or
    `_gpu`, their reason a Note too: `capacity.report.i18n.note_text` says them in a page's
    language)."""

    def gpu(self, key: str) -> Gpu:
        """The GPU with this key (case-insensitive; spaces become hyphens)."""
        k = _norm_key(key)
        if k not in self.gpus:
            raise UnknownKeyError("GPU", key, self.gpus)
        return self.gpus[k]

    def formats_for(self, model: Model) -> list[WeightFormat]:
        """Formats a model can be served in: generic ones plus those it states a size for."""
        stated = {v.format for v in model.stated_variants}
        return [f for f in self.formats.values() if f.generic or f.key in stated]

    def variant(self, model_key: str, format_key: str | None = None) -> ModelVariant:
        """Resolve `qwen3.5-9b-awq` or (`llama-3.1-8b`, `fp8`) into a model and a weight size.
        A format given apart wins over a key's suffix: (`qwen3.5-9b-awq`, `bf16`) is Qwen3.5-9B
        in BF16, as `capacity size` and `capacity frontier` read it (`capacity plan --weights
        bf16` on the default model was refused as an unknown model, naming it among the keys).

        A stated size (a published file or a vLLM log) wins over params x bits / 8.
        """
        key = _norm_key(model_key)
        model = self.models.get(key)
        if model is None:
            for fmt in sorted(self.formats, key=len, reverse=True):
                suffix = "-" + fmt
                if key.endswith(suffix) and key[: -len(suffix)] in self.models:
                    model, format_key = self.models[key[: -len(suffix)]], format_key or fmt
                    break
        if model is None:
            raise UnknownKeyError("model", model_key, self.variant_keys())
        fkey = _norm_key(format_key or model.default_format)
        allowed = {f.key: f for f in self.formats_for(model)}
        if fkey not in allowed:
            raise UnknownKeyError(f"weight format for {model.key}", fkey, allowed)
        chosen = allowed[fkey]
        for stated in model.stated_variants:
            if stated.format == fkey:
                return ModelVariant(model=model, format=chosen, weights_gb=stated.weights_gb,
                                    weights_stated=True, weights_source=stated.source)
        weights_gb, how = computed_weights_gb(model, chosen)
        return ModelVariant(model=model, format=chosen, weights_gb=weights_gb,
                            weights_stated=False, weights_source=how)

    def variant_keys(self) -> list[str]:
        """Every model key, bare and with each format suffix."""
        keys: list[str] = []
        for m in self.models.values():
            keys.append(m.key)
            keys.extend(f"{m.key}-{f.key}" for f in self.formats_for(m))
        return keys


def _norm_key(key: str) -> str:
    return key.strip().lower().replace(" ", "-").replace("_", "_")


# ---------------------------------------------------------------------------------------------
# Loading and validation


class _Entry:
    """Reads fields of one TOML table, recording which were used, naming file/entry/field."""

    def __init__(self, path: Path, entry: str, table: Mapping[str, Any]) -> None:
        self.path, self.entry, self.table = path, entry, table
        self.used: set[str] = set()
        if not isinstance(table, Mapping):
            raise CatalogError(Note(f"{path.name}: entry '{entry}': expected a table, got "
                                    f"{str(table)[:40]!r}", code="entry_not_table",
                                    file=path.name, entry=entry, value=repr(str(table)[:40])))

    def fail(self, fieldname: str, problem: str, code: str, **params: str | int | float
             ) -> CatalogError:
        """The error of one field: `problem` in English, `code` and `params` for a page in
        another language (`note_field_<code>`, inside `note_catalog_field`)."""
        return self.fail_note(fieldname, Note(problem, code=f"field_{code}", **params))

    def fail_note(self, fieldname: str, problem: Note) -> CatalogError:
        """`fail` with the problem already a Note (`bound_problem`, `name_problem`)."""
        return CatalogError(Note(f"{self.path.name}: entry '{self.entry}': field '{fieldname}': "
                                 f"{problem}", code="catalog_field", file=self.path.name,
                                 entry=self.entry, field=fieldname, problem=problem))

    def _get(self, name: str, default: Any, required: bool) -> Any:
        self.used.add(name)
        if name not in self.table:
            if required:
                raise self.fail(name, "missing", "missing")
            return default
        return self.table[name]

    def text(self, name: str, default: str | None = None) -> str:
        value = self._get(name, default, default is None)
        if not isinstance(value, str) or (default is None and not value.strip()):
            raise self.fail(name, f"expected non-empty text, got {value!r}", "not_text",
                            value=repr(value))
        return value

    def number(self, name: str, default: float | None = None, *, positive: bool = True,
               optional: bool = False) -> float:
        value = self._get(name, default, default is None and not optional)
        if value is None:
            return cast(float, None)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(name, f"expected a number, got {value!r}", "not_number",
                            value=repr(value))
        if not math.isfinite(value):
            raise self.fail(name, f"must be a finite number, got {value!r}", "not_finite",
                            value=repr(value))
        if positive and value <= 0:
            raise self.fail(name, f"must be > 0, got {value!r}", "not_positive", value=repr(value))
        if value < 0:
            raise self.fail(name, f"must be >= 0, got {value!r}", "negative", value=repr(value))
        self._check_max(name, value)
        return float(value)

    def flag(self, name: str) -> bool | None:
        """An optional true/false field (None when absent)."""
        value = self._get(name, None, False)
        if value is not None and not isinstance(value, bool):
            raise self.fail(name, f"expected true or false, got {value!r}", "not_bool",
                            value=repr(value))
        return value

    def integer(self, name: str, default: int | None = None, *, positive: bool = True) -> int:
        value = self._get(name, default, default is None)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(name, f"expected a whole number, got {value!r}", "not_integer",
                            value=repr(value))
        if (positive and value <= 0) or value < 0:
            raise self.fail(name, f"must be {'> 0' if positive else '>= 0'}, got {value!r}",
                            "not_positive" if positive else "negative", value=repr(value))
        self._check_max(name, value)
        return value

    def _check_max(self, name: str, value: float) -> None:
        if (problem := bound_problem(name, value)) is not None:
            raise self.fail_note(name, problem)

    def name(self) -> str:
        """The entry's `name`: plain text (`name_problem`)."""
        value = self._get("name", None, True)
        if not isinstance(value, str):
            got = repr(str(value)[:40])
            raise self.fail("name", f"expected text, got {got}", "not_name_text", value=got)
        if (problem := name_problem(value)) is not None:
            raise self.fail_note("name", problem)
        return value

    def finish(self) -> None:
        if unknown := sorted(set(self.table) - self.used):
            known = ", ".join(sorted(self.used))
            raise self.fail(unknown[0], f"unknown field (known: {known})", "unknown",
                            known=known)


def toml_table(text: str | bytes, name: str) -> dict[str, Any]:
    """A catalog file's TOML text (`name`: the file's name, for the message) parsed; bytes that
    are not UTF-8 or a syntax error become a CatalogError naming the file and the line, with a
    code (`note_custom_not_utf8`, `note_custom_not_toml`) so a page says it in its language."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise CatalogError(Note(f"{name}: not UTF-8 text; save the file as UTF-8",
                                    code="custom_not_utf8", file=name)) from None
    try:
        return loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"at line (\d+), column (\d+)", str(exc))
        detail = Note(str(exc), code="parse_at", line=int(at[1]), col=int(at[2])) if at \
            else Note(str(exc), code="parse_failed")
        raise CatalogError(Note(f"{name}: not valid TOML: {exc}", code="custom_not_toml",
                                file=name, detail=detail)) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        why = str(exc.strerror or exc)
        raise CatalogError(Note(f"{path}: cannot read: {why}", code="catalog_unreadable",
                                path=str(path), why=why)) from None
    return toml_table(data, path.name)


def _check_key(e: _Entry) -> str:
    key = e.text("key")
    if not KEY_RE.match(key) or key != key.lower():
        raise e.fail("key", f"'{key[:60]}' must be 1-100 lower-case letters, digits, '.', '-' "
                           "or '_', starting with a letter or a digit", "bad_key", key=key[:60])
    return key


def parse_format(path: Path, table: Mapping[str, Any]) -> WeightFormat:
    """Validate one `[[format]]` table of `weight_formats.toml`."""
    e = _Entry(path, str(table.get("key", "?")), table)
    key = _check_key(e)
    if (compute := e.text("compute_dtype")) not in COMPUTE_DTYPES:
        choices = ", ".join(COMPUTE_DTYPES)
        raise e.fail("compute_dtype", f"'{compute}' is not one of {choices}", "not_one_of",
                     value=compute, choices=choices)
    fmt = WeightFormat(
        key=key, name=e.name(), bits_per_weight=e.number("bits_per_weight"),
        compute_dtype=compute,
        generic=bool(e._get("generic", True, False)), source=e.text("source"),
        notes=e.text("notes", ""), embedding_bits=e.number("embedding_bits", optional=True))
    e.text("as_of")
    e.finish()
    return fmt


def _parse_layer_group(e: _Entry, index: int, table: Mapping[str, Any]) -> LayerGroup:
    g = _Entry(e.path, f"{e.entry}.layers[{index}]", table)
    kind = g.text("kind")
    if kind not in LAYER_KINDS:
        choices = ", ".join(LAYER_KINDS)
        raise g.fail("kind", f"'{kind}' is not one of {choices}", "not_one_of", value=kind,
                     choices=choices)
    count = g.integer("count")
    if kind in ("full", "sliding"):
        group = LayerGroup(kind=kind, count=count, kv_heads=g.integer("kv_heads"),
                           head_dim=g.integer("head_dim"), q_heads=g.integer("q_heads"),
                           window_tokens=g.integer("window_tokens") if kind == "sliding" else 0)
        if group.q_heads % group.kv_heads:
            raise g.fail("kv_heads", f"q_heads {group.q_heads} is not a multiple of "
                                     f"kv_heads {group.kv_heads}", "heads_multiple",
                         q=group.q_heads, kv=group.kv_heads)
    elif kind == "mla":
        group = LayerGroup(kind="mla", count=count, kv_lora_rank=g.integer("kv_lora_rank"),
                           qk_rope_head_dim=g.integer("qk_rope_head_dim"),
                           q_heads=g.integer("q_heads"), head_dim=g.integer("head_dim"))
    else:
        group = LayerGroup(kind="linear", count=count,
                           state_bytes=g.number("state_bytes", positive=False),
                           page_state_bytes=g.number("page_state_bytes", 0.0, positive=False))
    g.finish()
    return group


def parse_model(path: Path, table: Mapping[str, Any], formats: Mapping[str, WeightFormat]
                ) -> Model:
    """Validate one model table (a file under `data/models/`)."""
    e = _Entry(path, str(table.get("key", path.stem)), table)
    key = _check_key(e)
    for fmt in formats:
        if key.endswith("-" + fmt):
            raise e.fail("key", f"'{key}' ends with a weight-format suffix '-{fmt}'",
                         "format_suffix", key=key, fmt=fmt)
    groups_raw = e._get("layers", None, True)
    if not isinstance(groups_raw, list) or not groups_raw:
        raise e.fail("layers", "expected one or more [[layers]] tables", "no_layers")
    groups = tuple(_parse_layer_group(e, i, t) for i, t in enumerate(groups_raw))
    total_layers = e.integer("num_layers")
    if sum(g.count for g in groups) != total_layers:
        counted = sum(g.count for g in groups)
        raise e.fail("layers", f"layer counts add up to {counted}, not num_layers = "
                               f"{total_layers}", "layer_counts", counted=counted,
                     total=total_layers)
    moe_raw = e._get("moe", None, False)
    moe = None
    if moe_raw is not None:
        m = _Entry(path, f"{key}.moe", moe_raw)
        moe = Moe(experts=m.integer("experts"), active=m.integer("active"))
        m.finish()
        if moe.active > moe.experts:
            raise e.fail("moe", f"active {moe.active} > experts {moe.experts}", "moe_active",
                         active=moe.active, experts=moe.experts)
    total, active = e.number("params_total_b"), e.number("params_active_b")
    if active > total:
        raise e.fail("params_active_b", f"{active} exceeds params_total_b {total}",
                     "active_over_total", active=active, total=total)
    if moe is None and active != total:
        raise e.fail("params_active_b", "differs from params_total_b but no [moe] table",
                     "active_without_moe")
    stated: list[StatedVariant] = []
    variants_raw = e._get("variants", [], False)
    if not isinstance(variants_raw, list):
        raise e.fail("variants", "expected [[variants]] tables", "not_variants")
    for i, raw in enumerate(variants_raw):
        v = _Entry(path, f"{key}.variants[{i}]", raw)
        fmt_key = v.text("format")
        if fmt_key not in formats:
            known = ", ".join(formats)
            raise v.fail("format", f"'{fmt_key}' is not a known format ({known})",
                         "unknown_format", value=fmt_key, known=known)
        stated.append(StatedVariant(format=fmt_key, weights_gb=v.number("weights_gb"),
                                    source=v.text("source")))
        v.finish()
    default_format = e.text("default_format", "bf16")
    if default_format not in formats:
        raise e.fail("default_format", f"'{default_format}' is not a known format",
                     "unknown_default_format", value=default_format)
    model = Model(
        key=key, name=e.name(), hf_repo=e.text("hf_repo", ""),
        params_total_b=total, params_active_b=active, hidden=e.integer("hidden"),
        vocab=e.integer("vocab"), max_context_tokens=e.integer("max_context_tokens"),
        layer_groups=groups, moe=moe, default_format=default_format,
        stated_variants=tuple(stated), source=e.text("source"), as_of=e.text("as_of"),
        notes=e.text("notes", ""), path=str(path), tied_embeddings=e.flag("tied_embeddings"))
    e.finish()
    return model


def parse_gpu(path: Path, table: Mapping[str, Any]) -> Gpu:
    """Validate one GPU table (a file under `data/gpus/`)."""
    e = _Entry(path, str(table.get("key", path.stem)), table)
    key = _check_key(e)
    if (kind := e.text("interconnect_kind")) not in ("pcie", "nvlink", "infinity-fabric"):
        choices = "pcie, nvlink, infinity-fabric"
        raise e.fail("interconnect_kind", f"'{kind}' is not one of {choices}", "not_one_of",
                     value=kind, choices=choices)
    if (currency := e.text("currency")) not in ("CNY", "USD"):
        raise e.fail("currency", f"'{currency}' is not CNY or USD", "not_currency",
                     value=currency)
    gpu = Gpu(
        key=key, name=e.name(), memory_gb=e.number("memory_gb"),
        memory_type=e.text("memory_type"), bandwidth_gb_s=e.number("bandwidth_gb_s"),
        bf16_tflops=e.number("bf16_tflops"), fp8_tflops=e.number("fp8_tflops", optional=True),
        int8_tops=e.number("int8_tops", optional=True), interconnect=e.text("interconnect"),
        interconnect_kind=cast(Literal["pcie", "nvlink", "infinity-fabric"], kind),
        interconnect_gb_s=e.number("interconnect_gb_s"), price_per_hour=e.number("price_per_hour"),
        currency=cast(Literal["CNY", "USD"], currency),
        price_source=e.text("price_source"), price_as_of=e.text("price_as_of"),
        source=e.text("source"), as_of=e.text("as_of"),
        memory_driver_gib=e.number("memory_driver_gib", optional=True),
        fp4_tflops=e.number("fp4_tflops", optional=True),
        notes=e.text("notes", ""), path=str(path))
    e.finish()
    return gpu


def _toml_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


def load_catalog(data_dir: Path | str = DATA_DIR,
                 extra_dirs: Iterable[Path | str] = ()) -> Catalog:
    """Read `weight_formats.toml`, `models/*.toml` and `gpus/*.toml` under `data_dir`.

    `extra_dirs` (the custom entries' folder) may add `models/` and `gpus/` folders of user
    entries; a user entry with a bundled entry's key replaces it. A bad bundled entry raises
    CatalogError (a bug of the package); a bad custom file is skipped, and
    `Catalog.warnings` names it, its entry and its field (so one bad upload cannot stop every
    command and page).
    """
    root = Path(data_dir)
    fpath = root / "weight_formats.toml"
    formats: dict[str, WeightFormat] = {}
    for table in _read_toml(fpath).get("format", []):
        fmt = parse_format(fpath, table)
        formats[fmt.key] = fmt
    if not formats:
        raise CatalogError(Note(f"{fpath.name}: no [[format]] entries", code="catalog_no_formats",
                                file=fpath.name))
    models: dict[str, Model] = {}
    gpus: dict[str, Gpu] = {}
    warnings: list[str] = []
    for folder, custom in [(root, False), *((Path(d), True) for d in extra_dirs)]:
        for kind, path in [*(("model", p) for p in _toml_files(folder / "models")),
                           *(("GPU", p) for p in _toml_files(folder / "gpus"))]:
            try:
                if kind == "model":
                    model = parse_model(path, _read_toml(path), formats)
                    models[model.key] = model
                else:
                    gpu = parse_gpu(path, _read_toml(path))
                    gpus[gpu.key] = gpu
            except CatalogError as exc:
                if not custom:  # a bad bundled file is a bug: fail loudly
                    raise
                reason = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
                warnings.append(Note(f"skipped custom {kind} {path}: {exc}",
                                     code=f"catalog_skipped_{kind.lower()}", path=str(path),
                                     reason=reason))  # the reason: a Note, said in the page's language
    if not models or not gpus:
        raise CatalogError(Note(f"{root}: no models or no GPUs found under models/ and gpus/",
                                code="catalog_empty", folder=str(root)))
    return Catalog(models=models, gpus=gpus, formats=formats, warnings=tuple(warnings))


@cache
def _catalog_at(data_dir: str, custom_dir: str) -> Catalog:
    return load_catalog(data_dir, extra_dirs=[custom_dir])


def default_catalog() -> Catalog:
    """The catalog every command and page reads: the bundled entries plus the workspace's
    custom entries (a custom entry with a bundled key replaces it).

    The folders are looked up on every call (`capacity.workspace.catalog_dir` and `custom_dir`:
    $CAPACITY_DATA_DIR, $CAPACITY_CUSTOM_DIR, $CAPACITY_HOME; docs/configuration.md); each pair
    of folders is read once per process, until `clear_catalog_cache` (called when a custom
    entry is saved).
    """
    return _catalog_at(str(workspace.catalog_dir()), str(workspace.custom_dir()))


def clear_catalog_cache() -> None:
    """Forget the catalogs read so far, so the next `default_catalog` sees new entries."""
    _catalog_at.cache_clear()
