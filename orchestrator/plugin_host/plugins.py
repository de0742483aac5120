"""Finding and loading plugins: built-ins and third parties alike come from entry-point group
``orch``; a plugin that fails to import is listed as broken and everything else still runs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pluggy

from orchestrator import hookspecs
from orchestrator.plugin_host.listing import OWN_DISTRIBUTION
from orchestrator.plugin_host.snapshot import Declared, Snapshot

GROUP = "orch"
HOOK_NAMES = frozenset(n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n),
                                                               "orch_spec"))
# The built-in plugins (entry point names) that implement ``register_commands``: none today.
# Declared here so ``orch --help`` and a plugin's subcommand load only these and the third
# parties, never every built-in's module and what it imports (pathspec, the credential
# scanner, the catalog). tests/test_plugins_loading.py holds it true to the modules.
BUILTIN_COMMANDS: frozenset[str] = frozenset()
# The built-ins that implement ``register_options``: ``orch fanout --help`` (and the option
# parsing of every run) loads only these and the third parties.
BUILTIN_OPTIONS: frozenset[str] = frozenset({"cost_ceiling", "output_budget", "turn_budget"})


@dataclass
class PluginInfo:
    name: str
    module: str
    distribution: str | None
    version: str | None
    builtin: bool
    status: str = "loaded"  # loaded | broken | disabled
    error: str | None = None  # why it is broken
    reason: str | None = None  # why it is disabled
    hooks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    declared: Declared = field(default_factory=Declared)  # its constants, read once
    files: list[str] = field(default_factory=list)  # where its code came from
    file: str | None = None  # a single-file plugin's path (directory.py)

    @property
    def key_variables(self) -> tuple[str, ...]:
        """Its KEY_VARIABLES: what a run hands it (keys.py)."""
        return self.declared.key_variables

    @property
    def source(self) -> str:
        if self.builtin:
            return "built-in"
        if self.file:
            from orchestrator.plugin_host.directory import SOURCE

            return SOURCE
        return self.distribution or "in-process"

    def to_dict(self) -> dict:
        return {"name": self.name, "module": self.module, "version": self.version,
                "source": self.source, "builtin": self.builtin, "status": self.status,
                "error": self.error, "reason": self.reason, "hooks": self.hooks,
                "warnings": self.warnings, "key_variables": list(self.key_variables),
                "file": self.file}


class PluginManager(pluggy.PluginManager):
    """pluggy's manager plus what orch knows about where each plugin came from. A third
    party is registered as the plain namespace of its hook functions (snapshot.py), so
    nothing in orch reaches the plugin's object but through the runner."""

    def __init__(self) -> None:
        super().__init__("orch")
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self._origins: dict[int, str] = {}  # id(the plugin's own object) -> its name
        self._origin_of: dict[str, object] = {}

    def is_builtin(self, plugin_name: str | None) -> bool:
        info = self.infos.get(plugin_name or "")
        return bool(info and info.builtin)

    def loaded(self, plugin_name: str) -> bool:
        """Whether the plugin named so is registered (loaded and not broken)."""
        return self.get_plugin(plugin_name) is not None  # runner: only whether it is there

    def declared(self, plugin_name: str | None) -> Declared:
        """The constants the plugin declares (FAIL_CLOSED, HOOK_DEADLINE_S, ...), as read
        when it was loaded."""
        info = self.infos.get(plugin_name or "")
        return info.declared if info is not None else Declared()

    def origin(self, plugin_name: str) -> object | None:
        """The plugin's own object (its module): the same code loaded into two managers is
        one plugin (declared.py asks it once)."""
        return self._origin_of.get(plugin_name)

    def implementers(self, hook: str) -> list[str]:
        """The plugins that implement ``hook`` (plain implementations), in registration
        order."""
        caller = getattr(self.hook, hook, None)  # runner: only names are read
        if caller is None:
            return []
        impls = caller.get_hookimpls()  # runner: only names are read
        return [i.plugin_name for i in impls if not (i.wrapper or i.hookwrapper)]

    def builtin_function(self, plugin_name: str, attr: str):
        """A loaded built-in plugin's module-level function (orch's own code, called inline:
        the model listing asks ``tiers.decide``); None for a third party or a missing one."""
        if not self.is_builtin(plugin_name):
            return None
        module = self.get_plugin(plugin_name)  # runner: a built-in, orch's own code
        function = getattr(module, attr, None)
        return function if callable(function) else None


def _names(value: str | None) -> set[str]:
    return {n.strip() for n in (value or "").split(",") if n.strip()}


