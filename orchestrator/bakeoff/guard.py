"""How a bench runs what it does not trust: hidden checks over model-written answers, command
contestants, and the parsers that read what those print.

Every one of them is a child process with a time limit, a memory limit and capped output,
killed with its process group (:mod:`orchestrator.sandbox.process`); an interrupt kills them
all (``running``). ``verify`` commands and command contestants are also confined under
bubblewrap (:mod:`orchestrator.sandbox.bwrap`) with an environment holding no key values.
Where bwrap cannot run, the bench refuses them unless ``--unsafe-checks`` was given; then they
run with the scrubbed environment and the limits only, and the results say so.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError
from orchestrator.sandbox import bwrap, environment
from orchestrator.sandbox.process import Limits, Running, run

CHECK_TIMEOUT_S = 60.0
CHECK_MEMORY_MB = 2048
FILE_MB = 1024  # the largest file a check or a contestant may write
UNSAFE_FLAG = "--unsafe-checks"


@dataclass
class Guard:
    bwrap: str | None  # bwrap's path when confining; None: unconfined (--unsafe-checks)
    check_timeout_s: float = CHECK_TIMEOUT_S
    check_memory_mb: int = CHECK_MEMORY_MB
    file_mb: int = FILE_MB
    readable: tuple[Path, ...] = ()  # [bench] readable: shown read-only inside the sandbox
    running: Running = field(default_factory=Running)
    # never seen inside the sandbox: the bench's task folders (checks, solutions), the
    # built-in suites, the folder of its results file (bakeoff/plan.py, cli/bench_run.py)
    secret: tuple[Path, ...] = ()
    unsafe: bool = False  # --unsafe-checks was passed (else bwrap None: nothing needed it)

    @classmethod
    def of(cls, bwrap: str | None, settings: dict[str, Any]) -> Guard:
        """From ``plan.check_settings``: check_timeout_s, check_memory_mb, readable."""
        return cls(bwrap=bwrap, check_timeout_s=settings["check_timeout_s"],
                   check_memory_mb=settings["check_memory_mb"],
                   readable=tuple(Path(p).expanduser() for p in settings["readable"]))

    @property
    def reaps(self) -> bool:
        """Whether what :meth:`command` returns needs the reaper to end everything it
        starts: unconfined, yes; under bwrap its PID namespace does (sandbox/process.py)."""
        return self.bwrap is None

    @property
    def confinement(self) -> str:
        """What the results file states: the flag only when it was passed."""
        if self.bwrap:
            return "bwrap"
        if self.unsafe:
            return f"none ({UNSAFE_FLAG}: scrubbed environment and resource limits only)"
        return "none needed (no verify check and no command contestant)"

    def check_limits(self, timeout_s: float | None = None) -> Limits:
        return Limits(timeout_s=timeout_s or self.check_timeout_s,
                      memory_mb=self.check_memory_mb, file_mb=self.file_mb)

    def command(self, argv: list[str], *, cwd: Path, writable: tuple[Path, ...] = (),
                readable: tuple[Path, ...] = (), network: bool = False) -> list[str]:
        """``argv`` as it runs: inside bwrap, or as it is."""
        if self.bwrap is None:
            return list(argv)
        box = bwrap.Confinement(cwd=cwd, writable=(cwd, *writable), network=network,
                                readable=(*bwrap.default_readable(), *self.readable,
                                          *readable), secret=self.secret)
        return bwrap.argv(box, argv, self.bwrap)

    def env(self, *, declared: dict[str, str] | None = None, passed: tuple[str, ...] = (),
            ) -> dict[str, str]:
        """No key values: inside bwrap HOME is the private /tmp (the real one is hidden)."""
        return environment.confined(declared=declared, passed=passed,
                                    home="/tmp" if self.bwrap else None)

    def python(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """``request`` answered by :mod:`orchestrator.bakeoff.child` in a child process;
        ``{"error": why}`` when the child did not reply (hung, exited, crashed)."""
        done = run([sys.executable, "-m", "orchestrator.bakeoff.child"], cwd=Path.cwd(),
                   env=environment.confined(), stdin=json.dumps(request).encode(),
                   limits=self.check_limits(timeout_s), running=self.running)
        if done.error:
            return {"error": done.error}
        if done.interrupted:
            return {"error": "interrupted"}
        if done.timed_out:
            return {"error": f"it ran past its {timeout_s:g} s limit"}
        if done.killed_by:
            return {"error": f"it was killed by {done.killed_by}" + (
                " (over its memory limit?)" if done.killed_by in ("SIGKILL", "SIGSEGV")
                else "")}
        try:
            reply = json.loads(done.stdout.text())
            if not isinstance(reply, dict):
                raise ValueError
        except ValueError:
            last = done.stderr.text().strip().splitlines()[-1:] or [""]
            return {"error": f"it exited (code {done.exit_code}) without a verdict"
                    + (f": {last[0][:300]}" if last[0] else "")}
        return reply


def choose(*, needed: bool, unsafe: bool) -> str | None:
    """bwrap's path when it confines here; None when nothing needs it, or when the user
    passed ``--unsafe-checks``. Refuses, naming the fix, when it is needed and cannot run."""
    if unsafe:
        return None
    why = bwrap.usable()
    if why is None:
        return bwrap.found()
    if not needed:
        return None
    raise OrchError(f"{why}: `verify` checks and command contestants run confined under "
                    f"bubblewrap; {bwrap.INSTALL_HINT}, or pass {UNSAFE_FLAG} to run them "
                    "with a scrubbed environment and resource limits only")
