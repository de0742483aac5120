"""Resuming a bench (``orch bench resume``): the plan again from the results file, the
trials still to run (never run, cut short by an interrupt; with ``--retry-failed`` /
``--retry-excluded`` those too), and the new trials merged into the results in their
slots, the results saying what was re-run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.bakeoff.contestants import Contestant, parse_contestant
from orchestrator.bakeoff.plan import Plan, check_settings
from orchestrator.bakeoff.tasks import load_tasks, suite_dir
from orchestrator.errors import OrchError

CUT = "interrupted"  # the start of an excluded reason an interrupt (or --maxfail) wrote


def plan_of(doc: dict[str, Any], where: Path, ceiling_keys: tuple[str, ...] = ()) -> Plan:
    """The plan the bench ran, from its settings; refused when its tasks or prompt
    changed since (a resumed trial must be the trial that was planned). ``ceiling_keys``:
    the declared run ceilings, each kept under its key in the settings."""
    s = doc["settings"]
    if s.get("source") == "probe":
        raise OrchError(f"{where} is a probe; run `orch bench --probe` again instead")
    config = s.get("config") or {}
    from_config = {c.get("name"): c for c in config.get("contestants") or []
                   if isinstance(c, dict)}
    contestants: list[Contestant] = []
    for entry in s["contestants"]:
        raw = entry if entry.get("kind") in ("model", "fanout", "council") else from_config.get(entry["name"])
        if raw is None:
            raise OrchError(f"{where}: contestant {entry['name']} is not in its saved "
                            "config; it cannot be resumed")
        contestants.append(parse_contestant(dict(raw), f"contestant {entry['name']}"))
    source = str(s["source"])
    folder = suite_dir(source.split(":", 1)[1]) if source.startswith("builtin:") \
        else Path(source)
    try:
        by_id = {t.id: t for t in load_tasks(folder)}
    except OrchError as exc:
        raise OrchError(f"{where}: its tasks ({source}) cannot be loaded: {exc}") from None
    missing = [t for t in s["tasks"] if t not in by_id]
    if missing:
        raise OrchError(f"{where}: task(s) {', '.join(missing[:5])} are no longer in "
                        f"{source}; a resume runs the same tasks")
    bench = config.get("bench") if isinstance(config.get("bench"), dict) else {}
    plan = Plan(contestants=contestants, tasks=[by_id[t] for t in s["tasks"]], source=source,
                trials=int(s["trials"]), jobs=int(s["jobs"]), timeout_s=float(s["timeout_s"]),
                prompt=s["prompt"], ceilings={k: s.get(k) for k in ceiling_keys},
                config_path=s.get("config_path"), config=config,
                **{**check_settings(bench, ceiling_keys), "check_timeout_s": s["check_timeout_s"],
                   "check_memory_mb": s["check_memory_mb"],
                   "readable": list(s.get("readable") or [])})
    if plan.prompt_hash != s["prompt_sha256"]:
        raise OrchError(f"{where}: its prompt template does not match its hash")
    saved = doc.get("prompts") or {}
    changed = [t.id for t in plan.tasks if t.id in saved and plan.render(t) != saved[t.id]]
    if changed:
        raise OrchError(f"{where}: task(s) {', '.join(changed[:5])} changed since the bench "
                        "ran; run a new bench instead")
    return plan


def account(doc: dict[str, Any], plan: Plan, sink):
    """The bench's one account, opened from the record within ``sink``'s ledger deadline:
    the ledger's rows of every run of the bench (its command contestants' own reports are
    not under its ceiling) and the requests a killed run left in flight, never the results
    file's settings; its model trials' recorded costs stand in for rows the ledger lacks."""
    from orchestrator.account import Account

    files = {str(r["leg_id"]): float(r["cost_usd"]) for r in doc.get("trials") or []
             if r.get("kind") == "model" and r.get("leg_id") and r.get("cost_usd")}
    return Account.open(doc["bench_id"], plan.ceilings, sink=sink, files=files,
                        skip_providers=("command",), waits=True)


def total(plan: Plan) -> int:
    return len(plan.tasks) * len(plan.contestants) * plan.trials


def todo(doc: dict[str, Any], planned: int, *, failed: bool = False,
         excluded: bool = False) -> dict[int, str]:
    """slot number -> why it runs again: ``not run``, ``cut short``, ``failed``,
    ``excluded``."""
    rows = {r["n"]: r for r in doc["trials"]}
    out = {}
    for n in range(1, planned + 1):
        row = rows.get(n)
        reason = str((row or {}).get("excluded") or "")
        if row is None:
            out[n] = "not run"
        elif reason.startswith(CUT):
            out[n] = "cut short"
        elif excluded and reason:
            out[n] = "excluded"
        elif failed and not reason and not row.get("passed"):
            out[n] = "failed"
    return out


def merge(doc: dict[str, Any], rows: list[dict[str, Any]], why: dict[int, str],
          settled: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """The results with ``rows`` in their slots, and a ``resumes`` entry saying what ran.
    ``settled``: trials a killed run paid for, settled without a request (bakeoff/regrade.py)."""
    from orchestrator.bakeoff.run import exclusions

    by_n = {r["n"]: r for r in doc["trials"]}
    by_n.update({r["n"]: r for r in settled})
    by_n.update({r["n"]: r for r in rows})
    merged = [by_n[n] for n in sorted(by_n)]
    counts: dict[str, int] = {}
    for n in why:
        counts[why[n]] = counts.get(why[n], 0) + 1
    # "running": the marker of a partial file its killed process left (cli/bench_run.py)
    out = {k: v for k, v in doc.items() if k not in ("interrupted", "stats", "running")}
    out.update(trials=merged, exclusions=exclusions(merged),
               finished=datetime.now(UTC).isoformat())
    out["resumes"] = [*doc.get("resumes", []),
                      {"at": out["finished"], "planned": counts, "ran": len(rows),
                       "trials": sorted(why)}]
    if settled:
        out["resumes"][-1]["settled"] = sorted(r["n"] for r in settled)
    return out


def notes(doc: dict[str, Any]) -> list[str]:
    """What the report says about resumes and retries."""
    out = []
    for r in doc.get("resumes") or []:
        what = ", ".join(f"{n} {k}" for k, n in r["planned"].items())
        out.append(f"Resumed ({r['at'][:19]}): {r['ran']} trial(s) run again"
                   + (f" ({what})." if what else "."))
        if r.get("settled"):
            out.append(f"  {len(r['settled'])} trial(s) billed before a kill were not sent "
                       "again: graded from the saved answer, or excluded when none was saved.")
        if r["planned"].get("failed"):
            out.append("  --retry-failed: a re-run replaces its failure, so these pass rates "
                       "lean high; compare contestants re-run alike.")
    return out
