"""Sign-in and roles (issue 29): the role logic (`capacity.access`), the per-user registries of
simulators and measurements (`capacity.bench.job`), a job's own run folder, and the pages'
gate and refusals through AppTest (which seeds `st.user` and `st.secrets`). The end-to-end
flow against a real OpenID Connect provider is tests/test_browser_signin.py."""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.format import WORD_JOINER
from capacity.access import (
    LOCAL_USER,
    AccessConfig,
    AccessConfigError,
    AccessDenied,
    Right,
    Role,
    User,
    parse_access,
    role_for,
    signed_in_user,
    user_id,
    visible,
)
from capacity.bench.form import MeasureForm
from capacity.bench.job import BenchJob, JobRegistry, SimRegistry
from capacity.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "streamlit_app.py")

CONFIG = {"admin": ["Alice@Example.com"], "editor": ["@example.com", "group:cap-editors"],
          "viewer": ["@partner.example"], "default": "none"}


# -- roles from the [access] table ---------------------------------------------------------------

def test_roles_by_email_domain_and_group_the_highest_wins() -> None:
    cfg = parse_access(CONFIG)
    # alice is named as admin and is also in the editors' domain: the higher role
    assert role_for(cfg, {"email": "alice@example.com"}) is Role.ADMIN
    assert role_for(cfg, {"email": "ALICE@example.COM"}) is Role.ADMIN  # case-blind
    assert role_for(cfg, {"email": "bob@example.com"}) is Role.EDITOR
    assert role_for(cfg, {"email": "carol@partner.example"}) is Role.VIEWER
    assert role_for(cfg, {"email": "dave@elsewhere.org", "groups": ["cap-editors"]}) is Role.EDITOR
    assert role_for(cfg, {"email": "dave@elsewhere.org", "groups": "x, cap-editors"}) is Role.EDITOR
    # a sub-domain is another domain; nobody matched and default "none": refused
    assert role_for(cfg, {"email": "eve@mail.example.com"}) is None
    assert role_for(cfg, {"email": "eve@elsewhere.org", "groups": ["Cap-Editors"]}) is None


def test_an_unverified_address_grants_nothing() -> None:
    cfg = parse_access(CONFIG)
    assert role_for(cfg, {"email": "alice@example.com", "email_verified": False}) is None
    assert role_for(cfg, {"email": "alice@example.com", "email_verified": "false"}) is None
    assert role_for(cfg, {"email": "alice@example.com", "email_verified": True}) is Role.ADMIN
    # a group still counts: it does not come from the address
    assert role_for(cfg, {"email": "alice@example.com", "email_verified": False,
                          "groups": ["cap-editors"]}) is Role.EDITOR


def test_defaults_and_a_custom_groups_claim() -> None:
    assert parse_access(None) == AccessConfig()
    assert role_for(parse_access(None), {"email": "x@y.org"}) is Role.VIEWER
    assert role_for(parse_access({"default": "editor"}), {"email": "x@y.org"}) is Role.EDITOR
    cfg = parse_access({"admin": ["group:ops"], "groups_claim": "roles"})
    assert role_for(cfg, {"roles": ["ops"]}) is Role.ADMIN
    assert role_for(cfg, {"groups": ["ops"]}) is Role.VIEWER  # not the configured claim


@pytest.mark.parametrize(("table", "says"), [
    ({"admins": ["a@b.org"]}, "unknown key(s) admins"),
    ({"editor": "a@b.org"}, "editor must be a list"),
    ({"editor": ["a@b.org", "secret-person"]}, "editor, entry 2: neither an e-mail"),
    ({"viewer": ["@localhost"]}, "viewer, entry 1: not a domain"),
    ({"viewer": ["group:"]}, "names no group"),
    ({"viewer": [3]}, "every entry must be text"),
    ({"default": "admin"}, "admins are always named"),
    ({"groups_claim": ""}, "groups_claim must be a claim name"),
])
def test_a_bad_table_is_refused_naming_the_key_not_the_address(table: dict[str, Any],
                                                                says: str) -> None:
    with pytest.raises(AccessConfigError, match=None) as err:
        parse_access(table)
    assert says in str(err.value)
    assert "secret-person" not in str(err.value)  # the entry's text stays out of the message


