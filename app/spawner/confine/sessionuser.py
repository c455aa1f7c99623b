"""Which user a session runs as, and handing its checkout and home to that user.

A sandbox's mounts are `nosuid`; the host's are not. Whatever a session writes lands on the
host with the session's owner: run as root, a session leaves root-owned set-uid programs for
any local user to run. So a spawner running as root never runs a session as root: bubblewrap
starts as root (it reads the spawner's private files to show them, read-only) and the first
thing inside drops to `the-loop-session`, an unprivileged system account made on first use
(`useradd`), with no capability and none to gain. The session's checkout and home are that
user's; nothing else of the host is. A spawner that is not root runs sessions as itself.
Only the sandbox can drop a session to another user, so a root spawner refuses
`routing.sandbox.mode: none` (`unconfined_as_root`).

Before a session starts, and whenever it ended, its checkout and home are tidied
(`hostwalk.tidy`): no set-uid or set-gid bit and no world-writable directory survives
into a host step.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.spawner.confine.hostwalk import Walked, tidy
from app.spawner.spawner_errors import SpawnerError

SESSION_USER = "the-loop-session"
USERADD = (
    "useradd",
    "--system",
    "--user-group",
    "--no-create-home",
    "--home-dir",
    "/nonexistent",
    "--shell",
    "/usr/sbin/nologin",
)
# Process-wide on purpose: the session user is one OS account, made once whichever spawner
# context asks first (two useradds racing would fail the second).
_MADE = threading.Lock()


ROOT_UNCONFINED = (
    "routing.sandbox.mode is none in {config} and the spawner runs as root: sessions never "
    "run as root, and only the sandbox can drop them to another user. Remove mode: none "
    "(bubblewrap, the default) or run the spawner as an unprivileged user"
)


def unconfined_as_root(config_source: str) -> str | None:
    """Why unsandboxed sessions cannot run here (the spawner is root: they would be), or
    None. An unconfined session runs as the spawner's user, with the operator's home."""
    return ROOT_UNCONFINED.format(config=config_source) if os.geteuid() == 0 else None


class SessionUserError(SpawnerError, RuntimeError):
    """The session's user cannot be found or made; the message says what to do."""


@dataclass(frozen=True)
class SessionUser:
    name: str
    uid: int
    gid: int

    @property
    def ids(self) -> tuple[int, int]:
        return (self.uid, self.gid)


def session_user(name: str = SESSION_USER) -> SessionUser | None:
    """The user sessions run as: None when the spawner is not root (they run as it);
    otherwise `name`, made when missing."""
    if os.geteuid() != 0:
        return None
    with _MADE:
        try:
            found = pwd.getpwnam(name)
        except KeyError:
            made = subprocess.run(
                [*USERADD, name], capture_output=True, text=True, timeout=60, check=False
            )
            if made.returncode != 0 and made.returncode != 9:  # 9: made meanwhile
                raise SessionUserError(
                    f"the spawner runs as root and sessions never do, but the user {name} "
                    f"cannot be made ({made.stderr.strip() or made.returncode}): create it "
                    "(useradd --system --user-group) or run the spawner as another user"
                ) from None
            found = pwd.getpwnam(name)
    if found.pw_uid == 0 or found.pw_gid == 0:
        raise SessionUserError(f"the user {name} is root's uid or gid: sessions never run so")
    return SessionUser(name, found.pw_uid, found.pw_gid)


def hand_over(paths: Iterable[Path], user: SessionUser | None) -> list[Walked]:
    """Each of `paths` tidied (see `hostwalk.tidy`) and, with a `user`, made theirs."""
    owner = user.ids if user is not None else None
    return [tidy(path, owner) for path in paths]
