"""The app's caches across browser sessions (`app.cache`): a save by one session is seen by every
other at its next run, and does not throw away what the others have cached."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import cache
from capacity.catalog import custom as catalog_custom
from capacity.plan.options import PlanInputs
from capacity.report.planner_url import DEFAULT_PLANNER

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")


def session(page: str) -> AppTest:
    """A browser session of its own, on `page`."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page).run()
    assert not at.exception
    return at


def save_gpu(at: AppTest, bandwidth: float, *, replace: bool = False) -> None:
    """Save the custom GPU 'my-card' through the Catalog page's form."""
    at.segmented_control(key="cat_kind").set_value("gpu").run()
    at.text_input(key="cg_key").set_value("my-card")
    at.text_input(key="cg_name").set_value("My card")
    at.number_input(key="cg_bw").set_value(bandwidth)
    at.text_input(key="cg_source").set_value("datasheet")
    at.text_input(key="cg_psource").set_value("quote")
    at.checkbox(key="cg_replace").set_value(replace)
    at.button[0].click().run()
    assert not at.exception and not at.error, at.error
    assert "Saved GPU 'my-card'" in at.success[0].value


def tpot(at: AppTest) -> str:
    return next(m.value for m in at.metric if m.label.startswith("TPOT"))


@pytest.mark.slow
def test_a_gpu_saved_in_one_session_is_seen_by_another_on_its_next_run(custom: Path) -> None:
    viewer = session("pages/explorer.py")
    assert "My card" not in viewer.selectbox(key="ex_gpu").options
    editor = session("pages/catalog.py")
    save_gpu(editor, 1000.0)

    viewer.run()  # the other session's next run: no reload, nothing in its own state changed
    assert not viewer.exception
    assert "My card" in viewer.selectbox(key="ex_gpu").options
    viewer.selectbox(key="ex_gpu").set_value("my-card").run()
    before = tpot(viewer)

    # the entry replaced with twice the bandwidth: the viewer's cached figures are for the old
    # file, so its next run computes them again (a memory-bound decode step: about half)
    save_gpu(editor, 2000.0, replace=True)
    viewer.run()
    assert not viewer.exception
    after = tpot(viewer)
    assert float(after.split()[0]) < 0.7 * float(before.split()[0]), (before, after)


def test_a_calibration_saved_anywhere_changes_the_version(
        custom: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPACITY_CALIBRATIONS_DIR", str(tmp_path / "calibrations"))
    first = cache.data_version()
    assert cache.data_version() == first  # a stamp of the files, not a counter
    (tmp_path / "calibrations").mkdir()
    (tmp_path / "calibrations" / "mine.toml").write_text('name = "mine"\n', encoding="utf-8")
    second = cache.data_version()
    assert second != first
    (tmp_path / "calibrations" / "mine.toml").unlink()
    assert cache.data_version() == first


def test_a_save_keeps_the_results_cached_for_the_other_files(
        custom: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Saving does not clear every cache: a result is computed again only for new files, and
    the entries cached before are still there (another session may still need them)."""
    calls: list[PlanInputs] = []
    real = cache.search_plan

    def counted(inp: PlanInputs, catalog: object) -> object:
        calls.append(inp)
        return real(inp, catalog)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "search_plan", counted)
    # inputs of this test's own (another test may have cached the default plan already)
    inp = replace(DEFAULT_PLANNER, dau=98_765).inputs(cache.catalog())
    cache.plan(inp)
    cache.plan(inp)
    assert len(calls) == 1
    catalog_custom.save_gpu(catalog_custom.gpu_form_table(
        key="my-card", name="My card", memory_gb=24.0, memory_type="GDDR6X",
        bandwidth_gb_s=1000.0, bf16_tflops=100.0, fp8_tflops=None, int8_tops=None,
        interconnect="PCIe 4.0 x16", interconnect_kind="pcie", interconnect_gb_s=25.0,
        price_per_hour=2.0, currency="USD", price_source="quote", source="datasheet",
        as_of="2025-01"))
    cache.plan(inp)
    assert len(calls) == 2  # the new catalog: planned again
    (custom / "gpus" / "my-card.toml").unlink()
    cache.plan(inp)
    assert len(calls) == 2  # back to the old files: the old entry was kept
