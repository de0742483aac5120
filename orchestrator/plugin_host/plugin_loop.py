"""The plugin loop: where a third party's coroutines run, apart from the loop that runs the legs.

An ``async`` hook awaited on orch's own loop cannot be abandoned: a coroutine that swallows
its cancellation (``except BaseException: pass`` in a retry loop) keeps its task alive, the
cancel scope re-delivers the cancellation at every turn (the process spins), and the
process's end waits for it (``asyncio.run`` cancels every task and awaits them all). Code
that blocks inside ``async def`` (``time.sleep``) stops every leg and the signal handling.

Here each call is a task on an event loop of its own, on a daemon thread: orch waits for it
within its deadline on its own loop and then stops waiting. The task is cancelled once and
left behind; the thread never holds the exit. A coroutine that blocks its thread stops only
this loop: the legs go on, the call is abandoned at its deadline, and once the loop stops
answering the next calls get a fresh one; a call its loop has not started within
``START_S`` (queued behind a coroutine that blocks the thread) moves to a fresh loop, so one
leg's blocking hook never makes another leg's call wait out its deadline. One loop serves
every call while it turns, so a plugin's client (an ``httpx.AsyncClient`` made at import)
keeps working from call to call.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from orchestrator import tool_thread

T = TypeVar("T")

STUCK_S = 0.5  # an abandoned call's loop that has not turned for this long gets replaced
START_S = 1.0  # a call its loop has not started within this moves to a fresh loop


class PluginLoop:
    """An event loop on a daemon thread, running third parties' coroutines."""

    _current: PluginLoop | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._pinged: float | None = None
        self.thread = threading.Thread(target=self._run, name="orch-plugin-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        while True:
            try:
                self.loop.run_forever()
                return
            except BaseException:  # noqa: BLE001 - a plugin's own task raised SystemExit or
                continue  # KeyboardInterrupt out of the loop: the loop goes on

    @classmethod
    def current(cls) -> PluginLoop:
        """The loop new calls go to: the one that still turns."""
        found = cls._current
        if found is not None and not found.stuck():
            return found
        with cls._lock:
            if cls._current is None or cls._current.stuck():
                cls._current = PluginLoop()
            return cls._current

    def stuck(self) -> bool:
        pinged = self._pinged
        return pinged is not None and time.monotonic() - pinged > STUCK_S

    def abandon(self, task: list[asyncio.Task]) -> None:
        """Stop waiting for a call: its task is cancelled once (what it does with that is
        its own affair), and the loop is asked whether it still turns."""
        def cancel() -> None:
            if task:
                task[0].cancel()

        if self._pinged is None:
            self._pinged = time.monotonic()
            self._soon(self._pong)
        self._soon(cancel)

    def suspect(self) -> None:
        """A call sent here was not started in time: new calls go to a fresh loop now; this
        one is trusted again if it turns."""
        if self._pinged is None:
            self._pinged = time.monotonic() - STUCK_S
            self._soon(self._pong)

    def _pong(self) -> None:
        self._pinged = None

    def _soon(self, callback: Callable[[], Any]) -> None:
        try:
            self.loop.call_soon_threadsafe(callback)
        except RuntimeError:
            pass  # closed


async def run(job: Callable[[], Awaitable[T]], deadline: Callable[[], float], *,
              seconds: float = float("inf"), quick_s: float = 0.0) -> T:
    """``await job()`` as a task on the plugin loop, waited for from orch's loop until
    ``deadline()`` (read again when the wait reaches it: a chain of implementations moves
    it on). Past it, or when orch's wait is cancelled (a signal), the task is abandoned:
    ToolTimeout (or the cancellation) here. ``quick_s``: as in :func:`tool_thread.run_until`.
    The task runs in a copy of the caller's context (a daemon job's output, its scope)."""
    handover = tool_thread.Handover(tool_thread.Call(seconds), asyncio.get_running_loop())
    context = contextvars.copy_context()
    task: list[asyncio.Task] = []
    ran_on: list[PluginLoop] = []
    claim = threading.Lock()  # taken by the one loop that starts the call, or by its end

    def start_on(plugin: PluginLoop) -> Callable[[], None]:
        def start() -> None:
            if claim.acquire(blocking=False):
                ran_on.append(plugin)
                task.append(plugin.loop.create_task(_settle(handover, job), context=context))
        return start

    def move() -> None:
        # another call blocks the loop's thread (``time.sleep`` in ``async def``): this one,
        # queued behind it, is sent to a fresh loop instead of sharing its fate
        if not ran_on:
            sent[-1].suspect()
            fresh = PluginLoop.current()
            sent.append(fresh)
            fresh._soon(start_on(fresh))

    sent = [PluginLoop.current()]
    sent[0]._soon(start_on(sent[0]))
    mover = asyncio.get_running_loop().call_later(START_S, move)
    try:
        done = await handover.wait(deadline, quick_s)
    finally:
        mover.cancel()
        if handover.call.abandoned:
            claim.acquire(blocking=False)  # a call abandoned before it started never starts
            (ran_on or sent)[-1].abandon(task)
    if not done:
        raise tool_thread.ToolTimeout(f"did not finish within its {seconds:g} s limit")
    return handover.result()


async def _settle(handover: tool_thread.Handover, job: Callable[[], Awaitable[Any]]) -> None:
    tool_thread.enter(handover.call)  # this task's own context: expired() and abandoned()
    try:
        handover.outcome = await job()
    except BaseException as exc:  # noqa: BLE001 - handed to orch's side, which says it
        handover.error = exc
    handover.finished()
