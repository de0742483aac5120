"""The client side of ``orch serve``: hand a prepared run to a warm daemon and receive its
events; ask a daemon for its status, to stop, reload or serve ``orch ui``; start one.

The run was prepared here, in this process, its directory and environment (app/prepare.py):
:func:`submit` sends it (app/wire.py) with the values of exactly the variables it declared,
and renders each event the daemon sends back as it comes; SIGINT and SIGTERM go to the
daemon as messages (a second one leaves at once, as in-process). A daemon fits when it runs
the same orch version, ``ORCH_HOME``, ``config.json`` and settings (paths.py); with none up,
``daemon: auto`` starts one for the next runs (autostart.py) and this run goes in-process,
as it does while one is still starting (said in one line). The CLI reaches the daemon
through this module and protocol.py only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.daemon import paths
from orchestrator.daemon.protocol import Channel, Closed, connect

START_TIMEOUT_S = 60.0  # importing litellm on a busy machine
Untrusted = paths.Untrusted


def hello(path: Path, timeout: float = 5.0) -> tuple[Channel, dict] | None:
    """A connection and the daemon's greeting, or None when nothing answers there.

    The daemon is authenticated before a word is said to it (docs/security.md): the socket
    and its directory are ours (``lstat``, no symlink, the directory 0700) and the process
    listening runs as our uid (``SO_PEERCRED``). Raises :class:`paths.Untrusted` otherwise."""
    try:
        paths.check_owned(path)
    except paths.Untrusted:
        raise
    except OSError:  # nothing there, or a path we cannot even look at: nobody to talk to
        return None
    try:
        chan = connect(path, timeout)
    except OSError:
        return None
    try:
        paths.check_listener(chan.sock, path)
    except paths.Untrusted:
        chan.close()
        raise
    except OSError:
        chan.close()
        return None
    try:
        chan.sock.settimeout(timeout)  # a wedged daemon is as good as none
        chan.send({"t": "hello", "compat": paths.compat()})
        reply = chan.recv()
        chan.sock.settimeout(None)
    except (Closed, OSError, ValueError):
        chan.close()
        return None
    return chan, reply


@dataclass
class Outcome:
    """How a run the daemon ran ended: its document, exit code and extra (the ``ended``
    event's), or the one line it failed with (``error``)."""

    exit_code: int
    document: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    ended: bool = False  # False: it left before the run's end (the daemon died, or a
    # second signal): nothing more to print but ``last_words``
    last_words: str | None = None  # said once the progress display is closed


def submit(prepared, on_event: Callable[[Any], None], *, quiet: bool = False
           ) -> Outcome | None:
    """Run ``prepared`` on a fitting daemon, each event to ``on_event``; None: run it in
    this process (no daemon fits, or none is wanted)."""
    relay = relay_for(prepared, on_event, quiet=quiet)
    return None if relay is None else relay.run()


def relay_for(prepared, on_event: Callable[[Any], None], *, quiet: bool = False
              ) -> Relay | None:
    """A fitting daemon, greeted and ready to take ``prepared`` (:meth:`Relay.run`); None:
    run it in this process (no daemon fits, or none is wanted; said when it matters)."""
    from orchestrator.daemon import autostart

    try:
        mode, chosen = autostart.mode()
    except autostart.BadMode as exc:
        from orchestrator.errors import OrchError

        raise OrchError(str(exc)) from None
    if mode == "off":  # ORCH_DAEMON=off or "daemon": "off": in-process, a daemon up or not
        return None
    try:
        greeted = hello(paths.socket_path())
    except paths.Untrusted as exc:  # nothing was sent: not the run, not a key
        print(f"orch: {exc} (this run goes in-process)", file=sys.stderr)
        return None
    if greeted is None:
        pid = paths.starting()
        if pid is not None:  # warming up (or waiting for the run that started it)
            print(f"orch: the daemon is starting{f' (pid {pid})' if pid else ''}; this run "
                  "goes in-process", file=sys.stderr)
        elif mode == "auto":
            autostart.start_in_background(chosen)  # this run in-process; the next warm
        return None
    chan, reply = greeted
    if not reply.get("ok"):
        chan.close()
        why, theirs = reply.get("why"), reply.get("compat") or {}
        if why == "version":
            print(f"orch: the running daemon is orch {theirs.get('version')}, this is orch "
                  f"{paths.compat()['version']}: it was refused; stop it with `orch serve "
                  "stop` (this run goes in-process)", file=sys.stderr)
        elif why == "busy":
            print("orch: the daemon runs on an older config.json while other runs go on; "
                  "this run goes in-process (`orch serve reload` when they end)",
                  file=sys.stderr)
        # "home", "config": a daemon for another ORCH_HOME or other settings
        # (ORCH_PLUGINS, ORCH_LEDGER_URL...): as if none ran (docs/serve.md)
        return None
    return Relay(chan, prepared, on_event, quiet=quiet)


class _Signalled(Exception):  # noqa: N818 - a signal, carried out of a blocking read
    def __init__(self, signum: int) -> None:
        self.signum = signum


class Relay:
    """One run: send it, then hand each event on until its exit code arrives."""

    def __init__(self, chan: Channel, prepared, on_event: Callable[[Any], None], *,
                 quiet: bool = False) -> None:
        self.chan = chan
        self.prepared = prepared
        self.on_event = on_event
        self.quiet = quiet
        self.signals = 0
        self.outcome = Outcome(exit_code=1)
        self._sending = False
        self._pending: list[int] = []

    def request(self) -> dict:
        from orchestrator.app.wire import to_wire
        from orchestrator.runtime import log_as_json

        return {"t": "run", "prepared": to_wire(self.prepared),
                "keys": self.prepared.keys.values_for_wire(),
                "log": {"level": os.environ.get("LOG_LEVEL") or None, "quiet": self.quiet,
                        "json": log_as_json()}}

    def run(self) -> Outcome:
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._send(self.request())
            return self._loop()
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
            self.chan.close()

    def _on_signal(self, signum: int, frame) -> None:
        self.signals += 1
        if self.signals > 1:  # a second signal: leave at once, as in-process
            os._exit(128 + signum)
        if self._sending:
            self._pending.append(signum)
        else:
            raise _Signalled(signum)

    def _send(self, message: dict) -> None:
        self._sending = True
        try:
            self.chan.send(message)
        finally:
            self._sending = False
        while self._pending:
            self._send({"t": "signal", "n": self._pending.pop(0)})

    def _loop(self) -> Outcome:
        while True:
            try:
                message = self.chan.recv()
            except _Signalled as sig:
                try:
                    self._send({"t": "signal", "n": sig.signum})
                except Closed:
                    return self._daemon_died()
                continue
            except Closed:
                return self._daemon_died()
            try:
                done = self._handle(message)
            except _Signalled as sig:
                self._pending.append(sig.signum)
                done = False
            except Closed:
                return self._daemon_died()
            if done:
                return self.outcome
            while self._pending:
                self._send({"t": "signal", "n": self._pending.pop(0)})

    def _handle(self, message: dict) -> bool:
        from orchestrator import events

        kind = message.get("t")
        if kind == "event":
            event = events.from_dict(message.get("e") or {})
            if isinstance(event, events.Ended):
                self.outcome = Outcome(event.exit_code, event.document, event.extra,
                                       ended=True)
            elif isinstance(event, events.Failed):
                self.outcome = Outcome(event.exit_code, error=event.error, ended=True)
            elif event is not None:
                self.on_event(event)
        elif kind == "exit":
            code = int(message.get("code", 1))
            if not self.outcome.ended:
                self.outcome = Outcome(code)  # it left before its end (a second signal)
            self.outcome.exit_code = code
            return True
        return False

    def _daemon_died(self) -> Outcome:
        return Outcome(1, last_words=f"orch: the orch daemon died; the run's files are as "
                                     f"after a kill: `orch status {self.prepared.run_id}`")


# -- control: orch serve start | stop | status | reload, orch ui, orch doctor ----------------

def ask(kind: str) -> dict | None:
    """A control request's answer (``status``, ``stop``, ``reload``), or None when no daemon
    answers; a daemon unfit for this client answers ``status`` as ``refused``."""
    greeted = hello(paths.socket_path())  # raises paths.Untrusted for a socket not ours
    if greeted is None:
        return None
    chan, reply = greeted
    try:
        chan.send({"t": kind})  # control is served even by a daemon unfit for runs here
        answer = chan.recv()
    except Exception:
        return None
    finally:
        chan.close()
    return answer if reply.get("ok") or kind != "status" else {
        **answer, "t": "refused", "why": reply.get("why"), "compat": reply.get("compat")}


def socket_path() -> Path:
    return paths.socket_path()


def log_path() -> Path:
    return paths.log_path()


def starting() -> int | None:
    """The pid of a daemon that holds the life lock but does not answer yet (0: unknown)."""
    return paths.starting()


def why_cold() -> str | None:
    """Why no daemon can listen here (runs pay the cold start), or None."""
    return paths.why_cold()


def warmth() -> tuple[str, str, str | None]:
    """(ok/warn, what ``orch doctor`` says of the daemon, the fix): warm, starting, or why
    every run is cold here and what to do about it."""
    from orchestrator.daemon import autostart

    try:
        mode, _chosen = autostart.mode()
    except autostart.BadMode as exc:
        return "warn", str(exc), "fix ORCH_DAEMON or config.json's daemon"
    if mode == "off":
        return "ok", "off: every run goes in-process (ORCH_DAEMON or config.json)", None
    why = paths.why_cold()
    if why is not None:
        return ("warn", f"runs are cold (each pays litellm's import, seconds): no daemon can "
                f"listen here: {why}",
                "export XDG_RUNTIME_DIR=/run/user/$(id -u) (or any directory only you can "
                "enter), or remove what was planted there; ORCH_DAEMON=off says you mean it")
    try:
        greeted = hello(paths.socket_path())
    except paths.Untrusted as exc:
        return "warn", f"runs are cold: {exc}", "remove it, or set XDG_RUNTIME_DIR"
    if greeted is not None:
        greeted[0].close()
        if greeted[1].get("ok"):
            return "ok", f"warm (pid {greeted[1].get('pid')}) on {paths.socket_path()}", None
        return ("warn", f"a daemon runs (pid {greeted[1].get('pid')}) but cannot take this "
                f"shell's runs ({greeted[1].get('why')}): they are cold",
                "`orch serve stop`, then run again (or `orch serve start`)")
    pid = paths.starting()
    if pid is not None:
        return "ok", f"starting (pid {pid or '?'}) on {paths.socket_path()}", None
    if mode == "manual":
        return "ok", "not running (daemon: manual)", "`orch serve start` for warm runs"
    return "ok", f"not running; the next run starts one on {paths.socket_path()}", None


def start_background(idle_min: float | None) -> int:
    """Start the daemon detached; its pid, once it answers. Raises OrchError otherwise."""
    from orchestrator.daemon.environment import daemon_environment
    from orchestrator.errors import OrchError

    run_dir = paths.ensure_run_dir()
    with open(paths.log_path(), "ab") as log:
        idle = ["--idle", repr(idle_min)] if idle_min is not None else []
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.daemon", "serve", *idle],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, cwd=str(run_dir),
                                env=daemon_environment(os.environ))  # no key (serve.md)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise OrchError(f"orch serve did not start (exit {proc.returncode}); see "
                            f"{paths.log_path()}")
        greeted = hello(paths.socket_path())
        if greeted is not None:
            greeted[0].close()
            return proc.pid
        time.sleep(0.1)
    raise OrchError(f"orch serve did not answer within {START_TIMEOUT_S:.0f} s; see "
                    f"{paths.log_path()}")


