"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from capacity.catalog import custom as catalog_custom
from capacity.catalog.loader import Catalog, default_catalog
from capacity.model.scenario import Scenario, make_scenario


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return default_catalog()


@pytest.fixture()
def seed(catalog: Catalog) -> Scenario:
    """The chapter's worked example (docs/method.md)."""
    return make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog)


@pytest.fixture()
def custom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty folder of custom catalog entries (the machine's own stay out of the test), its
    caches cleared before and after; yields the folder."""
    folder = tmp_path / "custom"
    monkeypatch.setenv(catalog_custom.ENV_VAR, str(folder))
    catalog_custom.clear_caches()
    yield folder
    catalog_custom.clear_caches()
