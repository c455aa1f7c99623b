#!/usr/bin/env bash
# Run the whole test suite. Installs the project with its test extras first; uses the
# PostgreSQL server named by THE_LOOP_TEST_POSTGRES_URL when set (CI always sets it).
# Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."

missing=()
for tool in git tmux claude; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/test.sh: missing ${missing[*]} (tests run the real tmux, git and claude)." >&2
  echo "  install: apt-get install -y tmux git && npm install -g @anthropic-ai/claude-code" >&2
  exit 2
fi

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]' || exit 2

python3 -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a failure here." >&2
  exit 1
fi
exit "$rc"
