"""Fail-closed from import on: a run that relies on a plugin never goes out without it.

Isolation lets a request through when a plugin fails. For a guard that is the wrong way
round, and a guard's failure starts before its first hook: a customer-ID guard whose module
raises at import used to be skipped with one warning while the IDs went on the wire. A run
relies on a plugin when the plugin declares ``FAIL_CLOSED`` (read from its source when it
cannot be imported: snapshot.fail_closed_in_source), or holds what the user set for the run:
a ``plugin_config`` section in config.json, or a budget asked for (its declared option). Such
a plugin that cannot be loaded refuses the run before anything is sent, naming it and the
fix; one that fails when called refuses the request (hooks.py: ``held``). Disabling it on
purpose (``ORCH_DISABLE_PLUGINS``) is the user's way to run without it.
"""

from __future__ import annotations

from typing import Any

from orchestrator.errors import OrchError


class GuardUnavailable(OrchError):
    """A plugin the run relies on could not be loaded: refused before anything is sent."""


def require_loaded(pm, config) -> None:
    """Refuse the run (one line, exit 1) when a plugin it relies on is broken, or a loaded
    plugin declares something that cannot be honoured (a ``HOOK_DEADLINE_S`` that is no
    number of seconds)."""
    sections = config.section("plugin_config") if config is not None else {}
    for name, info in getattr(pm, "infos", {}).items():
        if info.status == "loaded":
            for problem in info.declared.problems:
                raise OrchError(problem)
            continue
        if info.status != "broken":
            continue
        plain_name = name.split(" (")[0]
        if info.declared.fail_closed:
            why = "it declares FAIL_CLOSED"
        elif sections.get(plain_name):
            why = f"plugin_config.{plain_name} is set in config.json"
        else:
            continue
        raise GuardUnavailable(
            f"plugin {plain_name} could not be loaded ({info.error}); {why}, so nothing is "
            f"sent without it: fix it (`orch plugins` shows why), or disable it to run "
            f"without it (ORCH_DISABLE_PLUGINS={plain_name})")


def holders(pm, config, options: dict[str, Any]) -> frozenset[str]:
    """The loaded plugins that hold what the user set for this run: a non-empty
    ``plugin_config`` section, or a budget in the run's options that the plugin declares
    (not one of its inert values). Their failures in a hook fail closed."""
    from orchestrator.plugin_host.declared import declared_options

    if not hasattr(pm, "loaded"):
        return frozenset()
    sections = config.section("plugin_config") if config is not None else {}
    held = {name for name, section in sections.items() if section and pm.loaded(name)}
    if any(value not in (None, False) for value in options.values()):
        for plugin, option in declared_options(pm, "fanout"):
            value = options.get(option.key)
            if value not in (None, False) and value not in option.inert:
                held.add(plugin)
    return frozenset(held)
