"""The daemon: one warm process per user, serving jobs on a Unix socket.

Loaded once and shared by every job: litellm (imported and warm), the plugin manager, the
local-server manager, the ledger's engine and the rate gates (one per endpoint and key, so
two terminals fanning out to one provider discover its limits together). Only the owner's
uid may connect: the directory is 0700, the socket 0600, and each peer's uid is checked
(``SO_PEERCRED``). There is no TCP listener. It stops after ``idle_s`` without a job.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.daemon import paths
from orchestrator.daemon.protocol import Channel, Closed
from orchestrator.errors import OrchError
from orchestrator.security.outlet import inert

DEFAULT_IDLE_MIN = 30.0
STOP_GRACE_S = 30.0  # running jobs get this long to finalise on stop


def peer_creds(sock: socket.socket) -> tuple[int, int, int]:
    """The connecting process's (pid, uid, gid), as the kernel saw them at connect()."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)



class _PerLoopLoggingWorker:
    """litellm's one logging worker is bound to one event loop; each job runs its own loop
    (on its own thread), so each loop gets its own worker instead of a warning and a
    queue shared across threads."""

    def __init__(self, original) -> None:
        import weakref

        self._original = original
        self._workers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def _worker(self):
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._original
        with self._lock:
            worker = self._workers.get(loop)
            if worker is None:
                worker = self._workers[loop] = type(self._original)()
        return worker

    def __getattr__(self, name: str):
        return getattr(self._worker(), name)


def warm() -> None:
    """Pay every start-up cost once: litellm and its first call, config, plugins, ledger,
    and the modules that run requests (the application's runs, as a job loads them)."""
    import importlib

    import anyio

    from orchestrator import runtime
    from orchestrator.ledger.spend import Ledger
    from orchestrator.local import manager  # noqa: F401 - the local-server manager

    for name in ("orchestrator.app.start", "orchestrator.app.wire",
                 "orchestrator.app.bench_run", "orchestrator.engine.wave",
                 "orchestrator.deliberation.run", "orchestrator.council.run",
                 "orchestrator.bakeoff.run"):
        importlib.import_module(name)

    lm = runtime.litellm()
    from litellm.litellm_core_utils import logging_worker

    if not isinstance(logging_worker.GLOBAL_LOGGING_WORKER, _PerLoopLoggingWorker):
        logging_worker.GLOBAL_LOGGING_WORKER = _PerLoopLoggingWorker(  # type: ignore[misc]
            logging_worker.GLOBAL_LOGGING_WORKER)
    runtime.config()
    runtime.plugin_manager(True)
    runtime.plugin_manager(False)
    try:
        Ledger()
    except Exception:  # the first job says what is wrong with it, in its own words
        pass

    async def first_call() -> None:  # litellm's lazy imports on the request path
        await lm.acompletion(model="openai/warm", messages=[{"role": "user", "content": "x"}],
                             mock_response="ok", api_key="unused")

    try:
        anyio.run(first_call)
    except Exception:
        pass


def _repair_dead_waves() -> None:
    """Waves (a deliberation and a bench's trial waves among them) and councils a killed
    daemon (or any killed orch) left ``running`` get their true status and cost from the
    ledger (engine/rebuild.py, council/repair.py), off the accept loop."""
    from orchestrator import config
    from orchestrator.council.repair import repair_dead as repair_councils
    from orchestrator.engine.rebuild import repair_dead

    for repair in (repair_dead, repair_councils):
        try:
            repair(config.runs_dir())
        except Exception:  # noqa: BLE001 - `orch status` repairs each run when it is opened
            pass


