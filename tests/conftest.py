"""Shared fixtures."""

from __future__ import annotations

import pytest

from capacity.catalog.loader import Catalog, default_catalog
from capacity.model.scenario import Scenario, make_scenario


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return default_catalog()


@pytest.fixture()
def seed(catalog: Catalog) -> Scenario:
    """The chapter's worked example (docs/method.md)."""
    return make_scenario("qwen3.5-9b-awq", "rtx-4090", catalog=catalog)
