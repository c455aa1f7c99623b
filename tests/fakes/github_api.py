"""A fake GitHub REST API on loopback: the endpoints the App uses, in GitHub's real shapes.

It verifies the App's JWT (RS256, `iss` = app id) before minting installation tokens and
accepts only tokens it minted on installation endpoints — and only within what each was
minted for, as GitHub does: the repositories and permissions the request named (else all
of the App's), until it expires or is revoked (`DELETE /installation/token`). `GET /app`
answers the App's slug, from which its bot login is `<slug>[bot]`; `hook_log` is the App's
webhook delivery log (`tests/fakes/github_hooklog.py`). Every request is
recorded, and `fail_next` injects 5xx or rate-limit answers, so githubkit's real retry path
is exercised.
"""

from __future__ import annotations

import itertools
import re
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask, Response, jsonify, request

from tests.fakes.github_hooklog import HookLog
from tests.support import WEBHOOK_SECRET

APP_SLUG = "the-loop-test"
BOT_LOGIN = f"{APP_SLUG}[bot]"
# What the App was granted at install time (its manifest's default permissions).
APP_PERMISSIONS = {  # what manifest.yaml asks for
    "issues": "write",
    "contents": "write",
    "pull_requests": "write",
    "checks": "read",
    "actions": "read",
    "metadata": "read",
}
LEVELS = ("none", "read", "write", "admin")


def generate_private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def user(login: str, uid: int = 1, kind: str = "User") -> dict[str, Any]:
    base = f"https://api.github.com/users/{login}"
    return {
        "login": login,
        "id": uid,
        "node_id": f"U_{uid}",
        "avatar_url": "",
        "gravatar_id": "",
        "url": base,
        "html_url": f"https://github.com/{login}",
        "followers_url": base,
        "following_url": base,
        "gists_url": base,
        "starred_url": base,
        "subscriptions_url": base,
        "organizations_url": base,
        "repos_url": base,
        "events_url": base,
        "received_events_url": base,
        "type": kind,
        "site_admin": False,
    }


@dataclass
class Recorded:
    method: str
    path: str
    json: Any
    headers: dict[str, str]
    at: datetime = field(default_factory=lambda: datetime.now(UTC))  # when it arrived


