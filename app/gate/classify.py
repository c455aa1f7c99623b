"""From ticks to a selection: which phases are skipped, and the harness, model and effort (pure).

Where the ticks come from: a checklist inside the execute reply wins over the checklist
comment's current boxes. Phase rows are merged row by row (a row the reply does not mention
keeps the comment's box, then its default; an approval gate after a skipped phase is skipped
with it); a choice section is taken whole from the reply when the reply names any row of it,
else from the comment, else from its defaults.

How a choice section is read: exactly one ticked offered row is a choice; none, two, or
only unoffered tokens is no choice (`""`, the default runs) for that section alone.
Resolution runs harness first, then model and effort against the resolved harness; a tick
the resolved harness cannot run is dropped and named. Tokens that name nothing the operator
declared are ignored: nothing outside the offer can ever be chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.gate.checklist import CHOICE_PREFIXES, PHASE_KINDS, Checklist, Offer, SectionKind
from app.gate.parse import Tick, first_ticks
from app.graph import APPROVAL_GATES


@dataclass(frozen=True)
class Dropped:
    token: str
    reason: str


@dataclass(frozen=True)
class Selection:
    """What a reply chose. `""` for harness/model/effort means no choice (the default)."""

    skips: tuple[str, ...]
    harness: str
    model: str
    effort: str
    resolved_harness: str
    harness_offered: bool
    dropped: tuple[Dropped, ...]


def _phase_states(
    checklist: Checklist, board: Mapping[str, bool], reply: Mapping[str, bool]
) -> dict[str, bool]:
    states: dict[str, bool] = {}
    for section in checklist.sections:
        if section.kind in PHASE_KINDS:
            for row in section.rows:
                states[row.token] = reply.get(row.token, board.get(row.token, row.checked))
    for phase, gate in APPROVAL_GATES.items():
        if gate in states and not states.get(phase, True):
            states[gate] = False  # no stop after a phase that does not run
    return states


def _ticked_in_section(
    checklist: Checklist, kind: SectionKind, board: Mapping[str, bool], reply: Mapping[str, bool]
) -> list[str]:
    """Names ticked in a choice section, from the reply, else the comment, else defaults."""
    prefix = CHOICE_PREFIXES[kind]
    for source in (reply, board):
        if any(token.startswith(prefix) for token in source):
            return [t[len(prefix) :] for t, on in source.items() if on and t.startswith(prefix)]
    section = checklist.section(kind)
    rows = section.rows if section is not None else ()
    return [r.token[len(prefix) :] for r in rows if r.checked]


def _pick(
    kind: SectionKind, ticked: list[str], offered: tuple[str, ...], fallback: str
) -> tuple[str, list[Dropped]]:
    """Exactly one ticked offered name is the choice; more than one is none, all named."""
    prefix = CHOICE_PREFIXES[kind]
    candidates = [n for n in dict.fromkeys(ticked) if n in offered]
    if len(candidates) == 1:
        return candidates[0], []
    if not candidates:
        return "", []
    reason = f"{len(candidates)} {kind.value} rows ticked; tick at most one, so {fallback} runs"
    return "", [Dropped(prefix + n, reason) for n in candidates]


def _unoffered(
    kind: SectionKind, ticked: list[str], offered: tuple[str, ...], declared: tuple[str, ...]
) -> list[str]:
    """Ticked names the operator declared but the offer does not include (unknown: ignored)."""
    return [n for n in dict.fromkeys(ticked) if n not in offered and n in declared]


def _harness(offer: Offer, ticked: list[str]) -> tuple[str, list[Dropped]]:
    offered = offer.harnesses if offer.harness_section else ()
    default = offer.default_harness
    harness, dropped = _pick(SectionKind.HARNESS, ticked, offered, f"the default `{default}`")
    for name in _unoffered(SectionKind.HARNESS, ticked, offered, offer.declared_harnesses):
        if name == default and not offer.harness_section:
            continue
        why = (
            f"harness `{name}` cannot host a session here"
            if offer.harness_section
            else f"no harness choice is offered; `{default}` runs"
        )
        dropped.append(Dropped(CHOICE_PREFIXES[SectionKind.HARNESS] + name, why))
    return harness, dropped


def _model(offer: Offer, ticked: list[str], harness: str) -> tuple[str, list[Dropped]]:
    prefix = CHOICE_PREFIXES[SectionKind.MODEL]
    choice, dropped = _pick(SectionKind.MODEL, ticked, offer.model_rows, "the harness's default")
    for name in _unoffered(SectionKind.MODEL, ticked, offer.model_rows, offer.declared_models):
        why = (
            "refused by `the-loop models check`"
            if prefix + name in offer.refused
            else f"`{name}` is not offered on harness `{harness}`"
        )
        dropped.append(Dropped(prefix + name, why))
    if choice and choice not in offer.models_on(harness):
        dropped.append(Dropped(prefix + choice, f"`{choice}` cannot run on harness `{harness}`"))
        choice = ""
    return choice, dropped


def _effort(offer: Offer, ticked: list[str]) -> tuple[str, list[Dropped]]:
    prefix = CHOICE_PREFIXES[SectionKind.EFFORT]
    choice, dropped = _pick(SectionKind.EFFORT, ticked, offer.efforts, "the harness's default")
    for name in _unoffered(SectionKind.EFFORT, ticked, offer.efforts, offer.declared_efforts):
        dropped.append(Dropped(prefix + name, "refused by `the-loop models check`"))
    return choice, dropped


def classify(
    offer: Offer, checklist: Checklist, board: tuple[Tick, ...], reply: tuple[Tick, ...]
) -> Selection:
    """The selection a reply makes, given the checklist comment's rows (`board`)."""
    board_states, reply_states = first_ticks(board), first_ticks(reply)

    def ticked(kind: SectionKind) -> list[str]:
        return _ticked_in_section(checklist, kind, board_states, reply_states)

    states = _phase_states(checklist, board_states, reply_states)
    skips = tuple(node for node, on in states.items() if not on)
    harness, dropped = _harness(offer, ticked(SectionKind.HARNESS))
    resolved = harness or offer.default_harness
    model, model_dropped = _model(offer, ticked(SectionKind.MODEL), resolved)
    effort, effort_dropped = _effort(offer, ticked(SectionKind.EFFORT))
    return Selection(
        skips=skips,
        harness=harness,
        model=model,
        effort=effort,
        resolved_harness=resolved,
        harness_offered=offer.harness_section,
        dropped=tuple(dropped + model_dropped + effort_dropped),
    )
