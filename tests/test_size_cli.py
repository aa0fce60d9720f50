"""`capacity size` through the real entry point."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from capacity.cli.main import main

HEADLINE = ["size", "--dau", "500", "--requests-per-user", "20", "--peak-share", "0.3",
            "--peak-hours", "2", "--ctx", "8192", "--output-tokens", "256",
            "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--model", "qwen3.5-9b-awq"]


def test_headline_example_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(HEADLINE) == 0
    out = capsys.readouterr().out
    assert "peak 0.417 req/s" in out
    assert "configurations evaluated" in out
    assert out.count(" KV") >= 3  # ranked option labels


def test_json_is_ranked_and_complete(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*HEADLINE, "--format", "json", "--top", "5"]) == 0
    data = json.loads(capsys.readouterr().out)
    opts = data["options"]
    assert [o["rank"] for o in opts] == [1, 2, 3, 4, 5]
    assert all(o["ttft_ms"] <= 2000 and o["tpot_ms"] <= 50 for o in opts)
    months = [o["cost_per_month"] for o in opts]
    assert months == sorted(months)
    assert data["peak_rate_per_s"] == pytest.approx(500 * 20 * 0.3 / 7200)


def test_a_model_with_a_short_context_needs_no_ctx(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-2-70B holds 4,096 tokens: without --ctx it is sized at its limit, as `plan` does
    assert main(["size", "--model", "llama-2-70b-fp8", "--dau", "500", "--top", "1",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["context_tokens"] == 4096
    assert main(["size", "--model", "llama-2-70b-fp8", "--dau", "500", "--ctx", "8192"]) == 2
    assert "exceeds Llama-2-70B's limit of 4096 tokens" in capsys.readouterr().err


def test_csv_has_one_header_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "--peak-concurrency", "50", "--gpus", "rtx-4090,l40s",
                 "--slo-ttft-ms", "1e7", "--slo-tpot-ms", "1e5", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and rows[0]["rank"] == "1"
    assert {r["gpu"] for r in rows} <= {"rtx-4090", "l40s"}


def test_markdown_names_the_fixes_for_100_x_8k(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "--peak-concurrency", "100", "--gpus", "rtx-4090", "--max-gpus", "2",
                 "--headroom", "0", "--slo-ttft-ms", "1e7", "--slo-tpot-ms", "1e5",
                 "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "| 1 | 1 x RTX 4090, awq, fp8 KV |" in out
    assert "2 GPUs (2 replicas); FP8 KV cache; 4K context" in out


def test_nothing_feasible_exits_1_with_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "--dau", "50", "--gpus", "rtx-4090", "--no-tp",
                 "--slo-ttft-ms", "1000"]) == 1
    out = capsys.readouterr().out
    assert "RTX 4090: TTFT over the SLO" in out
    assert "prefill alone takes 3.06 s" in out


@pytest.mark.parametrize("argv,needle", [
    pytest.param(["size"], "--dau", id="no-load"),
    pytest.param(["size", "--dau", "10", "--peak-share", "2"], "argument --peak-share",
                 id="bad-share"),
    pytest.param(["size", "--dau", "10", "--gpus", "rtx-4099"], "did you mean",
                 id="typo-gpu"),
    pytest.param(["size", "--dau", "10", "--quote", "/nonexistent/q.pdf"], "does not exist",
                 id="bad-quote-folder"),
    pytest.param(["size", "--dau", "10", "--quote", "q.docx"], ".md or .pdf",
                 id="bad-quote-kind"),
    # a denormal objective (found by tests/hostile's fuzzing) overflowed latency / target
    pytest.param(["size", "--dau", "10", "--slo-ttft-ms", "1e-320"],
                 "argument --slo-ttft-ms: '1e-320' is not a finite number in [0.001,",
                 id="denormal-slo"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], needle: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("flags", "gap"), [
    (["--max-num-seqs", "4"], "max_num_seqs"), (["--weights", "bf16"], "weights"),
    (["--overhead-gb", "4"], "overhead_gb"), (["--slo-percentile", "99.9"], "the SLO"),
    (["--max-gpus", "32"], "max_gpus"), (["--kv-dtypes", "int8"], "kv_dtypes")])
def test_a_quote_links_no_planner_that_would_open_another_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], gap: str) -> None:
    """--max-num-seqs 4 sizes 3 x H100 SXM at CNY 41,982 a month where the Planner, which has
    no such input, sizes 2 x H100 SXM at CNY 27,988: the quote's "Reproduce this plan in the
    Planner" link would open the second. A quote carries no link the Planner cannot follow,
    and says why."""
    target = tmp_path / "quote.md"
    main(["size", "--dau", "2000", "--gpus", "rtx-4090,l40s,h100-sxm", *flags,
          "--quote", str(target)])
    err = capsys.readouterr().err
    assert "Reproduce this plan" not in target.read_text(encoding="utf-8")
    assert f"the Planner cannot hold {gap} as given" in err


def test_quote_file_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "quote.md"
    assert main([*HEADLINE, "--quote", str(target), "--lang", "zh"]) == 0
    text = target.read_text(encoding="utf-8")
    assert text.startswith("# 容量报价：Qwen3.5-9B")
    assert "实测确认" in text
    assert "quote written" in capsys.readouterr().err


def test_quote_links_to_the_planner_that_reproduces_it(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "quote.md"
    argv = ["size", "--dau", "2000", "--requests-per-user", "30", "--peak-share", "0.25",
            "--ctx", "8192", "--output-tokens", "512", "--slo-ttft-ms", "1500",
            "--slo-tpot-ms", "40", "--slo-cost-per-mtok", "4", "--model", "qwen3.5-9b",
            "--gpus", "rtx-4090,mi300x", "--quote", str(target),
            "--app-url", "http://127.0.0.1:8501/"]
    assert main(argv) == 0
    text = target.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("Reproduce this plan"))
    url = line.split(": ", 1)[1]
    assert url.startswith("http://127.0.0.1:8501/planner?")
    from urllib.parse import parse_qsl, urlsplit

    from capacity.catalog.loader import default_catalog
    from capacity.cli.main import build_parser
    from capacity.cli.size import inputs_from_args
    from capacity.report.planner_url import planner_decode

    cat = default_catalog()
    state, notices = planner_decode(dict(parse_qsl(urlsplit(url).query)), cat)
    assert notices == []
    assert state.inputs(cat) == inputs_from_args(build_parser("size").parse_args(argv))
    assert "Cost target per M output tokens at SLO capacity | CNY 4.00" in text
    capsys.readouterr()
