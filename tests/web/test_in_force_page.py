"""The status page shows what is in force for money, reach and isolation — the same table
`config check` and `doctor` print — for the operator only."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest

from app.config.in_force import in_force
from app.config.operator_config import load_config
from tests.support import OPERATOR_TOKEN

pytestmark = pytest.mark.admin_token
OPERATOR_YAML = """
routing:
  budget: {usd: 12.5}
  sandbox:
    network: host
    limits: {memory: 2GiB, cpu: 1.5}
"""
ROW = re.compile(
    r'<tr class="in-force" data-key="([^"]+)" data-source="([^"]+)">'
    r'<td class="mono">[^<]*</td><td>([^<]*)</td><td>[^<]*</td></tr>'
)


def test_the_page_shows_every_setting_in_force_and_its_source(running_app: Any):
    page = httpx.get(
        running_app.url + "/",
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}", "Accept": "text/html"},
    )
    assert page.status_code == 200
    shown = {key: (html.unescape(value), source) for key, source, value in ROW.findall(page.text)}
    config = load_config(running_app.state.services.settings.the_loop_config)
    assert shown == {r.key: (r.value, r.source) for r in in_force(config)}
    assert shown["routing.budget.usd"] == ("12.5", "file")
    assert shown["routing.sandbox.network"] == ("host", "file")
    assert shown["routing.sandbox.limits.memory"] == ("2.0GiB", "file")
    assert shown["routing.sandbox.limits.processes"] == ("512", "default")
    assert shown["routing.budget.tokens"] == ("no limit", "default")


def test_the_table_is_not_shown_without_the_credential(running_app: Any):
    refused = httpx.get(running_app.url + "/", headers={"Accept": "text/html"})
    assert refused.status_code == 401
    assert "routing.sandbox" not in refused.text
