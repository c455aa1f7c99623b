#!/usr/bin/env bash
# The README's first command: installs what sessions need when it is missing
# (scripts/session-tools.sh), installs this project (`pip install -e .`), then runs
# `the-loop up` with this script's arguments, in the directory it was started from (where
# `the-loop up` keeps `.env` and reads `cli-config.yaml`).
#
# The project goes into the active Python environment. A Python that refuses pip installs
# (Debian's and Ubuntu's own, "externally managed") gets a virtualenv at .venv in the
# repository instead, created once.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "scripts/up.sh: $*" >&2; }

"$repo/scripts/session-tools.sh" || exit 1
case ":$PATH:" in  # where session-tools puts the CLIs when it is not root
  *":$HOME/.local/bin:"*) ;;
  *) [ -d "$HOME/.local/bin" ] && PATH="$PATH:$HOME/.local/bin" ;;
esac

python=python3
managed=$("$python" -c 'import sys, sysconfig, os
inside = sys.prefix != sys.base_prefix
print(int(not inside and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))') \
  || { say "python3 is missing: apt-get install python3 python3-venv"; exit 1; }
if [ "$managed" = 1 ]; then
  if [ ! -x "$repo/.venv/bin/python" ]; then
    say "this Python is managed by the system: creating a virtualenv at $repo/.venv"
    "$python" -m venv "$repo/.venv" || { say "could not: apt-get install python3-venv"; exit 1; }
  fi
  python="$repo/.venv/bin/python"
  PATH="$repo/.venv/bin:$PATH"
fi

"$python" -m pip install --quiet --disable-pip-version-check -e "$repo" \
  || { say "pip install -e $repo failed (above)"; exit 1; }
scripts=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
exec "$scripts/the-loop" up "$@"
