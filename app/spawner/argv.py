"""The one place a session's argv is composed. Pure: values in, values out.

    argv = [executable] + head                       the harness adapter's: Claude Code's
                                                     `--session-id <uuid>` (resume:
                                                     `--resume <uuid>`), Codex's flags
           + harness_args(config, H)                 the operator's launch arguments
           + model fragment + effort fragment        the frozen choice
           + deny                                    work-item mode only

The prompt is never in the argv: a command line is readable by every local user (`ps`) and
tmux refuses one over about 16 KiB, so the session starts without one and its first message
is pasted once the harness shows its input box (`Launch.prompt`, see `firstmessage`).

The choice path starts from the adapter the no-choice path launches on, so "argv with a
choice" is always a superset of "argv without one". The deny token is a single
`--disallowedTools=AskUserQuestion`: the `=` spelling takes exactly one value, so the
variadic flag can never swallow what follows (wherever a prompt is positional, as in the
`-p` probe, it comes before the operator's arguments). Nothing here adds a permission flag;
every argument comes from the operator's config or is that constant.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from app.config import (
    DEFAULT_HARNESS,
    HOSTING_ADAPTERS,
    EffortChoice,
    InteractionMode,
    ModelChoice,
    OperatorConfig,
    harness_args,
)
from app.gate import revalidate
from app.spawner.harness import adapter_of
from app.spawner.harness.claude import RESUME_FLAG, SESSION_FLAG

PROBE_PROMPT = "Reply with the single word OK."


@dataclass(frozen=True)
class Adapter:
    """How one harness is launched: its executable and its resolved launch arguments."""

    harness: str
    executable: str
    args: tuple[str, ...]
    deny: tuple[str, ...] = ()

    def with_choice(self, fragment: Sequence[str]) -> Adapter:
        """The choice path: this adapter's own arguments followed by the choice fragment."""
        return replace(self, args=self.args + tuple(fragment))


def adapter_for(config: OperatorConfig, harness: str) -> Adapter:
    """The no-choice adapter of `harness`, from the one resolver of launch arguments."""
    entry = config.harness(harness)
    return Adapter(
        harness=harness,
        executable=entry.executable if entry is not None else harness,
        args=tuple(harness_args(config, harness)),
        deny=adapter_of(harness).deny,
    )


@dataclass(frozen=True)
class Choice:
    """A work item's harness, model and effort level; `""` means no choice."""

    harness: str
    model: str = ""
    effort: str = ""


def model_fragment(model: ModelChoice) -> tuple[str, ...]:
    """The entry's own `args` when declared, else `--model <id>`."""
    return tuple(model.args) if model.args is not None else ("--model", model.model_id)


def effort_fragment(effort: EffortChoice, harness: str = DEFAULT_HARNESS) -> tuple[str, ...]:
    """The entry's own `args` when declared, else the harness's way of naming the level
    (Claude Code: `--effort <level>`)."""
    if effort.args is not None:
        return tuple(effort.args)
    return adapter_of(harness).effort_fragment(effort.name)


def choice_fragment(config: OperatorConfig, choice: Choice) -> tuple[str, ...]:
    """Model fragment then effort fragment; an undeclared name contributes nothing."""
    model = config.model(choice.model) if choice.model else None
    effort = config.effort_level(choice.effort) if choice.effort else None
    tail = effort_fragment(effort, choice.harness) if effort else ()
    return (model_fragment(model) if model else ()) + tail


@dataclass(frozen=True)
class Validated:
    """A choice re-validated against this spawner's config, and why anything was dropped."""

    choice: Choice
    warnings: tuple[str, ...] = ()


def validate_choice(
    config: OperatorConfig,
    frozen: Choice,
    hosts: Collection[str] = HOSTING_ADAPTERS,
    refused: Collection[str] = (),
) -> Validated:
    """Re-validate a choice read back from agent-writable state, by the gate's own rule.

    The harness must be declared, have an adapter and host sessions (else the default); the
    model must be offered on that harness and the effort declared, and neither may be a row
    token `models check` refused (`model-<name>`, `effort-<level>`), else that part becomes
    "no choice". Each fallback carries a warning.
    """
    record = {"harness": frozen.harness, "model": frozen.model, "effort": frozen.effort}
    checked = revalidate(record, config, hosts, refused)
    return Validated(Choice(checked.harness, checked.model, checked.effort), checked.warnings)


@dataclass(frozen=True)
class Launch:
    """Everything a launch is made of: `argv` is the list handed to tmux, `prompt` the first
    message pasted once the session is ready (never part of the argv)."""

    harness: str
    model: str
    effort: str
    executable: str
    session_flag: str
    session_id: str
    harness_args: tuple[str, ...]  # operator args + choice: what the registry records
    deny: tuple[str, ...] = ()
    prompt: str | None = None
    interaction: str = InteractionMode.WORK_ITEM.value
    head: tuple[str, ...] = ()  # the adapter's; empty: the session flag and id

    @property
    def argv(self) -> list[str]:
        head = self.head or (self.session_flag, self.session_id)
        return [self.executable, *head, *self.harness_args, *self.deny]

    @property
    def resumed(self) -> bool:
        return self.session_flag == RESUME_FLAG


def build_launch(
    config: OperatorConfig,
    choice: Choice,
    *,
    session_id: str,
    prompt: str | None,
    resume: bool = False,
    mode: InteractionMode | None = None,
) -> Launch:
    """The launch of a work item's session on an already-validated `choice`."""
    adapter = adapter_for(config, choice.harness)
    chosen = adapter.with_choice(choice_fragment(config, choice))
    mode = mode or config.interaction_mode
    return Launch(
        harness=choice.harness,
        model=choice.model,
        effort=choice.effort,
        executable=chosen.executable,
        session_flag=RESUME_FLAG if resume else SESSION_FLAG,
        session_id=session_id,
        harness_args=chosen.args,
        deny=chosen.deny if mode is InteractionMode.WORK_ITEM else (),
        prompt=prompt,
        interaction=mode.value,
        head=adapter_of(choice.harness).launch_head(session_id, resume),
    )


def standing_launch(
    config: OperatorConfig,
    harness: str,
    declared_args: Sequence[str] | None,
    *,
    session_id: str,
    prompt: str | None,
) -> Launch:
    """A standing session: declared `harnessArgs`, or the harness's resolved arguments when the
    entry omits them (explicit `[]` means none). Not governed by the interaction mode."""
    adapter = adapter_for(config, harness)
    args = tuple(declared_args) if declared_args is not None else adapter.args
    return Launch(
        harness=harness,
        model="",
        effort="",
        executable=adapter.executable,
        session_flag=SESSION_FLAG,
        session_id=session_id,
        harness_args=args,
        prompt=prompt,
        interaction="standing",
        head=adapter_of(harness).launch_head(session_id, False),
    )


def probe_argv(adapter: Adapter, fragment: Sequence[str], prompt: str = PROBE_PROMPT) -> list[str]:
    """A one-shot, non-interactive probe with the base arguments a session gets; no deny
    token. Claude Code: `-p <prompt>` right after the executable, before the operator's
    arguments, so an argument list that ends in a variadic flag cannot consume it. Other
    harnesses say their own way (`HarnessAdapter.probe`)."""
    head, tail = adapter_of(adapter.harness).probe(prompt)
    return [adapter.executable, *head, *adapter.args, *fragment, *tail]
