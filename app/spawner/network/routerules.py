"""What a credential route lets through and how it rewrites what crosses it. Pure.

A route maps the session's loopback origin onto the upstream's, the path unchanged
(`http://127.0.0.1:<port>/simple/x` → `https://pkgs.example.com/simple/x`).

- A request passes when an `allow` rule names its method (or `*`) and a prefix of its path:
  a prefix ending in `/` covers what lies below it, any other prefix itself and below it.
  The path is checked as sent, and refused when it holds a dot segment, an encoded slash
  or dot, or a backslash (an upstream that normalises them could be led outside a prefix).
  CONNECT and TRACE never pass (a tunnel; an echo of the request's headers).
- Going out, the session's own credential headers (those the route sets, and every
  `Authorization` / `Proxy-Authorization`), hop-by-hop headers and `Host` are dropped;
  the upstream's `Host` and the route's credential are added.
- Coming back, whatever would hand the session a credential or a way around the route is
  dropped: challenges (`WWW-Authenticate`, `Proxy-Authenticate`), `Authentication-Info`,
  cookies (`Set-Cookie`: a session cookie got with the operator's credential is one too),
  `Alt-Svc`. A `Location` (or `Content-Location`) on the upstream's own origin is rewritten
  onto the loopback origin, so the session's client comes back through the route (and its
  rules); one on another origin is passed unchanged: the route never follows a redirect,
  and the session's client, following it, holds no credential (and reaches that host only
  through the egress proxy, if `routing.sandbox.egress` lists it). Any header still holding
  one of the route's secrets is dropped, and a body's bytes are scrubbed of them (each
  occurrence replaced by as many `*`, so a body's length stays right; a compressed body is
  not read).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urljoin, urlsplit

from app.gateway import Headers
from app.spawner.network.netplan import NetPlan, Route
from app.spawner.network.routecreds import ResolvedRoute

ROUTE_PORTS = range(17470, 17600)  # the routes' ports inside a session's namespace
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",
    }
)
_REQUEST_DROPPED = _HOP | {b"host", b"expect", b"authorization", b"proxy-authorization"}
_ANSWER_DROPPED = _HOP | {
    b"transfer-encoding",
    b"www-authenticate",
    b"proxy-authenticate",
    b"authentication-info",
    b"proxy-authentication-info",
    b"set-cookie",
    b"set-cookie2",
    b"alt-svc",
}
_REWRITTEN = frozenset({b"location", b"content-location"})
NEVER = frozenset({"CONNECT", "TRACE"})


def socket_name(route: ResolvedRoute) -> str:
    return f"route{route.index}.sock"


def with_routes(plan: NetPlan, routes: Sequence[ResolvedRoute]) -> tuple[NetPlan, dict[str, int]]:
    """`plan` with a relayed port for each route (the first free ones of `ROUTE_PORTS`, in
    the routes' order, so a restarted spawner names the same ones), and each route's port
    by its variable."""
    taken = {route.port for route in plan.routes} | {plan.proxy_port}
    free = (port for port in ROUTE_PORTS if port not in taken)
    ports = {route.env: next(free) for route in routes}
    added = tuple(Route(socket_name(route), ports[route.env]) for route in routes)
    return NetPlan(plan.routes + added, plan.proxy_port, plan.allowed, plan.app_url), ports


def route_env(routes: Iterable[ResolvedRoute], ports: dict[str, int]) -> dict[str, str]:
    """What a session's environment gains: each route's loopback URL, the upstream's path
    kept, under its variable. No credential is in it."""
    env: dict[str, str] = {}
    for route in routes:
        path = route.base_path.rstrip("/")
        env[route.env] = f"http://127.0.0.1:{ports[route.env]}{path}"
    return env


def _path_of(target: str) -> str | None:
    """The path of an origin-form target, or None when it is not one a rule can judge."""
    if not target.startswith("/"):
        return None
    path = target.split("?", 1)[0].split("#", 1)[0]
    lowered = path.lower()
    if "\\" in path or "%2f" in lowered or "%5c" in lowered or "%2e" in lowered:
        return None
    if any(segment in (".", "..") for segment in unquote(path).split("/")):
        return None
    return path


def _under(path: str, prefix: str) -> bool:
    if prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


def refusal(route: ResolvedRoute, method: str, target: str) -> str | None:
    """Why `method target` may not use `route` (the 403's words), or None when it may."""
    what = f"{method} {target[:200]}"
    if method in NEVER:
        return f"the-loop route {route.env}: {method} is never relayed"
    path = _path_of(target)
    if path is None:
        return f"the-loop route {route.env}: {what}: the path must be plain (no dot segments)"
    for allowed, prefix in route.allow:
        if allowed in ("*", method) and _under(path, prefix):
            return None
    rules = ", ".join(f"{m} {p}" for m, p in route.allow)
    return (
        f"the-loop route {route.env}: {what} is not allowed "
        f"(routing.sandbox.routes[{route.index}].allow: {rules})"
    )


def outgoing_headers(headers: Iterable[tuple[bytes, bytes]], route: ResolvedRoute) -> Headers:
    """A session's request headers as sent upstream (names lower-cased by the parser)."""
    upstream = route.upstream
    set_here = {name for name, _ in upstream.sent_credential}
    kept = [
        (name, value)
        for name, value in headers
        if name not in _REQUEST_DROPPED and name not in set_here
    ]
    return [(b"host", upstream.origin[2]), *kept, *upstream.sent_credential]


def _same_origin(route: ResolvedRoute, url: str) -> str | None:
    """`url`'s path, query and fragment when it lies on the upstream's origin, else None."""
    origin = route.upstream.origin[0]
    parts = urlsplit(urljoin(route.upstream.base_url + "/", url))
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if (parts.scheme, host, port) != (origin.scheme, origin.host.lower(), origin.port):
        return None
    rest = parts.path or "/"
    if parts.query:
        rest += "?" + parts.query
    if parts.fragment:
        rest += "#" + parts.fragment
    return rest


def rewritten_location(route: ResolvedRoute, value: bytes, here: str) -> bytes:
    """A `Location` as the session gets it: an absolute one on the upstream's origin moved
    onto `here` (the loopback origin); a relative one, or one elsewhere, as it came."""
    text = value.decode("latin-1")
    if not (text.startswith("//") or urlsplit(text).scheme):
        return value  # relative: resolved against the loopback URL the client used
    rest = _same_origin(route, text)
    return value if rest is None else (here + rest).encode("latin-1")


def incoming_headers(
    headers: Iterable[tuple[bytes, bytes]], route: ResolvedRoute, here: str
) -> Headers:
    """An upstream answer's headers as relayed to the session (see the module's rules)."""
    out: Headers = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in _ANSWER_DROPPED:
            continue
        if lowered in _REWRITTEN:
            value = rewritten_location(route, value, here)
        if any(secret in value for secret in route.secrets):
            continue
        out.append((name, value))
    return out


class Scrubber:
    """A body's bytes with every occurrence of the route's secrets masked, as they stream:
    the last `longest - 1` bytes are held back until the next piece (or `end`), so a secret
    split across two pieces is found too."""

    def __init__(self, secrets: Sequence[bytes]) -> None:
        self.secrets = tuple(s for s in secrets if s)
        self.keep = max((len(s) for s in self.secrets), default=1) - 1
        self.held = b""

    def _mask(self, data: bytes) -> bytes:
        for secret in self.secrets:
            if secret in data:
                data = data.replace(secret, b"*" * len(secret))
        return data

    def feed(self, data: bytes) -> bytes:
        """What of `data` (and what was held) may go out now."""
        if not self.secrets:
            return data
        data = self._mask(self.held + data)
        cut = max(0, len(data) - self.keep)
        out, self.held = data[:cut], data[cut:]
        return out

    def end(self) -> bytes:
        """What was held, once the body ended."""
        out, self.held = self._mask(self.held), b""
        return out
