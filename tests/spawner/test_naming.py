"""Names of a work item's tmux session, checkout and home: readable, and never shared."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from app.spawner.naming import NAME_LIMIT, item_hash, item_slug

SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


def test_the_readable_prefix_is_kept_and_the_hash_follows() -> None:
    name = item_slug("github:acme/web-api#1")
    assert name == f"acme-web-api-1-{item_hash('github:acme/web-api#1')}"


def test_readable_prefixes_that_collide_still_give_different_names() -> None:
    for one, other in [
        ("github:acme-web/api#1", "github:acme/web-api#1"),
        ("github:acme/x.y#7", "github:acme/x-y#7"),
        ("github:o/r#7", "github:o/r-7"),
    ]:
        assert item_slug(one) != item_slug(other)


def test_a_long_owner_and_repo_never_lose_the_issue_number() -> None:
    repo = "o" * 39 + "/" + "r" * 60  # 100 characters
    one, two = item_slug(f"github:{repo}#1"), item_slug(f"github:{repo}#2")
    assert one != two and len(one) <= NAME_LIMIT and len(two) <= NAME_LIMIT
    assert one.endswith(f"-1-{item_hash(f'github:{repo}#1')}")
    assert two.endswith(f"-2-{item_hash(f'github:{repo}#2')}")


def test_a_standing_session_keeps_its_name_readable() -> None:
    assert item_slug("standing:super.visor").startswith("standing-super-visor-")


@given(st.text(min_size=0, max_size=300))
def test_every_name_is_safe_for_tmux_and_a_directory(work_item_id: str) -> None:
    name = item_slug(work_item_id)
    assert SAFE.match(name) and len(name) <= NAME_LIMIT
    assert not name.startswith("-") and name not in (".", "..")
