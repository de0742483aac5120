"""A wave: N legs in one anyio task group on one shared server, then optionally a chair.

``wave.json`` is written atomically when the wave starts (status ``running``) and when it
ends; every leg keeps its own ``metadata.json``, so ``orch status`` can rebuild a wave whose
process was killed. What the document says is built in engine/wave_document.py.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from orchestrator import jobscope
from orchestrator.account import Account
from orchestrator.chair.synthesis import FanoutChair
from orchestrator.config import Config
from orchestrator.engine import histories
from orchestrator.engine.context import LegContext, WaveContext
from orchestrator.engine.degraded import reporter
from orchestrator.engine.ledger_sink import LedgerSink
from orchestrator.engine.leg import ABORT_HOOK_S, Leg
from orchestrator.engine.record import (
    ABORTED,
    COMPLETE,
    ERROR,
    RUNNING,
    LegRecord,
    now_iso,
)
from orchestrator.engine.spec import WaveSpec, new_wave_id
from orchestrator.engine.wave_document import (
    EXIT_COMPLETE,
    EXIT_PARTIAL,
    build_document,
    unread_notice,
    wave_fields,
    wave_status,
)
from orchestrator.errors import Deferred, OrchError, PreflightError, Refusal
from orchestrator.intake import Policy
from orchestrator.models.addressing import ResolvedModel
from orchestrator.models.server import Server
from orchestrator.plugin_host.boundary import said
from orchestrator.plugin_host.fail_closed import holders
from orchestrator.plugin_host.hooks import HookRunner
from orchestrator.security.secrets import register_identifier, scrub
from orchestrator.store import write_json_atomic, write_text_atomic


class Wave:
    def __init__(self, spec: WaveSpec, *, pm, config: Config, ledger: LedgerSink | None = None,
                 observe=None, server: Server | None = None,
                 account: Account | None = None) -> None:
        self.spec = spec
        self.config = config
        self.hooks = HookRunner(pm, config=config, held=holders(pm, config, spec.options))
        self.ledger = ledger
        self.observe = observe
        self.wave_id = spec.wave_id or new_wave_id()
        self.dir = spec.runs_dir / self.wave_id
        # the run's account, shared by its waves (a council's stages, a bench's trials); a
        # wave of its own has a new id, so the record holds nothing for it yet
        self.account = account if account is not None else \
            Account(run_id=spec.run_id or self.wave_id)
        self.journal = None  # every request journaled before the wire (account/journal.py)
        if ledger is not None:
            from orchestrator.account.journal import WaveJournal
            from orchestrator.ledger.connection import default_url

            self.journal = WaveJournal(ledger.url or default_url(), self.wave_id, spec.run_id)
        # A council's stages pass one server so every stage shares its gate and counters.
        self.server = server or Server(timeout_s=spec.timeout_s)
        self.server.wave_size = max(self.server.wave_size, len(spec.models))
        self.signum: int | None = None
        register_identifier(spec.tag)  # the user's label: a key shape never cuts it
        # what every request passes before the wire; one per wave, so its legs share what
        # was admitted (the briefing is scanned once, not once per leg and step)
        self.intake = Policy(anonymity=spec.anonymity)
        self.chair_intake = Policy()  # the chair names the models: it is never anonymous
        self.legs: list[Leg] = [
            self._leg(f"{self.wave_id}-{n}", model, spec.kind,
                      (spec.briefings or [])[n - 1] if spec.briefings else spec.briefing,
                      (spec.histories or [])[n - 1] if spec.histories else None)
            for n, model in enumerate(spec.models, start=1)
        ]
        self.chair: Leg | None = None
        self.chair_repair: Leg | None = None  # a structured synthesis's repair prompt
        self.synthesis: dict[str, Any] | None = None
        self._chair_mode = FanoutChair(spec.synthesis, seed=self.wave_id,
                                       models=[*spec.models, *([spec.chair] if spec.chair
                                                               else [])])
        self.context = WaveContext(wave_id=self.wave_id, legs=[leg.ctx for leg in self.legs],
                                   config=config, dir=self.dir, options=spec.options,
                                   chair_model=spec.chair, later_models=spec.later,
                                   account=self.account)
        for leg in self.legs:  # a leg hook reaches its wave (leg.wave.shared(...))
            leg.ctx.wave = self.context
        self._legs_scope: anyio.CancelScope | None = None
        self._start_scope: anyio.CancelScope | None = None
        self._end_scope: anyio.CancelScope | None = None
        self.budget_refusals: list[dict[str, Any]] = []  # launches before_launch refused
        self._checked: dict[str, anyio.Event] = {}  # leg id -> its launch was checked
        self._after: dict[str, str] = {}  # leg id -> the leg whose check comes first
        self._created = now_iso()

    def _leg(self, leg_id: str, model: ResolvedModel, kind: str, briefing: str,
             history: list[dict[str, Any]] | None = None, intake: Policy | None = None) -> Leg:
        record = LegRecord(leg_id=leg_id, wave_id=self.wave_id, model=model.name,
                           provider=model.provider, kind=kind, variant=model.variant,
                           sampling=dict(model.sampling))
        ctx = LegContext(leg_id=leg_id, wave_id=self.wave_id, model=model, briefing=briefing,
                         record=record, config=self.config, dir=self.spec.runs_dir / leg_id,
                         kind=kind, max_steps=self.spec.max_steps, workspace=self.spec.workspace,
                         options=self.spec.options, history=list(history or []),
                         account=self.account, wave=getattr(self, "context", None))
        return Leg(ctx, self.server, self.hooks, timeout_s=self.spec.timeout_s,
                   ledger=self.ledger.append if self.ledger else None, observe=self.observe,
                   tag=self.spec.tag, project_dir=self.spec.project_dir, run_id=self.spec.run_id,
                   parent_wave_id=self.spec.parent_wave_id, intake=intake or self.intake, journal=self.journal,
                   index=self._indexed if self.ledger else None)

    async def _settle_index(self) -> None:
        """The legs' search docs written, or journaled (bounded: engine/index_sink.py)."""
        if self.ledger is not None:
            await self.ledger.search.settle(hurry=self.signum is not None)

    def _indexed(self, record: LegRecord) -> None:
        """A leg's end for the search index: the wave's prompt (the user's question, not a
        chair packet or a round prompt) and the leg's answer."""
        self.ledger.search.add(
            wave_id=record.wave_id, leg_id=record.leg_id, run_id=self.spec.run_id,
            kind=record.kind, model=record.model, status=record.status, tag=self.spec.tag,
            ts=record.ended_at, prompt=self.spec.briefing, answer=record.answer)

    @property
    def records(self) -> list[LegRecord]:
        return [leg.record for leg in self.legs]

    def _on_hook_error(self, plugin: str, hook: str, exc: BaseException) -> None:
        self.context.notice(f"plugin {plugin} failed in {hook}: {said(exc)}")

    # -- running -------------------------------------------------------------------------
    async def run(self, *, handle_signals: bool = False) -> dict[str, Any]:
        """Run the legs (and the chair). Signals are watched from the first line to the
        last, so one that arrives while ``wave_start`` hooks run (the local server starting)
        or while ``wave_end`` hooks run still ends the wave with its ``wave.json``;
        ``wave.json`` is final however the legs ended, and should the process have to leave
        before (jobscope's hard timer) it is written from what the legs hold."""
        self._create_dir()
        jobscope.wave_started(self.wave_id)  # a daemon's client names it if the daemon dies
        with jobscope.finaliser(self._final_write):
            refused = await self._run(handle_signals)
            if refused is not None:  # wave.json says so, then the CLI says it in one line
                # A wave that could not start (the local server) ran: a row per leg at $0,
                # so runs and spend agree. A pre-flight refusal (exit 2) is a usage error,
                # like a bad flag: it writes nothing to the ledger (docs/budgets.md).
                attempted = not isinstance(refused, PreflightError)
                for leg in self.legs:
                    leg.record.finish(ERROR, scrub(f"wave_start: {refused}"))
                    if attempted:
                        await leg.unsent()
                await self._settle_index()
                self._write_file("wave.json", self.write)
                self._close_journal()
                raise refused
            return self.finalise()

    async def _run(self, handle_signals: bool) -> Exception | None:
        """The wave inside its signal watch: wave_start, the legs, wave_end. What a
        wave_start refused with, or None."""
        refused: Exception | None = None
        async with anyio.create_task_group() as outer:
            if handle_signals:
                await outer.start(self._watch_signals)
            self._write_file("briefing.md", lambda: write_text_atomic(  # scrubbed
                self.dir / "briefing.md", self.spec.briefing))
            if self.spec.histories and (self.spec.parent_wave_id or self.spec.retry_of):
                # what a follow-up of this wave reads back (app/continuation.py)
                self._write_file(histories.FILE, lambda: histories.write(
                    self.dir, {leg.ctx.leg_id: leg.ctx.history for leg in self.legs}))
            try:
                self.write()
            except Exception as exc:  # the final write supersedes it: a warning, not a gap
                from orchestrator.runtime import log

                log().warning("wave_json_start_failed", wave_id=self.wave_id,
                              error=f"{type(exc).__name__}: {exc}")
            with anyio.CancelScope() as self._start_scope:
                if self.signum is None:
                    try:
                        await self.hooks.notify("wave_start", self._on_hook_error,
                                                wave=self.context)
                    except Exception as exc:  # deliberate (OrchError): no leg starts
                        refused = exc
            if refused is None:
                await self._run_legs()
                await self._settle_index()
                for text in self.server.holds.notices():  # the rate-limit gate held it back
                    self.context.notice(text)
                unread = unread_notice(self.records + ([self.chair.record] if self.chair
                                                       else []))
                if unread:  # unknown is not zero: the record says the total is an upper bound
                    self.context.notice(unread)
                self.context.status = self.status
                await self._end()
            outer.cancel_scope.cancel()
        return refused

    async def _end(self) -> None:
        """The ``wave_end`` hooks; a signal (before or while they run) cuts them short."""
        with anyio.CancelScope() as self._end_scope:
            try:
                await self.hooks.notify("wave_end", self._on_hook_error, wave=self.context,
                                        deadline_s=ABORT_HOOK_S if self.signum else None)
            except Exception as exc:  # the wave is over: a plugin must not keep wave.json open
                self._on_hook_error("?", "wave_end", exc)
        if self._end_scope.cancelled_caught:
            self.context.notice("wave_end was cut short: the wave was interrupted")

    def _final_write(self, signum: int) -> dict:
        """The record written final from what the legs hold now, from another thread, when
        the command must leave before the wave ends (jobscope's hard timer, a second
        interrupt): each leg still open is ``aborted``, its metadata.json written and its
        ledger row journaled in the outbox (the next command replays it). The document
        written goes to the command's last words (its ``--json`` output)."""
        from orchestrator.engine.record import PENDING
        from orchestrator.store import write_json_atomic as write

        if self.signum is None:
            self.signum = signum
        reason = (f"aborted: orch ended the process after signal {signum} while this leg was "
                  "still open (something held it past the hard exit's "
                  f"{jobscope.HARD_EXIT_S:g} s)")
        for leg in [*self.legs, *([self.chair] if self.chair else [])]:
            if leg.record.status not in (RUNNING, PENDING):
                continue
            leg.record.finish(ABORTED, reason)
            try:
                write(leg.ctx.dir / "metadata.json", leg.record.to_dict())
            except Exception:  # noqa: BLE001 - the wave's own file still gets written
                pass
            self._journal(leg)
        self.context.notice(f"written by orch's hard exit after signal {signum}: the plugins' "
                            "wave_report was not asked")
        doc = self.document(report=False)
        write(self.dir / "wave.json", doc)
        return doc

    def _journal(self, leg: Leg) -> None:
        """A leg's ledger row straight to the outbox (fsync'd), for the next command."""
        if self.ledger is None:
            return
        try:
            from orchestrator.ledger import outbox
            from orchestrator.ledger.spend import default_url

            outbox.append(self.ledger.url or default_url(), leg.record.ledger_row(
                tag=leg.tag, project_dir=leg.project_dir, run_id=leg.run_id,
                parent_wave_id=leg.parent_wave_id))
        except Exception:  # noqa: BLE001 - no outbox takes it: wave.json still says it
            pass

    async def _run_legs(self) -> None:
        # launches are checked in the legs' order, whichever is prepared first
        ids = [leg.ctx.leg_id for leg in self.legs]
        self._checked = {leg_id: anyio.Event() for leg_id in ids}
        self._after = dict(zip(ids[1:], ids, strict=False))
        with anyio.CancelScope() as self._legs_scope:
            if self.signum is not None:  # interrupted while wave_start hooks ran
                self._legs_scope.cancel()
            async with anyio.create_task_group() as tg:
                for leg in self.legs:
                    tg.start_soon(self._launch, leg)
            if self.spec.chair is not None:
                await self._run_chair()

    def _create_dir(self) -> None:
        """The wave's directory, created exclusively: two waves never share one."""
        from orchestrator.config import unwritable

        try:
            self.spec.runs_dir.mkdir(parents=True, exist_ok=True)
            self.dir.mkdir(exist_ok=False)
        except FileExistsError:
            raise OrchError(f"wave directory {self.dir} already exists; wave ids must be "
                            "unique (pass a new --runs-dir or remove it)") from None
        except OSError as exc:
            raise unwritable(self.spec.runs_dir, exc) from None

    def _write_file(self, name: str, write) -> bool:
        try:
            write()
            return True
        except Exception as exc:
            self.context.notice(f"artifacts incomplete: {name} could not be written: "
                                f"{type(exc).__name__}: {exc}")
            return False

    def finalise(self) -> dict[str, Any]:
        """The final wave.json, tried a few times (a disk may free up); when it cannot be
        written the document says so and the exit code is 2 (never a clean 0)."""
        self._close_journal()
        outboxed = self.ledger.outboxed if self.ledger else {}
        if outboxed:
            where = sorted(set(outboxed.values()))[0].split(" (")[0]
            self.context.notice(f"{len(outboxed)} ledger row(s) could not be written in time "
                                f"and wait in the outbox {where}; the next orch command "
                                "that opens the ledger (orch spend) replays them")
        error: BaseException | None = None
        for attempt in range(3):
            try:
                return self.write()
            except Exception as exc:
                error = exc
                time.sleep(0.05 * (attempt + 1))
        doc = self.document()
        text = f"artifacts incomplete: wave.json could not be written: {type(error).__name__}: " \
            f"{error}"
        doc["notices"] = [*doc["notices"], text]
        doc["exit_code"] = EXIT_PARTIAL if doc["exit_code"] == EXIT_COMPLETE else \
            doc["exit_code"]
        return doc  # the notice is said by the face, with the others

    def _close_journal(self) -> None:
        """Every leg's end is recorded (ledger or outbox): its requests are settled, so the
        wave's journal goes; kept when a row was lost (its requests stay "in flight")."""
        if self.journal is not None:
            self.journal.close(keep=bool(self.ledger and self.ledger.errors))

    async def _run_chair(self) -> None:
        if self.spec.chair_only_if_new and not any(r.status == COMPLETE for r in self.records):
            self.context.notice("no retried leg completed: the chair was not called again "
                                "(it would read the same answers)")
            return
        mode = self._chair_mode
        brief = mode.packet(self.spec.briefing, [*self.spec.prior, *self.records])
        if brief is None:
            self.context.notice("no leg completed: the chair was not called")
            return
        self.chair = self._leg(f"{self.wave_id}-chair", self.spec.chair, "chair", brief,
                               intake=self.chair_intake)
        self.context.chair = self.chair.ctx
        await self._launch(self.chair)
        if not mode.structured:
            return
        record = self.chair.record
        if record.status != COMPLETE or not (record.answer or "").strip():
            self.synthesis = mode.document(None)
            return
        reading = mode.read(record.answer)
        if reading["problem"] and self.signum is None:  # one repair prompt, as council findings
            self.chair_repair = self._leg(f"{self.wave_id}-chair-repair", self.spec.chair,
                                          "chair", mode.repair(record.answer, reading["problem"]))
            await self._launch(self.chair_repair)
            again = self.chair_repair.record
            if again.status == COMPLETE and again.answer:
                reading = mode.take_repair(reading, again.answer)
        self.synthesis = mode.document(reading)

    async def _launch(self, leg: Leg) -> None:
        """Start ``leg`` unless a ``before_launch`` hook (the cost ceiling) refuses it; the
        hooks run synchronously, so each check and what it claims happen at once. The leg is
        prepared first (roster, system prompt), so the check sees what its first request
        carries. A launch only other legs' open claims keep out (:class:`Deferred`) waits,
        in a run whose account says so (a bench), until one settles, then is checked again."""
        self.account.join(leg.ctx)
        leg_id = leg.ctx.leg_id
        try:
            await leg.prepare()
            if leg_id in self._after:
                await self._checked[self._after[leg_id]].wait()
            while True:
                seen = self.account.version
                try:
                    await self.hooks.notify("before_launch", self._on_hook_error,
                                            wave=self.context, leg=leg.ctx)
                    break
                except Deferred:
                    if not (self.account.waits and self.account.others_claim(leg.ctx.leg_id)):
                        raise
                    await self.account.changed(seen)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # as if it had begun: aborted, its row, files
                await leg.aborted_before_start()
            raise
        except (Refusal, OrchError) as exc:
            self._turn_done(leg_id)
            reason = exc.reason if isinstance(exc, Refusal) else f"config: {exc}"
            self.budget_refusals.append({"leg_id": leg.ctx.leg_id, "kind": leg.ctx.kind,
                                         "model": leg.ctx.model.name, "reason": reason})
            self.context.notice(f"{leg.ctx.leg_id} ({leg.ctx.model.name}) not launched: "
                                f"{reason}")
            await leg.refuse(reason)
            return
        finally:
            self._turn_done(leg_id)
        await leg.run()

    def _turn_done(self, leg_id: str) -> None:
        event = self._checked.get(leg_id)
        if event is not None:
            event.set()

    async def _watch_signals(self, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        # the process's signals, or its job's (serve)
        await jobscope.watch(self.interrupt, lambda: self.signum is not None,
                             task_status=task_status)

    def interrupt(self, signum: int) -> None:
        """Stop the legs as a signal would (a council watching signals itself calls this)."""
        self.signum = signum
        if self.ledger is not None:  # the ledger gets a moment more, then the outbox
            self.ledger.hurry()
        for scope in (self._start_scope, self._legs_scope, self._end_scope):
            if scope is not None:
                scope.cancel()

    # -- the wave document ---------------------------------------------------------------
    @property
    def status(self) -> str:
        records = self.records + ([self.chair.record] if self.chair else [])
        return wave_status(records)

    def document(self, *, report: bool = True) -> dict[str, Any]:
        """The wave document; ``report=False``: without asking the plugins' ``wave_report``
        (the hard exit's write: no plugin code then)."""
        status = self.status
        return build_document(
            wave_id=self.wave_id, status=status, legs=self.records,
            chair=self.chair.record if self.chair else None, runs_dir=self.spec.runs_dir,
            signum=self.signum,
            chair_repair=self.chair_repair.record if self.chair_repair else None,
            extra=wave_fields(
                self.spec, created=self._created,
                ended=None if status == "running" else now_iso(), records=self.records,
                synthesis=self.synthesis, notices=self.context.notices,
                budget_refusals=self.budget_refusals,
                ledger_errors=self.ledger.errors if self.ledger else [], server=self.server),
            report=reporter(self.hooks, self.context.notice, self.context) if report else None)

    def write(self) -> dict[str, Any]:
        doc = self.document()
        write_json_atomic(self.dir / "wave.json", doc)
        return doc

