"""Expert load imbalance data (data/moe_imbalance.toml) and the typical EP knobs (data/ep_knobs.toml,
`ep_knob_data`). Imbalance: per model family, what a published
measurement states about how unevenly a MoE router spreads tokens over its experts, and which
catalog models belong to which family (with their MoE layer count).

The file records each source's own measure (an exponent, a Gini coefficient, or the share of
experts that carry a share of the routing mass); `capacity.model.expert_parallel` converts it to
the exponent of its power-law (Zipf) popularity model. Source of each figure: the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from capacity import workspace
from capacity.errors import CatalogError
from capacity.untrusted import loads_data_toml, read_utf8

IMBALANCE_FILE: Final = "moe_imbalance.toml"
MEASURES: Final = ("exponent", "gini", "coverage")
BALANCED: Final = "balanced"
"""The family of uniform routing (exponent 0), used for a model the file does not name."""


@dataclass(frozen=True, kw_only=True)
class ImbalanceFamily:
    """One family's published measure of expert load skew, as its source states it."""

    key: str
    name: str
    measure: str
    """`exponent` (the Zipf exponent itself), `gini` (Gini coefficient of per-expert token
    counts) or `coverage` (share of experts, hottest first, carrying `mass` of the routing)."""
    value: float
    experts: int = 0
    """The expert count the measure was taken over (gini, coverage); 0 for an exponent."""
    mass: float = 0.0
    """The routing mass the coverage measure refers to (0.9 = 90 %); 0 otherwise."""
    source: str
    as_of: str
    notes: str = ""


@dataclass(frozen=True, kw_only=True)
class MoeModelInfo:
    """A catalog model's imbalance family and MoE layer count (layers with routed experts)."""

    key: str
    family: str
    moe_layers: int
    source: str


@dataclass(frozen=True, kw_only=True)
class ImbalanceData:
    """Every family and model of the imbalance file."""

    families: Mapping[str, ImbalanceFamily]
    models: Mapping[str, MoeModelInfo]

    def family_of(self, model_key: str) -> ImbalanceFamily:
        """The family of a catalog model (its base key); the balanced family when unknown."""
        info = self.models.get(model_key)
        return self.families[info.family if info else BALANCED]


def _number(raw: Mapping[str, Any], name: str, where: str, *, default: float | None = None
            ) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise CatalogError(f"{where}: '{name}' must be a number >= 0, got {value!r}")
    return float(value)


def parse_imbalance(text: str, where: str = IMBALANCE_FILE) -> ImbalanceData:
    """The families and models of an imbalance file; CatalogError naming the entry and field."""
    data = loads_data_toml(text, where)
    families: dict[str, ImbalanceFamily] = {}
    for key, raw in dict(data.get("family", {})).items():
        at = f"{where} [family.{key}]"
        try:
            measure = str(raw["measure"])
            if measure not in MEASURES:
                raise CatalogError(f"{at}: measure '{measure}' is not one of {', '.join(MEASURES)}")
            fam = ImbalanceFamily(
                key=key, name=str(raw["name"]), measure=measure, value=_number(raw, "value", at),
                experts=int(_number(raw, "experts", at, default=0)),
                mass=_number(raw, "mass", at, default=0.0), source=str(raw["source"]),
                as_of=str(raw["as_of"]), notes=str(raw.get("notes", "")))
        except KeyError as exc:
            raise CatalogError(f"{at}: missing {exc}") from None
        if measure != "exponent" and fam.experts < 2:
            raise CatalogError(f"{at}: a {measure} needs 'experts' (>= 2) it was measured over")
        if measure == "coverage" and not (0 < fam.value <= 1 and 0 < fam.mass < 1):
            raise CatalogError(f"{at}: coverage needs 0 < value <= 1 and 0 < mass < 1")
        if measure == "gini" and not fam.value < 1:
            raise CatalogError(f"{at}: a Gini coefficient is below 1")
        families[key] = fam
    if BALANCED not in families:
        raise CatalogError(f"{where}: needs a [family.{BALANCED}] entry")
    models: dict[str, MoeModelInfo] = {}
    for key, raw in dict(data.get("model", {})).items():
        at = f"{where} [model.{key}]"
        family = str(raw.get("family", ""))
        if family not in families:
            raise CatalogError(f"{at}: family '{family}' is not a [family] of the file")
        layers = raw.get("moe_layers")
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise CatalogError(f"{at}: moe_layers must be a whole number >= 1")
        models[key] = MoeModelInfo(key=key, family=family, moe_layers=layers,
                                   source=str(raw.get("source", "")))
    return ImbalanceData(families=families, models=models)


