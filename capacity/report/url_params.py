"""The rules every link parameter follows (the Explorer's, `capacity.report.urlstate`, and the
Planner's, `capacity.report.planner_url`): a number is finite, of its kind and inside its range;
floats are written exactly; a basis is a name, never a path; a value that cannot be used falls
back to its default with a notice (`ignored_note`) that names the parameter, the value and why.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from capacity.catalog.engines import engine_names, engine_profile
from capacity.catalog.loader import Catalog, Model
from capacity.catalog.offers import bundled_of_kind
from capacity.errors import CapacityError
from capacity.model.cost import convert
from capacity.model.scenario import default_context_tokens
from capacity.plan.options import PlanInputs
from capacity.plan.pricing import chosen_gpu_price
from capacity.types import Note

if TYPE_CHECKING:
    pass


def why_text(exc: BaseException) -> str:
    """An exception's message as a notice's reason: its `Note` when it has one (the page says
    it in its language), else its text."""
    arg = exc.args[0] if exc.args else ""
    return arg if isinstance(arg, Note) else str(exc)


def ignored_note(name: str, raw: str, exc: BaseException, default: object,
             basis: bool) -> Note:
    """The notice for a link parameter that could not be used and fell back to `default`."""
    shown = raw if len(raw) <= 60 else raw[:60] + "..."
    if basis and not default:
        return Note(f"'{name}={shown}' ignored ({exc}); using the chapter's assumptions",
                    code="link_ignored_basis", name=name, value=shown, why=why_text(exc))
    return Note(f"'{name}={shown}' ignored ({exc}); using {default}", code="link_ignored",
                name=name, value=shown, why=why_text(exc), using=str(default))


def knob_note(name: str, raw: str, exc: BaseException) -> Note:
    """The notice for an engine knob a link cannot use: it falls back to the engine's default."""
    shown = raw if len(raw) <= 60 else raw[:60] + "..."
    return Note(f"'{name}={shown}' ignored ({exc}); using the engine's default",
                code="link_knob", name=name, value=shown, why=why_text(exc))


def parse_number(raw: str, kind: type, bounds: tuple[float, float]) -> float | int:
    """A URL value as a finite number of `kind` (int or float) within `bounds`, or ValueError
    with the reason (the Explorer's and the Planner's links share it)."""
    try:
        number: float | int = float(raw)
    except ValueError:
        raise ValueError(Note("not a number", code="why_not_number")) from None
    if not math.isfinite(number):
        raise ValueError(Note("not a finite number", code="why_not_finite"))
    if kind is int:
        if number != int(number):
            raise ValueError(Note("not a whole number", code="why_not_whole"))
        number = int(number)
    lo, hi = bounds
    if not lo <= number <= hi:
        raise ValueError(Note(f"outside {lo:g}..{hi:g}", code="why_outside", lo=f"{lo:g}",
                              hi=f"{hi:g}"))
    return number


def float_text(value: float) -> str:
    """A float as a link writes it: the shortest text that reads back to the same number
    ('13.135', '2', '1.6666666666666667'), so a link reopens exactly the figures it was
    made from (a price or a design load rounded to 6 digits would move them)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def basis_param(raw: str) -> str:
    """A URL's basis (`capacity.fit.planning.check_basis`), or ValueError saying what a basis
    is: the chapter's (empty), 'spec', 'typical:ENGINE' or a saved calibration's name (a
    name, never a path: links must not read arbitrary files)."""
    from capacity.fit.planning import check_basis

    try:
        return check_basis(raw)
    except CapacityError as exc:
        raise ValueError(why_text(exc)) from None


def engine_param(value: str) -> str:
    """An engine profile's key, or ValueError naming the known ones."""
    try:
        return engine_profile(value).key
    except CapacityError:
        raise ValueError(f"engine must be one of {', '.join(engine_names())}") from None


