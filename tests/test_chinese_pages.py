"""Issue 14 item 12: every page rendered in Chinese shows no English words.

Each page is entered through streamlit_app.py with `lang=zh` (Results with a stored run shown and a
fit made, Catalog with a custom entry, the Planner with its default plan). Every text a user can
see is collected: titles, markdown, captions, alerts, metric labels and values, widget labels,
options and placeholders, tab and expander labels, dataframe headers and string cells, and the
titles and legend labels of the Vega-Lite specs. A run of Latin letters that is not a name (model,
GPU, key, file), a unit or an abbreviation on the allow-list below fails the test, naming where it
was found. So does English punctuation in a Chinese text (`ascii_punctuation`: '滑动窗口 (窗口 128)',
'公开数据: ...', 'fp16 KV, 本章引擎 (Vultr)'), the Chinese style being full-width brackets, colons and
commas. So does a table cell drawn as Streamlit's "None" (a missing value in a table that sets
no placeholder). Every collapsible section is opened first: their bodies run only while open
(`app.layout.section`), and until 2026-12-08 the scan never saw the Explorer's charts, tables and
buyer's chart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from google.protobuf.json_format import MessageToDict
from streamlit.testing.v1 import AppTest

from app import explorer_view, frontier_view
from capacity.catalog import custom as catalog_custom
from capacity.catalog.loader import default_catalog
from capacity.catalog.offers import bundled_offers
from capacity.fit.reference import load_reference
from capacity.report.i18n import LANG_NAMES, t

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "streamlit_app.py")

# Abbreviations, units and product words a Chinese reader sees as they are.
ALLOWED = {
    # abbreviations and units (a word with a digit, such as fp8, H100 or p90, is a name anyway)
    "GPU", "GPUs", "CPU", "TP", "PP", "KV", "TTFT", "TPOT", "SLO", "MFU", "eff", "VRAM", "HBM", "TFLOP",
    "TFLOPS", "TOP", "TOPS", "FLOP", "GEMM", "GB", "GiB", "MB", "KiB", "KB", "TB", "ms", "s", "h", "req",
    "tok", "token", "tokens", "M", "K", "B", "CNY", "USD", "PDF", "CSV", "TOML", "JSON", "URL",
    "Markdown", "CLI", "API", "ID", "MoE", "MLA", "GQA", "SXM", "NVL", "SM", "Gbps", "x",
    "MTP", "EAGLE",  # speculative decoding's draft kinds (F12)
    # names of formats, engines, interconnects and methods
    "bf16", "awq", "gptq", "vLLM", "SGLang", "NVLink", "PCIe", "Pareto", "Poisson", "Little",
    "Erlang", "OpenAI", "localhost", "torch", "CUDA", "AIPerf", "UTF",
    # one-letter symbols of the formulas (C concurrency, L context, P parameters...)
    "A", "C", "F", "L", "N", "P", "Q", "T", "W", "c", "n", "t",
    "D",  # 1P+1D: one prefill and one decode replica (docs/disaggregation.md)
    *LANG_NAMES.values(),  # each language's name in itself, on the language switch
}
LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z0-9'’]*(?:[ -][A-Za-z][A-Za-z0-9'’]*)*")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# Streamlit's Markdown directives (`:red[...]`, `:green-badge[`, `:material/block:`) and
# entities are markup, not text.
MARKUP = re.compile(r":[a-z]+(?:-[a-z]+)?\[|:material/[a-z_]+:|&[a-z]+;")
# Cells quoted as they are: bibliographic sources and the vendor's interconnect description.
DATA_COLUMNS = {t(k, "zh") for k in ("mc_source", "gc_source", "gc_interconnect",
                                      "pl_col_source")}
# The proto fields that carry visible text (the rest are layout enums and ids).
TEXT_FIELDS = {"label", "body", "placeholder", "options", "value", "text", "caption",
               "title", "delta"}


def names() -> set[str]:
    """Every word of a catalog name or key and of a weight format's name (shown as they are),
    and of the published reference runs' titles (a vendor's words for its own run), and the price
    offers' providers."""
    cat = default_catalog()
    out: set[str] = set()
    for f in cat.formats.values():
        out |= set(WORD.findall(f.name))
    for ref in load_reference():
        out |= set(WORD.findall(f"{ref.model_name} {ref.gpu_name} {ref.engine}"))
    for m in cat.models.values():
        out |= set(WORD.findall(m.key)) | set(WORD.findall(m.name))
    for g in cat.gpus.values():
        out |= set(WORD.findall(g.key)) | set(WORD.findall(g.name))
    out |= set(WORD.findall(" ".join(cat.formats)))
    out |= set(WORD.findall(" ".join(o.provider for o in bundled_offers(cat))))
    return out


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def vega_texts(spec: dict[str, Any]) -> Iterator[str]:
    """Titles, axis titles, legend titles and the string values of the data a legend shows."""
    for k, v in spec.items():
        if k == "title":
            yield from strings(v)
        elif k in ("datasets",):
            for rows in v.values():
                for row in rows:
                    yield from (x for x in row.values() if isinstance(x, str))
        elif k == "data" and isinstance(v, dict) and "values" in v:
            for row in v["values"]:
                yield from (x for x in row.values() if isinstance(x, str))
        elif isinstance(v, dict):
            yield from vega_texts(v)
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, dict):
                    yield from vega_texts(x)


