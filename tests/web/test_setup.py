"""The manifest flow against the fake GitHub: form → redirect with code → .env written."""

from __future__ import annotations

import html
import json
import re
import stat

import httpx
import pytest
import yaml

from app.config.process_settings import load_settings
from app.github.manifest import SetupError, load_manifest, merge_env_file
from app.github.registration import Registration
from app.web.setup_page import build_setup_app
from tests.fakes.server import LiveServer


@pytest.fixture
def github_api(fake_github):
    return fake_github


def plan(webhook_url: str = "https://hooks.example/github/webhooks", **kw: str) -> Registration:
    return Registration(load_manifest(), webhook_url, "http://127.0.0.1:9/callback", **kw)


def test_manifest_declares_least_privilege_and_events():
    manifest = plan().manifest()
    assert manifest["default_permissions"] == {
        "issues": "write",
        "contents": "write",
        "pull_requests": "write",
        "checks": "read",
        "actions": "read",
        "metadata": "read",
    }
    events = set(manifest["default_events"])
    assert events == {
        "issues",
        "issue_comment",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "check_run",
        "check_suite",
    }
    # Every subscribed event is acted on, and every routed one is subscribed (installation
    # events are delivered to every App without subscribing).
    from app.runtime.event_routes import ROUTES

    routed = {event for event, _action in ROUTES if not event.startswith("installation")}
    assert routed == events


def test_flow_writes_credentials_to_env(tmp_path, github_api, app_private_key):
    fake, api_url = github_api
    fake.manifest_conversions["code-123"] = {
        "id": 777,
        "slug": "the-loop-test",
        "name": "the-loop-test",
        "pem": app_private_key,
        "webhook_secret": "whsec",
        "client_id": "Iv1.abc",
        "client_secret": "shh",
        "html_url": "https://github.com/apps/the-loop-test",
    }
    env_path = tmp_path / ".env"
    env_path.write_text("PORT=4000\n")
    done = []
    app = build_setup_app(
        plan=plan(org="acme"),
        web_url="https://github.example",
        api_url=api_url,
        env_path=env_path,
        first_issue="First issue: label one.",
        on_done=done.append,
    )
    with LiveServer(app) as server:
        page = httpx.get(f"{server.url}/").text
        action = html.unescape(re.search(r'action="([^"]+)"', page).group(1))
        posted = json.loads(
            html.unescape(re.search(r'name="manifest" value="([^"]+)"', page).group(1))
        )
        state = action.split("state=")[1]
        assert action.startswith("https://github.example/organizations/acme/settings/apps/new")
        assert posted["hook_attributes"]["url"] == "https://hooks.example/github/webhooks"
        assert posted["redirect_url"] == "http://127.0.0.1:9/callback"

        wrong = httpx.get(f"{server.url}/callback", params={"code": "code-123", "state": "nope"})
        assert wrong.status_code == 400 and not done

        resp = httpx.get(f"{server.url}/callback", params={"code": "code-123", "state": state})
        assert resp.status_code == 200, resp.text
    assert done and done[0]["id"] == 777
    assert stat.S_IMODE(env_path.stat().st_mode) == 0o600
    settings = load_settings({}, dotenv=env_path)
    assert settings.github_app_id == 777
    assert settings.github_webhook_secret == "whsec"
    assert settings.private_key() == app_private_key
    assert settings.port == 4000  # existing keys are kept


def test_unreadable_env_is_never_overwritten(tmp_path):
    env_path = tmp_path / ".env"
    env_path.write_bytes(b"\xff\xfe not utf-8 \xff")
    before = env_path.read_bytes()
    with pytest.raises(SetupError, match="not overwriting"):
        merge_env_file(env_path, {"GITHUB_APP_ID": "1"})
    assert env_path.read_bytes() == before


def test_the_page_answers_only_this_machine_and_each_state_once_within_its_hour(
    tmp_path, github_api, app_private_key
):
    fake, api_url = github_api
    answer = {"id": 778, "pem": app_private_key, "webhook_secret": "w", "slug": "s"}
    fake.manifest_conversions["code-1"] = answer
    fake.manifest_conversions["code-2"] = answer
    now = [1000.0]
    app = build_setup_app(
        plan=plan(),
        web_url="https://github.example",
        api_url=api_url,
        env_path=tmp_path / ".env",
        first_issue="First issue: label one.",
        clock=lambda: now[0],
    )

    def state_from(page: str) -> str:
        return html.unescape(re.search(r'action="([^"]+)"', page).group(1)).split("state=")[1]

    with LiveServer(app) as server:
        port = server.port
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
            rebound = httpx.get(f"{server.url}/", headers={"Host": host})
            assert rebound.status_code == 421 and "state=" not in rebound.text
        assert httpx.get(f"http://localhost:{port}/").status_code == 200
        state = state_from(httpx.get(f"{server.url}/").text)
        foreign = httpx.get(
            f"{server.url}/callback",
            params={"code": "code-1", "state": state},
            headers={"Host": "evil.example"},
        )
        assert foreign.status_code == 421 and not (tmp_path / ".env").exists()
        ok = httpx.get(f"{server.url}/callback", params={"code": "code-1", "state": state})
        assert ok.status_code == 200
        again = httpx.get(f"{server.url}/callback", params={"code": "code-2", "state": state})
        assert again.status_code == 400 and "used already" in again.text
        late = state_from(httpx.get(f"{server.url}/").text)
        now[0] += 3601
        expired = httpx.get(f"{server.url}/callback", params={"code": "code-2", "state": late})
        assert expired.status_code == 400
    assert load_settings({}, dotenv=tmp_path / ".env").github_app_id == 778


