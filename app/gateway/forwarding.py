"""What the model gateway sends on: where (the upstream), with which credential (chosen by
`access.upstream_for`), and which headers cross in each direction. Pure. A session's own
credential headers never cross: the pass it holds is worth nothing beyond the gateway.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import urlsplit

from app.gateway.framing import field_allowed
from app.gateway.transport import Headers, UnsupportedProtocol, UpstreamOrigin
from app.gateway.wires import MESSAGES, wire_for

PUBLIC_API = "https://api.anthropic.com"
_PORTS = {"http": 80, "https": 443}
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
_REQUEST_DROPPED = _HOP | {
    b"host",
    b"content-length",
    b"x-api-key",
    b"authorization",
    b"cookie",
    b"accept-encoding",
}
_RESPONSE_DROPPED = _HOP | {b"set-cookie"}


@dataclass(frozen=True)
class Upstream:
    """Where answers come from and the operator's credential header for it."""

    base_url: str = PUBLIC_API
    credential: tuple[tuple[bytes, bytes], ...] = field(default=(), repr=False)
    source: str = "none"  # what the credential came from, for the operator's eyes

    @property
    def has_credential(self) -> bool:
        return bool(self.credential)

    @cached_property
    def origin(self) -> tuple[UpstreamOrigin, bytes, bytes]:
        """`base_url` parsed once, as (where to connect, its path, the `Host` header naming
        it): each request's target is built from them rather than parsed whole again."""
        parts = urlsplit(self.base_url)
        scheme = parts.scheme.lower()
        try:
            if scheme not in _PORTS or not parts.hostname:
                raise ValueError("not an http(s) URL")
            port = parts.port or _PORTS[scheme]
            host = parts.hostname.encode("idna")
        except ValueError as exc:  # a scheme, port or host name no request can go to
            raise UnsupportedProtocol(f"the upstream {self.base_url!r}: {exc}") from exc
        host = b"[%b]" % host if b":" in host else host
        named = host if port == _PORTS[scheme] else b"%b:%d" % (host, port)
        path = parts.path.encode("latin-1")
        if not all(0x21 <= byte <= 0x7E for byte in path):
            raise UnsupportedProtocol(
                f"the upstream {self.base_url!r}: its path must be URL-encoded"
            )
        return UpstreamOrigin(scheme, parts.hostname, port), path, named

    @cached_property
    def sent_credential(self) -> tuple[tuple[bytes, bytes], ...]:
        """`credential`, checked once to be header lines (a key holding a line break would
        add headers of its own to every request)."""
        if not all(field_allowed(name, value) for name, value in self.credential):
            raise UnsupportedProtocol(f"the credential from {self.source} is not one header line")
        return self.credential

    def target(self, path: bytes) -> bytes:
        """The upstream request target of `path` (origin form, query allowed) below
        `base_url`'s path."""
        return self.origin[1] + path.split(b"#", 1)[0]


def forwarded(method: bytes, target: bytes) -> bool:
    """Whether a request for `target` (origin form, query allowed) goes upstream: what a
    session may ask of the model with the operator's key is a model API's own requests
    (`wires.py`); nothing else of the account (files, batches, models, admin) is reachable."""
    return wire_for(method, target) is not None


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


def upstream_headers(
    headers: Iterable[tuple[bytes, bytes]], upstream: Upstream, length: int
) -> Headers:
    """A session's request headers as sent upstream with a body of `length` bytes: the
    upstream's `Host`, its credential replaced by the operator's, hop-by-hop headers dropped,
    answers asked for uncompressed (so the usage in them can be read on the way back)."""
    kept = [(name, value) for name, value in headers if name.lower() not in _REQUEST_DROPPED]
    return [
        (b"host", upstream.origin[2]),
        *kept,
        *upstream.sent_credential,
        (b"accept-encoding", b"identity"),
        (b"content-length", b"%d" % length),
    ]


def downstream_headers(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """An upstream answer's headers as relayed to the session."""
    return [(n, v) for n, v in headers if n.lower() not in _RESPONSE_DROPPED]


def error_body(kind: str, message: str) -> bytes:
    """An error in the Messages API's own shape, so the harness shows it as the API's."""
    return MESSAGES.error_body(kind, message)
