"""The Measure page's library: guard, form -> command line, progress, connect check, jobs."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from capacity.bench.connect import connect_check
from capacity.bench.form import MeasureForm, parse_levels
from capacity.bench.guard import check_url, measure_guard
from capacity.bench.job import BenchJob, SimServer, complete_rows, read_progress
from capacity.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


# -- guard ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, enabled", [
    pytest.param("off", False, id="off"), pytest.param("OFF", False, id="upper"),
    pytest.param("0", False, id="zero"), pytest.param("", True, id="empty"),
    pytest.param("on", True, id="on")])
def test_guard_switch(value: str, enabled: bool) -> None:
    g = measure_guard({"CAPACITY_MEASURE": value})
    assert g.enabled is enabled
    if not enabled:
        with pytest.raises(InputError, match="switches measuring off"):
            check_url("http://127.0.0.1:8000/v1", g)


def test_allow_list_limits_hosts_and_admits_only_our_simulator_on_loopback() -> None:
    g = measure_guard({"CAPACITY_MEASURE_ALLOW_HOSTS": "gpu1.lan, GPU2.lan"})
    assert g.allow_hosts == frozenset({"gpu1.lan", "gpu2.lan"})
    check_url("http://gpu2.lan:8000/v1", g)
    with pytest.raises(InputError, match="not in CAPACITY_MEASURE_ALLOW_HOSTS"):
        check_url("https://evil.example/v1", g)
    with pytest.raises(InputError, match="not in CAPACITY_MEASURE_ALLOW_HOSTS"):
        check_url("http://127.0.0.1:9999/v1", g, ["http://127.0.0.1:8123/v1"])
    check_url("http://127.0.0.1:8123/v1/", g, ["http://127.0.0.1:8123/v1"])
    check_url("http://anything:1/v1", measure_guard({"CAPACITY_MEASURE": "open"}))
    with pytest.raises(InputError, match="not loopback"):  # closed by default
        check_url("http://anything:1/v1", measure_guard({}))


@pytest.mark.parametrize("url", [pytest.param("127.0.0.1:8000", id="no-scheme"),
                                 pytest.param("ftp://h/v1", id="ftp"),
                                 pytest.param("http:///v1", id="no-host")])
def test_bad_urls_say_how_to_fix(url: str) -> None:
    with pytest.raises(InputError, match="http://HOST:PORT/v1"):
        check_url(url, measure_guard({}))


# -- form -------------------------------------------------------------------------------------

def test_argv_carries_the_form_and_never_the_key() -> None:
    f = MeasureForm(base_url="http://127.0.0.1:8000/v1", model="m", concurrency=(1, 8),
                    requests=24, prompt_chars=500, max_tokens=32, label="x", slo_ttft_ms=500,
                    gpu="rtx-4090", gpu_price=2.5, currency="CNY", predict_model="llama-3.1-8b")
    a = f.argv("python")
    assert a[:4] == ["python", "-m", "capacity", "bench"]
    pairs = dict(zip(a[4::2], a[5::2], strict=True))
    assert pairs["--concurrency"] == "1,8" and pairs["--requests"] == "24"
    assert pairs["--slo-ttft-ms"] == "500" and "--slo-tpot-ms" not in pairs
    assert pairs["--predict-model"] == "llama-3.1-8b" and pairs["--gpu-price"] == "2.5"
    assert not any("key" in x.lower() for x in a)
    assert "--workload" not in a
    w = replace(f, workload="chat")
    w.validate()
    assert dict(zip(w.argv("python")[4::2], w.argv("python")[5::2], strict=True)
                )["--workload"] == "chat"
    with pytest.raises(InputError, match="unknown workload preset"):
        replace(f, workload="nope").validate()


@pytest.mark.parametrize("text, levels", [pytest.param("1,4,16", (1, 4, 16), id="plain"),
                                          pytest.param(" 2, 8 ,", (2, 8), id="spaces")])
def test_parse_levels(text: str, levels: tuple[int, ...]) -> None:
    assert parse_levels(text) == levels


@pytest.mark.parametrize("text, match", [pytest.param("1,x", "not a whole number", id="word"),
                                         pytest.param("0", ">= 1", id="zero"),
                                         pytest.param(",", "at least one", id="empty")])
def test_parse_levels_rejects(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        parse_levels(text)


def test_form_validation_names_the_field() -> None:
    with pytest.raises(InputError, match="label"):
        MeasureForm(base_url="http://h/v1", label="a b").validate()
    with pytest.raises(InputError, match="requests"):
        MeasureForm(base_url="http://h/v1", requests=0).validate()


# -- progress ---------------------------------------------------------------------------------

HEADER = "run_id,concurrency,success,ttft_ms,tpot_ms,row_complete\n"


def test_progress_counts_complete_rows_and_takes_medians(tmp_path: Path) -> None:
    p = tmp_path / "requests.csv"
    p.write_text(HEADER + "r,1,true,10,2,1\nr,1,true,30,4,1\nr,1,false,,,1\nr,4,true,50,5,1\n"
                 "r,4,true,70,6,1\nr,4,true,90")  # the last row is being written
    lv = read_progress(p, (1, 4, 16), 3)
    assert [(x.done, x.ok, x.errors) for x in lv] == [(3, 2, 1), (2, 2, 0), (0, 0, 0)]
    assert lv[0].ttft_p50_ms == 20 and lv[0].tpot_p50_ms == 3 and lv[1].ttft_p50_ms == 60
    assert lv[0].fraction == 1.0 and lv[1].fraction == pytest.approx(2 / 3)
    assert lv[2].ttft_p50_ms is None
    assert len(complete_rows(tmp_path / "missing.csv")) == 0


# -- connect check ----------------------------------------------------------------------------

def _transport(models_status: int = 200, stream: bool = True) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            if models_status != 200:
                return httpx.Response(models_status, json={"error": "no"})
            return httpx.Response(200, json={"data": [{"id": "m1"}, {"id": "m2"}]})
        if stream:
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=b'data: {"choices":[]}\n\ndata: [DONE]\n\n')
        return httpx.Response(200, json={"choices": [{"message": {"content": "hi"}}]})
    return httpx.MockTransport(handler)


@pytest.mark.parametrize("status, stream, expect", [
    pytest.param(200, True, (True, True, ("m1", "m2"), True), id="ok"),
    pytest.param(401, True, (True, False, (), None), id="unauthorized"),
    pytest.param(403, True, (True, False, (), None), id="forbidden"),
    pytest.param(200, False, (True, True, ("m1", "m2"), False), id="not-streaming"),
    pytest.param(404, True, (True, None, (), None), id="not-openai")])
def test_connect_check(status: int, stream: bool,
                       expect: tuple[bool, bool | None, tuple[str, ...], bool | None]) -> None:
    r = connect_check("http://h/v1", "k", transport=_transport(status, stream))
    assert (r.reachable, r.auth_ok, r.models, r.streams) == expect
    assert r.ok is (expect == (True, True, ("m1", "m2"), True))
    assert r.message


def test_connect_check_unreachable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)
    r = connect_check("http://h/v1", transport=httpx.MockTransport(handler))
    assert not r.reachable and "cannot reach" in r.message


# -- jobs against the real simulated endpoint -------------------------------------------------

@pytest.mark.slow
def test_job_passes_the_key_by_environment_and_stop_keeps_what_was_measured(
        tmp_path: Path) -> None:
    sim = SimServer.start("qwen3.5-9b-awq", "rtx-4090", speedup=5,
                          extra_args=["--api-key", "s3cret-key"], cwd=ROOT)
    try:
        assert sim.base_url.startswith("http://127.0.0.1:")
        assert not connect_check(sim.base_url, "wrong").auth_ok
        ok = connect_check(sim.base_url, "s3cret-key")
        assert ok.ok and ok.models == ("qwen3.5-9b-awq",)
        form = MeasureForm(base_url=sim.base_url, concurrency=(1, 2), requests=400,
                           prompt_chars=400, max_tokens=32, label="stopme",
                           out_dir=str(tmp_path), warmup=0)
        job = BenchJob.start(form, "s3cret-key", cwd=ROOT)
        assert "s3cret-key" not in " ".join(job.proc.args)  # type: ignore[arg-type]
        deadline = time.monotonic() + 20
        while job.running and time.monotonic() < deadline and job.progress()[0].done < 5:
            time.sleep(0.1)
        assert job.running, job.log_tail()
        job.stop(grace_s=5)
        assert job.status() == "stopped"
        d = job.find_run_dir()
        assert d is not None and d.parent == tmp_path / "stopme"
        done = job.progress()[0].done
        assert 5 <= done < 400 and job.progress()[0].errors == 0
        assert json.loads((d / "meta.json").read_text())["status"] == "interrupted"
        for f in d.iterdir():
            assert "s3cret-key" not in f.read_text()
    finally:
        sim.stop()
    assert not sim.running


@pytest.mark.slow
def test_sim_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="did not start"):
        SimServer.start("no-such-model", "rtx-4090", cwd=ROOT, ready_timeout_s=20)
