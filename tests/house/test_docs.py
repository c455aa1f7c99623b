"""The documentation a newcomer reads: a short README whose first block is the two set-up
commands, a docs site that builds with no broken link (`mkdocs build --strict`), and a
configuration reference that is exactly what the settings and config models say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.commands.configref import config_sections, reference_markdown, setting_entries

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference" / "configuration.md"


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[0] for line in first_block] == ["scripts/up.sh", "scripts/test.sh"]


def test_the_configuration_reference_is_what_the_models_say() -> None:
    """Regenerate with `the-loop config reference > docs/reference/configuration.md`."""
    assert REFERENCE.read_text() == reference_markdown()


def test_every_environment_variable_says_what_it_means() -> None:
    unexplained = [e.name for e in setting_entries() if not e.meaning]
    assert unexplained == []


def test_every_config_section_says_what_it_is() -> None:
    """A key may lean on its section's description; a section may not be silent."""
    silent = [
        title
        for title, doc, entries in config_sections()
        if not doc and entries and any(not e.meaning for e in entries)
    ]
    assert silent == []


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "reference" / "configuration" / "index.html").exists()
