"""The wave cost ceiling: ``--max-cost USD`` (or ``plugin_config.cost_ceiling.max_usd``).

The ceiling is a running account (docs/budgets.md):

- **claim** - before each request is sent, its worst case (its claimed input at the input
  price plus the output reservation at the output price) is claimed against the ceiling,
  together with the known spend of every leg and the open claims of the others. The claimed
  input is anchored on the prompt size the provider reported for the leg's last answer plus
  the estimate of what was added since (the whole estimate before any answer), the estimated
  part times a safety factor: the most the provider counted over orch's estimate in any
  answer of the wave for that model (at least 1, at most MAX_FACTOR);
- **settle** - when the response arrives its real cost is on the leg's record (the engine
  bills it before any hook runs) and the claim is dropped; a leg holds one claim at a time,
  so a request that got no answer (a step resent in text mode, ``request.attempt`` 2) has its
  claim replaced by the next one, never added to it;
- a request that could pass the ceiling is not sent: the leg gets one tool-less final request
  with its output reservation lowered to what is left (at least 256 tokens), otherwise it
  ends ``refused`` with ``BUDGET_CEILING``;
- before each launch (every leg, a retry's legs, the chair) the launch's first request is
  claimed the same way; one that does not fit is refused (``COST_CEILING``).

Every check and its claim happen in one synchronous step under a lock, so two legs never both
take the last dollar. The bound that holds: when the last claim was granted, known spend plus
every open claim was within the ceiling, and no request was sent after it; so the final spend
passes the ceiling by at most what the requests then in flight - at most one per leg, C for C
legs at once - cost beyond their claims. A request costs beyond its claim only by input the
provider counted over the claimed input (or output past the ``max_tokens`` it was sent with),
so: by at most C requests' input cost (docs/budgets.md; the property test on the wire in
tests/test_budget_ceiling.py). A model with no known price claims nothing; the wave then exits
2 with ``cost_exact: false``. Known spend past the ceiling (an estimate ran low) is a Notice,
and the wave document's ``over_ceiling_usd`` makes the wave exit 2.
"""

from __future__ import annotations

import json
import math
import threading

from orchestrator.errors import PreflightError, Refusal
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

NAME = "cost_ceiling"
DEFAULT_RESERVATION = 4096  # output tokens assumed (and sent) when no ceiling is known
MIN_FINAL = 256  # the smallest reservation a final request under the ceiling is sent with
MAX_FACTOR = 10.0  # the most a provider's prompt count may raise the claims' safety factor
_LOCK = threading.Lock()  # hooks are synchronous; this also covers waves in threads
FINAL_REQUEST = (
    "The cost ceiling for this task is nearly spent and no tools are available any more. "
    "Reply now, without tools, with: what you found, the state of the work, and what "
    "remains to be done."
)


@hookimpl
def register_options(command):
    """--max-cost on orch fanout, orch council run and orch bench (and bench resume), and
    ``max_cost`` on the MCP tools: a ceiling over the whole run (``run_ceiling``). Light:
    ``orch fanout --help`` imports this module, so the catalog is imported in the hooks."""
    if command not in ("fanout", "council_run", "bench"):
        return []
    return [Option("max-cost", type="float", min=0, metavar="USD", config="max_usd",
                   run_ceiling=True,
                   help=("A cost ceiling for the whole bench (model trials)."
                         if command == "bench" else
                         "Wave cost ceiling: launches that could pass it are refused (exit 2)."),
                   mcp_help=("A spending ceiling in US dollars for this whole call. Before "
                             "each model request orch claims its worst-case cost; a request "
                             "that could pass the ceiling is never sent and is reported as "
                             "refused. Omit for no ceiling. Needs priced models: with an "
                             "unknown price the result says the cost is inexact."))]


def ceiling_of(options: dict, config) -> float | None:
    value = options.get("max_cost")
    if value is None:
        value = config.plugin_config(NAME).get("max_usd")
    return None if value is None else float(value)


