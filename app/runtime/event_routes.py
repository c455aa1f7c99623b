"""The router table: every `(event, action)` the App acts on, and the handler that does it.

`(event, None)` runs for every action of that event. Unlisted deliveries are stored and
marked done without effect.
"""

from __future__ import annotations

from app.github.installations import (
    forget_installation,
    record_installation,
    update_repositories,
)
from app.github.router import Router, RouteTable
from app.workitems.decide.followups import on_issue_comment as follow_up_comment
from app.workitems.flow.autoexecute import execute_on_labels
from app.workitems.flow.handlers import (
    allow_host,
    answer_question,
    decide_review,
    freeze_on_execute,
    log_execute_edit,
    park_unlabeled,
    raise_budget,
    start_work_item,
    stop_on_close,
)
from app.workitems.flow.issue_text import note_edit
from app.workitems.prs.pull_sessions import close_unexecuted
from app.workitems.prs.pull_sessions import on_labeled as pull_labeled
from app.workitems.prs.pull_traffic import on_check_run as check_run_completed
from app.workitems.prs.pull_traffic import on_check_suite as check_suite_completed
from app.workitems.prs.pull_traffic import on_review as review_submitted
from app.workitems.prs.pull_traffic import on_review_comment as review_comment_created
from app.workitems.prs.pulls import link_opened
from app.workitems.prs.pulls import on_closed as pull_closed
from app.workitems.prs.pulls import on_reopened as pull_reopened
from app.workitems.prs.pulls import on_synchronize as pull_synchronized

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
