"""What the model gateway sends on: where (the upstream), with which credential, and which
headers cross in each direction. Pure, but for `upstream_for` reading the operator's key file.

The credential is the operator's: `routing.sandbox.apiKeyFile` in `cli-config.yaml` when it
names one, else the spawner's `ANTHROPIC_API_KEY` (sent as `x-api-key`), else its
`ANTHROPIC_AUTH_TOKEN` (sent as a bearer token, for a proxy that wants one). The upstream is
the spawner's own `ANTHROPIC_BASE_URL` when set, else the public API. A session's own
credential headers never cross: the pass it holds is worth nothing beyond the gateway.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.config import ConfigError, OperatorConfig

PUBLIC_API = "https://api.anthropic.com"
KEY_FILE_KEY = "routing.sandbox.apiKeyFile"
# Hop-by-hop headers (RFC 9110 7.6.1) and the ones the gateway sets itself.
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_REQUEST_DROPPED = _HOP | {b"host", b"content-length", b"x-api-key", b"authorization", b"cookie"}
_RESPONSE_DROPPED = _HOP | {b"set-cookie"}
Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Upstream:
    """Where answers come from and the operator's credential header for it."""

    base_url: str = PUBLIC_API
    credential: tuple[tuple[bytes, bytes], ...] = field(default=(), repr=False)
    source: str = "none"  # what the credential came from, for the operator's eyes

    @property
    def has_credential(self) -> bool:
        return bool(self.credential)


def _key_from_file(config: OperatorConfig) -> str:
    path = config.routing.sandbox.api_key_file
    assert path is not None
    where = path.expanduser()
    try:
        key = where.read_text().strip()
    except OSError as exc:
        raise ConfigError(
            f"{config.source}: {KEY_FILE_KEY}: {where} cannot be read ({exc.strerror})"
        ) from exc
    if not key or any(c.isspace() for c in key):
        raise ConfigError(f"{config.source}: {KEY_FILE_KEY}: {where} must hold one API key")
    return key


def upstream_for(config: OperatorConfig, env: Mapping[str, str]) -> Upstream:
    """The upstream and credential the spawner's gateway uses; raises `ConfigError` naming the
    key and the file when the configured key file cannot be used."""
    base = (env.get("ANTHROPIC_BASE_URL") or "").strip().rstrip("/") or PUBLIC_API
    if config.routing.sandbox.api_key_file is not None:
        key = _key_from_file(config)
        return Upstream(base, ((b"x-api-key", key.encode()),), KEY_FILE_KEY)
    if env.get("ANTHROPIC_API_KEY"):
        return Upstream(base, ((b"x-api-key", env["ANTHROPIC_API_KEY"].encode()),), "env")
    if env.get("ANTHROPIC_AUTH_TOKEN"):
        bearer = b"Bearer " + env["ANTHROPIC_AUTH_TOKEN"].encode()
        return Upstream(base, ((b"authorization", bearer),), "env-bearer")
    return Upstream(base)


def presented_token(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The credential a request presents: its `x-api-key`, else its bearer token."""
    bearer = ""
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"x-api-key":
            return value.decode("latin-1").strip()
        if lowered == b"authorization" and value[:7].lower() == b"bearer ":
            bearer = value[7:].decode("latin-1").strip()
    return bearer


def upstream_headers(headers: Iterable[tuple[bytes, bytes]], upstream: Upstream) -> Headers:
    """A session's request headers as sent upstream: its credential replaced by the
    operator's, hop-by-hop headers dropped, answers asked for uncompressed (so the usage in
    them can be read on the way back)."""
    kept = [
        (name, value)
        for name, value in headers
        if name.lower() not in _REQUEST_DROPPED and name.lower() != b"accept-encoding"
    ]
    return [*kept, *upstream.credential, (b"accept-encoding", b"identity")]


def downstream_headers(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """An upstream answer's headers as relayed to the session."""
    return [(n, v) for n, v in headers if n.lower() not in _RESPONSE_DROPPED]


def error_body(kind: str, message: str) -> bytes:
    """An error in the Messages API's own shape, so the harness shows it as the API's."""
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
