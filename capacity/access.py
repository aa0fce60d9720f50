"""Who may do what in a shared deployment: the roles the operator grants, read from a TOML table.

Without sign-in (no `[auth]` in the app's secrets.toml) there is one user, the person at the
machine, with every right (`LOCAL_USER`): the app is a single-user local tool. With sign-in
(docs/sign-in.md) each person signs in through an OpenID Connect provider and gets one role:

    viewer   explores, plans, reads stored runs and calibrations
    editor   also measures (starts and stops runs and simulators), saves calibrations and
             adds catalog entries
    admin    also replaces existing catalog entries (a bundled one for everyone), and sees
             and stops every user's runs and simulators

The role comes from the operator's `[access]` table (in the same secrets.toml as `[auth]`):

    [access]
    admin = ["alice@example.com"]
    editor = ["@example.com", "group:capacity-editors"]
    viewer = ["@partner.example"]
    default = "viewer"       # anyone else the provider signs in; "none" refuses them
    groups_claim = "groups"  # the ID-token claim that lists a user's groups

An entry is an e-mail address, `@domain` (every address of that domain) or `group:NAME` (a
value of the groups claim). A person matched by several entries gets the highest role. E-mail
entries apply only when the provider does not say the address is unverified
(`email_verified = false`). A bad table (an unknown key, a misspelt role, an entry that is
none of the three forms) raises `AccessConfigError` naming the key or the entry's position
(never its text, which is someone's address): a typo must not silently give or take away
rights.

Pure: no Streamlit import; the app's side is `app/auth.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from capacity.errors import CapacityError, InputError


class AccessConfigError(InputError):
    """The `[access]` table is malformed; the message names the key or the entry."""


class AccessDenied(CapacityError):
    """A user tried an action their role does not allow (checked where the action runs)."""


class Role(StrEnum):
    """A signed-in user's role, lowest first."""

    VIEWER = "viewer"
    EDITOR = "editor"
    ADMIN = "admin"


RANK: Mapping[Role, int] = {Role.VIEWER: 1, Role.EDITOR: 2, Role.ADMIN: 3}
"""Roles in order: a higher one has every right of a lower one."""


class Right(StrEnum):
    """What an action needs (`User.may`); message keys auth_right_*."""

    MEASURE = "measure"
    """Start and stop measurements and simulated endpoints (the Measure page)."""
    SAVE_CALIBRATION = "save_calibration"
    """Save a fitted calibration into the workspace (the Results page)."""
    SAVE_CATALOG = "save_catalog"
    """Add a custom model or GPU to the catalog (the Catalog page)."""
    REPLACE_ENTRY = "replace_entry"
    """Replace an existing catalog entry: a custom one, or a bundled one for everyone."""
    SEE_ALL = "see_all"
    """See and stop every user's runs and simulators, not only one's own."""


NEEDS: Mapping[Right, Role] = {
    Right.MEASURE: Role.EDITOR,
    Right.SAVE_CALIBRATION: Role.EDITOR,
    Right.SAVE_CATALOG: Role.EDITOR,
    Right.REPLACE_ENTRY: Role.ADMIN,
    Right.SEE_ALL: Role.ADMIN,
}
"""The lowest role that has each right."""

ROLE_KEYS = ("admin", "editor", "viewer")
"""The `[access]` keys that list who gets each role."""
KNOWN_KEYS = frozenset((*ROLE_KEYS, "default", "groups_claim"))
DEFAULTS = ("none", "viewer", "editor")
"""What `default` may say: admins are always named."""
MAX_ENTRIES = 10_000
"""Entries one role may list (a longer list is a mistake, not a team)."""


@dataclass(frozen=True, kw_only=True)
class Grant:
    """One entry of a role's list: who (`kind` 'email', 'domain' or 'group', and `value`)."""

    role: Role
    kind: str
    value: str


@dataclass(frozen=True, kw_only=True)
class AccessConfig:
    """The parsed `[access]` table (`parse_access`)."""

    grants: tuple[Grant, ...] = ()
    default: Role | None = Role.VIEWER
    """The role of a signed-in user no entry names; None refuses them."""
    groups_claim: str = "groups"


