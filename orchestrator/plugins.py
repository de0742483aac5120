"""Finding and loading plugins: built-ins and third parties alike come from entry-point group
``orch``; a plugin that fails to import is listed as broken and everything else still runs."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from importlib import metadata

import pluggy

from orchestrator import hookspecs

GROUP = "orch"
OWN_DISTRIBUTION = "orch"


@dataclass
class PluginInfo:
    name: str
    module: str
    distribution: str | None
    version: str | None
    builtin: bool
    status: str = "loaded"  # loaded | broken | disabled
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "module": self.module, "version": self.version,
                "source": "built-in" if self.builtin else (self.distribution or "unknown"),
                "builtin": self.builtin, "status": self.status, "error": self.error,
                "hooks": self.hooks, "warnings": self.warnings}


class PluginManager(pluggy.PluginManager):
    """pluggy's manager plus what orch knows about where each plugin came from."""

    def __init__(self) -> None:
        super().__init__("orch")
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}

    def is_builtin(self, plugin_name: str | None) -> bool:
        info = self.infos.get(plugin_name or "")
        return bool(info and info.builtin)


def _names(value: str | None) -> set[str]:
    return {n.strip() for n in (value or "").split(",") if n.strip()}


def _selection(config_plugins: dict | None) -> tuple[set[str] | None, set[str]]:
    """(allowlist or None, denylist) from ORCH_PLUGINS / ORCH_DISABLE_PLUGINS, then config."""
    config_plugins = config_plugins or {}
    allow_env = os.environ.get("ORCH_PLUGINS")
    allow = _names(allow_env) if allow_env is not None else None
    if allow is None and config_plugins.get("enabled"):
        allow = set(config_plugins["enabled"])
    deny = _names(os.environ.get("ORCH_DISABLE_PLUGINS")) | set(config_plugins.get("disabled", []))
    return allow, deny


def _entry_points() -> list[metadata.EntryPoint]:
    eps = list(metadata.entry_points(group=GROUP))
    seen: dict[str, metadata.EntryPoint] = {}
    for ep in eps:
        seen.setdefault(ep.name, ep)  # the same dist can be on the path twice (editable)

    def order(ep: metadata.EntryPoint) -> tuple[bool, str]:
        dist = ep.dist.name if ep.dist else None
        return (dist != OWN_DISTRIBUTION, ep.name)

    return sorted(seen.values(), key=order)


def _unknown_hooks(pm: PluginManager, plugin: object) -> list[str]:
    """Names marked as hook implementations that match no hookspec (typos)."""
    unknown = []
    for attr in dir(plugin):
        if pm.parse_hookimpl_opts(plugin, attr) is not None and not hasattr(
            hookspecs, attr
        ):
            unknown.append(attr)
    return unknown


def load(config_plugins: dict | None = None, *, enabled: bool = True,
         extra: list[tuple[str, object]] | None = None, warn=None) -> PluginManager:
    """Build the plugin manager: built-ins first, then third parties, each by name order.

    ``warn`` receives one line per broken plugin or typo'd hook (the CLI prints it on stderr).
    ``extra`` registers in-process plugins (the testing kit uses it).
    """
    pm = PluginManager()
    allow, deny = _selection(config_plugins)
    if enabled:
        for ep in _entry_points():
            dist = ep.dist.name if ep.dist else None
            info = PluginInfo(name=ep.name, module=ep.value, distribution=dist,
                              version=ep.dist.version if ep.dist else None,
                              builtin=dist == OWN_DISTRIBUTION)
            pm.infos[ep.name] = info
            if ep.name in deny or (allow is not None and ep.name not in allow):
                info.status = "disabled"
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin never stops orch
                info.status = "broken"
                info.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                if warn:
                    warn(f"plugin {ep.name} skipped: {info.error}")
                continue
            _register(pm, ep.name, plugin, info, warn)
    for name, plugin in extra or []:
        info = PluginInfo(name=name, module=getattr(plugin, "__name__", repr(plugin)),
                          distribution=None, version=None, builtin=False)
        pm.infos[name] = info
        _register(pm, name, plugin, info, warn)
    return pm


def _register(pm: PluginManager, name: str, plugin: object, info: PluginInfo, warn) -> None:
    try:
        pm.register(plugin, name=name)
    except Exception as exc:
        info.status = "broken"
        info.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if warn:
            warn(f"plugin {name} skipped: {info.error}")
        return
    info.hooks = sorted(
        impl_name for impl_name in dir(plugin)
        if pm.parse_hookimpl_opts(plugin, impl_name) is not None and hasattr(hookspecs, impl_name)
    )
    for typo in _unknown_hooks(pm, plugin):
        msg = f"plugin {name}: hook implementation {typo!r} matches no hook (typo?)"
        info.warnings.append(msg)
        if warn:
            warn(msg)


def stderr_warn(line: str) -> None:
    print(f"orch: warning: {line}", file=sys.stderr)
