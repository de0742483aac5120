"""What a finished council run says about itself: the seat entries of ``run.json``,
``verdict.json``, and the rows it adds to the council ledger."""

from __future__ import annotations

import time
from typing import Any, Protocol

from orchestrator.council.bundle import Bundle
from orchestrator.council.chair import ChairOutcome
from orchestrator.council.findings import Review
from orchestrator.council.judging import Judgement
from orchestrator.council.tally import CONCURRENCE_LINE, SEVERITIES
from orchestrator.engine.ledger_sink import LedgerSink


class CouncilRun(Protocol):
    """What this module reads of a finished run (``council.run.CouncilRun``), named here so
    the run imports its summary and not the reverse."""

    run_id: str
    ledger_url: str | None
    status: str
    spend: LedgerSink
    reviews: list[Review]
    bundle: Bundle | None
    judgements: list[Judgement]
    shown: dict[str, list[str]]  # judge -> the finding ids its view showed, in order
    tally: dict[str, Any] | None
    chair: ChairOutcome

    def notice(self, text: str, degrade: str | None = None) -> None: ...


def seat_entries(run: CouncilRun) -> list[dict[str, Any]]:
    labels = run.bundle.labels if run.bundle else {}
    scores = (run.tally or {}).get("seats", {})
    judged = {j.judge: j.usable for j in run.judgements}
    out = []
    for r in run.reviews:
        score = scores.get(r.model, {})
        out.append({
            "model": r.model, "label": labels.get(r.model), "status": r.status,
            "reason": r.reason, "retried": r.retried, "cut": r.cut, "conformed": r.conformed,
            "source": r.source, "reprompted": r.reprompted, "problem": r.problem,
            "dropped": r.dropped, "findings": r.severity_counts(), "raised": len(r.findings),
            "finding_ids": [f.get("id") for f in r.findings],
            "confirmed": score.get("confirmed", 0), "street_cred": score.get("street_cred"),
            "ranks": score.get("ranks", []), "judged": judged.get(r.model, False),
            "legs": r.legs,
        })
    return out


def verdict_doc(run: CouncilRun) -> dict[str, Any]:
    """``verdict.json``: the one file a CI gate needs to read."""
    return {"run_id": run.run_id, "verdict": run.chair.verdict, "chair": run.chair.model,
            "promoted": run.chair.promoted, "status": run.status,
            "tiers": (run.tally or {}).get("tiers"), "line": CONCURRENCE_LINE}


def council_rows(run: CouncilRun) -> None:
    """One row per run × model in the council ledger. A failure here is a notice, never
    fatal: the review itself is done and on disk."""
    from orchestrator.ledger.council_rows import CouncilLedger

    scores = (run.tally or {}).get("seats", {})
    rows: list[dict[str, Any]] = []
    for r in run.reviews:
        counts = r.severity_counts()
        score = scores.get(r.model, {})
        rows.append({"run_id": run.run_id, "model": r.model, "role": "seat",
                     "status": r.status, "reviewed": r.usable,
                     "conformed": r.conformed if r.usable else None, "cut": r.cut,
                     **{f"findings_{s}": counts[s] for s in SEVERITIES},
                     "confirmed": score.get("confirmed", 0),
                     "street_cred": score.get("street_cred")})
    for model in dict.fromkeys(a["model"] for a in run.chair.attempts):
        gave = model == run.chair.model
        verdict = run.chair.verdict if gave else None
        rows.append({"run_id": run.run_id, "model": model, "role": "chair",
                     "status": "verdict" if verdict else ("no-verdict" if gave else "failed"),
                     "reviewed": False, "verdict": verdict})
    votes = vote_rows(run)
    try:
        left = run.spend.left()  # what the run's stages left of its ledger deadline
        run.spend.bounded(lambda: CouncilLedger(run.ledger_url).append(
            rows, deadline=time.monotonic() + left, votes=votes))
    except Exception as exc:  # locked, full, unreachable: the rows wait in the outbox
        _outbox(run, rows, votes,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def vote_rows(run: CouncilRun) -> list[dict[str, Any]]:
    """One row per judge whose judgement counted × finding its view showed: its vote (or
    ``none``), where the view showed it, the group's final tier, and whether its vote
    counted there (it raised none of the group's findings). Judge calibration's data."""
    tally = run.tally or {}
    findings = tally.get("findings") or {}
    raisers = {g["id"]: set(g.get("seats") or []) for g in tally.get("groups") or []}
    out = []
    for j in run.judgements:
        if not j.usable:
            continue
        cast = {v["finding"]: v["vote"] for v in j.votes}
        shown = run.shown.get(j.judge) or []
        for position, fid in enumerate(shown):
            f = findings.get(fid)
            if f is None:
                continue
            out.append({"run_id": run.run_id, "judge": j.judge, "finding": fid,
                        "grp": f["group"], "position": position, "shown": len(shown),
                        "vote": cast.get(fid, "none"), "tier": f["tier"],
                        "eligible": j.judge not in raisers.get(f["group"], set())})
    return out


def _outbox(run: CouncilRun, rows: list[dict[str, Any]], votes: list[dict[str, Any]],
            why: str) -> None:
    """The run's rows journaled as one batch, and its votes as another, as spend rows are
    (orchestrator/ledger/outbox.py): the next command that opens the ledger replays them,
    each run's once."""
    from orchestrator.ledger import outbox, vote_table
    from orchestrator.ledger.connection import default_url
    from orchestrator.ledger.council_rows import prepare
    from orchestrator.security.secrets import scrub

    why = scrub(why)[:300]
    try:
        url = run.ledger_url or default_url()
        path = outbox.append_batch(url, "council", prepare(rows))
        if votes:
            outbox.append_batch(url, "council_vote", vote_table.prepare(votes))
    except (OSError, ValueError) as exc:
        run.notice(f"the council ledger could not record this run: {why}; outbox: "
                   f"{scrub(str(exc))[:300]}")
        return
    run.notice(f"the council ledger could not record this run in time ({why}); its "
               f"{len(rows)} row(s) wait in the outbox {path}; the next orch command that "
               "opens the ledger (orch spend) replays them")
