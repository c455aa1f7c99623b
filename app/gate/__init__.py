"""The phase-selection gate: the one path from an issue comment to a frozen choice.

Pure parts (checklist, render, parse, classify, freeze, confirm) take values and return
values; `execute` and `issue_io` are the thin edges that read the store and call GitHub.
"""

from app.gate.checklist import Checklist, Offer, Row, build_checklist, build_offer
from app.gate.classify import Selection, classify
from app.gate.confirm import (
    confirmation_markdown,
    initial_prompt,
    refusal_markdown,
    who_may_execute,
)
from app.gate.freeze import PHASE_SELECTION, frozen_record, frozen_skips, revalidate
from app.gate.ids import branch_name_ok, issue_of_branch, spec_id, work_branch, work_item_id_of
from app.gate.log_tail import MAX_LOG_BYTES, MAX_LOG_LINES, log_tail
from app.gate.markers import (
    MarkerKind,
    defuse,
    defuse_mentions,
    find_marker,
    is_app_comment,
    is_marked,
    is_own_comment,
    marker,
)
from app.gate.parse import Tick, execute_base, issue_base, parse_rows, says_command
from app.gate.pull_texts import (
    FAILING_CONCLUSIONS,
    MAX_PULL_BODY,
    CheckFailure,
    addresses_the_app,
    checks_text,
    closed_notice,
    fork_reply,
    opened_line,
    pull_body,
    receipt_note,
    reopened_text,
    review_comment_text,
    review_text,
)
from app.gate.render import render_checklist
from app.gate.textpin import Change, change_markdown, change_since, digest, issue_text, pin
from app.gate.weblinks import (
    WorkLinks,
    branch_url,
    code_text,
    markdown_link,
    repository_url,
    work_links,
)

__all__ = [
    "FAILING_CONCLUSIONS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "MAX_PULL_BODY",
    "PHASE_SELECTION",
    "Change",
    "CheckFailure",
    "Checklist",
    "MarkerKind",
    "Offer",
    "Row",
    "Selection",
    "Tick",
    "WorkLinks",
    "addresses_the_app",
    "branch_name_ok",
    "branch_url",
    "build_checklist",
    "build_offer",
    "change_markdown",
    "change_since",
    "checks_text",
    "classify",
    "closed_notice",
    "code_text",
    "confirmation_markdown",
    "defuse",
    "defuse_mentions",
    "digest",
    "execute_base",
    "find_marker",
    "fork_reply",
    "frozen_record",
    "frozen_skips",
    "initial_prompt",
    "is_app_comment",
    "is_marked",
    "is_own_comment",
    "issue_base",
    "issue_of_branch",
    "issue_text",
    "log_tail",
    "markdown_link",
    "marker",
    "opened_line",
    "parse_rows",
    "pin",
    "pull_body",
    "receipt_note",
    "refusal_markdown",
    "render_checklist",
    "reopened_text",
    "repository_url",
    "revalidate",
    "review_comment_text",
    "review_text",
    "says_command",
    "spec_id",
    "who_may_execute",
    "work_branch",
    "work_item_id_of",
    "work_links",
]
