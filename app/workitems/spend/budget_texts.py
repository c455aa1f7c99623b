"""What a budget says to a session and on its issue (pure): the wrap-up notice at 90 %, the
gateway's refusal at 100 %, and their spend-cap twins, which name the cap and when it
resets. An item's budget and a spend cap ask the session for the same wrap-up.
"""

from __future__ import annotations

from datetime import datetime

from app.workitems.spend.budgets import WARN_AT, Limits, Spent, budget_text
from app.workitems.spend.spend_caps import CapStanding
from app.workitems.spend.spend_windows import reset_text

WRAP_UP = (
    "Wrap up now: commit your work, push it (`git push`), say on the issue where it stands "
    "(`the-loop comment`), then stop. When the budget is spent the model refuses further "
    "requests and the session is stopped."
)


def warning_text(limits: Limits, spent: Spent) -> str:
    """What the session is told once, at `WARN_AT` of its item's budget."""
    return (
        f"the-loop: budget — this work item has used {WARN_AT:.0%} or more of its budget "
        f"({budget_text(limits, spent)}). {WRAP_UP}"
    )


def cap_warning_text(cap: CapStanding) -> str:
    """What a session is told once per window, at `WARN_AT` of a spend cap."""
    return (
        f"the-loop: budget — {WARN_AT:.0%} or more of the {cap.name} is used "
        f"({budget_text(cap.limits, cap.spent)}). {WRAP_UP}"
    )


def refusal_note(limits: Limits, spent: Spent) -> str:
    """What the model gateway answers the session once its item's budget is spent."""
    return (
        f"the-loop: budget spent ({budget_text(limits, spent)}). This work item may not use "
        "the model any more; the session is being stopped and its work stays on its "
        "branch. An authorized person can add to it with `the-loop budget +<amount>` on "
        "the issue."
    )


def cap_refusal_note(cap: CapStanding, now: datetime) -> str:
    """What the model gateway answers a session once a spend cap is reached."""
    return (
        f"the-loop: {cap.name} reached ({budget_text(cap.limits, cap.spent)}; "
        f"{reset_text(cap.window, now)}). The session is being stopped and its work stays on "
        "its branch. An authorized person can lift the cap for the day with `the-loop "
        "budget` on the issue."
    )


def cap_line(cap: CapStanding, now: datetime) -> str:
    """`**Budget:** daily budget reached: tokens 1k of 1k (resets 00:00 UTC)`."""
    return (
        f"**Budget:** {cap.name} reached: {budget_text(cap.limits, cap.spent)} "
        f"({reset_text(cap.window, now)})"
    )


AFTER = {
    "relaunched": "The session is relaunched where it left off.",
    "relaunched once its stop lands": (
        "The session was being stopped: it is relaunched where it left off once it is."
    ),
    "spent": "It is still spent: add more to let the session go on.",
}


def raise_ack_text(author: str, words: str, budget: str, after: str) -> str:
    """The issue's answer to `the-loop budget +<amount>`."""
    then = AFTER.get(after, "")
    return f"@{author} added {words} to this item's budget: now {budget}. {then}".rstrip()


def lift_ack_text(author: str, after: str) -> str:
    """The issue's answer to `the-loop budget` alone."""
    then = AFTER.get(after, "Work items of this repository that waited for it go on.")
    return (
        f"@{author} lifted the daily and monthly spend caps of this repository until "
        f"00:00 UTC. {then}"
    )
