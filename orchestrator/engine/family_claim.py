"""One retry of a wave family at a time, across processes.

Two ``orch fanout --retry-failed`` of one family started together would each plan from the
same record, both run the same failed leg and each spend what the family's ceiling has left.
A retry therefore holds an exclusive lock on the family's root (``<root>/retry.lock``) from
before it plans until its wave has ended and its rows are written; a second retry is refused
at once, in one line, before it spends anything. The lock is the kernel's (``flock``): a
retry that is killed lets go with its process, and two claims in one process (``orch serve``
runs waves in threads) exclude each other too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from orchestrator.errors import OrchError

LOCK_NAME = "retry.lock"


class FamilyBusy(OrchError):
    """Another process is retrying this family now."""


@contextlib.contextmanager
def claim_family(runs_dir: Path, root: str) -> Iterator[None]:
    """Hold the family of ``root`` for the ``with`` block, or raise :class:`FamilyBusy`."""
    path = runs_dir / root / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)  # no planted link
    except OSError as exc:
        raise OrchError(f"cannot claim wave {root} for a retry: {path}: "
                        f"{exc.strerror or exc}; check that the runs directory is "
                        "writable") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "another"
            raise FamilyBusy(f"wave {root} (or a retry of it) is being retried now by "
                             f"{holder}; wait for that retry to end, then run "
                             "--retry-failed again: it plans from what that one paid") from None
        with contextlib.suppress(OSError):  # the holder's pid only names it in the refusal
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)
