"""Honest output reservations: ``max_tokens`` is what a gateway holds against your credit.

Each request reserves ``max_tokens`` before the model runs, and some gateways refuse a
request whose reservation passes the remaining credit even when the answer would be short.
With an output budget (``--output-budget N``, or ``plugin_config.output_budget.tokens``) every
request reserves ``min(budget, the model's real output ceiling)`` (litellm's metadata or the
provider's declared ``max_output_tokens``), or the budget itself where no ceiling is known.
Without one, requests go out as before and nothing is said.

``--thinking LEVEL`` becomes litellm's ``reasoning_effort``; refused before sending when the
model does not declare reasoning support (``VARIANT_UNDECLARED``). Where the route spends a
thinking budget on top of the answer's reservation (Anthropic extended thinking) the budget is
sent explicitly as ``thinking`` and the reservation grows by it, refused when the sum would
pass the output budget (``VARIANT_OVER_BUDGET``).
"""

from __future__ import annotations

from orchestrator.catalog import model_info
from orchestrator.errors import Refusal
from orchestrator.hookspecs import hookimpl

NAME = "output_budget"
LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
THINKING_ROUTES = ("anthropic", "bedrock", "vertex_ai")  # Claude's extended thinking


def output_budget(leg) -> int | None:
    value = leg.options.get("output_budget") or leg.plugin_config(NAME).get("tokens")
    return int(value) if value else None


def thinking_level(leg) -> str | None:
    return leg.options.get("thinking") or leg.plugin_config(NAME).get("thinking")


def info_of(leg):
    declared = leg.config.providers.get(leg.model.provider) if leg.model.declared else None
    return model_info(leg.model, declared)


def route_thinking_budget(model, level: str) -> int | None:
    """Tokens of thinking the route adds for ``level`` (Anthropic extended thinking), or None
    where the effort goes to the provider as is (OpenAI-style ``reasoning_effort``)."""
    if model.declared:
        return None  # an OpenAI-compatible endpoint takes reasoning_effort as it is
    from orchestrator.runtime import litellm

    try:
        name, provider, *_ = litellm().get_llm_provider(model.litellm_model)
        if provider not in THINKING_ROUTES or "claude" not in name:
            return None
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        mapped = AnthropicConfig.map_reasoning_effort(level, name, provider)
    except Exception:
        return None
    budget = (mapped or {}).get("budget_tokens")
    return int(budget) if budget else None


@hookimpl(trylast=True)
def before_request(leg, request):
    budget, level = output_budget(leg), thinking_level(leg)
    if budget is None and level is None:
        return None
    info = info_of(leg)
    if level is not None and not info.supports_reasoning:
        raise Refusal("VARIANT_UNDECLARED",
                      f"{leg.model.name} does not declare reasoning effort support, so "
                      f"--thinking {level} was not sent; drop --thinking, or declare it "
                      "(supports_reasoning: true in the provider's config)")
    params = dict(request.params)
    ceiling = info.max_output_tokens
    reserve = None
    if budget is not None:
        reserve = min(budget, ceiling) if ceiling else budget
        if reserve < budget:
            leg.notice(f"output budget {budget} capped at {leg.model.name}'s output ceiling "
                       f"{ceiling}")
        asked = params.pop("max_completion_tokens", None) or params.get("max_tokens")
        reserve = min(reserve, int(asked)) if asked else reserve  # a variant's smaller cap
        params["max_tokens"] = reserve
    if level is not None:
        thinking = route_thinking_budget(leg.model, level) if level != "none" else None
        if thinking is None:
            params["reasoning_effort"] = level
        else:
            if budget is not None:
                total = reserve + thinking
                if total > budget:
                    raise Refusal(
                        "VARIANT_OVER_BUDGET",
                        f"{leg.model.name}: --thinking {level} adds a {thinking}-token "
                        f"thinking budget on top of the {reserve}-token reservation "
                        f"({total} > output budget {budget}); raise --output-budget to "
                        f"{total} or lower --thinking")
                params["max_tokens"] = min(total, ceiling) if ceiling else total
            params["thinking"] = {"type": "enabled", "budget_tokens": thinking}
            params.pop("reasoning_effort", None)
    leg.set("output_reservation", params.get("max_tokens"))
    return request.evolve(params=params)
