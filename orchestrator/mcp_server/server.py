"""`orch mcp`'s server: the MCP SDK's low-level server on stdio; one tool call is one job.

- The wire has stdout to itself: before serving, fd 1 (and ``sys.stdout``) point at stderr
  and fd 0 at /dev/null, and the wire lives on private duplicates, so litellm's prints, a
  plugin's ``print``, rich, logs and child processes cannot corrupt a frame.
- A cancelled call (or a client that goes away) interrupts its wave as Ctrl-C would, and the
  call waits, shielded, for the wave's own finalisation: wave.json, ledger rows, leg files.
- SIGINT/SIGTERM to `orch mcp` interrupts every running job with that signal, lets each
  answer its call, and exits 130/143.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from orchestrator.errors import OrchError
from orchestrator.security.secrets import scrub, scrub_values

MAX_LINE = 1000  # a one-line reason, not a document
FLUSH_GRACE_S = 0.5  # after a signal: time for the last answers to reach the wire
INSTRUCTIONS = (
    "orch runs one prompt on several LLMs at once (fanout), or a multi-model code review "
    "(council_run), and records every call's tokens and dollars in a local ledger (spend) "
    "and its files on disk (runs). fanout and council_run spend money on every model they "
    "call{cap}. spend and runs are free.")


def instructions(declared: dict[str, list]) -> str:
    """INSTRUCTIONS, naming the run ceiling argument (a plugin's: cost_ceiling's) if any."""
    from orchestrator.mcp_server.schemas import ceiling_arguments

    caps = list(dict.fromkeys(key for options in declared.values()
                              for key in ceiling_arguments(options)))
    return INSTRUCTIONS.format(cap=f": pass {' or '.join(caps)} to cap it" if caps else "")


def plugin_off(name: str, tool: dict[str, Any], args: Any) -> str | None:
    """An argument the schema lacks because the plugin that declares it is not loaded
    (``max_cost`` with cost_ceiling disabled): refused in one line naming the plugin and the
    fix, as the CLI refuses such a budget, instead of as an unknown argument."""
    if not isinstance(args, dict):
        return None
    unknown = {k: v for k, v in args.items() if k not in tool["inputSchema"]["properties"]}
    if not unknown or name not in ("fanout", "council_run"):
        return None
    from orchestrator import runtime
    from orchestrator.budget_guards import GuardOff, require_guards

    try:
        require_guards(unknown, runtime.plugin_manager(), None, source=lambda key: key,
                       command=name)
    except GuardOff as exc:
        return f"{name}: {exc}"
    return None


def one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return scrub(line if len(line) <= MAX_LINE else line[:MAX_LINE - 1] + "…")


def invalid(tool: dict[str, Any], args: Any) -> str | None:
    """The first way ``args`` breaks the tool's schema, in one line, else None."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(tool["inputSchema"])
    error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if error is None:
        return _not_finite(args)
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    message, shown = error.message, repr(error.instance)
    if len(shown) > 60:  # a 5 MB prompt or 500 models: say what it is, not all of it
        value = error.instance
        unit = "characters" if isinstance(value, str) else "entries"
        size = f" of {len(value)} {unit}" if hasattr(value, "__len__") else ""
        message = message.replace(shown, f"the {type(value).__name__}{size}")
    message = message if len(message) <= 200 else message[:199] + "…"
    return f"{tool['name']}: {where}: {message}; see the tool's input schema"


def _not_finite(args: dict[str, Any]) -> str | None:
    """A JSON number the schema lets through but no bound holds (``1e999`` parses as inf):
    refused by the check every face shares (orchestrator/option_values.py)."""
    from orchestrator.option_values import BadValue, number

    for key, value in args.items():
        if isinstance(value, float):
            try:
                number(value)
            except BadValue as exc:
                return f"{key}: {exc.problem}"
    return None


