"""A user's runs and simulators are theirs unless shared (issue 29): the rule on stored runs
(`capacity.access.run_access`, `may_see_run`, `may_share_run`), the owner a run started from the
app records in meta.json (`started_by`) and the share switch (`shared`), the refusal of another
user's simulator (`capacity.bench.guard.check_not_foreign`, `SimRegistry.foreign_ports`), and
the Results and Measure pages through AppTest. Every expected value is written by hand from the
rule in docs/sign-in.md. The browser test is tests/test_browser_signin.py."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from capacity.access import (
    LOCAL_USER,
    AccessDenied,
    Role,
    RunAccess,
    User,
    may_see_run,
    may_share_run,
    run_access,
)
from capacity.bench.form import MeasureForm
from capacity.bench.guard import check_not_foreign, reaches_this_machine, url_port
from capacity.bench.job import BenchJob, SimRegistry
from capacity.bench.storage import RUN_USER_ENV, RunWriter, set_shared, update_meta
from tests.test_access import ADMIN, AUTH, CONFIG, EDITOR, VIEWER, words
from tests.test_app_results import store_run

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "streamlit_app.py")

ANN = User(id="http://idp#ann", name="Ann", role=Role.EDITOR)
BEN = User(id="http://idp#ben", name="Ben", role=Role.EDITOR)
VERA = User(id="http://idp#vera", name="Vera", role=Role.VIEWER)
ALICE = User(id="http://idp#alice", name="Alice", role=Role.ADMIN)


# -- the rule -----------------------------------------------------------------------------------

def test_run_access_reads_the_two_fields_strictly() -> None:
    assert run_access({}) == RunAccess()  # stored before owners, or without sign-in
    assert run_access({"started_by": ""}) == RunAccess()
    assert run_access({"started_by": " http://idp#ann ", "shared": True}) == RunAccess(
        started_by="http://idp#ann", shared=True)
    # only JSON true shares: a hand-edited "true" or 1 does not
    assert not run_access({"started_by": "x", "shared": "true"}).shared
    assert not run_access({"started_by": "x", "shared": 1}).shared
    assert run_access({"started_by": 7}).malformed
    # meta.json's `owner` (the writing process) is not the user who started the run
    assert run_access({"owner": {"pid": 1, "host": "h"}}) == RunAccess()


@pytest.mark.parametrize(("user", "seen"), [
    # own, shared, ownerless; an admin and the local user every run, a malformed one too
    (ANN, ["ann", "ann-shared", "ben-shared", "old"]),
    (BEN, ["ann-shared", "ben", "ben-shared", "old"]),
    (VERA, ["ann-shared", "ben-shared", "old"]),
    (ALICE, ["ann", "ann-shared", "ben", "ben-shared", "old", "bad"]),
    (LOCAL_USER, ["ann", "ann-shared", "ben", "ben-shared", "old", "bad"]),
])
def test_who_sees_which_run(user: User, seen: list[str]) -> None:
    runs = {"ann": RunAccess(started_by=ANN.id),
            "ann-shared": RunAccess(started_by=ANN.id, shared=True),
            "ben": RunAccess(started_by=BEN.id),
            "ben-shared": RunAccess(started_by=BEN.id, shared=True),
            "old": RunAccess(),
            "bad": RunAccess(malformed=True)}
    assert [name for name, a in runs.items() if may_see_run(user, a)] == seen


def test_who_may_share_a_run() -> None:
    mine = RunAccess(started_by=ANN.id)
    assert may_share_run(ANN, mine) and may_share_run(ALICE, mine)
    assert not may_share_run(BEN, mine)  # another editor
    assert not may_share_run(VERA, mine)  # a viewer
    # the owner demoted to viewer may no longer switch it (a viewer writes nothing)
    assert not may_share_run(User(id=ANN.id, name="Ann", role=Role.VIEWER), mine)
    # a run without an owner is everyone's already: nothing to switch, for anyone
    assert not may_share_run(ALICE, RunAccess()) and not may_share_run(ANN, RunAccess())
    assert not may_share_run(ALICE, RunAccess(malformed=True))


# -- meta.json: the owner written, the switch kept -----------------------------------------------

def _meta(d: Path) -> dict[str, Any]:
    return dict(json.loads((d / "meta.json").read_text(encoding="utf-8")))


def test_the_writer_records_the_owner_and_keeps_the_switch(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.delenv(RUN_USER_ENV, raising=False)
    with RunWriter(tmp_path, "cli") as w:  # the CLI, an app without sign-in: no owner
        w.write_meta({"run_id": w.run_id, "status": "running"})
    assert "started_by" not in _meta(w.dir) and "shared" not in _meta(w.dir)

    monkeypatch.setenv(RUN_USER_ENV, ANN.id)
    with RunWriter(tmp_path, "app") as w:
        w.write_meta({"run_id": w.run_id, "status": "running"})
        assert (_meta(w.dir)["started_by"], _meta(w.dir)["shared"]) == (ANN.id, False)
        set_shared(w.dir, True)  # the owner shares it while it runs
        w.write_meta({"run_id": w.run_id, "status": "finished"})  # the client's last write
    meta = _meta(w.dir)
    assert (meta["started_by"], meta["shared"], meta["status"]) == (ANN.id, True, "finished")
    set_shared(w.dir, False)
    assert _meta(w.dir)["shared"] is False and _meta(w.dir)["status"] == "finished"
    assert not (w.dir / "meta.json.tmp").exists()  # written whole, by a rename


FAKE_BENCH = """#!{python}
import sys
sys.path.insert(0, {root!r})
from capacity.bench.storage import RunWriter
a = sys.argv
out, label, run_id = a[a.index("--out") + 1], a[a.index("--label") + 1], a[a.index("--run-id") + 1]
with RunWriter(out, label, run_id) as w:
    w.write_meta({{"run_id": run_id, "status": "finished"}})
