"""The router table: every `(event, action)` the App acts on, and the handler that does it.

`(event, None)` runs for every action of that event. Unlisted deliveries are stored and
marked done without effect.
"""

from __future__ import annotations

from app.github import (
    Router,
    RouteTable,
    forget_installation,
    record_installation,
    update_repositories,
)
from app.workitems import (
    allow_host,
    answer_question,
    check_run_completed,
    check_suite_completed,
    close_unexecuted,
    decide_review,
    execute_on_labels,
    follow_up_comment,
    freeze_on_execute,
    link_opened,
    log_execute_edit,
    note_edit,
    park_unlabeled,
    pull_closed,
    pull_labeled,
    pull_reopened,
    pull_synchronized,
    raise_budget,
    review_comment_created,
    review_submitted,
    start_work_item,
    stop_on_close,
)

ROUTES: RouteTable = {
    ("installation", "created"): [record_installation],
    ("installation", "new_permissions_accepted"): [record_installation],
    ("installation", "suspend"): [record_installation],
    ("installation", "unsuspend"): [record_installation],
    ("installation", "deleted"): [forget_installation],
    ("installation_repositories", "added"): [update_repositories],
    ("installation_repositories", "removed"): [update_repositories],
    ("issues", "labeled"): [start_work_item, execute_on_labels],
    ("issues", "unlabeled"): [park_unlabeled],
    ("issues", "closed"): [stop_on_close],
    ("issues", "edited"): [note_edit],
    ("issue_comment", "created"): [
        freeze_on_execute,
        decide_review,
        answer_question,
        raise_budget,
        allow_host,
        follow_up_comment,
    ],
    ("issue_comment", "edited"): [log_execute_edit],
    ("pull_request", "opened"): [link_opened],
    ("pull_request", "synchronize"): [pull_synchronized],
    ("pull_request", "closed"): [pull_closed, close_unexecuted],
    ("pull_request", "reopened"): [pull_reopened],
    ("pull_request", "labeled"): [pull_labeled],
    ("pull_request", "unlabeled"): [park_unlabeled],
    ("pull_request_review_comment", "created"): [review_comment_created],
    ("pull_request_review", "submitted"): [review_submitted],
    ("check_run", "completed"): [check_run_completed],
    ("check_suite", "completed"): [check_suite_completed],
}


def build_router() -> Router:
    return Router(ROUTES)
