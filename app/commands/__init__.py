"""Sub-commands of `the-loop`. The room's interface is the modules that contribute them, in
help order: each has `register(subparsers)`, which adds its sub-commands (`app.cli` calls it)."""

__all__ = [
    "agent_tools",
    "check",
    "ci_checks",
    "configcheck",
    "doctor",
    "events",
    "git_credential",
    "hooks",
    "models",
    "phase",
    "pr",
    "server",
    "sessions",
    "setup",
    "slack",
    "spawner",
    "standing",
]
