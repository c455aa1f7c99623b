"""GitHub edge: webhook ingress, the router table, and the githubkit client."""

from app.github.actions_io import LogUnavailable, NoJobLog, actions_io, check_run_row
from app.github.client import GitHubApp, GitHubNotConfigured, InstallationToken
from app.github.ingest import IngestUnavailable, IngestWriter
from app.github.installations import forget_installation, record_installation, update_repositories
from app.github.issues import IssueIO
from app.github.manifest import (
    PULL_WEBHOOK_URL,
    WRITTEN_KEYS,
    SetupError,
    env_values_from_conversion,
    exchange_code,
    load_manifest,
    merge_env_file,
)
from app.github.permissions import PermissionCache
from app.github.pull_io import PullIO, PullRefused, check_failure
from app.github.reconcile import LogLoop, Reconciler, interval_of
from app.github.registration import (
    Registration,
    first_issue_step,
    first_run_steps,
    install_url,
    unreachable_from_github,
)
from app.github.registration import webhook_url_for as default_webhook_url
from app.github.router import Router, RouteTable
from app.github.services import HandlerContext, Services, utcnow
from app.github.webhooks import (
    HEADERS,
    MAX_BODY,
    PATH,
    Answer,
    Verified,
    acknowledged,
    busy,
    precheck,
    screen,
    too_large,
    too_slow,
    unavailable,
)
from app.github.worker import InboxWorker

__all__ = [
    "HEADERS",
    "MAX_BODY",
    "PATH",
    "PULL_WEBHOOK_URL",
    "WRITTEN_KEYS",
    "Answer",
    "GitHubApp",
    "GitHubNotConfigured",
    "HandlerContext",
    "InboxWorker",
    "IngestUnavailable",
    "IngestWriter",
    "InstallationToken",
    "IssueIO",
    "LogLoop",
    "LogUnavailable",
    "NoJobLog",
    "PermissionCache",
    "PullIO",
    "PullRefused",
    "Reconciler",
    "Registration",
    "RouteTable",
    "Router",
    "Services",
    "SetupError",
    "Verified",
    "acknowledged",
    "actions_io",
    "busy",
    "check_failure",
    "check_run_row",
    "default_webhook_url",
    "env_values_from_conversion",
    "exchange_code",
    "first_issue_step",
    "first_run_steps",
    "forget_installation",
    "install_url",
    "interval_of",
    "load_manifest",
    "merge_env_file",
    "precheck",
    "record_installation",
    "screen",
    "too_large",
    "too_slow",
    "unavailable",
    "unreachable_from_github",
    "update_repositories",
    "utcnow",
]
