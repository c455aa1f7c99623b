"""What a work item's model usage cost, and the one line that says so (pure).

Counts come from the model gateway (`workitems/spend/usage.py`); prices are dollars per million
tokens, from the operator's `models[].price` when set, else from the shipped table below,
matched on the start of the model's id. The shipped prices are the vendors' list prices as
published when this table was written: an operator on other terms overrides them.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.config import ModelPrice, OperatorConfig

# (model id prefix, price): the longest matching prefix wins.
SHIPPED: tuple[tuple[str, ModelPrice], ...] = (
    ("claude-opus-4-5", ModelPrice(input=5, output=25, cache_read=0.5, cache_write=6.25)),
    ("claude-opus-4", ModelPrice(input=15, output=75, cache_read=1.5, cache_write=18.75)),
    ("claude-sonnet-4", ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75)),
    ("claude-haiku-4", ModelPrice(input=1, output=5, cache_read=0.1, cache_write=1.25)),
    ("claude-3-5-haiku", ModelPrice(input=0.8, output=4, cache_read=0.08, cache_write=1)),
    ("gpt-5-mini", ModelPrice(input=0.25, output=2, cache_read=0.025, cache_write=0)),
    ("gpt-5", ModelPrice(input=1.25, output=10, cache_read=0.125, cache_write=0)),
)
# Names a checklist row may use for the same models.
ALIASES = {"opus": "claude-opus-4", "sonnet": "claude-sonnet-4", "haiku": "claude-haiku-4"}
MILLION = 1_000_000


def price_for(config: OperatorConfig, model: str) -> ModelPrice | None:
    """The price of the model a checklist row names (or a model id), or None when unknown."""
    declared = next((m for m in config.models if m.name == model), None)
    if declared is not None and declared.price is not None:
        return declared.price
    model_id = declared.model_id if declared is not None else model
    model_id = ALIASES.get(model_id, model_id)
    matches = [(len(prefix), price) for prefix, price in SHIPPED if model_id.startswith(prefix)]
    return max(matches, key=lambda pair: pair[0])[1] if matches else None


def cost_usd(counts: Mapping[str, int], price: ModelPrice) -> float:
    """Dollars for `counts` (the gateway's usage fields) at `price`."""
    return (
        counts.get("input_tokens", 0) * price.input
        + counts.get("output_tokens", 0) * price.output
        + counts.get("cache_read_input_tokens", 0) * price.cache_read
        + counts.get("cache_creation_input_tokens", 0) * price.cache_write
    ) / MILLION


def _short(count: int) -> str:
    if count >= MILLION:
        return f"{count / MILLION:.1f}M"
    if count >= 1000:
        return f"{count / 1000:.0f}k"
    return str(count)


def minutes_text(minutes: float) -> str:
    """`37 min`, `<1 min`, `2 h 05 min`."""
    if minutes < 1:
        return "<1 min"
    whole = int(minutes)
    return f"{whole // 60} h {whole % 60:02d} min" if whole >= 60 else f"{whole} min"


def usage_line(counts: Mapping[str, int], cost: float | None, minutes: float | None = None) -> str:
    """`**Usage:** 1.2M tokens (in 980k · out 41k · cache 210k) · $3.84 · 57 requests ·
    37 min (12 min active)`: the last its sessions' wall-clock time, when known, and how
    long their harness was working (`active_ms`, counted at the gateway)."""
    cache = counts.get("cache_read_input_tokens", 0) + counts.get("cache_creation_input_tokens", 0)
    total = counts.get("input_tokens", 0) + counts.get("output_tokens", 0) + cache
    parts = [
        f"{_short(total)} tokens (in {_short(counts.get('input_tokens', 0))} · "
        f"out {_short(counts.get('output_tokens', 0))} · cache {_short(cache)})",
        f"${cost:.2f}" if cost is not None else "cost unknown (no price for its model)",
        f"{counts.get('requests', 0)} requests",
    ]
    active = counts.get("active_ms", 0) / 60_000
    if minutes is not None:
        busy = f" ({minutes_text(active)} active)" if active else ""
        parts.append(minutes_text(minutes) + busy)
    elif active:
        parts.append(f"{minutes_text(active)} active")
    return "**Usage:** " + " · ".join(parts)
