"""Node shapes: how each GPU is built into servers (data/nodes.toml).

A deployment is built of nodes: a tensor-parallel group stays inside one node (TP <= the
largest node size), replicas spread across nodes. Each GPU has the node sizes it is sold or
rented in (1/2/4/8), its form factor (SXM, OAM, PCIe) and how many of a node's GPUs share one
NVLink / Infinity Fabric domain, with the source. A GPU missing from the file (a custom one)
gets the `[default]` shape.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from capacity import workspace
from capacity.errors import CatalogError
from capacity.untrusted import loads_toml, read_utf8

NODES_FILE = "nodes.toml"
FORM_FACTORS = ("sxm", "oam", "pcie")
FABRICS = ("nvlink", "infinity-fabric")
"""Scale-up links between a node's GPUs (`NodeShape.fabric`); PCIe-only nodes have none."""


@dataclass(frozen=True, kw_only=True)
class NodeShape:
    """The servers one GPU comes in."""

    gpu: str
    form_factor: str
    gpus_per_node: tuple[int, ...]
    """Node sizes on offer, ascending (GPUs per server or cloud instance)."""
    nvlink_domain: int
    """GPUs joined by NVLink / Infinity Fabric within one node (1 = PCIe only)."""
    source: str
    as_of: str
    fabric: str = "nvlink"
    """The scale-up link of the domain (`FABRICS`): NVIDIA's NVLink, AMD's Infinity Fabric;
    meaningless where `nvlink_domain` is 1 (PCIe only)."""

    @property
    def max_gpus_per_node(self) -> int:
        return self.gpus_per_node[-1]

    def layout(self, n_gpus: int, tp: int) -> tuple[int, ...]:
        """Node sizes that hold `n_gpus` GPUs in TP groups of `tp`, each group in one node:
        as many of the largest node as fill up, then the fewest smaller ones for the rest
        (a remainder no offered size fits exactly goes on the smallest size that holds it)."""
        if tp < 1 or n_gpus % tp or tp > self.max_gpus_per_node:
            raise CatalogError(f"{n_gpus} GPUs in TP groups of {tp} do not fit {self.gpu}'s "
                               f"nodes of {'/'.join(map(str, self.gpus_per_node))}")
        sizes = [s for s in self.gpus_per_node if s % tp == 0]
        out: list[int] = []
        left = n_gpus
        for size in sorted(sizes, reverse=True):
            while left >= size:
                out.append(size)
                left -= size
        if left:
            out.append(min(s for s in sizes if s >= left))
        return tuple(out)


MAX_NODE_GPUS = 4096
"""The largest node or NVLink domain a nodes file may state (GB200 NVL72: 72)."""


def _count(value: Any, name: str) -> int:
    """A GPU count from a nodes file: a whole number 1..MAX_NODE_GPUS (not 8.0, inf or "8")."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NODE_GPUS:
        raise ValueError(f"{name} must be whole numbers 1..{MAX_NODE_GPUS}, got {value!r}")
    return value


def _shape(gpu: str, raw: Mapping[str, Any], where: str) -> NodeShape:
    try:
        per_node = raw["gpus_per_node"]
        if not isinstance(per_node, list):
            raise ValueError(f"gpus_per_node must be a list of sizes, got {per_node!r}")
        sizes = tuple(sorted(_count(x, "gpus_per_node") for x in per_node))
        shape = NodeShape(gpu=gpu, form_factor=str(raw["form_factor"]), gpus_per_node=sizes,
                          nvlink_domain=_count(raw["nvlink_domain"], "nvlink_domain"),
                          source=str(raw["source"]),
                          as_of=str(raw["as_of"]), fabric=str(raw.get("fabric", "nvlink")))
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(f"{where} [{gpu}]: {exc} (needs form_factor, gpus_per_node, "
                           "nvlink_domain, source, as_of)") from None
    if shape.fabric not in FABRICS:
        raise CatalogError(f"{where} [{gpu}]: fabric '{shape.fabric}' is not one of "
                           f"{', '.join(FABRICS)}")
    if shape.form_factor not in FORM_FACTORS:
        raise CatalogError(f"{where} [{gpu}]: form_factor '{shape.form_factor}' is not one of "
                           f"{', '.join(FORM_FACTORS)}")
    if not sizes or sizes[0] < 1 or not 1 <= shape.nvlink_domain <= sizes[-1]:
        raise CatalogError(f"{where} [{gpu}]: gpus_per_node must be >= 1 and nvlink_domain "
                           "1..the largest node")
    return shape


def parse_nodes(text: str, where: str = NODES_FILE) -> dict[str, NodeShape]:
    """Every [gpu] table of a nodes file (with [default])."""
    try:
        data = loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{where}: {exc}") from None
    if "default" not in data:
        raise CatalogError(f"{where}: needs a [default] shape for GPUs without node data")
    return {k: _shape(k, v, where) for k, v in data.items()}


@cache
def _load(path: Path) -> dict[str, NodeShape]:
    return parse_nodes(read_utf8(path), str(path))


def node_shapes() -> dict[str, NodeShape]:
    """The node shapes: the catalog folder's nodes.toml, else the bundled one."""
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / NODES_FILE
        if path.is_file():
            return _load(path)
    raise CatalogError(f"no {NODES_FILE} in {workspace.catalog_dir()}")


def node_shape(gpu: str) -> NodeShape:
    """The node shape of one GPU (the default shape for a GPU without node data)."""
    shapes = node_shapes()
    if gpu in shapes:
        return shapes[gpu]
    d = shapes["default"]
    return NodeShape(gpu=gpu, form_factor=d.form_factor, gpus_per_node=d.gpus_per_node,
                     nvlink_domain=d.nvlink_domain, source=d.source, as_of=d.as_of)
