"""Block Kit for a work item's walk through its phases (pure): the thread's parent message
that mirrors the progress comment, the message at a gate that waits for a decision (review,
or an approval gate after a phase) with its Approve and Request changes buttons, the modal
that takes the requested changes, and the done note."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from channels.text import escape, link, truncate

APPROVE_ACTION = "the-loop-approve"
CHANGES_ACTION = "the-loop-changes"
CHANGES_VIEW = "the-loop-changes-view"
CHANGES_BLOCK = "the-loop-changes-text"
CHANGES_INPUT = "changes"

ICONS = {
    "done": ":white_check_mark:",
    "current": ":arrow_forward:",
    "waiting on a human": ":hourglass_flowing_sand:",
    "skipped": ":fast_forward:",
    "ahead": ":white_small_square:",
}
STATUS_WORDS = {
    "frozen": "queued for a spawner",
    "spawning": "starting",
    "running": "running",
    "stalled": "stalled",
    "exited": "exited (a follow-up relaunches it)",
    "stopped": "stopped",
    "done": "done",
    "lost": ":warning: *lost*: its spawner went silent (execute again to rerun it)",
}


_LINKABLE = re.compile(r"https?://[^\s<>|]+")


def _linked(text: str, url: Any) -> str:
    """`text` linked to `url` when it is a plain web address, else shown as code."""
    if isinstance(url, str) and _LINKABLE.fullmatch(url):
        return link(url, escape(text))
    return f"`{escape(text)}`"


def _artifacts(payload: Mapping[str, Any]) -> str:
    """The artifacts, each linked to its file on the work branch when the payload says where."""
    links = payload.get("links") if isinstance(payload.get("links"), Mapping) else {}
    pairs = links.get("artifacts") if isinstance(links, Mapping) else None
    if isinstance(pairs, list) and pairs:
        shown = [
            _linked(str(pair[0]), pair[1])
            for pair in pairs
            if isinstance(pair, (list, tuple)) and len(pair) == 2
        ]
        return ", ".join(shown)
    return ", ".join(f"`{escape(str(a))}`" for a in payload.get("artifacts") or [])


def _branch(payload: Mapping[str, Any]) -> str:
    """The work branch, linked to its page, or "" when the payload names none."""
    links = payload.get("links")
    pair = links.get("branch") if isinstance(links, Mapping) else None
    if isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[0]:
        return f"*Branch:* {_linked(str(pair[0]), pair[1])}"
    return ""


def _pull(payload: Mapping[str, Any]) -> str:
    pr = payload.get("pull_request") or {}
    if isinstance(pr, Mapping) and pr.get("number"):
        number = pr["number"]
        return f"*Pull request:* {_linked(f'#{number}', pr.get('html_url'))}"
    return ""


def _section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(mrkdwn, 3000)}}


def _choice(payload: Mapping[str, Any]) -> str:
    parts = []
    for key in ("harness", "model", "effort"):
        value = str(payload.get(key) or "")
        parts.append(f"{key} `{escape(value)}`" if value else f"{key}: default")
    return " · ".join(parts)


def session_words(payload: Mapping[str, Any]) -> str:
    status = str(payload.get("status") or "")
    words = STATUS_WORDS.get(status, escape(status))
    if status == "stalled":
        screen = str(payload.get("stall") or "").replace("-", " ")
        hint = str(payload.get("stall_hint") or "")
        words = ":warning: *stalled*" + (f" at a {escape(screen)}" if screen else "")
        words += f" — {escape(hint)}" if hint else ""
    place = payload.get("queued")
    if status == "frozen" and isinstance(place, (list, tuple)) and len(place) == 2:
        words = f"queued ({int(place[0])} of {int(place[1])}) for a spawner"
    held = payload.get("waiting")
    if status == "frozen" and isinstance(held, str) and held:
        words = f"waiting: {escape(held[:200])}"
    return words


def progress(payload: Mapping[str, Any], url: str) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, blocks) of the thread's parent message."""
    ref = f"{payload.get('repo', '')}#{payload.get('issue_number', '')}"
    title = str(payload.get("title") or "")
    head = f"*{link(url, escape(ref))}* {escape(title)}"
    phases = []
    for row in payload.get("phases") or []:
        if isinstance(row, (list, tuple)) and len(row) == 2:
            node, state = str(row[0]), str(row[1])
            phases.append(f"{ICONS.get(state, '')} `{escape(node)}` {escape(state)}")
    done = payload.get("status") == "done"
    lines = [
        f"*Session:* {session_words(payload)} · {_choice(payload)}",
        *phases,
        f"*Artifacts:* {_artifacts(payload) or 'none reported yet'}",
    ]
    lines += [line for line in (_branch(payload), _pull(payload)) if line]
    for label in ("usage", "budget"):
        words = str(payload.get(label) or "")
        if words:
            lines.append(f"*{label.capitalize()}:* {escape(words)}")
    blocks = [_section(head), _section("\n".join(lines))]
    if done:
        blocks.insert(1, _section(":tada: *Done.* Every phase in force is complete."))
    status = STATUS_WORDS.get(str(payload.get("status")), str(payload.get("status")))
    at = str(payload.get("phase") or "the start")
    text = escape(f"{ref}: {title} — {status}, at {at}")
    return text, blocks


