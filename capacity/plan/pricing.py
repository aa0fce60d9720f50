"""The price of one GPU-hour in a plan, and where it comes from (docs/method.md, F7).

One rule for every surface (the planner's search, a deployment's figures, the quote's
assumptions, the Explorer opened from an option): a price entered for the GPU wins; else its
offer of the chosen kind (a prices file's, or the bundled published offers); else the catalog
price with its source and date. A price per GPU-hour is the GPU's own price, never adjusted to
carry a spare or an idle GPU of a whole node: those are counted in the GPUs paid for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from capacity.catalog.loader import Catalog, Gpu
from capacity.catalog.offers import Offer, bundled_of_kind
from capacity.model.cost import Currency, convert


class PriceKind(StrEnum):
    """Where a price per GPU-hour comes from."""

    CATALOG = "catalog"
    """The GPU catalog's price (its `price_source` and `price_as_of`)."""
    OFFER = "offer"
    """An offer: a prices file's, or a bundled published one (provider, date, source)."""
    ENTERED = "entered"
    """Typed by the user (`capacity size --price`, the Planner's price table, the Explorer)."""


@dataclass(frozen=True, kw_only=True)
class Price:
    """One GPU-hour's price in the plan's currency, with its source."""

    per_gpu_hour: float
    currency: Currency
    kind: PriceKind
    offer: Offer | None = None
    """The offer it comes from (kind OFFER)."""
    missing_kind: str = ""
    """An offer kind that was asked for and that this GPU has none of (its catalog price is
    used, and every surface says so)."""
    node_gpus: int = 0
    """GPUs per node of a per-node offer: the deployment is bought in whole nodes of this size
    (0: priced per GPU)."""


def price_for(gpu: Gpu, *, currency: Currency, cny_per_usd: float,
              entered: Mapping[str, float], offers: Mapping[str, Offer],
              offer_kind: str = "") -> Price:
    """The price of one hour of `gpu`: `entered[gpu.key]` (in `currency`), else its offer
    (converted at `cny_per_usd`), else its catalog price (converted)."""
    if gpu.key in entered:
        return Price(per_gpu_hour=float(entered[gpu.key]), currency=currency,
                     kind=PriceKind.ENTERED)
    offer = offers.get(gpu.key)
    if offer is not None:
        return Price(per_gpu_hour=convert(offer.price_per_gpu_hour, offer.currency, currency,
                                          cny_per_usd),
                     currency=currency, kind=PriceKind.OFFER, offer=offer,
                     node_gpus=offer.gpus_per_node if offer.per == "node" else 0)
    return Price(per_gpu_hour=convert(gpu.price_per_hour, gpu.currency, currency, cny_per_usd),
                 currency=currency, kind=PriceKind.CATALOG, missing_kind=offer_kind)


def chosen_gpu_price(catalog: Catalog, gpu: Gpu, *, currency: str, cny_per_usd: float,
                     offer_kind: str = "") -> tuple[float, str]:
    """The price per GPU-hour that choosing `gpu` brings where one price is shown (the
    Explorer), in `currency`: its bundled per-GPU offer of `offer_kind` (converted at
    `cny_per_usd`), else its catalog price (converted); with the offer kind that price comes
    from ('' for the catalog's). Choosing a GPU in the Explorer's sidebar and a link that names
    a GPU without a price both take it. Example: a B200 in CNY with no offer kind is its
    catalog price, 5.5 USD x 7.1 = 39.05 CNY (data/gpus/b200.toml)."""
    offer = next((o for o in bundled_of_kind(catalog, offer_kind)
                  if o.gpu == gpu.key and o.per == "gpu"), None)
    if offer is not None:
        return convert(offer.price_per_gpu_hour, offer.currency, currency, cny_per_usd), offer_kind
    return convert(gpu.price_per_hour, gpu.currency, currency, cny_per_usd), ""
