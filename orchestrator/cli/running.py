"""What ``orch fanout``, ``orch council run`` and ``orch bench`` do once their flags are a
request: prepare it here (this process, its directory, its environment), run it (on a warm
``orch serve`` when one fits, else in this process), render its events as they come and its
document at the end, and exit with its code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import click

from orchestrator.events import (
    Event,
    LegEnded,
    LegProgress,
    LegStarted,
    LegText,
    Log,
    Notice,
    RoundStarted,
    TrialEnded,
)
from orchestrator.notices import say


class Renderer:
    """Events on stderr: the legs' progress (a live table on a terminal, lines otherwise),
    the run's notices and rounds; ``trials``: a bench's trial lines. ``preview``: the run's
    output is one leg's answer, shown under the live table as it streams (stdout gets it at
    the end, as in a pipe: progress.LiveProgress)."""

    def __init__(self, *, quiet: bool, trials: Callable[[dict], None] | None = None,
                 display=None, preview: bool = False) -> None:
        from orchestrator.progress import make_progress

        self.quiet = quiet
        self.progress = display if display is not None else make_progress(quiet, preview)
        self.trials = trials

    @property
    def watches_text(self) -> bool:
        """It shows the legs' text as it arrives: the live table on a terminal (each leg's
        tokens so far, the one answer's text under it); then the legs stream, else they
        are read whole, which costs less CPU."""
        from orchestrator.progress import LiveProgress

        return isinstance(self.progress, LiveProgress)

    def __enter__(self) -> Renderer:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, event: Event) -> None:
        if isinstance(event, LegText):
            getattr(self.progress, "text", lambda *a: None)(event.leg_id, event.text)
        elif isinstance(event, LegStarted | LegProgress | LegEnded):
            from orchestrator.engine.record import LegRecord

            self.progress(SimpleNamespace(record=LegRecord.from_dict(event.leg)))
        elif isinstance(event, Notice):
            say(event.text)
        elif isinstance(event, RoundStarted) and not self.quiet:
            idle = f" ({event.idle} read only their own answer)" if event.idle else ""
            say(f"round {event.round}/{event.of}: {event.legs} legs{idle}")
        elif isinstance(event, Log):
            sys.stderr.write(event.line if event.line.endswith("\n") else event.line + "\n")
            sys.stderr.flush()
        elif isinstance(event, TrialEnded) and self.trials is not None:
            self.trials(event.row)


def run(prepared, *, renderer: Renderer, no_daemon: bool = False
        ) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """(document, exit code, extra) of the prepared run, its events rendered meanwhile. A
    failure the run says is an ``OrchError`` (exit code and line kept)."""
    if prepared.nothing is not None:
        say(prepared.nothing)
        sys.exit(0)
    prepared.watch_text = prepared.watch_text or renderer.watches_text
    if not no_daemon and prepared.unfit_for_daemon is None:
        outcome = _on_daemon(prepared, renderer)
        if outcome is not None:
            return outcome
    import anyio

    from orchestrator.app.start import start
    from orchestrator.app.warm import import_litellm_meanwhile

    if prepared.models:  # meanwhile the run starts: its first lines said
        import_litellm_meanwhile()
    handle = start(prepared, handle_signals=True)

    async def main():
        with renderer:
            return await handle.drive(renderer)

    doc = anyio.run(main)
    return doc, handle.exit_code if handle.exit_code is not None else 1, handle.extra


def _on_daemon(prepared, renderer: Renderer):
    """The run on a warm daemon: (document, exit code, extra); None: run it here."""
    from orchestrator.daemon.client import relay_for

    relay = relay_for(prepared, renderer, quiet=getattr(prepared.request, "quiet", False))
    if relay is None:
        return None
    with renderer:
        outcome = relay.run()
    if outcome.error is not None:
        from orchestrator.app.start import RunFailed

        raise RunFailed(outcome.error, outcome.exit_code)
    if not outcome.ended:  # it left before the run's end
        if outcome.last_words:
            click.echo(outcome.last_words, err=True)
        sys.exit(outcome.exit_code)
    return outcome.document, outcome.exit_code, outcome.extra
