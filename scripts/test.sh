#!/usr/bin/env bash
# The whole test suite, set up from nothing: installs what the tests run for real when it is
# missing (what sessions need through scripts/session-tools.sh: tmux, git, bubblewrap, the
# claude and codex CLIs; then PostgreSQL and Debian's chromium), starts PostgreSQL, installs
# the project with its test extras, then runs pytest. Extra arguments go to pytest.
# Playwright (a test extra) drives Debian's chromium; it never downloads a browser.
#
# Safe to run again: every step checks before it acts. THE_LOOP_TEST_POSTGRES_URL, when
# already set, names the PostgreSQL server to use instead of a local one.
set -uo pipefail
cd "$(dirname "$0")/.."

say() { echo "scripts/test.sh: $*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

# --- what sessions need, then what only the tests need ------------------------------------
scripts/session-tools.sh || exit 2
case ":$PATH:" in  # where session-tools puts the CLIs when it is not root
  *":$HOME/.local/bin:"*) ;;
  *) [ -d "$HOME/.local/bin" ] && export PATH="$PATH:$HOME/.local/bin" ;;
esac

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)  # the status page test's browser (Playwright drives it)
if [ -z "${THE_LOOP_TEST_POSTGRES_URL:-}" ] && ! command -v pg_ctlcluster >/dev/null 2>&1; then
  need_apt+=(postgresql)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  say "installing ${need_apt[*]}"
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq >/dev/null && as_root apt-get install -y -qq "${need_apt[@]}" >/dev/null \
      || say "could not install ${need_apt[*]} (not root and no sudo?)"
  else
    say "no apt-get here: install ${need_apt[*]} yourself"
  fi
fi

# --- PostgreSQL --------------------------------------------------------------------------
if [ -z "${THE_LOOP_TEST_POSTGRES_URL:-}" ] && command -v pg_ctlcluster >/dev/null 2>&1; then
  if as_root true 2>/dev/null; then
    as_root service postgresql start >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do
      as_root su postgres -c "pg_isready -q" 2>/dev/null && break
      sleep 1
    done
    if as_root su postgres -c "pg_isready -q" 2>/dev/null; then
      as_root su postgres -c "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname='loop'\"" | grep -q 1 \
        || as_root su postgres -c "psql -qc \"CREATE ROLE loop LOGIN SUPERUSER PASSWORD 'loop'\""
      as_root su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname='the_loop_test'\"" | grep -q 1 \
        || as_root su postgres -c "createdb -O loop the_loop_test"
      export THE_LOOP_TEST_POSTGRES_URL="postgresql+psycopg://loop:loop@127.0.0.1/the_loop_test"
    else
      say "PostgreSQL did not start; its tests are skipped outside CI"
    fi
  else
    say "PostgreSQL is installed but cannot be started without root; its tests are skipped"
  fi
fi

# --- the project -------------------------------------------------------------------------
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]' 2>/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check -e '.[test]' || exit 2

# Two workers: most of a test's time is waiting on real processes (tmux, claude, git, servers),
# so two share the machine's cores well. A file's tests stay together, in order (some share a
# module-scoped App). THE_LOOP_TEST_WORKERS=0 runs the tests in one process.
python3 -m pytest -n "${THE_LOOP_TEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  say "pytest collected no tests; that is a failure here."
  exit 1
fi
exit "$rc"
