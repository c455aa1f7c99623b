"""Faults at scale: App replicas, inbox workers and spawners as real processes on one real
PostgreSQL, GitHub as the fake on loopback. Nothing acknowledged is lost, nothing is done
twice. `bench/fault` runs the same scenarios at full size (`tests/fault_scenarios.py`)."""

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
# Sizes that keep each test well under a minute on two shared cores; bench/fault runs more.
DELIVERIES = int(os.environ.get("THE_LOOP_FAULT_DELIVERIES", "400"))


def test_two_replicas_handle_every_delivery_once_redeliveries_included(tmp_path):
    result = scenarios.redeliveries(tmp_path, DELIVERIES)
    assert result.lost == [] and result.doubled == [], result.line()
    assert result.acked == DELIVERIES


def test_a_replica_killed_mid_burst_loses_and_doubles_nothing_it_acknowledged(tmp_path):
    result = scenarios.replica_killed(tmp_path, DELIVERIES)
    assert result.lost == [] and result.doubled == [], result.line()
