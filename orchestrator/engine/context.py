"""What hooks see: the leg (``leg``) and the wave (``wave``) as plain, documented objects."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config import Config
from orchestrator.engine.record import LegRecord
from orchestrator.models.addressing import ResolvedModel
from orchestrator.tool_thread import abandoned_site
from orchestrator.tools import Tool


def capped(text: Any, limit: int) -> str:
    """A plugin's note on one line, at most ``limit`` characters."""
    from orchestrator.plugin_host.boundary import capped as cap

    return cap(text, limit)


@dataclass
class LegContext:
    """One leg, as plugins see it. Plugins read it, keep scratch in ``state[plugin]`` and
    record fields on the leg's ``metadata.json`` with :meth:`set`."""

    leg_id: str
    wave_id: str
    model: ResolvedModel
    briefing: str
    record: LegRecord
    config: Config
    dir: Path
    kind: str = "leg"
    max_steps: int = 20
    step: int = 0
    workspace: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)  # wave options (tools mode, budgets)
    tools: dict[str, Tool] = field(default_factory=dict)  # the roster in force for this leg
    messages: list[dict[str, Any]] = field(default_factory=list)  # the conversation so far
    state: dict[str, Any] = field(default_factory=dict)  # per-plugin scratch: state[name]
    system: str | None = None
    tier: str = "default"  # "minimal" or "default"; the tiers plugin decides at leg_start
    history: list[dict[str, Any]] = field(default_factory=list)  # turns before the briefing
    account: Any = None  # the run's Account (orchestrator/account): spend and open claims
    # the wave this leg is part of: leg.wave.shared(plugin) is the wave-wide state
    wave: WaveContext | None = field(default=None, repr=False, compare=False)

    @property
    def model_name(self) -> str:
        return self.model.name

    def __setattr__(self, name: str, value: Any) -> None:
        """What an abandoned plugin call sets on the leg (its messages, tools, tier) is
        discarded and noted: the leg moved on without it (record.LegRecord.late)."""
        if abandoned_site() is not None and self.record.late(f"leg.{name} = ..."):
            return
        object.__setattr__(self, name, value)

    def set(self, key: str, value: Any) -> None:
        """Record ``key`` on the leg's metadata.json (and the wave document); a field orch
        writes itself (``status``, ``reason``, ...) is not replaced."""
        if self.record.late(f"leg.set({key!r})"):
            return
        self.record.extra[key] = value

    def notice(self, text: str) -> None:
        """A one-line note on the leg's record (``notes``), said once by the face that
        shows the run (``orch fanout``: an ``orch:`` line on stderr, orchestrator/notices.py)."""
        if self.record.late("leg.notice(...)"):
            return
        text = capped(text, 1000)
        if text not in self.record.notes:
            self.record.notes.append(text)

    def plugin_config(self, plugin: str) -> dict[str, Any]:
        return self.config.plugin_config(plugin)


@dataclass
class WaveContext:
    """A wave, as plugins see it in ``wave_start`` / ``wave_end``."""

    wave_id: str
    legs: list[LegContext]
    config: Config
    dir: Path
    options: dict[str, Any] = field(default_factory=dict)
    chair: LegContext | None = None
    chair_model: ResolvedModel | None = None  # known from the start, for pre-flight checks
    later_models: list[ResolvedModel] = field(default_factory=list)  # a council's chair
    status: str = "running"
    notices: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)  # per-plugin, this wave's only
    account: Any = None  # the run's Account (orchestrator/account): spend and open claims
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if abandoned_site() is not None and self._late(f"wave.{name} = ..."):
            return
        object.__setattr__(self, name, value)

    def shared(self, plugin: str, make: Callable[[], Any] = dict) -> Any:
        """``state[plugin]``, made by ``make()`` the first time: the one place a plugin keeps
        what all the wave's legs share (a leg hook reaches it as ``leg.wave.shared(...)``).
        Made under a lock, since legs run their hooks at once; it lives as long as the wave,
        so nothing needs cleaning up in ``wave_end``. Guard what you change in it yourself
        (e.g. keep a ``threading.Lock`` in it)."""
        with self._lock:
            if plugin not in self.state:
                self.state[plugin] = make()
            return self.state[plugin]

    def notice(self, text: str) -> None:
        if self._late("wave.notice(...)"):
            return
        text = capped(text, 1000)
        if text not in self.notices:
            self.notices.append(text)

    def _late(self, what: str) -> bool:
        """An abandoned plugin call's write: discarded, said once per plugin."""
        site = abandoned_site()
        if site is None:
            return False
        said = f"plugin {site[0]}'s {site[1]} wrote {what[:80]} after orch stopped waiting " \
            "for it; discarded"
        if said not in self.notices:
            self.notices.append(said)
        return True

    def plugin_config(self, plugin: str) -> dict[str, Any]:
        """``plugin_config.<plugin>`` from this wave's config (``{}`` when absent)."""
        return self.config.plugin_config(plugin)
