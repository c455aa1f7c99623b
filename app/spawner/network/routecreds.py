"""A credential route's credential, resolved once when the spawner starts. Pure: the
spawner's environment and a file reader are handed in.

`headers` values expand `${NAME}` from the spawner's environment and `${file:/path}` from a
file (its content, blanks around it stripped); `basicAuth` becomes `Authorization: Basic …`.
A reference that cannot be resolved — an unset or empty variable, an unreadable or empty
file, a value that would break the header line — is a `ConfigError` naming the key and the
config file, so the spawner stops before any session relies on the route. What was read is
kept as the route's `secrets` too: every answer the route relays is scrubbed of them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.config import (
    REFERENCE,
    BasicAuth,
    ConfigError,
    CredentialRoute,
    NetworkMode,
    Sandbox,
    SandboxMode,
)
from app.gateway import UnsupportedProtocol, Upstream, field_allowed

ReadFile = Callable[[Path], str]
KEY = "routing.sandbox.routes"
MIN_SECRET = 4  # a shorter value is not scrubbed from answers (it would mangle them)


@dataclass(frozen=True)
class ResolvedRoute:
    """A route ready to serve: where it goes, what it adds, what it lets pass, and the
    values no answer may carry (`secrets`). `variables` are the spawner's environment
    variables it read (no child of the spawner inherits them)."""

    index: int
    env: str
    upstream: Upstream
    allow: tuple[tuple[str, str], ...]  # (method or "*", path prefix)
    secrets: tuple[bytes, ...] = field(default=(), repr=False)
    variables: frozenset[str] = frozenset()
    files: frozenset[Path] = frozenset()  # what it read its credential from (hidden from sessions)

    @property
    def base_path(self) -> str:
        return self.upstream.origin[1].decode("latin-1") or "/"


def default_allow(base_path: str) -> tuple[tuple[str, str], ...]:
    """Any method under the upstream URL's own path, when `allow` names nothing."""
    return (("*", base_path or "/"),)


class _Reader:
    def __init__(self, env: Mapping[str, str], read: ReadFile, key: str) -> None:
        self.env, self.read, self.key = env, read, key
        self.variables: set[str] = set()
        self.files: set[Path] = set()
        self.secrets: list[str] = []

    def variable(self, name: str, key: str) -> str:
        value = self.env.get(name, "")
        if not value:
            raise ConfigError(f"{key}: the spawner's environment has no {name}")
        self.variables.add(name)
        self.secrets.append(value)
        return value

    def file(self, path: Path, key: str) -> str:
        try:
            value = self.read(path.expanduser()).strip()
        except OSError as exc:
            raise ConfigError(f"{key}: {path} cannot be read ({exc.strerror or exc})") from exc
        except UnicodeDecodeError:
            raise ConfigError(f"{key}: {path} is not text") from None
        if not value:
            raise ConfigError(f"{key}: {path} is empty")
        self.files.add(path.expanduser())
        self.secrets.append(value)
        return value

    def template(self, text: str, key: str) -> str:
        def one(found: object) -> str:
            group = found.group  # type: ignore[attr-defined]
            if group("file"):
                return self.file(Path(group("file")), key)
            return self.variable(group("env"), key)

        return REFERENCE.sub(one, text)

    def basic(self, auth: BasicAuth, key: str) -> str:
        if auth.username is not None:
            user = auth.username
        elif auth.username_env is not None:
            user = self.variable(auth.username_env, f"{key}.usernameEnv")
        else:
            assert auth.username_file is not None
            user = self.file(auth.username_file, f"{key}.usernameFile")
        if auth.password_env is not None:
            password = self.variable(auth.password_env, f"{key}.passwordEnv")
        else:
            assert auth.password_file is not None
            password = self.file(auth.password_file, f"{key}.passwordFile")
        if ":" in user:
            raise ConfigError(f"{key}: a basic-auth user name holds no colon")
        pair = f"{user}:{password}"
        token = base64.b64encode(pair.encode()).decode("ascii")
        self.secrets += [pair, token]
        return "Basic " + token


def resolve_route(
    route: CredentialRoute, index: int, env: Mapping[str, str], read: ReadFile, source: str
) -> ResolvedRoute:
    """`route` with its credential read (raises `ConfigError` naming the key and `source`)."""
    key = f"{source}: {KEY}[{index}]"
    reader = _Reader(env, read, key)
    headers: list[tuple[bytes, bytes]] = []
    for label, text in route.headers.items():
        value = reader.template(text, f"{key}.headers.{label}")
        headers.append((label.lower().encode("ascii"), value.encode("latin-1", "replace")))
    if route.basic_auth is not None:
        basic = reader.basic(route.basic_auth, f"{key}.basicAuth")
        headers.append((b"authorization", basic.encode("ascii")))
    for name, sent in headers:
        if not field_allowed(name, sent) or not sent.isascii():
            where = f"{key}.headers.{name.decode()}"
            raise ConfigError(f"{where}: the value is not one line of visible ASCII")
    upstream = Upstream(route.upstream, tuple(headers), f"{KEY}[{index}]")
    try:
        base = upstream.origin[1].decode("latin-1") or "/"
    except UnsupportedProtocol as exc:
        raise ConfigError(f"{key}.upstream: {exc}") from exc
    rules = tuple(_rule(entry) for entry in route.allow) or default_allow(base)
    secrets = {value.encode() for value in reader.secrets if len(value) >= MIN_SECRET}
    secrets |= {value for _, value in headers if len(value) >= MIN_SECRET}
    ordered = tuple(sorted(secrets, key=len, reverse=True))
    return ResolvedRoute(
        index,
        route.env,
        upstream,
        rules,
        ordered,
        frozenset(reader.variables),
        frozenset(reader.files),
    )


def _rule(entry: str) -> tuple[str, str]:
    method, _, prefix = entry.partition(" ")
    return method, prefix


def routes_problem(sandbox: Sandbox) -> str | None:
    """Why `sandbox`'s routes cannot be served (they need a session in a network of its
    own, where the loopback URL is the session's alone), or None."""
    if not sandbox.routes:
        return None
    if sandbox.resolved is SandboxMode.NONE:
        return "needs routing.sandbox.mode: bubblewrap (an unconfined session shares the host)"
    if sandbox.network is not NetworkMode.GATEWAYS:
        return (
            "needs routing.sandbox.network: gateways (on the host's network any process "
            "could use the route)"
        )
    return None


def resolve_routes(
    sandbox: Sandbox, env: Mapping[str, str], read: ReadFile, source: str
) -> tuple[ResolvedRoute, ...]:
    """Every route of `sandbox`, resolved; raises `ConfigError` naming the key and `source`."""
    problem = routes_problem(sandbox)
    if problem is not None:
        raise ConfigError(f"{source}: {KEY}: {problem}")
    return tuple(resolve_route(r, i, env, read, source) for i, r in enumerate(sandbox.routes))


def variables_of(routes: Iterable[ResolvedRoute]) -> frozenset[str]:
    """The spawner's environment variables the routes read (to be removed from it)."""
    return frozenset().union(*(route.variables for route in routes))


def read_text(path: Path) -> str:
    """The file reader the spawner hands `resolve_routes`."""
    return path.read_text()
