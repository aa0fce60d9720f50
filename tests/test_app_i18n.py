"""Every message exists in English and Chinese, and covers every key the library produces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.i18n import CHART_LABELS, M, chart_labels, t
from capacity.catalog import default_catalog
from capacity.catalog_custom import gpu_rows, model_rows
from capacity.charts import DEFAULT_LABELS
from capacity.explain import CONSTRAINTS, TABLE_COLUMNS, Targets, explain, show_math
from capacity.urlstate import DEFAULT_STATE

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("key", sorted(M))
def test_both_languages_present_with_the_same_placeholders(key: str) -> None:
    en, zh = M[key]
    assert en.strip() and zh.strip()
    fields = re.compile(r"\{(\w+)")
    assert set(fields.findall(en)) == set(fields.findall(zh))


def test_chart_labels_cover_the_library() -> None:
    assert set(CHART_LABELS) == set(DEFAULT_LABELS)
    assert chart_labels("en") == {k: v[0] for k, v in CHART_LABELS.items()}
    assert all(chart_labels("zh").values())


def test_library_keys_all_have_messages() -> None:
    s = DEFAULT_STATE.scenario(default_catalog())
    needed = {f"m_{m.key}" for m in show_math(s, 50)}
    needed |= {f"col_{c}" for c in TABLE_COLUMNS}
    needed |= {f"c_{c}" for c in CONSTRAINTS} | {f"q_{c}" for c in CONSTRAINTS}
    needed |= {f"st_{s}" for s in ("pass", "tight", "fail")}
    needed |= {f"v_{v}" for v in ("fits", "tight", "does_not_fit")}
    needed |= {f"d_{d}" for d in ("subtotal", "bandwidth_term", "compute_term", "ttft",
                                  "tpot", "cost")}
    needed |= {f"r_{k}" for k in ("gpus", "kv_dtype", "context", "concurrency", "prompt",
                                  "tp", "mfu", "price")}
    needed |= {f"mc_{k}" for k in model_rows(default_catalog())[0]}
    needed |= {f"gc_{k}" for k in gpu_rows(default_catalog())[0]}
    for c in (10, 100):
        for r in explain(s, c, Targets()).reliefs:
            needed.add(f"r_{r.kind}")
    assert sorted(needed - set(M)) == []


def test_every_key_the_pages_use_exists() -> None:
    used: set[str] = set()
    for page in ("pages/explorer.py", "pages/catalog.py", "streamlit_app.py"):
        text = (ROOT / page).read_text()
        used |= set(re.findall(r'\bTL?\("([a-z0-9_]+)"', text))
        used |= set(re.findall(r'\bt\("([a-z0-9_]+)"', text))
    prefixes = {k for k in used if k.endswith("_")}  # T("col_" + name): dynamic keys
    assert all(any(m.startswith(p) for m in M) for p in prefixes)
    assert used and sorted(used - prefixes - set(M)) == []


def test_formatting() -> None:
    assert t("headline", "zh", c="50", ctx="8K", n=1, gpu="RTX 4090") == (
        "1 × RTX 4090：50 个并发请求 × 8K tokens")
    assert t("st_fail", "en") == "fail" and t("st_fail", "zh") == "不通过"
    assert t("st_fail", "fr") == "fail"  # unknown language falls back to English
