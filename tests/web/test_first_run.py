"""A new operator's first run, as they see it: with no GitHub App configured, the status page
and `the-loop up` say what to do next, in the same three lines; `the-loop setup` shows what it
will register, and why, before its button, and after GitHub's redirect says what it wrote
where and what comes next. Pages are checked in real headless Chromium on the rendered text;
the screenshots stay under the test's tmp_path."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from dotenv import dotenv_values

from app.commands.server import first_run_lines
from app.config.operator_config import load_config
from app.config.process_settings import load_settings
from app.github.manifest import WRITTEN_KEYS, load_manifest
from app.github.registration import (
    events_asked,
    first_issue_step,
    first_run_steps,
    permissions_asked,
    webhook_url_for,
)
from tests.browser_support import chromium_page
from tests.fakes.github_web import FakeGitHubWeb
from tests.fakes.server import LiveServer
from tests.support import (
    fixture_bytes,
    free_port,
    post_webhook,
    served_app,
    start_the_loop,
    wait_for,
    wait_serving,
)

ROOT = Path(__file__).resolve().parents[2]
ADMIN_TOKEN = "operator-token-for-the-first-run-test"
PUBLIC_URL = "https://loop.example.org"
LABEL = "loop: go"
KEYWORD = "loop run"


def operator_config(directory: Path) -> Path:
    """A cli-config.yaml with its own trigger label and keyword: the steps must name them."""
    path = directory / "cli-config.yaml"
    path.write_text(
        f'routing:\n  trigger:\n    label: "{LABEL}"\n    executeKeyword: "{KEYWORD}"\n'
    )
    return path


def as_shown(step: str) -> str:
    """A step as a page shows it: its `code` spans without the backticks."""
    return step.replace("`", "")


def no_app_env(directory: Path) -> dict[str, str]:
    """A fresh operator's environment: no GITHUB_* or THE_LOOP_* of this machine's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "THE_LOOP_", "DATABASE_URL", "SLACK_"))
    }
    env.update(HOME=str(directory), PYTHONPATH=str(ROOT))
    return env


def test_the_steps_name_the_setup_command_the_webhook_url_and_the_first_label():
    register, webhook, first = first_run_steps(PUBLIC_URL + "/", LABEL, KEYWORD)
    assert "`the-loop setup`" in register and "--org NAME" in register
    assert f"{PUBLIC_URL}/github/webhooks" in webhook and "PUBLIC-HOST" not in webhook
    assert f"`{LABEL}`" in first and f"`{KEYWORD}`" in first
    for local in ("http://127.0.0.1:3000", "http://localhost:8080/", "http://[::1]:3000"):
        _, webhook, _ = first_run_steps(local, LABEL, KEYWORD)
        assert f"{webhook_url_for(local)} reaches this machine only" in webhook
        assert "THE_LOOP_URL" in webhook and "--webhook-url" in webhook


def test_up_says_nothing_of_first_steps_once_an_app_is_configured(tmp_path, app_private_key):
    config = str(operator_config(tmp_path))
    fresh = load_settings({"THE_LOOP_CONFIG": config, "THE_LOOP_URL": PUBLIC_URL}, dotenv=None)
    steps = first_run_steps(PUBLIC_URL, LABEL, KEYWORD)
    assert first_run_lines(fresh)[1:] == [f"  {n}. {s}" for n, s in enumerate(steps, start=1)]
    configured = load_settings(
        {"THE_LOOP_CONFIG": config, "GITHUB_APP_ID": "7", "GITHUB_PRIVATE_KEY": app_private_key},
        dotenv=None,
    )
    assert first_run_lines(configured) == []


def test_the_webhook_url_shown_follows_the_port_when_no_url_is_set(tmp_path):
    """`PORT=4100` with no THE_LOOP_URL: the steps name port 4100, where `up` serves."""
    config = str(operator_config(tmp_path))
    settings = load_settings({"THE_LOOP_CONFIG": config, "PORT": "4100"}, dotenv=None)
    assert settings.the_loop_url == "http://127.0.0.1:4100"
    assert "http://127.0.0.1:4100/github/webhooks" in "\n".join(first_run_lines(settings))
    told = load_settings({"PORT": "4100", "THE_LOOP_URL": PUBLIC_URL}, dotenv=None)
    assert told.the_loop_url == PUBLIC_URL


