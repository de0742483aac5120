"""Calling hooks on the request path: a pipeline in pluggy's order, one plugin's failure isolated.

pluggy calls every implementation with the same arguments; a request pipeline needs each
implementation to see the previous one's result, and a failing plugin to drop out without
taking its half-made change with it. So the engine walks the implementations itself, in the
order pluggy would (``tryfirst``/``trylast`` and new-style ``wrapper=True`` are honoured).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from orchestrator.errors import OrchError, Refusal

# (plugin name, hook name, exception) -> None; the leg records it.
ErrorSink = Callable[[str, str, BaseException], None]


class HookRunner:
    def __init__(self, pm) -> None:
        self.pm = pm
        self._impls: dict[str, list] = {}

    def impls(self, name: str) -> list:
        """Implementations in call order (pluggy calls the registered list reversed)."""
        if name not in self._impls:
            caller = getattr(self.pm.hook, name)
            self._impls[name] = list(reversed(caller.get_hookimpls()))
        return self._impls[name]

    async def pipeline(self, name: str, value_arg: str, value: Any, on_error: ErrorSink,
                       **kwargs: Any) -> Any:
        """Thread ``value`` through every implementation of ``name``; return the final value."""
        impls = self.impls(name)
        if not impls:
            return value
        wrappers = []
        for impl in impls:
            if impl.wrapper or impl.hookwrapper:
                if impl.hookwrapper:
                    continue  # old-style wrappers are not supported on pipelines
                args = {value_arg: value, **kwargs}
                gen = impl.function(*(args[a] for a in impl.argnames))
                try:
                    next(gen)
                except StopIteration:
                    continue
                except Refusal:
                    raise
                except Exception as exc:
                    on_error(impl.plugin_name, name, exc)
                    continue
                wrappers.append((impl, gen))
                continue
            args = {value_arg: value, **kwargs}
            try:
                result = impl.function(*(args[a] for a in impl.argnames))
                if inspect.isawaitable(result):
                    result = await result
            except (Refusal, OrchError):
                raise
            except Exception as exc:
                on_error(impl.plugin_name, name, exc)
                continue
            if result is not None:
                value = result
        for impl, gen in reversed(wrappers):
            try:
                gen.send(value)
            except StopIteration as stop:
                if stop.value is not None:
                    value = stop.value
            except Refusal:
                raise
            except Exception as exc:
                on_error(impl.plugin_name, name, exc)
            else:
                on_error(impl.plugin_name, name, RuntimeError("wrapper yielded more than once"))
        return value

    async def notify(self, name: str, on_error: ErrorSink, **kwargs: Any) -> None:
        """Call every implementation; await what returns an awaitable; isolate failures."""
        await self.pipeline(name, "_unused", None, on_error, **kwargs)

    def first(self, name: str, on_error: ErrorSink, **kwargs: Any) -> Any:
        """First non-None answer (``firstresult`` hooks), failures isolated."""
        for impl in self.impls(name):
            if impl.wrapper or impl.hookwrapper:
                continue
            try:
                result = impl.function(*(kwargs[a] for a in impl.argnames))
            except (Refusal, OrchError):
                raise
            except Exception as exc:
                on_error(impl.plugin_name, name, exc)
                continue
            if result is not None:
                return result
        return None

    def collect(self, name: str, on_error: ErrorSink, **kwargs: Any) -> list[tuple[str, Any]]:
        """Every implementation's non-None answer with its plugin name."""
        out = []
        for impl in self.impls(name):
            if impl.wrapper or impl.hookwrapper:
                continue
            try:
                result = impl.function(*(kwargs[a] for a in impl.argnames))
            except Exception as exc:
                on_error(impl.plugin_name, name, exc)
                continue
            if result is not None:
                out.append((impl.plugin_name, result))
        return out
