"""Round four of the hostile-input checks (an audit of 2026-12-07): a server's or a shared
store's text reaching the terminal, a model id that is no name, list-valued SQL columns. The
bench client's own cases are beside their code's tests: the BOM (tests/test_bench_sse.py), a
body that is not what its content-encoding says and a gzip bomb (tests/test_bench_wire.py),
an API key no header can carry (tests/test_bench_config.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity.bench.storage import RunWriter
from capacity.bench.transport import MAX_MODEL_ID_CHARS, first_model, short_text
from capacity.cli.main import main
from capacity.errors import BenchError
from capacity.report.tables import render
from capacity.untrusted import terminal_text


def test_terminal_text_by_hand() -> None:
    # clear screen and set the window's title (ESC ... BEL), a C1 CSI, a bidi override, a
    # NUL and a line break each become '?'; printable text of any script stays
    assert terminal_text("\x1b[2J\x1b]0;pwned\x07m1") == "?[2J?]0;pwned?m1"
    assert terminal_text("a\x9bb\u202ec\x00d\ne") == "a?b?c?d?e"
    assert terminal_text("Qwen3-8B 模型 é") == "Qwen3-8B 模型 é"
    # a server's error text on one line, without its escapes
    assert short_text("internal\x1b[31m red\x07\n  more") == "internal?[31m red? more"


def test_a_table_cell_cannot_carry_an_escape_or_a_line_break() -> None:
    out = render(["label", "n"], [["a\x1b[2J\nb", 1]], "text")
    assert "\x1b" not in out and out.splitlines()[2].startswith("a?[2J?b")
    # CSV keeps its own rules (a spreadsheet's): the text stays, neutralised there
    assert "\x1b" in render(["label"], [["a\x1b"]], "csv")


def test_a_model_id_that_is_no_name_is_refused() -> None:
    assert first_model({"data": [{"id": "Qwen/Qwen3-8B"}]}) == "Qwen/Qwen3-8B"
    with pytest.raises(BenchError, match=r"no plain name \(10 characters, '\?\[2Jpwned\?'\): "
                                         r"pass --model NAME"):
        first_model({"data": [{"id": "\x1b[2Jpwned\x07"}]})
    with pytest.raises(BenchError, match=f"{MAX_MODEL_ID_CHARS + 1:,} characters"):
        first_model({"data": [{"id": "m" * (MAX_MODEL_ID_CHARS + 1)}]})


def _run_with_label(root: Path, label: str) -> str:
    with RunWriter(root, "plain") as w:
        w.write_meta({"run_id": w.run_id, "label": label, "status": "finished",
                      "started_at": "2026-12-07T00:00:00+00:00", "model": "m\x1b]0;t\x07",
                      "args": {"base_url": "http://127.0.0.1:8000/v1"}})
        return w.run_id


def test_runs_prints_a_shared_stores_text_without_its_escapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _run_with_label(tmp_path, "lab\x1b[2Jel\r\nx")
    assert main(["runs", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "lab?[2Jel??x" in out
    assert main(["runs", "--out", str(tmp_path), "--run-id", run_id]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.startswith(f"run {run_id} (lab?[2Jel??x)")
    # JSON escapes them itself, and keeps the text as it is
    assert main(["runs", "--out", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["label"] == "lab\x1b[2Jel\r\nx"


@pytest.mark.parametrize("sql, rows", [
    ("SELECT [1, 2] AS xs", [{"xs": [1, 2]}]),
    ("SELECT list(x) AS xs FROM range(3) t(x)", [{"xs": [0, 1, 2]}]),
])
def test_runs_sql_prints_a_list_valued_column(sql: str, rows: list[dict[str, object]],
                                               tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # `.item()` of an array of more than one value raised ValueError (a traceback)
    _run_with_label(tmp_path, "x")
    assert main(["runs", "--out", str(tmp_path), "--sql", sql, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows
    assert main(["runs", "--out", str(tmp_path), "--sql", sql]) == 0
    assert "[" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["plan", "--calibration", "{big}"], ["plan", "--calibration", "/dev/zero"],
    ["calibrate", "--measured", "/dev/zero"], ["catalog", "add-model", "{big}", "--dry-run"],
    ["size", "--mix", "{big}"],
])
def test_a_named_file_too_big_or_endless_is_refused_before_it_is_read(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a 3 GB sparse file given as a calibration was read whole (6.3 GB of memory) before the
    # TOML parser's limit refused it, and /dev/zero grew without end (an audit, 2026-12-07):
    # refused from the file's size and kind, nothing read
    big = tmp_path / "big.toml"
    with big.open("wb") as fh:
        fh.truncate(3 << 30)
    code = main([a.replace("{big}", str(big)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert err.endswith(("big.toml: 3,221,225,472 bytes, over the limit of 16,777,216",
                         "/dev/zero: not a regular file")), err


@pytest.mark.parametrize("argv, says", [
    (["size", "--dau", "10", "--app-url", "javascript:alert(1)", "--quote", "{q}"],
     "an http:// or https:// address with a host and no query, e.g. https://capacity.example.com"),
    (["plan", "--calibration", ""], "argument --calibration: invalid nonempty value: ''"),
    (["plan", "--engine", " "], "argument --engine: invalid nonempty value: ' '"),
    (["size", "--dau", "10", "--calibration", ""],
     "argument --calibration: invalid nonempty value: ''"),
])
def test_flags_that_went_unchecked_are_refused(argv: list[str], says: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # a quote's link took any scheme (CAPACITY_PUBLIC_URL took http(s) only), and an empty
    # --calibration or --engine was taken as no flag at all (an audit, 2026-12-07)
    q = tmp_path / "q.md"
    code = main([a.replace("{q}", str(q)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and err.endswith(says), err
    assert not q.exists()


def test_a_calibration_saved_to_a_path_needs_the_toml_its_help_names(tmp_path: Path) -> None:
    # `calibrate --save ../../x` wrote a file named x two folders up: the help says "NAME.toml
    # (or a path ending in .toml)", and a path now has to end so
    from capacity.errors import InputError
    from capacity.fit.calibration_store import calibration_path
    with pytest.raises(InputError, match=r"--save '\.\./\.\./x': a path must end in \.toml"):
        calibration_path("../../x", for_writing=True)
    assert calibration_path(str(tmp_path / "c.toml"), for_writing=True) == tmp_path / "c.toml"
    assert calibration_path("../../x") == Path("../../x")   # read: any path, as before
