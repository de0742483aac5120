"""Reading a wave back, rebuilding ``wave.json`` from the legs if the run was killed.

A wave is named by its exact id or a prefix that names one wave only. Whether its process
still runs is asked of the pid *and* the process start time ``wave.json`` recorded, so a
pid the system has since given to another process does not keep a dead wave ``running``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.engine.record import ABORTED, RUNNING, LegRecord, now_iso
from orchestrator.engine.wave_document import build_document, wave_status
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.ledger.in_flight import IN_FLIGHT
from orchestrator.pids import same_process
from orchestrator.store import read_json

SHOWN_MATCHES = 5


def resolve_wave_id(runs_dir: Path, given: str) -> str:
    """``given`` if a wave has that exact id, else the one wave whose id starts with it."""
    given = given.strip()
    if not given or "/" in given or given in (".", ".."):
        raise UsageProblem(f"{given!r} is not a wave id; pass one as printed by orch fanout "
                        "(e.g. 20261130-101500-0123456789abcdef) or a unique prefix of it")
    if (runs_dir / given / "wave.json").is_file():
        return given
    matches = sorted(w for w in wave_ids(runs_dir) if w.startswith(given))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageProblem(f"no wave {given!r} under {runs_dir}; `orch runs` lists the runs "
                        "(waves, councils, benches), or pass --runs-dir")
    shown = ", ".join(matches[:SHOWN_MATCHES]) + (", ..." if len(matches) > SHOWN_MATCHES
                                                  else "")
    raise UsageProblem(f"ambiguous: {len(matches)} waves match {given!r} ({shown}); give more "
                    "of the id")


def wave_ids(runs_dir: Path) -> set[str]:
    """Every wave under ``runs_dir``: directories with a wave.json, and the waves legs name
    in their metadata.json when their wave's own file is missing."""
    ids: set[str] = set()
    try:
        entries = list(runs_dir.iterdir())
    except OSError:
        return ids
    for entry in entries:
        if (entry / "wave.json").is_file():
            ids.add(entry.name)
    for entry in entries:
        meta = entry / "metadata.json"
        if entry.name not in ids and meta.is_file():
            wave_id = _read(meta).get("wave_id")
            if isinstance(wave_id, str) and entry.name.startswith(wave_id + "-"):
                ids.add(wave_id)
    return ids


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = read_json(path)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def load_wave(runs_dir: Path, wave_id: str) -> dict[str, Any]:
    """The wave document for ``wave_id`` (exact or a unique prefix). A wave whose
    ``wave.json`` is not final is rebuilt from each leg's metadata.json, each leg brought
    up to what the ledger and its outbox say it was billed (engine/repair.py): while its
    process runs, as a view (a leg in flight stays ``running`` with what it was billed so
    far; nothing is written); when that process is gone, legs left ``running`` are
    ``aborted`` and the repaired files are written back (atomically, once). A deliberation
    is read from its round waves instead (:func:`_rounds`)."""
    wave_id = resolve_wave_id(runs_dir, wave_id)
    wave_dir = runs_dir / wave_id
    doc: dict[str, Any] | None = None
    if (wave_dir / "wave.json").exists():
        try:
            doc = read_json(wave_dir / "wave.json")
        except (OSError, json.JSONDecodeError) as exc:
            raise OrchError(f"cannot read {wave_dir / 'wave.json'}: {exc}") from None
        if not isinstance(doc, dict):
            raise OrchError(f"{wave_dir / 'wave.json'} is not a wave document (a JSON "
                            "object); remove it to rebuild the wave from its legs")
        if doc.get("status") != "running":
            return doc
    alive = doc is not None and same_process(doc.get("pid"), doc.get("pid_started"))
    if doc is not None and doc.get("kind") == "deliberation":  # its waves are its rounds
        return _rounds(wave_dir, doc, alive=alive)
    recorded = doc is not None  # wave.json names the process
    on_disk: dict[str, LegRecord] = {}
    for path in sorted(runs_dir.glob(f"{wave_id}-*/metadata.json")):
        meta = _read(path)
        if meta.get("wave_id") == wave_id and meta.get("leg_id"):
            on_disk[meta["leg_id"]] = LegRecord.from_dict(meta)
    doc_legs = list((doc or {}).get("legs") or [])
    planned = doc_legs + [(doc or {})[k] for k in ("chair", "chair_repair") if (doc or {}).get(k)]
    for leg in planned:  # legs that never wrote a file are still the wave's legs
        if leg.get("leg_id") and leg["leg_id"] not in on_disk:
            on_disk[leg["leg_id"]] = LegRecord.from_dict(leg)
    from orchestrator.engine.repair import from_record

    # the durable record is ahead of the files: by the moment (a leg's metadata.json is
    # written at changes of state), or for good (a crash left them behind)
    changed = from_record(wave_id, on_disk, live=alive)
    legs, chair, chair_repair = [], None, None
    for record in on_disk.values():
        if not alive and record.status in (RUNNING, "pending"):
            record.status = ABORTED
            record.reason = IN_FLIGHT
            changed.add(record.leg_id)
        if record.kind == "chair" and record.leg_id.endswith("-chair-repair"):
            chair_repair = record  # a structured synthesis's repair prompt
        elif record.kind == "chair":
            chair = record
        else:
            legs.append(record)
    legs.sort(key=lambda r: int(r.leg_id.rsplit("-", 1)[-1]) if r.leg_id.rsplit(
        "-", 1)[-1].isdigit() else 0)
    # a live process is still at work on it (a chair, the wave's end): running until it says
    status = "running" if alive else wave_status(legs + ([chair] if chair else []))
    extra = {k: v for k, v in (doc or {}).items()
             if k not in ("legs", "chair", "chair_repair", "status", "exit_code", "usage",
                          "cost_usd", "cost_exact", "wave_id", "runs_dir", "signal")}
    extra["rebuilt"] = True
    extra["alive"] = alive
    if not alive:
        extra["repaired_at"] = now_iso()
    if not alive:  # requests journaled and never answered on record: may be billed
        from orchestrator.account.journal import at_kill, words

        flying = at_kill(waves=[wave_id])
        if flying["requests"]:
            extra["in_flight_at_kill"] = flying
            extra["notices"] = [*(extra.get("notices") or []), words(flying)]
    doc = build_document(wave_id=wave_id, status=status, legs=legs, chair=chair,
                         runs_dir=runs_dir, extra=extra, report=_report,
                         chair_repair=chair_repair)
    # Once, and only for a wave whose wave.json names a process that is gone: without the
    # file nobody can tell the wave is over (its first write may have failed), so the repair
    # stays in this document and the legs' files are left to their process.
    if not alive and recorded:
        from orchestrator.engine.repair import write_back

        write_back(runs_dir, wave_dir, doc, [r for r in on_disk.values() if r.leg_id in changed])
    return doc


