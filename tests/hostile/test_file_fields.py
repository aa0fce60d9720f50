"""File fields get the checks flags get (docs/reliability.md): a count is a whole number in its
range, a true/false field is a boolean; anything else is one line naming the field."""

from __future__ import annotations

import pytest

from capacity.catalog.model_files import config_params, table_from_config
from capacity.catalog.nodes import parse_nodes
from capacity.errors import CatalogError

NODE = """[default]
form_factor = "pcie"
gpus_per_node = {sizes}
nvlink_domain = {domain}
source = "test"
as_of = "2026-12-01"
"""


@pytest.mark.parametrize(("sizes", "domain", "says"), [
    ("[1, inf]", "1", "whole numbers"),
    ("[1, 8.0]", "1", "whole numbers"),
    ('[1, "8"]', "1", "whole numbers"),
    ("[1, 100000]", "1", "whole numbers"),
    ("8", "1", "a list of sizes"),
    ("[1, 8]", "nan", "whole numbers"),
    ("[1, 8]", "true", "whole numbers"),
])
def test_node_counts_are_whole_numbers(sizes: str, domain: str, says: str) -> None:
    with pytest.raises(CatalogError, match=says):
        parse_nodes(NODE.format(sizes=sizes, domain=domain), "nodes.toml")


def test_a_good_node_file_reads() -> None:
    shapes = parse_nodes(NODE.format(sizes="[8, 1, 4]", domain="4"), "nodes.toml")
    assert shapes["default"].gpus_per_node == (1, 4, 8)


CONFIG = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
          "intermediate_size": 128, "vocab_size": 1000}


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None])
def test_tied_embeddings_must_be_a_boolean(value: object) -> None:
    cfg = {**CONFIG, "tie_word_embeddings": value}
    with pytest.raises(CatalogError, match="tie_word_embeddings must be true or false"):
        config_params(cfg)


@pytest.mark.parametrize("tied", [True, False])
def test_tied_embeddings_as_booleans(tied: bool) -> None:
    table = table_from_config({**CONFIG, "tie_word_embeddings": tied}, key="m", source="t",
                              as_of="2026-12-01", weights_bytes=None, weights_format="bf16")
    assert table["tied_embeddings"] is tied
    untied = config_params({**CONFIG, "tie_word_embeddings": False}).total
    assert config_params({**CONFIG, "tie_word_embeddings": True}).total == untied - 1000 * 64
