"""Where a harness is installed and what the sandbox shows of it, as pure functions: the
installation alone (an npm package, a `versions/<v>` directory, a prefix outside the home),
never the home or anything wider, and the file alone when nothing narrower fits."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.spawner.confine.installs import (
    Located,
    expose,
    harness_argv,
    install_dir,
    interpreter_of,
    too_wide,
)
from app.spawner.confine.sandbox import Bind, SandboxPlan, Secret, shown

P = Path
HOME = P("/home/dev")


@pytest.mark.parametrize(
    ("executable", "shown_dir"),
    [
        # Claude Code's own installer: each version is one file in versions/
        (".local/share/claude/versions/2.0.14", ".local/share/claude/versions/2.0.14"),
        (".local/share/tool/versions/1.0/bin/tool", ".local/share/tool/versions/1.0"),
        # an npm prefix under the home: the package, scoped or not, never the prefix
        (
            ".local/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
            ".local/lib/node_modules/@anthropic-ai/claude-code",
        ),
        (".npm-global/lib/node_modules/tool/cli.js", ".npm-global/lib/node_modules/tool"),
        (
            ".npm/lib/node_modules/@a/b/node_modules/@c/d/bin/x",  # nested: the outer package
            ".npm/lib/node_modules/@a/b",
        ),
        # nvm's Node: that one version, not every version nvm holds
        (".nvm/versions/node/v20.11.0/bin/node", ".nvm/versions/node/v20.11.0"),
        (
            ".nvm/versions/node/v20.11.0/lib/node_modules/@openai/codex/bin/codex.js",
            ".nvm/versions/node/v20.11.0/lib/node_modules/@openai/codex",
        ),
        # a bin/ directly under the home shows the file, not the directory holding the home's
        # other tools (~/.cargo holds its credentials beside bin/)
        (".cargo/bin/tool", ".cargo/bin/tool"),
        ("bin/claude", "bin/claude"),
        (".local/bin/claude", ".local/bin/claude"),
    ],
)
def test_what_is_shown_of_a_harness_in_the_home(executable: str, shown_dir: str) -> None:
    assert install_dir(HOME / executable, HOME) == HOME / shown_dir


def test_outside_the_home_a_prefix_is_shown_but_never_a_top_level_directory() -> None:
    assert install_dir(P("/opt/claude/bin/claude"), HOME) == P("/opt/claude")
    assert install_dir(P("/opt/bin/claude"), HOME) == P("/opt/bin/claude")  # not all of /opt
    assert install_dir(P("/srv/tools/claude"), HOME) == P("/srv/tools/claude")
    npm = P("/usr/local/lib/node_modules/@openai/codex/bin/codex.js")
    assert install_dir(npm, HOME) == P("/usr/local/lib/node_modules/@openai/codex")


def test_the_home_or_a_directory_holding_it_is_never_shown() -> None:
    home = P("/data/dev")
    assert install_dir(P("/data/bin/claude"), home) == P("/data/bin/claude")  # not /data
    inside = P("/home/dev/node_modules/tool/cli.js")  # a home that is an npm package
    assert install_dir(inside, P("/home/dev/node_modules/tool")) == inside
    for wide in (HOME, P("/home"), P("/"), HOME / ".local", HOME / ".nvm", P("/opt")):
        assert too_wide(wide, HOME), wide
    assert not too_wide(HOME / ".local/share/claude/versions/1", HOME)
    assert not too_wide(P("/opt/claude"), HOME)


@pytest.mark.parametrize(
    ("head", "program"),
    [
        (b"#!/usr/bin/env node\nconsole.log(1)\n", "node"),
        (b"#!/usr/bin/env -S node --no-warnings\n", "node"),
        (b"#!/usr/bin/env NODE_ENV=production node\n", "node"),
        (b"#! /usr/bin/python3 -I\n", "/usr/bin/python3"),
        (b"\x7fELF\x02\x01\x01", None),
        (b"#!\n", None),
        (b"", None),
    ],
)
def test_the_interpreter_a_script_names(head: bytes, program: str | None) -> None:
    assert interpreter_of(head) == program


def test_a_cover_hides_what_lies_in_it_unless_a_deeper_bind_shows_it_again() -> None:
    plan = SandboxPlan(
        binds=(Bind(P("/usr")), Bind(P("/srv")), Bind(P("/srv/app/code"))),
        secrets=(Secret(P("/srv/app"), hard=False), Secret(P("/etc/shadow"), False)),
    )
    assert shown(plan, P("/usr/bin/node")) and shown(plan, P("/srv/other"))
    assert not shown(plan, P("/srv/app/.env")) and shown(plan, P("/srv/app/code/x"))
    assert not shown(plan, P("/opt/x")) and not shown(plan, P("/etc/shadow"))


def test_a_harness_in_the_home_is_added_read_only_with_its_interpreter() -> None:
    base = SandboxPlan(binds=(Bind(P("/usr")),))
    located = Located(
        "claude",
        found=HOME / ".local/bin/claude",
        executable=HOME / ".local/lib/node_modules/@anthropic-ai/claude-code/cli.js",
        interpreter=HOME / ".nvm/versions/node/v22.1.0/bin/node",
    )
    exposure = expose(base, located, HOME)
    assert exposure.added == (
        HOME / ".local/lib/node_modules/@anthropic-ai/claude-code",
        HOME / ".nvm/versions/node/v22.1.0",
    )
    assert exposure.hidden == ()
    added = exposure.plan.binds[1:]
    assert all(not b.writable and not b.own for b in added)
    # ~/.local/bin is not shown: the harness is started by its resolved path
    assert harness_argv(exposure, ["claude", "--resume"]) == [str(located.executable), "--resume"]


def test_a_harness_the_sandbox_already_shows_adds_nothing_and_keeps_its_argv() -> None:
    base = SandboxPlan(binds=(Bind(P("/usr")),))
    located = Located(
        "claude",
        found=P("/usr/bin/claude"),
        executable=P("/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
    )
    exposure = expose(base, located, HOME)
    assert exposure.added == () and exposure.plan == base
    assert harness_argv(exposure, ["claude", "-p"]) == ["claude", "-p"]


def test_a_harness_inside_a_secret_stays_hidden() -> None:
    state = HOME / ".local/state/the-loop"
    base = SandboxPlan(binds=(Bind(P("/usr")),), secrets=(Secret(state),))
    located = Located("claude", state / "bin/claude", state / "versions/1/bin/claude")
    exposure = expose(base, located, HOME)
    assert exposure.hidden == (state / "versions/1/bin/claude",)
