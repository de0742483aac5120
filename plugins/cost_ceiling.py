"""The cost ceiling: ``--max-cost USD`` (or ``plugin_config.cost_ceiling.max_usd``).

The money is the run's account (``orchestrator/account``: the core's, opened from the
ledger, shared by every wave of the run, holding each leg's spend and each running leg's
open claim); this plugin is the ceiling's policy over it (docs/budgets.md):

- **claim** - before each request is sent, its worst case (``orchestrator.account.claims``:
  the claimed input, anchored on the provider's last reported prompt and raised by a safety
  factor learned from its counts, at the input price, plus the output reservation at the
  output price) is checked against the ceiling together with everything the run holds: its
  record before this process, the spend of every leg, the open claims of the others;
- **settle** - the engine bills the answer on the leg's record before any hook runs and the
  account drops the claim; an answer whose cost could not be read from its usage keeps its
  claim as spent (unknown is not zero), so the ceiling stops a leg whose provider reports
  nothing;
- a request that could pass the ceiling is not sent: the leg gets one tool-less final request
  with its output reservation lowered to what is left (at least 256 tokens), otherwise it
  ends ``refused`` with ``BUDGET_CEILING``;
- before each launch (every leg, a retry's legs, the chair) its first request, as prepared
  (system prompt and tool schemas included), is claimed the same way; one that does not fit
  is refused (``COST_CEILING``) — or, when only the others' open claims are in the way, it
  is :class:`~orchestrator.errors.Deferred`: a run whose account waits (a bench) launches it
  once enough of them settle.

Every check and its claim happen in one synchronous step under the account's lock, so two
legs never both take the last dollar. The bound that holds: when the last claim was granted,
everything held plus every open claim was within the ceiling, and no request was sent after
it; so the final spend passes the ceiling by at most what the requests then in flight - at
most one per leg, C for C legs at once - cost beyond their claims, i.e. by at most C
requests' input cost (the property test on the wire in tests/test_budget_ceiling.py). A
model with no known price claims nothing; the wave then exits 2 with ``cost_exact: false``.
Known spend past the ceiling (an estimate ran low) is a Notice, and the wave document's
``over_ceiling_usd`` makes the wave exit 2.
"""

from __future__ import annotations

import math

from orchestrator.account import claims
from orchestrator.errors import Deferred, PreflightError, Refusal
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

NAME = "cost_ceiling"
KEY = "max_cost"
DEFAULT_RESERVATION = claims.DEFAULT_RESERVATION
MIN_FINAL = 256  # the smallest reservation a final request under the ceiling is sent with
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


def ceiling_of(options: dict, config, account=None) -> float | None:
    """The ceiling in force: the run's (its account's, whole) when the run has one, else the
    wave's option, else ``plugin_config.cost_ceiling.max_usd``."""
    if account is not None and KEY in account.ceilings:
        return account.ceilings[KEY]
    value = options.get(KEY)
    if value is None:
        value = config.plugin_config(NAME).get("max_usd")
    return None if value is None else float(value)


def _budget(leg) -> int | None:
    """The output budget a leg keeps (the output_budget plugin's), for a launch's claim."""
    budget = leg.options.get("output_budget") or leg.plugin_config("output_budget").get("tokens")
    return int(budget) if budget else None


def allowance(leg) -> float | None:
    """The most the leg's first request can cost: its prepared conversation (system prompt,
    briefing) and tool schemas, or the briefing alone when nothing was prepared; None when
    its price is unknown."""
    from orchestrator.models.estimate import estimate_text

    if leg.messages:
        tools = [t.schema() for t in leg.tools.values()] or None
        return leg.account.worst_case(leg, leg.messages, tools, dict(leg.model.sampling),
                                      budget=_budget(leg))
    price = claims.prices(leg)
    if price is None:
        return None
    tokens_in = estimate_text(leg.briefing, leg.model.litellm_model) + 64  # + framing
    return tokens_in * price[0] + claims.reservation(leg, None, _budget(leg)) * price[1]


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
    account = leg.account
    ceiling = ceiling_of(wave.options, wave.config, account)
    if ceiling is None or account is None:
        return
    with account.lock:
        need = allowance(leg)
        held = account.committed(exclude=leg.leg_id)
        if need is not None and held + need > ceiling:  # the wave records and prints it
            why = (f"{leg.model.name} could cost up to ${need:.4f} and ${held:.4f} of the "
                   f"${ceiling:g} ceiling is spent or claimed; raise --max-cost or run fewer "
                   "legs")
            if account.committed(exclude=leg.leg_id, claims_too=False) + need <= ceiling:
                raise Deferred("COST_CEILING", why)  # it fits once the others' claims settle
            raise Refusal("COST_CEILING", why)
        account.claim(leg, need)
        leg.set("cost_allowance", None if need is None else round(need, 6))


