"""Calling hooks: pipelines and notifications in pluggy's order, one plugin's failure isolated.

pluggy calls every implementation with the same arguments; a request pipeline needs each
implementation to see the previous one's result, and a failing plugin to drop out without
taking its half-made change with it. So the engine walks the implementations itself, in the
order pluggy would call them: ``tryfirst`` ones first, then plain ones (the last registered
first; third parties register after built-ins), then ``trylast`` ones. Built-ins are
``trylast``: they see every third-party change and are written as defaults (they fill in only
what is not set) or as guards (they check the request that will really be sent). New-style
wrappers (``wrapper=True``) surround the whole chain, the ``tryfirst`` one outermost.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

from orchestrator.errors import OrchError, Refusal

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
}
_DEFAULT_DELIBERATE = (Refusal, OrchError)


def _picker(argnames) -> Callable[[dict], tuple]:
    """The implementation's arguments, in its order, from the call's keyword dict."""
    if not argnames:
        return lambda args: ()
    if len(argnames) == 1:
        name = argnames[0]
        return lambda args: (args[name],)
    return operator.itemgetter(*argnames)


class HookRunner:
    def __init__(self, pm) -> None:
        self.pm = pm
        self._impls: dict[str, list] = {}

    def impls(self, name: str) -> list:
        """Implementations in pluggy's call order: wrappers (outermost first), then the rest,
        ``tryfirst`` first and ``trylast`` last. Old-style hookwrappers are never called."""
        if name not in self._impls:
            caller = getattr(self.pm.hook, name)
            self._impls[name] = [i for i in reversed(caller.get_hookimpls())
                                 if not i.hookwrapper]
        return self._impls[name]

    def chain(self, name: str) -> list[tuple[Callable, Callable, bool, str]]:
        """``impls`` as (function, argument picker, is a wrapper, plugin name): the hot loop
        reads no attributes."""
        key = f"chain:{name}"
        if key not in self._impls:
            self._impls[key] = [(i.function, _picker(i.argnames), bool(i.wrapper),
                                 i.plugin_name) for i in self.impls(name)]
        return self._impls[key]

    async def pipeline(self, name: str, value_arg: str, value: Any, on_error: ErrorSink,
                       **kwargs: Any) -> Any:
        """Thread ``value`` through every implementation of ``name``; return the final value.

        Wrappers (``wrapper=True``) run to their ``yield`` first, receive the value the
        pipeline produced, and may return a replacement (``None`` keeps it).
        """
        chain = self.chain(name)
        if not chain:
            return value
        deliberate = DELIBERATE.get(name, _DEFAULT_DELIBERATE)
        wrappers: list[tuple[str, Any]] = []
        args = {**kwargs, value_arg: value}
        try:
            for function, pick, wrapper, plugin in chain:
                try:
                    result = function(*pick(args))
                    if wrapper:
                        try:
                            next(result)  # the wrapper's "before" half
                        except StopIteration:
                            raise RuntimeError("a wrapper must yield exactly once") from None
                        wrappers.append((plugin, result))
                        continue
                    if result is None:
                        continue
                    if inspect.isawaitable(result):
                        result = await result
                        if result is None:
                            continue
                except deliberate:
                    raise
                except Exception as exc:
                    on_error(plugin, name, exc)
                    continue
                value = args[value_arg] = result
            while wrappers:
                plugin, gen = wrappers.pop()  # innermost first, as pluggy unwinds
                try:
                    gen.send(value)
                except StopIteration as stop:
                    if stop.value is not None:
                        value = stop.value
                except deliberate:
                    raise
                except Exception as exc:
                    on_error(plugin, name, exc)
                else:
                    gen.close()
                    on_error(plugin, name, RuntimeError("a wrapper must yield exactly once"))
        finally:
            for _, gen in wrappers:  # a Refusal or OrchError left some wrappers suspended
                gen.close()
        return value

    async def notify(self, name: str, on_error: ErrorSink, **kwargs: Any) -> None:
        """Call every implementation; await what returns an awaitable; isolate failures."""
        await self.pipeline(name, "_unused", None, on_error, **kwargs)

    def first(self, name: str, on_error: ErrorSink, **kwargs: Any) -> Any:
        """First non-None answer (``firstresult`` hooks), failures isolated."""
        for _plugin, result in self._answers(name, on_error, kwargs):
            return result
        return None

    def collect(self, name: str, on_error: ErrorSink, **kwargs: Any) -> list[tuple[str, Any]]:
        """Every implementation's non-None answer with its plugin name."""
        return list(self._answers(name, on_error, kwargs))

    def _answers(self, name: str, on_error: ErrorSink, kwargs: dict[str, Any]):
        """Synchronous answers, lazily (``first`` stops at the first): no awaitables here."""
        deliberate = DELIBERATE.get(name, _DEFAULT_DELIBERATE)
        for impl in self.impls(name):
            if impl.wrapper:
                continue
            try:
                result = impl.function(*[kwargs[a] for a in impl.argnames])
            except deliberate:
                raise
            except Exception as exc:
                on_error(impl.plugin_name, name, exc)
                continue
            if inspect.isawaitable(result):
                getattr(result, "close", lambda: None)()  # no "never awaited" warning
                on_error(impl.plugin_name, name,
                         TypeError(f"{name} must answer synchronously, not with an awaitable"))
                continue
            if result is not None:
                yield impl.plugin_name, result
