"""Two `the-loop serve` replicas on one PostgreSQL database read the same delivery log:
the lease lets one pass run at a time, so every delivery GitHub failed to send is fetched
once and handled once, whichever replica found it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.fault_support import REPO, fault_bed, labeled_body
from tests.support import POSTGRES_URL, wait_for

pytestmark = [
    pytest.mark.fault,
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="THE_LOOP_TEST_POSTGRES_URL is not set"),
    pytest.mark.timeout(180),
]
LOG_ENTRY = r"^/app/hook/deliveries/\d+$"
BEFORE = 150  # more than one page of the log (100 entries)
DURING = 30


def test_two_replicas_reconcile_one_at_a_time_and_nothing_is_doubled(tmp_path):
    with fault_bed(tmp_path, THE_LOOP_RECONCILE_SECONDS="1") as bed:
        log = bed.fake.hook_log
        for n in range(1, BEFORE + 1):  # sent while no replica ran
            log.deliver("issues", json.loads(labeled_body(n)), url=None)
        bed.replicas(2)
        for n in range(BEFORE + 1, BEFORE + DURING + 1):  # sent while both run, unreachable
            log.deliver("issues", json.loads(labeled_body(n)), url=None)
        total = BEFORE + DURING

        def comments() -> Counter[int]:
            found = list(bed.fake.comments.values())
            return Counter(int(c["_issue"]) for c in found if c["_repo"] == REPO)

        wait_for(lambda: len(comments()) == total and bed.settled(total), timeout=150)
        passes = bed.events("inbox.reconciled")
        fetched = Counter(r.path for r in bed.fake.calls("GET", LOG_ENTRY))
        assert sorted(comments().values()) == [1] * total
        assert bed.events("workitem.label_ignored") == []
        assert sum(p["recovered"] for p in passes) == total
        assert sum(p["duplicates"] for p in passes) == 0
        assert len(fetched) == total and set(fetched.values()) == {1}, fetched.most_common(3)
        assert bed.states() == Counter({"done": total})
