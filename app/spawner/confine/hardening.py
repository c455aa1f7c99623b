"""Process hardening shared by the App and the spawner: neither process may be read by another
process of its user (`PR_SET_DUMPABLE` 0 makes `/proc/<pid>/environ`, `/proc/<pid>/mem` and
ptrace root's alone)."""

from __future__ import annotations

import ctypes
import ctypes.util

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def undumpable() -> bool:
    """Make this process non-dumpable (inherited by forks, such as gunicorn's workers); False
    where the C library has no `prctl`."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def dumpable() -> bool | None:
    """This process's dumpable flag (None where it cannot be read)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return None