def selection(config_plugins: dict | None) -> tuple[set[str] | None, dict[str, str]]:
    """(allowlist or None, {denied name: where}) from ORCH_PLUGINS / ORCH_DISABLE_PLUGINS,
    then config ``plugins.enabled`` / ``plugins.disabled``."""
    config_plugins = config_plugins or {}
    allow_env = os.environ.get("ORCH_PLUGINS")
    allow = _names(allow_env) if allow_env is not None else None
    if allow is None and config_plugins.get("enabled"):
        allow = set(config_plugins["enabled"])
    deny = {n: "config plugins.disabled" for n in config_plugins.get("disabled", [])}
    deny.update({n: "ORCH_DISABLE_PLUGINS" for n in _names(os.environ.get("ORCH_DISABLE_PLUGINS"))})
    return allow, deny


def _entry_points() -> list:
    """The ``orch`` entry points (``listing.Found``), remembered in ORCH_HOME while the
    installed distributions are unchanged: reading them costs ``orch --help`` a third."""
    from orchestrator.config import home
    from orchestrator.plugin_host.listing import entry_points

    try:
        where = home()
    except (OSError, RuntimeError):  # no home directory to find: read them every time
        where = None
    return entry_points(GROUP, where)


def _why_disabled(name: str, allow: set[str] | None, deny: dict[str, str]) -> str | None:
    if name in deny:
        return f"disabled by {deny[name]}"
    if allow is not None and name not in allow:
        return "not in the allowlist (ORCH_PLUGINS or config plugins.enabled)"
    return None


def load(config_plugins: dict | None = None, *, enabled: bool = True,
         extra: list[tuple[str, object]] | None = None, warn=None,
         third_party: bool = True, commands_only: bool = False,
         options_only: bool = False) -> PluginManager:
    """Build the plugin manager: built-ins first, then third parties, each by name order.

    ``warn`` receives one line per broken plugin or suspicious hook (the CLI prints it on
    stderr). ``extra`` registers in-process plugins (the testing kit uses it); an extra
    plugin replaces an installed one of the same name, so a plugin's own tests can pass it.
    ``third_party=False`` loads only orch's own built-ins from the entry points (the testing
    kit's isolation: a test's result must not depend on what else is installed).
    ``commands_only=True`` skips the built-ins that declare no command (``BUILTIN_COMMANDS``):
    the manager ``declared.add_commands`` needs, for a light ``orch --help``.
    ``options_only=True`` likewise keeps only the built-ins of ``BUILTIN_OPTIONS``: the
    manager ``declared.declared_options`` needs.

    A third party is imported and read through the runner (:func:`import_plugin`): within
    its import deadline, its exits caught, its failure one bounded line; it is then listed
    as ``broken``. This is the one place plugins are loaded from: the entry points, then the
    plugins directory's files (directory.py), each the same way.
    """
    from orchestrator.plugin_host.chosen import current

    pm = PluginManager()
    allow, deny = selection(config_plugins)
    if (choice := current()) is not None:  # the testing kit's isolation (chosen.py)
        enabled, third_party = enabled and choice.builtins, third_party and choice.third_party
        # the kit's plugin stands for an installed one: a run that disables it by name (a
        # bench contestant's disable_plugins, ORCH_DISABLE_PLUGINS) runs without it
        extra = [*((n, p) for n, p in choice.extra if n not in deny), *(extra or [])]
    if enabled and third_party and warn and (problem := folder_problem(config_plugins)):
        warn(problem)
    extra = list(extra or [])
    extra_names = {name for name, _ in extra}
    if enabled:
        for ep in _found(config_plugins):
            dist, taken_by = ep.dist, ep.taken_by
            if ep.name in extra_names or (not third_party and dist != OWN_DISTRIBUTION):
                continue
            if commands_only and dist == OWN_DISTRIBUTION and ep.name not in BUILTIN_COMMANDS:
                continue
            if options_only and dist == OWN_DISTRIBUTION and ep.name not in BUILTIN_OPTIONS:
                continue
            info = PluginInfo(name=ep.name, module=ep.value, distribution=dist,
                              version=ep.version,
                              builtin=dist == OWN_DISTRIBUTION, file=_file(ep))
            if taken_by is not None:
                _broken(info, _clash(ep), warn)
                pm.infos[f"{ep.name} ({dist or info.source})"] = info
                continue
            pm.infos[ep.name] = info
            info.reason = _why_disabled(ep.name, allow, deny)
            if info.reason:
                info.status = "disabled"
                continue
            if info.file and ep.refused:  # a plugin file someone else could have written
                _broken(info, ep.refused, warn)
                continue
            if info.builtin:  # orch's own code: imported and read inline
                try:
                    plugin = ep.load()  # runner: a built-in, orch's own code
                except Exception as exc:  # a broken plugin never stops orch
                    _broken(info, one_line(exc), warn)
                    continue
                _register(pm, ep.name, plugin, info, warn)
                continue
            read = import_plugin(pm, ep.name, ep.load, info, warn)
            if read is not None:
                plugin, snap = read
                _register(pm, ep.name, plugin, info, warn, snap)
    for name, plugin in extra:
        if id(plugin) in pm._origins:  # installed under another name: this copy replaces it
            replaced = pm.infos[pm._origins.pop(id(plugin))]
            pm._origin_of.pop(replaced.name, None)
            replaced.status, replaced.reason = "disabled", f"replaced by in-process {name!r}"
            pm.unregister(name=replaced.name)
        info = PluginInfo(name=name, module=module_name(plugin), distribution=None,
                          version=None, builtin=False)
        pm.infos[name] = info
        read = import_plugin(pm, name, lambda plugin=plugin: plugin, info, warn)
        if read is not None:
            _register(pm, name, plugin, info, warn, read[1])
    return pm


