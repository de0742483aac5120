"""The exploration nudge: a leg that only reads, step after step, is told to answer.

The doom-loop guard catches a model that repeats itself; a model that keeps reading *new*
things never trips it, and can spend its whole budget exploring. After ``steps`` read-only tool
steps in a row with no answer (12; ``steps_minimal`` on the minimal tier, 6: small models
wander sooner and their windows fill faster), a note goes at the end of the conversation
asking for the answer now, or for exactly what is missing; it repeats every ``steps`` such
steps. Tools stay on - this is a nudge, not a stop. A step is read-only when every call in it
is to a tool marked ``meta["read_only"]`` (the workspace tools are); any other call, or a
step with no calls, starts the count again. Each note is a Note on stderr and in the leg's
``exploration`` field, like the turn budget's.

``plugin_config.exploration``: ``steps`` (12), ``steps_minimal`` (6); 0 turns it off.
"""

from __future__ import annotations

from typing import Any

from orchestrator.hookspecs import hookimpl

NAME = "exploration"
DEFAULTS = {"steps": 12, "steps_minimal": 6}
CONFIG_SCHEMA = {"type": "object", "properties": {  # orchestrator.plugin_host.config_check
    key: {"type": "integer", "minimum": 0} for key in DEFAULTS}}
NOTE = ("Exploration note: you have made {n} read-only tool calls in a row without answering. "
        "Answer now from what you have found; if something is still missing, say exactly what "
        "it is and which one call would find it.")


def every(leg) -> int:
    """Read-only steps between notes on ``leg``'s tier (0: off); a bad value is a config
    error."""
    conf = {**DEFAULTS, **leg.plugin_config(NAME)}
    for key in DEFAULTS:
        value = conf[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            from orchestrator.errors import OrchError

            raise OrchError(f"plugin_config.{NAME}.{key} is {value!r}; set it to a whole number "
                            "of steps (0 turns the nudge off) in config.json")
    return conf["steps_minimal"] if leg.tier == "minimal" else conf["steps"]


def _state(leg) -> dict[str, Any]:
    return leg.state.setdefault(NAME, {"streak": 0, "due": None, "given": None, "notes": []})


def read_only_step(leg, calls) -> bool:
    tools = leg.tools
    return bool(calls) and all(
        (tool := tools.get(c.name)) is not None and tool.meta.get("read_only") for c in calls)


@hookimpl(trylast=True)
def leg_start(leg):
    every(leg)  # a bad setting ends the leg before anything is spent


@hookimpl(trylast=True)
def step_end(leg, step):
    n = every(leg)
    if not n or not step["request"].tools:
        return
    st = _state(leg)
    if not read_only_step(leg, step["response"].tool_calls):
        st["streak"] = 0
        return
    st["streak"] += 1
    if st["streak"] % n == 0:
        st["due"] = st["streak"]


@hookimpl(trylast=True)
def before_request(leg, request):
    st = leg.state.get(NAME)
    if not st or not request.tools:
        return None  # nothing due, or a tool-less (final) request that asks for the answer
    given = st["given"]
    if request.attempt > 1 and given and given[0] == request.step:
        # this step's request, sent again (text mode): the note it was given goes again
        return request.evolve(messages=[*request.messages, {"role": "user", "content": given[1]}])
    if not st["due"]:
        return None
    streak, st["due"] = st["due"], None
    text = NOTE.format(n=streak)
    st["given"] = (request.step, text)
    st["notes"].append({"step": request.step, "read_only_steps": streak})
    leg.set(NAME, {"every": every(leg), "notes": list(st["notes"])})
    leg.notice(f"exploration: {streak} read-only tool steps in a row with no answer; note "
               f"appended at step {request.step}")
    return request.evolve(messages=[*request.messages, {"role": "user", "content": text}])
