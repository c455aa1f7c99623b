"""`/git/<owner>/<repo>.git/…`: the App's git gateway, git's smart HTTP passed to GitHub.

A session's `origin` points here. Three requests make up every fetch and push —
`GET info/refs?service=git-upload-pack|git-receive-pack`, `POST git-upload-pack`,
`POST git-receive-pack` — and each is checked (`app.gitgate.git_access`: the session's own
token, its own repository, its session live) before it is forwarded, with the App's
installation token in place of the session's, to the repository the App recorded. Bodies
stream both ways, up to `GIT_MAX_BODY`. A push is read only as far as its ref updates
(`app.gitgate.push_rules`): one that touches anything but the item's work branch never
reaches GitHub; the session's git is told why in git's own report, and the App records a
`git.push_refused` event. Nothing else (dumb HTTP, other services) is served.

Unlike the JSON `/spawner/v1` API (`app.fleet.api_guard`), a refusal here is text/plain: git's
client shows such a body to its user as `remote: the-loop: …` lines, and shows nothing of
a JSON one. `_plain` is this blueprint's one refusal shape.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from typing import IO

import httpx
from flask import Blueprint, Response, current_app, request
from githubkit.exception import GitHubException
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wsgi import get_input_stream

from app.fleet import SESSION_PREFIX, authenticate, loop_state
from app.gitgate.git_access import (
    RECEIVE,
    SERVICES,
    UPSTREAM_USER,
    AccessRefused,
    UpstreamTokens,
    check,
    repository_of,
    upstream_url,
)
from app.gitgate.push_rules import (
    MAX_HEAD,
    MalformedPush,
    PushHead,
    parse_head,
    refusals,
    report_refused,
    summary,
)
from app.github import GitHubNotConfigured
from app.ingress import GIT_MAX_BODY, BodyCut, basic_password
from app.store import WorkItem

bp = Blueprint("git", __name__, url_prefix="/git")
log = logging.getLogger(__name__)

CHUNK = 64 * 1024
# Request headers git's client sends that GitHub needs; everything else stays here.
FORWARDED = ("Content-Type", "Content-Encoding", "Accept", "Accept-Encoding", "Git-Protocol")
RETURNED = ("Content-Type", "Content-Encoding", "Cache-Control", "Expires", "Pragma")
TIMEOUT = httpx.Timeout(30.0, read=300.0)
# What a client asks for to be told, ref by ref, how its push went (git 2.39 asks for v2).
REPORTS = frozenset({"report-status", "report-status-v2"})
CHALLENGE = {"WWW-Authenticate": 'Basic realm="the-loop git"'}


def _plain(status: int, message: str, **headers: str) -> Response:
    """A refusal git shows: a text/plain body reaches the user as `remote: …` lines."""
    return Response(f"the-loop: {message}\n", status, {"Content-Type": "text/plain", **headers})


def _extras() -> tuple[UpstreamTokens, httpx.Client]:
    """The gateway's upstream tokens and HTTP client, one of each per App."""
    extras = current_app.extensions.get("the-loop.git")
    if extras is None:
        extras = (UpstreamTokens(loop_state().services.github), httpx.Client(timeout=TIMEOUT))
        current_app.extensions["the-loop.git"] = extras
    return extras


def _admit(owner: str, repo: str, service: str) -> WorkItem:
    """The work item whose live session asks; raises AccessRefused (recorded as an event
    when the caller is a known session)."""
    state = loop_state()
    password = basic_password({"authorization": request.headers.get("Authorization", "")})
    if password is None or not password.startswith(SESSION_PREFIX):
        raise AccessRefused(401, "a live session token is required")
    with state.sessions(expire_on_commit=False) as session:
        principal = authenticate(session, f"Bearer {password}", state.services.clock())
        if principal is None or principal.work_item_id is None:
            raise AccessRefused(401, "this session token is not live (the session ended)")
        item = session.get(WorkItem, principal.work_item_id)
        try:
            admitted = check(principal, item, repository_of(owner, repo))
        except AccessRefused as exc:
            state.services.events.emit(
                "git.refused",
                principal.work_item_id,
                service=service,
                repository=repository_of(owner, repo),
                status=exc.status,
                reason=str(exc),
            )
            raise
        session.expunge(admitted)
        return admitted


def _refused(exc: AccessRefused) -> Response:
    headers = CHALLENGE if exc.status == 401 else {}
    return _plain(exc.status, str(exc), **headers)


