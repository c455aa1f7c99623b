"""The `routing.sandbox` section of the operator config: how a session is confined, what its
network reaches, what it may ask of the model gateway and its share of the devbox. Kept apart
from `operator_config` (which composes it) so each reads in one sitting; `ConfigModel` is the shape
every section of the config shares."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ByteSize, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

# Server tools an operator may allow (`routing.sandbox.modelTools`, checked here):
# the Messages API's, then the Responses API's.
SERVER_TOOLS = (
    "web_search",
    "web_fetch",
    "code_execution",
    "advisor",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "image_generation",
    "computer_use_preview",
)
# The model gateway's limits: the defaults of `routing.sandbox.gateway` and the bounds an
# operator's value must keep (the gateway reads them from here).
BODIES_IN_FLIGHT = 256 * 1024 * 1024  # request bodies held at once, over all sessions
# Connections one pass (one session) may hold at once, and seconds a new connection has to
# send its first request's head.
PER_PASS = 16
HEAD_WAIT = 30.0
# The largest request body the gateway takes (why this size: `SandboxGateway`).
MAX_REQUEST = 32 * 1024 * 1024


class ConfigModel(BaseModel):
    """camelCase keys, unknown keys ignored (reported by `config_findings`), frozen."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        use_attribute_docstrings=True,
    )


class SandboxMode(StrEnum):
    BUBBLEWRAP = "bubblewrap"
    NONE = "none"


class NetworkMode(StrEnum):
    GATEWAYS = "gateways"  # a network namespace of its own: the App, the model, `egress`
    HOST = "host"  # the devbox's own network, shared


# `host:port` (a name, an IPv4 address or a bracketed IPv6 one, and a port 1-65535).
_HOSTPORT_RE = re.compile(
    r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}))"
    r":([0-9]{1,5})$"
)


# `routing.sandbox.egress` names a package ecosystem by these words; what each stands for is
# read from the devbox's own tool configuration when a session launches (`network/presets`).
EGRESS_PRESETS = ("python", "node", "rust", "go")


def normal_hostport(value: str) -> str:
    """One `host:port`, lower-cased, nothing else."""
    found = _HOSTPORT_RE.match(value.strip())
    if found is None or not 0 < int(found.group(2)) < 65536:
        raise ValueError(f"{value!r} is not host:port (e.g. example.org:443)")
    return f"{found.group(1).lower()}:{int(found.group(2))}"


def _egress(value: str) -> str:
    """One `routing.sandbox.egress` entry: `host:port`, or a preset's name."""
    word = value.strip().lower()
    if word in EGRESS_PRESETS:
        return word
    if ":" not in word:
        raise ValueError(f"{value!r} is no preset (one of {', '.join(EGRESS_PRESETS)})")
    return normal_hostport(value)


Egress = Annotated[str, AfterValidator(_egress)]
PRIVILEGED_PORT = 1024


def _service(value: str) -> str:
    """One `routing.sandbox.services` entry: a devbox loopback `host:port` (unprivileged, as
    the relay inside binds it unprivileged) or a unix socket's absolute path."""
    if value.startswith("/"):
        path = Path(value)
        if "\0" in value or len(value) > 100 or len(path.parts) < 3 or ".." in path.parts:
            raise ValueError(f"{value!r} is no usable unix socket path (e.g. /run/app/app.sock)")
        return str(path)
    entry = normal_hostport(value)
    host, _, port = entry.rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        raise ValueError(f"{value!r}: a service is on the devbox's loopback (127.0.0.1:PORT)")
    if int(port) < PRIVILEGED_PORT:
        raise ValueError(f"{value!r}: a service's port is 1024 or above")
    return entry


Service = Annotated[str, AfterValidator(_service)]


def _model_tool(value: str) -> str:
    """One `routing.sandbox.modelTools` entry: a server tool's name, without its version."""
    if value in ("mcp", "mcp_toolset", "mcp_servers"):
        raise ValueError(f"{value!r}: MCP through the model provider is never allowed")
    if value not in SERVER_TOOLS:
        raise ValueError(f"{value!r} is not a server tool (one of {', '.join(SERVER_TOOLS)})")
    return value


ModelTool = Annotated[str, AfterValidator(_model_tool)]


class SandboxGateway(ConfigModel):
    """`routing.sandbox.gateway`: what one session may hold of the spawner's model gateway.
    `connectionsPerSession` connections at once (one more is refused 529, which the harness
    retries); `headTimeoutSeconds` for a new connection's first request head to come before
    it is hung up on; `maxRequestBytes` (bytes, or `48MiB`…) the largest request body it
    takes — a larger one is refused 413 in the API's error shape, unread.

    The default, 32 MiB, is a few MiB above the largest request the harnesses send. The text
    of a full context is small: Claude Code's 200k-token window is about 0.8 MiB of text
    (about four bytes a token) and its 1M-token one about 4 MiB, Codex's ~270k-token input
    about 1.1 MiB, plus a tool list of about 0.1 MiB and JSON's escapes. What makes a
    request large is images and PDFs, sent inline as base64 (a third larger than their
    bytes): up to about 5 MB an image, and the Messages API itself refuses a request above
    32 MB, so no real Claude Code request is larger than the default. An operator whose
    Codex sessions read many large images may raise it (up to the gateway's budget for all
    bodies held at once)."""

    connections_per_session: int = Field(default=PER_PASS, gt=0, le=512)
    head_timeout_seconds: float = Field(default=HEAD_WAIT, gt=0, le=3600)
    max_request_bytes: ByteSize = Field(
        default=ByteSize(MAX_REQUEST), ge=1024 * 1024, le=BODIES_IN_FLIGHT
    )


