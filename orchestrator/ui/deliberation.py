"""The deliberation page's data: the run's ``wave.json`` says, per round, each leg's answer
digest, decision, vote and reason; the words of each answer are in the rounds' own waves
(``rounds/<run>-round-<r>/wave.json``, the legs' replies). An answer is found by its digest
among those replies (round 1's answers, a revision's prose, the final answers), the same
identity the run used, so the page invents nothing: an answer not in the records says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.store import read_json


def _round_wave(rounds_dir: Path, wave_id: str) -> dict[str, Any] | None:
    try:
        doc = read_json(rounds_dir / wave_id / "wave.json")
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _texts(doc: dict[str, Any], waves: list[dict[str, Any]]) -> dict[str, str]:
    """digest -> answer text, from every text the records hold."""
    from orchestrator.deliberation.reply import payload
    from orchestrator.votes.answer import digest

    found: dict[str, str] = {}

    def add(text: Any) -> None:
        if isinstance(text, str) and text.strip():
            found.setdefault(digest(text), text.strip())

    for wave in waves:
        for leg in wave.get("legs") or []:
            reply = leg.get("answer")
            add(reply)
            if isinstance(reply, str):
                add(payload(reply)[1])  # a revision: the prose before the block
    for leg in doc.get("legs") or []:
        add(leg.get("answer"))
    add((doc.get("winner") or {}).get("answer"))
    return found


def rounds_view(rounds_dir: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """Everything the template draws: rounds with each leg's answer and reply, the names of
    the distinct answers (#1, #2, ... in order of first appearance), the winner, the stop."""
    rounds = [r for r in doc.get("rounds") or [] if isinstance(r, dict)]
    waves: list[dict[str, Any]] = []
    replies: dict[str, str] = {}
    for r in rounds:
        for wave_id in (str(r.get("wave_id") or ""), f"{r.get('wave_id')}-repair"):
            wave = _round_wave(rounds_dir, wave_id) if wave_id else None
            if wave is None:
                continue
            waves.append(wave)
            for leg in wave.get("legs") or []:
                if leg.get("leg_id") and isinstance(leg.get("answer"), str) \
                        and not wave_id.endswith("-repair"):
                    replies[leg["leg_id"]] = leg["answer"]
    texts = _texts(doc, waves)
    names: dict[str, int] = {}
    shown = []
    for r in rounds:
        legs = []
        for leg in r.get("legs") or []:
            d = leg.get("answer_digest")
            if d and d not in names:
                names[d] = len(names) + 1
            vote = leg.get("vote") or None
            for key in ("shown_digest", "answer_digest"):  # as cast, as counted
                if vote and vote.get(key) and vote[key] not in names:
                    names[vote[key]] = len(names) + 1
            legs.append({**leg, "answer_text": texts.get(d) if d else None,
                         "reply": replies.get(leg.get("leg_id") or "")})
        shown.append({**r, "legs": legs})
    winner = doc.get("winner") or None
    if winner and winner.get("digest") and winner["digest"] not in names:
        names[winner["digest"]] = len(names) + 1
    # the vote matrix: voter (row) x round (column), naming the leg and answer voted for
    voters = sorted({leg.get("leg") for r in rounds for leg in r.get("legs") or []
                     if leg.get("leg") is not None})
    models = {leg.get("leg"): leg.get("model") for r in rounds for leg in r.get("legs") or []}
    matrix = [{"leg": v, "model": models.get(v),
               "cells": [next((leg for leg in r.get("legs") or [] if leg.get("leg") == v),
                              None) for r in rounds]} for v in voters]
    return {"rounds": shown, "names": names, "winner": winner, "stop": doc.get("stop"),
            "matrix": matrix, "voting_rounds": [r.get("round") for r in rounds]}
