"""`the-loop setup`: register the GitHub App through the manifest flow."""

from __future__ import annotations

import argparse
import threading
import webbrowser
from pathlib import Path
from typing import Any


def run_setup(args: argparse.Namespace) -> int:
    from werkzeug.serving import make_server

    from app.config import load_config, load_settings
    from app.github import (
        PULL_WEBHOOK_URL,
        Registration,
        default_webhook_url,
        first_issue_step,
        install_url,
        load_manifest,
    )
    from app.web import build_setup_app

    settings = load_settings()
    trigger = load_config(settings.the_loop_config).routing.trigger
    local = f"http://127.0.0.1:{args.port}"
    pull = args.pull or settings.the_loop_ingress == "pull"
    plan = Registration(
        source=load_manifest(),
        webhook_url=args.webhook_url
        or (PULL_WEBHOOK_URL if pull else default_webhook_url(settings.the_loop_url)),
        redirect_url=f"{local}/callback",
        name_override=args.name,
        org=args.org,
    )
    registered: list[dict[str, Any]] = []
    done = threading.Event()

    def finished(data: dict[str, Any]) -> None:
        registered.append(data)
        done.set()

    app = build_setup_app(
        plan=plan,
        web_url=settings.github_web_url,
        api_url=settings.github_api_url,
        env_path=Path(args.env_file),
        first_issue=first_issue_step(trigger.label, trigger.execute_keyword),
        on_done=finished,
        extra_env={"THE_LOOP_INGRESS": "pull"} if pull else None,
    )
    server = make_server("127.0.0.1", args.port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    if pull:
        print(
            "Pull mode: GitHub will log each webhook as undeliverable and the App reads it "
            f"from the log (webhook URL {plan.webhook_url})."
        )
    print(f"Open {local}/ to register the App (webhooks will go to {plan.webhook_url}).")
    if not args.no_browser:
        webbrowser.open(f"{local}/")
    try:
        done.wait()
    finally:
        server.shutdown()
    print(f"Saved the App's credentials to {Path(args.env_file).resolve()}.")
    install = install_url(settings.github_web_url, registered[0])
    print(f"Next: install the App on repositories at {install}")
    print("then restart `the-loop up` so it reads the new credentials.")
    return 0


def register(subparsers: Any) -> None:
    setup = subparsers.add_parser("setup", help="register the GitHub App (manifest flow)")
    setup.add_argument("--port", type=int, default=3001, help="port of the local setup page")
    setup.add_argument("--org", help="register the App under this organization")
    setup.add_argument("--name", help="the App's name (default from manifest.yaml)")
    setup.add_argument("--webhook-url", help="public URL of /github/webhooks")
    setup.add_argument(
        "--pull",
        action="store_true",
        help="the App reads webhooks from GitHub's delivery log: no public URL needed "
        "(writes THE_LOOP_INGRESS=pull)",
    )
    setup.add_argument("--env-file", default=".env", help="where to write the credentials")
    setup.add_argument("--no-browser", action="store_true", help="do not open a browser")
    setup.set_defaults(func=run_setup)
