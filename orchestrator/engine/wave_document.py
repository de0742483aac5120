"""The wave document: what ``wave.json`` and ``orch fanout --json`` say of a wave (one shape,
two places), built from its legs' records — status, exit code, totals, the run's fields.

Apart from the running (engine/wave.py), so a reader that rebuilds a document (engine/
rebuild.py, a deliberation's rounds) builds the same shape without loading the engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import __version__, jobscope
from orchestrator.engine import leg_limits
from orchestrator.engine.degraded import Reporter, degradations, merge_reports
from orchestrator.engine.record import ABORTED, COMPLETE, RUNNING, LegRecord
from orchestrator.engine.spec import WaveSpec
from orchestrator.pids import process_started
from orchestrator.request import Usage

if TYPE_CHECKING:
    from orchestrator.models.server import Server

EXIT_COMPLETE, EXIT_ERROR, EXIT_PARTIAL = 0, 1, 2


def wave_status(records: list[LegRecord]) -> str:
    statuses = [r.status for r in records]
    if any(s in (RUNNING, "pending") for s in statuses):
        return "running"
    if statuses and all(s == COMPLETE for s in statuses):
        return "complete"
    if COMPLETE in statuses:
        return "partial"
    if ABORTED in statuses:
        return "aborted"
    return "error"


def exit_code(status: str, signum: int | None = None) -> int:
    if signum is not None:
        return 128 + signum
    return {"complete": EXIT_COMPLETE, "partial": EXIT_PARTIAL}.get(status, EXIT_ERROR)


def outcomes(options: dict[str, Any], records: list[LegRecord],
             synthesis: dict[str, Any] | None) -> dict[str, Any]:
    """What the wave document says beside the legs: the vote over their answers
    (``--aggregate vote``) and the chair's structured synthesis, when asked for."""
    out: dict[str, Any] = {}
    if options.get("aggregate") == "vote":
        from orchestrator.votes.aggregate import vote

        out["aggregate"] = vote(records)
    if synthesis is not None:
        out["synthesis"] = synthesis
    return out


def wave_fields(spec: WaveSpec, *, created: str, ended: str | None, records: list[LegRecord],
                synthesis: dict[str, Any] | None, notices: list[str],
                budget_refusals: list[dict[str, Any]], ledger_errors: list[Any],
                server: Server) -> dict[str, Any]:
    """What a running wave's document holds besides its legs: the run it belongs to (from
    its ``WaveSpec``), the process that runs it, what was said and refused, the shared
    server's counters, and the outcomes asked for."""
    return {
        "created_at": created,
        "ended_at": ended,
        "tag": spec.tag, "kind": spec.kind, "retry_of": spec.retry_of,
        "parent_wave_id": spec.parent_wave_id,
        "run_id": spec.run_id, "project_dir": spec.project_dir,
        "models": [m.name for m in spec.models],
        "chair_model": spec.chair.name if spec.chair else None,
        "options": spec.options,
        # what a retry and a follow-up keep unless given anew (engine/leg_limits.py)
        leg_limits.FIELD: leg_limits.record(spec.timeout_s, spec.max_steps),
        "orch_version": __version__, "pid": os.getpid(),
        "pid_started": process_started(os.getpid()),
        "client_pid": jobscope.client_pid(),
        "notices": notices,
        "budget_refusals": budget_refusals,
        "ledger_errors": ledger_errors,
        "server": {"requests": server.sent,
                   "peak_in_flight": server.peak_in_flight,
                   "rate_gate": server.holds.to_dict()},
        **outcomes(spec.options, [*spec.prior, *records], synthesis),
    }


def build_document(*, wave_id: str, status: str, legs: list[LegRecord],
                   chair: LegRecord | None, runs_dir: Path, signum: int | None = None,
                   extra: dict[str, Any] | None = None,
                   report: Reporter | None = None,
                   chair_repair: LegRecord | None = None) -> dict[str, Any]:
    """The wave document: ``wave.json`` and ``orch fanout --json`` (one shape, two places).
    ``report`` asks the plugins what the document means for the exit code (``wave_report``;
    engine/degraded.py). ``chair_repair``: a structured synthesis's repair prompt, billed
    with the wave, not counted in its status."""
    everything = legs + ([chair] if chair else []) + ([chair_repair] if chair_repair else [])
    usage = sum((r.shown_usage() for r in everything), Usage())
    known = [r.cost_usd for r in everything if r.cost_usd is not None]
    unread = [r for r in everything if r.unread]
    doc = {
        "wave_id": wave_id,
        "status": status,
        "exit_code": exit_code(status, signum),
        "legs": [r.to_dict() for r in legs],
        "chair": chair.to_dict() if chair else None,
        **({"chair_repair": chair_repair.to_dict()} if chair_repair else {}),
        "usage": usage.to_dict(),
        **({"usage_estimated": True} if any(r.unreported for r in everything) else {}),
        "cost_usd": round(sum(known), 8),
        # an answer whose cost could not be read is never exact, whatever was computed
        "cost_exact": len(known) == len(everything) and not unread,
        # the most it can have cost: each such answer at its claim (None: nothing bounds it)
        "cost_bound_usd": bound_of(everything) if unread else None,
        "runs_dir": str(runs_dir),
        "signal": signum,
    }
    doc.update(extra or {})
    reported = merge_reports(doc, report(doc) if report else [], lambda text: _note(doc, text))
    # A leg whose files or ledger row failed: the answers stand, the record is incomplete.
    doc["artifact_errors"] = [f"{r.leg_id}: {e}" for r in everything
                              for e in r.extra.get("io_errors") or []]
    if any(str(n).startswith("artifacts incomplete") for n in doc.get("notices") or []):
        doc["artifact_errors"].append("wave: " + next(
            n for n in doc["notices"] if str(n).startswith("artifacts incomplete")))
    # Budgets stop work without failing it: still exit 2, never a clean 0 (engine/degraded.py).
    doc["degraded"] = degradations(everything, doc) + reported
    synthesis = doc.get("synthesis")
    if isinstance(synthesis, dict) and synthesis.get("problem") and chair is not None \
            and chair.status == COMPLETE:  # asked for a structure, got prose: not clean
        doc["degraded"].append(f"the chair's structured synthesis could not be read "
                               f"({synthesis['problem']}): its prose stands")
    if (doc["degraded"] or doc["artifact_errors"]) and doc["exit_code"] == EXIT_COMPLETE:
        doc["exit_code"] = EXIT_PARTIAL
    return doc


def bound_of(records: list[LegRecord]) -> float | None:
    """The most ``records`` can have cost: each leg's bound, else its known cost; None when
    a leg's cost is unknown with nothing to bound it (no price)."""
    total = 0.0
    for r in records:
        if r.cost_bound_usd is not None:
            total += r.cost_bound_usd
        elif r.cost_usd is not None and not r.unread:
            total += r.cost_usd
        else:
            return None
    return round(total, 8)


def unread_notice(records: list[LegRecord]) -> str | None:
    """What the record says of answers whose cost could not be read (none: None)."""
    n = sum(r.unread for r in records)
    if not n:
        return None
    known = sum(r.cost_usd or 0.0 for r in records)
    bound = bound_of(records)
    most = (f"the total is at most ${bound:.4f} (an upper bound; ${known:.4f} was read)"
            if bound is not None else "with no price, nothing bounds the total")
    return (f"{n} answer(s) carried usage orch could not read: each is counted at the most "
            f"it could cost (the claim it was sent with); {most}")


def _note(doc: dict[str, Any], text: str) -> None:
    notices = doc.setdefault("notices", [])
    if text not in notices:
        notices.append(text)