def _entry(role: Role, index: int, raw: object) -> Grant:
    """One entry of a role's list; the error names the role and the entry's position, never
    its text (a page may show the error to anyone, and the entries are people's addresses)."""
    where = f"[access] {role.value}, entry {index + 1}"
    if not isinstance(raw, str) or not raw.strip():
        raise AccessConfigError(f"{where}: every entry must be text (an e-mail, '@domain' or "
                                "'group:NAME')")
    text = raw.strip()
    if text.lower().startswith("group:"):
        name = text[len("group:"):].strip()
        if not name:
            raise AccessConfigError(f"{where}: names no group; write group:NAME")
        return Grant(role=role, kind="group", value=name)
    if text.startswith("@"):
        domain = text[1:].lower()
        if not domain or "@" in domain or "." not in domain or " " in domain:
            raise AccessConfigError(f"{where}: not a domain; write e.g. @example.com")
        return Grant(role=role, kind="domain", value=domain)
    local, at, domain = text.rpartition("@")
    if not at or not local or "." not in domain or " " in text:
        raise AccessConfigError(f"{where}: neither an e-mail address, '@domain' nor "
                                "'group:NAME'")
    return Grant(role=role, kind="email", value=text.lower())


def parse_access(table: Mapping[str, object] | None) -> AccessConfig:
    """The `[access]` table as an `AccessConfig`; None or an empty table: nobody named, every
    signed-in user a viewer. AccessConfigError names the first bad key or entry."""
    if table is None:
        return AccessConfig()
    if not isinstance(table, Mapping):
        raise AccessConfigError("[access] must be a table")
    unknown = sorted(str(k) for k in table if k not in KNOWN_KEYS)
    if unknown:
        raise AccessConfigError(f"[access]: unknown key(s) {', '.join(unknown)}; the keys are "
                                f"{', '.join(sorted(KNOWN_KEYS))}")
    grants: list[Grant] = []
    for name in ROLE_KEYS:
        entries = table.get(name, [])
        if isinstance(entries, str) or not isinstance(entries, list | tuple):
            raise AccessConfigError(f"[access] {name} must be a list, e.g. "
                                    f'{name} = ["alice@example.com"]')
        if len(entries) > MAX_ENTRIES:
            raise AccessConfigError(f"[access] {name}: {len(entries)} entries, more than "
                                    f"{MAX_ENTRIES}; name a domain or a group instead")
        grants += [_entry(Role(name), i, e) for i, e in enumerate(entries)]
    default = table.get("default", Role.VIEWER.value)
    if default not in DEFAULTS:
        raise AccessConfigError(f"[access] default must be one of {', '.join(DEFAULTS)} "
                                "(admins are always named)")
    claim = table.get("groups_claim", "groups")
    if not isinstance(claim, str) or not claim.strip():
        raise AccessConfigError("[access] groups_claim must be a claim name, e.g. groups")
    return AccessConfig(grants=tuple(grants),
                        default=None if default == "none" else Role(str(default)),
                        groups_claim=claim.strip())


def _groups(claims: Mapping[str, object], claim: str) -> frozenset[str]:
    raw = claims.get(claim)
    if isinstance(raw, str):
        return frozenset(g.strip() for g in raw.split(",") if g.strip())
    if isinstance(raw, list | tuple):
        return frozenset(g for g in raw if isinstance(g, str))
    return frozenset()


def _verified_email(claims: Mapping[str, object]) -> str | None:
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        return None
    verified = claims.get("email_verified")
    if verified is False or (isinstance(verified, str) and verified.lower() == "false"):
        return None
    return email.strip().lower()


def role_for(config: AccessConfig, claims: Mapping[str, object]) -> Role | None:
    """The role of a signed-in user from their ID token's claims: the highest role an entry
    grants them, else the config's default (None: refused)."""
    email = _verified_email(claims)
    domain = email.rpartition("@")[2] if email else None
    groups = _groups(claims, config.groups_claim)
    found = [g.role for g in config.grants
             if (g.kind == "email" and g.value == email)
             or (g.kind == "domain" and g.value == domain)
             or (g.kind == "group" and g.value in groups)]
    return max(found, key=RANK.__getitem__) if found else config.default


