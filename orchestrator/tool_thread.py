"""Tool work off the event loop, with a hard deadline and nothing left behind at exit.

A tool call is plain blocking code (walking a tree, searching files). Run on the event loop's
thread it would stop every leg of the wave, and signals with them. Here it runs on its own
*daemon* thread: the leg awaits it without blocking, its time limit (the tool's, or the
leg's, whichever comes first) ends the wait on time, and a thread still busy when the wave
ends never keeps the process alive.

The work itself looks at :func:`expired` as it goes (between files, every few thousand
lines) and stops with what it has, saying which limit it hit; a thread whose caller has
gone stops at its next look.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

GRACE_S = 0.5  # after its own limit, a call's thread gets this long to hand back what it has


class ToolTimeout(Exception):  # noqa: N818 - a limit the model reads about
    """The tool's thread did not finish within its hard deadline."""


class _Call:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.abandoned = threading.Event()


_current: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("orch_tool_call",
                                                                        default=None)


def expired() -> bool:
    """Whether the tool call running on this thread should stop now: its time is up or its
    leg stopped waiting for it. False outside a tool call."""
    call = _current.get()
    return call is not None and (call.abandoned.is_set() or time.monotonic() >= call.deadline)


def seconds_allowed() -> float | None:
    """The time limit of the tool call running on this thread (for the result's wording)."""
    call = _current.get()
    return None if call is None else call.seconds


class _Worker(threading.Thread):
    """A daemon thread that runs one call at a time and then waits for the next, so a call
    costs a hand-over, not a thread start. A worker whose call was abandoned finishes it and
    only then takes work again; new calls meanwhile get another worker."""

    _idle: list[_Worker] = []
    _lock = threading.Lock()
    busy = 0  # calls running now, abandoned ones included

    def __init__(self) -> None:
        super().__init__(name="orch-tool", daemon=True)
        self._job = threading.Condition()
        self._work: Callable[[], None] | None = None
        self.start()

    @classmethod
    def submit(cls, work: Callable[[], None]) -> None:
        with cls._lock:
            worker = cls._idle.pop() if cls._idle else None
        if worker is None:
            worker = cls()
        with cls._lock:
            cls.busy += 1
        with worker._job:
            worker._work = work
            worker._job.notify()

    def run(self) -> None:
        while True:
            with self._job:
                while self._work is None:
                    self._job.wait()
                work, self._work = self._work, None
            try:
                work()
            finally:
                with _Worker._lock:
                    _Worker.busy -= 1
                    _Worker._idle.append(self)


def background(fn: Callable[[], None]) -> None:
    """``fn()`` on a daemon worker thread, not waited for (the search index's writer):
    :func:`still_running` counts it until it returns, so an exit never cuts it mid-call."""
    _Worker.submit(fn)


def still_running() -> bool:
    """Whether an abandoned call is still in native code (re2, file reads). The interpreter's
    exit would kill its thread mid-call, which C++ code answers with abort() (exit -6 after
    the results were printed): the CLI then leaves with ``os._exit`` instead."""
    return _Worker.busy > 0


async def run_sync(fn: Callable[[], T], *, seconds: float) -> T:
    """``fn()`` on a daemon worker thread. Waits at most ``seconds`` + GRACE_S (then
    ToolTimeout); cancellation (the leg's timeout, a signal) ends the wait at once. Either
    way the thread is told to stop and is never waited for again."""
    ends = time.monotonic() + seconds + GRACE_S
    return await run_until(fn, lambda: ends, seconds=seconds)


async def run_until(fn: Callable[[], T], deadline: Callable[[], float], *,
                    seconds: float = float("inf"), quick_s: float = 0.0) -> T:
    """``fn()`` on a daemon worker thread until ``deadline()`` (a ``time.monotonic()``
    instant, read again whenever the wait reaches it, so the work may move it on: a hook
    runner sets it from the implementation running now). Past it: ToolTimeout and the
    thread abandoned, as in :func:`run_sync`; ``seconds`` is what :func:`expired` and
    :func:`seconds_allowed` tell the work.

    ``quick_s``: first wait that long on this thread (the loop stalls at most that much).
    Work that is done by then costs a hand-over (tens of µs), not the loop's wake-up through
    a future and a timer (hundreds of µs on a loaded machine): hooks are mostly quick."""
    import asyncio

    call = _Call(seconds)
    done = threading.Event()
    outcome: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    waiting: list[asyncio.Future] = []  # set before the loop waits: then the work wakes it
    context = contextvars.copy_context()

    def wake() -> None:
        if waiting and not waiting[0].done():
            waiting[0].set_result(None)

    def work() -> None:
        _current.set(call)
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller, raised there
            outcome["error"] = exc
        finally:
            _current.set(None)
            done.set()  # before looking at ``waiting``; the loop sets it before ``done``
            if waiting and not call.abandoned.is_set():
                try:
                    loop.call_soon_threadsafe(wake)
                except RuntimeError:
                    pass  # the loop is closed: nobody waits any more

    try:
        _Worker.submit(lambda: context.run(work))
        if quick_s > 0:
            done.wait(quick_s)
        if not done.is_set():
            waiting.append(loop.create_future())
        finished = waiting[0] if waiting else None
        while not done.is_set():
            left = deadline() - time.monotonic()
            if left <= 0:
                break
            with anyio.move_on_after(left):
                await asyncio.shield(finished)
    finally:
        if not done.is_set():
            call.abandoned.set()
    if not done.is_set():
        raise ToolTimeout(f"did not finish within its {call.seconds:g} s limit")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_blocking(fn: Callable[[], T], *, seconds: float) -> T:
    """``fn()`` on a daemon worker thread, waited for from synchronous code (start-up, the
    CLI reading its models) at most ``seconds``: then ToolTimeout, the thread abandoned."""
    call = _Call(seconds)
    done = threading.Event()
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def work() -> None:
        _current.set(call)
        try:
            outcome["value"] = fn()
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            _current.set(None)
            done.set()

    try:
        _Worker.submit(lambda: context.run(work))
        done.wait(seconds)
    finally:
        if not done.is_set():
            call.abandoned.set()
    if not done.is_set():
        raise ToolTimeout(f"did not finish within its {seconds:g} s limit")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
