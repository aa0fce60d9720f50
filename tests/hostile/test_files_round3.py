"""Issue 29: files, exports and uploads (docs/reliability.md).

1. text cells of every CSV written are neutralised for spreadsheets (`=`, `+`, `-`, `@`, tab,
   CR first: a `'` in front); numbers stay numbers;
2. prices per GPU-hour are in [0.001, 10,000] (flags, price files, catalog entries);
3. `bench --start-at` at most 24 h ahead;
4. a custom GPU's numbers have physical lower bounds as well as upper ones;
5. a shard's meta.json with a `shard_count` that is not a count is skipped with a warning;
6. a failed meta.json write names the file and leaves no `meta.json.tmp`;
7. an upload cannot replace a bundled entry unless 'replace' is ticked, a name is plain text,
   and what the Catalog page echoes of an upload is shown as plain text;
8. every cache of the app has a `max_entries`.
"""

from __future__ import annotations

import ast
import csv
import errno
import io
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import pytest
from cli_files import gpu_text, one_line_exit_2, write_custom_gpu
from streamlit.testing.v1 import AppTest

from capacity.bench.config import BenchConfig, ConfigError
from capacity.bench.metrics import RequestRecord, summarize
from capacity.bench.storage import RunWriter, update_meta
from capacity.bench.store import RunStore, compact_all, merge_shards, shard_status
from capacity.catalog import custom as catalog_custom
from capacity.catalog.loader import DATA_DIR, default_catalog
from capacity.catalog.offers import parse_offers
from capacity.cli.main import main
from capacity.errors import CatalogError
from capacity.report.tables import render
from capacity.untrusted import spreadsheet_text

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "streamlit_app.py")
LIMIT_S = 120


# -- 1. CSV formula injection -----------------------------------------------------------------

FORMULAS = ["=HYPERLINK(\"http://evil/\",\"x\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)",
            "\t=1+1", "\r=1+1", "-inf", "=1"]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_text_is_neutralised(text: str) -> None:
    assert spreadsheet_text(text) == "'" + text


@pytest.mark.parametrize("text", ["-1.5", "+2", "-3e-5", "12", "", "plain", "'=x", " =x",
                                  "rtx-4090", "-0.5 10.25 3e-2"])
def test_numbers_and_plain_text_are_kept(text: str) -> None:
    assert spreadsheet_text(text) == text


def test_render_csv_neutralises_text_cells_and_keeps_numbers() -> None:
    rows = [[t, -1.5, -3] for t in FORMULAS] + [["-7", -12345.0, 0]]
    out = list(csv.reader(io.StringIO(render(["=name", "x", "n"], rows, "csv"), newline="")))
    assert out[0] == ["'=name", "x", "n"]
    # one cell each (a bare CR, which ended the row, is a quoted line break)
    assert [r[0] for r in out[1:-1]] == ["'" + t.replace("\r", "\n") for t in FORMULAS]
    assert all(r[1] == "-1.5" and r[2] == "-3" for r in out[1:-1])
    assert out[-1] == ["-7", "-12,345", "0"]  # a number given as text, a negative number


def _record(i: int, run_id: str, **changes: Any) -> RequestRecord:
    base: dict[str, Any] = dict(
        run_id=run_id, label="h", concurrency=2, request_rate_rps=None, request_index=i,
        response_id=f"r{i}", start_unix_s=1_800_000_000.0 + i, queue_ms=0.0, ttft_ms=100.0,
        first_chunk_ms=1.0, e2e_ms=300.0, tpot_ms=10.0, itl_mean_ms=10.0, itl_max_ms=12.0,
        prompt_chars=400, prompt_tokens=100, output_tokens=20, output_tokens_source="usage",
        token_events=20, max_tokens=20, output_length_mismatch=False, finish_reason="length",
        success=True, error_type=None, error_message=None, http_status=200, endpoint="chat",
        model="m", itl_ms="10.0")
    return RequestRecord(**{**base, **changes})


