"""The phase-selection checklist as a Block Kit control, and the execute reply it composes.

Pure functions of the gate's structured checklist (`Checklist.to_mirror()`):
`{"sections": [{"kind", "title", "single", "default", "rows": [{"token", "label",
"checked"}]}], "keyword", "comment_id", "url"}`.

Phase sections become checkbox groups (Slack allows at most 10 options per element, so a
long section is split over several), choice sections (harness, model, effort) become radio
buttons with the default pre-selected — or a select menu when a section offers more than
radio buttons can hold. Pressing Execute turns the message's `state.values` back into
exactly the text a person would type on GitHub, so the gate's one parser reads both.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from app.gate import Row
from channels.text import escape, truncate

BLOCK_PREFIX = "the-loop-rows"
ROWS_ACTION = "the-loop-rows"
EXECUTE_ACTION = "the-loop-execute"
OPEN_ACTION = "the-loop-open"
MAX_CHECKBOXES = 10  # Slack: options per checkboxes element
MAX_RADIOS = 10  # Slack: options per radio_buttons element
MAX_SELECT = 100  # Slack: options per static_select element
OPTION_TEXT_LIMIT = 75
LABEL_LIMIT = 2000


@dataclass(frozen=True)
class MirrorSection:
    """A section as the mirror payload carries it: the gate's `Section` less its `hint`,
    which `Checklist.to_mirror()` leaves out, with `kind` as sent."""

    kind: str
    title: str
    single: bool
    default: str | None
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class ChecklistElement:
    """One Slack element of the checklist: the block that holds it and the rows it offers."""

    block_id: str
    section: MirrorSection
    rows: tuple[Row, ...]


def sections_of(checklist: Mapping[str, Any]) -> list[MirrorSection]:
    """The checklist's sections as values; malformed rows are skipped, never guessed."""
    sections: list[MirrorSection] = []
    for raw in checklist.get("sections") or []:
        if not isinstance(raw, Mapping):
            continue
        rows = tuple(
            Row(str(r["token"]), str(r.get("label") or r["token"]), bool(r.get("checked")))
            for r in raw.get("rows") or []
            if isinstance(r, Mapping) and r.get("token")
        )
        if rows:
            sections.append(
                MirrorSection(
                    kind=str(raw.get("kind") or ""),
                    title=str(raw.get("title") or raw.get("kind") or "Choose"),
                    single=bool(raw.get("single")),
                    default=raw.get("default"),
                    rows=rows,
                )
            )
    return sections


def controls(checklist: Mapping[str, Any]) -> Iterator[ChecklistElement]:
    """Every element of the control in order, with a block id that names its position."""
    for s_index, section in enumerate(sections_of(checklist)):
        size = len(section.rows) if section.single else MAX_CHECKBOXES
        for c_index, start in enumerate(range(0, len(section.rows), size)):
            block_id = f"{BLOCK_PREFIX}:{s_index}:{c_index}"
            yield ChecklistElement(block_id, section, section.rows[start : start + size])


def _option(row: Row) -> dict[str, Any]:
    return {
        "text": {"type": "plain_text", "text": truncate(row.label, OPTION_TEXT_LIMIT)},
        "value": row.token,
    }


def default_row(section: MirrorSection) -> Row | None:
    """The pre-selected row of a choice section: the one ticked on GitHub, else the default."""
    ticked = [row for row in section.rows if row.checked]
    if ticked:
        return ticked[0]
    if section.default:
        for row in section.rows:
            if section.default in (row.token, row.label) or row.token.endswith(
                "-" + section.default
            ):
                return row
    return None


