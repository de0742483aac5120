"""What each hook must answer, checked at the boundary before anyone else sees the answer.

A wrong answer handed on would fail in the next plugin, or in the engine, and be blamed on
whoever touched it last (a ``dict`` from ``before_request`` used to fail inside three
innocent built-ins). Checked as each implementation returns, it is that plugin's failure,
named and discarded exactly like a raise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[Any], str | None]  # the answer -> what is wrong with it, or None


class WrongAnswer(TypeError):
    """An implementation answered with a value its hook does not take."""


# Hooks that take no awaitable: the first-answer and collect hooks, the command line's, and
# before_launch (its check and what it claims happen at once: the cost ceiling relies on it).
NO_AWAIT = frozenset({"before_launch", "register_commands", "register_options",
                      "resolve_model", "default_models", "register_tools", "system_prompt",
                      "wave_report"})


def no_await(name: str) -> TypeError:
    why = " (its check and what it claims happen at once)" if name == "before_launch" else ""
    return TypeError(f"{name} must answer synchronously, not with an awaitable{why}")


def _kind(value: Any) -> str:
    return f"a {type(value).__name__}"


def _instance(what: str, cls_of: Callable[[], type],
              more: Check | None = None) -> Check:
    """The answer must be exactly ``cls`` (a subclass would carry the plugin's own methods
    into orch's code), and pass ``more``."""
    cls: list[type] = []  # imported on first use: this module stays light

    def check(value: Any) -> str | None:
        if not cls:
            cls.append(cls_of())
        if type(value) is not cls[0]:
            return f"returned {_kind(value)}; it must return {what} or None"
        return more(value) if more is not None else None
    return check


def _messages(request: Any) -> str | None:
    """A request must have something to send: a list of message dicts, not empty (sent as
    is, the provider's refusal would be blamed on the provider)."""
    messages = request.messages
    if type(messages) not in (list, tuple) or not messages:
        return ("returned a Request with no messages; nothing can be sent (return None to "
                "keep the request)")
    for message in messages:
        if type(message) is not dict:
            return f"returned a Request whose messages hold {_kind(message)}; each is a dict"
    return None


def _tools(value: Any) -> str | None:
    from orchestrator.tools import Tool

    if type(value) not in (list, tuple):
        return f"returned {_kind(value)}; it must return a list of Tool or None"
    for item in value:
        if type(item) is not Tool:
            return f"returned a list holding {_kind(item)}; every item must be a Tool"
    return None


MAX_OPTIONS = 64  # options one plugin may declare for one command


def _options(value: Any) -> str | None:
    """``register_options``: a list of Option, of a size a command line can hold."""
    from orchestrator.options import Option

    if type(value) not in (list, tuple):
        return f"returned {_kind(value)}; it must return a list of Option or None"
    if len(value) > MAX_OPTIONS:
        return f"returned {len(value):,} items; a plugin declares at most {MAX_OPTIONS} options"
    wrong = [item for item in value if type(item) is not Option]
    if wrong:
        return (f"returned {len(wrong):,} item(s) that are not an orchestrator.options.Option "
                f"(the first: {_kind(wrong[0])})")
    return None


def _default_models(value: Any) -> str | None:
    shape = 'it must return {"models": [names], "notice": "one line"} or None'
    if type(value) is not dict:
        return f"returned {_kind(value)}; {shape}"
    models, notice = value.get("models"), value.get("notice")
    if type(models) is not list or not models or len(models) > 100 or \
            not all(type(m) is str and m.strip() for m in models):
        return f'returned "models": {models!r:.60}; {shape}'
    if type(notice) is not str:
        return f'returned "notice": {_kind(notice)}; {shape}'
    return None


def _wave_report(value: Any) -> str | None:
    shape = 'it must return {"degraded": [reasons], "fields": {name: value}} or None'
    if type(value) is not dict:
        return f"returned {_kind(value)}; {shape}"
    unknown = sorted(str(k) for k in value if k not in ("degraded", "fields"))
    if unknown:
        return f"returned the key(s) {', '.join(unknown[:5])[:200]}; {shape}"
    reasons = value.get("degraded", [])
    if type(reasons) not in (list, tuple) or len(reasons) > 20 or \
            not all(type(r) is str and r.strip() and len(r) <= 1000 for r in reasons):
        return ('returned "degraded": not a list of at most 20 reasons of at most 1,000 '
                "characters each")
    fields = value.get("fields", {})
    if type(fields) is not dict or len(fields) > 20 or \
            not all(type(k) is str for k in fields):
        return f'returned "fields": {_kind(fields)}; {shape} (at most 20 fields)'
    return None


def _request() -> type:
    from orchestrator.request import Request

    return Request


def _response() -> type:
    from orchestrator.request import Response

    return Response


def _resolved() -> type:
    from orchestrator.models.addressing import ResolvedModel

    return ResolvedModel


# Hooks whose answer is used; observers' answers are ignored (an awaitable is awaited).
CHECKS: dict[str, Check] = {
    "before_request": _instance("a Request (request.evolve(...))", _request, _messages),
    "after_response": _instance("a Response (response.evolve(...))", _response),
    "tool_roster": _tools,
    "register_tools": _tools,
    "system_prompt": _instance("a str", lambda: str),
    "resolve_model": _instance("a ResolvedModel", _resolved),
    "default_models": _default_models,
    "register_options": _options,
    "wave_report": _wave_report,
}


def checker(hook: str) -> Check | None:
    """The check for ``hook``'s answers, or None when its answers are not used."""
    return CHECKS.get(hook)


def wrong(name: str, check: Check | None, result: Any, who: str = "") -> WrongAnswer | None:
    """What is wrong with an implementation's answer (``who``: "wrapper " for a wrapper's),
    or None when it may be taken (a None answer keeps the value: nothing to check). The one
    tail every hand-over and the inline chain end with."""
    if result is None or check is None:
        return None
    problem = check(result)
    return None if problem is None else WrongAnswer(f"{name} {who}{problem}")