def test_server_text_in_requests_and_summary_csv_is_neutralised(tmp_path: Path) -> None:
    with RunWriter(tmp_path, "h") as w:
        rec = _record(0, w.run_id, response_id="=HYPERLINK(\"http://evil/\")",
                      finish_reason="@evil", error_message="+cmd|' /C calc'!A0",
                      model="-evil", queue_ms=-0.5)
        w.write_request(rec)
        w.write_summary(summarize([rec], run_id=w.run_id, label="h", concurrency=2,
                                  request_rate_rps=None, endpoint="chat", model="=evil"))
        run_dir = Path(w.dir)
    req = next(csv.DictReader(io.StringIO((run_dir / "requests.csv").read_text())))
    assert req["response_id"] == "'=HYPERLINK(\"http://evil/\")"
    assert req["finish_reason"] == "'@evil" and req["error_message"] == "'+cmd|' /C calc'!A0"
    assert req["model"] == "'-evil"
    assert req["queue_ms"] == "-0.5"  # a negative number is a number
    summary = next(csv.DictReader(io.StringIO((run_dir / "summary.csv").read_text())))
    assert summary["model"] == "'=evil"
    with RunStore(tmp_path) as store:  # the store still reads the run, typed
        assert len(store.requests(run_dir.name)) == 1


# -- 2. prices ----------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1e308", "1e-320", "0", "10000.5", "nan"])
def test_size_price_flag_is_bounded(custom: Path, capsys: pytest.CaptureFixture[str],
                                    value: str) -> None:
    err = one_line_exit_2(capsys, "size", "--peak-concurrency", "10", "--model", "qwen3.5-9b",
                          "--price", f"rtx-4090={value}")
    assert "--price" in err and "[0.001, 10,000]" in err


@pytest.mark.parametrize("argv", [
    ["plan", "--gpu-price", "1e308"], ["plan", "--gpu-price", "1e-320"],
    ["bench", "--gpu-price", "1e308"], ["bench", "--gpu-price", "5e-324"],
    ["probe", "--price-per-hour", "1e308"], ["probe", "--price-per-hour", "1e-320"]],
    ids=lambda a: " ".join(a))
def test_price_flags_are_bounded(custom: Path, capsys: pytest.CaptureFixture[str],
                                argv: list[str]) -> None:
    err = one_line_exit_2(capsys, *argv)
    assert f"argument {argv[1]}" in err and "[0.001, 10,000]" in err


OFFER = """[[offer]]
gpu = "rtx-4090"
kind = "on-demand"
price = {price}
currency = "USD"
{extra}
"""


@pytest.mark.parametrize(("price", "extra"), [
    ("1e308", ""), ("1e-320", ""), ("5e-324", ""), ("10001", ""), ("0.0001", ""),
    ("80001", 'per = "node"\ngpus_per_node = 8')])
def test_a_price_file_names_the_file_the_offer_and_the_field(custom: Path, price: str,
                                                             extra: str) -> None:
    with pytest.raises(CatalogError) as err:
        parse_offers(OFFER.format(price=price, extra=extra), default_catalog(), "prices.toml")
    text = str(err.value)
    assert "prices.toml, offer 1" in text and "field 'price'" in text
    assert "10,000" in text


def test_a_price_file_at_the_bounds_reads(custom: Path) -> None:
    cat = default_catalog()
    assert parse_offers(OFFER.format(price="10000", extra=""), cat)[0].price == 10_000
    node = parse_offers(OFFER.format(price="80000", extra='per = "node"\ngpus_per_node = 8'),
                        cat)[0]
    assert node.price_per_gpu_hour == 10_000
    assert parse_offers(OFFER.format(price="0.001", extra=""), cat)[0].price == 0.001


@pytest.mark.parametrize("value", ["1e-320", "5e-324", "0.0001", "10001", "1e308"])
def test_a_custom_gpu_price_out_of_range_is_skipped(custom: Path, value: str) -> None:
    write_custom_gpu(custom, "mi300x-price", price_per_hour=value)
    cat = default_catalog()
    assert "mi300x-price" not in cat.gpus
    assert any("mi300x-price.toml" in w and "field 'price_per_hour'" in w
               for w in cat.warnings)


def test_the_planner_link_refuses_a_denormal_price(custom: Path) -> None:
    from capacity.report.planner_url import DEFAULT_PLANNER, planner_decode

    for value in ("1e-320", "10001"):
        state, notes = planner_decode({"prices": f"rtx-4090:{value}"}, default_catalog())
        assert state.prices == DEFAULT_PLANNER.prices and notes


# -- 3. --start-at -----------------------------------------------------------------------------

@pytest.mark.parametrize("when", ["9999-12-31", "99999999999", "2999-01-01T00:00:00Z"])
def test_start_at_far_ahead_is_refused_before_anything_starts(
        custom: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str) -> None:
    t0 = time.monotonic()
    err = one_line_exit_2(capsys, "bench", "--base-url", "http://127.0.0.1:9/v1",
                          "--requests", "1", "--out", str(tmp_path), "--start-at", when)
    assert "--start-at" in err and "24 h" in err
    assert time.monotonic() - t0 < 30
    assert not list(tmp_path.rglob("*.json"))  # no run started


