"""The exit is orch's: once a command's record is written, nothing orch did not start holds
the process.

The interpreter's own end joins every non-daemon thread and runs what ``atexit`` holds: a
thread a plugin started at import (or with ``daemon=False`` in a hook) kept ``orch --help``,
``orch plugins`` and a finished fanout alive until killed, and an abandoned tool thread
still in native code dies mid-call at shutdown (C++ answers that with abort(): a crash after
a clean run). When either is the case at the end of a command, everything is flushed and the
process leaves with its exit code at once (``os._exit``); otherwise it ends the usual way.
"""

from __future__ import annotations

import sys
import threading


def foreign_threads() -> list[threading.Thread]:
    """Live non-daemon threads orch did not start (orch names its own ``orch-*``)."""
    main = threading.main_thread()
    return [t for t in threading.enumerate()
            if t is not main and not t.daemon and t.is_alive()
            and not t.name.startswith("orch-")]


def must_leave_now() -> bool:
    """Whether the interpreter's own end would wait for something orch did not start, or
    kill a thread mid-call: a plugin's non-daemon thread, an abandoned tool call."""
    tools = sys.modules.get("orchestrator.tool_thread")
    return bool(foreign_threads()) or (tools is not None and tools.still_running())


def leave(code) -> None:
    """End the command with ``code`` (a SystemExit's code) now when :func:`must_leave_now`;
    else return and let the interpreter end as usual."""
    if not must_leave_now():
        return
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    import logging

    logging.shutdown()
    import os

    os._exit(code or 0)  # orch's own thread: the plugin exit guard lets it through
