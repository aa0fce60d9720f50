"""Tests written to kill mutmut survivors in capacity/model/traffic.py (issue 28): each check of
the length distributions, arrivals, daily profiles and traffic (message and bound), the sample's
structure (shared prefixes, conversations, dtypes), and the presets read from a TOML file.
Expected values are worked out by hand in the comments; the draws are checked by their
structure (which request is which turn, what it caches), not by copying random numbers."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from capacity import workspace
from capacity.errors import InputError
from capacity.model.traffic import (
    Z90,
    Arrivals,
    DailyProfile,
    LengthDist,
    Traffic,
    load_presets,
    lognormal_from_mean_p90,
    preset,
)


def _refused(message: str, fn, *args, **kw) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as err:
        fn(*args, **kw)
    assert str(err.value) == message


# -- lognormal from mean and p90 --------------------------------------------------------------


def test_lognormal_from_mean_p90_by_hand() -> None:
    # z = 1.28155; sigma = z - sqrt(z^2 - 2 ln 2) = 1.28155 - sqrt(1.64237 - 1.38629) = 0.77551;
    # mu = ln 1000 - sigma^2 / 2 = 6.90776 - 0.30071 = 6.60705
    mu, sigma = lognormal_from_mean_p90(1000.0, 2000.0)
    assert sigma == pytest.approx(0.77551, abs=1e-5)
    assert mu == pytest.approx(6.60705, abs=1e-5)
    # a mean below one token is fine: 0.5 and 1.0 -> the same sigma, mu lower by ln 2000
    mu2, sigma2 = lognormal_from_mean_p90(0.5, 1.0)
    assert sigma2 == pytest.approx(0.77551, abs=1e-5)
    assert mu2 == pytest.approx(6.60705 - math.log(2000.0), abs=1e-5)


def test_lognormal_p90_at_its_limit() -> None:
    # p90 = mean x exp(z^2 / 2): the root is double, sigma = z and mu = -z^2 / 2 = -0.82119
    mu, sigma = lognormal_from_mean_p90(1.0, math.exp(Z90 * Z90 / 2.0))
    assert sigma == pytest.approx(Z90, abs=1e-6)
    assert mu == pytest.approx(-Z90 * Z90 / 2.0, abs=1e-6)


@pytest.mark.parametrize(("mean", "p90", "message"), [
    (0.0, 2000.0, "lognormal length: mean must be > 0 tokens, got 0.0"),
    (-1.0, 2000.0, "lognormal length: mean must be > 0 tokens, got -1.0"),
    (math.inf, 2000.0, "lognormal length: mean must be > 0 tokens, got inf"),
    (1000.0, math.nan, "lognormal length: mean must be > 0 tokens, got 1000.0"),
    (1000.0, 900.0, "lognormal length: p90 (900) must lie above the mean (1000) and at most "
                    "2.27 x the mean; give an empirical distribution for heavier tails"),
    (1000.0, 1000.0, "lognormal length: p90 (1000) must lie above the mean (1000) and at most "
                     "2.27 x the mean; give an empirical distribution for heavier tails"),
    (1000.0, 2300.0, "lognormal length: p90 (2300) must lie above the mean (1000) and at most "
                     "2.27 x the mean; give an empirical distribution for heavier tails"),
])
def test_lognormal_from_mean_p90_refuses(mean: float, p90: float, message: str) -> None:
    _refused(message, lognormal_from_mean_p90, mean, p90)


# -- LengthDist -------------------------------------------------------------------------------


@pytest.mark.parametrize(("kw", "message"), [
    ({"kind": "uniform"}, "length distribution 'uniform': use one of fixed, lognormal, empirical"),
    ({"kind": "fixed", "tokens": 5, "min_tokens": 0},
     "length bounds must satisfy 1 <= min <= max, got 0..2000000"),
    ({"kind": "fixed", "tokens": 5, "min_tokens": 6, "max_tokens": 5},
     "length bounds must satisfy 1 <= min <= max, got 6..5"),
    ({"kind": "fixed", "tokens": 0}, "a fixed length must be a whole number >= 1 token, got 0"),
    ({"kind": "fixed", "tokens": 2.0},
     "a fixed length must be a whole number >= 1 token, got 2.0"),
    ({"kind": "lognormal", "mu": 1.0, "sigma": -0.1},
     "lognormal length needs finite mu and sigma >= 0, got 1.0, -0.1"),
    ({"kind": "lognormal", "mu": math.nan, "sigma": 0.5},
     "lognormal length needs finite mu and sigma >= 0, got nan, 0.5"),
    ({"kind": "lognormal", "mu": 1.0, "sigma": math.inf},
     "lognormal length needs finite mu and sigma >= 0, got 1.0, inf"),
    ({"kind": "empirical", "values_tokens": ()},
     "an empirical length distribution needs at least one length, each >= 1 token"),
    ({"kind": "empirical", "values_tokens": (0, 5)},
     "an empirical length distribution needs at least one length, each >= 1 token"),
])
def test_length_dist_refuses(kw: dict[str, object], message: str) -> None:
    _refused(message, LengthDist, **kw)


def test_length_dist_bounds_themselves_are_accepted() -> None:
    LengthDist(kind="fixed", tokens=5, min_tokens=5, max_tokens=5)
    LengthDist(kind="lognormal", mu=1.0, sigma=0.0)
    LengthDist.empirical([1, 1])
    # the other kinds ignore mu and sigma
    LengthDist(kind="fixed", tokens=3, mu=math.nan, sigma=-1.0)
    assert LengthDist.fixed(7) == LengthDist(kind="fixed", tokens=7)


def test_length_dist_lognormal_constructors() -> None:
    # (median, sigma): mu = ln median
    d = LengthDist.lognormal(median_tokens=100.0, sigma=0.5)
    assert d.kind == "lognormal" and d.mu == pytest.approx(math.log(100.0)) and d.sigma == 0.5
    assert d.max_tokens == 2_000_000
    # (mean, sigma): mu = ln mean - sigma^2 / 2 = ln 100 - 0.125
    d = LengthDist.lognormal(mean_tokens=100.0, sigma=0.5)
    assert d.mu == pytest.approx(math.log(100.0) - 0.125)
    # below one token, a mean or median is still a lognormal
    assert LengthDist.lognormal(mean_tokens=0.5, sigma=0.1).mu == pytest.approx(
        math.log(0.5) - 0.005)
    assert LengthDist.lognormal(median_tokens=0.5, sigma=0.1).mu == pytest.approx(math.log(0.5))
    # max_tokens travels: every draw of a median-100, sigma-0 length is 100, capped at 50
    capped = LengthDist.lognormal(median_tokens=100.0, sigma=0.0, max_tokens=50)
    assert capped.max_tokens == 50
    assert capped.sample(4, np.random.default_rng(0)).tolist() == [50, 50, 50, 50]


@pytest.mark.parametrize(("kw", "message"), [
    ({"mean_tokens": 0.0, "sigma": 0.5}, "lognormal mean must be > 0 tokens, got 0.0"),
    ({"mean_tokens": math.inf, "sigma": 0.5}, "lognormal mean must be > 0 tokens, got inf"),
    ({"median_tokens": 0.0, "sigma": 0.5}, "lognormal median must be > 0 tokens, got 0.0"),
    ({"median_tokens": math.inf, "sigma": 0.5}, "lognormal median must be > 0 tokens, got inf"),
    ({"sigma": 0.5},
     "a lognormal length needs its mean and p90, or a median or mean and sigma"),
    ({"median_tokens": 100.0},
     "a lognormal length needs its mean and p90, or a median or mean and sigma"),
    ({}, "a lognormal length needs its mean and p90, or a median or mean and sigma"),
])
def test_length_dist_lognormal_refuses(kw: dict[str, float], message: str) -> None:
    _refused(message, LengthDist.lognormal, **kw)


def test_empirical_flattens_its_values() -> None:
    d = LengthDist.empirical(np.array([[1, 2], [3, 4]]))
    assert d.values_tokens == (1, 2, 3, 4)
    assert all(type(v) is int for v in d.values_tokens)


def test_samples_are_whole_tokens_within_the_bounds() -> None:
    rng = np.random.default_rng(0)
    fixed = LengthDist.fixed(7).sample(3, rng)
    assert fixed.tolist() == [7, 7, 7] and fixed.dtype == np.int64
    # values below min_tokens rise to it, above max_tokens fall to it
    low = LengthDist(kind="empirical", values_tokens=(1, 2), min_tokens=5).sample(6, rng)
    assert low.tolist() == [5] * 6 and low.dtype == np.int64
    high = LengthDist(kind="empirical", values_tokens=(100,), max_tokens=50).sample(3, rng)
    assert high.tolist() == [50, 50, 50]
    emp = LengthDist.empirical([3, 9]).sample(200, rng)
    assert set(emp.tolist()) == {3, 9} and emp.dtype == np.int64
    logn = LengthDist.lognormal(median_tokens=100.0, sigma=0.0).sample(3, rng)
    assert logn.tolist() == [100, 100, 100] and logn.dtype == np.int64


def test_means_and_quantiles_by_hand() -> None:
    assert LengthDist.fixed(7).mean_tokens == 7.0
    assert LengthDist.fixed(7).quantile_tokens(0.9) == 7.0
    # lognormal median 100, sigma 0.5: mean 100 e^(0.125) = 113.3148; p50 100;
    # p90 100 e^(1.28155 x 0.5) = 189.77
    d = LengthDist.lognormal(median_tokens=100.0, sigma=0.5)
    assert d.mean_tokens == pytest.approx(100 * math.exp(0.125))
    assert d.quantile_tokens(0.5) == pytest.approx(100.0)
    assert d.quantile_tokens(0.9) == pytest.approx(100 * math.exp(Z90 * 0.5))
    # empirical 1..5: mean 3; median 3; p90 at position 0.9 x 4 = 3.6 -> 4 + 0.6 = 4.6
    e = LengthDist.empirical([1, 2, 3, 4, 5])
    assert e.mean_tokens == 3.0
    assert e.quantile_tokens(0.5) == 3.0
    assert e.quantile_tokens(0.9) == pytest.approx(4.6)


# -- arrivals and the daily profile -----------------------------------------------------------


@pytest.mark.parametrize(("kw", "message"), [
    ({"kind": "uniform"}, "arrival process 'uniform': use one of poisson, gamma"),
    ({"rate_per_s": 0.0}, "arrival rate must be > 0 requests/s, got 0.0"),
    ({"rate_per_s": math.inf}, "arrival rate must be > 0 requests/s, got inf"),
    ({"cv": 0.0}, "burstiness CV must be in (0, 20], got 0.0"),
    ({"cv": 20.5}, "burstiness CV must be in (0, 20], got 20.5"),
    ({"cv": math.nan}, "burstiness CV must be in (0, 20], got nan"),
])
def test_arrivals_refuse(kw: dict[str, object], message: str) -> None:
    _refused(message, Arrivals, **kw)


def test_arrival_gaps_have_the_rate_and_the_cv() -> None:
    Arrivals(cv=20.0)  # the bound itself
    rng = np.random.default_rng(1)
    # Poisson at 4/s: mean gap 250 ms, CV 1
    g = Arrivals(rate_per_s=4.0).gaps_ms(200_000, rng)
    assert g.dtype == np.float64 and g.shape == (200_000,)
    assert g.mean() == pytest.approx(250.0, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.02)
    # gamma at 2/s with CV 2 (shape 1/4): mean 500 ms, CV 2
    g = Arrivals(kind="gamma", rate_per_s=2.0, cv=2.0).gaps_ms(200_000, rng)
    assert g.mean() == pytest.approx(500.0, rel=0.03)
    assert g.std() / g.mean() == pytest.approx(2.0, rel=0.05)
    # gamma with CV 0.5 (shape 4): regular, mean 500 ms
    g = Arrivals(kind="gamma", rate_per_s=2.0, cv=0.5).gaps_ms(200_000, rng)
    assert g.mean() == pytest.approx(500.0, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(0.5, rel=0.03)


PROFILE_MESSAGE = "a daily profile needs 24 hourly shares >= 0 with a positive sum"


@pytest.mark.parametrize("shares", [
    (1.0,) * 23,
    (0.0,) * 24,
    (-0.1,) + (1.0,) * 23,
    (math.inf,) + (1.0,) * 23,
    (math.nan,) + (1.0,) * 23,
])
def test_daily_profile_refuses(shares: tuple[float, ...]) -> None:
    _refused(PROFILE_MESSAGE, DailyProfile, hourly_shares=shares)


def test_daily_profile_by_hand() -> None:
    # shares 0 except 0.1 at hour 3 and 0.3 at hour 20: sum 0.4 (below 1 is fine), busiest 20,
    # peak share 0.3 / 0.4 = 0.75; 4800 requests a day -> 4800 x 0.75 / 3600 = 1 req/s
    shares = [0.0] * 24
    shares[3], shares[20] = 0.1, 0.3
    p = DailyProfile(hourly_shares=tuple(shares))
    assert p.busiest_hour == 20
    assert p.peak_share == pytest.approx(0.75)
    assert p.peak_rate_per_s(4800.0) == pytest.approx(1.0)


# -- Traffic ----------------------------------------------------------------------------------

FIXED = dict(prompt=LengthDist.fixed(10), output=LengthDist.fixed(5))


@pytest.mark.parametrize(("kw", "message"), [
    ({"prefix_tokens": -1}, "shared prefix must be >= 0 tokens, got -1"),
    ({"prefix_tokens": 1.5}, "shared prefix must be >= 0 tokens, got 1.5"),
    ({"prefix_share": 1.5}, "prefix share is a fraction of requests in [0, 1], got 1.5"),
    ({"prefix_share": -0.1}, "prefix share is a fraction of requests in [0, 1], got -0.1"),
    ({"prefix_share": math.nan}, "prefix share is a fraction of requests in [0, 1], got nan"),
    ({"turns": 0}, "turns per conversation must be 1..1000, got 0"),
    ({"turns": 1001}, "turns per conversation must be 1..1000, got 1001"),
    ({"turns": 2.0}, "turns per conversation must be 1..1000, got 2.0"),
])
def test_traffic_refuses(kw: dict[str, object], message: str) -> None:
    _refused(message, Traffic, **FIXED, **kw)


def test_traffic_bounds_and_means() -> None:
    Traffic(**FIXED, turns=1000, prefix_share=1.0)
    t = Traffic(**FIXED, prefix_tokens=100, prefix_share=0.25)
    # mean prompt 10 + 100 = 110; mean cached 100 x 0.25 = 25
    assert t.mean_prompt_tokens == 110.0
    assert t.mean_cached_tokens == 25.0


def test_with_rate_keeps_everything_but_the_rate() -> None:
    t = Traffic(**FIXED, arrivals=Arrivals(kind="gamma", rate_per_s=1.0, cv=3.0),
                prefix_tokens=100, prefix_share=0.5, turns=2, name="n", source="s")
    u = t.with_rate(7.5)
    assert u.arrivals == Arrivals(kind="gamma", rate_per_s=7.5, cv=3.0)
    assert (u.prompt, u.output, u.prefix_tokens, u.prefix_share, u.turns, u.name, u.source) == (
        t.prompt, t.output, 100, 0.5, 2, "n", "s")
    assert t.arrivals.rate_per_s == 1.0  # the original is unchanged


@pytest.mark.parametrize("n", [0, 10_000_001])
def test_sample_size_is_bounded(n: int) -> None:
    _refused(f"sample 1..10,000,000 requests, got {n}", Traffic(**FIXED).sample, n)


def test_a_plain_sample() -> None:
    s = Traffic(**FIXED, arrivals=Arrivals(rate_per_s=10.0)).sample(1)
    assert s.size == 1
    assert s.prompt_tokens.tolist() == [10] and s.output_tokens.tolist() == [5]
    assert s.cached_tokens.tolist() == [0]
    assert s.prefix_ids.tolist() == [-1] and s.conversation_ids.tolist() == [-1]
    # the default seed is 0, and another seed draws other arrivals
    t = Traffic(**FIXED)
    np.testing.assert_array_equal(t.sample(50).arrival_ms, t.sample(50, seed=0).arrival_ms)
    assert not np.array_equal(t.sample(50).arrival_ms, t.sample(50, seed=1).arrival_ms)


def _dtypes_are_whole(s) -> None:  # type: ignore[no-untyped-def]
    assert s.arrival_ms.dtype == np.float64
    for arr in (s.prompt_tokens, s.output_tokens, s.cached_tokens, s.prefix_ids,
                s.conversation_ids):
        assert arr.dtype == np.int64


def test_sample_with_a_shared_prefix() -> None:
    # everyone shares the 100-token system prompt: prompt 10 + 100, cached 100, prefix id 0
    s = Traffic(**FIXED, prefix_tokens=100, prefix_share=1.0).sample(20)
    assert s.prompt_tokens.tolist() == [110] * 20
    assert s.cached_tokens.tolist() == [100] * 20
    assert s.prefix_ids.tolist() == [0] * 20
    assert s.conversation_ids.tolist() == [-1] * 20
    _dtypes_are_whole(s)
    # a share without a prefix caches nothing and names no prefix
    s = Traffic(**FIXED, prefix_tokens=0, prefix_share=0.5).sample(50)
    assert s.cached_tokens.tolist() == [0] * 50 and s.prefix_ids.tolist() == [-1] * 50
    # share 0: nobody
    s = Traffic(**FIXED, prefix_tokens=100, prefix_share=0.0).sample(50)
    assert s.cached_tokens.tolist() == [0] * 50 and s.prefix_ids.tolist() == [-1] * 50
    # half: both kinds appear, and each request is one or the other
    s = Traffic(**FIXED, prefix_tokens=100, prefix_share=0.5).sample(400)
    hit = s.prefix_ids == 0
    assert 100 < hit.sum() < 300
    assert (s.cached_tokens[hit] == 100).all() and (s.cached_tokens[~hit] == 0).all()
    assert (s.prefix_ids[~hit] == -1).all()


def test_sample_conversations_carry_their_history() -> None:
    # 3 turns, new prompt 10 and answer 5 each, system prompt 100 shared by all:
    # turn 0: prompt 110, cached 100 (the system prompt), prefix id 0;
    # turn 1: history 110 + 5 = 115, prompt 125, cached 115, prefix id = its conversation;
    # turn 2: history 125 + 5 = 130, prompt 140, cached 130
    s = Traffic(**FIXED, prefix_tokens=100, prefix_share=1.0, turns=3).sample(7)
    assert s.prompt_tokens.tolist() == [110, 125, 140, 110, 125, 140, 110]
    assert s.cached_tokens.tolist() == [100, 115, 130, 100, 115, 130, 100]
    assert s.conversation_ids.tolist() == [1, 1, 1, 2, 2, 2, 3]
    assert s.prefix_ids.tolist() == [0, 1, 1, 0, 2, 2, 0]
    _dtypes_are_whole(s)


def test_sample_history_is_the_previous_turns_prompt_and_answer() -> None:
    # outputs drawn from {3, 50}: each later turn caches exactly the previous turn's prompt and
    # answer, and adds its own new 10 tokens
    t = Traffic(prompt=LengthDist.fixed(10), output=LengthDist.empirical([3, 50]), turns=4)
    s = t.sample(40, seed=2)
    turn = np.arange(40) % 4
    later = np.nonzero(turn > 0)[0]
    assert len(set(s.output_tokens.tolist())) == 2
    np.testing.assert_array_equal(s.cached_tokens[later],
                                  s.prompt_tokens[later - 1] + s.output_tokens[later - 1])
    np.testing.assert_array_equal(s.prompt_tokens[later], s.cached_tokens[later] + 10)
    assert (s.cached_tokens[turn == 0] == 0).all() and (s.prompt_tokens[turn == 0] == 10).all()
    assert (s.prefix_ids[turn == 0] == -1).all()


# -- presets ----------------------------------------------------------------------------------

FULL = """
[workload.full]
name = "Full preset"
sources = ["source A", "source B"]
assumed = ["output", "arrivals.cv"]
notes = "a note"
prefix_tokens = 100
prefix_share = 0.5
turns = 3
prompt = { kind = "lognormal", mean_tokens = 1000.0, p90_tokens = 2000.0 }
output = { kind = "fixed", tokens = 256 }
arrivals = { kind = "gamma", rate_per_s = 4.0, cv = 2.0 }

