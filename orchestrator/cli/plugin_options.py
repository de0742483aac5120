"""The plugins' declared options (``register_options``) as click options of ``orch fanout``
and ``orch council run`` (and the run ceilings of ``orch bench`` / ``bench resume``): parsed,
shown in ``--help`` and completed like the built-in ones, and handed to the command as one
``budgets`` dict (only those given) that goes into WaveSpec.options, where the plugin reads
it. A disabled plugin's options do not exist; with a broken config.json none do: ``--help``
still prints (a line on stderr says why they are missing), a run exits 1 with the config
error."""

from __future__ import annotations

import click

from orchestrator.cli.params import Declared, DeclaredChoice


def click_option(option) -> click.Option:
    """One declaration as a click option (no default: a flag not given is not passed on); a
    value is checked by the check ``orch mcp`` and ``orch ui`` share (option_values.py)."""
    if option.type == "bool":
        return click.Option([option.flag], is_flag=True, default=None, flag_value=True,
                            help=option.described)
    kind = DeclaredChoice(option) if option.type == "choice" else Declared(option)
    return click.Option([option.flag], type=kind, default=None, help=option.described,
                        metavar=option.metavar)


def declared(command: str, reserved=()) -> list:
    """[(plugin, Option)] the enabled plugins declare for ``command`` (for a bench, only the
    run ceilings: its trials are waves of their own)."""
    from orchestrator.option_values import for_command

    return for_command(command, _declared(command, reserved))


def _declared(command: str, reserved=()) -> list:
    """Remembered on disk while nothing they came from changed (``plugin_host.option_cache``),
    else read from the built-ins that declare options and the third parties (a light
    ``--help``)."""
    from orchestrator import runtime
    from orchestrator.config import home
    from orchestrator.plugin_host import option_cache

    section = runtime.config().section("plugins")
    wanted = option_cache.key(command, reserved, section)
    path = option_cache.cache_file(home(), command)
    hit = option_cache.read(path, wanted)
    if hit is not None:
        options, warnings = hit
        if warnings:
            from orchestrator.notices import warn as stderr_warn

            for line in warnings:
                stderr_warn(line)
        return options
    from orchestrator.notices import warn as stderr_warn
    from orchestrator.plugin_host.declared import declared_options, timed_out
    from orchestrator.plugin_host.plugins import load

    warnings: list[str] = []

    def warn(line: str) -> None:
        warnings.append(line)
        stderr_warn(line)

    # broken plugins are reported by the run's own manager; here only option problems
    pm = load(section, options_only=True)
    options = declared_options(pm, command, reserved=reserved, warn=warn)
    if not timed_out(pm, command):  # a slow moment is not remembered as the plugin's answer
        option_cache.write(path, wanted, options, warnings, option_cache.sources(pm))
    return options


BROKEN = "plugin_options.config_error"  # ctx.meta: why the plugins' options are missing


class PluginOptions:
    """A command (or group) whose parameters include the plugins' options for
    ``plugin_command``."""

    def __init__(self, *args, plugin_command: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.plugin_command = plugin_command

    def plugin_options(self, ctx: click.Context) -> list:
        key = ("plugin_options", self.plugin_command)
        if key not in ctx.meta:
            from orchestrator.errors import OrchError
            from orchestrator.operations import completion

            reserved = {n.lstrip("-") for p in self.params for n in p.opts + p.secondary_opts}
            try:
                ctx.meta[key] = declared(self.plugin_command, reserved)
            except OrchError as exc:  # a broken config.json: TAB and --help go on without
                ctx.meta[key] = []  # them; a run says what is wrong with it, exit 1
                if not completion.completing():
                    ctx.meta[BROKEN] = exc
        return ctx.meta[key]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """With a broken config.json, the config error is the one line a run gets, even
        when a plugin's flag it could not declare is also refused ("No such option")."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError:
            if BROKEN in ctx.meta:
                raise ctx.meta[BROKEN] from None
            raise

    def get_help(self, ctx: click.Context) -> str:
        """The help still prints with a broken config.json, without the plugins' options; one
        line on stderr says why they are missing."""
        self.plugin_options(ctx)
        if BROKEN in ctx.meta:
            from orchestrator.notices import warn as stderr_warn

            stderr_warn(f"the plugins' options are not shown: {ctx.meta[BROKEN]}")
        return super().get_help(ctx)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        extra = [click_option(option) for _, option in self.plugin_options(ctx)]
        if not extra:
            return params
        help_option = self.get_help_option(ctx)
        return [*(p for p in params if p is not help_option), *extra,
                *([help_option] if help_option is not None else [])]

    def invoke(self, ctx: click.Context):
        if BROKEN in ctx.meta:
            raise ctx.meta[BROKEN]
        budgets = {}
        for plugin, option in self.plugin_options(ctx):
            value = ctx.params.pop(option.key, None)
            if value is None or value is False:
                continue
            if ctx.params.get("no_plugins") and value not in option.inert:
                from orchestrator.budget_guards import GuardOff

                raise GuardOff(f"{option.flag} needs the {plugin} plugin, which is not loaded "
                               f"(--no-plugins loads no plugins); drop --no-plugins, or drop "
                               f"{option.flag}")
            budgets[option.key] = value
        ctx.params["budgets"] = {**ctx.params.get("budgets", {}), **budgets}
        return super().invoke(ctx)


class PluginOptionsCommand(PluginOptions, click.Command):
    pass


class PluginOptionsGroup(PluginOptions, click.Group):
    pass
