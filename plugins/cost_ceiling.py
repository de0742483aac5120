"""The wave cost ceiling: ``--max-cost USD`` (or ``plugin_config.cost_ceiling.max_usd``).

Before each launch (every leg, a retry wave's legs, the chair) the launch's *allowance* - what
its first request could cost at most: the briefing's estimated tokens at the input price plus
the output reservation at the output price (with ``--leg-tokens``, the whole turn budget at
the dearer price) - is added to what the wave has committed: the known spend of legs that
ended, and for running legs the larger of their spend so far and their allowance. If that
passes the ceiling the launch is refused; the check and the claim happen in one synchronous
step, so two launches never both take the last dollar. Running legs are never killed for
cost. A model with no known price launches with no allowance, and the wave then exits 2 with
``cost_exact: false``: a total that is only a floor is never reported as a clean run.
"""

from __future__ import annotations

import threading

from orchestrator.catalog import model_info
from orchestrator.catalog import prices as catalog_prices
from orchestrator.errors import Refusal
from orchestrator.estimate import estimate_text
from orchestrator.hookspecs import hookimpl

NAME = "cost_ceiling"
DEFAULT_RESERVATION = 4096  # output tokens assumed when neither budget nor ceiling is known
_LOCK = threading.Lock()  # hooks are synchronous; this also covers waves in threads


def ceiling_of(options: dict, config) -> float | None:
    value = options.get("max_cost")
    if value is None:
        value = config.plugin_config(NAME).get("max_usd")
    return None if value is None else float(value)


def prices(leg) -> tuple[float, float] | None:
    """(input, output) dollars per token, or None when the price is unknown."""
    return catalog_prices(leg.model)


def allowance(leg) -> float | None:
    """The most the leg's first request can cost, or None when its price is unknown."""
    price = prices(leg)
    if price is None:
        return None
    p_in, p_out = price
    leg_tokens = leg.options.get("leg_tokens") or leg.plugin_config("turn_budget").get("tokens")
    if leg_tokens:
        return int(leg_tokens) * max(p_in, p_out)
    declared = leg.config.providers.get(leg.model.provider) if leg.model.declared else None
    ceiling = model_info(leg.model, declared).max_output_tokens
    budget = leg.options.get("output_budget") or leg.plugin_config("output_budget").get("tokens")
    out = min(int(budget), ceiling) if budget and ceiling else (budget or ceiling
                                                                 or DEFAULT_RESERVATION)
    tokens_in = estimate_text(leg.briefing, leg.model.litellm_model) + 64  # + framing
    return tokens_in * p_in + int(out) * p_out


def committed(claims: dict) -> float:
    """Known spend of ended launches plus, for running ones, max(spend so far, allowance)."""
    total = 0.0
    for claim, ctx in claims.values():
        spent = ctx.record.cost_usd or 0.0
        running = ctx.record.ended_at is None
        total += max(spent, claim) if running else spent
    return total


@hookimpl(trylast=True)
def before_launch(wave, leg):
    ceiling = ceiling_of(wave.options, wave.config)
    if ceiling is None:
        return
    claims = wave.state.setdefault(NAME, {})
    with _LOCK:
        need = allowance(leg)
        held = committed(claims)
        if need is not None and held + need > ceiling:  # the wave records and prints it
            raise Refusal("COST_CEILING",
                          f"{leg.model.name} could cost up to ${need:.4f} and ${held:.4f} of "
                          f"the ${ceiling:g} ceiling is spent or claimed; raise --max-cost "
                          "or run fewer legs")
        claims[leg.leg_id] = (need or 0.0, leg)
        leg.set("cost_allowance", None if need is None else round(need, 6))


@hookimpl(trylast=True)
def wave_end(wave):
    ceiling = ceiling_of(wave.options, wave.config)
    if ceiling is None:
        return
    ran = [*wave.legs, *([wave.chair] if wave.chair else [])]
    unknown = [leg.leg_id for leg in ran if leg.record.cost_usd is None]
    if unknown:
        wave.notice(f"cost ceiling ${ceiling:g}: the cost of {len(unknown)} leg(s) is unknown "
                    f"({', '.join(unknown)}), so the wave's total is only a floor; declare "
                    "prices with `orch provider add ... --input-cost-per-mtok ...`")
