"""The tmux runner: sessions on the spawner's own tmux server (`tmux -L the-loop`).

A harness is started from an argv list (`new-session … -- argv…`: tmux execs it directly,
no shell ever parses it). The server's global environment is the session environment
(`confine.sessionenv`: an allow-list, built from nothing), so no session (nor the bwrap that
confines it) inherits anything else of the spawner's; per-session values come either as
`-e NAME=value`
(visible in `ps`, so only non-secret values) or, for a session credential, through tmux's
`update-environment` from the client's environment (never in an argv). `remain-on-exit` keeps
a dead pane around so the watchdog sees how a session ended.

Every session is tagged at creation with the work item it belongs to (the session option
`@the-loop-item`); nothing is pasted into or killed in a session whose tag is not the
caller's, so a name that somehow collides never lets one item act on another's pane.

Follow-ups are pasted, not typed: `load-buffer` (text on stdin) then `paste-buffer` of
Ctrl-U (clear the input line: the cursor sits at its end), the text as a bracketed paste
(`-p`), then Enter. Exactly one key precedes the paste: Claude Code 2.1 takes two or more
bytes arriving just before a long bracketed paste (about 50 characters and up, so every real
follow-up) as literal text and appends them to the message (Ctrl-A Ctrl-U would reach the
model as a trailing "\x01\x15"), while a lone Ctrl-U is applied as a key.
The text is stripped of control characters first, so nothing in it can end the paste early.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.spawner.confine.sessionenv import APP_SECRETS, MINTED_VARIABLES, session_environment
from app.spawner.session.pastetext import paste_text
from app.spawner.spawner_errors import SpawnerError

DEFAULT_SOCKET = "the-loop"
CLEAR_LINE = "\x15"
_MARK = "@@the-loop-pane@@"
OWNER_OPTION = "@the-loop-item"

# Passed per session through `update-environment`, never on a command line.
HIDDEN_VARIABLES = MINTED_VARIABLES


class TmuxError(SpawnerError, RuntimeError):
    """A tmux command failed; the message carries tmux's own words."""


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` minus the App's credentials, a session token and tmux's own pointer to another
    server: for the spawner's own probes of a harness on the host (never a session's)."""
    dropped = {*APP_SECRETS, "THE_LOOP_SESSION_TOKEN", "TMUX"}
    return {k: v for k, v in env.items() if k not in dropped}


def stale_names(listing: str, kept: Mapping[str, str]) -> list[str]:
    """Names in `show-environment -g` output that are not in `kept` (pure): what a server
    started from another environment still holds."""
    names = (line.split("=", 1)[0] for line in listing.splitlines() if "=" in line)
    return sorted({name for name in names if not name.startswith("-") and name not in kept})


@dataclass(frozen=True)
class Pane:
    """One session's pane as tmux reports it. A dead pane's `status` (exit code) or `signal`
    can lag behind `dead`, and tmux may never learn it for a process that exits at once."""

    session: str
    dead: bool
    status: int | None = None
    signal: int | None = None
    pid: int | None = None
    owner: str = ""  # the work item the session was created for


def _int(text: str) -> int | None:
    return int(text) if text.lstrip("-").isdigit() else None


_OWNER_FORMAT = f"#{{{OWNER_OPTION}}}"


_PANE_FIELDS = (
    "session_name",
    "pane_active",
    "pane_dead",
    "pane_dead_status",
    "pane_dead_signal",
    "pane_pid",
)
# tmux names never hold ":"; the owner (which may) comes last.
_PANE_FORMAT = ":".join(f"#{{{f}}}" for f in _PANE_FIELDS) + ":" + _OWNER_FORMAT


def _read_panes(listing: str) -> dict[str, Pane]:
    """Each session's active pane from `list-panes -F _PANE_FORMAT` output."""
    panes: dict[str, Pane] = {}
    for line in listing.splitlines():
        parts = line.split(":", len(_PANE_FIELDS))
        name, active, dead, status, signal, pid, owner = (parts + [""] * 7)[:7]
        if active != "1" and name in panes:
            continue
        panes[name] = Pane(name, dead == "1", _int(status), _int(signal), _int(pid), owner)
    return panes


def _target(name: str) -> str:
    """An exact-match target for the session's active pane (no prefix matching)."""
    return f"={name}:"


class TmuxRunner:
    """Runs sessions on one tmux server, selected by socket name (`-L`)."""

    def __init__(
        self,
        socket: str = DEFAULT_SOCKET,
        *,
        env: Mapping[str, str] | None = None,
        pass_env: Sequence[str] = (),
        tmux: str = "tmux",
        size: tuple[int, int] = (200, 50),
    ) -> None:
        self.socket = socket
        self.tmux = tmux
        self.size = size
        source = os.environ if env is None else env
        # What every session starts from (`sessionenv`); the tmux client also needs to know
        # where its socket lies, which no session is told.
        self._env = session_environment(source, pass_env)
        tmpdir = source.get("TMUX_TMPDIR")
        self._client_env = {**self._env, **({"TMUX_TMPDIR": tmpdir} if tmpdir else {})}

    @property
    def session_env(self) -> dict[str, str]:
        """The environment every session on this server starts from."""
        return dict(self._env)

    def _run(
        self,
        args: Sequence[str],
        *,
        stdin: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        env = {**self._client_env, **(extra_env or {})}
        proc = subprocess.run(
            [self.tmux, "-L", self.socket, *args],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )
        if check and proc.returncode != 0:
            raise TmuxError(f"tmux {args[0]}: {proc.stderr.strip() or proc.returncode}")
        return proc

    def ensure_server(self) -> None:
        """Start the server with the session environment and set the options sessions rely
        on. Each new session copies every allowed name from this client's environment
        (`update-environment`: values never on a command line), and whatever else the
        server's global environment holds — a server started from another environment — is
        removed, so no session inherits it."""
        copied = " ".join(dict.fromkeys([*HIDDEN_VARIABLES, *sorted(self._env)]))
        proc = self._run(
            [
                "start-server",
                ";",
                "set-option",
                "-g",
                "exit-empty",
                "off",
                ";",
                "set-option",
                "-wg",
                "remain-on-exit",
                "on",
                ";",
                "set-option",
                "-g",
                "update-environment",
                copied,
                ";",
                "show-environment",
                "-g",
            ]
        )
        stale = stale_names(proc.stdout, self._env)
        if stale:
            commands: list[str] = []
            for name in stale:
                commands += ["set-environment", "-g", "-u", name, ";"]
            self._run(commands[:-1])

    def start(
        self,
        name: str,
        cwd: Path,
        argv: Sequence[str],
        *,
        owner: str,
        env: Mapping[str, str] | None = None,
        hidden_env: Mapping[str, str] | None = None,
    ) -> str:
        """Start `argv` in a new detached session `name` in `cwd`, tagged as `owner`'s;
        returns the tmux target.

        A session of the same name and owner is replaced; one of another owner is an error.
        `env` values appear on tmux's command line; `hidden_env` (names in HIDDEN_VARIABLES)
        reach the session only through the client's environment.
        """
        if len(argv) < 2:
            raise TmuxError("an argv of one word would be run by a shell; refusing")
        unknown = set(hidden_env or {}) - set(HIDDEN_VARIABLES)
        if unknown:
            raise TmuxError(f"not passable without a command line: {sorted(unknown)}")
        self.ensure_server()
        self.kill(name, owner=owner)
        width, height = self.size
        args = ["new-session", "-d", "-s", name, "-x", str(width), "-y", str(height)]
        args += ["-c", str(cwd)]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        tag = [";", "set-option", "-t", _target(name), OWNER_OPTION, owner]
        self._run([*args, "--", *argv, *tag], extra_env=hidden_env)
        return f"{self.socket}:{name}"

    def owner(self, name: str) -> str | None:
        """The work item session `name` was created for ("" untagged, None no session)."""
        fmt = "#{session_name}:" + _OWNER_FORMAT  # (display-message -t answers 0 for none)
        proc = self._run(["list-sessions", "-F", fmt], check=False)
        owners = dict(line.split(":", 1) for line in proc.stdout.splitlines() if ":" in line)
        return owners.get(name) if proc.returncode == 0 else None

    def _check_owner(self, name: str, owner: str) -> bool:
        """True when `name` is `owner`'s, False when there is no such session; raises when
        the session belongs to someone else."""
        found = self.owner(name)
        if found is None:
            return False
        if found != owner:
            raise TmuxError(f"tmux session {name} belongs to {found or 'nobody'!r}, not {owner!r}")
        return True

    def exists(self, name: str) -> bool:
        return self._run(["has-session", "-t", f"={name}"], check=False).returncode == 0

    def panes(self) -> dict[str, Pane]:
        """Every session's active pane, by session name ({} when no server is running).

        tmux sometimes misses a child's exit and leaves it unreaped (dead pane, no status)
        until another child of the server exits; running a trivial command from the server
        makes it reap, so the exit status is not lost.
        """
        panes = self._list_panes()
        if any(p.dead and p.status is None and p.signal is None for p in panes.values()):
            self._run(["run-shell", "true"], check=False)
            panes = self._list_panes()
        return panes

    def _list_panes(self) -> dict[str, Pane]:
        proc = self._run(["list-panes", "-a", "-F", _PANE_FORMAT], check=False)
        return _read_panes(proc.stdout) if proc.returncode == 0 else {}

    def pane(self, name: str) -> Pane | None:
        return self.panes().get(name)

    def look(self, name: str) -> tuple[Pane | None, str]:
        """Session `name`'s active pane and its visible text, with one tmux call (a launch
        looks often while it waits for the input box); (None, "") when there is no such
        session. A dead pane's status may lag here, as in `panes` before it reaps."""
        target = _target(name)
        listing = ["list-panes", "-t", target, "-F", _PANE_FORMAT]
        proc = self._run(
            [
                *listing,
                ";",
                "display-message",
                "-p",
                _MARK,
                ";",
                "capture-pane",
                "-p",
                "-t",
                target,
            ],
            check=False,
        )
        head, marked, text = proc.stdout.partition(_MARK + "\n")
        if proc.returncode != 0 or not marked:
            return None, ""
        return _read_panes(head).get(name), text

    def capture(self, name: str, history: int = 0) -> str:
        """The visible text of the session's pane, plus `history` lines scrolled above it
        (a dead pane's last output is pushed up by tmux's "Pane is dead" line)."""
        start = ["-S", str(-history)] if history else []
        return self._run(["capture-pane", "-p", *start, "-t", _target(name)]).stdout

    def capture_many(self, names: Iterable[str]) -> dict[str, str]:
        """Capture several panes with one tmux call (the watchdog's tick over a fleet)."""
        names = list(names)
        if not names:
            return {}
        args: list[str] = []
        for index, name in enumerate(names):
            if index:
                args += [";", "display-message", "-p", _MARK, ";"]
            args += ["capture-pane", "-p", "-t", _target(name)]
        proc = self._run(args, check=False)
        parts = proc.stdout.split(_MARK + "\n")
        if proc.returncode != 0 or len(parts) != len(names):
            return {
                name: self._run(["capture-pane", "-p", "-t", _target(name)], check=False).stdout
                for name in names
            }
        return dict(zip(names, parts, strict=True))

    def paste(self, name: str, text: str, *, owner: str) -> int:
        """Put `text` into the input of a session that is `owner`'s: clear the line, then a
        bracketed paste. No Enter: the caller presses it once the input shows the text
        (`input_box.submit`). Control characters never reach the pane (`paste_text`); returns
        how many were removed."""
        if not self._check_owner(name, owner):
            raise TmuxError(f"tmux session {name} does not exist")
        cleaned = paste_text(text)
        tag = uuid.uuid4().hex[:12]
        target = _target(name)
        body, clear = f"m{tag}", f"c{tag}"
        commands = [
            "load-buffer",
            "-b",
            body,
            "-",
            ";",
            "set-buffer",
            "-b",
            clear,
            CLEAR_LINE,
            ";",
            "paste-buffer",
            "-d",
            "-b",
            clear,
            "-t",
            target,
            ";",
            "paste-buffer",
            "-d",
            "-p",
            "-b",
            body,
            "-t",
            target,
        ]
        try:
            self._run(commands, stdin=cleaned.text)
        except TmuxError:
            self._run(["delete-buffer", "-b", body], check=False)
            raise
        return cleaned.removed

    def press(self, name: str, keys: Sequence[str], *, owner: str) -> None:
        """Send tmux key names (`Enter`, `Down`, …) to `owner`'s session, never literal text."""
        if not self._check_owner(name, owner):
            raise TmuxError(f"tmux session {name} does not exist")
        self._run(["send-keys", "-t", _target(name), *keys])

    def kill(self, name: str, *, owner: str) -> bool:
        """End `owner`'s session (and its process); False when there was none. A session of
        another owner is an error and stays."""
        if not self._check_owner(name, owner):
            return False
        return self._run(["kill-session", "-t", f"={name}"], check=False).returncode == 0

    @property
    def socket_path(self) -> Path:
        """Where tmux puts a `-L` socket (it leaves the file behind when the server ends)."""
        base = self._client_env.get("TMUX_TMPDIR") or "/tmp"
        return Path(base) / f"tmux-{os.getuid()}" / self.socket

    def kill_server(self) -> None:
        """End the server and every session on it, and remove its socket file."""
        self._run(["kill-server"], check=False)
        self.socket_path.unlink(missing_ok=True)
