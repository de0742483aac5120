"""Turn budgets: a leg with a token or time budget never ends empty-handed.

``--leg-tokens N`` / ``--leg-seconds S`` (or ``plugin_config.turn_budget.tokens`` /
``seconds``). Tokens are the provider's counts, with cached input at a tenth (it is billed
and processed at about that). At 50 %, 75 % and 90 % a short note is appended at the *end*
of the conversation - nothing earlier changes, so prompt caches stay valid. At 95 %, at the
cap, or when one more step plus a summary would not fit, one final request goes out with no
tools asking for what was found, the state of the work and what remains; the leg ends with
that text, ``stopped: "budget"`` and ``finished: false``, and the wave exits 2.

A conversation that grows makes each step dearer than the last, and the final request then
comes well before 90 % (one more step plus a summary no longer fits): the notes would be
skipped. So each note also falls due when only a few tool steps are left before the final
request (3 for the 50 % note, 2 for 75 %, 1 for 90 %), counted with the steps growing as
they have grown; its text then says how much is spent and how many steps are left.

An endpoint that reports no usage (no counts at all on an answer) would leave the budget
blind: such a step is *estimated* instead - the request anchored on the provider's last
reported prompt size where there is one (the context guard's estimator), plus the answer's
text and tool calls - the leg's ``turn_budget`` record says ``estimated: true``, and one Note
says so, once per leg.
"""

from __future__ import annotations

import time

from orchestrator.hookspecs import hookimpl
from orchestrator.models.estimate import estimate_text
from orchestrator.options import Option

NAME = "turn_budget"
CONFIG_SCHEMA = {"type": "object", "properties": {  # orchestrator.plugin_host.config_check
    "tokens": {"type": "integer", "minimum": 1},
    "seconds": {"type": "number", "exclusiveMinimum": 0}}}
FINAL_AT = 0.95
NOTES = (
    (0.50, "Budget note: half of the budget for this task is spent. Stop broad exploration; "
           "work from what you have found so far."),
    (0.75, "Budget note: three quarters of the budget for this task is spent. Produce the "
           "result now."),
    (0.90, "Budget note: 90% of the budget for this task is spent. Your next reply must be "
           "the result."),
)
# A note is due at its mark, or when this many tool steps are left before the final request.
STEPS_LEFT = {0.50: 3, 0.75: 2, 0.90: 1}
AHEAD = max(STEPS_LEFT.values()) + 1  # how far ahead the steps are counted


def ahead_text(level: float, fraction: float, left: int) -> str:
    """A note due early, because few steps are left: what is spent and how many remain."""
    instruction = dict(NOTES)[level].split(". ", 1)[1]
    steps = f"{left} more step{'s' * (left != 1)}"
    return (f"Budget note: {fraction:.0%} of the budget for this task is spent and the "
            f"conversation grows with each step: {steps} with tools fit before the final "
            f"request. {instruction}")
FINAL_REQUEST = (
    "The budget for this task is spent and no tools are available any more. Reply now, "
    "without tools, with: what you found, the state of the work, and what remains to be done."
)


@hookimpl
def register_options(command):
    """--leg-tokens and --leg-seconds on orch fanout / council run (CLI only)."""
    return [Option("leg-tokens", type="int", min=1, metavar="N", config="tokens", mcp=False,
                   help="Turn budget per leg in tokens (cached input counts a tenth)."),
            Option("leg-seconds", type="float", min=0, min_open=True, metavar="S",
                   config="seconds", mcp=False, help="Turn budget per leg in seconds.")]


def limits(leg) -> tuple[int | None, float | None]:
    cfg = leg.plugin_config(NAME)
    tokens = leg.options.get("leg_tokens") or cfg.get("tokens")
    seconds = leg.options.get("leg_seconds") or cfg.get("seconds")
    return (int(tokens) if tokens else None, float(seconds) if seconds else None)


def step_tokens(usage) -> float:
    """What a step cost against the budget: cached input at a tenth."""
    cached = min(usage.cached_tokens, usage.input_tokens)
    return usage.input_tokens - cached + cached / 10 + usage.output_tokens


def reported(usage) -> bool:
    """Whether the provider reported any counts for this answer (all zeros: it sent none)."""
    return bool(usage.input_tokens or usage.output_tokens)


def estimated_tokens(leg, request, response) -> float:
    """A step's tokens when the provider said nothing: the prompt as the context guard
    estimates it (anchored where the provider ever reported one) plus the answer."""
    from orch_plugins.context_guard import INFLATION, context_estimate

    model = leg.model.litellm_model
    prompt, _ = context_estimate(leg, request, INFLATION)
    answer = (response.text or "") + "".join(f"{c.name}{c.arguments}"
                                             for c in response.tool_calls)
    return prompt + (estimate_text(answer, model) if answer else 0)


def _state(leg) -> dict:
    return leg.state.setdefault(NAME, {"t0": time.monotonic(), "used": 0.0, "last": 0.0,
                                       "grew": 0.0, "last_s": 0.0, "t_step": None,
                                       "notes": []})


