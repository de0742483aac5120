"""The context window: never send a request that cannot answer, never let one be rejected.

- **Starvation.** When the window leaves no room beyond the answer's reserve (window -
  estimate - reserve <= 1; the reserve is proportional to the window,
  :func:`orchestrator.models.reserve.answer_reserve`) the request is refused, never sent, with one line:
  ``output starvation: refused (<model>): context estimate E, window W, output budget B``.
- **Overrun.** When estimate + reservation passes the window, the reservation is *fitted*
  instead of letting the provider reject the whole request. The estimate anchors on the
  prompt size the provider reported for the last answer (``usage.input_tokens``) plus an
  inflated estimate (x2.0) of everything after it; the fit is window - estimate - reserve,
  never above what was asked, and a thinking budget sharing the ceiling is lowered with it.
  Below a 1,024-token answer it refuses (``OUTPUT_OVERRUN``) - but only with an anchor: on
  its own guess alone it fits when there is room and otherwise stays silent.
- **OUTPUT_LENGTH.** An answer that stopped at the reservation with no text ends the leg
  ``error`` (``OUTPUT_LENGTH: ...``); with text, the leg completes ``truncated: true`` and a
  Note says so. Checked at ``step_end``, after every ``after_response`` plugin had its say
  and the response was billed and logged.

Settings: ``plugin_config.context_guard`` ``margin`` (a fixed reserve instead of the
proportional one), ``inflation``, ``min_answer``.
"""

from __future__ import annotations

import math

from orchestrator.errors import LegError, Refusal
from orchestrator.hookspecs import hookimpl
from orchestrator.models.catalog import model_info
from orchestrator.models.estimate import estimate_messages
from orchestrator.models.reserve import answer_reserve

NAME = "context_guard"
CONFIG_SCHEMA = {"type": "object", "properties": {  # orchestrator.plugin_host.config_check
    "margin": {"type": "integer", "minimum": 0},
    "inflation": {"type": "number", "minimum": 1},
    "min_answer": {"type": "integer", "minimum": 1}}}
INFLATION = 2.0
MIN_ANSWER = 1024
MIN_THINKING = 1024  # Anthropic's smallest thinking budget: below it, thinking is dropped
# Asked-for budgets that lean on the window: with one set and no window, the leg is told.
BUDGET_OPTIONS = ("output_budget", "leg_tokens")
BUDGET_CONFIG = (("output_budget", "tokens"), ("turn_budget", "tokens"))


def _settings(leg, window: int) -> tuple[int, float, int]:
    cfg = leg.plugin_config(NAME)
    margin = cfg.get("margin")
    margin = answer_reserve(window) if margin is None else int(margin)
    return (margin, float(cfg.get("inflation", INFLATION)),
            int(cfg.get("min_answer", MIN_ANSWER)))


def _window(leg) -> int | None:
    declared = leg.config.providers.get(leg.model.provider) if leg.model.declared else None
    return model_info(leg.model, declared).context_window


def _reservation(params: dict) -> int | None:
    value = params.get("max_tokens") or params.get("max_completion_tokens")
    return int(value) if value else None


def _thinking(params: dict) -> int | None:
    thinking = params.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        return int(thinking.get("budget_tokens") or 0) or None
    return None


def context_estimate(leg, request, inflation: float) -> tuple[int, int | None]:
    """(estimate, anchor): the provider's last reported prompt size plus an inflated
    estimate of what came after it, or (own estimate, None) before any answer."""
    model = leg.model.litellm_model
    anchor = leg.state.get(NAME, {}).get("anchor")
    if anchor:
        reported, prefix = anchor
        n = len(prefix)
        if len(request.messages) >= n and request.messages[:n] == prefix:
            tail = estimate_messages(request.messages[n:], model=model)
            return reported + math.ceil(inflation * tail), reported
    return estimate_messages(request.messages, request.tools, model=model), None


@hookimpl(wrapper=True, trylast=True)
def before_request(leg, request):
    """A wrapper: it sees the request after every other plugin changed it."""
    final = yield
    return guard(leg, final)


