#!/usr/bin/env python3
"""Makes the pictures the docs show from the product's own renderers: a progress comment as
`render_progress` writes it, rendered the way GitHub renders a comment (python-markdown's
tables, line breaks kept) and shot by headless Chromium. Run it after changing the comment's
wording: `python scripts/docs_images.py` (needs Debian's chromium, which scripts/test.sh
installs)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import markdown

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.workitems.decide.walk import Walk  # noqa: E402
from app.workitems.tell.progress_text import ProgressView, render_progress  # noqa: E402

STYLE = """
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       background: #fff; color: #1f2328; }
.box { border: 1px solid #d0d7de; border-radius: 6px; margin: 12px; }
.head { background: #f6f8fa; border-bottom: 1px solid #d0d7de; padding: 8px 16px;
        color: #59636e; }
.body { padding: 4px 16px 12px; }
table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: 4px 12px; }
a { color: #0969da; text-decoration: none; } code { background: #eff1f3; padding: 1px 4px; }
"""


def progress_comment() -> str:
    view = ProgressView(
        work_item_id="github:acme/shop#42",
        status="running",
        walk=Walk(
            pointer="implementation",
            skips=frozenset({"brainstorming"}),
            decisions={"phase-selection": {"by": "octocat"}},
        ),
        harness="claude",
        model="sonnet",
        effort="high",
        artifacts=("requirements.md", "design.md", "tasks.md"),
        spec_id="42",
        usage="**Usage:** 1.0M tokens (in 980k · out 41k · cache 0) · $3.84 · 57 requests · 12 min",
        budget="**Budget:** tokens 1.02M of 2M · $3.84 of $20.00",
        branch="the-loop/42-checkout-totals",
        page="https://github.com/acme/shop/issues/42",
    )
    return render_progress(view)


def shoot(html: str, out: Path, size: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(html)
        subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={tmp}/profile",
                f"--window-size={size}",
                f"--screenshot={out}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main() -> int:
    body = markdown.markdown(progress_comment(), extensions=["tables", "nl2br"])
    html = (
        f"<html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>"
        "<div class='box'><div class='head'><b>the-loop</b> bot commented</div>"
        f"<div class='body'>{body}</div></div></body></html>"
    )
    out = ROOT / "docs" / "images" / "progress-comment.png"
    shoot(html, out, "760,560")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
