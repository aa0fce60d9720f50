"""Price offers: what one GPU costs from one provider on one contract.

Each GPU has its catalog price (`Gpu.price_per_hour`, with its source and date) as the default
on-demand offer, custom GPUs included. A prices file adds offers, several per GPU:

    [[offer]]
    gpu = "h100-sxm"
    kind = "reserved-1y"        # on-demand | reserved-1y | spot
    provider = "Example Cloud"
    price = 15.2                # per GPU-hour, or per node-hour with per = "node"
    currency = "USD"            # CNY or USD
    per = "node"                # gpu (default) or node
    gpus_per_node = 8           # with per = "node"
    as_of = "2026-11"
    source = "contract quote 2026-11-20"

`capacity size --prices FILE [--offer-kind KIND]` and the Planner page use them; a per-node offer
becomes its price per GPU-hour (node price / GPUs per node), which must be within the catalog's
bounds, [`MIN_PRICE_PER_HOUR`, `MAX_PRICE_PER_HOUR`] (the message names the file, the offer and
the field). Currency conversion happens where
the plan's currency is known (`capacity.model.cost.convert`).

capacity bundles published offers (`data/offers.toml`: on-demand, reserved 1-year and spot
prices of public cloud price pages, each row with its source URL and date): `capacity size
--offer-kind KIND` without `--prices`, and the Planner's offer choice, price with them
(`bundled_offers`). A GPU without an offer of the chosen kind keeps its catalog price, and
`without_offer` names it so the CLI, the page and the quote can say so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from capacity import workspace
from capacity.catalog.loader import (
    MAX_PRICE_PER_HOUR,
    MIN_PRICE_PER_HOUR,
    Catalog,
    bound_problem,
)
from capacity.errors import CatalogError
from capacity.untrusted import loads_data_toml, read_utf8

OFFER_KINDS: tuple[str, ...] = ("on-demand", "reserved-1y", "spot")
"""Contract kinds, in the order they are listed."""
CURRENCIES: tuple[str, ...] = ("CNY", "USD")


@dataclass(frozen=True, kw_only=True)
class Offer:
    """One price for one GPU."""

    gpu: str
    price: float
    """Per GPU-hour, or per node-hour when `per` is 'node', in `currency`."""
    currency: Literal["CNY", "USD"]
    kind: str = "on-demand"
    provider: str = ""
    per: Literal["gpu", "node"] = "gpu"
    gpus_per_node: int = 1
    as_of: str = ""
    source: str = ""

    @property
    def price_per_gpu_hour(self) -> float:
        """The price of one GPU for one hour, in `currency`."""
        return self.price / self.gpus_per_node if self.per == "node" else self.price

    @property
    def description(self) -> str:
        """'Example Cloud, reserved-1y, USD 15.2 per 8-GPU node-hour, as of 2026-11 (source)'."""
        unit = (f"per {self.gpus_per_node}-GPU node-hour" if self.per == "node"
                else "per GPU-hour")
        head = ", ".join(x for x in (self.provider, self.kind) if x)
        text = f"{head}, {self.currency} {self.price:g} {unit}" if head else (
            f"{self.currency} {self.price:g} {unit}")
        if self.as_of:
            text += f", as of {self.as_of}"
        return text + (f" ({self.source})" if self.source else "")


def catalog_offer(catalog: Catalog, gpu: str) -> Offer:
    """The catalog's price of one GPU as its default on-demand offer."""
    g = catalog.gpu(gpu)
    return Offer(gpu=g.key, price=g.price_per_hour, currency=g.currency, kind="on-demand",
                 as_of=g.price_as_of, source=g.price_source)


