"""The Catalog page's upload errors in the page's language: every CatalogError of the model-file
reader and of the custom-entry saver carries a code (`note_<code>` in data/i18n/), so
`error_text(exc, "zh")` says it in Chinese while the CLI keeps the English text; and a message
names the uploaded file, not a hard-coded 'config.json' or the reader's temporary file. The
catalog reader's own file errors (`capacity.catalog.loader`) too, and its warnings naming a
custom file it skipped ('skipped custom GPU .../x.toml: ...' on the Chinese Catalog and
Explorer pages until 2026-12-08)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from capacity.catalog import custom as cc
from capacity.catalog import model_files
from capacity.catalog.loader import default_catalog, load_catalog
from capacity.errors import CatalogError
from capacity.report.i18n import bundled, error_text, note_text

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["capacity/catalog/model_files.py", "capacity/catalog/custom.py",
           "capacity/catalog/gguf_reader.py", "capacity/catalog/loader.py"]
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


def test_the_custom_files_the_catalog_skips_are_named_in_chinese(tmp_path: Path) -> None:
    """A custom folder with a file that is no TOML, one that is no UTF-8 and one with a bad
    field: the catalog loads without them, and each warning says why in the page's language
    (until 2026-12-08 'skipped custom model .../broken.toml: broken.toml: not valid TOML:
    Invalid value (at line 1, column 7)' on the Chinese pages)."""
    gpu = (ROOT / "data/gpus/rtx-4090.toml").read_text(encoding="utf-8")
    for kind, name, data in [
            ("models", "broken.toml", b"key = \n"),
            ("gpus", "latin.toml", b"key = '\xff'\n"),
            ("gpus", "zero.toml", gpu.replace('key = "rtx-4090"', 'key = "my-gpu"')
             .replace("memory_gb = 24", "memory_gb = 0").encode())]:
        (tmp_path / kind).mkdir(exist_ok=True)
        (tmp_path / kind / name).write_bytes(data)
    cat = load_catalog(ROOT / "data", extra_dirs=[tmp_path])
    assert "my-gpu" not in cat.gpus and len(cat.warnings) == 3
    cli = sorted(cat.warnings)   # the CLI's text, unchanged
    assert cli[0].startswith(f"skipped custom GPU {tmp_path / 'gpus' / 'latin.toml'}: "
                             "latin.toml: not UTF-8 text")
    assert cli[2].endswith("broken.toml: not valid TOML: Invalid value (at line 1, column 7)")
    assert sorted(note_text(w, "en") for w in cat.warnings)[2].endswith(
        "broken.toml: not valid TOML: an error at line 1, column 7")
    zh = sorted(note_text(w, "zh") for w in cat.warnings)
    assert zh == sorted([
        f"已跳过自定义 GPU {tmp_path / 'gpus' / 'latin.toml'}：latin.toml：不是 UTF-8 文本；"
        "请以 UTF-8 编码保存该文件",
        f"已跳过自定义 GPU {tmp_path / 'gpus' / 'zero.toml'}：zero.toml：条目 'my-gpu' 的字段 "
        "'memory_gb'：须大于 0，实为 0",
        f"已跳过自定义模型 {tmp_path / 'models' / 'broken.toml'}：broken.toml：不是有效的 TOML："
        "第 1 行第 7 列有误"]), zh
    assert not [z for z in zh if LATIN_WORDS.search(z) or "skipped" in z]


@pytest.mark.parametrize(("layout", "english", "chinese"), [
    ({"weight_formats.toml": b"[[format]\n"}, "weight_formats.toml: not valid TOML",
     "weight_formats.toml：不是有效的 TOML：第 1 行"),
    ({"weight_formats.toml": b"x = 1\n"}, "weight_formats.toml: no [[format]] entries",
     "weight_formats.toml：没有 [[format]] 条目"),
    ({}, "no models or no GPUs found under models/ and gpus/",
     "models/ 和 gpus/ 下没有模型或没有 GPU")])
def test_a_broken_data_folder_is_said_in_chinese(tmp_path: Path, layout: dict[str, bytes],
                                                 english: str, chinese: str) -> None:
    """$CAPACITY_DATA_DIR naming a folder that holds no catalog: the pages' error in Chinese."""
    (tmp_path / "weight_formats.toml").write_bytes(
        (ROOT / "data/weight_formats.toml").read_bytes())
    for name, data in layout.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(CatalogError) as info:
        load_catalog(tmp_path)
    assert english in str(info.value)
    assert chinese in error_text(info.value, "zh")
    assert not LATIN_WORDS.search(error_text(info.value, "zh"))
