"""The `routing.sandbox` section of the operator config: how a session is confined, what its
network reaches, what it may ask of the model gateway and its share of the devbox. Kept apart
from `app.config` (which composes it) so each reads in one sitting; `ConfigModel` is the shape
every section of the config shares."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ByteSize, ConfigDict, Field
from pydantic.alias_generators import to_camel

from app.gateway.reach import SERVER_TOOLS
from app.gateway.relay import BODIES_IN_FLIGHT, HEAD_WAIT, MAX_REQUEST, PER_PASS


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
    harness needs (`SessionEnv`)."""

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

    @property
    def resolved(self) -> SandboxMode:
        return SandboxMode.NONE if self.mode == "none" else SandboxMode.BUBBLEWRAP