def prices(leg) -> tuple[float, float] | None:
    """(input, output) dollars per token, or None when the price is unknown."""
    from orchestrator.models.catalog import prices as catalog_prices

    return catalog_prices(leg.model)


def _ceiling_tokens(leg) -> int | None:
    from orchestrator.models.catalog import model_info

    declared = leg.config.providers.get(leg.model.provider) if leg.model.declared else None
    return model_info(leg.model, declared).max_output_tokens


def reservation(leg, params: dict | None = None) -> int:
    """Output tokens a request may produce: what it asks for (``max_tokens``), else the
    output budget or the model's ceiling, else DEFAULT_RESERVATION."""
    asked = (params or {}).get("max_tokens") or (params or {}).get("max_completion_tokens")
    if asked:
        return int(asked)
    ceiling = _ceiling_tokens(leg)
    budget = leg.options.get("output_budget") or leg.plugin_config("output_budget").get("tokens")
    if budget and ceiling:
        return min(int(budget), ceiling)
    return int(budget or ceiling or DEFAULT_RESERVATION)


def allowance(leg) -> float | None:
    """The most the leg's first request can cost, or None when its price is unknown."""
    from orchestrator.models.estimate import estimate_text

    price = prices(leg)
    if price is None:
        return None
    tokens_in = estimate_text(leg.briefing, leg.model.litellm_model) + 64  # + framing
    return tokens_in * price[0] + reservation(leg) * price[1]


def input_tokens(leg, messages: list, tools: list | None) -> int:
    """The estimate of a request's input. A leg's conversation only grows, so the messages
    already counted (the same objects as last time) are not counted again: the claim costs
    the new turns, not the whole history, at every step."""
    from orchestrator.models.estimate import REPLY_PRIMING, estimate_message, estimate_text

    model = leg.model.litellm_model
    memo = leg.state.setdefault(f"{NAME}.estimate", {"n": 0, "last": None, "tokens": 0})
    n = memo["n"]
    if not (0 < n <= len(messages) and messages[n - 1] is memo["last"]):
        n, memo["tokens"] = 0, 0
    memo["tokens"] += sum(estimate_message(m, model) for m in messages[n:])
    memo["n"], memo["last"] = len(messages), messages[-1] if messages else None
    tools_tokens = estimate_text(json.dumps(tools), model) if tools else 0
    return memo["tokens"] + (REPLY_PRIMING if messages else 0) + tools_tokens


def claimed_input(leg, messages: list, tools: list | None) -> int:
    """The input tokens a request is claimed for: anchored on the prompt size the provider
    reported for this leg's last answer plus the estimate of what was added since, or the
    whole estimate before any answer; the estimated part times the model's safety factor
    (what the provider counted over orch's estimate, learned from every answer in the wave).
    The request as sent is remembered, for :func:`after_response` to learn from."""
    estimate = input_tokens(leg, messages, tools)
    factor = leg.state.get(NAME, {}).get("factors", {}).get(leg.model.name, 1.0)
    claim = math.ceil(estimate * factor)
    anchor = leg.state.get(f"{NAME}.anchor")
    if anchor is not None:
        reported, estimated, n, last = anchor
        if 0 < n <= len(messages) and messages[n - 1] is last and estimate >= estimated:
            claim = reported + math.ceil((estimate - estimated) * factor)
    leg.state[f"{NAME}.sent"] = (estimate, len(messages), messages[-1] if messages else None)
    return claim


def worst_case(leg, request) -> float | None:
    """The most ``request`` can cost: its claimed input plus its output reservation."""
    price = prices(leg)
    if price is None:
        return None
    tokens_in = claimed_input(leg, request.messages, request.tools)
    return tokens_in * price[0] + reservation(leg, request.params) * price[1]


