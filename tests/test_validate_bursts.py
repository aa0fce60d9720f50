"""The scorecard's section of whole runs sent at once (capacity/fit/validate_bursts.py,
data/reference/bursts.csv): the rows as the loader checks them, a run predicted as the burst it
was, and the section as `capacity validate` prints it."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.fit import open_loop_rows as olr
from capacity.fit import validate_bursts as vb
from capacity.plan.events import simulate
from tests.shipped import shipped

CSV = Path(__file__).resolve().parents[1] / "data" / "reference" / olr.BURSTS_FILE


def _raw() -> list[dict[str, str]]:
    with CSV.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _row(run: str, metric: str = "output_tok_s") -> olr.OpenLoopRow:
    return next(r for r in olr.load_rows(bursts=True) if r.run == run and r.metric == metric)


def test_a_burst_row_states_no_rate_and_the_open_loop_file_takes_none() -> None:
    """A row of bursts.csv is sent at once (its rate infinite, blank in the file); a rate there
    is an error, and open_loop.csv refuses a burst and a throughput figure."""
    raw = _raw()[0]
    r = olr.parse_row(raw, "x line 2", bursts=True)
    assert (r.arrivals, r.rate_per_s, r.metric, r.stat) == ("burst", math.inf, "output_tok_s",
                                                           "total")
    with pytest.raises(InputError, match="rate_per_s"):
        olr.parse_row({**raw, "rate_per_s": "2"}, "x line 2", bursts=True)
    with pytest.raises(InputError, match="arrivals"):
        olr.parse_row({**raw, "rate_per_s": "2"}, "x line 2")
    with pytest.raises(InputError, match="metric"):
        olr.parse_row({**raw, "rate_per_s": "2", "arrivals": "poisson"}, "x line 2")
    with pytest.raises(InputError, match="async_scheduling"):
        olr.parse_row({**raw, "async_scheduling": "maybe"}, "x line 2", bursts=True)


def test_the_rows_are_every_gpustack_run_the_model_can_set_up() -> None:
    """117 runs of eleven pages, five figures each; every run sent at once, its serve command's
    GPUs its TP; the varied outputs carry their cap, the async-scheduling runs say so."""
    rows = olr.load_rows(bursts=True)
    runs = {r.run: r for r in rows}
    assert len(rows) == 5 * len(runs) == 585
    assert {r.arrivals for r in rows} == {"burst"} and all(r.gpus == r.tp for r in rows)
    assert {(r.metric, r.stat) for r in rows} == {
        ("output_tok_s", "total"), ("ttft_ms", "mean"), ("ttft_ms", "median"),
        ("tpot_ms", "mean"), ("tpot_ms", "median")}
    r = runs["gpustack-qwen3-32b-h100-vllm-baseline-random-4k"]
    assert (r.model, r.weights, r.gpu, r.requests, r.prompt_tokens, r.output_tokens,
            r.output_cap, r.lengths) == ("qwen3-32b", "bf16", "h100-sxm", 500, 3996, 200, 200,
                                         "fixed")
    assert runs["gpustack-qwen3-14b-a100-vllm-s1-vllm"].output_cap == 2044   # ShareGPT
    assert runs["gpustack-gpt-oss-120b-h100-vllm-s2"].async_scheduling
    assert not runs["gpustack-gpt-oss-120b-h100-vllm-s1-vllm"].async_scheduling
    assert runs["gpustack-gpt-oss-20b-a100-vllm-s3-max-num-batched-tokens-4096"].token_budget == 4096


def test_a_run_sent_at_once_is_every_request_arriving_at_the_start() -> None:
    """`predict` runs the closed loop of as many clients as requests: the same run as every
    request arriving at t = 0 (the open-loop model's arrival times, all zero), its throughput
    the run's output tokens over its span."""
    cat = default_catalog()
    r = _row("gpustack-qwen3-14b-a100-vllm-baseline-random-4k")
    p = vb.predict(r, "typical", cat)
    svc = vb.service(r, "typical", cat)
    q = simulate(svc, arrivals_ms=[0.0] * vb.replica_requests(r), warmup_fraction=0.0)
    assert p.requests == q.requests == 500
    assert p.value("output_tok_s", "total") == pytest.approx(q.output_tok_s)
    assert p.value("ttft_ms", "mean") == pytest.approx(q.mean_ttft_ms)
    assert p.value("ttft_ms", "median") == pytest.approx(q.ttft_ms[0.5])
    # 500 requests, each of its own output (200 asked, 199.6 on average generated), over a
    # span of one queue: the mean TTFT is most of the run
    span_s = sum(svc.request_outputs(500)) / p.value("output_tok_s", "total")
    assert p.value("ttft_ms", "mean") / 1e3 == pytest.approx(span_s / 2, rel=0.1)


def test_async_scheduling_schedules_one_step_ahead_whatever_the_release() -> None:
    """vLLM v0.10.2 waited for each step; its --async-scheduling run is scheduled one step
    ahead, the release's default run is not."""
    cat = default_catalog()
    plain = vb.service(_row("gpustack-gpt-oss-120b-h100-vllm-s1-vllm"), "typical", cat)
    ahead = vb.service(_row("gpustack-gpt-oss-120b-h100-vllm-s2"), "typical", cat)
    assert (plain.schedule_ahead, ahead.schedule_ahead) == (False, True)


def test_the_section_scores_every_run_and_the_spec_sheet_bounds_its_throughput() -> None:
    """Every run is scored, Qwen3-32B's 32K-token runs in BF16 on one 80 GB card too (its
    driver reports 80 GiB, which holds one such request beside the weights; the chapter's 80
    GB does not); the spec sheet is at or above every measured throughput; the JSON has no
    NaN."""
    card = shipped("bursts")
    assert len(card.checks) == 585 and not card.skipped
    tput = [c for c in card.checks if c.metric == "output_tok_s"]
    assert len(tput) == 117 and all(c.spec_bounds for c in tput)
    c = next(c for c in card.checks if c.id == "gpustack-qwen3-32b-h100-vllm-baseline-random-4k-tput")
    assert c.measured == 102.21 and c.typical_basis == "typical:vllm"
    assert c.error("typical") == pytest.approx(c.typical / 102.21 - 1)
    doc = vb.to_dict(card)
    assert doc["figures"] == 585 and doc["runs"] == 117
    assert set(doc["error"]) == {"spec", "typical"}


def test_section_markers(tmp_path: Path) -> None:
    """Written between its markers after TensorRT-LLM's section, the rest of the file kept."""
    out = tmp_path / "acc.md"
    out.write_text("# Mine\n\nkept\n", encoding="utf-8")
    vb.write_section(out, "### Whole runs sent at once (saturated)\n\nx\n")
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Mine\n\nkept\n")
    assert vb.section_of(text) == "### Whole runs sent at once (saturated)\n\nx"


@pytest.mark.slow
def test_the_section_follows_trtllm_in_validate_output(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from capacity.cli.main import main
    from tests.shipped import share_sections

    share_sections(monkeypatch)
    assert main(["validate", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "### Whole runs sent at once (saturated)" in out
    assert out.index("### TensorRT-LLM's performance overview (offline, vendor)") < out.index(
        "### Whole runs sent at once (saturated)")
    assert main(["validate", "--jobs", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bursts"]["figures"] == 585
