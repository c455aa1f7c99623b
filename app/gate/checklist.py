"""The phase-selection checklist as values: what is offered, and the sections that show it.

`build_offer` turns the operator config, the harnesses spawners can host and the choices
`models check` refused into an `Offer` — the only vocabulary a reply can choose from.
`build_checklist` lays the offer out as sections of rows. Both are pure.

Offer rules: `harness-<name>` rows only when two or more harnesses are offerable (declared
and hostable), the default pre-ticked; `model-<name>` rows in declared order, the union
across offered harnesses when a harness section is shown, else the default harness's own;
`effort-<level>` rows for declared levels. A section with nothing to offer is not shown.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from app.config import OperatorConfig, default_harness, models_for, offered_harnesses
from app.gate.phases import PHASES, Phase, PhaseKind
from app.graph import APPROVAL_GATES

HARNESS_PREFIX = "harness-"
MODEL_PREFIX = "model-"
EFFORT_PREFIX = "effort-"


class SectionKind(StrEnum):
    PHASES = "phases"
    OPT_IN = "opt-in"
    GATES = "gates"
    HARNESS = "harness"
    MODEL = "model"
    EFFORT = "effort"


# The sections whose rows are nodes of the graph (a row unticked is a skip).
PHASE_KINDS = (SectionKind.PHASES, SectionKind.OPT_IN, SectionKind.GATES)

CHOICE_PREFIXES: Mapping[SectionKind, str] = {
    SectionKind.HARNESS: HARNESS_PREFIX,
    SectionKind.MODEL: MODEL_PREFIX,
    SectionKind.EFFORT: EFFORT_PREFIX,
}


@dataclass(frozen=True)
class Offer:
    """What a reply may choose, computed when the checklist is posted and again at execute."""

    harnesses: tuple[str, ...]
    default_harness: str
    models_by_harness: Mapping[str, tuple[str, ...]]
    model_rows: tuple[str, ...]
    efforts: tuple[str, ...]
    declared_harnesses: tuple[str, ...] = ()
    declared_models: tuple[str, ...] = ()
    declared_efforts: tuple[str, ...] = ()
    refused: frozenset[str] = frozenset()
    about: Mapping[str, str] = field(default_factory=dict)  # model name → its `about`
    approve_after: frozenset[str] = frozenset()  # phases whose approval row starts ticked

    @property
    def harness_section(self) -> bool:
        """A harness choice is offered only when there are at least two to choose from."""
        return len(self.harnesses) >= 2

    def models_on(self, harness: str) -> tuple[str, ...]:
        return self.models_by_harness.get(harness, ())


def build_offer(
    config: OperatorConfig, hosts: Collection[str], refused: Collection[str] = ()
) -> Offer:
    """The offer for `config` given the harnesses spawners can host and refused row tokens."""
    refused_tokens = frozenset(refused)
    harnesses = tuple(offered_harnesses(config, hosts))
    default = default_harness(config, hosts)
    models_by = {
        h: tuple(
            m.name for m in models_for(config, h) if MODEL_PREFIX + m.name not in refused_tokens
        )
        for h in {*harnesses, default}
    }
    if len(harnesses) >= 2:
        union = {name for h in harnesses for name in models_by[h]}
        model_rows = tuple(m.name for m in config.models if m.name in union)
    else:
        model_rows = models_by[default]
    efforts = tuple(e.name for e in config.effort if EFFORT_PREFIX + e.name not in refused_tokens)
    return Offer(
        harnesses=harnesses,
        default_harness=default,
        models_by_harness=models_by,
        model_rows=model_rows,
        efforts=efforts,
        declared_harnesses=tuple(h.name for h in config.harnesses),
        declared_models=tuple(m.name for m in config.models),
        declared_efforts=tuple(e.name for e in config.effort),
        refused=refused_tokens,
        about={m.name: _one_line(m.about) for m in config.models if m.about},
        approve_after=frozenset(config.routing.gates.approve_after),
    )


def _one_line(text: str, limit: int = 120) -> str:
    """A note that stays on its row: one line (a newline could start a row of its own)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class Row:
    token: str
    label: str
    checked: bool
    note: str = ""  # shown after the row (a model's `about`)


