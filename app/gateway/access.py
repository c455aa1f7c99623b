"""A spawner's model access: the gateway it runs, the operator's credential it answers with,
what each launch is given to reach it, and the `session.usage` events that carry the counts
to the App.

The credential is the operator's: `routing.sandbox.apiKeyFile` in `cli-config.yaml` when it
names one, else the spawner's `ANTHROPIC_API_KEY` (sent as `x-api-key`), else its
`ANTHROPIC_AUTH_TOKEN` (sent as a bearer token, for a proxy that wants one). The upstream is
the spawner's own `ANTHROPIC_BASE_URL` when set, else the public API. The Responses API
(Codex sessions) has its own: `routing.sandbox.openaiKeyFile`, else the spawner's
`OPENAI_API_KEY` (a bearer token), sent to the spawner's `OPENAI_BASE_URL` (ending in the
API version, as OpenAI's clients name it), else `https://api.openai.com/v1`.

A launch gets the gateway's URL and a fresh pass (the item's previous pass dies then); how
the harness is handed them is its adapter's business (Claude Code: `ANTHROPIC_BASE_URL` and
`ANTHROPIC_API_KEY`); when the session ends the pass is
revoked and what the item used so far is reported at once. Between those moments the counts
go out every few seconds, as one event per item that used the model (the App adds them up),
so a stream never waits on a report. Requests the gateway refused for what they would make
the provider's servers do (`reach.py`) go out with them as `gateway.refused` events: the
reason, the kind, the tool's type or the media, how often; never the request's body.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.config import ConfigError, OperatorConfig
from app.files import write_json
from app.gateway.exchange import NO_CREDENTIAL_FOR
from app.gateway.forwarding import PUBLIC_API, Upstream
from app.gateway.metering import Usage
from app.gateway.relay import ModelGateway
from app.gateway.wires import RESPONSES
from app.protocol import REACH_EVENT, USAGE_EVENT

log = logging.getLogger(__name__)

KEY_FILE_KEY = "routing.sandbox.apiKeyFile"
OPENAI_KEY_FILE_KEY = "routing.sandbox.openaiKeyFile"
GATEWAY_FILE = "gateway.json"  # in the spawner's state directory, which no session sees
# The operator's model credentials: read once by the spawner, inherited by no child.
CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
)
Emit = Callable[..., Any]
REASON_LIMIT = 300  # characters of a refusal's reason the App records (a type may be long)


@dataclass(frozen=True)
class SessionModel:
    """What one launch is given: the gateway's URL and its pass (never on a command line).
    `env` / `hidden` are how Claude Code takes them; another harness's adapter hands them
    over its own way."""

    url: str
    key: str = field(repr=False)

    @property
    def env(self) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": self.url} if self.url else {}

    @property
    def hidden(self) -> dict[str, str]:
        return {"ANTHROPIC_API_KEY": self.key}


class ModelAccess:
    """The running gateway and its reporter, for one spawner."""

    def __init__(self, gateway: ModelGateway, emit: Emit, saved: Path | None = None) -> None:
        self.gateway = gateway
        self.emit = emit
        self.saved = saved  # where the port and the live passes' hashes are kept
        self._report_lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._save()

    def _save(self) -> None:
        if self.saved is None:
            return
        with self._save_lock:
            body = {"port": self.gateway.port, "passes": self.gateway.passes.digests()}
            write_json(self.saved, body, 0o600)

    @property
    def upstream(self) -> Upstream:
        return self.gateway.upstream

    def missing_credential(self, wire: str) -> str | None:
        """Why no session speaking `wire`'s API could be answered (the operator gave the
        gateway no credential for it), or None when it can be."""
        if self.gateway.upstreams[wire].has_credential:
            return None
        return NO_CREDENTIAL_FOR[wire]

    def for_session(self, work_item_id: str) -> SessionModel:
        """A new pass for `work_item_id`'s next launch (the previous one stops working)."""
        token = self.gateway.passes.mint(work_item_id)
        self.gateway.allow(work_item_id)  # the App launches only an item it lets spend
        self._save()
        return SessionModel(self.gateway.url, token)

    def end(self, work_item_id: str) -> None:
        """The session ended: its pass dies and what it used is reported now."""
        if self.gateway.passes.revoke(work_item_id):
            self._save()
        self.gateway.tally.close(work_item_id)
        self.report(work_item_id)

    def report(self, work_item_id: str | None = None) -> int:
        """Emit what was counted since the last report (one item, or all) and the requests
        refused meanwhile; how many usage events."""
        with self._report_lock:
            counted = self.gateway.tally.drain(work_item_id)
            for item, usage in counted.items():
                self._emit(item, usage)
            for item, (refusals, folded) in self.gateway.refusal_log.take(work_item_id).items():
                for refused, times in refusals.items():
                    self.emit(
                        REACH_EVENT,
                        item,
                        level="warning",
                        reason=refused.reason[:REASON_LIMIT],
                        kind=refused.kind,
                        what=refused.what,
                        times=times,
                        folded=folded,
                    )
                    folded = 0  # told once
        return len(counted)

    def _emit(self, work_item_id: str, usage: Usage) -> None:
        self.emit(USAGE_EVENT, work_item_id, **usage.to_json())

    def run(self, stop: threading.Event, interval: float = 5.0) -> None:
        """Report every `interval` until `stop`, then once more."""
        while not stop.wait(interval):
            try:
                self.report()
            except Exception:  # a failed report must not end the reporter
                log.exception("model usage report failed")
        self.report()

    def close(self) -> None:
        self.report()
        self.gateway.stop()


