"""What a session's closed network is made of, and the rules its egress proxy keeps. Pure.

With `routing.sandbox.network: gateways` a session has a network namespace of its own: only
its loopback exists inside. What it may reach is relayed in: a small relay inside
(`netrelay`) listens on 127.0.0.1 and hands each connection to a unix socket the spawner
serves in a per-session directory bound into the sandbox (`netgates`), which connects it to
the real address on the host. The relays listen on the same ports the real services use on
the host's loopback, so the model gateway's URL and a loopback App's URL (and with it the
checkout's `origin`, the App's git gateway) mean the same inside as outside.

Everything else goes through the spawner's allow-listing proxy, exported as `HTTPS_PROXY` /
`HTTP_PROXY`: a CONNECT, or a plain-HTTP request, only to a `host:port` the operator listed
in `routing.sandbox.egress` (and the App itself when it is not on loopback: its name, TLS
and all, pass through the proxy unchanged; a loopback App is relayed, `http` or `https`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.spawner.confine.sandbox import INSIDE_DIR
from app.spawner.spawner_errors import SpawnerError

PROXY_SOCKET = "proxy.sock"
PROXY_PORTS = (3128, 3129, 8118, 18080)  # the proxy's port inside: the first one left free
LOOPBACK_NAMES = ("localhost",)
NO_PROXY = "127.0.0.1,localhost,::1"
MAX_HEAD = 16 * 1024  # a proxy request's head: request line and headers
HOP_HEADERS = frozenset({b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"})


PRIVILEGED = 1024  # below it, a port cannot be bound inside (no capability there)
LOW_PORT_SHIFT = 10000  # a privileged port P is relayed from P + this inside


@dataclass(frozen=True)
class Route:
    """One relayed destination: `host:port` inside ↔ `socket` ↔ `host:target` outside."""

    socket: str
    port: int
    host: str = "127.0.0.1"
    target: int = 0  # the port outside (0: the same as inside)

    @property
    def far_port(self) -> int:
        return self.target or self.port

    @property
    def unix(self) -> bool:
        """A unix socket's path (`host`), at the same path inside and out."""
        return self.host.startswith("/")


@dataclass(frozen=True)
class NetPlan:
    """A session's closed network: the relayed routes, the proxy's port inside, the hosts
    the proxy lets through, and what the session's environment says of it."""

    routes: tuple[Route, ...]
    proxy_port: int
    allowed: frozenset[tuple[str, int]]
    app_url: str  # the App's URL as the session names it (and its checkout's `origin`)
    # The App's own `host:port` when it goes through the proxy, and the registries the
    # egress presets found in the devbox's own configuration: they may resolve to a private
    # address (the operator's own network), unlike a name the operator listed in `egress`.
    own: frozenset[tuple[str, int]] = frozenset()
    quiet: frozenset[str] = frozenset()  # the harness's own hosts: refused, never announced

    @property
    def env(self) -> dict[str, str]:
        proxy = f"http://127.0.0.1:{self.proxy_port}"
        names = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
        return {
            **{name: proxy for name in names},
            "NO_PROXY": NO_PROXY,
            "no_proxy": NO_PROXY,
        }