def _found(config_plugins: dict | None) -> list:
    """The entry points, then the plugins directory's files (each refused when an entry
    point has its name): everything ``load`` loads, in its order."""
    from orchestrator.plugin_host import directory

    eps = _entry_points()
    return [*eps, *directory.found(config_plugins, {ep.name: ep.dist for ep in eps})]


def folder_problem(config_plugins: dict | None) -> str | None:
    """A plugins folder named on purpose that does not exist (said, never fatal)."""
    from orchestrator.plugin_host.directory import missing

    return missing(config_plugins)


def _file(found) -> str | None:
    from orchestrator.plugin_host.directory import FileFound

    return found.value if isinstance(found, FileFound) else None


def _clash(found) -> str:
    from orchestrator.plugin_host.directory import clash

    if _file(found):
        return clash(found)
    return (f"the name {found.name!r} is taken by {found.taken_by}; rename the entry point "
            "or uninstall one of them")


def listed(config_plugins: dict | None, reason: str) -> PluginManager:
    """Every installed plugin listed as off (``reason``), none imported: what a bare run
    (``--no-plugins``) leaves off, for :func:`declared.off_declarations` to ask the ones
    the user set something for."""
    pm = PluginManager()
    for ep in _found(config_plugins):
        if ep.taken_by is None:
            pm.infos[ep.name] = PluginInfo(
                name=ep.name, module=ep.value, distribution=ep.dist, version=ep.version,
                builtin=ep.dist == OWN_DISTRIBUTION, status="disabled", reason=reason,
                file=_file(ep))
    return pm


def load_off(infos: list[PluginInfo]) -> PluginManager:
    """Plugins that are off for the run, loaded into a manager of their own so that what
    they declare can be read (declared.off_declarations); the run never sees it."""
    from pathlib import Path

    from orchestrator.plugin_host.directory import FileFound, unsafe
    from orchestrator.plugin_host.listing import Found

    pm = PluginManager()
    for off in infos:
        info = PluginInfo(name=off.name, module=off.module, distribution=off.distribution,
                          version=off.version, builtin=off.builtin, file=off.file)
        pm.infos[off.name] = info
        if off.file and unsafe(Path(off.file)):
            continue  # a file someone else could have written is never run, even to ask it
        found = FileFound(off.name, off.file) if off.file else \
            Found(off.name, off.module, off.distribution, off.version)
        if info.builtin:
            try:
                plugin = found.load()  # runner: a built-in, orch's own code
            except Exception:  # noqa: BLE001 - it cannot say: nothing declared
                continue
            _register(pm, off.name, plugin, info, None)
            continue
        read = import_plugin(pm, off.name, found.load, info, None)
        if read is not None:
            _register(pm, off.name, read[0], info, None, read[1])
    return pm


def module_name(plugin: object) -> str:
    """The module an in-process plugin is (or its class's), read without its own code."""
    import inspect
    import types

    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    return str(inspect.getattr_static(type(plugin), "__module__", "?"))


_SLOW_IMPORTS: dict[str, float] = {}  # entry point value -> seconds its import took here


