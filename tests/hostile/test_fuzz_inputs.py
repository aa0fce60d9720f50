"""Issue 15: fuzzing the imports and every numeric flag (hypothesis).

- the imports (capacity/fit/imports.py): any text, as any format, gives points or an
  InputError, never another exception; the DuckDB reader of our CSV agrees with the row-by-row
  one on every file both can read;
- every numeric flag of every subcommand is declared with the one argparse type
  (capacity/cli/common.py) and, for any float (NaN, infinities, huge, negative) or any text,
  either parses to a finite value within its documented range or is refused in one line
  with exit code 2; `plan` and `size` given random values finish with 0, 1 or 2, never a
  traceback.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capacity.cli.common import Number, nonempty
from capacity.cli.main import SUBCOMMANDS, build_parser, main
from capacity.errors import CapacityError
from capacity.fit.imports import _parse_csv_duckdb, parse_csv, read_measured

LIMIT_S = 240



FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# -- the imports ----------------------------------------------------------------------------

CELLS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-10**40, max_value=10**40).map(str),
    st.sampled_from(["", " ", "true", "nan", "inf", "-0", "0", "1e400", "1_000", "0x10",
                     '"5"', "abc", "9" * 200]),
    st.text(max_size=8),
)
COLUMNS = ["concurrency", "context_tokens", "tpot_ms", "prompt_tokens", "output_tokens",
           "ttft_ms", "output_tok_s", "other"]


@st.composite
def our_csv(draw: st.DrawFn) -> str:
    cols = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=8, unique=True))
    if draw(st.booleans()):
        cols = list(dict.fromkeys(["concurrency", "context_tokens", "tpot_ms", *cols]))
    rows = draw(st.lists(st.lists(CELLS, min_size=len(cols), max_size=len(cols)),
                         max_size=6))
    sep = draw(st.sampled_from(["\n", "\r\n"]))
    body = sep.join(",".join(cells) for cells in rows)
    return ",".join(cols) + sep + body + draw(st.sampled_from(["", sep]))


@st.composite
def valid_csv(draw: st.DrawFn) -> str:
    """Files of good rows, with repeated operating points (duplicates on purpose)."""
    pos = st.floats(min_value=0.01, max_value=1e6, allow_nan=False)
    keys = draw(st.lists(st.tuples(st.integers(1, 64), st.integers(1024, 8192)),
                         min_size=1, max_size=4))
    rows = draw(st.lists(st.tuples(st.sampled_from(keys), pos, st.one_of(st.none(), pos)),
                         min_size=1, max_size=12))
    lines = ["concurrency,context_tokens,tpot_ms,ttft_ms"]
    lines += [f"{c},{ctx},{tpot!r},{'' if ttft is None else repr(ttft)}"
              for (c, ctx), tpot, ttft in rows]
    return "\n".join(lines) + "\n"


def _read(tmp_path: Path, text: str, fmt: str | None, name: str = "in.txt") -> None:
    """Read `text` as `fmt`: either a refusal with a message, or points a fit can use (a
    concurrency, a context and at least one latency, all finite and positive, labelled as
    asked). Anything else (another exception, a NaN or a negative time let through, an empty
    list) fails."""
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    try:
        points = read_measured(f, fmt, concurrency=4.0, model="m", gpu="g")
    except CapacityError as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return
    assert points, "no points and no error"
    for p in points:
        assert (p.model, p.gpu) == ("m", "g")
        assert math.isfinite(p.concurrency) and p.concurrency > 0, p
        assert p.context_tokens > 0, p
        assert p.tpot_ms is not None or p.ttft_ms is not None, p
        for ms in (p.tpot_ms, p.ttft_ms, p.output_tok_s):
            assert ms is None or (math.isfinite(ms) and ms >= 0), p


@FUZZ
@given(text=st.text(max_size=300), fmt=st.sampled_from([None, "csv", "vllm", "aiperf"]))
def test_any_text_in_any_format_is_points_or_an_input_error(tmp_path: Path, text: str,
                                                          fmt: str | None) -> None:
    _read(tmp_path, text, fmt)


@FUZZ
@given(text=our_csv())
def test_our_csv_with_hostile_cells_is_points_or_an_input_error(tmp_path: Path,
                                                              text: str) -> None:
    _read(tmp_path, text, None, "m.csv")


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)
VLLM_KEYS = ["completed", "median_tpot_ms", "mean_tpot_ms", "median_ttft_ms", "max_concurrency",
             "total_input_tokens", "total_output_tokens", "duration", "mean_e2el_ms",
             "output_throughput", "p99_tpot_ms", "time_to_first_token", "inter_token_latency",
             "input_config", "input_sequence_length", "output_sequence_length", "records"]


@FUZZ
@given(obj=st.dictionaries(st.sampled_from(VLLM_KEYS), JSON_VALUES, max_size=10),
       fmt=st.sampled_from([None, "vllm", "aiperf"]))
def test_hostile_json_results_are_points_or_an_input_error(tmp_path: Path, obj: Any,
                                                           fmt: str | None) -> None:
    import json
    _read(tmp_path, json.dumps(obj), fmt, "r.json")


@FUZZ
@given(text=st.one_of(valid_csv(), our_csv()))
def test_the_duckdb_reader_agrees_with_the_row_by_row_reader(tmp_path: Path, text: str) -> None:
    f = tmp_path / "same.csv"
    f.write_bytes(text.encode("utf-8"))
    text = f.read_text(encoding="utf-8-sig")
    try:
        by_rows = parse_csv(f, text)
    except CapacityError:
        by_rows = None
    try:
        fast = _parse_csv_duckdb(f, text)
    except CapacityError:
        fast = None
    if fast is not None:  # None: the file needs the row-by-row reader, which names the line
        assert by_rows is not None
        assert fast == by_rows


# -- every numeric flag ---------------------------------------------------------------------

def _numeric_actions() -> list[tuple[str, argparse.Action]]:
    """Every typed flag but the name flags that must not be empty (`nonempty`, the one text
    check: --calibration, --engine)."""
    out = []
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in SUBCOMMANDS:
        for action in sub.choices[name]._actions:
            if action.type is not None and action.type is not nonempty:
                out.append((name, action))
    return out


NUMERIC = _numeric_actions()


def test_every_typed_flag_uses_the_one_numeric_type() -> None:
    assert len(NUMERIC) > 60
    wrong = [f"{cmd} {a.option_strings[0]}" for cmd, a in NUMERIC
             if not isinstance(a.type, Number)]
    assert not wrong, f"numeric flags without capacity.cli.common.number/whole: {wrong}"


FLAG_VALUES = st.one_of(
    st.floats(min_value=0.0, max_value=2.0).map(repr),
    st.integers(min_value=1, max_value=100_000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(min_value=-10**30, max_value=10**30).map(str),
    st.sampled_from(["nan", "-nan", "inf", "-inf", "Infinity", "1e308", "1e309", "-0",
                     "0", "1", "0.5", " 7 ", "1_000", "0x10", "", "true", "1e-320"]),
    st.text(max_size=6),
)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_numeric_flag_parses_in_range_or_is_refused_in_one_line(
        data: st.DataObject) -> None:
    for cmd, action in NUMERIC:
        text = data.draw(FLAG_VALUES, label=f"{cmd} {action.option_strings[0]}")
        kind = action.type
        assert isinstance(kind, Number)
        try:
            value = kind(text)
        except argparse.ArgumentTypeError as exc:
            assert "\n" not in str(exc)
            continue
        assert math.isfinite(value)
        assert kind.min is None or value >= kind.min
        assert kind.max is None or value <= kind.max
        assert not (kind.min_open and value == kind.min)
        assert not (kind.max_open and value == kind.max)
        if kind.integer:
            assert isinstance(value, int)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from([a.option_strings[0] for c, a in NUMERIC if c == "plan"]),
       value=FLAG_VALUES)
def test_plan_with_any_value_of_any_numeric_flag_never_tracebacks(
        capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    code = main(["plan", f"{flag}={value}", "--format", "json"])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and "Traceback" not in err, err


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from([a.option_strings[0] for c, a in NUMERIC
                             if c == "size" and a.option_strings[0] not in
                             ("--chunked-prefill", "--max-gpus", "--top")]),
       value=FLAG_VALUES)
def test_size_with_any_value_of_any_numeric_flag_never_tracebacks(
        capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    extra = [] if flag in ("--dau", "--peak-concurrency") else ["--peak-concurrency", "20"]
    code = main(["size", *extra, f"{flag}={value}", "--gpus", "rtx-4090,l40s",
                 "--model", "qwen3.5-9b-awq", "--format", "json"])
    err = capsys.readouterr().err
    assert code in (0, 1, 2), err
    if code == 2:
        assert err.count("\n") == 1 and "Traceback" not in err, err


def test_a_vanishing_cost_target_fails_every_option_on_cost_without_a_warning(
        capsys: pytest.CaptureFixture[str]) -> None:
    # found by the fuzz test above: a cost SLO of 1e-320 (a subnormal, inside the flag's
    # range) made cost / target overflow; the ratio reads inf, so every option fails on cost
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(["size", "--peak-concurrency", "20", "--slo-cost-per-mtok=1e-320",
                     "--gpus", "rtx-4090,l40s", "--model", "qwen3.5-9b-awq", "--format", "json"])
    out = capsys.readouterr().out
    assert code == 1 and '"cost"' in out
