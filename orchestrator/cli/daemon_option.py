"""``--no-daemon``, the flag every command a daemon may run carries: its own module so those
commands need not import ``cli/serve``."""

from __future__ import annotations

import click


def no_daemon_option(command):
    """``--no-daemon`` on the commands a daemon may run (``no_daemon``: cli/running.py
    sends the prepared run to a daemon only without it)."""
    return click.option("--no-daemon", "no_daemon", is_flag=True,
                        help="Run in this process even when `orch serve` is up.")(command)
