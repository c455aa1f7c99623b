"""The router table: every `(event, action)` the App acts on, and the handler that does it.

`(event, None)` runs for every action of that event. Unlisted deliveries are stored and
marked done without effect.
"""

from __future__ import annotations

from app.github import installations
from app.github.router import Router, RouteTable
from app.workitems.decide import followups
from app.workitems.flow import autoexecute, issue_text
from app.workitems.flow import handlers as workitems
from app.workitems.prs import pull_sessions, pull_traffic, pulls

ROUTES: RouteTable = {
    ("installation", "created"): [installations.record_installation],
    ("installation", "new_permissions_accepted"): [installations.record_installation],
    ("installation", "suspend"): [installations.record_installation],
    ("installation", "unsuspend"): [installations.record_installation],
    ("installation", "deleted"): [installations.forget_installation],
    ("installation_repositories", "added"): [installations.update_repositories],
    ("installation_repositories", "removed"): [installations.update_repositories],
    ("issues", "labeled"): [workitems.start_work_item, autoexecute.execute_on_labels],
    ("issues", "unlabeled"): [workitems.park_unlabeled],
    ("issues", "closed"): [workitems.stop_on_close],
    ("issues", "edited"): [issue_text.note_edit],
    ("issue_comment", "created"): [
        workitems.freeze_on_execute,
        workitems.decide_review,
        workitems.answer_question,
        workitems.raise_budget,
        workitems.allow_host,
        followups.on_issue_comment,
    ],
    ("issue_comment", "edited"): [workitems.log_execute_edit],
    ("pull_request", "opened"): [pulls.link_opened],
    ("pull_request", "synchronize"): [pulls.on_synchronize],
    ("pull_request", "closed"): [pulls.on_closed, pull_sessions.close_unexecuted],
    ("pull_request", "reopened"): [pulls.on_reopened],
    ("pull_request", "labeled"): [pull_sessions.on_labeled],
    ("pull_request", "unlabeled"): [workitems.park_unlabeled],
    ("pull_request_review_comment", "created"): [pull_traffic.on_review_comment],
    ("pull_request_review", "submitted"): [pull_traffic.on_review],
    ("check_run", "completed"): [pull_traffic.on_check_run],
    ("check_suite", "completed"): [pull_traffic.on_check_suite],
}


def build_router() -> Router:
    return Router(ROUTES)
