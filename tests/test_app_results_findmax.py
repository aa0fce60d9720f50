"""Results page: a find-max run's measured maximum beside the predicted one (issue 12 item 4),
in English and Chinese."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.test_app_results import APP, PAGE, store_run
from tests.test_chinese_pages import ALLOWED, english, names

FIND_MAX = {"by": "rate", "max_load": 1.2, "unit": "requests/s", "bracket": [1.2, 1.3],
            "converged": True, "stopped": "converged", "elapsed_s": 100.0, "pct": 90.0,
            "slo_ttft_ms": 1000.0, "slo_tpot_ms": 50.0,
            "probes": [{"load": 1.0, "requests": 30, "failed": 0, "ttft_pct_ms": 400.0,
                        "tpot_pct_ms": 20.0, "passed": True, "duration_s": 30.0},
                       {"load": 1.3, "requests": 39, "failed": 0, "ttft_pct_ms": 1500.0,
                        "tpot_pct_ms": 30.0, "passed": False, "duration_s": 30.0}]}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAPACITY_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    run_id = store_run(tmp_path / "bench", "find-max", (1, 2, 4))
    meta_path = tmp_path / "bench" / "find-max" / run_id / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "find_max": FIND_MAX}))
    return tmp_path


def _open(lang: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["lang"] = lang
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_find_max_run_shows_measured_and_predicted(env: Path) -> None:
    at = _open("en")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["measured maximum"] == "1.2 req/s"
    predicted = metrics["predicted maximum"]
    assert predicted.endswith("req/s") and float(predicted.split()[0]) > 0
    assert any("p90 TTFT <= 1000 ms" in c.value for c in at.caption)
    # the simulated endpoint's speedup scales the prediction (20 x the rate)
    at.number_input(key="r_fm_speedup").set_value(20.0).run()
    faster = {m.label: m.value for m in at.metric}["predicted maximum"]
    assert float(faster.split()[0]) > 5 * float(predicted.split()[0])
    zh = _open("zh")
    assert {m.label for m in zh.metric} >= {"实测最大值", "预测最大值"}
    found = [e for e in english(zh, ALLOWED | names()) if "最高负载" in e or "探测" in e]
    assert found == []
