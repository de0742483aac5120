"""Starting a prepared run: a :class:`Handle` with its events, ``interrupt()`` and its end.

::

    handle = start(prepared)
    document = await handle.drive(render)      # each event to ``render``, then the document

or ``async with handle: async for event in handle.events(): ...``. The same in every
process that runs requests: ``orch`` in-process, ``orch mcp``'s tools, ``orch serve``'s jobs.
The run reads exactly the variables it declared (orchestrator/keys.py). ``handle_signals``:
the run watches its own interrupts (the process's signals, or its job's under ``orch
serve``); otherwise its owner calls :meth:`Handle.interrupt`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio

from orchestrator.errors import OrchError
from orchestrator.events import Ended, Event, Failed, LegEvents, Notice


class RunFailed(OrchError):
    """A run that could not run to its end said why (a wave_start refusal, a stale ledger):
    one line, its exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Handle:
    def __init__(self, prepared, *, handle_signals: bool = False,
                 on_leave: Callable[[int], None] | None = None) -> None:
        self.prepared = prepared
        self.handle_signals = handle_signals
        self.on_leave = on_leave  # a second interrupt: its owner ends it at once
        self.runner: Any = None  # the run object (Wave, Deliberation, CouncilRun, bench)
        self.signum: int | None = None
        self.document: dict[str, Any] | None = None
        self.exit_code: int | None = None
        self.extra: dict[str, Any] = {}
        self.error: Exception | None = None  # a RunFailed, or a bug drive() raises
        self._send, self._receive = anyio.create_memory_object_stream[Event](math.inf)
        self._loop = None
        self._thread: int | None = None
        self._tg = None

    # -- events ----------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Queue ``event`` (from the run's thread or any other)."""
        if self._loop is not None and threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self._put, event)
        else:
            self._put(event)

    def _put(self, event: Event) -> None:
        try:
            self._send.send_nowait(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def events(self) -> AsyncIterator[Event]:
        async with self._receive:
            async for event in self._receive:
                yield event

    # -- control ---------------------------------------------------------------------------
    def interrupt(self, signum: int) -> None:
        """Stop the run as a signal would (from any thread); a second one: its owner's
        ``on_leave`` (the daemon's client leaves at once)."""
        if self._loop is not None and threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self._interrupt, signum)
        else:
            self._interrupt(signum)

    def _interrupt(self, signum: int) -> None:
        if self.signum is not None:
            if self.on_leave is not None:
                self.on_leave(signum)
            return
        self.signum = signum
        if self.runner is not None:
            self.runner.interrupt(signum)

    def _running(self, runner) -> None:
        """The run object exists: an interrupt that came before it reaches it now."""
        self.runner = runner
        if self.signum is not None:
            runner.interrupt(self.signum)

    # -- running ---------------------------------------------------------------------------
    async def __aenter__(self) -> Handle:
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run)
        return self

    async def __aexit__(self, *exc) -> bool | None:
        return await self._tg.__aexit__(*exc)

    async def drive(self, on_event: Callable[[Event], None] | None = None) -> dict[str, Any]:
        """Run to the end, each event to ``on_event``; the document (a failure raises)."""
        async with self:
            async for event in self.events():
                if on_event is None:
                    continue
                try:
                    on_event(event)
                except Exception as exc:  # a display must not end the run it shows
                    from orchestrator.runtime import log

                    log().warning("event_render_failed", event=event.type,
                                  error=f"{type(exc).__name__}: {exc}")
        if self.error is not None:
            raise self.error
        return self.document or {}

    async def _run(self) -> None:
        from orchestrator import keys

        try:
            for text in self.prepared.notices:
                self.emit(Notice(text))
            with keys.using(self.prepared.keys):
                doc, code, extra = await RUNNERS[self.prepared.kind](self)
            self.document, self.exit_code, self.extra = doc, code, extra
            self.emit(Ended(doc, code, extra))
        except OrchError as exc:
            self.error = RunFailed(str(exc), exc.exit_code)
            self.exit_code = exc.exit_code
            self.emit(Failed(str(exc), exc.exit_code))
        except Exception as exc:  # a bug: raised by drive() as itself, said as one line
            from orchestrator.runtime import log
            from orchestrator.security.secrets import scrub

            log().debug("internal_error", exc_info=True)
            self.error, self.exit_code = exc, 1
            first = (str(exc).splitlines() or [""])[0]
            self.emit(Failed(f"internal error: {type(exc).__name__}: {scrub(first)} "
                             "(LOG_LEVEL=debug shows the traceback; please report it)", 1))
        finally:
            self._send.close()

    def observer(self) -> LegEvents:
        return LegEvents(self, text=bool(getattr(self.prepared, "watch_text", False)))