def import_plugin(pm: PluginManager, name: str, load_it, info: PluginInfo,
                  warn) -> tuple[object, Snapshot] | None:
    """A third party imported (``load_it``) and read (snapshot.take) through the runner, on
    a worker within the import deadline: (its object, what it is made of), or None with the
    plugin listed broken. A guard that could not be imported keeps the ``FAIL_CLOSED`` its
    source declares (read, never run), so a run that relies on it refuses. An import slower
    than SLOW_IMPORT_S is named: every command that loads the plugin waits for it."""
    import time

    from orchestrator.plugin_host.boundary import HookTimeout, call_blocking, guard_exits, said
    from orchestrator.plugin_host.deadline import SLOW_IMPORT_S, import_deadline_s
    from orchestrator.plugin_host.snapshot import fail_closed_in_source, take

    guard_exits()
    seconds = import_deadline_s()

    def read() -> tuple[object, Snapshot]:
        plugin = load_it()  # runner: inside call_blocking
        return plugin, take(pm, plugin, name, HOOK_NAMES)

    started = time.monotonic()
    try:
        found = call_blocking(read, seconds)
    except Exception as exc:  # a broken plugin never stops orch
        error = said(exc)
        if isinstance(exc, HookTimeout):
            error = (f"HookTimeout: its import did not finish within {seconds:g} s (wait "
                     f"longer with ORCH_IMPORT_DEADLINE_S, or disable it: "
                     f"ORCH_DISABLE_PLUGINS={name})")
        _broken(info, error, warn)
        try:
            closed = call_blocking(lambda: fail_closed_in_source(info.module), 2.0)
        except Exception:  # noqa: BLE001 - its source cannot say: nothing declared
            closed = False
        info.declared = Declared(fail_closed=closed)
        return None
    took = time.monotonic() - started
    if took > SLOW_IMPORT_S:
        _SLOW_IMPORTS[info.module] = took
    took = max(took, _SLOW_IMPORTS.get(info.module, 0.0))  # imported before in this process
    if took > SLOW_IMPORT_S:  # said with its other warnings (and under it in `orch plugins`)
        found[1].warnings.insert(0, f"took {took:.1f} s to import: every command that loads "
                                    "it waits that long (import heavy modules inside its "
                                    f"hooks, or disable it: ORCH_DISABLE_PLUGINS={name})")
    return found


def declared_name(plugin: object) -> str | None:
    """The ``NAME`` an in-process plugin declares (read through the runner: the testing kit
    names a plugin it is given)."""
    from orchestrator.plugin_host.boundary import call_blocking
    from orchestrator.plugin_host.snapshot import read_declared

    try:
        return call_blocking(lambda: read_declared(plugin, "?")[0].name, 5.0)
    except Exception:  # noqa: BLE001 - it cannot say: named otherwise
        return None


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The error on one line (pluggy's validation errors span several, all needed), capped,
    with any key value scrubbed: it is printed and listed."""
    from orchestrator.plugin_host.boundary import said

    return said(exc) if limit >= 300 else said(exc)[:limit]


def _broken(info: PluginInfo, error: str, warn) -> None:
    info.status, info.error = "broken", error
    if warn:
        warn(f"plugin {info.name} skipped: {error}")


def _register(pm: PluginManager, name: str, plugin: object, info: PluginInfo, warn,
              snap: Snapshot | None = None) -> None:
    """Register ``plugin``: a built-in as itself (read inline), a third party as the
    namespace of its hook functions (``snap``, read through the runner)."""
    from orchestrator.plugin_host.snapshot import take

    if snap is None:
        snap = take(pm, plugin, name, HOOK_NAMES)  # runner: a built-in, read inline
        registered = plugin
    else:
        registered = snap.namespace()
    info.declared, info.files = snap.declared, snap.files
    try:
        pm.register(registered, name=name)
    except Exception as exc:  # e.g. an argument name the hookspec does not have
        _broken(info, one_line(exc), warn)
        return
    pm._origins[id(plugin)] = name
    pm._origin_of[name] = plugin
    marked = {opts.get("specname") or attr
              for attr in snap.hooks
              if (opts := pm.parse_hookimpl_opts(registered, attr)) is not None}
    info.hooks = sorted(marked & HOOK_NAMES)
    info.warnings = list(snap.warnings)
    for message in info.warnings:
        if warn:
            warn(f"plugin {name}: {message}")


def key_variables(pm: PluginManager) -> set[str]:
    """What the loaded plugins declared they read (``KEY_VARIABLES``, read once through the
    runner with the plugin's other constants: snapshot.py)."""
    return {name for info in pm.infos.values() if info.status == "loaded"
            for name in info.declared.key_variables}
