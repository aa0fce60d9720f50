"""The buyer's chart as a reader sees it (capacity/report/frontier_chart.py): the engine named
in the page's language in the legend and the tooltip (not its key, 'chapter'), and one colour
per GPU however many GPUs are drawn (the Explorer draws its GPU against every data-centre GPU,
14 in all, more than a 10-colour scheme holds)."""

from __future__ import annotations

from typing import Any

import pytest

from capacity.catalog.loader import Catalog
from capacity.fit.frontier import FrontierInputs, datacenter_gpus, frontier
from capacity.report.frontier_chart import frontier_chart, frontier_frame

# (scheme, colours it holds) for the schemes Vega names; a chart with more GPUs repeats colours
SCHEME_SIZES = {"category10": 10, "tableau10": 10, "category20": 20, "tableau20": 20}


@pytest.fixture(scope="module")
def fr(catalog: Catalog) -> Any:
    gpus = ("rtx-4090", *(g for g in datacenter_gpus(catalog) if g != "rtx-4090"))
    inp = FrontierInputs(model="qwen3.5-9b", prompt_tokens=8192, output_tokens=256,
                         context_tokens=8192, gpus=gpus, engines=("chapter", "vllm"),
                         basis="", formats=("awq",), kv_dtypes=("fp16",))
    return frontier(inp, catalog)


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [la for la in spec["layer"] if "encoding" in la]


def test_engine_named_in_the_charts_language(fr: Any) -> None:
    zh, en, raw = (frontier_frame(fr, lang=x) for x in ("zh", "en", None))
    assert set(zh["style"]) == {"本章引擎 awq/fp16", "vLLM awq/fp16"}
    assert set(en["style"]) == {"chapter's engine awq/fp16", "vLLM awq/fp16"}
    assert set(raw["style"]) == {"chapter awq/fp16", "vllm awq/fp16"}   # no language: keys
    spec = frontier_chart(fr, lang="zh").to_dict()
    tips = [t for la in _layers(spec) for t in la["encoding"].get("tooltip", [])
            if isinstance(t, dict) and t.get("title") == "引擎"]
    assert tips and all(t["field"] == "engine_label" for t in tips)
    rows = [r for d in spec["datasets"].values() for r in d if "engine_label" in r]
    assert rows and {r["engine_label"] for r in rows} == {"本章引擎", "vLLM"}


def test_one_colour_per_gpu(fr: Any) -> None:
    spec = frontier_chart(fr, lang="en").to_dict()
    n = len(set(fr.points.gpu))
    assert n == 14
    colours = [la["encoding"]["color"] for la in _layers(spec) if "color" in la["encoding"]
               and "field" in la["encoding"]["color"]]
    assert colours
    for c in colours:
        scheme = c.get("scale", {}).get("scheme")
        assert SCHEME_SIZES.get(scheme, 0) >= n, c
