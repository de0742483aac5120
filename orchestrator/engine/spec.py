"""What a wave is asked to run (``WaveSpec``) and its id: plain data, light to import, so a
process that only prepares a run (the daemon's client) never loads the engine."""

from __future__ import annotations

import secrets as _random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.engine.record import LegRecord
from orchestrator.models.addressing import ResolvedModel


def new_wave_id() -> str:
    """Sortable by time, unique by 64 random bits: ids made in one second never collide."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + _random.token_hex(8)


@dataclass
class WaveSpec:
    """What the user asked for; the CLI builds it, the council builds its stages from it."""

    models: list[ResolvedModel]
    briefing: str
    runs_dir: Path
    timeout_s: float = 600.0
    max_steps: int = 20
    chair: ResolvedModel | None = None
    synthesis: str = "plain"  # the chair's mode: plain | structured (chair/modes.py)
    tag: str | None = None
    project_dir: str | None = None
    workspace: Path | None = None
    kind: str = "leg"
    retry_of: str | None = None
    parent_wave_id: str | None = None  # a follow-up's: the wave it continues (--continue)
    run_id: str | None = None
    wave_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    briefings: list[str] | None = None  # one per model, overriding ``briefing`` (council)
    # one per model: the turns before its briefing, its own conversation so far (deliberation)
    histories: list[list[dict[str, Any]]] | None = None
    prior: list[LegRecord] = field(default_factory=list)  # answers a retry's chair also reads
    later: list[ResolvedModel] = field(default_factory=list)  # run by later stages: pre-flight
    chair_only_if_new: bool = False  # a retry: the chair only when one of its legs completed
    # the legs' readers must not learn who wrote what (a council's judges, a deliberation's
    # later rounds): the intake redacts and scans every prompt of theirs (orchestrator/intake;
    # an ``intake.Anonymity``, not imported here: this module stays light)
    anonymity: Any = None
