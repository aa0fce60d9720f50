"""`capacity catalog add-model PATH`: a custom model entry from the model's own files.

    capacity catalog add-model ./Qwen3-8B/                 # config.json (+ safetensors sizes)
    capacity catalog add-model config.json --key my-model
    capacity catalog add-model model.gguf                  # a GGUF file (its header is enough)

Reads layers by kind, heads, head_dim, sliding windows, MLA, MoE experts, vocabulary and tied
embeddings; computes the parameter count from the shapes (GGUF: from its tensor table); states
the weight size from the files (safetensors sizes, GGUF tensor bytes). The entry is validated as
the Catalog page does and saved under the workspace's custom/models/ (docs/configuration.md);
`capacity plan --model KEY` then uses it.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

import tomli_w

from capacity.catalog.custom import save_model, validate_model
from capacity.catalog.loader import default_catalog
from capacity.catalog.model_files import table_from_path
from capacity.cli.commands import SUMMARIES


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "catalog", help=SUMMARIES["catalog"],
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("add-model",), help="what to do (add-model)")
    p.add_argument("path", metavar="PATH",
                   help="a config.json, a folder holding one, or a .gguf file")
    p.add_argument("--key", default=None,
                   help="catalog key (default: from the folder or file name)")
    p.add_argument("--name", default="", help="display name (default: the key)")
    p.add_argument("--format", default="bf16", dest="weights_format",
                   help="weight format of a config.json's safetensors (default bf16; a GGUF "
                        "says its own)")
    p.add_argument("--replace", action="store_true",
                   help="replace a custom entry with the same key")
    p.add_argument("--dry-run", action="store_true",
                   help="print the entry as TOML, save nothing")
    return p


def run(args: argparse.Namespace) -> int:
    catalog = default_catalog()
    table = table_from_path(Path(args.path).expanduser(), key=args.key, name=args.name,
                            as_of=dt.date.today().isoformat(),
                            weights_format=args.weights_format)
    model = validate_model(table, catalog, str(table["key"]))
    if args.dry_run:
        print(tomli_w.dumps(table), end="")
        return 0
    # the user's own shell: a bundled key (./Qwen3-8B/ is qwen3-8b) is theirs to shadow, as
    # before; the Catalog page of a shared deployment needs its 'replace' box for that
    _, path = save_model(table, catalog, overwrite=args.replace, replace_bundled=True)
    groups = ", ".join(f"{g.count} {g.kind}" for g in model.layer_groups)
    moe = f", MoE {model.moe.active}/{model.moe.experts}" if model.moe else ""
    print(f"saved custom model '{model.key}' ({model.params_total_b:g} B params, {groups} "
          f"layers{moe}) to {path}; use it with `capacity plan --model {model.key}`")
    return 0
