"""The spawner's side of `/spawner/v1`: an HTTP client with typed errors.

`AppUnavailable` (connection refused, timeouts, 5xx, 429) means "try again later";
`Unauthorized` means the token is wrong and retrying cannot help; `Rejected` is any other
4xx, carrying the App's own message, and `NotHeld` the one that says a job is no longer ours.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from app import __version__
from app.protocol import NOT_HELD, JobPayload, PayloadError, parse_payload
from app.spawner.spawner_errors import SpawnerError

API = "/spawner/v1"


class AppError(SpawnerError, RuntimeError):
    """A call to the App failed."""


class AppUnavailable(AppError):
    """The App cannot be reached or is failing; retry with backoff."""


class Unauthorized(AppError):
    """The App refused the token."""


class Rejected(AppError):
    """The App refused the request itself (4xx); `status` says which."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NotHeld(Rejected):
    """The App says the job is no longer this spawner's: its lease lapsed (the job is offered
    again) or another spawner holds it. Nothing more is done for the job, not even a result."""


class MalformedJob(AppError):
    """The App handed over a job this spawner cannot read; it is reported failed, not run."""

    def __init__(self, job_id: int, message: str) -> None:
        super().__init__(message)
        self.job_id = job_id


@dataclass(frozen=True)
class ClaimedJob:
    """A job handed to this spawner, its payload parsed into its kind's type. Credentials are
    kept out of `repr`."""

    id: int
    payload: JobPayload
    lease_seconds: int = 60
    session_token: str | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.payload.kind

    @property
    def work_item_id(self) -> str:
        return self.payload.work_item_id

    @property
    def repo(self) -> str:
        return self.payload.repo

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClaimedJob:
        """Parse a job as `/jobs` hands it over; raises PayloadError for a malformed one."""
        raw = data.get("payload")
        fields = raw if isinstance(raw, dict) else {}
        payload = {"work_item_id": data.get("work_item_id"), "repo": data.get("repo", ""), **fields}
        return cls(
            id=int(data["id"]),
            payload=parse_payload(str(data.get("kind")), payload),
            lease_seconds=int(data.get("lease_seconds") or 60),
            session_token=data.get("session_token") or None,
        )


def url_problem(url: str, allow_insecure: bool = False) -> str | None:
    """Why a spawner must not send its token to `url`, or None. Plain http is only for the
    App on this machine, unless the operator explicitly allows it (THE_LOOP_INSECURE_URL)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"THE_LOOP_URL={url!r} is not an http(s) URL"
    if parts.scheme == "https" or allow_insecure or _loopback(parts.hostname):
        return None
    return (
        f"THE_LOOP_URL={url} is plain http to another machine: tokens would cross the "
        "network in the clear. Use https, or set THE_LOOP_INSECURE_URL=1 to allow it."
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    return str(data.get("error") if isinstance(data, dict) else data)[:500]


def _code(response: httpx.Response) -> str | None:
    """The `code` of the App's JSON refusal, if it has one."""
    try:
        data = response.json()
    except ValueError:
        return None
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


