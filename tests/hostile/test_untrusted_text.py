"""Hostile JSON and TOML (docs/reliability.md, "Files and replies are parsed with bounds"): deep
nesting, integers of thousands of digits, non-UTF-8 bytes and oversized text give one line
(exit 2 on the command line) or a skipped file with a warning, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from capacity.untrusted import MAX_DEPTH, MAX_TOML_CHARS, loads_json, loads_toml

LIMIT_S = 60
DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_TOML = "a = " + "[" * 5_000 + "]" * 5_000 + "\n"
HUGE_INT = "1" * 5_000


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "capacity", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("text", [DEEP_JSON, HUGE_INT, '{"a": ' + HUGE_INT + "}",
                                  "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)])
def test_json_faults_are_decode_errors(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_json(text)


def test_json_within_the_limits_reads() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert loads_json(ok) is not None
    assert loads_json('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}


@pytest.mark.parametrize("text", [DEEP_TOML, "a = " + HUGE_INT, "x = 1\n" * (MAX_TOML_CHARS // 6 + 1),
                                  "a = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)])
def test_toml_faults_are_decode_errors(text: str) -> None:
    with pytest.raises(tomllib.TOMLDecodeError):
        loads_toml(text)


def test_a_deep_toml_in_the_custom_folder_is_skipped_with_a_warning(tmp_path: Path) -> None:
    custom = tmp_path / "custom"
    (custom / "models").mkdir(parents=True)
    (custom / "models" / "deep.toml").write_text(DEEP_TOML, encoding="utf-8")
    (custom / "models" / "latin1.toml").write_bytes("name = 'caf\xe9'\n".encode("latin-1"))
    out = _cli("plan", env={"CAPACITY_CUSTOM_DIR": str(custom)})
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "deep.toml" in out.stderr and "latin1.toml" in out.stderr


@pytest.mark.parametrize(("name", "content"), [
    ("deep.json", DEEP_JSON.encode()),
    ("digits.json", ('{"num_hidden_layers": ' + HUGE_INT + "}").encode()),
    ("latin1.json", '{"model_type": "caf\xe9"}'.encode("latin-1")),
])
def test_a_hostile_config_json_is_one_line(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    out = _cli("catalog", "add-model", str(path), "--dry-run",
               env={"CAPACITY_CUSTOM_DIR": str(tmp_path / "custom")})
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("name", "content"), [
    ("deep.toml", DEEP_TOML.encode()),
    ("latin1.toml", "[[workload]]\nname = 'caf\xe9'\n".encode("latin-1")),
])
def test_a_hostile_mix_file_is_one_line(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    out = _cli("size", "--mix", str(path))
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr


def _log(tmp_path: Path, name: str, lines: list[str] | bytes) -> Path:
    path = tmp_path / name
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


ROW = '{{"timestamp": {ts}, "prompt_tokens": {p}, "output_tokens": 5}}'


@pytest.mark.parametrize(("name", "content", "says"), [
    ("latin1.jsonl", (ROW.format(ts=1, p=10) + "\n" + ROW.format(ts=2, p=10)[:-1]
                      + ', "x": "caf\xe9"}\n').encode("latin-1"), "not UTF-8 text"),
    ("digits.jsonl", [ROW.format(ts=1, p=HUGE_INT)], "first line is not a JSON object"),
    ("deep.jsonl", ['{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"], "first line is not a JSON object"),
    ("huge_ts.jsonl", [ROW.format(ts="1e308", p=10), ROW.format(ts="-1e308", p=10)],
     "far-off timestamp"),
])
def test_a_hostile_request_log_is_one_line(tmp_path: Path, name: str,
                                           content: list[str] | bytes, says: str) -> None:
    out = _cli("workload", "summarize", str(_log(tmp_path, name, content)))
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and says in out.stderr


def test_bad_rows_are_counted_not_fatal(tmp_path: Path) -> None:
    from capacity.fit.traffic import summarize_log

    path = _log(tmp_path, "mixed.jsonl", [ROW.format(ts=0, p=10), ROW.format(ts=10, p="1e30"),
                                          ROW.format(ts=20, p=10), ROW.format(ts="4e12", p=10)])
    s = summarize_log(path)
    assert (s.rows, s.kept) == (4, 2)
    assert sum(s.bad_rows.values()) == 2
    assert s.span_s == 20.0  # the far-off row does not stretch the span


def test_a_log_at_one_instant_has_no_rate(tmp_path: Path) -> None:
    from capacity.fit.traffic import summarize_log

    path = _log(tmp_path, "instant.jsonl", [ROW.format(ts=5, p=10)] * 3)
    s = summarize_log(path)
    assert not s.arrivals and s.kept == 3  # was 3e9 requests/s (3 rows / 1e-9 s)
    out = _cli("size", "--log", str(path))
    assert out.returncode == 2 and "every request at one instant" in out.stderr
