"""`routing.sandbox.routes`: upstreams a session may use with a credential it never sees.

Each route names the variable a session finds its loopback URL in (`env`), the upstream the
spawner forwards to (`upstream`), the credential it adds on the way (`headers`, whose values
may hold `${NAME}` — the spawner's environment variable NAME — or `${file:/path}` — a file's
content, stripped — and/or `basicAuth`), and what may pass (`allow`: `METHOD /path-prefix`
entries; by default any method under the upstream URL's own path). Only the shape is checked
here; the values are read by the spawner at its start (`spawner/network/routecreds.py`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# What a session's environment needs for itself: no route may take one of these names.
RESERVED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "PWD",
        "TMPDIR",
        "LANG",
        "TZ",
        "TMUX",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "CURL_CA_BUNDLE",
    }
)
RESERVED_PREFIXES = (
    "ANTHROPIC_",
    "THE_LOOP_",
    "CLAUDE_",
    "CODEX_",
    "OPENAI_",
    "GIT_",
    "LD_",
    "LC_",
    "XDG_",
    "BASH_",
)
_TOKEN = re.compile(r"^[-!#$%&'*+.^_`|~0-9A-Za-z]+$")
# `${NAME}` (the spawner's environment) or `${file:/absolute/path}` (a file's content).
REFERENCE = re.compile(r"\$\{(?:file:(?P<file>/[^}]+)|(?P<env>[A-Za-z_][A-Za-z0-9_]*))\}")
_METHODS = re.compile(r"^(\*|[A-Z]{1,16})$")
NEVER_METHODS = frozenset({"CONNECT", "TRACE"})  # a tunnel, or an echo of the credential


def _route_env(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"{value!r} is not an environment variable's name")
    upper = value.upper()
    if upper in RESERVED_NAMES or upper.startswith(RESERVED_PREFIXES):
        raise ValueError(f"{value!r} is a variable the session's environment sets itself")
    return value


def _upstream(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("the credential goes in `headers` or `basicAuth`, not in the URL")
    if parts.query or parts.fragment:
        raise ValueError("an upstream URL has no query or fragment")
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        raise ValueError(f"{value!r}: {exc}") from None
    return value.rstrip("/")


def _allow(value: str) -> str:
    method, _, prefix = value.strip().partition(" ")
    prefix = prefix.strip()
    if not _METHODS.match(method) or method in NEVER_METHODS:
        raise ValueError(f"{value!r}: a method in capitals (or *), e.g. `GET /simple/`")
    if not prefix.startswith("/") or any(c.isspace() for c in prefix):
        raise ValueError(f"{value!r}: the path prefix starts with / (e.g. `GET /simple/`)")
    return f"{method} {prefix}"


def _header_name(value: str) -> str:
    if not _TOKEN.match(value):
        raise ValueError(f"{value!r} is not a header name")
    return value


def _template(value: str) -> str:
    rest = REFERENCE.sub("", value)
    if "${" in rest:
        raise ValueError(f"{value!r}: write `${{NAME}}` or `${{file:/absolute/path}}`")
    if any(not 0x20 <= ord(c) <= 0x7E for c in rest):
        raise ValueError("a header value holds visible ASCII characters only")
    return value


RouteEnv = Annotated[str, AfterValidator(_route_env)]
Upstream = Annotated[str, AfterValidator(_upstream)]
AllowRule = Annotated[str, AfterValidator(_allow)]
HeaderName = Annotated[str, AfterValidator(_header_name)]
HeaderTemplate = Annotated[str, AfterValidator(_template)]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class BasicAuth(_Model):
    """`basicAuth`: the user name (`username`, `usernameEnv` or `usernameFile`) and the
    password (`passwordEnv` or `passwordFile`), sent as `Authorization: Basic …`."""

    username: str | None = None
    username_env: str | None = None
    username_file: Path | None = None
    password_env: str | None = None
    password_file: Path | None = None

    @model_validator(mode="after")
    def _one_of_each(self) -> BasicAuth:
        users = [self.username, self.username_env, self.username_file]
        if sum(u is not None for u in users) != 1:
            raise ValueError("name the user once: username, usernameEnv or usernameFile")
        if (self.password_env is None) == (self.password_file is None):
            raise ValueError("name the password once: passwordEnv or passwordFile")
        return self


class CredentialRoute(_Model):
    """One entry of `routing.sandbox.routes`: the session sees `env` set to
    `http://127.0.0.1:<port>` plus the upstream's path; what it sends there goes to
    `upstream` with `headers` (and `basicAuth`) added, if `allow` lets it pass."""

    env: RouteEnv
    upstream: Upstream
    headers: dict[HeaderName, HeaderTemplate] = Field(default_factory=dict)
    basic_auth: BasicAuth | None = None
    allow: list[AllowRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _no_double_authorization(self) -> CredentialRoute:
        named = {name.lower() for name in self.headers}
        if self.basic_auth is not None and "authorization" in named:
            raise ValueError("give `basicAuth` or an Authorization header, not both")
        return self


def distinct_routes(routes: list[CredentialRoute]) -> list[CredentialRoute]:
    """`routes`, each variable named once."""
    names = [route.env for route in routes]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"two routes set {name}")
    return routes


Routes = Annotated[list[CredentialRoute], AfterValidator(distinct_routes)]
