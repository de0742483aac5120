"""The runner: the one place orch calls a third party's code, whatever for.

Hooks (hooks.py), declarations (declared.py: ``register_options``, ``register_commands``,
the module's constants), ``default_models``, ``resolve_model``, config checks and the
import itself (plugins.py) reach a plugin only through the calls here, so what holds here
holds for each of them (tests/test_plugin_runner.py enumerates the call sites):

- **A deadline.** A third party's synchronous code runs on a daemon worker (tool_thread),
  its coroutines on the plugin loop (plugin_loop.py); past the deadline orch stops waiting
  and the call is abandoned: what it writes to a leg afterwards is discarded
  (``tool_thread.abandoned``, engine/context.py), and its thread never holds the exit.
- **Exits captured.** ``SystemExit``, ``KeyboardInterrupt`` and ``os._exit`` called from
  plugin code are the plugin's failure (``PluginExit``), never the command's end. What a
  plugin can still do that no process can stop from inside — ``os.kill(os.getpid(),
  SIGKILL)``, ``os.abort()``, a crash in native code, C code that holds the GIL — is said in
  docs/plugins.md; the record of a run ended that way is repaired from its legs and ledger.
- **Failures as bounded text.** The exception a plugin raised never crosses into orch: it
  is described on the plugin's own thread (its ``__str__`` is plugin code too), on one
  line, capped and scrubbed (:class:`PluginFailure`); what it raised on purpose
  (``Refusal``, ``LegError``, ``OrchError``) is rebuilt as orch's own class with its words
  capped. A 50 MB message is 300 characters everywhere orch writes it.

Built-in plugins are orch's own code: they run inline and are not the threat.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from orchestrator import tool_thread

T = TypeVar("T")

LIMIT = 300  # characters of a plugin's words kept, on one line
QUICK_S = 0.001  # a hand-over is first waited for this long on the caller's thread


class HookTimeout(Exception):  # noqa: N818 - read as "plugin_errors: HookTimeout: ..."
    """An implementation did not return within its deadline; its call was abandoned."""


class PluginExit(Exception):  # noqa: N818 - said as what the plugin did
    """Plugin code tried to end the process (SystemExit, KeyboardInterrupt, ``os._exit``):
    the plugin's failure, never the command's end."""


class PluginFailure(Exception):  # noqa: N818 - what a plugin did, as orch keeps it
    """What a plugin raised, as one bounded line (``KeyError: 'x'``), described where it was
    raised. ``said`` is the whole line, kind included."""

    def __init__(self, said: str) -> None:
        super().__init__(said)
        self.said = said


def said(exc: BaseException) -> str:
    """One bounded line for any failure a plugin call ended with (``Kind: message``)."""
    if isinstance(exc, PluginFailure):
        return exc.said
    return describe(exc)


def describe(exc: BaseException, limit: int = LIMIT) -> str:
    """``Kind: message`` on one line, at most ``limit`` characters (the cut says how long the
    message was), key values scrubbed. Safe on anything: a message that cannot be read is
    said so."""
    from orchestrator.security.secrets import scrub

    try:
        kind = type(exc).__name__
        text = str(exc)
        if not isinstance(text, str):
            raise TypeError
    except Exception:  # noqa: BLE001 - a hostile __str__: its kind is enough
        return f"{_kind(exc)}: <its message could not be read>"
    head = " ".join(text[:limit * 4].split())
    line = scrub(f"{kind}: {head}" if head else kind)
    if len(line) <= limit and len(text) <= limit * 4:
        return line
    return f"{line[:limit]}… ({len(text):,} characters)"


def _kind(exc: BaseException) -> str:
    try:
        return str(type(exc).__name__)[:80]
    except Exception:  # noqa: BLE001
        return "Exception"


def capped(text: Any, limit: int = LIMIT) -> str:
    """A plugin's words (a refusal's message, a notice) on one line, capped."""
    try:
        raw = text if isinstance(text, str) else str(text)
    except Exception:  # noqa: BLE001
        return "<unreadable>"
    line = " ".join(raw[:limit * 4].split())
    if len(line) <= limit and len(raw) <= limit * 4:
        return line
    return f"{line[:limit]}… ({len(raw):,} characters)"


def plain(exc: BaseException) -> BaseException:
    """What orch keeps of an exception raised in plugin code (run on the plugin's thread):
    a deliberate one rebuilt as orch's own class with its words capped, an exit attempt as
    PluginExit, anything else as a PluginFailure line."""
    from orchestrator.errors import LegError, OrchError, PreflightError, Refusal, UsageProblem

    if isinstance(exc, PluginFailure | HookTimeout | PluginExit):
        return exc
    if isinstance(exc, SystemExit | KeyboardInterrupt):
        return PluginExit(describe(exc))
    try:
        if isinstance(exc, Refusal):
            return Refusal(capped(exc.code, 60), capped(exc.message))
        if isinstance(exc, LegError):
            return LegError(capped(exc.code, 60), capped(exc.message))
        if isinstance(exc, OrchError):
            cls = type(exc) if type(exc) in (OrchError, PreflightError, UsageProblem) else \
                PreflightError if getattr(exc, "exit_code", 1) == 2 else OrchError
            return cls(capped(exc))
    except Exception:  # noqa: BLE001 - a hostile code or message: said as what it is
        pass
    return PluginFailure(describe(exc))


Site = tuple[str, str] | None  # (plugin, hook): whose code a call runs


def captured(fn: Callable[[], T], site: Site = None) -> Callable[[], T]:
    """``fn`` (plugin code) as run on a worker: whatever it raises comes out :func:`plain`;
    ``site`` names it to what it writes after it was abandoned (engine/context.py)."""
    def run() -> T:
        if site is not None:
            tool_thread.current().site = site  # type: ignore[union-attr]
        try:
            return fn()
        except BaseException as exc:  # noqa: BLE001 - every way out is the plugin's
            raise plain(exc) from None
    return run


def call_blocking(fn: Callable[[], T], seconds: float, site: Site = None) -> T:
    """``fn`` (a third party's code) on a worker, from synchronous code (start-up, the CLI
    reading its models), waited for at most ``seconds``: HookTimeout past it."""
    try:
        return tool_thread.run_blocking(captured(fn, site), seconds=seconds)
    except tool_thread.ToolTimeout:
        raise HookTimeout(f"did not return within {seconds:g} s") from None


async def call(fn: Callable[[], T], deadline: Callable[[], float], seconds: float,
               site: Site = None) -> T:
    """``fn`` (a third party's synchronous code) on a worker, from orch's loop, until
    ``deadline()``: HookTimeout past it. What it returns is not awaited here."""
    try:
        return await tool_thread.run_until(captured(fn, site), deadline, seconds=seconds,
                                           quick_s=QUICK_S)
    except tool_thread.ToolTimeout:
        raise HookTimeout(f"did not return within {seconds:g} s") from None


async def on_plugin_loop(job: Callable[[], Awaitable[T]], deadline: Callable[[], float],
                         seconds: float) -> T:
    """``await job()`` (a third party's coroutines) on the plugin loop, from orch's loop,
    until ``deadline()``: HookTimeout past it, the task abandoned whether or not it accepts
    its cancellation. ``job`` says its own failures (:func:`plain`)."""
    from orchestrator.plugin_host import plugin_loop

    try:
        return await plugin_loop.run(job, deadline, seconds=seconds, quick_s=QUICK_S)
    except tool_thread.ToolTimeout:
        raise HookTimeout(f"did not return within {seconds:g} s") from None


async def awaited(awaitable: Awaitable[T], seconds: float, site: Site = None) -> T:
    """An awaitable a third party handed back, awaited on the plugin loop within
    ``seconds``."""
    import time

    async def job() -> T:
        if site is not None:
            tool_thread.current().site = site  # type: ignore[union-attr]
        try:
            return await awaitable
        except BaseException as exc:  # noqa: BLE001
            raise plain(exc) from None

    ends = time.monotonic() + seconds
    return await on_plugin_loop(job, lambda: ends, seconds)


async def run_tool(function: Callable[..., Any], arguments: dict[str, Any], meta: Any,
                   default_s: float, site: Site) -> str:
    """A third party's tool function: its limit (``meta["max_seconds"]``) and its text read
    on the plugin's side; a plain function on a worker, an ``async`` one on the plugin loop,
    within the limit and GRACE_S, abandoned past it (ToolTimeout, as for any tool)."""
    import inspect
    import time

    def limit() -> float:
        try:
            return float(meta.get("max_seconds") or default_s)
        except Exception:  # noqa: BLE001 - a limit it cannot say: the default
            return default_s

    seconds = call_blocking(limit, 5.0, site) if type(meta) is not dict else limit()
    if not (0 < seconds < float("inf")):
        seconds = default_s
    ends = time.monotonic() + seconds + tool_thread.GRACE_S
    if inspect.iscoroutinefunction(function):
        async def job() -> str:
            tool_thread.current().site = site  # type: ignore[union-attr]
            try:
                result = await function(**arguments)
                return as_text(await result if inspect.isawaitable(result) else result)
            except BaseException as exc:  # noqa: BLE001
                raise plain(exc) from None

        from orchestrator.plugin_host import plugin_loop

        return await plugin_loop.run(job, lambda: ends, seconds=seconds)

    def work() -> Any:
        result = function(**arguments)
        return result if inspect.isawaitable(result) else as_text(result)

    result = await tool_thread.run_until(captured(work, site), lambda: ends, seconds=seconds)
    if isinstance(result, str):
        return result

    async def handed_back() -> Any:  # a plain function that returned an awaitable
        return await result

    return await run_tool(handed_back, {}, {"max_seconds": seconds}, default_s, site)


def as_text(result: Any) -> str:
    """What a tool returned, as the text sent back to the model (a plain ``str``)."""
    import json

    if isinstance(result, str):
        return str.__str__(result)
    return json.dumps(result, default=str)


# -- exits ---------------------------------------------------------------------------------

_real_exit = os._exit
_guarded_pid: int | None = None


def _guarded_exit(status: int) -> None:
    """``os._exit`` while plugin code runs on one of orch's workers or the plugin loop: the
    plugin's failure, raised in its own code. Anywhere else (orch's own exits, a child
    process after fork) the real one."""
    if tool_thread.current() is not None and os.getpid() == _guarded_pid:
        raise PluginExit(f"os._exit({status!r}) called from plugin code")
    _real_exit(status)


def guard_exits() -> None:
    """Install the ``os._exit`` guard (once, before any third party is imported)."""
    global _guarded_pid
    if os._exit is not _guarded_exit:
        _guarded_pid = os.getpid()
        os._exit = _guarded_exit  # type: ignore[assignment]


def exit_now(status: int) -> None:
    """orch's own immediate exit, never mistaken for a plugin's."""
    _real_exit(status)
