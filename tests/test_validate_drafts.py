"""The scorecard's speculative-decoding section (`capacity.fit.validate_drafts`, issue 26): a row
by hand through the step model's terms, the rows not scored and why, each sweep's shape and
bound, the CLI's Markdown and JSON, and docs/accuracy.md's generated section being current."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from capacity.catalog.drafts import SpeedupRow, load_speedups
from capacity.catalog.loader import default_catalog
from capacity.cli.main import main
from capacity.fit import validate_drafts as vd
from capacity.fit.validate_report import BEGIN as CARD_BEGIN
from capacity.fit.validate_report import END as CARD_END
from tests.shipped import share_sections, shipped

ROOT = Path(__file__).resolve().parents[1]
ACCURACY = ROOT / "docs" / "accuracy.md"
TRTLLM_MTP = ("https://nvidia.github.io/TensorRT-LLM/blogs/tech_blog/"
              "blog2_DeepSeek_R1_MTP_Implementation_and_Optimization.html")
"""The one-batch row of data/reference/speculative.csv (DeepSeek-R1 NVFP4 on 8 B200, MTP)."""


def row(**changes: object) -> SpeedupRow:
    """A synthetic row: Llama-3.1-8B on one H100 SXM, EAGLE chain of 3, tau 2.5 stated, 512 + 512
    tokens, batch 1."""
    base = SpeedupRow(model="llama-3.1-8b", gpu="h100-sxm", engine="sglang", tp=1,
                      weights="bf16", kind="eagle", depth=3, batch=1, metric="tpot",
                      speedup=2.0, acceptance_length=2.5, prompt_tokens=512,
                      output_tokens=512, dataset="synthetic", source="test Table 1",
                      as_of="2026-12")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def card() -> vd.DraftScorecard:
    return shipped("drafts")


def test_a_row_by_hand_from_the_step_models_terms() -> None:
    # spec sheet at batch 1, TP 1: every pass is bandwidth-bound, no overheads (SPEC_KNOBS)
    cat = default_catalog()
    m = cat.models["llama-3.1-8b"]
    bw = cat.gpu("h100-sxm").bandwidth_gb_s * 1e9  # B/s
    flops = cat.gpu("h100-sxm").tflops_for("bf16") * 1e12
    kv = 2 * m.layers * 8 * 128 * 2 * 1024  # K and V, 8 KV heads of 128, BF16, 1024 tokens
    w_read = 16.06e9 * (1 - m.lookup_params_b / m.params_total_b)  # the bound: embedding a lookup
    plain = max((w_read + kv) / bw, 2 * (m.params_active_b - m.lookup_params_b) * 1e9 / flops)
    verify = max((w_read + kv) / bw, 4 * 2 * (m.params_active_b - m.lookup_params_b) * 1e9 / flops)
    # EAGLE-3 draft: one decoder layer, the (3h x h) fusion, a 32K-token head, BF16; one layer's KV
    layer = (m.params_total_b - 2 * m.vocab * m.hidden / 1e9) / m.layers
    p_d = layer + 3 * m.hidden**2 / 1e9 + 32_000 * m.hidden / 1e9
    draft = 3 * max((2 * p_d * 1e9 + kv / m.layers) / bw, 2 * p_d * 1e9 / flops)
    by_hand = 2.5 * plain / (verify + draft)
    assert plain == pytest.approx(verify)  # batch 1: the verify pass reads what a plain step does
    c = vd.check_row(row())
    assert c.spec == pytest.approx(by_hand, rel=1e-9)
    assert 2.0 < c.spec < 2.5  # below tau: the draft's passes cost time
    assert c.error("spec") == pytest.approx(by_hand / 2.0 - 1)
    assert (c.tau, c.tau_from, c.context_tokens, c.context_from) == (2.5, "the row's own", 1024,
                                                                    "stated")
    assert c.typical < c.spec  # typical knobs and the engine's draft overheads: slower
    assert c.dataset_tau is None and c.error(vd.DATASET_TAU) is None  # tau stated: no sensitivity


def test_without_a_stated_tau_the_planners_published_one_is_used() -> None:
    c = vd.check_row(row(acceptance_length=None, dataset="MT-Bench", prompt_tokens=None,
                         output_tokens=None))
    assert c.tau_from.startswith("published: ") and 1.0 < c.tau <= 4.0
    assert (c.context_tokens, c.context_from) == (1024, "assumed (MT-Bench)")
    # the sensitivity: tau of an MT-bench row, where it differs from the planner's
    assert c.dataset_tau is not None and c.dataset_tau != pytest.approx(c.tau)
    assert c.typical_dataset_tau is not None


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_rows_not_scored_carry_their_reason(card: vd.DraftScorecard) -> None:
    cat = default_catalog()
    assert vd.skip_reason(row(), cat) == ""
    assert "not in the catalog" in vd.skip_reason(row(model="llama-9-7b"), cat)
    assert "not in the catalog" in vd.skip_reason(row(gpu="h900"), cat)
    assert "mxfp6" in vd.skip_reason(row(weights="mxfp6"), cat)
    assert vd.skip_reason(row(depth=None), cat) == "draft depth not stated by the source"
    no_tau = row(model="mistral-7b-v0.3", weights="not stated", acceptance_length=None)
    got = vd.draft_scorecard([row(), row(depth=None), row(model="nope"), no_tau])
    assert len(got.checks) == 1
    reasons = [s.reason for s in got.skipped]
    assert reasons[0] == "draft depth not stated by the source"
    assert "no published acceptance" in reasons[2]  # make_draft's own error, not a crash
    # the shipped rows: every one either scored or skipped with a reason
    assert len(card.checks) + len(card.skipped) == len(load_speedups())
    assert card.skipped and all(s.reason for s in card.skipped)


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_sweeps_shape_and_the_spec_sheet_bound(card: vd.DraftScorecard) -> None:
    assert card.sweeps and all(t.bounded for t in card.sweeps)
    for t in card.sweeps:
        assert t.spec_batch1 <= t.tau and t.batch_low < t.batch_high
        assert t.measured < 1.0  # the published sweeps: the speed-up falls with batch
    assert card.sources == ("arXiv:2503.01840", TRTLLM_MTP)
    assert len(card.sweeps) == 2  # TensorRT-LLM's MTP row is one batch: scored, no shape
    assert vd.publication("arXiv:2503.01840 Table 3") == "arXiv:2503.01840"
    assert vd.publication("https://x.org/a.html#mtp") == "https://x.org/a.html"
    spec = card.error("spec")
    assert spec.n == len(card.checks) and math.isfinite(spec.median)
    assert card.error("calibrated").n == 0  # no bundled calibration of these setups


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_markdown_and_json_of_the_section(card: vd.DraftScorecard) -> None:
    md = vd.markdown(card)
    assert md.startswith("### Speculative decoding: speed-up against batch\n")
    assert f"{len(card.checks)} rows from 2 sources" in md and "target: within 15%)" in md
    assert "Not scored:" in md and "draft depth not stated by the source" in md
    doc = json.loads(json.dumps(vd.to_dict(card), allow_nan=False))
    assert doc["rows"] == len(card.checks) and set(doc["error"]) == set(vd.BASES)
    assert doc["error"]["calibrated"]["median"] is None


def test_write_section_goes_after_the_scorecard_and_is_replaced(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text(f"# T\n\n{CARD_BEGIN}\ncard\n{CARD_END}\n\n## After\n", encoding="utf-8")
    vd.write_section(f, "first\n")
    assert f.read_text(encoding="utf-8") == (
        f"# T\n\n{CARD_BEGIN}\ncard\n{CARD_END}\n\n{vd.BEGIN}\nfirst\n{vd.END}\n\n## After\n")
    vd.write_section(f, "second")
    assert vd.section_of(f.read_text(encoding="utf-8")) == "second"
    g = tmp_path / "b.md"
    g.write_text("# Plain\n", encoding="utf-8")
    vd.write_section(g, "x")
    assert g.read_text(encoding="utf-8") == f"# Plain\n\n{vd.BEGIN}\nx\n{vd.END}\n"
    assert vd.section_of("no markers") == ""


@pytest.mark.slow
def test_cli_prints_and_writes_the_section(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # the wiring, not the rows: the sections this test process shares, each computed once for
    # the three runs (in this process, --jobs 1: a worker process would compute its own)
    share_sections(monkeypatch)
    assert main(["validate", "--format", "json", "--jobs", "1"]) == 0
    section = json.loads(capsys.readouterr().out)["speculative_decoding"]
    assert section["rows"] > 0 and section["skipped"]
    assert main(["validate", "--jobs", "1"]) == 0
    assert "### Speculative decoding: speed-up against batch" in capsys.readouterr().out
    out = tmp_path / "acc.md"
    assert main(["validate", "--out", str(out), "--jobs", "1"]) == 0
    assert "### Speculative decoding" in vd.section_of(out.read_text(encoding="utf-8"))


@pytest.mark.slow  # uses the module's whole-scorecard/fit fixture (1-4 s idle): the quick loop skips it
def test_committed_section_is_current(card: vd.DraftScorecard) -> None:
    committed = vd.section_of(ACCURACY.read_text(encoding="utf-8"))
    assert committed, f"docs/accuracy.md has no {vd.BEGIN} part"
    assert committed == vd.markdown(card).rstrip("\n"), (
        "docs/accuracy.md's speculative-decoding section is not current: run "
        "`capacity validate --out docs/accuracy.md`")


def test_engines_draft_overheads_are_the_fits_of_the_published_sweeps() -> None:
    """data/engines.toml's typical draft and verify overheads are the mean of the per-sweep
    fits (`fit_overheads`), its range their extremes: the derivation its header states."""
    from capacity.fit.typical import engines
    from capacity.fit.validate_drafts import fit_overheads, fitted_sweeps, label, skip_reason

    cat = default_catalog()
    rows = [r for r in load_speedups() if not skip_reason(r, cat)]
    sweeps: dict[str, list] = {}
    for r in rows:
        sweeps.setdefault(label(r), []).append(r)
    fits = [fit_overheads(own, cat) for own in fitted_sweeps(sweeps).values()]
    assert len(sweeps) == 3  # TensorRT-LLM's MTP on B200 at one batch: scored, not fitted
    assert len(fits) == 2
    vllm = engines()["vllm"]
    for i, knob in enumerate(("draft_overhead_ms", "verify_overhead_ms")):
        values = [f[i] for f in fits]
        assert vllm.typical[knob] == pytest.approx(sum(values) / len(values), abs=0.006)
        assert vllm.low[knob] == pytest.approx(min(values), abs=0.006)
        assert vllm.high[knob] == pytest.approx(max(values), abs=0.006)


def test_a_one_batch_sweep_is_scored_on_the_others_fit_and_fits_nothing() -> None:
    """At one batch a speed-up cannot tell the draft pass's cost from the verified token's
    (two knobs, one figure): `fitted_sweeps` leaves such a sweep out of every fit, and its row
    is predicted with the overheads fitted on the sweeps that have a shape."""
    cat = default_catalog()
    rows = [r for r in load_speedups() if not vd.skip_reason(r, cat)]
    by: dict[str, list[SpeedupRow]] = {}
    for r in rows:
        by.setdefault(vd.label(r), []).append(r)
    fitted = vd.fitted_sweeps(by)
    one = [name for name in by if name not in fitted]
    assert len(one) == 1 and "TensorRT-LLM" in one[0] and len(by[one[0]]) == 1
    mtp = by[one[0]][0]
    assert mtp.weights == "nvfp4" and mtp.batch == 1
    held = vd.fit_overheads([r for name in fitted for r in fitted[name]], cat)
    got = vd.draft_scorecard([*rows], cat)
    check = next(c for c in got.checks if c.sweep == one[0])
    assert check.held_out == pytest.approx(vd.check_row(mtp, cat, held).held_out, rel=1e-12)
    # the other two sweeps are held out on each other alone, as before the row was scored
    for name in fitted:
        other = [r for n in fitted if n != name for r in fitted[n]]
        first = next(c for c in got.checks if c.sweep == name)
        again = vd.check_row(fitted[name][0], cat, vd.fit_overheads(other, cat))
        assert first.held_out == pytest.approx(again.held_out, rel=1e-9)
