"""Custom models and GPUs (capacity.catalog.custom): validated, saved, loaded back."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from capacity.catalog import custom as cc
from capacity.catalog.loader import DATA_DIR, Catalog, default_catalog, load_catalog
from capacity.errors import CatalogError
from capacity.model.scenario import evaluate, make_scenario
from capacity.report import catalog_tables


@pytest.fixture
def custom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cc.ENV_VAR, str(tmp_path))
    cc.clear_caches()
    yield tmp_path
    cc.clear_caches()


def model_table(**changes: Any) -> dict[str, Any]:
    table = cc.model_form_table(
        key="my-9b", name="My 9B", params_b=9, num_layers=32, full_layers=8, kv_heads=4,
        head_dim=256, q_heads=16, hidden=4096, vocab=151_000, max_context_tokens=131072,
        linear_layers=24, weights_gb=5.7, weights_format="awq", source="test", as_of="2026-11")
    table.update(changes)
    return table


def gpu_table(**changes: Any) -> dict[str, Any]:
    table = cc.gpu_form_table(
        key="my-gpu", name="My GPU", memory_gb=48, memory_type="GDDR7", bandwidth_gb_s=1500,
        bf16_tflops=200, fp8_tflops=400, int8_tops=None, interconnect="PCIe 5.0",
        interconnect_kind="pcie", interconnect_gb_s=50, price_per_hour=3, currency="CNY",
        price_source="test", source="test", as_of="2026-11")
    table.update(changes)
    return table


def test_saved_model_loads_back_and_computes_like_the_seed(custom: Path) -> None:
    model, path = cc.save_model(model_table(), default_catalog())
    assert path == custom / "models" / "my-9b.toml"
    assert tomllib.loads(path.read_text())["key"] == "my-9b"
    cat = default_catalog()
    assert "my-9b" in cat.models
    ev = evaluate(make_scenario("my-9b-awq", "rtx-4090", catalog=cat), [50])
    assert int(ev.max_concurrency_vram) == 53  # same layout as the chapter model
    rows = catalog_tables.model_rows(cat)
    assert rows[[r["key"] for r in rows].index("my-9b")]["custom"]


def test_saved_gpu_loads_back(custom: Path) -> None:
    gpu, path = cc.save_gpu(gpu_table())
    cat = load_catalog(extra_dirs=[custom])
    assert cat.gpu("my-gpu").fp8_tflops == 400 and cat.gpu("my-gpu").int8_tops is None
    assert path.exists() and gpu.key == "my-gpu"
    # no driver figure entered: F3 budgets the stated 48 GB on every basis
    assert "memory_driver_gib" not in gpu_table() and cat.gpu("my-gpu").memory_for(True) == 48


def test_a_custom_gpu_with_its_drivers_memory(custom: Path) -> None:
    """The form's driver memory (GiB) is what a typical basis and the spec sheet budget."""
    cc.save_gpu(cc.gpu_form_table(**{**_form_args(), "memory_driver_gib": 44.5}))
    g = load_catalog(extra_dirs=[custom]).gpu("my-gpu")
    assert g.memory_driver_gib == 44.5
    assert g.memory_for(True) == pytest.approx(44.5 * 2**30 / 1e9) and g.memory_for(False) == 48


def _form_args() -> dict[str, Any]:
    return dict(key="my-gpu", name="My GPU", memory_gb=48, memory_type="GDDR7",
                bandwidth_gb_s=1500, bf16_tflops=200, fp8_tflops=400, int8_tops=None,
                interconnect="PCIe 5.0", interconnect_kind="pcie", interconnect_gb_s=50,
                price_per_hour=3, currency="CNY", price_source="test", source="test",
                as_of="2026-11")


@pytest.mark.parametrize(("changes", "field"), [
    pytest.param({"num_layers": 30}, "layers", id="layer-count-mismatch"),
    pytest.param({"params_total_b": -1.0}, "params_total_b", id="negative-params"),
    pytest.param({"key": "Bad Key"}, "key", id="bad-key"),
    pytest.param({"source": ""}, "source", id="no-source"),
])
def test_bad_model_names_the_field_and_saves_nothing(custom: Path, changes: dict[str, Any],
                                                     field: str) -> None:
    with pytest.raises(CatalogError, match=f"field '{field}'"):
        cc.save_model(model_table(**changes), default_catalog())
    assert not (custom / "models").exists()


def test_bad_gpu_names_the_field(custom: Path) -> None:
    with pytest.raises(CatalogError, match="field 'bandwidth_gb_s'"):
        cc.save_gpu(gpu_table(bandwidth_gb_s=0))


def test_existing_entry_is_kept_unless_replace(custom: Path) -> None:
    cc.save_gpu(gpu_table())
    with pytest.raises(CatalogError, match="already exists"):
        cc.save_gpu(gpu_table(name="Other"))
    cc.save_gpu(gpu_table(name="Other"), overwrite=True)
    assert default_catalog().gpu("my-gpu").name == "Other"


def test_upload_detects_model_or_gpu(custom: Path) -> None:
    cat: Catalog = default_catalog()
    text = (Path(DATA_DIR) / "models" / "llama-3.1-8b.toml").read_text()
    text = text.replace('key = "llama-3.1-8b"', 'key = "my-llama"')
    assert cc.save_toml(text, cat)[:2] == ("model", "my-llama")
    gpu_text = (Path(DATA_DIR) / "gpus" / "l4.toml").read_bytes().replace(
        b'key = "l4"', b'key = "my-l4"')
    assert cc.save_toml(gpu_text, cat)[:2] == ("gpu", "my-l4")


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("key = ", "not valid TOML", id="syntax"),
    pytest.param('key = "x"\nname = "y"\n', "neither a model", id="neither"),
    pytest.param(b"\xff\xfe", "not UTF-8", id="binary"),
])
def test_bad_upload_says_why(custom: Path, text: str | bytes, message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        cc.save_toml(text, default_catalog())


def test_bundled_entries_are_not_custom() -> None:
    rows = catalog_tables.gpu_rows(default_catalog())
    assert rows and not any(r["custom"] for r in rows)
    assert all(r["source"] and r["as_of"] for r in rows)