@dataclass
class FakeGitHub:
    """State of the fake: comments, reactions, permissions, tokens, requests seen."""

    app_id: int
    private_key_pem: str
    permissions: dict[tuple[str, str], str] = field(default_factory=dict)  # (repo, login) -> role
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    issues: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    reactions: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    manifest_conversions: dict[str, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    # (repo, job id) -> the job's log, served through a one-time download link
    job_logs: dict[tuple[str, int], bytes] = field(default_factory=dict)
    log_links: dict[str, tuple[str, int]] = field(default_factory=dict)
    default_branch: str = "main"
    # Where pushed branches live (`<git_root>/<owner>/<repo>.git`): a PR's head must exist.
    git_root: Any = None
    slug: str = APP_SLUG
    # The App's webhook delivery log (`deliver` sends a webhook and logs the attempt).
    hook_log: HookLog = field(init=False)
    _failures: list[tuple[re.Pattern[str], int, dict[str, str], str | None]] = field(
        default_factory=list
    )
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(900_000_001))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.hook_log = HookLog(self.app_id, WEBHOOK_SECRET)

    # --- what tests set up and read -------------------------------------------------------
    def grant(self, repo: str, login: str, role: str) -> None:
        self.permissions[(repo.lower(), login.lower())] = role

    def fail_next(
        self,
        path_pattern: str,
        status: int,
        headers: dict[str, str] | None = None,
        method: str | None = None,
    ) -> None:
        """Answer the next request whose path matches (and whose method is `method`, when
        given) with `status`."""
        self._failures.append((re.compile(path_pattern), status, headers or {}, method))

    def failures_left(self) -> int:
        """Injected failures no request has been answered with yet."""
        with self._lock:
            return len(self._failures)

    def issue_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self._lock:  # a copy: handlers post meanwhile
            comments = list(self.comments.values())
        return [c for c in comments if c["_repo"] == repo and c["_issue"] == number]

    def add_comment(
        self, repo: str, number: int, body: str, login: str, kind: str = "User"
    ) -> dict[str, Any]:
        with self._lock:
            cid = next(self._ids)
        now = _iso(datetime.now(UTC))
        comment = {
            "id": cid,
            "node_id": f"IC_{cid}",
            "body": body,
            "user": user(login, cid, kind),
            "url": f"https://api.github.com/repos/{repo}/issues/comments/{cid}",
            "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{cid}",
            "issue_url": f"https://api.github.com/repos/{repo}/issues/{number}",
            "created_at": now,
            "updated_at": now,
            "author_association": "NONE",
            "_repo": repo,
            "_issue": number,
        }
        with self._lock:
            self.comments[cid] = comment
        return comment

    def add_issue(self, repo: str, issue: dict[str, Any]) -> None:
        """Serve `issue` (a payload's `issue` object) at GET /repos/{repo}/issues/{number}."""
        self.issues[(repo.lower(), int(issue["number"]))] = issue

    def pull_requests(self, repo: str) -> list[dict[str, Any]]:
        return [pr for (name, _n), pr in self.pulls.items() if name == repo.lower()]

    def add_check_run(
        self, repo: str, sha: str, name: str, conclusion: str, title: str = "", summary: str = ""
    ) -> dict[str, Any]:
        """A completed check run on `sha`, as `GET …/commits/{sha}/check-runs` lists it."""
        with self._lock:
            rid = next(self._ids)
        run = {
            "id": rid,
            "name": name,
            "head_sha": sha,
            "status": "completed",
            "conclusion": conclusion,
            "html_url": f"https://github.com/{repo}/runs/{rid}",
            "details_url": f"https://ci.example/runs/{rid}",
            "output": {"title": title or None, "summary": summary or None, "text": None},
        }
        self.check_runs.setdefault((repo.lower(), sha), []).append(run)
        return run

    def add_job_log(self, repo: str, job_id: int, text: str | bytes) -> None:
        """The log of Actions job `job_id` (a check run's id), as `…/actions/jobs/{id}/logs`
        serves it: a 302 to a download link on this server that wants no credential."""
        data = text.encode() if isinstance(text, str) else text
        self.job_logs[(repo.lower(), int(job_id))] = data

    def calls(self, method: str, pattern: str) -> list[Recorded]:
        rx = re.compile(pattern)
        return [r for r in self.requests if r.method == method and rx.search(r.path)]

    # --- the WSGI app ---------------------------------------------------------------------
    def wsgi(self) -> Flask:
        app = Flask("fake-github")
        public_key = serialization.load_pem_private_key(
            self.private_key_pem.encode(), password=None
        ).public_key()

        def public(comment: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in comment.items() if not k.startswith("_")}

        def bearer() -> str:
            auth = request.headers.get("Authorization", "")
            return auth.split(" ", 1)[1] if " " in auth else ""

        def require_app_jwt() -> Response | None:
            try:
                claims = jwt.decode(bearer(), public_key, algorithms=["RS256"])
            except jwt.PyJWTError as exc:
                return Response(
                    f'{{"message": "bad JWT: {exc}"}}', 401, mimetype="application/json"
                )
            if str(claims.get("iss")) != str(self.app_id):
                return Response('{"message": "wrong issuer"}', 401, mimetype="application/json")
            return None

        def require_token(
            repo: str | None = None, permission: str | None = None, level: str = "read"
        ) -> Response | None:
            token = self.tokens.get(bearer())
            if token is None or token["revoked"] or token["expires"] < datetime.now(UTC):
                return Response('{"message": "Bad credentials"}', 401, mimetype="application/json")
            allowed = token["repositories"]
            name = repo.split("/", 1)[-1].lower() if repo else None
            outside = (
                name is not None
                and allowed is not None
                and name not in {a.lower() for a in allowed}
            )
            held = token["permissions"].get(permission, "none") if permission else "admin"
            if outside or LEVELS.index(held) < LEVELS.index(level):
                return Response(
                    '{"message": "Resource not accessible by integration"}',
                    403,
                    mimetype="application/json",
                )
            return None

        @app.before_request
        def record_and_fail() -> Response | None:
            self.requests.append(
                Recorded(
                    request.method,
                    request.path,
                    request.get_json(silent=True),
                    dict(request.headers),
                )
            )
            with self._lock:  # each injected failure answers exactly one request
                for i, (rx, status, headers, method) in enumerate(self._failures):
                    if rx.search(request.path) and method in (None, request.method):
                        del self._failures[i]
                        return Response(
                            '{"message": "injected"}', status, headers, mimetype="application/json"
                        )
            return None

        @app.post("/app/installations/<int:inst>/access_tokens")
        def access_token(inst: int):  # type: ignore[no-untyped-def]
            if (denied := require_app_jwt()) is not None:
                return denied
            body = request.get_json(silent=True) or {}
            permissions = body.get("permissions") or APP_PERMISSIONS
            beyond = [
                key
                for key, level in permissions.items()
                if LEVELS.index(level) > LEVELS.index(APP_PERMISSIONS.get(key, "none"))
            ]
            if beyond:
                return jsonify(message=f"The permissions requested are not granted: {beyond}"), 422
            token = "ghs_" + secrets.token_hex(16)
            expires = datetime.now(UTC) + timedelta(hours=1)
            names = body.get("repositories")
            self.tokens[token] = {
                "installation": inst,
                "expires": expires,
                "repositories": names,
                "permissions": dict(permissions),
                "revoked": False,
            }
            return jsonify(
                token=token,
                expires_at=_iso(expires),
                permissions=permissions,
                repository_selection="selected" if names is not None else "all",
            ), 201

        @app.delete("/installation/token")
        def revoke_token():  # type: ignore[no-untyped-def]
            if (denied := require_token()) is not None:
                return denied
            self.tokens[bearer()]["revoked"] = True
            return "", 204

        @app.get("/app")
        def the_app():  # type: ignore[no-untyped-def]
            if (denied := require_app_jwt()) is not None:
                return denied
            now = _iso(datetime.now(UTC))
            return jsonify(
                id=self.app_id,
                slug=self.slug,
                node_id=f"A_{self.app_id}",
                client_id="Iv1.fake",
                owner=user("acme", 99, "Organization"),
                name=self.slug,
                description="",
                external_url="https://example.com",
                html_url=f"https://github.com/apps/{self.slug}",
                created_at=now,
                updated_at=now,
                permissions=APP_PERMISSIONS,
                events=["issues", "issue_comment", "pull_request"],
            )

        @app.get("/repos/<owner>/<repo>/collaborators/<login>/permission")
        def permission(owner: str, repo: str, login: str):  # type: ignore[no-untyped-def]
            if (denied := require_token(f"{owner}/{repo}", "metadata")) is not None:
                return denied
            role = self.permissions.get((f"{owner}/{repo}".lower(), login.lower()), "read")
            legacy = {"maintain": "write", "triage": "read"}.get(role, role)
            rank = ["read", "triage", "write", "maintain", "admin"]
            level = rank.index(role) if role in rank else -1
            keys = ("pull", "triage", "push", "maintain", "admin")
            flags = {key: level >= i for i, key in enumerate(keys)}
            collaborator = {**user(login), "role_name": role, "permissions": flags}
            return jsonify(permission=legacy, role_name=role, user=collaborator)

        @app.post("/repos/<owner>/<repo>/issues/<int:number>/comments")
        def create_comment(owner: str, repo: str, number: int):  # type: ignore[no-untyped-def]
            if (denied := require_token(f"{owner}/{repo}", "issues", "write")) is not None:
                return denied
            body = (request.get_json() or {}).get("body", "")
            return jsonify(
                public(self.add_comment(f"{owner}/{repo}", number, body, BOT_LOGIN, "Bot"))
            ), 201

        @app.get("/repos/<owner>/<repo>/issues/<int:number>")
        def get_issue(owner: str, repo: str, number: int):  # type: ignore[no-untyped-def]
            if (denied := require_token(f"{owner}/{repo}", "issues")) is not None:
                return denied
            issue = self.issues.get((f"{owner}/{repo}".lower(), number))
            if issue is None:
                return jsonify(message="Not Found"), 404
            return jsonify(issue)

        @app.get("/repos/<owner>/<repo>/issues/<int:number>/comments")
        def list_comments(owner: str, repo: str, number: int):  # type: ignore[no-untyped-def]
            if (denied := require_token(f"{owner}/{repo}", "issues")) is not None:
                return denied
            return jsonify([public(c) for c in self.issue_comments(f"{owner}/{repo}", number)])

        @app.route("/repos/<owner>/<repo>/issues/comments/<int:cid>", methods=["GET", "PATCH"])
        def one_comment(owner: str, repo: str, cid: int):  # type: ignore[no-untyped-def]
            level = "write" if request.method == "PATCH" else "read"
            if (denied := require_token(f"{owner}/{repo}", "issues", level)) is not None:
                return denied
            comment = self.comments.get(cid)
            if comment is None:
                return jsonify(message="Not Found"), 404
            if request.method == "PATCH":
                comment["body"] = (request.get_json() or {}).get("body", comment["body"])
                comment["updated_at"] = _iso(datetime.now(UTC))
            return jsonify(public(comment))

        def reaction(target: str, ident: int):  # type: ignore[no-untyped-def]
            repo = target.split(":", 1)[1]
            if (denied := require_token(repo, "issues", "write")) is not None:
                return denied
            content = (request.get_json() or {}).get("content")
            with self._lock:
                rid = next(self._ids)
            row = {
                "id": rid,
                "node_id": f"R_{rid}",
                "user": user(BOT_LOGIN, 7, "Bot"),
                "content": content,
                "created_at": _iso(datetime.now(UTC)),
            }
            self.reactions.append({**row, "target": target, "target_id": ident})
            return jsonify(row), 201

        @app.post("/repos/<owner>/<repo>/issues/<int:number>/reactions")
        def issue_reaction(owner: str, repo: str, number: int):  # type: ignore[no-untyped-def]
            return reaction(f"issue:{owner}/{repo}", number)

        @app.post("/repos/<owner>/<repo>/issues/comments/<int:cid>/reactions")
        def comment_reaction(owner: str, repo: str, cid: int):  # type: ignore[no-untyped-def]
            return reaction(f"comment:{owner}/{repo}", cid)

        @app.post("/repos/<owner>/<repo>/pulls/comments/<int:cid>/reactions")
        def review_comment_reaction(owner: str, repo: str, cid: int):  # type: ignore[no-untyped-def]
            return reaction(f"review_comment:{owner}/{repo}", cid)

        from tests.fakes.github_pulls import add_pull_routes

        add_pull_routes(app, self, require_token)
        self.hook_log.routes(app, require_app_jwt)

        @app.post("/app-manifests/<code>/conversions")
        def manifest_conversion(code: str):  # type: ignore[no-untyped-def]
            answer = self.manifest_conversions.get(code)
            if answer is None:
                return jsonify(message="Not Found"), 404
            return jsonify(answer), 201

        return app
