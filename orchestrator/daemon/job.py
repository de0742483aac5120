"""One client's command, run in the daemon exactly as ``orch`` would run it in-process.

The job runs the very same click command on its own thread, in its client's current
directory (the thread's own, by ``unshare(CLONE_FS)``: threads it starts share it) and its
client's environment (jobio.py). Its stdout and stderr travel to the client as they are
written; its exit code is the one the command exits with. Interrupts arrive as messages:
delivered to the wave watching them (jobscope.py) or, before a wave runs, raised in the job's
thread as the signal would be.
"""

from __future__ import annotations

import base64
import ctypes
import os
import queue
import signal
import threading
from typing import Any

from orchestrator import jobscope
from orchestrator.daemon import jobio
from orchestrator.daemon.protocol import Channel, Closed

CLONE_FS = 0x00000200
ASK_TIMEOUT_S = 30.0  # a client that does not answer for an environment variable has gone


def own_cwd(path: str) -> None:
    """Give the calling thread its own current directory (Linux), then enter ``path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_FS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_FS): {os.strerror(err)}")
    os.chdir(path)


def per_thread_cwd_works() -> bool:
    result: list[bool] = []

    def probe() -> None:
        try:
            before = os.getcwd()
            own_cwd("/")
            result.append(True)
            del before
        except OSError:
            result.append(False)

    here = os.getcwd()
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(result and result[0]) and os.getcwd() == here


class Job:
    def __init__(self, chan: Channel, request: dict[str, Any], on_done,
                 client_pid: int | None = None) -> None:
        self.chan = chan
        self.argv: list[str] = list(request["argv"])
        self.cwd: str = request["cwd"]
        self.env: dict[str, str] = dict(request.get("env") or {})
        self.secret_names: set[str] = set(request.get("secret_names") or ())
        self.tty: dict[str, bool] = dict(request.get("tty") or {})
        self.quiet = False
        self.detached = False  # the client is gone, or was told its exit code already
        self.exit_code: int | None = None
        self.scope = jobscope.JobScope(on_wave=self._on_wave, on_leave=self._leave,
                                       client_pid=client_pid)
        self._on_done = on_done
        self._replies: queue.Queue = queue.Queue()
        self._ask_lock = threading.Lock()
        self._asked = 0
        self._stdin: bytes | None = None
        self.thread = threading.Thread(target=self._main, name="orch-job", daemon=True)

    # -- talking to the client -------------------------------------------------------------
    def _send(self, message: dict) -> None:
        if self.detached:
            return
        try:
            self.chan.send(message)
        except Closed:
            self.detached = True

    def output(self, stream: str, text: str) -> None:
        self._send({"t": stream, "d": text})

    def _ask(self, message: dict) -> Any:
        """The client's answer to ``message``; None when it is gone, silent, or the job was
        interrupted meanwhile (the interrupt then takes its course)."""
        with self._ask_lock:
            if self.detached:
                return None
            self._asked += 1
            self._send({**message, "id": self._asked})
            while True:
                try:
                    ident, value = self._replies.get(timeout=ASK_TIMEOUT_S)
                except queue.Empty:
                    return None
                if ident is None or ident == self._asked:
                    return value

    def fetch_env(self, name: str) -> None:
        """A key-named variable the job reads: asked of the client now, registered with the
        scrubber before it is used, kept in memory for this job only."""
        from orchestrator.security.secrets import register

        value = self._ask({"t": "env", "name": name})
        self.secret_names.discard(name)
        if isinstance(value, str):
            register(value, f"${name}")
            self.env[name] = value

    def find_secret(self, text: str) -> tuple[int, str] | None:
        """Where ``text`` holds one of the client's key values (``$GITHUB_TOKEN``...), which
        it never sent: asked of the client, which answers with an offset and a variable's
        name, never a value. The same check as in-process (briefing.check_briefing)."""
        hit = self._ask({"t": "find", "text": text})
        if isinstance(hit, list) and len(hit) == 2:
            return int(hit[0]), str(hit[1])
        return None

    def stdin(self, mode: str) -> bytes:
        if mode == "all" and self._stdin is not None:
            return self._stdin
        data = self._ask({"t": "stdin", "mode": mode})
        raw = base64.b64decode(data) if isinstance(data, str) else b""
        if mode == "all":
            self._stdin = raw
        return raw

    def _on_wave(self, wave_id: str) -> None:
        self._send({"t": "wave", "id": wave_id})

    # -- messages from the client (the connection's thread) --------------------------------
    def reply(self, ident: Any, value: Any) -> None:
        self._replies.put((ident, value))

    def signal(self, signum: int) -> None:
        """The client's SIGINT or SIGTERM, for this job only."""
        if self.exit_code is not None:
            return
        if not self.scope.interrupt(signum):
            from orchestrator.cli import Terminated

            self._raise_in_thread(KeyboardInterrupt if signum == signal.SIGINT else Terminated)
            self._replies.put((None, None))  # a wait on the client (stdin) ends now

    def disconnected(self) -> None:
        """The client died (kill -9): cancel the job as SIGTERM would; it finalises alone."""
        self.detached = True
        self.signal(signal.SIGTERM)
        self._replies.put((None, None))

    def _raise_in_thread(self, exc_type: type[BaseException]) -> None:
        ident = self.thread.ident
        if ident is not None and self.thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                                       ctypes.py_object(exc_type))

    def _leave(self, signum: int) -> None:
        """A second interrupt, or the hard timer after the first (its runs' records are
        written by then, jobscope.leave_now): the client leaves at once, and the daemon
        counts the job as ended; its thread, if something still holds it, is left behind
        (a daemon thread: never the daemon's exit)."""
        self._finish(128 + signum)
        self.detached = True
        self._on_done(self)

    # -- running ---------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def _main(self) -> None:
        jobio.ensure_streams()
        jobio.bind(self)
        jobio.job_level(self, entering=True)
        try:
            with jobscope.running(self.scope):
                code = self._run()
        finally:
            jobio.job_level(self, entering=False)
        self._finish(code)
        self._on_done(self)

    def _run(self) -> int:
        from orchestrator.cli import Terminated, cli

        try:
            own_cwd(self.cwd)
        except OSError as exc:
            self.output("err", f"orch: error: cannot enter {self.cwd} "
                        f"({exc.strerror or exc}); run from an existing directory\n")
            return 1
        try:
            cli.main(args=self.argv, prog_name="orch", standalone_mode=True)
            return 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                return exc.code or 0
            self.output("err", f"{exc.code}\n")
            return 1
        except KeyboardInterrupt:
            self.output("err", "orch: interrupted\n")
            return 130
        except Terminated:
            self.output("err", "orch: terminated\n")
            return 143
        except BaseException as exc:  # a bug: one line, as the in-process path says it
            self.output("err", f"orch: internal error: {type(exc).__name__} (in orch serve; "
                        "LOG_LEVEL=debug shows the traceback; please report it)\n")
            return 1

    def _finish(self, code: int) -> None:
        if self.exit_code is None:
            self.exit_code = code
            self._send({"t": "exit", "code": code})
