"""A budget asked for is enforced or refused: never silently off.

Each budget is an option one plugin declares (``register_options``: ``cost_ceiling``'s,
``output_budget``'s, ``turn_budget``'s) and enforces; the core knows them only
from the declarations. It can be asked for by a flag, by an MCP tool's argument, by a bench
file, kept by a retry, or by the option's ``config`` key in that plugin's own section of
config.json (``plugin_config.cost_ceiling.max_usd``). When the
plugin that would enforce it is not loaded (``--no-plugins``, ``ORCH_DISABLE_PLUGINS``,
``plugins.disabled``, a bench contestant's ``disable_plugins``), the run is refused before
any spend: exit 2, one line naming where the budget was asked for and how to fix it
(docs/budgets.md).
"""

from __future__ import annotations

from typing import Any

from orchestrator.errors import OrchError


class GuardOff(OrchError):
    """A budget was asked for and its plugin is off: a usage problem (exit 2), one line."""

    exit_code = 2


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def declarations(pm, config=None, command: str = "fanout", *, no_plugins: bool = False,
                 asked=()) -> list[tuple[str, Any]]:
    """[(plugin, Option)] every plugin that could enforce a budget declares for ``command``:
    the loaded ones of ``pm``, then those of the plugins that are off whose values the user
    set (:func:`set_for_off`). With ``--no-plugins`` (``pm`` has none), every plugin is off:
    the built-ins config.json selects and the third parties the user set something for."""
    from orchestrator.plugin_host.declared import declared_options, off_declarations
    from orchestrator.plugin_host.plugins import listed, load

    if no_plugins:
        section = config.section("plugins") if config is not None else None
        builtins = load(section, options_only=True, third_party=False)
        off = listed(section, "--no-plugins loads no plugins")
        loaded = declared_options(builtins, command)
        third = {n for n, info in off.infos.items() if not info.builtin}
        names = set_for_off(off, config, loaded, asked)
        names = third if names is None else names & third
        return [*loaded, *off_declarations(off, command, names)]
    if pm is None or not hasattr(pm, "hook"):
        return []
    loaded = declared_options(pm, command)
    return [*loaded, *off_declarations(pm, command, set_for_off(pm, config, loaded, asked))]


def set_for_off(pm, config, loaded: list[tuple[str, Any]], asked) -> set[str] | None:
    """The plugins that are off whose declarations must be read: those with a
    ``plugin_config`` section in config.json; every one (None) when a value was asked for
    that no loaded plugin declares (a bench file's key, a retry's kept budget, an MCP
    argument): it may be one of theirs. Nothing else of a plugin that is off is imported."""
    keys = {option.key for _, option in loaded}
    if any(key not in keys for key in asked):
        return None
    sections = config.section("plugin_config") if config is not None else {}
    return {name for name, section in sections.items() if section}


def asked(budgets: dict[str, Any], config, source=flag,
          kept_from: dict[str, str] | None = None,
          declared: list[tuple[str, Any]] = ()) -> list[tuple[str, Any, Any, str, str | None]]:
    """Every budget asked for: (plugin, Option, value, where it was asked, how to stop
    asking), the run's own ``budgets`` first (``source(key)`` names them: a flag, an MCP
    argument, a bench file), then config's plugin sections (each option's ``config`` key) for
    the keys the run did not set. ``declared``: [(plugin, Option)] (:func:`declarations`).
    ``kept_from`` names, per key, the wave a retry kept a budget from: it cannot be dropped,
    only held."""
    by_key = {}
    for plugin, option in declared:
        by_key.setdefault(option.key, (plugin, option))
    out: list[tuple[str, Any, Any, str, str | None]] = []
    for key, value in budgets.items():
        if value is None or key not in by_key:
            continue
        plugin, option = by_key[key]
        if key in (kept_from or {}):
            out.append((plugin, option, value, f"{flag(key)} (kept from wave {kept_from[key]})",
                        None))
        else:
            out.append((plugin, option, value, source(key), f"drop {source(key)}"))
    given = {option.key for _, option, *_ in out}
    for plugin, option in by_key.values():
        if option.config is None or option.key in given or config is None:
            continue
        value = config.plugin_config(plugin).get(option.config)
        if value is None:
            continue
        where = f"plugin_config.{plugin}.{option.config}"
        out.append((plugin, option, value, f"{where} in config.json",
                    f"remove {where} from config.json"))
    return out


def require_guards(budgets: dict[str, Any], pm, config, *, no_plugins: bool = False,
                   source=flag, kept_from: dict[str, str] | None = None,
                   command: str = "fanout") -> None:
    """Raise :class:`GuardOff` for the first budget asked for whose plugin is not loaded."""
    wanted = any(v is not None for v in budgets.values()) or bool(
        config is not None and config.section("plugin_config"))
    if not wanted:
        return  # nothing asked: the declarations are not even read
    declared = declarations(pm, config, command, no_plugins=no_plugins,
                            asked=[k for k, v in budgets.items() if v is not None])
    for plugin, option, value, where, drop in asked(budgets, config, source, kept_from,
                                                     declared):
        if pm.loaded(plugin):
            continue
        if value in option.inert:
            continue  # asks for nothing (an inert value, a thinking of none): no guard needed
        info = getattr(pm, "infos", {}).get(plugin)
        if no_plugins:
            why, fix = "--no-plugins loads no plugins", "drop --no-plugins"
        elif info is not None and info.status == "disabled":
            why = f"it is {info.reason}"
            fix = f"enable it (remove {plugin} from ORCH_DISABLE_PLUGINS / plugins.disabled)"
        else:
            why = f"it is {info.status}" if info is not None else "it is not installed"
            fix = "check `orch plugins`"
        if drop is None:  # a retry keeps its wave's budgets: only the plugin can hold them
            raise GuardOff(f"{where} needs the {plugin} plugin, which is not loaded ({why}); "
                           f"{fix}: a retry keeps its wave's budgets")
        raise GuardOff(f"{where} needs the {plugin} plugin, which is not loaded ({why}); "
                       f"{fix}, or {drop}")


def require_option_plugins(pm, config) -> None:
    """Refuse (exit 2, one line) a ``plugin_config`` value for a disabled plugin's declared
    option: its flag does not exist, and the value would be silently ignored."""
    sections = config.section("plugin_config") if config is not None else {}
    wanted = [name for name, info in getattr(pm, "infos", {}).items()
              if info.status == "disabled" and sections.get(name)]
    if not wanted:
        return
    from orchestrator.plugin_host.declared import off_declarations

    for plugin, option in off_declarations(pm, "fanout", set(wanted)):
        if plugin not in wanted or option.config is None or \
                sections[plugin].get(option.config) is None:
            continue
        info = pm.infos[plugin]
        where = f"plugin_config.{plugin}.{option.config}"
        raise GuardOff(f"{where} in config.json needs the {plugin} plugin, which is not loaded "
                       f"(it is {info.reason}); enable it (remove {plugin} from "
                       f"ORCH_DISABLE_PLUGINS / plugins.disabled), or remove {where} from "
                       "config.json")
