"""A work item's lifecycle, the one owner of its state, in five rooms: `flow` (its states
and the one table of transitions, the events that move it, the jobs it sends, who may act),
`decide` (what people decide, from any surface), `spend` (usage, costs, budgets, spend caps),
`tell` (the progress comment, notices, endings) and `prs` (its pull request).
"""

from app.workitems.decide.advance import UnseenArtifacts, advance, move_count, walk_of
from app.workitems.decide.answer import answer_reply, answer_text
from app.workitems.decide.decisions import Decide, Decision, Outcome, Status, lock_work_item
from app.workitems.decide.egress import allow_done, allow_reply, announce_refusal
from app.workitems.decide.execute import execute_reply
from app.workitems.decide.followups import deliver_comment
from app.workitems.decide.followups import on_issue_comment as follow_up_comment
from app.workitems.decide.gate_counts import KEY, next_attempt
from app.workitems.decide.review import gate_reply, verdict_of
from app.workitems.decide.walk import MoveRefused, in_force
from app.workitems.flow.authz import refusal
from app.workitems.flow.autoexecute import execute_on_labels
from app.workitems.flow.capacity import has_room, hold_line, renumber
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
from app.workitems.flow.session_facts import apply_session_event
from app.workitems.flow.states import HOSTED, Happened, is_live, transition
from app.workitems.prs.pull_sessions import close_unexecuted
from app.workitems.prs.pull_sessions import on_labeled as pull_labeled
from app.workitems.prs.pull_traffic import on_check_run as check_run_completed
from app.workitems.prs.pull_traffic import on_check_suite as check_suite_completed
from app.workitems.prs.pull_traffic import on_review as review_submitted
from app.workitems.prs.pull_traffic import on_review_comment as review_comment_created
from app.workitems.prs.pulls import PullRequestRefused, link_opened, open_pull_request
from app.workitems.prs.pulls import on_closed as pull_closed
from app.workitems.prs.pulls import on_reopened as pull_reopened
from app.workitems.prs.pulls import on_synchronize as pull_synchronized
from app.workitems.spend.costs import usage_line
from app.workitems.spend.post_rate import (
    POSTS_KEY,
    THROTTLED_KEY,
    admit,
    posted_times,
    refusal_text,
)
from app.workitems.spend.route_usage import add_route_counts
from app.workitems.spend.spend_caps import held_repositories, mark_held, record_spend, spend_report
from app.workitems.spend.spending import (
    budget_json,
    check_spending,
    raise_reply,
    resume_after_stop,
    stopped_by_budget,
    weigh_time,
)
from app.workitems.spend.usage import (
    CLOCK_KEYS,
    TOKEN_KINDS,
    USAGE_EVENT,
    add_usage,
    by_choice,
    priced,
    reported_counts,
    usage_of,
    wall_minutes,
)
from app.workitems.tell.progress import (
    ProgressPublisher,
    ProgressWatch,
    usage_changed,
)
from app.workitems.tell.setup_notes import setup_words

__all__ = [
    "CLOCK_KEYS",
    "HOSTED",
    "KEY",
    "POSTS_KEY",
    "THROTTLED_KEY",
    "TOKEN_KINDS",
    "USAGE_EVENT",
    "Decide",
    "Decision",
    "Happened",
    "MoveRefused",
    "Outcome",
    "ProgressPublisher",
    "ProgressWatch",
    "PullRequestRefused",
    "Status",
    "UnseenArtifacts",
    "add_route_counts",
    "add_usage",
    "admit",
    "advance",
    "allow_done",
    "allow_host",
    "allow_reply",
    "announce_refusal",
    "answer_question",
    "answer_reply",
    "answer_text",
    "apply_session_event",
    "budget_json",
    "by_choice",
    "check_run_completed",
    "check_spending",
    "check_suite_completed",
    "close_unexecuted",
    "decide_review",
    "deliver_comment",
    "execute_on_labels",
    "execute_reply",
    "follow_up_comment",
    "freeze_on_execute",
    "gate_reply",
    "has_room",
    "held_repositories",
    "hold_line",
    "in_force",
    "is_live",
    "link_opened",
    "lock_work_item",
    "log_execute_edit",
    "mark_held",
    "move_count",
    "next_attempt",
    "note_edit",
    "open_pull_request",
    "park_unlabeled",
    "posted_times",
    "priced",
    "pull_closed",
    "pull_labeled",
    "pull_reopened",
    "pull_synchronized",
    "raise_budget",
    "raise_reply",
    "record_spend",
    "refusal",
    "refusal_text",
    "renumber",
    "reported_counts",
    "resume_after_stop",
    "review_comment_created",
    "review_submitted",
    "setup_words",
    "spend_report",
    "start_work_item",
    "stop_on_close",
    "stopped_by_budget",
    "transition",
    "usage_changed",
    "usage_line",
    "usage_of",
    "verdict_of",
    "walk_of",
    "wall_minutes",
    "weigh_time",
]
