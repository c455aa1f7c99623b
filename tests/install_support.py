"""A machine without some tools, for the install scripts' tests: a PATH of links to this
machine's programs with some left out, and stand-ins for the installers that record what
they were asked and install into the test's own directories, never into the host's.

The stand-in apt-get installs for real: it fetches the named Debian packages from the
registry (`apt-get download`) and unpacks them under the test's directory instead of `/`,
linking their programs onto the test's PATH. The stand-in npm records its call and puts a
stand-in CLI on that PATH (the real packages are large native downloads).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

APT_GET = """#!/bin/sh
echo "$*" >> {log}
[ "$1" = update ] && exit 0
[ "$1" = install ] || exit 2
shift
cd {root} || exit 100
for arg; do
  case "$arg" in -*) ;; *) {real} -q -o APT::Sandbox::User=root download "$arg" || exit 100 ;; esac
done
for deb in *.deb; do dpkg-deb -x "$deb" {root}/fs || exit 100; done
for program in {root}/fs/usr/bin/*; do ln -sf "$program" {tools}/; done
"""

NPM = """#!/bin/sh
echo "$*" >> {log}
for arg; do
  case "$arg" in
    @openai/codex) name=codex ;;
    @anthropic-ai/claude-code) name=claude ;;
    *) continue ;;
  esac
  printf '#!/bin/sh\\necho "%s 0.0.0 (stand-in)"\\n' "$name" > {tools}/$name
  chmod 755 {tools}/$name
done
"""

SUDO = """#!/bin/sh
[ "$1" = -n ] && shift
exec "$@"
"""


def tools_on_path(dest: Path, leave_out: set[str]) -> Path:
    """`dest` holding a link to every program on this PATH but those in `leave_out` (the
    first found of each name, as PATH would find it)."""
    dest.mkdir(parents=True, exist_ok=True)
    for folder in os.environ["PATH"].split(os.pathsep):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            source, link = Path(folder) / name, dest / name
            if name in leave_out or link.exists() or link.is_symlink():
                continue
            if source.is_file() and os.access(source, os.X_OK):
                link.symlink_to(source)
    return dest


def write_program(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def stand_in_apt_get(tools: Path, work: Path) -> Path:
    """An apt-get on `tools` that installs the real packages under `work`; returns its log."""
    real = shutil.which("apt-get")
    assert real, "the stand-in apt-get fetches real packages with this machine's apt-get"
    (work / "fs").mkdir(parents=True)
    log = work / "apt-get.log"
    text = APT_GET.format(log=log, root=work, real=real, tools=tools)
    write_program(tools / "apt-get", text)
    return log


def stand_in_npm(tools: Path, log: Path) -> Path:
    """An npm on `tools` that records each call in `log` and installs stand-in CLIs."""
    write_program(tools / "npm", NPM.format(log=log, tools=tools))
    return log


def stand_in_sudo(tools: Path) -> None:
    """A password-less sudo for a runner that is not root (the scripts' other way to root)."""
    write_program(tools / "sudo", SUDO)


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []
