"""F12's draft gain (capacity/model/draft_gain.py): the cases that mutation testing found unchecked.

`python3 dev.py mutate capacity/model/draft_gain.py` (docs/testing.md) found no test of the
selection reaching `draft_gain` (its own tests, tests/test_explorer_drafts.py, import the
Streamlit app, which mutmut's copy does not carry). These check what each field means: the
drafted and plain TPOTs against `evaluate` with and without the draft, the engine step as
tau x TPOT (F12), verify + draft = engine step, the speed-up as a ratio, the per-replica batch
ceil(C / replicas), and the break-even as the first total concurrency where the draft stops
paying. Expected values are computed by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import pytest

from capacity.catalog.loader import Catalog
from capacity.errors import InputError
from capacity.model.draft_gain import DraftGain, draft_gain
from capacity.model.scenario import Scenario, evaluate, make_scenario
from capacity.model.speculative import make_draft

TAU = 2.5


@pytest.fixture()
def drafted(catalog: Catalog) -> Scenario:
    """Llama-3.1-8B bf16 on 2 H100s (2 replicas of TP 1), short context and a low efficiency:
    the verify pass turns compute-bound, so the draft stops paying at some batch."""
    draft = make_draft(catalog.variant("llama-3.1-8b", "bf16"), "eagle", 3, acceptance_length=TAU)
    return make_scenario("llama-3.1-8b", "h100-sxm", catalog=catalog, weights="bf16", n_gpus=2,
                         context_tokens=256, eff=0.3, draft=draft)


def test_no_draft_is_refused(drafted: Scenario) -> None:
    with pytest.raises(InputError, match="^the scenario has no speculative-decoding draft$"):
        draft_gain(drafted.with_(draft=None), [1])


def test_fields_mean_what_they_say(drafted: Scenario) -> None:
    c = [1, 5, 64]
    g = draft_gain(drafted, c)
    assert g.draft is drafted.draft
    assert g.replicas == 2
    assert g.concurrency.tolist() == [1.0, 5.0, 64.0]
    # two replicas: ceil(1/2) = 1, ceil(5/2) = 3, ceil(64/2) = 32 sequences a replica
    assert g.per_replica_concurrency.tolist() == [1.0, 3.0, 32.0]
    with_draft = evaluate(drafted, c).tpot_ms
    without = evaluate(drafted.with_(draft=None), c).tpot_ms
    assert g.tpot_ms.tolist() == pytest.approx(with_draft.tolist())
    assert g.plain_tpot_ms.tolist() == pytest.approx(without.tolist())
    # F12: TPOT = engine step / tau, so the engine step is 2.5 x the drafted TPOT
    assert g.engine_step_ms.tolist() == pytest.approx((TAU * with_draft).tolist())
    # the engine step is the verify pass plus the draft's passes; both take time
    assert (g.verify_ms + g.draft_ms).tolist() == pytest.approx(g.engine_step_ms.tolist())
    assert np.all(g.draft_ms > 0) and np.all(g.verify_ms > g.draft_ms)
    assert g.speedup.tolist() == pytest.approx((without / with_draft).tolist())
    for arr in (g.engine_step_ms, g.verify_ms, g.draft_ms, g.speedup):
        assert arr.dtype == np.float64 and arr.shape == (3,)


def test_draft_time_grows_with_the_batch(drafted: Scenario) -> None:
    # the draft's passes read its weights once and its KV per sequence: more sequences a
    # replica, more draft time (C = 2 and 64 -> 1 and 32 sequences)
    g = draft_gain(drafted, [2, 64])
    assert g.draft_ms[1] > g.draft_ms[0]


def test_a_scalar_concurrency_is_one_point(drafted: Scenario) -> None:
    g = draft_gain(drafted, 7)
    assert g.concurrency.shape == (1,)
    assert g.per_replica_concurrency.tolist() == [4.0]  # ceil(7 / 2)


def test_breakeven_is_where_the_draft_stops_paying(drafted: Scenario) -> None:
    g = draft_gain(drafted, [1])
    b = g.breakeven_per_replica
    assert b is not None and 1 < b < 4096
    c_break = g.breakeven_concurrency
    # two replicas: a replica first holds b sequences at C = 2 (b - 1) + 1
    assert c_break == 2 * (b - 1) + 1
    at = draft_gain(drafted, [c_break - 2, c_break])  # b - 1 and b sequences a replica
    assert at.per_replica_concurrency.tolist() == [b - 1, b]
    assert at.speedup[0] > 1.0 >= at.speedup[1]


def test_breakeven_concurrency_by_hand(drafted: Scenario) -> None:
    g = draft_gain(drafted, [1])
    # breaks even at 7 a replica on 3 replicas: (7 - 1) x 3 + 1 = 19; on 1 replica: 7
    three = DraftGain(**{**g.__dict__, "breakeven_per_replica": 7, "replicas": 3})
    assert three.breakeven_concurrency == 19
    one = DraftGain(**{**g.__dict__, "breakeven_per_replica": 7, "replicas": 1})
    assert one.breakeven_concurrency == 7
    never = DraftGain(**{**g.__dict__, "breakeven_per_replica": None})
    assert never.breakeven_concurrency is None
