"""Calling hooks: one boundary between orch and every plugin — order, deadline, type check.

pluggy calls every implementation with the same arguments; a request pipeline needs each
implementation to see the previous one's result, and a failing plugin to drop out without
taking its half-made change with it. So the engine walks the implementations itself, in the
order pluggy would call them: ``tryfirst`` ones first, then plain ones (the last registered
first; third parties register after built-ins), then ``trylast`` ones. Built-ins are
``trylast``: they see every third-party change and are written as defaults (they fill in only
what is not set) or as guards (they check the request that will really be sent). New-style
wrappers (``wrapper=True``) surround the whole chain, the ``tryfirst`` one outermost.

Every call goes through this runner, so what holds here holds for every hook:

- **A deadline.** A third party's synchronous code never runs on the event loop's thread: a
  run of consecutive synchronous implementations goes to a daemon worker (one hand-over per
  hook call, ``tool_thread``) and what any implementation hands back to await is awaited
  within its deadline. Past it the implementation is abandoned and named: in a leg's hook the
  leg ends ``PLUGIN_TIMEOUT``, elsewhere it is isolated like a raise. Built-ins (orch's own
  code) run inline: they are the hot path and are not the threat.
- **A type check.** Each implementation's answer is checked against its hook
  (``hook_answers``) as it returns, before the next plugin or the engine sees it: a wrong
  answer is that plugin's failure, never the next one's.
- **Isolation, or failing closed.** A failure (a raise, a wrong answer, a timeout) is
  recorded with its plugin and hook and the call goes on without that change — unless the
  plugin declared ``FAIL_CLOSED``: then a failure before the request is sent refuses it.
"""

from __future__ import annotations

import inspect
import math
import operator
import time
from collections.abc import Callable
from typing import Any

from orchestrator.errors import LegError, OrchError, Refusal
from orchestrator.plugin_host.answers import WrongAnswer, checker
from orchestrator.plugin_host.deadline import (
    DEADLINE_S,
    WAVE_DEADLINE_S,
    HookTimeout,
    PluginExit,
    call_blocking,
    hook_deadline_s,
    plugin_call,
)

# (plugin name, hook name, exception) -> None; the leg records it.
ErrorSink = Callable[[str, str, BaseException], None]

# What an implementation may raise on purpose, by hook; anything else it raises is isolated.
# After the fact (leg_end, wave_end) nothing is left to refuse or stop, so all is isolated;
# before a wave starts there is no leg to refuse, but an OrchError stops the wave.
DELIBERATE: dict[str, tuple[type[BaseException], ...]] = {
    "wave_start": (OrchError,),
    "leg_end": (),
    "wave_end": (),
    "register_commands": (),
    "default_models": (),
    "wave_report": (),
}
_DEFAULT_DELIBERATE = (Refusal, OrchError)

# Where a failure that must not be let through (a timeout, a fail-closed plugin) ends: before
# the request is sent nothing goes out; after it, the leg stops with what was billed.
BEFORE_SEND = frozenset({"leg_start", "register_tools", "tool_roster", "system_prompt",
                         "before_request"})
AFTER_SEND = frozenset({"after_response", "step_end"})
_WAVE_HOOKS = frozenset({"wave_start", "wave_end"})

# A hand-over to a worker is first waited for this long on the loop's own thread: quick
# hooks (nearly all) come back without the loop's wake-up; the loop stalls 1 ms at most.
QUICK_S = 0.001


def _picker(argnames) -> Callable[[dict], tuple]:
    """The implementation's arguments, in its order, from the call's keyword dict."""
    if not argnames:
        return lambda args: ()
    if len(argnames) == 1:
        name = argnames[0]
        return lambda args: (args[name],)
    return operator.itemgetter(*argnames)


def fail_closed(plugin: object, hook: str) -> bool:
    """Whether ``plugin`` declared that its failure in ``hook`` must stop the request:
    ``FAIL_CLOSED = True`` (every hook) or a collection of hook names."""
    declared = getattr(plugin, "FAIL_CLOSED", False)
    if isinstance(declared, bool):
        return declared
    try:
        return hook in declared
    except TypeError:
        return False


