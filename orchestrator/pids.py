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
    return True
