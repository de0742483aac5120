"""``orch plugins``: what is installed, where each plugin came from, and whether it loaded."""

from __future__ import annotations

import click

from orchestrator.cli.common import print_json


@click.command()
@click.argument("plugin_name", metavar="[NAME]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def plugins(plugin_name: str | None, as_json: bool) -> None:
    """List plugins: name, version, source (built-in or its distribution), the hooks it
    implements, and its status — loaded, broken (with the one-line error) or disabled
    (with the setting that disabled it); then each hook's order, first to last. With NAME,
    only that plugin and its hooks.

    \b
    Choose plugins with ORCH_PLUGINS=a,b (only these), ORCH_DISABLE_PLUGINS=a,b, or
    `plugins.enabled` / `plugins.disabled` in config.json. Single-file plugins: every *.py
    in --plugins-dir, config plugins.dir or ORCH_HOME/plugins. docs/plugins.md has the rest.
    """
    from orchestrator import runtime
    from orchestrator.plugin_host import order
    from orchestrator.plugin_host.hooks import HookRunner
    from orchestrator.plugin_host.plugins import HOOK_NAMES, folder_problem, load, selection

    section = runtime.config().section("plugins")
    pm = load(section)  # no stderr warnings: this listing is where they are shown
    infos = sorted(pm.infos.values(), key=lambda i: (not i.builtin, i.name))
    if plugin_name is not None:
        infos = [i for i in infos if i.name == plugin_name]
        if not infos:
            from orchestrator.errors import UsageProblem

            raise UsageProblem(f"no plugin {plugin_name!r} is installed; `orch plugins` lists them")
    allow, deny = selection(section)
    unknown = sorted(({*(allow or ()), *deny}) - {i.name for i in infos})
    runner = HookRunner(pm)
    hooks = {h for i in infos for h in i.hooks} if plugin_name is not None else HOOK_NAMES
    orders, problems = order.listing(runner, hooks), order.problems(pm, runner, hooks)
    if as_json:
        print_json({"plugins": [i.to_dict() for i in infos], "unknown_names": unknown,
                    "order": orders, "order_problems": problems})
        return
    if not infos:
        click.echo("No plugins installed (entry-point group `orch`, or a plugins dir).")
    else:
        _table(infos)
    if unknown:
        click.echo(f"Not installed, yet named in the plugin settings: {', '.join(unknown)}")
    missing = folder_problem(section)
    if missing:
        click.echo(missing[0].upper() + missing[1:])
    _orders(orders, problems)


def _orders(orders: dict, problems: list[str]) -> None:
    """Each hook's implementations in the order they run (docs/plugins.md#order)."""
    if not orders:
        return
    click.echo("")
    click.echo("ORDER (first to last; a [wrapper] starts before and finishes after the rest)")
    width = max(len(h) for h in orders)
    for hook, impls in orders.items():
        names = [f"{i['plugin']} [wrapper]" if i["wrapper"] else i["plugin"] for i in impls]
        click.echo(f"{hook.ljust(width)}  {' > '.join(names)}")
    for problem in problems:
        click.echo(f"    {problem}")


def _table(infos) -> None:
    """Aligned columns; under a plugin, its error or disabling setting and its warnings."""
    head = ("NAME", "VERSION", "SOURCE", "STATUS")
    cells = [(i.name, i.version or "-", i.source, i.status) for i in infos]
    widths = [max(len(row[c]) for row in [head, *cells]) for c in range(len(head))]

    def line(row, hooks: str) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + "  " + hooks

    click.echo(line(head, "HOOKS"))
    for info, row in zip(infos, cells, strict=True):
        click.echo(line(row, ", ".join(info.hooks) or "-"))
        for note in [info.error or info.reason, *info.warnings]:
            if note:
                click.echo(f"    {note}")
