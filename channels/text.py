"""Text between GitHub markdown and Slack mrkdwn, in both directions. Pure functions.

Outbound, anything that came from GitHub (titles, agent comments, the confirmation) is
escaped first, so text can never become a Slack mention (`<!channel>`) or a link it did not
spell; the App's hidden HTML-comment markers are removed. Inbound, Slack's entity escapes,
links and user mentions are turned back into what a person would have typed on GitHub.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SECTION_LIMIT = 3000  # characters in a section block's text
FALLBACK_LIMIT = 4000  # characters kept in a message's plain-text fallback

_PLACEHOLDER = "\x00"
_LINK_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_MD_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_MD_BOLD = re.compile(r"\*\*(.+?)\*\*")
_MD_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)
_MD_TICK = re.compile(r"^(\s*)[-*]\s+\[([ xX])\]\s+", re.MULTILINE)
_SLACK_LINK = re.compile(r"<(https?://[^|>]+)(?:\|([^>]*))?>")
_SLACK_MAILTO = re.compile(r"<mailto:([^|>]+)(?:\|([^>]*))?>")
_SLACK_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_SLACK_CHANNEL = re.compile(r"<#[CG][A-Z0-9]+\|([^>]*)>")
_SLACK_SPECIAL = re.compile(r"<!([a-z]+)(?:\^[^|>]*)?(?:\|([^>]*))?>")


def escape(text: str) -> str:
    """Slack's three control characters, escaped as Slack documents."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def strip_markers(markdown: str) -> str:
    """GitHub markdown without hidden HTML comments (the App's markers)."""
    return _HTML_COMMENT.sub("", markdown).strip()


def link(url: str, label: str) -> str:
    """A Slack link to `url` showing `label` (mrkdwn, already escaped); just the label when
    `url` is not a web URL. The URL is escaped and cannot end the link early: whatever it
    holds, it never becomes a mention or a second link."""
    if not url.startswith(("https://", "http://")):
        return label
    return _link(escape(url), label)


def _link(escaped_url: str, label: str) -> str:
    return f"<{escaped_url.replace('|', '%7C')}|{label}>"


def to_mrkdwn(markdown: str, limit: int = SECTION_LIMIT) -> str:
    """GitHub markdown as Slack mrkdwn: bold, headings, links and task boxes; escaped."""
    # Links wait as NUL-delimited placeholders while the rest is rewritten; a NUL of the
    # text's own is shown as U+FFFD so it can never be read as one.
    text = escape(strip_markers(markdown)).replace(_PLACEHOLDER, "\ufffd")
    links: list[str] = []

    def keep_link(match: re.Match[str]) -> str:
        links.append(_link(match.group(2), match.group(1)))  # the text is escaped already
        return f"{_PLACEHOLDER}{len(links) - 1}{_PLACEHOLDER}"

    text = _MD_LINK.sub(keep_link, text)
    text = _MD_HEADING.sub(r"*\1*", text)
    text = _MD_BOLD.sub(r"*\1*", text)
    text = _MD_TICK.sub(lambda m: m.group(1) + ("☑ " if m.group(2) in "xX" else "☐ "), text)
    text = _LINK_PLACEHOLDER.sub(lambda m: links[int(m.group(1))], text)
    return truncate(text, limit)


def to_plain(markdown: str, limit: int = FALLBACK_LIMIT) -> str:
    """GitHub markdown as the plain-text fallback of a notification (no markup, no markers)."""
    text = _MD_LINK.sub(r"\1 (\2)", strip_markers(markdown)).replace(_PLACEHOLDER, "\ufffd")
    text = _MD_HEADING.sub(r"\1", text)
    text = _MD_BOLD.sub(r"\1", text)
    return truncate(escape(text), limit)


def from_slack(text: str, users: Mapping[str, str]) -> str:
    """A Slack message's text as GitHub markdown.

    Links become markdown links, a mention of a mapped member becomes `@login`, other
    mentions become the member id in backticks (never an `@` that could ping a stranger),
    and Slack's entity escapes are undone last so no decoded text is re-interpreted.
    """

    def link(match: re.Match[str]) -> str:
        url, label = match.group(1), match.group(2)
        return f"[{label}]({url})" if label and label != url else url

    def user(match: re.Match[str]) -> str:
        login = users.get(match.group(1))
        return f"@{login}" if login else f"`{match.group(1)}`"

    def special(match: re.Match[str]) -> str:
        return f"`{match.group(2) or match.group(1)}`"

    text = _SLACK_LINK.sub(link, text)
    text = _SLACK_MAILTO.sub(lambda m: m.group(2) or m.group(1), text)
    text = _SLACK_USER.sub(user, text)
    text = _SLACK_CHANNEL.sub(r"#\1", text)
    text = _SLACK_SPECIAL.sub(special, text)
    return unescape(text).strip()
