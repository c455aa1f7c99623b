"""The frozen record of a selection, and its re-validation wherever it is read back (pure).

`frozen_record` is the shape stored on the work item and written into the checkout's
`work-item-state.json`: `decisions.phase-selection` (who, when), `skips`, `harness`,
`model`, `effort` (`""` = no choice), the ticks that were dropped and, when the execute
named one (`base:<branch>`), the `base` branch the work starts from and its pull request
targets, and the approval gates ticked (`stops`; `frozen_skips` reads an older record without
it as none ticked). Because the state
file is agent-writable, `revalidate` re-checks a read-back choice against the operator's
declarations and the hosting harnesses, falling back to the default with a warning.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.config import OperatorConfig, models_for, resolve_harness
from app.gate.checklist import EFFORT_PREFIX, MODEL_PREFIX
from app.gate.classify import Selection
from app.graph import APPROVAL_GATES, approval_stops

PHASE_SELECTION = "phase-selection"


def frozen_record(
    selection: Selection, author: str, at: datetime, base: str = ""
) -> dict[str, Any]:
    """The frozen choice: what the work item runs with, signed by `author` at `at`; `base`
    is `""` unless the execute named one (a record from before bases has none: the same)."""
    return {
        "decisions": {PHASE_SELECTION: {"at": at.isoformat(), "by": author}},
        "skips": {node: {"by": author} for node in selection.skips},
        "harness": selection.harness,
        "model": selection.model,
        "effort": selection.effort,
        "dropped": [{"token": d.token, "reason": d.reason} for d in selection.dropped],
        "base": base,
        "stops": approval_stops(selection.skips)[1],
    }


def frozen_skips(record: Mapping[str, Any]) -> dict[str, Any]:
    """The skips of a frozen record as the walk reads them. A record frozen before approval
    gates existed (no `stops`) names none of them; nobody ticked them, so they are skipped."""
    raw = record.get("skips")
    skips = dict(raw) if isinstance(raw, Mapping) else {str(key): {} for key in raw or ()}
    if "stops" not in record:
        skips.update({gate: {} for gate in APPROVAL_GATES.values() if gate not in skips})
    return skips


@dataclass(frozen=True)
class FrozenChoice:
    """A re-validated harness/model/effort; `harness` is always the one that will run."""

    harness: str
    model: str
    effort: str
    warnings: tuple[str, ...] = ()


def _text(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key, "")
    return value if isinstance(value, str) else ""


def revalidate(
    record: Mapping[str, Any],
    config: OperatorConfig,
    hosts: Collection[str],
    refused: Collection[str] = (),
) -> FrozenChoice:
    """Re-check a frozen choice read back from a store or an agent-writable file.

    The harness must be declared and able to host; the model declared and offered on that
    harness; the effort declared; neither refused by `models check`. Anything else falls
    back to the default (the harness's own for model and effort) with a warning naming it.
    """
    warnings: list[str] = []
    harness, warning = resolve_harness(config, _text(record, "harness"), hosts)
    if warning:
        warnings.append(warning)
    model = _text(record, "model")
    offered_models = {m.name for m in models_for(config, harness)}
    if model and (model not in offered_models or MODEL_PREFIX + model in refused):
        warnings.append(f"frozen model {model!r} is not offered on {harness!r}; using the default")
        model = ""
    effort = _text(record, "effort")
    if effort and (config.effort_level(effort) is None or EFFORT_PREFIX + effort in refused):
        warnings.append(f"frozen effort {effort!r} is not declared; using the default")
        effort = ""
    return FrozenChoice(harness=harness, model=model, effort=effort, warnings=tuple(warnings))
