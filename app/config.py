"""The operator config (`cli-config.yaml`): harnesses, models, effort levels, routing rules.

Read by the App and by every spawner. Keys are the ones the older daemon used (camelCase in
YAML), so an operator can bring their file. `harness_args` is the one resolver of a harness's
launch arguments and the only reader of `harnesses[].args` and `routing.harnessArgs`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, Field, ValidationError, model_validator

from app.config_compat import Finding, ShapeError, read_older_shapes, unused_keys
from app.config_sandbox import ConfigModel as _Model
from app.config_sandbox import Sandbox

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_HARNESS = "claude"
DEFAULT_LABEL = "the-loop: auto-execute"
DEFAULT_EXECUTE_KEYWORD = "the-loop execute"
DEFAULT_APPROVE_KEYWORD = "the-loop approve"
DEFAULT_CHANGES_KEYWORD = "the-loop changes"
DEFAULT_ANSWER_KEYWORD = "the-loop answer"
DEFAULT_BUDGET_KEYWORD = "the-loop budget"


class ConfigError(ValueError):
    """The operator config cannot be used; the message names the file and the key."""


def _name(value: str) -> str:
    """A declared name: letters, digits, `.`, `_`, `-` — never a flag, a path or shell text."""
    if not NAME_RE.match(value):
        raise ValueError(f"{value!r} is not a valid name (letters, digits, '.', '_', '-')")
    return value


Name = Annotated[str, AfterValidator(_name)]


class InteractionMode(StrEnum):
    WORK_ITEM = "work-item"
    CLI = "cli"


class TrustScope(StrEnum):
    WORKSPACE_ROOT = "workspace-root"
    DIRECTORY = "directory"


class Harness(_Model):
    name: Name
    default: bool = False
    command: str | None = None
    args: list[str] | None = None

    @property
    def executable(self) -> str:
        return self.command or self.name


class ModelPrice(_Model):
    """Dollars per million tokens (`models[].price`: input, output, cacheRead, cacheWrite)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(default=0, ge=0)
    cache_write: float = Field(default=0, ge=0)


class ModelChoice(_Model):
    name: Name
    id: str | None = None
    price: ModelPrice | None = None  # else the shipped price of its id (workitems/costs.py)
    harnesses: list[Name] | None = None
    args: list[str] | None = None
    about: str | None = None  # a short description shown on the checklist row

    @property
    def model_id(self) -> str:
        return self.id or self.name


class EffortChoice(_Model):
    name: Name
    args: list[str] | None = None


class Interaction(_Model):
    mode: str = InteractionMode.WORK_ITEM.value

    @property
    def resolved(self) -> InteractionMode:
        """`cli` only when written exactly; anything else is `work-item` (the narrower mode)."""
        return InteractionMode.CLI if self.mode == "cli" else InteractionMode.WORK_ITEM


class Workspace(_Model):
    root: Path = Path("~/the-loop-work")

    @property
    def resolved_root(self) -> Path:
        return self.root.expanduser()


class HarnessTrust(_Model):
    enabled: bool = True
    scope: TrustScope = TrustScope.WORKSPACE_ROOT
    accept_bypass_permissions: str = "auto"


class Trigger(_Model):
    label: str = DEFAULT_LABEL
    execute_keyword: str = DEFAULT_EXECUTE_KEYWORD
    approve_keyword: str = DEFAULT_APPROVE_KEYWORD  # passes the review gate
    changes_keyword: str = DEFAULT_CHANGES_KEYWORD  # sends the work back to implementation
    answer_keyword: str = DEFAULT_ANSWER_KEYWORD  # picks an option of a stalled session's screen
    budget_keyword: str = DEFAULT_BUDGET_KEYWORD  # raises a work item's budget

    @property
    def keywords(self) -> tuple[str, ...]:
        """Every keyword that makes a comment a decision rather than a follow-up."""
        return (
            self.execute_keyword,
            self.approve_keyword,
            self.changes_keyword,
            self.answer_keyword,
            self.budget_keyword,
        )


class Completion(_Model):
    """What happens to the session when the item reaches `complete` (or its PR merges)."""

    stop_session: bool = False


