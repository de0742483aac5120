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


def declarations(pm, config=None, command: str = "fanout", *,
                 no_plugins: bool = False) -> list[tuple[str, Any]]:
    """[(plugin, Option)] every plugin that could enforce a budget declares for ``command``:
    the loaded ones of ``pm`` and the disabled ones (:func:`disabled_declarations`). With
    ``--no-plugins`` (``pm`` has none): what the built-in plugins config.json selects would
    declare, the budget guards a bare run leaves off."""
    from orchestrator.plugin_host.plugins import declared_options, load

    if no_plugins:
        section = config.section("plugins") if config is not None else None
        pm = load(section, options_only=True, third_party=False)
    if pm is None or not hasattr(pm, "hook"):
        return []
    return [*declared_options(pm, command), *disabled_declarations(pm, command)]


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
    declared = declarations(pm, config, command, no_plugins=no_plugins)
    for plugin, option, value, where, drop in asked(budgets, config, source, kept_from,
                                                     declared):
        if pm.get_plugin(plugin) is not None:
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


def disabled_declarations(pm, command: str = "fanout") -> list[tuple[str, Any]]:
    """[(plugin, Option)] the disabled plugins would declare (each module is imported, never
    registered; of the built-ins only those of ``BUILTIN_OPTIONS``): a value asked for one of their options (in a ``plugin_config`` section, a
    bench file, a retry's kept budget) would otherwise be silently ignored."""
    from importlib import metadata

    from orchestrator.options import Option
    from orchestrator.plugin_host.plugins import BUILTIN_OPTIONS, GROUP

    out = []
    for name, info in getattr(pm, "infos", {}).items():
        if info.status != "disabled" or info.reason is None or ":" in name or " " in name:
            continue
        if info.builtin and name not in BUILTIN_OPTIONS:
            continue  # a built-in that declares no option: its module is not imported
        try:
            plugin = metadata.EntryPoint(name, info.module, GROUP).load()
            declare = getattr(plugin, "register_options", None)
            declared = declare(command) if callable(declare) else []
        except Exception:  # noqa: BLE001 - a disabled plugin that cannot say is not asked
            continue
        out += [(name, o) for o in declared or [] if isinstance(o, Option)]
    return out


def require_option_plugins(pm, config) -> None:
    """Refuse (exit 2, one line) a ``plugin_config`` value for a disabled plugin's declared
    option: its flag does not exist, and the value would be silently ignored."""
    sections = config.section("plugin_config") if config is not None else {}
    wanted = [name for name, info in getattr(pm, "infos", {}).items()
              if info.status == "disabled" and sections.get(name)]
    if not wanted:
        return
    for plugin, option in disabled_declarations(pm):
        if plugin not in wanted or option.config is None or \
                sections[plugin].get(option.config) is None:
            continue
        info = pm.infos[plugin]
        where = f"plugin_config.{plugin}.{option.config}"
        raise GuardOff(f"{where} in config.json needs the {plugin} plugin, which is not loaded "
                       f"(it is {info.reason}); enable it (remove {plugin} from "
                       f"ORCH_DISABLE_PLUGINS / plugins.disabled), or remove {where} from "
                       "config.json")
