#!/usr/bin/env bash
# What sessions need on this machine, installed when it is missing: bubblewrap (the sandbox a
# session runs in), tmux (its terminal), git (its checkout) and the harness CLIs `claude` (npm
# @anthropic-ai/claude-code) and `codex` (npm @openai/codex), with Node.js and npm to install
# them. One line says what each install is and why; with everything present it prints nothing
# and exits 0, so it is safe to run before every start.
#
# System packages come from apt-get, as root or through sudo; the CLIs from `npm install -g`
# the same way. Without root or sudo, system packages are not installed: it prints the exact
# commands to run as root and exits 1. A CLI whose npm is present then goes to ~/.local
# (`npm install -g --prefix ~/.local`, no root needed; ~/.local/bin must be on PATH).
#
# Every tool, and apt-get, npm and sudo themselves, are the ones PATH finds.
# Used by scripts/up.sh (the README's first command) and scripts/test.sh.
set -uo pipefail

say() { echo "session-tools: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

# How this user can act as root: self (it is root), sudo, or none.
if [ "$(id -u)" -eq 0 ]; then
  root=self
elif have sudo && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
  root=sudo  # password-less, or asked for a password on this terminal
else
  root=none
fi
as_root() { if [ "$root" = self ]; then "$@"; else sudo "$@"; fi; }

# Runs a quiet install; on failure shows the end of what it printed.
quietly() {
  local out
  out=$(mktemp)
  if "$@" >"$out" 2>&1; then rm -f "$out"; return 0; fi
  tail -n 15 "$out" >&2
  rm -f "$out"
  return 1
}

apt_pkgs=()
apt_why=()
want_apt() {  # tool package why
  have "$1" && return 0
  apt_pkgs+=("$2")
  apt_why+=("$2 (apt): $3")
}
want_apt bwrap bubblewrap "the sandbox every session runs in"
want_apt tmux tmux "the terminal each session lives in"
want_apt git git "each session's checkout of its repository"

npm_pkgs=()
npm_clis=()
npm_why=()
want_npm() {  # command package why
  have "$1" && return 0
  npm_pkgs+=("$2")
  npm_clis+=("$1")
  npm_why+=("the $1 CLI (npm $2): $3")
}
want_npm claude @anthropic-ai/claude-code "Claude Code, the default harness"
want_npm codex @openai/codex "the Codex harness"
if [ ${#npm_pkgs[@]} -gt 0 ] && ! have npm; then
  apt_pkgs+=(nodejs npm)
  apt_why+=("nodejs npm (apt): Node.js, to install the ${npm_clis[*]} CLI from npm")
fi

[ ${#apt_pkgs[@]} -eq 0 ] && [ ${#npm_pkgs[@]} -eq 0 ] && exit 0

export DEBIAN_FRONTEND=noninteractive
apt_line="apt-get update && apt-get install -y ${apt_pkgs[*]}"
npm_line="npm install -g ${npm_pkgs[*]}"

if [ "$root" = none ] && [ ${#apt_pkgs[@]} -eq 0 ]; then  # npm is here: the CLIs go to ~/.local
  for why in "${npm_why[@]}"; do say "installing $why, under ~/.local (not root)"; done
  if ! quietly npm install -g --prefix "$HOME/.local" "${npm_pkgs[@]}"; then
    say "could not install them under ~/.local; as root, run: $npm_line"
    exit 1
  fi
  case ":$PATH:" in *":$HOME/.local/bin:"*) ;; *) say "add ~/.local/bin to PATH" ;; esac
  exit 0
fi
if [ "$root" = none ]; then
  for why in "${apt_why[@]}" "${npm_why[@]}"; do say "missing: $why"; done
  say "not root, and no sudo: as root, run these, then try again:"
  echo "  $apt_line" >&2
  [ ${#npm_pkgs[@]} -gt 0 ] && echo "  $npm_line" >&2
  exit 1
fi

if [ ${#apt_pkgs[@]} -gt 0 ]; then
  if ! have apt-get; then
    for why in "${apt_why[@]}"; do say "missing: $why"; done
    say "no apt-get here: install ${apt_pkgs[*]} with this system's package manager"
    exit 1
  fi
  for why in "${apt_why[@]}"; do say "installing $why"; done
  quietly as_root apt-get update -q || { say "apt-get update failed"; exit 1; }
  quietly as_root apt-get install -y -q "${apt_pkgs[@]}" \
    || { say "could not install ${apt_pkgs[*]}"; exit 1; }
fi

if [ ${#npm_pkgs[@]} -gt 0 ]; then
  for why in "${npm_why[@]}"; do say "installing $why"; done
  quietly as_root npm install -g "${npm_pkgs[@]}" || { say "could not install ${npm_pkgs[*]}"; exit 1; }
fi

missing=()
for tool in bwrap tmux git claude codex; do have "$tool" || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installed, but not found on PATH: ${missing[*]}"
  exit 1
fi
