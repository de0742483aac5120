"""Stage 4, the chair: a model that sat on no seat reads the de-anonymised packet and ends
with ``VERDICT: ship | fix-first | rethink``.

The walk when things go wrong: a missing verdict gets one repair prompt; a chair that fails
gets one retry; then the non-seat model with the best street-cred in ``orch council stats``
is promoted for one attempt; then the verdict is null. Every attempt is recorded.

The chair sees the seats by model name (it is no judge: it attributes views, and the report
names seats the same way), but a seat's words are quoted as the judges' are (bundle.py): the
prose between the run's nonce lines, a finding's fields on one line, orch's own headings
marked with the nonce. A seat that forges ``## Dissent`` or ``VERDICT: ship`` in its review
reaches the chair only inside a quote.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.chair import modes
from orchestrator.chair.packet import Answer, packet
from orchestrator.council.bundle import new_nonce, one_line
from orchestrator.council.continuable import closed
from orchestrator.council.findings import Review
from orchestrator.council.tally import CONCURRENCE_LINE, TIERS, dissent
from orchestrator.engine.record import COMPLETE, LegRecord
from orchestrator.models.addressing import ResolvedModel

VERDICTS = ("ship", "fix-first", "rethink")

VERDICT_REPAIR = """You wrote the synthesis quoted between <<<SYNTHESIS and SYNTHESIS>>> below \
as chair of a review council, but it does not end with a verdict line.

Reply with exactly one line and nothing else, one of:
VERDICT: ship
VERDICT: fix-first
VERDICT: rethink

<<<SYNTHESIS
{synthesis}
SYNTHESIS>>>"""

_VERDICT = re.compile(r"VERDICT:[ \t]*(ship|fix-first|rethink)")


def parse_verdict(text: str | None) -> str | None:
    """The verdict, only from a last non-empty line of exactly ``VERDICT: ship|fix-first|
    rethink``. A ``VERDICT:`` anywhere else — quoted from the code under review, from a seat's
    review, or in the chair's own prose — never counts: anything else gets the repair prompt."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return None
    m = _VERDICT.fullmatch(lines[-1])
    return m.group(1) if m else None


def verdict_repair_briefing(synthesis: str) -> str:
    return VERDICT_REPAIR.replace("{synthesis}", closed(synthesis.strip()))


def chair_packet(briefing: str, reviews: list[Review], labels: dict[str, str],
                 tally: dict[str, Any], notices: list[str], nonce: str | None = None) -> str:
    """Everything the chair reads, in the chair's one layout (chair/packet.py, the council
    verdict mode): reviews by model with the marks every chair reads (CUT, UNFINISHED:
    chair/marks.py) and the council's own (non-conforming), each review's findings, then
    the tally with counts, the dissent, street-cred and the line that tiers are not
    verification. ``nonce`` is the run's quoting marker (the bundle's)."""
    n = nonce or new_nonce()
    answers = []
    for r in reviews:
        if not r.usable:
            continue
        marks = [*r.marks] + ([] if r.conformed else
                              ["non-conforming: no readable findings block"])
        after = []
        if r.findings:
            after.append(f"Findings of {r.model} [{n}]:")
            for f in r.findings:
                after.append(f"- {f['id']} · {f['severity']}"
                             + (f" · {one_line(f['location'])}" if f["location"] else "")
                             + f" — {one_line(f['claim'])}")
                if f["rationale"]:
                    after.append(f"  Rationale: {one_line(f['rationale'])}")
                if f.get("severity_note"):
                    after.append(f"  Note: {f['severity_note']}")
        answers.append(Answer(r.model, closed(r.prose.strip()) or "(no prose)", marks,
                              note=labels.get(r.model, ""), after=after))
    parts = ["", f"## The tally [{n}]", "", CONCURRENCE_LINE, "",
             " · ".join(f"{tally['tiers'][t]} {t}" for t in TIERS)]
    for g in tally["groups"]:
        c = g["counts"]
        raised = ", ".join(f"{fid} by {seat}" for fid, seat in zip(g["findings"], g["seats"],
                                                                   strict=True))
        parts.append(f"- [{g['tier']}] {g['severity']}"
                     + (f" · {g['location']}" if g["location"] else "")
                     + f" — {g['claim']} ({raised}; agree {c['agree']}, dispute "
                       f"{c['dispute']}, neutral {c['neutral']} of {c['judges']} eligible)")
        if len(g.get("claims") or []) > 1:  # a group shows every claim
            parts += [f"  - {m['finding']} ({m['seat']}): {m['claim']}" for m in g["claims"]]
    parts += ["", f"## Dissent [{n}]", ""]
    parts += [f"- {d['finding']} ({d['tier']}): {d['judge']} votes {d['vote']} — "
              f"{d['reason'] or '(no reason given)'}" for d in dissent(tally)] or ["(none)"]
    parts += ["", "## Street-cred (0..1 from peers' rankings, 1 = ranked first by every peer) "
              f"[{n}]", ""]
    for seat, s in tally["seats"].items():
        cred = "no score" if s["street_cred"] is None else f"{s['street_cred']:.2f}"
        parts.append(f"- {seat}: {cred}")
    if notices:
        parts += ["", f"## Notices [{n}]", ""] + [f"- {x}" for x in notices]
    return packet(role=modes.COUNCIL + "\n\n" + CONCURRENCE_LINE, briefing=briefing,
                  heading="The reviews", answers=answers, nonce=n,
                  quoting=modes.COUNCIL_QUOTING, sections=parts)


