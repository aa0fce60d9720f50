"""Host links: the bandwidth between each GPU and its host's memory (data/host_links.toml).

vLLM's `--cpu-offload-gb X` keeps X GiB of each GPU's weights in host memory and streams them
over this link on every forward pass (`capacity.model.forward_pass.offload_ms`). Each GPU has the
link's name, its spec-sheet bandwidth one way (decimal GB/s) and the source; a GPU missing from
the file gets the `[default]` link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from capacity import workspace
from capacity.errors import CatalogError
from capacity.untrusted import loads_data_toml, read_utf8

HOST_LINKS_FILE = "host_links.toml"
MAX_HOST_LINK_GB_S = 10_000.0
"""The largest host-link bandwidth a file may state, GB/s (NVLink-C2C: 450 one way)."""


@dataclass(frozen=True, kw_only=True)
class HostLink:
    """One GPU's link to host memory: its name, bandwidth one way (GB/s) and source."""

    gpu: str
    link: str
    gb_s: float
    source: str


def parse_host_links(text: str, where: str = HOST_LINKS_FILE) -> dict[str, HostLink]:
    """Every table of a host-links file by GPU key (`default` included); CatalogError naming
    the bad table."""
    data = loads_data_toml(text, where)
    out: dict[str, HostLink] = {}
    for key, raw in data.items():
        try:
            gb_s = float(raw["gb_s"])
            link = HostLink(gpu=key, link=str(raw["link"]), gb_s=gb_s, source=str(raw["source"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"{where} [{key}]: {exc!r} (needs link, gb_s, source)") from None
        if not (math.isfinite(gb_s) and 0 < gb_s <= MAX_HOST_LINK_GB_S):
            raise CatalogError(f"{where} [{key}]: gb_s must be in (0, {MAX_HOST_LINK_GB_S:g}]")
        out[key] = link
    if "default" not in out:
        raise CatalogError(f"{where}: needs a [default] link")
    return out


@cache
def _links(path: Path) -> dict[str, HostLink]:
    return parse_host_links(read_utf8(path), str(path))


def host_link(gpu_key: str) -> HostLink:
    """The host link of a GPU (the catalog folder's file when it has one, else the bundled
    one); `[default]` for a GPU the file does not list."""
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / HOST_LINKS_FILE
        if path.is_file():
            links = _links(path)
            return links.get(gpu_key, links["default"])
    raise CatalogError(f"no {HOST_LINKS_FILE} in the catalog")
