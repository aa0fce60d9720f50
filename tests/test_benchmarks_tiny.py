"""Every benchmark script still runs: `benchmarks/bench_*.py --tiny` in a subprocess (the same
code paths at the smallest sizes), each writing a well-formed results file (benchmarks/record.py).

A schema change that breaks a benchmark breaks this test, not the docs. Scripts that start a
simulated endpoint or a moto server, or take over about 0.75 s idle (a new interpreter importing
pandas, DuckDB or Streamlit: 2-7 s at load 5), are `slow`, so the quick loop runs only
`bench_grid.py` here and the full suite runs them all; the one that drives Chromium is
`browser` too. The committed full-size results are checked here as well.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.record import RESULTS, Recorder, check  # noqa: E402

SLOW = pytest.mark.slow
BROWSER = pytest.mark.browser
SCRIPTS: dict[str, tuple[list[str], list[pytest.MarkDecorator]]] = {
    "bench_grid.py": ([], []),
    "bench_duckdb.py": ([], [SLOW]),         # writes 10 runs' CSVs and Parquet: ~7 s at load 5
    "bench_planner.py": ([], [SLOW]),        # the planner's searches in a new process: ~2 s
    "bench_results.py": ([], [SLOW]),        # a calibration fit and the event model: 10-50 s
    "bench_calibrate_import.py": ([], [SLOW]),  # DuckDB import + a fit: ~2.5 s
    "bench_traffic_log.py": ([], [SLOW]),    # DuckDB + the planner: ~2 s (and --jsonl)
    "bench_startup.py": ([], [SLOW]),        # four fresh `capacity` processes: ~2 s
    "bench_explorer.py": ([], [SLOW]),       # Streamlit's AppTest reruns: ~6 s
    "bench_validate.py": ([], [SLOW]),        # the whole scorecard once: 5-15 s
    "bench_client.py": ([], [SLOW]),          # starts sim-server
    "bench_endpoint.py": ([], [SLOW]),        # starts sim-server twice
    "bench_fleet.py": ([], [SLOW]),           # starts sim-server
    "bench_find_max.py": ([], [SLOW]),        # starts sim-server
    "bench_store_10m.py": ([], [SLOW]),       # starts moto's S3 server
    "bench_first_screen.py": ([], [SLOW, BROWSER]),  # Streamlit + Chromium
    "bench_frontier.py": ([], [SLOW]),        # the full frontiers once each, and a fresh CLI
    "bench_rate_ceiling.py": ([], [SLOW]),    # starts sim-server, two short open-loop levels
}
"""Every script run here, its extra arguments and its marks."""
EXTRA_RUNS = {"bench_traffic_log.py --jsonl": ("bench_traffic_log.py", ["--jsonl"], "traffic_log_jsonl")}
"""Second runs of a script with another format (a results file of its own)."""
NOT_TINY: dict[str, str] = {}
"""Scripts without a tiny mode yet, and why (none now)."""
TIMEOUT_S = 300


def _run(script: str, extra: list[str], out: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--tiny",
                           "--json-out", str(out), *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{script} --tiny failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert out.exists(), f"{script} --tiny --json-out wrote nothing"
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def _params() -> list[Any]:
    rows = [pytest.param(name, extra, name.removeprefix("bench_").removesuffix(".py"),
                         marks=marks, id=name) for name, (extra, marks) in SCRIPTS.items()]
    for key, (name, extra, stem) in EXTRA_RUNS.items():
        rows.append(pytest.param(name, extra, stem, marks=SCRIPTS[name][1], id=key))
    return rows


@pytest.mark.parametrize(("script", "extra", "name"), _params())
def test_tiny_run_writes_well_formed_results(script: str, extra: list[str], name: str,
                                             tmp_path: Path) -> None:
    data = _run(script, extra, tmp_path / "out.json")
    assert check(data) == []
    assert data["tiny"] is True and data["name"] == name
    assert data["source"] == "measured"
    # a tiny run's sizes are not the targets': nothing is judged
    assert all(m["target_met"] is None for m in data["measures"])


def test_every_script_is_run_or_says_why_not() -> None:
    on_disk = {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert on_disk == set(SCRIPTS) | set(NOT_TINY)
    assert not set(SCRIPTS) & set(NOT_TINY)
    for name in NOT_TINY:  # once it has a tiny mode, it belongs in SCRIPTS
        assert "--tiny" not in (ROOT / "benchmarks" / name).read_text(encoding="utf-8"), name
    for name in SCRIPTS:
        assert "add_arguments(" in (ROOT / "benchmarks" / name).read_text(encoding="utf-8"), name


def test_committed_results_are_well_formed_full_size_runs() -> None:
    files = sorted(RESULTS.glob("*.json"))
    assert files, "no committed results in benchmarks/results/"
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert check(data) == [], path.name
        assert data["tiny"] is False, f"{path.name} is a tiny run"
        assert path.stem == data["name"], path.name


def _args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"tiny": False, "json": False, "json_out": None, **kw})


def test_recorder_judges_each_target_once(tmp_path: Path) -> None:
    rec = Recorder("grid", _args(json_out=tmp_path / "g.json"))
    rec.add("a_ms", 49.99, "ms", what="under the limit", target=("<", 50, "under 50 ms"))
    rec.add("b_pct", 95.0, "%", what="at the limit", target=(">=", 95, ">= 95%"))
    rec.add("c_ms", 50.0, "ms", what="at a strict limit", target=("<", 50, "under 50 ms"))
    rec.add("d", 3.0, "x", what="no target")
    with pytest.raises(ValueError, match="twice"):
        rec.add("d", 4.0, "x", what="again")
    path = rec.write()
    assert path == tmp_path / "g.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [m["target_met"] for m in data["measures"]] == [True, True, False, None]
    assert check(data) == []


def test_tiny_run_never_writes_the_committed_results() -> None:
    rec = Recorder("grid", _args(tiny=True, json=True))
    rec.add("a_ms", 1.0, "ms", what="x", target=("<", 50, "under 50 ms"))
    before = (RESULTS / "grid.json").read_bytes() if (RESULTS / "grid.json").exists() else None
    path = rec.write()
    assert path is not None and path.parent != RESULTS
    after = (RESULTS / "grid.json").read_bytes() if (RESULTS / "grid.json").exists() else None
    assert before == after
    rec2 = Recorder("grid", _args(tiny=True, json_out=RESULTS / "grid.json"))
    rec2.add("a_ms", 1.0, "ms", what="x")
    with pytest.raises(SystemExit, match="tiny"):
        rec2.write()


def test_check_names_what_is_wrong() -> None:
    rec = Recorder("grid", _args())
    rec.add("a_ms", 10.0, "ms", what="x", target=("<", 50, "under 50 ms"))
    good = rec.result()
    assert check(good) == []
    bad = json.loads(json.dumps(good))
    bad["measures"][0]["target_met"] = False  # 10 < 50 is met
    assert check(bad) == ["measure 'a_ms': target_met False, the value says True"]
    bad = json.loads(json.dumps(good))
    bad["script"] = "bench_other.py"
    assert check(bad) == ["script 'bench_other.py' does not match name 'grid'"]
    bad = json.loads(json.dumps(good))
    del bad["load_after"]
    assert check(bad) == ["missing key 'load_after'"]
    bad = json.loads(json.dumps(good))
    bad["source"] = "guess"
    assert check(bad) == ["source 'guess' is neither 'measured' nor 'docs, <date>'"]
    bad = json.loads(json.dumps(good))
    bad["measures"] = []
    assert check(bad) == ["no measures"]


def test_rate_ceiling_schedule_kept_by_hand() -> None:
    import numpy as np

    from benchmarks.bench_rate_ceiling import on_schedule, schedule_kept

    # due at 0, 1 and 2 s; the last left 0.5 s late: 2 s offered over 2.5 s achieved = 80%
    assert schedule_kept(np.array([0.0, 1.0, 2.5]), np.array([0.0, 0.0, 500.0])) == 0.8
    # every request 3 ms late: the spans are equal, the whole schedule is kept
    assert schedule_kept(np.array([10.003, 11.003]), np.array([3.0, 3.0])) == 1.0
    row = {"kept": 0.95, "lag_p50_ms": 4.9, "ok": 1.0}
    assert on_schedule(row)
    assert not on_schedule({**row, "kept": 0.949})
    assert not on_schedule({**row, "lag_p50_ms": 5.0})  # CLIENT_QUEUE_LIMIT_MS: under 5 ms
    assert not on_schedule({**row, "ok": 0.99})


def test_rate_ceiling_steady_in_flight_by_hand() -> None:
    import numpy as np

    from benchmarks.bench_rate_ceiling import steady_in_flight

    # starts at 0, 1, 2, 3 s, each open 2 s (median 2 s): the window runs from 0 + 2 s to the
    # last send at 3 s; from 2 to 3 s the streams of 1 s and 2 s are open (the one of 0 s has
    # just ended at 2 s, the one of 3 s not yet begun): 2 streams throughout
    start = np.array([0.0, 1.0, 2.0, 3.0])
    assert steady_in_flight(start, np.full(4, 2.0)) == 2.0
    # a failed request (no E2E) is left out; a window that is empty reads 0
    assert steady_in_flight(np.array([0.0, 1.0, 2.0, 3.0]),
                            np.array([2.0, 2.0, np.nan, 2.0])) == 1.0
    assert steady_in_flight(np.array([0.0, 0.5]), np.array([5.0, 5.0])) == 0.0
