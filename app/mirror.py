"""Where the App tells a chat surface what happened. The Slack mirror (`channels/`)
implements it; `NullMirror` is used when no chat surface is configured.

`post` is called inside the caller's database transaction, so a mirror queues (it never
sends inline): a chat outage can never block or fail the GitHub path.

Message kinds and their payloads (every payload also carries `url`, the issue's HTML URL):
- `item_started`: {title, repo, issue_number}
- `checklist`: {sections: [...], keyword, comment_id} — the structured checklist of
  `app.gate` (see `Checklist.to_mirror()`), so a chat surface can render it as a control
- `confirmation`: {markdown, harness, model, effort, skips, dropped}
- `refused`: {who, why}
- `session`: {event, ...the event's fields} for session.spawned/respawned/delivered/
  stalled/exited
- `agent_comment`: {kind: "comment" | "ask", body}
- `egress`: {event: "refused", target, markdown} once per refused `host:port` (a chat
  surface may offer to allow it), or {event: "allowed", target, live, markdown} its answer
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy.orm import Session


class Mirror(Protocol):
    def post(self, session: Session, work_item_id: str, kind: str, payload: dict[str, Any]) -> None:
        """Queue a message about `work_item_id` inside the caller's transaction."""


class NullMirror:
    def post(self, session: Session, work_item_id: str, kind: str, payload: dict[str, Any]) -> None:
        return None
