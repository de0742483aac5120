"""The agent loop of one leg: request → hooks → server → hooks → tools, until an answer.

Whatever happens — an answer, a refusal, a provider error, a crash, a signal — the leg ends
with a status and reason on disk (``metadata.json``) and one ledger row. A leg never raises
into its wave except for cancellation, so one leg's failure never touches another.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from orchestrator.engine.context import LegContext
from orchestrator.engine.leg_files import LegFiles
from orchestrator.engine.leg_files import describe as _describe
from orchestrator.engine.record import ABORTED, COMPLETE, ERROR, REFUSED
from orchestrator.engine.tool_calls import (
    REJECTED_ARGUMENTS,  # noqa: F401 - plugins' old path
    run_call,
)
from orchestrator.errors import LegError, OrchError, ProviderError, Refusal
from orchestrator.intake import Admitted, Leaked, Policy, admit
from orchestrator.models.server import Server
from orchestrator.plugin_host.boundary import said
from orchestrator.plugin_host.hooks import HookRunner
from orchestrator.request import Request, Response, Usage
from orchestrator.security.secrets import scrub
from orchestrator.tools import Tool

# The last request at --max-steps carries no tools and this plain instruction.
FINAL_STEP_DIRECTIVE = (
    "You have reached the step limit for this task and no tools are available any more. "
    "Give your final answer now, from what you already know."
)

# A third party's leg_end after a signal: the process leaves within 2 s whatever it does.
ABORT_HOOK_S = 0.3

MAX_PLUGIN_ERRORS = 50  # plugin_errors kept on one leg

# called at each change of a leg's state; an observer with a ``text(ctx, text)`` method also
# gets each piece of the answer as it streams (events.LegEvents)
LegObserver = Callable[[LegContext], None]
LedgerAppend = Callable[[dict[str, Any]], Awaitable[str | None]]  # None, or the outbox
LegIndex = Callable[[Any], None]  # the leg's record, for the search index (engine/index_sink.py)


class Leg:
    """Runs one :class:`LegContext` to its end."""

    def __init__(self, ctx: LegContext, server: Server, hooks: HookRunner, *,
                 timeout_s: float, ledger: LedgerAppend | None = None,
                 observe: LegObserver | None = None, tag: str | None = None,
                 project_dir: str | None = None, run_id: str | None = None,
                 parent_wave_id: str | None = None, intake: Policy | None = None, journal=None,
                 index: LegIndex | None = None) -> None:
        self.ctx = ctx
        # what every request of this leg passes before the wire (orchestrator/intake/); the
        # wave's, kept off the context plugins see
        self.intake = intake or Policy()
        self.journal = journal  # the wave's request journal (account/journal.py), or None
        self.server = server
        self.hooks = hooks
        self.timeout_s = timeout_s
        self.ledger = ledger
        self.index = index
        self.observe = observe or (lambda ctx: None)
        self.tag = tag
        self.project_dir = project_dir
        self.run_id = run_id
        self.parent_wave_id = parent_wave_id  # a follow-up's: the wave it continues
        self._warned: set[str] = set()
        self.files = LegFiles(ctx)  # metadata.json, conversation.jsonl, io_errors
        self._prepared = False
        self._unprepared: BaseException | None = None  # a failure while preparing, for run()

    # -- records -------------------------------------------------------------------------
    @property
    def record(self):
        return self.ctx.record

    def save(self, progress: bool = False) -> None:
        """metadata.json at every change of state (a step's progress at most every
        PROGRESS_WRITE_S: engine/leg_files.py), then the observer. A failed write is recorded
        on the leg (``io_errors``), never raised."""
        self.files.save(progress)
        try:
            self.observe(self.ctx)
        except Exception as exc:  # the progress display must not end a leg
            from orchestrator.runtime import log

            log().warning("progress_error", leg_id=self.ctx.leg_id, error=_describe(exc))

    def io_error(self, what: str, exc: BaseException) -> None:
        """A file (or the ledger) failed this leg: said on the leg, once per kind."""
        self.files.io_error(what, exc)

    def log(self, kind: str, payload: dict[str, Any]) -> None:
        self.files.log(kind, payload)

    def plugin_error(self, plugin: str, hook: str, exc: BaseException) -> None:
        """A plugin raised: the leg goes on without its change; say so once per plugin."""
        error = said(exc)  # one line, capped and scrubbed (boundary.py)
        if len(self.record.plugin_errors) >= MAX_PLUGIN_ERRORS:
            return  # a plugin failing on every step of a long leg: the first ones say it
        self.record.plugin_errors.append({"plugin": plugin, "hook": hook, "error": error})
        if plugin not in self._warned:
            self._warned.add(plugin)
            from orchestrator.runtime import log

            log().warning("plugin_error", plugin=plugin, hook=hook, leg_id=self.ctx.leg_id,
                          error=error)

    # -- the loop ------------------------------------------------------------------------
    async def prepare(self) -> None:
        """``leg_start``, the roster and the system prompt: what the first request carries,
        known before the launch is checked (its claim counts them: docs/budgets.md). Once;
        a failure here is kept and ends the leg when it runs."""
        if self._prepared:
            return
        self._prepared = True
        self.files.make_dir()  # its hooks may write there
        try:
            with anyio.fail_after(self.timeout_s):
                await self.hooks.notify("leg_start", self.plugin_error, leg=self.ctx)
                await self._prepare()
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # noqa: BLE001 - raised again where the leg runs
            self._unprepared = exc

    async def run(self) -> None:
        record = self.record
        self.files.make_dir()
        record.start()
        self.save()
        try:
            await self.prepare()
            if self._unprepared is not None:
                raise self._unprepared
            with anyio.fail_after(self.timeout_s):
                await self._loop()
        except Refusal as refusal:
            record.finish(REFUSED, scrub(refusal.reason))
        except ProviderError as exc:
            record.finish(ERROR, f"{exc.reason}: {exc.message}")
        except LegError as exc:  # a plugin ended the leg after a response (OUTPUT_LENGTH)
            record.finish(ERROR, scrub(exc.reason))
        except TimeoutError:
            record.finish(ERROR, f"timeout: the leg ran past its {self.timeout_s:g} s limit")
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                record.finish(ABORTED, record.reason or "aborted: the wave was interrupted")
                await self._close()
            raise
        except OrchError as exc:
            record.finish(ERROR, f"config: {exc}")
        except Exception as exc:  # a crash in one leg stays in that leg
            record.finish(ERROR, scrub(f"internal: {type(exc).__name__}: {exc}"))
        await self._close()

    async def refuse(self, reason: str) -> None:
        """The wave refused to launch this leg (``before_launch``, e.g. the cost ceiling):
        nothing is sent; the leg ends ``refused`` with its files and ledger row."""
        self.files.make_dir()
        self.record.finish(REFUSED, scrub(reason))
        await self._close()

    async def aborted_before_start(self) -> None:
        """Interrupted while it was prepared or its launch waited: it ends ``aborted`` as a
        leg the signal caught would, with its files and ledger row (nothing was sent)."""
        if self.record.ended_at is not None:
            return
        self.files.make_dir()
        self.record.finish(ABORTED, "aborted: the wave was interrupted")
        await self._close()

    async def _close(self) -> None:
        """The durable end, in order of what matters: the ledger row (the money), then
        metadata.json, then the conversation. Each step's failure is recorded on the leg
        and the next step still runs; nothing here raises into the wave."""
        if self.record.ended_at is None:
            self.record.finish(self.record.status)
        if self.ctx.account is not None:
            self.ctx.account.ended(self.ctx)  # whatever it claimed is released
        await self._ledger_row()
        self.save()
        try:
            # after a signal the process must leave within 2 s: a third party gets less
            await self.hooks.notify("leg_end", self.plugin_error, leg=self.ctx,
                                    record=self.record,
                                    deadline_s=ABORT_HOOK_S if self.record.status == ABORTED
                                    else None)
        except Exception as exc:  # a plugin's LegError/OrchError after the end changes nothing
            self.plugin_error("?", "leg_end", exc)
        self.save()
        await self.files.close()

    async def unsent(self) -> None:
        """The wave stopped before this leg sent anything (a ``wave_start`` refusal: the
        local server could not start): its ledger row all the same, at $0, so ``orch runs``
        and ``orch spend`` count the same legs (nothing was billed: ``cost_source`` none).
        Not for a pre-flight refusal: a usage error writes nothing to the ledger."""
        await self._ledger_row()

    async def _ledger_row(self, *, in_flight: bool = False) -> None:
        """The leg's one ledger row, made at its first billed answer (``in_flight``: what is
        true if the process dies now) and moved forward in place by each next one and by the
        end. Each write returns once the row is in the ledger or fsync'd in the outbox, so a
        ``kill -9`` at any later point loses no billed request (docs/spend.md)."""
        if self.ledger is None:
            return
        try:
            row = self.record.ledger_row(tag=self.tag, project_dir=self.project_dir,
                                         run_id=self.run_id, in_flight=in_flight,
                                         parent_wave_id=self.parent_wave_id)
            outboxed = await self.ledger(row)
        except Exception as exc:
            self.io_error("ledger", exc)
            return
        if outboxed:  # safe, not yet in the ledger: the next command that opens it replays it
            self.record.extra["ledger_outbox"] = outboxed
        if not in_flight:
            self._indexed()

    def _indexed(self) -> None:
        """The leg's end, handed to the search index once its final row is durable (a
        queue append: the leg never waits for the index)."""
        if self.index is None:
            return
        try:
            self.index(self.record)
        except Exception as exc:
            self.io_error("search index", exc)

    async def _prepare(self) -> None:
        ctx = self.ctx
        offered: list[Tool] = []
        for plugin, tools in await self.hooks.collect("register_tools", self.plugin_error,
                                                      leg=ctx):
            for tool in tools:
                tool.plugin = tool.plugin or plugin
                tool.builtin = self.hooks.pm.is_builtin(plugin)
                offered.append(tool)
        roster = await self.hooks.pipeline("tool_roster", "tools", offered, self.plugin_error,
                                           leg=ctx)
        ctx.tools = {t.name: t for t in roster or []}
        if ctx.tools:
            ctx.set("roster", sorted(ctx.tools))
        ctx.system = await self.hooks.first("system_prompt", self.plugin_error, leg=ctx)
        messages: list[dict[str, Any]] = []
        if ctx.system:
            messages.append({"role": "system", "content": ctx.system})
        messages += [dict(m) for m in ctx.history]  # a later round: its own turns so far
        messages.append({"role": "user", "content": ctx.briefing})
        ctx.messages = messages

    async def _loop(self) -> None:
        ctx, record = self.ctx, self.record
        for step in range(1, ctx.max_steps + 1):
            ctx.step = record.steps = step
            final = step == ctx.max_steps and bool(ctx.tools)
            request = self._build(step, final)
            request = await self.hooks.pipeline("before_request", "request", request,
                                                self.plugin_error, leg=ctx)
            admitted = self._admit(request)
            try:
                response, claim = await self._send(admitted)
            except ProviderError as exc:
                admitted = self._admit(await self._tools_rejected(exc, request, step, final))
                response, claim = await self._send(admitted)
            request = admitted.request
            # before any hook can end the leg: billed is recorded
            self._bill(response, request, claim)
            await self._ledger_row(in_flight=True)  # durable before anything else happens
            response = await self.hooks.pipeline("after_response", "response", response,
                                                 self.plugin_error, leg=ctx, request=request)
            self.log("response", response.to_dict())
            record.finish_reason = response.finish_reason
            ctx.messages = [*request.messages, response.assistant_message()]
            # A request that offered no tools gets no tool run, whatever the model wrote back.
            results = await self._run_tools(response) if response.tool_calls and request.tools \
                else []
            await self.hooks.notify("step_end", self.plugin_error, leg=ctx,
                                    step={"step": step, "request": request,
                                          "response": response, "tool_results": results})
            if not response.tool_calls or not request.tools:
                record.answer = _strip_directive(response.text)
                if final:
                    ctx.set("stopped", "max_steps")
                if not record.answer:  # nothing to read: not complete (fanout and council)
                    record.finish(ERROR, empty_answer(ctx.model.name, response))
                    return
                record.finish(COMPLETE)
                return  # _close() saves this state next, with no await in between
            self.save(progress=True)
        ctx.set("stopped", "max_steps")
        record.answer = ""
        record.finish(COMPLETE)

    async def _tools_rejected(self, exc: ProviderError, request: Request, step: int,
                              final: bool) -> Request:
        """A provider that rejects ``tools`` (400 "does not support tools") is recorded in the
        catalog, and this step is rebuilt through the hooks once — the text tool protocol
        now applies (plugins/text_tools.py). Any other failure ends the leg as before.
        The rebuilt request is a new request on the wire: it passes every before_request
        hook once, built fresh, as ``attempt`` 2 so a hook that acts once per step gives the
        same change again (docs/plugins.md)."""
        from orchestrator.models.catalog import record_no_tools, tools_unsupported

        if (not request.tools or request.tool_format != "native" or not tools_unsupported(exc)
                or "tools_rejected" in self.record.extra):
            raise exc
        record_no_tools(self.ctx.model, exc.message)
        self.ctx.set("tools_rejected", exc.message)
        again = self._build(step, final).evolve(attempt=request.attempt + 1)
        return await self.hooks.pipeline("before_request", "request", again,
                                          self.plugin_error, leg=self.ctx)
        # admitted and logged by the caller; on the wire, it counts in requests (on_send)

    def _admit(self, request: Request) -> Admitted:
        """The request as it goes on the wire: every message through the intake (what it
        withheld counted on the leg, a leak recorded and the request not sent), then
        logged as sent."""
        try:
            admitted = admit(request, self.intake)
        except Leaked as leak:
            self.ctx.set("anonymity_leaks", leak.spellings)
            self.log("refused", {"reason": leak.reason})
            raise
        if admitted.withheld:
            self._count_withheld(admitted.withheld)
        if admitted.redacted:
            self.ctx.set("anonymity_redacted",
                         int(self.record.extra.get("anonymity_redacted") or 0)
                         + admitted.redacted)
        self.log("request", admitted.request.to_dict())
        return admitted

    def _count_withheld(self, rules: dict[str, int]) -> None:
        counts = dict(self.record.extra.get("credentials_withheld") or {})
        for rule, n in rules.items():
            counts[rule] = counts.get(rule, 0) + n
        self.ctx.set("credentials_withheld", counts)

    async def _send(self, admitted: Admitted) -> tuple[Response, float | None]:
        """The one way a request goes on the wire (as the intake admitted it): claimed on the
        run's account (the most it can cost), journaled durably with that claim, then sent.
        A ``kill -9`` while it is out leaves the journal line: "in flight at the kill: may
        be billed, at most $X"."""
        account = self.ctx.account
        claim = account.claim_request(self.ctx, admitted.request) if account is not None \
            else None
        if self.journal is not None:
            try:
                await anyio.to_thread.run_sync(self.journal.sent, self.ctx.leg_id,
                                               self.record.billed + 1, self.ctx.model.name,
                                               claim)
            except OSError as exc:  # said on the leg (exit 2); the request still goes
                self.io_error("request journal", exc)
        response = await self.server.complete(self.ctx.model, admitted,
                                              on_send=self._count_request,
                                              on_text=self._streamed if getattr(
                                                  self.observe, "wants_text", False) else None)
        return response, claim

    def _streamed(self, text: str) -> None:
        """A piece of the answer as it streams, to the observer's ``text`` (a run's
        :class:`~orchestrator.events.LegEvents`: a ``LegText`` event). A display that fails
        never ends the leg."""
        said = getattr(self.observe, "text", None)
        if said is None:
            return
        try:
            said(self.ctx, text)
        except Exception as exc:
            from orchestrator.runtime import log

            log().warning("progress_error", leg_id=self.ctx.leg_id, error=_describe(exc))

    def _count_request(self) -> None:
        """Every request that goes on the wire, gate retries included, answered or not."""
        self.record.requests += 1

    def _bill(self, response: Response, request: Request, claim: float | None = None) -> None:
        """The provider's usage and cost go on the record the moment they arrive; an answer
        whose cost could not be read from its usage holds its ``claim`` (the record's
        bound), and the run's account drops the claim. An answer with no counts at all is
        estimated for the eye (``LegRecord.estimate``), never billed: the ledger keeps what
        the provider said."""
        record = self.record
        record.billed += 1
        record.usage = record.usage + response.usage
        record.add_bound(response.cost_usd, claim, response.usage_note is not None)
        record.add_cost(response.cost_usd, response.cost_source)
        if self.ctx.account is not None:
            self.ctx.account.settle(self.ctx, response)
        if response.usage_note:
            self.ctx.notice(response.usage_note)
        if not (response.usage.input_tokens or response.usage.output_tokens):
            record.unreported += 1
            record.estimate = record.estimate + estimated_usage(self.ctx.model, request,
                                                                response)

    def _build(self, step: int, final: bool) -> Request:
        ctx = self.ctx
        messages = list(ctx.messages)
        tools = [t.schema() for t in ctx.tools.values()] or None
        if final:
            messages.append({"role": "user", "content": FINAL_STEP_DIRECTIVE})
            tools = None
        return Request(model=ctx.model.name, messages=messages, tools=tools,
                       params=dict(ctx.model.sampling), step=step)

    async def _run_tools(self, response: Response) -> list[dict[str, Any]]:
        results = []
        for call in response.tool_calls:
            content, withheld = await run_call(call, self.ctx.tools, self.intake)
            if withheld:
                self._count_withheld({rule: 1 for rule in withheld})
            message = {"role": "tool", "tool_call_id": call.id, "content": content}
            self.ctx.messages.append(message)
            results.append({"tool": call.name, "id": call.id, "content": content})
            self.log("tool", {"tool": call.name, "id": call.id, "arguments": call.arguments,
                              "result": content})
        return results


def empty_answer(model: str, response: Response) -> str:
    """The reason of a leg whose final answer has no text (and no tool call it could run)."""
    wrote = "only tool calls on a request that offered no tools" if response.tool_calls \
        else "neither text nor a tool call"
    return (f"empty_answer: {model} answered with {wrote} (finish_reason "
            f"{response.finish_reason or 'none'})")


def _strip_directive(text: str) -> str:
    """A parent or chair reading the answer must not take the stop directive as its own."""
    return (text or "").replace(FINAL_STEP_DIRECTIVE, "").strip()


def estimated_usage(model, request: Request, response: Response) -> Usage:
    """An answer's usage when its provider reported none: the request's messages and tools,
    and the answer's text and tool calls, estimated (models/estimate.py)."""
    from orchestrator.models.estimate import estimate_messages, estimate_text

    name = model.litellm_model
    answer = (response.text or "") + "".join(f"{c.name}{c.arguments}"
                                             for c in response.tool_calls)
    try:
        return Usage(estimate_messages(request.messages, request.tools, model=name),
                     estimate_text(answer, name) if answer else 0)
    except Exception:  # an estimate is for the eye: it never ends a leg
        return Usage()
