"""The rules of a deliberation as pure functions of plain data: who sees whom, how answers are
labelled for each leg, when to stop, and who wins the vote (docs/deliberation.md).

Nothing here sends a request or reads a file, so every rule is tested by a table.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

# The stop rules, in the order they are checked after a round (the first that holds is
# recorded; any others that also hold are listed beside it).
UNCHANGED = "unchanged"  # no leg in play changed its answer this round
CONSENSUS = "consensus"  # every leg in play voted, and every vote names the same answer
ROUNDS = "rounds"  # --rounds reached
CEILING = "ceiling"  # the cost ceiling cannot pay for the next round: it was not launched
ALONE = "alone"  # fewer than two legs in play: nobody left to read
STOP_RULES = (UNCHANGED, CONSENSUS, ROUNDS, CEILING, ALONE)

ALL_PEERS_UP_TO = 5  # with at most this many legs, each sees all the others by default
DEFAULT_PEERS = 4  # above it, each sees this many


def seeded(*parts: object) -> random.Random:
    """A random generator that depends only on ``parts`` (stable across runs and Pythons)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def digest(answer: str) -> str:
    """An answer's identity: the same words in the same order, whatever the spacing."""
    return hashlib.sha256(" ".join((answer or "").split()).encode()).hexdigest()[:12]


def default_peers(n: int) -> int:
    """How many peers each of ``n`` legs sees when ``--peers`` is not given."""
    return max(0, n - 1) if n <= ALL_PEERS_UP_TO else DEFAULT_PEERS


def peer_graph(n: int, k: int, *seed: object) -> list[list[int]]:
    """Who each of ``n`` legs reads: leg i reads ``graph[i]``, ``k`` others (at most n-1).

    A fixed random regular graph: the legs are put in a seeded random circle and each reads
    the ``k`` that follow it, so every leg reads ``k`` answers and is read by ``k`` legs (no
    answer is shown more than another); a new seed each round gives each round new pairs."""
    k = max(0, min(k, n - 1))
    circle = list(range(n))
    seeded("peers", *seed).shuffle(circle)
    graph: list[list[int]] = [[] for _ in range(n)]
    for pos, leg in enumerate(circle):
        graph[leg] = sorted(circle[(pos + step) % n] for step in range(1, k + 1))
    return graph


def label_name(n: int) -> str:
    return f"Answer {chr(ord('A') + n)}" if n < 26 else f"Answer {n + 1}"


def deal_labels(peers: list[int], *seed: object) -> dict[str, int]:
    """The labels one leg sees for its peers (label → peer), dealt in a seeded shuffle per
    leg and round, so a label says nothing about the order of ``--models``. The leg's own
    answer never gets a label: it cannot be voted for, by construction."""
    order = list(peers)
    seeded("labels", *seed).shuffle(order)
    return {label_name(i): peer for i, peer in enumerate(order)}


@dataclass
class Ballot:
    """One leg's part in one round, as the rules see it."""

    leg: int
    changed: bool
    voted_for: str | None = None  # the digest of the answer voted for; None: no valid vote


def stop_rules(ballots: list[Ballot], *, round_no: int, max_rounds: int,
               in_play: int) -> list[str]:
    """Every stop rule that holds after ``round_no`` (empty: go on), in :data:`STOP_RULES`
    order. Round 1 has no votes and nothing to compare with: only ``rounds`` and ``alone``."""
    held = []
    if round_no >= 2 and ballots and not any(b.changed for b in ballots):
        held.append(UNCHANGED)
    votes = [b.voted_for for b in ballots]
    if round_no >= 2 and len(ballots) >= 2 and None not in votes and len(set(votes)) == 1:
        held.append(CONSENSUS)
    if round_no >= max_rounds:
        held.append(ROUNDS)
    if in_play < 2:
        held.append(ALONE)
    return held


def winner(rounds: list[list[dict[str, Any]]], order: list[str]) -> dict[str, Any] | None:
    """The answer with the most votes in the last round that has any, or None without votes.

    ``rounds``: per round, each vote as ``{"voter", "for_digest", "for_leg"}``; ``order``:
    digests in the order of ``--models`` of the legs that hold them (the final tie-break).
    Ties are broken, in turn, by: more votes over all rounds; more distinct voters over all
    rounds; the answer held by the leg earliest in ``--models``. A self-vote cannot happen
    (a leg's own answer has no label), so every vote counted is one leg's for another's."""
    voted = [r for r in rounds if r]
    if not voted:
        return None
    last = Counter(v["for_digest"] for v in voted[-1])
    total = Counter(v["for_digest"] for r in voted for v in r)
    voters: dict[str, set[str]] = {}
    for r in voted:
        for v in r:
            voters.setdefault(v["for_digest"], set()).add(v["voter"])

    def rank(d: str) -> tuple:
        first = order.index(d) if d in order else len(order)
        return (-last[d], -total[d], -len(voters[d]), first)

    best = min(last, key=rank)
    tied = [d for d in last if last[d] == last[best] and d != best]
    return {"digest": best, "votes": last[best], "votes_all_rounds": total[best],
            "tied_with": sorted(tied),
            "tie_break": None if not tied else _tie_break(best, tied, total, voters, order)}


TIE_BREAKS = ("more votes over all rounds", "more distinct voters over all rounds",
              "the answer held by the leg earliest in --models")


def _tie_break(best: str, tied: list[str], total: Counter, voters: dict, order: list[str]) -> str:
    """The last criterion needed to separate ``best`` from every answer tied with it."""
    def decided_by(d: str) -> int:
        if total[best] != total[d]:
            return 0
        if len(voters[best]) != len(voters[d]):
            return 1
        return 2

    return TIE_BREAKS[max(decided_by(d) for d in tied)]