def bundled_offers(inp: PlanInputs, catalog: Catalog) -> bool:
    """Whether a plan's offers are the bundled ones of its offer kind (a link carries them
    as that kind; other offers, a prices file's, travel as entered prices)."""
    return bool(inp.offer_kind) and set(inp.offers) == set(
        bundled_of_kind(catalog, inp.offer_kind))


def weights_written(names: Container[str]) -> set[str]:
    """The weight format a link writes beside a model (`names`: the fields it writes anyway), so
    that `implied_variant` has nothing to imply on reading it back: a link of Qwen3-14B in AWQ
    says `model=qwen3-14b&weights=awq`, never `model=qwen3-14b` alone (which is BF16)."""
    return {"weights"} if "model" in names else set()


def implied_variant(changes: Mapping[str, Any], given: Container[str], catalog: Catalog
                    ) -> dict[str, str]:
    """A link's `model` as `capacity plan --model` reads it (`Catalog.variant`; the fields to
    change): a model key alone brings the model's default format (`model=qwen3-14b`: BF16,
    whatever format the page had), a variant key is its model and format
    (`model=qwen3.5-9b-awq`: Qwen3.5-9B in AWQ); a `weights` given wins over both. Nothing for
    a key the catalog does not know (the catalog check names it)."""
    if "model" not in changes:
        return {}
    try:
        v = catalog.variant(changes["model"])
    except CapacityError:
        return {}
    return {"model": v.model.key, **({} if "weights" in given else {"weights": v.format.key})}


class LinkMoney(Protocol):
    """The money inputs of a link's state (the Explorer's `ExplorerState`)."""

    @property
    def gpu(self) -> str: ...
    @property
    def offer(self) -> str: ...
    @property
    def currency(self) -> str: ...
    @property
    def rate(self) -> float: ...
    @property
    def price(self) -> float: ...
    @property
    def slo_cost(self) -> float: ...


def money_written(names: Container[str]) -> set[str]:
    """The money inputs a link writes beside `names` (the fields it writes anyway) so that
    `implied_money` has nothing to imply on reading it back: the price beside a GPU, offer
    kind or currency, and the cost SLO beside a currency."""
    out = {"price"} if any(n in names for n in ("gpu", "offer", "currency")) else set()
    return out | {"slo_cost"} if "currency" in names else out


def implied_money(s: LinkMoney, base: LinkMoney, given: Container[str], catalog: Catalog
                  ) -> dict[str, Any]:
    """What a link leaves unsaid about money, as the sidebar would set it (the fields to
    change): another GPU or offer kind without a `price` brings that GPU's
    (`pricing.chosen_gpu_price`: a B200 is never priced as the default RTX 4090), with the offer
    kind it comes from; another currency alone converts the price, and the cost SLO unless
    given, at the link's rate (to 4 decimals, as switching the currency does)."""
    out: dict[str, Any] = {}
    if "price" not in given and (s.gpu, s.offer) != (base.gpu, base.offer):
        out["price"], out["offer"] = chosen_gpu_price(
            catalog, catalog.gpus[s.gpu], currency=s.currency, cny_per_usd=s.rate,
            offer_kind=s.offer)
    if s.currency != base.currency:
        for name, value in (("price", base.price), ("slo_cost", base.slo_cost)):
            if name not in given and name not in out:
                out[name] = round(convert(value, base.currency, s.currency, s.rate), 4)
    return out


def default_context(ctx: int, model: Model, stated: bool) -> int:
    """The context a link opens with: the one it states, else the default (`ctx`) or the
    model's own limit where that is shorter (Llama-2-70B holds 4,096 tokens, the default is
    8,192: `scenario.default_context_tokens`). A stated context past the limit is kept, and
    flagged where it is shown. Example: 8,192 not stated, a 4,096-token model -> 4,096; 32,768
    stated -> 32,768."""
    return ctx if stated else default_context_tokens(model, ctx)
