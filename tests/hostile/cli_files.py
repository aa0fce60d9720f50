"""Helpers of the hostile file and flag tests (not a test module): the CLI's one-line error,
and custom GPU files made from a bundled one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from capacity.catalog.loader import DATA_DIR
from capacity.cli.main import main


def one_line_exit_2(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI in process; assert exit 2 with one line on stderr; return that line."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def gpu_text(key: str, **changes: Any) -> str:
    """The bundled MI300X's TOML under a new key, some fields changed (raw TOML values)."""
    text = (DATA_DIR / "gpus" / "mi300x.toml").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines()
             if ln.split("=")[0].strip() not in {"key", *changes}]
    lines.insert(0, f'key = "{key}"')
    lines += [f"{k} = {v}" for k, v in changes.items()]
    return "\n".join(lines) + "\n"


def write_custom_gpu(folder: Path, key: str, **changes: Any) -> Path:
    """`gpu_text` written as FOLDER/gpus/KEY.toml (a custom catalog folder)."""
    path = folder / "gpus" / f"{key}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(gpu_text(key, **changes), encoding="utf-8")
    return path