class Daemon:
    def __init__(self, *, idle_s: float, log=None) -> None:
        self.idle_s = idle_s
        self.path = paths.socket_path()
        self.compat = paths.compat()
        self.jobs: set[Any] = set()
        self.started = time.time()
        self.last_active = time.monotonic()
        self.served = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._ui = None  # the web views it serves (orch ui), made when first asked
        self._lock_fd: int | None = None
        self.log = log or (lambda text: print(f"orch serve: {inert(text)}",  # a log line
                                               file=sys.__stderr__, flush=True))

    # -- lifecycle -------------------------------------------------------------------------
    def bind(self) -> None:
        """Take the socket (refusing a live one), 0600 from the moment it exists."""
        from orchestrator.daemon.client import hello

        paths.ensure_run_dir()
        if self.path.exists():
            if hello(self.path) is not None:
                raise OrchError(f"a daemon already listens on {self.path}; stop it first: "
                                "`orch serve stop`")
            self.path.unlink(missing_ok=True)  # a stale socket from a killed daemon
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        except OSError as exc:  # a path too long for a socket (108 bytes), a full disk...
            sock.close()
            raise OrchError(f"cannot listen on {self.path} ({exc.strerror or exc}); set "
                            "XDG_RUNTIME_DIR to a short directory of yours") from None
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(64)
        sock.settimeout(0.5)
        self._listener = sock
        paths.pid_path().write_text(f"{os.getpid()}\n", encoding="ascii")

    def serve_forever(self) -> None:
        from orchestrator.daemon import joblog

        if not hasattr(socket, "SO_PEERCRED"):
            raise OrchError("orch serve needs Linux (SO_PEERCRED); run commands in-process "
                            "(ORCH_DAEMON=off)")
        from orchestrator.daemon.client import hello

        self._lock_fd = paths.take_lock()  # one daemon at a time, decided before the warm-up
        try:
            if self.path.exists() and hello(self.path) is not None:  # before the warm-up
                raise OrchError(f"a daemon already listens on {self.path}; stop it first: "
                                "`orch serve stop`")
            warm()
            joblog.install()
            self.bind()
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise
        self.last_active = time.monotonic()  # idle from now: a long warm-up is no idle time
        threading.Thread(target=_repair_dead_waves, daemon=True, name="orch-repair").start()
        self.log(f"listening on {self.path} (pid {os.getpid()}, orch {__version__}, "
                 f"idle stop after {self.idle_s / 60:g} min)")
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    if self._idle():
                        self.log("idle: stopping")
                        break
                    continue
                threading.Thread(target=self._connection, args=(conn,), daemon=True,
                                 name="orch-conn").start()
        finally:
            self._shutdown()

    def _idle(self) -> bool:
        with self._lock:
            busy = bool(self.jobs)
        return not busy and time.monotonic() - self.last_active > self.idle_s

    def stop(self) -> None:
        self._stop.set()

    def _shutdown(self) -> None:
        import signal

        if self._listener is not None:
            self._listener.close()
        for path in (self.path, paths.pid_path()):
            path.unlink(missing_ok=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # the socket is gone: the next run may start a daemon
            self._lock_fd = None
        with self._lock:
            jobs = list(self.jobs)
        if self._ui is not None:
            self._ui.close()
        for job in jobs:  # finalised as SIGTERM finalises an in-process run
            job.signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for job in jobs:
            job.thread.join(max(0.0, deadline - time.monotonic()))
        self.log("stopped")

    # -- one connection ----------------------------------------------------------------------
    def _connection(self, conn: socket.socket) -> None:
        chan = Channel(conn)
        try:
            client_pid, uid, _ = peer_creds(conn)
            if uid != os.getuid():
                return  # another user: not a word
            first = chan.recv()
            if first.get("t") != "hello":
                return
            verdict = self._check(first.get("compat") or {})
            chan.send({"t": "hello", "ok": verdict is None, "why": verdict,
                       "compat": self.compat, "pid": os.getpid()})
            request = chan.recv()  # control requests are served whatever the verdict
            kind = request.get("t")
            if kind == "run" and verdict is None:
                self._run(chan, request, client_pid)
            elif kind == "ui" and verdict is None:
                chan.send({"t": "ui", **self.ui(request)})
            elif kind == "status":
                chan.send({"t": "status", **self.status()})
            elif kind == "reload":
                chan.send({"t": "reload", "error": self.reload()})
            elif kind == "stop":
                chan.send({"t": "stop", "pid": os.getpid()})
                self.stop()
        except Closed:
            pass
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # not our protocol
            self.log(f"a connection sent what orch does not speak ({type(exc).__name__}); "
                     "closed it")
        finally:
            chan.close()
            self.last_active = time.monotonic()

    def _check(self, theirs: dict) -> str | None:
        """Why this daemon cannot run the client's jobs alike, or None."""
        if theirs.get("version") != self.compat["version"] or \
                theirs.get("protocol") != self.compat["protocol"]:
            return "version"
        if theirs.get("home") != self.compat["home"]:
            return "home"
        if theirs.get("config") != self.compat["config"]:
            # config.json changed since start: reload when no job runs on the old one (else
            # "busy": this client runs in-process). Still different after a reload: the
            # client's plugin switches (ORCH_PLUGINS...) differ from the daemon's.
            if self.reload() is not None:
                return "busy"
            if theirs.get("config") != self.compat["config"]:
                return "config"
        return None

    def _run(self, chan: Channel, request: dict, client_pid: int) -> None:
        from orchestrator.daemon.job import Job

        job = Job(chan, request, self._job_done, client_pid)
        with self._lock:
            self.jobs.add(job)
            self.served += 1
        job.start()
        while True:
            try:
                message = chan.recv()
            except Closed:
                if job.exit_code is None:
                    self.log("a client went away: its job is cancelled")
                    job.disconnected()
                return
            if message.get("t") == "signal":
                job.signal(int(message.get("n", 2)))

    def ui(self, request: dict) -> dict:
        """``orch ui`` asks for the web view in this process; its URL, or why not."""
        from orchestrator.daemon.ui_host import UIHost

        with self._lock:
            if self._ui is None:
                self._ui = UIHost(self._touch)
        try:
            port = int(request.get("port") or 0)
            if not 0 <= port <= 65535:
                raise ValueError(port)
            return {**self._ui.serve(str(request.get("runs_dir") or ""), port),
                    "pid": os.getpid()}
        except OrchError as exc:
            return {"error": str(exc)}
        except (TypeError, ValueError):
            return {"error": "the port must be a whole number from 0 to 65535"}

    def _touch(self) -> None:
        self.last_active = time.monotonic()

    def _job_done(self, job) -> None:
        with self._lock:
            self.jobs.discard(job)
        self.last_active = time.monotonic()

    # -- control -----------------------------------------------------------------------------
    def status(self) -> dict:
        from orchestrator.models import gate

        with self._lock:
            running = len(self.jobs)
        gates = [{"endpoint": g.endpoint, "limit": g.limit, "ceiling": g.ceiling,
                  "in_flight": g.in_flight, "rate_limited": g.rate_limited}
                 for g in list(gate._GATES.values())]
        return {"pid": os.getpid(), "version": __version__, "socket": str(self.path),
                "home": self.compat["home"], "uptime_s": round(time.time() - self.started, 1),
                "jobs_running": running, "jobs_served": self.served,
                "idle_stop_min": self.idle_s / 60, "gates": gates}

    def reload(self) -> str | None:
        """Re-read config.json and the plugins; refused while a job runs on the old ones."""
        from orchestrator import runtime

        with self._lock:
            if self.jobs:
                return f"{len(self.jobs)} job(s) running; reload when they end"
            runtime.config.cache_clear()
            runtime.plugin_manager.cache_clear()
            self.compat = paths.compat()
            runtime.config()
            runtime.plugin_manager(True)
            runtime.plugin_manager(False)
        self.log(f"reloaded config {self.compat['config']}")
        return None


def configured_idle() -> float | None:
    """config.json's ``serve.idle_minutes``, when set."""
    from orchestrator.config import Config

    try:
        value = (Config.load().data.get("serve") or {}).get("idle_minutes")
        return float(value) if value else None
    except (OrchError, TypeError, ValueError):
        return None


def run(idle_min: float | None) -> None:
    """``python -m orchestrator.daemon serve`` (``orch serve start``): ``idle_min``, else
    config.json's ``serve.idle_minutes``, else 30."""
    if idle_min is None:
        idle_min = configured_idle()
    idle = DEFAULT_IDLE_MIN if idle_min is None else idle_min
    Daemon(idle_s=idle * 60).serve_forever()


def log_file() -> Path:
    return paths.log_path()
