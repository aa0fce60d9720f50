"""Browse the catalog as tables, and validate and save custom models and GPUs.

Custom entries live as TOML files under `<workspace>/custom/models/` and `.../gpus/` (the
folder named by CAPACITY_CUSTOM_DIR when set; `capacity.workspace.custom_dir`,
docs/configuration.md). `default_catalog`, the one catalog every command and page reads, adds
them to the bundled ones, so they survive a restart and can be used everywhere. Validation is the
loader's own (`parse_model`, `parse_gpu`): the message names the entry and the field. An entry
with a bundled entry's key (an uploaded `rtx-4090.toml`) replaces the bundled one for everyone,
so it is saved only with `overwrite` (the page's 'replace' box), like a custom entry's key;
`capacity catalog add-model` (the user's own shell, whose custom folder is theirs) passes
`replace_bundled` and keeps doing so without `--replace`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from capacity import workspace
from capacity.catalog.loader import (
    KEY_RE,
    Catalog,
    Gpu,
    Model,
    clear_catalog_cache,
    default_catalog,
    parse_gpu,
    parse_model,
    toml_table,
)
from capacity.errors import CatalogError
from capacity.types import Note

ENV_VAR = workspace.CAPACITY_CUSTOM_DIR


def custom_dir() -> Path:
    """Where custom entries are saved: $CAPACITY_CUSTOM_DIR, else `<workspace>/custom`."""
    return workspace.custom_dir()


def clear_caches() -> None:
    """Forget the catalogs read so far, so the next read sees newly saved entries."""
    clear_catalog_cache()


def parse_toml_text(text: str | bytes, name: str = "upload.toml") -> dict[str, Any]:
    """Parse TOML text; a syntax error becomes a CatalogError naming the line (the catalog
    reader's own `toml_table`)."""
    return toml_table(text, name)


def validate_model(table: Mapping[str, Any], catalog: Catalog,
                   name: str = "custom model", *, file_name: str = "") -> Model:
    """Validate a model table exactly as the loader does; CatalogError names the field and
    the file (`file_name`, an upload's own name; else `<name>.toml`)."""
    return parse_model(Path(file_name or f"{name}.toml"), table, catalog.formats)


def validate_gpu(table: Mapping[str, Any], name: str = "custom GPU", *,
                 file_name: str = "") -> Gpu:
    """Validate a GPU table exactly as the loader does; CatalogError names the field and the
    file (`file_name`, an upload's own name; else `<name>.toml`)."""
    return parse_gpu(Path(file_name or f"{name}.toml"), table)


def bundled_entry_path(kind: str, key: str) -> str | None:
    """The file of the bundled entry (`kind`: 'models' or 'gpus') with this key, or None when
    no bundled entry has it (or a custom entry already replaces it)."""
    cat = default_catalog()
    entry: Model | Gpu | None = (cat.gpus if kind == "gpus" else cat.models).get(key)
    return entry.path if entry is not None and not is_custom(entry.path) else None


def _write(kind: str, key: str, table: Mapping[str, Any], directory: Path | None,
           overwrite: bool, replace_bundled: bool = False) -> Path:
    if not KEY_RE.match(key):
        raise CatalogError(Note(f"key '{key[:60]}' must be 1-100 lower-case letters, digits, "
                                "'.', '-' or '_', starting with a letter or a digit",
                                code="custom_bad_key", key=key[:60]))
    if not (overwrite or replace_bundled) and bundled_entry_path(kind, key) is not None:
        # a custom entry with a bundled key replaces the bundled one for every user of the
        # folder: only when asked (an upload of someone's rtx-4090.toml must not do it)
        what = "GPU" if kind == "gpus" else "model"
        raise CatalogError(Note(
            f"'{key}' is a bundled {what}: saving it would replace the bundled entry for "
            "everyone; tick 'replace' (--replace on the command line) to do so, or choose "
            "another key",
            code=f"custom_bundled_{what.lower()}", key=key))
    folder = (directory or custom_dir()) / kind
    path = folder / f"{key}.toml"
    if path.exists() and not overwrite:
        raise CatalogError(Note(f"a custom entry '{key}' already exists ({path}); choose "
                                "another key or tick 'replace' (--replace on the command line)",
                                code="custom_exists", key=key, path=str(path)))
    tmp = path.with_suffix(".toml.tmp")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(tomli_w.dumps(dict(table)).encode("utf-8"))
        tmp.replace(path)
    except OSError as exc:  # a full disk, a read-only folder: a message, and nothing half-saved
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        why = str(exc.strerror or exc)
        raise CatalogError(Note(f"cannot save the custom entry '{key}' in {folder}: {why}",
                                code="custom_save_failed", key=key, folder=str(folder),
                                why=why)) from None
    clear_caches()
    return path


def save_model(table: Mapping[str, Any], catalog: Catalog, *, directory: Path | None = None,
               overwrite: bool = False, replace_bundled: bool = False,
               file_name: str = "") -> tuple[Model, Path]:
    """Validate and save a custom model under `<custom>/models/<key>.toml`; a bundled model's
    key only with `overwrite` or `replace_bundled`. `file_name`: the upload it came from, which
    an error names."""
    model = validate_model(table, catalog, str(table.get("key", "custom model")),
                           file_name=file_name)
    return model, _write("models", model.key, table, directory, overwrite, replace_bundled)


def save_gpu(table: Mapping[str, Any], *, directory: Path | None = None,
             overwrite: bool = False, file_name: str = "") -> tuple[Gpu, Path]:
    """Validate and save a custom GPU under `<custom>/gpus/<key>.toml`; a bundled GPU's key
    only with `overwrite`. `file_name`: the upload it came from, which an error names."""
    gpu = validate_gpu(table, str(table.get("key", "custom GPU")), file_name=file_name)
    return gpu, _write("gpus", gpu.key, table, directory, overwrite)


def save_toml(text: str | bytes, catalog: Catalog, *, directory: Path | None = None,
              overwrite: bool = False, name: str = "upload.toml") -> tuple[str, str, Path]:
    """Save an uploaded TOML file as a model (it has `layers`) or a GPU (it has
    `bandwidth_gb_s`); returns (kind, key, path)."""
    table = parse_toml_text(text, name)
    if "layers" in table:
        model, path = save_model(table, catalog, directory=directory, overwrite=overwrite,
                                 file_name=name)
        return "model", model.key, path
    if "bandwidth_gb_s" in table:
        gpu, path = save_gpu(table, directory=directory, overwrite=overwrite, file_name=name)
        return "gpu", gpu.key, path
    raise CatalogError(Note(f"{name}: neither a model (needs [[layers]]) nor a GPU (needs "
                            "bandwidth_gb_s); see data/models/ and data/gpus/ for examples",
                            code="custom_not_entry", file=name))


def model_form_table(*, key: str, name: str, params_b: float, num_layers: int,
                     full_layers: int, kv_heads: int, head_dim: int, q_heads: int,
                     hidden: int, vocab: int, max_context_tokens: int,
                     linear_layers: int = 0, state_bytes: float = 0.0,
                     weights_gb: float | None = None, weights_format: str = "bf16",
                     source: str, as_of: str,
                     tied_embeddings: bool | None = None) -> dict[str, Any]:
    """A model table from the Catalog page's form: a dense model with full-attention layers
    and optionally linear-attention layers (anything else: upload a TOML file); whether the
    output head reuses the embedding table when the form says (None: not said)."""
    table: dict[str, Any] = {
        "key": key.strip().lower(), "name": name.strip(), "params_total_b": params_b,
        "params_active_b": params_b, "num_layers": num_layers, "hidden": hidden,
        "vocab": vocab, "max_context_tokens": max_context_tokens, "source": source.strip(),
        "as_of": as_of.strip(),
        "layers": [{"kind": "full", "count": full_layers, "kv_heads": kv_heads,
                    "head_dim": head_dim, "q_heads": q_heads}],
    }
    if tied_embeddings is not None:
        table["tied_embeddings"] = tied_embeddings
    if linear_layers:
        table["layers"].append({"kind": "linear", "count": linear_layers,
                                "state_bytes": state_bytes})
    if weights_gb:
        table["variants"] = [{"format": weights_format, "weights_gb": weights_gb,
                              "source": source.strip()}]
    return table


def gpu_form_table(*, key: str, name: str, memory_gb: float, memory_type: str,
                   bandwidth_gb_s: float, bf16_tflops: float, fp8_tflops: float | None,
                   int8_tops: float | None, interconnect: str, interconnect_kind: str,
                   interconnect_gb_s: float, price_per_hour: float, currency: str,
                   price_source: str, source: str, as_of: str,
                   fp4_tflops: float | None = None,
                   memory_driver_gib: float | None = None) -> dict[str, Any]:
    """A GPU table from the Catalog page's form (0 for FP8/INT8/FP4 means 'not supported'; 0
    or None for the driver's memory, `memory_driver_gib`, means 'not known': F3 then budgets
    `memory_gb` on every basis, `Gpu.memory_for`)."""
    table: dict[str, Any] = {
        "key": key.strip().lower(), "name": name.strip(), "memory_gb": memory_gb,
        "memory_type": memory_type.strip(), "bandwidth_gb_s": bandwidth_gb_s,
        "bf16_tflops": bf16_tflops, "interconnect": interconnect.strip(),
        "interconnect_kind": interconnect_kind, "interconnect_gb_s": interconnect_gb_s,
        "price_per_hour": price_per_hour, "currency": currency,
        "price_source": price_source.strip(), "price_as_of": as_of.strip(),
        "source": source.strip(), "as_of": as_of.strip(),
    }
    if fp8_tflops:
        table["fp8_tflops"] = fp8_tflops
    if int8_tops:
        table["int8_tops"] = int8_tops
    if fp4_tflops:
        table["fp4_tflops"] = fp4_tflops
    if memory_driver_gib:
        table["memory_driver_gib"] = memory_driver_gib
    return table


def is_custom(path: str) -> bool:
    """True for an entry read from a custom folder (not the catalog folder itself)."""
    p = Path(path).resolve()
    return p.parent.parent.resolve() != workspace.catalog_dir().resolve()
