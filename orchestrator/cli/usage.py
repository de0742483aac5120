"""A usage mistake in one line, exit 2: click's own (an unknown option or command, a bad
value, a missing argument) as orch's (``UsageProblem``, a refused ``--context``) say theirs.

click prints its usage, a hint and ``Error: ...`` on three lines; orch prints
``orch: error: ...`` on one, naming the fix (the closest command, or where the options are
listed)."""

from __future__ import annotations

import difflib

import click

# click's own wordings that name no fix: the command's help lists what it takes
_CLICK_OWN = ("No such command", "Got unexpected extra argument", "Missing command",
              "Missing argument", "Missing option")


class OneLineUsage(click.UsageError):
    """A usage error that shows itself as one ``orch: error:`` line."""

    def __init__(self, line: str, exit_code: int = 2) -> None:
        super().__init__(line)
        self.line = line
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(self.line, err=True)


def one_line(exc: click.ClickException) -> click.ClickException:
    """``exc`` shown as one line (the help a bare group prints is left as it is)."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError | OneLineUsage):
        return exc
    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        if message.startswith("No such command"):
            message += _closest_command(ctx, message)
        if type(exc) is not click.UsageError or message.startswith(_CLICK_OWN):
            message += f" (`{ctx.command_path} -h` lists what it takes)"
    return OneLineUsage(f"orch: error: {message}", exc.exit_code)


def _closest_command(ctx: click.Context, message: str) -> str:
    name = message.split("'")[1] if message.count("'") >= 2 else ""
    group = ctx.command
    if not name or not isinstance(group, click.Group):
        return ""
    close = difflib.get_close_matches(name, group.list_commands(ctx), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""