def _element(control: ChecklistElement) -> dict[str, Any]:
    options = [_option(row) for row in control.rows]
    if not control.section.single:
        element: dict[str, Any] = {"type": "checkboxes", "action_id": ROWS_ACTION}
        element["options"] = options
        initial = [_option(row) for row in control.rows if row.checked]
        if initial:
            element["initial_options"] = initial
        return element
    if len(options) <= MAX_RADIOS:
        element = {"type": "radio_buttons", "action_id": ROWS_ACTION, "options": options}
    else:
        element = {
            "type": "static_select",
            "action_id": ROWS_ACTION,
            "placeholder": {"type": "plain_text", "text": "Choose one"},
            "options": options[:MAX_SELECT],
        }
    chosen = default_row(control.section)
    if chosen is not None and chosen in control.rows[:MAX_SELECT]:
        element["initial_option"] = _option(chosen)
    return element


def _label(control: ChecklistElement) -> str:
    section = control.section
    label = section.title
    if section.single and section.default and "default" not in label.lower():
        label = f"{label} (default: {section.default})"
    if not control.block_id.endswith(":0"):
        label = f"{label} (continued)"
    return truncate(label, LABEL_LIMIT)


def control_blocks(checklist: Mapping[str, Any], work_item_id: str) -> list[dict[str, Any]]:
    """The input blocks of the checklist and the Execute button."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "input",
            "block_id": control.block_id,
            "optional": True,
            "dispatch_action": False,
            "label": {"type": "plain_text", "text": _label(control)},
            "element": _element(control),
        }
        for control in controls(checklist)
    ]
    blocks.append(
        {
            "type": "actions",
            "block_id": "the-loop-execute",
            "elements": [
                {
                    "type": "button",
                    "action_id": EXECUTE_ACTION,
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Execute"},
                    "value": work_item_id,
                }
            ],
        }
    )
    return blocks


def _picked(state: Mapping[str, Any]) -> set[str] | None:
    """The values chosen in one element's state, or None when the state has no selection key."""
    if "selected_options" in state:
        return {str(o.get("value")) for o in state.get("selected_options") or []}
    if "selected_option" in state:
        option = state.get("selected_option")
        return {str(option.get("value"))} if isinstance(option, Mapping) else set()
    return None


def pressed_tokens(checklist: Mapping[str, Any], values: Mapping[str, Any]) -> set[str]:
    """Tokens ticked at the moment of the press.

    An element Slack reported reads from its state; an element absent from the state (never
    touched, on a client that omits it) reads as rendered. A value that is not one of that
    element's own rows is ignored, and a choice section yields at most one token.
    """
    ticked: set[str] = set()
    for control in controls(checklist):
        offered = {row.token for row in control.rows}
        block = values.get(control.block_id)
        state = block.get(ROWS_ACTION) if isinstance(block, Mapping) else None
        picked = _picked(state) if isinstance(state, Mapping) else None
        if picked is None:
            if control.section.single:
                chosen = default_row(control.section)
                picked = {chosen.token} if chosen is not None else set()
            else:
                picked = {row.token for row in control.rows if row.checked}
        picked &= offered
        if control.section.single and len(picked) > 1:
            picked = set()
        ticked |= picked
    return ticked


def execute_text(checklist: Mapping[str, Any], values: Mapping[str, Any]) -> str:
    """Exactly the reply a person would type on GitHub: the keyword, then every offered row."""
    ticked = pressed_tokens(checklist, values)
    lines = [str(checklist.get("keyword") or "the-loop execute")]
    for section in sections_of(checklist):
        for row in section.rows:
            lines.append(f"- [{'x' if row.token in ticked else ' '}] {row.token}")
    return "\n".join(lines)


def summary_lines(checklist: Mapping[str, Any]) -> list[str]:
    """One line per section naming what is ticked as rendered (for the plain-text fallback)."""
    lines: list[str] = []
    for section in sections_of(checklist):
        if section.single:
            first = default_row(section)
            chosen = [first.token] if first is not None else []
        else:
            chosen = [row.token for row in section.rows if row.checked]
        shown = ", ".join(f"`{escape(token)}`" for token in chosen) or "none"
        lines.append(f"*{escape(section.title)}*: {shown}")
    return lines