class AppClient:
    """Calls the App at `url` with a bearer `token` (a spawner or a session token)."""

    def __init__(
        self, url: str, token: str, *, timeout: float = 15.0, transport: Any = None
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url + API,
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"the-loop/{__version__}"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise AppUnavailable(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
        if response.status_code in (401, 403):
            raise Unauthorized(f"{method} {path}: {_message(response)}")
        if response.status_code == 429 or response.status_code >= 500:
            raise AppUnavailable(f"{method} {path}: {response.status_code} {_message(response)}")
        if response.status_code == 409 and _code(response) == NOT_HELD:
            raise NotHeld(409, f"{method} {path}: {_message(response)}")
        if response.status_code >= 400:
            raise Rejected(response.status_code, f"{method} {path}: {_message(response)}")
        return response

    def register(self, name: str, repositories: list[str], harnesses: list[str]) -> int:
        body = {
            "name": name,
            "repositories": repositories,
            "harnesses": harnesses,
            "version": __version__,
        }
        return int(self._call("POST", "/register", json=body).json()["spawner_id"])

    def claim(self, wait: float, max_sessions: int | None = None) -> ClaimedJob | None:
        """Long-poll for the next job; None when nothing arrived within `wait` seconds. With
        `max_sessions`, the App offers a spawn only while this spawner has room for it."""
        params: dict[str, Any] = {"wait": wait}
        if max_sessions is not None:
            params["max_sessions"] = max_sessions
        response = self._call("GET", "/jobs", params=params, timeout=httpx.Timeout(wait + 15.0))
        if response.status_code == 204:
            return None
        job = response.json().get("job")
        if not isinstance(job, dict):
            return None
        try:
            return ClaimedJob.from_json(job)
        except (PayloadError, KeyError, TypeError, ValueError) as exc:
            raise MalformedJob(int(job.get("id") or 0), str(exc)) from exc

    def job_token(self, job_id: int) -> str | None:
        """A fresh token that can read the repository of job `job_id` (which this spawner
        holds), for a clone; None when the App has no GitHub identity to mint one. NotHeld
        when the job's lease lapsed or another spawner holds it."""
        data = self._call("POST", f"/jobs/{job_id}/token").json()
        token = data.get("github_token") if isinstance(data, dict) else None
        value = token.get("token") if isinstance(token, dict) else None
        return value if isinstance(value, str) and value else None

    def heartbeat(self, job_id: int) -> None:
        self._call("POST", f"/jobs/{job_id}/heartbeat")

    def alive(self, sessions: list[str]) -> dict[str, Any]:
        """Tell the App this spawner lives and runs the sessions of `sessions` (work item
        ids); silent past the App's dead window, its sessions are counted lost."""
        data = self._call("POST", "/heartbeat", json={"sessions": sessions}).json()
        return data if isinstance(data, dict) else {}

    def result(
        self, job_id: int, ok: bool, result: dict[str, Any], error: str | None = None
    ) -> dict[str, Any]:
        body = {"ok": ok, "result": result, "error": error}
        data = self._call("POST", f"/jobs/{job_id}/result", json=body).json()
        return data if isinstance(data, dict) else {}

    def events(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        data = self._call("POST", "/events", json={"events": events}).json()
        return data if isinstance(data, dict) else {}

    def phase(self, work_item_id: str) -> dict[str, Any]:
        """Where the App's record says `work_item_id` stands."""
        data = self._call("GET", "/phase", params={"work_item_id": work_item_id}).json()
        return data if isinstance(data, dict) else {}

    def advance(self, work_item_id: str, from_node: str, artifacts: list[str]) -> dict[str, Any]:
        """Ask the App to move `work_item_id` on from `from_node` (Rejected: refused, 409/422)."""
        body = {"work_item_id": work_item_id, "from": from_node, "artifacts": artifacts}
        data = self._call("POST", "/phase", json=body).json()
        return data if isinstance(data, dict) else {}

    def comment(self, work_item_id: str, kind: str, body: str) -> dict[str, Any]:
        payload = {"work_item_id": work_item_id, "kind": kind, "body": body}
        data = self._call("POST", "/comments", json=payload).json()
        return data if isinstance(data, dict) else {}

    def pull_request(self, work_item_id: str) -> dict[str, Any]:
        """The work item's branch and linked pull request (`pull_request` null when none)."""
        data = self._call("GET", "/pull-request", params={"work_item_id": work_item_id}).json()
        return data if isinstance(data, dict) else {}

    def open_pull_request(self, work_item_id: str, title: str, body: str) -> dict[str, Any]:
        """Ask the App to open the session's pull request (Rejected: refused, 4xx)."""
        payload = {"work_item_id": work_item_id, "title": title, "body": body}
        data = self._call("POST", "/pull-request", json=payload).json()
        return data if isinstance(data, dict) else {}

    def check_runs(self, work_item_id: str) -> dict[str, Any]:
        """The check runs on the head commit of the work item's pull request."""
        data = self._call("GET", "/checks", params={"work_item_id": work_item_id}).json()
        return data if isinstance(data, dict) else {}

    def check_log(self, work_item_id: str, run_id: int) -> dict[str, Any]:
        """The end of check run `run_id`'s job log (Unauthorized: not this PR's head commit).
        The App downloads it first, so this waits longer than other calls."""
        data = self._call(
            "GET",
            f"/checks/{run_id}/log",
            params={"work_item_id": work_item_id},
            timeout=httpx.Timeout(120.0),
        ).json()
        return data if isinstance(data, dict) else {}
