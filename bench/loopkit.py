"""What bench/loop.py builds on: the webhooks it sends as GitHub would, and a tmux runner that
notes where each launch's time goes.

`StageRunner` is the spawner's own `TmuxRunner`, noting per session when the spawner started
it, pasted its first message (the input box was just seen) and pressed the Enter after that
paste (the box was seen holding it). With the execute's sending and the first model request,
that splits "execute → first model request" into the App's and the launch's work before
tmux, the sandbox and the harness starting until their input box shows, the paste showing
in the box, and the harness's own way from the Enter to its request.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
from benchkit import percentile

from app.spawner.naming import item_slug
from app.spawner.session.tmux import TmuxRunner
from tests.support import fixture_json, signed_headers, with_installation

REPO = "Codertocat/Hello-World"
SECRET = "bench-loop-secret"
STAGES = (
    "webhook → tmux start (App, checkout, launch)",
    "→ input box seen (sandbox, harness start)",
    "→ Enter (the paste shown in the box)",
    "→ first model request",
)


def issue_payload(number: int, origin: Path, label: bool) -> dict:
    base = fixture_json(
        "github/issues.labeled.json" if label else "github/issue_comment.created.json"
    )
    payload = with_installation(copy.deepcopy(base))
    payload["issue"]["number"] = number
    payload["issue"]["html_url"] = f"https://github.com/{REPO}/issues/{number}"
    payload["repository"]["clone_url"] = str(origin)
    if label:
        payload["label"]["name"] = "the-loop: auto-execute"
    return payload


def comment_payload(number: int, origin: Path, body: str) -> dict:
    payload = issue_payload(number, origin, label=False)
    payload["comment"].update(body=body, id=int(uuid.uuid4().int % 10**9))
    payload["comment"]["user"]["login"] = "Codertocat"
    return payload


def pull_opened(number: int, origin: Path) -> dict:
    """A pull request opened by hand from item `number`'s work branch (it gets linked)."""
    payload = with_installation(copy.deepcopy(fixture_json("github/pull_request.opened.json")))
    pr = payload["pull_request"]
    pr["number"] = payload["number"] = 1000 + number
    pr["html_url"] = f"https://github.com/{REPO}/pull/{1000 + number}"
    pr["head"]["ref"] = f"the-loop/issue-{number}"
    payload["repository"]["clone_url"] = str(origin)
    return payload


def review_comment(number: int, body: str) -> dict:
    base = fixture_json("github/pull_request_review_comment.created.json")
    payload = with_installation(copy.deepcopy(base))
    payload["pull_request"]["number"] = 1000 + number
    payload["comment"].update(id=int(uuid.uuid4().int % 10**9), body=body)
    return payload


# One sender for every delivery, kept alive like GitHub's own: a client made per webhook would
# time its own set-up (its TLS context alone takes tens of milliseconds) as the loop's.
SENDER = httpx.Client(timeout=10)


def send(url: str, event: str, payload: dict, delivery: str | None = None) -> float:
    """Deliver a signed webhook; returns when it went (its body made and signed before)."""
    raw = json.dumps(payload).encode()
    headers = signed_headers(event, raw, SECRET, delivery)
    sent = time.monotonic()
    response = SENDER.post(f"{url}/github/webhooks", content=raw, headers=headers)
    assert response.status_code == 202, response.text
    return sent


class StageRunner(TmuxRunner):
    """A `TmuxRunner` noting, per session name, its first start, paste and Enter after it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.marks: dict[str, dict[str, float]] = {}

    def _note(self, name: str, what: str) -> None:
        self.marks.setdefault(name, {}).setdefault(what, time.monotonic())

    def start(self, name: str, *args: Any, **kwargs: Any) -> str:
        self._note(name, "start")
        return super().start(name, *args, **kwargs)

    def paste(self, name: str, text: str, *, owner: str) -> int:
        self._note(name, "paste")
        return super().paste(name, text, owner=owner)

    def press(self, name: str, keys: Sequence[str], *, owner: str) -> None:
        if "paste" in self.marks.get(name, {}):
            self._note(name, "enter")
        super().press(name, keys, owner=owner)

    def stages(self, number: int, sent: float, requested: float) -> list[float]:
        """Item `number`'s launch in STAGES, from its execute `sent` to its `requested`."""
        marks = self.marks[item_slug(f"github:{REPO}#{number}")]
        points = [sent, marks["start"], marks["paste"], marks["enter"], requested]
        return [later - earlier for earlier, later in pairwise(points)]


def stage_summary(stages: list[list[float]]) -> str:
    """The p50 of each stage over the items (they need not add up to the whole's p50)."""
    lines = [
        f"  {name}: {percentile([item[k] for item in stages], 0.5) * 1000:.0f} ms"
        for k, name in enumerate(STAGES)
    ]
    return "\n".join(["execute → first model request by stage, p50 of each:", *lines])
