"""``orch ARGS`` in OS processes of their own that skip the interpreter's cold start: each is
forked from one server process that imported orch and litellm once (multiprocessing's
``forkserver`` with those modules preloaded), then runs :func:`orchestrator.cli.main` as the
``orch`` script does, with its own environment, working directory, stdout and stderr.

For tests whose promise is about several orch processes at once (the ledger under concurrent
writers, each a different person), not about the entry point's start: eight fresh
interpreters each importing litellm are most of such a test's time on 2 cores. Each process
still opens its config, plugins, ledger and server itself, as a new ``orch`` does. Proving the
real entry point (``python -m orchestrator``, ``orch``) stays with the tests that spawn it."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# imported once by the server process: what a cold `orch fanout` spends its first seconds on
PRELOAD = ["litellm", "orchestrator.cli", "orchestrator.app.wave", "orchestrator.engine.wave",
           "orchestrator.ledger.spend"]

_context = None


def _forkserver():
    """The forkserver context, its server started once with this process's own import path:
    a PYTHONPATH a test set since (its installed plugins) is not the server's, so no later
    process inherits it (each child reads its own PYTHONPATH, :func:`_orch`)."""
    global _context
    if _context is None:
        from multiprocessing import forkserver

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        saved = os.environ.get("PYTHONPATH")
        own = [p for p in (saved or "").split(os.pathsep) if p and p in sys.path]
        try:
            if own:
                os.environ["PYTHONPATH"] = os.pathsep.join(own)
            else:
                os.environ.pop("PYTHONPATH", None)
            forkserver.ensure_running()
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
        _context = context
    return _context


def _orch(argv: list[str], env: dict[str, str], cwd: str | None, out: str, err: str) -> None:
    """The child: the environment, directory and streams of a new process, then `orch`."""
    os.environ.clear()
    os.environ.update(env)
    if cwd:
        os.chdir(cwd)
    # PYTHONPATH, read by a new interpreter at its start: its folders after the script's,
    # where they would be (a test's installed plugins are found there)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    if extra:
        import importlib

        sys.path[1:1] = extra
        importlib.invalidate_caches()
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                      closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                      closefd=False, buffering=1)
    sys.argv = ["orch", *argv]
    code: int | str | None = 0
    try:
        from orchestrator.cli import main

        main()
    except SystemExit as exc:
        code = exc.code
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    if isinstance(code, str):
        print(code, file=sys.stderr, flush=True)
        code = 1
    os._exit(code or 0)


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


class WarmOrch:
    """One running ``orch ARGS``: :meth:`wait` for its exit code and output."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str | Path | None = None
                 ) -> None:
        self._dir = tempfile.mkdtemp(prefix="orch-warm-")
        self._out, self._err = f"{self._dir}/stdout", f"{self._dir}/stderr"
        self.process = _forkserver().Process(
            target=_orch, args=(list(argv), dict(env), str(cwd) if cwd else None, self._out,
                                self._err), daemon=True)
        self.process.start()
        self.pid = self.process.pid

    # what a test that holds a subprocess.Popen also calls
    def poll(self) -> int | None:
        return self.process.exitcode

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        done = self.wait(timeout)
        return done.stdout, done.stderr

    def kill(self) -> None:
        self.process.kill()

    def wait(self, timeout: float | None = None) -> Done:
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
            raise TimeoutError(f"orch did not end within {timeout} s: {self.read()[1][-2000:]}")
        out, err = self.read()
        shutil.rmtree(self._dir, ignore_errors=True)
        return Done(self.process.exitcode, out, err)

    def read(self) -> tuple[str, str]:
        texts = []
        for path in (self._out, self._err):
            try:
                texts.append(Path(path).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                texts.append("")
        return texts[0], texts[1]


def start(argv: list[str], env: dict[str, str], cwd: str | Path | None = None) -> WarmOrch:
    """``orch ARGS`` started in a process of its own, forked warm."""
    return WarmOrch(argv, env, cwd)
