"""The child process a bench check or an output parser runs in: ``python -m
orchestrator.bakeoff.child`` reads one JSON request on stdin and writes one JSON reply.

A task's ``python`` check is someone's code run on a model's answer, and a parser reads
whatever a command printed: in a child, a check that hangs, exits, crashes or eats memory
ends that trial (an ``error``, said so), never orch. What the check prints goes to stderr;
the reply goes to the stdout orch reads, written last.

Requests: ``{"op": "expect", "expect": {...}, "answer": str, "folder": str|null}`` →
``{"passed": bool, "output": str}``; ``{"op": "parse", "parser": str, "stdout": str}`` →
``{"reported": {...}}``; a failure → ``{"error": str}``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from typing import Any


def handle(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") == "expect":
        from orchestrator.bakeoff.tasks import expect_failures

        folder = request.get("folder")
        if folder:
            sys.path.insert(0, folder)
        failures = expect_failures(request["expect"], request["answer"])
        return {"passed": not failures,
                "output": "; ".join(failures) or "all expectations hold"}
    if request.get("op") == "parse":
        from orchestrator.bakeoff.contestants import read_output

        return {"reported": asdict(read_output(request["parser"], request["stdout"]))}
    return {"error": f"unknown request {request.get('op')!r}"}


def _die_with_parent() -> None:
    """Linux: a child orch left behind (orch was killed) is killed, not left hanging."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def main() -> None:
    _die_with_parent()
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the check prints goes to stderr, never into the reply
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    try:
        reply = handle(json.loads(sys.stdin.buffer.read()))
    except SystemExit as exc:
        reply = {"error": f"it called sys.exit({exc.code!r})"}
    except BaseException as exc:  # noqa: BLE001 - anything the check did is the reply
        reply = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    sys.stdout.flush()
    with os.fdopen(reply_fd, "w", encoding="utf-8") as out:
        json.dump(reply, out)


if __name__ == "__main__":
    main()
