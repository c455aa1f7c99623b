"""The spawner protocol's job shapes: one type per job kind, built once by the App and parsed
once by the spawner (`docs/spawner-protocol.md` is the prose of the same thing).

A job's payload travels as JSON in the job row and over `/spawner/v1/jobs`. The App builds it
from these models, so a field can never be misspelled on one side only; the spawner parses
it with the same models, so a malformed job fails as a whole with a message instead of as a
`KeyError` halfway through a launch. Unknown fields are ignored (an older spawner keeps
working when the App adds one).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.files import CoreError

JobKindName = Literal["spawn", "deliver", "stop", "answer", "allow"]

# The code (`{"error": …, "code": NOT_HELD}`, status 409) of the App's answer to a spawner
# acting for a job that is no longer its own: its lease lapsed (the job is offered again) or
# another spawner holds it. The spawner drops such a job without a word more about it.
NOT_HELD = "not-held"

# Every event a spawner reports to the App (`POST /spawner/v1/events`): the spawner's
# outbox refuses to record any other name, and the App accepts exactly these, so a name
# cannot be emitted on one side and refused on the other.
SPAWNER_EVENTS = frozenset(
    {
        "config.conflict",
        "gateway.refused",
        "models.checked",
        "spawner.started",
        "session.answered",
        "session.choice_fallback",
        "session.delivered",
        "session.disk_limit",
        "session.egress_allowed",
        "session.egress_refused",
        "session.evidence",
        "session.exited",
        "session.home_failed",
        "session.job_failed",
        "session.routes",
        "session.job_lost",
        "session.network_shared",
        "session.paste_confirmed",
        "session.paste_pending",
        "session.paste_unconfirmed",
        "session.prompt_pending",
        "session.prompted",
        "session.respawned",
        "session.resume_failed",
        "session.setup_failed",
        "session.setup_finished",
        "session.setup_running",
        "session.setup_started",
        "session.setup_unkept",
        "session.spawned",
        "session.stalled",
        "session.stopped",
        "session.unlimited",
        "session.unsandboxed",
        "session.unstalled",
        "session.usage",
        "standing.started",
        "standing.stopped",
        "workspace.branch",
        "workspace.branch_failed",
        "workspace.cloned",
        "workspace.recloned",
        "workspace.trust_failed",
        "workspace.trusted",
    }
)


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Frozen(_Shape):
    """What an authorized human froze at execute: phase decisions, skips and the choice.

    `""` for harness/model/effort means no choice (the default runs). Also the record
    written into the checkout's `work-item-state.json`.
    """

    decisions: dict[str, Any] = Field(default_factory=dict)
    skips: dict[str, Any] = Field(default_factory=dict)
    harness: str = ""
    model: str = ""
    effort: str = ""
    dropped: list[dict[str, str]] = Field(default_factory=list)
    # The branch the work starts from and its pull request targets (`base:<branch>` on the
    # execute line); "" = the repository's default branch.
    base: str = ""
    # The approved issue text: the SHA-256 of its body and when the App read it.
    issue: dict[str, Any] = Field(default_factory=dict)
    # The approval gates the human ticked (each unticked one is in `skips`).
    stops: list[str] = Field(default_factory=list)


class ItemJob(_Shape):
    """What every job says about its work item."""

    work_item_id: str
    spec_id: str = ""
    repo: str = ""
    issue_number: int = 0
    installation_id: int | None = None
    clone_url: str = ""
    html_url: str = ""
    frozen: Frozen = Field(default_factory=Frozen)
    # Where the App's record says the item stands, and the human decisions taken at later
    # gates: the spawner writes both into the checkout's state file the stop gate reads.
    phase: str = ""
    gates: dict[str, Any] = Field(default_factory=dict)
    # The branch the session works on (`the-loop/issue-7`, or a labelled PR's head branch),
    # named by the App; "" for an item executed before work branches existed.
    branch: str = ""


class SpawnJob(ItemJob):
    """Start the item's session on its frozen choice with `prompt` as the first message."""

    kind: Literal["spawn"] = "spawn"
    title: str = ""
    prompt: str = ""
    gh_event: str = "issue_comment"
    action: str = "created"


class DeliverJob(ItemJob):
    """Hand a human's follow-up to the live session (or relaunch it with the text)."""

    kind: Literal["deliver"] = "deliver"
    body: str = ""
    author: str = ""
    source: str = "github"  # github | slack | app (a notice the App itself sends)
    ref: str = ""
    comment_id: int | None = None
    gh_event: str = "issue_comment"
    action: str = "created"


class StopJob(ItemJob):
    """End the item's session."""

    kind: Literal["stop"] = "stop"
    reason: str = ""
    # For a budget stop: what the model gateway tells the session when it refuses it.
    note: str = ""


class AnswerJob(ItemJob):
    """Pick option `choice` (1-based) of the question the session's screen shows, but only if
    it is still the question the human saw (`fingerprint`); `option` is its label then."""

    kind: Literal["answer"] = "answer"
    choice: int = Field(ge=1, le=9)
    option: str = ""
    fingerprint: str
    author: str = ""
    source: str = "github"
    ref: str = ""


class AllowJob(ItemJob):
    """Let the item's live session's egress proxy through to `host:port` from now on (no
    relaunch), as an authorized human asked; for this item only."""

    kind: Literal["allow"] = "allow"
    host: str = Field(min_length=1, max_length=253)
    port: int = Field(gt=0, lt=65536)
    author: str = ""
    source: str = "github"
    ref: str = ""


JobPayload = SpawnJob | DeliverJob | StopJob | AnswerJob | AllowJob
PAYLOADS: dict[str, type[JobPayload]] = {
    "spawn": SpawnJob,
    "deliver": DeliverJob,
    "stop": StopJob,
    "answer": AnswerJob,
    "allow": AllowJob,
}


class PayloadError(CoreError, ValueError):
    """A job's payload does not have its kind's shape; the message names the field."""


def parse_payload(kind: str, data: Any) -> JobPayload:
    """The typed payload of a job of `kind` (raises PayloadError)."""
    model = PAYLOADS.get(kind)
    if model is None:
        raise PayloadError(f"unknown job kind {kind!r}")
    try:
        return model.model_validate(data if isinstance(data, dict) else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "payload"
        raise PayloadError(f"{kind} job: {where}: {first['msg']}") from exc


def dump_payload(payload: JobPayload) -> dict[str, Any]:
    """The JSON a job row stores (every field, so the spawner never guesses a default)."""
    return payload.model_dump(mode="json")


# A request the model gateway refused for what it would make the provider's servers do
# (`app.gateway.reach`): its reason, kind and tool or media, never the request's body.
REACH_EVENT = "gateway.refused"
# What a spawner's model gateway reports, per work item, since its last report: the counts
# of `USAGE_FIELDS` as fields of one event (the App adds them to the item's totals).
USAGE_EVENT = "session.usage"
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "requests",
    "tool_calls",
    "active_ms",
)


# What a spawner's credential routes (`routing.sandbox.routes`) counted per work item since
# its last report: `routes: {<env>: {"requests": n, "refused": m}}` (the App adds them up).
ROUTES_EVENT = "session.routes"


# The key that named a work item's id in files an older release wrote and a newer one reads:
# a spawner's `sessions.json` and its unsent events, the App's `events.jsonl`.
LEGACY_ITEM_KEY = "work_item"


def current_record(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its work item's id under `work_item_id`, whichever release wrote it."""
    if LEGACY_ITEM_KEY not in record or "work_item_id" in record:
        return record
    return {("work_item_id" if k == LEGACY_ITEM_KEY else k): v for k, v in record.items()}
