"""A run of third-party implementations shares one hand-over (plugin_host/handover.py): the
one that does not return is abandoned at its own deadline and named — never its neighbour —
and the implementations after it still run; in a leg's hook the leg ends naming it.

In-process, through the real HookRunner and plugin manager: the implementations run on the
runner's worker (synchronous) or the plugin loop (``async``), as in a wave.
"""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from orchestrator.errors import LegError
from orchestrator.hookspecs import hookimpl
from orchestrator.plugin_host.boundary import HookTimeout
from orchestrator.plugin_host.hooks import HookRunner
from orchestrator.plugin_host.plugins import load
from orchestrator.request import Request

DEADLINE_S = 0.3


class Sync:
    def __init__(self, released: threading.Event) -> None:
        self.blocks, self.calls, self.released = False, [], released

    @hookimpl
    def wave_end(self, wave):
        self.calls.append("wave_end")
        if self.blocks:
            self.released.wait(60)  # a plain function that does not return

    @hookimpl
    def before_request(self, leg, request):
        self.calls.append("before_request")
        if self.blocks:
            self.released.wait(60)
        return request.evolve(messages=[*request.messages, {"role": "user", "content": "+"}])


class Async(Sync):
    @hookimpl
    async def wave_end(self, wave):
        self.calls.append("wave_end")
        while self.blocks and not self.released.is_set():
            try:  # swallows its cancellation: abandoned all the same
                await asyncio.sleep(0.05)
            except BaseException:  # noqa: BLE001, S110 - the hostile part
                pass

    @hookimpl
    async def before_request(self, leg, request):
        self.calls.append("before_request")
        while self.blocks and not self.released.is_set():
            try:
                await asyncio.sleep(0.05)
            except BaseException:  # noqa: BLE001, S110
                pass
        return request.evolve(messages=[*request.messages, {"role": "user", "content": "+"}])


def three(kind: type[Sync], hook: str):
    """A runner over three plugins of ``kind``, the middle one in call order blocking."""
    released = threading.Event()
    plugins = [(f"p{i}", kind(released)) for i in range(3)]
    pm = load(enabled=False, extra=plugins)
    runner = HookRunner(pm, deadline_s=DEADLINE_S)
    order = [impl.plugin for impl in runner.impls(hook)]
    assert sorted(order) == ["p0", "p1", "p2"]
    assert len(runner.steps(hook)) == 1  # one run: one hand-over
    named = dict(plugins)
    named[order[1]].blocks = True
    return runner, [named[p] for p in order], order, released


@pytest.mark.parametrize("kind", [Sync, Async], ids=["sync", "async"])
def test_a_blocking_implementation_in_a_run_is_abandoned_and_the_rest_still_run(kind):
    runner, plugins, order, released = three(kind, "wave_end")
    errors: list = []
    try:
        anyio.run(lambda: runner.notify("wave_end", lambda *e: errors.append(e), wave=None))
    finally:
        released.set()
    assert [(p, h, type(e)) for p, h, e in errors] == [(order[1], "wave_end", HookTimeout)]
    assert str(errors[0][2]) == f"did not return within {DEADLINE_S:g} s"
    assert [p.calls for p in plugins] == [["wave_end"]] * 3  # the third still ran


@pytest.mark.parametrize("kind", [Sync, Async], ids=["sync", "async"])
def test_a_blocking_implementation_in_a_legs_run_ends_the_leg_naming_it(kind):
    runner, plugins, order, released = three(kind, "before_request")
    errors: list = []
    request = Request(model="m/x", messages=[{"role": "user", "content": "hi"}])
    try:
        with pytest.raises(LegError) as ended:
            anyio.run(lambda: runner.pipeline("before_request", "request", request,
                                              lambda *e: errors.append(e), leg=None))
    finally:
        released.set()
    assert ended.value.code == "PLUGIN_TIMEOUT"
    assert f"plugin {order[1]}'s before_request did not return within" in ended.value.message
    assert [(p, type(e)) for p, _, e in errors] == [(order[1], HookTimeout)]
    assert plugins[2].calls == []  # the leg ended: nothing after it ran


def test_a_call_queued_behind_a_coroutine_that_blocks_its_thread_runs_on_a_fresh_loop():
    """One leg's ``async`` hook that blocks the plugin loop's thread (``time.sleep`` in
    ``async def``) must not make another leg's call, queued behind it, wait out its own
    deadline: the queued call moves to a fresh loop and answers while the blocker still
    blocks (before the fix it timed out at its 20 s deadline)."""
    import time

    from orchestrator.plugin_host import plugin_loop

    blocking, release = threading.Event(), threading.Event()

    async def blocker():
        blocking.set()
        release.wait(30)  # blocks the plugin loop's thread, not just this task
        return "late"

    async def neighbour():
        return "answered"

    async def main():
        far = time.monotonic() + 60
        bad = asyncio.ensure_future(plugin_loop.run(blocker, lambda: far, seconds=60))
        while not blocking.is_set():
            await asyncio.sleep(0.01)
        got = await plugin_loop.run(neighbour, lambda: time.monotonic() + 20, seconds=20)
        still_blocked = not bad.done()
        release.set()
        return got, still_blocked, await bad

    got, still_blocked, late = asyncio.run(main())
    assert got == "answered" and still_blocked
    assert late == "late"  # the blocker's own call still ends when its thread is freed
