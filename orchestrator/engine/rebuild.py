"""Reading a wave back from disk, rebuilding ``wave.json`` from the legs if the run was killed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.engine.record import ABORTED, RUNNING, LegRecord
from orchestrator.engine.wave import build_document, wave_status
from orchestrator.errors import OrchError
from orchestrator.pids import pid_alive
from orchestrator.store import read_json


def load_wave(runs_dir: Path, wave_id: str) -> dict[str, Any]:
    """The wave document for ``wave_id``. When the process that ran it is gone before it
    finished, the document is rebuilt from each leg's metadata.json and legs left
    ``running`` are reported ``aborted``."""
    wave_dir = runs_dir / wave_id
    doc: dict[str, Any] | None = None
    if (wave_dir / "wave.json").exists():
        doc = read_json(wave_dir / "wave.json")
        if doc.get("status") != "running" or pid_alive(doc.get("pid")):
            return doc
    leg_files = sorted(runs_dir.glob(f"{wave_id}-*/metadata.json"))
    if doc is None and not leg_files:
        raise OrchError(f"no wave {wave_id!r} under {runs_dir}; list waves with "
                        "`ls` there or pass --runs-dir")
    legs, chair = [], None
    for path in leg_files:
        record = LegRecord.from_dict(read_json(path))
        if record.status in (RUNNING, "pending"):
            record.status = ABORTED
            record.reason = "aborted: the orch process ended before this leg finished"
        if record.kind == "chair":
            chair = record
        else:
            legs.append(record)
    legs.sort(key=lambda r: int(r.leg_id.rsplit("-", 1)[-1]) if r.leg_id.rsplit(
        "-", 1)[-1].isdigit() else 0)
    status = wave_status(legs + ([chair] if chair else []))
    extra = {k: v for k, v in (doc or {}).items()
             if k not in ("legs", "chair", "status", "exit_code", "usage", "cost_usd",
                          "cost_exact", "wave_id", "runs_dir", "signal")}
    extra["rebuilt"] = True
    return build_document(wave_id=wave_id, status=status, legs=legs, chair=chair,
                          runs_dir=runs_dir, extra=extra)