class Keywords(_Model):
    execute: str | None = None  # the older daemon's home of the execute keyword


class Control(_Model):
    keywords: Keywords = Keywords()


# A branch prefix git accepts in a ref name: path segments of safe characters, ending in `/`
# or `-` so the spec id reads apart from it.
_BRANCH_PREFIX_RE = re.compile(
    r"^(?:[A-Za-z0-9_][A-Za-z0-9._-]*/)*[A-Za-z0-9_][A-Za-z0-9._-]*[/-]$"
)


def _branch_prefix(value: str) -> str:
    whole = value.split("/")[:-1]  # the parts git will see as complete path components
    if (
        ".." in value
        or not _BRANCH_PREFIX_RE.match(value)
        or any(part.endswith((".", ".lock")) for part in whole)
    ):
        raise ValueError(
            f"{value!r} is not a branch prefix (letters, digits, '.', '_', '-' in '/'-separated "
            "parts, ending in '/' or '-')"
        )
    return value


class PullRequests(_Model):
    """The work branch and what a pull request's traffic does."""

    branch_prefix: Annotated[str, AfterValidator(_branch_prefix)] = "the-loop/"
    deliver_check_failures: bool = True  # failing checks on the PR's head reach the session


class Budget(_Model):
    """`routing.budget`: what one work item may spend, each limit optional — model tokens
    (input, output and cache, summed), dollars at the item's model price, and minutes of its
    sessions' wall-clock time. The App warns the session at 90 % and stops it at 100 %."""

    tokens: int | None = Field(default=None, ge=1, strict=True)
    usd: float | None = Field(default=None, gt=0)
    minutes: float | None = Field(default=None, gt=0)


