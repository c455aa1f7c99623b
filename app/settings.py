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

MIN_ADMIN_TOKEN = 16


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


class Settings(BaseSettings):
    """Everything a process needs from its environment (field = variable, lowercased)."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", case_sensitive=False)

    github_app_id: int | None = None
    github_private_key: str | None = None
    github_private_key_path: Path | None = None
    github_webhook_secret: str | None = None
    github_client_id: str | None = None
    github_client_secret: str | None = None
    github_api_url: str = "https://api.github.com"
    github_web_url: str = "https://github.com"
    database_url: str = ""
    the_loop_config: Path = Path("cli-config.yaml")
    the_loop_state_dir: Path = Path("~/.local/state/the-loop")
    the_loop_url: str = "http://127.0.0.1:3000"
    # Let a spawner talk to a non-loopback App over plain http (tokens travel in the clear).
    the_loop_insecure_url: bool = False
    the_loop_spawner_token: str | None = None
    the_loop_admin_token: str | None = None  # the operator credential (status page, /status)
    the_loop_metrics_token: str | None = None  # a scraper's credential for /metrics alone
    the_loop_inbox_workers: int = 1
    # `the-loop worker` lowers its own CPU priority by this much (0-19): on a machine it
    # shares with `the-loop serve`, webhooks are acknowledged first and handled after.
    the_loop_worker_nice: int = Field(default=10, ge=0, le=19)
    # A failing delivery is tried this many times (waiting base, 2 base, 4 base … seconds,
    # at most 5 minutes, between tries) before it is parked with its error.
    the_loop_inbox_attempts: int = 8
    the_loop_inbox_backoff_seconds: float = 1.0
    # How long a worker holds a delivery it claimed; one that dies leaves it due again after.
    the_loop_inbox_lease_seconds: float = 300.0
    # How long a spawner holds a claimed job without a heartbeat before it is offered again.
    the_loop_job_lease_seconds: float = 120.0
    # Seconds a request's whole body may take to arrive; a slower one is answered 408.
    the_loop_body_deadline: float = 30.0
    # Bytes of not yet verified bodies (webhooks, Slack) one App process holds at once; a
    # request past it is answered 503 with Retry-After. At least one largest delivery fits.
    the_loop_unverified_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    # Git gateway requests (`/git/…`) one App process serves at once for one session token,
    # and in all (0: half the App's WSGI threads); past either, 503. Seconds a git body may
    # go without a byte before it is cut.
    the_loop_git_requests_per_session: int = Field(default=2, gt=0)
    the_loop_git_requests: int = Field(default=0, ge=0)
    the_loop_git_idle_seconds: float = Field(default=30.0, gt=0)
    # Seconds between two stop-gate attempts the App counts for one session and node: asks
    # closer together are the same attempt, so a session cannot run its count up ahead.
    the_loop_gate_attempt_gap: float = Field(default=20.0, ge=0)
    # Retention (days): a done delivery's body; its row, whose delivery id and body hash are
    # the dedupe keys (kept past GitHub's redelivery window: 3 days on github.com, 7 on
    # Enterprise Server, plus a day); event rows; the ids of events spawners reported.
    the_loop_retain_bodies_days: float = Field(default=7.0, gt=0)
    the_loop_retain_dedupe_days: float = Field(default=8.0, gt=0)
    the_loop_retain_events_days: float = Field(default=90.0, gt=0)
    the_loop_retain_spawner_event_ids_days: float = Field(default=30.0, gt=0)
    # Seconds between prunes in a process running inbox workers (0: never on its own).
    the_loop_prune_interval: float = Field(default=3600.0, ge=0)
    # Seconds a change to a work item's progress comment waits for more before the comment
    # is posted or edited: at most one GitHub edit per item per window.
    the_loop_progress_window_seconds: float = Field(default=2.0, ge=0)
    # GitHub's delivery log (app/github/reconcile.py). `push`: GitHub POSTs webhooks, and the
    # log is read on start and every THE_LOOP_RECONCILE_SECONDS (0: only on
    # `the-loop inbox --reconcile`) for what the App missed. `pull`: no webhook comes in; the
    # log is read every THE_LOOP_PULL_SECONDS. Either way at most THE_LOOP_LOG_BUDGET_SHARE
    # of the App's hourly request budget goes on the log.
    the_loop_ingress: Literal["push", "pull"] = "push"
    the_loop_reconcile_seconds: float = Field(default=300.0, ge=0)
    the_loop_pull_seconds: float = Field(default=2.0, gt=0)
    the_loop_log_budget_share: float = Field(default=0.5, gt=0, le=1)
    slack_bot_token: str | None = None
    slack_signing_secret: str | None = None
    slack_app_token: str | None = None
    slack_api_url: str = "https://slack.com/api/"
    port: int = 3000

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
