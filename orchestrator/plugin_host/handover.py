"""A run of third-party hook implementations handed over together: one hand-over per run,
whatever its length — consecutive synchronous implementations to a worker thread, consecutive
``async`` ones to the plugin loop — each within its own deadline (the wait's deadline moves
as the run goes on). hooks.py walks the chain and calls this for each run."""

from __future__ import annotations

import inspect
import time
from typing import Any

from orchestrator.plugin_host.answers import NO_AWAIT, WrongAnswer, no_await
from orchestrator.plugin_host.boundary import HookTimeout, call, on_plugin_loop, plain


class Run(list):
    """Consecutive third-party plain implementations handed over together: ``is_async``
    ones to the plugin loop, synchronous ones to a worker."""

    def __init__(self, is_async: bool) -> None:
        super().__init__()
        self.is_async = is_async


async def hand_over(runner, name: str, run: Run, args: dict[str, Any], value_arg: str,
                check, on_error, deliberate, cap: float | None) -> None:
    """A run of third-party implementations in one hand-over (a worker for synchronous
    ones, the plugin loop for ``async`` ones), each within its own deadline: the wait's
    deadline moves as the run goes on. The run stops at the first failure, deliberate
    exception or (synchronous run) awaitable and hands it back; the loop deals with it
    and hands the rest over again. An abandoned run stops before its next
    implementation."""
    from orchestrator import tool_thread

    refuse_awaitable = name in NO_AWAIT
    start = 0
    while start < len(run):
        # (the implementation running, its deadline): the wait reads it when it expires
        progress: list[Any] = [start, time.monotonic() + runner._deadline(run[start], cap)]
        value = args[value_arg]

        def begin(at: int, progress: list[Any] = progress) -> Any:
            call_ = tool_thread.current()
            if call_ is None or call_.abandoned:  # nobody uses what comes next
                return None
            impl = run[at]
            call_.site = (impl.plugin, name)
            progress[0] = at
            progress[1] = time.monotonic() + runner._deadline(impl, cap)
            return impl

        def answered(at: int, result: Any, local: dict[str, Any]) -> BaseException | None:
            """None when the answer is taken (or no change); else what is wrong."""
            if result is None or check is None:
                return None
            problem = check(result)
            if problem is not None:
                return WrongAnswer(f"{name} {problem}")
            local[value_arg] = result
            return None

        if run.is_async:
            async def work(first: int = start, value: Any = value) -> tuple:
                local = dict(args)
                local[value_arg] = value
                for at in range(first, len(run)):
                    impl = begin(at)
                    if impl is None:
                        break
                    try:
                        result = impl.function(*impl.pick(local))  # runner: plugin loop
                        if result is not None and inspect.isawaitable(result):
                            result = await result
                    except BaseException as error:  # noqa: BLE001 - said on this thread
                        return at, plain(error), None, local[value_arg]
                    wrong = answered(at, result, local)
                    if wrong is not None:
                        return at, wrong, None, local[value_arg]
                return len(run), None, None, local[value_arg]

            handing = on_plugin_loop(work, lambda progress=progress: progress[1],
                                     float("inf"))
        else:
            def work(first: int = start, value: Any = value) -> tuple:  # type: ignore[misc]
                local = dict(args)
                local[value_arg] = value
                for at in range(first, len(run)):
                    impl = begin(at)
                    if impl is None:
                        break
                    try:
                        result = impl.function(*impl.pick(local))  # runner: a worker
                    except BaseException as error:  # noqa: BLE001 - said on this thread
                        return at, plain(error), None, local[value_arg]
                    if result is not None and inspect.isawaitable(result):
                        if refuse_awaitable:
                            getattr(result, "close", lambda: None)()
                            return at, no_await(name), None, local[value_arg]
                        return at, None, result, local[value_arg]
                    wrong = answered(at, result, local)
                    if wrong is not None:
                        return at, wrong, None, local[value_arg]
                return len(run), None, None, local[value_arg]

            handing = call(work, lambda progress=progress: progress[1], float("inf"))
        try:
            at, exc, pending, value = await handing
        except HookTimeout:
            impl = run[progress[0]]
            start = progress[0] + 1
            runner._failed(impl, name, runner._timeout(impl, cap), on_error)
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
            if result is None or check is None:
                continue
            problem = check(result)
            if problem is not None:
                raise WrongAnswer(f"{name} {problem}")
        except deliberate:
            raise
        except Exception as failure:
            runner._failed(impl, name, failure, on_error)
            continue
        args[value_arg] = result
