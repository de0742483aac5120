"""The testing kit's council: scripted seats and chairs that answer each of a council's
prompts as a real model would, and :class:`CouncilResult`, what ``orch.run_council`` ran.

A council asks one model several things (its review, a repair of an unreadable findings
block, a judgement of the others' findings) and its chair two (a synthesis, a verdict line).
Which prompt is which is read from orch's own briefs (imported, never copied), so a test of
a plugin scripts a whole council in two lines::

    scripted_server.script("alpha", council_seat(["SQL injection in build_query"]))
    scripted_server.script("chair", council_chair("fix-first"))
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.testing.scripted_reply import Reply
from orchestrator.testing.scripted_server import RecordedRequest

__all__ = ["CouncilResult", "council_chair", "council_seat", "finding"]

ReplyFn = Callable[[dict[str, Any], int], Reply]


def _prompt_kind(body: dict[str, Any]) -> str:
    """Which council prompt a request is: ``review``, ``repair``, ``judge``, ``verdict`` (the
    chair's verdict-line repair) or ``chair`` (anything else: the chair's packet)."""
    from orchestrator.council.chair import VERDICT_REPAIR
    from orchestrator.council.findings import REPAIR_BRIEF, SEAT_BRIEF
    from orchestrator.council.judging import JUDGE_BRIEF

    first = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"),
                 "")
    first = first if isinstance(first, str) else json.dumps(first)
    for kind, brief in (("review", SEAT_BRIEF), ("repair", REPAIR_BRIEF),
                        ("judge", JUDGE_BRIEF), ("verdict", VERDICT_REPAIR)):
        if first.startswith(brief[:80]):
            return kind
    return "chair"


def finding(claim: str, severity: str = "major", location: str = "",
            rationale: str = "", id: str | None = None) -> dict[str, Any]:  # noqa: A002
    """One finding as a seat writes it in its block (docs/council.md)."""
    return {"id": id or "", "severity": severity, "claim": claim, "location": location,
            "rationale": rationale or claim}


def _shown(prompt: str, label: str) -> list[str]:
    """The ids or labels a judge's prompt lists after ``label`` (judging.judge_briefing)."""
    m = re.search(rf"^{label}: (.*?)\.$", prompt, re.M)
    return [] if not m else [s.strip() for s in m.group(1).split(",")
                             if re.fullmatch(r"F\d+|Review [A-Z]+", s.strip())]


def council_seat(findings: list[str | dict[str, Any]] | None = None, *,
                 prose: str = "I read the change.", vote: str | Callable[[str], str] = "agree",
                 review: Reply | None = None, judge: Reply | None = None) -> ReplyFn:
    """A seat's scripted replies: its review (``prose`` then a findings block of
    ``findings``, claims or :func:`finding` dicts), the same block when asked to repair
    it, and as a judge ``vote`` (``agree``/``dispute``/``neutral``, or a function of the
    finding's line in the prompt) on every finding it is shown, the reviews ranked in the
    order shown. ``review``/``judge``: a Reply of your own for that prompt instead."""
    items = [finding(f) if isinstance(f, str) else {**finding(**f)} for f in findings or []]
    for n, item in enumerate(items, start=1):
        item["id"] = item["id"] or str(n)
    block = json.dumps(items, indent=1)

    def reply(body: dict[str, Any], n: int) -> Reply:
        kind = _prompt_kind(body)
        if kind == "review":
            return review or Reply(text=f"{prose}\n\n```json\n{block}\n```\n")
        if kind == "repair":
            return Reply(text=f"```json\n{block}\n```\n")
        if kind == "judge":
            if judge is not None:
                return judge
            prompt = body["messages"][-1]["content"]
            votes = []
            for fid in _shown(prompt, "Findings to vote on"):
                line = next((ln for ln in prompt.splitlines() if f"{fid} " in ln), fid)
                said = vote(line) if callable(vote) else vote
                votes.append({"id": fid, "vote": said, "reason": f"{said}: scripted"})
            ranking = _shown(prompt, "Reviews to rank")
            return Reply(text="I weighed each finding.\n\n```json\n"
                         + json.dumps({"votes": votes, "ranking": ranking}) + "\n```\n")
        return Reply(status=500, error_message=f"a seat was sent a council {kind} prompt")
    return reply


def council_chair(verdict: str = "ship", synthesis: str = "The council agrees.") -> ReplyFn:
    """A chair's scripted replies: ``synthesis`` ending ``VERDICT: <verdict>``, and the
    verdict line alone when asked to repair it."""
    def reply(body: dict[str, Any], n: int) -> Reply:
        kind = _prompt_kind(body)
        if kind == "chair":
            return Reply(text=f"{synthesis}\n\nVERDICT: {verdict}")
        if kind == "verdict":
            return Reply(text=f"VERDICT: {verdict}")
        return Reply(status=500, error_message=f"the chair was sent a council {kind} prompt")
    return reply


@dataclass
class CouncilResult:
    """What ``orch.run_council`` ran: its ``run.json`` (``doc``), the events it emitted,
    the requests on the wire, and its artifacts read back by name."""

    doc: dict[str, Any]
    requests: list[RecordedRequest]
    events: list[Any]
    extra: dict[str, Any]

    @property
    def dir(self) -> Path:
        return Path(self.doc["dir"])

    @property
    def status(self) -> str:
        return self.doc["status"]

    @property
    def verdict(self) -> str | None:
        return self.doc["verdict"]

    @property
    def exit_code(self) -> int:
        return self.doc["exit_code"]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    @property
    def tally(self) -> dict[str, Any] | None:
        """``tally.json``: the groups of findings, their tiers and counts (None before it)."""
        return self.extra.get("tally")

    def seat(self, model: str) -> dict[str, Any]:
        """Seat ``model``'s entry of ``run.json`` (``"alpha"`` or ``"scripted/alpha"``)."""
        return next(s for s in self.doc["seats"] if model in (s["model"],
                                                                 s["model"].split("/", 1)[-1]))

    def review(self, model: str) -> dict[str, Any]:
        """Seat ``model``'s review as orch read it (``reviews/N-<model>.json``)."""
        n = self.doc["seats"].index(self.seat(model)) + 1
        found = sorted((self.dir / "reviews").glob(f"{n}-*.json"))
        return json.loads(found[0].read_text())

    def findings(self, model: str) -> list[dict[str, Any]]:
        """The findings orch read from seat ``model``'s block."""
        return self.review(model)["findings"]

    def stage(self, name: str) -> dict[str, Any]:
        """Stage ``name``'s entry (``review``, ``judge``, ``chair-1``, ...)."""
        return next(s for s in self.doc["stages"] if s["name"] == name)

    def legs(self, stage: str | None = None) -> list[dict[str, Any]]:
        """Each leg's record (its ``metadata.json``), of one stage or of all."""
        stages = [self.stage(stage)] if stage else self.doc["stages"]
        waves = self.dir / "waves"
        return [json.loads((waves / leg / "metadata.json").read_text())
                for s in stages for leg in s["legs"]]
