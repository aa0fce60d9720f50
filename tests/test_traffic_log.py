"""Size from a log (issue 12): DuckDB over the file in place, bad rows counted with reasons,
the busiest hour, burstiness and prefix reuse, and `capacity workload` / `capacity size --log`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from capacity.cli.main import main
from capacity.errors import InputError
from capacity.fit.traffic import BAD_REASONS, summarize_log
from capacity.plan.options import PlanInputs, Slo
from capacity.plan.search import plan

LOG = """timestamp,prompt_tokens,output_tokens,conversation_id
2026-01-05 10:00:00,100,20,c1
2026-01-05 10:00:01,200,30,c1
2026-01-05 10:00:03,abc,30,c2
,100,10,c3
2026-01-05 10:30:00,400,0,c2
2026-01-05 11:00:00,300,50,
2026-01-05 11:10:00,300,50,c2
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bad_rows_are_counted_with_their_reasons(tmp_path: Path) -> None:
    f = tmp_path / "log.csv"
    f.write_text(LOG)
    s = summarize_log(f)
    assert (s.rows, s.kept) == (7, 4)
    assert s.bad_rows == {BAD_REASONS[0]: 1, BAD_REASONS[1]: 1, BAD_REASONS[2]: 1,
                          BAD_REASONS[3]: 0, BAD_REASONS[4]: 0}
    assert s.columns["conversation"] == "conversation_id"
    assert s.prompt.mean_tokens == 225 and s.output.max_tokens == 50
    assert s.busiest_hour_of_day == 10 and s.busiest_hour_requests == 2
    assert s.prefix_reuse_share == pytest.approx(1 / 4)   # c1 comes back once
    assert sum(s.per_hour_of_day) == pytest.approx(4)
    assert sum(s.prompt.counts) == 4 and s.prompt.bins_tokens[0] == 64


def test_blank_conversation_ids_are_no_ids(tmp_path: Path) -> None:
    """A blank id is no conversation: DuckDB hashes NULL to a constant, which read every
    blank cell as one shared id (a fresh bench log's empty prefix_id showed 100% prefix
    reuse; an audit, 2026-12-07), and a replay (`--log`) sent them as one conversation."""
    f = tmp_path / "log.csv"
    f.write_text("timestamp,prompt_tokens,output_tokens,conversation_id\n"
                 "1,100,20,\n2,100,20, \n3,100,20,c1\n4,100,20,c1\n")
    s = summarize_log(f, keep_requests=4)
    assert s.prefix_reuse_share == pytest.approx(1 / 4)   # c1 comes back once; blanks never
    assert s.requests is not None
    conv = s.requests.conversation.tolist()
    assert conv[:2] == [-1, -1] and conv[2] == conv[3] >= 0
    f.write_text("timestamp,prompt_tokens,output_tokens,prefix_id\n1,100,20,\n2,100,20,\n"
                 "3,100,20,\n")
    assert summarize_log(f).prefix_reuse_share == 0.0


@pytest.mark.parametrize("tail", ["3,30", "3,30,7", "3,30,7,c"])
def test_a_log_cut_short_mid_row_keeps_its_whole_rows(tmp_path: Path, tail: str) -> None:
    # a run killed mid-write: its last row has no line break. DuckDB's sniffer took the header
    # line for one column and the file was refused whole ("no column for a timestamp ...",
    # found: the three names; an audit, 2026-12-07). Now the whole rows are read and the cut
    # one is left out, counted as such, whether it lost columns or only its line break
    f = tmp_path / "cut.csv"
    f.write_text("timestamp,prompt_tokens,output_tokens,conversation_id\n1,10,5,a\n2,20,6,b\n"
                 + tail)
    s = summarize_log(f)
    assert (s.rows, s.kept) == (3, 2) and s.bad_rows[BAD_REASONS[4]] == 1
    assert s.prompt.mean_tokens == 15
    f.write_text("timestamp,prompt_tokens,output_tokens\n1,10,5\n2,20,6\n3,30,7\n")
    assert summarize_log(f).bad_rows[BAD_REASONS[4]] == 0   # a whole file keeps every row