def page_texts(at: AppTest) -> Iterator[tuple[str, str]]:
    """(element type, text) for every text a user can see on the page."""
    def walk(node: Any) -> Iterator[tuple[str, str]]:
        children = getattr(node, "children", None)
        proto = getattr(node, "proto", None)
        kind = type(node).__name__
        if proto is not None and kind not in ("Block",):
            if kind == "Dataframe":
                df = node.value
                if isinstance(df, pd.DataFrame):
                    config = json.loads(proto.columns or "{}")
                    for col in df.columns:
                        shown = config.get(str(col), {})
                        header = str(shown.get("label") or col)
                        if shown.get("hidden") or header in DATA_COLUMNS:
                            continue
                        yield kind, header
                        for cell in df[col].tolist():
                            if isinstance(cell, str):
                                yield kind, cell
                        # a missing value is drawn as the word "None" unless the table names
                        # its own placeholder ('-')
                        if df[col].isna().any() and not any(
                                f.name == "placeholder" for f, _ in proto.ListFields()):
                            yield kind, f"None（{header}）"
            elif kind == "UnknownElement" and getattr(node, "type", "") == "arrow_vega_lite_chart":
                yield from ((kind, s) for s in vega_texts(json.loads(proto.spec)))
            elif hasattr(proto, "spec") and isinstance(getattr(proto, "spec", None), str):
                yield from (("chart", s) for s in vega_texts(json.loads(proto.spec)))
            elif kind not in ("Code", "Json"):  # formulas and raw records are code
                d = MessageToDict(proto)
                if kind in ("NumberInput", "TextInput", "TextArea"):
                    d.pop("value", None)  # what the user typed
                for k, v in d.items():
                    if k in TEXT_FIELDS:
                        yield from ((f"{kind}.{k}", s) for s in strings(v))
        if children:
            for child in children.values():
                yield from walk(child)
    yield from walk(at._tree)


CJK = "\u3400-\u9fff"
ASCII_PUNCTUATION = re.compile(
    rf"[{CJK}] ?\([^()]*\)"          # '滑动窗口 (窗口 128)', '首字延迟 (s)', '成本 (CNY)'
    rf"|\([^()]*[{CJK}][^()]*\)"     # '(每个请求)'
    rf"|[{CJK}）] ?: "                  # '公开数据: ...', '所选并发: 50'
    rf"|[{CJK}] ?, |, [{CJK}]")        # 'fp16 KV, 本章引擎'


def ascii_punctuation(text: str) -> list[str]:
    """The English brackets, colons and commas around Chinese words in `text` (code and
    addresses left out)."""
    clean = re.sub(r"`[^`]*`|https?://\S+", "", text)
    return [m[0] for m in ASCII_PUNCTUATION.finditer(clean)]


def english_of(text: str, allowed: set[str]) -> list[str]:
    """The runs of Latin words in `text` that are not names, units, keys, paths or numbers."""
    clean = re.sub(r"https?://\S+|/\S+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?:=\w+)?|"
                   r"\b[a-z0-9.]*\d[a-z0-9.]*(?:-[a-z0-9.]+)+|"
                   r"\b[a-z]+(?:-[a-z0-9.]+)*-\d[\w.-]*|"
                   r"\S+\.(?:toml|csv|json|log|md|pdf)\b|`[^`]*`", "", MARKUP.sub(" ", text))
    return [run for run in LATIN_RUN.findall(clean)
            if not all(w in allowed or any(ch.isdigit() for ch in w) for w in WORD.findall(run))]


