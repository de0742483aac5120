"""The plugins' declared options (``register_options``) as click options of ``orch fanout``
and ``orch council run`` (and the run ceilings of ``orch bench`` / ``bench resume``): parsed,
shown in ``--help`` and completed like the built-in ones, and handed to the command as one
``budgets`` dict (only those given) that goes into WaveSpec.options, where the plugin reads
it. A disabled plugin's options do not exist."""

from __future__ import annotations

import click

from orchestrator.cli.params import FiniteFloat

CEILINGS_ONLY = ("bench",)  # commands that render only the run ceilings (Option.run_ceiling)


def click_option(option) -> click.Option:
    """One declaration as a click option (no default: a flag not given is not passed on)."""
    kwargs: dict = {"help": option.help, "default": None}
    if option.type == "bool":
        return click.Option([option.flag], is_flag=True, default=None, flag_value=True,
                            help=option.help)
    if option.type == "int":
        kwargs["type"] = click.IntRange(
            None if option.min is None else int(option.min),
            None if option.max is None else int(option.max), min_open=option.min_open) \
            if option.min is not None or option.max is not None else click.INT
    elif option.type == "float":
        kwargs["type"] = FiniteFloat(option.min, min_open=option.min_open, max=option.max)
    elif option.type == "choice":
        kwargs["type"] = click.Choice(option.choices)
    if option.metavar:
        kwargs["metavar"] = option.metavar
    return click.Option([option.flag], **kwargs)


def declared(command: str, reserved=()) -> list:
    """[(plugin, Option)] the enabled plugins declare for ``command``: only the built-ins
    that declare options and the third parties are loaded (a light ``--help``)."""
    from orchestrator import runtime
    from orchestrator.plugin_host.plugins import declared_options, load, stderr_warn

    # broken plugins are reported by the run's own manager; here only option problems
    pm = load(runtime.config().section("plugins"), options_only=True)
    found = declared_options(pm, command, reserved=reserved, warn=stderr_warn)
    if command in CEILINGS_ONLY:  # a bench's trials are waves of their own
        found = [(plugin, o) for plugin, o in found if o.run_ceiling]
    return found


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
            except OrchError:  # a broken config.json: a TAB completes without them; a run
                if not completion.completing():  # says what is wrong with it, exit 1
                    raise
                ctx.meta[key] = []
        return ctx.meta[key]

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        extra = [click_option(option) for _, option in self.plugin_options(ctx)]
        if not extra:
            return params
        help_option = self.get_help_option(ctx)
        return [*(p for p in params if p is not help_option), *extra,
                *([help_option] if help_option is not None else [])]

    def invoke(self, ctx: click.Context):
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
