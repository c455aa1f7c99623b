"""A bare clone tests itself: nothing the tests, benchmarks or scripts run reads the
checkouts' sibling folder `../shared`, and every payload a test names is in tests/data."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    p
    for folder in ("app", "channels", "hooks", "tests", "bench", "scripts")
    for p in (ROOT / folder).rglob("*")
    if p.is_file() and p.suffix in {".py", ".sh", ".lua", ""} and "__pycache__" not in p.parts
]
SIBLING = re.compile(r"""shared/fixtures|["']shared["']\s*/\s*["']fixtures""")
NAMED = re.compile(r"""["']((?:github|slack)/[A-Za-z0-9_.-]+\.json)["']""")


def test_no_source_reads_the_sibling_shared_folder() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in SOURCES
        if p != Path(__file__) and SIBLING.search(p.read_text(errors="replace"))
    ]
    assert offenders == []


def test_every_payload_a_test_names_is_in_tests_data() -> None:
    named = {m for p in SOURCES for m in NAMED.findall(p.read_text(errors="replace"))}
    assert len(named) >= 15
    assert sorted(n for n in named if not (ROOT / "tests" / "data" / n).is_file()) == []
