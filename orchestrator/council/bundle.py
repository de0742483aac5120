"""The anonymised bundle: every usable review under a neutral label, findings under run-wide ids.

Judges must not know whose review they are reading, so the bundle carries no model name, no
provider and no label that follows the order of ``--models``: labels (Review A, B, ...) are
dealt by a shuffle seeded by the run id, and finding ids (F1, F2, ...) follow the labels.
Whatever a seat wrote about itself ("as gpt-4o, I...", "as Meta's Llama") is redacted —
identifiers and the seats' families (anonymity.py) — and the finished text is scanned for every
identifying term; a leak stops the run rather than reach a judge.

A seat's words could imitate orch's own sections (a ``### Review Z`` heading, a finding line,
a ballot, ``VERDICT:``). So each review's prose is quoted between two lines that carry a
per-run nonce, orch's own headings carry it too, and the one-line fields of a finding (claim,
location, rationale) are kept on one line: seat text can only ever appear inside a quote or
inside a finding line, and a judge is told that nothing there is orch's.
"""

from __future__ import annotations

import hashlib
import random
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from orchestrator.chair.marks import CUT
from orchestrator.council.anonymity import identifying_terms
from orchestrator.council.continuable import closed
from orchestrator.council.findings import Review
from orchestrator.intake.anonymity import (  # noqa: F401 - REDACTED re-exported
    REDACTED,
    Anonymity,
    leaked_terms,
)
from orchestrator.intake.anonymity import redact as _redact
from orchestrator.models.addressing import ResolvedModel


def new_nonce() -> str:
    """A per-run marker no seat can have written: 48 random bits."""
    return secrets.token_hex(6)


def one_line(text: str) -> str:
    """A finding's field as orch shows it: on one line, so it cannot start a line of its own
    (a forged heading or finding)."""
    return re.sub(r"\s*[\r\n\u2028\u2029\x0b\x0c\x85]+\s*", " ", text or "").strip()


