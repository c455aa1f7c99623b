"""Claude Code hook entry points. Imported on every turn of every session: it imports nothing.

Its interface is two modules: `stop_gate` (the Stop hook, run as `python -m hooks.stop_gate`)
and `gate_entry` (the gate's entry in a harness's settings file, written by the spawner and by
`the-loop hooks`)."""

__all__ = ["gate_entry", "stop_gate"]