def test_bench_config_bounds_the_start_time() -> None:
    BenchConfig(base_url="http://x/v1", start_at_unix_s=time.time() + 3600).validate()
    with pytest.raises(ConfigError, match="start_at_unix_s .*24 h"):
        BenchConfig(base_url="http://x/v1", start_at_unix_s=time.time() + 2 * 86_400).validate()
    with pytest.raises(ConfigError, match="start_at_unix_s"):
        BenchConfig(base_url="http://x/v1", start_at_unix_s=math.nan).validate()


# -- 4. custom GPU lower and upper bounds ------------------------------------------------------

@pytest.mark.parametrize(("field", "value"), [
    ("bandwidth_gb_s", "1e-300"), ("bandwidth_gb_s", "0.5"), ("bandwidth_gb_s", "100001"),
    ("bf16_tflops", "1e-300"), ("bf16_tflops", "0.0005"), ("fp8_tflops", "1e-300"),
    ("int8_tops", "1e-300"), ("memory_gb", "1e-300"), ("memory_gb", "0.25"),
    ("memory_driver_gib", "1e-300"), ("interconnect_gb_s", "1e-300"),
    ("interconnect_gb_s", "0.01")])
def test_a_custom_gpu_below_physics_is_skipped(custom: Path, field: str, value: str) -> None:
    write_custom_gpu(custom, "mi300x-tiny", **{field: value})
    cat = default_catalog()
    assert "mi300x-tiny" not in cat.gpus
    assert len(cat.warnings) == 1 and f"field '{field}'" in cat.warnings[0]
    assert "physical bound" in cat.warnings[0]


def test_the_catalog_form_refuses_a_1e_300_bandwidth() -> None:
    table = catalog_custom.gpu_form_table(
        key="slow", name="Slow", memory_gb=24, memory_type="GDDR6", bandwidth_gb_s=1e-300,
        bf16_tflops=100, fp8_tflops=None, int8_tops=None, interconnect="PCIe",
        interconnect_kind="pcie", interconnect_gb_s=25, price_per_hour=2, currency="USD",
        price_source="q", source="s", as_of="2026-11")
    with pytest.raises(CatalogError, match="bandwidth_gb_s.*physical bound 1 GB/s"):
        catalog_custom.validate_gpu(table)


