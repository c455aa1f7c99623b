"""`/spawner/v1/checks`: the check runs of a session's pull request and a failing job's log,
read by the App for the session (`the-loop checks`, `the-loop checks log <id>`). The session
holds no GitHub credential; it authenticates with its session token exactly as `the-loop pr`
does (`app.fleet.pull_api.caller`).

Only check runs of the item's own pull request's head commit are read: any other id is
refused (403) before GitHub is asked for a log. A log is a stranger's text, bounded by
`app.gate.log_tail` and handed over as data.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request
from githubkit.exception import GitHubException

from app.fleet.api_guard import ApiError, guard, loop_state
from app.fleet.pull_api import caller
from app.gate import MAX_LOG_BYTES, MAX_LOG_LINES, log_tail
from app.github import GitHubNotConfigured, LogUnavailable, NoJobLog, actions_io, check_run_row
from app.store import WorkItem

bp = guard(Blueprint("checks", __name__, url_prefix="/spawner/v1"))


def pull_head(item: WorkItem) -> tuple[int, str]:
    """The item's pull request number and head commit (409 while it has neither)."""
    pr = item.pull_request or {}
    number, sha = pr.get("number"), pr.get("head_sha")
    if not number:
        raise ApiError(
            409,
            f"{item.id} has no pull request yet: push the work branch and run `the-loop pr create`",
            code="no-pull-request",
        )
    if not sha:
        raise ApiError(409, f"the head commit of pull request #{number} is not known yet")
    return int(number), str(sha)


def _item_head() -> tuple[int, str, int, str]:
    """(PR number, head commit, installation, repository) of the caller's work item."""
    with loop_state().sessions() as session:
        _principal, item = caller(session, request.args.get("work_item_id"), lock=False)
        number, sha = pull_head(item)
        if item.installation_id is None:
            raise ApiError(409, f"{item.id} has no installation recorded")
        return number, sha, item.installation_id, item.repo_full_name


def _github_failed(exc: Exception) -> ApiError:
    return ApiError(502, f"GitHub did not answer; try again: {exc}")


@bp.get("/checks")
def listing() -> Response:
    """The latest check run of every check on the pull request's head commit."""
    number, sha, installation, repo = _item_head()
    try:
        with actions_io(loop_state().services.github, installation, repo) as io:
            runs = io.check_runs(sha)
    except (GitHubException, GitHubNotConfigured) as exc:
        raise _github_failed(exc) from exc
    return jsonify(
        pull_request={"number": number, "head_sha": sha},
        check_runs=[check_run_row(run) for run in runs],
    )


@bp.get("/checks/<int:run_id>/log")
def job_log(run_id: int) -> Response:
    """The last lines of check run `run_id`'s Actions job log, if that run is one of the
    pull request's head commit (else 403)."""
    number, sha, installation, repo = _item_head()
    try:
        with actions_io(loop_state().services.github, installation, repo) as io:
            runs = {run.get("id"): run for run in io.check_runs(sha, latest=False)}
            run: Any = runs.get(run_id)
            if run is None:
                raise ApiError(
                    403,
                    f"check run {run_id} is not on the head commit {sha[:12]} of pull request "
                    f"#{number}: only those may be read (`the-loop checks` lists them)",
                    code="not-this-pull-request",
                )
            read = io.job_log(run_id)
    except NoJobLog as exc:
        where = run.get("html_url") or run.get("details_url") or "its page"
        raise ApiError(
            404, f"check run {run_id} has no GitHub Actions log ({exc}); see {where}"
        ) from exc
    except LogUnavailable as exc:
        raise ApiError(502, f"the log could not be read: {exc}") from exc
    except (GitHubException, GitHubNotConfigured) as exc:
        raise _github_failed(exc) from exc
    tail = log_tail(read.data, began_earlier=read.began_earlier)
    return jsonify(
        check_run=check_run_row(run),
        pull_request={"number": number, "head_sha": sha},
        log=tail.text,
        lines=tail.lines,
        cut=tail.cut,
        incomplete=read.incomplete,
        max_lines=MAX_LOG_LINES,
        max_bytes=MAX_LOG_BYTES,
    )