def test_rights_of_each_role() -> None:
    viewer, editor, admin = (User(id=r.value, name=r.value, role=r) for r in Role)
    assert [r for r in Right if viewer.may(r)] == []
    assert [r for r in Right if editor.may(r)] == [Right.MEASURE, Right.SAVE_CALIBRATION,
                                                   Right.SAVE_CATALOG]
    assert all(admin.may(r) for r in Right) and all(LOCAL_USER.may(r) for r in Right)
    with pytest.raises(AccessDenied, match="needs the editor role"):
        viewer.check(Right.MEASURE)
    editor.check(Right.MEASURE)
    assert (viewer.scope, editor.scope, admin.scope, LOCAL_USER.scope) == (
        "viewer", "editor", None, None)
    assert visible(editor, "editor") and not visible(editor, "someone")
    assert visible(admin, "someone") and visible(LOCAL_USER, "")


def test_the_user_from_claims() -> None:
    cfg = parse_access(CONFIG)
    u = signed_in_user(cfg, {"sub": "42", "iss": "http://idp", "email": "bob@example.com",
                             "name": " Bob "})
    assert u == User(id="http://idp#42", name="Bob", role=Role.EDITOR)
    assert user_id({"sub": "42"}) == "42"
    assert user_id({"email": "Bob@Example.com"}) == "email:bob@example.com"
    assert user_id({"name": "no one"}) is None
    assert signed_in_user(cfg, {"sub": "1", "email": "eve@elsewhere.org"}) is None  # no role
    assert signed_in_user(parse_access(None), {"name": "x"}) is None  # names nobody


# -- simulators and measurements are their users' ------------------------------------------------

class _FakeSim:
    """What SimRegistry reads of a SimServer: its configuration, liveness and pid."""

    def __init__(self, pid: int) -> None:
        self.model, self.gpu, self.speedup = "m", "rtx-4090", 1.0
        self.proc = type("P", (), {"pid": pid})()
        self.running = True

    def stop(self, grace_s: float = 5.0) -> None:
        self.running = False


def test_simulators_belong_to_who_started_them() -> None:
    reg = SimRegistry(max_running=3)
    pids = iter(range(100, 200))

    def start() -> Any:
        return _FakeSim(next(pids))

    a = reg.find_or_start("m", "rtx-4090", 1.0, start, owner="ann", per_owner=1)
    b = reg.find_or_start("m", "rtx-4090", 1.0, start, owner="ben", per_owner=1)
    assert a is not b  # the same configuration: each user gets their own
    assert reg.find_or_start("m", "rtx-4090", 1.0, start, owner="ann", per_owner=1) is a
    assert reg.running("ann") == [a] and reg.running("ben") == [b]
    assert reg.running() == [a, b] and reg.latest("ben") is b and reg.owner(b) == "ben"
    with pytest.raises(InputError, match="you run 1 simulated endpoints"):
        reg.find_or_start("m", "h100", 1.0, start, owner="ann", per_owner=1)
    with pytest.raises(AccessDenied):
        reg.stop(b.proc.pid, scope="ann")
    assert b.running  # refused: nothing stopped
    reg.stop(b.proc.pid, scope="ben")
    assert not b.running and reg.running() == [a]
    reg.stop(a.proc.pid, scope=None)  # an admin's scope: everyone's
    assert reg.running() == []


def test_measurements_are_bounded_and_stopped_only_by_their_user_or_an_admin(
        fake_jobs: tuple[list[Any], Callable[[], Any]]) -> None:
    reg = JobRegistry(max_running=3)
    jobs, start = fake_jobs
    a1 = reg.start("ann", start, per_owner=2)
    a2 = reg.start("ann", start, per_owner=2)
    with pytest.raises(InputError, match="you run 2 measurements"):
        reg.start("ann", start, per_owner=2)
    b1 = reg.start("ben", start, per_owner=2)
    with pytest.raises(InputError, match="3 measurements are running"):
        reg.start("cid", start, per_owner=2)
    assert len(jobs) == 3  # the refused ones started nothing
    assert [o.job for o in reg.running("ann")] == [a1, a2]
    assert [o.job for o in reg.running("ben")] == [b1]
    assert [o.job for o in reg.running(None)] == [a1, a2, b1]
    (ben,) = reg.running("ben")
    with pytest.raises(AccessDenied):
        reg.stop(ben.number, scope="ann")
    assert b1.running
    reg.stop(ben.number, scope=None)  # an admin
    assert not b1.running and len(reg.running()) == 2
    a1.running = False  # a finished job leaves the registry: room for another
    reg.start("cid", start, per_owner=2)


