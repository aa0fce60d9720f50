"""`capacity validate`'s section on this project's own GPU measurement (data/reference/gpu_probe/,
capacity.fit.validate_gpu_probe): what it compares, by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity.errors import CatalogError
from capacity.fit import validate_gpu_probe as gp
from tests.shipped import shipped


@pytest.fixture(scope="module")
def card() -> gp.ProbeScorecard:
    return shipped("gpu_probe")


def test_the_committed_h200_probe_is_scored_row_by_row(card: gp.ProbeScorecard) -> None:
    """The committed H200 file's five runs: 58 eager decode steps (55 of the first run, 3 of
    the mixed sweep's), 65 with the layers compiled (three runs), 18 eager prefills and 6
    compiled ones, and 22 eager mixed passes (7 of the first run, whose Qwen3-32B ones ran
    out of time, and 15 of the sweep) and 15 compiled ones, each paired with its own run's
    decode step."""
    assert [p.name for p in gp.probe_files()] == ["h200-sxm-20261204.jsonl"]
    assert {k: len(card.of(k)) for k in gp.KINDS} == {
        "decode": 58, "decode_compiled": 65, "prefill": 18, "prefill_compiled": 6, "mixed": 22,
        "mixed_compiled": 15}
    assert {c.gpu for c in card.checks} == {"h200-sxm"}
    assert card.copy_gb_s == pytest.approx(4266.0, abs=0.05)


def test_the_spec_sheet_bounds_every_pass(card: gp.ProbeScorecard) -> None:
    """Issue 25's target on rows added: the spec sheet is an upper bound on speed. By hand for
    Llama-3.1-8B, one sequence at 1,024 tokens: the weights as engines read them (8.03 B
    parameters less the 128,256 x 4,096 input embedding, 2 bytes each: 15.01 GB) and 1,024
    tokens of KV (32 layers x 2 x 8 heads x 128 x 2 bytes = 131,072 B each: 0.134 GB) at
    4,800 GB/s: 3.155 ms, against 7.11 measured."""
    assert card.bounded == len(card.checks)
    one = next(c for c in card.of("decode") if (c.model, c.batch, c.context)
               == ("llama-3.1-8b", 1, 1024))
    by_hand = ((8.03e9 - 128256 * 4096) * 2 + 1024 * 131072) / 4800e9 * 1e3
    assert one.spec_ms == pytest.approx(by_hand, rel=0.01)
    assert one.measured_ms == pytest.approx(7.11, abs=0.01)
    assert one.typical_shape == one.measured_shape == 1.0


def test_a_mixed_row_is_what_the_chunk_adds(card: gp.ProbeScorecard) -> None:
    """The mixed pass less the decode row of the same batch and context: 8 sequences at 1,024
    tokens plus a 256-token chunk, 12.52 - 7.67 = 4.85 ms measured; the event model's own
    mixed step with and without the chunk gives the prediction, which is larger: 8.55 ms (8.3
    at 70.6 us a layer, before 2026-12-07's 77.3; the
    3.5 ms prefill overhead carried inside the pass, and the chunk's arithmetic at the typical
    plateau, 0.567 of the peak, where this GPU's GEMMs run at 0.70-0.74: docs/accuracy.md;
    8.5 ms while the decode batch's own arithmetic ran at eff 0.3 beside it)."""
    row = next(c for c in card.of("mixed") if (c.batch, c.tokens) == (8, 256))
    assert row.measured_ms == pytest.approx(12.52 - 7.67, abs=0.01)
    assert row.typical_ms == pytest.approx(8.55, abs=0.1)
    assert row.typical_ms > 1.5 * row.measured_ms
    assert row.spec_ms < row.measured_ms


def test_the_section_reads_its_figures(card: gp.ProbeScorecard) -> None:
    md = gp.markdown(card)
    assert "The spec sheet bounds 184 of 184 passes" in md
    assert f"| decode step (eager) | 58 | {card.error('decode').median:.1%} |" in md
    doc = gp.to_dict(card)
    assert doc["rows"] == 184 and doc["bounded"] == 184
    assert json.dumps(doc, allow_nan=False)
    assert "No probe file" in gp.markdown(gp.ProbeScorecard(checks=(), sources=()))


def test_a_bad_probe_file_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "h200-sxm-20990101.jsonl"
    bad.write_text('{"kind": "env"}\n{not json\n', encoding="utf-8")
    with pytest.raises(CatalogError, match="line 2: not JSON"):
        gp.load_rows(bad)
    bad.write_text('[1, 2]\n', encoding="utf-8")
    with pytest.raises(CatalogError, match="line 1: an object"):
        gp.load_rows(bad)
    assert gp.gpu_of(bad) == "h200-sxm"


def test_the_compiled_step_pairs_with_its_own_one_sequence_step(card: gp.ProbeScorecard) -> None:
    """A compiled row's shape is over the compiled one-sequence step of its model and
    context, not the eager one: Qwen3-32B at 8 x 1,024, 19.29 / 18.89 ms measured; and a
    mixed-sweep row subtracts the sweep's own decode step (8 x 1,024 + 64 tokens: 8.906 -
    7.577 ms), and a compiled one the compiled step measured just before it in its run
    (6.257 - 5.402 ms), not an earlier run's (5.330 ms)."""
    c = next(c for c in card.of("decode_compiled")
             if (c.model, c.batch, c.context) == ("qwen3-32b", 8, 1024))
    assert c.measured_shape == pytest.approx(19.2898 / 18.8858, rel=1e-3)
    m = next(c for c in card.of("mixed") if (c.batch, c.tokens) == (8, 64))
    assert m.measured_ms == pytest.approx(8.9062 - 7.5769, abs=1e-3)
    mc = next(c for c in card.of("mixed_compiled") if (c.batch, c.tokens) == (8, 64))
    assert mc.measured_ms == pytest.approx(6.2567 - 5.4023, abs=1e-3)
