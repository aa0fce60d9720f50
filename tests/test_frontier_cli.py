"""`capacity frontier`: its formats, its JSON keys and its one-line errors (docs/frontier.md)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from capacity.cli.frontier import COST_COLUMNS, POINT_COLUMNS
from capacity.cli.main import main

BASE = ["frontier", "--model", "llama-3.1-70b", "--gpus", "h100-sxm,b200", "--engines", "vllm",
        "--weights", "fp8", "--kv-dtypes", "fp8", "--currency", "USD"]


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main([*BASE, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--interactivity", "40")
    assert code == 0
    assert out.startswith("Llama-3.1-70B: 1024 prompt / 1024 output tokens, 2048 context;")
    assert "tok/s/user" in out and "Cost per million tokens at 40 tok/s per user (USD" in out
    assert "h100-sxm" in out and "b200" in out and "spot" in out


def test_json_is_stable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--format", "json", "--offer-kind", "catalog")
    assert code == 0
    data = json.loads(out)
    assert list(data) == ["model", "model_name", "currency", "workload", "interactivity",
                          "basis", "basis_text", "evaluated", "groups", "gpu_fronts",
                          "cost_at_interactivity"]
    assert data["workload"] == {"prompt_tokens": 1024, "output_tokens": 1024,
                                "context_tokens": 2048, "turns": 1, "turn_tokens": 0,
                                "prefix_tokens": 0, "prefix_share": 0.0}
    keys = [g["key"] for g in data["groups"]]
    assert keys == ["h100-sxm/vllm/fp8/fp8", "b200/vllm/fp8/fp8"]  # in the order of --gpus
    point = data["groups"][0]["front"][0]
    assert list(point) == list(POINT_COLUMNS)
    # the chapter's basis by default, as `capacity plan`, `capacity size` and the pages
    assert point["basis"] == data["basis"] == "" and point["draft"] is None
    assert data["basis_text"] == "the chapter's assumptions (decode eff 1, prefill MFU 0.3)"
    cost = data["cost_at_interactivity"]
    assert len(cost) == 2 and list(cost[0]) == list(COST_COLUMNS)
    assert {c["kind"] for c in cost} == {"catalog"} and cost[0]["output_per_mtok"] > 0
    assert set(data["gpu_fronts"]) == {"b200", "h100-sxm"}
    code, out, _ = run(capsys, "--format", "json", "--all-points")
    assert len(json.loads(out)["points"]) == json.loads(out)["evaluated"]


@pytest.mark.parametrize(("given", "basis", "each", "words"), [
    ("typical", None, "typical:vllm", "each engine's typical efficiency (vLLM's where it has none)"),
    ("chapter", "", "", "the chapter's assumptions (decode eff 1, prefill MFU 0.3)"),
    ("typical:sglang", "typical:sglang", "typical:sglang",
     "typical SGLang efficiency (no calibration)"),
    ("spec", "spec", "spec",
     "the spec sheet (every efficiency at its peak: an upper bound on speed)")])
def test_the_basis_is_named(capsys: pytest.CaptureFixture[str], given: str, basis: str | None,
                            each: str, words: str) -> None:
    """--basis: one basis for every engine, or 'typical', each engine's own (vLLM's here); the
    JSON and the text name it."""
    code, out, _ = run(capsys, "--format", "json", "--offer-kind", "catalog", "--basis", given)
    data = json.loads(out)
    assert code == 0 and (data["basis"], data["basis_text"]) == (basis, words)
    assert {p["basis"] for g in data["groups"] for p in g["front"]} == {each}
    code, out, _ = run(capsys, "--offer-kind", "catalog", "--basis", given)
    assert code == 0 and out.splitlines()[0].endswith(f"; basis: {words}")


def test_csv(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows and list(rows[0]) == list(POINT_COLUMNS)
    code, every, _ = run(capsys, "--format", "csv", "--all-points")
    assert len(list(csv.DictReader(io.StringIO(every)))) > len(rows)


@pytest.mark.parametrize(("extra", "message"), [
    (["--model", "nope"], "unknown model 'nope'"),
    (["--engines", "vllm,foo"], "unknown engine 'foo'"),
    (["--output", "1"], "argument --output"),
    (["--interactivity", "0"], "argument --interactivity"),
    (["--gpus", "h100-sxm,zz"], "unknown GPU 'zz'"),
    (["--prompt", "4096", "--context", "1024"], "shorter than the prompt"),
    (["--basis", "no such basis!"], "basis 'no such basis!'"),
    (["--max-gpus", "1", "--weights", "bf16", "--gpus", "h100-sxm"], "fits no chosen GPU"),
    (["--offer-kind", "lease"], "argument --offer-kind"),
    (["--gpus", "b200", "--datacenter"], "not allowed with argument"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], extra: list[str],
                                          message: str) -> None:
    code, out, err = run(capsys, *extra)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_shared_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    # the prefix travels to the JSON's workload and changes the points; the disaggregated
    # points plan requests with nothing cached, and say so in one line
    extra = ("--format", "json", "--prompt", "4000", "--output", "256", "--context", "8192")
    code, out, _ = run(capsys, *extra, "--prefix-tokens", "3000", "--prefix-share", "0.5")
    assert code == 0
    data = json.loads(out)
    assert (data["workload"]["prefix_tokens"], data["workload"]["prefix_share"]) == (3000, 0.5)
    code, bare, _ = run(capsys, *extra)
    assert code == 0 and json.loads(bare)["groups"] != data["groups"]
    code, _, err = run(capsys, *extra, "--prefix-tokens", "3000", "--disaggregated")
    assert code == 2 and "plans requests with nothing cached" in err