@hookimpl(trylast=True)
def leg_start(leg):
    if any(limits(leg)):
        _state(leg)


@hookimpl(trylast=True)
def step_end(leg, step):
    tokens, seconds = limits(leg)
    if not (tokens or seconds):
        return
    st = _state(leg)
    now = time.monotonic()
    response = step["response"]
    if reported(response.usage):
        cost = step_tokens(response.usage)
    else:
        cost = estimated_tokens(leg, step["request"], response)
        if not st.get("estimated"):
            st["estimated"] = True
            leg.notice(f"turn budget: {leg.model.name} reported no usage; its spend is "
                       "estimated from the sizes of the requests and answers (marked "
                       "estimated)")
    st["used"] += cost
    st["grew"] = max(0.0, cost - st["last"]) if st["last"] else 0.0
    st["last"] = cost
    st["last_s"] = now - (st["t_step"] or st["t0"])
    st["t_step"] = now
    _record(leg, st, tokens, seconds)


def _record(leg, st: dict, tokens: int | None, seconds: float | None) -> None:
    leg.set(NAME, {"tokens": tokens, "seconds": seconds, "used_tokens": round(st["used"]),
                   "used_seconds": round(time.monotonic() - st["t0"], 3),
                   "notes": [int(level * 100) for level in st["notes"]],
                   **({"estimated": True} if st.get("estimated") else {})})


def steps_left(st: dict, tokens: int | None, seconds: float | None) -> int:
    """Tool steps that fit before the final request (this one included), each step dearer
    than the last by as much as the last grew; counted up to :data:`AHEAD`."""
    used, last = st["used"], st["last"]
    elapsed, last_s = time.monotonic() - st["t0"], st["last_s"]
    for n in range(AHEAD):
        full = (tokens and (used / tokens >= FINAL_AT or used + 2 * last > tokens)) or (
            seconds and (elapsed / seconds >= FINAL_AT or elapsed + 2 * last_s > seconds))
        if full:
            return n
        last += st["grew"]
        used += last
        elapsed += last_s
    return AHEAD


def spent(st: dict, tokens: int | None, seconds: float | None) -> tuple[float, bool]:
    """(fraction of the budget spent, whether one more step plus a summary would not fit)."""
    elapsed = time.monotonic() - st["t0"]
    fraction, tight = 0.0, False
    if tokens:
        fraction = st["used"] / tokens
        tight = st["used"] + 2 * st["last"] > tokens
    if seconds:
        fraction = max(fraction, elapsed / seconds)
        tight = tight or elapsed + 2 * st["last_s"] > seconds
    return fraction, tight


@hookimpl(trylast=True)
def before_request(leg, request):
    tokens, seconds = limits(leg)
    if not (tokens or seconds) or not request.tools or request.step == 1:
        return None  # no budget, or already a final (tool-less) request, or nothing spent
    st = _state(leg)
    given = st.get("step_note")
    if request.attempt > 1 and given and given[0] == request.step:
        # this step's request, sent again (text mode): the note it was given goes again
        return request.evolve(messages=[*request.messages, {"role": "user", "content": given[1]}])
    fraction, tight = spent(st, tokens, seconds)
    if fraction >= FINAL_AT or tight:
        why = "one more step and a summary would not fit" if fraction < FINAL_AT else \
            f"{fraction:.0%} of it is spent"
        leg.set("stopped", "budget")
        leg.set("finished", False)
        _record(leg, st, tokens, seconds)
        leg.notice(f"turn budget: {why} ({_spend(st, tokens, seconds)}); asked "
                   f"{leg.model.name} for its result without tools at step {request.step}")
        return request.evolve(tools=None, messages=[
            *request.messages, {"role": "user", "content": FINAL_REQUEST}])
    left = steps_left(st, tokens, seconds)
    due = [(level, text) for level, text in NOTES if level not in st["notes"]
           and (fraction >= level or left <= STEPS_LEFT[level])]
    if not due:
        return None
    level, text = due[-1]  # past two marks in one step: the latest note says it all
    if fraction < level:  # due because few steps are left, not because it is spent
        text = ahead_text(level, fraction, left)
    st["notes"].extend(lv for lv, _ in due)
    st["step_note"] = (request.step, text)
    _record(leg, st, tokens, seconds)
    if fraction >= level:
        leg.notice(f"turn budget: {int(level * 100)}% spent ({_spend(st, tokens, seconds)}); "
                   f"note appended at step {request.step}")
    else:
        leg.notice(f"turn budget: the {int(level * 100)}% note, {left} tool step"
                   f"{'s' * (left != 1)} before the final request ("
                   f"{_spend(st, tokens, seconds)}); note appended at step {request.step}")
    return request.evolve(messages=[*request.messages, {"role": "user", "content": text}])


def _spend(st: dict, tokens: int | None, seconds: float | None) -> str:
    parts = []
    if tokens:
        parts.append(f"{round(st['used']):,} of {tokens:,} tokens")
    if seconds:
        parts.append(f"{time.monotonic() - st['t0']:.1f} of {seconds:g} s")
    return ", ".join(parts)
