"""Every language file (data/i18n/*.toml) has every message, with English's placeholders and its
language's plural forms; the messages cover every key the library produces, and every key literal
the pages and the quote use is in the files (`capacity.report.i18n`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.i18n import CHART_LABELS, OVERLAY_CHART_LABELS, chart_labels, overlay_chart_labels
from capacity.catalog.loader import default_catalog
from capacity.plan.options import REASON_TEXT
from capacity.report.catalog_tables import gpu_rows, model_rows
from capacity.report.charts import DEFAULT_LABELS
from capacity.report.explain import CONSTRAINTS, TABLE_COLUMNS, Targets, explain, show_math
from capacity.report.i18n import LANG_NAMES, LANGS, MESSAGES, bundled, t, tn
from capacity.report.overlay_charts import DEFAULT_LABELS as OVERLAY_DEFAULT_LABELS
from capacity.report.urlstate import DEFAULT_STATE

ROOT = Path(__file__).resolve().parent.parent
M = MESSAGES

# Every file that looks strings up, and the keys it must be found to use (so the grep below
# cannot pass by finding nothing).
SOURCES = {
    "app/bootstrap.py": "nav_explorer",
    "pages/explorer.py": "headline",
    "pages/catalog.py": "cat_title",
    "pages/planner.py": "pl_title",
    "pages/measure.py": "m_title",
    "pages/results.py": "r_title",
    "app/explorer_inputs.py": "prompt_follows",
    "app/explorer_view.py": "compare_diff",
    "app/explorer_tables.py": "unc_flags",
    "app/planner_inputs.py": "pl_mode",
    "app/planner_view.py": "mix_fleet",
    "app/measure_form.py": "m_plan_col_tokens",
    "app/measure_jobs.py": "m_no_jobs_visible",
    "app/results_inputs.py": "r_pick",
    "app/results_view.py": "r_acc_summary",
    "capacity/report/quote.py": "quote_title",
    "capacity/report/check.py": "check_miss",
    "app/disagg_view.py": "pd_m_ttft",
    "app/planner_disagg.py": "dg_col_ratio",
    "capacity/report/quote_disagg.py": "dg_month",
    "app/planner_ep.py": "wep_col_layout",
    "capacity/report/quote_ep.py": "wep_r_head",
}
# t("key" / T("key" / T('key' / tn("key", also with the key on the next line: a literal key or,
# when it ends in "_", the fixed part of a key completed at run time (T("c_" + name)).
KEY_LITERAL = re.compile(r"""\b(?:[tT]|tn)\(\s*["']([a-z0-9_.-]+)["']""")
CALL = re.compile(r"""\b([tT]|tn)\(\s*["']([a-z0-9_.-]+)["']""")


def keys_used(path: str) -> set[str]:
    return set(KEY_LITERAL.findall((ROOT / path).read_text(encoding="utf-8")))


def test_every_language_file_is_complete() -> None:
    """The parity check, over the files: every key in every language, the same placeholders as
    English, a plural message's forms exactly its language's rule's categories."""
    assert bundled().problems() == []


def test_languages() -> None:
    """One language list: the files in data/i18n/, English first."""
    files = sorted(p.stem for p in (ROOT / "data" / "i18n").glob("*.toml"))
    assert LANGS[0] == "en" and sorted(LANGS) == files and {"en", "zh"} <= set(LANGS)
    assert LANG_NAMES == {"en": "English", "zh": "中文"} | {
        lang: bundled().catalog(lang).name for lang in LANGS}
    assert all(len(texts) == len(LANGS) for texts in M.values())
    from capacity.report import urlstate
    assert urlstate.LANGS is LANGS


def test_plural_messages() -> None:
    """Real plural forms, no "(s)": English picks `one` for 1, Chinese has one form."""
    assert tn("r_imported", 1, "en", name="a.csv") == "Read 1 point from a.csv."
    assert tn("r_imported", 3, "en", name="a.csv") == "Read 3 points from a.csv."
    assert tn("r_imported", 1, "zh", name="a.csv") == "已从 a.csv 读取 1 个点。"
    assert tn("pl_log_read", 1, "en", rows="1", kept="1", left="0") == "1 row, 1 used, 0 left out"
    assert tn("pl_log_read", 1200, "en", rows="1,200", kept="1", left="0").startswith("1,200 rows")
    assert t("r_imported", "en", n=2, name="b") == "Read 2 points from b."  # t(): the other form
    fakes = {k: v for lang in LANGS for k, v in bundled().catalog(lang).messages.items()
             if re.search(r"\w\((?:s|es)\)", str(v))}
    assert fakes == {}


def test_plural_messages_are_asked_for_with_a_count() -> None:
    """A plural message through `tn` (with its count), every other one through `t`, in every
    page, app module and library module."""
    files = [*ROOT.glob("pages/*.py"), *ROOT.glob("app/*.py"), *ROOT.glob("capacity/**/*.py")]
    calls = {(fn, key, f.relative_to(ROOT).as_posix()) for f in files
             for fn, key in CALL.findall(f.read_text(encoding="utf-8"))
             if not key.endswith("_") and key in M}
    assert {fn for fn, _, _ in calls} == {"t", "T", "tn"}  # the pattern still finds them
    assert sorted((k, f) for fn, k, f in calls if fn != "tn" and bundled().is_plural(k)) == []
    assert sorted((k, f) for fn, k, f in calls if fn == "tn" and not bundled().is_plural(k)) == []


def test_chart_labels_cover_the_library() -> None:
    assert set(CHART_LABELS) == set(DEFAULT_LABELS)
    assert chart_labels("en") == {k: v[0] for k, v in CHART_LABELS.items()}
    assert all(chart_labels("zh").values())
    assert chart_labels("zh")["concurrency"] == "并发请求数"


def test_overlay_chart_labels_cover_the_library() -> None:
    assert set(OVERLAY_CHART_LABELS) == set(OVERLAY_DEFAULT_LABELS)
    assert overlay_chart_labels("en")["ratio"] == OVERLAY_DEFAULT_LABELS["ratio"]
    assert overlay_chart_labels("zh")["c_vram"] == "显存最大并发（预测）"
    assert overlay_chart_labels("fr") == overlay_chart_labels("en")


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
    # the planner's binding constraints and memory verdicts, on the Planner page and the quote
    needed |= {f"{p}reason_{r}" for p in ("pl_", "quote_") for r in REASON_TEXT}
    needed |= {f"quote_verdict_{v}" for v in ("fits", "tight", "does_not_fit")}
    assert sorted(needed - set(M)) == []


@pytest.mark.parametrize(("path", "known"), [pytest.param(p, k, id=p) for p, k in SOURCES.items()])
def test_every_key_the_sources_use_exists(path: str, known: str) -> None:
    used = keys_used(path)
    assert known in used  # the pattern still finds this file's lookups
    prefixes = {k for k in used if k.endswith("_")}  # T("col_" + name): dynamic keys
    assert [p for p in prefixes if not any(m.startswith(p) for m in M)] == []
    assert sorted(used - prefixes - set(M)) == []


def test_no_other_translation_table() -> None:
    """The one table: no page, app module or library module keeps its own bilingual dict."""
    files = [*ROOT.glob("pages/*.py"), *ROOT.glob("app/*.py"), *ROOT.glob("capacity/**/*.py"),
             ROOT / "streamlit_app.py"]
    own = re.compile(r"""["']zh["']\s*:|dict\[str, tuple\[str, str\]\]\]?\s*=\s*\{""")
    found = [str(f.relative_to(ROOT)) for f in files
             if f.name != "i18n.py" and own.search(f.read_text(encoding="utf-8"))]
    assert found == []


def test_formatting() -> None:
    assert tn("headline", 50, "zh", c="50", ctx="8K", n=1, gpu="RTX 4090") == (
        "1 × RTX 4090：50 个并发请求 × 8K tokens")
    # English picks the form by the requests, never by the GPUs the message also names
    assert tn("headline", 1, "en", c="1", ctx="8K", n=2, gpu="H100") == (
        "1 concurrent request × 8K tokens on 2 × H100")
    assert tn("tp_moved", 1, "en", old=3, new=1, model="Qwen3.5-9B") == (
        "TP=3 is not possible for Qwen3.5-9B on 1 GPU; moved to TP=1, the nearest size that is.")
    assert t("st_fail", "en") == "fail" and t("st_fail", "zh") == "不通过"
    assert t("st_fail", "fr") == "fail"  # unknown language falls back to English
    assert t("pl_options", "zh", n=3, m=40) == "排序方案（3 个满足全部约束，共评估 40 个）"
    assert t("quote_searched", "en", n=7) == "Configurations evaluated: 7"
    with pytest.raises(KeyError):
        t("no_such_key", "en")


def test_library_messages_that_reach_a_page_are_said_in_chinese() -> None:
    """Issue 14 item 12: a scenario's warning and a calibration's notes carry a code and its
    parameters (`capacity.types.Note`); the page says them in its language, the CLI in English."""
    from capacity.fit.calibration import fit
    from capacity.fit.measured import MeasuredPoint
    from capacity.model.scenario import make_scenario
    from capacity.report.i18n import note_text

    s = make_scenario("qwen3.5-9b-awq", "rtx-4090", context_tokens=10_000_000,
                      allow_long_context=True)
    (warning,) = s.warnings
    assert note_text(warning, "en") == str(warning) and "computed anyway" in warning
    assert note_text(warning, "zh").startswith("上下文 10000000 tokens 超出")
    cal = fit([MeasuredPoint(concurrency=1, context_tokens=8192, tpot_ms=7.0)],
              make_scenario("qwen3.5-9b-awq", "rtx-4090"), max_concurrency=(20, 8192))
    codes = {getattr(n, "code", None) for n in cal.notes}
    assert {"no_points", "one_context", "overhead_from_max"} <= codes
    for n in cal.notes:
        assert note_text(n, "en") == str(n)
        zh = note_text(n, "zh")
        assert zh != str(n) and not re.search(r"\b(?:the|at|of|not|from)\b", zh), zh
    assert note_text("a note read back from a file", "zh") == "a note read back from a file"


def test_a_note_survives_pickling_and_copying() -> None:
    """Streamlit pickles cached results: a Note keeps its text, code and parameters."""
    import copy
    import pickle

    from capacity.types import Note

    note = Note("no TTFT points: mfu not fitted", code="no_points", kind="TTFT", names="mfu")
    for back in (pickle.loads(pickle.dumps(note)), copy.deepcopy(note)):
        assert isinstance(back, Note) and back == note
        assert (back.code, back.params) == ("no_points", {"kind": "TTFT", "names": "mfu"})


# Chinese style (issue 24): full-width punctuation in Chinese text, and the terms in Chinese.
# Kept as they are: {placeholders}, `code`, URLs, flags, dotted names, ENV_VARS, digit groups
# (1,000; 10:30), function calls max(a, b), key:value words, and abbreviations (TTFT, TPOT
# only where the Chinese term stands beside them is not required: they are spelled out).
_PROTECT = re.compile(r"\{[^{}]*\}|`[^`]*`|https?://\S+|--[a-z-]+|[a-z_]+\.[a-z_.]+|"
                      r"[A-Z]+_[A-Z_]+=?\w*")
_ENGLISH_TERMS = re.compile(r"\b(?:TTFT|TPOT|prefill|decode|Explorer|Planner)\b")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def zh_style_errors(text: str) -> list[str]:
    """Half-width punctuation and English terms in a Chinese message, outside what is kept."""
    errors = []
    plain = _PROTECT.sub(" ", text)
    if m := _ENGLISH_TERMS.search(plain):
        errors.append(f"English term {m.group()!r}")
    depth: list[bool] = []
    for i, ch in enumerate(plain):
        prev = plain[i - 1] if i else " "
        nxt = plain[i + 1] if i + 1 < len(plain) else " "
        if ch == "(":
            close = plain.find(")", i)
            inner = plain[i:close if close >= 0 else len(plain)]
            depth.append(bool(re.match(r"[A-Za-z0-9_\]]", prev)) and not _CJK.search(inner))
            if not depth[-1]:
                errors.append("half-width '('")
        elif ch == ")":
            if depth and not depth.pop():
                errors.append("half-width ')'")
        elif depth and depth[-1]:
            continue  # inside a function call's arguments
        elif ch == "," and not (prev.isdigit() and nxt.isdigit()):
            errors.append("half-width ','")
        elif ch == ";":
            errors.append("half-width ';'")
        elif ch == ":" and (not nxt.isdigit() or _CJK.match(prev)) and not (
                prev.isalpha() and prev.isascii()
                                                      and nxt.isalpha() and nxt.isascii()):
            errors.append("half-width ':'")
        elif ch == "?" and _CJK.match(prev):
            errors.append("half-width '?'")
    return errors


def test_chinese_messages_use_chinese_punctuation_and_terms() -> None:
    texts = {f"{k}.{form}": text for k, msg in bundled().catalog("zh").messages.items()
             for form, text in ({"": msg} if isinstance(msg, str) else msg).items()}
    bad = {k: errs for k, zh in texts.items() if (errs := zh_style_errors(zh))}
    assert bad == {}
    assert zh_style_errors("排序方案(3 个,共 40 个)") == ["half-width '('", "half-width ','",
                                                          "half-width ')'"]
    assert zh_style_errors("max(bytes / BW, FLOPs)；1,000 个；typical:vllm") == []
    assert zh_style_errors("由 capacity(规划工具)生成") == ["half-width '('", "half-width ')'"]
    assert zh_style_errors("负载下 TPOT p50") == ["English term 'TPOT'"]