KNOWN_PUNCTUATION: set[str] = set()
"""Chinese texts still written with English brackets (none since 2026-12-08: the Explorer's
uncertainty rows and its capacity table's cost header now use `with_paren`)."""


def english(at: AppTest, allowed: set[str]) -> list[str]:
    """Every English run on the page, and every English bracket, colon or comma in a Chinese
    text, with the element it is in and the text around it."""
    return sorted({f"{where}: {run!r} in {text[:120]!r}" for where, text in page_texts(at)
                   for run in [*english_of(text, allowed),
                               *(ascii_punctuation(text) if text not in KNOWN_PUNCTUATION
                                 else [])]})


@pytest.fixture(scope="module")
def allowed() -> set[str]:
    return ALLOWED | names()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A custom sliding-window model (its layer kinds on Catalog) in a folder of its own, and a
    custom GPU file that is no TOML (the warning naming it, skipped, on Catalog and Explorer)."""
    monkeypatch.setenv(catalog_custom.ENV_VAR, str(tmp_path / "custom"))
    catalog_custom.clear_caches()
    text = (ROOT / "data" / "models" / "gemma-3-27b.toml").read_text(encoding="utf-8")
    catalog_custom.save_toml(text.replace('key = "gemma-3-27b"', 'key = "my-gemma-27b"'),
                             default_catalog())
    (tmp_path / "custom" / "gpus").mkdir(parents=True, exist_ok=True)
    (tmp_path / "custom" / "gpus" / "broken.toml").write_text("key = \n", encoding="utf-8")
    catalog_custom.clear_caches()
    yield tmp_path
    catalog_custom.clear_caches()


SECTIONS = {"pages/explorer.py": [explorer_view.LOAD_SECTION, explorer_view.UNCERTAINTY_SECTION,
                                   explorer_view.CHARTS_SECTION, explorer_view.TABLE_SECTION,
                                   explorer_view.FRONTIER_SECTION, explorer_view.POOLS_SECTION,
                                   explorer_view.MATH_SECTION],
            "pages/planner.py": [frontier_view.PLANNER_KEY]}
"""The collapsible sections (`app.layout.section`) of each page, opened before the scan."""


def chinese(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["lang"] = "zh"
    at.run()
    at.switch_page(page).run()
    assert not at.exception
    if SECTIONS.get(page):
        for k in SECTIONS[page]:
            at.session_state[k] = True
        at.run()
        assert not at.exception
    return at


@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/explorer.py", "pages/catalog.py", "pages/planner.py",
                                  "pages/measure.py", "pages/results.py"])
def test_every_page_in_chinese_has_no_english_words(page: str, workspace: Path,
                                                    allowed: set[str]) -> None:
    at = chinese(page)
    texts = [text for _, text in page_texts(at)]
    assert len(texts) > 20  # the page was drawn and the collector saw it
    if page == "pages/results.py":
        assert any("sample-rtx-4090-sim" in x for x in texts)  # the sample run is shown
        log = (ROOT / "tests" / "fixtures" / "vllm_logs" / "v0.11.0.log").read_text()
        at.text_area(key="r_vllm").set_value(log).run()  # the log's terms and their causes
        assert not at.exception and any("KV 缓存容量" in x for _, x in page_texts(at))
    if page in ("pages/catalog.py", "pages/explorer.py"):
        assert any("已跳过自定义 GPU" in x and "broken.toml" in x for x in texts)
    if page == "pages/catalog.py":
        assert any("my-gemma-27b" in x for x in texts)
        assert any("滑动窗口" in x for x in texts)  # a layer kind, in Chinese
    assert english(at, allowed) == []


def test_the_check_finds_english() -> None:
    """The checker itself: English words fail; names, units, keys, paths and numbers pass."""
    allowed = ALLOWED | {"RTX"}
    for text, bad in {"10 全注意力 + 52 滑动窗口 (窗口 1024)": True, "首字延迟 (s)": True,
                      "公开数据: RTX 4090": True, "所选并发: 50": True, "fp16 KV, 本章引擎": True,
                      "本章引擎 (Vultr)": True, "滑动窗口（窗口 1024）": False, "公开数据：x": False,
                      "RTX 4090，awq，fp8 KV": False, "1 x H100 (TP=2), awq": False,
                      "见 `a: b (c)` 与 https://x.cn/a,b": False}.items():
        assert bool(ascii_punctuation(text)) is bad, (text, ascii_punctuation(text))
    cases = {"(2 replicas x TP=4)": False, "显存结论：fits": False, "Choose options": False,
             "区间依据：typical efficiency ranges": False, "1 x RTX 4090，awq，fp8 KV": True,
             "每 token 时间 (ms)": True, "rtx-4090-vllm-published": True,
             "设置 CAPACITY_MEASURE=open": True, "见 docs/method.md": True,
             "**显存** &nbsp; :orange-badge[勉强]": True}
    for text, ok in cases.items():
        assert (english_of(text, allowed) == []) is ok, (text, english_of(text, allowed))


def chinese_link(page: str, params: dict[str, str]) -> AppTest:
    """A page opened in Chinese through a link with `params`."""
    at = AppTest.from_file(APP, default_timeout=180).switch_page(page)
    at.query_params["lang"] = "zh"
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    return at


@pytest.mark.slow
@pytest.mark.parametrize(("page", "params", "expect"), [
    # a context past the model's limit: computed, flagged, with the fix
    ("pages/explorer.py", {"ctx": "10000000"}, "超出"),
    # weights that fit no GPU of the what-if: the verdict, the fixes and the load view's error
    ("pages/explorer.py", {"model": "llama-3.1-70b", "weights": "bf16", "engine": "vllm"},
     "放不下"),
    # a link the page cannot use: every notice in Chinese, its reasons too
    ("pages/explorer.py", {"util": "7", "c": "lots", "gpu": "nope",
                           "calibration": "../../etc/passwd"},
     "已忽略"),
    # a pinned what-if the link cannot read, or one with a part that fell back (English until
    # 2026-12-08: "'pin=zz' ignored (items are name:value, ...)", "pin: 'gpu=nope' is not...")
    ("pages/explorer.py", {"pin": "zz"}, "已忽略`pin=zz`"),
    ("pages/explorer.py", {"pin": "gpu:nope"}, "固定的方案："),
    # the Planner: a context past the model's limit from a link, and nothing feasible
    ("pages/planner.py", {"model": "qwen3-8b", "ctx": "999999"}, "超出"),
    ("pages/planner.py", {"gpus": "rtx-4090", "ttft": "100", "tp": "0"}, "没有"),
])
def test_error_states_in_chinese_have_no_english_words(page: str, params: dict[str, str],
                                                       expect: str, workspace: Path,
                                                       allowed: set[str]) -> None:
    """Issue 24: the error states say their errors in Chinese (the context beyond the model's
    limit, a model that does not fit, a link's bad values), with no English left."""
    at = chinese_link(page, params)
    texts = [text for _, text in page_texts(at)]
    assert any(expect in x for x in texts), expect
    assert english(at, allowed) == []


@pytest.mark.parametrize(("name", "data"), [
    ("empty.csv", b""),
    ("cols.csv", b"concurrency,foo\n4,5\n"),
    ("nan.csv", b"concurrency,context_tokens,tpot_ms\n4,8192,fast\n"),
    ("neg.csv", b"concurrency,context_tokens,tpot_ms\n4,8192,-3\n"),
    ("header.csv", b"concurrency,context_tokens,tpot_ms\n"),
    ("bad.json", b'{"median_tpot_ms": '),
    ("other.json", b'{"hello": 1}'),
    ("latin1.csv", "concurrency,context_tokens,tpot_ms\n4,8192,\xe9\n".encode("latin-1")),
])
def test_a_malformed_import_is_refused_in_chinese(name: str, data: bytes,
                                                  allowed: set[str]) -> None:
    """The Results page's import errors (`capacity.fit.imports`) in the page's language."""
    from capacity.errors import CapacityError
    from capacity.fit.overlay import read_upload
    from capacity.report.i18n import error_text

    with pytest.raises(CapacityError) as caught:
        read_upload(name, data, None)
    zh = t("r_error", "zh", msg=error_text(caught.value, "zh"))
    assert zh.startswith("无法读取：") and english_of(zh, allowed) == [], zh
    assert error_text(caught.value, "en") == str(caught.value)