FAKE_BENCH = """#!{python}
import pathlib, sys, time
a = sys.argv
out, label, run_id = a[a.index("--out") + 1], a[a.index("--label") + 1], a[a.index("--run-id") + 1]
time.sleep(0.3)  # both children start before either creates its folder
d = pathlib.Path(out) / label / run_id
d.mkdir(parents=True)
(d / "meta.json").write_text('{{"run_id": "' + run_id + '"}}')
"""


def test_two_jobs_of_the_same_label_each_find_their_own_run(tmp_path: Path) -> None:
    # issue 29: two sessions with the same label saw each other's run (the newest folder of the
    # label); each job now names its run (--run-id) and reads only that folder
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_BENCH.format(python=sys.executable), encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    form = MeasureForm(base_url="http://127.0.0.1:9/v1", label="same", out_dir=str(tmp_path))
    a = BenchJob.start(form, cwd=tmp_path, python=str(fake))
    b = BenchJob.start(form, cwd=tmp_path, python=str(fake))
    try:
        assert a.wait(30) == 0 and b.wait(30) == 0
        da, db = a.find_run_dir(), b.find_run_dir()
        assert da is not None and db is not None and da != db
        assert (da.name, db.name) == (a.run_id, b.run_id)
        assert a.meta()["run_id"] == a.run_id and b.meta()["run_id"] == b.run_id
        assert sorted(os.listdir(tmp_path / "same")) == sorted([da.name, db.name])
    finally:
        a.stop(grace_s=2)
        b.stop(grace_s=2)


# -- the app: the gate and the refusals (AppTest seeds st.user and st.secrets) -----------------

AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
        "client_id": "c", "client_secret": "s",
        "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}
VIEWER = {"is_logged_in": True, "sub": "v1", "iss": "http://idp", "email": "vera@partner.example",
          "name": "Vera"}
EDITOR = {"is_logged_in": True, "sub": "e1", "iss": "http://idp", "email": "ed@example.com",
          "name": "Ed"}