def _upstream(
    item: WorkItem, tail: str, service: str, body: Iterator[bytes] | None
) -> httpx.Response | Response:
    """Send the request on to GitHub; its streamed answer, or the refusal to give git."""
    tokens, client = _extras()
    state = loop_state()
    try:
        token = tokens.token(item, service == RECEIVE, state.services.clock())
    except (GitHubException, GitHubNotConfigured) as exc:
        log.warning("the git gateway could not mint a token for %s: %s", item.id, exc)
        return _plain(502, "GitHub did not give the App a token; try again")
    headers = {name: request.headers[name] for name in FORWARDED if name in request.headers}
    headers["User-Agent"] = request.headers.get("User-Agent", "git/the-loop")
    basic = base64.b64encode(f"{UPSTREAM_USER}:{token}".encode()).decode()
    headers["Authorization"] = f"Basic {basic}"
    if body is not None and request.content_length is not None:
        headers["Content-Length"] = str(request.content_length)
    outgoing = client.build_request(
        request.method,
        upstream_url(item.clone_url, tail),
        params=request.args.to_dict(),
        headers=headers,
        content=body,
    )
    try:
        answer = client.send(outgoing, stream=True)
    except BodyCut as exc:
        return _plain(exc.status, str(exc))
    except httpx.HTTPError as exc:
        log.warning("the git gateway could not reach GitHub for %s: %s", item.id, exc)
        return _plain(502, "GitHub did not answer; try again")
    if answer.status_code in (401, 403):
        answer.close()
        log.warning("GitHub refused the gateway's token for %s", item.id)
        return _plain(502, "GitHub refused the App's credential")
    return answer


def _relay(answer: httpx.Response | Response) -> Response:
    if isinstance(answer, Response):
        return answer

    def chunks() -> Iterator[bytes]:
        try:
            yield from answer.iter_raw(CHUNK)
        finally:
            answer.close()

    headers = {name: answer.headers[name] for name in RETURNED if name in answer.headers}
    return Response(chunks(), answer.status_code, headers, direct_passthrough=True)


def _input() -> IO[bytes]:
    """The request body as it arrives: bounded by its length, or (chunked, behind the ASGI
    front, which bounds it) until its end."""
    return get_input_stream(
        request.environ,
        safe_fallback="asgi.scope" not in request.environ,
        max_content_length=GIT_MAX_BODY,
    )


def _body(stream: IO[bytes], first: bytes) -> Iterator[bytes]:
    """`first`, then the rest of the body, cut off past `GIT_MAX_BODY`."""
    size = len(first)
    if first:
        yield first
    while chunk := stream.read(CHUNK):
        size += len(chunk)
        if size > GIT_MAX_BODY:
            raise BodyCut(f"the body may be at most {GIT_MAX_BODY} bytes")
        yield chunk


def _read_head(stream: IO[bytes]) -> tuple[PushHead | None, bytes]:
    """The push's ref updates and the bytes read for them (None: the body ended first)."""
    data = b""
    while True:
        head = parse_head(data)
        if head is not None:
            return head, data
        chunk = stream.read(max(1, min(CHUNK, MAX_HEAD + 4 - len(data))))
        if not chunk:
            return None, data
        data += chunk


def _drain(stream: IO[bytes]) -> None:
    """Read what a refused push still sends (bounded), so its git reads the answer."""
    size = 0
    while size <= GIT_MAX_BODY and (chunk := stream.read(CHUNK)):
        size += len(chunk)


@bp.get("/<owner>/<repo>/info/refs")
def advertisement(owner: str, repo: str) -> Response:
    service = request.args.get("service", "")
    if service not in SERVICES:
        return _plain(403, "only git's smart HTTP is served (git-upload-pack, git-receive-pack)")
    try:
        item = _admit(owner, repo, service)
    except AccessRefused as exc:
        return _refused(exc)
    return _relay(_upstream(item, "info/refs", service, None))


@bp.post("/<owner>/<repo>/<service>")
def rpc(owner: str, repo: str, service: str) -> Response:
    if service not in SERVICES:
        return _plain(404, f"{service} is not served here")
    try:
        item = _admit(owner, repo, service)
        stream = _input()
    except AccessRefused as exc:
        return _refused(exc)
    except RequestEntityTooLarge:
        return _plain(413, f"the body may be at most {GIT_MAX_BODY} bytes")
    try:
        if service != RECEIVE:
            return _relay(_upstream(item, service, service, _body(stream, b"")))
        return _push(item, stream)
    except BodyCut as exc:
        return _plain(exc.status, str(exc))


def _push(item: WorkItem, stream: IO[bytes]) -> Response:
    """A push: its ref updates checked, then forwarded whole, or answered here."""
    events = loop_state().services.events
    if request.headers.get("Content-Encoding", "identity") != "identity":
        return _plain(415, "a push's body must not be compressed")
    try:
        head, first = _read_head(stream)
    except MalformedPush as exc:
        events.emit("git.push_refused", item.id, refs=[], reason=str(exc))
        return _plain(400, f"this push cannot be read: {exc}")
    if head is None:
        return _plain(400, "the push ended before its ref updates")
    reasons = refusals(head, item.branch or "")
    refs = [update.ref for update in head.updates]
    if not reasons:
        answer = _upstream(item, RECEIVE, RECEIVE, _body(stream, first))
        if refs and not isinstance(answer, Response):
            events.emit("git.pushed", item.id, refs=refs, status=answer.status_code)
        return _relay(answer)
    line = summary(reasons)
    events.emit("git.push_refused", item.id, refs=refs, refused=reasons, reason=line)
    _drain(stream)
    if not head.capabilities & REPORTS:
        return _plain(403, line)
    body = report_refused(head, reasons, line)
    return Response(body, 200, {"Content-Type": "application/x-git-receive-pack-result"})
