"""Where the Measure page may measure: `measure_guard` reads the deployment's settings, `check_url`
refuses a URL it does not allow.

Closed by default, so that a shared deployment cannot be used to probe its network. Loopback
only, unless CAPACITY_MEASURE_ALLOW_HOSTS=host1,host2 lists hosts (then only those, and loopback
only for the simulator this process started) or CAPACITY_MEASURE=open allows any host;
CAPACITY_MEASURE=off disables the page. Where hosts are restricted, the base URL's path is too:
`/v1` or none (`check_path`), so the page requests only an OpenAI-compatible server's own paths
(`SERVER_PATHS`). A refused URL is refused before anything is connected or resolved
(docs/configuration.md). With sign-in, `check_not_foreign` refuses a URL that reaches a
simulated endpoint another user started (docs/sign-in.md).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from capacity import workspace
from capacity.access import AccessDenied
from capacity.errors import InputError

MEASURE_ENV = workspace.CAPACITY_MEASURE
ALLOW_HOSTS_ENV = workspace.CAPACITY_MEASURE_ALLOW_HOSTS

BASE_PATHS: tuple[str, ...] = ("/v1", "")
"""The paths a base URL may have where the guard restricts hosts (closed mode): the
OpenAI-compatible root `/v1`, or none (a '/' at the end is ignored); no query, fragment or
user info. The page then requests exactly `SERVER_PATHS` of the host, never a path a user
typed, so it cannot be made to GET any path of any local service."""
SERVER_PATHS: frozenset[str] = frozenset({
    "/v1/models", "/v1/chat/completions", "/v1/completions",  # base URL .../v1
    "/models", "/chat/completions", "/completions",  # base URL without a path
    "/health", "/slots", "/metrics",  # the engine probe, on the server's root
})
"""Every path the Measure page's requests reach, for either base path: the OpenAI API
(`capacity.bench.transport`, `.runner`, `.connect`) and the engine probe
(`capacity.bench.engine_info`)."""


class MeasureMode(StrEnum):
    """CAPACITY_MEASURE: how far the Measure page may reach (docs/configuration.md)."""

    CLOSED = "closed"
    """The default: loopback only (127.0.0.0/8, ::1, localhost), plus the hosts of
    CAPACITY_MEASURE_ALLOW_HOSTS when set (then loopback only for the simulator the app
    started, unless the list names it)."""
    OPEN = "open"
    """Any host (a single-user install, or a deployment that trusts every user)."""
    OFF = "off"
    """The page does not measure at all (imports of measurements still work)."""


_MODE_WORDS: dict[str, MeasureMode] = {
    "": MeasureMode.CLOSED, "closed": MeasureMode.CLOSED, "on": MeasureMode.CLOSED,
    "1": MeasureMode.CLOSED, "true": MeasureMode.CLOSED, "yes": MeasureMode.CLOSED,
    "open": MeasureMode.OPEN, "any": MeasureMode.OPEN,
    "off": MeasureMode.OFF, "0": MeasureMode.OFF, "false": MeasureMode.OFF,
    "no": MeasureMode.OFF}


@dataclass(frozen=True, kw_only=True)
class Guard:
    """Whether the Measure page may run, and which hosts it may reach (None: any host)."""

    enabled: bool
    allow_hosts: frozenset[str] | None
    reason: str = ""
    loopback: bool = True
    """Whether any loopback URL is allowed (closed mode without an allow-list)."""


def measure_guard(env: Mapping[str, str] | None = None) -> Guard:
    """Read CAPACITY_MEASURE (closed by default; 'open'; 'off') and
    CAPACITY_MEASURE_ALLOW_HOSTS from `env` (default: the process environment, through
    `capacity.workspace.get`). An unknown CAPACITY_MEASURE value switches measuring off (a
    typo must not open a shared deployment)."""
    switch = workspace.get(MEASURE_ENV, env)
    mode = _MODE_WORDS.get(switch.lower())
    if mode is None:
        return Guard(enabled=False, allow_hosts=frozenset(), loopback=False,
                     reason=f"{MEASURE_ENV}={switch} is not one of closed, open, off: "
                            "measuring stays off until it is")
    if mode == MeasureMode.OFF:
        return Guard(enabled=False, allow_hosts=frozenset(), loopback=False,
                     reason=f"{MEASURE_ENV}={switch} switches measuring off on this "
                            "deployment")
    if mode == MeasureMode.OPEN:
        return Guard(enabled=True, allow_hosts=None)
    raw = workspace.get(ALLOW_HOSTS_ENV, env)
    hosts = frozenset(h.strip().lower().strip("[]") for h in raw.split(",") if h.strip())
    return Guard(enabled=True, allow_hosts=hosts, loopback=not hosts)


def url_host(base_url: str) -> str:
    """The host of an http(s) URL, lower-case; InputError for anything else."""
    try:
        parts = urlsplit(base_url.strip())
        host = parts.hostname
        _ = parts.port  # raises ValueError on a port outside 0-65535
    except ValueError as exc:
        raise InputError(f"base URL '{base_url[:200]}' is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InputError(f"base URL '{base_url[:200]}' must look like http://HOST:PORT/v1 "
                         "(http:// or https:// and a host)")
    return host.lower()


def is_loopback(host: str) -> bool:
    """Whether `host` is loopback by its spelling alone: 'localhost', an IPv4 address in
    127.0.0.0/8 or ::1. Nothing is resolved: a name that resolves to loopback is not loopback
    here (a resolver could answer otherwise at connect time). NAME.localhost is not either:
    RFC 6761 reserves it, but glibc's resolver sends it to DNS (only 'localhost' itself is in
    /etc/hosts), and with a search domain on to `NAME.localhost.<domain>`, which a wildcard
    record answers with a host of the internal network."""
    h = host.lower().strip("[]").rstrip(".")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def check_url(base_url: str, guard: Guard, simulator_urls: Sequence[str] = ()) -> None:
    """InputError unless the guard allows `base_url`; nothing is connected or resolved.

    Closed (the default): loopback only; with CAPACITY_MEASURE_ALLOW_HOSTS, the listed hosts
    and, on loopback, only a simulator this process started (its URL in `simulator_urls`).
    Open: any host. The refusal names no more than the host the user typed."""
    host = url_host(base_url)
    if not guard.enabled:
        raise InputError(guard.reason or "measuring is switched off on this deployment")
    if guard.allow_hosts is None:
        return
    if host in guard.allow_hosts or (
            is_loopback(host) and (guard.loopback or base_url.strip().rstrip("/") in
                                   {u.rstrip("/") for u in simulator_urls})):
        check_path(base_url)
        return
    if guard.allow_hosts:
        raise InputError(f"host '{host}' is not in {ALLOW_HOSTS_ENV} "
                         f"({', '.join(sorted(guard.allow_hosts))}): this deployment only "
                         "measures those hosts (and the simulator it started on loopback)")
    raise InputError(f"host '{host}' is not loopback: this deployment measures only "
                     f"127.0.0.1/localhost unless {ALLOW_HOSTS_ENV} lists more hosts or "
                     f"{MEASURE_ENV}=open (docs/configuration.md)")


def check_path(base_url: str) -> None:
    """InputError unless the path of `base_url` is one of `BASE_PATHS`, without a query, a
    fragment or user info: the check of a closed guard, after its host check."""
    parts = urlsplit(base_url.strip())
    path = parts.path.rstrip("/")
    if path in BASE_PATHS and not (parts.query or parts.fragment or "@" in parts.netloc
                                   or base_url.strip().endswith(("?", "#"))):
        return
    raise InputError(f"base URL '{base_url.strip()[:200]}' must be http://HOST:PORT/v1 (or "
                     "http://HOST:PORT): this deployment measures only an OpenAI-compatible "
                     "server's own paths (/v1/models, /v1/chat/completions, /v1/completions, "
                     "/health, /slots, /metrics), never another path, a query or user info "
                     "(docs/configuration.md)")


def reaches_this_machine(host: str) -> bool:
    """Whether `host`, by its spelling alone, names this machine's loopback: `is_loopback`, the
    unspecified address (0.0.0.0, ::, which Linux connects to loopback), an IPv4-mapped
    loopback (::ffff:127.0.0.1), or an IPv4 address in the short or numeric forms the system's
    resolver also reads (127.1, 2130706433, 0x7f.0.0.1). Nothing is resolved."""
    h = host.lower().strip("[]").rstrip(".")
    if is_loopback(host) or h.endswith(".localhost"):  # may resolve to loopback: refuse it too
        return True
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(h)
    except ValueError:
        try:
            ip = ipaddress.IPv4Address(socket.inet_aton(h))
        except (OSError, ValueError):
            return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def url_port(base_url: str) -> int:
    """The TCP port an http(s) URL connects to: its own, else 80 or 443 (InputError as
    `url_host` for a URL that is not one)."""
    url_host(base_url)
    parts = urlsplit(base_url.strip())
    return parts.port if parts.port is not None else (443 if parts.scheme == "https" else 80)


def _resolves_here(host: str, port: int) -> bool:
    """Whether the system resolver answers `host` with an address of this machine's loopback
    (an /etc/hosts alias such as the machine's own name, or a public name such as
    `localtest.me`): asked only for a URL on a port of another user's simulator, where the
    spelling alone would let such a name through. A name that does not resolve is not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return False
    return any(reaches_this_machine(str(info[4][0])) for info in infos)


def check_not_foreign(base_url: str, foreign_ports: Collection[int]) -> None:
    """AccessDenied when `base_url` reaches a simulated endpoint this app started for another
    user: a host that names this machine's loopback (`reaches_this_machine`; the simulators
    listen on 127.0.0.1), or that the resolver answers with it (`_resolves_here`: a host name
    alias; open mode lets names through), with one of `foreign_ports`
    (`SimRegistry.foreign_ports`: empty for its owner, an admin, and without sign-in). The
    resolver can answer otherwise at connect time (a name whose owner changes its record);
    that is open mode's risk, which trusts every user. The check of the Measure page's Connect and of
    every measurement's start (`BenchJob.start`), whatever the form showed."""
    if not foreign_ports:
        return
    host, port = url_host(base_url), url_port(base_url)
    if port in foreign_ports and (reaches_this_machine(host) or _resolves_here(host, port)):
        raise AccessDenied(f"{base_url.strip()[:200]} is a simulated endpoint another user "
                           "started: only they or an admin may measure it")
