"""What a run tells whoever started it while it runs: typed events, plain data.

A run (a wave, a deliberation, a council, a bench) reports to one ``Sink``: each leg as it
starts, moves and ends (with its cost), each council stage and deliberation round as it
starts and ends, each bench trial as it is graded, the notices and log lines a face says,
and at the end the document. A face renders them (``orch``'s progress on stderr, `orch
mcp`'s progress notifications); the daemon sends them to its client as they come
(``to_dict``/``from_dict``, JSON). A leg's streamed text is :class:`LegText` (``type``
``"text"``); a new kind of event is one more class here, and a renderer that does not know a
type skips it.
Standard library only: the daemon's client reads them without loading the engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Protocol

LEG_FIELDS = ("leg_id", "wave_id", "kind", "model", "provider", "status", "reason", "usage", "cost_usd",
              "cost_source", "duration_s", "steps", "requests")


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class LegStarted(Event):
    """A leg (or a chair, a seat, a judge) began; ``leg``: its snapshot (LEG_FIELDS)."""

    type: ClassVar[str] = "leg_started"
    leg: dict[str, Any]


@dataclass(frozen=True)
class LegProgress(Event):
    """A running leg moved on (a step ended, an answer was billed)."""

    type: ClassVar[str] = "leg_progress"
    leg: dict[str, Any]


@dataclass(frozen=True)
class LegEnded(Event):
    """A leg ended: its status, reason, usage and what it cost (``cost_usd``)."""

    type: ClassVar[str] = "leg_ended"
    leg: dict[str, Any]


@dataclass(frozen=True)
class LegText(Event):
    """A piece of a leg's answer as it streams (``text``: the new characters only)."""

    type: ClassVar[str] = "text"
    leg_id: str
    text: str


@dataclass(frozen=True)
class StageStarted(Event):
    """A council stage (reviews, judges, the chair...) began as one wave."""

    type: ClassVar[str] = "stage_started"
    name: str
    kind: str
    models: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StageEnded(Event):
    type: ClassVar[str] = "stage_ended"
    name: str
    status: str
    cost_usd: float | None = None


@dataclass(frozen=True)
class RoundStarted(Event):
    """A deliberation's round ``round`` of at most ``of`` began with ``legs`` legs asked,
    ``idle`` more reading only their own answer (nothing new to read)."""

    type: ClassVar[str] = "round_started"
    round: int
    of: int
    legs: int
    idle: int = 0


@dataclass(frozen=True)
class RoundEnded(Event):
    type: ClassVar[str] = "round_ended"
    round: int
    changed: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True)
class TrialEnded(Event):
    """A bench trial was graded (or excluded): its results row."""

    type: ClassVar[str] = "trial_ended"
    row: dict[str, Any]


@dataclass(frozen=True)
class Notice(Event):
    """A line the run says to its user (``orch: TEXT`` on stderr)."""

    type: ClassVar[str] = "notice"
    text: str


@dataclass(frozen=True)
class Log(Event):
    """A log record, already rendered as its reader asked (a line, or a JSON line)."""

    type: ClassVar[str] = "log"
    line: str


@dataclass(frozen=True)
class Ended(Event):
    """The run is over: its document (wave.json, run.json, the bench results) and exit
    code; ``extra``: what a face prints besides (a council's tally and chair synthesis, a
    bench's results and report paths)."""

    type: ClassVar[str] = "ended"
    document: dict[str, Any]
    exit_code: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Failed(Event):
    """The run could not go on (a wave_start refusal, a stale ledger): one line, its exit
    code; what it wrote says the rest."""

    type: ClassVar[str] = "failed"
    error: str
    exit_code: int = 1


TYPES: dict[str, type[Event]] = {cls.type: cls for cls in (
    LegStarted, LegProgress, LegEnded, LegText, StageStarted, StageEnded, RoundStarted, RoundEnded,
    TrialEnded, Notice, Log, Ended, Failed)}


def from_dict(data: dict[str, Any]) -> Event | None:
    """The event a dict describes; None for a type this orch does not know (newer)."""
    cls = TYPES.get(str(data.get("type")))
    if cls is None:
        return None
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def leg_snapshot(record) -> dict[str, Any]:
    """A leg's record as an event carries it: what progress shows, no answer text."""
    doc = record.to_dict() if hasattr(record, "to_dict") else dict(record)
    return {k: doc.get(k) for k in LEG_FIELDS}


class Sink(Protocol):
    """Where a run's events go: ``emit`` each as it happens (on the run's event loop
    thread, or from a worker thread: a sink must take both)."""

    def emit(self, event: Event) -> None: ...


class NoSink:
    def emit(self, event: Event) -> None:
        return None


class LegEvents:
    """The engine's leg observer (``observe(ctx)``, called at every change of a leg's
    state) as events on ``sink``: started the first time a leg runs, ended when it has a
    final status, progress in between when its cost or steps moved."""

    ENDED = ("complete", "error", "aborted", "refused")

    def __init__(self, sink: Sink, *, text: bool = False) -> None:
        self.sink = sink
        self.wants_text = text  # someone shows the text as it arrives: legs stream it
        self._said: dict[str, tuple] = {}

    def __call__(self, ctx) -> None:
        snap = leg_snapshot(ctx.record)
        status = snap["status"]
        if status == "pending":
            return
        key = (status, snap["cost_usd"], snap["steps"], (snap["usage"] or {}).get(
            "output_tokens"))
        before = self._said.get(snap["leg_id"])
        if before == key:
            return
        self._said[snap["leg_id"]] = key
        if status in self.ENDED:
            self.sink.emit(LegEnded(snap))
        elif before is None:
            self.sink.emit(LegStarted(snap))
        else:
            self.sink.emit(LegProgress(snap))

    def text(self, ctx, text: str) -> None:
        """A piece of ``ctx``'s answer as it streams (the engine's ``on_text``)."""
        self.sink.emit(LegText(ctx.record.leg_id, text))
