"""Which command lines a daemon may run (``fanout``, ``council run``, ``bench``): read before
anything else at start-up, standard library only, so ``orch --help`` never imports the
daemon's client."""

from __future__ import annotations

import os

GLOBAL_FLAGS = ("--log-json",)


def job_command(argv: list[str]) -> str | None:
    """``fanout``, ``council run`` or ``bench`` when ``argv`` runs one through a daemon."""
    if "_ORCH_COMPLETE" in os.environ:
        return None
    args = [a for a in argv if a not in GLOBAL_FLAGS]
    if not args or any(a in ("--no-daemon", "--help", "-h", "--version") for a in argv):
        return None
    if args[0] in ("fanout", "bench"):
        return args[0]
    if args[0] == "council" and len(args) > 1 and args[1] == "run":
        return "council run"
    return None
