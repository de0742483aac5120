"""Calling hooks: order, deadline, type check — every hook call crosses the runner here.

pluggy calls every implementation with the same arguments; a request pipeline needs each
implementation to see the previous one's result, and a failing plugin to drop out without
taking its half-made change with it. So the engine walks the implementations itself, in the
order pluggy would call them: ``tryfirst`` ones first, then plain ones (the last registered
first; third parties register after built-ins), then ``trylast`` ones. Built-ins are
``trylast``: they see every third-party change and are written as defaults (they fill in only
what is not set) or as guards (they check the request that will really be sent). New-style
wrappers (``wrapper=True``) surround the whole chain, the ``tryfirst`` one outermost.

A third party's code is reached only through the runner (boundary.py), so what holds there
holds for every hook:

- **A deadline, and abandonment.** A run of consecutive synchronous implementations goes to
  a daemon worker in one hand-over; a run of ``async`` ones to the plugin loop in one
  hand-over (plugin_loop.py), each within its own deadline. Past it the implementation is
  abandoned and named — whether or not it accepts cancellation: in a leg's hook the leg ends
  ``PLUGIN_TIMEOUT``, elsewhere it is isolated like a raise. Built-ins (orch's own code) run
  inline: they are the hot path and are not the threat.
- **A type check.** Each implementation's answer is checked against its hook
  (``answers.py``) where it returns, before the next plugin or the engine sees it: a wrong
  answer is that plugin's failure, never the next one's. An awaitable where the hook takes
  none (``before_launch``, the first-answer and collect hooks) is one too.
- **Isolation, or failing closed.** A failure (a raise, an exit, a wrong answer, a timeout)
  is recorded with its plugin and hook, as one bounded line, and the call goes on without
  that change — unless the plugin declared ``FAIL_CLOSED`` or holds what the user set (a
  budget, a ``plugin_config`` section: ``held``): then a failure before the request is sent
  refuses it.
"""

from __future__ import annotations

import inspect
import operator
import time
from collections.abc import Callable
from typing import Any

from orchestrator.errors import LegError, OrchError, Refusal
from orchestrator.plugin_host.answers import NO_AWAIT, checker, no_await, wrong
from orchestrator.plugin_host.boundary import (
    HookTimeout,
    PluginExit,
    awaited,
    call,
    call_blocking,
    said,
)
from orchestrator.plugin_host.deadline import DEADLINE_S, WAVE_DEADLINE_S, hook_deadline_s
from orchestrator.plugin_host.handover import Run, hand_over
from orchestrator.plugin_host.order import arrange

__all__ = ["HookRunner", "HookTimeout", "PluginExit", "ErrorSink"]

# (plugin name, hook name, exception) -> None; the leg records it (boundary.said says it).
ErrorSink = Callable[[str, str, BaseException], None]

