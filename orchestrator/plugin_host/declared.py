"""What plugins declare to the command line, asked through the runner: their options
(``register_options``) and their commands (``register_commands``); and, for plugins that are
off, the declarations whose values the user set (their modules imported to say so, never
registered).

A declaration is plugin code like any hook: it runs within its deadline, its exits caught,
its answer checked (a list of at most 64 ``Option``). One that blocks, exits, raises or
answers a flood costs one warning per plugin, its text capped, and the command goes on
without it. Each plugin's answer for a command is asked once per process: the CLI's parsing,
the budget checks and the run's ceilings all read the same answer.
"""

from __future__ import annotations

import weakref
from typing import Any

# the plugin's own object -> {(plugin, command): (its options, its warning or None)}
_ASKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _config():
    """The user's config for the deadline setting; None when config.json is broken (the
    command says that itself)."""
    from orchestrator import runtime
    from orchestrator.errors import OrchError

    try:
        return runtime.config()
    except OrchError:
        return None


def declared_options(pm, command: str, *, reserved=(), warn=None) -> list[tuple[str, Any]]:
    """The ``register_options`` hook for ``command``: [(plugin name, Option)], in
    registration order. A plugin that fails (a raise, an exit, its deadline) or answers
    anything but a list of Option has all its options skipped; an option whose name is taken
    (a built-in one or another plugin's) is skipped. ``warn`` hears one line per plugin."""
    from orchestrator.plugin_host.boundary import said
    from orchestrator.plugin_host.hooks import HookRunner

    order = pm.implementers("register_options")
    if not order:
        return []
    runner = HookRunner(pm, config=_config())
    found: list[tuple[str, list]] = []
    for plugin in order:
        asked = _asked(pm.origin(plugin))
        if (plugin, command) not in asked:
            failed: list[str] = []

            def on_error(name: str, hook: str, exc: BaseException, failed=failed) -> None:
                failed.append(f"plugin {name}: register_options failed, its options are "
                              f"skipped: {said(exc)}")

            options = runner.call_sync(plugin, "register_options", on_error, command=command)
            asked[(plugin, command)] = (list(options or []), failed[0] if failed else None)
        options, warning = asked[(plugin, command)]
        if warning and warn:
            warn(warning)
        found.append((plugin, options))
    taken = {name: "built in" for name in reserved}
    out = []
    for plugin, options in found:
        skipped = []
        for option in options:
            if option.name in taken:
                skipped.append(f"--{option.name} ({taken[option.name]})")
                continue
            taken[option.name] = f"declared by {plugin}"
            out.append((plugin, option))
        if skipped and warn:
            more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
            warn(f"plugin {plugin}: option {', '.join(skipped[:5])}{more} is taken; skipped")
    return out


def _asked(origin: object | None) -> dict:
    """What was asked of the plugin whose own object is ``origin``, in this process (kept
    while the object lives; one that cannot be weakly referred to is asked each time)."""
    try:
        return _ASKED.setdefault(origin, {})
    except TypeError:
        return {}


def timed_out(pm, command: str) -> bool:
    """Whether a plugin's declaration for ``command`` missed its deadline in this process
    (a slow machine, not a fact about the plugin: not remembered on disk)."""
    for plugin in pm.implementers("register_options"):
        _, warning = _asked(pm.origin(plugin)).get((plugin, command), ([], None))
        if warning and "HookTimeout" in warning:
            return True
    return False


def add_commands(pm, group, *, reserved=(), warn=None) -> None:
    """The ``register_commands`` hook: each plugin adds its commands to a group of its own,
    through the runner; what it added joins ``group`` once it returned in time. A plugin that
    raises (or exits, or takes past its deadline) has its commands skipped with one warning,
    and what it does later touches nothing; a command named like a built-in is skipped. The
    CLI always starts."""
    import click

    from orchestrator.plugin_host.boundary import said
    from orchestrator.plugin_host.hooks import HookRunner

    runner = HookRunner(pm, config=_config())
    for plugin in reversed(pm.implementers("register_commands")):
        staging = click.Group(name=group.name)
        failed: list[BaseException] = []
        runner.call_sync(plugin, "register_commands", lambda p, h, e, failed=failed: failed.append(e),
                         cli=staging)
        if failed:
            if warn:
                warn(f"plugin {plugin}: register_commands failed, its commands are skipped: "
                     f"{said(failed[0])}")
            continue
        for name, command in sorted(staging.commands.items()):
            if name in reserved:
                if warn:
                    warn(f"plugin {plugin}: command {name!r} is built in; skipped")
                continue
            group.add_command(command, name)


def off_declarations(pm, command: str, names: set[str] | None) -> list[tuple[str, Any]]:
    """[(plugin, Option)] plugins that are off in ``pm`` (disabled, or every one with
    ``--no-plugins``) would declare for ``command``: only those in ``names`` (the user set
    something for them; None: every one that is off). Each is imported and asked through
    the runner into a manager of its own, never the run's."""
    from orchestrator.plugin_host.plugins import BUILTIN_OPTIONS, load_off

    wanted = [info for name, info in getattr(pm, "infos", {}).items()
              if info.status == "disabled" and info.reason is not None
              and ":" not in name and " " not in name
              and (names is None or name in names)
              and (not info.builtin or name in BUILTIN_OPTIONS)]
    if not wanted:
        return []
    return declared_options(load_off(wanted), command)