def _key_from_file(config: OperatorConfig, path: Path | None, name: str = KEY_FILE_KEY) -> str:
    assert path is not None
    where = path.expanduser()
    try:
        key = where.read_text().strip()
    except OSError as exc:
        raise ConfigError(
            f"{config.source}: {name}: {where} cannot be read ({exc.strerror})"
        ) from exc
    if not key or any(c.isspace() for c in key):
        raise ConfigError(f"{config.source}: {name}: {where} must hold one API key")
    return key


def upstream_for(config: OperatorConfig, env: Mapping[str, str]) -> Upstream:
    """The upstream and credential the spawner's gateway uses; raises `ConfigError` naming the
    key and the file when the configured key file cannot be used."""
    base = (env.get("ANTHROPIC_BASE_URL") or "").strip().rstrip("/") or PUBLIC_API
    if config.routing.sandbox.api_key_file is not None:
        key = _key_from_file(config, config.routing.sandbox.api_key_file)
        return Upstream(base, ((b"x-api-key", key.encode()),), KEY_FILE_KEY)
    if env.get("ANTHROPIC_API_KEY"):
        return Upstream(base, ((b"x-api-key", env["ANTHROPIC_API_KEY"].encode()),), "env")
    if env.get("ANTHROPIC_AUTH_TOKEN"):
        bearer = b"Bearer " + env["ANTHROPIC_AUTH_TOKEN"].encode()
        return Upstream(base, ((b"authorization", bearer),), "env-bearer")
    return Upstream(base)


def openai_upstream_for(config: OperatorConfig, env: Mapping[str, str]) -> Upstream:
    """The Responses API's upstream and credential (Codex sessions); raises `ConfigError`
    naming the key and the file when the configured key file cannot be used."""
    base = (env.get("OPENAI_BASE_URL") or "").strip().rstrip("/") or RESPONSES.public_base
    path = config.routing.sandbox.openai_key_file
    if path is not None:
        key = _key_from_file(config, path, OPENAI_KEY_FILE_KEY)
        return Upstream(base, ((b"authorization", b"Bearer " + key.encode()),), OPENAI_KEY_FILE_KEY)
    if env.get("OPENAI_API_KEY"):
        bearer = b"Bearer " + env["OPENAI_API_KEY"].encode()
        return Upstream(base, ((b"authorization", bearer),), "env-openai")
    return Upstream(base)


def needs_gateway(
    config: OperatorConfig, upstream: Upstream, responses: Upstream | None = None
) -> bool:
    """Sessions go through the gateway unless the operator shares a login and the spawner has
    no key: then they use that login directly (and their usage is not counted here)."""
    keyed = upstream.has_credential or (responses is not None and responses.has_credential)
    return keyed or not config.routing.sandbox.share_login


def _kept(saved: Path | None) -> dict[str, Any]:
    try:
        data = json.loads(saved.read_text()) if saved is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def open_model_access(
    config: OperatorConfig,
    env: Mapping[str, str],
    emit: Emit,
    *,
    state_dir: Path | None = None,
    live: Iterable[str] = (),
) -> ModelAccess | None:
    """Start the gateway a spawner's sessions reach the model through (None: they use the
    shared login directly). Raises `ConfigError` for a key file that cannot be used.

    With `state_dir`, the gateway takes the port it had before when it is free, and takes
    back the passes of the `live` work items' sessions, which hold its URL and their pass.
    """
    upstream = upstream_for(config, env)
    responses = openai_upstream_for(config, env)
    if not needs_gateway(config, upstream, responses):
        return None
    saved = state_dir / GATEWAY_FILE if state_dir is not None else None
    kept = _kept(saved)
    caps = config.routing.sandbox.gateway
    options: dict[str, Any] = {
        "responses": responses,
        "model_tools": frozenset(config.routing.sandbox.model_tools),
        "per_pass": caps.connections_per_session,
        "head_wait": caps.head_timeout_seconds,
        "max_request_bytes": int(caps.max_request_bytes),
    }
    gateway = ModelGateway(upstream, **options)
    port = kept.get("port")
    if isinstance(port, int) and 0 < port < 65536:
        gateway.port = port
    try:
        gateway.start()
    except (RuntimeError, OSError):  # the old port is taken: a new one
        gateway = ModelGateway(upstream, **options).start()
    found = kept.get("passes")
    passes: dict[str, Any] = found if isinstance(found, dict) else {}
    for item in set(live) & set(passes):
        digest = passes[item]
        if isinstance(digest, str) and len(digest) == 64:
            with contextlib.suppress(ValueError):
                gateway.passes.admit(item, digest)
    return ModelAccess(gateway, emit, saved)


def without_credentials(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the operator's model credentials."""
    return {k: v for k, v in env.items() if k not in CREDENTIAL_VARIABLES}