ADMIN = {"is_logged_in": True, "sub": "a1", "iss": "http://idp", "email": "alice@example.com",
         "name": "Alice"}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var, sub in (("CAPACITY_BENCH_DIR", "bench"), ("CAPACITY_CUSTOM_DIR", "custom"),
                     ("CAPACITY_CALIBRATIONS_DIR", "cal")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("CAPACITY_MEASURE", raising=False)
    monkeypatch.delenv("CAPACITY_MEASURE_ALLOW_HOSTS", raising=False)
    return tmp_path


def app(page: str | None, user: dict[str, Any] | None, access: dict[str, Any] | None = CONFIG
        ) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.secrets["auth"] = AUTH
    if access is not None:
        at.secrets["access"] = access
    if user is not None:
        at.user = dict(user)
    if page is not None:
        at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def words(at: AppTest) -> str:
    """The page's text as it reads (Markdown escapes and word joiners taken out:
    `app.format.markdown_plain`)."""
    return "\n".join(x.value for group in (at.markdown, at.caption, at.info, at.error,
                                           at.warning, at.title) for x in group).replace(
        "\\", "").replace(WORD_JOINER, "")


def save_button(at: AppTest) -> Any:
    """The Catalog's model form's save button."""
    return next(b for b in at.button if b.key.startswith("FormSubmitter:cat_model_form-"))


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_without_sign_in_nothing_changes(workspace: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=90).switch_page("pages/measure.py")
    at.run()
    assert not at.exception
    assert not at.button(key="m_start").disabled and not at.button(key="m_sim_start").disabled
    assert "Sign out" not in [b.label for b in at.button]


def test_a_visitor_sees_only_the_sign_in_screen(workspace: Path) -> None:
    at = app("pages/measure.py", None)
    assert [b.key for b in at.button] == ["auth_sign_in"]
    assert "Sign in" in words(at) and "m_start" not in [b.key for b in at.button]


def test_a_user_without_a_role_is_turned_away(workspace: Path) -> None:
    at = app(None, {**VIEWER, "email": "eve@elsewhere.org"})
    assert "eve@elsewhere.org has no role" in words(at)
    assert [b.key for b in at.button] == ["auth_sign_out_refused"]


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_a_bad_access_table_closes_sign_in_without_quoting_it(workspace: Path) -> None:
    at = app(None, EDITOR, {"editor": ["ed@example.com", "not-an-address"]})
    assert "[access] editor, entry 2" in words(at)
    assert "not-an-address" not in words(at) and "ed@example.com" not in words(at)
    assert "m_start" not in [b.key for b in at.button]


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_a_viewer_is_refused_every_write(workspace: Path) -> None:
    at = app("pages/measure.py", VIEWER)
    assert "Signed in as Vera (viewer)" in words(at)
    for key in ("m_start", "m_sim_start", "m_connect"):
        assert at.button(key=key).disabled, key
    assert "Your role may not start or stop measurements" in words(at)
    at = app("pages/catalog.py", VIEWER)
    assert save_button(at).disabled
    assert at.checkbox(key="cm_replace").disabled
    assert "add entries to the catalog" in words(at)


@pytest.mark.slow
def test_the_action_itself_checks_the_role(workspace: Path) -> None:
    # a button drawn enabled, then the operator takes the role away (secrets.toml is read on
    # every run): the click arrives, but the button is disabled in that run (Streamlit drops a
    # disabled widget's value on the server) and nothing starts
    at = app("pages/measure.py", EDITOR)
    assert not at.button(key="m_start").disabled
    at.secrets["access"] = {"default": "viewer"}
    at.button(key="m_start").click().run()
    assert not at.exception
    assert "measure_job" not in at.session_state
    assert "that needs the editor role" in words(at)
    # the same for a value set before the role was taken away: the 'replace' box an admin
    # ticked before they became an editor is dropped, and nothing is saved
    at = app("pages/catalog.py", ADMIN)
    at.text_input(key="cm_key").set_value("qwen3-8b")
    at.checkbox(key="cm_replace").check()
    at.secrets["access"] = {**CONFIG, "admin": []}  # alice is an editor now
    save_button(at).click().run()
    assert not at.checkbox(key="cm_replace").value and at.checkbox(key="cm_replace").disabled
    assert not (workspace / "custom" / "models").exists()


def _refusal_script() -> None:
    import streamlit as st

    from app import auth
    from capacity.access import Right

    for right in Right:
        st.write(f"{right.value}: {'refused' if auth.refused(right, 'en') else 'done'}")


@pytest.mark.parametrize(("user", "done"), [
    (VIEWER, []), (EDITOR, ["measure", "save_calibration", "save_catalog"]),
    (ADMIN, [r.value for r in Right])])
@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_the_check_at_the_action(user: dict[str, Any], done: list[str]) -> None:
    # what every action calls before it writes (`auth.refused`), for Streamlit versions that do
    # not drop a disabled widget's value themselves (pyproject allows streamlit>=1.50)
    at = AppTest.from_function(_refusal_script, default_timeout=30)
    at.secrets["auth"], at.secrets["access"], at.user = AUTH, CONFIG, dict(user)
    at.run()
    assert not at.exception
    said = dict(m.value.split(": ") for m in at.markdown)
    assert [r for r, v in said.items() if v == "done"] == done
    assert len(at.error) == len(Right) - len(done)
    assert all("needs the" in e.value for e in at.error)


@pytest.mark.slow  # over 0.75 s idle (3+ s in the quick loop at load 6-8, 2026-12-02)
def test_an_editor_adds_but_only_an_admin_replaces(workspace: Path) -> None:
    at = app("pages/catalog.py", EDITOR)
    assert not save_button(at).disabled
    assert at.checkbox(key="cm_replace").disabled
    assert "replace an existing catalog entry" in words(at)
    at = app("pages/catalog.py", ADMIN)
    assert not at.checkbox(key="cm_replace").disabled
    assert "Your role may not" not in words(at)
    at = app("pages/measure.py", EDITOR)
    assert not at.button(key="m_start").disabled and not at.button(key="m_sim_start").disabled


@pytest.mark.slow
def test_an_editor_measures_and_another_user_does_not_see_it(workspace: Path) -> None:
    from app import measure_state as ms

    ms.SIMS.stop_all()
    at = app("pages/measure.py", EDITOR)
    at.button(key="m_sim_start").click().run(timeout=120)
    assert not at.exception
    mine = ms.SIMS.running()
    try:
        assert len(mine) == 1 and ms.SIMS.owner(mine[0]) == "http://idp#e1"
        other = app("pages/measure.py", {**EDITOR, "sub": "e2", "name": "Eda"})
        assert mine[0].base_url not in words(other)  # not listed, not reattached
        assert "m_sim_stop" not in [b.key for b in other.button]
        admin = app("pages/measure.py", ADMIN)
        assert mine[0].base_url in words(admin)  # an admin sees it, and may stop it
        admin.button(key=f"m_sim_stop_{mine[0].proc.pid}").click().run()
        deadline = time.monotonic() + 20
        while mine[0].running and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not mine[0].running
    finally:
        ms.SIMS.stop_all()
