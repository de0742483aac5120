"""A run of third-party hook implementations handed over together: one hand-over per run,
whatever its length — consecutive synchronous implementations to a worker thread, consecutive
``async`` ones to the plugin loop — each within its own deadline (the wait's deadline moves
as the run goes on). hooks.py walks the chain and calls this for each run.

A hand-over costs two thread wake-ups (the worker's or the plugin loop's, then orch's loop),
which the kernel, not Python, prices (bench/bench_hooks.py measures the bare floor); what
runs between them is kept to what each implementation needs: its site and deadline were
worked out once (hooks._Impl), the worker reads its call once, the answer is checked once.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from orchestrator import tool_thread
from orchestrator.plugin_host.answers import NO_AWAIT, no_await, wrong
from orchestrator.plugin_host.boundary import HookTimeout, call, on_plugin_loop, plain

_monotonic = time.monotonic
_isawaitable = inspect.isawaitable
_INF = float("inf")


class Run(list):
    """Consecutive third-party plain implementations handed over together: ``is_async``
    ones to the plugin loop, synchronous ones to a worker."""

    def __init__(self, is_async: bool) -> None:
        super().__init__()
        self.is_async = is_async


class _Batch:
    """One hand-over of ``run[first:]``: what the worker (or the plugin loop) walks, and
    ``progress``, the (index, deadline) of the implementation running now, which orch's
    wait reads when its deadline comes (one tuple, replaced whole: never half-updated)."""

    __slots__ = ("run", "first", "local", "key", "check", "name", "cap", "progress",
                 "refuse_awaitable")

    def __init__(self, run: Run, first: int, args: dict[str, Any], key: str, check,
                 name: str, cap: float | None) -> None:
        self.run = run
        self.first = first
        self.local = dict(args)  # the worker's own copy: an abandoned one writes to nobody's
        self.key = key
        self.check = check
        self.name = name
        self.cap = cap
        impl = run[first]
        self.progress = (first, _monotonic() + _seconds(impl.deadline, cap))
        self.refuse_awaitable = name in NO_AWAIT

    def deadline(self) -> float:
        return self.progress[1]

    def walk(self) -> tuple:
        """The synchronous run, on a worker: (index it stopped at, failure, an awaitable it
        handed back, the value so far). Stops at the first failure or awaitable."""
        call_ = tool_thread.current()
        run, local, key, check, cap = self.run, self.local, self.key, self.check, self.cap
        for at in range(self.first, len(run)):
            if call_ is None or call_.abandoned:  # nobody uses what comes next
                break
            impl = run[at]
            call_.site = impl.site
            self.progress = (at, _monotonic() + _seconds(impl.deadline, cap))
            try:
                result = impl.function(*impl.pick(local))  # runner: a worker
            except BaseException as error:  # noqa: BLE001 - said on this thread
                return at, plain(error), None, local[key]
            if result is None:
                continue
            if _isawaitable(result):
                if self.refuse_awaitable:
                    getattr(result, "close", lambda: None)()
                    return at, no_await(self.name), None, local[key]
                return at, None, result, local[key]
            failure = wrong(self.name, check, result)
            if failure is not None:
                return at, failure, None, local[key]
            if check is not None:
                local[key] = result
        return len(run), None, None, local[key]

    async def walk_async(self) -> tuple:
        """The ``async`` run, on the plugin loop; as :meth:`walk`, awaiting each answer."""
        call_ = tool_thread.current()
        run, local, key, check, cap = self.run, self.local, self.key, self.check, self.cap
        for at in range(self.first, len(run)):
            if call_ is None or call_.abandoned:
                break
            impl = run[at]
            call_.site = impl.site
            self.progress = (at, _monotonic() + _seconds(impl.deadline, cap))
            try:
                result = impl.function(*impl.pick(local))  # runner: plugin loop
                if result is not None and _isawaitable(result):
                    result = await result
            except BaseException as error:  # noqa: BLE001 - said on this thread
                return at, plain(error), None, local[key]
            failure = wrong(self.name, check, result)
            if failure is not None:
                return at, failure, None, local[key]
            if result is not None and check is not None:
                local[key] = result
        return len(run), None, None, local[key]


def _seconds(deadline: float, cap: float | None) -> float:
    return deadline if cap is None or deadline <= cap else cap


async def hand_over(runner, name: str, run: Run, args: dict[str, Any], value_arg: str,
                    check, on_error, deliberate, cap: float | None) -> None:
    """A run of third-party implementations in one hand-over (a worker for synchronous
    ones, the plugin loop for ``async`` ones), each within its own deadline: the wait's
    deadline moves as the run goes on. The run stops at the first failure, deliberate
    exception or (synchronous run) awaitable and hands it back; the loop deals with it
    and hands the rest over again. An abandoned run stops before its next
    implementation."""
    start = 0
    while start < len(run):
        batch = _Batch(run, start, args, value_arg, check, name, cap)
        try:
            if run.is_async:
                at, exc, pending, value = await on_plugin_loop(batch.walk_async,
                                                               batch.deadline, _INF)
            else:
                at, exc, pending, value = await call(batch.walk, batch.deadline, _INF)
        except HookTimeout:
            late = batch.progress[0]
            start = late + 1
            runner._failed(run[late], name, runner._timeout(run[late], cap), on_error)
            continue
        args[value_arg] = value
        start = at + 1
        if at >= len(run):
            return
        impl = run[at]
        try:
            if exc is not None:
                raise exc
            result = await runner._awaited(impl, name, pending, cap)
            failure = wrong(name, check, result)
            if failure is not None:
                raise failure
        except deliberate:
            raise
        except Exception as failure:
            runner._failed(impl, name, failure, on_error)
            continue
        if result is not None and check is not None:
            args[value_arg] = result