class _Impl:
    """One implementation as the runner calls it (the hot loop reads slots, not pluggy's
    attributes)."""

    __slots__ = ("function", "pick", "plugin", "wrapper", "guarded", "fail_closed",
                 "deadline", "is_async")

    def __init__(self, impl, hook: str, guarded: bool, default_deadline: float) -> None:
        self.function = impl.function
        self.pick = _picker(impl.argnames)
        self.plugin: str = impl.plugin_name
        self.wrapper = bool(impl.wrapper)
        self.guarded = guarded
        self.fail_closed = fail_closed(impl.plugin, hook)
        declared = getattr(impl.plugin, "HOOK_DEADLINE_S", None)
        ok = isinstance(declared, int | float) and not isinstance(declared, bool) \
            and math.isfinite(declared) and declared > 0
        self.deadline = float(declared) if ok else default_deadline
        self.is_async = inspect.iscoroutinefunction(impl.function)


def _start(gen) -> None:
    """A wrapper's "before" half."""
    try:
        next(gen)
    except StopIteration:
        raise RuntimeError("a wrapper must yield exactly once") from None


def _finish(gen, value: Any) -> tuple[bool, Any]:
    """A wrapper's "after" half: (it returned, what it returned). StopIteration never
    crosses a thread or a coroutine (it would turn into a RuntimeError there)."""
    try:
        gen.send(value)
    except StopIteration as stop:
        return True, stop.value
    gen.close()
    return False, None


