"""Where a harness is installed, and what a session's sandbox must show for it to run: pure.

A harness installed outside the system directories — Claude Code's own installer under
`~/.local/share/claude/versions/<v>`, an npm prefix under the home, Node.js from nvm under
`~/.nvm/versions/node/<v>` — runs in the sandbox only if its installation is visible there.
What is shown is that installation alone, read-only, derived from the executable with every
symlink resolved: its npm package's directory, its `versions/<v>` directory (or the prefix in
it that holds `bin/`), or, outside the home, the prefix holding its `bin/`. A script's
interpreter (the `node` of `#!/usr/bin/env node`) is shown the same way. Never the home
itself, a directory that holds it, a directory directly in it, or a top-level directory:
when no narrower directory fits, the executable file alone is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.spawner.confine.sandbox import Bind, SandboxPlan, lies_within, shown

NPM_PACKAGES = "node_modules"
VERSIONS = "versions"


@dataclass(frozen=True)
class Located:
    """A harness as this machine has it: where PATH finds `name`, that path with every
    symlink resolved, and the resolved interpreter its `#!` line names, if any."""

    name: str
    found: Path | None = None
    executable: Path | None = None
    interpreter: Path | None = None

    @property
    def needed(self) -> tuple[Path, ...]:
        """What must be visible inside for the harness to start."""
        return tuple(p for p in (self.executable, self.interpreter) if p is not None)


@dataclass(frozen=True)
class Exposure:
    """A harness in a plan: the plan showing it, the directories added for it (read-only),
    and what it needs that the sandbox still cannot show (inside a secret)."""

    located: Located
    plan: SandboxPlan
    added: tuple[Path, ...]
    hidden: tuple[Path, ...]


def too_wide(path: Path, home: Path) -> bool:
    """Would showing `path` show more than an installation: the home, anything holding it,
    a directory directly in it, or a top-level directory such as /opt?"""
    return lies_within(home, path) or path.parent == home or len(path.parts) <= 2


def _npm_package(executable: Path) -> Path | None:
    parts = executable.parts[:-1]
    if NPM_PACKAGES not in parts:
        return None
    at = parts.index(NPM_PACKAGES)  # the outermost package holds any nested ones
    name = parts[at + 1 :]
    if not name:
        return None
    width = 2 if name[0].startswith("@") and len(name) > 1 else 1  # @scope/package
    return Path(*parts[: at + 1 + width])


def _version(executable: Path) -> Path | None:
    parts = executable.parts[:-1]
    if VERSIONS not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index(VERSIONS)
    version = Path(*executable.parts[: at + 2])  # the file itself when it sits in versions/
    prefix = executable.parent.parent
    if executable.parent.name == "bin" and lies_within(prefix, version):
        return prefix  # nvm: versions/node/<v>/bin/node shows versions/node/<v>
    return version


def install_dir(executable: Path, home: Path) -> Path:
    """What to show read-only so that `executable` (absolute, symlinks resolved) runs."""
    found = _npm_package(executable) or _version(executable)
    if found is None and executable.parent.name == "bin" and not lies_within(executable, home):
        found = executable.parent.parent  # a prefix such as /opt/tool
    if found is None or too_wide(found, home):
        return executable
    return found


def interpreter_of(head: bytes) -> str | None:
    """The program a script's first line runs it with (`node` for `#!/usr/bin/env node`,
    `/usr/bin/python3` for `#!/usr/bin/python3`), or None for a binary."""
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name != "env":
        return words[0]
    rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return rest[0] if rest else None


def expose(plan: SandboxPlan, located: Located, home: Path) -> Exposure:
    """`plan` with the harness's installation (and its interpreter's) added read-only where
    the plan does not show it yet."""
    added: list[Path] = []
    for path in located.needed:
        if shown(plan, path):
            continue
        directory = install_dir(path, home)
        plan = replace(plan, binds=(*plan.binds, Bind(directory, own=False)))
        added.append(directory)
    hidden = tuple(p for p in located.needed if not shown(plan, p))
    return Exposure(located, plan, tuple(dict.fromkeys(added)), hidden)


def harness_argv(exposure: Exposure, argv: Sequence[str]) -> list[str]:
    """`argv` to run inside: the harness by its resolved path when the path PATH found it
    by (a link in `~/.local/bin`, say) is not visible there."""
    located = exposure.located
    if located.found is None or located.executable is None or shown(exposure.plan, located.found):
        return list(argv)
    return [str(located.executable), *argv[1:]]
