"""The sandbox argv (pure), and the thin look at this machine around it: what a session may
see, what is covered, and a clear refusal where the sandbox cannot host a session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.config.operator_config import parse_config
from app.config.sandbox_config import Sandbox
from app.spawner.confine.isolation import (
    SandboxError,
    bubblewrap_problem,
    code_dirs,
    confined_argv,
    host_plan,
    secrets,
)
from app.spawner.confine.sandbox import (
    ISOLATION,
    Bind,
    SandboxPlan,
    Secret,
    kept_binds,
    sandbox_argv,
)
from hooks.stop_gate import FACTS_AT

P = Path


def plan(*binds: Bind, secrets: tuple[Secret, ...] = ()) -> SandboxPlan:
    return SandboxPlan(binds=binds, secrets=secrets, chdir=P("/w/item"))


def test_the_isolation_flags_come_first_and_the_command_last() -> None:
    argv = sandbox_argv(plan(Bind(P("/usr"))), ["claude", "--session-id", "x"])
    assert argv[: 1 + len(ISOLATION)] == ["bwrap", *ISOLATION]
    for flag in ("--unshare-pid", "--die-with-parent", "--cap-drop", "--proc"):
        assert flag in argv
    assert "--unshare-net" not in argv and "--share-net" not in argv  # the network is shared
    assert argv[-6:] == ["--chdir", "/w/item", "--", "claude", "--session-id", "x"]


def test_binds_are_read_only_unless_writable_and_shallowest_first() -> None:
    args = sandbox_argv(
        plan(Bind(P("/w/item"), writable=True), Bind(P("/usr")), Bind(P("/opt/tool/bin"))), []
    )
    mounts = [args[i : i + 3] for i, w in enumerate(args) if w in ("--bind", "--ro-bind")]
    assert mounts == [
        ["--ro-bind", "/usr", "/usr"],
        ["--bind", "/w/item", "/w/item"],
        ["--ro-bind", "/opt/tool/bin", "/opt/tool/bin"],
    ]


def test_a_secret_inside_a_bound_directory_is_covered_and_own_paths_bound_again_on_top() -> None:
    args = sandbox_argv(
        plan(
            Bind(P("/srv"), own=False),  # the operator exposed /srv ...
            Bind(P("/srv/the-loop/app")),  # ... where the project (and its .env) lives
            secrets=(Secret(P("/srv/the-loop"), hard=False), Secret(P("/etc/shadow"), False)),
        ),
        [],
    )
    order = [w for w in args if w.startswith("/srv") or w == "/etc/shadow"]
    assert order == ["/srv", "/srv", "/srv/the-loop", "/srv/the-loop/app", "/srv/the-loop/app"]
    assert args[args.index("/srv/the-loop") - 1] == "--tmpfs"
    assert "/etc/shadow" not in args  # /etc is not bound here: nothing to cover


def test_a_secret_file_is_covered_with_dev_null() -> None:
    args = sandbox_argv(plan(Bind(P("/etc")), secrets=(Secret(P("/etc/shadow"), False),)), [])
    assert args[args.index("/etc/shadow") - 2 : args.index("/etc/shadow") + 1] == [
        "--ro-bind",
        "/dev/null",
        "/etc/shadow",
    ]


def test_the_operator_cannot_re_expose_a_hard_secret() -> None:
    state = Secret(P("/home/dev/.local/state/the-loop"))
    declared = plan(
        Bind(P("/home/dev/.local/state/the-loop"), own=False),
        Bind(P("/home/dev/.local/state/the-loop/spawner/homes"), writable=True, own=False),
        Bind(P("/home/dev/.nvm"), own=False),
        Bind(P("/home/dev/.local/state/the-loop/spawner/homes/item"), writable=True),
        secrets=(state,),
    )
    assert [b.path for b in kept_binds(declared)] == [
        P("/home/dev/.nvm"),
        P("/home/dev/.local/state/the-loop/spawner/homes/item"),  # the session's own home
    ]


def test_a_soft_secret_stays_covered_but_a_declared_directory_inside_it_is_kept() -> None:
    app_dir = Secret(P("/home/dev"), hard=False)  # `the-loop up` run from the home directory
    declared = plan(Bind(P("/home/dev/.nvm"), own=False), Bind(P("/home/dev"), own=False))
    kept = kept_binds(SandboxPlan(binds=declared.binds, secrets=(app_dir,)))
    assert [b.path for b in kept] == [P("/home/dev/.nvm")]


def test_environment_changes_are_passed_to_bwrap() -> None:
    argv = sandbox_argv(
        SandboxPlan(binds=(), setenv=(("HOME", "/h"),), unsetenv=("TMUX",), chdir=P("/c")), ["x"]
    )
    assert argv[-9:] == ["--setenv", "HOME", "/h", "--unsetenv", "TMUX", "--chdir", "/c", "--", "x"]


def test_a_plan_without_network_gets_a_namespace_of_its_own() -> None:
    assert "--unshare-net" not in sandbox_argv(SandboxPlan(binds=()), ["x"])
    offline = sandbox_argv(SandboxPlan(binds=(), network=False), ["x"])
    assert "--unshare-net" in offline[: offline.index("--")]


def test_the_sandbox_key_is_bubblewrap_unless_none_is_written_exactly() -> None:
    assert parse_config({}).routing.sandbox.resolved.value == "bubblewrap"
    for mode, resolved in [("none", "none"), ("None", "bubblewrap"), ("bwrap", "bubblewrap")]:
        config = parse_config({"routing": {"sandbox": {"mode": mode}}})
        assert config.routing.sandbox.resolved.value == resolved
    extra = parse_config({"routing": {"sandbox": {"readOnly": ["~/.nvm"], "readWrite": ["/c"]}}})
    assert extra.routing.sandbox.read_only == [P("~/.nvm")]
    assert extra.routing.sandbox.read_write == [P("/c")]


# -- this machine --------------------------------------------------------------------------


def test_the_plan_shows_the_system_the_code_the_checkout_and_the_home(tmp_path: Path) -> None:
    checkout, home = tmp_path / "work" / "item", tmp_path / "state" / "homes" / "item"
    checkout.mkdir(parents=True)
    home.mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "CLAUDE_CONFIG_DIR": "/x"}
    found = host_plan(sandbox=Sandbox(), checkout=checkout, home=home, env=env, hidden=())
    paths = {b.path: b.writable for b in found.binds}
    assert paths[P("/usr")] is False and paths[P("/etc")] is False
    assert paths[checkout] is True and paths[home] is True
    assert all(paths[d] is False for d in code_dirs())
    assert dict(found.setenv)["HOME"] == str(home)
    assert dict(found.setenv)["PATH"].startswith(str(P(sys.prefix) / "bin"))
    assert "CLAUDE_CONFIG_DIR" in found.unsetenv and found.chdir == checkout


def test_the_certificates_the_spawner_trusts_are_shown_but_never_from_its_secrets(
    tmp_path: Path,
) -> None:
    checkout, home, certs, state = (tmp_path / n for n in ("item", "home", "certs", "state"))
    for folder in (checkout, home, certs, state):
        folder.mkdir()
    (certs / "ca.pem").write_text("a CA")
    (state / "stolen.pem").write_text("not for sessions")
    env = {
        "SSL_CERT_FILE": str(certs / "ca.pem"),
        "GIT_SSL_CAINFO": str(state / "stolen.pem"),
        "SSL_CERT_DIR": str(tmp_path / "absent"),
    }
    found = host_plan(
        sandbox=Sandbox(), checkout=checkout, home=home, env=env, hidden=(Secret(state),)
    )
    shown = {b.path for b in kept_binds(found)}
    assert certs / "ca.pem" in shown
    assert state / "stolen.pem" not in shown and tmp_path / "absent" not in shown


def test_a_certificate_named_through_a_link_is_named_where_the_sandbox_shows_it(
    tmp_path: Path,
) -> None:
    checkout, home, certs, elsewhere = (tmp_path / n for n in ("item", "home", "certs", "op"))
    for folder in (checkout, home, certs, elsewhere):
        folder.mkdir()
    (certs / "ca.pem").write_text("a CA")
    (elsewhere / "ca.pem").symlink_to(certs / "ca.pem")  # in a directory no sandbox shows
    env = {"SSL_CERT_FILE": str(elsewhere / "ca.pem"), "PATH": "/usr/bin"}
    found = host_plan(sandbox=Sandbox(), checkout=checkout, home=home, env=env, hidden=())
    assert certs / "ca.pem" in {b.path for b in kept_binds(found)}
    assert elsewhere not in {b.path for b in found.binds}
    assert dict(found.setenv)["SSL_CERT_FILE"] == str((certs / "ca.pem").resolve())


def test_the_secrets_found_are_the_ones_that_exist(tmp_path: Path) -> None:
    state, home, work, sockets = (tmp_path / n for n in ("state", "home", "work", "tmux"))
    for folder in (state, home / ".ssh", work):
        folder.mkdir(parents=True)
    found = secrets(
        state_dir=state, real_home=home, workspace_root=work, socket_dir=sockets, env={}
    )
    hard = {s.path for s in found if s.hard}
    assert {state, home / ".ssh", work} <= hard and sockets not in hard
    assert any(s.path == P.cwd() and not s.hard for s in found)


def test_a_harness_among_the_spawners_secrets_is_refused_with_what_to_do(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    tool = state / "tools" / "claude"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    home, checkout = tmp_path / "home", tmp_path / "co"
    home.mkdir()
    checkout.mkdir()
    hidden = [Secret(state)]
    found = host_plan(sandbox=Sandbox(), checkout=checkout, home=home, env={}, hidden=hidden)
    with pytest.raises(SandboxError, match=r"cannot show .*install it elsewhere"):
        confined_argv(found, [str(tool)], {"HOME": str(home)})
    shown = host_plan(  # nor can the operator's config re-expose it
        sandbox=Sandbox(read_only=[tool.parent]),
        checkout=checkout,
        home=home,
        env={},
        hidden=hidden,
    )
    with pytest.raises(SandboxError):
        confined_argv(shown, [str(tool)], {"HOME": str(home)})


def test_without_bwrap_on_the_path_the_problem_is_one_line_offering_the_opt_out_to_non_root() -> (
    None
):
    line = bubblewrap_problem("/etc/the-loop/cli-config.yaml", {"PATH": "/nonexistent"})
    assert line is not None and "\n" not in line
    assert "bubblewrap (bwrap) is not installed" in line and "apt-get install bubblewrap" in line
    # A root spawner's unsandboxed sessions would run as root: it is never offered that.
    assert ("routing.sandbox.mode: none" in line) is (os.geteuid() != 0)
    assert bubblewrap_problem("x.yaml", {"PATH": os.environ["PATH"]}) is None


def test_a_confined_command_runs_and_sees_only_its_own_paths(tmp_path: Path) -> None:
    checkout, home, hidden = tmp_path / "co", tmp_path / "home", tmp_path / "secret"
    for folder in (checkout, home, hidden):
        folder.mkdir()
    (hidden / "key").write_text("s3cret")
    (checkout / "mine").write_text("ok")
    found = host_plan(sandbox=Sandbox(), checkout=checkout, home=home, env={}, hidden=())
    script = f"cat mine; cat {hidden}/key; echo; ls /proc | grep -c '^[0-9]'; echo $HOME"
    proc = subprocess.run(
        confined_argv(found, ["sh", "-c", script], {}), capture_output=True, text=True
    )
    lines = proc.stdout.split()
    assert lines[0] == "ok" and "s3cret" not in proc.stdout
    assert int(lines[1]) <= 4 and lines[2] == str(home)


def test_the_gate_facts_show_read_only_at_their_fixed_path(tmp_path: Path) -> None:
    """The stop gate's facts file: readable inside, and neither writable nor replaceable."""
    checkout, home, state = tmp_path / "co", tmp_path / "home", tmp_path / "state"
    for folder in (checkout, home, state):
        folder.mkdir()
    facts = state / "gate.json"
    facts.write_text('{"THE_LOOP_WORK_ITEM": "issue-1"}')
    found = host_plan(
        sandbox=Sandbox(), checkout=checkout, home=home, env={}, hidden=(), facts=facts
    )
    script = (
        f"cat {FACTS_AT}; echo; echo x > {FACTS_AT} || echo NOWRITE; "
        f"rm -f {FACTS_AT} || echo NORM; mv {FACTS_AT} /tmp/f || echo NOMOVE"
    )
    proc = subprocess.run(
        confined_argv(found, ["sh", "-c", script], {}), capture_output=True, text=True
    )
    lines = proc.stdout.split()
    assert lines == ['{"THE_LOOP_WORK_ITEM":', '"issue-1"}', "NOWRITE", "NORM", "NOMOVE"]
    assert facts.read_text() == '{"THE_LOOP_WORK_ITEM": "issue-1"}'
