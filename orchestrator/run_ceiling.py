"""A dollar ceiling over a run of several waves: a council's stages, a deliberation's rounds,
a bench's trials, a retry family. The core knows no ceiling by name: a plugin declares one
(``Option(..., run_ceiling=True)``, as the cost_ceiling plugin does), and a run hands
each of its waves what the run has left of it under the option's key; the plugin enforces it
per wave (docs/budgets.md)."""

from __future__ import annotations

from typing import Any


def ceilings(pm, command: str = "fanout") -> list:
    """The run-ceiling options (orchestrator.options.Option) the loaded plugins of ``pm``
    declare for ``command``, in declaration order (none without plugins)."""
    if pm is None or not hasattr(pm, "hook"):
        return []
    from orchestrator.plugin_host.declared import declared_options

    return [o for _, o in declared_options(pm, command) if o.run_ceiling]


def keys(pm, command: str = "fanout") -> tuple[str, ...]:
    """The options keys of :func:`ceilings`."""
    return tuple(o.key for o in ceilings(pm, command))


def given(options: dict[str, Any], pm, command: str = "fanout") -> dict[str, float]:
    """{key: dollars} of each run ceiling set in ``options``."""
    return {k: float(options[k]) for k in keys(pm, command) if options.get(k) is not None}


def left(ceiling: float, spent: float) -> float:
    """What a ceiling has left after ``spent`` (never below 0; rounded so a sum of float
    costs does not read as a hair over)."""
    return round(max(0.0, float(ceiling) - spent), 10)
