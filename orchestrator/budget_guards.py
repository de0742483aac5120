"""A budget asked for is enforced or refused: never silently off.

Each budget is enforced by one plugin (``cost_ceiling``, ``output_budget``, ``turn_budget``).
It can be asked for by a flag, by an MCP tool's argument, by a bench file, or by that
plugin's own section of config.json (``plugin_config.cost_ceiling.max_usd``). When the
plugin that would enforce it is not loaded (``--no-plugins``, ``ORCH_DISABLE_PLUGINS``,
``plugins.disabled``, a bench contestant's ``disable_plugins``), the run is refused before
any spend: exit 2, one line naming where the budget was asked for and how to fix it
(docs/budgets.md).
"""

from __future__ import annotations

from typing import Any

from orchestrator.errors import OrchError

# budget key (WaveSpec.options) -> the plugin that enforces it
PLUGIN_OF = {"output_budget": "output_budget", "thinking": "output_budget",
             "leg_tokens": "turn_budget", "leg_seconds": "turn_budget",
             "max_cost": "cost_ceiling"}
# plugin_config.<plugin>.<key> -> the budget it asks for (what each plugin reads, see there)
CONFIG_KEYS = {("cost_ceiling", "max_usd"): "max_cost",
               ("output_budget", "tokens"): "output_budget",
               ("output_budget", "thinking"): "thinking",
               ("turn_budget", "tokens"): "leg_tokens",
               ("turn_budget", "seconds"): "leg_seconds"}


class GuardOff(OrchError):
    """A budget was asked for and its plugin is off: a usage problem (exit 2), one line."""

    exit_code = 2


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def asked(budgets: dict[str, Any], config, source=flag,
          kept_from: dict[str, str] | None = None) -> list[tuple[str, Any, str, str | None]]:
    """Every budget asked for: (key, value, where it was asked, how to stop asking), the
    run's own ``budgets`` first (``source(key)`` names them: a flag, an MCP argument, a bench
    file), then config's plugin sections for the keys the run did not set. ``kept_from``
    names, per key, the wave a retry kept a budget from: it cannot be dropped, only held."""
    out: list[tuple[str, Any, str, str | None]] = []
    for key, value in budgets.items():
        if value is None or key not in PLUGIN_OF:
            continue
        if key in (kept_from or {}):
            out.append((key, value, f"{flag(key)} (kept from wave {kept_from[key]})", None))
        else:
            out.append((key, value, source(key), f"drop {source(key)}"))
    given = {key for key, *_ in out}
    for (plugin, name), key in CONFIG_KEYS.items():
        value = config.plugin_config(plugin).get(name) if config is not None else None
        if value is None or key in given:
            continue
        where = f"plugin_config.{plugin}.{name}"
        out.append((key, value, f"{where} in config.json",
                    f"remove {where} from config.json"))
    return out


def require_guards(budgets: dict[str, Any], pm, config, *, no_plugins: bool = False,
                   source=flag, kept_from: dict[str, str] | None = None) -> None:
    """Raise :class:`GuardOff` for the first budget asked for whose plugin is not loaded."""
    for key, value, where, drop in asked(budgets, config, source, kept_from):
        plugin = PLUGIN_OF[key]
        if pm.get_plugin(plugin) is not None:
            continue
        if key == "thinking" and value == "none":
            continue  # asks for nothing: no guard needed
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
    """[(plugin, Option)] the disabled plugins would declare. Read only for a disabled
    plugin that has a ``plugin_config`` section (its module is imported, never registered):
    a value set there for one of its options would otherwise be silently ignored."""
    from importlib import metadata

    from orchestrator.options import Option
    from orchestrator.plugin_host.plugins import GROUP

    out = []
    for name, info in getattr(pm, "infos", {}).items():
        if info.status != "disabled" or info.reason is None or ":" in name or " " in name:
            continue
        try:
            plugin = metadata.EntryPoint(name, info.module, GROUP).load()
            declare = getattr(plugin, "register_options", None)
            declared = declare(command) if callable(declare) else []
        except Exception:  # noqa: BLE001 - a disabled plugin that cannot say is not asked
            continue
        out += [(name, o) for o in declared or [] if isinstance(o, Option) and o.config]
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
        if plugin not in wanted or sections[plugin].get(option.config) is None:
            continue
        info = pm.infos[plugin]
        where = f"plugin_config.{plugin}.{option.config}"
        raise GuardOff(f"{where} in config.json needs the {plugin} plugin, which is not loaded "
                       f"(it is {info.reason}); enable it (remove {plugin} from "
                       f"ORCH_DISABLE_PLUGINS / plugins.disabled), or remove {where} from "
                       "config.json")
