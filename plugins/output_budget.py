"""Honest output reservations: ``max_tokens`` is what a gateway holds against your credit.

Each request reserves ``max_tokens`` before the model runs, and some gateways refuse a
request whose reservation passes the remaining credit even when the answer would be short.
With an output budget (``--output-budget N``, or ``plugin_config.output_budget.tokens``) every
request reserves ``min(budget, the model's real output ceiling)`` (litellm's metadata or the
provider's declared ``max_output_tokens``), or the budget itself where no ceiling is known.
Without one, requests go out as before and nothing is said.

``--thinking LEVEL`` becomes litellm's ``reasoning_effort``; refused when the model does not
declare reasoning support (``VARIANT_UNDECLARED``); ``--thinking none`` asks for nothing and
is a no-op on any model. Where the route spends a thinking budget inside ``max_tokens``
(Anthropic extended thinking) the budget is sent explicitly as ``thinking`` and carved out of
the reservation: the answer keeps ``reservation - thinking``, at least 1,024 tokens, else
``VARIANT_OVER_BUDGET``. Every refusal is checked in pre-flight (``wave_start``), for every
leg and the chair, before any spend.
"""

from __future__ import annotations

from types import SimpleNamespace

from orchestrator.errors import PreflightError, Refusal
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

NAME = "output_budget"
# plugin_config.output_budget, checked before any request (orchestrator.plugin_host.config_check):
# tokens 0 or below would be sent as max_tokens, or silently mean no budget.
CONFIG_SCHEMA = {"type": "object", "properties": {
    "tokens": {"type": "integer", "minimum": 1}, "thinking": {"type": "string"}}}
LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
THINKING_ROUTES = ("anthropic", "bedrock", "vertex_ai")  # Claude's extended thinking
MIN_ANSWER = 1024  # tokens the answer keeps when thinking is carved out of the reservation


@hookimpl
def register_options(command):
    """--output-budget and --thinking on orch fanout / council run (CLI only: the MCP tools
    offer max_cost alone)."""
    return [Option("output-budget", type="int", min=1, metavar="TOKENS", config="tokens",
                   mcp=False,
                   help="Reserve at most this many output tokens per request (max_tokens)."),
            Option("thinking", type="choice", choices=LEVELS, config="thinking", mcp=False,
                   inert=("none",),
                   help="Reasoning effort; refused for models that do not declare it.")]


def output_budget(leg) -> int | None:
    value = leg.options.get("output_budget") or leg.plugin_config(NAME).get("tokens")
    return int(value) if value else None


def thinking_level(leg) -> str | None:
    return leg.options.get("thinking") or leg.plugin_config(NAME).get("thinking")


def info_of(leg):
    declared = leg.config.providers.get(leg.model.provider) if leg.model.declared else None
    from orchestrator.models.catalog import (
        model_info,  # not at import: `orch fanout --help` loads this
    )

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


def plan(leg, asked: int | None = None) -> dict | None:
    """The output params every request of ``leg`` carries, or None when no budget or
    thinking was asked for; raises the refusal a request would get. Pure of the request, so
    the same check runs in pre-flight for every leg before any spend (``wave_start``).
    ``asked`` is a smaller ``max_tokens`` a variant already put on the request."""
    budget, level = output_budget(leg), thinking_level(leg)
    sampling = getattr(leg.model, "sampling", None) or {}
    asked = asked or sampling.get("max_completion_tokens") or sampling.get("max_tokens")
    asked = int(asked) if asked else None
    if level == "none":
        level = None  # no thinking asked for: nothing to send, on any model
    if budget is None and level is None:
        return None
    info = info_of(leg)
    if level is not None and not info.supports_reasoning:
        raise Refusal("VARIANT_UNDECLARED",
                      f"{leg.model.name} does not declare reasoning effort support, so "
                      f"--thinking {level} was not sent; drop --thinking, or declare it "
                      "(supports_reasoning: true in the provider's config)")
    out: dict = {}
    ceiling = info.max_output_tokens
    reserve = None
    if budget is not None:
        reserve = min(budget, ceiling) if ceiling else budget
        reserve = min(reserve, asked) if asked else reserve
        out["max_tokens"] = reserve
    if level is None:
        return out
    thinking = route_thinking_budget(leg.model, level)
    if thinking is None:
        out["reasoning_effort"] = level
        return out
    total = reserve if reserve is not None else (asked or ceiling)
    if total is not None:
        answer = total - thinking  # thinking comes out of the reservation, not on top
        if answer < MIN_ANSWER:
            raise Refusal(
                "VARIANT_OVER_BUDGET",
                f"{leg.model.name}: --thinking {level} takes a {thinking}-token thinking "
                f"budget out of the {total}-token output reservation, leaving {answer} for "
                f"the answer (at least {MIN_ANSWER} needed); raise --output-budget to "
                f"{thinking + MIN_ANSWER} or lower --thinking")
        out["max_tokens"] = total
    out["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    return out


@hookimpl(trylast=True)
def wave_start(wave):
    """Pre-flight: every leg's (and the chair's, and a council's later stages') budget and
    thinking refusal before any spend; one refused leg stops the whole wave with every
    reason listed."""
    probes = [*wave.legs]
    later = [getattr(wave, "chair_model", None), *getattr(wave, "later_models", [])]
    probes += [SimpleNamespace(model=model, options=wave.options, config=wave.config,
                               plugin_config=wave.config.plugin_config)
               for model in later if model is not None]
    reasons = []
    for leg in probes:
        try:
            plan(leg)
        except Refusal as refusal:
            if refusal.reason not in reasons:
                reasons.append(refusal.reason)
        except (TypeError, ValueError) as exc:  # a setting that is no number holds nothing
            raise PreflightError(f"plugin_config.{NAME}: {exc}; give tokens as a whole "
                                 "number") from None
    if reasons:
        raise PreflightError(f"refused before any spend: {'; '.join(reasons)}")


@hookimpl(trylast=True)
def before_request(leg, request):
    params = dict(request.params)
    asked = params.get("max_completion_tokens") or params.get("max_tokens")
    out = plan(leg, int(asked) if asked else None)
    if out is None:
        return None
    if "max_tokens" in out:
        params.pop("max_completion_tokens", None)  # one reservation, under one name
    if out.get("max_tokens") and out["max_tokens"] < (output_budget(leg) or 0):
        ceiling = info_of(leg).max_output_tokens
        if ceiling and ceiling < output_budget(leg):
            leg.notice(f"output budget {output_budget(leg)} capped at {leg.model.name}'s "
                       f"output ceiling {ceiling}")
    params.update(out)
    if "thinking" in out:
        params.pop("reasoning_effort", None)
    leg.set("output_reservation", params.get("max_tokens"))
    return request.evolve(params=params)
