"""Process settings: secrets, URLs and paths, from the environment or a `.env` file.

Loaded once per process by `load_settings(env)`, a pure function of an env mapping, into a
frozen model. Nothing else in the product reads `os.environ` for these values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app.config.config_errors import ConfigurationError

MIN_ADMIN_TOKEN = 16


class SettingsError(ConfigurationError):
    """A setting is missing or malformed; the message names the variable."""


class Settings(BaseSettings):
    """Everything a process needs from its environment (field = variable, lowercased)."""

    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", case_sensitive=False, use_attribute_docstrings=True
    )

    github_app_id: int | None = None
    """The GitHub App's id (written by `the-loop setup`)."""
    github_private_key: str | None = None
    """The App's private key (PEM; `\\n` escapes allowed), or use GITHUB_PRIVATE_KEY_PATH."""
    github_private_key_path: Path | None = None
    """A file holding the App's private key (PEM)."""
    github_webhook_secret: str | None = None
    """The secret GitHub signs webhooks with; `the-loop up` writes a random one to `.env` on first
    run."""
    github_client_id: str | None = None
    """The App's OAuth client id (written by `the-loop setup`)."""
    github_client_secret: str | None = None
    """The App's OAuth client secret (written by `the-loop setup`)."""
    github_api_url: str = "https://api.github.com"
    """GitHub's REST API (GitHub Enterprise Server: `https://HOST/api/v3`)."""
    github_web_url: str = "https://github.com"
    """GitHub's web address (links on issues, the setup page)."""
    database_url: str = ""
    """SQLAlchemy URL of the store; empty: SQLite in the state directory. PostgreSQL:
    `postgresql+psycopg://…`."""
    the_loop_config: Path = Path("cli-config.yaml")
    """The operator config file (YAML)."""
    the_loop_state_dir: Path = Path("~/.local/state/the-loop")
    """Where the App keeps its SQLite database, `events.jsonl` and the spawner's state (created
    0700)."""
    the_loop_url: str = "http://127.0.0.1:3000"
    """The App's address as spawners and GitHub reach it; the webhook URL is this plus
    `/github/webhooks`. Unset: `http://127.0.0.1:PORT`."""
    the_loop_insecure_url: bool = False
    """Let a spawner talk to a non-loopback App over plain http (tokens travel in the clear)."""
    the_loop_spawner_token: str | None = None
    """A spawner's credential for the App's `/spawner/v1` API (`the-loop spawner token create`)."""
    the_loop_admin_token: str | None = None
    """The operator credential: the status page and `/status` (at least 16 characters)."""
    the_loop_metrics_token: str | None = None
    """A scraper's credential for `/metrics` alone (at least 16 characters)."""
    the_loop_inbox_workers: int = 1
    """Inbox worker threads in each `serve` process."""
    the_loop_worker_nice: int = Field(default=10, ge=0, le=19)
    """`the-loop worker` lowers its own CPU priority by this much (0-19), so webhooks are
    acknowledged first."""
    the_loop_inbox_attempts: int = 8
    """Tries of a failing delivery (waiting base, 2xbase, 4xbase … seconds, at most 5 minutes)
    before it is parked with its error."""
    the_loop_inbox_backoff_seconds: float = 1.0
    """The first wait between two tries of a failing delivery."""
    the_loop_inbox_lease_seconds: float = 300.0
    """How long a worker holds a delivery it claimed; one that dies leaves it due again after."""
    the_loop_job_lease_seconds: float = 120.0
    """How long a spawner holds a claimed job without a heartbeat before it is offered again."""
    the_loop_spawner_heartbeat_seconds: float = Field(default=5.0, gt=0)
    """Seconds between a spawner's heartbeats to the App (each says which sessions it runs)."""
    the_loop_spawner_dead_seconds: float = Field(default=30.0, gt=0)
    """Seconds a spawner may stay silent before the App counts it dead: its running sessions
    turn `lost`, and the progress comment and Slack thread say so."""
    the_loop_body_deadline: float = 30.0
    """Seconds a request's whole body may take to arrive; a slower one is answered 408."""
    the_loop_unverified_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    """Bytes of not yet verified bodies (webhooks, Slack) one App process holds at once; past it
    503 with Retry-After."""
    the_loop_git_requests_per_session: int = Field(default=2, gt=0)
    """Git gateway requests one App process serves at once for one session token; past it 503."""
    the_loop_git_requests: int = Field(default=0, ge=0)
    """Git gateway requests one App process serves at once in all (0: half the App's WSGI
    threads)."""
    the_loop_git_idle_seconds: float = Field(default=30.0, gt=0)
    """Seconds a git body may go without a byte before it is cut."""
    the_loop_gate_attempt_gap: float = Field(default=20.0, ge=0)
    """Seconds between two stop-gate attempts counted for one session and node: closer asks are
    the same attempt."""
    the_loop_retain_bodies_days: float = Field(default=7.0, gt=0)
    """Days a done delivery's body is kept."""
    the_loop_retain_dedupe_days: float = Field(default=8.0, gt=0)
    """Days a delivery's row (its id and body hash: the dedupe keys) is kept; past GitHub's
    redelivery window."""
    the_loop_retain_events_days: float = Field(default=90.0, gt=0)
    """Days event rows are kept."""
    the_loop_retain_spawner_event_ids_days: float = Field(default=30.0, gt=0)
    """Days the ids of events spawners reported are kept (their dedupe keys)."""
    the_loop_prune_interval: float = Field(default=3600.0, ge=0)
    """Seconds between prunes in a process running inbox workers (0: never on its own)."""
    the_loop_progress_window_seconds: float = Field(default=2.0, ge=0)
    """Seconds a change to a progress comment waits for more before it is posted: at most one
    GitHub edit per item per window."""
    the_loop_ingress: Literal["push", "pull"] = "push"
    """`push`: GitHub POSTs webhooks (the delivery log is read for what was missed); `pull`: the
    App reads GitHub's delivery log instead."""
    the_loop_reconcile_seconds: float = Field(default=300.0, ge=0)
    """In push mode, seconds between reads of GitHub's delivery log for missed deliveries (0: only
    on `the-loop inbox --reconcile`)."""
    the_loop_pull_seconds: float = Field(default=2.0, gt=0)
    """In pull mode, seconds between reads of GitHub's delivery log."""
    the_loop_log_budget_share: float = Field(default=0.5, gt=0, le=1)
    """The share of the App's hourly GitHub request budget the delivery log may use."""
    slack_bot_token: str | None = None
    """The Slack app's bot token (`xoxb-…`); set, the Slack mirror is on."""
    slack_signing_secret: str | None = None
    """The Slack app's signing secret (HTTP mode)."""
    slack_app_token: str | None = None
    """The Slack app-level token (`xapp-…`) for Socket Mode."""
    slack_api_url: str = "https://slack.com/api/"
    """Slack's Web API address."""
    port: int = 3000
    """The port `the-loop up` and `serve` listen on."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only explicit values: `load_settings` decides what the environment is.
        return (init_settings,)

    @field_validator("the_loop_admin_token", "the_loop_metrics_token")
    @classmethod
    def _long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < MIN_ADMIN_TOKEN:
            raise ValueError(f"must be at least {MIN_ADMIN_TOKEN} characters")
        return value

    @model_validator(mode="after")
    def _derive_paths(self) -> Settings:
        state_dir = self.the_loop_state_dir.expanduser()
        object.__setattr__(self, "the_loop_state_dir", state_dir)
        if "the_loop_url" not in self.model_fields_set:  # the App where `up` serves it
            object.__setattr__(self, "the_loop_url", f"http://127.0.0.1:{self.port}")
        if not self.database_url:
            object.__setattr__(self, "database_url", f"sqlite:///{state_dir / 'the-loop.db'}")
        return self

    @property
    def state_dir(self) -> Path:
        return self.the_loop_state_dir

    @property
    def events_path(self) -> Path:
        return self.the_loop_state_dir / "events.jsonl"

    def private_key(self) -> str | None:
        """The App's PEM, from the variable or the file it names."""
        if self.github_private_key:
            return self.github_private_key.replace("\\n", "\n")
        if self.github_private_key_path:
            return self.github_private_key_path.expanduser().read_text()
        return None

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_bot_token)


def load_settings(
    env: Mapping[str, str] | None = None, dotenv: Path | None = Path(".env")
) -> Settings:
    """Build settings from `env` (default: the process environment) over an optional `.env` file."""
    values: dict[str, Any] = {}
    if dotenv is not None and dotenv.is_file():
        values.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
    values.update(os.environ if env is None else env)
    known = {name.upper(): name for name in Settings.model_fields}
    kwargs = {known[k.upper()]: v for k, v in values.items() if k.upper() in known and v != ""}
    try:
        return Settings(**kwargs)
    except ValidationError as exc:
        problems = "; ".join(
            f"{str(err['loc'][0]).upper()}: {err['msg']}" for err in exc.errors() if err["loc"]
        )
        raise SettingsError(f"bad environment setting: {problems}") from exc