def start(prepared, *, handle_signals: bool = False,
          on_leave: Callable[[int], None] | None = None) -> Handle:
    """The handle of ``prepared``'s run; it runs once driven (or entered)."""
    if prepared.nothing is not None:
        raise OrchError(f"nothing to run: {prepared.nothing}")
    return Handle(prepared, handle_signals=handle_signals, on_leave=on_leave)


# -- what each kind of run is ------------------------------------------------------------------

def _ledger():
    from orchestrator.app.warm import import_litellm_quietly
    from orchestrator.engine.ledger_sink import LedgerSink

    ledger = LedgerSink().preflight()  # a stale ledger schema: one line, before any spend
    import_litellm_quietly()
    return ledger


async def _wave(handle: Handle) -> tuple[dict, int, dict]:
    from orchestrator.engine.wave import Wave

    p = handle.prepared
    wave = Wave(p.plan, pm=p.pm, config=p.config, ledger=_ledger(), observe=handle.observer(),
                account=p.account.open())  # a retry's: its family's
    handle._running(wave)
    doc = await wave.run(handle_signals=handle.handle_signals)
    return doc, doc["exit_code"], {}


async def _deliberation(handle: Handle) -> tuple[dict, int, dict]:
    from orchestrator.deliberation.run import Deliberation

    p = handle.prepared
    run = Deliberation(p.plan.spec, pm=p.pm, config=p.config, rounds=p.plan.rounds,
                       peers=p.plan.peers, ledger=_ledger(), observe=handle.observer(),
                       events=handle)
    handle._running(run)
    doc = await run.run(handle_signals=handle.handle_signals)
    return doc, doc["exit_code"], {}


async def _council(handle: Handle) -> tuple[dict, int, dict]:
    from orchestrator.council.run import CouncilRun
    from orchestrator.models.resolve import resolve_all

    p = handle.prepared
    plan = p.plan
    run = CouncilRun(plan.plan, pm=p.pm, config=p.config, runs_dir=plan.runs_dir,
                     timeout_s=plan.timeout_s, max_steps=plan.max_steps, tag=plan.tag,
                     project_dir=plan.project_dir, workspace=plan.workspace,
                     observe=handle.observer(), events=handle, run_id=p.run_id,
                     resolve=lambda name: resolve_all([name], p.config, p.pm)[0],
                     options=plan.options)
    run.spend.preflight()  # a stale ledger schema: one line, before any seat is paid for
    from orchestrator.app.warm import import_litellm_quietly

    import_litellm_quietly()
    handle._running(run)
    doc = await run.run(handle_signals=handle.handle_signals)
    return doc, doc["exit_code"], {"tally": run.tally, "synthesis": run.chair.synthesis}


async def _bench(handle: Handle) -> tuple[dict, int, dict]:
    from orchestrator.app.bench_run import run_bench

    return await run_bench(handle)


RUNNERS: dict[str, Callable[[Handle], Awaitable[tuple[dict, int, dict]]]] = {
    "wave": _wave, "deliberation": _deliberation, "council": _council, "bench": _bench}
