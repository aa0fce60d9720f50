"""The scorecard's wide-EP section (capacity/fit/validate_ep.py): every published row of
data/reference/moe_ep.csv is dated and sourced, the spec sheet is an upper bound on every scored
row, the rows not scored say why, and the section's Markdown and JSON round-trip."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from capacity.fit.validate_ep import (
    BEGIN,
    END,
    ep_scorecard,
    load_rows,
    markdown,
    section_of,
    skip_reason,
    to_dict,
    write_section,
)
from tests.test_expert_parallel import with_gb200


def test_rows_are_dated_and_sourced() -> None:
    rows = load_rows()
    assert len(rows) >= 10 and len({r.id for r in rows}) == len(rows)
    for r in rows:
        assert r.source.startswith("https://") and r.as_of.strip() and r.notes.strip(), r.id
        assert r.value_per_gpu > 0 and r.phase in ("decode", "prefill"), r.id


def test_the_spec_sheet_bounds_every_scored_row() -> None:
    card = ep_scorecard(catalog=with_gb200())
    assert len(card.checks) >= 5
    assert card.bounded == len(card.checks)
    assert {c.phase for c in card.checks} == {"decode", "prefill"}
    for c in card.checks:
        assert c.spec >= c.typical > 0 and c.imbalance >= 1.0, c.id


def test_rows_not_scored_say_why() -> None:
    card = ep_scorecard(catalog=with_gb200())
    reasons = {s.id: s.reason for s in card.skipped}
    assert "multi-token prediction" in reasons["inferencex-gb200-fp4-mtp"]
    assert "nvfp4" in reasons["sglang-gb200-decode-p2-fp4"]
    row = next(r for r in load_rows() if r.id == "sglang-gb200-decode-p1")
    assert skip_reason(replace(row, ep=None), with_gb200()) == "EP degree not stated"


def test_section_markdown_json_and_markers(tmp_path: Path) -> None:
    card = ep_scorecard()
    text = markdown(card)
    assert text.startswith("### MoE with wide expert parallelism")
    assert f"on {len(card.checks)} of {len(card.checks)} rows" in text
    data = to_dict(card)
    json.dumps(data, allow_nan=False)
    assert data["rows"] == len(card.checks) and data["bounded"] == len(card.checks)
    doc = tmp_path / "accuracy.md"
    doc.write_text("# Accuracy\n\nbefore\n", encoding="utf-8")
    write_section(doc, text)
    write_section(doc, text)  # idempotent: replaces between the markers
    out = doc.read_text(encoding="utf-8")
    assert out.count(BEGIN) == 1 and out.count(END) == 1 and "before" in out
    assert section_of(out) == text.rstrip()
