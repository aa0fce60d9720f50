"""An Explorer link's `model` is the variant `capacity plan --model` reads for the same key: a
model key alone is the model's default format (`?model=qwen3-14b` was Qwen3-14B in the page's
AWQ, 10.1 GB of weights, where the CLI plans BF16, 29.6 GB), a variant key is its model and
format, and every state the page writes reads back to itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from capacity.catalog.loader import Catalog, default_catalog
from capacity.cli.main import main
from capacity.report.urlstate import (
    DEFAULT_STATE,
    ExplorerState,
    decode,
    decode_pin,
    encode,
    encode_pin,
)

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
pytestmark = pytest.mark.usefixtures("custom")  # the machine's custom entries stay out


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog()


def cli_variant(capsys: pytest.CaptureFixture[str], key: str) -> str:
    """The variant `capacity plan --model KEY` plans (its JSON's `model`)."""
    assert main(["plan", "--model", key, "--format", "json"]) == 0
    return str(json.loads(capsys.readouterr().out)["model"])


@pytest.mark.parametrize("key", ["qwen3-14b", "deepseek-r1", "qwen3.5-9b", "qwen3.5-9b-awq",
                                 "qwen3-14b-fp8"])
def test_a_link_model_is_the_clis_variant(key: str, catalog: Catalog,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    state, notices = decode({"model": key}, catalog)
    assert not notices
    assert state.scenario(catalog).variant.key == cli_variant(capsys, key)


def test_a_weights_parameter_wins_over_the_default_and_the_suffix(catalog: Catalog) -> None:
    for params in ({"model": "qwen3-14b", "weights": "awq"},
                   {"model": "qwen3-14b-fp8", "weights": "awq"}):
        state, notices = decode(params, catalog)
        assert (state.model, state.weights, notices) == ("qwen3-14b", "awq", [])


@pytest.mark.parametrize("model, weights", [
    ("qwen3.5-9b", "awq"), ("qwen3.5-9b", "bf16"), ("qwen3-14b", "awq"),
    ("qwen3-14b", "bf16"), ("deepseek-r1", "fp8"), ("llama-3.1-8b", "fp8")])
def test_every_variant_reads_back_from_its_link_and_its_pin(model: str, weights: str,
                                                            catalog: Catalog) -> None:
    state = ExplorerState(model=model, weights=weights)
    read, notices = decode(encode(state), catalog)
    assert not notices
    assert (read.model, read.weights) == (model, weights)
    pinned, notices = decode_pin(encode_pin(state, DEFAULT_STATE), DEFAULT_STATE, catalog)
    assert pinned is not None and not notices
    assert (pinned.model, pinned.weights) == (model, weights)


def test_the_page_opens_a_model_link_on_the_clis_variant() -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = "qwen3-14b"
    at.run()
    assert not at.exception
    assert at.selectbox(key="ex_model").value == "qwen3-14b"
    assert at.selectbox(key="ex_weights").value == "bf16"
    assert at.query_params["weights"] in ("bf16", ["bf16"])  # the link says it from now on