def learn(leg, response) -> None:
    """After an answer: the provider's own prompt size anchors the leg's next claim, and
    its ratio to orch's estimate raises the model's safety factor (never below 1, at most
    MAX_FACTOR). Usage that was clamped (``suspect``) teaches nothing."""
    sent = leg.state.pop(f"{NAME}.sent", None)
    reported = response.usage.input_tokens
    if sent is None or response.usage_note is not None or reported <= 0:
        return
    estimate, n, last = sent
    leg.state[f"{NAME}.anchor"] = (reported, estimate, n, last)
    account = leg.state.get(NAME)
    if account is not None and estimate > 0:
        factors = account.setdefault("factors", {})
        ratio = min(MAX_FACTOR, reported / estimate)
        factors[leg.model.name] = max(factors.get(leg.model.name, 1.0), ratio)


def committed(account: dict, exclude: str | None = None) -> float:
    """Known spend of every launch plus the open claims of running ones (but ``exclude``'s)."""
    total = 0.0
    for leg_id, ctx in account["legs"].items():
        total += ctx.record.cost_usd or 0.0
        if ctx.record.ended_at is None and leg_id != exclude:
            total += account["claims"].get(leg_id, 0.0)
    return total


def _account(holder: dict) -> dict:
    return holder.setdefault(NAME, {"legs": {}, "claims": {}})


def _claim(account: dict, leg, amount: float | None) -> None:
    account["legs"][leg.leg_id] = leg
    if amount is None:
        account["claims"].pop(leg.leg_id, None)
    else:
        account["claims"][leg.leg_id] = amount


@hookimpl(trylast=True)
def wave_start(wave):
    """A ceiling from config is written into the wave's options, so wave.json says which
    ceiling applied and the exit code can hold the wave to it. A ceiling that is no number
    of dollars (nan, inf, negative, text) stops the wave: it would hold nothing."""
    given = wave.options.get("max_cost")
    where = "--max-cost"
    if given is None:
        given = wave.config.plugin_config(NAME).get("max_usd")
        where = "plugin_config.cost_ceiling.max_usd"
    if given is None:
        return
    try:
        value = float(given)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise PreflightError(f"{where} {given!r} is not a number of dollars; give a finite "
                             "amount >= 0, e.g. --max-cost 0.50")
    wave.options["max_cost"] = value


@hookimpl(trylast=True)
def before_launch(wave, leg):
    ceiling = ceiling_of(wave.options, wave.config)
    if ceiling is None:
        return
    account = _account(wave.state)
    leg.state[NAME] = account  # the leg's requests claim against the same account
    with _LOCK:
        need = allowance(leg)
        held = committed(account)
        if need is not None and held + need > ceiling:  # the wave records and prints it
            raise Refusal("COST_CEILING",
                          f"{leg.model.name} could cost up to ${need:.4f} and ${held:.4f} of "
                          f"the ${ceiling:g} ceiling is spent or claimed; raise --max-cost "
                          "or run fewer legs")
        _claim(account, leg, need)
        leg.set("cost_allowance", None if need is None else round(need, 6))