# What an implementation may raise on purpose, by hook; anything else it raises is isolated.
# After the fact (leg_end, wave_end) nothing is left to refuse or stop, so all is isolated;
# before a wave starts there is no leg to refuse, but an OrchError stops the wave.
DELIBERATE: dict[str, tuple[type[BaseException], ...]] = {
    "wave_start": (OrchError,),
    "leg_end": (),
    "wave_end": (),
    "register_commands": (),
    "register_options": (),
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


def _picker(argnames) -> Callable[[dict], tuple]:
    """The implementation's arguments, in its order, from the call's keyword dict."""
    if not argnames:
        return lambda args: ()
    if len(argnames) == 1:
        name = argnames[0]
        return lambda args: (args[name],)
    return operator.itemgetter(*argnames)


class _Impl:
    """One implementation as the runner calls it (the hot loop reads slots, not pluggy's
    attributes)."""

    __slots__ = ("function", "pick", "plugin", "site", "wrapper", "guarded", "fail_closed",
                 "held_only", "deadline", "is_async", "refused_await")

    def __init__(self, impl, hook: str, guarded: bool, default_deadline: float,
                 declared, held: bool) -> None:
        self.function = impl.function
        self.pick = _picker(impl.argnames)
        self.plugin: str = impl.plugin_name
        self.site = (self.plugin, hook)  # what its late writes name (engine/context.py)
        self.wrapper = bool(impl.wrapper)
        self.guarded = guarded
        self.fail_closed = declared.fails_closed(hook) or held
        self.held_only = held and not declared.fails_closed(hook)
        self.deadline = declared.deadline_s or default_deadline
        self.is_async = inspect.iscoroutinefunction(impl.function)
        # an `async def` where the hook takes no awaitable: its failure, without a call
        self.refused_await = self.is_async and hook in NO_AWAIT


def _start(gen):
    """A wrapper's "before" half; the generator, to finish later."""
    try:
        next(gen)
    except StopIteration:
        raise RuntimeError("a wrapper must yield exactly once") from None
    return gen


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
    def __init__(self, pm, *, deadline_s: float | None = None, config=None,
                 held: frozenset[str] | set[str] = frozenset()) -> None:
        """``deadline_s`` for every third party's hook; by default the user's setting
        (``hook_deadline_s``), else DEADLINE_S and WAVE_DEADLINE_S for wave hooks.
        ``held``: the plugins that hold what the user set for this run (a budget, a
        ``plugin_config`` section): they fail closed (declared.holders)."""
        self.pm = pm
        chosen = deadline_s if deadline_s is not None else hook_deadline_s(config)
        self.deadline_s = chosen or DEADLINE_S
        self.wave_deadline_s = chosen or WAVE_DEADLINE_S
        self.held = frozenset(held)
        self._impls: dict[str, list[_Impl]] = {}
        self._steps: dict[str, list] = {}

    def impls(self, name: str) -> list[_Impl]:
        """Implementations in pluggy's call order: wrappers (outermost first), then the rest,
        ``tryfirst`` first and ``trylast`` last, then moved where a plugin's ``AFTER`` /
        ``BEFORE`` says (order.py). Old-style hookwrappers are never called."""
        if name not in self._impls:
            caller = getattr(self.pm.hook, name)  # runner: implementations, not called
            is_builtin = getattr(self.pm, "is_builtin", lambda _name: False)
            declared = getattr(self.pm, "declared", None)
            default = self.wave_deadline_s if name in _WAVE_HOOKS else self.deadline_s
            self._impls[name] = [
                _Impl(i, name, not is_builtin(i.plugin_name), default,
                      declared(i.plugin_name) if declared else _NOTHING,
                      i.plugin_name in self.held)
                for i in reversed(caller.get_hookimpls())  # runner: wrapped in _Impl
                if not i.hookwrapper]
            if declared is not None:  # AFTER / BEFORE, as the plugins declared them
                self._impls[name] = arrange(self._impls[name], name, declared)
        return self._impls[name]

    def steps(self, name: str) -> list:
        """``impls`` grouped for calling: an ``_Impl``, or a ``Run`` of consecutive guarded
        plain ones of one kind, which share one hand-over."""
        if name not in self._steps:
            steps: list = []
            run: Run | None = None
            for impl in self.impls(name):
                if impl.guarded and not impl.wrapper and not impl.refused_await:
                    if run is None or run.is_async != impl.is_async:
                        run = Run(impl.is_async)
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
        refuse_awaitable = name in NO_AWAIT
        wrappers: list[tuple[_Impl, Any]] = []
        args = {**kwargs, value_arg: value}
        try:
            for step in steps:
                if step.__class__ is Run:
                    await hand_over(self, name, step, args, value_arg, check, on_error,
                                    deliberate, deadline_s)
                    continue
                impl = step
                try:
                    if impl.refused_await:
                        raise no_await(name)
                    if impl.wrapper:
                        if impl.guarded:
                            def before(i: _Impl = impl) -> Any:
                                return _start(i.function(*i.pick(args)))  # runner: a worker

                            gen = await self._on_worker(impl, name, before, deadline_s)
                        else:
                            gen = _start(impl.function(*impl.pick(args)))  # runner: inline
                        wrappers.append((impl, gen))
                        continue
                    result = impl.function(*impl.pick(args))  # runner: a built-in, inline
                    if result is not None and inspect.isawaitable(result):
                        if refuse_awaitable:
                            getattr(result, "close", lambda: None)()
                            raise no_await(name)
                        result = await result
                    failure = wrong(name, check, result)
                    if failure is not None:
                        raise failure
                except deliberate:
                    raise
                except Exception as exc:
                    self._failed(impl, name, exc, on_error)
                    continue
                if result is not None and check is not None:
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
                    failure = wrong(name, check, result, "wrapper ")
                    if failure is not None:
                        raise failure
                except deliberate:
                    raise
                except Exception as exc:
                    self._failed(impl, name, exc, on_error)
                    continue
                if result is not None and check is not None:
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
                if impl.refused_await:
                    raise no_await(name)
                if impl.guarded:
                    def answer(i: _Impl = impl) -> Any:
                        return _checked(name, i.function(*i.pick(kwargs)))  # runner: a worker

                    result = await self._on_worker(impl, name, answer, None)
                else:
                    result = _checked(name, impl.function(*impl.pick(kwargs)))  # runner: inline
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
        """``collect`` for synchronous code (building a wave's document, reading the
        declared options): every good answer with its plugin name, a third party's waited
        for at most its deadline."""
        return self._answers_sync(name, on_error, kwargs, first=False)

    def call_sync(self, plugin: str, name: str, on_error: ErrorSink, **kwargs: Any) -> Any:
        """One plugin's implementation of ``name`` (``register_commands``: the CLI adds a
        plugin's commands a plugin at a time); its answer, or None (``on_error`` hears a
        failure)."""
        for impl in self.impls(name):
            if impl.plugin == plugin and not impl.wrapper:
                answers = self._answers_sync(name, on_error, kwargs, first=True, only=impl)
                return answers[0][1] if answers else None
        return None

    def _answers_sync(self, name: str, on_error: ErrorSink, kwargs: dict[str, Any], *,
                      first: bool, only: _Impl | None = None) -> list[tuple[str, Any]]:
        deliberate = DELIBERATE.get(name, _DEFAULT_DELIBERATE)
        answers = []
        for impl in [only] if only is not None else self.impls(name):
            if impl.wrapper:
                continue
            try:
                if impl.refused_await:
                    raise no_await(name)
                if impl.guarded:
                    def answer(i: _Impl = impl) -> Any:
                        return _checked(name, i.function(*i.pick(kwargs)))  # runner: a worker

                    result = call_blocking(answer, impl.deadline, (impl.plugin, name))
                else:
                    result = _checked(name, impl.function(*impl.pick(kwargs)))  # runner: inline
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

    # -- the boundary ----------------------------------------------------------------------
    def _deadline(self, impl: _Impl, cap: float | None) -> float:
        return impl.deadline if cap is None else min(impl.deadline, cap)

    def _timeout(self, impl: _Impl, cap: float | None) -> HookTimeout:
        return HookTimeout(f"did not return within {self._deadline(impl, cap):g} s")

    async def _on_worker(self, impl: _Impl, name: str, fn: Callable[[], Any],
                         cap: float | None) -> Any:
        """``fn`` (a third party's synchronous code) on a worker within its deadline. What
        it returns is not awaited here: the caller decides (an awaitable is an error for a
        first-answer hook, and a wrapper's halves are never awaitables)."""
        seconds = self._deadline(impl, cap)
        ends = time.monotonic() + seconds
        try:
            return await call(fn, lambda: ends, seconds, (impl.plugin, name))
        except HookTimeout:
            raise self._timeout(impl, cap) from None

    async def _awaited(self, impl: _Impl, name: str, awaitable: Any,
                       cap: float | None) -> Any:
        """Await what an implementation handed back: a third party's on the plugin loop,
        within its deadline, abandoned past it."""
        if not impl.guarded:
            return await awaitable
        try:
            return await awaited(awaitable, self._deadline(impl, cap), (impl.plugin, name))
        except HookTimeout:
            raise self._timeout(impl, cap) from None

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
            what = "it holds what you set for this run" if impl.held_only else \
                "it is fail-closed"
            text = f"plugin {impl.plugin} failed in {hook} ({said(exc)}); {what}, so "
            if hook in BEFORE_SEND or hook == "before_launch":
                raise Refusal("PLUGIN_FAILED", text + "nothing was sent")
            if hook in AFTER_SEND:
                raise LegError("PLUGIN_FAILED", text + "the leg stops here")
            if hook == "wave_start":
                raise OrchError(text + "the wave does not start")
        if not timeout:
            return
        text = (f"plugin {impl.plugin}'s {hook} {exc}; the leg stopped waiting for it (fix "
                f"it, give it longer with plugins.hook_deadline_s, or disable it: "
                f"ORCH_DISABLE_PLUGINS={impl.plugin})")
        if hook == "before_launch":
            raise Refusal("PLUGIN_TIMEOUT", text)
        if hook in BEFORE_SEND or hook in AFTER_SEND:
            raise LegError("PLUGIN_TIMEOUT", text)


def _checked(name: str, result: Any) -> Any:
    """A first-answer or collect hook's answer, checked where it returned; raises what is
    wrong with it."""
    if result is None:
        return None
    if inspect.isawaitable(result):
        getattr(result, "close", lambda: None)()  # no "never awaited" warning
        raise no_await(name)
    failure = wrong(name, checker(name), result)
    if failure is not None:
        raise failure
    return result


class _Nothing:
    """What a plugin manager without declarations (a bare pluggy one) says of a plugin."""

    deadline_s = None

    @staticmethod
    def fails_closed(hook: str) -> bool:
        return False


_NOTHING = _Nothing()
