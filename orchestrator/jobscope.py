"""Where a running command's interrupts come from, and who hears that a wave began.

Run from a terminal, a command's interrupts are the process's SIGINT and SIGTERM, and a
second one leaves at once. Run for someone else inside a long-lived process (``orch serve``
runs each client's command on a thread; ``orch mcp`` runs tool calls), the process's signals
belong to no one job: each job gets a :class:`JobScope`, and its owner delivers that job's
interrupts (a client's Ctrl-C, an MCP cancellation) with :meth:`JobScope.interrupt`. The
wave and the council watch :func:`interrupts` and end exactly as on a signal.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

import anyio

_current: ContextVar[JobScope | None] = ContextVar("orch_job_scope", default=None)


class JobScope:
    """One command run on behalf of someone else: its interrupts, its waves."""

    def __init__(self, *, on_wave: Callable[[str], None] | None = None,
                 on_leave: Callable[[int], None] | None = None,
                 client_pid: int | None = None) -> None:
        self.on_wave = on_wave  # told the run's id: each wave's as its directory is made,
        # or once the run of waves (a bench, council, deliberation) a user asks `orch
        # status` about
        self.on_leave = on_leave  # a second interrupt: the job's owner ends it at once
        self.client_pid = client_pid  # the `orch` process that asked (serve: SO_PEERCRED)
        self.waves: list[str] = []
        self.run_id: str | None = None  # the first run announced: its waves, and the runs
        # inside it (a bench trial's council or deliberation), are not named then
        self._lock = threading.Lock()
        self._receivers: list[tuple[Any, Any]] = []  # (event loop, send stream)

    def interrupt(self, signum: int) -> bool:
        """Deliver ``signum`` to the job's watchers; False when none is watching (the
        owner then interrupts the job's thread as the signal itself would)."""
        with self._lock:
            receivers = list(self._receivers)
        for loop, send in receivers:
            loop.call_soon_threadsafe(send.send_nowait, signum)
        return bool(receivers)

    @asynccontextmanager
    async def receiver(self) -> AsyncIterator[Any]:
        import asyncio

        send, receive = anyio.create_memory_object_stream[int](8)
        entry = (asyncio.get_running_loop(), send)
        with self._lock:
            self._receivers.append(entry)
        try:
            async with receive:
                yield receive
        finally:
            with self._lock:
                self._receivers.remove(entry)
            send.close()

    def wave_started(self, wave_id: str) -> None:
        self.waves.append(wave_id)
        if self.on_wave is not None and self.run_id is None:
            self.on_wave(wave_id)

    def run_started(self, run_id: str) -> None:
        if self.run_id is not None:  # a run inside the job's run: the outer one is named
            return
        self.run_id = run_id
        if self.on_wave is not None:
            self.on_wave(run_id)


def current() -> JobScope | None:
    return _current.get()


@contextmanager
def running(scope: JobScope):
    """Run the code inside as ``scope``'s job (contextvars: threads that copy the context and
    anyio's worker threads see it too)."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


@asynccontextmanager
async def interrupts() -> AsyncIterator[Any]:
    """The interrupts of the command running here: its job's, else the process's signals."""
    scope = _current.get()
    if scope is None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            yield signals
    else:
        async with scope.receiver() as signals:
            yield signals


async def watch(interrupt: Callable[[int], None], interrupted: Callable[[], bool], *,
                task_status=anyio.TASK_STATUS_IGNORED) -> None:
    """Hand the command's interrupts to ``interrupt`` (a wave, a council, a bench); once
    ``interrupted()`` says one arrived, the next leaves at once."""
    async with interrupts() as signals:
        task_status.started()
        async for signum in signals:
            if interrupted():
                leave_now(signum)  # a second signal: leave at once
                continue
            interrupt(signum)


def leave_now(signum: int) -> None:
    """A second interrupt: leave at once (the process; or, in a job, its owner ends it)."""
    scope = _current.get()
    if scope is not None and scope.on_leave is not None:
        scope.on_leave(signum)
        return
    os._exit(128 + signum)


def client_pid() -> int | None:
    """The pid of the ``orch`` command that was run for this run: this process in-process
    (``orch mcp`` included), the client under ``orch serve`` (its ``SO_PEERCRED``). Only
    recorded (wave.json ``client_pid``): liveness is the runner's ``pid``."""
    scope = _current.get()
    return os.getpid() if scope is None else scope.client_pid


def wave_started(wave_id: str) -> None:
    scope = _current.get()
    if scope is not None:
        scope.wave_started(wave_id)


def run_started(run_id: str) -> None:
    """A run made of waves (a bench, a council, a deliberation) began: its id, not a
    wave's, is the one its client names if the daemon dies (`orch status` of it repairs the
    whole run). The first announced stays: a council that is a bench's trial does not
    replace the bench."""
    scope = _current.get()
    if scope is not None:
        scope.run_started(run_id)