@dataclass(frozen=True, kw_only=True)
class User:
    """Who runs this session: the owner of what they start, and their role."""

    id: str
    """The owner key of the runs and simulators they start ('' for the local user)."""
    name: str
    role: Role
    signed_in: bool = True

    def may(self, right: Right) -> bool:
        """Whether the role has `right`."""
        return RANK[self.role] >= RANK[NEEDS[right]]

    @property
    def scope(self) -> str | None:
        """Whose runs and simulators this user sees and stops: None for all (an admin, the
        local user), else their own id."""
        return None if self.may(Right.SEE_ALL) else self.id

    def check(self, right: Right) -> None:
        """AccessDenied unless the role has `right` (the check at the action itself)."""
        if not self.may(right):
            raise AccessDenied(f"{self.name} is a {self.role.value}: {right.value} needs "
                               f"the {NEEDS[right].value} role")


LOCAL_USER = User(id="", name="", role=Role.ADMIN, signed_in=False)
"""The one user of an app without sign-in: every right, as before sign-in existed."""


def user_id(claims: Mapping[str, object]) -> str | None:
    """A signed-in user's owner key: the issuer and subject of their ID token (stable for a
    person at one provider), else their e-mail; None when the token has neither."""
    sub, iss = claims.get("sub"), claims.get("iss")
    if isinstance(sub, str) and sub:
        return f"{iss}#{sub}" if isinstance(iss, str) and iss else sub
    email = _verified_email(claims)
    return f"email:{email}" if email else None


def signed_in_user(config: AccessConfig, claims: Mapping[str, object]) -> User | None:
    """The `User` for a signed-in person's claims, None when they have no role (refused) or
    the token names nobody."""
    role = role_for(config, claims)
    uid = user_id(claims)
    if role is None or uid is None:
        return None
    name = next((v for k in ("name", "email", "preferred_username", "sub")
                 if isinstance(v := claims.get(k), str) and v.strip()), uid)
    return User(id=uid, name=name.strip(), role=role)


def visible(user: User, owner: str) -> bool:
    """Whether `user` sees (and may stop) what `owner` started."""
    return user.scope is None or owner == user.id


# -- stored runs: whose they are, and who else sees them (meta.json's started_by and shared) ----

RUN_OWNER_KEY = "started_by"
"""meta.json's field naming who started a run from the app with sign-in on: their `User.id`
(`iss#sub`; never a token or a secret). Absent or '' for a run stored without sign-in, by the
CLI, or before owners were recorded: such a run is everyone's. (meta.json's `owner` is another
thing: the process that writes the run, `capacity.bench.storage.process_owner`.)"""
RUN_SHARED_KEY = "shared"
"""meta.json's field set by the run's owner (or an admin) to show an owned run to everyone."""


@dataclass(frozen=True, kw_only=True)
class RunAccess:
    """Who may see a stored run: its owner ('' none) and whether it is shared (`run_access`)."""

    started_by: str = ""
    shared: bool = False
    malformed: bool = False
    """The owner field is there but is not text (a hand-edited meta.json): only an admin sees
    the run, since whose it is cannot be told."""


def run_access(meta: Mapping[str, object]) -> RunAccess:
    """A run's `RunAccess` from its meta.json: `started_by` text ('' when absent or empty),
    `shared` only when it is `true` itself (a string "true" or 1 is not)."""
    raw = meta.get(RUN_OWNER_KEY)
    shared = meta.get(RUN_SHARED_KEY) is True
    if raw is None:
        return RunAccess(shared=shared)
    if not isinstance(raw, str):
        return RunAccess(shared=shared, malformed=True)
    return RunAccess(started_by=raw.strip(), shared=shared)


def may_see_run(user: User, access: RunAccess) -> bool:
    """Whether `user` lists, opens and compares a stored run: an admin (and the local user)
    every run; anyone else a run without an owner, a shared one, or their own."""
    if user.scope is None:
        return True
    if access.malformed:
        return False
    return not access.started_by or access.shared or access.started_by == user.id


def may_share_run(user: User, access: RunAccess) -> bool:
    """Whether `user` may switch a run's `shared`: only a run that has an owner, and only its
    owner while they may measure (an editor), or an admin. Viewers and other editors may not."""
    if access.malformed or not access.started_by:
        return False
    if user.may(Right.SEE_ALL):
        return True
    return access.started_by == user.id and user.may(Right.MEASURE)
