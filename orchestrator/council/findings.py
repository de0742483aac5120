"""Stage 1, the reviews: the seat brief, reading a seat's findings block, the repair prompt.

A seat writes prose and ends with one fenced JSON block of findings. The block is read
strictly, then with json-repair; if it is still unusable the seat gets one repair prompt.
A seat whose block stays unusable keeps its prose (peers still rank it) and is counted as
non-conforming. A review that stopped at its output limit is marked CUT.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

from orchestrator.council.continuable import REVIEW_CUE, closed, cued
from orchestrator.council.tally import SEVERITIES
from orchestrator.security.secrets import scrub

FORMAT = """```json
[
  {"id": "1", "severity": "major", "claim": "one sentence: what is wrong",
   "location": "path/to/file.py:42 (or the section or function)",
   "rationale": "why it matters and what would show it"}
]
```
`severity` is one of: `blocker` (must not ship as is), `major` (fix before shipping), \
`minor` (worth fixing), `nit` (taste). Use `[]` if you found nothing worth raising."""

SEAT_BRIEF = f"""You are a seat on a review council: several reviewers examine the same work \
independently, then judge each other's findings anonymously.

Review the work described below on its merits. Be honest: disagree with the author, with the \
briefing's assumptions or with common practice wherever the evidence says so. Do not flatter \
the author, do not soften a real problem, and do not invent problems to look thorough; say \
plainly what is fine.

Write your review as prose. Then end your answer with exactly one fenced JSON block listing \
your findings, one object per distinct problem:

{FORMAT}"""

REPAIR_BRIEF = f"""Earlier, asked to review some work, you wrote the review quoted between \
<<<REVIEW and REVIEW>>> below. Its findings block could not be read: {{problem}}.

Reply with only the findings of that review as one fenced JSON block, in this format:

{FORMAT}

