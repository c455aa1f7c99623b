"""The I/O of GitHub's App manifest flow: read `manifest.yaml`, trade the redirect's code
for the new App's credentials, merge them into `.env`.

GitHub redirects back to the setup page (`app.web.setup_page`) with a one-hour `code`, which
is exchanged at `POST /app-manifests/{code}/conversions` for the App id, PEM, webhook secret
and client credentials. Those are merged into `.env` (mode 0600). An unreadable `.env` is
never replaced. What is asked for, and why, is `app.github.registration`'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from dotenv import dotenv_values
from githubkit import GitHub
from githubkit.exception import GitHubException

from app.files import write_text_atomic
from app.github.github_errors import GitHubError
from app.github.registration import ManifestShapeError, events_asked, permissions_asked

MANIFEST_PATH = Path(__file__).resolve().parent / "manifest.yaml"
# What each `.env` line a conversion provides holds (shown after setup, never the values).
WRITTEN_KEYS = {
    "GITHUB_APP_ID": "the App's id",
    "GITHUB_PRIVATE_KEY": "the App's private key (PEM), which signs its requests to GitHub",
    "GITHUB_WEBHOOK_SECRET": "the secret GitHub signs each webhook delivery with",
    "GITHUB_CLIENT_ID": "the App's OAuth client id",
    "GITHUB_CLIENT_SECRET": "the App's OAuth client secret",
}
# Where a pull-mode App's webhooks "go": GitHub logs a delivery only when it tries one, and
# the App reads it from the log. `.invalid` never resolves (RFC 2606), so no third party
# ever receives a payload.
PULL_WEBHOOK_URL = "https://the-loop.invalid/github/webhooks"


class SetupError(GitHubError, RuntimeError):
    """The manifest flow cannot continue; the message says what to do."""


def env_values_from_conversion(data: dict[str, Any]) -> dict[str, str]:
    """The `.env` lines a conversion answer provides (the keys of `WRITTEN_KEYS`)."""
    return {
        "GITHUB_APP_ID": str(data["id"]),
        "GITHUB_PRIVATE_KEY": data["pem"].replace("\n", "\\n"),
        "GITHUB_WEBHOOK_SECRET": data["webhook_secret"],
        "GITHUB_CLIENT_ID": data.get("client_id") or "",
        "GITHUB_CLIENT_SECRET": data.get("client_secret") or "",
    }


def merge_env_file(path: Path, updates: dict[str, str]) -> None:
    """Merge `updates` into the dotenv file at `path`, atomically, mode 0600.

    Existing keys not in `updates` are kept. A file that exists but cannot be read is left
    untouched and reported.
    """
    existing: dict[str, str] = {}
    if path.exists():
        try:
            path.read_text()
            existing = {k: v for k, v in dotenv_values(path).items() if v is not None}
        except (OSError, UnicodeDecodeError) as exc:
            raise SetupError(
                f"{path} exists but cannot be read ({exc}); not overwriting it"
            ) from exc
    merged = {**existing, **updates}
    lines = [f"{key}={json.dumps(value)}" for key, value in merged.items()]
    write_text_atomic(path, "\n".join(lines) + "\n", 0o600)


def exchange_code(api_url: str, code: str) -> dict[str, Any]:
    """Trade the redirect's code for the new App's credentials."""
    github = GitHub(base_url=api_url.rstrip("/") + "/")
    try:
        resp = github.rest.apps.create_from_manifest(code)
    except GitHubException as exc:
        raise SetupError(
            f"GitHub did not trade the code for the App's credentials ({exc}); "
            "start again from the setup page"
        ) from exc
    data = json.loads(resp.content)
    if not isinstance(data, dict) or not all(data.get(k) for k in ("id", "pem", "webhook_secret")):
        raise SetupError("GitHub's answer lacks the App's id, key or webhook secret")
    return data


def load_manifest(path: Path = MANIFEST_PATH) -> dict[str, Any]:
    """manifest.yaml as written, its permissions and events checked to carry a reason."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SetupError(f"{path}: cannot read the manifest ({exc})") from exc
    if not isinstance(data, dict):
        raise SetupError(f"{path}: the manifest must be a mapping")
    try:
        permissions_asked(data)
        events_asked(data)
    except ManifestShapeError as exc:
        raise SetupError(f"{path}: {exc}") from exc
    return data
