"""The spawner `the-loop up` starts beside the App: a child `the-loop spawner` process with
a token minted for it in the local store."""

from __future__ import annotations

import argparse
import subprocess
from typing import Any

from app.settings import Settings


def start(args: argparse.Namespace, settings: Settings) -> subprocess.Popen[Any] | None:
    if getattr(args, "no_spawner", False):
        return None
    return None


def stop(child: subprocess.Popen[Any] | None) -> None:
    if child is None:
        return
    child.terminate()
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
