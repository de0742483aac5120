"""The one check of a value given for a plugin's declared option (a budget: the cost
ceiling plugin's dollars, a token or time budget, a reasoning effort): the CLI's click types
(cli/params.py, cli/plugin_options.py), ``orch mcp``'s tool arguments (mcp_server/tools.py)
and ``orch ui``'s ask form (ui/ask.py) all call it, so the three faces cannot disagree about
what a valid budget is.

A value comes as text (a command line, a form) or as a JSON value (an MCP argument). A number
is a number, never a bool (JSON ``true`` is not 1 dollar), finite (``nan`` compares false with
every bound, so a ceiling of ``nan`` would be no ceiling; ``1e999`` is ``inf``), whole for an
int, and within the declared bounds. A refusal is one line without the face's name for the
value: each face puts its own (``Invalid value for '--FLAG': ``, ``ARGUMENT: ``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from orchestrator.errors import UsageProblem
from orchestrator.options import Option

LARGEST = 2 ** 63 - 1  # a whole number a ledger column (SQLite, PostgreSQL bigint) holds
TRUE, FALSE = ("true", "on", "yes", "1"), ("false", "off", "no", "0")


class BadValue(UsageProblem):
    """A value the option does not take (exit 2): ``problem`` says why, without its name."""

    def __init__(self, problem: str, name: str | None = None) -> None:
        self.problem = problem
        super().__init__(f"{name}: {problem}" if name else problem)


def said(value: Any, most: int = 40) -> str:
    """A value as a refusal quotes it: its repr, at most ``most`` characters (a megabyte
    typed into a form is not said back whole)."""
    text = repr(value)
    return text if len(text) <= most else text[:most - 1] + "…"


def number(value: Any, *, whole: bool = False, min: float | None = None,  # noqa: A002
           min_open: bool = False, max: float | None = None) -> float | int:  # noqa: A002
    """``value`` (text or a JSON number) as a finite number within the bounds, else
    :class:`BadValue`; ``whole``: an int (``2.0`` is 2, ``2.5`` is refused)."""
    shown = said(value)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadValue(f"{shown} is not a number")
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed: float | int = int(text) if whole else float(text)
        except ValueError:
            try:
                parsed = float(text)
            except ValueError:
                raise BadValue(f"{shown} is not a {'whole ' if whole else ''}number") from None
    else:
        parsed = value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise BadValue(f"{shown} is not a finite number; give a plain number like "
                       f"{'2' if whole else '2.5'}")
    if whole:
        if isinstance(parsed, float) and not parsed.is_integer():
            raise BadValue(f"{shown} is not a whole number")
        parsed = int(parsed)
        if abs(parsed) > LARGEST:
            raise BadValue(f"{shown} is too large; give a number up to {LARGEST}")
    else:
        try:
            parsed = float(parsed)
        except OverflowError:  # a JSON integer of 400 digits
            raise BadValue(f"{shown} is not a finite number; give a plain number like "
                           "2.5") from None
    if min is not None and (parsed < min or (min_open and parsed == min)):
        raise BadValue(f"{shown} must be {'more than' if min_open else 'at least'} {min:g}")
    if max is not None and parsed > max:
        raise BadValue(f"{shown} must be at most {max:g}")
    return parsed


def checked(option: Option, value: Any) -> Any:
    """``value`` as ``option`` takes it (an int, a float, one of its choices, a bool, text),
    else :class:`BadValue` (one line, without the option's name)."""
    if option.type in ("int", "float"):
        return number(value, whole=option.type == "int", min=option.min,
                      min_open=option.min_open, max=option.max)
    if option.type == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
            return value.strip().lower() in TRUE
        raise BadValue(f"{said(value)} is not true or false")
    if not isinstance(value, str):
        raise BadValue(f"{said(value)} is not text")
    if option.type == "choice":
        if value.strip() not in option.choices:
            raise BadValue(f"{said(value)} is not one of {', '.join(option.choices)}")
        return value.strip()
    return value


CEILINGS_ONLY = ("bench",)  # commands that take only the run ceilings (Option.run_ceiling):
# a bench's trials are waves of their own


def for_command(command: str, found: list[tuple[str, Option]]) -> list[tuple[str, Option]]:
    """The declarations ``command`` takes of those the plugins answered for it."""
    if command in CEILINGS_ONLY:
        return [(plugin, o) for plugin, o in found if o.run_ceiling]
    return list(found)


def declared_on(pm, command: str) -> list[tuple[str, Option]]:
    """[(plugin, Option)] the plugins that are on in ``pm`` declare for ``command``, as the
    command takes them (asked through the runner, once per process)."""
    from orchestrator.plugin_host.declared import declared_options

    return for_command(command, declared_options(pm, command))


def given(values: dict[str, Any], declared: list[tuple[str, Option]], *, pm=None,
          command: str = "fanout", source: Callable[[str], str] | None = None,
          ) -> dict[str, Any]:
    """{key: checked value} for the plugins' options a run is given (``values`` by options
    key; None is not given), against ``declared`` ([(plugin, Option)] of the plugins that are
    on). A key no plugin that is on declares is refused: with the plugin that declares it
    named, when one that is off does (``budget_guards``: the CLI's refusal of a flag whose
    plugin is off), else as unknown. ``source(key)`` names a value in a refusal (default: the
    flag)."""
    name = source or (lambda key: "--" + key.replace("_", "-"))
    by_key = {option.key: option for _, option in declared}
    unknown = [key for key, value in values.items() if value is not None and key not in by_key]
    if unknown:
        from orchestrator.budget_guards import require_guards

        if pm is not None:
            require_guards({key: values[key] for key in unknown}, pm, None, source=name,
                           command=command)
        known = ", ".join(name(key) for key in by_key) or "none"
        first = name(unknown[0])
        first = first if len(first) <= 60 else first[:59] + "…"
        raise UsageProblem(f"{first} is not an option of {command.replace('_', ' ')} "
                           f"with the plugins that are on (those are: {known})")
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        try:
            out[key] = checked(by_key[key], value)
        except BadValue as exc:
            raise BadValue(exc.problem, name(key)) from None
    return out
