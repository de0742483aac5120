"""A leg's record: what ``metadata.json`` holds and what the ledger row is made from."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from orchestrator.request import Usage
from orchestrator.tool_thread import abandoned_site

RUNNING, COMPLETE, ERROR, REFUSED, ABORTED, PENDING = (
    "running", "complete", "error", "refused", "aborted", "pending")


# A leg's cost source when its answers differ: the least trustworthy wins.
_SOURCE_RANK = {"free": 1, "priced": 2, "declared": 2, "reported": 2, "unknown": 3,
                "suspect": 4}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class LegRecord:
    leg_id: str
    wave_id: str
    model: str
    provider: str
    kind: str = "leg"  # leg | chair | seat | judge
    status: str = PENDING
    reason: str | None = None
    answer: str | None = None
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    cost_source: str = "none"  # until an answer arrives: nothing was billed
    steps: int = 0
    requests: int = 0
    billed: int = 0  # answers whose usage is on this record: the ledger row's ``seq``
    # answers whose provider reported no usage at all, and their estimated counts: shown
    # (``usage``, marked ``usage_estimated``), never billed (the ledger keeps ``usage``)
    unreported: int = 0
    estimate: Usage = field(default_factory=Usage)
    unread: int = 0  # answers whose cost could not be read from their usage
    # the most the leg can have cost once an answer's cost was not read: read costs plus
    # each such answer's claim (unknown is not zero); None while every cost was read, or
    # once such an answer had no claim (no price)
    cost_bound_usd: float | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float = 0.0
    variant: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    plugin_errors: list[dict[str, str]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # fields plugins record (doom_loop, ...)
    _t0: float = 0.0

    def __setattr__(self, name: str, value: Any) -> None:
        """A plugin call orch stopped waiting for (a hook past its deadline, still running
        on its thread) changes nothing here: the leg's status, reason and counts are the
        engine's, never flipped by a write that comes after the leg moved on."""
        if abandoned_site() is not None and self.late(f"leg.record.{name} = ..."):
            return
        object.__setattr__(self, name, value)

    def late(self, what: str) -> bool:
        """True when the code running now is an abandoned plugin call: ``what`` it writes is
        discarded, and noted once per plugin in ``plugin_errors`` (LateWrite)."""
        site = abandoned_site()
        if site is None:
            return False
        plugin, hook = site
        if not any(e.get("plugin") == plugin and str(e.get("error", "")).startswith("LateWrite")
                   for e in self.plugin_errors):
            self.plugin_errors.append({
                "plugin": plugin, "hook": hook,
                "error": f"LateWrite: {what[:80]} after orch stopped waiting for it "
                         "(PLUGIN_TIMEOUT); discarded"})
            from orchestrator.runtime import log

            log().warning("plugin_late_write", plugin=plugin, hook=hook, leg_id=self.leg_id,
                          write=what[:80])
        return True

    def start(self) -> None:
        self.status = RUNNING
        self.started_at = now_iso()
        self._t0 = time.monotonic()

    def finish(self, status: str, reason: str | None = None) -> None:
        self.status = status
        self.reason = reason
        self.ended_at = now_iso()
        if self._t0:
            self.duration_s = round(time.monotonic() - self._t0, 3)

    def add_bound(self, cost_usd: float | None, claim_usd: float | None, unread: bool) -> None:
        """Before :meth:`add_cost`: an answer whose cost could not be read from its usage
        (``unread``: none, or garbage) holds the worst case it was sent with (its claim, or
        the cost read from the clamped counts if that is more); read answers add their cost
        once a bound is kept."""
        if not unread:
            if self.cost_bound_usd is not None:
                self.cost_bound_usd += cost_usd or 0.0
            return
        self.unread += 1
        base = (self.cost_usd or 0.0) if self.unread == 1 else self.cost_bound_usd
        if base is None or claim_usd is None:
            self.cost_bound_usd = None  # no price: nothing bounds it (the total is a floor)
            return
        self.cost_bound_usd = base + max(claim_usd, cost_usd or 0.0)

    def add_cost(self, cost_usd: float | None, source: str) -> None:
        """Accumulate an answer's cost; once any answer's cost is unknown the leg's total is
        unknown, and once any answer's usage was ``suspect`` the leg's is too.
        (``requests`` counts what was sent, answered or not: see Leg._loop.)"""
        if self.cost_source == "none":
            self.cost_usd = cost_usd
            self.cost_source = "unknown" if cost_usd is None and source != "suspect" \
                else source
            return
        self.cost_usd = None if cost_usd is None or self.cost_usd is None \
            else self.cost_usd + cost_usd
        if cost_usd is None and source != "suspect":
            source = "unknown"
        if _SOURCE_RANK.get(source, 0) > _SOURCE_RANK.get(self.cost_source, 0):
            self.cost_source = source

    def shown_usage(self) -> Usage:
        """What the leg used as far as anyone can say: the provider's counts, plus the
        estimate of each answer that reported none."""
        return self.usage + self.estimate if self.unreported else self.usage

    def to_dict(self) -> dict[str, Any]:
        """The wave-document shape (``orch fanout --json``), plus the leg's extras. A leg
        whose provider reported no usage for some answer shows the estimate in ``usage``,
        marked ``usage_estimated``; ``usage_reported`` keeps the provider's own counts."""
        doc = {
            "leg_id": self.leg_id, "wave_id": self.wave_id, "kind": self.kind,
            "model": self.model, "provider": self.provider, "status": self.status,
            "reason": self.reason, "answer": self.answer,
            "usage": self.shown_usage().to_dict(),
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 8),
            "cost_source": self.cost_source, "duration_s": self.duration_s,
            "finish_reason": self.finish_reason, "steps": self.steps, "requests": self.requests,
            "billed": self.billed,
            "cost_bound_usd": None if self.cost_bound_usd is None
            else round(self.cost_bound_usd, 8),
            "unread": self.unread,
            "started_at": self.started_at, "ended_at": self.ended_at,
            "variant": self.variant, "sampling": self.sampling, "notes": self.notes,
            "plugin_errors": self.plugin_errors,
        }
        if self.unreported:
            doc.update(usage_estimated=True, usage_reported=self.usage.to_dict(),
                       unreported=self.unreported)
        for key, value in self.extra.items():  # a plugin's field never replaces orch's own
            doc.setdefault(key, value)
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LegRecord:
        known = {f for f in cls.__dataclass_fields__ if not f.startswith("_")}
        shown_keys = ("usage_estimated", "usage_reported")
        kwargs = {k: v for k, v in doc.items()
                  if k in known and k not in ("usage", "extra", "estimate")}
        rec = cls(**kwargs)
        shown = Usage(**(doc.get("usage") or {}))
        rec.usage = Usage(**(doc.get("usage_reported") or doc.get("usage") or {}))
        if doc.get("usage_estimated"):
            rec.estimate = Usage(*(a - b for a, b in zip(
                shown.to_dict().values(), rec.usage.to_dict().values(), strict=True)))
        rec.extra = {k: v for k, v in doc.items() if k not in known and k not in shown_keys}
        return rec

    def ledger_row(self, *, tag: str | None, project_dir: str | None,
                   run_id: str | None = None, in_flight: bool = False,
                   parent_wave_id: str | None = None) -> dict[str, Any]:
        """The leg's one ledger row as of now. ``in_flight``: written while the leg runs,
        right after an answer was billed, saying what is true if the process dies now
        (aborted, with what was billed so far); the leg's end replaces it in place."""
        from orchestrator.ledger.in_flight import IN_FLIGHT

        duration = self.duration_s
        if in_flight and self._t0:
            duration = round(time.monotonic() - self._t0, 3)
        return {
            "wave_id": self.wave_id, "leg_id": self.leg_id, "kind": self.kind,
            "model": self.model, "provider": self.provider,
            "status": ABORTED if in_flight else self.status,
            "reason": IN_FLIGHT if in_flight else self.reason,
            "finish_reason": self.finish_reason,
            **self.usage.to_dict(), "cost_usd": self.cost_usd, "cost_source": self.cost_source,
            "duration_s": duration, "tag": tag, "project_dir": project_dir,
            "run_id": run_id, "parent_wave_id": parent_wave_id, "seq": self.billed,
            "cost_bound_usd": None if self.cost_bound_usd is None
            else round(self.cost_bound_usd, 10),
        }
