"""A model or GPU TOML with a wrong field, refused on the Chinese Catalog page in Chinese: every
field error of the catalog's entry reader (`capacity.catalog.loader._Entry.fail`) carries a
code, `note_catalog_field` naming the file, entry and field around `note_field_<code>`, so
`error_text(exc, "zh")` says "rtx.toml：条目 'my-gpu' 的字段 'memory_gb'：须大于 0，实为 0"
where until 2026-12-07 it said "field 'memory_gb': must be > 0, got 0"; the CLI's English
text is unchanged."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from capacity.catalog import custom as cc
from capacity.catalog.loader import default_catalog
from capacity.errors import CatalogError
from capacity.report.i18n import bundled, error_text

ROOT = Path(__file__).resolve().parents[1]
LOADER = ROOT / "capacity/catalog/loader.py"
ZH = bundled().catalog("zh").messages
GPU = (ROOT / "data/gpus/rtx-4090.toml").read_text(encoding="utf-8").replace(
    'key = "rtx-4090"', 'key = "my-gpu"')
MODEL = (ROOT / "data/models/qwen3.5-9b.toml").read_text(encoding="utf-8").replace(
    'key = "qwen3.5-9b"', 'key = "my-model"')
LATIN_WORDS = re.compile(r"\b(entry|field|must|expected|missing|got|unknown|exceeds|beyond|"
                         r"below|denormal|not one of|not a|differs|add up|ends with|per)\b")


def _constants(node: ast.expr) -> list[object]:
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _constants(node.body) + _constants(node.orelse)
    return [None]   # a code the check cannot read: refused


def test_every_field_error_of_the_loader_carries_a_translated_code() -> None:
    """A `fail(field, problem)` without a code stays English on the Chinese page."""
    tree = ast.parse(LOADER.read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "fail"]
    assert len(calls) >= 25
    bad = [(c.lineno, code) for c in calls
           for code in (_constants(c.args[2]) if len(c.args) > 2 else [None])
           if not isinstance(code, str) or f"note_field_{code}" not in ZH]
    assert bad == []
    notes = [k.value.value for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "Note"
             for k in n.keywords if k.arg == "code" and isinstance(k.value, ast.Constant)]
    assert notes and [c for c in notes if f"note_{c}" not in ZH] == []


CASES = [
    ("gpu zero", GPU.replace("memory_gb = 24", "memory_gb = 0"), "memory_gb",
     "field 'memory_gb': must be > 0, got 0", "须大于 0，实为 0"),
    ("gpu currency", GPU.replace('currency = "CNY"', 'currency = "EUR"'), "currency",
     "field 'currency': 'EUR' is not CNY or USD", "'EUR' 不是 CNY 或 USD"),
    ("gpu bound", GPU.replace("price_per_hour = 2.0", "price_per_hour = 1e9"), "price_per_hour",
     "is beyond the physical bound", "超出物理上限"),
    ("gpu unknown", GPU + 'colour = "green"\n', "colour", "field 'colour': unknown field",
     "未知字段（已知字段："),
    ("gpu text", GPU.replace('memory_type = "GDDR6X"', "memory_type = 6"), "memory_type",
     "expected non-empty text, got 6", "应为非空文本，实为 6"),
    ("model layers", MODEL.replace("num_layers = 32", "num_layers = 30"), "layers",
     "layer counts add up to 32, not num_layers = 30", "各层组层数合计 32，不等于 num_layers = 30"),
    ("model heads", MODEL.replace("q_heads = 16", "q_heads = 15"), "kv_heads",
     "q_heads 15 is not a multiple of kv_heads 4", "q_heads 15 不是 kv_heads 4 的整数倍"),
    ("model whole", MODEL.replace("hidden = 4096", "hidden = 4096.5"), "hidden",
     "expected a whole number, got 4096.5", "应为整数，实为 4096.5"),
    ("model active", MODEL.replace("params_active_b = 9", "params_active_b = 3"),
     "params_active_b", "differs from params_total_b but no [moe] table", "没有 [moe] 表"),
    ("model format", MODEL.replace('format = "awq"', 'format = "nf5"'), "format",
     "'nf5' is not a known format", "'nf5' 不是已知的权重格式"),
    ("model name", MODEL.replace('name = "Qwen3.5-9B"', 'name = "[x](http://e)"'), "name",
     "must be plain text", "须为纯文本"),
    ("model kind", MODEL.replace('kind = "full"', 'kind = "dense"'), "kind",
     "'dense' is not one of", "'dense' 不是 "),
]


@pytest.mark.parametrize(("what", "text", "field", "english", "chinese"), CASES,
                         ids=[c[0] for c in CASES])
def test_a_bad_field_is_refused_in_chinese_naming_the_field(
        custom: Path, what: str, text: str, field: str, english: str, chinese: str) -> None:
    with pytest.raises(CatalogError) as info:
        cc.save_toml(text, default_catalog(), name="mine.toml")
    assert english in str(info.value)   # the CLI's text, unchanged
    assert str(info.value).startswith("mine.toml: ")   # the upload's own name, not the key's
    assert error_text(info.value, "en") == str(info.value)
    zh = error_text(info.value, "zh")
    assert re.match(r"mine\.toml：条目 'my-", zh) and f"的字段 '{field}'：" in zh, zh
    assert chinese in zh, zh
    assert not LATIN_WORDS.search(zh.split("：", 1)[1].replace(f"'{field}'", "")), zh
