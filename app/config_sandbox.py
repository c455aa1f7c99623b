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

from app.config_routes import Routes
from app.gateway.reach import SERVER_TOOLS
from app.gateway.relay import HEAD_WAIT, PER_PASS


class ConfigModel(BaseModel):
    """camelCase keys, unknown keys ignored (reported by `config_findings`), frozen."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
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


def _hostport(value: str) -> str:
    """One `routing.sandbox.egress` entry, lower-cased: `host:port`, nothing else."""
    found = _HOSTPORT_RE.match(value.strip())
    if found is None or not 0 < int(found.group(2)) < 65536:
        raise ValueError(f"{value!r} is not host:port (e.g. pypi.org:443)")
    return f"{found.group(1).lower()}:{int(found.group(2))}"


HostPort = Annotated[str, AfterValidator(_hostport)]


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
    it is hung up on."""

    connections_per_session: int = Field(default=PER_PASS, gt=0, le=512)
    head_timeout_seconds: float = Field(default=HEAD_WAIT, gt=0, le=3600)


MIN_SESSION_MEMORY = 64 * 1024 * 1024


def _session_memory(value: ByteSize) -> ByteSize:
    if value < MIN_SESSION_MEMORY:
        raise ValueError(f"{value} bytes is too little for a session (at least 64MiB)")
    return value


class SessionLimits(ConfigModel):
    """`routing.sandbox.limits`: what one session's processes may take of the devbox, all
    together — `memory` (bytes, or `4GiB`, `512MiB`…), `processes` (tasks at once) and `cpu`
    (cores' worth of time, e.g. `1.5`). `null` lifts one. Enforced by the best mechanism the
    devbox offers (`spawner/confine/limits.py`); `the-loop doctor` says which."""

    memory: Annotated[ByteSize, AfterValidator(_session_memory)] | None = ByteSize(4 << 30)
    processes: int | None = Field(default=512, ge=8, strict=True)
    cpu: float | None = Field(default=None, gt=0)


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
    spawner's allow-listing proxy); `network: host` shares the devbox's network.

    `modelTools` lists the server tools (run by the model provider, beyond the session's
    network) the model gateway lets a session ask for, e.g. `[web_search]` for Claude Code's
    WebSearch; by default none, and MCP through the provider never.

    `limits` bounds each session's memory, processes and CPU (`SessionLimits`).

    `routes` names upstreams a session in a closed network may use with a credential it
    never sees (`config_routes.CredentialRoute`, docs/credential-routes.md)."""

    mode: str = SandboxMode.BUBBLEWRAP.value
    read_only: list[Path] = Field(default_factory=list)
    read_write: list[Path] = Field(default_factory=list)
    share_login: bool = False
    api_key_file: Path | None = None
    network: NetworkMode = NetworkMode.GATEWAYS
    egress: list[HostPort] = Field(default_factory=list)
    openai_key_file: Path | None = None
    model_tools: list[ModelTool] = Field(default_factory=list)
    gateway: SandboxGateway = SandboxGateway()
    limits: SessionLimits = SessionLimits()
    routes: Routes = Field(default_factory=list)

    @property
    def resolved(self) -> SandboxMode:
        return SandboxMode.NONE if self.mode == "none" else SandboxMode.BUBBLEWRAP
