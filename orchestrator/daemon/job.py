"""One client's prepared run, run in the daemon on its own thread.

The client prepared it (in its own directory and environment) and sent it with the values
of exactly the variables it declared; the job rebuilds it (app/wire.py), starts it
(app/start.py) and sends each of its events back as it comes, then its exit code. The
client's interrupts arrive as messages and go to the run's handle; a client that goes away
interrupts its run as SIGTERM would, and the run finalises alone. Its log records go to the
client as its client asked (joblog.py).
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from orchestrator import jobscope
from orchestrator.daemon import joblog
from orchestrator.daemon.protocol import Channel, Closed


class Job:
    def __init__(self, chan: Channel, request: dict[str, Any], on_done,
                 client_pid: int | None = None) -> None:
        self.chan = chan
        self.wire: dict[str, Any] = request["prepared"]
        self.key_values: dict[str, str] = {k: v for k, v in (request.get("keys") or {}).items()
                                           if isinstance(k, str) and isinstance(v, str)}
        self.log_settings: dict[str, Any] = dict(request.get("log") or {})
        self.log_level = joblog.job_level(self.log_settings)
        self.run_id = str(self.wire.get("run_id") or "")
        self.detached = False  # the client is gone, or was told its exit code already
        self.exit_code: int | None = None
        self.handle = None
        self._pending: list[int] = []
        self._lock = threading.Lock()
        self.scope = jobscope.JobScope(on_leave=self._leave, client_pid=client_pid)
        self._on_done = on_done
        self.thread = threading.Thread(target=self._main, name="orch-job", daemon=True)

    # -- talking to the client -------------------------------------------------------------
    def _send(self, message: dict) -> None:
        if self.detached:
            return
        try:
            self.chan.send(message)
        except Closed:
            self.detached = True

    def event(self, event) -> None:
        self._send({"t": "event", "e": event.to_dict()})

    def log_line(self, line: str) -> None:
        from orchestrator.events import Log

        self.event(Log(line))

    # -- messages from the client (the connection's thread) --------------------------------
    def signal(self, signum: int) -> None:
        """The client's SIGINT or SIGTERM, for this job's run only."""
        if self.exit_code is not None:
            return
        with self._lock:
            handle = self.handle
            if handle is None:
                self._pending.append(signum)
                return
        handle.interrupt(signum)

    def disconnected(self) -> None:
        """The client died (kill -9): its run is interrupted as SIGTERM would; it finalises
        alone."""
        self.detached = True
        self.signal(signal.SIGTERM)

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
        with jobscope.running(self.scope), joblog.attached(self):
            code = self._run()
        self._finish(code)
        self._on_done(self)

    def _run(self) -> int:
        import anyio

        from orchestrator.app.start import start
        from orchestrator.app.wire import from_wire
        from orchestrator.errors import OrchError
        from orchestrator.events import Failed

        try:
            prepared = from_wire(self.wire, self.key_values)
            handle = start(prepared, on_leave=self._leave)
        except OrchError as exc:
            self.event(Failed(str(exc), exc.exit_code))
            return exc.exit_code
        except Exception as exc:  # a bug: one line, as the in-process path says it
            self.event(Failed(f"internal error: {type(exc).__name__} (in orch serve; "
                              "LOG_LEVEL=debug shows the traceback; please report it)", 1))
            from orchestrator.runtime import log

            log().debug("internal_error", exc_info=True)
            return 1
        with self._lock:
            self.handle = handle
            pending, self._pending = self._pending, []
        for signum in pending:
            handle.interrupt(signum)
        try:
            anyio.run(handle.drive, self.event)
        except Exception:  # said by its Failed event already
            pass
        return handle.exit_code if handle.exit_code is not None else 1

    def _finish(self, code: int) -> None:
        if self.exit_code is None:
            self.exit_code = code
            self._send({"t": "exit", "code": code})
