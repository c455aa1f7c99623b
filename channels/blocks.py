"""Block Kit messages for each mirror kind. Pure: a payload in, a `Message` out.

Every message has a plain-text fallback (`text`, what notifications and screen readers
show, and what is sent alone when Slack refuses the blocks) and an "Open on GitHub" button,
because GitHub stays the ledger. Slack reads the fallback as markup too, so every
GitHub-originated word in it is escaped exactly once, like the blocks: a title can never
become `<!channel>` or a link it did not spell. Unknown kinds still
render (as a plain note) rather than being dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.graph import approval_stops
from channels import allow_blocks, walk_blocks
from channels.answer_blocks import answer_buttons
from channels.checklist_control import OPEN_ACTION, control_blocks, summary_lines
from channels.text import (
    FALLBACK_LIMIT,
    SECTION_LIMIT,
    escape,
    link,
    to_mrkdwn,
    to_plain,
    truncate,
)


class Kind(StrEnum):
    """The message kinds the App posts (see `app.mirror`)."""

    ITEM_STARTED = "item_started"
    CHECKLIST = "checklist"
    CONFIRMATION = "confirmation"
    REFUSED = "refused"
    SESSION = "session"
    AGENT_COMMENT = "agent_comment"
    PROGRESS = "progress"  # the thread's parent, updated in place
    REVIEW = "review"
    DONE = "done"
    PULL_REQUEST = "pull_request"  # the item's pull request opened, or closed unmerged
    EGRESS = "egress"  # a host the session was refused (with an Allow button), or its answer


@dataclass(frozen=True)
class Message:
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def as_kwargs(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": self.blocks}


def section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(mrkdwn, SECTION_LIMIT)}}


def context(mrkdwn: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": truncate(mrkdwn, 3000)}]}


def open_button(url: str) -> dict[str, Any] | None:
    """The "Open on GitHub" link; omitted only when there is no web URL to open."""
    if not url.startswith(("https://", "http://")):
        return None
    return {
        "type": "actions",
        "block_id": "the-loop-open",
        "elements": [
            {
                "type": "button",
                "action_id": OPEN_ACTION,
                "text": {"type": "plain_text", "text": "Open on GitHub"},
                "url": truncate(url, 3000),
            }
        ],
    }


def _finish(text: str, blocks: list[dict[str, Any]], url: str) -> Message:
    button = open_button(url)
    return Message(
        text=truncate(text, FALLBACK_LIMIT), blocks=[*blocks, button] if button else blocks
    )


def _value(value: Any, default: str = "the default") -> str:
    return f"`{escape(str(value))}`" if value else default


def item_started(payload: Mapping[str, Any], url: str) -> Message:
    repo, number = payload.get("repo", ""), payload.get("issue_number", "")
    title = str(payload.get("title") or "")
    ref = f"{repo}#{number}"
    head = f"*{link(url, escape(ref))}* {escape(title)}"
    blocks = [
        section(head),
        context("Labelled for the-loop. Choose the phases in this thread, then press *Execute*."),
    ]
    return _finish(f"{escape(ref)}: {escape(title)} — labelled for the-loop", blocks, url)


def checklist(payload: Mapping[str, Any], url: str, work_item_id: str) -> Message:
    keyword = str(payload.get("keyword") or "the-loop execute")
    intro = section(
        "*Phase selection.* Untick the phases to skip, pick the harness, model and effort, "
        f"then press *Execute* — or reply `{escape(keyword)}` on GitHub."
    )
    fallback = "\n".join(
        [
            "Phase selection is waiting for a decision.",
            *(line.replace("*", "").replace("`", "") for line in summary_lines(payload)),
            f"Press Execute here or reply '{escape(keyword)}' on GitHub.",
        ]
    )
    return _finish(fallback, [intro, *control_blocks(payload, work_item_id)], url)


def choice_facts(record: Mapping[str, Any]) -> list[str]:
    """Harness, model, effort, skipped phases, the approval gates ticked (`stops`) and dropped
    ticks, one mrkdwn line each."""
    phases = approval_stops(str(s) for s in record.get("skips") or {})[0]
    stops = [str(s) for s in record.get("stops") or []]
    facts = [
        f"*Harness:* {_value(record.get('harness'))}",
        f"*Model:* {_value(record.get('model'))}",
        f"*Effort:* {_value(record.get('effort'))}",
        "*Skipped:* " + (", ".join(f"`{escape(s)}`" for s in phases) or "nothing"),
    ]
    if stops:
        facts.append("*Stops for approval at:* " + ", ".join(f"`{escape(s)}`" for s in stops))
    for drop in record.get("dropped") or []:
        if isinstance(drop, Mapping):
            token, reason = drop.get("token", ""), drop.get("reason", "")
            facts.append(f"*Dropped:* `{escape(str(token))}` — {escape(str(reason))}")
    return facts


def checklist_closed(frozen: Mapping[str, Any], url: str) -> Message:
    """The checklist message once the selection is frozen (from Slack or GitHub): the
    control is replaced by what was decided, so nobody ticks a closed checklist."""
    decision = (frozen.get("decisions") or {}).get("phase-selection") or {}
    by = str(decision.get("by") or "someone")
    blocks = [
        section(f":lock: *Phase selection frozen by @{escape(by)}.*"),
        section("\n".join(choice_facts(frozen))),
    ]
    return _finish(f"Phase selection frozen by @{escape(by)}.", blocks, url)


def confirmation(payload: Mapping[str, Any], url: str) -> Message:
    markdown = str(payload.get("markdown") or "")
    blocks = [
        section(":white_check_mark: *Selection frozen — starting.*"),
        section("\n".join(choice_facts(payload))),
    ]
    if markdown:
        blocks.append(section(to_mrkdwn(markdown)))
    return _finish("Selection frozen: " + to_plain(markdown or "starting"), blocks, url)


def refused(payload: Mapping[str, Any], url: str) -> Message:
    who, why = str(payload.get("who") or "someone"), str(payload.get("why") or "")
    text = f"Execute by @{escape(who)} refused: {escape(why)}"
    return _finish(
        text, [section(f":no_entry: *Execute by @{escape(who)} refused.* {escape(why)}")], url
    )


def _session_line(payload: Mapping[str, Any]) -> str:
    event = str(payload.get("event") or "")
    choice = (
        f"harness {_value(payload.get('harness'))}, model {_value(payload.get('model'))}, "
        f"effort {_value(payload.get('effort'))}"
    )
    detail = escape(
        str(payload.get("reason") or payload.get("detail") or payload.get("error") or "")
    )
    if event == "session.spawned":
        return f":rocket: *Session started* on {choice}."
    if event == "session.respawned":
        return f":arrows_counterclockwise: *Session restarted* on {choice}."
    if event == "session.delivered":
        who = payload.get("author")
        return ":incoming_envelope: *Comment delivered to the session*" + (
            f" (from @{escape(str(who))})." if who else "."
        )
    if event == "session.delivery_failed":
        return ":x: *A comment could not be delivered to the session.* " + detail
    if event == "session.spawn_failed":
        return ":x: *The session could not be started.* " + detail
    if event == "session.stalled":
        screen = escape(str(payload.get("screen") or "interactive prompt").replace("-", " "))
        question = escape(str(payload.get("question") or ""))
        hint = escape(str(payload.get("hint") or ""))
        asks = f" It asks: _{question}_" if question else ""
        pick = " Pick an answer below." if payload.get("options") else f" {hint}"
        return f":warning: *Session is waiting at a {screen}.*{asks}{pick} {detail}"
    if event == "session.answered":
        who = escape(str(payload.get("by") or "someone"))
        option = escape(str(payload.get("option") or ""))
        choice = escape(str(payload.get("choice") or ""))
        return f":ballot_box_with_check: *Answered* {choice}. {option} (by @{who}); it moved on."
    if event == "session.answer_failed":
        return ":x: *The answer did not take.* " + detail
    if event == "session.exited":
        code = payload.get("exit_code", payload.get("status"))
        suffix = f" (exit {escape(str(code))})" if code is not None else ""
        return f":checkered_flag: *Session exited*{suffix}. {detail}"
    return f"*{escape(event or 'session')}* {detail}"


def session(payload: Mapping[str, Any], url: str, work_item_id: str = "") -> Message:
    line = _session_line(payload).strip()  # already escaped
    buttons = (
        answer_buttons(work_item_id, payload) if payload.get("event") == "session.stalled" else []
    )
    return _finish(line.replace("*", ""), [section(line), *buttons], url)


def agent_comment(payload: Mapping[str, Any], url: str) -> Message:
    body = str(payload.get("body") or "")
    asking = payload.get("kind") == "ask"
    head = ":question: *The agent asks:*" if asking else ":speech_balloon: *The agent says:*"
    text = ("The agent asks: " if asking else "The agent says: ") + to_plain(body)
    return _finish(text, [section(head), section(to_mrkdwn(body))], url)


def pull_request(payload: Mapping[str, Any], url: str) -> Message:
    number = escape(str(payload.get("number")))
    html_url = str(payload.get("html_url") or "")
    ref = link(html_url, f"#{number}")
    if payload.get("event") == "closed":
        who = escape(str(payload.get("by") or "someone"))
        head = f"Pull request #{number} closed without merging (by @{who})"
        rest = "The session is stopped; reopen the pull request or execute again."
        line = f":no_entry_sign: *Pull request {ref} closed without merging* (by @{who})."
    else:
        by = str(payload.get("by") or "")
        who = "by the session" if by == "session" else f"by @{escape(by)}"
        head, rest = f"Pull request #{number} opened ({who})", escape(html_url)
        line = f":twisted_rightwards_arrows: *Pull request {ref} opened* ({who})."
    if payload.get("event") == "closed":
        line += f" {rest}"
    return _finish(f"{head}. {rest}".strip(), [section(line)], url)


def fallback(kind: str, payload: Mapping[str, Any], url: str) -> Message:
    facts = {k: v for k, v in payload.items() if k != "url"}
    summary = truncate(json.dumps(facts, default=str, sort_keys=True), 2500)
    text = f"{escape(kind)}: {escape(summary)}"
    return _finish(text, [section(f"*{escape(kind)}*\n{escape(summary)}")], url)


def render(kind: str, payload: Mapping[str, Any], work_item_id: str, url: str = "") -> Message:
    """The message for one mirror row. `url` falls back to the payload's `url`."""
    url = url or str(payload.get("url") or "")
    if kind == Kind.ITEM_STARTED:
        return item_started(payload, url)
    if kind == Kind.CHECKLIST:
        return checklist(payload, url, work_item_id)
    if kind == Kind.CONFIRMATION:
        return confirmation(payload, url)
    if kind == Kind.REFUSED:
        return refused(payload, url)
    if kind == Kind.SESSION:
        return session(payload, url, work_item_id)
    if kind == Kind.AGENT_COMMENT:
        return agent_comment(payload, url)
    if kind == Kind.PROGRESS:
        return _finish(*walk_blocks.progress(payload, url), url)
    if kind == Kind.REVIEW:
        return _finish(*walk_blocks.review(payload, work_item_id), url)
    if kind == Kind.DONE:
        return _finish(*walk_blocks.done(payload), url)
    if kind == Kind.PULL_REQUEST:
        return pull_request(payload, url)
    if kind == Kind.EGRESS:
        return _finish(*allow_blocks.egress(payload, work_item_id), url)
    return fallback(kind, payload, url)