"""


@pytest.mark.slow
def test_a_job_names_its_user_in_the_run_it_stores(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the app's own environment never leaks an owner into a run: only the job's user counts
    monkeypatch.setenv(RUN_USER_ENV, "http://idp#someone-else")
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_BENCH.format(python=sys.executable, root=str(ROOT)), encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    form = MeasureForm(base_url="http://127.0.0.1:9/v1", label="own", out_dir=str(tmp_path))
    mine = BenchJob.start(form, cwd=tmp_path, python=str(fake), started_by=ANN.id)
    local = BenchJob.start(form, cwd=tmp_path, python=str(fake))  # without sign-in
    try:
        assert mine.wait(30) == 0 and local.wait(30) == 0
        d_mine, d_local = mine.find_run_dir(), local.find_run_dir()
        assert d_mine is not None and d_local is not None
        assert (_meta(d_mine)["started_by"], _meta(d_mine)["shared"]) == (ANN.id, False)
        assert "started_by" not in _meta(d_local)
    finally:
        mine.stop(grace_s=2)
        local.stop(grace_s=2)


# -- another user's simulator --------------------------------------------------------------------

@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LocalHost.", "127.1", "2130706433",
                                  "0x7f.0.0.1", "0.0.0.0", "[::1]", "[::]",
                                  "[::ffff:127.0.0.1]", "127.0.0.2"])
def test_every_spelling_of_this_machine_reaches_a_simulator(host: str) -> None:
    assert reaches_this_machine(host.strip("[]"))
    with pytest.raises(AccessDenied, match="another user started"):
        check_not_foreign(f"http://{host}:8123/v1", {8123})


def test_other_ports_and_hosts_pass() -> None:
    assert not reaches_this_machine("10.0.0.7") and not reaches_this_machine("gpu1.lan")
    check_not_foreign("http://127.0.0.1:8124/v1", {8123})  # another port
    check_not_foreign("http://10.0.0.7:8123/v1", {8123})  # another machine
    check_not_foreign("http://127.0.0.1:8123/v1", set())  # the owner's, an admin's scope
    assert url_port("http://127.0.0.1/v1") == 80 and url_port("https://h/v1") == 443
    assert url_port("http://[::1]:9/v1") == 9


class _FakeSim:
    """What SimRegistry and the Measure page read of a SimServer (nothing listens)."""

    def __init__(self, pid: int, port: int) -> None:
        self.model, self.gpu, self.speedup, self.port = "qwen3.5-9b-awq", "rtx-4090", 1.0, port
        self.proc = type("P", (), {"pid": pid})()
        self.running = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self, grace_s: float = 5.0) -> None:
        self.running = False


def test_foreign_ports_are_the_other_users_live_simulators(tmp_path: Path) -> None:
    reg = SimRegistry()
    a, b = _FakeSim(101, 8101), _FakeSim(102, 8102)
    reg.add(a, ANN.id)  # type: ignore[arg-type]
    reg.add(b, BEN.id)  # type: ignore[arg-type]
    assert reg.foreign_ports(ANN.id) == {8102} and reg.foreign_ports(BEN.id) == {8101}
    assert reg.foreign_ports(None) == frozenset()  # an admin, the local user
    b.running = False  # an ended one is nobody's any more
    assert reg.foreign_ports(ANN.id) == frozenset()
    # the check at the start: refused before any process starts (the python does not exist)
    form = MeasureForm(base_url=a.base_url, label="x", out_dir=str(tmp_path))
    with pytest.raises(AccessDenied, match="another user started"):
        BenchJob.start(form, cwd=tmp_path, python=str(tmp_path / "no-python"),
                       foreign_ports=reg.foreign_ports(BEN.id))
    assert not (tmp_path / "x").exists()


# -- the pages (AppTest) -------------------------------------------------------------------------

E2 = {**EDITOR, "sub": "e2", "email": "ed2@example.com", "name": "Eda"}
"""A second editor (EDITOR is http://idp#e1)."""


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Three stored runs: e1's, e2's and one stored before owners (no `started_by`)."""
    for var, sub in (("CAPACITY_BENCH_DIR", "bench"), ("CAPACITY_CUSTOM_DIR", "custom"),
                     ("CAPACITY_CALIBRATIONS_DIR", "cal")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    root = tmp_path / "bench"
    dirs = {}
    for label, owner in (("e1-run", "http://idp#e1"), ("e2-run", "http://idp#e2"),
                         ("old-run", None)):
        d = root / label / store_run(root, label, (1, 2, 4))
        if owner is not None:
            update_meta(d, {"started_by": owner, "shared": False})
        dirs[label] = d
    return dirs


def results(user: dict[str, Any] | None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    if user is not None:
        at.secrets["auth"], at.secrets["access"], at.user = AUTH, CONFIG, dict(user)
    at.switch_page("pages/results.py")
    at.run()
    assert not at.exception, at.exception
    return at


def listed(at: AppTest) -> list[str]:
    return sorted(at.dataframe[0].value["label"].tolist())


def share_keys(at: AppTest) -> list[str]:
    return [w.key for w in at.toggle if w.key.startswith("r_share_")]


@pytest.mark.slow
def test_results_lists_only_what_each_user_may_see_and_the_owner_shares(
        store: dict[str, Path]) -> None:
    e1_id = store["e1-run"].name
    assert listed(results(None)) == ["e1-run", "e2-run", "old-run"]  # no sign-in: as before
    assert listed(results(ADMIN)) == ["e1-run", "e2-run", "old-run"]
    assert listed(results(VIEWER)) == ["old-run"]
    other = results(E2)
    assert listed(other) == ["e2-run", "old-run"]
    assert e1_id not in words(other)
    assert "you (not shared)" in other.dataframe[0].value["seen by"].tolist()

    owner = results(EDITOR)
    assert listed(owner) == ["e1-run", "old-run"]
    owner.multiselect(key="r_pick").set_value([e1_id]).run()
    assert share_keys(owner) == [f"r_share_{e1_id}"]  # the owner's own run: a switch
    assert not owner.toggle(key=f"r_share_{e1_id}").value
    owner.toggle(key=f"r_share_{e1_id}").set_value(True).run()
    assert not owner.exception
    assert _meta(store["e1-run"])["shared"] is True and _meta(store["e1-run"])["started_by"] == \
        "http://idp#e1"

    other = results(E2)  # shared: e2 and the viewer see it now, and neither may switch it
    assert listed(other) == ["e1-run", "e2-run", "old-run"]
    other.multiselect(key="r_pick").set_value([e1_id]).run()
    assert not other.exception and share_keys(other) == []
    assert listed(results(VIEWER)) == ["e1-run", "old-run"]

    admin = results(ADMIN)  # an admin may switch anyone's owned run back
    admin.multiselect(key="r_pick").set_value([e1_id]).run()
    assert share_keys(admin) == [f"r_share_{e1_id}"]
    admin.toggle(key=f"r_share_{e1_id}").set_value(False).run()
    assert _meta(store["e1-run"])["shared"] is False
    assert listed(results(E2)) == ["e2-run", "old-run"]


def test_the_check_at_the_action_reads_the_run_again(store: dict[str, Path]) -> None:
    from app import results_state as rs

    d = store["e1-run"]
    set_shared(d, True)
    shown = pd.DataFrame({"run_id": [d.name], "dir": [str(d)]})  # the list as drawn, shared
    e2 = User(id="http://idp#e2", name="Eda", role=Role.EDITOR)
    rs.check_visible(e2, shown, [d.name])
    set_shared(d, False)  # the owner took it back since
    with pytest.raises(AccessDenied):
        rs.check_visible(e2, shown, [d.name])
    with pytest.raises(AccessDenied):  # an id the list does not hold
        rs.check_visible(e2, shown, ["20991231-000000-abcdef"])
    with pytest.raises(AccessDenied):  # another editor may not switch it
        rs.share_run(e2, str(d), True)
    assert _meta(d)["shared"] is False
    rs.share_run(User(id="http://idp#e1", name="Ed", role=Role.EDITOR), str(d), True)
    assert _meta(d)["shared"] is True


@pytest.mark.slow
def test_measure_refuses_another_users_simulator(store: dict[str, Path]) -> None:
    from app import measure_state as ms

    sim = _FakeSim(999_001, 8765)
    ms.SIMS.add(sim, "http://idp#e1")  # type: ignore[arg-type]
    try:
        at = AppTest.from_file(APP, default_timeout=90)
        at.secrets["auth"], at.secrets["access"], at.user = AUTH, CONFIG, dict(E2)
        at.switch_page("pages/measure.py").run()
        assert sim.base_url not in words(at)  # not listed
        at.text_input(key="m_base_url").set_value("http://localhost:8765/v1")
        at.button(key="m_connect").click().run()
        assert "simulated endpoint another user started" in words(at)
        at.button(key="m_start").click().run()
        assert not at.exception
        assert "measure_job" not in at.session_state  # nothing started
        assert "simulated endpoint another user started" in words(at)
    finally:
        sim.running = False
        ms.SIMS.stop(sim.proc.pid)