class Setup(_Model):
    """`routing.setup`: the repository's own set-up, run in the session's sandbox and
    network before the harness launches (`docs/repository-setup.md`)."""

    enabled: bool = Field(default=True, description="false: no set-up runs")
    command: str | None = Field(
        default=None,
        description="a shell command run instead of the repository's devcontainer or "
        ".the-loop/setup",
    )
    timeout_seconds: float = Field(
        default=900, gt=0, le=24 * 3600, description="a set-up running longer fails"
    )
    warm_start: bool = Field(
        default=True,
        description="reuse what an earlier set-up produced at the same dependency manifests",
    )

    @model_validator(mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        """`setup: false` (or `off`) switches it off; `setup: "<command>"` names a command."""
        if value is False:
            return {"enabled": False}
        if isinstance(value, str):
            return {"command": value}
        return value


class Routing(_Model):
    harness_args: dict[str, list[str]] = Field(default_factory=dict)
    interaction: Interaction = Interaction()
    authorized_users: list[str] | None = None  # GitHub logins (entries read by config_compat)
    workspace: Workspace = Workspace()
    harness_trust: HarnessTrust = HarnessTrust()
    sandbox: Sandbox = Sandbox()
    trigger: Trigger = Trigger()
    completion: Completion = Completion()
    pull_requests: PullRequests = PullRequests()
    default_harness: str | None = None
    # Every one of these labels on the issue executes it with the default selection.
    auto_execute_labels: list[str] = Field(default_factory=list)
    control: Control = Control()
    # How many work-item sessions this spawner runs at once (None: no limit). Executed items
    # beyond it wait in the App's queue, in execute order, until a session ends.
    max_sessions: int | None = Field(default=None, ge=1, strict=True)
    budget: Budget = Budget()
    setup: Setup = Setup()


class StandingSession(_Model):
    name: Name
    cwd: Path = Path("~")
    harness: Name | None = None
    harness_args: list[str] | None = None
    prompt: str | None = None


class StandingSessions(_Model):
    sessions: list[StandingSession] = Field(default_factory=list)


class Slack(_Model):
    channel: str | None = None
    users: dict[str, str] = Field(default_factory=dict)


class StopGate(_Model):
    max_attempts: int = Field(default=3, ge=1)


class OperatorConfig(_Model):
    harnesses: list[Harness] = Field(default_factory=list)
    models: list[ModelChoice] = Field(default_factory=list)
    effort: list[EffortChoice] = Field(default_factory=list)
    routing: Routing = Routing()
    standing_sessions: StandingSessions = StandingSessions()
    slack: Slack = Slack()
    stop_gate: StopGate = StopGate()
    source: str = Field(default="<defaults>", exclude=True)
    # What reading the file adapted (older shapes) and which keys it did not use.
    adapted: tuple[Finding, ...] = Field(default=(), exclude=True)
    ignored: tuple[Finding, ...] = Field(default=(), exclude=True)
    conflicts: tuple[Finding, ...] = Field(default=(), exclude=True)

    def harness(self, name: str) -> Harness | None:
        return next((h for h in self.harnesses if h.name == name), None)

    def model(self, name: str) -> ModelChoice | None:
        return next((m for m in self.models if m.name == name), None)

    def effort_level(self, name: str) -> EffortChoice | None:
        return next((e for e in self.effort if e.name == name), None)

    @property
    def interaction_mode(self) -> InteractionMode:
        return self.routing.interaction.resolved


def harness_args(config: OperatorConfig, harness: str) -> list[str]:
    """The launch arguments of `harness`: `harnesses[].args` when that entry declares a list,
    else the deprecated `routing.harnessArgs.<harness>`, else none.

    The two homes are never merged: a union could double a flag or combine permission modes
    the operator never wrote together.
    """
    entry = config.harness(harness)
    if entry is not None and entry.args is not None:
        return list(entry.args)
    return list(config.routing.harness_args.get(harness, []))


def config_findings(config: OperatorConfig) -> list[Finding]:
    """Conflicts and deprecations, reported once at load and by `models list|check`."""
    findings: list[Finding] = list(config.conflicts)
    for name in config.routing.harness_args:
        entry = config.harness(name)
        if entry is not None and entry.args is not None:
            findings.append(
                Finding(
                    f"routing.harnessArgs.{name}",
                    f"both harnesses[{name}].args and routing.harnessArgs.{name} are declared; "
                    f"harnesses[].args wins and routing.harnessArgs.{name} is ignored",
                )
            )
        else:
            findings.append(
                Finding(
                    f"routing.harnessArgs.{name}",
                    f"routing.harnessArgs.{name} is deprecated; move it to harnesses[].args",
                )
            )
    declared = {h.name for h in config.harnesses}
    for model in config.models:
        for h in model.harnesses or []:
            if h not in declared:
                findings.append(
                    Finding(f"models[{model.name}].harnesses", f"names undeclared harness {h!r}")
                )
    return findings


def _format_loc(loc: tuple[Any, ...], data: Any) -> str:
    parts: list[str] = []
    node = data
    for item in loc:
        if isinstance(item, int):
            label = None
            if isinstance(node, list) and item < len(node) and isinstance(node[item], dict):
                name = node[item].get("name")
                label = name if isinstance(name, str) and NAME_RE.match(name) else None
            parts[-1:] = [f"{parts[-1] if parts else ''}[{label or item}]"]
            node = node[item] if isinstance(node, list) and item < len(node) else None
        else:
            parts.append(str(item))
            node = node.get(item) if isinstance(node, dict) else None
    return ".".join(parts)


def parse_config(data: Any, source: str = "<config>") -> OperatorConfig:
    """Validate a decoded YAML document; errors name the source and the key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping")
    try:
        reading = read_older_shapes(data)
    except ShapeError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    data = reading.data
    try:
        config = OperatorConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _format_loc(tuple(first["loc"]), data)
        raise ConfigError(f"{source}: {key}: {first['msg']}") from exc
    names = [h.name for h in config.harnesses]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: harnesses: a harness name is declared twice")
    ignored = reading.ignored + tuple(unused_keys(data, OperatorConfig))
    return config.model_copy(
        update={
            "source": source,
            "adapted": reading.adapted,
            "ignored": ignored,
            "conflicts": reading.conflicts,
        }
    )


def load_config(path: Path) -> OperatorConfig:
    """Read the operator YAML at `path`; a missing file means the defaults."""
    path = path.expanduser()
    if not path.exists():
        return OperatorConfig(source=str(path))
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from exc
    return parse_config(data, str(path))
