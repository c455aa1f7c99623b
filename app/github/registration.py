"""What registering the GitHub App asks for, and what a new operator does first (pure).

`manifest.yaml` is the one list of the permissions and events the App asks for, each with the
reason it is needed. `Registration.manifest()` turns it into the manifest GitHub's flow takes,
and the setup page lists the same rows, reasons included, before anything is registered.

`first_run_steps` is what a new operator reads while no App is configured, word for word the
same in the terminal (`the-loop up`) and on the status page.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.github.github_errors import GitHubError
from app.github.webhooks import PATH as WEBHOOK_PATH

ACCESS_LEVELS = ("read", "write")
# The keys of manifest.yaml that are ours, not GitHub's: turned into its shape.
REASONED_KEYS = ("permissions", "events")


class ManifestShapeError(GitHubError, ValueError):
    """manifest.yaml is not in the shape this module reads; the message names the key."""


@dataclass(frozen=True)
class Ask:
    """One permission (with its `access`) or event (`access` empty) and why it is asked for."""

    name: str
    access: str
    why: str


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ManifestShapeError(f"{key}: a reason is required (a sentence saying what needs it)")
    return " ".join(value.split())


def permissions_asked(source: Mapping[str, Any]) -> tuple[Ask, ...]:
    """The permissions in `source` (manifest.yaml as read), in its order."""
    rows = source.get("permissions")
    if not isinstance(rows, Mapping) or not rows:
        raise ManifestShapeError("permissions: a mapping of permission → {access, why}")
    asks = []
    for name, entry in rows.items():
        key = f"permissions.{name}"
        if not isinstance(entry, Mapping) or entry.get("access") not in ACCESS_LEVELS:
            raise ManifestShapeError(f"{key}.access: must be one of {', '.join(ACCESS_LEVELS)}")
        asks.append(Ask(str(name), str(entry["access"]), _text(entry.get("why"), f"{key}.why")))
    return tuple(asks)


def events_asked(source: Mapping[str, Any]) -> tuple[Ask, ...]:
    """The events in `source` the App subscribes to, in its order."""
    rows = source.get("events")
    if not isinstance(rows, Mapping) or not rows:
        raise ManifestShapeError("events: a mapping of event → why")
    return tuple(Ask(str(name), "", _text(why, f"events.{name}")) for name, why in rows.items())


@dataclass(frozen=True)
class Registration:
    """The App `the-loop setup` is about to register: manifest.yaml with this deployment's
    URLs, name and owner (an organisation's login, or None for the signed-in user)."""

    source: Mapping[str, Any]
    webhook_url: str
    redirect_url: str
    name_override: str | None = None
    org: str | None = None

    @property
    def name(self) -> str:
        return self.name_override or str(self.source.get("name") or "the-loop")

    @property
    def owner(self) -> str:
        if self.org:
            return f"the organisation {self.org}"
        return "your own GitHub account (the one signed in to GitHub in this browser)"

    @property
    def permissions(self) -> tuple[Ask, ...]:
        return permissions_asked(self.source)

    @property
    def events(self) -> tuple[Ask, ...]:
        return events_asked(self.source)

    def manifest(self) -> dict[str, Any]:
        """What is posted to GitHub: its manifest shape, reasons left out."""
        manifest = {k: v for k, v in self.source.items() if k not in REASONED_KEYS}
        manifest["hook_attributes"] = {
            **dict(self.source.get("hook_attributes") or {}),
            "url": self.webhook_url,
        }
        manifest["redirect_url"] = self.redirect_url
        manifest["name"] = self.name
        manifest["default_permissions"] = {p.name: p.access for p in self.permissions}
        manifest["default_events"] = [e.name for e in self.events]
        return manifest

    def new_app_url(self, web_url: str, state: str) -> str:
        """GitHub's page that takes the manifest, under the owner's settings."""
        root = web_url.rstrip("/")
        path = f"/organizations/{self.org}/settings/apps/new" if self.org else "/settings/apps/new"
        return f"{root}{path}?state={state}"


def install_url(web_url: str, conversion: Mapping[str, Any]) -> str:
    """Where the new App is installed on repositories (from GitHub's conversion answer)."""
    page = conversion.get("html_url")
    if not isinstance(page, str) or not page.startswith(("https://", "http://")):
        page = f"{web_url.rstrip('/')}/apps/{conversion.get('slug') or conversion['id']}"
    return f"{page.rstrip('/')}/installations/new"


def webhook_url_for(app_url: str) -> str:
    """The webhook URL of an App served at `app_url` (`THE_LOOP_URL`)."""
    return app_url.rstrip("/") + WEBHOOK_PATH


def unreachable_from_github(url: str) -> bool:
    """True for a URL GitHub cannot deliver to: loopback, `localhost` or unspecified."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost") or not host:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def register_step() -> str:
    return (
        "Register the GitHub App: run `the-loop setup` on this machine "
        "(`--org NAME` registers it under an organisation)."
    )


def webhook_step(app_url: str) -> str:
    url = webhook_url_for(app_url)
    if unreachable_from_github(url):
        return (
            f"Webhook URL: {url} reaches this machine only, and GitHub needs a public one: "
            "set THE_LOOP_URL to the App's public address, or give "
            f"`the-loop setup --webhook-url https://PUBLIC-HOST{WEBHOOK_PATH}`."
        )
    return f"Webhook URL: {url} (what `the-loop setup` registers; GitHub must reach it)."


def first_issue_step(label: str, execute_keyword: str) -> str:
    return (
        f"First issue: on a repository the App is installed on, label an issue `{label}`, "
        f"then reply `{execute_keyword}` under the checklist the App posts."
    )


def first_run_steps(app_url: str, label: str, execute_keyword: str) -> tuple[str, str, str]:
    """What to do next while no GitHub App is configured: register it, the webhook URL to
    give GitHub, and how to start a first work item."""
    return register_step(), webhook_step(app_url), first_issue_step(label, execute_keyword)