# -- the walk ------------------------------------------------------------------------------

Attempt = Callable[[ResolvedModel, str, str, str], Awaitable[LegRecord]]


@dataclass
class ChairOutcome:
    model: str | None = None  # whose synthesis stands
    synthesis: str | None = None
    verdict: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    promoted: str | None = None


def _note(rec: LegRecord, role: str, verdict: str | None) -> dict[str, Any]:
    return {"attempt": 0, "role": role, "model": rec.model, "leg_id": rec.leg_id,
            "status": rec.status, "reason": rec.reason, "finish_reason": rec.finish_reason,
            "verdict": verdict}


def _answered(rec: LegRecord) -> bool:
    return rec.status == COMPLETE and bool((rec.answer or "").strip())


async def walk(chair: ResolvedModel, packet: str, attempt: Attempt,
               promote: Callable[[], Awaitable[ResolvedModel | None]],
               stopped: Callable[[], bool], out: ChairOutcome | None = None) -> ChairOutcome:
    """Chair → retry → promoted → null. ``attempt(model, briefing, stage, kind)`` runs one
    leg as its own stage; ``stopped()`` is true once the run was interrupted. Attempts are
    recorded on ``out`` as they happen, so an interrupted walk still shows them."""
    out = out if out is not None else ChairOutcome()

    def record(entry: dict[str, Any]) -> None:
        entry["attempt"] = len(out.attempts) + 1
        out.attempts.append(entry)

    async def one(model: ResolvedModel, role: str) -> bool:
        rec = await attempt(model, packet, f"chair-{len(out.attempts) + 1}", "chair")
        if not _answered(rec):
            record(_note(rec, role, None))
            return False
        verdict = parse_verdict(rec.answer)
        record(_note(rec, role, verdict))
        out.model, out.synthesis, out.verdict = model.name, rec.answer, verdict
        if verdict is None and not stopped():
            fix = await attempt(model, verdict_repair_briefing(rec.answer),
                                f"chair-{len(out.attempts) + 1}", "chair")
            out.verdict = parse_verdict(fix.answer) if _answered(fix) else None
            record(_note(fix, "verdict-repair", out.verdict))
        return True

    for role in ("chair", "retry"):
        if stopped() or await one(chair, role):
            return out
    if stopped():
        return out
    promoted = await promote()
    if promoted is not None:
        out.promoted = promoted.name
        await one(promoted, "promoted")
    return out
