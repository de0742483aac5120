"""The hook points around every model request. docs/plugins.md is the reference for authors.

Request-path hooks (``tool_roster``, ``before_request``, ``after_response``) form a pipeline:
each implementation gets the value the previous one returned and returns a replacement or
``None`` (no change). An implementation that raises is skipped — the leg goes on without its
change and the error is recorded on the leg — except the deliberate ones:
:class:`orchestrator.errors.Refusal` ends the leg ``refused`` before anything is sent, and
``LegError`` / ``OrchError`` end it ``error``.
Implementations run in pluggy's order (``tryfirst``, plain, ``trylast``; built-ins are
``trylast``); ``wrapper=True`` implementations surround the chain and see its result.
Every call crosses the boundary in ``orchestrator.plugin_host.hooks``: a third party's synchronous code
runs on a worker thread within a deadline, each answer is checked against the type named
below, and a plugin may declare ``FAIL_CLOSED`` (docs/plugins.md, Isolation).
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("orch")
hookimpl = pluggy.HookimplMarker("orch")


@hookspec
def register_commands(cli):
    """Add click commands to the ``orch`` group. Called once at start-up: keep it cheap.
    A plugin that raises here, or names a built-in command, has its commands skipped."""


@hookspec
def register_options(command):
    """Declare options for ``command`` ("fanout", "council_run" or "bench"): return a list of
    :class:`orchestrator.options.Option`. Each becomes a flag of ``orch fanout`` / ``orch
    council run`` and an argument of the MCP tool; its value reaches the plugin as
    ``leg.options[option.key]`` (and ``wave.options``). ``orch bench`` renders only the run
    ceilings (``Option.run_ceiling``). Keep it cheap: ``--help`` calls it."""


@hookspec(firstresult=True)
def resolve_model(spec, config):
    """Resolve a model name orch does not know (e.g. ``local/...``) to a ResolvedModel.
    First non-None answer wins. May not do I/O."""


@hookspec(firstresult=True)
def default_models(config):
    """The models a wave runs when the user chose none and ``defaults.models`` is unset:
    ``{"models": [...], "notice": "one line said on stderr"}``, or None to pass."""


@hookspec
def register_tools(leg):
    """Return a list of :class:`orchestrator.tools.Tool` this plugin offers to ``leg``.
    Every answer is used (collect). Synchronous: no awaitables."""


@hookspec(firstresult=True)
def system_prompt(leg):
    """Return the system prompt for ``leg`` (a str), or None to pass. First answer wins.
    Synchronous: no awaitables."""


@hookspec
def tool_roster(leg, tools):
    """Pipeline. Return the tools ``leg`` may use (a filtered or extended list) or None.
    May return an awaitable."""


@hookspec
def before_request(leg, request):
    """Pipeline. Return a replacement :class:`Request` (``request.evolve(...)``) or None.
    Raise ``Refusal(code, message)`` to refuse: nothing is sent. May return an awaitable."""


@hookspec
def after_response(leg, request, response):
    """Pipeline. Return a replacement :class:`Response` (e.g. repaired tool calls) or None.
    May return an awaitable."""


@hookspec
def step_end(leg, step):
    """Observer: a step (request, response, tool results) finished. May return an awaitable."""


@hookspec
def leg_start(leg):
    """Observer: ``leg`` is about to send its first request. May return an awaitable."""


@hookspec
def leg_end(leg, record):
    """Observer: ``leg`` ended; ``record`` is its final LegRecord. May return an awaitable.
    Nothing raised here changes the leg (Refusal and OrchError too are only recorded)."""


@hookspec
def wave_start(wave):
    """Observer: a wave is about to launch its legs (e.g. start a local server).
    May return an awaitable; raising OrchError stops the wave before any spend."""


@hookspec
def before_launch(wave, leg):
    """Before the wave starts ``leg`` (each leg, a retry's legs, the chair). Raise
    ``Refusal(code, message)`` to refuse the launch: the leg ends ``refused`` without a
    request, the wave records it in ``budget_refusals`` and exits 2. Must not await:
    the check and what it claims happen at once (the cost ceiling relies on it)."""


@hookspec
def wave_end(wave):
    """Observer: every leg (and the chair) of ``wave`` ended. May return an awaitable.
    Nothing raised here changes the wave: failures become wave notices."""


@hookspec
def wave_report(wave, doc):
    """What this plugin makes of the wave's document, for its exit code: return
    ``{"degraded": ["one-line reason", ...], "fields": {"name": value}}`` (either key may be
    left out) or None. Each reason is listed in the document's ``degraded`` and makes the
    wave exit 2, never a clean 0; each field is set on the document (a field the engine
    writes itself is refused). The engine knows no plugin's budget: what work a plugin
    stopped or a limit it saw passed means is the plugin's to say, here. Called whenever the
    document is built (a wave's start and end; ``wave`` is None for a deliberation's document
    and when ``orch status`` rebuilds a killed wave), so answer from ``doc`` (read-only),
    synchronously. A raise or a wrong answer is isolated: a wave notice, the wave goes on
    (for a ``FAIL_CLOSED`` plugin also a ``degraded`` reason: its verdict is unknown)."""