def test_up_says_how_to_give_the_spawner_a_model_credential(tmp_path, app_private_key):
    config = str(operator_config(tmp_path))
    settings = load_settings(
        {"THE_LOOP_CONFIG": config, "GITHUB_APP_ID": "7", "GITHUB_PRIVATE_KEY": app_private_key},
        dotenv=None,
    )
    (missing,) = first_run_lines(settings, {"PATH": "/usr/bin"})
    assert "no model credential" in missing and "export ANTHROPIC_API_KEY" in missing
    assert first_run_lines(settings, {"ANTHROPIC_API_KEY": "sk-test"}) == []
    assert first_run_lines(settings, {"OPENAI_API_KEY": "sk-test"}) == []
    assert first_run_lines(settings) == []  # `up --no-spawner`: no spawner to tell


def test_up_prints_the_three_steps_when_no_app_is_configured(tmp_path):
    port = free_port()
    env = no_app_env(tmp_path)
    env.update(
        PORT=str(port),
        THE_LOOP_URL=PUBLIC_URL,
        THE_LOOP_CONFIG=str(operator_config(tmp_path)),
    )
    log = tmp_path / "up.log"
    proc = start_the_loop(["up", "--no-spawner"], tmp_path, env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_serving(url, proc, log, timeout=60)
        secret = dotenv_values(tmp_path / ".env")["GITHUB_WEBHOOK_SECRET"]
        ping = post_webhook(url, "ping", fixture_bytes("github/ping.json"), secret=secret)
        assert ping.status_code == 200  # up and answering while it waits for setup
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    lines = log.read_text().splitlines()
    start = lines.index("the-loop: no GitHub App is configured yet. Next:")
    shown = lines[start + 1 : start + 4]
    assert shown[0].startswith("  1. Register the GitHub App: run `the-loop setup`")
    assert shown[1].startswith(f"  2. Webhook URL: {PUBLIC_URL}/github/webhooks ")
    assert f"label an issue `{LABEL}`, then reply `{KEYWORD}`" in shown[2]
    steps = first_run_steps(PUBLIC_URL, LABEL, KEYWORD)
    assert shown == [f"  {n}. {s}" for n, s in enumerate(steps, start=1)]


@pytest.fixture
def unconfigured_env(settings_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The App's test environment without an App id or key: as before `the-loop setup`."""
    return {
        **settings_env,
        "GITHUB_APP_ID": "",
        "GITHUB_PRIVATE_KEY": "",
        "THE_LOOP_ADMIN_TOKEN": ADMIN_TOKEN,
        "THE_LOOP_URL": PUBLIC_URL,
        "THE_LOOP_CONFIG": str(operator_config(tmp_path)),
    }


def test_the_status_page_says_what_to_do_next_without_an_app(unconfigured_env, tmp_path):
    with served_app(unconfigured_env) as app, chromium_page() as page:
        response = page.goto(f"{app.url}/?token={ADMIN_TOKEN}")
        assert response.status == 200 and page.url == f"{app.url}/"
        page.screenshot(path=str(tmp_path / "first-run-status.png"), full_page=True)
        text = page.inner_text("body")
        steps = page.locator("#first-run li").all_inner_texts()
    assert "No GitHub App is configured yet." in text
    assert steps == [as_shown(s) for s in first_run_steps(PUBLIC_URL, LABEL, KEYWORD)]
    assert "run the-loop setup on this machine" in steps[0]
    assert steps[1].startswith(f"Webhook URL: {PUBLIC_URL}/github/webhooks")
    assert f"label an issue {LABEL}, then reply {KEYWORD}" in steps[2]
    assert "Work items" in text  # the dashboard is still there, below the steps


def test_setup_shows_what_it_registers_and_then_what_it_wrote(
    tmp_path, fake_github, app_private_key
):
    fake, api_url = fake_github
    web = FakeGitHubWeb(api=fake)
    port = free_port()
    env = no_app_env(tmp_path)
    env.update(THE_LOOP_URL=PUBLIC_URL, THE_LOOP_CONFIG=str(operator_config(tmp_path)))
    env.update(GITHUB_API_URL=api_url)
    env_path = tmp_path / ".env"
    env_path.write_text("PORT=4000\n")
    log = tmp_path / "setup.log"
    with LiveServer(web.wsgi()) as github_web:
        web.web_url = env["GITHUB_WEB_URL"] = github_web.url
        args = ["setup", "--no-browser", "--port", str(port), "--org", "acme"]
        proc = start_the_loop(args, tmp_path, env, log)
        try:
            setup = f"http://127.0.0.1:{port}"
            wait_for(lambda: answers(setup) or proc.poll() is not None, timeout=60)
            assert proc.poll() is None, log.read_text()
            with chromium_page() as page:
                page.goto(setup + "/")
                page.screenshot(path=str(tmp_path / "setup.png"), full_page=True)
                before = page.inner_text("body")
                permissions = rows(page, "tr.permission")
                events = rows(page, "tr.event")
                page.get_by_role("button", name="Create the GitHub App").click()
                page.wait_for_url(setup + "/callback?*")
                page.screenshot(path=str(tmp_path / "setup-done.png"), full_page=True)
                after = page.inner_text("body")
                written = page.locator("tr.written").evaluate_all(
                    "rows => rows.map(r => r.dataset.key)"
                )
                next_steps = page.locator("#next-steps li").all_inner_texts()
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
    manifest = load_manifest()
    hook = f"{PUBLIC_URL}/github/webhooks"
    for line in ("Name\tthe-loop", "Owner\tthe organisation acme", f"Webhook URL\t{hook}"):
        assert line in before
    assert "this machine only" not in before
    assert permissions == [[p.name, p.access, p.why] for p in permissions_asked(manifest)]
    assert events == [[e.name, e.why] for e in events_asked(manifest)]
    assert before.index("Events") < before.index("Create the GitHub App")

    ((owner, posted),) = web.posted
    assert owner == "acme" and posted["hook_attributes"]["url"] == hook
    assert list(posted["default_permissions"]) == [p[0] for p in permissions]

    answer = next(iter(fake.manifest_conversions.values()))
    env_file = str(env_path.resolve())
    assert "GitHub App registered" in after and "App id 424242" in after
    assert written == list(WRITTEN_KEYS)
    assert f"Wrote {env_file}\nreadable by you only (mode 0600)" in after
    for key, meaning in WRITTEN_KEYS.items():
        assert f"{key}\t{meaning}" in after
    for secret in (answer["webhook_secret"], answer["client_secret"], "PRIVATE KEY"):
        assert secret not in after
    install = f"{github_web.url}/apps/the-loop/installations/new"
    assert next_steps[0] == f"Install the App on the repositories it should serve: {install}"
    assert next_steps[1].startswith("Restart the-loop up")
    assert next_steps[2] == as_shown(first_issue_step(LABEL, KEYWORD))

    saved = dotenv_values(env_path)
    assert saved["GITHUB_APP_ID"] == "424242" and saved["PORT"] == "4000"
    assert load_settings({}, dotenv=env_path).private_key() == app_private_key
    printed = log.read_text()
    assert f"Saved the App's credentials to {env_file}." in printed
    assert f"install the App on repositories at {install}" in printed
    assert load_config(Path(env["THE_LOOP_CONFIG"])).routing.trigger.label == LABEL


def answers(url: str) -> bool:
    try:
        return httpx.get(url + "/", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def rows(page: Any, selector: str) -> list[list[str]]:
    """The cells' text of each row `selector` matches."""
    locator = page.locator(selector)
    return [locator.nth(i).locator("td").all_inner_texts() for i in range(locator.count())]


def test_a_setup_page_for_a_loopback_url_says_github_cannot_reach_it(tmp_path):
    """The default THE_LOOP_URL is this machine: the page says so before anything is sent."""
    from app.github.registration import Registration
    from app.web.setup_page import build_setup_app

    plan = Registration(
        load_manifest(), webhook_url_for("http://127.0.0.1:3000"), "http://127.0.0.1:9/callback"
    )
    app = build_setup_app(
        plan=plan,
        web_url="https://github.example",
        api_url="http://127.0.0.1:9",
        env_path=tmp_path / ".env",
        first_issue=first_issue_step(LABEL, KEYWORD),
    )
    with LiveServer(app) as server, chromium_page() as page:
        page.goto(server.url + "/")
        page.screenshot(path=str(tmp_path / "setup-loopback.png"), full_page=True)
        text = page.inner_text("body")
    assert "http://127.0.0.1:3000/github/webhooks this machine only" in text
    assert "GitHub cannot deliver to it" in text
    assert "Owner\tyour own GitHub account" in text and "--org NAME" in text


def test_a_step_reads_the_same_in_a_terminal_and_on_a_page():
    from app.web.present import code_spans

    assert code_spans("run `the-loop setup` now") == "run <code>the-loop setup</code> now"
    assert code_spans("label `<b>x</b>`") == "label <code>&lt;b&gt;x&lt;/b&gt;</code>"
    assert code_spans("a lone ` tick <i>") == "a lone ` tick &lt;i&gt;"
