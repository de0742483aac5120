"""``--no-daemon``, the flag every command a daemon may run carries: its own module so those
commands need not import ``cli/serve`` (which imports the daemon, which imports them)."""

from __future__ import annotations

import click


def no_daemon_option(command):
    """``--no-daemon`` on the commands a daemon may run: read by the client before click
    parses anything (orchestrator/daemon/client.py); in-process it does nothing more."""
    return click.option("--no-daemon", is_flag=True, expose_value=False,
                        help="Run in this process even when `orch serve` is up.")(command)
