"""F10 (capacity/model/parallel.py): the cases mutation testing found unchecked.

`python3 dev.py mutate capacity/model/parallel.py` (docs/testing.md) left alive mutants of
`check_tp`: its boundaries (0 GPUs, TP 0), the layers it must skip (linear attention, MLA's
missing KV heads), the case where TP is a multiple of the KV heads, and its messages. The
all-reduce time is checked against a hand computation as well.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest

from capacity.catalog.loader import Catalog, Gpu, LayerGroup, Model
from capacity.errors import InputError
from capacity.model.parallel import allreduce_ms, check_tp, tp_comm_ms


def _model(catalog: Catalog, *groups: LayerGroup, hidden: int = 4096) -> Model:
    base = next(iter(catalog.models.values()))
    return dataclasses.replace(base, name="M", layer_groups=groups, hidden=hidden)


GQA = LayerGroup(kind="full", count=2, q_heads=32, kv_heads=8, head_dim=128)


def test_check_tp_boundaries_and_messages(catalog: Catalog) -> None:
    m = _model(catalog, GQA)
    check_tp(m, 1, 1)  # one GPU is fine
    with pytest.raises(InputError, match=r"^GPU count and TP must be >= 1, got 0 GPUs, TP=1$"):
        check_tp(m, 0, 1)
    with pytest.raises(InputError, match=r"^GPU count and TP must be >= 1, got 2 GPUs, TP=0$"):
        check_tp(m, 2, 0)
    with pytest.raises(InputError, match=r"^TP=4 does not divide 6 GPUs \(replicas = GPUs / TP\)$"):
        check_tp(m, 6, 4)
    check_tp(m, 8, 4)  # 2 replicas of TP 4: 32 / 4 query heads, 8 / 4 KV heads


def test_check_tp_heads(catalog: Catalog) -> None:
    # 32 query heads: TP 16 divides them, and 16 is a multiple of the 8 KV heads (replicated)
    check_tp(_model(catalog, GQA), 16, 16)
    odd_q = LayerGroup(kind="full", count=1, q_heads=12, kv_heads=4, head_dim=64)
    with pytest.raises(InputError, match=r"^TP=8 does not divide the 12 query heads of M$"):
        check_tp(_model(catalog, odd_q), 8, 8)
    six_kv = LayerGroup(kind="full", count=1, q_heads=12, kv_heads=6, head_dim=64)
    with pytest.raises(InputError,
                       match=r"^TP=4 and 6 KV heads of M: one must divide the other$"):
        check_tp(_model(catalog, six_kv), 4, 4)


def test_check_tp_skips_linear_layers_and_mla(catalog: Catalog) -> None:
    linear = LayerGroup(kind="linear", count=3, q_heads=3, state_bytes=10.0)  # 3 % 2 ignored
    mla = LayerGroup(kind="mla", count=2, q_heads=16, kv_lora_rank=512, qk_rope_head_dim=64)
    check_tp(_model(catalog, GQA, linear, mla), 2, 2)


def _gpu(catalog: Catalog, kind: Literal["pcie", "nvlink"], gb_s: float) -> Gpu:
    base = next(iter(catalog.gpus.values()))
    return dataclasses.replace(base, interconnect_kind=kind, interconnect_gb_s=gb_s)


def test_allreduce_by_hand(catalog: Catalog) -> None:
    nv = _gpu(catalog, "nvlink", 900.0)
    # 9.58 us + 2 x 3/4 x (1 MiB / 50.7e9 B/s + (1e9 - 1 MiB) B / 900e9 B/s)
    #   = 0.00958 ms + 1.5 x (0.0206820 + 1.1099460) ms
    small_ms = 1_048_576 / 50.7e9 * 1e3
    assert float(allreduce_ms(1e9, 4, nv)) == pytest.approx(
        0.00958 + 1.5 * (small_ms + (1e9 - 1_048_576) / 900e9 * 1e3), rel=1e-12)
    # a small message moves at 50.7 GB/s whatever the link: 9.58 us + 1.5 x 4096 / 50.7e9 s
    assert float(allreduce_ms(4096.0, 4, nv)) == pytest.approx(
        0.00958 + 1.5 * 4096 / 50.7e9 * 1e3, rel=1e-12)
    assert float(allreduce_ms(4096.0, 4, _gpu(catalog, "nvlink", 450.0))) == pytest.approx(
        float(allreduce_ms(4096.0, 4, nv)), rel=1e-12)
    assert allreduce_ms([1e9, 2e9], 1, nv).tolist() == [0.0, 0.0]
    pcie = _gpu(catalog, "pcie", 64.0)
    # 25 us + 2 x 1/2 x 64e6 B / 64e9 B/s = 0.025 ms + 1 ms
    assert float(allreduce_ms(64e6, 2, pcie)) == pytest.approx(1.025, rel=1e-12)


def test_tp_comm_by_hand(catalog: Catalog) -> None:
    m = _model(catalog, GQA, hidden=4000)  # 2 layers
    pcie = _gpu(catalog, "pcie", 64.0)
    # 8,000 tokens x 4,000 x 2 B = 64e6 B per all-reduce: 1.025 ms (above); 2 per layer x 2 layers
    assert float(tp_comm_ms(m, pcie, 2, 8000)) == pytest.approx(4 * 1.025, rel=1e-12)


def test_check_tp_goes_on_after_a_linear_group(catalog: Catalog) -> None:
    linear = LayerGroup(kind="linear", count=3, q_heads=3, state_bytes=10.0)
    odd_q = LayerGroup(kind="full", count=1, q_heads=12, kv_heads=4, head_dim=64)
    with pytest.raises(InputError, match=r"^TP=8 does not divide the 12 query heads of M$"):
        check_tp(_model(catalog, linear, odd_q), 8, 8)


def test_no_all_reduce_is_float_zeros(catalog: Catalog) -> None:
    got = allreduce_ms([1, 2], 1, _gpu(catalog, "nvlink", 900.0))  # integer bytes in
    assert got.dtype.name == "float64" and got.tolist() == [0.0, 0.0]
