"""EP knobs (capacity/model/ep_knobs.py): the cases that mutation testing found unchecked.

`python3 dev.py mutate capacity/model/ep_knobs.py` (docs/testing.md) left these mutants alive:
the knobs' checks (an infinite knob, `comm_sm_share` at 1) and their messages, an unknown knob
in the data file, the grouped-GEMM curve past its last point and below one token, the attention
FLOPs of a model with linear, sliding, full and MLA layers, and two nodes' remote share.
Every expected value is computed by hand below.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest

from capacity.catalog.loader import Catalog, LayerGroup
from capacity.errors import InputError
from capacity.model import ep_knobs
from capacity.model.ep_knobs import (
    EpKnobs,
    grouped_gemm_eff,
    remote_nodes_per_token,
    typical_ep_knobs,
)
from capacity.model.roofline import attention_flops_per_token


@pytest.mark.parametrize(("name", "value"), [("dense_eta_bw", -1.0), ("dense_eff", math.inf),
                                              ("layer_overhead_us", math.nan)])
def test_a_knob_must_be_finite_and_not_negative(name: str, value: float) -> None:
    with pytest.raises(InputError, match=rf"^EP knob {name} must be a finite number >= 0, "
                                         rf"got {value}$"):
        EpKnobs(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"comm_sm_share": 1.0}, {"overlap": 1.5}])
def test_overlap_and_sm_share_bounds(kwargs: dict[str, float]) -> None:
    with pytest.raises(InputError, match=r"^overlap must be in \[0, 1\] and comm_sm_share in "
                                         r"\[0, 1\)$"):
        EpKnobs(**kwargs)  # type: ignore[arg-type]


def test_sm_share_just_under_one_and_full_overlap_are_allowed() -> None:
    k = EpKnobs(comm_sm_share=0.99, overlap=1.0)
    # overlap 1: max(3, 2) = 3; overlap 0.25: 3 + 0.75 x 2 = 4.5
    assert k.combine_ms(3.0, 2.0) == 3.0
    assert EpKnobs(overlap=0.25).combine_ms(2.0, 3.0) == 4.5


def test_an_unknown_knob_in_the_data_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ep_knobs, "ep_knob_data", lambda: {"warp_speed": SimpleNamespace(value=2.0)})
    with pytest.raises(InputError, match=r"^data/ep_knobs\.toml: unknown knob 'warp_speed'$"):
        typical_ep_knobs()


def test_grouped_gemm_curve_past_its_last_point() -> None:
    curve = ((64.0, 0.3), (256.0, 0.449), (1024.0, 0.561))
    assert grouped_gemm_eff(curve, 4096.0) == 0.561      # held flat beyond the last point
    assert grouped_gemm_eff(curve, 16.0) == 0.3          # and before the first
    assert grouped_gemm_eff(curve, 512.0) == pytest.approx(0.505)   # 0.449 + 0.112 / 2
    assert grouped_gemm_eff(curve, 128.0) == pytest.approx(0.3745)  # 0.3 + 0.149 / 2
    assert grouped_gemm_eff((), 10.0) == 1.0


def test_grouped_gemm_curve_below_one_token() -> None:
    # points at 0.5 and 2 tokens: 0 tokens and 0.5 -> 0.2 (the first point);
    # 1 token: ln 1 is halfway between ln 0.5 and ln 2 -> 0.3
    curve = ((0.5, 0.2), (2.0, 0.4))
    assert grouped_gemm_eff(curve, 0.0) == 0.2
    assert grouped_gemm_eff(curve, 0.5) == 0.2
    assert grouped_gemm_eff(curve, 1.0) == pytest.approx(0.3)


def test_attention_flops_of_every_layer_kind(catalog: Catalog) -> None:
    groups = (
        LayerGroup(kind="linear", count=1, state_bytes=1000.0),   # no attention
        LayerGroup(kind="full", count=2, q_heads=4, head_dim=8),   # 4 x 4 x 8 = 128 / token
        LayerGroup(kind="sliding", count=1, q_heads=2, head_dim=16, window_tokens=100),  # 128
        LayerGroup(kind="mla", count=1, q_heads=2, kv_lora_rank=16, qk_rope_head_dim=4),
        # MLA: 2 x 2 x (2 x 16 + 4) = 144 / token
    )
    model = dataclasses.replace(catalog.models["llama-3.1-8b"], layer_groups=groups)
    # context 1000: 2 x 128 x 1000 + 128 x 100 (window) + 144 x 1000 = 412,800
    assert attention_flops_per_token(model, 1000.0) == pytest.approx(412_800.0)
    # context 50 (inside the window): 2 x 128 x 50 + 128 x 50 + 144 x 50 = 26,400
    assert attention_flops_per_token(model, 50.0) == pytest.approx(26_400.0)


def test_two_nodes_remote_share() -> None:
    # (2 - 1) x (1 - (1/2)^k): k 1 -> 0.5, k 3 -> 0.875; one node: 0
    assert remote_nodes_per_token(2, 1) == pytest.approx(0.5)
    assert remote_nodes_per_token(2, 3) == pytest.approx(0.875)
    assert remote_nodes_per_token(1, 8) == 0.0
