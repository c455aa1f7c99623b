"""What a repository's own set-up runs, and what it depends on (pure).

The commands come from `.devcontainer/devcontainer.json` (or `.devcontainer.json`): its
`onCreateCommand`, `updateContentCommand` and `postCreateCommand`, in that order, each in the
Dev Container spec's three forms — a string runs in a shell (`/bin/sh -c`), an array is an
argv run without a shell, an object names commands (each a string or an array) run in
parallel. The file is JSON with comments (`//`, `/* */`) and trailing commas. Without a
devcontainer file, an executable `.the-loop/setup` in the checkout is the set-up; the
operator's `routing.setup.command` replaces both.

The warm start keys a prepared copy on `manifest_key`: the hashes of the repository's
dependency manifests (lock files, anywhere in the tree) and of the set-up itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from app.spawner.spawner_errors import SpawnerError

DEVCONTAINER_FILES = (".devcontainer/devcontainer.json", ".devcontainer.json")
SETUP_SCRIPT = ".the-loop/setup"
LIFECYCLE = ("onCreateCommand", "updateContentCommand", "postCreateCommand")
SHELL = "/bin/sh"
# Lock files whose content decides what a set-up installs.
MANIFESTS = frozenset(
    {
        "poetry.lock",
        "uv.lock",
        "package-lock.json",
        "pnpm-lock.yaml",
        "yarn.lock",
        "Cargo.lock",
        "go.sum",
    }
)
MAX_SETUP_FILE = 1024 * 1024  # bytes of a devcontainer file read


class SetupFileError(SpawnerError, ValueError):
    """The repository's set-up file cannot be used; the message names the file and why."""


@dataclass(frozen=True)
class Command:
    """One command: `argv` runs as it is (a string form is already `sh -c <text>`)."""

    name: str  # the lifecycle key, and the object form's name after a colon
    argv: tuple[str, ...]

    @property
    def shown(self) -> str:
        """How the command reads in an event or a comment."""
        if self.argv[:2] == (SHELL, "-c") and len(self.argv) == 3:
            return self.argv[2]
        return json.dumps(list(self.argv))


@dataclass(frozen=True)
class Stage:
    """Commands run together (in parallel); the stages run one after the other."""

    commands: tuple[Command, ...]


@dataclass(frozen=True)
class SetupPlan:
    """The set-up to run (no stages: nothing to run) and where it came from."""

    stages: tuple[Stage, ...]
    source: str  # the file, `routing.setup.command`, or "" for none

    @property
    def commands(self) -> list[Command]:
        return [command for stage in self.stages for command in stage.commands]

    def describe(self) -> str:
        """Every command, one per line, as the set-up's text for the manifest key."""
        return "\n".join(f"{c.name}\t{json.dumps(list(c.argv))}" for c in self.commands)


def strip_jsonc(text: str) -> str:
    """`text` with its comments blanked and trailing commas dropped, strings untouched, so
    a JSON parser reads it (positions of what is left are kept for its error messages)."""
    out: list[str] = []
    i, n = 0, len(text)
    pending_comma: int | None = None  # where a comma was copied, until something follows
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i, pending_comma = end + 1, None
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(c if c == "\n" else " " for c in text[i:end]))
            i = end
        elif char in "}]" and pending_comma is not None:
            out[pending_comma] = " "
            out.append(char)
            i, pending_comma = i + 1, None
        else:
            if char == ",":
                pending_comma = len(out)
            elif not char.isspace():
                pending_comma = None
            out.append(char)
            i += 1
    return "".join(out)


def _command(name: str, value: Any, where: str) -> Command:
    if isinstance(value, str):
        if not value.strip():
            raise SetupFileError(f"{where}: `{name}` is an empty command")
        return Command(name, (SHELL, "-c", value))
    if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
        return Command(name, tuple(value))
    raise SetupFileError(
        f"{where}: `{name}` must be a string, a non-empty array of strings, or an object of them"
    )


def _stage(key: str, value: Any, where: str) -> Stage | None:
    if isinstance(value, dict):
        commands = [
            _command(f"{key}:{label}", each, where) for label, each in value.items() if each
        ]
        return Stage(tuple(commands)) if commands else None
    return Stage((_command(key, value, where),))


def devcontainer_plan(text: str, where: str) -> SetupPlan:
    """The set-up a devcontainer file's text asks for; `where` names the file in errors."""
    try:
        data = json.loads(strip_jsonc(text))
    except ValueError as exc:
        raise SetupFileError(f"{where} is not valid JSON (with comments): {exc}") from None
    if not isinstance(data, dict):
        raise SetupFileError(f"{where} must hold a JSON object")
    stages: list[Stage] = []
    for key in LIFECYCLE:
        value = data.get(key)
        if value is None or value == "" or value == [] or value == {}:
            continue
        stage = _stage(key, value, where)
        if stage is not None:
            stages.append(stage)
    return SetupPlan(tuple(stages), where)


def command_plan(command: str, where: str = "routing.setup.command") -> SetupPlan:
    """The operator's own set-up command, run in a shell."""
    return SetupPlan((Stage((Command("setup", (SHELL, "-c", command)),)),), where)


def script_plan(checkout_relative: str = SETUP_SCRIPT) -> SetupPlan:
    """The repository's `.the-loop/setup` script, run from the checkout's top."""
    return SetupPlan((Stage((Command("setup", (f"./{checkout_relative}",)),)),), SETUP_SCRIPT)


def is_manifest(path: str) -> bool:
    """Is the tracked file `path` one of the dependency manifests a warm start keys on?"""
    name = PurePosixPath(path).name
    if name in MANIFESTS:
        return True
    return name.startswith("requirements") and name.endswith(".txt")


def manifest_key(repo: str, files: Mapping[str, bytes], plan: SetupPlan) -> str:
    """The prepared copy's key: the repository, every manifest's path and content, and the
    set-up's commands and source (the devcontainer file's own text is among `files`)."""
    digest = hashlib.sha256()
    for part in (repo, plan.source, plan.describe()):
        digest.update(part.encode() + b"\0")
    for path in sorted(files):
        digest.update(path.encode() + b"\0")
        digest.update(hashlib.sha256(files[path]).digest())
    return digest.hexdigest()[:32]


def tail(lines: Iterable[str], limit: int = 4000) -> str:
    """The last `limit` characters of the output, cut at a line start when it can be."""
    text = "".join(lines)
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    newline = cut.find("\n")
    return cut[newline + 1 :] if 0 <= newline < len(cut) - 1 else cut