def wait_until_up(timeout: float) -> int | None:
    """A starting daemon's pid once it answers within ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        greeted = hello(paths.socket_path())
        if greeted is not None:
            greeted[0].close()
            return greeted[1].get("pid")
        if paths.starting() is None:
            return None
        time.sleep(0.1)
    return None


def foreground(idle_min: float | None) -> None:
    """Become the daemon (``orch serve start --foreground``): this process is replaced by
    ``python -m orchestrator.daemon serve``, its pid kept, with the allowed environment
    only (``/proc/PID/environ`` shows what a process started with: it must hold no key)."""
    from orchestrator.daemon.autostart import AFTER_ENV, LOCK_FD_ENV
    from orchestrator.daemon.environment import daemon_environment

    argv = [sys.executable, "-m", "orchestrator.daemon", "serve"]
    if idle_min is not None:
        argv += ["--idle", repr(idle_min)]
    kept = {name: os.environ[name] for name in (LOCK_FD_ENV, AFTER_ENV) if name in os.environ}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, daemon_environment(os.environ, **kept))


def pid_from_file() -> int | None:
    """The pid in orch.pid, when that file and its directory are ours alone (a pid file
    someone else could write must never choose the process we signal)."""
    from orchestrator.errors import OrchError
    from orchestrator.pids import pid_alive

    try:
        paths.check_owned(paths.pid_path(), kind="file")
    except (OSError, OrchError):
        return None
    try:
        pid = int(paths.pid_path().read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def ask_ui(runs_dir: Path, port: int) -> dict | None:
    """Ask a running daemon to serve ``orch ui``'s view of ``runs_dir`` in its process: its
    reply (``url``, ``port``, ``pid``; or ``error``), or None when no daemon runs that could
    (none, not ours, or one for another orch, home or config): then ``orch ui`` runs alone."""
    try:
        greeted = hello(paths.socket_path())
    except paths.Untrusted as exc:  # nothing was sent
        print(f"orch: {exc} (orch ui runs on its own)", file=sys.stderr)
        return None
    if greeted is None:
        return None
    chan, reply = greeted
    try:
        if not reply.get("ok"):
            return None
        chan.send({"t": "ui", "runs_dir": str(runs_dir), "port": port})
        answer = chan.recv()
    except (Closed, OSError, ValueError):
        return None
    finally:
        chan.close()
    return answer if answer.get("t") == "ui" else None
