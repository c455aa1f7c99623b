"""The fake GitHub's pull-request endpoints, in GitHub's shapes: the repository (its default
branch), a branch (404 when the git fake's copy has none of that name), opening and reading
pull requests, a commit's check runs, and an Actions job's log (a 302 to a download link on
the fake itself, as GitHub sends one to its blob storage).

Opening a PR checks what GitHub checks: the head branch must exist (in the git-over-HTTP
fake's repositories when `git_root` is set) and have no open PR already; otherwise 422 with
GitHub's own messages.
"""

from __future__ import annotations

import itertools
import secrets
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, jsonify, redirect, request

if TYPE_CHECKING:
    from tests.fakes.github_api import FakeGitHub

_NUMBERS = itertools.count(101)


def head_sha(git_root: Path | None, repo: str, branch: str) -> str | None:
    """The commit `branch` points at in the git fake's copy of `repo` (None: no such branch);
    without a git root every branch exists, at a made-up commit."""
    if git_root is None:
        return "0" * 40
    proc = subprocess.run(
        [
            "git",
            "--git-dir",
            str(Path(git_root) / f"{repo}.git"),
            "rev-parse",
            "--verify",
            "--quiet",
            f"refs/heads/{branch}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def repository(fake: FakeGitHub, owner: str, name: str) -> dict[str, Any]:
    full = f"{owner}/{name}"
    return {
        "id": abs(hash(full)) % 10_000_000,
        "name": name,
        "full_name": full,
        "private": False,
        "owner": {"login": owner, "type": "User"},
        "html_url": f"https://github.com/{full}",
        "clone_url": f"https://github.com/{full}.git",
        "default_branch": fake.default_branch,
    }


def unprocessable(detail: str) -> tuple[Response, int]:
    return jsonify(
        message="Validation Failed",
        errors=[{"resource": "PullRequest", "code": "custom", "message": detail}],
        documentation_url="https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
    ), 422


def new_pull(fake: FakeGitHub, owner: str, name: str, data: dict[str, Any], sha: str) -> dict:
    from tests.fakes.github_api import BOT_LOGIN, user

    full = f"{owner}/{name}"
    number = next(_NUMBERS)
    repo = repository(fake, owner, name)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "id": 5_000_000 + number,
        "number": number,
        "state": "open",
        "title": data.get("title", ""),
        "body": data.get("body", ""),
        "user": user(BOT_LOGIN, 7, "Bot"),
        "html_url": f"https://github.com/{full}/pull/{number}",
        "url": f"https://api.github.com/repos/{full}/pulls/{number}",
        "head": {"ref": data["head"], "sha": sha, "label": f"{owner}:{data['head']}", "repo": repo},
        "base": {
            "ref": data["base"],
            "sha": "1" * 40,
            "label": f"{owner}:{data['base']}",
            "repo": repo,
        },
        "merged": False,
        "draft": False,
        "created_at": now,
        "updated_at": now,
    }


def add_pull_routes(
    app: Flask, fake: FakeGitHub, require_token: Callable[..., Response | None]
) -> None:
    @app.get("/repos/<owner>/<repo>")
    def get_repository(owner: str, repo: str):  # type: ignore[no-untyped-def]
        if (denied := require_token()) is not None:
            return denied
        return jsonify(repository(fake, owner, repo))

    @app.get("/repos/<owner>/<repo>/branches/<path:branch>")
    def get_branch(owner: str, repo: str, branch: str):  # type: ignore[no-untyped-def]
        """A branch as GitHub shows it; 404 for one the git fake's copy does not have."""
        if (denied := require_token()) is not None:
            return denied
        sha = head_sha(fake.git_root, f"{owner}/{repo}", branch)
        if sha is None:
            return jsonify(message="Branch not found"), 404
        return jsonify(name=branch, commit={"sha": sha}, protected=False)

    @app.post("/repos/<owner>/<repo>/pulls")
    def create_pull(owner: str, repo: str):  # type: ignore[no-untyped-def]
        if (denied := require_token()) is not None:
            return denied
        data = request.get_json(silent=True) or {}
        full = f"{owner}/{repo}"
        sha = head_sha(fake.git_root, full, str(data.get("head", "")))
        if sha is None:
            return unprocessable(f"head {data.get('head')} does not exist")
        for pr in fake.pulls.values():
            if pr["_repo"] == full and pr["head"]["ref"] == data["head"] and pr["state"] == "open":
                detail = f"A pull request already exists for {owner}:{data['head']}."
                return unprocessable(detail)
        pr = new_pull(fake, owner, repo, data, sha)
        fake.pulls[(full.lower(), pr["number"])] = {**pr, "_repo": full}
        return jsonify(pr), 201

    @app.get("/repos/<owner>/<repo>/pulls/<int:number>")
    def get_pull(owner: str, repo: str, number: int):  # type: ignore[no-untyped-def]
        if (denied := require_token()) is not None:
            return denied
        pr = fake.pulls.get((f"{owner}/{repo}".lower(), number))
        if pr is None:
            return jsonify(message="Not Found"), 404
        return jsonify({k: v for k, v in pr.items() if not k.startswith("_")})

    @app.get("/repos/<owner>/<repo>/commits/<ref>/check-runs")
    def check_runs(owner: str, repo: str, ref: str):  # type: ignore[no-untyped-def]
        if (denied := require_token()) is not None:
            return denied
        runs = fake.check_runs.get((f"{owner}/{repo}".lower(), ref), [])
        return jsonify(total_count=len(runs), check_runs=runs)

    @app.get("/repos/<owner>/<repo>/actions/jobs/<int:job_id>/logs")
    def job_logs(owner: str, repo: str, job_id: int):  # type: ignore[no-untyped-def]
        full = f"{owner}/{repo}"
        if (denied := require_token(full, "actions")) is not None:
            return denied
        if (full.lower(), job_id) not in fake.job_logs:
            return jsonify(message="Not Found"), 404
        link = secrets.token_urlsafe(16)
        fake.log_links[link] = (full.lower(), job_id)
        return redirect(f"{request.host_url}_blobs/job-logs/{link}", 302)

    @app.get("/_blobs/job-logs/<link>")
    def job_log_download(link: str):  # type: ignore[no-untyped-def]
        # The download link is its own credential: a client that sends a token here has
        # sent it where it does not belong.
        if request.headers.get("Authorization"):
            return Response("an Authorization header is not expected here", 400)
        key = fake.log_links.get(link)
        if key is None:
            return Response("gone", 410)
        return Response(fake.job_logs[key], mimetype="text/plain")
