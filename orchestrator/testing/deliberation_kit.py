"""The testing kit's deliberation: a scripted participant that answers round 1 and each later
round's prompt as a real model would, and :class:`DeliberationResult`, what
``orch.run_deliberation`` ran, read by round.

A later round shows a leg its peers' answers under labels dealt for it alone (``Answer A``,
...) and asks for a decision and a vote in a JSON block (docs/deliberation.md). Which labels
were shown is read from the prompt, so a scripted participant can vote without knowing the
deal::

    scripted_server.script("a", deliberator("42", vote="first"))
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.testing.scripted_reply import Reply
from orchestrator.testing.scripted_server import RecordedRequest

__all__ = ["DeliberationResult", "deliberator"]

ReplyFn = Callable[[dict[str, Any], int], Reply]


def _shown_labels(prompt: str) -> list[str]:
    """The labels a later round's prompt shows, in order (``<<<Answer A [nonce]``)."""
    return re.findall(r"^<<<(Answer [A-Z]+) \[", prompt, re.M)


def deliberator(answer: str, *, decision: str = "keep", vote: str | None = "first",
                revised: str | None = None) -> ReplyFn:
    """A participant: ``answer`` in round 1; in each later round ``decision`` (``keep``,
    ``revise`` to ``revised``, ``adopt`` the first answer shown) and ``vote``: ``"first"``
    (the first label shown), a label (``"Answer B"``), or ``None`` to decline."""
    def reply(body: dict[str, Any], n: int) -> Reply:
        prompt = body["messages"][-1]["content"]
        labels = _shown_labels(prompt if isinstance(prompt, str) else "")
        if not labels:
            return Reply(text=answer)
        block: dict[str, Any] = {"decision": decision, "reason": "scripted"}
        if decision == "adopt":
            block["adopt"] = labels[0]
        block["vote"] = "none" if vote is None else labels[0] if vote == "first" else vote
        prose = f"{revised or answer}\n\n" if decision == "revise" else ""
        return Reply(text=f"{prose}```json\n{json.dumps(block)}\n```")
    return reply


@dataclass
class DeliberationResult:
    """What ``orch.run_deliberation`` ran: its document (``doc``: ``rounds``, ``winner``,
    ``votes``, ``stop``), its events, the requests on the wire; rounds are 1-based."""

    doc: dict[str, Any]
    requests: list[RecordedRequest]
    events: list[Any]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    @property
    def winner(self) -> dict[str, Any] | None:
        return self.doc["winner"]

    @property
    def rounds(self) -> list[dict[str, Any]]:
        return self.doc["rounds"]

    def round(self, n: int) -> dict[str, Any]:
        """Round ``n``'s entry: its ``legs`` (one line each: decision, vote, changed)."""
        return next(r for r in self.doc["rounds"] if r["round"] == n)

    def _legs(self, n: int) -> dict[str, dict[str, Any]]:
        return {leg["model"]: leg for leg in self.round(n)["legs"]}

    def record(self, leg_id: str) -> dict[str, Any]:
        """Leg ``leg_id``'s record as written (its ``metadata.json``), of any round."""
        from pathlib import Path

        folder = Path(self.doc["runs_dir"]) / self.doc["wave_id"]
        return json.loads(next(folder.rglob(f"{leg_id}/metadata.json")).read_text())

    def replies(self, n: int) -> dict[str, str]:
        """Each model's reply text in round ``n`` (as sent back, JSON block included)."""
        return {model: self.record(leg["leg_id"]).get("answer") or ""
                for model, leg in self._legs(n).items() if leg["leg_id"]}

    def decisions(self, n: int) -> dict[str, str | None]:
        """Each model's decision in round ``n`` (``keep``/``revise``/``adopt``; None in 1)."""
        return {m: leg["decision"] for m, leg in self._legs(n).items()}

    def votes(self, n: int) -> dict[str, str | None]:
        """Each model's vote in round ``n``: the label it voted for, ``"declined"``, or None
        (no readable vote)."""
        return {m: "declined" if leg["declined"] else (leg["vote"] or {}).get("label")
                for m, leg in self._legs(n).items()}
