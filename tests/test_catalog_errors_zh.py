"""The Catalog page's upload errors in the page's language: every CatalogError of the model-file
reader and of the custom-entry saver carries a code (`note_<code>` in data/i18n/), so
`error_text(exc, "zh")` says it in Chinese while the CLI keeps the English text; and a message
names the uploaded file, not a hard-coded 'config.json' or the reader's temporary file."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from capacity.catalog import custom as cc
from capacity.catalog import model_files
from capacity.catalog.loader import default_catalog
from capacity.errors import CatalogError
from capacity.report.i18n import bundled, error_text

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["capacity/catalog/model_files.py", "capacity/catalog/custom.py",
           "capacity/catalog/gguf_reader.py"]
MODEL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000}
LATIN_WORDS = re.compile(r"\b(neither|missing|expected|must be|not valid|already exists|"
                         r"not a readable|without|not UTF-8|Expecting|Invalid|line \d)\b")


@pytest.mark.parametrize("source", SOURCES)
def test_every_catalog_error_of_the_upload_path_carries_a_translated_code(source: str) -> None:
    """A CatalogError raised without a Note stays English on the Chinese page."""
    tree = ast.parse((ROOT / source).read_text(encoding="utf-8"))
    plain = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "CatalogError":
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name)
                    and arg.func.id == "Note"):
                plain.append(node.lineno)
            else:
                code = next((k.value for k in arg.keywords if k.arg == "code"), None)
                if isinstance(code, ast.Constant):
                    assert f"note_{code.value}" in bundled().catalog("zh").messages, code.value
    assert not plain, f"{source}: CatalogError without a Note on lines {plain}"


def _upload(data: bytes, name: str) -> Callable[[], object]:
    return lambda: model_files.table_from_upload(data, name, as_of="2026-11")


def _toml(data: bytes, name: str = "bad.toml") -> Callable[[], object]:
    return lambda: cc.save_toml(data, default_catalog(), name=name)


CASES: list[tuple[str, Callable[[], object], str, str]] = [
    ("not json", _upload(b"\x00\x01 not json", "broken.json"),
     "broken.json: neither a GGUF file nor a JSON config (Expecting value: line 1 column 1",
     "broken.json：既不是 GGUF 文件，也不是 JSON 配置（第 1 行第 1 列有误）"),
    ("missing field", _upload(json.dumps({k: v for k, v in MODEL.items()
                                          if k != "num_hidden_layers"}).encode(), "partial.json"),
     "partial.json: missing num_hidden_layers or n_layer or num_layers",
     "partial.json：缺少 num_hidden_layers / n_layer / num_layers"),
    ("not a count", _upload(json.dumps({**MODEL, "vocab_size": "big"}).encode(), "odd.json"),
     "odd.json: vocab_size must be a whole number > 0", "odd.json：vocab_size 须为大于 0 的整数"),
    ("not a flag", _upload(json.dumps({**MODEL, "tie_word_embeddings": "no"}).encode(),
                           "flag.json"),
     "flag.json: tie_word_embeddings must be true or false", "flag.json：tie_word_embeddings 须为"),
    ("moe", _upload(json.dumps({**MODEL, "num_experts": 8}).encode(), "moe.json"),
     "moe.json: an MoE model without", "moe.json：MoE 模型缺少 num_experts_per_tok"),
    ("not an object", _upload(b"[1, 2]", "list.json"),
     "list.json: expected a JSON object", "list.json：应为一个 JSON 对象"),
    ("not utf-8 json", _upload(b'{"a": "\xff"}', "latin.json"),
     "latin.json: neither a GGUF file nor a JSON config ('utf-8' codec",
     "latin.json：既不是 GGUF 文件，也不是 JSON 配置（第 8 字节起不是 UTF-8 文本）"),
    ("bad gguf", _upload(model_files.GGUF_MAGIC + b"\x03\x00", "tiny.gguf"),
     "tiny.gguf: not a readable GGUF header", "tiny.gguf：不是可读的 GGUF 文件头"),
    ("neither entry", _toml(b'key = "x"\n'),
     "bad.toml: neither a model (needs [[layers]]) nor a GPU", "bad.toml：既不是模型"),
    ("not toml", _toml(b"key = \n"), "bad.toml: not valid TOML: Invalid value",
     "bad.toml：不是有效的 TOML：第 1 行第 7 列有误"),
    ("not utf-8", _toml(b"key = '\xff'\n"), "bad.toml: not UTF-8 text",
     "bad.toml：不是 UTF-8 文本"),
]


@pytest.mark.parametrize(("what", "call", "english", "chinese"), CASES,
                         ids=[c[0] for c in CASES])
def test_upload_errors_in_chinese_name_the_uploaded_file(
        custom: Path, what: str, call: Callable[[], object], english: str,
        chinese: str) -> None:
    with pytest.raises(CatalogError) as info:
        call()
    assert english in str(info.value)  # the CLI's text, unchanged
    zh = error_text(info.value, "zh")
    assert chinese in zh
    assert not LATIN_WORDS.search(zh), zh
    assert error_text(info.value, "en") == str(info.value)


def test_saving_an_existing_custom_entry_twice_is_refused_in_chinese(custom: Path) -> None:
    bundled_gpu = (ROOT / "data/gpus/rtx-4090.toml").read_bytes()
    text = bundled_gpu.replace(b'key = "rtx-4090"', b'key = "my-gpu"')
    cc.save_toml(text, default_catalog(), name="my-gpu.toml")
    with pytest.raises(CatalogError) as info:
        cc.save_toml(text, default_catalog(), name="my-gpu.toml")
    assert "自定义条目 'my-gpu' 已存在" in error_text(info.value, "zh")


def test_a_config_path_names_its_own_file(tmp_path: Path) -> None:
    """`capacity catalog add-model partial.json`: the message names partial.json."""
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({k: v for k, v in MODEL.items() if k != "vocab_size"}))
    with pytest.raises(CatalogError, match=r"^partial\.json: missing vocab_size$"):
        model_files.table_from_path(path, as_of="2026-11")
