"""The router table: every `(event, action)` the App acts on, and the handler that does it.

`(event, None)` runs for every action of that event. Unlisted deliveries are stored and
marked done without effect.
"""

from __future__ import annotations

from app.github import installations
from app.github.router import Router, RouteTable
from app.workitems import autoexecute, followups, pinning
from app.workitems import handlers as workitems

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
    ("issues", "edited"): [pinning.note_edit],
    ("issue_comment", "created"): [
        workitems.freeze_on_execute,
        workitems.decide_review,
        followups.on_issue_comment,
    ],
    ("issue_comment", "edited"): [workitems.log_execute_edit],
}


def build_router() -> Router:
    return Router(ROUTES)