def _is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def address_of(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL, the scheme's port when none is written."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    return parts.hostname.lower(), parts.port or (443 if parts.scheme == "https" else 80)


def split_hostport(entry: str) -> tuple[str, int]:
    """`host:port` (as `config` normalised it) → (host, port); IPv6 loses its brackets."""
    host, _, port = entry.rpartition(":")
    return host.strip("[]").lower(), int(port)


def _relayed_app(app_url: str) -> bool:
    """An App on the host's loopback is relayed, plain HTTP or TLS alike (the relay carries
    bytes; TLS stays between the session and the App). Through the proxy it could not be
    reached: `NO_PROXY` names the loopback, so a client would look for it inside."""
    return _is_loopback(address_of(app_url)[0])


def app_url_inside(app_url: str) -> str:
    """The App's URL as a session in a closed network names it: the same, unless the App
    listens on a privileged loopback port, which is relayed from a high one inside."""
    host, port = address_of(app_url)
    if not _relayed_app(app_url) or port >= PRIVILEGED:
        return app_url
    parts = urlsplit(app_url)
    netloc = f"[{host}]" if ":" in host else host
    return parts._replace(netloc=f"{netloc}:{port + LOW_PORT_SHIFT}").geturl()


def service_routes(services: Iterable[str], taken: Collection[int]) -> list[Route]:
    """The devbox's loopback services (`routing.sandbox.services`: `127.0.0.1:PORT`, or a unix
    socket's path, which stands in `host` with port 0) relayed in at the same address; one on
    a port the gateways already use inside is refused."""
    routes: list[Route] = []
    for number, entry in enumerate(dict.fromkeys(services)):
        if entry.startswith("/"):
            routes.append(Route(f"svc{number}.sock", 0, entry))
            continue
        host, port = split_hostport(entry)
        if port in taken or port in {r.port for r in routes}:
            raise ValueError(f"routing.sandbox.services: {entry} is relayed already")
        routes.append(Route(f"svc{number}.sock", port, host))
    return routes


def plan_network(
    app_url: str, model_url: str | None, egress: Iterable[str], services: Iterable[str] = ()
) -> NetPlan:
    """The plan for one session: the model gateway (always on the host's loopback) relayed,
    the App relayed when it is on loopback, else let through the proxy; the listed devbox
    services relayed at their own addresses. `egress` is `host:port`s (presets expanded)."""
    routes: list[Route] = []
    allowed = {split_hostport(entry) for entry in egress}
    if model_url:
        routes.append(Route("model.sock", address_of(model_url)[1]))
    host, port = address_of(app_url)
    own: set[tuple[str, int]] = set()
    if _relayed_app(app_url):
        inside = address_of(app_url_inside(app_url))[1]
        if inside not in {r.port for r in routes}:
            routes.append(Route("app.sock", inside, host, port))
    else:
        allowed.add((host, port))
        own.add((host, port))
    routes += service_routes(services, {r.port for r in routes})
    taken = {r.port for r in routes}
    proxy_port = next(p for p in PROXY_PORTS if p not in taken)
    inside_url = app_url_inside(app_url)
    return NetPlan(tuple(routes), proxy_port, frozenset(allowed), inside_url, frozenset(own))


def needs_resolving(plan: NetPlan, host: str, port: int) -> bool:
    """Whether the proxy must check where `host` resolves before connecting: every listed
    name does, since DNS can answer anything; an address the operator wrote is taken as
    written, and the App's own name may lie on the operator's private network."""
    bare = host.strip("[]").lower().rstrip(".")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        return (bare, port) not in plan.own
    return False


def inward_address(addresses: Iterable[str]) -> str | None:
    """The first of a name's resolved addresses that is not on the public internet
    (loopback, private, link-local, unspecified, multicast, reserved; an IPv4 address inside
    IPv6 is judged as itself), or None when all are public. Pure."""
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            return text
    return None


def permitted(allowed: Collection[tuple[str, int]], host: str, port: int) -> bool:
    """Is `host:port` on the allow-list? Names match whole and case-blind, no wildcard."""
    return (host.strip("[]").lower().rstrip("."), port) in allowed


@dataclass(frozen=True)
class ProxyRequest:
    """A request the proxy was sent: a CONNECT tunnel, or one plain-HTTP request whose head
    is rewritten for the origin server (`head`: request line in origin form, hop-by-hop
    headers gone, `Connection: close`)."""

    method: str
    host: str
    port: int
    tunnel: bool
    head: bytes = b""


class BadRequest(SpawnerError, ValueError):
    """A head the proxy cannot act on; the message is the reason sent back."""


def _target_of_connect(target: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        raise BadRequest("CONNECT needs host:port")
    return host.strip("[]").lower(), int(port)


def parse_proxy_head(head: bytes) -> ProxyRequest:
    """Read a proxy request's head (up to and with its blank line). Raises BadRequest."""
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("a malformed request line") from None
    if not version.startswith("HTTP/1."):
        raise BadRequest("only HTTP/1.x is spoken here")
    if method == "CONNECT":
        host, port = _target_of_connect(target)
        return ProxyRequest(method, host, port, tunnel=True)
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        raise BadRequest("a proxy request names an absolute http:// URL (use CONNECT for TLS)")
    try:
        port = parts.port or 80
    except ValueError:
        raise BadRequest("a bad port") from None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    kept = [
        line
        for line in lines[1:]
        if line and line.split(b":", 1)[0].strip().lower() not in HOP_HEADERS
    ]
    first = f"{method} {path} {version}".encode("ascii")
    rewritten = b"\r\n".join([first, *kept, b"Connection: close", b"", b""])
    return ProxyRequest(method, parts.hostname.lower(), port, tunnel=False, head=rewritten)


def relay_argv(python: str, relay_file: str, plan: NetPlan, argv: Collection[str]) -> list[str]:
    """The command the sandbox runs: the relay (this Python, no site, the module's file),
    which listens for every route and the proxy, then runs `argv` as its child."""
    words = [python, "-S", relay_file, "--dir", str(INSIDE_DIR)]
    for route in plan.routes:
        address = route.host if route.unix else f"{route.host}:{route.port}"
        words += ["--route", f"{address}={route.socket}"]
    words += ["--route", f"127.0.0.1:{plan.proxy_port}={PROXY_SOCKET}", "--", *argv]
    return words
