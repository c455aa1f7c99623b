"""GitHub's web side of the App manifest flow, on loopback: the form target that takes a
posted manifest (`/settings/apps/new` for the signed-in user,
`/organizations/<org>/settings/apps/new` for an organisation) and sends the browser back to
the manifest's `redirect_url` with a one-time `code` and the `state` it was given.

GitHub shows a confirmation page first; this fake confirms at once. Each code is registered
with the fake REST API (`FakeGitHub.manifest_conversions`), which answers the conversion with
the App's id, PEM, webhook secret and client credentials, in GitHub's shape.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from flask import Flask, redirect, request

from tests.fakes.github_api import FakeGitHub


@dataclass
class FakeGitHubWeb:
    """The manifests posted (with the owner they were posted for) and the codes handed out."""

    api: FakeGitHub
    web_url: str = ""  # set once served: the App pages' root in conversion answers
    posted: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)

    def conversion(self, manifest: dict[str, Any], owner: str | None) -> dict[str, Any]:
        slug = str(manifest["name"]).lower().replace(" ", "-")
        return {
            "id": 424242,
            "slug": slug,
            "name": manifest["name"],
            "owner": {"login": owner or "octocat", "type": "Organization" if owner else "User"},
            "html_url": f"{self.web_url}/apps/{slug}",
            "permissions": manifest["default_permissions"],
            "events": manifest["default_events"],
            "pem": self.api.private_key_pem,
            "webhook_secret": secrets.token_hex(20),
            "client_id": "Iv1.fake" + secrets.token_hex(4),
            "client_secret": secrets.token_hex(20),
        }

    def wsgi(self) -> Flask:
        app = Flask("fake-github-web")

        def new_app(owner: str | None) -> Any:
            manifest = json.loads(request.form["manifest"])
            self.posted.append((owner, manifest))
            code = secrets.token_hex(10)
            self.api.manifest_conversions[code] = self.conversion(manifest, owner)
            query = urlencode({"code": code, "state": request.args.get("state", "")})
            return redirect(f"{manifest['redirect_url']}?{query}", code=302)

        @app.post("/settings/apps/new")
        def for_the_user():  # type: ignore[no-untyped-def]
            return new_app(None)

        @app.post("/organizations/<org>/settings/apps/new")
        def for_an_organisation(org: str):  # type: ignore[no-untyped-def]
            return new_app(org)

        return app
