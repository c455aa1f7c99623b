"""One Slack button per option of the question a stalled session shows (pure).

A button's value carries the work item, the option number and the question's fingerprint,
so a press answers exactly the question it was shown for; the App refuses it once the
screen moved on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ANSWER_ACTION_PREFIX = "the-loop-answer-"
ANSWER_ACTION_PATTERN = rf"^{ANSWER_ACTION_PREFIX}\d$"
LABEL_LIMIT = 75  # Slack's button text limit


def answer_value(work_item_id: str, choice: int, fingerprint: str) -> str:
    return f"{work_item_id}\n{choice}\n{fingerprint}"


def parse_answer_value(value: str) -> tuple[str, int, str] | None:
    """(work item, option, fingerprint) of a button's value; None when it is not one."""
    parts = value.split("\n")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2]


def answer_buttons(work_item_id: str, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The actions block for a `session.stalled` payload with options; [] without."""
    options = payload.get("options") or []
    fingerprint = str(payload.get("fingerprint") or "")
    if not isinstance(options, list) or not options or not fingerprint:
        return []
    elements = []
    for number, label in enumerate(options[:9], start=1):
        text = f"{number}. {label}"
        if len(text) > LABEL_LIMIT:
            text = text[: LABEL_LIMIT - 1] + "…"
        elements.append(
            {
                "type": "button",
                "action_id": f"{ANSWER_ACTION_PREFIX}{number}",
                "text": {"type": "plain_text", "text": text},
                "value": answer_value(work_item_id, number, fingerprint),
            }
        )
    return [
        {"type": "actions", "block_id": f"the-loop-answer-{fingerprint[:8]}", "elements": elements}
    ]
