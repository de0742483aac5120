"""Is that process still there? Asked of a wave's runner (orch status) and of the local server."""

from __future__ import annotations

import os


def pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` runs; reaps it first if it is our own exited child (no zombies)."""
    if not pid:
        return False
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (another process's exited child, not reaped yet) has stopped all the same
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def process_started(pid: int | None) -> str | None:
    """When ``pid`` started, as the kernel counts it (``/proc/PID/stat`` field 22, clock
    ticks since boot): with the pid, an identity that a reused pid does not share. None
    where there is no /proc (then liveness is the pid alone)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            stat = fh.read()
    except (OSError, ValueError):
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[19].decode() if len(fields) > 19 else None


def same_process(pid: int | None, started: str | None) -> bool:
    """Whether ``pid`` is alive *and* is the process that recorded ``started``."""
    if not pid_alive(pid):
        return False
    if started is None:
        return True  # recorded before start times were (or no /proc): the pid alone
    now = process_started(pid)
    return now is None or now == started
