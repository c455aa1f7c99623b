"""Text crossing between GitHub markdown and Slack mrkdwn."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from channels.text import escape, from_slack, to_mrkdwn, truncate

USERS = {"U024BE7LH": "octocat"}


def test_markdown_becomes_mrkdwn() -> None:
    md = "# Plan\n**bold** and [docs](https://example.com/a?b=1&c=2)\n- [x] design\n- [ ] review"
    assert to_mrkdwn(md) == (
        "*Plan*\n*bold* and <https://example.com/a?b=1&amp;c=2|docs>\n☑ design\n☐ review"
    )


def test_markers_are_removed_and_control_characters_escaped() -> None:
    assert to_mrkdwn("hi <!here> & <@U1>\n<!-- the-loop:agent -->") == (
        "hi &lt;!here&gt; &amp; &lt;@U1&gt;"
    )


def test_slack_text_becomes_what_a_person_would_type_on_github() -> None:
    text = (
        "ask <@U024BE7LH> and <@U999|someone> about <https://x.dev/p|the page> "
        "or <https://x.dev/q>, cc <!here> in <#C123|dev>: a &lt; b &amp;&amp; c &gt; d"
    )
    assert from_slack(text, USERS) == (
        "ask @octocat and `U999` about [the page](https://x.dev/p) "
        "or https://x.dev/q, cc `here` in #dev: a < b && c > d"
    )


def test_unmapped_mentions_never_become_github_mentions() -> None:
    assert "@" not in from_slack("<@U0STRANGER>", USERS)


@given(st.text())
def test_escaped_text_has_no_slack_control_sequences(text: str) -> None:
    escaped = escape(text)
    assert "<" not in escaped and ">" not in escaped


@given(st.text(), st.integers(min_value=1, max_value=200))
def test_truncate_respects_the_limit(text: str, limit: int) -> None:
    assert len(truncate(text, limit)) <= limit
