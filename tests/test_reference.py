"""Published measurements shipped as data: loaded with their sources, mapped to the catalog."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from capacity.catalog.loader import DATA_DIR, default_catalog
from capacity.errors import CatalogError
from capacity.fit.measured import tpot_from_throughput
from capacity.fit.reference import RunShape, load_reference, reference_points, select


def test_every_row_becomes_part_of_a_sweep_with_its_source() -> None:
    text = (DATA_DIR / "reference" / "published.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(text.splitlines()))
    sweeps = load_reference()
    assert sum(len(s.points) for s in sweeps) == len(
        {(r["source"], r["gpu"], r["model"], r["weight_format"], r["engine"].split(" (")[0],
          r["prompt_tokens"], r["output_tokens"], r["concurrency"]) for r in rows})
    for s in sweeps:
        assert s.source and all(p.source.startswith(s.source) for p in s.points)
        assert [p.concurrency for p in s.points] == sorted(p.concurrency for p in s.points)


def test_mapped_keys_resolve_in_the_catalog() -> None:
    cat = default_catalog()
    mapped = [s for s in load_reference() if s.gpu_key and s.model_key]
    assert len(mapped) == len(load_reference())  # every published sweep is mapped today
    for s in mapped:
        cat.gpu(s.gpu_key or "")
        cat.variant(s.model_key or "")


def test_rtx_4090_sweep_derives_tpot_from_throughput_and_ttft() -> None:
    (s,) = select(load_reference(), gpu="rtx-4090", model="mistral")
    assert s.model_key == "mistral-7b-v0.3-bf16" and s.engine == "vLLM"
    assert [p.concurrency for p in s.points] == [4, 8, 16, 32, 48]
    p = s.points[0]
    assert (p.output_tok_s, p.ttft_ms) == (210, 63)
    assert p.tpot_ms == pytest.approx(tpot_from_throughput(
        concurrency=4, output_tokens=128, output_tok_s=210, ttft_ms=63))
    assert p.tpot_ms == pytest.approx((4 * 128 / 210 * 1000 - 63) / 127)
    assert "derived" in p.source


def test_itl_counts_as_tpot_and_tp_is_kept() -> None:
    (s,) = [x for x in select(load_reference(), model="llama", engine="nim")
            if x.prompt_tokens == 5000]
    assert (s.gpus, s.tp, s.gpu_key) == (2, 2, "h100-sxm")
    assert s.points[0].tpot_ms == 18.58 and s.points[0].tp == 2


@pytest.mark.parametrize("kwargs,n", [
    # 13 H100 sweeps: 11, and GPUStack's Qwen3-8B at 1, 2 and 8 clients and gpt-oss-120b on
    # one H100 (added 2026-12-04)
    pytest.param({"gpu": "h100"}, 13, id="gpu"),
    pytest.param({"gpu": "h100-sxm", "model": "qwen3-8b", "engine": "sglang"}, 2, id="engine"),
    pytest.param({"model": "Qwen3-8B-FP8"}, 1, id="catalog-key"),
    pytest.param({"gpu": "mi300x"}, 1, id="mi300x"),
    pytest.param({"gpu": "l40s"}, 0, id="none"),
])
def test_select(kwargs: dict[str, str], n: int) -> None:
    assert len(select(load_reference(), **kwargs)) == n


def test_reference_points_filters() -> None:
    pts = reference_points(gpu="rtx-4090")
    # the Mistral-7B sweep's 5 levels and the Qwen2.5-7B runs' 17 (added 2026-12-06, night)
    assert len(pts) == 22 and {p.gpu for p in pts} == {"rtx-4090"}
    assert len(reference_points(gpu="rtx-4090", model="mistral")) == 5


def test_corrupt_reference_file_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "published.csv"
    header = ("source,date,gpu,model,params_b,weight_format,engine,prompt_tokens,output_tokens,"
              "concurrency,metric,stat,value,unit,notes\n")
    f.write_text(header + "x,2025-01,G,M,1,BF16,E,10,10,4,speed,mean,5,ms,\n")
    with pytest.raises(CatalogError, match="line 2: unknown metric 'speed'"):
        load_reference(f)
    f.write_text(header + "x,last year,G,M,1,BF16,E,10,10,4,itl_ms,mean,5,ms,\n")
    with pytest.raises(CatalogError, match="line 2: date = 'last year' must be"):
        load_reference(f)
    f.write_text(header + "x,2025-01-02,G,M,1,BF16,E,10,10,4,itl_ms,p90,5,ms,\n")
    with pytest.raises(CatalogError, match="line 2: stat = 'p90' must be one of mean, median"):
        load_reference(f)
    f.write_text("source,gpu\n")
    with pytest.raises(CatalogError, match="missing column"):
        load_reference(f)


def test_a_median_wins_over_a_mean_and_every_row_is_kept_as_stated(tmp_path: Path) -> None:
    f = tmp_path / "published.csv"
    f.write_text("source,date,gpu,model,params_b,weight_format,engine,prompt_tokens,"
                 "output_tokens,concurrency,metric,stat,value,unit,notes\n"
                 "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,\n"
                 "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,median,5,ms,\n"
                 "x,2025-01,G,M,1,BF16,E,10,10,4,ttft_ms,mean,50,ms,\n")
    (s,) = load_reference(f)
    assert s.date == "2025-01"
    assert (s.points[0].tpot_ms, s.points[0].stat, s.points[0].ttft_ms) == (5, "median", 50)
    assert [(v.metric, v.stat, v.value) for v in s.stated] == [
        ("itl_ms", "mean", 6), ("itl_ms", "median", 5), ("ttft_ms", "mean", 50)]


def test_engine_settings_stay_with_the_sweep() -> None:
    from capacity.fit.reference import load_reference as _load
    eager = [s for s in _load() if not s.cuda_graphs]
    # the A100 Qwen3-14B-AWQ run states --enforce-eager (no CUDA graphs); it is the only one
    assert [s.model_key for s in eager] == ["qwen3-14b-awq"]
    assert eager[0].engine == "vLLM 0.9.1" and "(--enforce-eager)" in eager[0].engine_text


_ADDED_HEADER = ("source,date,gpu,model,params_b,weight_format,engine,prompt_tokens,output_tokens,"
                 "concurrency,metric,stat,value,unit,notes,added\n")


def test_a_row_without_added_is_original_and_with_it_added(tmp_path: Path) -> None:
    # issue 25: rows added after the typical knobs were derived are marked, and held out
    f = tmp_path / "published.csv"
    f.write_text(_ADDED_HEADER
                 + "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,,\n"
                 + "y,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,7,ms,,2026-12-02\n"
                 + "y,2025-01,G,M,1,BF16,E,10,10,8,itl_ms,mean,9,ms,,2026-12-02\n")
    old, new = sorted(load_reference(f), key=lambda s: s.source)
    assert (old.source, old.added, old.is_added) == ("x", "", False)
    assert (new.source, new.added, new.is_added) == ("y", "2026-12-02", True)
    assert [p.concurrency for p in new.points] == [4, 8]
    # a file without the column at all: every row original
    g = tmp_path / "old.csv"
    g.write_text(_ADDED_HEADER.replace(",added", "")
                 + "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,\n")
    (s,) = load_reference(g)
    assert not s.is_added and s.added == ""


def test_added_must_be_a_day_and_the_same_for_a_whole_sweep(tmp_path: Path) -> None:
    f = tmp_path / "published.csv"
    f.write_text(_ADDED_HEADER + "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,,2026-12\n")
    with pytest.raises(CatalogError, match="line 2: added = '2026-12' must be YYYY-MM-DD"):
        load_reference(f)
    f.write_text(_ADDED_HEADER + "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,,\n"
                 + "x,2025-01,G,M,1,BF16,E,10,10,8,itl_ms,mean,9,ms,,2026-12-02\n")
    with pytest.raises(CatalogError, match="line 3: added = '2026-12-02', but this sweep"):
        load_reference(f)


def test_the_shipped_added_rows_are_mapped_and_dated() -> None:
    text = (DATA_DIR / "reference" / "published.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(text.splitlines()))
    added = [r for r in rows if (r.get("added") or "").strip()]
    assert added and all(r["added"] in ("2026-12-02", "2026-12-03", "2026-12-04", "2026-12-06",
                                        "2026-12-07") for r in added)
    # 2026-12-03: InferenceX's gpt-oss-120b on 2, 4 and 8 H100s (vLLM 0.15.1), four sweeps
    inferencex = [s for s in load_reference() if "InferenceX" in s.source]
    assert sorted((s.tp, len(s.points)) for s in inferencex) == [(2, 1), (4, 1), (8, 2), (8, 5)]
    assert all(s.added == "2026-12-03" and s.gpu_key == "h100-sxm" for s in inferencex)
    # 2026-12-04: GPUStack's performance lab, Qwen3-8B on one H100 at 1, 2 and 8 clients (vLLM
    # v0.11.0, 15 rows) and gpt-oss-120b on one H100 (vLLM v0.10.2) and one A100 (v0.11.0) at
    # 4 clients, 5 rows each
    gpustack = [s for s in load_reference() if s.added == "2026-12-04"]
    assert sorted((s.model_key, s.gpu_key, len(s.stated)) for s in gpustack) == [
        ("gpt-oss-120b-mxfp4", "a100-80gb-sxm", 5), ("gpt-oss-120b-mxfp4", "h100-sxm", 5),
        ("qwen3-8b-bf16", "h100-sxm", 15)]
    # 2026-12-06: the SGLang cookbook's Qwen3-235B-A22B on 8 B200s (SGLang 0.5.6), three
    # length scenarios at 1, 16 and 100 or 64 clients, a sweep of 7 rows a run (its lengths)
    cookbook = [s for s in load_reference() if s.added == "2026-12-06" and "Qwen3" in s.source]
    assert {(s.model_key, s.gpu_key, s.tp) for s in cookbook} == {("qwen3-235b-a22b-bf16", "b200", 8)}
    assert sorted((s.prompt_cap, s.output_cap, p.concurrency, len(s.stated)) for s in cookbook
                  for p in s.points) == [
        (1000, 1000, 1, 7), (1000, 1000, 16, 7), (1000, 1000, 100, 7),
        (1000, 8000, 1, 7), (1000, 8000, 16, 7), (1000, 8000, 64, 7),
        (8000, 1000, 1, 7), (8000, 1000, 16, 7), (8000, 1000, 64, 7)]
    # 2026-12-06, night: violet-quartz/vllm-serving-experiments, Qwen2.5-7B-Instruct on one
    # RTX 4090 under vLLM 0.25.1, BF16 and FP8, 75 rows in five runs (ShareGPT's caps); the
    # prefix-caching run gives no TTFT
    rtx = [s for s in load_reference() if "violet-quartz" in s.source]
    assert all(s.added == "2026-12-06" and s.gpu_key == "rtx-4090" for s in rtx)
    assert sorted((s.model_key, len(s.points), len(s.stated)) for s in rtx) == [
        ("qwen2.5-7b-bf16", 1, 5), ("qwen2.5-7b-bf16", 5, 15), ("qwen2.5-7b-bf16", 5, 25),
        ("qwen2.5-7b-fp8", 1, 5), ("qwen2.5-7b-fp8", 5, 25)]
    assert all((s.prompt_cap, s.output_cap) == (1024, 2044) for s in rtx)
    # 2026-12-07: the SGLang cookbook's DeepSeek-R1-0528 on 8 B200s (SGLang 0.5.6.post1, FP8
    # as shipped), the same three scenarios and client counts as the Qwen3 page's, 63 rows
    deepseek = [s for s in load_reference() if s.added == "2026-12-07"]
    assert {(s.model_key, s.gpu_key, s.tp, s.engine) for s in deepseek} == {
        ("deepseek-r1-fp8", "b200", 8, "SGLang 0.5.6.post1")}
    assert sorted((s.prompt_cap, s.output_cap, p.concurrency, len(s.stated)) for s in deepseek
                  for p in s.points) == [
        (1000, 1000, 1, 7), (1000, 1000, 16, 7), (1000, 1000, 100, 7),
        (1000, 8000, 1, 7), (1000, 8000, 16, 7), (1000, 8000, 64, 7),
        (8000, 1000, 1, 7), (8000, 1000, 16, 7), (8000, 1000, 64, 7)]
    sweeps = [s for s in load_reference() if s.is_added]
    assert sum(len(s.stated) for s in sweeps) == len(added)
    assert all(s.gpu_key and s.model_key for s in sweeps)


def test_run_prompts_is_a_count_for_a_whole_sweep(tmp_path: Path) -> None:
    # a source whose every request had the sweep's lengths states how many its run held
    head = _ADDED_HEADER.replace(",added\n", ",added,run_prompts\n")
    f = tmp_path / "published.csv"
    f.write_text(head + "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,,,100\n"
                 + "x,2025-01,G,M,1,BF16,E,10,10,8,itl_ms,mean,7,ms,,,100\n"
                 + "y,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,7,ms,,,\n")
    by = {sw.source: sw.run_prompts for sw in load_reference(f)}
    assert by == {"x": 100, "y": None}
    for cell, why in (("5", "line 2: run_prompts = '5' must be a whole number"),
                      ("1e2", "line 2: run_prompts = '1e2' must be a whole number")):
        bad = tmp_path / f"bad-{cell}.csv"  # load_reference caches by path
        bad.write_text(head + f"x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,,,{cell}\n")
        with pytest.raises(CatalogError, match=re.escape(why)):
            load_reference(bad)
    f = tmp_path / "mixed.csv"
    f.write_text(head + "x,2025-01,G,M,1,BF16,E,10,10,4,itl_ms,mean,6,ms,,,100\n"
                 + "x,2025-01,G,M,1,BF16,E,10,10,8,itl_ms,mean,7,ms,,,\n")
    with pytest.raises(CatalogError, match="line 3: run_prompts = blank, but this sweep's "
                                           "other rows say 100"):
        load_reference(f)


def test_level_prompts_is_the_count_of_the_run_a_throughput_row_states(tmp_path: Path) -> None:
    # a bench's throughput is its run's tokens over its duration: the row gives the run's
    # request count (`--num-prompts`), each level its own, on throughput rows only
    cols = ",added,run_prompts,prompt_cap,output_cap,level_prompts\n"
    head = _ADDED_HEADER.replace(",added\n", cols)
    f = tmp_path / "published.csv"
    f.write_text(head + "x,2025-01,G,M,1,BF16,E,10,20,4,agg_output_tps,mean,60,tokens/s,,,,,,40\n"
                 + "x,2025-01,G,M,1,BF16,E,10,20,4,itl_ms,mean,6,ms,,,,,,\n"
                 + "x,2025-01,G,M,1,BF16,E,10,20,8,agg_output_tps,mean,99,tokens/s,,,,,,80\n")
    (sw,) = load_reference(f)
    assert sw.level_prompts == ((4.0, 40), (8.0, 80))
    assert sw.run.requests_at(8) == 80 and sw.run.requests_at(16) is None
    for rows, why in (
            ("x,2025-01,G,M,1,BF16,E,10,20,4,itl_ms,mean,6,ms,,,,,,40\n",
             "line 2: level_prompts is the request count of a run whose throughput the row "
             "states: give it on an agg_output_tps row, not itl_ms"),
            ("x,2025-01,G,M,1,BF16,E,10,20,4,agg_output_tps,mean,60,tokens/s,,,,,,9\n",
             "line 2: level_prompts = '9' must be a whole number of requests"),
            ("x,2025-01,G,M,1,BF16,E,10,20,4,agg_output_tps,mean,60,tokens/s,,,,,,40\n"
             "x,2025-01,G,M,1,BF16,E,10,20,4,agg_output_tps,median,61,tokens/s,,,,,,50\n",
             "line 3: level_prompts = 50, but this level's other throughput row says 40")):
        bad = tmp_path / f"bad-{len(rows)}-{rows[-4:-1]}.csv"  # load_reference caches by path
        bad.write_text(head + rows)
        with pytest.raises(CatalogError, match=re.escape(why)):
            load_reference(bad)
    # the shipped rows: every throughput row whose source states its run's count gives it
    shipped = [sw for sw in load_reference() if sw.level_prompts]
    assert sum(len(sw.level_prompts) for sw in shipped) == 69   # 60 before DeepSeek-R1's 9
    rtx = {sw.run.requests_at(64) for sw in shipped if "violet-quartz" in sw.source}
    assert rtx == {400, 1200, None}


def test_length_caps_say_how_far_a_runs_lengths_varied(tmp_path: Path) -> None:
    # a source whose prompts and outputs varied about the stated means gives their longest
    head = _ADDED_HEADER.replace(",added\n", ",added,run_prompts,prompt_cap,output_cap\n")
    f = tmp_path / "published.csv"
    f.write_text(head + "x,2025-01,G,M,1,BF16,E,10,20,4,itl_ms,mean,6,ms,,,,19,40\n"
                 + "x,2025-01,G,M,1,BF16,E,10,20,8,itl_ms,mean,7,ms,,,,19,40\n"
                 + "y,2025-01,G,M,1,BF16,E,10,20,4,itl_ms,mean,7,ms,,,,,\n")
    by = {sw.source: (sw.prompt_cap, sw.output_cap, sw.run) for sw in load_reference(f)}
    assert by["x"][:2] == (19, 40) and by["y"][:2] == (None, None)
    assert by["x"][2] == RunShape(prompt_cap=19, output_cap=40)
    for cells, why in ((",5,40", "line 2: prompt_cap = '5' must be a whole number of tokens, at "
                                 "least the stated mean (10)"),
                       (",19,1e3", "line 2: output_cap = '1e3' must be a whole number"),
                       (",19,-40", "line 2: output_cap = '-40' must be a whole number")):
        bad = tmp_path / f"bad-{cells}.csv"  # load_reference caches by path
        bad.write_text(head + f"x,2025-01,G,M,1,BF16,E,10,20,4,itl_ms,mean,6,ms,,,{cells}\n")
        with pytest.raises(CatalogError, match=re.escape(why)):
            load_reference(bad)
    f = tmp_path / "mixed.csv"
    f.write_text(head + "x,2025-01,G,M,1,BF16,E,10,20,4,itl_ms,mean,6,ms,,,,19,40\n"
                 + "x,2025-01,G,M,1,BF16,E,10,20,8,itl_ms,mean,7,ms,,,,,40\n")
    with pytest.raises(CatalogError, match="line 3: prompt_cap and output_cap must be the same"):
        load_reference(f)


def test_a_runs_lengths_are_drawn_about_the_stated_means() -> None:
    # `RunShape.lengths`' example: SGLang's random dataset at --random-input-len 1000
    prompts, outs = RunShape(prompt_cap=1000).lengths(495.85, 510.0, 200)
    assert outs is None and prompts is not None and len(prompts) == 200
    assert (min(prompts), max(prompts)) == (3, 998)
    assert sum(prompts) / 200 == pytest.approx(495.8, abs=0.05)
    assert RunShape().lengths(10, 20, 5) == (None, None)
