"""The operator credential: who may read the status page and `/status`, and press its buttons.

One secret, `THE_LOOP_ADMIN_TOKEN`, proves an operator. It is accepted as
`Authorization: Bearer <token>`, or once as `?token=<token>` on a page URL: that login sets a
session cookie (HttpOnly, SameSite=Strict) and redirects to the same page without the token,
so it leaves the address bar and the history. Where the request comes from never counts:
behind the tunnel or proxy that delivers webhooks every caller looks like loopback.

A session cookie is `<issued>.<nonce>.<mac>`, the MAC keyed by the admin token, so it needs
no server-side store, expires after `SESSION_SECONDS`, and dies when the token changes.
Each session has its own CSRF token (a MAC of its nonce) for the page's forms. Every
comparison of a secret is constant-time. Everything here is pure; `views` is the Flask glue.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum

COOKIE = "the_loop_admin"
SESSION_SECONDS = 12 * 3600
NOT_CONFIGURED = (
    "No operator credential is configured: set THE_LOOP_ADMIN_TOKEN (at least 16 characters, "
    "e.g. `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`) in the App's "
    "environment or .env and restart it; `the-loop up` writes one on its first run."
)
CREDENTIAL_NEEDED = (
    "This page needs the operator credential: `Authorization: Bearer <THE_LOOP_ADMIN_TOKEN>`, "
    "or open it once as /?token=<THE_LOOP_ADMIN_TOKEN> to sign in this browser."
)


class Access(StrEnum):
    """How a request proved (or failed to prove) it is the operator's."""

    BEARER = "bearer"
    COOKIE = "cookie"
    LOGIN = "login"  # a correct `?token=`: set the cookie and drop the token from the URL
    NOT_CONFIGURED = "not-configured"  # no admin token: nobody may enter
    DENIED = "denied"


@dataclass(frozen=True)
class AccessVerdict:
    access: Access
    nonce: str = ""  # the session's nonce, for its CSRF token (cookie access only)

    @property
    def allowed(self) -> bool:
        return self.access in (Access.BEARER, Access.COOKIE, Access.LOGIN)


def same_secret(given: str, expected: str) -> bool:
    """Constant-time equality of two secrets (of any lengths)."""
    return hmac.compare_digest(given.encode(), expected.encode())


def _mac(admin_token: str, purpose: str, text: str) -> str:
    key = hashlib.sha256(b"the-loop operator key\0" + admin_token.encode()).digest()
    return hmac.new(key, f"{purpose}\0{text}".encode(), hashlib.sha256).hexdigest()


def mint_session(admin_token: str, now: float) -> str:
    """A new session cookie value, valid for SESSION_SECONDS from `now`."""
    body = f"{int(now)}.{secrets.token_urlsafe(18)}"
    return f"{body}.{_mac(admin_token, 'session', body)}"


def session_nonce(cookie: str | None, admin_token: str, now: float) -> str | None:
    """The nonce of a valid, unexpired session cookie, else None."""
    parts = (cookie or "").split(".")
    if len(parts) != 3 or not parts[0].isdigit():
        return None
    issued, nonce, mac = parts
    if not same_secret(mac, _mac(admin_token, "session", f"{issued}.{nonce}")):
        return None
    if not 0 <= now - int(issued) <= SESSION_SECONDS:
        return None
    return nonce


def csrf_token(admin_token: str, nonce: str) -> str:
    """The CSRF token of one session: forms carry it, the POST handler checks it."""
    return _mac(admin_token, "csrf", nonce)


def csrf_ok(admin_token: str, nonce: str, submitted: str | None) -> bool:
    return bool(nonce) and same_secret(submitted or "", csrf_token(admin_token, nonce))


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` header, else None."""
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def decide(
    admin_token: str | None,
    *,
    authorization: str | None,
    query_token: str | None,
    cookie: str | None,
    now: float,
) -> AccessVerdict:
    """Whether a request is the operator's, and how it proved it (pure).

    A credential that is present but wrong denies, even when another one would pass: a
    caller gets one answer for what it sent, not a search over its headers.
    """
    if not admin_token:
        return AccessVerdict(Access.NOT_CONFIGURED)
    sent = bearer(authorization)
    if sent is not None:
        return AccessVerdict(Access.BEARER if same_secret(sent, admin_token) else Access.DENIED)
    if query_token is not None:
        return AccessVerdict(
            Access.LOGIN if same_secret(query_token, admin_token) else Access.DENIED
        )
    nonce = session_nonce(cookie, admin_token, now)
    return AccessVerdict(Access.COOKIE, nonce) if nonce else AccessVerdict(Access.DENIED)
