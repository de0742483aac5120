"""The client side of ``orch serve``: send this command to a warm daemon and relay it back.

``orch fanout``, ``orch council run`` and ``orch bench`` go to a compatible daemon when one
listens (and start one for the next runs when none does: autostart.py) (the same orch version, ``ORCH_HOME``, ``config.json`` and plugin switches); their
stdout, stderr and exit code come back as the command wrote them. This module imports only
the standard library (and orch's own stdlib-only modules): a client never loads litellm.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from orchestrator.daemon import paths
from orchestrator.daemon.job_argv import job_command
from orchestrator.daemon.protocol import Channel, Closed, connect


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


def delegate(argv: list[str]) -> int | None:
    """Run ``argv`` on the daemon and return its exit code; None: run it in-process."""
    from orchestrator.daemon import autostart

    command = job_command(argv)
    if command is None:
        return None
    try:
        mode, chosen = autostart.mode()
    except autostart.BadMode as exc:
        print(f"orch: error: {exc}", file=sys.stderr)
        return 1
    if mode == "off":  # ORCH_DAEMON=off or "daemon": "off": in-process, a daemon up or not
        return None
    path = paths.socket_path()
    try:
        greeted = hello(path)
    except paths.Untrusted as exc:  # nothing was sent: not argv, not the environment
        print(f"orch: {exc} (this run goes in-process)", file=sys.stderr)
        return None
    if greeted is None:
        if mode == "auto":
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
            print("orch: the daemon runs on an older config.json while other jobs run; "
                  "this run goes in-process (`orch serve reload` when they end)",
                  file=sys.stderr)
        # "home", "config": a daemon for another ORCH_HOME or other plugin switches
        # (ORCH_PLUGINS, ORCH_DISABLE_PLUGINS): as if none ran (docs/serve.md)
        return None
    from orchestrator.daemon.keyset import key_names, read_config

    allowed = key_names(argv, read_config(paths.home()), os.environ)
    return Relay(chan, argv, send_all_keys=command == "bench", allowed=allowed).run()


def _secret_named(name: str) -> bool:
    from orchestrator.security.secrets import _NOT_SECRET_NAME, _SECRET_NAME

    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET_NAME.search(name)


class _Signalled(Exception):  # noqa: N818 - a signal, carried out of a blocking read
    def __init__(self, signum: int) -> None:
        self.signum = signum


class Relay:
    """One job: send it, then write what comes back until its exit code arrives."""

    def __init__(self, chan: Channel, argv: list[str], *, send_all_keys: bool,
                 allowed: set[str] | None = None) -> None:
        self.chan = chan
        self.argv = argv
        self.send_all_keys = send_all_keys  # bench: command contestants inherit every key
        self.allowed = set(allowed or ())  # the key variables the job's models need
        self.refused: set[str] = set()
        self.wave_id: str | None = None
        self.signals = 0
        self._sending = False
        self._pending: list[int] = []

    def request(self) -> dict:
        env = dict(os.environ)
        secret = {k for k in env if _secret_named(k)} if not self.send_all_keys else set()
        tty = {"in": sys.stdin.isatty(), "out": sys.stdout.isatty(),
               "err": sys.stderr.isatty()}
        if tty["out"] or tty["err"]:  # the daemon has no terminal to measure
            import shutil

            size = shutil.get_terminal_size()
            env.setdefault("COLUMNS", str(size.columns))
            env.setdefault("LINES", str(size.lines))
        return {"t": "run", "argv": self.argv, "cwd": os.getcwd(), "tty": tty,
                "env": {k: v for k, v in env.items() if k not in secret},
                "secret_names": sorted(secret & self.allowed)}

    def run(self) -> int:
        from orchestrator.security.secrets import scrub_values

        self._scrub = scrub_values  # the client's own keys too, whatever the daemon knew
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

    def _loop(self) -> int:
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
                code = self._handle(message)
            except _Signalled as sig:
                self._pending.append(sig.signum)
                code = None
            except Closed:
                return self._daemon_died()
            if code is not None:
                return code
            while self._pending:
                self._send({"t": "signal", "n": self._pending.pop(0)})

    def _handle(self, message: dict) -> int | None:
        kind = message.get("t")
        if kind in ("out", "err"):
            stream = sys.stdout if kind == "out" else sys.stderr
            try:
                stream.write(self._scrub(message.get("d", "")))
                stream.flush()
            except BrokenPipeError:  # `orch fanout … | head -1`: the rest goes nowhere
                devnull = open(os.devnull, "w")  # noqa: SIM115 - for the process's life
                os.dup2(devnull.fileno(), stream.fileno())
        elif kind == "env":
            self._send({"t": "reply", "id": message.get("id"),
                        "value": self._key(message.get("name"))})
        elif kind == "find":  # the briefing check: a variable's name comes back, no value
            from orchestrator.security.secrets import find_position

            hit = find_position(str(message.get("text", "")))
            self._send({"t": "reply", "id": message.get("id"),
                        "value": list(hit) if hit else None})
        elif kind == "stdin":
            import base64

            if message.get("mode") == "line":
                data = sys.stdin.buffer.readline()
            else:
                data = sys.stdin.buffer.read()
            self._send({"t": "reply", "id": message.get("id"),
                        "value": base64.b64encode(data).decode("ascii")})
        elif kind == "wave":
            self.wave_id = message.get("id")
        elif kind == "exit":
            sys.stdout.flush()
            return int(message.get("code", 1))
        return None

    def _key(self, name) -> str | None:
        """A key variable the daemon asks for: only one of the names this client computed
        from the job (keyset.py); any other is refused, and said once."""
        if isinstance(name, str) and name in self.allowed:
            return os.environ.get(name)
        if name not in self.refused:
            self.refused.add(name)
            print(f"orch: the daemon asked for ${name}, which no model of this job uses: "
                  "refused (run with --no-daemon if the job needs it)", file=sys.stderr)
        return None

    def _daemon_died(self) -> int:
        if self.wave_id:
            print(f"orch: the orch daemon died; the run's files are as after a kill: "
                  f"`orch status {self.wave_id}`", file=sys.stderr)
        else:
            print("orch: the orch daemon died before the run began; run it again (or pass "
                  "--no-daemon)", file=sys.stderr)
        return 1


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