def test_what_is_posted_is_githubs_shape_and_every_ask_has_a_reason():
    registration = plan(name_override="loop-staging", org="acme")
    manifest = registration.manifest()
    assert "permissions" not in manifest and "events" not in manifest
    assert "why" not in json.dumps(manifest)
    assert manifest["name"] == "loop-staging"
    assert [p.name for p in registration.permissions] == list(manifest["default_permissions"])
    assert [e.name for e in registration.events] == manifest["default_events"]
    assert all(len(ask.why) > 20 for ask in registration.permissions + registration.events)
    assert registration.owner == "the organisation acme"
    assert registration.new_app_url("https://github.example/", "s1") == (
        "https://github.example/organizations/acme/settings/apps/new?state=s1"
    )
    assert plan().new_app_url("https://github.example", "s2") == (
        "https://github.example/settings/apps/new?state=s2"
    )


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda m: m["permissions"]["checks"].pop("why"), "permissions.checks.why"),
        (lambda m: m["permissions"]["issues"].update(access="admin"), "permissions.issues.access"),
        (lambda m: m["events"].update(check_run=""), "events.check_run"),
        (lambda m: m.pop("events"), "events"),
    ],
)
def test_a_manifest_without_a_reason_is_refused_naming_the_key_and_file(tmp_path, edit, key):
    manifest = load_manifest()
    edit(manifest)
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(manifest))
    with pytest.raises(SetupError, match=re.escape(f"{path}: {key}")):
        load_manifest(path)


def test_a_code_github_does_not_trade_writes_nothing(tmp_path, github_api):
    _fake, api_url = github_api
    app = build_setup_app(
        plan=plan(),
        web_url="https://github.example",
        api_url=api_url,
        env_path=tmp_path / ".env",
        first_issue="First issue: label one.",
    )
    with LiveServer(app) as server:
        page = httpx.get(f"{server.url}/").text
        state = html.unescape(re.search(r'action="([^"]+)"', page).group(1)).split("state=")[1]
        resp = httpx.get(f"{server.url}/callback", params={"code": "unknown", "state": state})
    assert resp.status_code == 500
    assert "Nothing was written" in resp.text and "start again" in resp.text
    assert not (tmp_path / ".env").exists()


def test_setup_in_pull_mode_registers_an_unreachable_webhook_and_writes_the_mode(
    tmp_path, github_api, app_private_key
):
    """`the-loop setup --pull`: GitHub is given a webhook URL nobody answers (it still logs
    every delivery it tries), and `.env` says the App reads the log."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from app.github.manifest import PULL_WEBHOOK_URL
    from tests.support import free_port, wait_for

    fake, api_url = github_api
    fake.manifest_conversions["code-pull"] = {
        "id": 778,
        "slug": "the-loop-pull",
        "name": "the-loop-pull",
        "pem": app_private_key,
        "webhook_secret": "whsec-pull",
        "html_url": "https://github.com/apps/the-loop-pull",
    }
    root = Path(__file__).resolve().parents[2]
    port = free_port()
    env_path = tmp_path / ".env"
    env = {**os.environ, "PYTHONPATH": str(root), "GITHUB_API_URL": api_url}
    args = ["setup", "--pull", "--no-browser", "--port", str(port), "--env-file", str(env_path)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def page() -> str:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).text
            except httpx.HTTPError:
                time.sleep(0.1)
                return ""

        shown = wait_for(page, timeout=60)
        posted = json.loads(
            html.unescape(re.search(r'name="manifest" value="([^"]+)"', shown).group(1))
        )
        assert posted["hook_attributes"] == {"url": PULL_WEBHOOK_URL, "active": True}
        state = html.unescape(re.search(r'action="([^"]+)"', shown).group(1)).split("state=")[1]
        done = httpx.get(
            f"http://127.0.0.1:{port}/callback", params={"code": "code-pull", "state": state}
        )
        assert done.status_code == 200, done.text
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output
    assert "Pull mode" in output
    settings = load_settings({}, dotenv=env_path)
    assert settings.the_loop_ingress == "pull" and settings.github_app_id == 778
