"""A request's claim: the most it can cost, worked out before it is sent (docs/budgets.md).

Its claimed input at the input price plus its output reservation at the output price. The
claimed input is **anchored**: the prompt size the provider reported for the leg's last
answer plus orch's estimate of what was added since (before any answer, the whole
estimate), the estimated part times the model's **safety factor** — the most the provider
counted over orch's estimate in any answer of the wave (at least 1, at most MAX_FACTOR).

The engine claims every request it sends (the account holds it until the answer settles
it, and the request journal keeps it as "at most $X" while it is in flight); the cost
ceiling plugin checks the same number against its ceiling. What a leg remembers for this
(the estimate's memo, the anchor, the request as sent) lives in ``leg.state`` under
``account.*``; the factors live on the run's account.
"""

from __future__ import annotations

import json
import math
from typing import Any

DEFAULT_RESERVATION = 4096  # output tokens assumed (and sent, under a ceiling) when none is known
MAX_FACTOR = 10.0  # the most a provider's prompt count may raise the claims' safety factor
_MEMO, _ANCHOR, _SENT = "account.estimate", "account.anchor", "account.sent"


def prices(leg) -> tuple[float, float] | None:
    """(input, output) dollars per token of the leg's model, or None when unknown."""
    from orchestrator.models.catalog import prices as catalog_prices

    return catalog_prices(leg.model)


def ceiling_tokens(leg) -> int | None:
    """The most output tokens the leg's model can produce, when known."""
    from orchestrator.models.catalog import model_info

    declared = leg.config.providers.get(leg.model.provider) if leg.model.declared else None
    return model_info(leg.model, declared).max_output_tokens


def reservation(leg, params: dict[str, Any] | None = None, budget: int | None = None) -> int:
    """Output tokens a request may produce: what it asks for (``max_tokens``), else
    ``budget`` (an output budget a plugin keeps) capped by the model's ceiling, else the
    ceiling, else DEFAULT_RESERVATION."""
    asked = (params or {}).get("max_tokens") or (params or {}).get("max_completion_tokens")
    if asked:
        return int(asked)
    ceiling = ceiling_tokens(leg)
    if budget and ceiling:
        return min(int(budget), ceiling)
    return int(budget or ceiling or DEFAULT_RESERVATION)


def input_tokens(leg, messages: list, tools: list | None) -> int:
    """The estimate of a request's input. A leg's conversation only grows, so the messages
    already counted (the same objects as last time) are not counted again: a claim costs the
    new turns, not the whole history, at every step."""
    from orchestrator.models.estimate import REPLY_PRIMING, estimate_message, estimate_text

    model = leg.model.litellm_model
    memo = leg.state.setdefault(_MEMO, {"n": 0, "last": None, "tokens": 0})
    n = memo["n"]
    if not (0 < n <= len(messages) and messages[n - 1] is memo["last"]):
        n, memo["tokens"] = 0, 0
    memo["tokens"] += sum(estimate_message(m, model) for m in messages[n:])
    memo["n"], memo["last"] = len(messages), messages[-1] if messages else None
    tools_tokens = estimate_text(json.dumps(tools), model) if tools else 0
    return memo["tokens"] + (REPLY_PRIMING if messages else 0) + tools_tokens


def claimed_input(leg, messages: list, tools: list | None, factor: float = 1.0) -> int:
    """The input tokens a request is claimed for (anchored; the estimated part times
    ``factor``). The request is remembered as the one sent, for :func:`learn`."""
    estimate = input_tokens(leg, messages, tools)
    claim = math.ceil(estimate * factor)
    anchor = leg.state.get(_ANCHOR)
    if anchor is not None:
        reported, estimated, n, last = anchor
        if 0 < n <= len(messages) and messages[n - 1] is last and estimate >= estimated:
            claim = reported + math.ceil((estimate - estimated) * factor)
    leg.state[_SENT] = (estimate, len(messages), messages[-1] if messages else None)
    return claim


def worst_case(leg, messages: list, tools: list | None, params: dict[str, Any] | None,
               factor: float = 1.0, budget: int | None = None) -> float | None:
    """The most a request of these messages, tools and params can cost; None without a
    price."""
    price = prices(leg)
    if price is None:
        return None
    tokens_in = claimed_input(leg, messages, tools, factor)
    return tokens_in * price[0] + reservation(leg, params, budget) * price[1]


def affordable(leg, messages: list, left: float, params: dict[str, Any] | None,
               factor: float = 1.0) -> int:
    """The output tokens ``left`` dollars pay for after a tool-less request of
    ``messages`` (at most its reservation)."""
    p_in, p_out = prices(leg)
    tokens_in = claimed_input(leg, messages, None, factor)
    room = int((left - tokens_in * p_in) / p_out) if p_out > 0 else reservation(leg, params)
    return min(reservation(leg, params), room)


def learn(leg, usage, suspect: bool, factors: dict[str, float]) -> None:
    """After an answer: the provider's own prompt size anchors the leg's next claim, and its
    ratio to orch's estimate raises the model's safety factor in ``factors`` (never below 1,
    at most MAX_FACTOR). Usage that was clamped or absent teaches nothing."""
    sent = leg.state.pop(_SENT, None)
    reported = usage.input_tokens
    if sent is None or suspect or reported <= 0:
        return
    estimate, n, last = sent
    leg.state[_ANCHOR] = (reported, estimate, n, last)
    if estimate > 0:
        ratio = min(MAX_FACTOR, reported / estimate)
        factors[leg.model.name] = max(factors.get(leg.model.name, 1.0), ratio)
