"""The texts of a work item's pull request (pure): its body, the lines the App posts about it,
and what its session is told about reviews, comments and failing checks.

What a reviewer or a check wrote reaches the session verbatim (it is the session's input);
what the App posts on GitHub echoes only numbers, logins, branch and repository names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.gate.markers import MarkerKind, defuse, defuse_mentions, marker

MAX_PULL_BODY = 60_000  # GitHub refuses bodies over 65 536 characters; leave room for framing
MAX_CHECK_SUMMARY = 600  # per failing check, so many failures still make one readable message
MAX_HUNK_LINES = 40
# Conclusions that mean a check failed. `cancelled` is left out: a newer push cancels the
# runs it supersedes, and that is not a failure to fix.
FAILING_CONCLUSIONS = frozenset({"failure", "timed_out", "action_required", "startup_failure"})


def addresses_the_app(body: str, bot_login: str | None, leads: Iterable[str]) -> bool:
    """Does a pull-request comment speak to the App (pure)? It mentions the App (`@<slug>`,
    from its bot login `<slug>[bot]`, case-blind, a whole name) or one of its lines starts
    with one of `leads` (`the-loop`, the first word of each trigger keyword), case-blind, a
    colon or comma after it allowed."""
    slug = (bot_login or "").removesuffix("[bot]")
    if slug and re.search(rf"(?<![\w-])@{re.escape(slug)}(?![\w-])", body, re.IGNORECASE):
        return True
    words = {lead.lower() for lead in leads if lead}
    for line in body.splitlines():
        first = line.strip().split(maxsplit=1)
        if first and first[0].lower().rstrip(":,") in words:
            return True
    return False


def pull_body(text: str, issue_number: int, work_item_id: str, allow_mentions: bool = False) -> str:
    """The body of the PR a session opens: its words (their @-mentions inert unless the
    operator allows them), "Closes #n" (merging closes the issue) and the App's hidden
    marker naming the work item."""
    words = defuse(text.strip())
    if not allow_mentions:
        words = defuse_mentions(words)
    closes = f"Closes #{issue_number}"
    return f"{words}\n\n{closes}\n\n{marker(MarkerKind.PULL, item=work_item_id)}\n"


def opened_line(number: int, url: str, by: str, work_item_id: str) -> str:
    """The one line on the issue when its pull request is linked."""
    who = "by the session" if by == "session" else f"by @{by}"
    return (
        f"Pull request [#{number}]({url}) is open for this work item ({who}). Reviews, comments "
        "and failing checks on it reach the session.\n\n"
        f"{marker(MarkerKind.NOTICE, item=work_item_id, pr=number, event='opened')}\n"
    )


def closed_notice(number: int, by: str, execute_keyword: str, work_item_id: str, ref: str) -> str:
    """The one notice when the pull request closed without being merged."""
    return (
        f"Pull request #{number} was closed without merging (by @{by}). The session is stopped "
        "and this work item waits for a human: reopen the pull request to continue, or reply "
        f"`{execute_keyword}` here to start it again.\n\n"
        f"{marker(MarkerKind.NOTICE, item=work_item_id, pr=number, event='closed', ref=ref)}\n"
    )


def fork_reply(head_repo: str, repo: str, work_item_id: str) -> str:
    """The reply to a trigger label on a pull request whose branch lives in a fork."""
    where = f"`{head_repo}`" if head_repo else "a repository that no longer exists"
    return (
        f"This pull request's branch lives in {where}, a fork: the App can push only to "
        f"`{repo}`, so no session is started here. Push the branch to `{repo}` and label that "
        "pull request instead.\n\n"
        f"{marker(MarkerKind.NOTICE, item=work_item_id, event='fork')}\n"
    )


def reopened_text(number: int, by: str) -> str:
    """What the session is told when its closed pull request is reopened."""
    return (
        f"Pull request #{number} was reopened by @{by}. Continue the work on its branch; "
        "reviews and checks reach you as before."
    )


def _hunk(diff_hunk: str) -> str:
    lines = diff_hunk.splitlines()
    if len(lines) > MAX_HUNK_LINES:
        lines = ["…", *lines[-MAX_HUNK_LINES:]]
    return "\n".join(lines)


def review_comment_text(
    number: int,
    path: str,
    line: int | None,
    start_line: int | None,
    diff_hunk: str,
    body: str,
) -> str:
    """A comment on a line of the diff, as the session reads it: where, the hunk, the words."""
    where = f"`{path}`"
    if line is not None:
        lines = (
            f"lines {start_line}-{line}" if start_line and start_line != line else f"line {line}"
        )
        where += f" {lines}"
    parts = [f"Review comment on pull request #{number}, {where}:"]
    if diff_hunk.strip():
        parts += ["```diff", _hunk(diff_hunk), "```"]
    parts += ["", body.strip()]
    return "\n".join(parts)


REVIEW_WORDS = {
    "approved": "approved the pull request",
    "changes_requested": "requested changes (CHANGES REQUESTED: the pull request will not be "
    "merged until they are addressed)",
    "commented": "reviewed the pull request with a comment",
}


def review_text(number: int, state: str, body: str) -> str:
    """A submitted review, as the session reads it: its verdict, then its words."""
    verdict = REVIEW_WORDS.get(state.lower(), f"submitted a review ({state})")
    text = f"Review of pull request #{number}: the reviewer {verdict}."
    return f"{text}\n\n{body.strip()}" if body.strip() else text


@dataclass(frozen=True)
class CheckFailure:
    """One failing check on a commit, as GitHub reports it."""

    name: str
    conclusion: str
    title: str = ""
    summary: str = ""
    url: str = ""


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " […]"


def checks_text(number: int, sha: str, failures: Sequence[CheckFailure]) -> str:
    """Failing checks on the pull request's head commit: names, summaries, links."""
    lines = [f"Checks failed on pull request #{number} at its head commit {sha[:12]}:"]
    for check in failures:
        line = f"- {check.name}: {check.conclusion}"
        if check.title.strip():
            line += f" — {_cut(check.title, 200)}"
        if check.url:
            line += f" ({check.url})"
        lines.append(line)
        if check.summary.strip():
            lines.append("  " + _cut(check.summary, MAX_CHECK_SUMMARY).replace("\n", "\n  "))
    lines += [
        "",
        "`the-loop checks` lists them with their ids; `the-loop checks log <id>` prints the end "
        "of a GitHub Actions job's log.",
        "Fix what they report, commit, and `git push`; the checks run again.",
    ]
    return "\n".join(lines)


def receipt_note(login: str, review_id: int, work_item_id: str) -> str:
    """The receipt for a review (GitHub has no reactions on reviews): one line."""
    return (
        f"👀 @{login}'s review reached the session.\n\n"
        f"{marker(MarkerKind.NOTICE, item=work_item_id, review=review_id, event='receipt')}\n"
    )