@hookimpl(wrapper=True, tryfirst=True)
def before_request(leg, request):
    """Outermost wrapper: claims the request that is really sent, after every change."""
    request = yield
    ceiling = ceiling_of(leg.options, leg.config)
    if ceiling is None:
        return request
    account = _account(leg.state)
    params = request.params
    if not (params.get("max_tokens") or params.get("max_completion_tokens")) \
            and _ceiling_tokens(leg) is None:  # the claim must bound what can come back
        request = request.evolve(params={**params, "max_tokens": reservation(leg)})
    with _LOCK:
        held = committed(account, exclude=leg.leg_id)
        need = worst_case(leg, request)
        if need is None or held + need <= ceiling:
            _claim(account, leg, need)
            return request
        final = request
        if request.tools:
            final = request.evolve(tools=None, messages=[
                *request.messages, {"role": "user", "content": FINAL_REQUEST}])
        final = _fitted(leg, final, ceiling - held)
        if final is None:
            _claim(account, leg, None)
            raise Refusal("BUDGET_CEILING",
                          f"{leg.model.name}'s next request could cost up to ${need:.4f} and "
                          f"${held:.4f} of the ${ceiling:g} ceiling is spent or claimed (this "
                          f"leg spent ${leg.record.cost_usd or 0.0:.4f}); nothing was sent; "
                          "raise --max-cost")
        _claim(account, leg, worst_case(leg, final))
        leg.set("stopped", "cost_ceiling")
        leg.set("finished", False)
        leg.notice(f"cost ceiling: the next request could cost up to ${need:.4f} with "
                   f"${held:.4f} of ${ceiling:g} spent or claimed; asked {leg.model.name} for "
                   f"its result without tools at step {request.step}, reserving "
                   f"{final.params['max_tokens']} output tokens")
        return final


def _fitted(leg, request, left: float):
    """``request`` (tool-less) with its output reservation lowered to what ``left`` dollars
    cover, or None when that is below MIN_FINAL tokens."""
    p_in, p_out = prices(leg)
    tokens_in = claimed_input(leg, request.messages, None)
    affordable = int((left - tokens_in * p_in) / p_out) if p_out > 0 else reservation(
        leg, request.params)
    out = min(reservation(leg, request.params), affordable)
    if out < MIN_FINAL:
        return None
    params = {k: v for k, v in request.params.items() if k != "max_completion_tokens"}
    thinking = params.get("thinking")
    if isinstance(thinking, dict) and int(thinking.get("budget_tokens") or 0) > out - MIN_FINAL:
        params.pop("thinking")  # no room to think: the answer gets what is left
    return request.evolve(params={**params, "max_tokens": out})


@hookimpl(wrapper=True, tryfirst=True)
def after_response(leg, request, response):
    """Settle: the engine put the response's real cost on the record before any
    after_response hook ran, so the claim is dropped first, whatever a later hook does."""
    account = leg.state.get(NAME)
    if account is not None:
        with _LOCK:
            account["claims"].pop(leg.leg_id, None)
            learn(leg, response)
    return (yield)


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
    spent = sum(leg.record.cost_usd or 0.0 for leg in ran)
    if spent > ceiling + 1e-9:
        wave.notice(f"cost ceiling ${ceiling:g} passed: the wave's known spend is "
                    f"${spent:.4f}, ${spent - ceiling:.4f} over (an estimate ran low); "
                    "the wave exits 2")


@hookimpl(trylast=True)
def wave_report(doc):
    """What the ceiling makes of the wave's exit code (the engine knows no ceiling): a total
    that is only a floor (some leg's cost unknown) or known spend past it makes the wave exit
    2; ``over_ceiling_usd`` says by how much (None within it, or with no ceiling). Read from
    the document alone, so ``orch status`` rebuilding a killed wave says the same."""
    ceiling = (doc.get("options") or {}).get("max_cost")
    spent = doc.get("cost_usd") or 0.0
    over = None
    if ceiling is not None and spent > float(ceiling) + 1e-9:
        over = round(spent - float(ceiling), 8)
    reasons = []
    if ceiling is not None and not doc.get("cost_exact", True):
        legs = [*(doc.get("legs") or []), *([doc["chair"]] if doc.get("chair") else [])]
        unknown = sum(1 for leg in legs if leg.get("cost_usd") is None)
        reasons.append(f"cost ceiling ${ceiling:g} set but {unknown} leg(s)' cost is unknown: "
                       f"the total ${doc.get('cost_usd', 0):.4f} is a floor")
    if over:
        reasons.append(f"known spend ${doc.get('cost_usd', 0):.4f} passed the cost ceiling "
                       f"${ceiling:g} by ${over:.4f}")
    return {"degraded": reasons, "fields": {"over_ceiling_usd": over}}