def _offer(raw: Mapping[str, Any], where: str, catalog: Catalog) -> Offer:
    gpu = str(raw.get("gpu", "")).strip().lower()
    if gpu not in catalog.gpus:
        raise CatalogError(f"{where}: gpu '{gpu}' is not in the catalog")
    kind = str(raw.get("kind", "on-demand"))
    if kind not in OFFER_KINDS:
        raise CatalogError(f"{where}: kind '{kind}' is not one of {', '.join(OFFER_KINDS)}")
    currency = str(raw.get("currency", "")).upper()
    if currency not in CURRENCIES:
        raise CatalogError(f"{where}: currency must be CNY or USD, got '{currency}'")
    per = str(raw.get("per", "gpu"))
    if per not in ("gpu", "node"):
        raise CatalogError(f"{where}: per must be 'gpu' or 'node', got '{per}'")
    try:
        price = float(raw["price"])
        gpn = int(raw.get("gpus_per_node", 1))
    except (KeyError, TypeError, ValueError, OverflowError):
        raise CatalogError(f"{where}: needs a numeric price (and gpus_per_node)") from None
    if not 1 <= gpn <= 64 or (per == "gpu" and "gpus_per_node" in raw and gpn != 1):
        raise CatalogError(f"{where}: gpus_per_node must be 1..64 (and only with per = 'node')")
    per_gpu = price / gpn if per == "node" else price
    if not (math.isfinite(price) and price > 0):
        raise CatalogError(f"{where}: field 'price': price must be > 0 and finite, in "
                           f"[{MIN_PRICE_PER_HOUR:g}, {MAX_PRICE_PER_HOUR:,g}] per GPU-hour, "
                           f"got {price!r}")
    problem = bound_problem("price_per_hour", per_gpu)
    if problem is not None:
        raise CatalogError(f"{where}: field 'price': {problem} (accepted: "
                           f"[{MIN_PRICE_PER_HOUR:g}, {MAX_PRICE_PER_HOUR:,g}] per GPU-hour"
                           f"{f', {gpn} GPUs per node' if per == 'node' else ''})")
    return Offer(gpu=gpu, price=price, currency=cast(Literal["CNY", "USD"], currency),
                 kind=kind, provider=str(raw.get("provider", "")),
                 per=cast(Literal["gpu", "node"], per), gpus_per_node=gpn,
                 as_of=str(raw.get("as_of", "")), source=str(raw.get("source", "")))


def parse_offers(text: str, catalog: Catalog, where: str = "prices") -> tuple[Offer, ...]:
    """The [[offer]] tables of a prices file (messages name the file and the offer)."""
    data = loads_data_toml(text, where)
    raw = data.get("offer")
    if not isinstance(raw, list) or not raw:
        raise CatalogError(f"{where}: no [[offer]] tables")
    return tuple(_offer(r, f"{where}, offer {i + 1}", catalog) for i, r in enumerate(raw))


def load_offers(path: str | Path, catalog: Catalog) -> tuple[Offer, ...]:
    """Read a prices file."""
    p = Path(path)
    if not p.is_file():
        raise CatalogError(f"prices file '{p}' does not exist")
    return parse_offers(read_utf8(p), catalog, str(p))


def choose(offers: Iterable[Offer], kind: str = "on-demand") -> dict[str, Offer]:
    """Per GPU, its offer of `kind` (the cheapest per GPU-hour, in its own currency, when a
    GPU has several of that kind and currency; the first otherwise)."""
    if kind not in OFFER_KINDS:
        raise CatalogError(f"offer kind '{kind}' is not one of {', '.join(OFFER_KINDS)}")
    out: dict[str, Offer] = {}
    for o in offers:
        if o.kind != kind:
            continue
        cur = out.get(o.gpu)
        if cur is None or (cur.currency == o.currency
                           and o.price_per_gpu_hour < cur.price_per_gpu_hour):
            out[o.gpu] = o
    return out


OFFERS_FILE = "offers.toml"
"""The bundled offers' file name (in the catalog folder, else the bundled data)."""


def offers_path() -> Path:
    """The offers file the app and the CLI use: the catalog folder's offers.toml, else the
    bundled data/offers.toml."""
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / OFFERS_FILE
        if path.is_file():
            return path
    raise CatalogError(f"no {OFFERS_FILE} in {workspace.catalog_dir()} or the bundled data")


def bundled_offers(catalog: Catalog) -> tuple[Offer, ...]:
    """The published offers (`offers_path`): every row with its provider, kind, date and
    source."""
    return load_offers(offers_path(), catalog)


def bundled_of_kind(catalog: Catalog, kind: str) -> tuple[Offer, ...]:
    """The bundled offers of one kind, one per GPU (`choose`); none when `kind` is ''."""
    return tuple(choose(bundled_offers(catalog), kind).values()) if kind else ()


def without_offer(chosen: Mapping[str, Offer], gpus: Iterable[str]) -> tuple[str, ...]:
    """The GPUs of `gpus` that have no offer in `chosen` (they keep their catalog price)."""
    return tuple(g for g in gpus if g not in chosen)
