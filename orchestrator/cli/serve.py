"""``orch serve start|stop|status|reload``: the warm daemon (docs/serve.md), through its
client (orchestrator/daemon/client.py): the CLI imports no other module of the daemon."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import click

from orchestrator.cli.params import FiniteFloat
from orchestrator.errors import OrchError
from orchestrator.pids import pid_alive

STARTING_WAIT_S = 10.0  # `orch serve start` while one warms up: how long it waits for it


@click.group()
def serve() -> None:
    """The warm daemon: fanout, council run and bench start in a fraction of a second.

    \b
    One per user, on a Unix socket in $XDG_RUNTIME_DIR/orch/ (else a checked directory of
    yours under $TMPDIR), only for your uid. Runs are prepared in your shell and run there
    when it runs the same orch version and config; pass --no-daemon to run in-process. By
    default the first such command with none up starts it (`daemon: auto`); ORCH_DAEMON=off
    or `"daemon": "off"` in config.json: never.
    """


@serve.command("start")
@click.option("--foreground", is_flag=True, help="Stay attached (systemd, launchd, a container).")
@click.option("--idle", "idle_min", type=FiniteFloat(0, min_open=True), metavar="MINUTES",
              help="Stop after this long without a job (default: serve.idle_minutes in "
                   "config.json, else 30).")
@click.option("--quiet", "-q", is_flag=True, help="Say nothing when it started.")
def start(foreground: bool, idle_min: float | None, quiet: bool) -> None:
    """Start the daemon (in the background unless --foreground)."""
    from orchestrator.daemon import client

    if foreground:
        client.foreground(idle_min)  # this process becomes the daemon
        return
    greeted = client.hello(client.socket_path())
    if greeted is not None:
        greeted[0].close()
        if not quiet:
            click.echo(f"orch serve: already running (pid {greeted[1].get('pid')}) on "
                       f"{client.socket_path()}")
        return
    pid = client.starting()
    if pid is not None:  # warming up, or waiting for the run that started it to end
        up = client.wait_until_up(STARTING_WAIT_S)
        if not quiet:
            if up is not None:
                click.echo(f"orch serve: already running (pid {up}) on {client.socket_path()}")
            else:
                click.echo(f"orch serve: starting (pid {pid or '?'}) on "
                           f"{client.socket_path()}; it answers once warm (`orch serve "
                           "status`)")
        return
    pid = client.start_background(idle_min)
    if not quiet:
        click.echo(f"orch serve: started (pid {pid}) on {client.socket_path()}")


@serve.command("stop")
def stop() -> None:
    """Stop the daemon; running jobs end as on SIGTERM (exit 143, files final)."""
    from orchestrator.daemon import client

    reply = client.ask("stop")
    pid = (reply or {}).get("pid")
    if reply is None:
        pid = client.pid_from_file() or client.starting()
        if not pid:
            click.echo("orch serve: not running")
            return
        os.kill(pid, signal.SIGTERM)  # it does not answer on its socket: ask it the old way
    deadline = time.monotonic() + 40
    while pid and pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid and pid_alive(pid):
        raise OrchError(f"orch serve (pid {pid}) did not stop; kill it: `kill {pid}`")
    click.echo(f"orch serve: stopped (pid {pid})")


@serve.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(as_json: bool) -> None:
    """Is it up: pid, version, socket, jobs, idle stop, rate gates. Exit 3 when not running
    (4 while it is starting)."""
    from orchestrator.daemon import client

    reply = client.ask("status")
    if reply is None:
        pid = client.starting()
        if pid is not None:
            if as_json:
                click.echo(json.dumps({"starting": True, "pid": pid or None,
                                       "socket": str(client.socket_path())}, indent=2))
            else:
                click.echo(f"orch serve: starting, pid {pid or '?'} (it answers on "
                           f"{client.socket_path()} once warm)")
            sys.exit(4)
        why = client.why_cold()
        click.echo("orch serve: not running (start it: `orch serve start`)"
                   + (f"; it cannot run here: {why}" if why else ""))
        sys.exit(3)
    if reply.get("t") == "refused":
        theirs = reply.get("compat") or {}
        click.echo(f"orch serve: running (pid {reply.get('pid')}) but unusable here: "
                   f"{_why(reply.get('why'), theirs)}")
        sys.exit(1)
    reply.pop("t", None)
    if as_json:
        click.echo(json.dumps(reply, indent=2))
        return
    click.echo(f"orch serve: running (pid {reply['pid']}, orch {reply['version']}) on "
               f"{reply['socket']}")
    click.echo(f"ORCH_HOME {reply['home']} · up {reply['uptime_s']:.0f} s · "
               f"{reply['jobs_running']} job(s) running, {reply['jobs_served']} served · "
               f"idle stop after {reply['idle_stop_min']:g} min")
    for g in reply["gates"]:
        click.echo(f"gate {g['endpoint']}: limit {g['limit']} of {g['ceiling']}, "
                   f"{g['in_flight']} in flight, {g['rate_limited']} × 429")


def _why(why: str | None, theirs: dict) -> str:
    if why == "version":
        return f"it is orch {theirs.get('version')}; stop it: `orch serve stop`"
    if why == "home":
        return f"it serves ORCH_HOME {theirs.get('home')}"
    if why == "config":
        return ("its settings (ORCH_PLUGINS, ORCH_DISABLE_PLUGINS, ORCH_LEDGER_URL, ...) "
                "differ from this shell's; start it from here: `orch serve stop && orch "
                "serve start`")
    return "its config is older and jobs run; `orch serve reload` when they end"


@serve.command("reload")
def reload() -> None:
    """Re-read config.json and the plugins (refused while jobs run)."""
    from orchestrator.daemon import client

    reply = client.ask("reload")
    if reply is None:
        raise OrchError("orch serve is not running; start it: `orch serve start`")
    if reply.get("error"):
        raise OrchError(f"not reloaded: {reply['error']}")
    click.echo("orch serve: reloaded config and plugins")