[workload.least]
sources = ["only source"]
prompt = { tokens = 10 }
output = { kind = "lognormal", median_tokens = 50.0, sigma = 0.5 }

[workload.by-mean]
sources = ["s"]
prompt = { kind = "lognormal", mean_tokens = 100.0, sigma = 0.5 }
output = { kind = "fixed", tokens = 1 }
"""


def test_presets_read_every_field(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(FULL, encoding="utf-8")
    presets = load_presets(path)
    assert list(presets) == ["full", "least", "by-mean"]
    full = presets["full"]
    assert (full.key, full.name, full.notes) == ("full", "Full preset", "a note")
    assert full.sources == ("source A", "source B")
    assert full.assumed == ("output", "arrivals.cv")
    t = full.traffic
    assert t.name == "Full preset" and t.source == "source A; source B"
    assert (t.prefix_tokens, t.prefix_share, t.turns) == (100, 0.5, 3)
    assert t.arrivals == Arrivals(kind="gamma", rate_per_s=4.0, cv=2.0)
    assert t.output == LengthDist.fixed(256)
    # mean 1000, p90 2000: sigma 0.77551, mu 6.60705 (test_lognormal_from_mean_p90_by_hand)
    assert t.prompt.kind == "lognormal"
    assert t.prompt.sigma == pytest.approx(0.77551, abs=1e-5)
    assert t.prompt.mu == pytest.approx(6.60705, abs=1e-5)


def test_presets_defaults(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(FULL, encoding="utf-8")
    least = load_presets(path)["least"]
    assert (least.key, least.name, least.notes, least.assumed) == ("least", "least", "", ())
    assert least.sources == ("only source",)
    t = least.traffic
    assert t.name == "least" and t.source == "only source"
    assert t.prompt == LengthDist.fixed(10)            # kind defaults to fixed
    assert t.output.mu == pytest.approx(math.log(50.0)) and t.output.sigma == 0.5
    assert t.arrivals == Arrivals(kind="poisson", rate_per_s=1.0, cv=1.0)
    assert (t.prefix_tokens, t.prefix_share, t.turns) == (0, 0.0, 1)
    by_mean = load_presets(path)["by-mean"].traffic.prompt
    assert by_mean.mu == pytest.approx(math.log(100.0) - 0.125)


@pytest.mark.parametrize(("text", "message"), [
    ('[workload.x]\nsources = ["s"]\nprompt = { kind = "fixed" }\noutput = { tokens = 1 }\n',
     "w.toml [workload.x].prompt: missing 'tokens'"),
    ('[workload.x]\nsources = ["s"]\nprompt = { tokens = 1 }\n',
     "w.toml [workload.x].output: missing 'tokens'"),
    ('[workload.x]\nsources = ["s"]\noutput = { tokens = 1 }\n',
     "w.toml [workload.x].prompt: missing 'tokens'"),
    ('[workload.x]\nsources = ["s"]\nprompt = { tokens = 1 }\n'
     'output = { kind = "empirical", tokens = 1 }\n',
     "w.toml [workload.x].output: length kind 'empirical' (presets use fixed or lognormal)"),
    ('[workload.x]\nprompt = { tokens = 1 }\noutput = { tokens = 1 }\n',
     "w.toml [workload.x]: every preset names its sources"),
    ('[workload.x]\nsources = []\nprompt = { tokens = 1 }\noutput = { tokens = 1 }\n',
     "w.toml [workload.x]: every preset names its sources"),
])
def test_presets_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(text, encoding="utf-8")
    _refused(message, load_presets, path)


def test_presets_file_problems(tmp_path: Path) -> None:
    missing = tmp_path / "none.toml"
    with pytest.raises(InputError) as err:
        load_presets(missing)
    assert str(err.value).startswith(f"cannot read workload presets {missing}: ")
    assert "No such file" in str(err.value)
    bad = tmp_path / "bad.toml"
    bad.write_text("[workload\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_presets(bad)
    assert str(err.value).startswith(f"cannot read workload presets {bad}: ")
    # a file without a [workload] table has no presets
    empty = tmp_path / "empty.toml"
    empty.write_text("title = 'x'\n", encoding="utf-8")
    assert load_presets(empty) == {}
    # UTF-8 text in a name reads as written
    utf = tmp_path / "utf.toml"
    utf.write_text('[workload.x]\nname = "Chat \u00e9t\u00e9"\nsources = ["s"]\n'
                   'prompt = { tokens = 1 }\noutput = { tokens = 1 }\n', encoding="utf-8")
    assert load_presets(utf)["x"].name == "Chat \u00e9t\u00e9"


def test_bundled_preset_by_key() -> None:
    keys = sorted(tomllib.loads((workspace.bundled_data_dir() / "workloads.toml").read_text(
        encoding="utf-8"))["workload"])
    assert preset("chat").key == "chat"
    _refused(f"unknown workload preset 'nope'; known: {', '.join(keys)}", preset, "nope")