@dataclass(frozen=True)
class Section:
    kind: SectionKind
    title: str
    hint: str
    single: bool
    default: str | None
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Checklist:
    """The sections a human answers, the execute keyword, and where the checklist lives."""

    sections: tuple[Section, ...]
    keyword: str
    always: tuple[str, ...] = ()
    comment_id: int | None = None
    url: str = ""

    def section(self, kind: SectionKind) -> Section | None:
        return next((s for s in self.sections if s.kind is kind), None)

    def rows(self) -> Iterable[Row]:
        for section in self.sections:
            yield from section.rows

    def with_ticks(self, ticked: Collection[str]) -> Checklist:
        """The same checklist with exactly the `ticked` tokens checked."""
        sections = tuple(
            replace(s, rows=tuple(replace(r, checked=r.token in ticked) for r in s.rows))
            for s in self.sections
        )
        return replace(self, sections=sections)

    def to_mirror(self) -> dict[str, Any]:
        """The structured checklist a chat surface renders as a control."""
        return {
            "sections": [
                {
                    "kind": s.kind.value,
                    "title": s.title,
                    "single": s.single,
                    "default": s.default,
                    "rows": [
                        {
                            "token": r.token,
                            "label": f"{r.label} — {r.note}" if r.note else r.label,
                            "checked": r.checked,
                        }
                        for r in s.rows
                    ],
                }
                for s in self.sections
            ],
            "keyword": self.keyword,
            "comment_id": self.comment_id,
            "url": self.url,
        }


_PHASE_TITLES: Mapping[SectionKind, tuple[str, str]] = {
    SectionKind.PHASES: ("Phases", "untick a phase to skip it"),
    SectionKind.OPT_IN: ("Opt-in phases", "tick a phase to add it"),
    SectionKind.GATES: (
        "Approval gates",
        "tick to stop for your `approve` or `changes` after that phase",
    ),
}


def _phase_section(
    kind: SectionKind, phases: tuple[Phase, ...], checked: Collection[str]
) -> Section:
    title, hint = _PHASE_TITLES[kind]
    rows = tuple(Row(p.node, p.label, p.node in checked) for p in phases)
    return Section(kind, title, hint, single=False, default=None, rows=rows)


def _choice_section(
    kind: SectionKind,
    names: tuple[str, ...],
    default: str | None,
    title: str,
    notes: Mapping[str, str] | None = None,
) -> Section:
    prefix = CHOICE_PREFIXES[kind]
    shown = f"`{default}`" if default else "the harness's own"
    hint = f"default: {shown}; tick at most one"
    notes = notes or {}
    rows = tuple(Row(prefix + n, n, n == default, notes.get(n, "")) for n in names)
    return Section(kind, title, hint, single=True, default=default, rows=rows)


def build_checklist(offer: Offer, keyword: str, phases: tuple[Phase, ...] = PHASES) -> Checklist:
    """Lay the offer out: phases, opt-in phases, approval gates (those after the operator's
    `approveAfter` phases ticked), then harness, model and effort choices."""
    sections: list[Section] = []
    skippable = tuple(p for p in phases if p.kind is PhaseKind.SKIPPABLE)
    opt_in = tuple(p for p in phases if p.kind is PhaseKind.OPT_IN)
    gates = tuple(p for p in phases if p.kind is PhaseKind.GATE)
    if skippable:
        sections.append(_phase_section(SectionKind.PHASES, skippable, {p.node for p in phases}))
    if opt_in:
        sections.append(_phase_section(SectionKind.OPT_IN, opt_in, ()))
    if gates:
        ticked = {APPROVAL_GATES[phase] for phase in offer.approve_after if phase in APPROVAL_GATES}
        sections.append(_phase_section(SectionKind.GATES, gates, ticked))
    if offer.harness_section:
        sections.append(
            _choice_section(SectionKind.HARNESS, offer.harnesses, offer.default_harness, "Harness")
        )
    if offer.model_rows:
        sections.append(
            _choice_section(SectionKind.MODEL, offer.model_rows, None, "Model", offer.about)
        )
    if offer.efforts:
        sections.append(_choice_section(SectionKind.EFFORT, offer.efforts, None, "Effort"))
    always = tuple(p.node for p in phases if p.kind is PhaseKind.REQUIRED)
    return Checklist(sections=tuple(sections), keyword=keyword, always=always)