<<<REVIEW
{{answer}}
REVIEW>>>"""

# What seats write for a severity, mapped onto the council's four (docs/council.md). Anything
# else is kept as ``minor`` with a note: a finding is never dropped for its severity word.
SEVERITY_SYNONYMS = {
    "blocker": "blocker", "critical": "blocker", "crit": "blocker", "fatal": "blocker",
    "showstopper": "blocker", "severe": "blocker",
    "major": "major", "high": "major", "important": "major", "error": "major",
    "minor": "minor", "medium": "minor", "moderate": "minor", "med": "minor",
    "warning": "minor", "warn": "minor",
    "nit": "nit", "low": "nit", "info": "nit", "informational": "nit", "trivial": "nit",
    "nitpick": "nit", "style": "nit", "suggestion": "nit",
}
UNKNOWN_SEVERITY = "minor"


def map_severity(value: Any) -> tuple[str, str | None]:
    """(severity, note): a synonym mapped through SEVERITY_SYNONYMS, anything else kept as
    ``minor`` with a note that says what the seat wrote."""
    word = " ".join(str(value or "").split()).lower().strip("*_`.:!")
    if word in SEVERITY_SYNONYMS:
        return SEVERITY_SYNONYMS[word], None
    shown = word[:40] or "none"
    return UNKNOWN_SEVERITY, f"severity {shown!r} is not one the council knows; kept as minor"


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S)


def seat_briefing(briefing: str) -> str:
    return cued(f"{SEAT_BRIEF}\n\n## The briefing\n\n{briefing.strip()}", REVIEW_CUE)


def repair_briefing(answer: str, problem: str) -> str:
    # str.replace, not format: FORMAT's braces are literal JSON
    return REPAIR_BRIEF.replace("{problem}", problem).replace("{answer}",
                                                              closed(answer.strip()))


@dataclass
class Extraction:
    """What could be read from one answer."""

    findings: list[dict[str, Any]] | None  # None: unusable
    prose: str
    source: str | None = None  # block | json-repair
    problem: str | None = None
    dropped: int = 0  # items without a claim


def _last_block(text: str) -> tuple[str, str] | None:
    """The last fenced block that is JSON (by its tag or its first character), and the text
    without it."""
    found = None
    for m in _FENCE.finditer(text):
        tag, body = m.group(1).lower(), m.group(2).strip()
        if tag == "json" or (not tag and body[:1] in "[{"):
            found = m
    if found is None:
        return None
    prose = (text[:found.start()] + text[found.end():]).strip()
    return found.group(2).strip(), prose


def _normalise(items: list[Any]) -> tuple[list[dict[str, Any]], int]:
    kept, dropped = [], 0
    for n, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            dropped += 1
            continue
        claim = " ".join(str(item.get("claim") or "").split())
        if not claim:
            dropped += 1
            continue
        severity, note = map_severity(item.get("severity"))
        finding = {
            "local_id": str(item.get("id") if item.get("id") not in (None, "") else n),
            "severity": severity,
            "claim": claim,
            "location": " ".join(str(item.get("location") or "").split()),
            "rationale": str(item.get("rationale") or "").strip(),
        }
        if note:
            finding["severity_note"] = note
        kept.append(finding)
    return kept, dropped


def extract(text: str) -> Extraction:
    """Read a findings block: strict JSON first, then json-repair. An empty list read
    strictly is a review with no findings; a repair that yields nothing usable is not."""
    text = text or ""
    block = _last_block(text)
    if block is None:
        return Extraction(None, text.strip(), problem="there is no fenced JSON findings block")
    body, prose = block
    try:
        data, source = json.loads(body), "block"
    except ValueError:
        data, source = json_repair.loads(body), "json-repair"
    if isinstance(data, dict) and isinstance(data.get("findings"), list):
        data = data["findings"]
    if not isinstance(data, list) or (source == "json-repair" and not data):
        problem = ("the block is not valid JSON and json-repair found no findings in it"
                   if source == "json-repair" else "the block is not a JSON list of findings")
        return Extraction(None, prose, problem=problem)
    findings, dropped = _normalise(data)
    if not findings and (data or source == "json-repair"):
        return Extraction(None, prose, dropped=dropped,
                          problem="no finding in the block has a claim")
    return Extraction(findings, prose, source=source, dropped=dropped)


@dataclass
class Review:
    """One seat's review as the council uses it."""

    model: str
    status: str = "lost"  # reviewed | lost
    reason: str | None = None  # why a lost seat did not review
    answer: str = ""
    prose: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    conformed: bool = False
    source: str | None = None  # block | json-repair | re-prompt
    problem: str | None = None  # why the block was unusable (before any repair)
    dropped: int = 0
    cut: bool = False
    marks: list[str] = field(default_factory=list)  # what the chair is told (chair/marks.py)
    retried: bool = False
    reprompted: bool = False
    legs: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.status == "reviewed"

    def read(self, answer: str, finish_reason: str | None) -> None:
        """Take a completed answer: prose, findings (or the problem that needs a repair)."""
        self.status = "reviewed"
        self.answer = answer = scrub(answer)  # a key a seat echoes never reaches another model
        self.cut = finish_reason == "length"
        got = extract(answer)
        self.prose, self.dropped = got.prose, got.dropped
        if got.findings is not None:
            self.findings, self.conformed, self.source = got.findings, True, got.source
        else:
            self.problem = got.problem

    def take_repair(self, answer: str) -> bool:
        """The repair prompt's answer: its block replaces the unusable one, the prose stays."""
        got = extract(scrub(answer))
        if got.findings is None:
            return False
        self.findings, self.conformed, self.source = got.findings, True, "re-prompt"
        self.dropped = got.dropped
        return True

    def severity_counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f["severity"] == s) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "status": self.status, "reason": self.reason,
                "cut": self.cut, "conformed": self.conformed, "source": self.source,
                "problem": self.problem, "dropped": self.dropped, "retried": self.retried,
                "reprompted": self.reprompted, "legs": self.legs, "prose": self.prose,
                "findings": self.findings}