class Jobs:
    """The jobs running now, so a signal to `orch mcp` can stop each as it would a wave."""

    def __init__(self) -> None:
        self.running: set[Job] = set()
        self.signum: int | None = None
        self.idle = anyio.Event()
        self.idle.set()

    def add(self, job: Job) -> None:
        self.running.add(job)
        self.idle = anyio.Event() if self.idle.is_set() else self.idle

    def remove(self, job: Job) -> None:
        self.running.discard(job)
        if not self.running:
            self.idle.set()

    async def watch_signals(self, serving: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                if self.signum is not None:
                    os._exit(128 + signum)  # a second signal: leave at once
                self.signum = signum
                for job in list(self.running):
                    job.interrupt(signum)
                await self.idle.wait()
                await anyio.sleep(FLUSH_GRACE_S)
                serving.cancel()


class Job:
    """One tool call: progress out as MCP notifications, stopped like Ctrl-C when cancelled.
    ``watches``: the client asked for progress (a ``progressToken`` in the call's ``_meta``):
    its legs stream, and their text goes out with the progress (tools.LegProgress)."""

    def __init__(self, session, watches: bool = False) -> None:
        self.session = session
        self.watches = watches
        self._send, self._receive = anyio.create_memory_object_stream[tuple](math.inf)
        self._interrupt: Callable[[int], None] | None = None
        self._signum: int | None = None

    def progress(self, value: float, total: float | None, message: str) -> None:
        try:
            self._send.send_nowait((value, total, scrub(message)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def interrupt(self, signum: int) -> None:
        self._signum = signum
        if self._interrupt is not None:
            self._interrupt(signum)

    async def _pump(self) -> None:
        async with self._receive:
            async for value, total, message in self._receive:
                try:
                    await self.session.report_progress(value, total, message)
                except Exception:  # a client that went away: the run goes on
                    from orchestrator.runtime import log

                    log().debug("mcp_progress_failed", exc_info=True)

    async def run(self, run: Callable[[], Awaitable[dict[str, Any]]],
                  interrupt: Callable[[int], None]) -> dict[str, Any]:
        """``run()`` to its end, shielded: a cancel interrupts it with SIGINT (a signal to
        `orch mcp` with that signal) and waits for its finalisation before re-raising."""
        self._interrupt = interrupt
        if self._signum is not None:
            interrupt(self._signum)
        outcome: list[Any] = []
        done = anyio.Event()

        async def body() -> None:
            with anyio.CancelScope(shield=True):
                try:
                    outcome.append(await run())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                    outcome.append(exc)
                finally:
                    self._send.close()
                    done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump)
            tg.start_soon(body)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                interrupt(signal.SIGINT)
                with anyio.CancelScope(shield=True):
                    await done.wait()
                from orchestrator.runtime import log

                doc = outcome[0] if isinstance(outcome[0], dict) else {}
                log().warning("mcp_call_cancelled", status=doc.get("status"),
                              id=doc.get("wave_id") or doc.get("run_id"))
                raise
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]


def _text_result(doc: dict[str, Any] | None, error: str | None):
    import mcp_types as types

    parts = [] if error is None else [types.TextContent(type="text", text=error)]
    if doc is not None:
        parts.append(types.TextContent(type="text", text=json.dumps(doc, indent=1,
                                                                   default=str)))
    return types.CallToolResult(content=parts, structured_content=doc,
                                is_error=error is not None)


def tool_error(text: str):
    return _text_result(None, one_line(text))


async def call_tool(name: str, args: Any, session, jobs: Jobs, tools=None, words=None,
                    watches: bool = False):
    """A tool call to its result: the document, or an MCP tool error with a one-line reason.
    ``tools``: the schemas as listed (with the plugins' options) and ``words``: {tool:
    {flag: argument}} of those options (default for both: read the declarations now).
    ``watches``: the client asked for progress notifications (see :class:`Job`)."""
    import click

    from orchestrator.mcp_server.schemas import (
        option_arguments,
        plugin_declarations,
        with_options,
    )
    from orchestrator.mcp_server.tools import JOBS, failure
    from orchestrator.mcp_server.wording import in_tool_words

    if tools is None or words is None:
        declared = plugin_declarations()
        tools = with_options(declared) if tools is None else tools
        words = option_arguments(declared) if words is None else words
    declared_words = words.get(name, {})
    tool = tools.get(name)
    if tool is None:
        return tool_error(f"no tool {name!r}; the tools are {', '.join(tools)}")
    problem = plugin_off(name, tool, args) or invalid(tool, args)
    if problem:
        return tool_error(problem)
    from orchestrator import runtime

    runtime.config.cache_clear()  # a long-lived server reads config.json as each call starts
    if jobs.signum is not None:
        return tool_error(f"orch mcp is stopping (signal {jobs.signum}); start it again")
    job = Job(session, watches)
    jobs.add(job)
    try:
        doc = await JOBS[name](args, job)
    except OrchError as exc:  # the CLI's shared checks: said with this tool's arguments
        return tool_error(f"{name}: {in_tool_words(name, str(exc), args, declared_words)}")
    except click.ClickException as exc:
        return tool_error(f"{name}: "
                          f"{in_tool_words(name, exc.format_message(), args, declared_words)}")
    except Exception as exc:  # a bug, not bad input: still one line, the trace in the log
        from orchestrator.runtime import log

        log().warning("mcp_internal_error", tool=name, exc_info=True)
        return tool_error(f"{name}: internal error: {type(exc).__name__}: {exc} (the "
                          "traceback is in orch mcp's log on stderr; please report it)")
    finally:
        jobs.remove(job)
    reason = failure(doc)
    return _text_result(doc, one_line(in_tool_words(name, reason, args, declared_words))
                        if reason else None)


def asks_progress(params) -> bool:
    """Whether a call's ``_meta`` holds a ``progressToken`` (the client shows progress)."""
    meta = getattr(params, "meta", None) or {}
    try:
        return meta.get("progress_token", meta.get("progressToken")) is not None
    except AttributeError:
        return False


def build(jobs: Jobs):
    """The low-level MCP server: the four tools and their handler."""
    import mcp_types as types
    from mcp.server import Server

    from orchestrator import __version__
    from orchestrator.mcp_server.schemas import (
        READ_ONLY,
        option_arguments,
        plugin_declarations,
        plugin_tools,
    )

    declared = plugin_declarations()  # fixed for this server's life, like its plugins
    TOOLS = plugin_tools(declared)  # noqa: N806
    WORDS = option_arguments(declared)  # noqa: N806
    listed = [types.Tool(name=t["name"], title=t["title"], description=t["description"],
                         input_schema=t["inputSchema"],
                         annotations=types.ToolAnnotations(
                             title=t["title"], read_only_hint=t["name"] in READ_ONLY,
                             destructive_hint=False, idempotent_hint=t["name"] in READ_ONLY,
                             open_world_hint=t["name"] not in READ_ONLY))
              for t in TOOLS.values()]

    async def on_list_tools(ctx, params):
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(ctx, params):
        return await call_tool(params.name, params.arguments or {}, ctx.session, jobs, TOOLS,
                               WORDS, watches=asks_progress(params))

    return Server("orch", version=__version__, instructions=instructions(declared),
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool)


class _Lines:
    """The wire's input, line by line; a cancelled read is abandoned (its thread blocks on
    a pipe no one will write to again), so shutting down never waits on the client."""

    def __init__(self, stream: io.TextIOBase) -> None:
        self.stream = stream

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        line = await anyio.to_thread.run_sync(self.stream.readline, abandon_on_cancel=True)
        if not line:
            raise StopAsyncIteration
        return line


class _Wire:
    """The wire's output: registered key values masked in every frame (the last net, as the
    CLI's scrubbed stdout), then written and flushed. A client that went away (its end of
    the pipe closed) reads nothing more: later frames are dropped, not an error that would
    end `orch mcp` with 1 while its calls finalise (stdin's end then stops it with 0)."""

    def __init__(self, raw: io.TextIOBase) -> None:
        self.raw = raw
        self.gone = False

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._write, scrub_values(text))

    def _write(self, text: str) -> None:
        if self.gone:
            return
        try:
            self.raw.write(text)
            self.raw.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):  # ValueError: closed
            self.gone = True

    async def flush(self) -> None:
        return None