def test_busiest_hour_rate_and_burstiness_of_a_generated_day(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    quiet = np.sort(rng.uniform(0, 3600, 200))            # hour 0: 200 requests
    busy = 7200 + np.cumsum(rng.exponential(3600 / 1800, 1800))   # hour 2: Poisson, 0.5/s
    busy = busy[busy < 10800]
    t = np.concatenate([quiet, busy]) + 1_767_225_600.0
    rows = [{"start_unix_s": float(x), "prompt_tokens": 500, "output_tokens": 100,
             "success": True} for x in t]
    rows.append({"start_unix_s": float(t[-1]) + 1, "prompt_tokens": 500, "output_tokens": 100,
                 "success": False})
    f = tmp_path / "requests.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    s = summarize_log(f)
    assert s.bad_rows[BAD_REASONS[3]] == 1
    assert s.busiest_hour_of_day == 2
    assert s.peak_rate_per_s == pytest.approx(busy.size / 3600)
    assert s.burstiness_cv == pytest.approx(1.0, abs=0.1)
    wl = s.workload(percentile=99)
    assert wl.peak_rate_per_s == pytest.approx(s.peak_rate_per_s)
    assert (wl.prompt, wl.output_tokens, wl.context_tokens) == (500, 100, 600)
    t2 = s.traffic()
    assert t2.arrivals.kind == "poisson" and t2.prompt.mean_tokens == 500


def test_mooncake_and_aiperf_shapes(tmp_path: Path) -> None:
    moon = tmp_path / "mooncake.jsonl"
    moon.write_text("".join(json.dumps({"timestamp": ms, "input_length": 1000 + ms,
                                        "output_length": 10, "hash_ids": [0]}) + "\n"
                            for ms in range(0, 30_000, 1000)))
    s = summarize_log(moon)
    assert s.span_s == pytest.approx(29.0) and s.peak_rate_per_s == pytest.approx(30 / 29)
    aip = tmp_path / "profile_export.jsonl"
    aip.write_text("".join(json.dumps({
        "metadata": {"request_start_ns": 1_767_225_600_000_000_000 + i * 10**9},
        "metrics": {"input_sequence_length": {"value": 300, "unit": "tokens"},
                    "output_sequence_length": {"value": 40, "unit": "tokens"}}}) + "\n"
        for i in range(20)))
    s = summarize_log(aip)
    assert s.kept == 20 and s.prompt.p50_tokens == 300 and s.span_s == pytest.approx(19)


def test_unusable_logs_say_why(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("when,size\n1,2\n")
    with pytest.raises(InputError, match="no column for a timestamp and prompt tokens"):
        summarize_log(f)
    f.write_text("timestamp,prompt_tokens,output_tokens\n,1,1\n1,0,1\n")
    with pytest.raises(InputError, match="usable"):
        summarize_log(f)
    with pytest.raises(InputError, match="no such file"):
        summarize_log(tmp_path / "missing.csv")


def test_planner_sizes_the_busiest_hour_with_spare(tmp_path: Path) -> None:
    f = tmp_path / "log.csv"
    t = 1_767_225_600 + np.arange(0, 3600, 2.0)
    f.write_text("timestamp,prompt_tokens,output_tokens\n"
                 + "".join(f"{x},1000,200\n" for x in t))
    s = summarize_log(f)
    inp = PlanInputs(model="qwen3.5-9b-awq", workload=s.workload(percentile=99),
                     slo=Slo(quantile=0.99), gpus=("rtx-4090",))
    best = plan(inp).best
    assert best is not None and best.capacity_rate_per_s >= s.peak_rate_per_s
    spare = plan(PlanInputs(model="qwen3.5-9b-awq", workload=s.workload(percentile=99),
                            slo=Slo(quantile=0.99), gpus=("rtx-4090",), spare=True)).best
    assert spare is not None and spare.spare_gpus >= 1


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_cli_workload_and_size_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "log.csv"
    f.write_text(LOG)
    code, out, _ = _run(capsys, "workload", "summarize", str(f))
    assert code == 0 and "3 left out" in out and "busiest hour 10:00 UTC" in out
    code, out, _ = _run(capsys, "workload", "summarize", str(f), "--format", "json")
    assert code == 0 and json.loads(out)["bad_rows"][BAD_REASONS[1]] == 1
    code, out, _ = _run(capsys, "workload", "presets")
    assert code == 0 and "agentic" in out and "assumed" in out
    code, out, _ = _run(capsys, "size", "--log", str(f), "--percentile", "99", "--spare",
                        "--gpus", "rtx-4090", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["slo"]["quantile"] == 0.99
    assert data["options"][0]["max_rate_per_s"] > 0
    code, out, _ = _run(capsys, "size", "--log", str(f), "--gpus", "rtx-4090")
    assert code == 0 and "max req/s" in out and "left out" in out
    code, _, err = _run(capsys, "size", "--log", str(f), "--dau", "10")
    assert code == 2 and "drop --dau" in err
    code, _, err = _run(capsys, "size", "--dau", "10", "--percentile", "99")
    assert code == 2 and "--percentile goes with --log" in err
    code, _, err = _run(capsys, "workload", "summarize", str(tmp_path / "nope.csv"))
    assert code == 2 and "no such file" in err and "Traceback" not in err


def test_summary_charts(tmp_path: Path) -> None:
    from capacity.report.charts import log_arrivals_chart, log_length_chart

    f = tmp_path / "log.csv"
    f.write_text(LOG)
    s = summarize_log(f)
    lengths = log_length_chart(s, prompt_label="prompt", output_label="output",
                               x_title="tokens", y_title="requests").to_dict()
    rows = next(iter(lengths["datasets"].values()))
    assert sum(r["requests"] for r in rows if r["length"] == "prompt") == 4
    assert {r["bin"] for r in rows if r["length"] == "output"} == {"16+", "32+"}
    hours = next(iter(log_arrivals_chart(s, x_title="h", y_title="n").to_dict()[
        "datasets"].values()))
    assert len(hours) == 24 and [r["hour"] for r in hours if r["busiest"]] == [10]


FIX = Path(__file__).resolve().parent / "fixtures"


def test_vllm_detailed_result_is_read_as_a_log(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`vllm bench serve --save-result --save-detailed` writes one JSON object with per-request
    arrays (vllm-project/vllm, vllm/benchmarks/serve.py: `benchmark()`'s result dict holds
    input_lens, output_lens, ttfts, itls, latencies, start_times, queue_times, generated_texts,
    errors; `main` drops the arrays without --save-detailed). The fixture has that shape: 12
    requests at 4 req/s, the 8th failed (error text, output 0)."""
    f = FIX / "vllm_bench_serve_detailed.json"
    raw = json.loads(f.read_text())
    s = summarize_log(f)
    assert (s.rows, s.kept) == (12, 11) and s.bad_rows[BAD_REASONS[3]] == 1
    assert s.arrivals and s.columns == {"timestamp": "start_times", "prompt": "input_lens",
                                        "output": "output_lens"}
    ok = [i for i, e in enumerate(raw["errors"]) if not e]
    assert s.prompt.mean_tokens == pytest.approx(np.mean([raw["input_lens"][i] for i in ok]))
    assert s.output.max_tokens == 256
    assert s.span_s == pytest.approx(raw["start_times"][-1] - raw["start_times"][0])
    assert not s.absolute_time and s.peak_rate_per_s == pytest.approx(11 / s.span_s)
    assert s.workload(percentile=99).prompt == round(s.prompt.mean_tokens)
    # --append-result: one result per line, read together
    two = tmp_path / "appended.json"
    two.write_text(f.read_text() + "\n" + f.read_text())
    assert summarize_log(two).rows == 24
    # an older vLLM saved no start_times: the lengths, and no arrivals, said so
    del raw["start_times"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(raw))
    s = summarize_log(old)
    assert not s.arrivals and s.kept == 11 and "timestamp" not in s.columns
    with pytest.raises(InputError, match="no arrival times"):
        s.workload()
    code, out, _ = _run(capsys, "workload", "summarize", str(old))
    assert code == 0 and "no arrival times in this file" in out
    code, out, _ = _run(capsys, "workload", "summarize", str(old), "--format", "json")
    assert code == 0 and json.loads(out)["arrivals"] is False
    code, _, err = _run(capsys, "size", "--log", str(old))
    assert code == 2 and "no arrival times" in err and "Traceback" not in err
    # the summary-only result (no --save-detailed) is not a request log
    with pytest.raises(InputError, match="no column for a timestamp"):
        summarize_log(FIX / "vllm_bench_serve_c16.json")
