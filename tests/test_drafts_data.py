"""The bundled speculative-decoding data (data/speculative.toml, data/reference/speculative.csv)
and its loader (capacity.catalog.drafts)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from capacity.catalog import drafts
from capacity.catalog.drafts import AcceptanceRow, acceptance_for, depths_for
from capacity.catalog.loader import default_catalog
from capacity.errors import InputError

_SOURCE = re.compile(r"^(https?://\S+|arXiv:\d{4}\.\d{4,5}(v\d+)?\b.*)$")
_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
_DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(scope="module")
def acceptance() -> tuple[AcceptanceRow, ...]:
    return drafts.load_acceptance()


@pytest.fixture(scope="module")
def speedups() -> tuple[drafts.SpeedupRow, ...]:
    return drafts.load_speedups()


def test_bundled_rows_validate_and_cover_the_kinds(acceptance, speedups) -> None:
    assert len(acceptance) >= 10 and len(speedups) >= 10
    assert {r.kind for r in acceptance} >= {"mtp", "eagle"}
    assert {r.kind for r in speedups} >= {"mtp", "eagle"}
    assert all(r.kind in drafts.DRAFT_KINDS for r in (*acceptance, *speedups))
    # the explicit path reads the same rows as the cached default
    assert drafts.load_acceptance(_DATA / "speculative.toml") == acceptance
    assert drafts.load_speedups(_DATA / "reference" / "speculative.csv") == speedups


def test_tau_within_one_and_depth_plus_one(acceptance, speedups) -> None:
    for r in acceptance:
        assert isinstance(r.depth, int) and r.depth >= 1, r
        assert 1.0 <= r.acceptance_length <= r.depth + 1, r
    for s in speedups:
        if s.acceptance_length is not None:
            assert s.acceptance_length >= 1.0
            assert s.depth is None or s.acceptance_length <= s.depth + 1, s
        assert s.speedup > 0 and s.batch >= 1 and s.tp >= 1


def test_model_keys_exist_in_the_catalog(acceptance) -> None:
    models = default_catalog().models
    for r in acceptance:
        for key in r.models:
            assert key == "*" or key in models, f"{key} ({r.source}) is not a catalog model"


def test_speedup_models_and_gpus_exist_or_say_so(speedups) -> None:
    catalog = default_catalog()
    for s in speedups:
        known = s.model in catalog.models and s.gpu in catalog.gpus
        assert known or "not in the catalog" in s.notes, s


def test_sources_and_dates(acceptance, speedups) -> None:
    for r in (*acceptance, *speedups):
        assert _SOURCE.match(r.source), r.source
        assert _MONTH.match(r.as_of), r.as_of
        assert "2023-01" <= r.as_of <= "2026-12", r.as_of


def _toml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "speculative.toml"
    path.write_text(body, encoding="utf-8")
    return path


_GOOD = """
[[acceptance]]
models = ["llama-3.1-8b"]
family = "Llama"
kind = "eagle"
depth = 3
acceptance_length = 2.5
dataset = "MT-bench"
source = "https://example.org/paper"
as_of = "2025-03"
"""


@pytest.mark.parametrize(("old", "new", "field"), [
    ('kind = "eagle"', 'kind = "medusa"', "kind"),
    ("depth = 3", "depth = 0", "depth"),
    ("depth = 3", "depth = 2.5", "depth"),
    ("acceptance_length = 2.5", "acceptance_length = 4.5", "acceptance_length"),
    ("acceptance_length = 2.5", "acceptance_length = 0.9", "acceptance_length"),
    ('source = "https://example.org/paper"', 'source = ""', "source"),
    ('as_of = "2025-03"', 'as_of = "March 2025"', "as_of"),
    ('as_of = "2025-03"', "", "as_of"),
    ('models = ["llama-3.1-8b"]', "models = []", "models"),
    ('dataset = "MT-bench"', 'dataset = "MT-bench"\ndepht = 3', "depht"),
])
def test_a_bad_row_names_its_field(tmp_path: Path, old: str, new: str, field: str) -> None:
    assert drafts.load_acceptance(_toml(tmp_path, _GOOD))[0].depth == 3
    with pytest.raises(InputError, match=rf"#1: field '{field}'"):
        drafts.load_acceptance(_toml(tmp_path, _GOOD.replace(old, new)))


def test_invalid_toml_and_bad_csv_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not valid TOML"):
        drafts.load_acceptance(_toml(tmp_path, "[[acceptance]\n"))
    text = (_DATA / "reference" / "speculative.csv").read_text(encoding="utf-8")
    bad = tmp_path / "speculative.csv"
    bad.write_text(text.replace(",sglang,1,not stated,eagle,3,2,", ",sglang,1,not stated,eagle,3,-2,", 1),
                   encoding="utf-8")
    with pytest.raises(InputError, match=r"line \d+: field 'batch'"):
        drafts.load_speedups(bad)
    bad.write_text(text.replace("metric,speedup", "metric,speed_up", 1), encoding="utf-8")
    with pytest.raises(InputError, match="header"):
        drafts.load_speedups(bad)


def _row(models: tuple[str, ...], kind: str, depth: int, tau: float, **extra: int | None) -> AcceptanceRow:
    return AcceptanceRow(models=models, family="f", kind=kind, depth=depth, acceptance_length=tau,
                         dataset="d", source="https://example.org", as_of="2025-01", **extra)


def test_acceptance_for_prefers_the_exact_model_and_takes_the_median() -> None:
    rows = [_row(("*",), "ngram", 3, 1.5), _row(("qwen3-8b",), "ngram", 3, 2.0),
            _row(("qwen3-8b",), "ngram", 3, 2.6), _row(("qwen3-8b",), "ngram", 3, 2.4),
            _row(("qwen3-8b",), "ngram", 5, 3.0), _row(("qwen3-8b",), "eagle", 3, 3.5, tree_tokens=60)]
    assert acceptance_for("qwen3-8b", "ngram", 3, rows).acceptance_length == 2.4  # median of three
    assert acceptance_for("llama-3.1-8b", "ngram", 3, rows).acceptance_length == 1.5  # "*" fallback
    assert acceptance_for("qwen3-8b", "ngram", 4, rows) is None
    assert acceptance_for("qwen3-8b", "medusa", 3, rows) is None
    assert acceptance_for("qwen3-8b", "eagle", 3, rows) is None  # tree rows only when asked
    assert acceptance_for("qwen3-8b", "eagle", 3, rows, include_trees=True).acceptance_length == 3.5
    assert depths_for("qwen3-8b", "ngram", rows) == (3, 5)
    assert depths_for("mistral-7b-v0.3", "ngram", rows) == (3,)
    assert depths_for("qwen3-8b", "eagle", rows) == ()


def test_acceptance_for_on_the_bundled_data(acceptance) -> None:
    ds = acceptance_for("deepseek-v3", "mtp", 1)
    assert ds is not None and 1.85 <= ds.acceptance_length <= 1.90
    chain = acceptance_for("llama-3.1-8b", "eagle", 7)
    tree = acceptance_for("llama-3.1-8b", "eagle", 7, include_trees=True)
    assert chain is not None and tree is not None
    assert chain.tree_tokens is None and chain.acceptance_length < tree.acceptance_length
    assert acceptance_for("deepseek-v3", "mtp", 9) is None
    assert acceptance_for("no-such-model", "eagle", 7) is None
