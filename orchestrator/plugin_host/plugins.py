"""Finding and loading plugins: built-ins and third parties alike come from entry-point group
``orch``; a plugin that fails to import is listed as broken and everything else still runs."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import pluggy

from orchestrator import hookspecs
from orchestrator.plugin_host.listing import OWN_DISTRIBUTION
from orchestrator.security.secrets import scrub

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

    @property
    def source(self) -> str:
        if self.builtin:
            return "built-in"
        return self.distribution or "in-process"

    def to_dict(self) -> dict:
        return {"name": self.name, "module": self.module, "version": self.version,
                "source": self.source, "builtin": self.builtin, "status": self.status,
                "error": self.error, "reason": self.reason, "hooks": self.hooks,
                "warnings": self.warnings}


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
    the manager :func:`add_commands` needs, for a light ``orch --help``. ``options_only=True``
    likewise keeps only the built-ins of ``BUILTIN_OPTIONS``: the manager
    :func:`declared_options` needs.
    """
    pm = PluginManager()
    allow, deny = selection(config_plugins)
    extra = list(extra or [])
    extra_names = {name for name, _ in extra}
    if enabled:
        for ep in _entry_points():
            dist, taken_by = ep.dist, ep.taken_by
            if ep.name in extra_names or (not third_party and dist != OWN_DISTRIBUTION):
                continue
            if commands_only and dist == OWN_DISTRIBUTION and ep.name not in BUILTIN_COMMANDS:
                continue
            if options_only and dist == OWN_DISTRIBUTION and ep.name not in BUILTIN_OPTIONS:
                continue
            info = PluginInfo(name=ep.name, module=ep.value, distribution=dist,
                              version=ep.version,
                              builtin=dist == OWN_DISTRIBUTION)
            if taken_by is not None:
                _broken(info, f"the name {ep.name!r} is taken by {taken_by}; rename the "
                              "entry point or uninstall one of them", warn)
                pm.infos[f"{ep.name} ({dist})"] = info
                continue
            pm.infos[ep.name] = info
            info.reason = _why_disabled(ep.name, allow, deny)
            if info.reason:
                info.status = "disabled"
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin never stops orch
                _broken(info, one_line(exc), warn)
                continue
            _register(pm, ep.name, plugin, info, warn)
    for name, plugin in extra:
        if pm.is_registered(plugin):  # installed under another name: this copy replaces it
            replaced = pm.infos[pm.get_name(plugin)]
            replaced.status, replaced.reason = "disabled", f"replaced by in-process {name!r}"
            pm.unregister(plugin)
        info = PluginInfo(name=name, module=getattr(plugin, "__name__", type(plugin).__name__),
                          distribution=None, version=None, builtin=False)
        pm.infos[name] = info
        _register(pm, name, plugin, info, warn)
    return pm


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The error on one line (pluggy's validation errors span several, all needed), with
    any key value scrubbed: it is printed and listed."""
    text = scrub(" ".join(f"{type(exc).__name__}: {exc}".split()))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _broken(info: PluginInfo, error: str, warn) -> None:
    info.status, info.error = "broken", error
    if warn:
        warn(f"plugin {info.name} skipped: {error}")


def _register(pm: PluginManager, name: str, plugin: object, info: PluginInfo, warn) -> None:
    try:
        pm.register(plugin, name=name)
    except Exception as exc:  # e.g. an argument name the hookspec does not have
        _broken(info, one_line(exc), warn)
        return
    # attribute -> the hook pluggy files it under (``specname`` when given): a warning names
    # the attribute, which is what the author wrote in the module.
    marked = {}
    for attr in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attr)
        if opts is not None:
            marked[attr] = (opts.get("specname") or attr, opts)
    info.hooks = sorted({hook for hook, _ in marked.values() if hook in HOOK_NAMES})
    for attr, (hook, opts) in marked.items():
        if hook not in HOOK_NAMES:
            spec = "" if hook == attr else f" (specname {hook!r})"
            info.warnings.append(f"hook implementation {attr!r}{spec} matches no hook (typo?)")
        elif opts.get("hookwrapper"):
            info.warnings.append(f"{attr} uses hookwrapper=True, which orch does not call; "
                                 "use @hookimpl(wrapper=True)")
    for attr in sorted(HOOK_NAMES - set(marked) - set(info.hooks)):
        if callable(getattr(plugin, attr, None)):
            info.warnings.append(f"{attr} is not marked @hookimpl, so it never runs")
    for message in info.warnings:
        if warn:
            warn(f"plugin {name}: {message}")


def add_commands(pm: PluginManager, group, *, reserved=(), warn=None) -> None:
    """The ``register_commands`` hook: a plugin that raises (or exits, or takes longer than
    its hook deadline), or names a built-in command, has its commands skipped with one
    warning; the CLI always starts. A third party's runs on a worker thread (hook_deadline)."""
    from orchestrator.plugin_host.deadline import DEADLINE_S, call_blocking, hook_deadline_s

    deadline = None
    for impl in reversed(pm.hook.register_commands.get_hookimpls()):
        if impl.wrapper or impl.hookwrapper:
            continue
        before = dict(group.commands)
        call = functools.partial(impl.function, *[{"cli": group}[a] for a in impl.argnames])
        try:
            if pm.is_builtin(impl.plugin_name):
                call()
            else:
                deadline = deadline or hook_deadline_s() or DEADLINE_S
                call_blocking(call, deadline)
        except Exception as exc:
            group.commands = before
            if warn:
                warn(f"plugin {impl.plugin_name}: register_commands failed, its commands are "
                     f"skipped: {one_line(exc)}")
            continue
        for clash in sorted((set(group.commands) - set(before)) & set(reserved)):
            group.commands.pop(clash)
            if warn:
                warn(f"plugin {impl.plugin_name}: command {clash!r} is built in; skipped")


def declared_options(pm: PluginManager, command: str, *, reserved=(), warn=None) -> list:
    """The ``register_options`` hook for ``command``: [(plugin name, Option)], in
    registration order. A plugin that raises, returns something that is not an Option, or
    names an option that is taken (a built-in one or another plugin's) has that option (or
    all of its options) skipped with one warning."""
    from orchestrator.options import Option

    taken = {name: "built in" for name in reserved}
    out = []
    for impl in pm.hook.register_options.get_hookimpls():  # in registration order
        if impl.wrapper or impl.hookwrapper:
            continue
        try:
            declared = list(impl.function(*[{"command": command}[a] for a in impl.argnames])
                            or [])
        except Exception as exc:
            if warn:
                warn(f"plugin {impl.plugin_name}: register_options failed, its options are "
                     f"skipped: {one_line(exc)}")
            continue
        for option in declared:
            if not isinstance(option, Option):
                if warn:
                    warn(f"plugin {impl.plugin_name}: register_options returned "
                         f"{type(option).__name__}, not an orchestrator.options.Option; "
                         "skipped")
                continue
            if option.name in taken:
                if warn:
                    warn(f"plugin {impl.plugin_name}: option --{option.name} is "
                         f"{taken[option.name]}; skipped")
                continue
            taken[option.name] = f"declared by {impl.plugin_name}"
            out.append((impl.plugin_name, option))
    return out


def stderr_warn(line: str) -> None:
    """``orch: warning: LINE`` on stderr (not under -q or LOG_LEVEL=error)."""
    from orchestrator.notices import say

    say(line, "warning")
