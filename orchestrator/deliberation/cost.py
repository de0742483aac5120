"""What a round can cost before it is launched: the ceiling pays for a whole round or for none.

A round's worst case is, per leg, its first request's: the prompt tokens the leg's last
request reported plus the estimate of what this round adds (its previous reply and the new
prompt), or the estimate of the whole conversation if that is more, at the input price; plus
its output reservation at the output price (the same claim the cost ceiling makes at launch,
plugins/cost_ceiling.py). A leg whose model has no known price adds nothing: its cost is
unknown and the run says so (``cost_exact: false``).
"""

from __future__ import annotations

from typing import Any

from orchestrator.models.catalog import model_info, prices
from orchestrator.models.estimate import estimate_text

DEFAULT_RESERVATION = 4096  # output tokens assumed when neither a budget nor a ceiling is known
FRAMING = 64  # tokens of roles and separators around a request


def reservation(model, options: dict[str, Any], config) -> int:
    declared = config.providers.get(model.provider) if model.declared else None
    ceiling = model_info(model, declared).max_output_tokens
    budget = options.get("output_budget")
    if budget and ceiling:
        return min(int(budget), int(ceiling))
    return int(budget or ceiling or DEFAULT_RESERVATION)


def leg_bound(seat, prompt: str, options: dict[str, Any], config) -> float | None:
    """The most one leg's first request of the round can cost; None when its price is
    unknown."""
    price = prices(seat.model)
    if price is None:
        return None
    name = seat.model.litellm_model
    added = estimate_text(prompt, name) + estimate_text(
        seat.history[-1]["content"] if seat.history else "", name)
    whole = sum(estimate_text(str(m.get("content") or ""), name) for m in seat.history) \
        + estimate_text(prompt, name)
    tokens_in = max(seat.last_input + added, whole) + FRAMING
    return tokens_in * price[0] + reservation(seat.model, options, config) * price[1]


def round_bound(seats: list, prompts: list[str], options: dict[str, Any], config) -> float | None:
    """The round's worst case: the sum over its legs (None when no leg's price is known)."""
    bounds = [leg_bound(s, p, options, config) for s, p in zip(seats, prompts, strict=True)]
    known = [b for b in bounds if b is not None]
    return sum(known) if known else None
