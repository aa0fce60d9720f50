"""Sign-in and roles in the app: Streamlit's own `st.login` (OpenID Connect) when the app's
secrets.toml has an `[auth]` table, each user's role from its `[access]` table
(`capacity.access`, docs/sign-in.md).

Without `[auth]` the app is the single-user local tool it always was: `user()` is
`LOCAL_USER` (every right) and nothing here draws. With it, `gate()` (called by
`app.bootstrap.run_app` before any page) shows a sign-in screen to a visitor who has not signed
in, or who has no role, and the signed-in user's name, role and a sign-out button in the
sidebar. The pages ask `allowed(right)` to disable what the user may not do, and `refused(right,
lang)` at the action itself, so a widget that is only disabled is never the whole check.

The `[access]` table is read from `st.secrets` on every run (an edit of secrets.toml applies
at once) and never written anywhere: a malformed one closes sign-in with a message that names
the key or the entry's position, not the addresses in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import streamlit as st

from app.format import markdown_plain
from capacity.access import (
    LOCAL_USER,
    NEEDS,
    AccessConfig,
    AccessConfigError,
    Right,
    User,
    parse_access,
    signed_in_user,
)
from capacity.report.i18n import t

AUTH = "auth"
"""The secrets.toml table that switches sign-in on (Streamlit's own: docs/sign-in.md)."""
ACCESS = "access"
"""The secrets.toml table of roles (`capacity.access.parse_access`)."""


def _plain(value: Any) -> Any:
    """A secrets section (Streamlit's AttrDict, nested) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _section(name: str) -> dict[str, Any] | None:
    """A table of the app's secrets, None when there is none (or no secrets file at all)."""
    try:
        if name not in st.secrets:
            return None
        value = st.secrets[name]
    except FileNotFoundError:  # Streamlit's "no secrets found"
        return None
    return _plain(value) if isinstance(value, Mapping) else None


def configured() -> bool:
    """Whether sign-in is on: the secrets have an `[auth]` table."""
    return _section(AUTH) is not None


def access_config() -> AccessConfig:
    """The roles (`[access]`); AccessConfigError when the table is malformed."""
    return parse_access(_section(ACCESS))


def claims() -> dict[str, Any] | None:
    """The signed-in user's ID-token claims (`st.user`), None when nobody has signed in."""
    info = st.user.to_dict()
    return dict(info) if info.get("is_logged_in") else None


def user() -> User | None:
    """This session's user: `LOCAL_USER` without sign-in; else the signed-in user with their
    role, None when nobody has signed in or the user has no role (or the config is bad)."""
    if not configured():
        return LOCAL_USER
    found = claims()
    if found is None:
        return None
    try:
        return signed_in_user(access_config(), found)
    except AccessConfigError:
        return None


def current() -> User:
    """The user of a page's run (past `gate`); stops the run when there is none."""
    found = user()
    if found is None:
        st.stop()
    return found


def _stop_with(message: str, *, sign_out: bool, lang: str) -> NoReturn:
    st.title(t("auth_title", lang))
    st.warning(message)
    if sign_out and st.button(t("auth_sign_out", lang), key="auth_sign_out_refused"):
        st.logout()
    st.stop()


def gate(lang: str) -> User:
    """Before the navigation: without sign-in, `LOCAL_USER`. With it, the sign-in screen (and
    the run stopped) for a visitor not signed in, a user without a role, or a malformed
    `[access]`; else the user, with their name, role and a sign-out button in the sidebar."""
    if not configured():
        return LOCAL_USER
    try:
        config = access_config()
    except AccessConfigError as exc:
        _stop_with(t("auth_bad_config", lang, msg=markdown_plain(str(exc))),
                   sign_out=claims() is not None, lang=lang)
    found = claims()
    if found is None:
        st.title(t("auth_title", lang))
        st.write(t("auth_intro", lang))
        if st.button(t("auth_sign_in", lang), key="auth_sign_in", type="primary"):
            st.login()
        st.stop()
    signed = signed_in_user(config, found)
    if signed is None:
        who = found.get("email") or found.get("name") or ""
        _stop_with(t("auth_no_role", lang, who=markdown_plain(str(who))), sign_out=True,
                   lang=lang)
    with st.sidebar:
        st.caption(t("auth_signed_in_as", lang, name=markdown_plain(signed.name),
                     role=t("auth_role_" + signed.role.value, lang)))
        if st.button(t("auth_sign_out", lang), key="auth_sign_out"):
            st.logout()
    return signed


def allowed(right: Right) -> bool:
    """Whether this session's user has `right` (to disable a widget)."""
    found = user()
    return found is not None and found.may(right)


def refused(right: Right, lang: str) -> bool:
    """The check at the action itself: True, with the reason shown, when this session's user
    may not do it (the widget was disabled, yet the action was asked for)."""
    if allowed(right):
        return False
    st.error(refusal(right, lang))
    return True


def refusal(right: Right, lang: str) -> str:
    """Why a user without `right` may not: the right and the role it needs."""
    return t("auth_refused", lang, what=t("auth_right_" + right.value, lang),
             role=t("auth_role_" + NEEDS[right].value, lang))


def read_only_note(right: Right, lang: str) -> None:
    """A note above what this user may see but not do (nothing when they may)."""
    if not allowed(right):
        st.info(refusal(right, lang))