GONE = "the process that ran it is gone (killed?)"


def nested_waves(folder: Path) -> list[dict[str, Any]]:
    """Each wave's document under ``folder`` (a council's stages, a deliberation's rounds),
    repaired as any dead wave is, in the order they started. One that cannot be read is
    left out: `orch status --runs-dir FOLDER` of it says what is wrong with it."""
    waves = []
    for path in sorted(folder.glob("*/wave.json")) if folder.is_dir() else []:
        try:
            waves.append(load_wave(folder, path.parent.name))
        except (OrchError, OSError, ValueError, KeyError, TypeError):
            continue
    waves.sort(key=lambda d: (str(d.get("created_at") or ""), d["wave_id"]))
    return waves


def _rounds(wave_dir: Path, doc: dict[str, Any], *, alive: bool) -> dict[str, Any]:
    """A deliberation (``orch fanout --rounds``) not yet ended: its ``wave.json`` holds the
    rounds already decided (written as each ends) but no legs and $0, while each round is a
    wave of its own under ``rounds/`` whose legs' ledger rows are written per billed answer.
    Each round wave is read as any wave is (live, or repaired), and the document is every
    round's legs with the usage and cost they were billed. ``alive``: the view of a run
    still going (``running``, nothing written); else ``interrupted``, and ``wave.json`` is
    rewritten with it once, atomically."""
    from orchestrator.store import write_json_atomic

    waves = nested_waves(wave_dir / "rounds")
    legs = [LegRecord.from_dict(leg) for w in waves
            for leg in [*(w.get("legs") or []), *([w["chair"]] if w.get("chair") else [])]]
    extra = {k: v for k, v in doc.items()
             if k not in ("legs", "chair", "status", "exit_code", "usage", "cost_usd",
                          "cost_exact", "wave_id", "runs_dir", "signal", "degraded",
                          "artifact_errors")}
    extra.update({"rebuilt": True, "alive": alive,
                  "round_waves": [{"wave_id": w["wave_id"], "status": w["status"],
                                   "usage": w["usage"], "cost_usd": w["cost_usd"],
                                   "cost_exact": w["cost_exact"]} for w in waves]})
    if alive:
        return build_document(wave_id=wave_dir.name, status="running", legs=legs,
                              chair=None, runs_dir=wave_dir.parent, extra=extra)
    extra.update({"error": doc.get("error") or GONE, "repaired_at": now_iso()})
    repaired = build_document(wave_id=wave_dir.name, status="interrupted", legs=legs,
                              chair=None, runs_dir=wave_dir.parent, extra=extra)
    now = _read(wave_dir / "wave.json")
    if now.get("status") != "running":  # its process ended it as we read the rounds
        return now
    write_json_atomic(wave_dir / "wave.json", repaired)
    return repaired


def _report(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The installed plugins' ``wave_report`` on a rebuilt document (no wave runs: ``wave``
    is None), so a killed wave's exit code means what its plugins say, as a finished one's.
    Plugins that cannot be loaded (a broken config) report nothing: a notice says so."""
    from orchestrator import runtime
    from orchestrator.engine.degraded import reporter
    from orchestrator.plugin_host.hooks import HookRunner

    def notice(text: str) -> None:
        notices = doc.setdefault("notices", [])
        if text not in notices:
            notices.append(text)

    try:
        hooks = HookRunner(runtime.plugin_manager(), config=runtime.config())
    except Exception as exc:
        notice(f"the plugins' reports were not asked ({type(exc).__name__}: {exc})")
        return []
    return reporter(hooks, notice)(doc)


def repair_dead(runs_dir: Path) -> list[str]:
    """Open every wave under ``runs_dir`` whose ``wave.json`` says ``running`` while the
    process that ran it is gone, so :func:`load_wave` repairs it (a deliberation from its
    rounds): what a daemon does on start-up for the waves the one before it left behind.
    The ids repaired."""
    repaired = []
    for path in sorted(runs_dir.glob("*/wave.json")):
        doc = _read(path)
        if doc.get("status") != "running" or same_process(doc.get("pid"),
                                                          doc.get("pid_started")):
            continue
        try:
            load_wave(runs_dir, path.parent.name)
        except (OrchError, OSError, ValueError, KeyError, TypeError):
            continue  # `orch status` on it says what is wrong, in its own words
        repaired.append(path.parent.name)
    return repaired
