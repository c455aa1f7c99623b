"""The walk over what a session wrote (`confine/hostwalk.py`) and the plan that drops a root
sandbox to the session's user (`confine/sandbox.py`), on real files and pure argv."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from app.spawner.confine.hostwalk import measure, safe_mode, tidy
from app.spawner.confine.sandbox import Bind, SandboxPlan, Secret, sandbox_argv


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_safe_mode_drops_set_id_bits_and_others_write_on_directories() -> None:
    assert safe_mode(stat.S_IFREG | 0o4755) == 0o755
    assert safe_mode(stat.S_IFREG | 0o2777) == 0o777  # a file's own bits stay the session's
    assert safe_mode(stat.S_IFDIR | 0o1777) == 0o1775
    assert safe_mode(stat.S_IFDIR | 0o2775) == 0o775


def test_tidy_clears_what_a_host_user_could_abuse_and_follows_no_link(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim").write_text("v")
    (outside / "victim").chmod(0o4755)
    outside.chmod(0o777)
    (tree / "x").write_text("x")
    (tree / "x").chmod(0o4755)
    (tree / "a" / "b" / "y").write_text("y")
    (tree / "a" / "b" / "y").chmod(0o2711)
    (tree / "a").chmod(0o777)
    (tree / "link").symlink_to(outside)
    (tree / "a" / "filelink").symlink_to(outside / "victim")
    walked = tidy(tree)
    assert _mode(tree / "x") == 0o755 and _mode(tree / "a" / "b" / "y") == 0o711
    assert _mode(tree / "a") == 0o775
    assert sorted(walked.cleared) == ["a/", "a/b/y", "x"]
    assert _mode(outside) == 0o777 and _mode(outside / "victim") == 0o4755  # not followed
    assert walked.complete


def test_measure_counts_what_lies_in_the_tree_and_not_what_links_name(tmp_path: Path) -> None:
    tree, big = tmp_path / "tree", tmp_path / "big"
    tree.mkdir()
    big.write_bytes(os.urandom(4 << 20))
    (tree / "small").write_bytes(os.urandom(1 << 20))
    (tree / "big-link").symlink_to(big)
    used = measure(tree).bytes
    assert 1 << 20 <= used < 2 << 20


def test_a_plan_with_a_user_drops_to_it_before_anything_runs() -> None:
    plan = SandboxPlan(
        binds=(Bind(Path("/usr")), Bind(Path("/srv/work/item"), writable=True)),
        secrets=(Secret(Path("/srv/work")),),
        user=(999, 995),
        tmp_size=20 << 20,
    )
    argv = sandbox_argv(plan, ["harness", "--x"])
    tail = argv[argv.index("--") + 1 :]
    assert tail[0] == "setpriv" and "--no-new-privs" in tail and "--bounding-set=-all" in tail
    assert tail[tail.index("--reuid=999") :] == [
        "--reuid=999",
        "--regid=995",
        "--",
        "harness",
        "--x",
    ]
    assert argv[argv.index("--size") + 1 : argv.index("--size") + 4] == [
        str(20 << 20),
        "--tmpfs",
        "/tmp",
    ]
    # /srv is made searchable (bubblewrap as root makes mount points 0700) before the bind.
    dirs = [argv[i + 1] for i, word in enumerate(argv) if word == "--dir"]
    assert dirs == ["/srv", "/srv/work"]
    assert argv.index("/srv/work") < argv.index("/srv/work/item")
    caps = [argv[i + 1] for i, word in enumerate(argv) if word == "--cap-add"]
    assert sorted(caps) == ["CAP_DAC_READ_SEARCH", "CAP_SETGID", "CAP_SETUID"]


def test_a_plan_without_a_user_runs_as_the_caller() -> None:
    argv = sandbox_argv(SandboxPlan(binds=(Bind(Path("/usr")),)), ["harness"])
    assert argv[argv.index("--") + 1 :] == ["harness"] and "--cap-add" not in argv