def seeded(*parts: str) -> random.Random:
    """A random generator that depends only on ``parts`` (stable across runs and Pythons)."""
    digest = hashlib.sha256(":".join(parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def label_name(n: int) -> str:
    return f"Review {chr(ord('A') + n)}" if n < 26 else f"Review {n + 1}"


def redact(text: str, terms: list[str]) -> str:
    """``text`` with every spelling of ``terms`` redacted, folded (orchestrator/intake)."""
    return _redact(text or "", terms)


def leaks(text: str, terms: list[str]) -> list[str]:
    """The identifying terms still present in ``text``, however spelled (empty when it is
    anonymous)."""
    return leaked_terms(text or "", terms)


@dataclass
class Bundle:
    run_id: str
    labels: dict[str, str]  # model -> "Review A" (kept out of everything a judge sees)
    reviews: list[dict[str, Any]]  # anonymised, in label order
    findings: list[dict[str, Any]]  # run-wide ids, in id order
    terms: list[str] = field(default_factory=list)
    nonce: str = field(default_factory=new_nonce)
    redacted: int = 0  # spellings of a seat's names taken out of the seats' text

    @property
    def seat_of_label(self) -> dict[str, str]:
        return {label: model for model, label in self.labels.items()}

    @property
    def seat_of_finding(self) -> dict[str, str]:
        seat = self.seat_of_label
        return {f["id"]: seat[f["label"]] for f in self.findings}

    def to_dict(self) -> dict[str, Any]:
        """``bundle.json``: what the judges saw, and nothing that names a seat."""
        return {"run_id": self.run_id, "nonce": self.nonce, "reviews": self.reviews,
                "findings": self.findings}

    def markdown(self) -> str:
        parts = [f"# Anonymised bundle, council run {self.run_id}", ""]
        for review in self.reviews:
            parts.append(render_review(review, self.findings, self.nonce))
        return "\n".join(parts)

    def view_for(self, judge: str) -> tuple[str, list[str], list[str]]:
        """The judge's own view: every review but its own, in an order shuffled for this
        judge (seeded by run id and seat), findings shuffled within each review. Returns
        (text, finding ids shown, labels shown)."""
        own = self.labels.get(judge)
        others = [r for r in self.reviews if r["label"] != own]
        rng = seeded(self.run_id, "judge", judge)
        rng.shuffle(others)
        parts, shown_ids = [], []
        for review in others:
            ids = list(review["findings"])
            rng.shuffle(ids)
            shown_ids += ids
            parts.append(render_review({**review, "findings": ids}, self.findings,
                                       self.nonce))
        return "\n".join(parts), shown_ids, [r["label"] for r in others]

    def scan(self, texts: dict[str, str]) -> dict[str, list[str]]:
        """Every text a judge sees, checked for identifying terms: {name: leaked terms}."""
        return {name: found for name, text in texts.items()
                if (found := leaks(text, self.terms))}


def quote(text: str, nonce: str) -> str:
    """A seat's prose between the nonce lines; the nonce itself never appears inside."""
    body = closed((text or "").replace(nonce, "[nonce]").strip()) or "(no prose)"
    return f"<<<seat-text {nonce}\n{body}\nseat-text {nonce}>>>"


def render_review(review: dict[str, Any], findings: list[dict[str, Any]],
                  nonce: str) -> str:
    by_id = {f["id"]: f for f in findings}
    # the marks every chair reads (chair/marks.py): the judges read the same
    marks = list(review.get("marks") or ([CUT] if review.get("cut") else []))
    if not review.get("conformed"):
        marks.append("no readable findings block: its prose is shown for ranking only")
    lines = [f"### {review['label']} [{nonce}]" + "".join(f"\n({m})" for m in marks), "",
             quote(review.get("prose") or "", nonce), ""]
    if review["findings"]:
        lines.append(f"Findings of {review['label']} [{nonce}]:")
        for fid in review["findings"]:
            f = by_id[fid]
            where = f" · {f['location']}" if f.get("location") else ""
            lines.append(f"- {fid} · {f['severity']}{where} — {f['claim']}")
            if f.get("rationale"):
                lines.append(f"  Rationale: {f['rationale']}")
        lines.append("")
    return "\n".join(lines)


def _scaffold(run_id: str) -> str:
    """Everything orch itself writes around the seats' words in a bundle or a judge's view."""
    finding = {"id": "F1", "label": label_name(0), "severity": "nit", "claim": "",
               "location": "", "rationale": ""}
    review = {"label": label_name(0), "cut": True, "conformed": False, "prose": "",
              "findings": ["F1"]}
    return Bundle(run_id, {}, [review], [finding], nonce="0").markdown()


def build_bundle(run_id: str, reviews: list[Review], models: list[ResolvedModel]) -> Bundle:
    """Label the usable reviews, number their findings run-wide, redact, and prove it."""
    usable = [r for r in reviews if r.usable]
    order = sorted(usable, key=lambda r: r.model)
    seeded(run_id, "labels").shuffle(order)
    # A word of orch's own scaffolding ("review", "prose") names no one even when a provider
    # or model is called that: leave it out, or the proof below would fail every such run.
    terms = [t for t in identifying_terms(models) if not leaks(_scaffold(run_id), [t])]
    anonymity = Anonymity(tuple(terms))
    count = [0]

    def redact(text: str) -> str:
        out, n = anonymity.redact(text or "")
        count[0] += n
        return out

    labels, anon_reviews, anon_findings = {}, [], []
    for n, review in enumerate(order):
        label = labels[review.model] = label_name(n)
        ids = []
        for f in review.findings:
            fid = f"F{len(anon_findings) + 1}"
            f["id"] = fid  # the run-wide id travels with the seat's finding from here on
            ids.append(fid)
            anon_findings.append({"id": fid, "label": label, "severity": f["severity"],
                                  "claim": one_line(redact(f["claim"])),
                                  "location": one_line(redact(f["location"])),
                                  "rationale": one_line(redact(f["rationale"]))})
        anon_reviews.append({"label": label, "cut": review.cut, "marks": review.marks,
                             "conformed": review.conformed,
                             "prose": redact(review.prose), "findings": ids})
    bundle = Bundle(run_id, labels, anon_reviews, anon_findings, terms, redacted=count[0])
    leaked = bundle.scan({"bundle": bundle.markdown()})
    if leaked:  # redaction and scan share one pattern: reaching this is a bug, not bad luck
        raise RuntimeError(f"anonymised bundle still names {leaked['bundle']}")
    return bundle
