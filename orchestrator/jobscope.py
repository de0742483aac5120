"""Where a running command's interrupts come from, who hears that a wave began, and how the
command leaves after an interrupt whatever holds it.

Run from a terminal, a command's interrupts are the process's SIGINT and SIGTERM, and a
second one leaves at once. Run for someone else inside a long-lived process (``orch serve``
runs each client's command on a thread; ``orch mcp`` runs tool calls), the process's signals
belong to no one job: each job gets a :class:`JobScope`, and its owner delivers that job's
interrupts (a client's Ctrl-C, an MCP cancellation, the client's death) with
:meth:`JobScope.interrupt`. The wave and the council watch :func:`interrupts` and end exactly
as on a signal.

**A hard timer.** An interrupt normally ends the run at once: every wait on plugin code is
abandonable. What orch cannot interrupt — plugin code reached on orch's own thread through
an object it handed back, native code that holds the GIL — would hold the record open. So
the first interrupt also starts a timer (armed from the signal handler itself, which runs
even while the event loop is stuck): HARD_EXIT_S later, if a wave is still running, its
``wave.json`` is written final from what its legs hold (:func:`finaliser`) and the command
leaves (the process: ``os._exit(128 + signal)``; a daemon's job: its owner ends it). A
second interrupt does the same at once.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

import anyio

_current: ContextVar[JobScope | None] = ContextVar("orch_job_scope", default=None)

HARD_EXIT_S = 1.5  # after the first interrupt, a run still open is written and left
FINAL_WRITE_S = 0.3  # what the writes of the records get, together


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
        self.finalisers: list[Callable[[int], None]] = []  # the runs open now
        self._timer: threading.Thread | None = None

    def interrupt(self, signum: int) -> bool:
        """Deliver ``signum`` to the job's watchers; False when none is watching (the
        owner then interrupts the job's thread as the signal itself would). The first one
        arms the job's hard timer."""
        with self._lock:
            if self._timer is None:
                self._timer = threading.Thread(target=self._hard_exit, args=(signum,),
                                               name="orch-hard-exit", daemon=True)
                self._timer.start()
            receivers = list(self._receivers)
        for loop, send in receivers:
            loop.call_soon_threadsafe(send.send_nowait, signum)
        return bool(receivers)

    def _hard_exit(self, signum: int) -> None:
        time.sleep(HARD_EXIT_S)
        if self.finalisers:  # a run is still open: written final, the job ends
            leave_now(signum, self)

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
    """The interrupts of the command running here: its job's, else the process's signals
    (and, while they are watched, the process's hard timer: :class:`_Timer`)."""
    scope = _current.get()
    if scope is None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals, \
                _Timer.armed():
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


_process_finalisers: list[Callable[[int], Any]] = []
_process_last_words: list[Callable[[int, list], None]] = []


@contextmanager
def finaliser(write: Callable[[int], Any]) -> Iterator[None]:
    """While the code inside runs, ``write(signum)`` can write its run's record final from
    what it holds now (a wave: its ``wave.json``), should the command have to leave before
    the run ends (a hard exit, a second interrupt); what it returns (the document written)
    goes to the command's :func:`last_words`."""
    scope = _current.get()
    held = scope.finalisers if scope is not None else _process_finalisers
    held.append(write)
    try:
        yield
    finally:
        held.remove(write)


@contextmanager
def last_words(say: Callable[[int, list], None]) -> Iterator[None]:
    """While the code inside runs, a hard exit of this process ends with ``say(signum,
    documents)``, the documents its finalisers wrote: the command's output (a ``--json``
    document) is printed as the run's end would have printed it, not lost with the exit.
    A job inside a long-lived process has no output of its own here (its owner answers)."""
    if _current.get() is not None:
        yield
        return
    _process_last_words.append(say)
    try:
        yield
    finally:
        _process_last_words.remove(say)


def leave_now(signum: int, scope: JobScope | None = None) -> None:
    """Leave at once: every open run's record written final first (FINAL_WRITE_S for them
    all), then the process ends (``128 + signum``) or, in a job, its owner ends it."""
    scope = scope if scope is not None else _current.get()
    writes = list(scope.finalisers if scope is not None else _process_finalisers)
    says = list(_process_last_words) if scope is None else []
    if writes:
        def write_all() -> None:
            documents = []
            for write in writes:
                try:
                    documents.append(write(signum))
                except Exception:  # noqa: BLE001 - the next record still gets written
                    pass
            for say in says:
                try:
                    say(signum, [d for d in documents if d is not None])
                except Exception:  # noqa: BLE001 - the exit still happens
                    pass

        writer = threading.Thread(target=write_all, name="orch-final-write", daemon=True)
        writer.start()
        writer.join(FINAL_WRITE_S)
    if scope is not None and scope.on_leave is not None:
        scope.on_leave(signum)
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(128 + signum)


class _Timer:
    """The process's hard timer. Armed by a Python-level signal handler, which runs on the
    main thread between two bytecodes even while the event loop is stuck in a callback (the
    loop itself learns of the signal only when it turns): the handler only writes the
    signal's number to a pipe (reentrant, no lock), and a daemon thread waiting on it waits
    HARD_EXIT_S more — or for a second signal — then leaves with the records written."""

    @staticmethod
    @contextmanager
    def armed() -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach only the main thread (an in-process test's wave)
            return
        read, write = os.pipe()
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def handler(signum: int, frame: Any) -> None:
            try:
                os.write(write, bytes([signum]))
            except OSError:
                pass

        thread = threading.Thread(target=_Timer._wait, args=(read,), name="orch-hard-exit",
                                  daemon=True)
        thread.start()
        for sig in previous:
            signal.signal(sig, handler)
        try:
            yield
        finally:
            for sig, before in previous.items():
                if signal.getsignal(sig) is handler:
                    signal.signal(sig, before)
            try:
                os.write(write, b"\0")  # the watch is over: the timer stands down
            except OSError:
                pass  # it already left
            os.close(write)

    @staticmethod
    def _wait(read: int) -> None:
        try:
            first = os.read(read, 1)
            if not first or first == b"\0":
                return
            ends = time.monotonic() + HARD_EXIT_S
            while (left := ends - time.monotonic()) > 0:
                ready, _, _ = select.select([read], [], [], left)
                if ready:
                    more = os.read(read, 1)
                    if not more or more == b"\0":
                        return  # the watch ended on its own
                    break  # a second signal: now
            if _process_finalisers:
                leave_now(first[0])
        finally:
            os.close(read)


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