MIN_SESSION_MEMORY = 64 * 1024 * 1024


def _session_memory(value: ByteSize) -> ByteSize:
    if value < MIN_SESSION_MEMORY:
        raise ValueError(f"{value} bytes is too little for a session (at least 64MiB)")
    return value


class SessionLimits(ConfigModel):
    """`routing.sandbox.limits`: what one session's processes may take of the devbox, all
    together — `memory` (bytes, or `4GiB`, `512MiB`…), `processes` (tasks at once), `cpu`
    (cores' worth of time, e.g. `1.5`) and `disk` (bytes written in its checkout, home and
    `/tmp`). `null` lifts one. Enforced by the best mechanism the
    devbox offers (`spawner/confine/limits.py`); `the-loop doctor` says which."""

    memory: Annotated[ByteSize, AfterValidator(_session_memory)] | None = ByteSize(4 << 30)
    processes: int | None = Field(default=512, ge=8, strict=True)
    cpu: float | None = Field(default=None, gt=0)
    disk: ByteSize | None = Field(
        default=ByteSize(20 << 30),
        description="Bytes one session's checkout, home and /tmp may hold on disk together "
        "(`20GiB`, `500MiB`…); a session past it is stopped (`limit: disk`). null lifts it.",
    )


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_name(value: str) -> str:
    """One `routing.sandbox.env.passEnv` entry: a variable's name, nothing else."""
    if _ENV_NAME_RE.match(value) is None:
        raise ValueError(f"{value!r} is not an environment variable's name (e.g. NODE_OPTIONS)")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


class SessionEnv(ConfigModel):
    """`routing.sandbox.env`: what a session's environment holds beyond what its harness
    needs. `passEnv` lists names whose values the session takes from the spawner's own
    environment (never from a file the session can write); every other name the spawner
    holds stays out. The App's credentials and the model keys are never passed, even when
    listed (`the-loop doctor` says so)."""

    pass_env: list[EnvName] = Field(default_factory=list)


# -- routing.sandbox.routes ---------------------------------------------------------------
# Upstreams a session may use with a credential it never sees. Each route names the variable
# a session finds its loopback URL in (`env`), the upstream the spawner forwards to
# (`upstream`), the credential it adds on the way (`headers`, whose values may hold `${NAME}`
# — the spawner's environment variable NAME — or `${file:/path}` — a file's content,
# stripped — and/or `basicAuth`), and what may pass (`allow`: `METHOD /path-prefix` entries;
# by default any method under the upstream URL's own path). Only the shape is checked here;
# the values are read by the spawner at its start (`spawner/network/routecreds.py`).
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


class BasicAuth(ConfigModel):
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


class CredentialRoute(ConfigModel):
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


class Sandbox(ConfigModel):
    """How sessions are confined (`routing.sandbox`). `mode: none` must be written exactly;
    any other value means bubblewrap (the narrower session). `readOnly` / `readWrite` add
    directories a session may see (e.g. a toolchain installed under the home directory);
    none of them can re-expose the spawner's or the App's own files.

    `shareLogin: true` copies the operator's Claude Code login (`~/.claude/.credentials.json`)
    into every session's home, where the session can read (and send away) its tokens; by
    default no login reaches a session. `apiKeyFile` names a file holding the API key the
    model gateway answers sessions with (else the spawner's `ANTHROPIC_API_KEY`);
    `openaiKeyFile` the OpenAI key it answers Codex sessions with (else `OPENAI_API_KEY`).

    `network: gateways` (the default) gives each session a network of its own that reaches
    only the App, the model gateway and the `egress` hosts (`host:port`, through the
    spawner's allow-listing proxy, or a preset — `python`, `node`, `rust`, `go` — that
    stands for the registries the devbox's own pip, npm, cargo or Go are configured with);
    `network: host` shares the devbox's network. `services` lists devbox-local TCP ports
    (`127.0.0.1:5432`) or unix sockets a closed network's session reaches at the same
    address, relayed in by the spawner; nothing else on the devbox's loopback.

    `modelTools` lists the server tools (run by the model provider, beyond the session's
    network) the model gateway lets a session ask for, e.g. `[web_search]` for Claude Code's
    WebSearch; by default none, and MCP through the provider never.

    `limits` bounds each session's memory, processes and CPU (`SessionLimits`).

    `env` says which of the spawner's environment variables a session gets beyond what its
    harness needs (`SessionEnv`).

    `routes` names upstreams a session in a closed network may use with a credential it
    never sees (`config_sandbox.CredentialRoute`, docs/credential-routes.md)."""

    mode: str = SandboxMode.BUBBLEWRAP.value
    read_only: list[Path] = Field(default_factory=list)
    read_write: list[Path] = Field(default_factory=list)
    share_login: bool = False
    api_key_file: Path | None = None
    network: NetworkMode = NetworkMode.GATEWAYS
    egress: list[Egress] = Field(default_factory=list)
    services: list[Service] = Field(default_factory=list)
    openai_key_file: Path | None = None
    model_tools: list[ModelTool] = Field(default_factory=list)
    gateway: SandboxGateway = SandboxGateway()
    limits: SessionLimits = SessionLimits()
    env: SessionEnv = SessionEnv()
    routes: Routes = Field(default_factory=list)

    @property
    def resolved(self) -> SandboxMode:
        return SandboxMode.NONE if self.mode == "none" else SandboxMode.BUBBLEWRAP
