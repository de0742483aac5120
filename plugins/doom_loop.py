"""Stop a leg that keeps making the same tool call: take its tools away and ask for the answer.

Small models loop — the same ``read`` again and again, or ``read``/``grep`` in turn — and no
prose rule stops them. So this is structural: when the same call (same tool, same arguments
once the JSON is canonicalised) comes K times in a row, or two calls alternate for
``cycle_rounds`` rounds, the next request goes out with no tools and a short note saying what
was repeated. The engine ends a leg on the answer to a tool-less request; should a leg go on
and loop again after its tools came back, it does not get them back.

``plugin_config.doom_loop``: ``repeats`` (K, default 3), ``repeats_minimal`` (K on the minimal
tier, default 2), ``cycle_rounds`` (default 2: A B A B).
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.hookspecs import hookimpl

DEFAULTS = {"repeats": 3, "repeats_minimal": 2, "cycle_rounds": 2}
CONFIG_SCHEMA = {"type": "object", "properties": {  # orchestrator.plugin_host.config_check
    key: {"type": "integer", "minimum": 2} for key in DEFAULTS}}
_PREVIEW = 120

Signature = tuple[tuple[str, str], ...]  # the step's calls: (tool, canonical arguments)


def settings(leg) -> dict[str, int]:
    """The thresholds for ``leg``, checked: a bad value is a one-line config error."""
    conf = {**DEFAULTS, **leg.plugin_config("doom_loop")}
    for key in DEFAULTS:
        value = conf[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            from orchestrator.errors import OrchError

            raise OrchError(f"plugin_config.doom_loop.{key} is {value!r}; set it to a whole "
                            "number of at least 2 in config.json")
    return conf


def canonical(arguments: str) -> str:
    """Arguments as one spelling: key order and whitespace do not make a call different."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return " ".join((arguments or "").split())
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def detect(history: list[Signature | None], repeats: int, rounds: int) -> dict[str, Any] | None:
    """The loop at the end of ``history`` (one signature per step, None = no calls), if any."""
    last = history[-1] if history else None
    if not last:
        return None
    run = 1
    for sig in reversed(history[:-1]):
        if sig != last:
            break
        run += 1
    if run >= repeats:
        return {"pattern": "repeat", "count": run, "calls": [last]}
    span = 2 * rounds
    tail = history[-span:]
    if len(tail) == span and tail[0] and tail[1] and tail[0] != tail[1] and all(
            sig == tail[i % 2] for i, sig in enumerate(tail)):
        return {"pattern": "cycle", "count": span, "calls": [tail[0], tail[1]]}
    return None


def _label(sig: Signature) -> str:
    return "+".join(name for name, _ in sig)


def _shown(sig: Signature) -> str:
    text = "; ".join(f"{name} {args}" for name, args in sig)
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "…"


def _note(loop: dict[str, Any]) -> str:
    """What the model is told, on the request that has no tools."""
    calls = loop["calls"]
    if loop["pattern"] == "repeat":
        said = (f"You have made the same call {loop['count']} times in a row "
                f"({_shown(calls[0])}); making it again will not tell you anything new.")
    else:
        said = (f"You have been alternating between {_shown(calls[0])} and {_shown(calls[1])} "
                f"for {loop['count']} calls without getting further.")
    return (f"{said} Tools are switched off for this request: give your answer now, from what "
            "you already know.")


def _state(leg) -> dict[str, Any]:
    return leg.state.setdefault("doom_loop", {"history": [], "strip": None, "trips": 0,
                                              "note": ""})


@hookimpl(trylast=True)
def leg_start(leg):
    settings(leg)  # a bad threshold ends the leg before anything is spent


@hookimpl(trylast=True)
def step_end(leg, step):
    request, response = step["request"], step["response"]
    if not request.tools:
        return  # no tools were offered: the engine ran nothing and the leg ends here
    state = _state(leg)
    sig = tuple(sorted((c.name, canonical(c.arguments)) for c in response.tool_calls))
    state["history"].append(sig or None)
    conf = settings(leg)
    repeats = conf["repeats_minimal"] if leg.tier == "minimal" else conf["repeats"]
    loop = detect(state["history"], repeats, conf["cycle_rounds"])
    if loop is None:
        return
    state["trips"] += 1
    state["strip"] = "once" if state["trips"] == 1 else "always"
    state["note"] = _note(loop)
    label = " ↔ ".join(_label(s) for s in loop["calls"])
    record = {"tool": label, "count": loop["count"], "step": step["step"],
              "pattern": loop["pattern"]}
    if state["trips"] > 1:
        record["trips"] = state["trips"]
    leg.set("doom_loop", record)
    until = "the next request" if state["strip"] == "once" else "the rest of the leg"
    did = (f"called {loop['count']} times in a row with the same arguments"
           if loop["pattern"] == "repeat" else f"alternated for {loop['count']} calls")
    leg.notice(f"doom loop: {label} {did} (step {step['step']}); tools withheld for {until}")


@hookimpl(trylast=True)
def before_request(leg, request):
    state = leg.state.get("doom_loop")
    if not state or not state["strip"]:
        return None
    if state["strip"] == "once":
        state["strip"] = None  # tools come back after this request; a second loop is final
    if not request.tools:
        return None  # already tool-less (the step limit): nothing to take away
    note = {"role": "user", "content": state["note"]}
    return request.evolve(tools=None, messages=[*request.messages, note])
