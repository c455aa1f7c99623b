"""`the-loop allow host:port`, end to end: a session's proxy (the spawner's real
`SessionNetworks`, on real unix sockets) refuses a host; its events, reported to the App over
real HTTP, leave one notice on the issue (fake GitHub) however often the session knocks, and
none for the harness's own hosts; a reader's `allow` is refused and queues nothing; an
authorized one becomes an allow job the spawner claims over HTTP and runs through its own job
dispatch, after which the same session's next CONNECT goes through, with no relaunch, and
the issue says how to allow the host for good."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.gate.markers import MarkerKind, find_marker
from app.protocol import parse_payload
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import run_job
from app.spawner.network.netgates import SessionNetworks
from app.spawner.network.netplan import NetPlan
from app.store.tables import Job, JobKind, WorkItemStatus
from app.workitems.decide.egress import allowed_target, refused_text
from tests.spawner_support import talk_unix
from tests.spawnerapi_support import comment_delivery, send
from tests.support import wait_for

pytestmark = pytest.mark.sqlite_only


def notices(api: Any, number: int) -> list[str]:
    return [
        c["body"]
        for c in api.fake.issue_comments(api.repo, number)
        if (m := find_marker(c["body"])) is not None and m.kind == MarkerKind.NOTICE
    ]


def allow_jobs(api: Any, item: str) -> list[Job]:
    with api.session() as db:
        query = select(Job).where(Job.work_item_id == item, Job.kind == JobKind.ALLOW)
        return list(db.scalars(query))


def test_a_refused_host_is_noticed_once_and_an_authorized_allow_opens_it_live(
    api: Any, ctx: SpawnerContext, far_echo: int, tmp_path: Path
) -> None:
    item = api.work_item(number=5, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, "octocat", "write")
    api.fake.grant(api.repo, "drive-by", "read")
    spawner = api.spawner(api.token())
    reported: list[dict[str, Any]] = []

    def emit(event: str, work_item_id: str, **fields: Any) -> None:
        reported.append({"id": uuid.uuid4().hex, "event": event, "work_item_id": item, **fields})

    nets = SessionNetworks(tmp_path / "net", emit)
    ctx.networks = nets
    target = f"127.0.0.1:{far_echo}"
    plan = NetPlan((), 3128, frozenset(), "http://127.0.0.1:9", quiet=frozenset({"own.test"}))
    tunnel = f"CONNECT {target} HTTP/1.1\r\n\r\nhello\n".encode()
    try:
        proxy = nets.open(item, plan) / "proxy.sock"
        for _ in range(3):  # the session knocks, and knocks again
            assert talk_unix(proxy, tunnel).startswith(b"HTTP/1.1 403 Forbidden")
        talk_unix(proxy, b"CONNECT own.test:443 HTTP/1.1\r\n\r\n")  # the harness's own
        assert spawner.events(*reported).status_code == 200
        (notice,) = wait_for(lambda: notices(api, 5))
        assert notice.startswith(f"The session's network refused **`{target}`**")
        assert f"reply `the-loop allow {target}`" in notice
        assert "own.test" not in "".join(notices(api, 5))

        # A reader's allow changes nothing and gets the usual refusal.
        send(api, comment_delivery(api.repo, 5, f"the-loop allow {target}", login="drive-by"))
        assert allow_jobs(api, item) == []
        (refused,) = api.events("gate.refused", item)
        assert refused["who"] == "drive-by" and refused["action"] == "allow"
        assert talk_unix(proxy, tunnel).startswith(b"HTTP/1.1 403")

        send(api, comment_delivery(api.repo, 5, f"the-loop allow {target}"))
        claimed = spawner.job(wait=30)
        assert claimed is not None and claimed["kind"] == "allow"
        payload = parse_payload("allow", claimed["payload"])
        ok, result, error = run_job(ctx, ClaimedJob(claimed["id"], payload))
        assert (ok, result, error) == (True, {"allowed": True}, None)
        # The same session, not relaunched: its next CONNECT goes through.
        assert talk_unix(proxy, tunnel) == (
            b"HTTP/1.1 200 Connection established\r\n\r\necho: hello\n"
        )
        assert spawner.result(claimed["id"], ok=True, **result).status_code == 200
        done = wait_for(lambda: len(notices(api, 5)) == 2 and notices(api, 5))
        assert [n for n in done if "let through for this item's session now" in n]
        assert "add `" + target + "` to `routing.sandbox.egress`" in done[-1]
    finally:
        nets.stop()


def test_the_allow_reply_names_one_host_and_port() -> None:
    keyword = "the-loop allow"
    assert allowed_target("the-loop allow Example.org:443", keyword) == ("example.org", 443)
    assert allowed_target("the-loop allow [::1]:8080 please", keyword) == ("::1", 8080)
    assert allowed_target("the-loop allow example.org", keyword) is None
    assert allowed_target("the-loop allow @octocat:1", keyword) is None
    assert allowed_target("the-loop allowed example.org:443", keyword) is None
    text = refused_text("github:o/r#1", "x.test:443", "", keyword)
    assert find_marker(text) is not None and "`the-loop allow x.test:443`" in text