@hookimpl(wrapper=True, tryfirst=True)
def before_request(leg, request):
    """Outermost wrapper: checks the request that is really sent, after every change."""
    request = yield
    account = leg.account
    ceiling = ceiling_of(leg.options, leg.config, account)
    if ceiling is None or account is None:
        return request
    params = request.params
    if not (params.get("max_tokens") or params.get("max_completion_tokens")) \
            and claims.ceiling_tokens(leg) is None:  # the claim must bound what comes back
        request = request.evolve(params={**params, "max_tokens": claims.reservation(
            leg, None, _budget(leg))})
    with account.lock:
        held = account.committed(exclude=leg.leg_id)
        need = account.worst_case(leg, request.messages, request.tools, request.params)
        if need is None or held + need <= ceiling:
            account.claim(leg, need)
            return request
        final = request
        if request.tools:
            final = request.evolve(tools=None, messages=[
                *request.messages, {"role": "user", "content": FINAL_REQUEST}])
        final = _fitted(leg, final, ceiling - held)
        if final is None:
            account.claim(leg, None)
            raise Refusal("BUDGET_CEILING",
                          f"{leg.model.name}'s next request could cost up to ${need:.4f} and "
                          f"${held:.4f} of the ${ceiling:g} ceiling is spent or claimed (this "
                          f"leg spent ${account.spent(leg):.4f}); nothing was sent; "
                          "raise --max-cost")
        account.claim(leg, account.worst_case(leg, final.messages, None, final.params))
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
    out = claims.affordable(leg, request.messages, left, request.params,
                            leg.account.factor(leg))
    if out < MIN_FINAL:
        return None
    params = {k: v for k, v in request.params.items() if k != "max_completion_tokens"}
    thinking = params.get("thinking")
    if isinstance(thinking, dict) and int(thinking.get("budget_tokens") or 0) > out - MIN_FINAL:
        params.pop("thinking")  # no room to think: the answer gets what is left
    return request.evolve(params={**params, "max_tokens": out})


@hookimpl(trylast=True)
def wave_end(wave):
    ceiling = ceiling_of(wave.options, wave.config, wave.account)
    if ceiling is None:
        return
    ran = [*wave.legs, *([wave.chair] if wave.chair else [])]
    unknown = [leg.leg_id for leg in ran if leg.record.cost_usd is None
               and leg.record.cost_bound_usd is None]
    if unknown:
        wave.notice(f"cost ceiling ${ceiling:g}: the cost of {len(unknown)} leg(s) is unknown "
                    f"({', '.join(unknown)}), so the wave's total is only a floor; declare "
                    "prices with `orch provider add ... --input-cost-per-mtok ...`")
    spent = sum(leg.record.cost_usd or 0.0 for leg in ran)
    wave_ceiling = wave.options.get(KEY)  # what the run had left when this wave started
    if wave_ceiling is not None and spent > float(wave_ceiling) + 1e-9:
        wave.notice(f"cost ceiling ${float(wave_ceiling):g} passed: the wave's known spend is "
                    f"${spent:.4f}, ${spent - float(wave_ceiling):.4f} over (an estimate ran "
                    "low); the wave exits 2")


@hookimpl(trylast=True)
def wave_report(doc):
    """What the ceiling makes of the wave's exit code (the engine knows no ceiling): a total
    that is not exact (some leg's cost unknown, or some answer's cost not read from its
    usage) or known spend past it makes the wave exit 2; ``over_ceiling_usd`` says by how
    much (None within it, or with no ceiling). Read from the document alone, so ``orch
    status`` rebuilding a killed wave says the same."""
    ceiling = (doc.get("options") or {}).get(KEY)
    spent = doc.get("cost_usd") or 0.0
    over = None
    if ceiling is not None and spent > float(ceiling) + 1e-9:
        over = round(spent - float(ceiling), 8)
    reasons = []
    if ceiling is not None and not doc.get("cost_exact", True):
        legs = [*(doc.get("legs") or []), *([doc["chair"]] if doc.get("chair") else [])]
        unread = sum(int(leg.get("unread") or 0) for leg in legs)
        bound = doc.get("cost_bound_usd")
        if unread and bound is not None:
            reasons.append(f"cost ceiling ${ceiling:g} set but {unread} answer(s)' cost could "
                           f"not be read from their usage: the total is at most ${bound:.4f}, "
                           f"${doc.get('cost_usd', 0):.4f} of it read")
        else:
            unknown = sum(1 for leg in legs if leg.get("cost_usd") is None)
            reasons.append(f"cost ceiling ${ceiling:g} set but {unknown or unread} leg(s)' "
                           f"cost is unknown: the total ${doc.get('cost_usd', 0):.4f} is a floor")
    if over:
        reasons.append(f"known spend ${doc.get('cost_usd', 0):.4f} passed the cost ceiling "
                       f"${ceiling:g} by ${over:.4f}")
    return {"degraded": reasons, "fields": {"over_ceiling_usd": over}}
