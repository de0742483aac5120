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


def _kind(value: Any) -> str:
    return f"a {type(value).__name__}"


def _instance(what: str, cls_of: Callable[[], type]) -> Check:
    cls: list[type] = []  # imported on first use: this module stays light

    def check(value: Any) -> str | None:
        if not cls:
            cls.append(cls_of())
        return None if isinstance(value, cls[0]) else f"returned {_kind(value)}; it must " \
            f"return {what} or None"
    return check


def _tools(value: Any) -> str | None:
    from orchestrator.tools import Tool

    if not isinstance(value, list | tuple):
        return f"returned {_kind(value)}; it must return a list of Tool or None"
    for item in value:
        if not isinstance(item, Tool):
            return f"returned a list holding {_kind(item)}; every item must be a Tool"
    return None


def _default_models(value: Any) -> str | None:
    shape = 'it must return {"models": [names], "notice": "one line"} or None'
    if not isinstance(value, dict):
        return f"returned {_kind(value)}; {shape}"
    models, notice = value.get("models"), value.get("notice")
    if not isinstance(models, list) or not models or \
            not all(isinstance(m, str) and m.strip() for m in models):
        return f'returned "models": {models!r:.60}; {shape}'
    if not isinstance(notice, str):
        return f'returned "notice": {_kind(notice)}; {shape}'
    return None


def _wave_report(value: Any) -> str | None:
    shape = 'it must return {"degraded": [reasons], "fields": {name: value}} or None'
    if not isinstance(value, dict):
        return f"returned {_kind(value)}; {shape}"
    unknown = sorted(str(k) for k in value if k not in ("degraded", "fields"))
    if unknown:
        return f"returned the key(s) {', '.join(unknown)}; {shape}"
    reasons = value.get("degraded", [])
    if not isinstance(reasons, list | tuple) or \
            not all(isinstance(r, str) and r.strip() for r in reasons):
        return f'returned "degraded": {reasons!r:.60}; each reason must be a non-empty str'
    fields = value.get("fields", {})
    if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
        return f'returned "fields": {_kind(fields)}; {shape}'
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
    "before_request": _instance("a Request (request.evolve(...))", _request),
    "after_response": _instance("a Response (response.evolve(...))", _response),
    "tool_roster": _tools,
    "register_tools": _tools,
    "system_prompt": _instance("a str", lambda: str),
    "resolve_model": _instance("a ResolvedModel", _resolved),
    "default_models": _default_models,
    "wave_report": _wave_report,
}


def checker(hook: str) -> Check | None:
    """The check for ``hook``'s answers, or None when its answers are not used."""
    return CHECKS.get(hook)
