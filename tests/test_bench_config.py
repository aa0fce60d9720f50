"""BenchConfig's ranges are declared on its fields, its errors name fields, and the CLI says the same
with the flags the user typed (capacity.cli.bench.FLAGS)."""

from __future__ import annotations

import pickle
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from capacity.bench.config import (
    MAX_PASSES,
    MAX_WORKERS,
    RANGE,
    SEED_MAX,
    BenchConfig,
    ConfigError,
    Range,
)
from capacity.bench.form import MeasureForm
from capacity.cli.bench import FLAGS, NO_FLAG, flag_message
from capacity.cli.main import main
from capacity.errors import InputError

URL = "http://127.0.0.1:9/v1"


def test_every_numeric_field_declares_its_range() -> None:
    declared = {f.name: f.metadata[RANGE] for f in fields(BenchConfig) if RANGE in f.metadata}
    assert declared["passes"] == Range(1, MAX_PASSES)
    assert declared["workers"] == Range(1, MAX_WORKERS)
    assert declared["seed"] == Range(0, SEED_MAX)
    assert declared["request_rate"].above and declared["request_rate"].unit == " requests/s"
    numeric = {f.name for f in fields(BenchConfig) if re.search(r"\b(int|float)\b", str(f.type))}
    unranged = numeric - set(declared)
    # a time, a seconds-since-1970 and the connect timeout (no flag) are not bounded here
    assert unranged == {"connect_timeout_s", "start_at_unix_s"}, unranged


@pytest.mark.parametrize(("change", "says"), [
    ({"passes": 0}, "passes must be between 1 and 16, got 0"),
    ({"workers": 0}, "workers must be between 1 and 256, got 0"),
    ({"requests": 0}, "requests must be >= 1, got 0"),
    ({"warmup": -1}, "warmup must be >= 0, got -1"),
    ({"concurrency": (4, 0)}, "concurrency must be >= 1, got 0"),
    ({"request_rate": float("nan")}, "request_rate must be > 0 requests/s, got nan"),
    ({"request_deadline_s": -1.0}, "request_deadline_s must be > 0 s, got -1.0"),
    ({"gpu_price": -1.0}, "gpu_price must be >= 0, got -1.0"),
    ({"chars_per_token": 100.0}, "chars_per_token must be between 0.5 and 64, got 100.0"),
    ({"seed": 2**70}, f"seed must be between 0 and {SEED_MAX}, got {2**70}"),
    ({"concurrency": (20_000,)}, "concurrency 20000 is above the limit of 10000"),
    ({"passes": 3, "requests": 2}, "passes 3 needs at least 3 requests"),
])
def test_library_errors_name_the_field_not_a_flag(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as err:
        BenchConfig(**({"base_url": URL} | change)).validate()
    assert says in str(err.value)
    assert "--" not in str(err.value)
    assert err.value.fields[0] == next(iter(change))  # the field at fault comes first


def test_a_config_error_is_an_input_error_and_crosses_processes_as_text() -> None:
    exc = ConfigError("{passes} {n} needs at least {n} {requests}, got '{url}'", n=3,
                      url="http://x/{y}")
    assert isinstance(exc, InputError)
    assert exc.fields == ("passes", "requests")
    assert str(exc) == "passes 3 needs at least 3 requests, got 'http://x/{y}'"
    assert flag_message(exc) == "--passes 3 needs at least 3 --requests, got 'http://x/{y}'"
    back = pickle.loads(pickle.dumps(exc))
    assert isinstance(back, InputError) and str(back) == str(exc)


def test_every_field_has_a_flag_or_says_it_has_none() -> None:
    names = {f.name for f in fields(BenchConfig)}
    assert names - NO_FLAG <= set(FLAGS), sorted(names - NO_FLAG - set(FLAGS))
    assert not NO_FLAG & set(FLAGS)


@pytest.mark.parametrize(("argv", "says"), [
    (["--passes", "3", "--requests", "2"],
     "--passes 3 needs at least 3 --requests (each pass measures its share"),
    (["--passes", "2", "--concurrency", "1,4,1", "--requests", "8"],
     "--passes measures each level in every pass: give each --concurrency once"),
    (["--passes", "17"], "--passes must be between 1 and 16, got 17"),
    (["--workers", "1000"], "--workers must be between 1 and 256, got 1000"),
    (["--timeout", "1e12"], "--timeout 1e+12 s is above the limit"),
    (["--shard", "2/2"], "--shard N above 1 needs --run-id, the same on every shard"),
    (["--base-url", "http://127.0.0.1:8000/v1?key=sk-x"], "--base-url takes no query or fragment"),
    (["--passes", "2", "--requests", "8", "--find-max", "--slo-ttft-ms", "100",
      "--slo-tpot-ms", "20"], "--passes goes through fixed levels; --find-max picks its loads"),
])
def test_the_cli_names_the_flags(argv: list[str], says: str, capsys: pytest.CaptureFixture[str],
                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import capacity.cli.bench as cli_bench

    # nothing is reached: the engine probe and /models would ask the (absent) server
    monkeypatch.setattr(cli_bench, "probe_engine", lambda *a, **k: {})
    code = main(["bench", "--base-url", URL, "--out", str(tmp_path), "--workers", "1", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith(f"capacity bench: error: {says}"), err  # after the run's header


@pytest.mark.parametrize("key", ["sk-\u043a\u043b\u044e\u0447-1234", "sk-abc\r\n SECRETTAIL12345",
                                 "sk abc", "sk-\x1b[31m"])
def test_an_api_key_a_header_cannot_carry_is_one_line_naming_none_of_it(
        key: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a non-ASCII key died in httpx's header encoder with a traceback, and a key with CR LF
    # and a space let its tail through the redaction into the message (an audit, 2026-12-07):
    # refused before any request, in one line that names no part of the key, from the
    # command line or the environment
    monkeypatch.setenv("OPENAI_API_KEY", key)
    code = main(["bench", "--base-url", URL, "--out", str(tmp_path), "--workers", "1"])
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert code == 2 and "Traceback" not in out.err
    assert err[-1] == ("capacity bench: error: the API key holds a character an HTTP header "
                       "cannot carry (a space, a control character or one outside ASCII): "
                       "check --api-key or OPENAI_API_KEY"), err
    assert "SECRET" not in out.err + out.out and "\u043a" not in out.err + out.out
    assert not any(tmp_path.iterdir())


def test_the_page_says_its_own_field_names() -> None:
    """The Measure page's limits name the form's fields (the same names as BenchConfig's): no
    flag to strip."""
    with pytest.raises(InputError) as err:
        MeasureForm(base_url=URL, prompt_chars=10**7).validate()
    assert str(err.value).startswith("prompt_chars 10000000 is above the limit")
