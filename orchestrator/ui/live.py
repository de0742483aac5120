"""The runs ``orch ui`` started, while they run: each a prepared run (orchestrator/app) driven
by :func:`orchestrator.app.start.start` in a thread of its own, its events kept in order as
plain dicts (``Event.to_dict``) for the ask page to poll. The view never runs anything
itself: it hands a prepared run here, and reads the events back."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

KEPT = 20_000  # events a run keeps for its page; past it, streamed text is dropped (each
# leg's whole answer still comes with its end), never a leg's, stage's or the run's end


@dataclass
class Live:
    """One run started from the page: its events so far, and whether it is over."""

    run_id: str
    kind: str  # wave | deliberation | council | bench
    models: list[str]
    question: str
    parent: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event) -> None:
        data = event.to_dict()
        if data.get("type") == "ended":  # the document is the run's page, not the poll's
            data = {"type": "ended", "exit_code": data.get("exit_code")}
        with self.lock:
            if len(self.events) < KEPT or data.get("type") != "text":
                self.events.append(data)

    def since(self, after: int) -> tuple[list[dict[str, Any]], bool]:
        with self.lock:
            return list(self.events[max(0, after):]), self.done


class LiveRuns:
    """Every run this view started, by run id."""

    def __init__(self) -> None:
        self.runs: dict[str, Live] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str) -> Live | None:
        with self._lock:
            return self.runs.get(run_id)

    def start(self, prepared, *, question: str, parent: str | None = None) -> Live:
        """Run ``prepared`` (already through every check) in a thread; its :class:`Live`."""
        from orchestrator.app.start import start

        prepared.watch_text = True  # the page shows each leg's text as it arrives
        handle = start(prepared)  # nothing to run: an OrchError, before any thread
        live = Live(run_id=prepared.run_id, kind=prepared.kind,
                    models=[m.name for m in prepared.models], question=question, parent=parent)
        with self._lock:
            self.runs[live.run_id] = live

        def run() -> None:
            import anyio

            try:
                with prepared:
                    anyio.run(handle.drive, live.add)
            except Exception as exc:  # noqa: BLE001 - said on the page; drive() said Failed
                if not any(e.get("type") in ("ended", "failed") for e in live.events):
                    live.events.append({"type": "failed", "error": f"{type(exc).__name__}: {exc}",
                                        "exit_code": 1})
            finally:
                live.done = True

        threading.Thread(target=run, name=f"orch-ui-run-{live.run_id}", daemon=True).start()
        return live