class HookRunner:
    def __init__(self, pm, *, deadline_s: float | None = None, config=None) -> None:
        """``deadline_s`` for every third party's hook; by default the user's setting
        (``hook_deadline_s``), else DEADLINE_S and WAVE_DEADLINE_S for wave hooks."""
        self.pm = pm
        chosen = deadline_s if deadline_s is not None else hook_deadline_s(config)
        self.deadline_s = chosen or DEADLINE_S
        self.wave_deadline_s = chosen or WAVE_DEADLINE_S
        self._impls: dict[str, list[_Impl]] = {}
        self._steps: dict[str, list] = {}

    def impls(self, name: str) -> list[_Impl]:
        """Implementations in pluggy's call order: wrappers (outermost first), then the rest,
        ``tryfirst`` first and ``trylast`` last. Old-style hookwrappers are never called."""
        if name not in self._impls:
            caller = getattr(self.pm.hook, name)
            is_builtin = getattr(self.pm, "is_builtin", lambda _name: False)
            default = self.wave_deadline_s if name in _WAVE_HOOKS else self.deadline_s
            self._impls[name] = [_Impl(i, name, not is_builtin(i.plugin_name), default)
                                 for i in reversed(caller.get_hookimpls())
                                 if not i.hookwrapper]
        return self._impls[name]

    def steps(self, name: str) -> list:
        """``impls`` grouped for calling: an ``_Impl``, or a list of consecutive guarded
        synchronous plain ones, which share one hand-over to a worker thread."""
        if name not in self._steps:
            steps: list = []
            run: list[_Impl] | None = None
            for impl in self.impls(name):
                if impl.guarded and not impl.wrapper and not impl.is_async:
                    if run is None:
                        run = []
                        steps.append(run)
                    run.append(impl)
                else:
                    run = None
                    steps.append(impl)
            self._steps[name] = steps
        return self._steps[name]

    # -- the pipeline ----------------------------------------------------------------------
    async def pipeline(self, name: str, value_arg: str, value: Any, on_error: ErrorSink, *,
                       deadline_s: float | None = None, **kwargs: Any) -> Any:
        """Thread ``value`` through every implementation of ``name``; return the final value.

        Wrappers (``wrapper=True``) run to their ``yield`` first, receive the value the
        pipeline produced, and may return a replacement (``None`` keeps it).
        ``deadline_s`` caps every implementation's deadline (hooks after a signal).
        """
        steps = self.steps(name)
        if not steps:
            return value
        deliberate = DELIBERATE.get(name, _DEFAULT_DELIBERATE)
        check = checker(name)
        wrappers: list[tuple[_Impl, Any]] = []
        args = {**kwargs, value_arg: value}
        try:
            for step in steps:
                if step.__class__ is list:
                    await self._off_loop(name, step, args, value_arg, check, on_error,
                                         deliberate, deadline_s)
                    continue
                impl = step
                try:
                    if impl.wrapper:
                        gen = impl.function(*impl.pick(args))
                        if impl.guarded:
                            await self._on_worker(impl, name, lambda g=gen: _start(g),
                                                  deadline_s)
                        else:
                            _start(gen)
                        wrappers.append((impl, gen))
                        continue
                    result = impl.function(*impl.pick(args))
                    if result is not None and inspect.isawaitable(result):
                        result = await self._awaited(impl, name, result, deadline_s)
                    if result is None or check is None:
                        continue
                    problem = check(result)
                    if problem is not None:
                        raise WrongAnswer(f"{name} {problem}")
                except deliberate:
                    raise
                except Exception as exc:
                    self._failed(impl, name, exc, on_error)
                    continue
                args[value_arg] = result
            while wrappers:
                impl, gen = wrappers.pop()  # innermost first, as pluggy unwinds
                current = args[value_arg]
                try:
                    if impl.guarded:
                        returned, result = await self._on_worker(
                            impl, name, lambda g=gen, v=current: _finish(g, v), deadline_s)
                    else:
                        returned, result = _finish(gen, current)
                    if not returned:
                        raise RuntimeError("a wrapper must yield exactly once")
                    if result is None or check is None:
                        continue
                    problem = check(result)
                    if problem is not None:
                        raise WrongAnswer(f"{name} wrapper {problem}")
                except deliberate:
                    raise
                except Exception as exc:
                    self._failed(impl, name, exc, on_error)
                    continue
                args[value_arg] = result
        finally:
            for impl, gen in wrappers:  # a Refusal or OrchError left some wrappers suspended
                if impl.guarded:  # its finally: is third-party code too
                    try:
                        await self._on_worker(impl, name, gen.close, deadline_s)
                    except Exception:
                        pass  # it is closed, or abandoned: either way it is done with
                else:
                    gen.close()
        return args[value_arg]

    async def _off_loop(self, name: str, run: list[_Impl], args: dict[str, Any],
                        value_arg: str, check, on_error: ErrorSink, deliberate,
                        cap: float | None) -> None:
        """Consecutive synchronous third-party implementations on one worker thread, each
        within its own deadline (the wait's deadline moves as the worker goes on). The
        worker stops at the first failure, awaitable or deliberate exception and hands it
        back; the loop deals with it and hands the rest over again."""
        from orchestrator import tool_thread

        start = 0
        while start < len(run):
            # (the implementation running, its deadline): the wait reads it when it expires
            progress: list[Any] = [start, time.monotonic() + self._deadline(run[start], cap)]
            value = args[value_arg]

            def work(first: int = start, value: Any = value,
                     progress: list[Any] = progress) -> tuple:
                local = dict(args)
                local[value_arg] = value
                for at in range(first, len(run)):
                    if tool_thread.expired():  # abandoned: nobody uses what comes next
                        return at, None, None, value
                    impl = run[at]
                    progress[0] = at
                    progress[1] = time.monotonic() + self._deadline(impl, cap)
                    try:
                        result = impl.function(*impl.pick(local))
                    except BaseException as exc:
                        if isinstance(exc, SystemExit | KeyboardInterrupt):
                            exc = PluginExit(f"{type(exc).__name__}: {exc}")
                        return at, exc, None, value
                    if result is None:
                        continue
                    if inspect.isawaitable(result):
                        return at, None, result, value
                    if check is None:
                        continue
                    problem = check(result)
                    if problem is not None:
                        return at, WrongAnswer(f"{name} {problem}"), None, value
                    value = local[value_arg] = result
                return len(run), None, None, value

            try:
                at, exc, pending, value = await tool_thread.run_until(
                    work, lambda progress=progress: progress[1], quick_s=QUICK_S)
            except tool_thread.ToolTimeout:
                impl = run[progress[0]]
                start = progress[0] + 1
                self._failed(impl, name, self._timeout(impl, cap), on_error)
                continue
            args[value_arg] = value
            start = at + 1
            if at >= len(run):
                return
            impl = run[at]
            try:
                if exc is not None:
                    raise exc
                result = await self._awaited(impl, name, pending, cap)
                if result is None or check is None:
                    continue
                problem = check(result)
                if problem is not None:
                    raise WrongAnswer(f"{name} {problem}")
            except deliberate:
                raise
            except Exception as failure:
                self._failed(impl, name, failure, on_error)
                continue
            args[value_arg] = result

    async def notify(self, name: str, on_error: ErrorSink, *, deadline_s: float | None = None,
                     **kwargs: Any) -> None:
        """Call every implementation; await what returns an awaitable; isolate failures."""
        await self.pipeline(name, "_unused", None, on_error, deadline_s=deadline_s, **kwargs)

    # -- first answer and collect ----------------------------------------------------------
    async def first(self, name: str, on_error: ErrorSink, **kwargs: Any) -> Any:
        """First good answer (``firstresult`` hooks), failures isolated."""
        answers = await self._answers(name, on_error, kwargs, first=True)
        return answers[0][1] if answers else None

    async def collect(self, name: str, on_error: ErrorSink, **kwargs: Any) -> list[tuple[str, Any]]:
        """Every implementation's good answer with its plugin name."""
        return await self._answers(name, on_error, kwargs, first=False)

    async def _answers(self, name: str, on_error: ErrorSink, kwargs: dict[str, Any], *,
                       first: bool) -> list[tuple[str, Any]]:
        """Synchronous answers (an awaitable is the plugin's error), each checked."""
        deliberate = DELIBERATE.get(name, _DEFAULT_DELIBERATE)
        answers = []
        for impl in self.impls(name):
            if impl.wrapper:
                continue
            try:
                if impl.guarded and not impl.is_async:
                    result = await self._on_worker(
                        impl, name, lambda i=impl: i.function(*i.pick(kwargs)), None)
                else:
                    result = impl.function(*impl.pick(kwargs))
                result = self._answer(name, result)
            except deliberate:
                raise
            except Exception as exc:
                self._failed(impl, name, exc, on_error)
                continue
            if result is not None:
                answers.append((impl.plugin, result))
                if first:
                    break
        return answers

    def first_sync(self, name: str, on_error: ErrorSink, **kwargs: Any) -> Any:
        """``first`` for code with no event loop (the CLI resolving its models, choosing
        default ones): a third party's implementation waited for at most its deadline."""
        answers = self._answers_sync(name, on_error, kwargs, first=True)
        return answers[0][1] if answers else None

    def collect_sync(self, name: str, on_error: ErrorSink,
                     **kwargs: Any) -> list[tuple[str, Any]]:
        """``collect`` for synchronous code (building a wave's document): every good answer
        with its plugin name, a third party's waited for at most its deadline."""
        return self._answers_sync(name, on_error, kwargs, first=False)

    def _answers_sync(self, name: str, on_error: ErrorSink, kwargs: dict[str, Any], *,
                      first: bool) -> list[tuple[str, Any]]:
        deliberate = DELIBERATE.get(name, _DEFAULT_DELIBERATE)
        answers = []
        for impl in self.impls(name):
            if impl.wrapper:
                continue
            try:
                if impl.guarded:
                    result = call_blocking(lambda i=impl: i.function(*i.pick(kwargs)),
                                           impl.deadline)
                else:
                    result = impl.function(*impl.pick(kwargs))
                result = self._answer(name, result)
            except deliberate:
                raise
            except Exception as exc:
                self._failed(impl, name, exc, on_error)
                continue
            if result is not None:
                answers.append((impl.plugin, result))
                if first:
                    break
        return answers

    @staticmethod
    def _answer(name: str, result: Any) -> Any:
        """A first-answer or collect hook's answer, checked; raises what is wrong with it."""
        if result is None:
            return None
        if inspect.isawaitable(result):
            getattr(result, "close", lambda: None)()  # no "never awaited" warning
            raise TypeError(f"{name} must answer synchronously, not with an awaitable")
        check = checker(name)
        problem = check(result) if check is not None else None
        if problem is not None:
            raise WrongAnswer(f"{name} {problem}")
        return result

    # -- the boundary ----------------------------------------------------------------------
    def _deadline(self, impl: _Impl, cap: float | None) -> float:
        return impl.deadline if cap is None else min(impl.deadline, cap)

    def _timeout(self, impl: _Impl, cap: float | None) -> HookTimeout:
        return HookTimeout(f"did not return within {self._deadline(impl, cap):g} s")

    async def _on_worker(self, impl: _Impl, name: str, fn: Callable[[], Any],
                         cap: float | None) -> Any:
        """``fn`` (a third party's synchronous code) on a worker thread within its deadline.
        What it returns is not awaited here: the caller decides (an awaitable is an error
        for a first-answer hook, and a wrapper's halves are never awaitables)."""
        from orchestrator import tool_thread

        ends = time.monotonic() + self._deadline(impl, cap)
        try:
            result = await tool_thread.run_until(plugin_call(fn), lambda: ends,
                                                 quick_s=QUICK_S)
        except tool_thread.ToolTimeout:
            raise self._timeout(impl, cap) from None
        return result

    async def _awaited(self, impl: _Impl, name: str, awaitable: Any, cap: float | None) -> Any:
        """Await what an implementation handed back: a third party's within its deadline."""
        if not impl.guarded:
            return await awaitable
        import anyio

        with anyio.move_on_after(self._deadline(impl, cap)):
            try:
                return await awaitable
            except SystemExit as exc:
                raise PluginExit(f"SystemExit: {exc}") from None
        getattr(awaitable, "close", lambda: None)()
        raise self._timeout(impl, cap)

    def _failed(self, impl: _Impl, hook: str, exc: BaseException, on_error: ErrorSink) -> None:
        """Record the failure with its plugin; raise when it must not be let through: a
        fail-closed plugin's failure refuses the request (or stops the leg after one was
        sent, or the wave before it starts), and a timeout in a leg's hook ends that leg
        (its thread may still be changing what the leg holds)."""
        on_error(impl.plugin, hook, exc)
        timeout = isinstance(exc, HookTimeout)
        if not (timeout or impl.fail_closed):
            return
        if impl.fail_closed:
            what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]  # scrubbed by the leg
            said = f"plugin {impl.plugin} failed in {hook} ({what}); it is " \
                "fail-closed, so "
            if hook in BEFORE_SEND or hook == "before_launch":
                raise Refusal("PLUGIN_FAILED", said + "nothing was sent")
            if hook in AFTER_SEND:
                raise LegError("PLUGIN_FAILED", said + "the leg stops here")
            if hook == "wave_start":
                raise OrchError(said + "the wave does not start")
        if not timeout:
            return
        said = (f"plugin {impl.plugin}'s {hook} {exc}; the leg stopped waiting for it (fix "
                f"it, give it longer with plugins.hook_deadline_s, or disable it: "
                f"ORCH_DISABLE_PLUGINS={impl.plugin})")
        if hook == "before_launch":
            raise Refusal("PLUGIN_TIMEOUT", said)
        if hook in BEFORE_SEND or hook in AFTER_SEND:
            raise LegError("PLUGIN_TIMEOUT", said)
