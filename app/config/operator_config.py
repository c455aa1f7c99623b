"""The operator config (`cli-config.yaml`): harnesses, models, effort levels, routing rules.

Read by the App and by every spawner. Keys are the ones the older daemon used (camelCase in
YAML), so an operator can bring their file. `harness_args` is the one resolver of a harness's
launch arguments and the only reader of `harnesses[].args` and `routing.harnessArgs`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, Field, ValidationError, model_validator

from app.config.config_errors import ConfigurationError
from app.config.known_keys import Finding, check_keys
from app.config.older_shapes import read_older_shapes
from app.config.sandbox_config import ConfigModel as _Model
from app.config.sandbox_config import Sandbox

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_HARNESS = "claude"
DEFAULT_LABEL = "the-loop: auto-execute"
DEFAULT_EXECUTE_KEYWORD = "the-loop execute"
DEFAULT_APPROVE_KEYWORD = "the-loop approve"
DEFAULT_CHANGES_KEYWORD = "the-loop changes"
DEFAULT_ANSWER_KEYWORD = "the-loop answer"
DEFAULT_BUDGET_KEYWORD = "the-loop budget"
DEFAULT_ALLOW_KEYWORD = "the-loop allow"


class ConfigError(ConfigurationError):
    """The operator config cannot be used; the message names the file and the key — one
    line per problem (`problems`) when the file was read, each `FILE: KEY: what is wrong`."""

    def __init__(self, message: str, problems: tuple[Finding, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems

    @classmethod
    def of(cls, source: str, problems: list[Finding]) -> ConfigError:
        lines = "\n".join(f"{source}: {p.key}: {p.message}" for p in problems)
        return cls(lines, tuple(problems))


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
    """`harnesses[]`: a harness the checklist offers — `name` (`claude` or `codex`), the one
    ticked by `default`, the `command` that runs it (else its name) and its launch `args`."""

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
    """`models[]`: a model row of the checklist — its `name`, the provider's model `id` (else
    the name), its `price` (else the shipped one), the `harnesses` it runs on (else all),
    its launch `args` and an `about` line shown beside it."""

    name: Name
    id: str | None = None
    price: ModelPrice | None = None  # else the shipped price of its id (workitems/spend/costs.py)
    harnesses: list[Name] | None = None
    args: list[str] | None = None
    about: str | None = None  # a short description shown on the checklist row

    @property
    def model_id(self) -> str:
        return self.id or self.name


class EffortChoice(_Model):
    """`effort[]`: an effort row of the checklist, in order — its `name` and launch `args`."""

    name: Name
    args: list[str] | None = None


class Interaction(_Model):
    """`routing.interaction.mode`: `work-item` (sessions are driven from the issue) or
    `cli` (the older daemon's interactive mode)."""

    mode: str = InteractionMode.WORK_ITEM.value

    @property
    def resolved(self) -> InteractionMode:
        """`cli` only when written exactly; anything else is `work-item` (the narrower mode)."""
        return InteractionMode.CLI if self.mode == "cli" else InteractionMode.WORK_ITEM


class Workspace(_Model):
    """`routing.workspace.root`: the directory under which each work item's checkout is made."""

    root: Path = Path("~/the-loop-work")

    @property
    def resolved_root(self) -> Path:
        return self.root.expanduser()


class HarnessTrust(_Model):
    """`routing.harnessTrust`: whether each checkout is pre-trusted for the harness so no
    trust dialog stops it (`scope`: the workspace root or each checkout), and whether a
    bypass-permissions prompt is accepted (`auto`: when the harness arguments ask for it)."""

    enabled: bool = True
    scope: TrustScope = TrustScope.WORKSPACE_ROOT
    accept_bypass_permissions: str = "auto"


class Trigger(_Model):
    """`routing.trigger`: the label that starts a work item and the keywords of the replies
    that decide one — execute, approve (the review gate), changes (back to implementation),
    answer (an option of a stalled screen) and budget (a raise)."""

    label: str = DEFAULT_LABEL
    execute_keyword: str = DEFAULT_EXECUTE_KEYWORD
    approve_keyword: str = DEFAULT_APPROVE_KEYWORD  # passes the review gate
    changes_keyword: str = DEFAULT_CHANGES_KEYWORD  # sends the work back to implementation
    answer_keyword: str = DEFAULT_ANSWER_KEYWORD  # picks an option of a stalled session's screen
    budget_keyword: str = DEFAULT_BUDGET_KEYWORD  # raises a work item's budget
    # lets a live session's egress proxy through to one more host:port, for this item
    allow_keyword: str = DEFAULT_ALLOW_KEYWORD

    @property
    def keywords(self) -> tuple[str, ...]:
        """Every keyword that makes a comment a decision rather than a follow-up."""
        return (
            self.execute_keyword,
            self.approve_keyword,
            self.changes_keyword,
            self.answer_keyword,
            self.budget_keyword,
            self.allow_keyword,
        )


class Completion(_Model):
    """What happens to the session when the item reaches `complete` (or its PR merges)."""

    stop_session: bool = False


class Keywords(_Model):
    """`routing.control.keywords`: the older daemon's place for the execute keyword."""

    execute: str | None = None  # the older daemon's home of the execute keyword


class Control(_Model):
    """`routing.control`: the older daemon's control section (its execute keyword)."""

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


class PullComments(StrEnum):
    """Which comments on a work item's pull request reach its session."""

    ALL = "all"  # every authorized person's comment
    MENTION = "mention"  # only those that mention the App or start a line with `the-loop`


class PullRequests(_Model):
    """The work branch and what a pull request's traffic does."""

    branch_prefix: Annotated[str, AfterValidator(_branch_prefix)] = "the-loop/"
    deliver_check_failures: bool = True  # failing checks on the PR's head reach the session


class Cap(_Model):
    """A spend cap over one window: model tokens (input, output and cache, summed) and
    dollars at each item's model price, each optional."""

    tokens: int | None = Field(default=None, ge=1, strict=True, description="tokens a window")
    usd: float | None = Field(default=None, gt=0, description="dollars a window")

    @property
    def empty(self) -> bool:
        return self.tokens is None and self.usd is None


class WindowCaps(_Model):
    """`routing.budget.daily` / `monthly`: what all work items together may spend in a UTC
    day or month — across the installation (`tokens`, `usd`) and in each one repository
    (`repository`). A cap reached holds new executes in the line and stops running sessions
    (wrap-up at 90 %) until the window resets or an authorized `the-loop budget` lifts it
    for the day."""

    tokens: int | None = Field(
        default=None, ge=1, strict=True, description="tokens a window, per installation"
    )
    usd: float | None = Field(default=None, gt=0, description="dollars a window, per installation")
    repository: Cap = Cap()

    @property
    def installation(self) -> Cap:
        return Cap(tokens=self.tokens, usd=self.usd)


class Budget(_Model):
    """`routing.budget`: what one work item may spend, each limit optional — model tokens
    (input, output and cache, summed), dollars at the item's model price, and minutes of its
    sessions' wall-clock time. The App warns the session at 90 % and stops it at 100 %.
    `daily` and `monthly` cap what all items spend together."""

    tokens: int | None = Field(default=None, ge=1, strict=True)
    usd: float | None = Field(default=None, gt=0)
    minutes: float | None = Field(default=None, gt=0)
    daily: WindowCaps = WindowCaps()
    monthly: WindowCaps = WindowCaps()


class SessionComments(_Model):
    """`routing.sessionComments`: how much a session may say on its issue through
    `the-loop comment` / `ask`, each post an API call from the installation's shared rate
    limit and a notification to everyone watching. At most `burst` posts in any span of
    `burst / perHour` hours (so `perHour` on average); past it the session is answered 429.
    `allowMentions: false` shows a session's @-mentions and team mentions inert."""

    burst: int = Field(default=5, ge=1, strict=True, description="posts at once, per item")
    per_hour: int = Field(default=30, ge=1, strict=True, description="posts an hour, per item")
    allow_mentions: bool = Field(
        default=False, description="let a session's @-mentions notify people and teams"
    )


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


class Gates(_Model):
    """`routing.gates`: where a work item stops for a human's approval. `approveAfter` names
    phases (`design`, `tasks-breakdown`) whose approval row (`approve-design`,
    `approve-tasks`) the checklist ticks by default; a human may still untick it, or tick
    one the list leaves off. An item at such a gate waits for `the-loop approve` or
    `the-loop changes <what to change>`, as at `review`."""

    approve_after: list[Literal["design", "tasks-breakdown"]] = Field(
        default_factory=list,
        description="phases after which the checklist stops for approval by default",
    )


class Routing(_Model):
    """`routing`: who may start work and how it runs — harness arguments, authorized users,
    the workspace, trust, the sandbox, the trigger and keywords, completion, pull requests,
    auto-execute labels, the number of sessions at once, the item budget and the approval
    gates."""

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
    session_comments: SessionComments = SessionComments()
    setup: Setup = Setup()
    gates: Gates = Gates()
    pull_comments: PullComments = PullComments.ALL
    """Which conversation comments on a work item's pull request reach its session: `all`
    (every authorized person's), or `mention` (only those that mention the App, `@<slug>`,
    or have a line starting with `the-loop`; others are not pasted and get no receipt).
    Review comments on lines of the diff and "changes requested" reviews always reach it.
    A config file without the key keeps `all`, as before; with no config file at all (a new
    install) it is `mention`."""


class StandingSession(_Model):
    """`standingSessions.sessions[]`: a long-lived session the spawner keeps running in
    `cwd`, with its harness, arguments and first prompt."""

    name: Name
    cwd: Path = Path("~")
    harness: Name | None = None
    harness_args: list[str] | None = None
    prompt: str | None = None


class StandingSessions(_Model):
    """`standingSessions`: sessions started with the spawner, apart from any work item."""

    sessions: list[StandingSession] = Field(default_factory=list)


class Slack(_Model):
    """`slack`: the channel the mirror posts in and the Slack members mapped to GitHub logins
    (`users`: member id → login), who may then decide from Slack."""

    channel: str | None = None
    users: dict[str, str] = Field(default_factory=dict)


class StopGate(_Model):
    """`stopGate.maxAttempts`: how many times the stop gate blocks a session at one node
    before it lets the turn end and the item reports it."""

    max_attempts: int = Field(default=3, ge=1)


class OperatorConfig(_Model):
    """The operator config file: the harnesses, models and effort levels the checklist
    offers, the routing rules, standing sessions, the Slack mirror's users, the stop gate."""

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


def _value_problems(data: dict[str, Any]) -> tuple[OperatorConfig | None, list[Finding]]:
    """The validated config, or every value pydantic refuses, each with its key."""
    try:
        config = OperatorConfig.model_validate(data)
    except ValidationError as exc:
        return None, [Finding(_format_loc(tuple(e["loc"]), data), e["msg"]) for e in exc.errors()]
    names = [h.name for h in config.harnesses]
    if len(set(names)) != len(names):
        return config, [Finding("harnesses", "a harness name is declared twice")]
    return config, []


def parse_config(data: Any, source: str = "<config>") -> OperatorConfig:
    """Validate a decoded YAML document. Every problem is found before one `ConfigError`
    names them all: entries that cannot be read, keys the App does not know (the older
    daemon's are accepted, `app.config.known_keys`) and values it refuses."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping")
    reading = read_older_shapes(data)
    data = reading.data
    keys = check_keys(data, OperatorConfig)
    config, bad_values = _value_problems(data)
    problems = [*reading.problems, *keys.unknown, *bad_values]
    if problems or config is None:
        raise ConfigError.of(source, problems)
    return config.model_copy(
        update={
            "source": source,
            "adapted": reading.adapted,
            "ignored": reading.ignored + keys.older,
            "conflicts": reading.conflicts,
        }
    )


def load_config(path: Path) -> OperatorConfig:
    """Read the operator YAML at `path`; a missing file means the defaults."""
    path = path.expanduser()
    if not path.exists():  # a new install: its pull requests' comments must mention the App
        return OperatorConfig(source=str(path), routing=Routing(pull_comments=PullComments.MENTION))
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from exc
    return parse_config(data, str(path))
