"""Run CLI tests both ways: in-process, and through a warm ``orch serve``.

:func:`invoke` runs ``orch ARGS``: with no daemon up, through click's CliRunner in this
process; inside :func:`daemon_in_thread`, as the real ``orch`` entry point in a subprocess
(the client) whose job runs on a daemon serving from a thread of this process, so a test's
scripted server, monkeypatches and files are the daemon's too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_active: list = []


@dataclass
class Result:
    """What CliRunner's Result offers the tests: exit code, stdout, stderr, both."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def client(args: list[str], *, input: str | bytes | None = None, env: dict | None = None,
           cwd: str | Path | None = None, timeout: float = 120.0) -> Result:
    """``orch ARGS`` as a user runs it: the real entry point, in a subprocess."""
    data = input.encode() if isinstance(input, str) else (input or b"")
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], input=data,
                          capture_output=True, env=dict(env or os.environ), cwd=cwd,
                          timeout=timeout)
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                  proc.stderr.decode("utf-8", "replace"))


def invoke(args: list[str], *, input: str | bytes | None = None):
    if _active:
        return client(args, input=input)
    from click.testing import CliRunner

    from orchestrator.cli import cli

    return CliRunner().invoke(cli, args, input=input)


@contextmanager
def daemon_in_thread(idle_s: float = 3600.0) -> Iterator[object]:
    """``orch serve`` on a thread of this process, on the socket XDG_RUNTIME_DIR names (set
    it to a temporary directory first); stopped and undone on exit."""
    from orchestrator.daemon import joblog
    from orchestrator.daemon.server import Daemon

    daemon = Daemon(idle_s=idle_s, log=lambda text: None)
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            daemon.serve_forever()
        except BaseException as exc:  # noqa: BLE001 - said by the fixture below
            errors.append(exc)

    thread = threading.Thread(target=serve, name="orch-serve-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not daemon.path.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if errors or not daemon.path.exists():
        joblog.uninstall()
        raise RuntimeError(f"the test daemon did not start: {errors}")
    _active.append(daemon)
    try:
        yield daemon
    finally:
        _active.remove(daemon)
        daemon.stop()
        thread.join(60)
        joblog.uninstall()


def serve_processes(under: str | Path) -> list[int]:
    """The pids of this user's ``orch serve`` processes whose ``XDG_RUNTIME_DIR`` or
    ``ORCH_HOME`` lies under ``under`` (a test's tmp directory): a daemon a test started, by
    hand or by ``daemon: auto``, found from ``/proc`` (Linux), so none outlives its test."""
    root = os.fsencode(os.path.realpath(under))
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"serve" not in argv or not any(
                    a.endswith((b"orchestrator", b"orch", b"orchestrator.daemon"))
                    for a in argv):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        for var in environ:
            name, _, value = var.partition(b"=")
            if name in (b"XDG_RUNTIME_DIR", b"ORCH_HOME") and value and \
                    os.path.realpath(value).startswith(root + b"/"):
                found.append(int(entry.name))
                break
    return found
