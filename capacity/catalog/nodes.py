"""Node shapes: how each GPU is built into servers (data/nodes.toml).

A deployment is built of nodes: a tensor-parallel group stays inside one node (TP <= the
largest node size), replicas spread across nodes. Each GPU has the node sizes it is sold or
rented in (1/2/4/8), its form factor (SXM, OAM, PCIe) and how many of a node's GPUs share one
NVLink / Infinity Fabric domain, with the source. A GPU missing from the file (a custom one)
gets the `[default]` shape.

Each shape also states the scale-out network per GPU (`scale_out_gbit_s`, `scale_out_kind`):
the NIC bandwidth that leaves the node, which carries a KV-cache hand-over between a prefill and
a decode pool on different nodes (capacity/plan/disagg.py) and expert-parallel all-to-all
traffic across nodes. On PCIe servers one node-level NIC is shared by the node's GPUs: the file
then records the NIC divided by the GPUs of the largest node and sets `scale_out_shared`.
A node entry may name a GPU the GPU catalog does not list (yet): the shapes are looked up by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from capacity import workspace
from capacity.errors import CatalogError
from capacity.untrusted import loads_data_toml, read_utf8

NODES_FILE = "nodes.toml"
FORM_FACTORS = ("sxm", "oam", "pcie")
FABRICS = ("nvlink", "infinity-fabric")
"""Scale-up links between a node's GPUs (`NodeShape.fabric`); PCIe-only nodes have none."""
SCALE_OUT_KINDS = ("infiniband", "roce", "ethernet")
"""The scale-out network between nodes (`NodeShape.scale_out_kind`)."""
DEFAULT_SCALE_OUT_GBIT_S = 12.5
"""Gb/s per GPU where a nodes file states no scale-out figure at all: one 100 Gb/s Ethernet
port shared by 8 GPUs (a capacity assumption, not a measurement)."""
MAX_SCALE_OUT_GBIT_S = 10_000.0
"""The largest per-GPU NIC bandwidth a nodes file may state, Gb/s (ConnectX-8: 800)."""


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
    scale_out_gbit_s: float = DEFAULT_SCALE_OUT_GBIT_S
    """Scale-out NIC bandwidth per GPU, Gb/s, one direction (DGX H100: 8x ConnectX-7 at
    400 Gb/s for 8 GPUs = 400). Where `scale_out_shared`, the node's NIC / its GPUs."""
    scale_out_kind: str = "ethernet"
    """The scale-out network (`SCALE_OUT_KINDS`): infiniband, roce or ethernet."""
    scale_out_shared: bool = True
    """True where one node-level NIC serves all the node's GPUs (PCIe servers): the figure is
    a share, and a GPU alone on the node could burst to the whole NIC."""
    scale_out_source: str = "capacity assumption: 100 Gb/s Ethernet shared by 8 GPUs"

    @property
    def scale_out_gb_s(self) -> float:
        """Scale-out bandwidth per GPU in GB/s (bytes): `scale_out_gbit_s` / 8 bits per byte."""
        return self.scale_out_gbit_s / 8.0

    @property
    def max_gpus_per_node(self) -> int:
        return self.gpus_per_node[-1]

    def layout(self, n_gpus: int, tp: int) -> tuple[int, ...]:
        """Node sizes that hold `n_gpus` GPUs in TP groups of `tp`, each group in one node: as
        many of the largest node as fill up, then the fewest smaller ones for the rest (a
        remainder no offered size fits exactly goes on the smallest size that holds it). A
        node holds floor(size / tp) groups: a 72-GPU NVL72 rack holds four groups of 16."""
        if tp < 1 or n_gpus % tp or tp > self.max_gpus_per_node:
            raise CatalogError(f"{n_gpus} GPUs in TP groups of {tp} do not fit {self.gpu}'s "
                               f"nodes of {'/'.join(map(str, self.gpus_per_node))}")
        sizes = [s for s in self.gpus_per_node if s >= tp]
        out: list[int] = []
        left = n_gpus
        for size in sorted(sizes, reverse=True):
            used = size // tp * tp
            while left >= used:
                out.append(size)
                left -= used
        if left:
            out.append(min(s for s in sizes if s // tp * tp >= left))
        return tuple(out)


MAX_NODE_GPUS = 4096
"""The largest node or NVLink domain a nodes file may state (GB200 NVL72: 72)."""


def _count(value: Any, name: str) -> int:
    """A GPU count from a nodes file: a whole number 1..MAX_NODE_GPUS (not 8.0, inf or "8")."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NODE_GPUS:
        raise ValueError(f"{name} must be whole numbers 1..{MAX_NODE_GPUS}, got {value!r}")
    return value


def _gbit(value: Any, where: str, gpu: str) -> float:
    """A scale-out bandwidth from a nodes file: a number in (0, MAX_SCALE_OUT_GBIT_S] Gb/s."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 < value <= MAX_SCALE_OUT_GBIT_S:
        raise CatalogError(f"{where} [{gpu}]: scale_out_gbit_s must be a number of Gb/s in "
                           f"(0, {MAX_SCALE_OUT_GBIT_S:g}], got {value!r}")
    return float(value)


def _shape(gpu: str, raw: Mapping[str, Any], where: str,
           fallback: Mapping[str, Any] | None = None) -> NodeShape:
    """One [gpu] table. A table stating no scale_out_* field takes them all from `fallback`
    (the [default] table), else the built-in assumption (`DEFAULT_SCALE_OUT_GBIT_S`)."""
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where} [{gpu}]: must be a table of form_factor, gpus_per_node, "
                           "nvlink_domain, source, as_of")
    own = any(str(k).startswith("scale_out_") for k in raw)
    net: Mapping[str, Any] = raw if own or not isinstance(fallback, Mapping) else fallback
    kind = str(net.get("scale_out_kind", "ethernet"))
    if kind not in SCALE_OUT_KINDS:
        raise CatalogError(f"{where} [{gpu}]: scale_out_kind '{kind}' is not one of "
                           f"{', '.join(SCALE_OUT_KINDS)}")
    shared = net.get("scale_out_shared", "scale_out_gbit_s" not in net)
    if not isinstance(shared, bool):
        raise CatalogError(f"{where} [{gpu}]: scale_out_shared must be true or false")
    gbit = _gbit(net.get("scale_out_gbit_s", DEFAULT_SCALE_OUT_GBIT_S), where, gpu)
    net_source = str(net.get("scale_out_source", NodeShape.scale_out_source))
    try:
        per_node = raw["gpus_per_node"]
        if not isinstance(per_node, list):
            raise ValueError(f"gpus_per_node must be a list of sizes, got {per_node!r}")
        sizes = tuple(sorted(_count(x, "gpus_per_node") for x in per_node))
        shape = NodeShape(gpu=gpu, form_factor=str(raw["form_factor"]), gpus_per_node=sizes,
                          nvlink_domain=_count(raw["nvlink_domain"], "nvlink_domain"),
                          source=str(raw["source"]),
                          as_of=str(raw["as_of"]), fabric=str(raw.get("fabric", "nvlink")),
                          scale_out_gbit_s=gbit, scale_out_kind=kind, scale_out_shared=shared,
                          scale_out_source=net_source)
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
    data = loads_data_toml(text, where)
    if "default" not in data:
        raise CatalogError(f"{where}: needs a [default] shape for GPUs without node data")
    default = data["default"] if isinstance(data["default"], Mapping) else None
    return {k: _shape(k, v, where, None if k == "default" else default)
            for k, v in data.items()}


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
                     nvlink_domain=d.nvlink_domain, source=d.source, as_of=d.as_of,
                     scale_out_gbit_s=d.scale_out_gbit_s, scale_out_kind=d.scale_out_kind,
                     scale_out_shared=d.scale_out_shared, scale_out_source=d.scale_out_source)