def claim_stdio() -> tuple[io.TextIOBase, io.TextIOBase]:
    """The wire on private descriptors; fd 1 and ``sys.stdout`` now write to stderr, fd 0
    reads /dev/null (a child process cannot eat a frame)."""
    import fcntl

    for stream in (sys.stdout, sys.__stdout__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    reader = io.TextIOWrapper(os.fdopen(wire_in, "rb"), encoding="utf-8", errors="replace")
    writer = io.TextIOWrapper(os.fdopen(wire_out, "wb"), encoding="utf-8", newline="\n")
    return reader, writer


async def _serve(reader: io.TextIOBase, writer: io.TextIOBase) -> int:
    from mcp.server.stdio import stdio_server

    jobs = Jobs()
    server = build(jobs)
    async with stdio_server(stdin=_Lines(reader), stdout=_Wire(writer)) as (read, write):
        async with anyio.create_task_group() as tg:
            tg.start_soon(jobs.watch_signals, tg.cancel_scope)
            await server.run(read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()
    return 128 + jobs.signum if jobs.signum else 0


def serve() -> int:
    """Serve MCP on stdio until the client closes it (0) or a signal stops it (128+N)."""
    from orchestrator import runtime
    from orchestrator.app.warm import import_litellm_quietly

    if sys.stdin.isatty():  # a person typed `orch mcp`: say what it is waiting for
        print("orch mcp: serving MCP on stdin/stdout for a client such as Claude Desktop, "
              "Claude Code or Cursor (docs/mcp.md); Ctrl-C stops it", file=sys.stderr)
    reader, writer = claim_stdio()
    runtime.configure_logging()  # before the SDK's: its basicConfig then adds nothing
    import_litellm_quietly()  # warm before the first call: the point of a long-lived server
    runtime.plugin_manager()
    return anyio.run(_serve, reader, writer)
