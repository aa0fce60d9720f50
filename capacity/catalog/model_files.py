"""A catalog model entry from a model's own files, so users stop typing shapes: a Hugging Face
`config.json` (with the `*.safetensors` beside it, when present, for the weight size) or a GGUF
file's header (`capacity catalog add-model`, the Catalog page; docs/app.md).

config.json: layers (`num_hidden_layers`), query and KV heads, `head_dim` (else hidden / heads),
sliding windows (`layer_types`, Gemma's `sliding_window_pattern`, Mistral's all-sliding
`sliding_window`), MLA (`kv_lora_rank`, DeepSeek), MoE (`num_local_experts` / `num_experts` /
`n_routed_experts` with `num_experts_per_tok`), vocabulary and tied embeddings; multimodal
configs are read from their `text_config`. The parameter count is computed from these shapes
(`config_params`); the weight size is the sum of the safetensors files when they are there.

GGUF: the metadata under the architecture's prefix (`llama.block_count`,
`llama.attention.head_count`, ...) and the tensor table (names, shapes, types): parameters are the
tensors' elements, weights their bytes; routed-expert tensors (`*_exps`) count active at
`expert_used_count / expert_count`. Only the header is read, so a file's first megabytes suffice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# re-exported: the reader lives in its own module, callers import it from here too
from capacity.catalog.gguf_reader import GGUF_MAGIC as GGUF_MAGIC
from capacity.catalog.gguf_reader import GgufHeader as GgufHeader
from capacity.catalog.gguf_reader import GgufTensor as GgufTensor
from capacity.catalog.gguf_reader import read_gguf_header as read_gguf_header
from capacity.catalog.loader import name_problem
from capacity.errors import CatalogError
from capacity.types import Note
from capacity.untrusted import loads_json, read_utf8

GGUF_FORMATS: Mapping[str, str] = {
    "F32": "f32", "F16": "bf16", "BF16": "bf16", "Q8_0": "int8", "Q4_K": "gguf-q4_k_m",
}
"""Catalog weight format of a GGUF by the type of most of its weight bytes (a stated size from
the file wins over bits x params anyway)."""


@dataclass(frozen=True, kw_only=True)
class ParamCount:
    """Parameters of a model computed from its shapes, count (not billions)."""

    total: float
    active: float


@dataclass(frozen=True)
class _Config(Mapping[str, Any]):
    """A config.json's fields (a multimodal one's `text_config` merged in) and the name of the
    file they were read from, which every message names (an upload `partial.json`, not
    'config.json')."""

    fields: Mapping[str, Any]
    file: str

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


def _error(text: str, code: str, **params: str | int | float) -> CatalogError:
    """A CatalogError whose English text the CLI prints and whose code (`note_<code>` in
    data/i18n/) the Catalog page says in its language."""
    return CatalogError(Note(text, code=code, **params))


def _text_config(config: Mapping[str, Any], file: str = "config.json") -> _Config:
    if isinstance(config, _Config):
        return config
    inner = config.get("text_config")
    if isinstance(inner, Mapping):
        return _Config({**{k: v for k, v in config.items() if k != "text_config"}, **inner}, file)
    return _Config(config, file)


def _flag(cfg: _Config, name: str) -> bool:
    """A true/false field (absent: false); anything but a JSON boolean is refused (the string
    "false" is not false, and Python's truth would read it as true)."""
    value = cfg.get(name, False)
    if not isinstance(value, bool):
        got = repr(str(value)[:40])
        raise _error(f"{cfg.file}: {name} must be true or false, got {got}", "mf_not_bool",
                     file=cfg.file, name=name, value=got)
    return value


def _int(cfg: _Config, *names: str, default: int | None = None) -> int:
    """The first of `names` that holds a whole number > 0; `default` when none does (None: the
    field is required). A name that is there with anything but a JSON whole number >= 0 (a
    string, a fraction, a negative) is refused by name, not read as absent: "num_experts": "8"
    is not a dense model."""
    for name in names:
        value = cfg.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0 or (
                value == 0 and default is None):
            got = repr(value)[:40]
            raise _error(f"{cfg.file}: {name} must be a whole number > 0, got {got}",
                         "mf_not_count", file=cfg.file, name=name, value=got)
        if value > 0:
            return value
    if default is None:
        raise _error(f"{cfg.file}: missing {' or '.join(names)}", "mf_missing", file=cfg.file,
                     names=" / ".join(names))
    return default


def _moe(cfg: _Config) -> tuple[int, int, int]:
    """(routed experts, active experts, shared experts); (0, 0, 0) for a dense model."""
    experts = _int(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0)
    if experts <= 1:
        return 0, 0, 0
    active = _int(cfg, "num_experts_per_tok", "moe_topk", default=0)
    if not active:
        raise _error(f"{cfg.file}: an MoE model without num_experts_per_tok", "mf_moe_active",
                     file=cfg.file)
    shared = _int(cfg, "n_shared_experts", "num_shared_experts", default=0)
    return experts, active, shared


def config_params(config: Mapping[str, Any], file: str = "config.json") -> ParamCount:
    """Parameters from a config.json's shapes, count.

    Per layer: attention q, k, v, o (or MLA's low-rank q, kv_a, kv_b, o), two RMSNorms, and a
    SwiGLU MLP of 3 h I (dense) or E routed + S shared experts of 3 h I_moe plus the router
    h E (MoE; DeepSeek's first `first_k_dense_replace` layers are dense); embeddings V h, an
    untied output head V h, the final norm h. Biases are left out (under 0.1% in Qwen2).
    Checked against the published totals: Llama-3.1-8B 8.03 B, Qwen3-30B-A3B 30.5/3.3 B,
    DeepSeek-V3 671/37 B (tests/test_model_files.py). Messages name `file`.
    """
    cfg = _text_config(config, file)
    h = _int(cfg, "hidden_size", "d_model")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    q_heads = _int(cfg, "num_attention_heads", "n_head")
    kv_heads = _int(cfg, "num_key_value_heads", default=q_heads)
    head_dim = _int(cfg, "head_dim", default=h // q_heads)
    vocab = _int(cfg, "vocab_size")
    inter = _int(cfg, "intermediate_size", "ffn_dim", default=4 * h)
    kv_lora = _int(cfg, "kv_lora_rank", default=0)
    if kv_lora:
        rope = _int(cfg, "qk_rope_head_dim")
        nope = _int(cfg, "qk_nope_head_dim")
        v_dim = _int(cfg, "v_head_dim", default=nope)
        q_lora = _int(cfg, "q_lora_rank", default=0)
        qk = nope + rope
        q = (h * q_lora + q_lora + q_lora * q_heads * qk) if q_lora else h * q_heads * qk
        attn = q + h * (kv_lora + rope) + kv_lora + kv_lora * q_heads * (nope + v_dim) \
            + q_heads * v_dim * h
    else:
        attn = h * q_heads * head_dim + 2 * h * kv_heads * head_dim + q_heads * head_dim * h
    experts, active, shared = _moe(cfg)
    dense_mlp = 3 * h * inter
    total = active_total = 0.0
    if experts:
        moe_inter = _int(cfg, "moe_intermediate_size", default=inter)
        dense_layers = min(layers, _int(cfg, "first_k_dense_replace", default=0))
        per_expert = 3 * h * moe_inter
        moe_layers = layers - dense_layers
        base = dense_layers * dense_mlp + moe_layers * (shared * per_expert + h * experts)
        total += base + moe_layers * experts * per_expert
        active_total += base + moe_layers * active * per_expert
    else:
        total += layers * dense_mlp
        active_total += layers * dense_mlp
    common = layers * (attn + 2 * h) + vocab * h + h
    if not _flag(cfg, "tie_word_embeddings"):
        common += vocab * h
    return ParamCount(total=total + common, active=active_total + common)


def _layer_groups(cfg: _Config) -> list[dict[str, Any]]:
    h = _int(cfg, "hidden_size", "d_model")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    q_heads = _int(cfg, "num_attention_heads", "n_head")
    kv_lora = _int(cfg, "kv_lora_rank", default=0)
    if kv_lora:
        rope = _int(cfg, "qk_rope_head_dim")
        nope = _int(cfg, "qk_nope_head_dim")
        v_dim = _int(cfg, "v_head_dim", default=nope)
        return [{"kind": "mla", "count": layers, "kv_lora_rank": kv_lora,
                 "qk_rope_head_dim": rope, "q_heads": q_heads,
                 "head_dim": round(((nope + rope) + v_dim) / 2)}]
    kv_heads = _int(cfg, "num_key_value_heads", default=q_heads)
    head_dim = _int(cfg, "head_dim", default=h // q_heads)
    attn = {"kv_heads": kv_heads, "head_dim": head_dim, "q_heads": q_heads}
    window = cfg.get("sliding_window")
    window = window if isinstance(window, int) and window > 0 else 0
    sliding = 0
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        sliding = sum(1 for t in types if "sliding" in str(t))
    elif window and isinstance(cfg.get("sliding_window_pattern"), int):
        pattern = int(cfg["sliding_window_pattern"])  # every pattern-th layer is full
        sliding = layers - layers // pattern if pattern > 1 else 0
    elif window and cfg.get("use_sliding_window", True) and \
            str(cfg.get("model_type", "")) in ("mistral", "mixtral"):
        sliding = layers
    if window < 1:
        sliding = 0
    groups: list[dict[str, Any]] = []
    if layers - sliding:
        groups.append({"kind": "full", "count": layers - sliding, **attn})
    if sliding:
        groups.append({"kind": "sliding", "count": sliding, **attn, "window_tokens": window})
    return groups


def _billions(count: float) -> float:
    return float(f"{count / 1e9:.4g}")


def _gb(n_bytes: float) -> float:
    return float(f"{n_bytes / 1e9:.4g}")


def table_from_config(config: Mapping[str, Any], *, key: str, name: str = "",
                      weights_bytes: float | None = None, weights_format: str = "bf16",
                      source: str, as_of: str, file: str = "config.json") -> dict[str, Any]:
    """A catalog model table (the loader's format, data/models/*.toml) from a config.json (read
    from `file`, which messages name)."""
    if not isinstance(config, Mapping):
        raise _error(f"{file}: expected a JSON object", "mf_not_object", file=file)
    cfg = _text_config(config, file)
    params = config_params(cfg)
    experts, active, _ = _moe(cfg)
    groups = _layer_groups(cfg)
    table: dict[str, Any] = {
        "key": key, "name": name or key,
        "params_total_b": _billions(params.total), "params_active_b": _billions(params.active),
        "num_layers": sum(g["count"] for g in groups),
        "hidden": _int(cfg, "hidden_size", "d_model"), "vocab": _int(cfg, "vocab_size"),
        "max_context_tokens": _int(cfg, "max_position_embeddings", "n_positions",
                                   default=4096),
        "default_format": weights_format, "source": source, "as_of": as_of,
        "notes": f"read from config.json (model_type {cfg.get('model_type', '?')}); parameters "
                 "computed from the shapes",
        "layers": groups,
    }
    if "tie_word_embeddings" in cfg:
        table["tied_embeddings"] = _flag(cfg, "tie_word_embeddings")
    if experts:
        table["moe"] = {"experts": experts, "active": active}
    else:
        table["params_active_b"] = table["params_total_b"]
    if weights_bytes:
        table["variants"] = [{"format": weights_format, "weights_gb": _gb(weights_bytes),
                              "source": f"{source}: file sizes"}]
    return table


def _safetensors_bytes(folder: Path) -> float | None:
    files = sorted(folder.glob("*.safetensors"))
    return float(sum(f.stat().st_size for f in files)) if files else None


# ---------------------------------------------------------------------------------------------
# GGUF

def _gguf_name(value: object, key: str) -> str:
    """A GGUF's `general.name` as the entry's name when it is plain text (`name_problem`: it
    is shown by the pages, which render Markdown), else the key."""
    return value if isinstance(value, str) and name_problem(value) is None else key


def table_from_gguf(header: GgufHeader, *, key: str, name: str = "", source: str,
                    as_of: str, file: str = "GGUF") -> dict[str, Any]:
    """A catalog model table from a GGUF header (architecture-prefixed metadata + tensors);
    messages name `file`."""
    meta = header.metadata
    arch = str(meta.get("general.architecture", ""))
    if not arch:
        raise _error(f"{file}: no general.architecture", "mf_gguf_no_arch", file=file)

    def get(name: str, default: int) -> int:
        """A count from the metadata: a whole number in [0, 2^40) (per-layer lists: the most
        common value); anything else (a string, a float, NaN, a nested list) is refused."""
        value = meta.get(f"{arch}.{name}", default)
        if isinstance(value, list):
            whole = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
            if len(whole) != len(value):
                raise _error(f"{file}: {arch}.{name} holds values that are not counts",
                             "mf_gguf_not_counts", file=file, name=f"{arch}.{name}")
            value = max(set(whole), key=whole.count) if whole else default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 40:
            got = repr(str(value)[:40])
            raise _error(f"{file}: {arch}.{name} = {got} is not a count", "mf_gguf_not_count",
                         file=file, name=f"{arch}.{name}", value=got)
        return value

    layers = get("block_count", 0)
    hidden = get("embedding_length", 0)
    q_heads = get("attention.head_count", 0)
    if not all(v > 0 for v in (layers, hidden, q_heads)):
        raise _error(f"{file}: missing {arch}.block_count, embedding_length or "
                     "attention.head_count", "mf_gguf_no_shape", file=file, arch=arch)
    kv_heads = get("attention.head_count_kv", q_heads) or q_heads
    head_dim = get("attention.key_length", hidden // q_heads) or hidden // q_heads
    vocab_meta = meta.get(f"{arch}.vocab_size") or meta.get("tokenizer.ggml.tokens")
    vocab = vocab_meta if isinstance(vocab_meta, int) and not isinstance(vocab_meta, bool) else 0
    if isinstance(vocab_meta, list):
        vocab = len(vocab_meta)
    if not vocab:
        vocab = next((t.elements // hidden for t in header.tensors
                      if t.name == "token_embd.weight"), 0)
    experts, active = get("expert_count", 0), get("expert_used_count", 0)
    total = sum(t.elements for t in header.tensors)
    weights = sum(t.n_bytes for t in header.tensors)
    if not total:
        raise _error(f"{file}: no tensors in the header", "mf_gguf_no_tensors", file=file)
    routed = sum(t.elements for t in header.tensors if "_exps" in t.name)
    active_params = total - routed + (routed * active / experts if experts > 1 and active else 0)
    by_type: dict[str, int] = {}
    for t in header.tensors:
        by_type[t.type_name] = by_type.get(t.type_name, 0) + t.n_bytes
    main_type = max(by_type, key=lambda k: by_type[k])
    fmt = GGUF_FORMATS.get(main_type, "bf16")
    attn = {"kv_heads": int(kv_heads), "head_dim": int(head_dim), "q_heads": int(q_heads)}
    window = get("attention.sliding_window", 0)
    groups: list[dict[str, Any]] = [{"kind": "full", "count": int(layers), **attn}]
    table: dict[str, Any] = {
        "key": key, "name": name or _gguf_name(meta.get("general.name"), key),
        "params_total_b": _billions(total), "params_active_b": _billions(active_params),
        "num_layers": int(layers), "hidden": int(hidden), "vocab": int(vocab),
        "max_context_tokens": get("context_length", 4096) or 4096,
        "default_format": fmt, "source": source, "as_of": as_of,
        "notes": f"read from a GGUF header (architecture {arch}, weights mostly {main_type}"
                 f"{f', sliding window {window} not split by layer' if window else ''}); "
                 "parameters and bytes from its tensor table",
        "layers": groups,
        # llama.cpp's loader falls back to token_embd.weight when there is no output.weight
        "tied_embeddings": not any(t.name == "output.weight" for t in header.tensors),
        "variants": [{"format": fmt, "weights_gb": _gb(weights),
                      "source": f"{source}: tensor bytes"}],
    }
    if experts > 1 and active:
        table["moe"] = {"experts": experts, "active": active}
    else:
        table["params_active_b"] = table["params_total_b"]
    return table


# ---------------------------------------------------------------------------------------------
# files and uploads

def _key_from(stem: str) -> str:
    chars = [c if c.isalnum() or c in "._-" else "-" for c in stem.lower()]
    return "".join(chars).strip("-._") or "custom-model"


def table_from_path(path: Path, *, key: str | None = None, name: str = "", as_of: str,
                    weights_format: str = "bf16") -> dict[str, Any]:
    """A model table from a GGUF file, a config.json, or a folder holding a config.json (with
    its safetensors for the weight size)."""
    if path.is_dir():
        folder, config_path = path, path / "config.json"
    else:
        folder, config_path = path.parent, path
    if not config_path.is_file():
        raise _error(f"{path}: no such file (a config.json, a folder with one, or a .gguf)",
                     "mf_no_file", file=str(path))
    with config_path.open("rb") as fh:
        head = fh.read(4)
    if head == GGUF_MAGIC:
        header = read_gguf_header(config_path)
        return table_from_gguf(header, key=key or _key_from(config_path.stem), name=name,
                               source=f"GGUF header of {config_path.name}", as_of=as_of,
                               file=config_path.name)
    try:
        config = loads_json(read_utf8(config_path))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _not_json(config_path.name, exc) from None
    default_key = folder.name if config_path.name == "config.json" else config_path.stem
    return table_from_config(config, key=key or _key_from(default_key), name=name,
                             weights_bytes=_safetensors_bytes(folder),
                             weights_format=weights_format,
                             source=f"config.json of {folder.name}", as_of=as_of,
                             file=config_path.name)


def _not_json(file: str, exc: Exception) -> CatalogError:
    """The parser's own words (English) as a note that says where it stopped in any language."""
    if isinstance(exc, json.JSONDecodeError):
        detail = Note(str(exc), code="parse_at", line=exc.lineno, col=exc.colno)
    elif isinstance(exc, UnicodeDecodeError):
        detail = Note(str(exc), code="not_utf8_at", pos=exc.start + 1)
    else:
        detail = Note(str(exc), code="parse_failed")
    return _error(f"{file}: neither a GGUF file nor a JSON config ({exc})", "mf_not_json",
                  file=file, detail=detail)


def table_from_upload(data: bytes, filename: str, *, key: str | None = None, name: str = "",
                      as_of: str, weights_bytes: float | None = None,
                      weights_format: str = "bf16") -> dict[str, Any]:
    """A model table from uploaded bytes: a GGUF file (or its first megabytes) or a config.json."""
    import tempfile

    stem = Path(filename).stem
    if data[:4] == GGUF_MAGIC:
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "upload.gguf"
            p.write_bytes(data)
            header = read_gguf_header(p, name=filename)
        return table_from_gguf(header, key=key or _key_from(stem), name=name,
                               source=f"GGUF header of {filename}", as_of=as_of, file=filename)
    try:
        config = loads_json(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _not_json(filename, exc) from None
    if not isinstance(config, dict):
        raise _error(f"{filename}: expected a JSON object", "mf_not_object", file=filename)
    default_key = str(config.get("_name_or_path") or config.get("model_type") or stem)
    return table_from_config(config, key=key or _key_from(default_key.split("/")[-1]),
                             name=name, weights_bytes=weights_bytes,
                             weights_format=weights_format, source=f"{filename} (upload)",
                             as_of=as_of, file=filename)

