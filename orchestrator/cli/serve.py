"""``orch serve start|stop|status|reload``: the warm daemon (docs/serve.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import click

from orchestrator.cli.params import FiniteFloat
from orchestrator.errors import OrchError
from orchestrator.pids import pid_alive

START_TIMEOUT_S = 60.0  # importing litellm on a busy machine


def _hello():
    from orchestrator.daemon import paths
    from orchestrator.daemon.client import hello

    path = paths.socket_path()
    return hello(path)  # raises paths.Untrusted for a socket that is not ours


def _ask(kind: str) -> dict | None:
    greeted = _hello()
    if greeted is None:
        return None
    chan, reply = greeted
    try:
        chan.send({"t": kind})  # control is served even by a daemon unfit for jobs here
        answer = chan.recv()
    except Exception:
        return None
    finally:
        chan.close()
    return answer if reply.get("ok") or kind != "status" else {
        **answer, "t": "refused", "why": reply.get("why"), "compat": reply.get("compat")}


@click.group()
def serve() -> None:
    """The warm daemon: fanout, council run and bench start in a fraction of a second.

    \b
    One per user, on a Unix socket in $XDG_RUNTIME_DIR/orch/ (else ORCH_HOME/run/), only
    for your uid. Clients use it when it runs the same orch version and config; pass
    --no-daemon to run in-process. By default the first such command with none up starts it
    (`daemon: auto`); ORCH_DAEMON=off or `"daemon": "off"` in config.json: never.
    """


@serve.command("start")
@click.option("--foreground", is_flag=True, help="Stay attached (systemd, launchd, a container).")
@click.option("--idle", "idle_min", type=FiniteFloat(0, min_open=True), metavar="MINUTES",
              help="Stop after this long without a job (default: serve.idle_minutes in "
                   "config.json, else 30).")
@click.option("--quiet", "-q", is_flag=True, help="Say nothing when it started.")
def start(foreground: bool, idle_min: float | None, quiet: bool) -> None:
    """Start the daemon (in the background unless --foreground)."""
    from orchestrator.daemon import paths

    if idle_min is None:
        idle_min = _configured_idle()
    if foreground:
        from orchestrator.daemon.autostart import AFTER_ENV, LOCK_FD_ENV, wait_for_starter
        from orchestrator.daemon.environment import start_clean

        start_clean((LOCK_FD_ENV, AFTER_ENV))  # its environment holds no key (serve.md)
        from orchestrator.daemon.server import run

        wait_for_starter()  # started by a run (daemon: auto): warm up once it has ended

        run(idle_min)
        return
    greeted = _hello()
    if greeted is not None:
        greeted[0].close()
        pid = greeted[1].get("pid")
        if not quiet:
            click.echo(f"orch serve: already running (pid {pid}) on {paths.socket_path()}")
        return
    from orchestrator.daemon.environment import daemon_environment

    run_dir = paths.ensure_run_dir()
    with open(paths.log_path(), "ab") as log:
        idle = ["--idle", repr(idle_min)] if idle_min is not None else []
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "serve", "start",
                                 "--foreground", *idle],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, cwd=str(run_dir),
                                env=daemon_environment(os.environ))  # no key (serve.md)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise OrchError(f"orch serve did not start (exit {proc.returncode}); see "
                            f"{paths.log_path()}")
        greeted = _hello()
        if greeted is not None:
            greeted[0].close()
            if not quiet:
                click.echo(f"orch serve: started (pid {proc.pid}) on {paths.socket_path()}")
            return
        time.sleep(0.1)
    raise OrchError(f"orch serve did not answer within {START_TIMEOUT_S:.0f} s; see "
                    f"{paths.log_path()}")


def _configured_idle() -> float | None:
    from orchestrator.config import Config

    value = (Config.load().data.get("serve") or {}).get("idle_minutes")
    return float(value) if value else None


@serve.command("stop")
def stop() -> None:
    """Stop the daemon; running jobs end as on SIGTERM (exit 143, files final)."""
    from orchestrator.daemon import paths

    reply = _ask("stop")
    pid = (reply or {}).get("pid")
    if reply is None:
        pid = _pid_from_file()
        if pid is None:
            click.echo("orch serve: not running")
            return
        os.kill(pid, signal.SIGTERM)  # it does not answer on its socket: ask it the old way
    deadline = time.monotonic() + 40
    while pid and pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid and pid_alive(pid):
        raise OrchError(f"orch serve (pid {pid}) did not stop; kill it: `kill {pid}`")
    paths.socket_path().unlink(missing_ok=True)
    click.echo(f"orch serve: stopped (pid {pid})")


def _pid_from_file() -> int | None:
    """The pid in orch.pid, when that file and its directory are ours alone (a pid file
    someone else could write must never choose the process we signal)."""
    from orchestrator.daemon import paths

    try:
        paths.check_owned(paths.pid_path(), kind="file")
    except (OSError, OrchError):
        return None

    try:
        pid = int(paths.pid_path().read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


@serve.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(as_json: bool) -> None:
    """Is it up: pid, version, socket, jobs, idle stop, rate gates. Exit 3 when not running."""
    reply = _ask("status")
    if reply is None:
        click.echo("orch serve: not running (start it: `orch serve start`)")
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
        return ("its plugin switches (ORCH_PLUGINS, ORCH_DISABLE_PLUGINS) differ from this "
                "shell's; start it from here: `orch serve stop && orch serve start`")
    return "its config is older and jobs run; `orch serve reload` when they end"


@serve.command("reload")
def reload() -> None:
    """Re-read config.json and the plugins (refused while jobs run)."""
    reply = _ask("reload")
    if reply is None:
        raise OrchError("orch serve is not running; start it: `orch serve start`")
    if reply.get("error"):
        raise OrchError(f"not reloaded: {reply['error']}")
    click.echo("orch serve: reloaded config and plugins")
