"""The bench records a speculative-decoding server's acceptance length from its /metrics
(vLLM's draft counters, SGLang's gauge), never failing on a missing or hostile page; and end to
end against the simulated endpoint with a draft: the recorded acceptance, the event model's TPOT
and the fitted tau all agree with the tau the endpoint was given."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from capacity.bench.engine_info import (
    metrics_delta,
    parse_prometheus,
    probe_engine,
    spec_acceptance,
)
from capacity.bench.store import RunStore
from capacity.cli.main import main
from capacity.fit.acceptance import fit_acceptance, label_acceptance
from capacity.fit.calibration_store import load
from capacity.fit.imports import read_bench_label
from capacity.model.scenario import make_scenario
from capacity.model.speculative import make_draft
from capacity.plan.events import service_from_scenario, simulate
from capacity.sim.server import serve_in_thread
from tests.test_bench_e2e import sim_process

ROOT = Path(__file__).resolve().parents[1]
V = "vllm:spec_decode_num_"


def test_vllm_counters_give_one_plus_accepted_over_drafts() -> None:
    before = {f"{V}drafts_total": 100.0, f"{V}draft_tokens_total": 300.0,
              f"{V}accepted_tokens_total": 150.0}
    after = {f"{V}drafts_total": 1100.0, f"{V}draft_tokens_total": 3300.0,
             f"{V}accepted_tokens_total": 1950.0}
    assert spec_acceptance(before, after) == pytest.approx(1 + 1800 / 1000)
    d = metrics_delta(before, after)
    assert d["spec_acceptance_length"] == pytest.approx(2.8)
    assert d[f"{V}drafts_total"] == 1000.0
    # the same counters without the `_total` suffix
    bare = {k.removesuffix("_total"): v for k, v in after.items()}
    assert spec_acceptance({}, bare) == pytest.approx(1 + 1950 / 1100)
    # labels summed (several engines), as the page gives them
    text = (f'{V}drafts_total{{model_name="m",engine="0"}} 10\n'
            f'{V}drafts_total{{model_name="m",engine="1"}} 30\n'
            f'{V}accepted_tokens_total{{model_name="m",engine="0"}} 20\n'
            f'{V}accepted_tokens_total{{model_name="m",engine="1"}} 52\n')
    assert spec_acceptance({}, parse_prometheus(text)) == pytest.approx(1 + 72 / 40)


def test_sglangs_gauge_is_read_after_the_run() -> None:
    assert spec_acceptance({}, {"sglang:spec_accept_length": 3.1}) == 3.1
    assert metrics_delta({}, {"sglang:spec_accept_length": 3.1})["spec_acceptance_length"] == 3.1


@pytest.mark.parametrize("before,after", [
    ({}, {}),  # no speculative decoding
    ({f"{V}drafts_total": 5.0, f"{V}accepted_tokens_total": 5.0},
     {f"{V}drafts_total": 5.0, f"{V}accepted_tokens_total": 5.0}),  # no draft ran
    ({f"{V}drafts_total": 50.0, f"{V}accepted_tokens_total": 90.0},
     {f"{V}drafts_total": 10.0, f"{V}accepted_tokens_total": 20.0}),  # restarted: counters back
    ({}, {f"{V}drafts_total": 10.0, f"{V}draft_tokens_total": 30.0,
          f"{V}accepted_tokens_total": 31.0}),  # more accepted than drafted
    ({}, {f"{V}drafts_total": 1.0, f"{V}accepted_tokens_total": 1e12}),  # absurd length
    ({}, {"sglang:spec_accept_length": 0.2}),
    ({}, {"sglang:spec_accept_length": 1e300}),
])
def test_impossible_figures_are_unknown(before: dict[str, float],
                                        after: dict[str, float]) -> None:
    assert spec_acceptance(before, after) is None
    assert "spec_acceptance_length" not in metrics_delta(before, after)


def _hostile(metrics: Response) -> Starlette:
    async def page(request: Request) -> Response:
        return metrics
    return Starlette(routes=[Route("/metrics", page)])


@pytest.mark.parametrize("page", [
    PlainTextResponse("x" * (2 << 20)),  # over the 1 MiB bound: not read
    PlainTextResponse("\x00garbage {{{ \n vllm:spec_decode_num_drafts_total NaN\n"
                      "vllm:spec_decode_num_accepted_tokens_total inf\n"),
    PlainTextResponse("", status_code=500),
    Response(b"\xff\xfe\x00" * 1000, media_type="text/plain"),
])
def test_a_missing_or_hostile_metrics_page_is_unknown(page: Response) -> None:
    with serve_in_thread(_hostile(page)) as url:
        info = probe_engine(url, timeout_s=3.0)
    delta = metrics_delta({}, info.get("metrics", {}))
    assert "spec_acceptance_length" not in delta


TAU = 2.8
LEVELS = (2, 4, 8)
OUTPUT = 96
BANDWIDTH_GB_S = 1000.0
"""An H100 at 1,000 GB/s: engine steps of about 17 ms (6 ms per token), so that a loaded
2-core machine delivers a step's chunks on time (at 3,350 GB/s, 5 ms steps at concurrency 8
left the client behind)."""


@pytest.mark.slow
@pytest.mark.timing
def test_bench_a_drafted_endpoint_end_to_end(tmp_path: Path) -> None:
    """The simulated endpoint with EAGLE k=3 at tau 2.8 (vLLM's scheduling, short prompts so that
    prefills barely touch the decode steps), benched at three levels by `capacity bench`:
    (a) the acceptance recorded from /metrics is within 5% of tau (about 900 seeded draws,
    warm-ups included: a standard error near 1.5%); (b) the event model's mean TPOT with the
    same drafted Scenario is within 10% of the measured mean TPOT (real time: the client's
    timing error is in it); (c) tau fitted from the measured TPOT is within 10% of tau.
    Seen on a loaded 2-core machine: tau 2.85 measured, TPOT 2-4% under the model's, 2.87
    fitted."""
    flags = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--ctx", "2048", "--eff", "0.3",
             "--bandwidth", f"{BANDWIDTH_GB_S:g}", "--engine", "vllm", "--draft", "eagle:3",
             "--acceptance-length", str(TAU)]
    with sim_process(*flags) as url, contextlib.redirect_stdout(io.StringIO()):
        code = main(["bench", "--base-url", url, "--concurrency", ",".join(map(str, LEVELS)),
                     "--requests", "8", "--prompt-chars", "64", "--max-tokens", str(OUTPUT),
                     "--endpoint", "completions", "--label", "spec", "--out", str(tmp_path)])
    assert code == 0
    [run_dir] = list((tmp_path / "spec").iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["engine_info"]["engine"] == "capacity sim-server"
    # (a) the server's counters over the run
    measured = meta["server_metrics"]["spec_acceptance_length"]
    assert measured == pytest.approx(TAU, rel=0.05)
    assert label_acceptance("spec", tmp_path) == measured
    # (b) the event model with the same drafted Scenario
    draft = make_draft(make_scenario("llama-3.1-8b").variant, "eagle", 3, acceptance_length=TAU)
    with RunStore(tmp_path) as store:
        reqs = store.requests(run_dir.name)
    prompt = float(reqs["prompt_tokens"].mean())
    s = make_scenario("llama-3.1-8b", "h100-sxm", context_tokens=2048, eff=0.3, draft=draft,
                      bandwidth_gb_s=BANDWIDTH_GB_S, prompt_tokens=round(prompt))
    svc = service_from_scenario(s, output_tokens=OUTPUT, engine="vllm")
    for c in LEVELS:
        mine = float(reqs[reqs["concurrency"] == c]["tpot_ms"].mean())
        # the event model's requests run in lockstep (tau spread evenly): its median is its mean
        q = simulate(svc, concurrency=c, n_requests=max(10, 8), warmup_fraction=0.0)
        assert mine == pytest.approx(q.tpot_ms[0.5], rel=0.10), (c, mine, q.tpot_ms)
    # (c) tau fitted from the measured TPOT under the same knobs
    pts = read_bench_label("spec", tmp_path, model="llama-3.1-8b", gpu="h100-sxm")
    fit = fit_acceptance(pts, s.with_(draft=None), "eagle", 3, measured)
    assert fit.fitted == pytest.approx(TAU, rel=0.10)
    assert not math.isnan(fit.fitted_std)
    # and `capacity calibrate` on the stored run shows both, using the measured one
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["calibrate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--ctx", "2048",
                     "--eff", "0.3", "--bandwidth", f"{BANDWIDTH_GB_S:g}", "--step-method",
                     "chapter", "--label", "spec",
                     "--bench-dir", str(tmp_path), "--draft", "eagle:3",
                     "--save", str(tmp_path / "spec.toml")]) == 0
    assert f"measured by the server (/metrics): {measured:.2f}" in out.getvalue()
    cal = load(tmp_path / "spec.toml")
    assert cal.acceptance_length == measured
    assert cal.acceptance_fitted == pytest.approx(fit.fitted)
    assert np.isfinite(cal.acceptance_std or math.nan)
