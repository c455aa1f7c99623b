"""Faults at scale: App replicas, inbox workers and spawners as real processes on one real
PostgreSQL, GitHub as the fake on loopback. Nothing acknowledged is lost, nothing is done
twice. `bench/fault.py` runs the same scenarios at full size (`tests/fault_scenarios.py`)."""

from __future__ import annotations

import os

import pytest

from tests import fault_scenarios as scenarios
from tests.support import POSTGRES_URL

pytestmark = [
    pytest.mark.fault,
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="THE_LOOP_TEST_POSTGRES_URL is not set"),
    pytest.mark.timeout(180),
]
# Sizes that keep each test well under a minute on two shared cores; bench/fault.py runs more.
DELIVERIES = int(os.environ.get("THE_LOOP_FAULT_DELIVERIES", "400"))


def test_two_replicas_handle_every_delivery_once_redeliveries_included(tmp_path):
    result = scenarios.redeliveries(tmp_path, DELIVERIES)
    assert result.lost == [] and result.doubled == [], result.line()
    assert result.acked == DELIVERIES


def test_a_replica_killed_mid_burst_loses_and_doubles_nothing_it_acknowledged(tmp_path):
    result = scenarios.replica_killed(tmp_path, DELIVERIES)
    assert result.lost == [] and result.doubled == [], result.line()


def test_three_spawners_run_each_job_once_and_a_dead_ones_job_after_its_lease(tmp_path):
    result = scenarios.spawners_claim(tmp_path, 200)
    assert result.lost == [] and result.doubled == [], result.line()


def test_github_failing_for_a_while_is_retried_and_a_hopeless_delivery_is_parked(tmp_path):
    result, parked = scenarios.github_flaky(tmp_path, DELIVERIES // 2)
    assert result.lost == [] and result.doubled == [], result.line()
    assert parked["left_to_inject"] == 0  # every 502 and 429 was answered to the App
    assert "broken-1" in parked["cli"] and "403" in parked["cli"]
    [shown] = parked["status"]
    assert shown["delivery"] == "broken-1" and shown["attempts"] == 3
    assert "Resource not accessible" in shown["error"] or "403" in shown["error"]


def test_the_app_reconnects_after_the_database_went_away_mid_burst(tmp_path):
    result, before = scenarios.database_outage(tmp_path, DELIVERIES)
    assert before > 0
    assert result.lost == [] and result.doubled == [], result.line()
