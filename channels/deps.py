"""What the Slack listeners are given, and the few I/O steps they share.

A Slack member acts only through `slack.users` (member id → GitHub login) and only when that
login passes the gate's one authorization rule; everyone else is told so privately and
nothing changes. Words that reach the issue are posted by the App, attributed to the member
and marked, so the App never reads them back as input.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.config import OperatorConfig
from app.gate import MarkerKind, defuse, marker
from app.github import Services
from app.store import Once, Sessions, WorkItem
from app.workitems import Decide, Decision, Outcome, refusal
from channels.blocks import Message
from channels.errors import slack_error
from channels.text import escape

log = logging.getLogger(__name__)

NOT_MAPPED = "your Slack account is not mapped to a GitHub login (slack.users)"


@dataclass(frozen=True)
class Posted:
    """A comment the App wrote on the issue."""

    id: int
    html_url: str


@dataclass
class SlackDeps:
    services: Services
    sessions: Sessions
    client: WebClient

    @property
    def config(self) -> OperatorConfig:
        return self.services.config

    @property
    def keyword(self) -> str:
        return self.config.routing.trigger.execute_keyword

    def login_for(self, member: str) -> str | None:
        return self.config.slack.users.get(member)

    def refusal(self, item: WorkItem, member: str) -> tuple[str | None, str | None]:
        """(login, why not) — `why not` is None when the member may act on the item."""
        login = self.login_for(member)
        if login is None:
            return None, NOT_MAPPED
        reason = refusal(self.services, item.installation_id, item.repo_full_name, login)
        return login, reason

    def item(self, work_item_id: str) -> WorkItem | None:
        with self.sessions(expire_on_commit=False) as session:
            return session.get(WorkItem, work_item_id)

    def item_for_thread(self, thread_ts: str) -> WorkItem | None:
        with self.sessions(expire_on_commit=False) as session:
            return session.scalars(select(WorkItem).where(WorkItem.slack_ts == thread_ts)).first()

    def claim(self, key: str) -> bool:
        """Take `key` for this handler, committed at once; False when it was already taken.

        Slack redelivers events and a member can press twice; the first claim wins, so a
        reply or a press reaches the issue once.
        """
        dialect = self.sessions.engine.dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        statement = (
            insert(Once).values(key=key).on_conflict_do_nothing(index_elements=["key"])
        ).returning(Once.key)
        with self.sessions() as session, session.begin():
            return session.execute(statement).scalar() is not None

    def release(self, key: str) -> None:
        """Give a claim back after a failure, so Slack's retry can try again."""
        with self.sessions() as session, session.begin():
            session.execute(delete(Once).where(Once.key == key))

    def tell(self, channel: str, member: str, text: str, thread_ts: str | None = None) -> None:
        """A message only `member` sees, escaped (it may quote GitHub's words); a Slack
        failure here is logged, never raised."""
        try:
            self.client.chat_postEphemeral(
                channel=channel, user=member, text=escape(text), thread_ts=thread_ts
            )
        except (SlackApiError, OSError) as exc:
            log.warning("ephemeral to %s failed: %s", member, slack_error(exc))

    def update(self, channel: str, ts: str, message: Message) -> None:
        """Rewrite one of the App's messages; a Slack failure here is logged, never raised
        (the decision it reports is already recorded on GitHub)."""
        try:
            self.client.chat_update(channel=channel, ts=ts, **message.as_kwargs())
        except (SlackApiError, OSError) as exc:
            log.warning("update of %s failed: %s", ts, slack_error(exc))

    def react(self, channel: str, ts: str, name: str) -> None:
        try:
            self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except (SlackApiError, OSError) as exc:
            if slack_error(exc) != "already_reacted":
                log.warning("reaction on %s failed: %s", ts, slack_error(exc))

    def post_claimed(self, key: str, item: WorkItem, body: str) -> Posted:
        """Post on the issue under a claim taken with `claim`; released if the post fails."""
        try:
            return self.post_on_issue(item, body)
        except Exception:
            self.release(key)
            raise

    def post_once(
        self, ref: str, item: WorkItem, login: str, member: str, text: str, run: Decide
    ) -> Outcome | None:
        """Post the member's `text` on the issue, attributed, then hand it to `run` (execute,
        review, answer or follow-up) as the member's `Decision`, once per `ref`; None when
        `ref` was already taken.

        The `Once` row records the posted comment in the same transaction as `run`'s work.
        """
        if not self.claim(ref):
            return None
        posted = self.post_claimed(ref, item, attributed(text, login, member))
        with self.sessions(expire_on_commit=False) as session, session.begin():
            session.merge(Once(key=ref, ref=str(posted.id)))
            decision = Decision(item.id, login, text, ref, "slack", comment_id=posted.id)
            return run(self.services, session, decision)

    def post_on_issue(self, item: WorkItem, body: str) -> Posted:
        """Post `body` on the item's issue as the App."""
        if item.installation_id is None:
            raise RuntimeError(f"{item.id} has no installation to post with")
        owner, repo = item.repo_full_name.split("/", 1)
        client = self.services.github.installation(item.installation_id)
        response = client.rest.issues.create_comment(
            owner, repo, item.issue_number, data={"body": body}
        )
        return Posted(response.parsed_data.id, response.parsed_data.html_url)


def attributed(text: str, login: str, member: str) -> str:
    """A Slack member's words as the App posts them on the issue: attributed and marked."""
    words = defuse(text)  # a member's words never pass for one of the App's markers
    return f"{words}\n\n_from @{login} in Slack_\n{marker(MarkerKind.SLACK, member=member)}"