def test_a_gpu_at_the_lowest_bounds_gives_finite_times(custom: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    write_custom_gpu(custom, "slowest", bandwidth_gb_s="1", bf16_tflops="0.001",
                     fp8_tflops="0.001", int8_tops="0.001", memory_gb="0.5",
                     memory_driver_gib="0.5", interconnect_gb_s="0.1")
    assert main(["plan", "--gpu", "slowest", "--model", "qwen3-8b", "--vram", "10000",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out,
                      parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert data["ttft_s"] is not None and math.isfinite(data["ttft_s"])


@pytest.mark.parametrize("argv", [["plan", "--bandwidth", "1e-300"],
                                  ["plan", "--tflops", "1e-300"]], ids=lambda a: a[1])
def test_scenario_flags_already_have_floors(custom: Path, capsys: pytest.CaptureFixture[str],
                                           argv: list[str]) -> None:
    one_line_exit_2(capsys, *argv)


# -- 5. a shard's meta.json with a shard_count that is not a count ----------------------------

def _sharded_run(root: Path, bad: dict[str, Any]) -> Path:
    run_id = "20261130-sharded"
    for i in (1, 2):
        with RunWriter(root, "h", run_id, shard=f"shard-{i}of2") as w:
            meta: dict[str, Any] = {
                "run_id": run_id, "label": "h", "status": "finished", "shard_index": i,
                "shard_count": 2, "started_at": "2026-11-30T10:00:00+00:00", "model": "m",
                "args": {"base_url": "http://127.0.0.1:1/v1", "concurrency": [2]}}
            w.write_meta({**meta, **(bad if i == 2 else {})})
            recs = [_record(k, run_id) for k in range(2)]
            for r in recs:
                w.write_request(r)
            w.write_summary(summarize(recs, run_id=run_id, label="h", concurrency=2,
                                      request_rate_rps=None, endpoint="chat", model="m"))
    return root / "h" / run_id


@pytest.mark.parametrize("bad", [{"shard_count": "x"}, {"shard_count": 1e400},
                                 {"shard_count": [2]}, {"shard_index": "x"},
                                 {"shard_count": True}, {"shard_count": 10**30},
                                 {"shard_index": 5}, {"args": {"concurrency": 5}}],
                         ids=lambda b: json.dumps(b))
def test_a_bad_shard_meta_is_skipped_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any]) -> None:
    run_dir = _sharded_run(tmp_path, bad)
    assert main(["runs", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    if "args" not in bad:
        assert "shard-2of2" in captured.err and "meta.json" in captured.err
        assert merge_shards(run_dir) is None  # the run is not complete: nothing merged
    assert compact_all(tmp_path, warnings=[]) is not None
    assert main(["runs", "--out", str(tmp_path), "--compact"]) == 0


def test_shard_status_of_good_metas() -> None:
    metas = [{"shard_index": 1, "shard_count": 2, "status": "finished"},
             {"shard_index": 2, "shard_count": 2, "status": "finished"}]
    assert shard_status(metas) == ("finished", "2/2 finished")


# -- 6. a full disk while meta.json is written --------------------------------------------------

def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Path.write_text creates the file, then the disk is full (as a real write fails)."""
    def write_text(self: Path, data: str, *args: Any, **kwargs: Any) -> int:
        self.open("w").close()
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Path, "write_text", write_text)


def test_a_full_disk_names_meta_json_and_leaves_no_tmp(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with RunWriter(tmp_path, "h") as w:
        w.write_meta({"run_id": w.run_id, "status": "running"})
        before = w.meta_path.read_text()
        _full_disk(monkeypatch)
        with pytest.raises(OSError) as err:
            w.write_meta({"run_id": w.run_id, "status": "finished"})
        monkeypatch.undo()
        assert err.value.errno == errno.ENOSPC
        assert str(w.meta_path) in str(err.value)
        assert not w.meta_path.with_suffix(".json.tmp").exists()
        assert w.meta_path.read_text() == before  # the last good meta.json stays
        _full_disk(monkeypatch)
        with pytest.raises(OSError, match="meta.json"):
            update_meta(w.dir, {"x": 1})
        monkeypatch.undo()
        assert not w.meta_path.with_suffix(".json.tmp").exists()


def test_the_error_carries_the_file_for_the_cli_line(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """capacity.cli.main prints an OSError as 'error: STRERROR (FILENAME)', exit 2."""
    w = RunWriter(tmp_path, "h")
    _full_disk(monkeypatch)
    with pytest.raises(OSError) as err:
        w.write_meta({"run_id": w.run_id})
    monkeypatch.undo()
    w.close()
    assert err.value.filename == str(w.meta_path)
    assert err.value.strerror == "No space left on device"
    assert not list(tmp_path.rglob("*.tmp"))


# -- 7. Catalog uploads ---------------------------------------------------------------------

def test_an_upload_with_a_bundled_key_needs_replace(custom: Path) -> None:
    text = gpu_text("rtx-4090", name='"Cheap 4090"', price_per_hour="0.01")
    with pytest.raises(CatalogError, match="'rtx-4090' is a bundled GPU.*tick 'replace'"):
        catalog_custom.save_toml(text, default_catalog())
    assert not (custom / "gpus" / "rtx-4090.toml").exists()
    assert default_catalog().gpus["rtx-4090"].name == "RTX 4090"
    kind, key, path = catalog_custom.save_toml(text, default_catalog(), overwrite=True)
    assert (kind, key) == ("gpu", "rtx-4090") and path.exists()
    assert default_catalog().gpus["rtx-4090"].name == "Cheap 4090"


def test_a_model_with_a_bundled_key_needs_replace(custom: Path) -> None:
    text = (DATA_DIR / "models" / "llama-3.1-8b.toml").read_text(encoding="utf-8")
    with pytest.raises(CatalogError, match="bundled"):
        catalog_custom.save_toml(text, default_catalog())


@pytest.mark.parametrize("name", ["![x](http://evil/)", "[click](http://evil/)",
                                  "<img src=http://evil/>", "see http://evil/",
                                  "www.evil.com", "a`b`", "$x^2$", ":material/home:",
                                  "x\ny", "x" * 101, " ", "a@evil.com"])
def test_a_name_is_plain_text(custom: Path, name: str) -> None:
    text = gpu_text("my-gpu", name=json.dumps(name))
    with pytest.raises(CatalogError, match="field 'name'.*plain text") as err:
        catalog_custom.save_toml(text, default_catalog())
    assert "http://evil" not in str(err.value)  # the value is not echoed
    write_custom_gpu(custom, "my-gpu", name=json.dumps(name))
    assert "my-gpu" not in default_catalog().gpus


@pytest.mark.parametrize("name", ["RTX 4090 (24 GB)", "Qwen3.5-9B", "GGUF Q4_K_M (llama.cpp)",
                                  "A+B/C, 50% & more", "通义千问 3", "O'Brien's GPU"])
def test_ordinary_names_are_kept(custom: Path, name: str) -> None:
    text = gpu_text("my-gpu", name=json.dumps(name))
    catalog_custom.save_toml(text, default_catalog())
    assert default_catalog().gpus["my-gpu"].name == name


def plain_markdown(text: str) -> bool:
    """True when `text`, rendered as Markdown, can hold no link, image or HTML: every bracket
    is escaped and no URL is left whole."""
    return re.search(r"(?<!\\)[\[\]<>]", text) is None and "http://" not in text


def test_markdown_plain_escapes_links_and_keeps_the_rest() -> None:
    from app.format import markdown_plain

    text = "skipped /c/gpus/mi300x-nan.toml: field 'price_per_hour': ![x](http://e/) www.e.com"
    out = markdown_plain(text)
    assert plain_markdown(out) and "www.e" not in out
    assert "mi300x-nan.toml" in out and "price_per_hour" in out


def open_upload(custom: Path) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/catalog.py").run()
    at.segmented_control(key="cat_kind").set_value("upload").run()
    assert not at.exception
    return at


def test_the_catalog_page_refuses_a_bundled_key_without_replace(custom: Path) -> None:
    at = open_upload(custom)
    text = gpu_text("rtx-4090", name='"Cheap 4090"').encode()
    at.file_uploader(key="cat_upload").set_value(("rtx-4090.toml", text, "application/toml"))
    at.run()
    at.button(key="cu_save").click().run()
    assert not at.exception
    assert any("bundled" in e.value and "rtx-4090" in e.value for e in at.error)
    assert not (custom / "gpus" / "rtx-4090.toml").exists()


def test_the_catalog_page_echoes_an_upload_as_plain_text(custom: Path) -> None:
    at = open_upload(custom)
    text = gpu_text("evil", bandwidth_gb_s='"![x](http://evil/)"').encode()
    at.file_uploader(key="cat_upload").set_value(("evil.toml", text, "application/toml"))
    at.run()
    at.button(key="cu_save").click().run()
    assert not at.exception and at.error
    assert all(plain_markdown(e.value) for e in at.error)
    assert any("bandwidth_gb_s" in e.value for e in at.error)


@pytest.mark.parametrize("page", ["pages/catalog.py", "pages/explorer.py"])
def test_catalog_warnings_are_shown_as_plain_text(custom: Path, page: str) -> None:
    write_custom_gpu(custom, "evil", memory_gb='"![x](http://evil/)"')
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page).run()
    assert not at.exception
    shown = [w.value for w in at.warning if "evil.toml" in w.value]
    assert shown and all(plain_markdown(w) for w in shown)


# -- 8. every cache of the app is bounded -------------------------------------------------------

CACHE_DECORATORS = {"cache_data", "cache_resource", "cached"}


def _cache_calls(path: Path) -> list[tuple[int, bool]]:
    """(line, has max_entries) of every st.cache_data / st.cache_resource / cache.cached use
    (a call, or a bare decorator), and of every functools cache (never bounded per entry)."""
    def name_of(func: ast.expr) -> str:
        return func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""

    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and name_of(node.func) in CACHE_DECORATORS:
            out.append((node.lineno, any(k.arg == "max_entries" for k in node.keywords)))
        elif isinstance(node, ast.Call) and name_of(node.func) == "lru_cache":
            out.append((node.lineno, False))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out += [(d.lineno, False) for d in node.decorator_list
                    if not isinstance(d, ast.Call)
                    and name_of(d) in {*CACHE_DECORATORS, "cache", "lru_cache"}]
    return sorted(out)


def test_every_app_cache_has_max_entries() -> None:
    files = [*sorted((ROOT / "app").glob("*.py")), *sorted((ROOT / "pages").glob("*.py")),
             ROOT / "streamlit_app.py"]
    found = {(str(p.relative_to(ROOT)), line): ok for p in files for line, ok in _cache_calls(p)}
    assert len(found) > 10  # the check sees the caches
    unbounded = [f"{f}:{line}" for (f, line), ok in found.items() if not ok]
    assert not unbounded, f"caches without max_entries: {unbounded}"


def test_the_cache_check_finds_an_unbounded_cache(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import streamlit as st\n@st.cache_data\ndef a(): ...\n"
                 "@st.cache_data(show_spinner=False)\ndef b(): ...\n"
                 "@st.cache_resource(max_entries=2)\ndef c(): ...\n")
    assert [ok for _, ok in _cache_calls(f)] == [False, False, True]
