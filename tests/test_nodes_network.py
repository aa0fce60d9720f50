"""Scale-out networks per GPU in data/nodes.toml (issue 27): the NIC bandwidth that carries a
KV-cache hand-over between pools, its kind, and the GB200 NVL72 rack as one NVLink domain."""

from __future__ import annotations

import pytest

from capacity.catalog.loader import default_catalog
from capacity.catalog.nodes import (
    DEFAULT_SCALE_OUT_GBIT_S,
    SCALE_OUT_KINDS,
    NodeShape,
    node_shape,
    node_shapes,
    parse_nodes,
)
from capacity.errors import CatalogError

BASE = """
[default]
form_factor = "pcie"
gpus_per_node = [1, 8]
nvlink_domain = 1
source = "s"
as_of = "2026-11"
{default_net}

[x]
form_factor = "sxm"
gpus_per_node = [8]
nvlink_domain = 8
source = "s"
as_of = "2026-11"
{x_net}
"""


def test_dgx_platforms_have_one_nic_per_gpu() -> None:
    # DGX H100/H200/B200: 8x ConnectX-7 400 Gb/s for 8 GPUs; DGX A100: 8x ConnectX-6 200 Gb/s
    for gpu, gbit in (("h100-sxm", 400), ("h200-sxm", 400), ("b200", 400),
                      ("a100-80gb-sxm", 200), ("a100-40gb-sxm", 200), ("mi300x", 400)):
        s = node_shape(gpu)
        assert s.scale_out_gbit_s == gbit
        assert s.scale_out_gb_s == pytest.approx(gbit / 8)  # 400 Gb/s = 50 GB/s
        assert s.scale_out_kind == "infiniband" and not s.scale_out_shared
        assert s.scale_out_source


def test_pcie_servers_share_a_node_nic() -> None:
    for gpu in ("l4", "l40s", "h100-pcie", "rtx-4090"):
        s = node_shape(gpu)
        assert s.scale_out_shared and s.scale_out_kind == "ethernet"
        assert s.scale_out_gbit_s < 50  # a share of a 25..200 Gb/s node NIC
    assert node_shape("l4").scale_out_gbit_s == pytest.approx(100 / 8)  # g2-standard-96


def test_every_shape_is_valid_and_sourced() -> None:
    for key, s in node_shapes().items():
        assert s.scale_out_kind in SCALE_OUT_KINDS, key
        assert 0 < s.scale_out_gbit_s <= 1000, key
        assert s.scale_out_source, key


def test_gb200_rack_is_one_nvlink_domain_even_without_gpu_data() -> None:
    s = node_shape("gb200")
    assert s.nvlink_domain == 72 and s.gpus_per_node == (4, 72)
    assert s.max_gpus_per_node == 72 and s.scale_out_gbit_s == 400
    # a TP-8 group fits a rack, replicas fill it: 9 groups of 8 in one rack of 72
    assert s.layout(72, 8) == (72,)
    assert s.layout(8, 4) == (4, 4)
    # the loader accepts a node entry whose GPU the catalog does not list (yet)
    # (data/gpus/gb200.toml may or may not exist yet): the catalog loads either way
    assert default_catalog().gpus and "gb200" in node_shapes()


def test_custom_gpu_takes_the_default_network() -> None:
    d = node_shapes()["default"]
    s = node_shape("my-custom-card")
    assert (s.scale_out_gbit_s, s.scale_out_kind, s.scale_out_shared) == \
        (d.scale_out_gbit_s, d.scale_out_kind, d.scale_out_shared)


def test_a_file_without_network_fields_still_loads() -> None:
    shapes = parse_nodes(BASE.format(default_net="", x_net=""))
    assert shapes["x"].scale_out_gbit_s == DEFAULT_SCALE_OUT_GBIT_S
    assert shapes["x"].scale_out_kind == "ethernet" and shapes["x"].scale_out_shared


def test_an_entry_without_network_fields_takes_defaults() -> None:
    shapes = parse_nodes(BASE.format(
        default_net='scale_out_gbit_s = 50\nscale_out_kind = "roce"', x_net=""))
    assert shapes["x"].scale_out_gbit_s == 50 and shapes["x"].scale_out_kind == "roce"
    own = parse_nodes(BASE.format(default_net="scale_out_gbit_s = 50",
                                  x_net="scale_out_gbit_s = 800"))["x"]
    assert own.scale_out_gbit_s == 800 and own.scale_out_gb_s == 100 and not own.scale_out_shared


@pytest.mark.parametrize("net", ["scale_out_gbit_s = 0", "scale_out_gbit_s = -4",
                                 'scale_out_gbit_s = "400"', "scale_out_gbit_s = true",
                                 "scale_out_gbit_s = 1e9", "scale_out_gbit_s = nan",
                                 'scale_out_kind = "nvlink"', 'scale_out_shared = "yes"'])
def test_bad_network_fields_are_refused(net: str) -> None:
    with pytest.raises(CatalogError):
        parse_nodes(BASE.format(default_net="", x_net=net))


def test_node_shape_defaults_keep_old_constructors_working() -> None:
    s = NodeShape(gpu="g", form_factor="pcie", gpus_per_node=(1,), nvlink_domain=1,
                  source="s", as_of="2026")
    assert s.scale_out_gb_s == pytest.approx(DEFAULT_SCALE_OUT_GBIT_S / 8)
