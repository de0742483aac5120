"""Bringing a dead council's ``run.json`` up to its stages' durable record.

A council writes ``run.json`` at its start and its end; each stage is a wave whose legs'
ledger rows are written per billed answer. So when the process is killed mid-run, ``run.json``
says ``running`` with no stages and $0, while the ledger holds what every stage paid. Opening
it (``orch status``, ``orch runs``) repairs each stage's wave from the record (as any dead
wave is, engine/rebuild.py), then rewrites ``run.json`` once, atomically: ``interrupted``,
its stages, and the usage and cost they were billed. A daemon's start-up does the same for
every council the one before it left behind (:func:`repair_dead`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.request import Usage
from orchestrator.store import read_json, write_json_atomic

GONE = "the process that ran it is gone (killed?)"


def stage_waves(run_dir: Path) -> list[dict[str, Any]]:
    """Each stage wave's document under ``run_dir/waves``, repaired, in the order they
    started."""
    from orchestrator.engine.rebuild import nested_waves

    return nested_waves(run_dir / "waves")


def stages(docs: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The ``stages`` entries of run.json, from the stage waves' documents."""
    out = []
    for doc in docs:
        legs = [*(doc.get("legs") or []), *([doc["chair"]] if doc.get("chair") else [])]
        out.append({"name": doc["wave_id"].removeprefix(f"{run_id}-"),
                    "kind": (legs[0].get("kind") if legs else None) or "leg",
                    "wave_id": doc["wave_id"], "status": doc["status"],
                    "legs": [leg.get("leg_id") for leg in legs], "usage": doc["usage"],
                    "cost_usd": doc["cost_usd"], "cost_exact": doc["cost_exact"]})
    return out


def live(run_dir: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a council's run.json while its process runs it: the stages finished when it
    was last written) as the record has it now: every stage wave so far, the one at work
    included, each leg with what the ledger says it was billed; the run's usage, cost and
    requests their sums; each seat not yet read given its review legs and where they are.
    Nothing is written."""
    run_id = str(doc.get("run_id") or "")
    waves = stage_waves(run_dir)
    found = stages(waves, run_id)
    if not found:
        return {**doc, "live": True}
    legs = [leg for w in waves for leg in [*(w.get("legs") or []),
                                           *([w["chair"]] if w.get("chair") else [])]]
    costs = [s["cost_usd"] for s in found]
    return {**doc, "stages": found, "live": True,
            "usage": sum((Usage(**s["usage"]) for s in found), Usage()).to_dict(),
            "cost_usd": round(sum(c or 0.0 for c in costs), 8),
            "cost_exact": all(s["cost_exact"] for s in found),
            "requests": sum(int(leg.get("requests") or 0) for leg in legs),
            "seats": seats(doc, waves, run_id, live=True)}


def repaired(run_dir: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a dead council's run.json, already marked interrupted) with its stages,
    usage and cost from the repaired stage waves; written back to ``run_dir/run.json``."""
    run_id = str(doc.get("run_id") or "")
    waves = stage_waves(run_dir)
    found = stages(waves, run_id)
    if not found:
        return doc
    usage = sum((Usage(**s["usage"]) for s in found), Usage())
    fixed = {**doc, "stages": found, "usage": usage.to_dict(), "seats": seats(doc, waves, run_id),
             "cost_usd": round(sum(s["cost_usd"] or 0.0 for s in found), 8),
             "cost_exact": all(s["cost_exact"] for s in found),
             "repaired": True}
    try:
        if read_json(run_dir / "run.json").get("status") == "running":
            write_json_atomic(run_dir / "run.json", fixed)
    except (OSError, ValueError, TypeError, AttributeError):
        pass  # left as it was: the next open repairs it again
    return fixed


def seats(doc: dict[str, Any], waves: list[dict[str, Any]], run_id: str, *,
          live: bool = False) -> list[dict[str, Any]]:
    """run.json's seats as its start left them (each ``lost``, with no reason: their reviews
    were never read), each given its review legs and why it has no review; ``live``: the
    run still goes, so such a seat is ``reviewing`` (its leg at work, or its answer not yet
    read), with what its legs were billed so far."""
    reviews = [leg for w in waves if w["wave_id"] in (f"{run_id}-review", f"{run_id}-review-retry")
               for leg in w.get("legs") or []]
    out = []
    for seat in doc.get("seats") or []:
        legs = [leg for leg in reviews if leg.get("model") == seat.get("model")]
        if seat.get("status") == "reviewed" or seat.get("reason") or not legs:
            out.append(seat)
            continue
        last = legs[-1]
        if live:
            billed = [leg.get("cost_usd") for leg in legs]
            out.append({**seat, "status": "reviewing", "legs": [leg["leg_id"] for leg in legs],
                        "cost_usd": None if None in billed else round(sum(billed), 8),
                        "reason": f"leg {last['leg_id']} {last.get('status')}"})
            continue
        why = (f"it answered (leg {last['leg_id']}), but the run was killed before its "
               "review was read" if last.get("status") == "complete" else
               f"the run was killed while it reviewed (leg {last['leg_id']} "
               f"{last.get('status')})")
        out.append({**seat, "reason": why, "legs": [leg["leg_id"] for leg in legs]})
    return out


def repair_dead(runs_dir: Path) -> list[str]:
    """Repair every council under ``runs_dir`` whose ``run.json`` says ``running`` while the
    process that ran it is gone: what a daemon does on start-up for the councils a killed
    daemon ran (its stage waves lie under the council's folder, out of reach of
    engine/rebuild.py's sweep of the runs folder). The run ids repaired."""
    from orchestrator.pids import same_process

    done = []
    for path in sorted(runs_dir.glob("council-*/run.json")):
        try:
            doc = read_json(path)
        except (OSError, ValueError):
            continue  # `orch status` of it says what is wrong with it
        if not isinstance(doc, dict) or doc.get("status") != "running" or same_process(
                doc.get("pid"), doc.get("pid_started")):
            continue
        repaired(path.parent, {**doc, "status": "interrupted", "exit_code": 1,
                               "error": doc.get("error") or GONE})
        done.append(str(doc.get("run_id") or path.parent.name))
    return done