def guard(leg, request):
    window = _window(leg)
    if not window:
        budgets = [k for k in BUDGET_OPTIONS if leg.options.get(k)]
        if budgets or any(leg.plugin_config(p).get(k) for p, k in BUDGET_CONFIG):
            leg.notice(f"context guard: the context window of {leg.model.name} is unknown (no "
                       "catalogue, provider list or config says it), so requests cannot be "
                       f"checked against it; set providers.{leg.model.provider}.context_window "
                       "in config.json")
        return None  # no known window: nothing to guard
    margin, inflation, min_answer = _settings(leg, window)
    estimate, anchor = context_estimate(leg, request, inflation)
    budget = _reservation(request.params)
    thinking = _thinking(request.params)
    model = leg.model.name
    if window - estimate - margin <= 1:
        line = (f"output starvation: refused ({model}): context estimate {estimate}, "
                f"window {window}, output budget {budget if budget else 'unset'}")
        leg.notice(line)
        leg.set("output_starvation", {"step": request.step, "estimate": estimate,
                                      "window": window, "output_budget": budget})
        raise Refusal("OUTPUT_STARVATION", line.removeprefix("output starvation: "))
    if budget is None or estimate + budget <= window:
        return None
    fit = min(budget, window - estimate - margin)
    basis = f" (anchored on {anchor} reported)" if anchor else " (estimated)"
    if fit < min_answer:
        if anchor is None:
            return None  # never refuse on its own guess: the provider may still take it
        line = (f"output overrun: refused ({model}): room for {fit} tokens is below the "
                f"{min_answer}-token minimum answer; window {window}, context estimate "
                f"{estimate}{basis}, output budget {budget}"
                + (f", thinking budget {thinking}" if thinking else ""))
        leg.notice(line)
        raise Refusal("OUTPUT_OVERRUN", line.removeprefix("output overrun: "))
    params = dict(request.params)
    params.pop("max_completion_tokens", None)
    params["max_tokens"] = fit
    thinking_fit = None
    if thinking:
        thinking_fit = min(thinking, max(0, fit - min_answer))
        if thinking_fit < MIN_THINKING:
            params.pop("thinking", None)
            thinking_fit = 0
        else:
            params["thinking"] = {**params["thinking"], "budget_tokens": thinking_fit}
    _note_fit(leg, request.step, window, estimate, basis, budget, fit, thinking, thinking_fit)
    return request.evolve(params=params)


def _note_fit(leg, step, window, estimate, basis, budget, fit, thinking, thinking_fit) -> None:
    state = leg.state.setdefault(NAME, {})
    fits = state.setdefault("fits", [])
    fits.append({"step": step, "window": window, "estimate": estimate, "output_budget": budget,
                 "fit": fit, "thinking_budget": thinking, "thinking_fit": thinking_fit})
    leg.set("output_fits", fits)
    if state.get("noticed_step") == step:
        return  # one notice per leg step
    state["noticed_step"] = step
    think = (f", thinking budget {thinking} -> {thinking_fit or 'dropped'}" if thinking else "")
    leg.notice(f"output overrun: fitted ({leg.model.name}) at step {step}: window {window}, "
               f"context estimate {estimate}{basis}, output budget {budget} -> {fit}{think}")


@hookimpl(trylast=True)
def after_response(leg, request, response):
    """Anchor the next estimate on what the provider says this prompt was."""
    if response.usage.input_tokens > 0:
        leg.state.setdefault(NAME, {})["anchor"] = (response.usage.input_tokens,
                                                    list(request.messages))
    return None


@hookimpl(trylast=True)
def step_end(leg, step):
    response, request = step["response"], step["request"]
    if response.finish_reason != "length" or response.tool_calls:
        return
    budget = _reservation(request.params)
    in_force = f"{budget} tokens" if budget else "the provider's default"
    usage = response.usage
    if not (response.text or "").strip():
        raise LegError("OUTPUT_LENGTH",
                       f"{leg.model.name} stopped at the output reservation with no answer: "
                       f"{usage.reasoning_tokens} reasoning and {usage.output_tokens} output "
                       f"tokens against a budget of {in_force}; raise --output-budget or "
                       "lower --thinking")
    leg.set("truncated", True)
    leg.notice(f"answer truncated: {leg.model.name} stopped at the output reservation "
               f"({in_force}, {usage.output_tokens} output tokens) at step {step['step']}")
