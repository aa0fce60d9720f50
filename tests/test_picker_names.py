"""A picker's options are told apart by their shown text (Streamlit 1.67 holds a choice by it):
two entries shown alike get their keys beside their names (`app.format.distinct_names`), so a
custom GPU saved under a bundled GPU's name can be picked. Results' run names:
tests/test_app_results.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.format import distinct_names

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
ROOT = Path(__file__).resolve().parent.parent


def test_distinct_names_by_hand() -> None:
    assert distinct_names({"a": "A", "b": "B"}) == {"a": "A", "b": "B"}
    assert distinct_names({"rtx-3090": "RTX 3090", "my-3090": "RTX 3090", "x": "X"}) == {
        "rtx-3090": "RTX 3090 (rtx-3090)", "my-3090": "RTX 3090 (my-3090)", "x": "X"}
    assert distinct_names({}) == {}


def test_the_explorer_picks_a_custom_gpu_named_like_a_bundled_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    custom = tmp_path / "custom"
    (custom / "gpus").mkdir(parents=True)
    text = (ROOT / "data" / "gpus" / "rtx-3090.toml").read_text(encoding="utf-8")
    (custom / "gpus" / "my-3090.toml").write_text(
        text.replace('key = "rtx-3090"', 'key = "my-3090"').replace("memory_gb = 24",
                                                                      "memory_gb = 48"),
        encoding="utf-8")
    monkeypatch.setenv("CAPACITY_CUSTOM_DIR", str(custom))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    gpu = at.selectbox(key="ex_gpu")
    labels = list(gpu.options)
    assert "RTX 3090 (my-3090)" in labels and "RTX 3090 (rtx-3090)" in labels
    assert len(set(labels)) == len(labels)
    gpu.set_value("my-3090").run()
    assert not at.exception
    assert at.selectbox(key="ex_gpu").value == "my-3090"  # not the bundled one
    # the headline names it the same way
    assert any("on 1 × RTX 3090 (my-3090)" in h.value for h in at.subheader), \
        [h.value for h in at.subheader]
    gpu = at.selectbox(key="ex_gpu")
    gpu.set_value("rtx-3090").run()
    assert at.selectbox(key="ex_gpu").value == "rtx-3090"
