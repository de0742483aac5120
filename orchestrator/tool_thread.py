"""Blocking work off the event loop, with a hard deadline and nothing left behind at exit.

A tool call is plain blocking code (walking a tree, searching files), and so is a third
party's synchronous hook. Run on the event loop's thread it would stop every leg of the wave,
and signals with them. Here it runs on a *daemon* worker thread: the caller awaits it without
blocking, its time limit (the tool's, the hook's, or the leg's, whichever comes first) ends
the wait on time, and a thread still busy when the wave ends never keeps the process alive.

The work itself looks at :func:`expired` as it goes (between files, every few thousand
lines) and stops with what it has, saying which limit it hit; a thread whose caller has
gone stops at its next look. :func:`abandoned` says the same to code that must not act for
a caller who left (a hook's late ``leg.set``: engine/context.py).
"""

from __future__ import annotations

import _thread
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

GRACE_S = 2.0  # after its own limit, a call's thread gets this long to hand back what it has
# (one big file read and scanned between two checks takes over 0.5 s on a loaded 2-core box)


class ToolTimeout(Exception):  # noqa: N818 - a limit the model reads about
    """The tool's thread did not finish within its hard deadline."""


class Call:
    """One piece of work handed to a worker (or to the plugin loop): its limit, and whether
    its caller stopped waiting for it."""

    __slots__ = ("deadline", "seconds", "abandoned", "site")

    def __init__(self, seconds: float, site: tuple[str, str] | None = None) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.abandoned = False
        self.site = site  # (plugin, hook) when the work is a plugin's: what a late write names


_current: contextvars.ContextVar[Call | None] = contextvars.ContextVar("orch_tool_call",
                                                                       default=None)


def expired() -> bool:
    """Whether the work running here should stop now: its time is up or its caller stopped
    waiting for it. False outside such work."""
    call = _current.get()
    return call is not None and (call.abandoned or time.monotonic() >= call.deadline)


def abandoned() -> bool:
    """Whether the work running here was given up by its caller (a hook past its deadline):
    what it does now is done for nobody."""
    call = _current.get()
    return call is not None and call.abandoned


def abandoned_site() -> tuple[str, str] | None:
    """(plugin, hook) of the abandoned plugin call running here, or None when the work
    running here (if any) is still waited for."""
    call = _current.get()
    if call is None or not call.abandoned:
        return None
    return call.site or ("?", "?")


def seconds_allowed() -> float | None:
    """The time limit of the tool call running on this thread (for the result's wording)."""
    call = _current.get()
    return None if call is None else call.seconds


def enter(call: Call) -> None:
    """Make ``call`` the work running in this context (a task of its own: nothing to undo)."""
    _current.set(call)


def current() -> Call | None:
    """The work running here, if any."""
    return _current.get()


def in_call(call: Call, fn: Callable[[], T]) -> T:
    """``fn()`` as ``call``'s work: :func:`expired` and :func:`abandoned` read ``call``."""
    token = _current.set(call)
    try:
        return fn()
    finally:
        _current.reset(token)


class _Worker(threading.Thread):
    """A daemon thread that runs one call at a time and then waits for the next, so a call
    costs a hand-over (one lock), not a thread start. A worker whose call was abandoned
    finishes it and only then takes work again; new calls meanwhile get another worker."""

    _idle: list[_Worker] = []
    _lock = _thread.allocate_lock()
    busy = 0  # calls running now, abandoned ones included

    def __init__(self) -> None:
        super().__init__(name="orch-tool", daemon=True)
        self._go = _thread.allocate_lock()
        self._go.acquire()
        self._work: Callable[[], None] | None = None
        self.start()

    @classmethod
    def submit(cls, work: Callable[[], None]) -> None:
        with cls._lock:
            worker = cls._idle.pop() if cls._idle else None
            cls.busy += 1
        if worker is None:
            worker = cls()
        worker._work = work
        worker._go.release()

    def run(self) -> None:
        go = self._go.acquire
        while True:
            go()
            work, self._work = self._work, None
            try:
                work()  # type: ignore[misc]
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


class Handover:
    """Where a piece of work hands its outcome back: a lock its caller may block on for a
    moment (quick work costs no wake-up of the event loop), then, if it must wait longer, a
    future on the caller's loop that the work resolves."""

    __slots__ = ("call", "done", "outcome", "error", "waiting", "loop")

    def __init__(self, call: Call, loop=None) -> None:
        self.call = call
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.outcome: Any = None
        self.error: BaseException | None = None
        self.waiting: Any = None  # the caller's future, once it waits on its loop
        self.loop = loop

    def settle(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` as the call's work and hand its outcome back (on the worker)."""
        try:
            self.outcome = in_call(self.call, fn)
        except BaseException as exc:  # handed to the caller, raised there
            self.error = exc
        self.finished()

    def finished(self) -> None:
        self.done.release()
        waiting = self.waiting
        if waiting is not None and not self.call.abandoned:
            try:
                self.loop.call_soon_threadsafe(_wake, waiting)
            except RuntimeError:
                pass  # the loop is closed: nobody waits any more

    async def wait(self, deadline: Callable[[], float], quick_s: float = 0.0) -> bool:
        """Wait until the work is done (True) or ``deadline()`` passed (False); the deadline
        is read again whenever the wait reaches it (the work may move it on).
        Cancellation ends the wait at once; either way an unfinished call is abandoned.

        Past ``quick_s`` the wait is a bare future of the caller's loop and one timer (no
        cancel scope, no shield: a fresh future each time the deadline is read again), the
        cheapest way a loop sleeps until another thread or a time wakes it."""
        if quick_s > 0 and self.done.acquire(True, quick_s):
            return True
        import asyncio

        loop = asyncio.get_running_loop()
        done = False
        try:
            while True:
                self.waiting = waiting = loop.create_future()  # before the look below:
                done = self.done.acquire(False)  # finished() wakes what it finds here
                if done:
                    break
                left = deadline() - time.monotonic()
                if left <= 0:
                    break
                timer = loop.call_later(left, _wake, waiting)
                try:
                    await waiting
                finally:
                    timer.cancel()
        finally:
            if not done:
                self.call.abandoned = True
        return done

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.outcome


def lock_timeout(seconds: float) -> float:
    """``seconds`` as a lock's timeout: -1 (no limit) for one too large to say."""
    return -1 if seconds >= threading.TIMEOUT_MAX else max(0.0, seconds)


def _wake(future) -> None:
    if not future.done():
        future.set_result(None)


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

    handover = Handover(Call(seconds), asyncio.get_running_loop())
    context = contextvars.copy_context()
    _Worker.submit(lambda: context.run(handover.settle, fn))
    if not await handover.wait(deadline, quick_s):
        raise ToolTimeout(f"did not finish within its {seconds:g} s limit")
    return handover.result()


def run_blocking(fn: Callable[[], T], *, seconds: float) -> T:
    """``fn()`` on a daemon worker thread, waited for from synchronous code (start-up, the
    CLI reading its models) at most ``seconds``: then ToolTimeout, the thread abandoned."""
    handover = Handover(Call(seconds))
    context = contextvars.copy_context()
    _Worker.submit(lambda: context.run(handover.settle, fn))
    if not handover.done.acquire(True, lock_timeout(seconds)):
        handover.call.abandoned = True
        raise ToolTimeout(f"did not finish within its {seconds:g} s limit")
    return handover.result()
