"""A session's refused egress, told to the people on the issue, and their `the-loop allow
host:port` reply.

When a session's egress proxy refuses a host, the item gets one notice per `host:port` (a
`Once` row per item and host: a session knocking again costs no comment and no GitHub call):
the host and the reply that lets it through, mirrored to the item's Slack thread (the `egress`
kind, where an Allow button stands for the reply). Refusals of hosts the harness itself
knocks on (the spawner marks them `harness_own`) are not noticed, nor are names that are no
`host:port` (the name comes from the session: it is shown only once it reads as one). An
authorized reply — typed on the issue, or the Slack button's, which is posted on the issue
and decided here the same way — becomes one allow job for the item's spawner, which lets the
live session's proxy through to that host at once, for this item only; the result's note,
on the issue and in the thread, says how to add it for good (`routing.sandbox.egress`). A
reader's reply changes nothing and gets the usual refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from githubkit.exception import GitHubException
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import normal_hostport
from app.gate import MarkerKind, defuse, marker, says_command
from app.github import GitHubNotConfigured, IssueIO, Services
from app.protocol import AllowJob
from app.store import Once, WorkItem
from app.workitems.decide.decisions import (
    Decision,
    Outcome,
    Status,
    ask_on_item,
    emit,
)
from app.workitems.flow.jobs import allow_job, enqueue
from app.workitems.flow.states import is_live

log = logging.getLogger(__name__)
FOR_GOOD = "routing.sandbox.egress"


def target_of(value: str) -> tuple[str, int] | None:
    """(host, port) of a `host:port`, or None when it reads as none (pure)."""
    try:
        host, _, port = normal_hostport(value).rpartition(":")
    except ValueError:
        return None
    return host.strip("[]"), int(port)


def allowed_target(body: str, keyword: str) -> tuple[str, int] | None:
    """The `host:port` after the allow keyword (pure); None when the reply names none."""
    if not says_command(body, keyword):
        return None
    words = body.lstrip("\ufeff \t\r\n")[len(keyword.strip()) :].split()
    return target_of(words[0]) if words else None


def refused_words(target: str, command: str, keyword: str) -> str:
    """The notice of one refused host, as the issue and the Slack thread show it (pure);
    `command` is what knocked, when known."""
    knocked = f" (from `{command}`)" if command else ""
    lines = [
        f"The session's network refused **`{target}`**{knocked}: it is not in `{FOR_GOOD}`.",
        "",
        f"To let this item's session reach it now, reply `{keyword} {target}` "
        "(the same rule as execute).",
    ]
    return defuse("\n".join(lines))


def refused_text(work_item_id: str, target: str, command: str, keyword: str) -> str:
    """The issue comment of one refused host: its words and the App's marker (pure)."""
    text = refused_words(target, command, keyword)
    return f"{text}\n\n{marker(MarkerKind.NOTICE, item=work_item_id, egress=target)}\n"


def allowed_words(target: str, by: str, live: bool) -> str:
    """The answer to an allow job's result, as the issue and the Slack thread show it (pure)."""
    if live:
        first = f"`{target}` is let through for this item's session now (asked by @{by})."
    else:
        first = f"`{target}` could not be let through: this item's session is not running."
    how = f"To allow it for every session, add `{target}` to `{FOR_GOOD}` in the operator config."
    return f"{defuse(first)}\n\n{how}"


def allowed_text(work_item_id: str, target: str, by: str, live: bool) -> str:
    """The issue comment answering an allow job's result (pure)."""
    mark = marker(MarkerKind.NOTICE, item=work_item_id, allowed=target)
    return f"{allowed_words(target, by, live)}\n\n{mark}\n"


def _first(session: Session, key: str) -> bool:
    if session.get(Once, key) is not None:
        return False
    try:
        with session.begin_nested():
            session.add(Once(key=key))
    except IntegrityError:
        return False
    return True


def _post(services: Services, item: WorkItem, text: str) -> None:
    if item.installation_id is None:
        return
    io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
    try:
        io.post(text)
    except (GitHubException, GitHubNotConfigured) as exc:
        log.warning("egress notice on %s failed: %s", item.id, exc)
        services.events.emit("notice.failed", item.id, error=str(exc)[:300])


def announce_refusal(
    services: Services, session: Session, item: WorkItem, fields: Mapping[str, Any]
) -> None:
    """At most one notice per item and refused `host:port` (`session.egress_refused`)."""
    if fields.get("harness_own"):
        return
    found = target_of(str(fields.get("target") or "")[:300])
    if found is None:
        return
    host, port = found
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if not _first(session, f"egress-notice:{item.id}:{target}"):
        return
    keyword = services.config.routing.trigger.allow_keyword
    _post(services, item, refused_text(item.id, target, "", keyword))
    words = refused_words(target, "", keyword)
    mirrored = {"event": "refused", "target": target, "markdown": words, "url": item.html_url}
    services.mirror.post(session, item.id, "egress", mirrored)


def allow_reply(services: Services, session: Session, decision: Decision) -> Outcome:
    """Queue the allow job `decision` asks for, or refuse it (the usual one-line refusal)."""
    keyword = services.config.routing.trigger.allow_keyword
    asking = ask_on_item(services, session, decision, keyword=keyword, action="allow")
    if isinstance(asking, Outcome):
        return asking
    item, refused = asking.item, asking.refused
    found = allowed_target(decision.body, keyword)
    if found is None:
        return refused(f"say which host: `{keyword} example.org:443`", "no-target")
    if not is_live(item.state):
        return refused("this item has no running session to let through", "not-live")
    host, port = found
    job = allow_job(
        item, host=host, port=port, author=decision.author, source=decision.source, ref=decision.ref
    )
    queued = enqueue(services, session, f"allow:{item.id}:{decision.ref}", job)
    if queued is None:
        return Outcome(Status.REPEAT)
    emit(services, session, "gate.allowed", item.id, by=decision.author, host=host, port=port)
    return Outcome(Status.QUEUED, job_id=queued.id)


def allow_done(
    services: Services,
    session: Session,
    item: WorkItem,
    job: AllowJob,
    result: Mapping[str, Any],
) -> None:
    """The spawner ran an allow job: say on the issue, and in the Slack thread, what it did
    and how to keep it."""
    host = f"[{job.host}]" if ":" in job.host else job.host
    target, live = f"{host}:{job.port}", bool(result.get("allowed"))
    _post(services, item, allowed_text(item.id, target, job.author, live))
    words = allowed_words(target, job.author, live)
    mirrored = {"event": "allowed", "target": target, "live": live, "markdown": words}
    services.mirror.post(session, item.id, "egress", {**mirrored, "url": item.html_url})
