"""The disaggregated prefill/decode section of `capacity validate` (data/reference/disagg.csv,
capacity/fit/validate_disagg.py): the loader's checks, one row's prediction by hand, the spec
sheet as a bound on every published row, the comparisons, the markers round trip."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import replace
from pathlib import Path

import pytest

from capacity.catalog.loader import default_catalog
from capacity.errors import InputError
from capacity.fit import validate_disagg as vd
from capacity.fit.validate_ep import END as EP_END
from tests.shipped import shipped


@pytest.fixture(scope="module")
def card() -> vd.DisaggScorecard:
    return shipped("disagg")


def _csv(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[*vd.COLUMNS, *vd.OPTIONAL_COLUMNS], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    p = tmp_path / "disagg.csv"
    p.write_text(buf.getvalue(), encoding="utf-8")
    return p


def _raw(**changes: str) -> dict[str, str]:
    with (Path(vd.__file__).parents[2] / "data" / "reference" / vd.ROWS_FILE).open(
            encoding="utf-8", newline="") as fh:
        first = next(csv.DictReader(fh))
    return {**first, **changes}


def test_bundled_rows_load_dated_and_sourced() -> None:
    rows = vd.load_rows()
    assert len(rows) >= 30
    assert len({r.id for r in rows}) == len(rows)
    for r in rows:
        assert r.source.startswith("https://") and r.as_of and r.notes


@pytest.mark.parametrize(("changes", "message"), [
    ({"mode": "split"}, "mode must be one of disaggregated, aggregated"),
    ({"metric": "goodput"}, "metric must be one of"),
    ({"prefill_tp": ""}, "line 2: column 'prefill_tp' is empty"),
    ({"decode_tp": "four"}, "column 'decode_tp' must be a whole number, got 'four'"),
    ({"value": "-3"}, "column 'value' must be > 0"),
    ({"rate_per_s": "45"}, "give exactly one of concurrency and rate_per_s"),
    ({"mode": "aggregated"}, "an aggregated row has no prefill pool"),
    ({"source_winner": "both"}, "source_winner must be one of"),
    # a run whose requests stop at end-of-sequence (the first row: Dynamo's, 150 output tokens)
    ({"num_prompts": "500"}, "give both num_prompts and output_cap"),
    ({"num_prompts": "500", "output_cap": "100"},
     r"output_tokens \(the mean, 150\) must be 1..output_cap \(100\)"),
    ({"num_prompts": "5", "output_cap": "200"}, "num_prompts must be 10..100,000"),
    ({"num_prompts": "500", "output_cap": "200", "concurrency": "", "rate_per_s": "4"},
     "disaggregated closed loop only"),
])
def test_loader_rejects_a_bad_row_with_a_clear_message(
        tmp_path: Path, changes: dict[str, str], message: str) -> None:
    p = _csv(tmp_path, [_raw(**changes)])
    with pytest.raises(InputError, match=message) as exc:
        vd.load_rows(p)
    assert "disagg.csv line 2" in str(exc.value)


def test_loader_names_a_missing_column(tmp_path: Path) -> None:
    raw = _raw()
    del raw["link_kind"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(raw), lineterminator="\n")
    w.writeheader()
    w.writerow(raw)
    p = tmp_path / "disagg.csv"
    p.write_text(buf.getvalue(), encoding="utf-8")
    with pytest.raises(InputError, match="missing column"):
        vd.load_rows(p)


def test_one_row_by_hand_spec_sheet_at_one_client() -> None:
    """One client, one prefill replica TP1, one decode replica TP1, spec sheet (every
    efficiency 1, no overheads), the chapter's scheduling: no queue anywhere, so
    TTFT = prefill + hand-over + the join pass, TPOT = the decode step at batch 1. By hand,
    Llama-3.1-8B BF16 (8.03e9 parameters, 16.06 GB; embedding lookup and untied head each
    128,256 x 4,096 = 525,336,576 parameters; 32 layers, 32 query heads, 8 KV heads, head_dim
    128) on H100 SXM (3,350 GB/s, 989 dense TFLOP/s), 1,024-token prompt, 64 output tokens,
    400 Gb/s link (50 GB/s):

    - prefill FLOPs (F6b, the spec sheet's operator count): linear 2 x (8.03e9 - 2 x
      525,336,576) x 1,024 + 2 x 525,336,576; attention 4 x 32 x 32 x 128 x 1,024 x 1,025 / 2;
      over 989e12 FLOP/s: 14.732 ms;
    - hand-over: 32 x 2 x 8 x 128 x 2 B = 131,072 B a token x 1,024 = 134,217,728 B over
      5e7 B/ms = 2.684 ms;
    - join pass (the decode pool's pass over the last prompt token): F6b(1,024) - F6b(1,023),
      0.0147 ms; TTFT 17.431 ms;
    - decode step at batch 1: (16.06e9 B - the 1.05e9 B lookup table, not read + the KV of
      1,088 tokens x 131,072 B) / 3,350e9 B/s = 4.523 ms;
    - closed loop of one: E2E = TTFT + 63 TPOT, 64 tokens per E2E over 2 GPUs."""
    r = vd.DisaggRow(
        id="hand", group="hand", mode="disaggregated", model="llama-3.1-8b", weights="bf16",
        kv_dtype="fp16", gpu="h100-sxm", gpu_source_name="H100", prefill_tp=1,
        prefill_replicas=1, decode_tp=1, decode_replicas=1, link_kind="infiniband",
        link_gbit_s=400.0, prompt_tokens=1024, output_tokens=64, concurrency=1,
        rate_per_s=None, metric="ttft_mean_ms", value=1.0, source_winner="", winner_metric="",
        engine="test", profile="chapter", source="-", as_of="-", notes="-")
    p = vd.predict(r, "spec")
    vocab_params = 128_256 * 4_096

    def f6b(n: int) -> float:
        linear = 2 * (8.03e9 - 2 * vocab_params) * n + 2 * vocab_params
        return linear + 4 * 32 * 32 * 128 * n * (n + 1) / 2

    prefill_ms = f6b(1024) / 989e12 * 1e3
    assert prefill_ms == pytest.approx(14.732, abs=1e-3)
    hand_ms = 131_072 * 1024 / 5e7
    assert p.transfer_ms == pytest.approx(hand_ms, rel=1e-12)
    assert hand_ms == pytest.approx(2.684, abs=1e-3)
    join_ms = (f6b(1024) - f6b(1023)) / 989e12 * 1e3
    assert p.ttft_mean_ms == pytest.approx(prefill_ms + hand_ms + join_ms, rel=1e-4)
    step_ms = (16.06e9 - 2 * vocab_params + 1088 * 131_072) / 3350e9 * 1e3
    assert p.tpot_mean_ms == pytest.approx(step_ms, rel=1e-6)
    assert step_ms == pytest.approx(4.523, abs=1e-3)
    e2e = p.ttft_mean_ms + 63 * p.tpot_mean_ms
    assert p.e2e_mean_ms == pytest.approx(e2e, rel=1e-9)
    assert p.output_tok_s_per_gpu == pytest.approx(64 / (e2e / 1e3) / 2, rel=1e-6)


def test_link_of_a_row() -> None:
    cat = default_catalog()
    r = next(x for x in vd.load_rows() if x.id == "llm-d-h200-5k-r45-dis-ttft")
    spec, typ = vd.row_link(r, "spec", cat), vd.row_link(r, "typical", cat)
    assert (spec.kind, spec.send_gb_s, spec.efficiency, spec.latency_ms) == ("roce", 50.0, 1.0, 0.0)
    assert (typ.efficiency, typ.latency_ms) == (0.85, 1.0)
    one_node = next(x for x in vd.load_rows() if x.id == "dynamo-b200-3k-c16-dis-tput")
    assert vd.row_link(one_node, "spec", cat).scale_up   # 8 GPUs in one NVLink domain


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_spec_sheet_bounds_every_published_row(card: vd.DisaggScorecard) -> None:
    assert card.checks
    for c in card.checks:
        assert c.bounded, (c.id, c.metric, c.measured, c.spec)
        # and the spec sheet is the faster basis of the two: in a closed loop by its request
        # rate where a phase's latency is not monotone in speed (DisaggCheck.rate_bounded)
        if c.metric == vd.THROUGHPUT:
            assert c.spec >= c.typical
        elif c.spec > c.typical:
            assert "C=" in c.load and c.spec_rate_per_s >= c.typical_rate_per_s, c.id
    assert card.bounded == len(card.checks)
    # dstack's 1 prefill : 3 decode, 2048-token prompts, 32 clients: the one prefill worker
    # saturates; the spec sheet's faster decode sends clients back sooner, so they wait longer
    # for prefill (its TTFT above the measured) while it serves more requests a second
    rb = [c for c in card.checks if c.rate_bounded]
    assert "dstack-h200-1p3d-2048-128-c32-dis-ttft" in {c.id for c in rb}
    assert all(c.spec_rate_per_s >= c.measured_rate_per_s > 0 for c in rb)


def test_measured_rate_of_a_closed_loop_row_is_its_groups_throughput() -> None:
    rows = [r for r in vd.load_rows() if r.group == "dynamo-b200-3k-c16"]
    ttft = next(r for r in rows if r.metric == "ttft_mean_ms" and r.mode == "disaggregated")
    # 107.09125 tok/s per GPU x 8 GPUs / 150 output tokens = 5.7115 requests/s
    assert vd._measured_rate(ttft, rows) == pytest.approx(107.09125 * 8 / 150)  # noqa: SLF001
    llmd = [r for r in vd.load_rows() if r.group == "llm-d-h200-5k-r45"]
    assert math.isnan(vd._measured_rate(llmd[0], llmd))  # noqa: SLF001  (open loop)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_every_row_scored_or_skipped_with_a_reason(card: vd.DisaggScorecard) -> None:
    ids = {r.id for r in vd.load_rows()}
    assert {c.id for c in card.checks} | {s.id for s in card.skipped} == ids
    assert all(s.reason for s in card.skipped)
    open_tput = [s for s in card.skipped if "arrival rate" in s.reason]
    assert open_tput and all(s.id.endswith("-tput") for s in open_tput)


def test_declared_source_winners_match_their_own_numbers() -> None:
    rows = vd.load_rows()
    for group in {r.group for r in rows if r.source_winner}:
        rs = [r for r in rows if r.group == group]
        on = {r.mode: r.value for r in rs if r.metric == rs[0].winner_metric}
        assert vd._winner(rs[0].winner_metric, on) == rs[0].source_winner, group  # noqa: SLF001


def test_compare_inputs_are_the_winners_figures() -> None:
    rows = [r for r in vd.load_rows() if r.group == "dynamo-b200-3k-c16"]
    inp = vd.compare_inputs(rows)
    # aggregated won: 1,350.12 tok/s on 8 GPUs at 150 tokens a request = 9.0008 req/s
    assert inp.workload.rate_per_s == pytest.approx(1350.12 / 150, rel=1e-9)
    assert (inp.slo.ttft_ms, inp.slo.tpot_ms, inp.slo.quantile) == (405.66, 9.09, 0.5)
    assert (inp.gpus, inp.max_gpus, inp.formats, inp.kv_dtypes) == (("b200",), 8, ("fp8",),
                                                                  ("fp8",))
    assert inp.typical == "vllm"


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_verdicts_cover_each_comparison(card: vd.DisaggScorecard) -> None:
    groups = {v.group for v in card.verdicts}
    assert groups == {"dynamo-b200-3k-c16", "dynamo-b200-3k-c32", "dynamo-b200-8k-c16",
                      "dynamo-b200-8k-c32", "llm-d-h200-5k-r45", "mooncake-a10-8k-r1",
                      "mooncake-a10-2k-r4"}
    for v in card.verdicts:
        assert v.compare_winner in ("aggregated", "disaggregated", "none")
        assert v.compare_reason
        assert v.model_winner == vd._winner(v.metric, v.typical)  # noqa: SLF001


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_target_is_the_median_of_throughput_rows(card: vd.DisaggScorecard) -> None:
    errs = sorted(abs(c.error("typical")) for c in card.checks if c.metric == vd.THROUGHPUT)
    n = len(errs)
    median = (errs[n // 2] if n % 2 else (errs[n // 2 - 1] + errs[n // 2]) / 2)
    assert card.error("typical", vd.THROUGHPUT).median == pytest.approx(median)
    assert card.target_met == (median <= vd.TARGET_ERROR)
    assert card.throughput_rows == n


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_json_has_every_check_and_no_nan(card: vd.DisaggScorecard) -> None:
    d = vd.to_dict(card)
    assert d["rows"] == len(card.checks) and d["bounded"] == card.bounded
    assert len(d["checks"]) == len(card.checks)
    assert all(x is None or math.isfinite(x) for x in
               (d["error"]["typical"]["all"]["median"], d["error"]["spec"]["all"]["median"]))


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_section_round_trips_through_the_markers(tmp_path: Path,
                                                 card: vd.DisaggScorecard) -> None:
    text = vd.markdown(card)
    doc = tmp_path / "accuracy.md"
    doc.write_text(f"# Accuracy\n\n{EP_END}\n\n## Reading it\n", encoding="utf-8")
    vd.write_section(doc, text)
    body = doc.read_text(encoding="utf-8")
    assert body.index(EP_END) < body.index(vd.BEGIN) < body.index("## Reading it")
    assert vd.section_of(body) == text.rstrip("\n")
    vd.write_section(doc, text)   # again: replaced in place, not appended
    assert doc.read_text(encoding="utf-8") == body
    changed = replace(card, checks=card.checks[:1])
    vd.write_section(doc, vd.markdown(changed))
    assert vd.section_of(doc.read_text(encoding="utf-8")) == vd.markdown(changed).rstrip("\n")


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_shipped_docs_hold_this_section(card: vd.DisaggScorecard) -> None:
    doc = Path(vd.__file__).parents[2] / "docs" / "accuracy.md"
    ep = shipped("ep").errors("held_out")
    assert vd.section_of(doc.read_text(encoding="utf-8")) == vd.markdown(card, ep).rstrip("\n")


def test_issue_target_counts_both_sections_rows(card: vd.DisaggScorecard) -> None:
    """Issue 27's target is over every new published row: the disaggregated throughput rows
    (typical basis) and the wide-EP rows (held out), by hand on two rows of this section."""
    tput = [c for c in card.checks if c.metric == vd.THROUGHPUT][:2]
    two = replace(card, checks=(*tput, *(c for c in card.checks if c.metric != vd.THROUGHPUT)))
    e = sorted([abs(tput[0].error("typical")), abs(tput[1].error("typical")), 0.10, 0.30])
    both = vd.issue_rows(two, [-0.10, 0.30])
    assert both.n == 4 and both.median == pytest.approx((e[1] + e[2]) / 2)
    md = vd.markdown(two, [-0.10, 0.30])
    assert f"these 2 and the wide-EP section's 2 (each held out of its knobs), 4 rows: " \
        f"median |error| {both.median:.1%}" in md
    assert "wide-EP section's" not in vd.markdown(two)     # the section alone: no claim
    d = vd.to_dict(two, [-0.10, 0.30])["with_ep"]
    assert d["rows"] == 4 and d["median"] == pytest.approx(both.median)
    assert d["target_met"] == (both.median <= vd.TARGET_ERROR)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_json_and_markdown_say_the_same(card: vd.DisaggScorecard) -> None:
    """`capacity validate --format json` and the Markdown come from one scorecard: the bound
    count, the throughput median and the agreement counts read the same on both."""
    d, md = vd.to_dict(card), vd.markdown(card)
    assert f"on {d['bounded']} of {d['rows']} rows" in md
    assert f"typical median |error| {d['error']['typical'][vd.THROUGHPUT]['median']:.1%}" in md
    agree = sum(v["compare_agrees"] for v in d["verdicts"])
    assert f"`compare()` on {agree}" in md


def test_a_benchmark_run_counts_its_drain_and_its_first_wave() -> None:
    """dstack's rows are whole runs of 500 prompts whose requests stop at end-of-sequence
    (mean 620 of at most 2,048 tokens at 32 clients): predicted as that run, the last requests'
    drain lowers the output rate and the first wave (32 prompts at once) raises the mean TTFT,
    against the steady state of the same deployment with every request 620 tokens long."""
    row = next(r for r in vd.load_rows() if r.id == "dstack-h200-1p3d-128-2048-c32-dis-tput")
    assert (row.num_prompts, row.output_cap, row.output_tokens) == (500, 2048, 620)
    run = vd.predict(row, "typical")
    steady = vd.predict(replace(row, num_prompts=None, output_cap=None), "typical")
    assert run.output_tok_s_per_gpu < 0.95 * steady.output_tok_s_per_gpu
    assert run.ttft_mean_ms > steady.ttft_mean_ms
    assert run.e2e_mean_ms > 0 and run.tpot_mean_ms > 0