@cache
def _load(path: Path) -> ImbalanceData:
    return parse_imbalance(read_utf8(path), str(path))


def imbalance_data() -> ImbalanceData:
    """The imbalance file: the catalog folder's, else the bundled one."""
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / IMBALANCE_FILE
        if path.is_file():
            return _load(path)
    raise CatalogError(f"no {IMBALANCE_FILE} in {workspace.catalog_dir()}")


# -- typical EP knobs (data/ep_knobs.toml) ------------------------------------------------------
EP_KNOBS_FILE: Final = "ep_knobs.toml"

KnobValue = float | bool | str | tuple[tuple[float, float], ...]
"""A knob's value: a number, a switch, a name, or a curve of (x, y) points."""


@dataclass(frozen=True, kw_only=True)
class EpKnobEntry:
    """One typical EP knob of data/ep_knobs.toml: its value and where it comes from."""

    name: str
    value: KnobValue
    source: str
    derivation: str


def _knob_value(raw: Any, at: str) -> KnobValue:
    if isinstance(raw, bool | str):
        return raw
    if isinstance(raw, int | float):
        if raw < 0:
            raise CatalogError(f"{at}: 'value' must be >= 0, got {raw!r}")
        return float(raw)
    if isinstance(raw, list) and raw and all(
            isinstance(p, list) and len(p) == 2 and all(
                isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in p)
            for p in raw):
        pts = tuple((float(x), float(y)) for x, y in raw)
        if any(b[0] <= a[0] for a, b in zip(pts, pts[1:], strict=False)):
            raise CatalogError(f"{at}: a curve's x values must increase")
        return pts
    raise CatalogError(f"{at}: 'value' must be a number >= 0, true/false, a name or a list "
                       f"of [x, y] pairs > 0, got {raw!r}")


def parse_ep_knobs(text: str, where: str = EP_KNOBS_FILE, table: str = "knob"
                   ) -> Mapping[str, EpKnobEntry]:
    """The knobs of an EP knob file's `table` by name (`knob`: the published values;
    `fitted`: the two knobs capacity/fit/ep_fit.py fits to the published rows); CatalogError
    naming the knob and field."""
    data = loads_data_toml(text, where)
    out: dict[str, EpKnobEntry] = {}
    for name, raw in dict(data.get(table, {})).items():
        at = f"{where} [{table}.{name}]"
        if not isinstance(raw, dict) or "value" not in raw:
            raise CatalogError(f"{at}: missing 'value'")
        source, derivation = str(raw.get("source", "")), str(raw.get("derivation", ""))
        if not source.strip() or not derivation.strip():
            raise CatalogError(f"{at}: every knob needs a 'source' and a 'derivation'")
        out[name] = EpKnobEntry(name=name, value=_knob_value(raw["value"], at), source=source,
                                derivation=derivation)
    return out


@cache
def _load_knobs(path: Path, table: str) -> Mapping[str, EpKnobEntry]:
    return parse_ep_knobs(read_utf8(path), str(path), table)


def _knob_file() -> Path:
    for folder in (workspace.catalog_dir(), workspace.bundled_data_dir()):
        path = folder / EP_KNOBS_FILE
        if path.is_file():
            return path
    raise CatalogError(f"no {EP_KNOBS_FILE} in {workspace.catalog_dir()}")


def ep_knob_data() -> Mapping[str, EpKnobEntry]:
    """The typical EP knobs (`[knob.*]`): the catalog folder's file, else the bundled one."""
    return _load_knobs(_knob_file(), "knob")


def ep_fitted_data() -> Mapping[str, EpKnobEntry]:
    """The two fitted EP knobs (`[fitted.*]`: overlap, layer_overhead_us), as
    capacity/fit/ep_fit.py fits them to every row of data/reference/moe_ep.csv (a test
    re-derives them): the planner's and the frontier's typical EP basis."""
    return _load_knobs(_knob_file(), "fitted")
