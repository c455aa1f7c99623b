"""Real headless Chromium for page tests: Debian's /usr/bin/chromium driven by Playwright (no
browser is ever downloaded)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def browser_or_skip() -> Any:
    """Playwright's sync API, or a skip outside CI when the browser is not installed here
    (scripts/test.sh installs it; CI never skips)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("CI needs Debian's chromium and the playwright package")
        pytest.skip("Debian's chromium or the playwright package is not installed")
    return sync_playwright


@contextmanager
def chromium_page() -> Iterator[Any]:
    """A fresh page in a fresh browser context of headless Chromium."""
    sync_playwright = browser_or_skip()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield browser.new_context().new_page()
        finally:
            browser.close()
