"""`python3 dev.py realtest` (capacity.cli.realtest) without the engine: what it asks of the
other commands (issue 31). The run itself needs a llama-server build (tests/test_llamacpp.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capacity.bench import llamacpp
from capacity.bench.client import is_one_burst
from capacity.cli import realtest


class Stop(Exception):
    """Ends a realtest at the point a test has seen what it wanted."""


def _no_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A located binary instead of a build, and the cache in `tmp_path`."""
    binary = tmp_path / "llama-server"
    monkeypatch.setenv("CAPACITY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(llamacpp, "locate_or_build", lambda **kw: binary)
    return binary


def test_build_only_stops_after_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    binary = _no_build(monkeypatch, tmp_path)

    def no_models(folder: Path) -> dict[str, Path]:
        raise AssertionError("--build-only writes no model")

    monkeypatch.setattr(realtest, "write_models", no_models)
    assert realtest.main(["--build-only"]) == 0
    out = capsys.readouterr().out
    assert f"llama-server: {binary}" in out and "--build-only: done" in out
    assert "vocabulary" in out and "missing" in out  # no source unpacked in this cache


def test_the_probe_runs_with_the_server_s_threads(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The realtest's server runs with `-t N`: its probe measures with N BLAS threads."""
    _no_build(monkeypatch, tmp_path)
    monkeypatch.setattr(realtest, "write_models", lambda folder: {})
    calls: list[tuple[str, ...]] = []

    def capacity(self: realtest.Steps, *argv: str, capture: bool = False) -> str:
        calls.append(argv)
        return ""

    def stop(*args: object, **kwargs: object) -> None:
        raise Stop

    monkeypatch.setattr(realtest.Steps, "capacity", capacity)
    monkeypatch.setattr(realtest, "load_catalog", stop)
    with pytest.raises(Stop):
        realtest.main(["--threads", "3"])
    (probe,) = [c for c in calls if c[0] == "probe"]
    assert probe[probe.index("--threads") + 1] == "3"
    assert probe[probe.index("--device") + 1] == "cpu"


@pytest.mark.parametrize("levels", [realtest.GRID_LEVELS, "1,2,4", "8", "1,2,4,8"])
def test_no_level_of_a_full_run_is_one_burst(levels: str) -> None:
    """The bench's rule (3 x the concurrency, all passes together) holds for every run the
    realtest makes, so its own output carries no burst warning; --quick keeps 8 requests."""
    n = realtest.requests_for(levels)
    assert n >= realtest.REQUESTS
    assert not any(is_one_burst(int(c), n) for c in levels.split(","))
    assert realtest.requests_for(levels, quick=True) == realtest.QUICK_REQUESTS
    # the long-prompt check runs at concurrency 1 only: 2 or 3 requests are no burst
    assert not is_one_burst(1, realtest.LONG_HELD_REQUESTS)


def test_requests_grow_only_where_the_rule_asks() -> None:
    assert realtest.requests_for(realtest.GRID_LEVELS) == 24
    assert realtest.requests_for("1,2,4") == 16


def test_the_other_size_reads_half_again_the_weights_at_another_depth() -> None:
    """Hand-computed weight reads per decode step (layers, final norm and output head; the
    untied input embedding is a lookup): TEST_SHAPE (h 1024, KV 256, FFN 2816) per layer
    2 x 1024^2 + 2 x 1024 x 256 + 3 x 1024 x 2816 + 2 x 1024 = 11,274,240, x 8 + 32,000 x 1024
    + 1024 = 122,962,944; BIG_SHAPE (h 1536, KV 512, FFN 4096) per layer 4,718,592 +
    1,572,864 + 18,874,368 + 3,072 = 25,168,896, x 6 + 32,000 x 1536 + 1536 = 200,166,912."""
    from capacity.bench.gguf_model import TEST_SHAPE

    small, big = TEST_SHAPE, realtest.BIG_SHAPE
    assert realtest.step_weight_params(small) == 122_962_944
    assert realtest.step_weight_params(big) == 200_166_912
    assert 200_166_912 / 122_962_944 >= 1.5 and big.layers != small.layers


def test_the_plan_holds_out_another_size_and_fits_both(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The realtest's plan, every step faked: the big model is benched at both prompt lengths
    and the sweep's levels; the f32 fit keeps --levels (3, 5, 6, 7 left out whole) and the
    two sizes are fitted in one `calibrate --also`; a drift control runs right after the sweep
    and before every held-out run outside it; the record names each case's run, levels and
    drift, and the report is rendered from that record."""
    import pandas as pd

    from capacity.fit.realtest_record import Record

    _no_build(monkeypatch, tmp_path)
    monkeypatch.setattr(realtest, "write_models",
                        lambda folder: {k: tmp_path / f"{k}.gguf" for k in realtest.FILES})
    calls: list[tuple[str, ...]] = []
    benches: list[dict[str, object]] = []
    written: list[Record] = []

    def capacity(self: realtest.Steps, *argv: str, capture: bool = False) -> str:
        calls.append(argv)
        return ""

    def bench(self: realtest.Steps, base_url: str, label: str, **kw: object) -> pd.DataFrame:
        benches.append({"label": label, **kw})
        return pd.DataFrame({"concurrency": [1, 3, 6], "request_throughput_rps": [1.0] * 3})

    class Server:
        base_url = root_url = "http://127.0.0.1:1"

        def __init__(self, binary: Path, cfg: object, log_path: Path) -> None:
            self.model = cfg.model_path.stem  # type: ignore[attr-defined]

        def __enter__(self) -> Server:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    class Gpu:
        name, bandwidth_gb_s, bf16_tflops = "cpu", 10.0, 0.1

    class Cat:
        def gpu(self, key: str) -> Gpu:
            return Gpu()

    def write_record(folder: Path, record: Record, home: Path) -> Path:
        written.append(record)
        return folder

    monkeypatch.setattr(realtest.Steps, "capacity", capacity)
    monkeypatch.setattr(realtest.Steps, "bench", bench)
    monkeypatch.setattr(realtest.Steps, "last_run_id",
                        lambda self, label: f"run{sum(b['label'] == label for b in benches)}")
    monkeypatch.setattr(llamacpp, "LlamaServer", Server)
    monkeypatch.setattr(llamacpp, "server_info", lambda url: {})
    monkeypatch.setattr(realtest, "load_catalog", lambda *a, **k: Cat())
    monkeypatch.setattr(realtest, "write_record", write_record)
    monkeypatch.setattr(realtest, "render", lambda folder: f"report of {folder.name}\n")
    assert realtest.main(["--out", str(tmp_path / "report.md")]) == 0
    big = [b for b in benches if b["model_key"] == realtest.MODELS["big"]]
    assert [b["prompt_chars"] for b in big] == [realtest.SHORT_CHARS, realtest.LONG_CHARS]
    assert all(b["concurrency"] == realtest.CAL_LEVELS and b["label"] == "rt-big" for b in big)
    fits = [c for c in calls if c[0] == "calibrate"]
    assert len(fits) == 2
    one, two = fits
    assert one[one.index("--levels") + 1] == realtest.CAL_LEVELS and "--also" not in one
    assert two[two.index("--also") + 1] == f"{realtest.MODELS['big']}=rt-big"
    assert two[two.index("--label") + 1] == "rt-cal" and "--batch1" in two
    # the drift control: the f32 model at concurrency 1 right after the sweep, then right
    # before every held-out run measured outside the sweep's passes
    order = [str(b["label"]) for b in benches]
    assert order[:3] == ["rt-cal", "rt-cal", "rt-control-1"]
    for label in ("rt-held-len", "rt-held-poisson", "rt-held-shape", "rt-held-f16"):
        assert order[order.index(label) - 1].startswith("rt-control-")
    big_at = [i for i, lab in enumerate(order) if lab == "rt-big"]
    assert all(order[i - 1].startswith("rt-control-") for i in big_at)
    controls = [b for b in benches if str(b["label"]).startswith("rt-control-")]
    assert len(controls) == 7 and all(
        b["concurrency"] == "1" and b["model_key"] == realtest.MODELS["f32"]
        and b["prompt_chars"] == realtest.SHORT_CHARS for b in controls)
    # the record: every case with its run, model, levels and drift; the report is its render
    (rec,) = written
    by = {c.name: c for c in rec.cases}
    assert list(by) == [realtest.CASE_CONC, realtest.CASE_CONC_LONG, realtest.CASE_LEN,
                        "f32 Poisson", realtest.CASE_BIG, realtest.CASE_BIG_LONG,
                        "f32 other shape", "f16 model"]
    assert (by[realtest.CASE_CONC].run, by[realtest.CASE_CONC_LONG].run) == (
        "rt-cal/run1", "rt-cal/run2")
    assert by[realtest.CASE_CONC].skip_levels == (1, 2, 4, 8)
    assert by[realtest.CASE_CONC].control == ""  # measured in the sweep's own passes
    assert by[realtest.CASE_BIG].model == realtest.MODELS["big"]
    assert (by[realtest.CASE_BIG].run, by[realtest.CASE_BIG_LONG].run) == (
        "rt-big/run1", "rt-big/run2")
    assert by["f32 Poisson"].replay and not by[realtest.CASE_LEN].replay
    # each case names the control measured right before it; the baseline is the first
    assert rec.baseline == "rt-control-1/run1"
    assert [by[n].control for n in list(by)[2:]] == [f"rt-control-{k}/run1" for k in range(2, 8)]
    assert (rec.calibration, rec.two_sizes) == ("realtest-llamacpp.toml",
                                                "realtest-llamacpp-two-sizes.toml")
    assert (tmp_path / "report.md").read_text().startswith("report of ")