def _to_read(payload: Mapping[str, Any]) -> str:
    """The artifacts an approver reads first (`to_read`), linked like `_artifacts`."""
    wanted = {str(name) for name in payload.get("to_read") or []}
    links = payload.get("links") if isinstance(payload.get("links"), Mapping) else {}
    pairs = links.get("artifacts") if isinstance(links, Mapping) else None
    shown = [
        _linked(str(pair[0]), pair[1])
        for pair in (pairs if isinstance(pairs, list) else [])
        if isinstance(pair, (list, tuple))
        and len(pair) == 2
        and str(pair[0]).rsplit("/", 1)[-1] in wanted
    ]
    return ", ".join(shown) or ", ".join(f"`{escape(name)}`" for name in sorted(wanted))


def _decision_head(payload: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(fallback, first lines) of the message at the gate the payload names: `review`, or an
    approval gate after a phase (`phase`), whose artifacts to read come first."""
    gate, phase = str(payload.get("gate") or "review"), str(payload.get("phase") or "")
    if gate == "review" or not phase:
        return "Ready for review: approve or request changes.", [
            ":mag: *Ready for review.* The session waits for a human decision."
        ]
    head = (
        f":raised_hand: *`{escape(phase)}` waits for approval.* The session stops at "
        f"`{escape(gate)}` until a human decides."
    )
    read = _to_read(payload)
    return f"{phase} waits for approval: approve or request changes.", [
        head,
        f"*Read:* {read or 'nothing reported'}",
    ]


def review(payload: Mapping[str, Any], work_item_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The message at a gate that waits for a decision (review or an approval gate), with
    its two buttons."""
    artifacts = _artifacts(payload)
    where = [line for line in (_branch(payload), _pull(payload)) if line]
    approve = escape(str(payload.get("approve_keyword") or "the-loop approve"))
    changes = escape(str(payload.get("changes_keyword") or "the-loop changes"))
    fallback, head = _decision_head(payload)
    blocks = [
        _section(head[0]),
        _section("\n".join([*head[1:], f"*Artifacts:* {artifacts or 'none reported'}", *where])),
        {
            "type": "actions",
            "block_id": "the-loop-review",
            "elements": [
                {
                    "type": "button",
                    "action_id": APPROVE_ACTION,
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": work_item_id,
                },
                {
                    "type": "button",
                    "action_id": CHANGES_ACTION,
                    "text": {"type": "plain_text", "text": "Request changes"},
                    "value": work_item_id,
                },
            ],
        },
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"Or reply `{approve}` / `{changes} <what>` here."}
            ],
        },
    ]
    return escape(fallback), blocks


def changes_modal(work_item_id: str, thread: str) -> dict[str, Any]:
    """The modal a Request changes press opens: one text field for the reviewer's words."""
    return {
        "type": "modal",
        "callback_id": CHANGES_VIEW,
        "private_metadata": f"{work_item_id}\n{thread}",
        "title": {"type": "plain_text", "text": "Request changes"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": CHANGES_BLOCK,
                "label": {"type": "plain_text", "text": "What should change?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": CHANGES_INPUT,
                    "multiline": True,
                },
            }
        ],
    }


def done(payload: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    reason = escape(str(payload.get("reason") or ""))
    return "The work item is done.", [_section(f":tada: *The work item is done.* {reason}")]
