"""What every orch process on this machine knows about the one local server: files in
``ORCH_HOME/local/``. The supervisor is the only writer of the state file; everyone reads it.

``server.json``  pid (the supervisor), server_pid, port, models, started_at, restarts, status
``server.lock``  flock'd while a process checks, starts or stops the server
``last-used``    its mtime is when an orch process last used the server (idle stop)
``server.log``   the supervisor's and the server's output
``path.json``    ``{"path": "portable", "reason": ...}`` after a start died of SIGILL
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from orchestrator.config import home
from orchestrator.errors import OrchError
from orchestrator.pids import pid_alive
from orchestrator.store import write_json_atomic

STARTING, RUNNING, RESTARTING, FAILED = "starting", "running", "restarting", "failed"
SUPERVISOR_MODULE = "orchestrator.local.supervisor"


class Abandoned(Exception):  # noqa: N818 - what happened, not an error anyone reads
    """The caller stopped waiting (its job was interrupted while a start was under way)."""


def local_dir() -> Path:
    return home() / "local"


def state_path() -> Path:
    return local_dir() / "server.json"


def path_file() -> Path:
    """The CPU path the server starts on, once a start died of SIGILL (see supervisor)."""
    return local_dir() / "path.json"


def lock_path() -> Path:
    return local_dir() / "server.lock"


def last_used_path() -> Path:
    return local_dir() / "last-used"


def log_path() -> Path:
    return local_dir() / "server.log"


def read_state(path: Path | None = None) -> dict[str, Any] | None:
    path = path or state_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_state(state: dict[str, Any], path: Path | None = None) -> None:
    write_json_atomic(path or state_path(), state)


def clear_state(pid: int | None = None, path: Path | None = None) -> None:
    """Remove the state file; with ``pid``, only if it still describes that supervisor."""
    path = path or state_path()
    if pid is not None:
        current = read_state(path)
        if current is not None and current.get("pid") != pid:
            return
    path.unlink(missing_ok=True)


def touch_last_used(path: Path | None = None) -> None:
    path = path or last_used_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def last_used(path: Path | None = None) -> float | None:
    try:
        return (path or last_used_path()).stat().st_mtime
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def server_lock(timeout_s: float = 300.0, path: Path | None = None,
                abandoned: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """One process at a time checks, starts or stops the server. Waits up to ``timeout_s``
    for another process that is starting it (a start holds the lock until ready), or until
    ``abandoned()`` says nobody waits for this call any more (:class:`Abandoned`)."""
    path = path or lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if abandoned():
                    raise Abandoned from None
                if time.monotonic() > deadline:
                    raise OrchError(f"another orch process has held {path} for {timeout_s:g} s "
                                    f"while starting the local server; see {log_path()}") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def try_server_lock(path: Path | None = None) -> Iterator[bool]:
    """The lock if it is free right now (True), else False: the supervisor never waits."""
    path = path or lock_path()
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cmdline(pid: int) -> list[str] | None:
    """The process's argv (Linux); None where /proc is not there to ask."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return [] if Path("/proc/self").exists() else None
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def is_supervisor(pid: int | None) -> bool:
    """Alive and really our supervisor (a recycled pid is not)."""
    if not pid_alive(pid):
        return False
    argv = cmdline(pid)
    return argv is None or SUPERVISOR_MODULE in argv


NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def probe(host: str, port: int, timeout: float = 2.0) -> tuple[str, list[str] | None]:
    """GET /v1/models: ``("ok", [model ids])``; ``("busy", None)`` when it accepted the
    connection but did not answer in time (llama.cpp's server answers it between generations);
    ``("down", None)`` when nothing answers."""
    url = f"http://{host}:{port}/v1/models"
    try:
        with NO_PROXY.open(url, timeout=timeout) as resp:
            data = json.load(resp)
        return "ok", [m.get("id") for m in data.get("data") or [] if isinstance(m, dict)]
    except TimeoutError:
        return "busy", None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return "busy", None
        return "down", None
    except (OSError, ValueError):
        return "down", None


def log_tail(path: Path | None = None, lines: int = 30) -> str:
    """The most telling recent line of the server log: the last error, else the last line."""
    path = path or log_path()
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            recent = fh.read().decode("utf-8", "replace").splitlines()[-lines:]
    except FileNotFoundError:
        return ""
    recent = [line.strip() for line in recent if line.strip()]
    for line in reversed(recent):
        if "error" in line.lower() or "exception" in line.lower():
            return line[:300]
    return recent[-1][:300] if recent else ""
