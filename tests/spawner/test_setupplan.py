"""The repository's set-up read from its devcontainer file (pure): each lifecycle form, JSON
with comments and trailing commas, bad files refused with the file named, and the warm
start's key moving with the manifests and the set-up, not with anything else."""

from __future__ import annotations

import pytest

from app.spawner.workspace.setupplan import (
    SHELL,
    Command,
    SetupFileError,
    command_plan,
    devcontainer_plan,
    is_manifest,
    manifest_key,
    script_plan,
    strip_jsonc,
    tail,
)

WHERE = ".devcontainer/devcontainer.json"


def test_the_three_lifecycle_commands_run_in_the_specs_order() -> None:
    text = """{
      "postCreateCommand": "echo post > marker",
      "onCreateCommand": ["pip", "install", "-r", "requirements.txt"],
      "updateContentCommand": {"npm": "npm ci", "py": ["python", "-m", "build"]},
      "image": "mcr.microsoft.com/devcontainers/python:3"
    }"""
    plan = devcontainer_plan(text, WHERE)

    assert plan.source == WHERE
    assert [[c.name for c in s.commands] for s in plan.stages] == [
        ["onCreateCommand"],
        ["updateContentCommand:npm", "updateContentCommand:py"],  # run in parallel
        ["postCreateCommand"],
    ]
    on_create, npm, build, post = plan.commands
    assert on_create.argv == ("pip", "install", "-r", "requirements.txt")  # no shell
    assert npm.argv == (SHELL, "-c", "npm ci")
    assert build.argv == ("python", "-m", "build")
    assert post.argv == (SHELL, "-c", "echo post > marker")  # a string: a shell
    assert post.shown == "echo post > marker"
    assert on_create.shown == '["pip", "install", "-r", "requirements.txt"]'


def test_comments_and_trailing_commas_are_read_strings_are_not_touched() -> None:
    text = """// the dev container
    {
      /* set-up */ "postCreateCommand": "echo 'a // b' /* c */ \\"d,}\\"", // trailing
      "features": {"x": {},},
    }
    """
    (command,) = devcontainer_plan(text, WHERE).commands
    assert command.argv[2] == "echo 'a // b' /* c */ \"d,}\""


def test_strip_jsonc_keeps_the_positions_of_what_is_left() -> None:
    text = '{"a": 1, // x\n "b": [1,2,],}'
    stripped = strip_jsonc(text)
    assert len(stripped) == len(text)
    assert stripped.index('"b"') == text.index('"b"')


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"postCreateCommand": "x",', "is not valid JSON (with comments)"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"postCreateCommand": 3}', "`postCreateCommand` must be a string"),
        ('{"onCreateCommand": ["pip", 3]}', "`onCreateCommand` must be a string"),
        ('{"onCreateCommand": "   "}', "`onCreateCommand` is an empty command"),
        ('{"updateContentCommand": {"a": {"b": 1}}}', "`updateContentCommand:a` must be"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_key(text: str, said: str) -> None:
    with pytest.raises(SetupFileError) as caught:
        devcontainer_plan(text, WHERE)
    assert WHERE in str(caught.value) and said in str(caught.value)


def test_no_lifecycle_command_is_nothing_to_run() -> None:
    assert devcontainer_plan('{"image": "x", "postCreateCommand": ""}', WHERE).stages == ()


def test_the_operators_command_and_the_script() -> None:
    assert command_plan("make deps").commands == [Command("setup", (SHELL, "-c", "make deps"))]
    assert script_plan().commands == [Command("setup", ("./.the-loop/setup",))]


@pytest.mark.parametrize(
    "path",
    [
        "requirements.txt",
        "requirements-dev.txt",
        "sub/requirements/base.txt",
        "poetry.lock",
        "uv.lock",
        "web/package-lock.json",
        "pnpm-lock.yaml",
        "yarn.lock",
        "Cargo.lock",
        "go.sum",
    ],
)
def test_lock_files_are_manifests(path: str) -> None:
    assert is_manifest(path) == (path != "sub/requirements/base.txt")


def test_the_key_moves_with_a_manifest_the_setup_and_the_repository_only() -> None:
    plan = command_plan("pip install -r requirements.txt")
    files = {"requirements.txt": b"six\n", WHERE: b"{}"}
    key = manifest_key("o/r", files, plan)

    assert manifest_key("o/r", dict(reversed(files.items())), plan) == key
    assert manifest_key("o/r", {**files, "requirements.txt": b"six==1\n"}, plan) != key
    assert manifest_key("o/r", {**files, "uv.lock": b""}, plan) != key
    assert manifest_key("o/other", files, plan) != key
    assert manifest_key("o/r", files, command_plan("pip install six")) != key


def test_the_tail_is_the_last_lines_bounded() -> None:
    lines = [f"line {n}\n" for n in range(1000)]
    cut = tail(lines, 100)
    assert len(cut) <= 100 and cut.endswith("line 999\n") and cut.startswith("line ")
    assert tail(["short\n"], 100) == "short\n"
